"""Policy adapters: plain callables, tables, ONNX networks, PyTorch modules, Stable-Baselines3, and a user's own
policy object (:class:`ProtocolPolicy`).

Each adapter is a :class:`~rlverify.policies.base.BasePolicy`: it reads its file's declaration with
:mod:`rlverify.policies.formats`, its weights with :mod:`rlverify.policies.mlp` (SB3 zips with
:mod:`rlverify.policies.sb3zip`), and validates what its runtime gives.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import InputFileError, PolicyError, require
from rlverify.policies.base import BasePolicy, numeric_output
from rlverify.policies.formats import (
    check_output_kind,
    onnx_names,
    onnx_output,
    onnx_training,
    read_table,
    softmax,
)
from rlverify.policies.mlp import MLP, mlp_from_onnx, mlp_from_torch
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, check_threads

log = logging.getLogger(__name__)


def to_probabilities(out: np.ndarray, kind: str, columns: np.ndarray | None = None) -> np.ndarray:
    """``(N, |A|)`` network outputs of ``kind`` (see :data:`OUTPUT_KINDS`) as action probabilities.

    ``columns``: for ``q-values``, the ``(N,)`` argmax of ``out`` if already computed (e.g. by the runtime)."""
    return _distribution(out, kind, columns)[0]


def _distribution(out: np.ndarray, kind: str, columns: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """:func:`to_probabilities`, and whether the rows are distributions by construction (a softmax or a one-hot
    of finite outputs: no need to check them again)."""
    out = np.asarray(out)
    finite = out.ndim == 2 and bool(np.isfinite(out.sum()))  # a sum is finite only if every entry is
    if out.ndim != 2 or kind == "probabilities":
        return np.asarray(out, dtype=np.float64), False  # shapes and values are checked by BasePolicy
    if kind == "logits":
        return softmax(out), finite
    greedy = np.zeros(out.shape, dtype=np.float64)
    if columns is None or not finite:
        columns = np.argmax(np.asarray(out, dtype=np.float64), axis=1)
    greedy.reshape(-1)[np.arange(0, out.size, out.shape[1]) + columns] = 1.0
    if not finite:
        greedy[~np.isfinite(out).all(axis=1)] = np.nan  # reported by the distribution check, never hidden
    return greedy, finite


def greedy_columns(out: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray | None:
    """``(N,)`` int64 argmax (first on ties) of ``(N, |A|)`` Q-values ``out``, or None if an entry is not finite
    (then the full path reports it). ``columns``: the argmax if already computed (e.g. by the runtime)."""
    if out.ndim != 2 or not out.shape[1] or not np.isfinite(out.sum()):
        return None
    return np.argmax(out, axis=1) if columns is None else np.asarray(columns, dtype=np.int64)


class CallablePolicy(BasePolicy):
    """Wrap ``fn(states: (N, d) array) -> (N, |A|) probabilities`` (or logits with ``output='logits'``)."""

    no_network = "a Python callable cannot be bounded; give an ONNX or TorchScript ReLU network (file.onnx, module.pt)"
    transient_input = False  # the function is the user's: it may keep the array it is given

    def __init__(
        self,
        fn: Callable[[np.ndarray], Any],
        features: Sequence[str],
        actions: Sequence[str],
        *,
        output: str = "probabilities",
        name: str = "callable policy",
    ) -> None:
        super().__init__(features, actions, name=name)
        self._fn = fn
        self.output = check_output_kind(output, name)

    def _output(self, states: np.ndarray) -> np.ndarray:
        """The function's ``(N, |A|)`` outputs as float64 (its errors, a timeout or non-numbers: a PolicyError)."""
        return numeric_output(self._run_code(self._fn, states), self.name)

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return to_probabilities(self._output(states), self.output)

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        return _distribution(self._output(states), self.output)

    def _greedy_columns(self, states: np.ndarray) -> np.ndarray | None:
        out = self._output(states)
        return greedy_columns(out) if out.shape == (len(states), len(self.actions)) else None


