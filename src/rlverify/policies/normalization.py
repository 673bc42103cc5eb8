"""Stable-Baselines3 ``VecNormalize`` observation statistics, read without running code, and policies that see
observations normalised by them.

``VecNormalize.save`` pickles the whole wrapper. :func:`load_vec_normalize` unpickles it with a restricted
unpickler: the only globals it resolves are numpy's array/dtype/scalar constructors; SB3's ``VecNormalize`` and
``RunningMeanStd``, gymnasium's ``Box`` and numpy's random generator state are replaced by inert stand-ins that only
hold their fields (no class of SB3 or gymnasium is imported, no ``__setstate__`` of theirs runs). Anything else a
pickle names (``os.system``, ``builtins.eval``, ...) is refused by a one-line :class:`~rlverify.errors.PolicyError`
before it is resolved.

:func:`normalized` wraps a policy (discrete or continuous) so that it is given observations as
``VecNormalize.normalize_obs`` gives them: ``clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)``, as
float32. Reward normalisation does not change the policy and is not read.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import InputFileError, OptionError, PolicyError
from rlverify.policies.base import BasePolicy, PolicyWrapper
from rlverify.policies.continuous import ContinuousPolicy

#: The most bytes a statistics file may have (a VecNormalize pickle of a flat observation is a few KB).
MAX_STATS_BYTES = 64 * 2**20


class _Fields:
    """An inert stand-in for a pickled object: it keeps the fields the pickle gives it, nothing runs."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.args = args

    def __setstate__(self, state: object) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):  # (dict, slots)
            state = {**(state[0] or {}), **state[1]}
        if isinstance(state, dict):
            self.__dict__.update({str(k): v for k, v in state.items()})


class _VecNormalize(_Fields):
    """Stand-in for ``stable_baselines3.common.vec_env.vec_normalize.VecNormalize``."""


class _RunningMeanStd(_Fields):
    """Stand-in for ``stable_baselines3.common.running_mean_std.RunningMeanStd``."""


#: gymnasium's (and gym's) spaces a VecNormalize pickle holds, by module and class
_SPACES = (("box", "Box"), ("discrete", "Discrete"), ("multi_discrete", "MultiDiscrete"), ("multi_binary", "MultiBinary"))


def _inert(*args: object, **kwargs: object) -> _Fields:
    """Stand-in for numpy's random-generator constructors (a space's ``np_random``: not needed)."""
    return _Fields()


def _allowed() -> dict[tuple[str, str], Callable[..., Any] | type]:
    """The globals the unpickler resolves, by ``(module, name)``."""
    # numpy's own reconstructors (what its arrays and scalars pickle as), under either module name (numpy 2:
    # numpy._core), taken from numpy's own reduce rather than imported by name
    reconstruct: Callable[..., Any] = np.ndarray((0,)).__reduce__()[0]  # type: ignore[assignment]
    scalar: Callable[..., Any] = np.float64(0.0).__reduce__()[0]  # type: ignore[assignment]
    arrays: dict[tuple[str, str], Callable[..., Any] | type] = {}
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        arrays[(module, "_reconstruct")] = reconstruct
        arrays[(module, "scalar")] = scalar
    arrays[("numpy", "ndarray")] = np.ndarray
    arrays[("numpy", "dtype")] = np.dtype
    stand_ins: dict[tuple[str, str], Callable[..., Any] | type] = {
        ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"): _VecNormalize,
        ("stable_baselines3.common.running_mean_std", "RunningMeanStd"): _RunningMeanStd,
        **{(f"{package}.spaces.{module}", cls): _Fields for package in ("gymnasium", "gym") for module, cls in _SPACES},
        ("numpy.random._pickle", "__generator_ctor"): _inert,
        ("numpy.random._pickle", "__bit_generator_ctor"): _inert,
        ("numpy.random._pickle", "__randomstate_ctor"): _inert,
        ("numpy.random._pcg64", "PCG64"): _Fields,
        ("numpy.random.bit_generator", "SeedSequence"): _Fields,
        ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"): _inert,
    }
    return {**arrays, **stand_ins}


