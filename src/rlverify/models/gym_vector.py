"""Lockstep copies of a Gymnasium environment, each slot reset with its own episode's seed.

:func:`open_vector` makes them through Gymnasium's vector API: the environment's own vectorised implementation
where rlverify knows how to start each of its slots from a state of its own (CartPole's ``CartPoleVectorEnv``: the
start state of episode ``i`` is what one copy's ``reset(seed=s_i)`` draws, written into the slot), else
``SyncVectorEnv`` or ``AsyncVectorEnv`` copies reset slot by slot (``reset(seed=[...], options={"reset_mask":
mask})``). Either way episode ``i`` depends only on its seed, never on which slot or batch it ran in, and a slot
is reset before it is stepped again (no episode is cut or counted twice by an autoreset).
"""

from __future__ import annotations

import contextlib
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rlverify.errors import ModelError
from rlverify.models.gym_simulator import NATIVE_VECTORS, GymSimulator, Maker, Vectorization

if TYPE_CHECKING:
    pass

__all__ = ["EpisodeVector", "Stepped", "open_vector"]


@dataclass(frozen=True)
class Stepped:
    """What one lockstep step gave, per slot: ``obs`` ``(B, F)`` float64, ``reward``, ``terminated``, ``truncated``
    ``(B,)`` and the ``info`` entries asked for, ``(B,)`` float64 each (0 where a slot's info has none)."""

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, np.ndarray]


class SlotError(ModelError):
    """A failure of one slot's environment (the episode simulator names the slot's episode and step)."""

    def __init__(self, slot: int, message: str) -> None:
        super().__init__(message)
        self.slot = slot


class EpisodeVector(ABC):
    """``copies`` slots of an environment stepped in lockstep; a slot is reset (seeded) before it is stepped again
    after its episode ended."""

    copies: int
    #: whether :meth:`step` steps idle slots too (then a slot whose episode ended must be reset before the next step)
    steps_idle: bool = True

    @abstractmethod
    def reset(self, mask: np.ndarray, seeds: Sequence[int | None]) -> np.ndarray:
        """Reset the slots ``mask`` ``(B,)`` with ``seeds`` (one per reset slot, in slot order; None: any start, for
        a slot left idle); ``(B, F)`` float64 observations of every slot (those not reset: unchanged)."""

    @abstractmethod
    def step(self, actions: np.ndarray, active: np.ndarray) -> Stepped:
        """Step the slots ``active`` ``(n,)`` (indices) with their actions (``(B,)`` ints or ``(B, d)`` floats, one
        per slot); an implementation that steps every slot (:attr:`steps_idle`) steps the others too."""

    def close(self) -> None:  # noqa: B027 - optional: nothing to release by default
        """Release the copies (worker processes, windows)."""


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Gymnasium's own warnings (passive checker, deprecations) kept out of rlverify's output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


class GymnasiumVector(EpisodeVector):
    """Copies through ``SyncVectorEnv``/``AsyncVectorEnv`` (or the user's own vector environment)."""

    def __init__(self, sim: GymSimulator, venv: Any) -> None:
        self.sim, self.venv, self.copies = sim, venv, int(venv.num_envs)
        self._obs = np.zeros((self.copies, len(sim.feature_names)))

    def reset(self, mask: np.ndarray, seeds: Sequence[int | None]) -> np.ndarray:
        full: list[int | None] = [None] * self.copies
        for slot, seed in zip(np.flatnonzero(mask), seeds, strict=True):
            full[int(slot)] = None if seed is None else int(seed)
        with quiet():
            obs, _ = self.venv.reset(seed=full, options={"reset_mask": np.asarray(mask, dtype=np.bool_)})
        self._obs = flat_observations(obs, self.copies)
        return self._obs

    def step(self, actions: np.ndarray, active: np.ndarray) -> Stepped:
        with quiet():
            obs, reward, terminated, truncated, info = self.venv.step(actions)
        return Stepped(
            flat_observations(obs, self.copies),
            np.asarray(reward, dtype=np.float64).reshape(self.copies),
            np.asarray(terminated, dtype=bool).reshape(self.copies),
            np.asarray(truncated, dtype=bool).reshape(self.copies),
            info_columns(info, self.sim.info_keys, self.copies),
        )

    def close(self) -> None:
        with quiet(), contextlib.suppress(Exception):
            self.venv.close()