class TablePolicy(BasePolicy):
    """A finite table from feature valuations to distributions (its JSON file: see
    :func:`~rlverify.policies.formats.read_table`). Actions missing from a row get probability 0.
    """

    no_network = (
        "a table policy cannot be bounded (it gives distributions for listed states, not a network over "
        "regions); give an ONNX or TorchScript ReLU network (file.onnx, module.pt)"
    )

    def __init__(
        self,
        features: Sequence[str],
        actions: Sequence[str],
        table: Mapping[tuple[int, ...], Sequence[float]],
        *,
        default: Sequence[float] | None = None,
        name: str = "table policy",
    ) -> None:
        super().__init__(features, actions, name=name)
        self._table = {tuple(int(v) for v in k): numeric_output(p, name) for k, p in table.items()}
        self._default = None if default is None else numeric_output(default, name)

    @classmethod
    def from_json(cls, path: str | Path) -> TablePolicy:
        """Read a table policy file (:func:`~rlverify.policies.formats.read_table`), reporting every problem at once.

        Raises:
            InputFileError: not a readable JSON file. PolicyError: every problem of its contents, each named.
        """
        path = Path(path)
        file = read_table(path)
        return cls(file.features, file.actions, file.table, default=file.default, name=str(path))

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        out = np.empty((len(states), len(self.actions)))
        ints = np.rint(states).astype(np.int64)
        for i, row in enumerate(map(tuple, ints.tolist())):
            p = self._table.get(row)
            if p is None:
                if self._default is None:
                    raise PolicyError(
                        f"{self.name}: no entry for state "
                        f"{dict(zip(self.features, row, strict=True))} and no 'default' distribution"
                    )
                p = self._default
            out[i] = p
        return out


class ProtocolPolicy(BasePolicy):
    """A policy object of the user's own class (the :class:`~rlverify.policies.base.Policy` protocol: ``features``,
    ``actions``, ``action_probabilities``) as an adapter; made by :func:`~rlverify.policies.as_policy`.

    Its outputs are checked on every call like any adapter's, and it has a :attr:`name`: the object's own ``name``
    if that is a string, else its class name. What engines read besides the protocol is the object's own: its
    ``output``, ``training`` and ``maskable`` (copied when it has them), and its ``network()`` (what the abstraction
    engine bounds), unless it has none or its ``no_network`` says why not. Exceptions its code raises pass through
    unchanged, as for :class:`CallablePolicy`.

    Attributes:
        policy: the object wrapped.
    """

    transient_input = False  # the object is the user's: it may keep the array it is given

    def __init__(self, policy: Any, features: Sequence[str], actions: Sequence[str], *, name: str) -> None:
        super().__init__(features, actions, name=name)
        self.policy = policy
        for attr in ("output", "training", "maskable"):
            if hasattr(policy, attr):
                setattr(self, attr, getattr(policy, attr))
        reason = getattr(policy, "no_network", None)
        has_network = reason is None and callable(getattr(policy, "network", None))
        self.no_network = None if has_network else str(reason or "this policy exposes no network (method network() -> MLP)")

    @property
    def greedy(self) -> bool:
        """False: the object's probabilities are sampled from as they are, whatever its ``output`` says."""
        return False

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return self._run_code(self.policy.action_probabilities, states)

    def network(self, sample: np.ndarray | None = None) -> MLP:
        """The object's own ``network()`` (called with ``sample`` when one is given), or a :class:`PolicyError`
        saying why it has none."""
        if self.no_network is not None:
            raise PolicyError(f"{self.name}: {self.no_network}")
        return self.policy.network() if sample is None else self.policy.network(sample)


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
        self._session, with_argmax = _session(model, path, len(acts), argmax=self.output == "q-values", threads=self.threads)
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
        problems = []
        if len(inputs) != 1:
            problems.append(
                f"it has {len(inputs)} inputs ({', '.join(repr(i.name) for i in inputs)}); rlverify feeds one "
                "(N, d) tensor of features"
            )
        else:
            first = inputs[0]
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
        if outputs and outputs[0].type not in ("tensor(float)", "tensor(double)", "tensor(float16)"):
            problems.append(
                f"its first output {outputs[0].name!r} is {outputs[0].type}; rlverify reads (N, |A|) "
                "floats (logits, probabilities or q-values)"
            )
        out_shape = list(outputs[0].shape or []) if outputs else []
        if len(out_shape) == 2 and isinstance(out_shape[1], int) and out_shape[1] != len(self.actions):
            problems.append(
                f"its output {outputs[0].name!r} has {out_shape[1]} outputs, the policy declares "
                f"{len(self.actions)} actions {list(self.actions)}"
            )
        if problems:
            raise PolicyError(f"{path}: the network does not fit rlverify's policy contract", problems)

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
        return _distribution(out, self.output, cols if self.output == "q-values" else None)

    def _greedy_columns(self, states: np.ndarray) -> np.ndarray | None:
        out, cols = self._run(states)
        return greedy_columns(out, cols) if out.shape == (len(states), len(self.actions)) else None

    def _read_network(self) -> MLP:
        return mlp_from_onnx(self._model, name=self.name)


