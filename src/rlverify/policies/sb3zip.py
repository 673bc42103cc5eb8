"""Read a Stable-Baselines3 model zip without running any code from it.

SB3's own loader (``PPO.load``) unpickles the zip's ``data`` (cloudpickle), and a pickle can run any code:
a policy file from someone else must never be opened that way unasked. This module reads only

* ``data``: JSON, where SB3 stores each object it cannot write as JSON as
  ``{":type:": ..., ":serialized:": base64-cloudpickle, <its fields as JSON or text>}``; only the readable
  fields are used (the policy class's module and name, ``policy_kwargs``' ``net_arch`` and
  ``activation_fn`` as text, the spaces' ``n`` / ``_shape`` / ``nvec``), the ``:serialized:`` blobs never;
* ``policy.pth``: the policy's ``state_dict``, parsed by :mod:`rlverify.policies.torch_file` (a restricted reader
  of PyTorch's file format that allows only tensors and plain containers and never runs code; torch is not
  needed),

and builds the actor (PPO, A2C, sb3-contrib MaskablePPO: ``mlp_extractor.policy_net`` then ``action_net``) or
the Q-network (DQN: ``q_net.q_net``) of a ``MlpPolicy`` as numpy ``(weight, bias)`` layers with one of the
activations in :data:`ACTIVATIONS` between them. Observations are encoded as SB3 encodes them
(``preprocess_obs``, :func:`encode`): a ``Discrete`` state index one-hot, ``MultiDiscrete`` one one-hot per
component, a flat ``Box`` or ``MultiBinary`` as float32.

Anything else (a custom policy class or features extractor, a CNN or multi-input policy, policy arguments
it does not know) is refused by a :class:`~rlverify.errors.PolicyError` naming ``--trust-code``, the opt-in
that loads the zip with SB3's own loader instead (which unpickles and can run code).

Every member's inflated size is read from the zip's directory first: a zip that would inflate beyond
:data:`MAX_INFLATED_BYTES` is refused before anything is decompressed.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from rlverify.errors import InputFileError, PolicyError
from rlverify.policies import torch_file

#: The most bytes the members of a policy zip may inflate to in total (SB3 zips of MLP policies are a few MB).
MAX_INFLATED_BYTES = 256 * 2**20

#: What ``--trust-code`` does, for messages.
TRUST_CODE = (
    "--trust-code (loads the zip with Stable-Baselines3's loader, which unpickles and can run code: only for files you trust)"
)

#: Activation classes (``torch.nn.NAME``, as ``policy_kwargs['activation_fn']`` names them) the reader builds.
ACTIVATIONS = (
    "ReLU",
    "Tanh",
    "Sigmoid",
    "LeakyReLU",
    "ELU",
    "SELU",
    "CELU",
    "GELU",
    "SiLU",
    "Mish",
    "Softplus",
    "ReLU6",
    "Hardtanh",
    "Hardswish",
    "Hardsigmoid",
    "Tanhshrink",
    "Softsign",
    "LogSigmoid",
)

#: The MlpPolicy classes read, by (module, class whose __init__ the policy class has) -> (algorithm, default
#: net_arch, default activation).
_POLICIES = {
    ("stable_baselines3.common.policies", "ActorCriticPolicy"): ("PPO", {"pi": [64, 64], "vf": [64, 64]}, "Tanh"),
    ("sb3_contrib.common.maskable.policies", "MaskableActorCriticPolicy"): (
        "MaskablePPO",
        {"pi": [64, 64], "vf": [64, 64]},
        "Tanh",
    ),
    ("stable_baselines3.dqn.policies", "DQNPolicy"): ("DQN", [64, 64], "ReLU"),
}

#: policy_kwargs that do not change what the actor computes for discrete actions and flat observations.
_INERT_KWARGS = (
    "ortho_init",
    "log_std_init",
    "full_std",
    "use_expln",
    "squash_output",
    "share_features_extractor",
    "normalize_images",
    "optimizer_class",
    "optimizer_kwargs",
    "use_sde",
)

#: The policy modules of the continuous-action algorithms (Box actions), by module -> algorithms.
CONTINUOUS_POLICY_MODULES = {
    "stable_baselines3.sac.policies": ("SAC",),
    "stable_baselines3.td3.policies": ("TD3", "DDPG"),
    "stable_baselines3.common.policies": ("PPO", "A2C"),
}

#: The continuous actors read without running code, by algorithm: (policy class, default net_arch of the actor,
#: default activation, extra policy_kwargs that do not change the actor without gSDE).
_CONTINUOUS = {
    "SAC": ("SACPolicy", [256, 256], "ReLU", ("n_critics", "log_std_init", "use_expln", "clip_mean")),
    "TD3": ("TD3Policy", [400, 300], "ReLU", ("n_critics",)),
    "DDPG": ("TD3Policy", [400, 300], "ReLU", ("n_critics",)),
    "PPO": ("ActorCriticPolicy", [64, 64], "Tanh", ()),
    "A2C": ("ActorCriticPolicy", [64, 64], "Tanh", ()),
}

#: Modules of the policy classes SB3's loader reads, by algorithm, for the algorithm's name.
SB3_POLICY_MODULES = {
    "stable_baselines3.common.policies": ("PPO", "A2C"),
    "stable_baselines3.dqn.policies": ("DQN",),
    "sb3_contrib.common.maskable.policies": ("MaskablePPO",),
}


class Space(StrEnum):
    """The gymnasium space classes the reader takes (by class name)."""

    DISCRETE = "Discrete"
    BOX = "Box"
    MULTI_DISCRETE = "MultiDiscrete"
    MULTI_BINARY = "MultiBinary"

    @classmethod
    def named(cls, name: str) -> Space | None:
        """The space class called ``name``, or None for any other."""
        return cls._value2member_map_.get(name)  # type: ignore[return-value]


#: the spaces whose observation is the features as they are (a flat vector)
FLAT = (Space.BOX, Space.MULTI_BINARY)


@dataclass(frozen=True)
class ObsSpace:
    """An SB3 observation space as the reader sees it.

    Attributes:
        kind: ``Discrete``, ``Box``, ``MultiDiscrete`` or ``MultiBinary``.
        size: the number of features it takes (1 for Discrete; the flat length otherwise).
        n: Discrete: the number of states; nvec: MultiDiscrete: the number of values per component.
        shape: the space's shape (``()`` for Discrete).
    """

    kind: Space
    size: int
    shape: tuple[int, ...]
    n: int = 0
    nvec: tuple[int, ...] = ()

    @property
    def encoded_size(self) -> int:
        """Inputs of the network after SB3's encoding (one-hot for Discrete/MultiDiscrete)."""
        match self.kind:
            case Space.DISCRETE:
                return self.n
            case Space.MULTI_DISCRETE:
                return sum(self.nvec)
        return self.size

    def __str__(self) -> str:
        match self.kind:
            case Space.DISCRETE:
                return f"Discrete({self.n})"
            case Space.MULTI_DISCRETE:
                return f"MultiDiscrete({list(self.nvec)})"
        return f"{self.kind}(shape={self.shape})"


