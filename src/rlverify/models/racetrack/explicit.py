"""Racetrack as an explicit MDP (:class:`~rlverify.models.ExplicitModel`) for Storm.

States: every ``(x, y, vx, vy)`` driving state reachable from the chosen start cells at velocity
0, plus two absorbing sinks ``goal`` and ``crashed`` (no intermediate steps: the cell-by-cell
check of :func:`rlverify.models.racetrack.env.move` decides the outcome of a move at once).
Each driving state has 9 choices (labelled with :data:`~rlverify.models.racetrack.env.ACTIONS`)
with two branches: success ``1 - noise`` (``v' = v + a``) and failure ``noise`` (``v' = v``),
merged when they lead to the same state. Sinks have one unlabelled self-loop choice.
Valuations are the 15 observation features, so the exact engine can run a Racetrack policy on it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rlverify.arrays import distinct
from rlverify.models.explicit import ExplicitModel, to_storm
from rlverify.models.racetrack.env import ACCELERATIONS, ACTIONS, AT_GOAL, FEATURES, RacetrackEnv, move

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RacetrackMDP:
    """An explicit Racetrack MDP and how its states map back to the map.

    Attributes:
        model: the MDP; states ``0..K-1`` are driving states, ``K`` the goal sink, ``K+1`` the crash sink.
        states: ``(K, 4)`` int64 ``(x, y, vx, vy)`` of the driving states.
        start_index: ``(M,)`` int64 state index of each requested start cell (velocity 0).
        start_cells: ``(M, 2)`` the requested start cells ``(x, y)``.
    """

    model: ExplicitModel
    states: np.ndarray
    start_index: np.ndarray
    start_cells: np.ndarray


def build_racetrack_mdp(env: RacetrackEnv, start_cells: np.ndarray | None = None) -> RacetrackMDP:
    """Enumerate the MDP reachable from ``start_cells`` ``(M, 2)`` (default: all cells a run can start from)."""
    t0 = time.perf_counter()
    track = env.track
    H, W = track.height, track.width
    cells = track.free_cells() if start_cells is None else np.asarray(start_cells, dtype=np.int64).reshape(-1, 2)
    vm = max(H, W) + 1  # faster cars leave the map within one step
    V = 2 * vm + 1

    def key(s: np.ndarray) -> np.ndarray:
        return ((s[:, 1] * W + s[:, 0]) * V + (s[:, 2] + vm)) * V + (s[:, 3] + vm)

    starts = env.start_states(cells)
    frontier = starts[starts[:, 4] == 0, :4]
    known = distinct(key(frontier))
    frontier = frontier[np.unique(key(frontier), return_index=True)[1]]
    all_states = [frontier]
    A = len(ACCELERATIONS)
    while len(frontier):
        rep = np.repeat(frontier, A, axis=0)
        acc = np.tile(ACCELERATIONS, (len(frontier), 1))
        full = np.concatenate([rep, np.zeros((len(rep), 1), dtype=np.int64)], axis=1)
        succ = np.concatenate([move(track, full, rep[:, 2:4] + acc), move(track, full, rep[:, 2:4])])
        succ = succ[succ[:, 4] == 0, :4]
        k = key(succ)
        k, idx = np.unique(k, return_index=True)
        new = ~np.isin(k, known)
        frontier = succ[idx[new]]
        known = np.union1d(known, k[new])
        all_states.append(frontier)
    states = np.concatenate(all_states)
    order = np.argsort(key(states))
    states = states[order]
    keys = key(states)
    K = len(states)
    goal_sink, crash_sink = K, K + 1

    # transitions: for each state and action, success and failure successors
    rep = np.repeat(states, A, axis=0)
    acc = np.tile(ACCELERATIONS, (K, 1))
    full = np.concatenate([rep, np.zeros((len(rep), 1), dtype=np.int64)], axis=1)

    def target(succ: np.ndarray) -> np.ndarray:
        t = np.where(succ[:, 4] == AT_GOAL, goal_sink, crash_sink).astype(np.int64)
        drive = succ[:, 4] == 0
        t[drive] = np.searchsorted(keys, key(succ[drive, :4]))
        return t

    t_ok = target(move(track, full, rep[:, 2:4] + acc))
    t_fail = target(move(track, full, rep[:, 2:4]))
    p = float(env.noise)
    same = t_ok == t_fail
    C = K * A
    n_br = np.where(same, 1, 2)
    if p == 0.0:
        n_br[:] = 1
    indptr = np.zeros(C + 3, dtype=np.int64)
    indptr[1 : C + 1] = np.cumsum(n_br)
    indptr[C + 1] = indptr[C] + 1
    indptr[C + 2] = indptr[C + 1] + 1
    nnz = int(indptr[-1])
    cols = np.empty(nnz, dtype=np.int64)
    data = np.empty(nnz, dtype=np.float64)
    first = indptr[:C]
    cols[first] = np.where(same | (p == 0.0), t_ok, np.minimum(t_ok, t_fail))
    data[first] = np.where(same | (p == 0.0), 1.0, np.where(t_ok < t_fail, 1.0 - p, p))
    two = np.flatnonzero(n_br == 2)
    cols[first[two] + 1] = np.maximum(t_ok[two], t_fail[two])
    data[first[two] + 1] = np.where(t_ok[two] < t_fail[two], p, 1.0 - p)
    cols[nnz - 2], data[nnz - 2] = goal_sink, 1.0
    cols[nnz - 1], data[nnz - 1] = crash_sink, 1.0
    transitions = sp.csr_matrix((data, cols, indptr), shape=(C + 2, K + 2))

    row_groups = np.r_[np.arange(0, C + 1, A), C + 1, C + 2].astype(np.int64)
    action_names = (*ACTIONS, "")
    choice_actions = np.r_[np.tile(np.arange(A), K), [A, A]].astype(np.int32)
    full_states = np.concatenate([states, np.zeros((K, 1), dtype=np.int64)], axis=1)
    valuations = np.zeros((K + 2, len(FEATURES)), dtype=np.int64)
    valuations[:K] = env.observe(full_states).astype(np.int64)
    labels = {"goal": np.zeros(K + 2, dtype=bool), "crashed": np.zeros(K + 2, dtype=bool)}
    labels["goal"][goal_sink] = True
    labels["crashed"][crash_sink] = True
    labels["driving"] = ~(labels["goal"] | labels["crashed"])
    start_states = env.start_states(cells)
    start_index = np.full(len(cells), -1, dtype=np.int64)
    drive = start_states[:, 4] == 0
    start_index[drive] = np.searchsorted(keys, key(start_states[drive, :4]))
    start_index[start_states[:, 4] == AT_GOAL] = goal_sink
    initial = distinct(start_index)
    model = ExplicitModel(
        model_type="mdp",
        row_groups=row_groups,
        transitions=transitions,
        choice_actions=choice_actions,
        action_names=action_names,
        variables=FEATURES,
        valuations=valuations,
        initial_states=initial,
        labels=labels,
        label_aliases={k: k for k in labels},
    )
    log.info("racetrack MDP: %d states, %d choices, %d transitions in %.2fs", K + 2, C + 2, nnz, time.perf_counter() - t0)
    return RacetrackMDP(model=model, states=states, start_index=start_index, start_cells=cells)


def pmax_goal(
    env: RacetrackEnv, start_cells: np.ndarray | None = None, *, precision: float = 1e-6, sound: bool = False
) -> np.ndarray:
    """Optimal probability ``Pmax=? [F "goal"]`` per start cell at velocity 0, computed by Storm.

    ``sound=False`` (default) uses Storm's plain value iteration with relative precision
    ``precision`` (a convergence heuristic: not a guaranteed bound; NOTES.md reports that Storm's
    sound methods do not finish on Racetrack MDPs in minutes); ``sound=True`` uses Storm's sound
    environment (optimistic value iteration; slow on large maps).

    Returns:
        ``(M,)`` float64 values, in the order of ``start_cells`` (default: ``track.free_cells()``).
    """
    import stormpy  # lazy: stormpy, start-up

    from rlverify.models.numerics import environment

    mdp = build_racetrack_mdp(env, start_cells)
    t = time.perf_counter()
    storm_model = to_storm(mdp.model)
    prop = stormpy.parse_properties('Pmax=? [F "goal"]')[0]
    env_ = environment("sound" if sound else "fast", precision)
    result = stormpy.model_checking(storm_model, prop, environment=env_, only_initial_states=False)
    values = np.asarray(result.get_value_vector(), dtype=np.float64)
    log.info("Storm Pmax(goal) on %d states in %.2fs", storm_model.nr_states, time.perf_counter() - t)
    return values[mdp.start_index]