def read_onnx(path: Path) -> Any:
    """The ``onnx.ModelProto`` in the file ``path`` (its external data, beside it, included).

    Raises:
        InputFileError: not a readable ONNX model."""
    import onnx

    try:
        return onnx.load(str(path))
    except Exception as exc:  # onnx raises DecodeError/ValueError variants
        raise InputFileError(f"{path}: not a readable ONNX model ({exc.__class__.__name__}: {exc})") from None


def onnx_model(source: Any, name: str) -> Any:
    """An ``onnx.ModelProto`` given in memory: itself, or parsed from the bytes of an ONNX file
    (``bytes``/``bytearray``/``memoryview``); nothing is written to disk.

    Raises:
        PolicyError: the bytes are not an ONNX model, or ``source`` is neither bytes nor a ModelProto."""
    import onnx

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


class TorchPolicy(BasePolicy):
    """A ``torch.nn.Module`` mapping ``(N, d)`` float32 tensors to ``output`` (optional extra ``torch``).

    Its :meth:`network` is read from a ``Sequential`` of ``Linear`` and ``ReLU`` layers (plain or TorchScript).
    Making one limits torch to ``threads`` threads (:func:`limit_torch_threads`: process-global).

    The module is evaluated in eval mode (no dropout, batch norm's running statistics), and left in the mode it
    was in after each call: a module still being trained is not switched out of training mode.
    """

    no_network = None
    input_dtype = np.float32

    def __init__(
        self,
        module: Any,
        features: Sequence[str],
        actions: Sequence[str],
        *,
        output: str = "logits",
        name: str = "torch policy",
        threads: int = DEFAULT_POLICY_THREADS,
    ) -> None:
        super().__init__(features, actions, name=name)
        self.threads = check_threads(threads, "threads")
        self._torch = require("torch", "torch", purpose="a TorchScript policy")
        limit_torch_threads(self._torch, self.threads)
        self._module = module
        self.output = check_output_kind(output, name)

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:
        torch = self._torch

        def run() -> Any:
            with torch.no_grad(), _eval_mode(self._module):
                out = self._module(torch.as_tensor(states, dtype=torch.float32, device=_device_of(self._module)))
            if not isinstance(out, torch.Tensor):
                raise PolicyError(f"{self.name}: the module returned a {type(out).__name__}, not a tensor of (N, |A|) outputs")
            if out.is_complex():  # .double() would drop the imaginary parts
                raise PolicyError(
                    f"{self.name}: output has complex numbers (a tensor of {out.dtype}); a policy gives "
                    "real probabilities, logits or Q-values (the imaginary parts are not dropped)"
                )
            return out.detach().cpu().double().numpy()

        return self._run_code(run)

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return to_probabilities(self._network_outputs(states), self.output)

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        return _distribution(self._network_outputs(states), self.output)

    def _read_network(self) -> MLP:
        return mlp_from_torch(self._module, name=self.name)


@contextmanager
def _eval_mode(module: Any) -> Iterator[None]:
    """``module`` in eval mode inside the block, and back in the mode it was in after it."""
    was = bool(getattr(module, "training", False))
    module.train(False)
    try:
        yield
    finally:
        if was:
            module.train(True)