class _Unpickler(pickle.Unpickler):
    """Resolves only :func:`_allowed` globals; refuses the rest, and persistent ids."""

    def __init__(self, raw: bytes, path: Path) -> None:
        super().__init__(io.BytesIO(raw))
        self._path = path
        self._globals = _allowed()

    def find_class(self, module: str, name: str) -> Any:
        found = self._globals.get((module, name))
        if found is None:
            raise PolicyError(
                f"{self._path}: the VecNormalize statistics file refers to {module}.{name}, which rlverify does not "
                "unpickle (only numpy arrays and SB3's VecNormalize/RunningMeanStd fields are read: no code runs)"
            )
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise PolicyError(f"{self._path}: the VecNormalize statistics file has persistent ids; not a VecNormalize pickle")


@dataclass(frozen=True)
class VecNormalizeStats:
    """The observation statistics of an SB3 ``VecNormalize`` (what ``normalize_obs`` uses).

    Attributes:
        mean, var: ``(F,)`` float64 running mean and variance of the observations.
        count: the number of observations they were computed from.
        clip_obs: normalised observations are clipped to ``[-clip_obs, clip_obs]``.
        epsilon: added to the variance before its square root.
        norm_obs: whether observations are normalised at all (False: the identity).
        source: the file it was read from, for messages.
    """

    mean: np.ndarray
    var: np.ndarray
    count: float
    clip_obs: float
    epsilon: float
    norm_obs: bool = True
    source: str = "VecNormalize statistics"

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """``(N, F)`` observations as ``VecNormalize.normalize_obs`` gives them (float32 values, as float64)."""
        if not self.norm_obs:
            return np.asarray(obs, dtype=np.float64)
        out = np.clip(
            (np.asarray(obs, dtype=np.float64) - self.mean) / np.sqrt(self.var + self.epsilon), -self.clip_obs, self.clip_obs
        )
        return out.astype(np.float32).astype(np.float64)


def load_vec_normalize(path: str | Path) -> VecNormalizeStats:
    """Read the observation statistics of an SB3 ``VecNormalize.save`` file without running code from it.

    Raises:
        InputFileError: the file is missing, unreadable or too large.
        PolicyError: a pickle that names anything but numpy arrays and VecNormalize's fields (e.g. ``os.system``),
            a truncated or malformed pickle, dict observations (``norm_obs_keys``), or statistics that are not
            finite ``(F,)`` arrays with a non-negative variance — each in one line.
    """
    if not str(path).strip():
        raise OptionError("--vec-normalize: give the statistics file (VecNormalize.save), not an empty name")
    path = Path(path)
    if path.is_dir():
        raise InputFileError(f"{path}: a directory, not a VecNormalize statistics file")
    try:
        if path.stat().st_size > MAX_STATS_BYTES:
            raise InputFileError(f"{path}: {path.stat().st_size / 2**20:,.0f} MiB is too large for VecNormalize statistics")
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read the VecNormalize statistics ({exc.strerror or exc})") from None
    try:
        obj = _Unpickler(raw, path).load()
    except PolicyError:
        raise
    except Exception as exc:  # truncated or malformed pickle (EOFError, UnpicklingError, ...)
        raise PolicyError(f"{path}: not a VecNormalize statistics pickle ({type(exc).__name__}: {str(exc)[:120]})") from None
    return _stats(obj, path)


