"""Policy adapters: plain callables, tables, ONNX networks, PyTorch modules, Stable-Baselines3."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import DependencyNotInstalled, InputFileError, PolicyError
from rlverify.policies.base import BasePolicy, numeric_output
from rlverify.policies.mlp import MLP, mlp_from_onnx, mlp_from_torch

log = logging.getLogger(__name__)

#: ONNX ``metadata_props`` keys of a self-describing rlverify policy file.
META_FEATURES = "rlverify.features"
META_ACTIONS = "rlverify.actions"
META_OUTPUT = "rlverify.output"  # one of OUTPUT_KINDS
META_TRAINING = "rlverify.training"  # JSON: algorithm, seed, steps, benchmark, ...


#: How a network's outputs become action probabilities: ``probabilities`` as they are, ``logits``
#: through a softmax, ``q-values`` greedily (a one-hot argmax; ties go to the first action in the
#: declared order), as a DQN policy acts.
OUTPUT_KINDS = ("probabilities", "logits", "q-values")


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


def check_output_kind(kind: str, where: str) -> str:
    """``kind`` if it is one of :data:`OUTPUT_KINDS`, else a :class:`PolicyError` naming ``where``."""
    if kind not in OUTPUT_KINDS:
        raise PolicyError(f"{where}: output must be one of {', '.join(repr(k) for k in OUTPUT_KINDS)}, got {kind!r}")
    return kind


def declaration(name: str, where: str, given: Mapping[str, Any], declared: Mapping[str, Any]) -> dict[str, Any]:
    """What a policy file is verified with, per key (``features``, ``actions``, ``output``): what the file declares
    (``declared``; None: nothing), else the option's value (``given``, from ``--features/--actions/--output``; None or
    empty: not given).

    One rule for every format that declares names (a Python module's FEATURES/ACTIONS/OUTPUT, a table, ONNX
    metadata, a sidecar ``FILE.json``): the options supply what the file does not declare and may repeat what it
    does, but never change it: an option that contradicts the declaration is refused (the policy would be verified
    as something other than what its file says). ``where`` names the declaration in the message.

    Raises:
        PolicyError: one line listing every contradicted declaration.
    """
    out: dict[str, Any] = {}
    conflicts = []
    for key in ("features", "actions", "output"):
        have, want = declared.get(key), given.get(key)
        if isinstance(have, (list, tuple)):
            have = list(have) or None
        if isinstance(want, (list, tuple)):
            want = list(want) or None
        if have is not None and want is not None and want != have:
            show = (lambda v: ",".join(v) if isinstance(v, list) else str(v))  # noqa: E731
            conflicts.append(f"--{key} {show(want)} contradicts its {key} {show(have)}")
        out[key] = have if have is not None else want
    if conflicts:
        raise PolicyError(f"{name}: {'; '.join(conflicts)} (declared by {where}); a policy is verified as its file "
                          f"declares it: drop {', '.join(c.split()[0] for c in conflicts)} or change the file")
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of an ``(N, |A|)`` array (float64, numerically stable)."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class CallablePolicy(BasePolicy):
    """Wrap ``fn(states: (N, d) array) -> (N, |A|) probabilities`` (or logits with ``output='logits'``)."""

    no_network = "a Python callable cannot be bounded; give an ONNX or TorchScript ReLU network (file.onnx, module.pt)"
    transient_input = False  # the function is the user's: it may keep the array it is given

    def __init__(self, fn: Callable[[np.ndarray], Any], features: Sequence[str], actions: Sequence[str], *,
                 output: str = "probabilities", name: str = "callable policy") -> None:
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
    """A finite table from feature valuations to distributions.

    JSON format::

        {"features": ["x"], "actions": ["UP", "NOP", "DOWN"],
         "table": [{"state": {"x": 1}, "probabilities": {"UP": 0.3, "DOWN": 0.7}}, ...],
         "default": {"NOP": 1.0}}            # optional; without it an unlisted state is an error

    Actions missing from a row's ``probabilities`` get probability 0.
    """

    no_network = ("a table policy cannot be bounded (it gives distributions for listed states, not a network over "
                  "regions); give an ONNX or TorchScript ReLU network (file.onnx, module.pt)")

    def __init__(self, features: Sequence[str], actions: Sequence[str], table: Mapping[tuple[int, ...], Sequence[float]],
                 *, default: Sequence[float] | None = None, name: str = "table policy") -> None:
        super().__init__(features, actions, name=name)
        self._table = {tuple(int(v) for v in k): numeric_output(p, name) for k, p in table.items()}
        self._default = None if default is None else numeric_output(default, name)

    @classmethod
    def from_json(cls, path: str | Path) -> TablePolicy:
        """Read a table policy file (format above), reporting every problem at once.

        Keys are the integer (or boolean) feature values of a state: a row whose state has a non-integer value
        (``x: 0.7``) is refused, not rounded, and so is a state listed twice (no row silently wins).

        Raises:
            InputFileError: not a readable JSON file. PolicyError: every problem of its contents, each named.
        """
        path = Path(path)
        data = _read_json(path)
        if not isinstance(data, dict):
            raise PolicyError(f"{path}: not a table policy (expected a JSON object with features, actions, table; got "
                              f"{_json_type(data)})")
        problems = [f"missing field '{key}'" for key in ("features", "actions", "table") if key not in data]
        if problems:
            raise PolicyError(f"{path}: not a table policy", problems)
        features, actions = data["features"], data["actions"]
        for key, names in (("features", features), ("actions", actions)):
            if not is_name_list(names):
                problems.append(f"'{key}' must be a list of names (strings), got {_json_type(names)}")
        if not isinstance(data["table"], list):
            problems.append(f"'table' must be a list of rows, got {_json_type(data['table'])}")
        if problems:
            raise PolicyError(f"{path}: invalid table policy", problems)

        def dist(entry: Any, where: str) -> list[float] | None:
            if not isinstance(entry, dict):
                problems.append(f"{where}: expected an object {{action: probability}}, got {_json_type(entry)}")
                return None
            unknown = [a for a in entry if a not in actions]
            if unknown:
                problems.append(f"{where}: unknown actions {unknown} (declared: {actions})")
            bad = [a for a, p in entry.items() if not _is_number(p)]
            if bad:
                problems.append(f"{where}: probabilities of {bad} are not finite numbers (a float; an integer of at "
                                f"most 64 bits), got {', '.join(_show_json(entry[a]) for a in bad[:3])}")
                return None
            return [float(entry.get(a, 0.0)) for a in actions]

        def value(v: Any, where: str) -> int | None:
            if isinstance(v, bool):
                return int(v)
            whole = isinstance(v, int) or (isinstance(v, float) and math.isfinite(v) and v == int(v))
            if whole and -2**63 <= int(v) < 2**63:
                return int(v)
            if whole:
                problems.append(f"{where}: {_show_json(v)} does not fit a 64-bit integer (table keys are the integer or "
                                "boolean values of the features)")
            else:
                problems.append(f"{where}: {_show_json(v)} is not an integer (table keys are the integer or boolean "
                                "values of the features)")
            return None

        table: dict[tuple[int, ...], list[float]] = {}
        first_row: dict[tuple[int, ...], int] = {}
        for i, row in enumerate(data["table"]):
            where = f"table[{i}]"
            if not isinstance(row, dict):
                problems.append(f"{where}: expected an object with 'state' and 'probabilities', got {_json_type(row)}")
                continue
            state = row.get("state")
            if isinstance(state, dict):
                missing = [f for f in features if f not in state]
                extra = [k for k in state if k not in features]
                if missing or extra:
                    problems.append(f"{where}.state: " + "; ".join(
                        ([f"missing features {missing}"] if missing else []) + ([f"unknown features {extra}"] if extra else [])))
                    continue
                raw = [(f, state[f]) for f in features]
            elif isinstance(state, list) and len(state) == len(features):
                raw = list(zip(features, state))
            else:
                problems.append(f"{where}.state: expected an object or a list of {len(features)} values")
                continue
            values = [value(v, f"{where}.state.{f}") for f, v in raw]
            p = dist(row.get("probabilities", {}), f"{where}.probabilities")
            if any(v is None for v in values) or p is None:
                continue
            key = tuple(values)  # type: ignore[arg-type]
            if key in first_row:
                problems.append(f"{where}: the state {dict(zip(features, key))} is already given by table[{first_row[key]}]")
                continue
            first_row[key] = i
            table[key] = p
        default = dist(data["default"], "default") if data.get("default") is not None else None
        if problems:
            raise PolicyError(f"{path}: invalid table policy", problems[:20] + (
                [f"... and {len(problems) - 20} more"] if len(problems) > 20 else []))
        return cls(features, actions, table, default=default, name=str(path))

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        out = np.empty((len(states), len(self.actions)))
        ints = np.rint(states).astype(np.int64)
        for i, row in enumerate(map(tuple, ints.tolist())):
            p = self._table.get(row)
            if p is None:
                if self._default is None:
                    raise PolicyError(
                        f"{self.name}: no entry for state "
                        f"{dict(zip(self.features, row))} and no 'default' distribution"
                    )
                p = self._default
            out[i] = p
        return out


class OnnxPolicy(BasePolicy):
    """An ONNX network run with onnxruntime on float32 batches.

    Features, actions and the output kind come from ``metadata_props`` (keys
    :data:`META_FEATURES`, :data:`META_ACTIONS` as JSON lists, :data:`META_OUTPUT`); the arguments
    give what the metadata does not, and are refused where they contradict it (see :func:`declaration`). The first graph input takes ``(N, d)``; the first output gives
    ``(N, |A|)`` logits (softmax applied here), probabilities, or Q-values (greedy: one-hot argmax).
    The file is read once; :meth:`network` reads the weights from that copy.
    """

    no_network = None
    input_dtype = np.float32
    concurrent = True  # InferenceSession.run is thread-safe and releases the GIL while it evaluates

    def __init__(self, path: str | Path, *, features: Sequence[str] | None = None, actions: Sequence[str] | None = None,
                 output: str | None = None, defaults: Mapping[str, Sequence[str]] | None = None) -> None:
        path = Path(path)
        defaults = defaults or {}
        onnx = _import("onnx", "onnx")
        ort = _import("onnxruntime", "onnxruntime")
        try:
            model = onnx.load(str(path))
        except Exception as exc:  # onnx raises DecodeError/ValueError variants
            raise InputFileError(f"{path}: not a readable ONNX model ({exc.__class__.__name__}: {exc})") from None
        meta = {p.key: p.value for p in model.metadata_props}
        self.metadata = meta
        if meta.get(META_OUTPUT) is not None:
            check_output_kind(meta[META_OUTPUT], f"{path}: metadata {META_OUTPUT}")
        given = declaration(str(path), "its metadata", {"features": features, "actions": actions, "output": output},
                            {"features": _json_list(meta, META_FEATURES, path), "actions": _json_list(meta, META_ACTIONS, path),
                             "output": meta.get(META_OUTPUT)})
        features = given["features"] or defaults.get("features")
        actions = given["actions"] or defaults.get("actions")
        missing = [k for k, v in (("features", features), ("actions", actions)) if v is None]
        if missing:
            raise PolicyError(
                f"{path}: ONNX file has no {' or '.join(META_FEATURES if m == 'features' else META_ACTIONS for m in missing)} "
                f"metadata; pass {' and '.join('--' + m for m in missing)} (e.g. --features x,y --actions up,down)"
            )
        super().__init__(features, actions, name=str(path))
        kind = given["output"]
        if kind is None:
            raise PolicyError(f"{path}: ONNX file has no {META_OUTPUT} metadata saying what the network outputs; "
                              "pass --output logits|probabilities|q-values")
        self.output = check_output_kind(kind, f"{path}: metadata {META_OUTPUT}")
        self.training = None
        if META_TRAINING in meta:
            try:
                self.training = json.loads(meta[META_TRAINING])
            except (json.JSONDecodeError, RecursionError):
                self.training = None
            if not isinstance(self.training, dict):
                raise PolicyError(f"{path}: metadata {META_TRAINING} must be a JSON object (how the policy was trained), "
                                  f"got {meta[META_TRAINING][:80]!r}")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        # greedy policies: the runtime also gives the argmax (a second output), cheaper than numpy's per-row one
        argmax_model = _with_argmax(model, len(actions)) if self.output == "q-values" else None
        self._session = None
        if argmax_model is not None:
            try:
                self._session = ort.InferenceSession(argmax_model.SerializeToString(), opts,
                                                     providers=["CPUExecutionProvider"])
            except Exception:  # noqa: BLE001 - e.g. an output type ArgMax does not take: numpy's argmax is used
                argmax_model = None
        if self._session is None:
            try:
                self._session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            except Exception as exc:  # noqa: BLE001 - onnxruntime's own errors: the file is bad input
                first_line = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
                raise InputFileError(f"{path}: onnxruntime cannot run this model ({exc.__class__.__name__}: "
                                     f"{first_line})") from None
        self._check_signature(path)
        first = self._session.get_inputs()[0]
        self._input = first.name
        self._input_type = np.float64 if first.type == "tensor(double)" else np.float32
        self.input_dtype = self._input_type
        # a file exported without a dynamic batch axis takes exactly this many rows per call
        batch = first.shape[0] if first.shape else None
        self._fixed_batch = batch if isinstance(batch, int) and batch > 0 else None
        self._outputs = [self._session.get_outputs()[0].name] + ([_ARGMAX] if argmax_model is not None else [])
        if self._fixed_batch is not None:
            log.warning("%s: the network's batch dimension is fixed at %d (exported without dynamic_axes): it is "
                        "evaluated %d row(s) per call, which is slow; export with dynamic_axes={'input': {0: 'batch'}}",
                        path, self._fixed_batch, self._fixed_batch)
        self._model = model  # for network(): the file is read once
        self.path = path

    def _check_signature(self, path: Path) -> None:
        """Refuse a network that does not take one ``(N, d)`` float tensor of features and give ``(N, |A|)`` floats."""
        inputs, outputs = self._session.get_inputs(), self._session.get_outputs()
        problems = []
        if len(inputs) != 1:
            problems.append(f"it has {len(inputs)} inputs ({', '.join(repr(i.name) for i in inputs)}); rlverify feeds one "
                            "(N, d) tensor of features")
        else:
            first = inputs[0]
            if first.type not in ("tensor(float)", "tensor(double)"):
                problems.append(f"its input {first.name!r} is {first.type}; rlverify feeds the features as floats "
                                "(export with a float32 input and cast inside the graph if needed)")
            shape = list(first.shape or [])
            if len(shape) != 2:
                problems.append(f"its input {first.name!r} has shape {shape}; rlverify feeds (N, d) = (batch, features)")
            elif isinstance(shape[1], int) and shape[1] != len(self.features):
                problems.append(f"its input {first.name!r} takes {shape[1]} features, the policy declares "
                                f"{len(self.features)} {list(self.features)}")
        if outputs and outputs[0].type not in ("tensor(float)", "tensor(double)", "tensor(float16)"):
            problems.append(f"its first output {outputs[0].name!r} is {outputs[0].type}; rlverify reads (N, |A|) "
                            "floats (logits, probabilities or q-values)")
        out_shape = list(outputs[0].shape or []) if outputs else []
        if len(out_shape) == 2 and isinstance(out_shape[1], int) and out_shape[1] != len(self.actions):
            problems.append(f"its output {outputs[0].name!r} has {out_shape[1]} outputs, the policy declares "
                            f"{len(self.actions)} actions {list(self.actions)}")
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
        out = [self._run_code(run, self._outputs[:1], {self._input: x[i:i + b]})[0] for i in range(0, len(x), b)]
        return (np.concatenate(out) if out else np.zeros((0, len(self.actions)), dtype=np.float32))[:len(states)], None

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


class TorchPolicy(BasePolicy):
    """A ``torch.nn.Module`` mapping ``(N, d)`` float32 tensors to ``output`` (optional extra ``torch``).

    Its :meth:`network` is read from a ``Sequential`` of ``Linear`` and ``ReLU`` layers (plain or TorchScript).
    """

    no_network = None
    input_dtype = np.float32

    def __init__(self, module: Any, features: Sequence[str], actions: Sequence[str], *, output: str = "logits",
                 name: str = "torch policy") -> None:
        super().__init__(features, actions, name=name)
        self._torch = _import("torch", "torch")
        self._module = module.eval()
        self.output = check_output_kind(output, name)

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:
        torch = self._torch

        def run() -> Any:
            with torch.no_grad():
                out = self._module(torch.as_tensor(states, dtype=torch.float32))
            if not isinstance(out, torch.Tensor):
                raise PolicyError(f"{self.name}: the module returned a {type(out).__name__}, not a tensor of "
                                  "(N, |A|) outputs")
            if out.is_complex():  # .double() would drop the imaginary parts
                raise PolicyError(f"{self.name}: output has complex numbers (a tensor of {out.dtype}); a policy gives "
                                  "real probabilities, logits or Q-values (the imaginary parts are not dropped)")
            return out.double().numpy()

        return self._run_code(run)

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return to_probabilities(self._network_outputs(states), self.output)

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        return _distribution(self._network_outputs(states), self.output)

    def _read_network(self) -> MLP:
        return mlp_from_torch(self._module, name=self.name)


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
    """

    no_network = None

    def __init__(self, path: str | Path, features: Sequence[str], actions: Sequence[str], *,
                 trust_code: bool = False) -> None:
        from rlverify.policies import sb3zip

        super().__init__(features, actions, name=str(path))
        path = Path(path)
        self._torch = _import("torch", "sb3")
        sb3zip.check_sizes(path)
        self.trusted = trust_code
        if trust_code:
            self._load_trusted(path)
        else:
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
        sb3 = _import("stable_baselines3", "sb3")
        if algorithm == "MaskablePPO":
            candidates = [_import("sb3_contrib", "sb3").MaskablePPO]
        elif algorithm == "DQN":
            candidates = [sb3.DQN]
        else:  # PPO, A2C, or a custom policy class of one of them
            candidates = [sb3.PPO, sb3.A2C] + ([sb3.DQN] if algorithm == "custom" else [])
        last_exc: Exception | None = None
        for cls in candidates:
            try:
                model = cls.load(str(path), device="cpu")
                break
            except Exception as exc:  # noqa: BLE001 - SB3's load raises many kinds; PPO tried on an A2C zip: the next
                last_exc = exc
        else:
            raise InputFileError(f"{path}: cannot load the model with Stable-Baselines3's loader "
                                 f"({last_exc.__class__.__name__}: {last_exc})")
        self.algorithm = "MaskablePPO" if algorithm == "MaskablePPO" else type(model).__name__
        self._model = model
        self._space = _space_of(model.observation_space, path)
        act = model.action_space
        if type(act).__name__ != "Discrete":
            raise PolicyError(f"{path}: the action space is {act}, not Discrete (rlverify verifies policies over named "
                              "actions)")
        self._n_actions = int(act.n)
        self._net = None
        self._forward = self._trusted_forward

    def _check_spaces(self) -> None:
        problems = []
        space = self._space
        if space.size != len(self.features):
            what = "one state index" if space.kind == "Discrete" else f"{space.size} features"
            problems.append(f"the observation space is {space} ({what}), but {len(self.features)} features are declared "
                            f"{list(self.features)}")
        if self._n_actions != len(self.actions):
            problems.append(f"the action space is Discrete({self._n_actions}), but {len(self.actions)} actions are "
                            f"declared {list(self.actions)}")
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
            raise PolicyError(f"{self.name}: state {dict(zip(self.features, states[i].tolist()))} is not an observation "
                              f"of the policy's space {space}")

    def _safe_forward(self, states: np.ndarray) -> Any:
        """The rebuilt network's raw outputs (logits or Q-values), a float32 tensor, for ``(N, d)`` observations."""
        from rlverify.policies.sb3zip import encode

        with self._torch.no_grad():
            return self._net(encode(states, self._space, self._torch))

    def _trusted_forward(self, states: np.ndarray) -> Any:
        """SB3's own policy's raw outputs for ``(N, d)`` observations (SB3 encodes them itself)."""
        torch = self._torch
        if self._space.kind == "Box":
            obs = torch.as_tensor(np.ascontiguousarray(states, dtype=np.float32))
        else:
            ints = torch.as_tensor(np.rint(states).astype(np.int64))
            obs = ints[:, 0] if self._space.kind == "Discrete" else ints
        policy = self._model.policy
        with torch.no_grad():
            if self.algorithm == "DQN":
                return policy.q_net(obs)
            # MaskablePPO: no mask given, the network's own (unmasked) distribution
            return policy.get_distribution(obs).distribution.logits

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
            raise PolicyError(f"{self.name}: the network gave outputs of shape {getattr(out, 'shape', None)}, expected "
                              f"({len(states)}, {len(self.actions)})")
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
            problems.append(f"the observation space is {self._space}, not a flat Box (an MLP takes the features as they "
                            "are; SB3 one-hot encodes a discrete observation first)")
        if self._net is not None:
            layers, where = self._net, ("q_net.q_net" if self.algorithm == "DQN" else "mlp_extractor.policy_net + action_net")
        else:
            policy = self._model.policy
            if self.algorithm == "DQN":
                extractor, seq, where = policy.q_net.features_extractor, list(policy.q_net.q_net), "q_net.q_net"
            else:
                extractor = getattr(policy, "pi_features_extractor", policy.features_extractor)
                seq = list(policy.mlp_extractor.policy_net) + [policy.action_net]
                where = "mlp_extractor.policy_net + action_net"
            if type(extractor).__name__ != "FlattenExtractor":
                problems.append(f"the features extractor is {type(extractor).__name__}, not FlattenExtractor")
            layers = torch.nn.Sequential(*seq)
        if problems:
            raise PolicyError(f"{self.name}: this {self.algorithm} model cannot be read as a ReLU network; export the "
                              "network to ONNX (Gemm/Relu) instead", problems)
        try:
            return mlp_from_torch(layers, name=f"{self.name} ({self.algorithm} {where})")
        except PolicyError as exc:
            raise PolicyError(f"{exc}; train with policy_kwargs={{'activation_fn': torch.nn.ReLU}} or export the "
                              "network to ONNX") from None