def _device_of(module: Any) -> Any:
    """The device of ``module``'s first parameter (CPU for a module without parameters)."""
    try:
        return next(iter(module.parameters())).device
    except (StopIteration, AttributeError, TypeError):
        return "cpu"


class SB3Policy(BasePolicy):
    """A Stable-Baselines3 PPO/A2C or sb3-contrib MaskablePPO (action distribution) or DQN (greedy one-hot)
    model zip (extra ``sb3``; reading it without SB3's loader needs only ``torch``).

    By default the zip is read without running any code from it (:mod:`rlverify.policies.sb3zip`: the JSON
    ``data`` and the ``policy.pth`` weights, loaded with ``weights_only=True``) and the actor of an
    ``MlpPolicy`` is rebuilt from them; anything it cannot read that way (a custom policy class or feature
    extractor) is refused naming ``--trust-code``. With ``trust_code=True`` the zip is loaded with SB3's own
    loader, which unpickles and can run code (only for files you trust). Either way the zip's members'
    inflated sizes are checked first.

    Observations are given to the network as SB3 gives them: a ``Discrete`` observation space takes the
    one feature as a state index (one-hot encoded), ``MultiDiscrete`` one index per feature, a flat ``Box``
    or ``MultiBinary`` the features as float32. ``output`` is ``logits`` (PPO/A2C/MaskablePPO: the
    categorical distribution's) or ``q-values`` (DQN, greedy: the first maximal Q-value, as SB3's
    ``predict`` picks).

    MaskablePPO: the probabilities are the network's *unmasked* distribution; the mask it was trained
    with is the model's action availability, so ``unavailable='renormalize'`` (renormalise over the
    available actions) is exactly the masked policy (:attr:`maskable` is True). Recurrent policies
    (RecurrentPPO) are refused: rlverify verifies memoryless policies.

    Its :meth:`network` is the actor (``mlp_extractor.policy_net`` then ``action_net``) or the Q-network,
    for a ``MlpPolicy`` with a flat Box observation and ReLU activations
    (``policy_kwargs={"activation_fn": torch.nn.ReLU}``; PPO's default is Tanh).

    Making one limits torch to ``threads`` threads (:func:`limit_torch_threads`: process-global).

    ``source``: the zip, or the model itself (a ``PPO``, ``A2C``, ``DQN`` or ``MaskablePPO`` object, e.g. one being
    trained; ``name`` names it in messages). A model object is read as SB3 computes: its own policy's
    ``get_distribution`` (PPO/A2C/MaskablePPO) or ``q_net`` (DQN) on its device, called at each evaluation, so a
    model still being trained is verified as it is at that moment; nothing is written to disk. A zip loaded with
    ``trust_code`` is loaded by SB3 and then taken as such a model object.
    """

    no_network = None

    def __init__(
        self,
        source: str | Path | Any,
        features: Sequence[str],
        actions: Sequence[str],
        *,
        trust_code: bool = False,
        threads: int = DEFAULT_POLICY_THREADS,
        name: str | None = None,
    ) -> None:
        from rlverify.policies import sb3zip  # here: reading zips (zipfile) is for SB3 policies only

        is_file = isinstance(source, (str, Path))
        super().__init__(features, actions, name=name or (str(source) if is_file else model_name(source)))
        self.threads = check_threads(threads, "threads")
        self._torch = require("torch", "sb3", purpose="a Stable-Baselines3 policy")
        limit_torch_threads(self._torch, self.threads)
        self.trusted = trust_code or not is_file
        if not is_file:  # the user's own model object: SB3's code runs, as in their training
            self._adopt(source, sb3_algorithm(source), self.name)
        elif trust_code:
            sb3zip.check_sizes(Path(source))
            self._load_trusted(Path(source))
        else:
            path = Path(source)
            sb3zip.check_sizes(path)
            read = sb3zip.read_network(path, self._torch)
            self.algorithm, self._space, self._net, self._n_actions = read.algorithm, read.obs, read.net, read.n_actions
            self._forward = self._safe_forward
        self.maskable = self.algorithm == "MaskablePPO"
        self.output = "q-values" if self.algorithm == "DQN" else "logits"
        self._check_spaces()

    def _load_trusted(self, path: Path) -> None:
        """Load with SB3's own loader (it unpickles ``data``: runs whatever code the file carries)."""
        from rlverify.policies import sb3zip

        data = sb3zip.read_data(path)
        module, _ = sb3zip.policy_class(data, path)
        known = module in sb3zip.SB3_POLICY_MODULES or module.startswith("sb3_contrib.common.recurrent")
        algorithm = sb3zip.algorithm_of(data, path)[0] if known else "custom"
        purpose = "loading a Stable-Baselines3 zip with --trust-code"
        sb3 = require("stable_baselines3", "sb3", purpose=purpose)
        if algorithm == "MaskablePPO":
            candidates = [require("sb3_contrib", "sb3", purpose=purpose).MaskablePPO]
        elif algorithm == "DQN":
            candidates = [sb3.DQN]
        else:  # PPO, A2C, or a custom policy class of one of them
            candidates = [sb3.PPO, sb3.A2C] + ([sb3.DQN] if algorithm == "custom" else [])
        from rlverify.models.userfile import note_user_code

        note_user_code()  # SB3's loader unpickles the zip: the user's own classes may be imported
        last_exc: Exception | None = None
        for cls in candidates:
            try:
                model = cls.load(str(path), device="cpu")
                break
            except Exception as exc:  # SB3's load raises many kinds; PPO tried on an A2C zip: the next
                last_exc = exc
        else:
            raise InputFileError(
                f"{path}: cannot load the model with Stable-Baselines3's loader ({last_exc.__class__.__name__}: {last_exc})"
            )
        self._adopt(model, "MaskablePPO" if algorithm == "MaskablePPO" else type(model).__name__, str(path))

    def _adopt(self, model: Any, algorithm: str, where: str) -> None:
        """Take the SB3 model object ``model`` (of ``algorithm``) as this policy: its own policy computes."""
        from rlverify.policies import sb3zip

        self.algorithm = algorithm
        self._model = model
        self._space = sb3zip.space_of(model.observation_space, Path(where))
        act = model.action_space
        if type(act).__name__ != "Discrete" or int(getattr(act, "start", 0)) != 0:
            raise PolicyError(
                f"{where}: the action space is {act}, not Discrete(n) starting at 0 (rlverify verifies policies "
                "over named actions)"
            )
        self._n_actions = int(act.n)
        self._net = None
        self._forward = self._trusted_forward

    def _check_spaces(self) -> None:
        problems = []
        space = self._space
        if space.size != len(self.features):
            what = "one state index" if space.kind == "Discrete" else f"{space.size} features"
            problems.append(
                f"the observation space is {space} ({what}), but {len(self.features)} features are declared "
                f"{list(self.features)}"
            )
        if self._n_actions != len(self.actions):
            problems.append(
                f"the action space is Discrete({self._n_actions}), but {len(self.actions)} actions are "
                f"declared {list(self.actions)}"
            )
        if problems:
            raise PolicyError(f"{self.name}: the {self.algorithm} model does not fit the declared features/actions", problems)

    def _check_observations(self, states: np.ndarray) -> None:
        """Refuse rows that are not observations of the policy's space (a Discrete/MultiDiscrete index out of range
        or not an integer; a MultiBinary value other than 0/1)."""
        space = self._space
        if space.kind == "Box":
            return
        ints = np.rint(states)
        bad = np.abs(states - ints) > 1e-9
        if space.kind == "Discrete":
            bad |= (ints < 0) | (ints >= space.n)
        elif space.kind == "MultiDiscrete":
            bad |= (ints < 0) | (ints >= np.asarray(space.nvec))
        else:
            bad |= (ints < 0) | (ints > 1)
        if bad.any():
            i = int(np.flatnonzero(bad.any(axis=1))[0])
            state = dict(zip(self.features, states[i].tolist(), strict=True))
            raise PolicyError(f"{self.name}: state {state} is not an observation of the policy's space {space}")

    def _safe_forward(self, states: np.ndarray) -> Any:
        """The rebuilt network's raw outputs (logits or Q-values), a float32 tensor, for ``(N, d)`` observations."""
        from rlverify.policies import sb3zip

        with self._torch.no_grad():
            return self._net(sb3zip.encode(states, self._space, self._torch))

    def _trusted_forward(self, states: np.ndarray) -> Any:
        """SB3's own policy's raw outputs for ``(N, d)`` observations (SB3 encodes them itself)."""
        torch = self._torch
        policy = self._model.policy
        device = getattr(policy, "device", "cpu")
        if self._space.kind == "Box":
            obs = torch.as_tensor(np.ascontiguousarray(states, dtype=np.float32), device=device)
        else:
            ints = torch.as_tensor(np.rint(states).astype(np.int64), device=device)
            obs = ints[:, 0] if self._space.kind == "Discrete" else ints
        with torch.no_grad(), _eval_mode(policy):
            if self.algorithm == "DQN":
                return policy.q_net(obs).cpu()
            # MaskablePPO: no mask given, the network's own (unmasked) distribution
            return policy.get_distribution(obs).distribution.logits.cpu()

    def _raw(self, states: np.ndarray) -> Any:
        """``(N, |A|)`` float32 tensor: logits normalised as torch's ``Categorical(logits=...)`` keeps them
        (PPO/A2C/MaskablePPO), or Q-values (DQN); computed under the policy timeout."""
        self._check_observations(states)
        torch = self._torch

        def run() -> Any:
            out = self._forward(states)
            if self.algorithm != "DQN":
                out = out - out.logsumexp(dim=-1, keepdim=True)
            return out

        out = self._run_code(run)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (len(states), len(self.actions)):
            raise PolicyError(
                f"{self.name}: the network gave outputs of shape {getattr(out, 'shape', None)}, expected "
                f"({len(states)}, {len(self.actions)})"
            )
        return out

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:
        # normalised logits (log-probabilities): the network's shifted by a constant, the same softmax
        return self._raw(states).double().numpy()

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        out = self._raw(states)
        if self.algorithm == "DQN":
            return to_probabilities(out.numpy(), "q-values")
        return self._torch.softmax(out, dim=-1).double().numpy()  # torch's Categorical(logits=...).probs

    def _greedy_columns(self, states: np.ndarray) -> np.ndarray | None:
        return greedy_columns(self._raw(states).numpy())

    def _read_network(self) -> MLP:
        torch = self._torch
        problems = []
        if self._space.kind != "Box":
            problems.append(
                f"the observation space is {self._space}, not a flat Box (an MLP takes the features as they "
                "are; SB3 one-hot encodes a discrete observation first)"
            )
        if self._net is not None:
            layers, where = self._net, ("q_net.q_net" if self.algorithm == "DQN" else "mlp_extractor.policy_net + action_net")
        else:
            policy = self._model.policy
            if self.algorithm == "DQN":
                extractor, seq, where = policy.q_net.features_extractor, list(policy.q_net.q_net), "q_net.q_net"
            else:
                extractor = getattr(policy, "pi_features_extractor", policy.features_extractor)
                seq = [*policy.mlp_extractor.policy_net, policy.action_net]
                where = "mlp_extractor.policy_net + action_net"
            if type(extractor).__name__ != "FlattenExtractor":
                problems.append(f"the features extractor is {type(extractor).__name__}, not FlattenExtractor")
            layers = torch.nn.Sequential(*seq)
        if problems:
            raise PolicyError(
                f"{self.name}: this {self.algorithm} model cannot be read as a ReLU network; export the "
                "network to ONNX (Gemm/Relu) instead",
                problems,
            )
        try:
            return mlp_from_torch(layers, name=f"{self.name} ({self.algorithm} {where})")
        except PolicyError as exc:
            raise PolicyError(
                f"{exc}; train with policy_kwargs={{'activation_fn': torch.nn.ReLU}} or export the network to ONNX"
            ) from None


