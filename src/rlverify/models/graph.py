"""Graph analysis of explicit models: which states can reach a target, and in how many steps (no floating point
on probabilities: only which transitions are positive)."""

from __future__ import annotations

from typing import Any

import numpy as np


def steps_to(transitions: Any, row_groups: np.ndarray | None, target: np.ndarray, through: np.ndarray) -> np.ndarray:
    """``(S,)`` float64: the least number of steps from each state to a ``target`` state along positive transitions,
    leaving only states in ``through`` (besides the target); ``inf`` where no target can be reached.

    ``transitions``: ``(C, S)`` sparse, a row per choice (``row_groups`` ``(S+1,)`` int, the choices of each state;
    None for a chain: one row per state). Any choice may be taken: on an MDP ``inf`` means ``Pmax(through U target)
    = 0``; on a chain, probability 0. BFS in scipy (linear in the transitions)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import shortest_path

    T = sp.coo_matrix(transitions)
    S = T.shape[1]
    positive = T.data > 0
    rows = T.row[positive].astype(np.int64)
    owner = rows if row_groups is None else np.repeat(np.arange(S), np.diff(np.asarray(row_groups)))[rows]
    succ = T.col[positive].astype(np.int64)
    passes = np.asarray(through, dtype=bool)[owner] & ~np.asarray(target, dtype=bool)[owner]
    seeds = np.flatnonzero(target)
    # reversed edges successor -> owner (owners that may be passed through), and a source S -> every target
    r = np.concatenate([succ[passes], np.full(len(seeds), S, dtype=np.int64)])
    c = np.concatenate([owner[passes], seeds])
    graph = sp.csr_matrix((np.ones(len(r), dtype=np.float64), (r, c)), shape=(S + 1, S + 1))
    dist = shortest_path(graph, method="D", directed=True, unweighted=True, indices=S)
    return np.asarray(dist[:S], dtype=np.float64) - 1.0  # inf stays inf


def can_reach(transitions: Any, row_groups: np.ndarray | None, target: np.ndarray, through: np.ndarray) -> np.ndarray:
    """``(S,)`` bool: the states from which :func:`steps_to` is finite (the target itself included)."""
    return np.isfinite(steps_to(transitions, row_groups, target, through))