#: A linear layer read from ``policy.pth``: ``(out, in)`` weight and ``(out,)`` bias, float32.
Layer = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class SB3Network:
    """What the reader built: the algorithm, the spaces and the actor/Q-network (numpy, read without torch).

    Attributes:
        algorithm: ``PPO``, ``A2C``, ``MaskablePPO`` or ``DQN``.
        obs: the observation space; n_actions: the Discrete action space's size.
        layers: the linear layers from the encoded observation (:func:`encode`) to the logits
            (PPO/A2C/MaskablePPO) or Q-values (DQN), float32, with ``activation`` between two.
        activation: the hidden layers' activation (``torch.nn`` class name).
    """

    algorithm: str
    obs: ObsSpace
    n_actions: int
    layers: tuple[Layer, ...]
    activation: str


@dataclass(frozen=True)
class ContinuousNetwork:
    """The actor of an SB3 zip with a Box action space, as numpy arrays (read from JSON and weights only).

    Attributes:
        algorithm: ``SAC``, ``TD3``, ``DDPG``, ``PPO`` or ``A2C``.
        obs: the (flat) observation space.
        low, high: ``(d,)`` float64 bounds of the action space (read from the text SB3 writes of the float32
            arrays, parsed as their dtype: exact for numpy's shortest round-trip printing).
        hidden: the latent layers (each followed by ``activation``): SAC ``actor.latent_pi``, TD3/DDPG the
            hidden layers of ``actor.mu``, PPO/A2C ``mlp_extractor.policy_net``.
        activation: ``torch.nn`` class name of the hidden layers' activation.
        mean: the mean (SAC ``actor.mu``, PPO ``action_net``) or, TD3/DDPG, the last layer of ``actor.mu``
            (followed by tanh).
        log_std: SAC: the ``actor.log_std`` layer; PPO/A2C: the ``(d,)`` ``log_std`` parameter; TD3/DDPG: None.
    """

    algorithm: str
    obs: ObsSpace
    low: np.ndarray
    high: np.ndarray
    hidden: tuple[Layer, ...]
    activation: str
    mean: Layer
    log_std: Layer | np.ndarray | None