def object_kind(obj: Any) -> str | None:
    """``sb3`` (a Stable-Baselines3 model), ``sb3-policy`` (an SB3 model's ``.policy``), ``torch`` (a
    ``torch.nn.Module``), ``onnx`` (bytes, or an ``onnx.ModelProto``) or None: the kind of in-memory network
    :func:`~rlverify.policies.loading.load_object` takes. None also for an object with ``features``, ``actions`` and
    ``action_probabilities`` of any class (a torch module among them): it is a policy object
    (:func:`~rlverify.policies.as_policy`). Imports nothing: an SB3 model or a torch module exists only once its
    package is imported."""
    if isinstance(obj, BasePolicy) or all(hasattr(obj, a) for a in ("features", "actions", "action_probabilities")):
        return None
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return "onnx"
    onnx = sys.modules.get("onnx")
    if onnx is not None and isinstance(obj, onnx.ModelProto):
        return "onnx"
    sb3 = sys.modules.get("stable_baselines3")
    if sb3 is not None:
        from stable_baselines3.common.base_class import BaseAlgorithm
        from stable_baselines3.common.policies import BasePolicy as SB3BasePolicy

        if isinstance(obj, BaseAlgorithm):
            return "sb3"
        if isinstance(obj, SB3BasePolicy):
            return "sb3-policy"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        return "torch"
    return None


