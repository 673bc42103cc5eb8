"""Graph analysis of explicit models: which states can reach a target, and in how many steps (no floating point
on probabilities: only which transitions are positive)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rlverify.arrays import distinct, row_positions

if TYPE_CHECKING:
    import scipy.sparse as sp


def steps_to(transitions: sp.csr_matrix, row_groups: np.ndarray | None, target: np.ndarray, through: np.ndarray) -> np.ndarray:
    """``(S,)`` float64: the least number of steps from each state to a ``target`` state along positive transitions,
    leaving only states in ``through`` (besides the target); ``inf`` where no target can be reached.

    ``transitions``: ``(C, S)`` sparse, a row per choice (``row_groups`` ``(S+1,)`` int, the choices of each state;
    None for a chain: one row per state). Any choice may be taken: on an MDP ``inf`` means ``Pmax(through U target)
    = 0``; on a chain, probability 0. Breadth-first from the targets over the reversed positive pattern (linear in
    the transitions; about 6 bytes per transition besides the input: int8 positivity, int32 reversed indices)."""
    dist, _ = _Reversed(transitions, row_groups, through).levels(target, None)
    return dist


#: up to this many transitions :func:`can_reach` finishes a search of more than :data:`NUMPY_LEVELS` levels in one call
#: of scipy's breadth-first search (compiled; ~40 bytes per transition of temporaries, at most ~40 MB); above, level by
#: level as :func:`steps_to` (~6 bytes per transition)
ONE_CALL_TRANSITIONS = 1 << 20
#: levels searched with numpy before the one call (a few numpy calls each: ~60 us; csma's ~135 levels took ~8 ms
#: against ~1 ms in one call, while chains decided in a few levels need no second copy of their reversed pattern)
NUMPY_LEVELS = 8


def can_reach(
    transitions: sp.csr_matrix, row_groups: np.ndarray | None, target: np.ndarray, through: np.ndarray
) -> np.ndarray:
    """``(S,)`` bool: the states from which :func:`steps_to` is finite (the target itself included).

    Level by level as :func:`steps_to` for :data:`NUMPY_LEVELS` levels; a search still going on a model of at most
    :data:`ONE_CALL_TRANSITIONS` transitions then finishes in one call of scipy's breadth-first search, from a virtual
    state with an edge to every state found so far, over the reversed edges into states of ``through``."""
    return _Reversed(transitions, row_groups, through).reach(target)


def reachable(transitions: sp.csr_matrix, row_groups: np.ndarray | None, initial: np.ndarray) -> np.ndarray:
    """``(N,)`` bool: the states reachable from ``initial`` along the stored entries of ``transitions`` (a CSR
    matrix ``(C, N)``, a row per choice; ``row_groups`` ``(S+1,)`` the choices of states ``0..S-1``, ``S <= N``: a
    state from ``S`` on has no choices; None for a chain, one row per state), through any choice.

    Level by level in numpy (no copy of the matrix; a stored zero counts as an edge: eliminate zeros first)."""
    indptr, indices = transitions.indptr, transitions.indices
    seen = np.zeros(transitions.shape[1], dtype=bool)
    frontier = distinct(np.asarray(initial, dtype=np.int64))
    seen[frontier] = True
    groups = None if row_groups is None else np.asarray(row_groups, dtype=np.int64)
    while len(frontier):
        rows = frontier if groups is None else row_positions(groups, frontier[frontier < len(groups) - 1])
        succ = indices[row_positions(indptr, rows)]
        succ = distinct(succ[~seen[succ]])
        seen[succ] = True
        frontier = succ
    return seen


def prob01(transitions: sp.csr_matrix, phi: np.ndarray, psi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(zero, one)`` ``(S,)`` bool: the states of a chain (``transitions`` ``(S, S)``) where ``P(phi U psi)`` is exactly
    0 (no path through ``phi & ~psi`` reaches ``psi``) and exactly 1 (none reaches a zero state), by :func:`can_reach`
    twice over one reversed pattern."""
    phi, psi = np.asarray(phi, dtype=bool), np.asarray(psi, dtype=bool)
    search = _Reversed(transitions, None, phi & ~psi)
    zero = ~search.reach(psi)
    return zero, ~search.reach(zero)