def has_box_actions(data: Mapping[str, Any]) -> bool:
    """Whether the zip's ``data`` declares a Box action space (a continuous-action policy)."""
    return _space_kind(data.get("action_space")) is Space.BOX


def continuous_algorithm(data: Mapping[str, Any], path: Path) -> str:
    """The continuous-action algorithm of the zip (``SAC``, ``TD3``, ``DDPG``, ``PPO``, ``A2C``), from its policy
    module and the algorithm's own fields (DDPG is TD3 with ``policy_delay`` 1 and ``target_noise_clip`` 0).

    Raises:
        PolicyError: a policy module of another algorithm (named), with the ``--trust-code`` hint.
    """
    module, cls_name = policy_class(data, path)
    names = CONTINUOUS_POLICY_MODULES.get(module)
    if names is None:
        raise PolicyError(
            f"{path}: policy class {cls_name or module or '?'} ({module or 'no module'}) is not one rlverify reads for "
            f"a Box action space (SAC, TD3, DDPG, PPO, A2C of stable-baselines3); pass {TRUST_CODE}"
        )
    if names == ("PPO", "A2C"):
        return "PPO" if "clip_range" in data else "A2C"
    if names == ("TD3", "DDPG"):
        ddpg = _float(data.get("policy_delay")) == 1 and _float(data.get("target_noise_clip")) == 0.0
        return "DDPG" if ddpg else "TD3"
    return names[0]


def refuse_gsde(data: Mapping[str, Any], path: Path) -> None:
    """Refuse a continuous policy trained with gSDE (``use_sde``) or ``squash_output``: its noise is
    state-dependent (or its actions rescaled differently), which rlverify does not compute."""
    kwargs = data.get("policy_kwargs")
    kwargs = kwargs if isinstance(kwargs, Mapping) else {}
    for option, value in (("use_sde", data.get("use_sde")), ("use_sde", kwargs.get("use_sde"))):
        if _truthy(value):
            raise PolicyError(
                f"{path}: the policy was trained with {option}=True (gSDE, state-dependent exploration noise); "
                "rlverify computes diagonal Gaussian policies only: train with use_sde=False"
            )
    if _truthy(kwargs.get("squash_output")):
        raise PolicyError(
            f"{path}: the policy has policy_kwargs squash_output=True (tanh-squashed gSDE actions); rlverify reads "
            "PPO/A2C Gaussian policies without it: train with squash_output=False"
        )


def read_continuous(path: Path) -> ContinuousNetwork:
    """The actor of an SB3 ``MlpPolicy`` zip with a Box action space (SAC, TD3, DDPG, PPO, A2C), from its JSON and
    its weights only (``policy.pth`` parsed by :mod:`~rlverify.policies.torch_file`; nothing run, no torch).

    Args:
        path: the zip.

    Raises:
        InputFileError: not an SB3 zip, too large.
        PolicyError: ``policy.pth`` not a plain tensor state dict (the cause named); a policy it cannot read without
            running code (named, with the ``--trust-code`` hint), gSDE or ``squash_output`` (named), an action space
            that is not a flat bounded Box, weights that do not fit.
    """
    data = read_data(path)
    algorithm = continuous_algorithm(data, path)
    refuse_gsde(data, path)
    cls, default_arch, default_act, inert = _CONTINUOUS[algorithm]
    hint = f"; pass {TRUST_CODE}"
    _, cls_name = policy_class(data, path)
    if cls_name != cls:
        raise PolicyError(
            f"{path}: the policy class is {cls_name or '?'}, not the {algorithm} MlpPolicy ({cls}) rlverify reads "
            f"without running code{hint}"
        )
    obs = observation_space(data.get("observation_space"), path, hint)
    if obs.kind not in FLAT:
        raise PolicyError(f"{path}: the observation space is {obs}; rlverify reads continuous policies over a flat Box{hint}")
    low, high = box_action_space(data.get("action_space"), path, bounded=algorithm in ("SAC", "TD3", "DDPG"))
    net_arch, activation = _policy_kwargs(data.get("policy_kwargs"), default_arch, default_act, path, hint, inert)
    hidden = net_arch.get("pi", []) if isinstance(net_arch, dict) else net_arch
    if not _layer_sizes(hidden) and hidden != []:
        raise PolicyError(f"{path}: net_arch {net_arch!r} is not a list of positive layer sizes (or {{'pi': [...]}}){hint}")
    state = _state_dict(path)
    d = len(low)
    sizes = [obs.size, *hidden]
    prefix = {"SAC": "actor.latent_pi.", "TD3": "actor.mu.", "DDPG": "actor.mu.", "PPO": "mlp_extractor.policy_net."}
    first = prefix.get(algorithm, prefix["PPO"])
    problems: list[str] = []
    layers = tuple(_numpy_layer(state, f"{first}{2 * i}", (sizes[i + 1], sizes[i]), problems) for i in range(len(hidden)))
    mean_name = {"SAC": "actor.mu", "TD3": f"actor.mu.{2 * len(hidden)}", "DDPG": f"actor.mu.{2 * len(hidden)}"}
    mean = _numpy_layer(state, mean_name.get(algorithm, "action_net"), (d, sizes[-1]), problems)
    log_std: Layer | np.ndarray | None = None
    if algorithm == "SAC":
        log_std = _numpy_layer(state, "actor.log_std", (d, sizes[-1]), problems)
    elif algorithm in ("PPO", "A2C"):
        value = state.get("log_std")
        if _is_tensor(value, (d,)):
            log_std = value.astype(np.float32)
        else:
            problems.append(f"log_std: expected a parameter ({d},), got {_shape(value)}")
    if problems:
        raise PolicyError(
            f"{path}: the weights in policy.pth do not fit the {algorithm} MlpPolicy its data describes (observation "
            f"{obs}, {d} action dimensions, hidden {hidden}){hint}",
            problems,
        )
    return ContinuousNetwork(algorithm, obs, low, high, layers, activation, mean, log_std)


