"""ONNX policies: a network file (or its bytes, or an ``onnx.ModelProto``) run with onnxruntime."""

from __future__ import annotations

import logging
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

    ``source``: a file (read with ``onnx.load``, external data beside it included), or the network itself: the
    bytes of an ONNX file or an ``onnx.ModelProto`` (nothing is written to disk; ``name`` names it in messages).
    A file is read and then taken as its model, so both forms are the same policy.
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
        model = read_onnx(path) if path is not None else onnx_model(source, where)
        self._init_model(model, where, features, actions, output, defaults)
        self.path = path

    def _init_model(
        self,
        model: Any,
        where: str,
        features: Sequence[str] | None,
        actions: Sequence[str] | None,
        output: str | None,
        defaults: Mapping[str, Sequence[str]] | None,
    ) -> None:
        """Take the ONNX ``model`` (a ``ModelProto``) as this policy, named ``where``."""
        path = Path(where)  # for messages only
        meta = {p.key: p.value for p in model.metadata_props}
        self.metadata = meta
        names, acts, kind = onnx_names(
            meta, path, {"features": features, "actions": actions, "output": output}, defaults or {}
        )
        super().__init__(names, acts, name=where)
        self.output = onnx_output(kind, path)
        self.training = onnx_training(meta, path)
        # greedy policies: the runtime also gives the argmax (a second output), cheaper than numpy's per-row one
        self._session, with_argmax = _session(
            model, path, len(acts), argmax=self.output == OutputKind.Q_VALUES, threads=self.threads
        )
        self._check_signature(path)
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
        self._model = model  # for network(): the file is read once

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
        return mlp_from_onnx(self._model, name=self.name)


def read_onnx(path: Path) -> OnnxModel:
    """The ``onnx.ModelProto`` in the file ``path`` (its external data, beside it, included).

    Raises:
        InputFileError: not a readable ONNX model."""
    import onnx  # lazy: onnx, start-up

    try:
        return onnx.load(str(path))
    except Exception as exc:  # onnx raises DecodeError/ValueError variants
        raise InputFileError(f"{path}: not a readable ONNX model ({exc.__class__.__name__}: {exc})") from None


def onnx_model(source: bytes | bytearray | memoryview | OnnxModel, name: str) -> OnnxModel:
    """An ``onnx.ModelProto`` given in memory: itself, or parsed from the bytes of an ONNX file
    (``bytes``/``bytearray``/``memoryview``); nothing is written to disk.

    Raises:
        PolicyError: the bytes are not an ONNX model, or ``source`` is neither bytes nor a ModelProto."""
    import onnx  # lazy: onnx, start-up

    if isinstance(source, onnx.ModelProto):
        return source
    if not isinstance(source, (bytes, bytearray, memoryview)):
        raise PolicyError(f"{name}: an ONNX policy is a file, its bytes or an onnx.ModelProto, not a {type(source).__name__}")
    try:
        model = onnx.load_from_string(bytes(source))
    except Exception as exc:  # protobuf's DecodeError and friends
        raise PolicyError(f"{name}: not a readable ONNX model ({exc.__class__.__name__}: {exc})") from None
    if not len(model.graph.node) and not len(model.graph.output):
        raise PolicyError(f"{name}: not an ONNX model (no graph: {len(bytes(source))} bytes that protobuf reads as empty)")
    return model


def _session(model: Any, path: Path, n_actions: int, *, argmax: bool, threads: int) -> tuple[Any, bool]:
    """An onnxruntime session of ``model`` (``threads`` intra-op threads, one inter-op), and whether it also gives
    the argmax of the first output (second output :data:`_ARGMAX`; asked by ``argmax``, given when the model allows
    it: see :func:`_with_argmax`).

    Raises:
        InputFileError: onnxruntime cannot run the model (its own error, first line).
    """
    ort = onnx_runtime()

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    argmax_model = _with_argmax(model, n_actions) if argmax else None
    if argmax_model is not None:
        try:
            return ort.InferenceSession(argmax_model.SerializeToString(), opts, providers=["CPUExecutionProvider"]), True
        except Exception:  # e.g. an output type ArgMax does not take: numpy's argmax is used
            pass
    try:
        return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]), False
    except Exception as exc:  # onnxruntime's own errors: the file is bad input
        first_line = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise InputFileError(f"{path}: onnxruntime cannot run this model ({exc.__class__.__name__}: {first_line})") from None


def _with_argmax(model: Any, n_actions: int) -> Any:
    """A copy of ONNX ``model`` with a second output, the int64 argmax (first on ties) of its ``(N, n_actions)``
    first output; None if the opset (< 12: no ``select_last_index``) or the declared output shape does not allow it."""
    from onnx import ModelProto, TensorProto, helper  # lazy: onnx, start-up

    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset < 12 or not len(model.graph.output):
        return None
    dims = model.graph.output[0].type.tensor_type.shape.dim
    if len(dims) != 2 or not dims[1].HasField("dim_value") or dims[1].dim_value != n_actions:
        return None
    out = ModelProto()
    out.CopyFrom(model)
    out.graph.node.append(
        helper.make_node("ArgMax", [model.graph.output[0].name], [_ARGMAX], axis=1, keepdims=0, select_last_index=0)
    )
    out.graph.output.append(helper.make_tensor_value_info(_ARGMAX, TensorProto.INT64, [None]))
    return out


_ARGMAX = "rlverify_argmax"  # the name of the output _with_argmax adds