class _Reversed:
    """The reversed positive pattern of ``transitions`` for searches through ``through`` (see :func:`steps_to`)."""

    def __init__(self, transitions: sp.csr_matrix, row_groups: np.ndarray | None, through: np.ndarray) -> None:
        import scipy.sparse as sp  # lazy: scipy, start-up (graph functions run on built models only)

        T = sp.csr_matrix(transitions)
        C, S = T.shape
        self.owner = None if row_groups is None else np.repeat(np.arange(S), np.diff(np.asarray(row_groups)))
        # (S, C): the choices having each state as a positive successor (entries of zero probability removed)
        pattern = sp.csr_matrix(((T.data > 0).view(np.int8), T.indices, T.indptr), shape=(C, S), copy=False)
        self.reverse = pattern.T.tocsr()
        del pattern
        self.reverse.eliminate_zeros()
        self.through = np.asarray(through, dtype=bool)
        self._edges: tuple[np.ndarray, np.ndarray] | None = None

    def levels(self, target: np.ndarray, limit: int | None) -> tuple[np.ndarray, np.ndarray]:
        """``(dist, frontier)``: the least steps to ``target`` found in ``limit`` levels (None: all; ``inf``: none found
        yet) and the states found at the last level (empty: the search is over)."""
        indptr, indices, owner = self.reverse.indptr, self.reverse.indices, self.owner
        S = self.reverse.shape[0]
        target = np.asarray(target, dtype=bool)
        dist = np.full(S, np.inf)
        dist[target] = 0.0
        frontier = np.flatnonzero(target)
        level = 0
        while len(frontier) and (limit is None or level < limit):
            level += 1
            found = []
            # the frontier's reversed rows gathered in parts of about 2**18 entries (bounded temporaries)
            per_part = max(1, (1 << 18) * S // max(self.reverse.nnz, 1))
            for i in range(0, len(frontier), per_part):
                st = indices[row_positions(indptr, frontier[i : i + per_part])]
                st = st if owner is None else owner[st]
                st = distinct(st[self.through[st] & np.isinf(dist[st])])  # targets are at 0: not inf
                dist[st] = level
                found.append(st)
            frontier = np.concatenate(found)
        return dist, frontier

    def reach(self, target: np.ndarray) -> np.ndarray:
        """``(S,)`` bool: :func:`can_reach`'s answer for ``target``."""
        small = self.reverse.nnz <= ONE_CALL_TRANSITIONS
        dist, frontier = self.levels(target, NUMPY_LEVELS if small else None)
        found = np.isfinite(dist)
        if len(frontier):  # (a small chain's numpy levels found everything: no csgraph, nor its linalg import)
            import scipy.sparse as sp  # lazy: scipy, start-up (graph functions run on built models only)
            from scipy.sparse.csgraph import breadth_first_order  # lazy: csgraph, start-up

            S = len(found)
            heads, indptr = self._passable_edges()
            seeds = np.flatnonzero(found)
            # (S+1, S+1): state -> each state of ``through`` with a positive transition to it; virtual state S -> seeds
            graph = sp.csr_matrix(
                (np.ones(len(heads) + len(seeds)), np.concatenate([heads, seeds]), np.append(indptr, len(heads) + len(seeds))),
                shape=(S + 1, S + 1),
            )
            found[breadth_first_order(graph, S, directed=True, return_predecessors=False)[1:]] = True
        return found

    def _passable_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The reversed edges into states of ``through``: ``(heads, indptr)`` of an ``(S, S)`` CSR (made once)."""
        if self._edges is None:
            reverse = self.reverse
            heads = reverse.indices if self.owner is None else self.owner[reverse.indices]
            edge = self.through[heads]
            ends = np.zeros(len(edge) + 1, dtype=np.int64)
            np.cumsum(edge, out=ends[1:])
            self._edges = heads[edge], ends[reverse.indptr]
        return self._edges
