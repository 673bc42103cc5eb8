"""Policies over a Box action space: they give actions (numbers in ``[low, high]``), not probabilities.

A :class:`ContinuousPolicy` maps ``(N, F)`` observations (features in :attr:`~ContinuousPolicy.features` order) and
``(N, d)`` standard normal draws to ``(N, d)`` float64 actions, as the trained policy samples them
(:meth:`~ContinuousPolicy.act`); ``noise=None`` is the deterministic action (SB3's ``predict(deterministic=True)``).
How a network's outputs become an action is its :class:`ContinuousKind`, one transform for every adapter
(:func:`actions_of`):

* ``gaussian`` (PPO/A2C, SB3's ``DiagGaussianDistribution``): ``mean + exp(log_std) * noise``, then clipped to
  ``[low, high]`` as SB3's ``predict`` clips;
* ``squashed`` (SAC, ``SquashedDiagGaussianDistribution``): ``tanh(mean + exp(log_std) * noise)`` rescaled to
  ``[low, high]``, ``log_std`` clamped to ``[LOG_STD_MIN, LOG_STD_MAX]`` as SAC's actor clamps it;
* ``deterministic`` (TD3/DDPG): the tanh actor's output rescaled to ``[low, high]``; the noise is ignored (the
  exploration noise SB3 adds while training is not part of the trained policy).

A continuous policy is no discrete one: the probability API (:meth:`~ContinuousPolicy.action_probabilities`, what
the exact and abstraction engines ask) raises a one-line :class:`~rlverify.errors.PolicyError`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from enum import StrEnum
from itertools import pairwise

import numpy as np

from rlverify.errors import PolicyError
from rlverify.policies.base import BasePolicy

#: SB3's clamp of SAC's ``log_std`` output (``stable_baselines3.sac.policies.LOG_STD_MIN/MAX``).
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


class ContinuousKind(StrEnum):
    """How a continuous policy's network outputs become an action (see the module docstring)."""

    GAUSSIAN = "gaussian"
    SQUASHED = "squashed"
    DETERMINISTIC = "deterministic"
    #: the user's own callable gives the action from the observation and the noise
    CALLABLE = "callable"


def action_names(d: int) -> tuple[str, ...]:
    """The names of a ``d``-dimensional Box action: ``a[0]`` .. ``a[d-1]`` (as the Gymnasium simulator names them)."""
    return tuple(f"a[{i}]" for i in range(d))


def is_continuous(policy: object) -> bool:
    """Whether ``policy`` gives actions over a Box action space (a :class:`ContinuousPolicy`)."""
    return isinstance(policy, ContinuousPolicy)


def actions_of(
    kind: ContinuousKind,
    mean: np.ndarray,
    log_std: np.ndarray | None,
    noise: np.ndarray | None,
    low: np.ndarray,
    high: np.ndarray,
) -> np.ndarray:
    """``(N, d)`` float64 actions from a network's outputs, as SB3 samples and ``predict`` post-processes them.

    Args:
        kind: the transform (module docstring).
        mean: ``(N, d)`` the Gaussian's mean (``gaussian``/``squashed``; before tanh) or the tanh actor's output in
            ``[-1, 1]`` (``deterministic``).
        log_std: ``(N, d)`` or ``(d,)`` log standard deviations (None for ``deterministic``).
        noise: ``(N, d)`` standard normal draws, or None: the deterministic action (the mean).
        low, high: ``(d,)`` the action space's bounds.

    The rescaled tanh is clipped to ``[low, high]`` too: only float rounding can take it outside.
    """
    mean = np.asarray(mean, dtype=np.float64)
    if kind is ContinuousKind.DETERMINISTIC or noise is None or log_std is None:
        pre = mean
    else:
        std = np.asarray(log_std, dtype=np.float64)
        if kind is ContinuousKind.SQUASHED:
            std = np.clip(std, LOG_STD_MIN, LOG_STD_MAX)
        pre = mean + np.exp(std) * noise
    if kind is ContinuousKind.GAUSSIAN:
        return np.clip(pre, low, high)
    squashed = pre if kind is ContinuousKind.DETERMINISTIC else np.tanh(pre)
    return np.clip(low + 0.5 * (squashed + 1.0) * (high - low), low, high)


