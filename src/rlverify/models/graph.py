"""Graph analysis of explicit models: which states can reach a target, and in how many steps (no floating point
on probabilities: only which transitions are positive)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlverify.arrays import distinct, row_positions


def steps_to(transitions: Any, row_groups: np.ndarray | None, target: np.ndarray, through: np.ndarray) -> np.ndarray:
    """``(S,)`` float64: the least number of steps from each state to a ``target`` state along positive transitions,
    leaving only states in ``through`` (besides the target); ``inf`` where no target can be reached.

    ``transitions``: ``(C, S)`` sparse, a row per choice (``row_groups`` ``(S+1,)`` int, the choices of each state;
    None for a chain: one row per state). Any choice may be taken: on an MDP ``inf`` means ``Pmax(through U target)
    = 0``; on a chain, probability 0. Breadth-first from the targets over the reversed positive pattern (linear in
    the transitions; about 6 bytes per transition besides the input: int8 positivity, int32 reversed indices)."""
    import scipy.sparse as sp

    T = sp.csr_matrix(transitions)
    C, S = T.shape
    target = np.asarray(target, dtype=bool)
    owner = None if row_groups is None else np.repeat(np.arange(S), np.diff(np.asarray(row_groups)))
    # (S, C): the choices having each state as a positive successor (entries of zero probability removed)
    pattern = sp.csr_matrix(((T.data > 0).view(np.int8), T.indices, T.indptr), shape=(C, S), copy=False)
    reverse = pattern.T.tocsr()
    del pattern
    reverse.eliminate_zeros()
    passes = np.asarray(through, dtype=bool) & ~target
    dist = np.full(S, np.inf)
    dist[target] = 0.0
    frontier = np.flatnonzero(target)
    level = 0
    indptr, indices = reverse.indptr, reverse.indices
    while len(frontier):
        level += 1
        found = []
        # the frontier's reversed rows gathered in parts of about 2**18 entries (bounded temporaries)
        per_part = max(1, (1 << 18) * S // max(reverse.nnz, 1))
        for i in range(0, len(frontier), per_part):
            st = indices[row_positions(indptr, frontier[i : i + per_part])]
            st = st if owner is None else owner[st]
            st = distinct(st[passes[st] & np.isinf(dist[st])])
            dist[st] = level
            found.append(st)
        frontier = np.concatenate(found)
    return dist


#: up to this many transitions :func:`can_reach` searches in one call of scipy's breadth-first search (compiled; ~40
#: bytes per transition of temporaries, at most ~40 MB); above, level by level as :func:`steps_to` (~6 bytes per
#: transition, but a few numpy calls per level: ~20 ms on QVBS csma's ~135 levels against ~2 ms in one call)
ONE_CALL_TRANSITIONS = 1 << 20


def can_reach(transitions: Any, row_groups: np.ndarray | None, target: np.ndarray, through: np.ndarray) -> np.ndarray:
    """``(S,)`` bool: the states from which :func:`steps_to` is finite (the target itself included).

    Up to :data:`ONE_CALL_TRANSITIONS` transitions: one breadth-first search (scipy's) from a virtual state with an
    edge to every target, over the reversed positive transitions whose source state is in ``through``."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order

    T = sp.csr_matrix(transitions)
    if T.nnz > ONE_CALL_TRANSITIONS:
        return np.isfinite(steps_to(T, row_groups, target, through))
    C, S = T.shape
    owner = np.arange(C) if row_groups is None else np.repeat(np.arange(S), np.diff(np.asarray(row_groups)))
    source = np.repeat(owner, np.diff(T.indptr))  # each entry's state
    edge = (T.data > 0) & np.asarray(through, dtype=bool)[source]
    seeds = np.flatnonzero(np.asarray(target, dtype=bool))
    # (S+1, S+1): successor -> state for the kept edges; the virtual state S -> every target
    tails = np.concatenate([T.indices[edge], np.full(len(seeds), S)])
    heads = np.concatenate([source[edge], seeds])
    graph = sp.csr_matrix((np.ones(len(tails)), (tails, heads)), shape=(S + 1, S + 1))
    found = np.zeros(S + 1, dtype=bool)
    found[breadth_first_order(graph, S, directed=True, return_predecessors=False)] = True
    return found[:S]
