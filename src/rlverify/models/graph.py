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
    search = _Search(transitions, row_groups, target, through)
    search.levels(None)
    return search.dist


#: up to this many transitions :func:`can_reach` finishes a search of more than :data:`NUMPY_LEVELS` levels in one call
#: of scipy's breadth-first search (compiled; ~40 bytes per transition of temporaries, at most ~40 MB); above, level by
#: level as :func:`steps_to` (~6 bytes per transition)
ONE_CALL_TRANSITIONS = 1 << 20
#: levels searched with numpy before the one call (a few numpy calls each: ~60 us; csma's ~135 levels took ~8 ms
#: against ~1 ms in one call, while chains decided in a few levels need no second copy of their reversed pattern)
NUMPY_LEVELS = 8


def can_reach(transitions: Any, row_groups: np.ndarray | None, target: np.ndarray, through: np.ndarray) -> np.ndarray:
    """``(S,)`` bool: the states from which :func:`steps_to` is finite (the target itself included).

    Level by level as :func:`steps_to` for :data:`NUMPY_LEVELS` levels; a search still going on a model of at most
    :data:`ONE_CALL_TRANSITIONS` transitions then finishes in one call of scipy's breadth-first search, from a virtual
    state with an edge to every state found so far, over the reversed edges into states of ``through``."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order

    search = _Search(transitions, row_groups, target, through)
    reverse = search.reverse
    if reverse.nnz > ONE_CALL_TRANSITIONS:
        search.levels(None)
    elif search.levels(NUMPY_LEVELS):
        S = len(search.dist)
        heads = reverse.indices if search.owner is None else search.owner[reverse.indices]
        edge = search.passes[heads]  # (only edges into states not found yet matter: the rest are found)
        seeds = np.flatnonzero(np.isfinite(search.dist))
        ends = np.zeros(len(edge) + 1, dtype=np.int64)
        np.cumsum(edge, out=ends[1:])
        indptr = np.append(ends[reverse.indptr], ends[-1] + len(seeds))
        # (S+1, S+1): state -> each passable state with a positive transition to it; the virtual state S -> seeds
        graph = sp.csr_matrix((np.ones(int(indptr[-1])), np.concatenate([heads[edge], seeds]), indptr), shape=(S + 1, S + 1))
        found = np.isfinite(search.dist)
        found[breadth_first_order(graph, S, directed=True, return_predecessors=False)[1:]] = True
        return found
    return np.isfinite(search.dist)


class _Search:
    """A breadth-first search from ``target`` over the reversed positive pattern (see :func:`steps_to`)."""

    def __init__(self, transitions: Any, row_groups: np.ndarray | None, target: np.ndarray, through: np.ndarray) -> None:
        import scipy.sparse as sp

        T = sp.csr_matrix(transitions)
        C, S = T.shape
        target = np.asarray(target, dtype=bool)
        self.owner = None if row_groups is None else np.repeat(np.arange(S), np.diff(np.asarray(row_groups)))
        # (S, C): the choices having each state as a positive successor (entries of zero probability removed)
        pattern = sp.csr_matrix(((T.data > 0).view(np.int8), T.indices, T.indptr), shape=(C, S), copy=False)
        self.reverse = pattern.T.tocsr()
        del pattern
        self.reverse.eliminate_zeros()
        self.passes = np.asarray(through, dtype=bool) & ~target
        #: ``(S,)`` the least steps to the target found so far (``inf``: none found yet)
        self.dist = np.full(S, np.inf)
        self.dist[target] = 0.0
        self.frontier = np.flatnonzero(target)
        self.level = 0

    def levels(self, limit: int | None) -> bool:
        """Search ``limit`` more levels (None: to the end); whether the search goes on."""
        indptr, indices, owner = self.reverse.indptr, self.reverse.indices, self.owner
        S = len(self.dist)
        stop = None if limit is None else self.level + limit
        while len(self.frontier) and (stop is None or self.level < stop):
            self.level += 1
            found = []
            # the frontier's reversed rows gathered in parts of about 2**18 entries (bounded temporaries)
            per_part = max(1, (1 << 18) * S // max(self.reverse.nnz, 1))
            for i in range(0, len(self.frontier), per_part):
                st = indices[row_positions(indptr, self.frontier[i : i + per_part])]
                st = st if owner is None else owner[st]
                st = distinct(st[self.passes[st] & np.isinf(self.dist[st])])
                self.dist[st] = self.level
                found.append(st)
            self.frontier = np.concatenate(found)
        return len(self.frontier) > 0
