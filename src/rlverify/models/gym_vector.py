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
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from rlverify.errors import ModelError, OptionError, did_you_mean
from rlverify.models.gym_simulator import NATIVE_VECTORS, GymSimulator, Maker, Vectorization

if TYPE_CHECKING:
    pass

__all__ = [
    "Coordinate",
    "EpisodeVector",
    "StartTable",
    "StartedSimulator",
    "StateKind",
    "StateLayout",
    "Stepped",
    "open_vector",
    "set_start_states",
    "state_layout",
    "state_layout_of",
]


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
        self._no_info = {k: np.zeros(self.copies) for k in sim.info_keys}  # the native vector gives no info entries
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
        # (no warnings filter per step: CartPoleVectorEnv.step warns of nothing, and the filter costs ~10 us a step)
        obs, reward, terminated, truncated, _ = self.venv.step(np.asarray(actions, dtype=np.int64))
        return Stepped(
            np.asarray(obs, dtype=np.float64),
            np.asarray(reward, dtype=np.float64),
            np.asarray(terminated, dtype=bool),
            np.asarray(truncated, dtype=bool),
            self._no_info,
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
            if isinstance(sim, StartedSimulator):  # episodes from given start states (heat maps): the copies, wrapped
                return StartedVector(_open(sim, copies), sim.starts)
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


# --- start states: episodes from a given state (heat maps over initial conditions) -------------------------------


class StateKind(StrEnum):
    """How an environment's state is set: ``classic`` (classic control: ``unwrapped.state`` is written and the
    observation recomputed from it) or ``mujoco`` (``set_state(qpos, qvel)``, then ``_get_obs()``)."""

    CLASSIC = "classic"
    MUJOCO = "mujoco"


@dataclass(frozen=True)
class Coordinate:
    """One coordinate of an environment's state: its name and unit ("": none given, e.g. a MuJoCo joint's)."""

    name: str
    unit: str = ""

    @property
    def shown(self) -> str:
        """``theta (rad)``: the name with its unit, for axes and messages."""
        return f"{self.name} ({self.unit})" if self.unit else self.name


@dataclass(frozen=True)
class StateLayout:
    """An environment's state as rlverify sets it: ``env`` (its class name), ``kind`` and the ``coordinates`` in
    the order of its state vector (classic control: ``unwrapped.state``; MuJoCo: ``qpos`` then ``qvel``)."""

    env: str
    kind: StateKind
    coordinates: tuple[Coordinate, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The coordinates' names, in state order."""
        return tuple(c.name for c in self.coordinates)

    def index(self, name: str, *, option: str = "--axes") -> int:
        """The position of coordinate ``name`` in the state vector.

        Raises:
            OptionError: ``name`` is not a coordinate of this state (naming the coordinates).
        """
        if name in self.names:
            return self.names.index(name)
        shown = ", ".join(c.shown for c in self.coordinates[:12]) + (", ..." if len(self.coordinates) > 12 else "")
        raise OptionError(
            f"{option} {name}: not a state coordinate of {self.env}{did_you_mean(name, self.names)}; its state: {shown}"
        )


_ANGLE, _RATE = "rad", "rad/s"
#: classic control environments (their class in ``gymnasium.envs.classic_control``): the state's coordinates
#: ``(name, unit)`` in the order of ``unwrapped.state``, and the environment's own method that computes the
#: observation from the state (None: the observation is the state, as float32, as their ``step`` returns it)
CLASSIC: dict[str, tuple[tuple[tuple[str, str], ...], str | None]] = {
    "CartPoleEnv": ((("x", "m"), ("x_dot", "m/s"), ("theta", _ANGLE), ("theta_dot", _RATE)), None),
    "AcrobotEnv": ((("theta1", _ANGLE), ("theta2", _ANGLE), ("theta1_dot", _RATE), ("theta2_dot", _RATE)), "_get_ob"),
    "MountainCarEnv": ((("position", "m"), ("velocity", "m/s")), None),
    "Continuous_MountainCarEnv": ((("position", "m"), ("velocity", "m/s")), None),
    "PendulumEnv": ((("theta", _ANGLE), ("theta_dot", _RATE)), "_get_obs"),
}


def _classic_class(u: Any) -> str | None:
    """The classic control class ``u`` is (or derives from), None if none."""
    for cls in type(u).__mro__:
        if cls.__name__ in CLASSIC and cls.__module__.startswith("gymnasium.envs.classic_control"):
            return cls.__name__
    return None


def _is_mujoco(u: Any) -> bool:
    """Whether ``u`` is a MuJoCo environment whose state is ``set_state(qpos, qvel)`` (Gymnasium's ``MujocoEnv``)."""
    data, model = getattr(u, "data", None), getattr(u, "model", None)
    return (
        callable(getattr(u, "set_state", None))
        and callable(getattr(u, "_get_obs", None))
        and hasattr(data, "qpos")
        and hasattr(data, "qvel")
        and isinstance(getattr(model, "nq", None), int)
        and isinstance(getattr(model, "nv", None), int)
    )


def state_layout(env: Any, name: str = "") -> StateLayout:
    """The settable state of a Gymnasium environment ``env`` (wrapped or not).

    Raises:
        ModelError: an environment whose state rlverify cannot set (not classic control, not MuJoCo), in one line
            with the reason.
    """
    u = getattr(env, "unwrapped", env)
    shown = name or type(u).__name__
    classic = _classic_class(u)
    if classic is not None:
        coords, _ = CLASSIC[classic]
        return StateLayout(classic, StateKind.CLASSIC, tuple(Coordinate(n, unit) for n, unit in coords))
    if _is_mujoco(u):
        nq, nv = int(u.model.nq), int(u.model.nv)
        coords_m = tuple(Coordinate(f"qpos[{i}]") for i in range(nq)) + tuple(Coordinate(f"qvel[{i}]") for i in range(nv))
        return StateLayout(type(u).__name__, StateKind.MUJOCO, coords_m)
    raise ModelError(
        f"{shown}: its state cannot be set ({type(u).__name__} is neither a classic control environment with a state "
        "rlverify knows (CartPole, Acrobot, MountainCar, Pendulum: unwrapped.state) nor a MuJoCo one (set_state(qpos, "
        "qvel))), so episodes cannot start from a given state"
    )


def state_layout_of(sim: GymSimulator) -> StateLayout:
    """:func:`state_layout` of one copy of ``sim`` (made, read and closed).

    Raises:
        ModelError: the environment cannot be made, or its state cannot be set.
    """
    try:
        with quiet():
            env = sim.factory() if sim.factory is not None else Maker(sim.env_id, sim.env_kwargs)()
    except Exception as exc:  # the environment's own constructor: its failure is bad input
        raise ModelError(f"{sim.name}: making the environment failed: {type(exc).__name__}: {one_line(exc)}") from None
    try:
        return state_layout(env, sim.name)
    finally:
        with quiet(), contextlib.suppress(Exception):
            env.close()


def _observed(u: Any, kind: StateKind, method: str | None) -> np.ndarray:
    """The flat float64 observation of ``u``'s current state, as the environment computes it."""
    if kind is StateKind.MUJOCO:
        obs = u._get_obs()
    elif method is not None:
        obs = getattr(u, method)()
    else:
        obs = np.asarray(u.state, dtype=np.float32)
    return np.asarray(obs, dtype=np.float64).ravel()


def _set_one(env: Any, columns: Sequence[int], values: np.ndarray, reset_obs: np.ndarray, name: str) -> np.ndarray:
    """Set state coordinates ``columns`` of one environment (just reset: ``reset_obs`` its observation) to ``values``;
    the new observation, recomputed by the environment from its new state.

    Raises:
        ModelError: the reset observation is not the environment's own observation of its state (a wrapper changes
            it: the new one could not be made consistently), or the state cannot be set.
    """
    u = getattr(env, "unwrapped", env)
    layout = state_layout(env, name)
    method = CLASSIC[layout.env][1] if layout.kind is StateKind.CLASSIC else None
    if not np.array_equal(_observed(u, layout.kind, method), np.asarray(reset_obs, dtype=np.float64).ravel()):
        raise ModelError(
            f"{name}: the observation after reset is not {layout.env}'s own observation of its state (a wrapper "
            "transforms it?), so an observation consistent with a given start state cannot be computed"
        )
    if layout.kind is StateKind.MUJOCO:
        nq = int(u.model.nq)
        state = np.concatenate(
            [np.asarray(u.data.qpos, dtype=np.float64).ravel(), np.asarray(u.data.qvel, dtype=np.float64).ravel()]
        )
        state[list(columns)] = values
        u.set_state(state[:nq].copy(), state[nq:].copy())
    else:
        state = np.array(u.state, dtype=np.float64).ravel()
        state[list(columns)] = values
        u.state = state
    return _observed(u, layout.kind, method)


def set_start_states(vec: EpisodeVector, slots: np.ndarray, columns: Sequence[int], values: np.ndarray) -> np.ndarray:
    """After the seeded reset of ``slots`` ``(n,)``, set the state coordinates ``columns`` (``k`` positions in the
    state vector, :class:`StateLayout`) of each to its row of ``values`` ``(n, k)`` float64 (the other coordinates
    stay as the seeded reset drew them); returns the ``(B, F)`` float64 observations of every slot, those of
    ``slots`` recomputed from their new state by the environment (classic control: its ``state``; MuJoCo:
    ``set_state`` and ``_get_obs``; CartPole's own vectorised implementation: its ``state[:, slots]``).

    Raises:
        OptionError: ``values`` of the wrong shape, or not finite.
        ModelError: copies whose state cannot be set (worker processes; an environment without a settable state;
            a wrapper that transforms the observation).
    """
    slots = np.asarray(slots, dtype=np.int64).ravel()
    cols = [int(c) for c in columns]
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (len(slots), len(cols)):
        raise OptionError(f"start states: expected values of shape ({len(slots)}, {len(cols)}), got {values.shape}")
    if not np.isfinite(values).all():
        raise OptionError("start states: a start value is not a finite number")
    if isinstance(vec, StartedVector):
        return set_start_states(vec.inner, slots, cols, values)
    if isinstance(vec, NativeCartPole):
        state = vec.venv.state  # (4, B) float64: slot j's state is state[:, j]
        if cols and not 0 <= min(cols) <= max(cols) < state.shape[0]:
            raise OptionError(f"start states: coordinate positions {cols} outside CartPole's state of {state.shape[0]}")
        state[np.ix_(np.asarray(cols, dtype=np.int64), slots)] = values.T
        return np.asarray(state.T.astype(np.float32), dtype=np.float64)
    if not isinstance(vec, SlotCopies):
        raise ModelError(
            f"{getattr(getattr(vec, 'sim', None), 'name', type(vec).__name__)}: the copies run in worker processes "
            "(async): their states cannot be set from here; use --vectorization sync"
        )
    obs = vec._obs
    for j, slot in enumerate(slots.tolist()):
        obs[slot] = _set_one(vec.envs[slot], cols, values[j], obs[slot], vec.sim.name)
    return obs


@dataclass(eq=False)
class StartTable:
    """Where the episodes of :class:`StartedSimulator` start: ``columns`` (positions in the state vector) set to a
    row of ``values`` ``(M, k)`` float64 (one row per start, e.g. a heat map's cell).

    Which episode takes which row is loaded per task (:meth:`load`: the episodes' environment seeds, each with its
    row), before the task simulates them: the copies see the episodes only through their seeds. Mutable for that
    reason (the tasks of one process run one after another); ``applied`` counts the episodes started since.
    """

    columns: tuple[int, ...]
    values: np.ndarray
    seeds: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    applied: int = 0

    def load(self, seeds: Sequence[int], rows: np.ndarray) -> None:
        """The episodes about to run: environment seed ``seeds[i]`` starts in ``values[rows[i]]``.

        Raises:
            ModelError: two episodes with the same environment seed (their starts would be ambiguous).
        """
        s = np.asarray(seeds, dtype=np.int64)
        order = np.argsort(s, kind="stable")
        s, r = s[order], np.asarray(rows, dtype=np.int64)[order]
        if len(s) > 1 and (s[1:] == s[:-1]).any():
            raise ModelError("two episodes of one task have the same environment seed: choose another --seed")
        self.seeds, self.rows, self.applied = s, r, 0

    def rows_of(self, seeds: Sequence[int | None]) -> np.ndarray:
        """``(n,)`` int64: the row of each seed's episode (-1: not a loaded episode, e.g. an idle slot's reset)."""
        out = np.full(len(seeds), -1, dtype=np.int64)
        if not len(self.seeds) or not len(seeds):
            return out
        given = np.array([-1 if x is None else int(x) for x in seeds], dtype=np.int64)
        at = np.minimum(np.searchsorted(self.seeds, given), len(self.seeds) - 1)
        hit = self.seeds[at] == given
        out[hit] = self.rows[at[hit]]
        return out


@dataclass(frozen=True, eq=False)
class StartedSimulator(GymSimulator):
    """A :class:`GymSimulator` whose episodes start from given values of some state coordinates (:class:`StartTable`;
    the rest as the seeded reset draws them): :func:`open_vector` wraps its copies in a :class:`StartedVector`."""

    starts: StartTable | None = None


class StartedVector(EpisodeVector):
    """Copies whose reset slots are then set to their episode's start state (:func:`set_start_states`), found by the
    episode's seed in the :class:`StartTable`; slots of other seeds (idle slots) stay as reset."""

    def __init__(self, inner: EpisodeVector, table: StartTable | None) -> None:
        if table is None:
            raise ModelError("StartedSimulator without starts: nothing to start from")
        self.inner, self.table, self.copies = inner, table, inner.copies
        self.steps_idle = inner.steps_idle

    def reset(self, mask: np.ndarray, seeds: Sequence[int | None]) -> np.ndarray:
        obs = self.inner.reset(mask, seeds)
        rows = self.table.rows_of(seeds)
        chosen = rows >= 0
        if not chosen.any():
            return obs
        slots = np.flatnonzero(mask)[chosen]
        obs = set_start_states(self.inner, slots, self.table.columns, self.table.values[rows[chosen]])
        self.table.applied += int(chosen.sum())
        return obs

    def step(self, actions: np.ndarray, active: np.ndarray) -> Stepped:
        return self.inner.step(actions, active)

    def close(self) -> None:
        self.inner.close()
