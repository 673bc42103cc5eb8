"""Policy adapters: plain callables, tables, ONNX networks, PyTorch modules, Stable-Baselines3."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import DependencyNotInstalled, InputFileError, PolicyError
from rlverify.policies.base import BasePolicy
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

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return to_probabilities(self._fn(states), self.output)

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        return _distribution(self._fn(states), self.output)

    def choose(self, states: np.ndarray, u: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        if self.output == "q-values":
            states = self._states(states)
            out = np.asarray(self._fn(states))
            cols = greedy_columns(out) if out.shape == (len(states), len(self.actions)) else None
            if cols is not None:
                return cols, np.ones(len(cols), dtype=bool)
        return super().choose(states, u)


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
        self._table = {tuple(int(v) for v in k): np.asarray(p, dtype=np.float64) for k, p in table.items()}
        self._default = None if default is None else np.asarray(default, dtype=np.float64)

    @classmethod
    def from_json(cls, path: str | Path) -> TablePolicy:
        path = Path(path)
        data = _read_json(path)
        problems = []
        for key in ("features", "actions", "table"):
            if key not in data:
                problems.append(f"missing field '{key}'")
        if problems:
            raise PolicyError(f"{path}: not a table policy", problems)
        features, actions = list(data["features"]), list(data["actions"])

        def dist(entry: Mapping[str, float], where: str) -> list[float]:
            unknown = [a for a in entry if a not in actions]
            if unknown:
                problems.append(f"{where}: unknown actions {unknown} (declared: {actions})")
            return [float(entry.get(a, 0.0)) for a in actions]

        table = {}
        for i, row in enumerate(data["table"]):
            where = f"table[{i}]"
            state = row.get("state")
            if isinstance(state, Mapping):
                missing = [f for f in features if f not in state]
                if missing:
                    problems.append(f"{where}.state: missing features {missing}")
                    continue
                key = tuple(int(state[f]) for f in features)
            elif isinstance(state, Sequence) and len(state) == len(features):
                key = tuple(int(v) for v in state)
            else:
                problems.append(f"{where}.state: expected an object or a list of {len(features)} values")
                continue
            table[key] = dist(row.get("probabilities", {}), f"{where}.probabilities")
        default = dist(data["default"], "default") if data.get("default") is not None else None
        if problems:
            raise PolicyError(f"{path}: invalid table policy", problems)
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
    :data:`META_FEATURES`, :data:`META_ACTIONS` as JSON lists, :data:`META_OUTPUT`), and can be
    overridden by the arguments. The first graph input takes ``(N, d)``; the first output gives
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
        features = list(features) if features else (_json_list(meta, META_FEATURES, path) or defaults.get("features"))
        actions = list(actions) if actions else (_json_list(meta, META_ACTIONS, path) or defaults.get("actions"))
        missing = [k for k, v in (("features", features), ("actions", actions)) if v is None]
        if missing:
            raise PolicyError(
                f"{path}: ONNX file has no {' or '.join(META_FEATURES if m == 'features' else META_ACTIONS for m in missing)} "
                f"metadata; pass {' and '.join('--' + m for m in missing)} (e.g. --features x,y --actions up,down)"
            )
        super().__init__(features, actions, name=str(path))
        kind = output or meta.get(META_OUTPUT)
        if kind is None:
            raise PolicyError(f"{path}: ONNX file has no {META_OUTPUT} metadata saying what the network outputs; "
                              "pass --output logits|probabilities|q-values")
        self.output = check_output_kind(kind, f"{path}: metadata {META_OUTPUT}")
        self.training = json.loads(meta[META_TRAINING]) if META_TRAINING in meta else None
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
            self._session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        first = self._session.get_inputs()[0]
        self._input = first.name
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

    def _run(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The runtime's ``(N, |A|)`` float32 outputs for ``(N, d)`` states, and their ``(N,)`` argmax if the session
        computes it."""
        x = np.ascontiguousarray(states, dtype=np.float32)
        if self._fixed_batch is None or len(x) == self._fixed_batch:
            res = self._session.run(self._outputs, {self._input: x})
            return res[0], (res[1] if len(res) > 1 else None)
        b = self._fixed_batch
        pad = (-len(x)) % b
        x = np.concatenate([x, np.repeat(x[-1:], pad, axis=0)]) if pad and len(x) else x
        out = [self._session.run(self._outputs[:1], {self._input: x[i:i + b]})[0] for i in range(0, len(x), b)]
        return (np.concatenate(out) if out else np.zeros((0, len(self.actions)), dtype=np.float32))[:len(states)], None

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:
        return np.asarray(self._run(states)[0], dtype=np.float64)

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return self._distribution(states)[0]

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        out, cols = self._run(states)
        return _distribution(out, self.output, cols if self.output == "q-values" else None)

    def choose(self, states: np.ndarray, u: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        if self.output == "q-values":
            states = self._states(states)
            out, cols = self._run(states)
            cols = greedy_columns(out, cols) if out.shape == (len(states), len(self.actions)) else None
            if cols is not None:
                return cols, np.ones(len(cols), dtype=bool)
        return super().choose(states, u)

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
        with torch.no_grad():
            return self._module(torch.as_tensor(states, dtype=torch.float32)).double().numpy()

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return to_probabilities(self._network_outputs(states), self.output)

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        return _distribution(self._network_outputs(states), self.output)

    def _read_network(self) -> MLP:
        return mlp_from_torch(self._module, name=self.name)


class SB3Policy(BasePolicy):
    """A Stable-Baselines3 PPO/A2C or sb3-contrib MaskablePPO (action distribution) or DQN (greedy one-hot)
    model (extra ``sb3``).

    The algorithm is read from the zip's ``data`` (its policy class), not guessed. Observations are
    given to the network as SB3 gives them: a ``Discrete`` observation space takes the one feature
    as an integer (SB3 one-hot encodes it inside the policy), a flat ``Box`` takes the features as
    float32. ``output`` is ``logits`` (PPO/A2C/MaskablePPO: the categorical distribution's) or
    ``q-values`` (DQN).

    MaskablePPO: the probabilities are the network's *unmasked* distribution; the mask it was trained
    with is the model's action availability, so ``unavailable='renormalize'`` (renormalise over the
    available actions) is exactly the masked policy (:attr:`maskable` is True). Recurrent policies
    (RecurrentPPO) are refused: rlverify verifies memoryless policies.

    Its :meth:`network` is the actor (``mlp_extractor.policy_net`` then ``action_net``) or the Q-network,
    for a ``MlpPolicy`` with a flat Box observation and ReLU activations
    (``policy_kwargs={"activation_fn": torch.nn.ReLU}``; PPO's default is Tanh).
    """

    no_network = None

    def __init__(self, path: str | Path, features: Sequence[str], actions: Sequence[str]) -> None:
        super().__init__(features, actions, name=str(path))
        _import("stable_baselines3", "sb3")
        self._torch = _import("torch", "torch")
        self.algorithm, candidates = _sb3_algorithm(Path(path))
        self.maskable = self.algorithm == "MaskablePPO"
        last_exc: Exception | None = None
        for cls in candidates:
            try:
                self._model = cls.load(str(path), device="cpu")
                self.algorithm = cls.__name__
                break
            except Exception as exc:  # noqa: BLE001 - SB3's load raises many kinds; PPO tried on an A2C zip: the next
                last_exc = exc
        else:
            raise InputFileError(f"{path}: cannot load the {self.algorithm} model ({last_exc.__class__.__name__}: {last_exc})")
        self.output = "q-values" if self.algorithm == "DQN" else "logits"
        self._check_spaces()

    def _check_spaces(self) -> None:
        obs, act = self._model.observation_space, self._model.action_space
        problems = []
        kind = type(obs).__name__
        if kind == "Discrete":
            if len(self.features) != 1:
                problems.append(f"the observation space is {obs} (one state index), but {len(self.features)} features "
                                f"are declared {list(self.features)}")
        elif kind in ("Box", "MultiDiscrete", "MultiBinary"):
            if len(obs.shape) != 1 or obs.shape[0] != len(self.features):
                problems.append(f"the observation space is {obs}, but {len(self.features)} features are declared "
                                f"{list(self.features)}")
        else:
            problems.append(f"the observation space is {obs}; rlverify feeds a flat vector of features (Box, "
                            "MultiDiscrete, MultiBinary) or one state index (Discrete)")
        if type(act).__name__ != "Discrete":
            problems.append(f"the action space is {act}, not Discrete (rlverify verifies policies over named actions)")
        elif int(act.n) != len(self.actions):
            problems.append(f"the action space is {act}, but {len(self.actions)} actions are declared {list(self.actions)}")
        if problems:
            raise PolicyError(f"{self.name}: the {self.algorithm} model does not fit the declared features/actions", problems)

    def _obs(self, states: np.ndarray) -> Any:
        """``(N, d)`` features as the tensor SB3's policy takes (``(N,)`` int64 for a Discrete space)."""
        torch = self._torch
        space = self._model.observation_space
        kind = type(space).__name__
        if kind == "Box":
            return torch.as_tensor(states.reshape((-1, *space.shape)), dtype=torch.float32)
        ints = np.rint(states).astype(np.int64)
        bad = np.abs(states - ints) > 1e-9
        if kind == "Discrete":
            ints = ints[:, 0]
            bad = bad[:, 0] | (ints < int(space.start)) | (ints >= int(space.start) + int(space.n))
        if bad.any():
            i = int(np.flatnonzero(bad.reshape(len(states), -1).any(axis=1))[0])
            raise PolicyError(f"{self.name}: state {dict(zip(self.features, states[i].tolist()))} is not an observation of "
                              f"the policy's space {space}")
        return torch.as_tensor(ints)

    def _read_network(self) -> MLP:
        torch = self._torch
        policy = self._model.policy
        space = self._model.observation_space
        if self.algorithm == "DQN":
            extractor, layers, where = policy.q_net.features_extractor, list(policy.q_net.q_net), "q_net.q_net"
        else:
            extractor = getattr(policy, "pi_features_extractor", policy.features_extractor)
            layers, where = list(policy.mlp_extractor.policy_net) + [policy.action_net], "mlp_extractor.policy_net + action_net"
        problems = []
        if type(space).__name__ != "Box" or len(space.shape) != 1:
            problems.append(f"the observation space is {space}, not a flat Box (an MLP takes the features as they are)")
        if type(extractor).__name__ != "FlattenExtractor":
            problems.append(f"the features extractor is {type(extractor).__name__}, not FlattenExtractor")
        if problems:
            raise PolicyError(f"{self.name}: this {self.algorithm} model cannot be read as a ReLU network; export the "
                              "network to ONNX (Gemm/Relu) instead", problems)
        try:
            return mlp_from_torch(torch.nn.Sequential(*layers), name=f"{self.name} ({self.algorithm} {where})")
        except PolicyError as exc:
            raise PolicyError(f"{exc}; train with policy_kwargs={{'activation_fn': torch.nn.ReLU}} or export the "
                              "network to ONNX") from None

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:
        obs = self._obs(states)
        with self._torch.no_grad():
            if self.algorithm == "DQN":
                return self._model.policy.q_net(obs).double().numpy()
            # normalised logits (log-probabilities): the network's shifted by a constant, the same softmax
            return self._model.policy.get_distribution(obs).distribution.logits.double().numpy()

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        obs = self._obs(states)
        with self._torch.no_grad():
            if self.algorithm == "DQN":
                q = self._model.policy.q_net(obs).numpy()
                out = np.zeros_like(q, dtype=np.float64)
                out[np.arange(len(q)), q.argmax(axis=1)] = 1.0
                return out
            # MaskablePPO: no mask given, the network's own (unmasked) distribution
            return self._model.policy.get_distribution(obs).distribution.probs.double().numpy()


#: SB3 policy classes rlverify reads, by module of the zip's ``policy_class``.
_SB3_POLICY_MODULES = {
    "stable_baselines3.common.policies": ("PPO", "A2C"),
    "stable_baselines3.dqn.policies": ("DQN",),
    "sb3_contrib.common.maskable.policies": ("MaskablePPO",),
}


def _sb3_algorithm(path: Path) -> tuple[str, list[Any]]:
    """The algorithm of an SB3 zip (from its ``data``'s policy class) and the classes that load it."""
    import re
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            data = json.loads(z.read("data"))
        policy_class = data.get("policy_class", {})
        module = policy_class.get("__module__", "")
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, AttributeError, OSError) as exc:
        raise InputFileError(f"{path}: not a Stable-Baselines3 model zip (no readable 'data': {exc.__class__.__name__})") from None
    found = re.search(r"function (\w+)\.__init__", str(policy_class.get("__init__", "")))
    cls_name = found.group(1) if found else module
    if module.startswith("sb3_contrib.common.recurrent"):
        raise PolicyError(f"{path}: a recurrent policy ({cls_name}, sb3-contrib RecurrentPPO) is refused: it keeps an LSTM "
                          "state across steps, so its action depends on the history, and rlverify verifies memoryless "
                          "policies (one distribution per state). Train a feed-forward policy (PPO, MaskablePPO, A2C, "
                          "DQN), or put the memory into the model's state")
    names = _SB3_POLICY_MODULES.get(module)
    if names is None:
        raise PolicyError(f"{path}: policy class {cls_name} ({module}) is not supported; rlverify reads PPO, A2C, DQN "
                          "(stable-baselines3) and MaskablePPO (sb3-contrib) models with discrete actions")
    if names == ("MaskablePPO",):
        contrib = _import("sb3_contrib", "sb3")
        return "MaskablePPO", [contrib.MaskablePPO]
    sb3 = _import("stable_baselines3", "sb3")
    return names[0], [getattr(sb3, n) for n in names]


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
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read file ({exc.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None


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