def _stats(obj: object, path: Path) -> VecNormalizeStats:
    """The statistics of an unpickled VecNormalize stand-in, checked."""
    if not isinstance(obj, _VecNormalize):
        raise PolicyError(f"{path}: holds a {type(obj).__name__}, not a VecNormalize (save it with vec_env.save(path))")
    fields = obj.__dict__
    norm_obs = fields.get("norm_obs", True)
    if norm_obs is False:  # no observation statistics kept: the identity
        empty = np.zeros(0)
        return VecNormalizeStats(empty, empty, 0.0, 0.0, 0.0, norm_obs=False, source=str(path))
    rms = fields.get("obs_rms")
    if isinstance(rms, dict) or fields.get("norm_obs_keys"):
        raise PolicyError(f"{path}: the statistics are per key of a Dict observation; rlverify reads a flat observation")
    if not isinstance(rms, _RunningMeanStd):
        raise PolicyError(f"{path}: the VecNormalize has no observation statistics (obs_rms)")
    mean, var = rms.__dict__.get("mean"), rms.__dict__.get("var")
    clip_obs, epsilon, count = fields.get("clip_obs"), fields.get("epsilon"), rms.__dict__.get("count", 0.0)
    problems = []
    if not isinstance(mean, np.ndarray) or not isinstance(var, np.ndarray) or mean.ndim != 1 or mean.shape != var.shape:
        problems.append(f"mean/var are not two (F,) arrays of one shape ({_shape(mean)}, {_shape(var)})")
    elif not (np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all()):
        problems.append("mean/var are not finite, or the variance is negative")
    for label, value in (("clip_obs", clip_obs), ("epsilon", epsilon)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
            problems.append(f"{label} is {value!r}, not a non-negative number")
    if norm_obs is not True:
        problems.append(f"norm_obs is {norm_obs!r}, not a bool")
    if problems:
        raise PolicyError(f"{path}: the VecNormalize statistics are not usable", problems)
    assert isinstance(mean, np.ndarray) and isinstance(var, np.ndarray)
    return VecNormalizeStats(
        mean=mean.astype(np.float64),
        var=var.astype(np.float64),
        count=float(count) if isinstance(count, (int, float, np.floating)) else 0.0,
        clip_obs=float(clip_obs),  # type: ignore[arg-type]
        epsilon=float(epsilon),  # type: ignore[arg-type]
        norm_obs=bool(norm_obs),
        source=str(path),
    )


def _shape(value: object) -> str:
    return str(value.shape) if isinstance(value, np.ndarray) else type(value).__name__


def _check_fit(policy: BasePolicy, stats: VecNormalizeStats) -> None:
    if len(stats.mean) != len(policy.features):
        raise PolicyError(
            f"{policy.name}: the VecNormalize statistics ({stats.source}) are for {len(stats.mean)} observations, the "
            f"policy has {len(policy.features)} features {list(policy.features)}"
        )


class NormalizedPolicy(PolicyWrapper):
    """A discrete policy given observations normalised by :class:`VecNormalizeStats` (``VecNormalize.normalize_obs``);
    everything else (names, output kind, training) is the wrapped policy's."""

    no_network = "observation normalisation clips (clip_obs): give the network without VecNormalize to bound it"

    def __init__(self, policy: BasePolicy, stats: VecNormalizeStats) -> None:
        super().__init__(policy)
        self.stats = stats

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return np.asarray(self.policy.action_probabilities(self.stats.normalize(states)), dtype=np.float64)

    def choose(self, states: np.ndarray, u: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        inner = self.policy
        assert isinstance(inner, BasePolicy)
        return inner.choose(self.stats.normalize(self._states(states)), u)


class NormalizedContinuousPolicy(ContinuousPolicy):
    """A continuous policy given observations normalised by :class:`VecNormalizeStats`; its name, bounds, kind and
    note are the wrapped policy's."""

    def __init__(self, policy: ContinuousPolicy, stats: VecNormalizeStats) -> None:
        super().__init__(policy.features, policy.low, policy.high, policy.kind, name=policy.name, note=policy.note)
        self.policy = policy
        self.stats = stats
        self.algorithm = policy.algorithm
        self.training = policy.training  # its timeout is kept by the wrapped policy's own act

    @property
    def unwrapped(self) -> BasePolicy:
        return self.policy.unwrapped

    def _act(self, obs: np.ndarray, noise: np.ndarray | None) -> np.ndarray:
        return self.policy.act(self.stats.normalize(obs), noise)


def normalized(policy: BasePolicy, stats: VecNormalizeStats) -> BasePolicy:
    """``policy`` given observations as ``VecNormalize.normalize_obs`` gives them (``stats``); ``policy`` itself when
    ``stats.norm_obs`` is False.

    Raises:
        PolicyError: the statistics are for another number of observations than the policy's features (one line).
    """
    if not stats.norm_obs:
        return policy
    _check_fit(policy, stats)
    if isinstance(policy, ContinuousPolicy):
        return NormalizedContinuousPolicy(policy, stats)
    return NormalizedPolicy(policy, stats)