#: The Stable-Baselines3 / sb3-contrib algorithms whose models rlverify reads (a subclass counts as its base).
SB3_ALGORITHMS = ("MaskablePPO", "PPO", "A2C", "DQN")


def sb3_algorithm(model: Any) -> str:
    """The algorithm of the SB3 model object ``model``: the first of :data:`SB3_ALGORITHMS` among its classes.

    Raises:
        PolicyError: a recurrent policy (RecurrentPPO) or another algorithm (SAC, TD3, ...), named."""
    names = [c.__name__ for c in type(model).__mro__]
    if any(n.startswith("Recurrent") for n in names):
        raise PolicyError(
            f"{model_name(model)}: a recurrent policy keeps an LSTM state across steps; rlverify verifies "
            "memoryless policies (train PPO, MaskablePPO, A2C or DQN)"
        )
    for algorithm in SB3_ALGORITHMS:
        if algorithm in names:
            return algorithm
    raise PolicyError(
        f"{model_name(model)}: rlverify reads PPO, A2C, DQN (stable-baselines3) and MaskablePPO (sb3-contrib) "
        f"models with discrete actions, not {type(model).__name__}"
    )


def model_name(model: Any) -> str:
    """How messages and results name a model object given in memory: ``PPO model (in memory)``."""
    return f"{type(model).__name__} model (in memory)"