class SlotCopies(EpisodeVector):
    """Copies made by the environment's factory and stepped one by one, only those with an open episode (no
    ``SyncVectorEnv``: it would step the idle ones too, and an idle copy of an environment costs a full step)."""

    steps_idle = False

    def __init__(self, sim: GymSimulator, envs: list[Any]) -> None:
        self.sim, self.envs, self.copies = sim, envs, len(envs)
        self._f = len(sim.feature_names)
        self._obs = np.zeros((self.copies, self._f))
        self._reward = np.zeros(self.copies)
        self._terminated = np.zeros(self.copies, dtype=bool)
        self._truncated = np.zeros(self.copies, dtype=bool)
        self._info = {k: np.zeros(self.copies) for k in sim.info_keys}
        self._discrete = sim.action_low is None

    def reset(self, mask: np.ndarray, seeds: Sequence[int | None]) -> np.ndarray:
        with quiet():
            for slot, seed in zip(np.flatnonzero(mask).tolist(), seeds, strict=True):
                obs, _ = self.envs[slot].reset(seed=seed)
                self._obs[slot] = self._flat(slot, obs)
        return self._obs

    def step(self, actions: np.ndarray, active: np.ndarray) -> Stepped:
        for k in self._info.values():
            k[active] = 0.0
        with quiet():
            for slot in np.asarray(active).tolist():
                action = int(actions[slot]) if self._discrete else np.asarray(actions[slot], dtype=np.float32)
                obs, reward, terminated, truncated, info = self.envs[slot].step(action)
                self._obs[slot] = self._flat(slot, obs)
                self._reward[slot] = _number(slot, reward, "reward")
                self._terminated[slot], self._truncated[slot] = bool(terminated), bool(truncated)
                for key, column in self._info.items():
                    if isinstance(info, dict) and key in info:
                        column[slot] = _number(slot, info[key], f'info["{key}"]')
        return Stepped(self._obs, self._reward, self._terminated, self._truncated, self._info)

    def _flat(self, slot: int, obs: Any) -> np.ndarray:
        try:
            row = np.asarray(obs, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise SlotError(slot, "the environment returned an observation that is not numbers") from None
        if row.size != self._f:
            raise SlotError(
                slot,
                f"the observation has {row.size} numbers, the observation space {self._f}: the environment changed "
                "its observation's shape",
            )
        return row

    def close(self) -> None:
        with quiet():
            for env in self.envs:
                with contextlib.suppress(Exception):
                    env.close()


def _number(slot: int, value: Any, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SlotError(slot, f"{what} is not a number: {str(value)[:80]}") from None


class NativeCartPole(EpisodeVector):
    """Gymnasium's ``CartPoleVectorEnv`` (numpy, all slots in one array), each slot started in the state one copy
    of ``CartPole`` draws on ``reset(seed=s)``: the same start distribution, one seed per episode. Idle slots are
    stepped with the others and reset by the implementation's own autoreset (never read)."""

    steps_idle = False

    def __init__(self, sim: GymSimulator, venv: Any, single: Any) -> None:
        self.sim, self.venv, self.single, self.copies = sim, venv, single, int(venv.num_envs)
        with quiet():
            venv.reset(seed=0)

    def reset(self, mask: np.ndarray, seeds: Sequence[int | None]) -> np.ndarray:
        venv = self.venv
        slots = np.flatnonzero(mask)
        starts = np.empty((4, len(slots)))
        with quiet():
            for j, seed in enumerate(seeds):
                self.single.reset(seed=None if seed is None else int(seed))
                starts[:, j] = self.single.unwrapped.state
        venv.state[:, slots] = starts
        venv.steps[slots] = 0
        venv.prev_done[slots] = False
        return np.asarray(venv.state.T.astype(np.float32), dtype=np.float64)

    def step(self, actions: np.ndarray, active: np.ndarray) -> Stepped:
        with quiet():
            obs, reward, terminated, truncated, _ = self.venv.step(np.asarray(actions, dtype=np.int64))
        return Stepped(
            np.asarray(obs, dtype=np.float64),
            np.asarray(reward, dtype=np.float64),
            np.asarray(terminated, dtype=bool),
            np.asarray(truncated, dtype=bool),
            {k: np.zeros(self.copies) for k in self.sim.info_keys},
        )

    def close(self) -> None:
        with quiet(), contextlib.suppress(Exception):
            self.venv.close()
            self.single.close()


#: the native vectorised implementations rlverify can seed slot by slot, by class name
NATIVE = {"CartPoleVectorEnv": NativeCartPole}
assert set(NATIVE) == NATIVE_VECTORS


def open_vector(sim: GymSimulator, copies: int) -> EpisodeVector:
    """``copies`` lockstep copies of ``sim`` as its :attr:`~GymSimulator.vectorization` says.

    Raises:
        ModelError: the environment cannot be made (its own error, in one line).
    """
    try:
        with quiet():
            return _open(sim, copies)
    except ModelError:
        raise
    except Exception as exc:  # the environment's own constructor: its failure is bad input
        raise ModelError(f"{sim.name}: making {copies} copies failed: {type(exc).__name__}: {one_line(exc)}") from None


def _open(sim: GymSimulator, copies: int) -> EpisodeVector:
    import gymnasium  # lazy: gymnasium, start-up
    from gymnasium.vector import AsyncVectorEnv

    if sim.native is not None:
        venv = gymnasium.make_vec(sim.env_id, num_envs=copies, vectorization_mode="vector_entry_point", **sim.env_kwargs)
        return NATIVE[sim.native](sim, venv, gymnasium.make(sim.env_id, **sim.env_kwargs))
    factory = sim.factory if sim.factory is not None else Maker(sim.env_id, sim.env_kwargs)
    if sim.vectorization is Vectorization.ASYNC:
        return GymnasiumVector(sim, AsyncVectorEnv([factory] * copies, autoreset_mode="Disabled"))
    return SlotCopies(sim, [factory() for _ in range(copies)])


def flat_observations(obs: Any, copies: int) -> np.ndarray:
    """``(B, F)`` float64 observations from a vector environment's batch (a Box's ``(B, *shape)``, a Discrete's
    ``(B,)``).

    Raises:
        ModelError: observations that are not numbers of one shape (a Dict or Tuple space, a shape that changed).
    """
    if isinstance(obs, (dict, tuple)):
        raise ModelError("the environment's observations are a Dict or Tuple space; rlverify simulates flat Box/Discrete ones")
    try:
        arr = np.asarray(obs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"the environment returned observations that are not numbers ({one_line(exc)})") from None
    return arr.reshape(copies, -1)


def info_columns(info: Any, keys: Sequence[str], copies: int) -> dict[str, np.ndarray]:
    """``(B,)`` float64 per asked ``info`` key from a vector environment's info dict (0 where a slot has none)."""
    out: dict[str, np.ndarray] = {}
    for key in keys:
        values = np.zeros(copies)
        if isinstance(info, dict) and key in info:
            have = np.asarray(info.get(f"_{key}", np.ones(copies, dtype=bool)), dtype=bool).reshape(copies)
            try:
                raw = np.asarray(info[key], dtype=np.float64).reshape(copies)
            except (TypeError, ValueError):
                raise ModelError(f'info["{key}"] is not a number in every copy: {str(info[key])[:80]}') from None
            values[have] = raw[have]
        out[key] = values
    return out


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, at most 200 characters."""
    text = str(exc).strip().splitlines()
    return (text[0][:200] if text else "") or type(exc).__name__
