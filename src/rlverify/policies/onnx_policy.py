"""ONNX policies: a network file (or its bytes, or an ``onnx.ModelProto``) run with onnxruntime.

A policy is read with onnxruntime alone: its session gives the metadata (``get_modelmeta``), the inputs and the
outputs; the ``onnx`` package (~1.6 s of CPU to import, mostly ``ml_dtypes``) is imported only when the weights are
read (:meth:`OnnxPolicy.network`, for the abstraction engine). A greedy (Q-value) policy's session also computes
the argmax: its graph gets one ``ArgMax`` node, appended to the file's bytes as protobuf fields (:func:`with_argmax`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.choices import OutputKind
from rlverify.errors import InputFileError, PolicyError
from rlverify.policies.base import BasePolicy
from rlverify.policies.formats import onnx_names, onnx_output, onnx_training
from rlverify.policies.mlp import MLP, mlp_from_onnx
from rlverify.policies.outputs import as_distribution, greedy_columns
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, check_threads, onnx_runtime

log = logging.getLogger(__name__)

#: an ``onnx.ModelProto`` (untyped: onnx is an optional extra)
OnnxModel = Any
#: an ``onnxruntime.InferenceSession`` (untyped: onnxruntime is an optional extra)
OnnxSession = Any

#: onnxruntime's session option naming the folder of a model's external data when the model is given as bytes
#: (without it, onnxruntime looks for them relative to the working directory)
EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"


class OnnxPolicy(BasePolicy):
    """An ONNX network run with onnxruntime on float32 batches.

    Features, actions and the output kind come from ``metadata_props`` (keys
    :data:`~rlverify.policies.formats.META_FEATURES`, :data:`~rlverify.policies.formats.META_ACTIONS` as JSON lists,
    :data:`~rlverify.policies.formats.META_OUTPUT`); the arguments give what the metadata does not, and are refused
    where they contradict it (see :func:`~rlverify.policies.formats.declaration`). The first graph input takes
    ``(N, d)``; the first output gives ``(N, |A|)`` logits (softmax applied here), probabilities, or Q-values (greedy:
    one-hot argmax). The file is read once; :meth:`network` reads the weights from that copy. onnxruntime computes
    with ``threads`` threads (intra-op; one inter-op thread; default
    :data:`~rlverify.policies.settings.DEFAULT_POLICY_THREADS`, ``--policy-threads``).

    ``source``: a file (its bytes read once; external data beside it included), or the network itself: the
    bytes of an ONNX file or an ``onnx.ModelProto`` (nothing is written to disk; ``name`` names it in messages).
    A file is read and then taken as its bytes, so both forms are the same policy. Only onnxruntime is imported;
    :meth:`network` imports ``onnx`` to read the weights from the same bytes.
    """

    no_network = None
    output: OutputKind
    threads: int
    input_dtype: type = np.float32
    concurrent = True  # InferenceSession.run is thread-safe and releases the GIL while it evaluates

    def __init__(
        self,
        source: str | Path | bytes | Any,
        *,
        features: Sequence[str] | None = None,
        actions: Sequence[str] | None = None,
        output: str | None = None,
        defaults: Mapping[str, Sequence[str]] | None = None,
        threads: int = DEFAULT_POLICY_THREADS,
        name: str | None = None,
    ) -> None:
        self.threads = check_threads(threads, "threads")
        path = Path(source) if isinstance(source, (str, Path)) else None
        where = name or (str(path) if path is not None else "ONNX bytes")
        data = read_onnx(path) if path is not None else onnx_bytes(source, where)
        self.path = path
        self._init_model(data, where, features, actions, output, defaults)

    def _init_model(
        self,
        data: bytes,
        where: str,
        features: Sequence[str] | None,
        actions: Sequence[str] | None,
        output: str | None,
        defaults: Mapping[str, Sequence[str]] | None,
    ) -> None:
        """Take the ONNX file ``data`` (its bytes) as this policy, named ``where``."""
        path = Path(where)  # for messages only
        folder = self.path.parent if self.path is not None else None
        self._session = _session(data, folder, path, threads=self.threads, bad_file=self.path is not None)
        meta = dict(self._session.get_modelmeta().custom_metadata_map)
        self.metadata = meta
        names, acts, kind = onnx_names(
            meta, path, {"features": features, "actions": actions, "output": output}, defaults or {}
        )
        super().__init__(names, acts, name=where)
        self.output = onnx_output(kind, path)
        self.training = onnx_training(meta, path)
        self._check_signature(path)
        # greedy policies: the runtime also gives the argmax (a second output), cheaper than numpy's per-row one
        with_argmax = False
        if self.output == OutputKind.Q_VALUES:
            argmax_session = _argmax_session(data, folder, self._session, len(acts), threads=self.threads)
            if argmax_session is not None:
                self._session, with_argmax = argmax_session, True
        first = self._session.get_inputs()[0]
        self._input = first.name
        self._input_type = np.float64 if first.type == "tensor(double)" else np.float32
        self.input_dtype = self._input_type
        # a file exported without a dynamic batch axis takes exactly this many rows per call
        batch = first.shape[0] if first.shape else None
        self._fixed_batch = batch if isinstance(batch, int) and batch > 0 else None
        self._outputs = [self._session.get_outputs()[0].name, *([_ARGMAX] if with_argmax else [])]
        if self._fixed_batch is not None:
            log.warning(
                "%s: the network's batch dimension is fixed at %d (exported without dynamic_axes): it is "
                "evaluated %d row(s) per call, which is slow; export with dynamic_axes={'input': {0: 'batch'}}",
                path,
                self._fixed_batch,
                self._fixed_batch,
            )
        self._data = data  # for network(): the file is read once
        self._folder = folder

    def _check_signature(self, path: Path) -> None:
        """Refuse a network that does not take one ``(N, d)`` float tensor of features and give ``(N, |A|)`` floats."""
        inputs, outputs = self._session.get_inputs(), self._session.get_outputs()
        problems = self._input_problems(inputs) + (self._output_problems(outputs[0]) if outputs else [])
        if problems:
            raise PolicyError(f"{path}: the network does not fit rlverify's policy contract", problems)

    def _input_problems(self, inputs: list[Any]) -> list[str]:
        """Why the session's inputs are not one ``(N, d)`` float tensor of the declared features."""
        if len(inputs) != 1:
            return [
                f"it has {len(inputs)} inputs ({', '.join(repr(i.name) for i in inputs)}); rlverify feeds one "
                "(N, d) tensor of features"
            ]
        first, problems = inputs[0], []
        if first.type not in ("tensor(float)", "tensor(double)"):
            problems.append(
                f"its input {first.name!r} is {first.type}; rlverify feeds the features as floats "
                "(export with a float32 input and cast inside the graph if needed)"
            )
        shape = list(first.shape or [])
        if len(shape) != 2:
            problems.append(f"its input {first.name!r} has shape {shape}; rlverify feeds (N, d) = (batch, features)")
        elif isinstance(shape[1], int) and shape[1] != len(self.features):
            problems.append(
                f"its input {first.name!r} takes {shape[1]} features, the policy declares "
                f"{len(self.features)} {list(self.features)}"
            )
        return problems

    def _output_problems(self, first: Any) -> list[str]:
        """Why the session's first output is not ``(N, |A|)`` floats over the declared actions."""
        problems = []
        if first.type not in ("tensor(float)", "tensor(double)", "tensor(float16)"):
            problems.append(
                f"its first output {first.name!r} is {first.type}; rlverify reads (N, |A|) "
                "floats (logits, probabilities or q-values)"
            )
        out_shape = list(first.shape or [])
        if len(out_shape) == 2 and isinstance(out_shape[1], int) and out_shape[1] != len(self.actions):
            problems.append(
                f"its output {first.name!r} has {out_shape[1]} outputs, the policy declares "
                f"{len(self.actions)} actions {list(self.actions)}"
            )
        return problems

    def _run(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The runtime's ``(N, |A|)`` float32 outputs for ``(N, d)`` states, and their ``(N,)`` argmax if the session
        computes it."""
        x = np.ascontiguousarray(states, dtype=self._input_type)
        run = self._session.run
        if self._fixed_batch is None or len(x) == self._fixed_batch:
            res = self._run_code(run, self._outputs, {self._input: x})
            return res[0], (res[1] if len(res) > 1 else None)
        b = self._fixed_batch
        pad = (-len(x)) % b
        x = np.concatenate([x, np.repeat(x[-1:], pad, axis=0)]) if pad and len(x) else x
        out = [self._run_code(run, self._outputs[:1], {self._input: x[i : i + b]})[0] for i in range(0, len(x), b)]
        return (np.concatenate(out) if out else np.zeros((0, len(self.actions)), dtype=np.float32))[: len(states)], None

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:
        return np.asarray(self._run(states)[0], dtype=np.float64)

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return self._distribution(states)[0]

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        out, cols = self._run(states)
        return as_distribution(out, self.output, cols if self.output == OutputKind.Q_VALUES else None)

    def _greedy_columns(self, states: np.ndarray) -> np.ndarray | None:
        out, cols = self._run(states)
        return greedy_columns(out, cols) if out.shape == (len(states), len(self.actions)) else None

    def _read_network(self) -> MLP:
        return mlp_from_onnx(onnx_proto(self._data, self._folder), name=self.name)


def read_onnx(path: Path) -> bytes:
    """The bytes of the ONNX file ``path`` (read once; onnxruntime reads its external data, beside it).

    Raises:
        InputFileError: the file cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read file ({exc.strerror})") from None


def onnx_bytes(source: bytes | bytearray | memoryview | OnnxModel, name: str) -> bytes:
    """The bytes of an ONNX model given in memory: ``source`` itself (``bytes``/``bytearray``/``memoryview``), or an
    ``onnx.ModelProto`` serialised (onnx is imported already when one exists); nothing is written to disk.

    Raises:
        PolicyError: ``source`` is neither bytes nor a ModelProto."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    onnx = sys.modules.get("onnx")
    if onnx is not None and isinstance(source, onnx.ModelProto):
        return bytes(source.SerializeToString())
    raise PolicyError(f"{name}: an ONNX policy is a file, its bytes or an onnx.ModelProto, not a {type(source).__name__}")


def onnx_proto(data: bytes, folder: Path | None) -> OnnxModel:
    """The ``onnx.ModelProto`` of ONNX file bytes ``data``, its external data read from ``folder`` (None: the model
    came as bytes; its tensors are in them). Imports ``onnx``: for reading the weights only."""
    import onnx  # lazy: onnx (~1.6 s of import), only where the weights are read
    from onnx.external_data_helper import load_external_data_for_model  # lazy: onnx, as above

    model = onnx.load_from_string(data)
    if folder is not None:
        load_external_data_for_model(model, str(folder))
    return model


def _options(threads: int, folder: Path | None) -> Any:
    """onnxruntime session options: ``threads`` intra-op threads, one inter-op; external data read from ``folder``."""
    ort = onnx_runtime()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    if folder is not None:
        opts.add_session_config_entry(EXTERNAL_DATA_FOLDER, str(folder))
    return opts


def _session(data: bytes, folder: Path | None, path: Path, *, threads: int, bad_file: bool) -> OnnxSession:
    """An onnxruntime session of the ONNX file bytes ``data`` (``threads`` intra-op threads, one inter-op; external
    data from ``folder``).

    Raises:
        InputFileError (a file: ``bad_file``) or PolicyError (bytes): not an ONNX model (protobuf cannot parse it, or
            it has no graph), or onnxruntime cannot run it (its own error, first line).
    """
    ort = onnx_runtime()
    error = InputFileError if bad_file else PolicyError
    try:
        return ort.InferenceSession(data, _options(threads, folder), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own errors: the file is bad input
        text = str(exc).strip()
        first_line = text.splitlines()[0][:200] if text else ""
        kind = exc.__class__.__name__
        if isinstance(exc, _invalid_protobuf()):
            raise error(f"{path}: not a readable ONNX model ({kind}: protobuf cannot parse it)") from None
        if "No graph was found" in text:
            raise error(f"{path}: not an ONNX model (no graph: {len(data)} bytes that protobuf reads as empty)") from None
        raise error(f"{path}: onnxruntime cannot run this model ({kind}: {first_line})") from None


def _argmax_session(
    data: bytes, folder: Path | None, plain: OnnxSession, n_actions: int, *, threads: int
) -> OnnxSession | None:
    """A session of ``data`` with a second output, the int64 argmax (first on ties) of its first output, whose
    shape ``plain`` (the session of ``data``) says is ``(N, n_actions)``; None where it is not, or where onnxruntime
    refuses the graph (an opset below 12: ``ArgMax`` has no ``select_last_index``). Then numpy's argmax is used."""
    first = plain.get_outputs()[0]
    shape = list(first.shape or [])
    if len(shape) != 2 or shape[1] != n_actions:  # a fixed count of outputs equal to the actions (not symbolic)
        return None
    ort = onnx_runtime()
    try:
        return ort.InferenceSession(
            with_argmax(data, first.name), _options(threads, folder), providers=["CPUExecutionProvider"]
        )
    except Exception:  # e.g. an opset or output type ArgMax does not take: numpy's argmax is used
        return None


def with_argmax(data: bytes, output: str) -> bytes:
    """ONNX file bytes ``data`` with an ``ArgMax`` node (axis 1, ``keepdims=0``, ``select_last_index=0``) of the
    graph tensor ``output`` added, and its int64 result, :data:`_ARGMAX`, a second graph output of shape ``(None,)``.

    Protobuf merges a repeated occurrence of a message field into the first and appends repeated fields: the model
    bytes followed by a ``graph`` field holding only the new node and output are the model with them appended, as
    ``onnx.helper.make_node`` / ``make_tensor_value_info`` would build them (held against onnx in the tests)."""
    attributes = b"".join(
        _message(5, _text(1, name) + _varint_field(3, value) + _varint_field(20, _ATTRIBUTE_INT))
        for name, value in (("axis", 1), ("keepdims", 0), ("select_last_index", 0))
    )
    node = _text(1, output) + _text(2, _ARGMAX) + _text(4, "ArgMax") + attributes
    shape = _message(2, _message(1, b""))  # TensorShapeProto: one dimension, neither value nor name
    value_info = _text(1, _ARGMAX) + _message(2, _message(1, _varint_field(1, _TENSOR_INT64) + shape))
    return data + _message(7, _message(1, node) + _message(12, value_info))


def _varint(n: int) -> bytes:
    """``n >= 0`` as a protobuf varint."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _varint_field(number: int, value: int) -> bytes:
    """Protobuf field ``number`` holding the integer ``value >= 0`` (wire type 0)."""
    return _varint(number << 3) + _varint(value)


def _message(number: int, payload: bytes) -> bytes:
    """Protobuf field ``number`` holding ``payload`` (a message, string or bytes: wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _text(number: int, text: str) -> bytes:
    return _message(number, text.encode("utf-8"))


_ARGMAX = "rlverify_argmax"  # the name of the output with_argmax adds
_ATTRIBUTE_INT = 2  # onnx.AttributeProto.INT
_TENSOR_INT64 = 7  # onnx.TensorProto.INT64


def _invalid_protobuf() -> type[Exception]:
    """onnxruntime's exception for bytes protobuf cannot parse."""
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidProtobuf  # lazy: onnxruntime, start-up

    return InvalidProtobuf