def _space_of(space: Any, path: Path) -> Any:
    """A gymnasium observation space (as SB3's loader made it) as :class:`~rlverify.policies.sb3zip.ObsSpace`."""
    from rlverify.policies.sb3zip import ObsSpace

    kind = type(space).__name__
    shape = tuple(int(d) for d in getattr(space, "shape", ()) or ())
    if kind == "Discrete" and int(getattr(space, "start", 0)) == 0:
        return ObsSpace("Discrete", 1, (), n=int(space.n))
    if kind in ("Box", "MultiBinary") and len(shape) == 1:
        return ObsSpace(kind, shape[0], shape)
    if kind == "MultiDiscrete" and len(shape) == 1 and not np.any(getattr(space, "start", 0)):
        return ObsSpace(kind, shape[0], shape, nvec=tuple(int(v) for v in space.nvec))
    raise PolicyError(f"{path}: the observation space is {space}; rlverify feeds a flat vector of features (Box, "
                      "MultiDiscrete, MultiBinary) or one state index (Discrete, starting at 0)")


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
    out.graph.node.append(helper.make_node("ArgMax", [model.graph.output[0].name], [_ARGMAX], axis=1, keepdims=0,
                                           select_last_index=0))
    out.graph.output.append(helper.make_tensor_value_info(_ARGMAX, TensorProto.INT64, [None]))
    return out


