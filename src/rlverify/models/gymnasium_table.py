"""A Gymnasium environment's finite transition model (``env.unwrapped.P``) read into a merged table, with what rlverify
knows of FrozenLake, CliffWalking and Taxi (action names, events, decoded features)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlverify.errors import ModelError

#: a Gymnasium environment, wrapped or not (``gymnasium.Env``; gymnasium is imported lazily, for start-up)
GymEnv = Any

#: Action names of the environments rlverify knows, in action-index order (Gymnasium's documentation).
ACTION_NAMES: dict[str, tuple[str, ...]] = {
    "FrozenLakeEnv": ("left", "down", "right", "up"),
    "CliffWalkingEnv": ("up", "right", "down", "left"),
    "TaxiEnv": ("south", "north", "east", "west", "pickup", "dropoff"),
}


@dataclass(frozen=True)
class Table:
    """The finite model of an environment, merged: ``outcomes[s][a]`` = ``{(s', event, done): p}``."""

    n_states: int
    n_actions: int
    actions: tuple[str, ...]
    outcomes: list[list[dict[tuple[int, int, bool], float]]]
    rewards: np.ndarray  # (S, A) float64 expected reward of the step
    gains: np.ndarray  # (S, A) expected positive part
    penalties: np.ndarray  # (S, A) expected magnitude of the negative part
    initial: dict[int, float]  # {} : no start state declared (``no_start`` says why)
    no_start: str
    events: tuple[str, ...]
    features: dict[str, np.ndarray]  # decoded feature -> (S,) int64
    module: str


Classify = Callable[[int, int, int, float, bool], str | None]


@dataclass(frozen=True)
class _Reader:
    """What rlverify knows of one environment class (by its class name): its events (a classifier and their names),
    its decoded features (name -> ``(S,)`` int64), whether it declares a start state, and what it refuses."""

    events: Callable[[GymEnv], tuple[Classify, tuple[str, ...]]]
    features: Callable[[GymEnv, int], dict[str, np.ndarray]]
    no_start: str = "the environment declares no start state (no initial_state_distrib)"
    has_start: Callable[[GymEnv], bool] = lambda u: True
    refuse: Callable[[GymEnv, str], None] = lambda u, env_id: None


def _frozen_events(u: GymEnv) -> tuple[Classify, tuple[str, ...]]:
    desc = np.asarray(u.desc)

    def frozen(s: int, a: int, s2: int, r: float, term: bool) -> str | None:
        cell = desc.flat[s2]
        cell = cell.decode() if isinstance(cell, bytes) else str(cell)
        return {"G": "goal", "H": "hole"}.get(cell) if term else None

    return frozen, ("goal", "hole")


def _cliff_events(u: GymEnv) -> tuple[Classify, tuple[str, ...]]:
    return (lambda s, a, s2, r, term: "cliff" if r == -100 else ("goal" if term else None)), ("cliff", "goal")


def _taxi_events(u: GymEnv) -> tuple[Classify, tuple[str, ...]]:
    return (lambda s, a, s2, r, term: "delivered" if (term and r > 0) else ("illegal" if r == -10 else None)), (
        "delivered",
        "illegal",
    )


def _frozen_features(u: GymEnv, S: int) -> dict[str, np.ndarray]:
    idx = np.arange(S)
    return {"row": idx // int(u.ncol), "col": idx % int(u.ncol)}


def _cliff_features(u: GymEnv, S: int) -> dict[str, np.ndarray]:
    rows, cols = np.unravel_index(np.arange(S), tuple(u.shape))
    return {"row": rows.astype(np.int64), "col": cols.astype(np.int64)}


def _taxi_features(u: GymEnv, S: int) -> dict[str, np.ndarray]:
    decoded = np.array([list(u.decode(int(s))) for s in np.arange(S)], dtype=np.int64)
    return {name: decoded[:, i] for i, name in enumerate(("taxi_row", "taxi_col", "passenger", "destination"))}


def _refuse_fickle(u: GymEnv, env_id: str) -> None:
    if getattr(u, "fickle_passenger", False):
        raise ModelError(
            f"gym:{env_id}: fickle_passenger=True changes the destination in step() outside P; "
            "only fickle_passenger=False has a finite model"
        )


#: the environments rlverify knows, by class name; any other: :data:`_GENERIC`
_READERS: dict[str, _Reader] = {
    "FrozenLakeEnv": _Reader(
        _frozen_events,
        _frozen_features,
        no_start="the map (desc) has no start cell 'S'",
        # a map without an 'S' cell has an initial_state_distrib of 0/0, NaN everywhere
        has_start=lambda u: bool((np.asarray(u.desc) == b"S").any()),
    ),
    "CliffWalkingEnv": _Reader(_cliff_events, _cliff_features),
    "TaxiEnv": _Reader(_taxi_events, _taxi_features, refuse=_refuse_fickle),
}
_GENERIC = _Reader(lambda u: ((lambda s, a, s2, r, term: None), ()), lambda u, S: {})


def read_table(env: GymEnv, env_id: str) -> Table:
    u = getattr(env, "unwrapped", env)
    S, A, P = _finite_model(env, u, env_id)
    cls = type(u).__name__
    reader = _READERS.get(cls, _GENERIC)
    reader.refuse(u, env_id)
    actions = ACTION_NAMES.get(cls, tuple(f"a{i}" for i in range(A)))
    if len(actions) != A:
        actions = tuple(f"a{i}" for i in range(A))
    classify, events = reader.events(u)
    outcomes: list[list[dict[tuple[int, int, bool], float]]] = []
    rewards, gains, penalties = np.zeros((S, A)), np.zeros((S, A)), np.zeros((S, A))
    for s in range(S):
        row = []
        entry = P.get(s) if isinstance(P, Mapping) else (P[s] if s < len(P) else None)
        for a in range(A):
            where = f"gym:{env_id}: P[{s}][{a}]"
            merged, rewards[s, a], gains[s, a], penalties[s, a] = _merged(_listed(entry, a), where, S, classify, events, s, a)
            row.append(merged)
        outcomes.append(row)
    return Table(
        n_states=S,
        n_actions=A,
        actions=actions,
        outcomes=outcomes,
        rewards=rewards,
        gains=gains,
        penalties=penalties,
        initial=_initial_distribution(u, reader, env_id, S),
        no_start=reader.no_start,
        events=events,
        features=reader.features(u, S),
        module=re.sub(r"\W", "_", cls.removesuffix("Env").lower()) or "env",
    )


def _listed(entry: Any, a: int) -> Any:
    """``P[s][a]``: the outcomes listed for action ``a`` in a state's entry (a mapping or a sequence; none: ``[]``)."""
    if isinstance(entry, Mapping):
        return entry.get(a, [])
    return entry[a] if entry is not None and a < len(entry) else []


def _merged(
    listed: Any, where: str, S: int, classify: Classify, events: tuple[str, ...], s: int, a: int
) -> tuple[dict[tuple[int, int, bool], float], float, float, float]:
    """One ``P[s][a]`` (``where`` names it) as ``{(s', event, done): p}`` (an outcome listed twice: one outcome), and
    the step's expected reward (action ``a`` in state ``s``), its positive part and the magnitude of its negative part."""
    merged: dict[tuple[int, int, bool], float] = {}
    reward = gain = penalty = 0.0
    for i, item in enumerate(listed):
        p, s2, r, term = _outcome(item, f"{where}[{i}]", S)
        if p == 0.0:
            continue
        ev = classify(s, a, s2, r, term)
        key = (s2, events.index(ev) + 1 if ev else 0, term)
        merged[key] = merged.get(key, 0.0) + p
        reward += p * r
        gain += p * max(r, 0.0)
        penalty += p * max(-r, 0.0)
    total = sum(merged.values())
    if merged and abs(total - 1.0) > 1e-9:
        raise ModelError(f"{where} sums to {total!r}, not 1")
    return merged, reward, gain, penalty


def _initial_distribution(u: GymEnv, reader: _Reader, env_id: str, S: int) -> dict[int, float]:
    """The start distribution ``{s: p}`` the environment declares; ``{}`` if none (or its reader says it has none)."""
    dist = getattr(u, "initial_state_distrib", None)
    if dist is None or not reader.has_start(u):
        return {}
    dist = np.asarray(dist, dtype=np.float64)
    if dist.shape != (S,) or not np.isfinite(dist).all() or (dist < 0).any() or abs(dist.sum() - 1.0) > 1e-9:
        raise ModelError(f"gym:{env_id}: initial_state_distrib is not a distribution over the {S} states")
    return {int(s): float(dist[s]) for s in np.flatnonzero(dist > 0)}


def _finite_model(env: GymEnv, u: GymEnv, env_id: str) -> tuple[int, int, Any]:
    """The number of states and actions and the transition model ``P`` of the unwrapped environment ``u``.

    Raises:
        ModelError: no ``P``, a space that is not ``Discrete`` (or starts other than at 0), a wrapper
            that changes a space.
    """
    obs: Any = getattr(u, "observation_space", None)
    act: Any = getattr(u, "action_space", None)
    P = getattr(u, "P", None)
    missing = _not_finite(P, obs, act)
    if missing:
        raise ModelError(
            f"gym:{env_id}: not a finite MDP rlverify can read: "
            + "; ".join(missing)
            + " (FrozenLake, CliffWalking and Taxi have one)"
        )
    if getattr(env, "observation_space", obs) != obs or getattr(env, "action_space", act) != act:
        raise ModelError(
            f"gym:{env_id}: a wrapper changes the observation or action space "
            f"({env.observation_space} / {env.action_space}); rlverify models the unwrapped environment: "
            "pass env.unwrapped, or verify the wrapped observation with your own PRISM model"
        )
    if int(obs.start) != 0 or int(act.start) != 0:
        raise ModelError(f"gym:{env_id}: Discrete spaces with a start other than 0 are not supported")
    return int(obs.n), int(act.n), P


def _not_finite(P: Any, obs: Any, act: Any) -> list[str]:
    """What keeps an environment from being a finite MDP: no ``P``, spaces that are not ``Discrete``."""
    from gymnasium import spaces  # lazy: gymnasium, start-up

    missing = []
    if P is None:
        missing.append("no finite transition model env.unwrapped.P (P[s][a] = [(p, s', r, terminated), ...])")
    if not isinstance(obs, spaces.Discrete):
        missing.append(f"observation_space is {obs}, not Discrete")
    if not isinstance(act, spaces.Discrete):
        missing.append(f"action_space is {act}, not Discrete")
    return missing


def _outcome(item: Any, where: str, n_states: int) -> tuple[float, int, float, bool]:
    """One entry ``(probability, next_state, reward, terminated)`` of ``P[s][a]``, checked."""
    try:
        p, s2, r, term = float(item[0]), int(item[1]), float(item[2]), bool(item[3])
    except (TypeError, ValueError, IndexError):
        raise ModelError(f"{where}: expected (probability, next_state, reward, terminated), got {item!r}") from None
    if not (0.0 <= p <= 1.0 + 1e-12) or not np.isfinite(r):
        raise ModelError(f"{where}: probability {p} / reward {r} out of range")
    if not 0 <= s2 < n_states:
        raise ModelError(f"{where}: next state {s2} is outside 0..{n_states - 1}")
    return p, s2, r, term