def _numpy_layer(state: Mapping[str, np.ndarray], name: str, want: tuple[int, int], problems: list[str]) -> Layer:
    """The float32 ``(weight, bias)`` of the Linear layer ``name`` (zeros, and a problem noted, if it does not fit;
    a float64/float16 weight is rounded to float32 as torch's ``.to(torch.float32)`` rounds)."""
    w, b = state.get(f"{name}.weight"), state.get(f"{name}.bias")
    if not _is_tensor(w, want) or not _is_tensor(b, want[:1]):
        problems.append(f"{name}: expected weight {want} and bias {want[:1]}, got {_shape(w)} and {_shape(b)}")
        return np.zeros(want, dtype=np.float32), np.zeros(want[0], dtype=np.float32)
    return w.astype(np.float32), b.astype(np.float32)


def box_action_space(entry: Any, path: Path, *, bounded: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` ``(d,)`` float64 of a one-dimensional Box action space from its JSON fields (``bounded``: both
    finite, as SB3 requires to rescale a tanh output)."""
    shown = entry.get(":type:", "?") if isinstance(entry, Mapping) else repr(entry)[:80]
    shape = _int_list(entry.get("_shape")) if isinstance(entry, Mapping) else None
    if _space_kind(entry) is not Space.BOX or shape is None or len(shape) != 1 or shape[0] <= 0:
        raise PolicyError(f"{path}: the action space is {shown} (shape {shape}), not a one-dimensional Box")
    assert isinstance(entry, Mapping)
    dtype = np.float64 if str(entry.get("dtype")) == "float64" else np.float32
    low, high = _float_array(entry.get("low"), dtype), _float_array(entry.get("high"), dtype)
    if low is None or high is None or low.shape != (shape[0],) or high.shape != (shape[0],):
        raise PolicyError(f"{path}: cannot read the Box action space's low/high ({entry.get('low')!r}, {entry.get('high')!r})")
    if np.isnan(low).any() or np.isnan(high).any() or not (low <= high).all():
        raise PolicyError(f"{path}: the Box action space's bounds {low.tolist()}, {high.tolist()} are not low <= high")
    if bounded and not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise PolicyError(
            f"{path}: the Box action space is unbounded ({low.tolist()}, {high.tolist()}); a tanh actor is rescaled to "
            "finite bounds"
        )
    return low, high


def _float_array(value: Any, dtype: type) -> np.ndarray | None:
    """A float array written as numpy's text (``'[-2.  2.]'``), parsed as ``dtype`` then float64, or None."""
    if not isinstance(value, str) or len(value) > 100_000 or "..." in value:
        return None
    found = re.fullmatch(r"\s*\[([^\[\]]*)\]\s*", value)
    if found is None:
        return None
    try:
        return np.array(found.group(1).replace(",", " ").split(), dtype=dtype).astype(np.float64)
    except ValueError:
        return None


def _float(value: Any) -> float | None:
    """A number written as JSON or text, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value) if isinstance(value, str) and len(value) < 40 else None
    except ValueError:
        return None


def _truthy(value: Any) -> bool:
    """Whether a flag written as JSON (``true``) or SB3's text (``'True'``) is set."""
    return value is True or (isinstance(value, str) and value.strip() == "True")


def read_data(path: Path) -> dict[str, Any]:
    """The zip's ``data`` as JSON (nothing unpickled), after checking the members' inflated sizes.

    Raises:
        InputFileError: not a zip, no ``data``, ``data`` not a JSON object, or the zip inflates beyond
            :data:`MAX_INFLATED_BYTES`.
    """
    raw = _read_members(path, ("data",))["data"]
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputFileError(
            f"{path}: not a Stable-Baselines3 model zip (its 'data' is not JSON: {exc.__class__.__name__})"
        ) from None
    if not isinstance(data, dict):
        raise InputFileError(f"{path}: not a Stable-Baselines3 model zip (its 'data' is not a JSON object)")
    return data


def check_sizes(path: Path) -> None:
    """Refuse a zip whose members would inflate beyond :data:`MAX_INFLATED_BYTES` (read from its directory)."""
    _read_members(path, ())


def _read_members(path: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(path) as z:
            _check_members(path, z.infolist(), names)
            # ZipFile reads no more than a member's declared size, so the check above bounds what is inflated
            return {n: z.read(n) for n in names}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, ValueError) as exc:
        raise InputFileError(f"{path}: not a readable zip ({exc.__class__.__name__}: {exc})") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read file ({exc.strerror or exc})") from None


def _check_members(path: Path, infos: list[zipfile.ZipInfo], names: tuple[str, ...]) -> None:
    """Refuse a zip whose members inflate beyond :data:`MAX_INFLATED_BYTES` or that lacks one of ``names``."""
    total = sum(max(int(i.file_size), 0) for i in infos)
    if total > MAX_INFLATED_BYTES:
        raise InputFileError(
            f"{path}: the zip's members inflate to {total / 2**20:,.0f} MiB (more than "
            f"{MAX_INFLATED_BYTES // 2**20} MiB); refused without inflating it (a "
            "Stable-Baselines3 MLP policy zip inflates to a few MiB)"
        )
    present = {i.filename for i in infos}
    missing = [n for n in names if n not in present]
    if missing:
        raise InputFileError(f"{path}: not a Stable-Baselines3 model zip (no {', '.join(missing)} in it)")


def policy_class(data: Mapping[str, Any], path: Path) -> tuple[str, str]:
    """``(module, class name)`` of the zip's policy class, from the text fields SB3 writes beside the pickle."""
    cls = data.get("policy_class")
    if not isinstance(cls, Mapping):
        raise InputFileError(f"{path}: not a Stable-Baselines3 model zip (its 'data' has no policy_class)")
    module = cls.get("__module__")
    found = re.search(r"function (\w+)\.__init__", str(cls.get("__init__", "")))
    return (module if isinstance(module, str) else ""), (found.group(1) if found else "")


def algorithm_of(data: Mapping[str, Any], path: Path) -> tuple[str, str, str]:
    """``(algorithm, module, class name)`` of the zip's policy, refusing recurrent and unknown policies.

    The algorithm is named from the policy's module (PPO and A2C share one: a zip with PPO's ``clip_range``
    is PPO). Raises :class:`PolicyError` for a recurrent policy or a policy module rlverify does not read.
    """
    module, cls_name = policy_class(data, path)
    shown = cls_name or module or "?"
    if module.startswith("sb3_contrib.common.recurrent"):
        raise PolicyError(
            f"{path}: a recurrent policy ({shown}, sb3-contrib RecurrentPPO) is refused: it keeps an LSTM "
            "state across steps, so its action depends on the history, and rlverify verifies memoryless "
            "policies (one distribution per state). Train a feed-forward policy (PPO, MaskablePPO, A2C, "
            "DQN), or put the memory into the model's state"
        )
    names = SB3_POLICY_MODULES.get(module)
    if names is None:
        raise PolicyError(
            f"{path}: policy class {shown} ({module or 'no module'}) is not one rlverify reads: it reads "
            "PPO, A2C, DQN (stable-baselines3) and MaskablePPO (sb3-contrib) models with discrete "
            f"actions; for your own policy class pass {TRUST_CODE}"
        )
    if names == ("PPO", "A2C"):
        return ("PPO" if "clip_range" in data else "A2C"), module, cls_name
    return names[0], module, cls_name


def read_network(path: Path) -> SB3Network:
    """Build the actor (or Q-network) of an SB3 MlpPolicy zip from its JSON and its weights only (numpy; no torch).

    Args:
        path: the zip.

    Raises:
        InputFileError: not an SB3 zip, too large.
        PolicyError: ``policy.pth`` not a plain tensor state dict (the cause named); something it cannot read
            without running code (named), with the ``--trust-code`` hint; a recurrent policy; non-Discrete actions;
            weights that do not fit the architecture.
    """
    data = read_data(path)
    algorithm, module, cls_name = algorithm_of(data, path)
    arch = _POLICIES.get((module, cls_name))
    hint = f"; pass {TRUST_CODE}"
    if arch is None:
        raise PolicyError(
            f"{path}: the policy class is {cls_name or '?'} ({module}), not the MlpPolicy rlverify reads "
            f"without running code (CNN and multi-input policies, custom subclasses){hint}"
        )
    _, default_arch, default_act = arch
    obs = observation_space(data.get("observation_space"), path, hint)
    n_actions = action_space(data.get("action_space"), path)
    net_arch, activation = _policy_kwargs(data.get("policy_kwargs"), default_arch, default_act, path, hint)
    hidden, names = _layers(algorithm, net_arch, path, hint)
    sizes = [obs.encoded_size, *hidden, n_actions]
    problems: list[str] = []
    state = _state_dict(path)
    layers = tuple(_numpy_layer(state, name, (sizes[i + 1], sizes[i]), problems) for i, name in enumerate(names))
    if problems:
        raise PolicyError(
            f"{path}: the weights in policy.pth do not fit the {algorithm} MlpPolicy its data describes "
            f"(observation {obs}, {n_actions} actions, hidden {hidden}){hint}",
            problems,
        )
    return SB3Network(algorithm=algorithm, obs=obs, n_actions=n_actions, layers=layers, activation=activation)


def _layers(algorithm: str, net_arch: Any, path: Path, hint: str) -> tuple[list[int], list[str]]:
    """The hidden layer sizes of the actor (or Q-network) and the state-dict names of its linear layers."""
    if algorithm == "DQN":
        if not isinstance(net_arch, list):
            raise PolicyError(f"{path}: DQN net_arch {net_arch!r} is not a list of layer sizes{hint}")
        hidden, prefix = net_arch, "q_net.q_net."
        names = [f"{prefix}{2 * i}" for i in range(len(hidden) + 1)]
    else:
        hidden = net_arch.get("pi", []) if isinstance(net_arch, dict) else net_arch
        names = [f"mlp_extractor.policy_net.{2 * i}" for i in range(len(hidden))] + ["action_net"]
    if not _layer_sizes(hidden):
        raise PolicyError(
            f"{path}: net_arch {net_arch!r} is not a list of positive layer sizes (or {{'pi': [...], 'vf': [...]}}){hint}"
        )
    return hidden, names


def _layer_sizes(hidden: Any) -> bool:
    """Whether ``hidden`` is a list of positive layer sizes."""
    return isinstance(hidden, list) and all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in hidden)


def observation_space(entry: Any, path: Path, hint: str = "") -> ObsSpace:
    """The observation space from its JSON fields in ``data`` (gymnasium or gym spaces)."""
    space = _space_kind(entry)
    shape = _int_list(entry.get("_shape")) if isinstance(entry, Mapping) else None
    if space is Space.DISCRETE:
        return _discrete_observations(entry, path, hint)
    flat = _one_dimension(shape)
    if space in FLAT and flat is not None and flat[0] > 0:
        return ObsSpace(space, flat[0], flat)
    found = _multi_discrete(entry, flat) if space is Space.MULTI_DISCRETE and flat is not None else None
    if found is not None:
        return found
    raise _unread_observations(entry, shape, path, hint)


def _unread_observations(entry: Any, shape: list[int] | None, path: Path, hint: str) -> PolicyError:
    shown = entry.get(":type:", "?") if isinstance(entry, Mapping) else repr(entry)[:80]
    return PolicyError(
        f"{path}: the observation space {shown} (shape {shape}) is not one rlverify reads: a flat "
        "vector of features (Box, MultiDiscrete, MultiBinary of one dimension) or one state index "
        "(Discrete)" + hint
    )


def _one_dimension(shape: list[int] | None) -> tuple[int, ...] | None:
    """``shape`` as a tuple if it has one dimension, else None."""
    return tuple(shape) if shape is not None and len(shape) == 1 else None


def _discrete_observations(entry: Mapping[str, Any], path: Path, hint: str) -> ObsSpace:
    n, start = _int(entry.get("n")), _int(entry.get("start", 0))
    if n is None or n <= 0 or start != 0:
        raise PolicyError(
            f"{path}: cannot read the Discrete observation space (n={entry.get('n')!r}, "
            f"start={entry.get('start')!r}; rlverify reads Discrete(n) starting at 0){hint}"
        )
    return ObsSpace(Space.DISCRETE, 1, (), n=n)


def _multi_discrete(entry: Mapping[str, Any], shape: tuple[int, ...]) -> ObsSpace | None:
    """A one-dimensional MultiDiscrete space starting at 0, or None."""
    nvec = _int_list(entry.get("nvec"))
    starts = _int_list(entry.get("start", "[]"))
    if nvec is not None and len(nvec) == shape[0] and all(v > 0 for v in nvec) and not any(starts or []):
        return ObsSpace(Space.MULTI_DISCRETE, shape[0], shape, nvec=tuple(nvec))
    return None


def space_of(space: Any, path: Path) -> ObsSpace:
    """A gymnasium observation space (as SB3's loader made it) as an :class:`ObsSpace`."""
    found = _gym_space(space, Space.named(type(space).__name__), tuple(int(d) for d in getattr(space, "shape", ()) or ()))
    if found is not None:
        return found
    raise PolicyError(
        f"{path}: the observation space is {space}; rlverify feeds a flat vector of features (Box, "
        "MultiDiscrete, MultiBinary) or one state index (Discrete, starting at 0)"
    )


def _gym_space(space: Any, named: Space | None, shape: tuple[int, ...]) -> ObsSpace | None:
    """:func:`space_of`'s space, or None for one rlverify does not feed."""
    flat = len(shape) == 1
    if named is Space.DISCRETE and int(getattr(space, "start", 0)) == 0:
        return ObsSpace(named, 1, (), n=int(space.n))
    if named in FLAT and flat:
        return ObsSpace(named, shape[0], shape)
    if named is Space.MULTI_DISCRETE and flat and not np.any(getattr(space, "start", 0)):
        return ObsSpace(named, shape[0], shape, nvec=tuple(int(v) for v in space.nvec))
    return None


def action_space(entry: Any, path: Path) -> int:
    """The number of actions of a Discrete action space from its JSON fields in ``data``."""
    n = _int(entry.get("n")) if isinstance(entry, Mapping) else None
    if _space_kind(entry) is not Space.DISCRETE or n is None or n <= 0:
        shown = entry.get(":type:", "?") if isinstance(entry, Mapping) else repr(entry)[:80]
        raise PolicyError(f"{path}: the action space is {shown}, not Discrete (rlverify verifies policies over named actions)")
    return n


def _policy_kwargs(
    kwargs: Any, default_arch: Any, default_act: str, path: Path, hint: str, inert: tuple[str, ...] = ()
) -> tuple[Any, str]:
    """``(net_arch, activation class name)`` from ``policy_kwargs`` (plain JSON, or SB3's text fields)."""
    if kwargs is None:
        return default_arch, default_act
    if not isinstance(kwargs, Mapping):
        raise PolicyError(f"{path}: policy_kwargs is {type(kwargs).__name__}, not an object{hint}")
    activation, problems = _activation(kwargs, default_act)
    problems += _extractor_problems(kwargs)
    known = {"net_arch", "activation_fn", "features_extractor_class", "features_extractor_kwargs", *_INERT_KWARGS, *inert}
    unknown = sorted(str(k) for k in kwargs if not str(k).startswith(":") and k not in known)
    if unknown:
        problems.append(f"policy_kwargs {', '.join(unknown)} (not read without running code)")
    if problems:
        raise PolicyError(f"{path}: this policy cannot be read without running code{hint}", problems)
    return _net_arch(kwargs, default_arch), activation


def _net_arch(kwargs: Mapping[str, Any], default_arch: Any) -> Any:
    """``policy_kwargs``' ``net_arch`` (SB3 1.x's ``[dict(pi=..., vf=...)]`` as its dict), or the default."""
    net_arch = kwargs.get("net_arch", default_arch)
    if net_arch is None:
        net_arch = default_arch
    if isinstance(net_arch, list) and net_arch and isinstance(net_arch[0], Mapping):  # SB3 1.x: [dict(pi=..., vf=...)]
        net_arch = net_arch[0] if len(net_arch) == 1 else net_arch
    return dict(net_arch) if isinstance(net_arch, Mapping) else net_arch


def _activation(kwargs: Mapping[str, Any], default_act: str) -> tuple[str, list[str]]:
    """The activation class name ``activation_fn`` names (one of :data:`ACTIVATIONS`), and what is wrong with it."""
    if "activation_fn" not in kwargs:
        return default_act, []
    found = re.fullmatch(r"<class 'torch\.nn\.modules\.activation\.(\w+)'>", str(kwargs["activation_fn"]))
    if found is None or found.group(1) not in ACTIVATIONS:
        return default_act, [f"activation_fn {kwargs['activation_fn']!r} is not one of torch.nn's {', '.join(ACTIVATIONS)}"]
    return found.group(1), []


def _extractor_problems(kwargs: Mapping[str, Any]) -> list[str]:
    """Why the features extractor is not SB3's FlattenExtractor without arguments (a custom one is code)."""
    problems = []
    extractor = kwargs.get("features_extractor_class")
    if extractor is not None and not re.fullmatch(
        r"<class 'stable_baselines3\.common\.torch_layers\.FlattenExtractor'>", str(extractor)
    ):
        problems.append(f"features_extractor_class {extractor!r} is not FlattenExtractor (a custom feature extractor is code)")
    if kwargs.get("features_extractor_kwargs") not in (None, {}):
        problems.append(f"features_extractor_kwargs {kwargs['features_extractor_kwargs']!r} (FlattenExtractor takes none)")
    return problems


def _state_dict(path: Path) -> dict[str, np.ndarray]:
    """``policy.pth``'s tensors as numpy arrays (:func:`~rlverify.policies.torch_file.read_state_dict`: nothing run).

    Raises:
        PolicyError: not a plain tensor state dict (the cause named, with the ``--trust-code`` hint)."""
    raw = _read_members(path, ("policy.pth",))["policy.pth"]
    try:
        return torch_file.read_state_dict(raw, f"{path}: policy.pth", max_bytes=MAX_INFLATED_BYTES)
    except PolicyError as exc:
        raise PolicyError(f"{exc}; to load it anyway pass {TRUST_CODE}") from None


def _space_kind(entry: Any) -> Space | None:
    """The space class a JSON space entry names (its ``:type:``), if the reader takes it."""
    if not isinstance(entry, Mapping):
        return None
    found = re.fullmatch(r"<class '(?:gymnasium|gym)\.spaces\.\w+\.(\w+)'>", str(entry.get(":type:", "")))
    return Space.named(found.group(1)) if found else None


def _int(value: Any) -> int | None:
    """An integer written as JSON or as text (SB3 writes numpy integers as ``'16'``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,12}\s*", value):
        return int(value)
    return None


def _int_list(value: Any) -> list[int] | None:
    """A list of integers written as JSON (``[3, 2]``) or as numpy's text (``'[3 2]'``)."""
    if isinstance(value, list):
        out = [_int(v) for v in value]
        ints = [v for v in out if v is not None]
        return ints if len(ints) == len(out) else None
    if isinstance(value, str) and re.fullmatch(r"\s*\[[\s\d,-]*\]\s*", value) and len(value) < 100_000:
        return [int(v) for v in re.findall(r"-?\d+", value)]
    return None


def _is_tensor(value: object, shape: tuple[int, ...]) -> TypeGuard[np.ndarray]:
    """Whether ``value`` is a floating-point tensor (array) of ``shape`` (not None: a member the state dict lacks)."""
    return isinstance(value, np.ndarray) and value.shape == shape and np.issubdtype(value.dtype, np.floating)


def _shape(value: Any) -> str:
    return str(tuple(value.shape)) if hasattr(value, "shape") else ("missing" if value is None else type(value).__name__)


def encode(states: np.ndarray, obs: ObsSpace) -> np.ndarray:
    """``(N, d)`` feature rows as the ``(N, obs.encoded_size)`` float32 array an SB3 MlpPolicy's network takes (SB3's
    ``preprocess_obs``: one-hot for Discrete / MultiDiscrete, the features as float32 otherwise).

    The rows must be observations of ``obs`` (checked by the caller)."""
    if obs.kind is Space.DISCRETE:
        ints = np.rint(states[:, 0]).astype(np.int64)
        out = np.zeros((len(states), obs.n), dtype=np.float32)
        out[np.arange(len(states)), ints] = 1.0
        return out
    if obs.kind is Space.MULTI_DISCRETE:
        ints = np.rint(states).astype(np.int64)
        out = np.zeros((len(states), sum(obs.nvec)), dtype=np.float32)
        offsets = np.concatenate([[0], np.cumsum(obs.nvec)[:-1]]).astype(np.int64)
        rows = np.repeat(np.arange(len(states)), len(obs.nvec))
        out[rows, (ints + offsets).reshape(-1)] = 1.0
        return out
    return np.ascontiguousarray(states, dtype=np.float32)