def limit_torch_threads(torch: Any, threads: int) -> None:
    """Let torch compute with ``threads`` intra-op threads and one inter-op thread, as onnxruntime does for an
    :class:`OnnxPolicy`.

    torch's thread counts are process-global: every torch computation in this process (another policy, a user's
    training loop) uses them from then on. Left at torch's default (one thread per core), each call of a policy's
    small network on a batch wakes a thread per core; on a machine whose cores are busy (the simulator's own
    threads, other processes) that made an SB3 policy's simulation 15-45x slower. The inter-op count can be set only
    before torch's first parallel work; where that has passed it is left as it is (it serves only
    ``torch.jit.fork``, which rlverify does not use).
    """
    torch.set_num_threads(threads)
    if torch.get_num_interop_threads() != 1:
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError as exc:  # "cannot set number of interop threads after parallel work has started"
            log.debug("torch's inter-op threads stay at %d: %s", torch.get_num_interop_threads(), exc)


def _session(model: Any, path: Path, n_actions: int, *, argmax: bool, threads: int) -> tuple[Any, bool]:
    """An onnxruntime session of ``model`` (``threads`` intra-op threads, one inter-op), and whether it also gives
    the argmax of the first output (second output :data:`_ARGMAX`; asked by ``argmax``, given when the model allows
    it: see :func:`_with_argmax`).

    Raises:
        InputFileError: onnxruntime cannot run the model (its own error, first line).
    """
    from rlverify.policies.settings import onnx_runtime

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
    from onnx import ModelProto, TensorProto, helper

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