class ContinuousPolicy(BasePolicy):
    """A policy over a ``d``-dimensional Box action space ``[low, high]``: :meth:`act` gives its actions.

    Subclasses implement :meth:`_act` (checked around by :meth:`act`, under the policy's timeout). Actions are named
    ``a[0]`` .. ``a[d-1]``.

    Attributes:
        kind: how the network's outputs become an action (:class:`ContinuousKind`).
        low, high: ``(d,)`` float64 bounds of the action space.
        note: what to know about what is verified (e.g. TD3/DDPG: SB3's exploration noise is not part of the
            trained policy), or None.
    """

    no_network = (
        "a continuous policy gives actions, not probabilities over named actions; the abstraction engine bounds "
        "discrete policies' networks"
    )
    kind: ContinuousKind
    note: str | None = None
    #: the algorithm that trained it (``SAC``, ``TD3``, ...), or None
    algorithm: str | None = None

    def __init__(
        self,
        features: Sequence[str],
        low: np.ndarray,
        high: np.ndarray,
        kind: ContinuousKind,
        *,
        name: str,
        note: str | None = None,
    ) -> None:
        low = np.asarray(low, dtype=np.float64).reshape(-1)
        high = np.asarray(high, dtype=np.float64).reshape(-1)
        if low.shape != high.shape or not len(low) or not (low <= high).all():
            raise PolicyError(f"{name}: the action bounds {low.tolist()}, {high.tolist()} are not low <= high of one shape")
        super().__init__(features, action_names(len(low)), name=name)
        self._low, self._high = low, high
        self.kind = ContinuousKind(kind)
        self.note = note

    @property
    def low(self) -> np.ndarray:
        """``(d,)`` float64 lower bounds of the action space."""
        return self._low.copy()

    @property
    def high(self) -> np.ndarray:
        """``(d,)`` float64 upper bounds of the action space."""
        return self._high.copy()

    def act(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """``(N, d)`` float64 actions in ``[low, high]`` for ``(N, F)`` observations.

        Args:
            obs: ``(N, F)`` features in :attr:`features` order.
            noise: ``(N, d)`` standard normal draws (the policy's randomness, one row per observation), or None for
                the deterministic action (``predict(deterministic=True)``).

        Raises:
            PolicyError: shapes that do not fit, noise that is not finite, or actions outside ``[low, high]`` / not
                finite (the policy's own failure), each in one line.
        """
        states = self._states(obs)
        d = len(self._low)
        if noise is not None:
            noise = np.asarray(noise, dtype=np.float64)
            if noise.shape != (len(states), d) or not np.isfinite(noise).all():
                raise PolicyError(
                    f"{self.name}: expected finite noise of shape ({len(states)}, {d}), got {noise.shape}"
                    + ("" if noise.shape != (len(states), d) else " with values that are not finite")
                )
        if not len(states):
            return np.zeros((0, d))
        out = np.asarray(self._run_code(self._act, states, noise), dtype=np.float64)
        if out.shape != (len(states), d):
            raise PolicyError(f"{self.name}: gave actions of shape {out.shape}, expected ({len(states)}, {d})")
        bad = ~np.isfinite(out) | (out < self._low) | (out > self._high)
        if bad.any():
            i = int(np.flatnonzero(bad.any(axis=1))[0])
            raise PolicyError(
                f"{self.name}: the action {out[i].tolist()} for observation {states[i].tolist()} is outside "
                f"[{self._low.tolist()}, {self._high.tolist()}] or not finite",
                row=i,
            )
        return out

    @abc.abstractmethod
    def _act(self, obs: np.ndarray, noise: np.ndarray | None) -> np.ndarray:
        """Hook: ``(N, d)`` actions for ``(N, F)`` observations (:attr:`input_dtype`) and noise (checked by :meth:`act`)."""

    def describe(self) -> str:
        """One line: the policy, its kind, its dimensions and bounds (and its note)."""
        bounds = f"[{self._low.tolist()}, {self._high.tolist()}]"
        shape = f"{len(self.features)} features -> {len(self._low)} action dimensions in {bounds}"
        text = f"{self.name}: {self.kind} continuous policy ({self.algorithm or 'actor'}), {shape}"
        return text + (f" ({self.note})" if self.note else "")

    def refusal(self) -> PolicyError:
        """Why the exact and abstraction engines refuse this policy (one line)."""
        return PolicyError(
            f"{self.name}: a continuous policy ({self.kind}, Box actions {', '.join(self.actions)}) gives actions, not "
            "probabilities over named actions: the exact and abstraction engines verify discrete policies; simulate "
            "it on its Gymnasium environment instead"
        )

    def action_probabilities(self, states: np.ndarray) -> np.ndarray:
        """Refused: a continuous policy gives actions (:meth:`act`). Raises :class:`PolicyError` (one line)."""
        raise self.refusal()

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        raise self.refusal()

    def choose(self, states: np.ndarray, u: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Refused, as :meth:`action_probabilities`."""
        raise self.refusal()


#: numpy float32 versions of the ``torch.nn`` activations (default arguments, as SB3 instantiates them), by class name
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ReLU": lambda x: np.maximum(x, np.float32(0.0)),
    "Tanh": np.tanh,
    "Sigmoid": lambda x: (np.float32(0.5) * (np.float32(1.0) + np.tanh(np.float32(0.5) * x))).astype(np.float32),
    "LeakyReLU": lambda x: np.where(x >= 0, x, np.float32(0.01) * x),
    "ELU": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, np.float32(0.0)))),
    "SiLU": lambda x: x * (np.float32(0.5) * (np.float32(1.0) + np.tanh(np.float32(0.5) * x))),
    "Softplus": lambda x: np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, np.float32(20.0))))),
    "ReLU6": lambda x: np.clip(x, np.float32(0.0), np.float32(6.0)),
    "Hardtanh": lambda x: np.clip(x, np.float32(-1.0), np.float32(1.0)),
    "Softsign": lambda x: x / (np.float32(1.0) + np.abs(x)),
}

#: the activations that are one numpy ufunc, applied in place (the same numbers, no new array) on the hot path
_IN_PLACE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Tanh": lambda h: np.tanh(h, out=h),
    "ReLU": lambda h: np.maximum(h, np.float32(0.0), out=h),
}


class Actor:
    """A numpy float32 actor network: latent layers (each followed by the activation), a mean layer (tanh after it
    when ``squash``), and a log-std layer or vector (or none). Computes ``x W^T + b`` in float32 as torch's Linear.

    Args:
        hidden: ``(weight (out, in), bias (out,))`` per latent layer.
        activation: a key of :data:`ACTIVATIONS` (``torch.nn`` class name).
        mean: the mean layer; log_std: a layer, a ``(d,)`` vector (state-independent), or None.
        squash: tanh on the mean layer's output (TD3/DDPG's actor).
        name: how errors name the network.

    Raises:
        PolicyError: an activation it does not compute (named), layers whose shapes do not chain.
    """

    def __init__(
        self,
        hidden: Sequence[tuple[np.ndarray, np.ndarray]],
        activation: str,
        mean: tuple[np.ndarray, np.ndarray],
        log_std: tuple[np.ndarray, np.ndarray] | np.ndarray | None,
        *,
        squash: bool = False,
        name: str = "actor",
    ) -> None:
        act = ACTIVATIONS.get(activation)
        if act is None:
            raise PolicyError(
                f"{name}: the activation {activation} is not one rlverify computes for a continuous actor "
                f"({', '.join(ACTIVATIONS)}); pass --trust-code to run it with Stable-Baselines3"
            )
        self.activation = activation
        self._act = act
        self._layers = [(np.ascontiguousarray(w.T, dtype=np.float32), np.asarray(b, dtype=np.float32)) for w, b in hidden]
        self._mean = (np.ascontiguousarray(mean[0].T, dtype=np.float32), np.asarray(mean[1], dtype=np.float32))
        self._log_std: tuple[np.ndarray, np.ndarray] | np.ndarray | None
        if isinstance(log_std, tuple):
            self._log_std = (np.ascontiguousarray(log_std[0].T, dtype=np.float32), np.asarray(log_std[1], dtype=np.float32))
        else:
            self._log_std = None if log_std is None else np.asarray(log_std, dtype=np.float32)
        self.squash = squash
        sizes = [w.shape for w, _ in self._layers] + [self._mean[0].shape]
        for (_, n_out), (n_in, _) in pairwise(sizes):
            if n_out != n_in:
                raise PolicyError(f"{name}: layer shapes {[s[::-1] for s in sizes]} do not chain")
        self.inputs = sizes[0][0]
        self.outputs = self._mean[0].shape[1]

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(mean (N, d), log_std (N, d) or (d,) or None)`` float32 for ``(N, inputs)`` observations."""
        h = np.asarray(x, dtype=np.float32)
        inplace = _IN_PLACE.get(self.activation)
        for w, b in self._layers:
            h = h @ w
            h += b  # (the same float32 numbers as h @ w + b, without a second array per layer)
            h = self._act(h) if inplace is None else inplace(h)
        mean = h @ self._mean[0] + self._mean[1]
        if self.squash:
            mean = np.tanh(mean)
        log_std = self._log_std
        if isinstance(log_std, tuple):
            return mean, h @ log_std[0] + log_std[1]
        return mean, log_std


class ActorPolicy(ContinuousPolicy):
    """A continuous policy computed by a numpy :class:`Actor` (the weights of an SB3 zip read without running
    code): the actor's outputs go through :func:`actions_of` for :attr:`kind`."""

    input_dtype = np.float32
    concurrent = True  # numpy matmuls release the GIL and keep no state

    def __init__(
        self,
        actor: Actor,
        features: Sequence[str],
        low: np.ndarray,
        high: np.ndarray,
        kind: ContinuousKind,
        *,
        name: str,
        note: str | None = None,
    ) -> None:
        super().__init__(features, low, high, kind, name=name, note=note)
        problems = []
        if actor.inputs != len(self.features):
            problems.append(f"the actor takes {actor.inputs} inputs, but the features declared are {list(self.features)}")
        if actor.outputs != len(self._low):
            problems.append(f"the actor gives {actor.outputs} outputs for {len(self._low)} action dimensions")
        if problems:
            raise PolicyError(f"{name}: the actor does not fit", problems)
        self.actor = actor

    def _act(self, obs: np.ndarray, noise: np.ndarray | None) -> np.ndarray:
        mean, log_std = self.actor(obs)
        return actions_of(self.kind, mean, log_std, noise, self._low, self._high)


class CallableContinuousPolicy(ContinuousPolicy):
    """A continuous policy given by a Python callable ``fn(obs, noise)``: ``(N, d)`` actions for ``(N, F)``
    observations, with ``noise`` ``(N, d)`` standard normal draws (seeded per episode, step and dimension by the
    simulator) or None for the deterministic action. Its actions are checked against ``[low, high]``, never clipped.
    A Python policy module declaring ``ACTION_LOW`` and ``ACTION_HIGH`` is loaded as one."""

    def __init__(
        self,
        fn: Callable[[np.ndarray, np.ndarray | None], object],
        features: Sequence[str],
        low: Sequence[float] | np.ndarray,
        high: Sequence[float] | np.ndarray,
        *,
        name: str = "continuous callable",
    ) -> None:
        if not callable(fn):
            raise PolicyError(f"{name}: expected a callable fn(obs, noise), got {type(fn).__name__}")
        super().__init__(features, np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64),
                         ContinuousKind.CALLABLE, name=name)  # fmt: skip
        self._fn = fn

    def _act(self, obs: np.ndarray, noise: np.ndarray | None) -> np.ndarray:
        out = self._fn(obs, noise)
        try:
            return np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError):
            raise PolicyError(f"{self.name}: gave {type(out).__name__}, not an (N, d) array of numbers") from None