_ARGMAX = "rlverify_argmax"  # the name of the output _with_argmax adds


def _import(module: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise DependencyNotInstalled(
            f"this policy format needs the Python package '{module.split('.')[0]}': install it with "
            f"pip install 'rlverify[{extra}]'" if extra in ("torch", "sb3") else f"pip install {module}"
        ) from None


def _read_json(path: Path) -> Any:
    """The JSON value in ``path``, or an :class:`InputFileError` naming what is wrong (unreadable, not UTF-8 text,
    invalid JSON, nested too deeply)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read file ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not a JSON text file (byte {exc.start} is not UTF-8)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputFileError(f"{path}: invalid JSON: nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's int conversion limit)
        raise InputFileError(f"{path}: invalid JSON: {str(exc).split(';')[0]}") from None


def is_name_list(value: Any) -> bool:
    """Whether ``value`` is a non-empty list (or tuple) of non-empty strings: feature or action names."""
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, str) and v for v in value)


def _is_number(value: Any) -> bool:
    """Whether a JSON value is a number rlverify can hold: a finite float, or an integer of at most 64 bits (JSON
    has no limit: ``99999999999999999999999`` is refused, not rounded)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return -2**63 <= value < 2**63
    return math.isfinite(value)


def _show_json(value: Any, limit: int = 40) -> str:
    """A JSON value as messages show it: its repr, shortened (a 5,000-digit integer is not printed whole)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"an integer of {len(str(abs(value))) if value.bit_length() < 14000 else 'thousands of'} digits"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _json_type(value: Any) -> str:
    """How a JSON value is named in messages (``a number``, ``a string``, ``an object``, ...)."""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else f"{kinds.get(type(value), type(value).__name__)} ({json.dumps(value)[:40]})"


def _json_list(meta: Mapping[str, str], key: str, path: Path) -> list[str] | None:
    if key not in meta:
        return None
    try:
        value = json.loads(meta[key])
    except json.JSONDecodeError:
        value = [v.strip() for v in meta[key].split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{path}: metadata {key} must be a JSON list of names, got {meta[key]!r}")
    return value
