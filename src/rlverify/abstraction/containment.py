"""Index of visited abstract states for the containment check.

A successor ``S`` may be merged into a visited state ``V`` (same template) when ``V.lo <= S.lo`` and
``S.hi <= V.hi`` componentwise and ``V`` was visited at a depth no larger than ``S``'s. A linear scan
over all visited states makes the check quadratic (it dominated the run time on the bouncing ball);
this index buckets states on a grid over the first two template axes: every ``V`` containing ``S``
covers ``S.lo`` on those axes, so only the states registered in that grid cell (and the few very
large ones kept in a separate list) are candidates. The test itself stays exact.

The answer for a query is the candidate of smallest size ``sum(hi - lo)`` that contains it, the first in the
candidate order (its cell's states in the order they were added, then the large ones in that order) among equal
sizes. :meth:`VisitedIndex.find_many` answers a whole batch of queries with a few array operations;
:class:`PendingLookups` answers a sequence of queries in order where some of the queried polytopes are added to the
index as the sequence is worked through (the successors of a frontier that become new states), each answer being
exactly that of :meth:`VisitedIndex.find` at its point of the sequence.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

#: queries per vectorised block of :meth:`VisitedIndex.find_many` (bounds its (pairs, k) temporaries)
_BLOCK = 2048


def _candidate_pairs(
    grid: dict[tuple[int, ...], list[int]], large: Sequence[int] | np.ndarray, cells: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every (query, candidate) pair, in each query's candidate order: the entries of ``grid`` at the query's cell
    ``cells[q]`` (``(N, g)`` int64), then ``large``. Returns ``(query, candidate)`` int64 arrays."""
    n = len(cells)
    uniq: dict[tuple[int, ...], int] = {}
    inv = np.fromiter((uniq.setdefault(key, len(uniq)) for key in map(tuple, cells.tolist())), dtype=np.int64, count=n)
    lists = [grid.get(key, ()) for key in uniq]
    lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(lens.sum()))
    starts = np.cumsum(lens) - lens
    cnt = lens[inv]
    total = int(cnt.sum())
    qi = np.repeat(np.arange(n, dtype=np.int64), cnt)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    cand = flat[np.repeat(starts[inv], cnt) + within]
    if len(large):
        big = np.asarray(large, dtype=np.int64)
        qi = np.concatenate([qi, np.repeat(np.arange(n, dtype=np.int64), len(big))])
        cand = np.concatenate([cand, np.tile(big, n)])
    return qi, cand


class VisitedIndex:
    """Visited template polytopes, queryable for the smallest one containing a given polytope.

    Args:
        k: number of template axes.
        cell: grid cell size along each of the first ``min(2, k)`` axes (axis units).
        max_cells: states covering more cells are kept in a list scanned on every query.
    """

    def __init__(self, k: int, cell: np.ndarray, max_cells: int = 256) -> None:
        self.k = k
        self.g = min(2, k)
        self.cell = np.asarray(cell, dtype=np.float64)[: self.g]
        self.max_cells = max_cells
        self.lo = np.empty((1024, k))
        self.hi = np.empty((1024, k))
        self.depth = np.empty(1024, dtype=np.int64)
        self.ids = np.empty(1024, dtype=np.int64)
        self.size = np.empty(1024)  # sum(hi - lo) of each entry
        self.is_large = np.empty(1024, dtype=bool)
        self.n = 0
        self.grid: dict[tuple[int, ...], list[int]] = {}
        self.large: list[int] = []

    def cells(self, v: np.ndarray) -> np.ndarray:
        """Grid cells ``(N, g)`` int64 of points ``v`` ``(N, k)`` (their first ``g`` template coordinates)."""
        with np.errstate(invalid="ignore"):  # a non-finite bound: see registrations()
            return np.floor(v[:, : self.g] / self.cell).astype(np.int64)

    def registrations(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For polytopes ``lo, hi`` ``(N, k)``: which are large (a non-finite lower bound, or more than ``max_cells``
        cells), and the first and last grid cells ``(N, g)`` their ``[lo, hi]`` covers on the first ``g`` axes (a
        polytope that is not large is registered in every cell of that range: :meth:`cell_keys`)."""
        c0, c1 = self.cells(lo), self.cells(hi)
        span = c1 - c0 + 1
        large = ~np.isfinite(lo).all(axis=1) | (np.prod(span, axis=1) > self.max_cells)
        return large, c0, c1

    def cell_keys(self, c0: np.ndarray, c1: np.ndarray, rows: np.ndarray) -> list[list[tuple[int, ...]]]:
        """The grid cells of each of ``rows`` (their ranges from :meth:`registrations`), in order."""
        out: list[list[tuple[int, ...]]] = []
        for a, b in zip(c0[rows].tolist(), c1[rows].tolist(), strict=True):
            if self.g == 1:
                out.append([(x,) for x in range(a[0], b[0] + 1)])
            else:
                out.append([(x, y) for x in range(a[0], b[0] + 1) for y in range(a[1], b[1] + 1)])
        return out

    def add(self, state: int, lo: np.ndarray, hi: np.ndarray, depth: int) -> None:
        """Register ``state`` with template bounds ``lo, hi`` ``(k,)`` visited at ``depth``."""
        self.add_many([state], np.asarray(lo, dtype=np.float64)[None], np.asarray(hi, dtype=np.float64)[None], [depth])

    def add_many(
        self,
        states: Sequence[int],
        lo: np.ndarray,
        hi: np.ndarray,
        depth: Sequence[int] | np.ndarray,
        registered: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """:meth:`add` of each state in order (``lo, hi``: ``(N, k)``); ``registered``: their :meth:`registrations`."""
        m = len(states)
        if m == 0:
            return
        if self.n + m > len(self.ids):
            cap = max(2 * len(self.ids), self.n + m)
            self.lo = np.resize(self.lo, (cap, self.k))
            self.hi = np.resize(self.hi, (cap, self.k))
            self.depth = np.resize(self.depth, cap)
            self.ids = np.resize(self.ids, cap)
            self.size = np.resize(self.size, cap)
            self.is_large = np.resize(self.is_large, cap)
        i0 = self.n
        sl = slice(i0, i0 + m)
        self.lo[sl], self.hi[sl], self.depth[sl], self.ids[sl] = lo, hi, depth, states
        self.size[sl] = (self.hi[sl] - self.lo[sl]).sum(axis=1)
        large, c0, c1 = registered if registered is not None else self.registrations(lo, hi)
        self.is_large[sl] = large
        self.n += m
        small = np.flatnonzero(~large)
        self.large.extend((i0 + np.flatnonzero(large)).tolist())
        for i, cells in zip((i0 + small).tolist(), self.cell_keys(c0, c1, small), strict=True):
            for key in cells:
                self.grid.setdefault(key, []).append(i)

    def find(self, lo: np.ndarray, hi: np.ndarray, max_depth: int) -> int | None:
        """The state id of the smallest visited polytope containing ``[lo, hi]`` at depth ``<= max_depth``."""
        pos = int(self.find_many(np.asarray(lo, dtype=np.float64)[None], np.asarray(hi, dtype=np.float64)[None], max_depth)[0])
        return None if pos < 0 else int(self.ids[pos])

    def find_many(self, lo: np.ndarray, hi: np.ndarray, max_depth: int | np.ndarray) -> np.ndarray:
        """:meth:`find` of each query ``lo[q], hi[q]`` (``(N, k)``) at ``max_depth`` (one for all, or ``(N,)``), as
        positions in the index (``ids[pos]`` is the state; -1: none)."""
        lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        n = len(lo)
        max_d = np.broadcast_to(np.asarray(max_depth, dtype=np.int64), (n,))
        out = np.full(n, -1, dtype=np.int64)
        for a in range(0, n, _BLOCK):
            b = min(n, a + _BLOCK)
            qi, cand = _candidate_pairs(self.grid, self.large, self.cells(lo[a:b]))
            qi, cand = _containing(qi, cand, lo[a:b], hi[a:b], self.lo, self.hi, self.depth[cand] <= max_d[a:b][qi])
            if len(qi):
                q, first = _first_of_each(qi, (cand, self.is_large[cand], self.size[cand]))
                out[a + q] = cand[first]
        return out


def _containing(
    qi: np.ndarray, cand: np.ndarray, qlo: np.ndarray, qhi: np.ndarray, lo: np.ndarray, hi: np.ndarray, ok: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``(qi, cand)`` (with ``ok``) where ``[lo[cand], hi[cand]]`` contains ``[qlo[qi], qhi[qi]]``
    (compared one axis at a time, dropping pairs as they fail: most fail on the first axes)."""
    qi, cand = qi[ok], cand[ok]
    for axis in range(lo.shape[1]):
        keep = (lo[cand, axis] <= qlo[qi, axis]) & (qhi[qi, axis] <= hi[cand, axis])
        qi, cand = qi[keep], cand[keep]
    return qi, cand


def _first_of_each(group: np.ndarray, keys: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """For each distinct value of ``group``: the position of its smallest element by ``keys`` (last key primary,
    as :func:`numpy.lexsort`). Returns the distinct groups and those positions."""
    order = np.lexsort((*keys, group))
    g = group[order]
    head = np.ones(len(g), dtype=bool)
    head[1:] = g[1:] != g[:-1]
    return g[head], order[head]


class PendingLookups:
    """Containment lookups for queries ``0..N-1`` answered in order, some queried polytopes joining the index.

    The sequence ``find(0)``, maybe ``add(0, s)``, ``find(1)``, ... answers exactly as :meth:`VisitedIndex.find`
    and :meth:`VisitedIndex.add` would, called in that order, while the index itself is left alone until
    :meth:`commit` (which adds the queries added here, in order). What the index held before is searched for every
    query at once (:meth:`VisitedIndex.find_many`); the queries that may join it later are compared with each other
    at once too (each query with the earlier ones whose grid cells cover its own), so that :meth:`find` only walks a
    short list of earlier queries that contain it.

    Args:
        index: the index (left unchanged until :meth:`commit`).
        lo, hi: ``(N, k)`` template bounds of the queries.
        depth: ``(N,)`` the depth each query is looked up at (``max_depth``) and would be added at.
    """

    def __init__(self, index: VisitedIndex, lo: np.ndarray, hi: np.ndarray, depth: np.ndarray) -> None:
        self.index = index
        self.lo = np.asarray(lo, dtype=np.float64).reshape(-1, index.k)
        self.hi = np.asarray(hi, dtype=np.float64).reshape(-1, index.k)
        self.depth = np.asarray(depth, dtype=np.int64)
        n = len(self.lo)
        self.before = index.find_many(self.lo, self.hi, self.depth)
        self.registered = index.registrations(self.lo, self.hi)
        self.size = (self.hi - self.lo).sum(axis=1) if n else np.zeros(0)
        large, c0, c1 = self.registered
        # the queries as an index of their own: earlier queries that contain each query, by (size, large, position);
        # only those that can join the index (see add())
        grid: dict[tuple[int, ...], list[int]] = {}
        eligible = self.before < 0
        if n:
            rows = np.ascontiguousarray(np.hstack([self.lo, self.hi, self.depth[:, None].astype(np.float64)]))
            rows = rows.view(np.dtype((np.void, rows.shape[1] * 8)))[:, 0]
            _, first = np.unique(rows, return_index=True)
            repeat = np.ones(n, dtype=bool)
            repeat[first] = False
            eligible &= ~repeat
        small = np.flatnonzero(eligible & ~large)
        for j, cells in zip(small.tolist(), index.cell_keys(c0, c1, small), strict=True):
            for key in cells:
                grid.setdefault(key, []).append(j)
        big = np.flatnonzero(large & eligible)
        ptr = np.zeros(n + 1, dtype=np.int64)
        self.containers = np.zeros(0, dtype=np.int64)
        if n:
            parts_q, parts_j = [], []
            for a in range(0, n, _BLOCK):
                b = min(n, a + _BLOCK)
                qi, cand = _candidate_pairs(grid, big, index.cells(self.lo[a:b]))
                qi = qi + a
                keep = cand < qi
                qi, cand = qi[keep], cand[keep]
                qi, cand = _containing(qi, cand, self.lo, self.hi, self.lo, self.hi, self.depth[cand] <= self.depth[qi])
                parts_q.append(qi)
                parts_j.append(cand)
            qi, cand = np.concatenate(parts_q), np.concatenate(parts_j)
            order = np.lexsort((cand, large[cand], self.size[cand], qi))
            self.containers = cand[order]
            ptr[1:] = np.cumsum(np.bincount(qi, minlength=n))
        self.ptr = ptr
        self.position = np.full(n, -1, dtype=np.int64)  # a query's position in the index once added
        self.added: list[tuple[int, int]] = []  # (query, state) in order
        self.eligible = eligible

    def find(self, q: int) -> int | None:
        """The state :meth:`VisitedIndex.find` returns for query ``q`` after the additions made so far."""
        index = self.index
        best = int(self.before[q])
        best_key = (float(index.size[best]), bool(index.is_large[best]), best) if best >= 0 else None
        large = self.registered[0]
        for j in self.containers[self.ptr[q] : self.ptr[q + 1]].tolist():
            pos = int(self.position[j])
            if pos < 0:
                continue
            key = (float(self.size[j]), bool(large[j]), pos)
            if best_key is None or key < best_key:
                best, best_key = pos, key
            break  # the containers are sorted by key: the first added one is the best of them
        if best < 0:
            return None
        if best >= index.n:
            return self.added[best - index.n][1]
        return int(index.ids[best])

    def add(self, q: int, state: int) -> None:
        """Query ``q`` becomes visited state ``state`` (at its depth).

        Only a query that no visited state contains (:meth:`find` answered None) and that does not repeat an earlier
        query (the same bounds, bit for bit, at the same depth) may be added: a repeat is shared with the state made
        for the earlier one, merged like it, or refused like it by a budget that has run out (the abstraction's
        budgets never come back). Anything else is refused (RuntimeError): the answers would no longer be those of
        the one-at-a-time index.
        """
        if not self.eligible[q]:
            raise RuntimeError(
                f"internal error: query {q} added to the visited index while it repeats or lies in a visited state"
            )
        self.position[q] = self.index.n + len(self.added)
        self.added.append((q, state))

    def commit(self) -> None:
        """Add the added queries to the index, in order."""
        if not self.added:
            return
        qs = np.array([q for q, _ in self.added], dtype=np.int64)
        large, c0, c1 = self.registered
        self.index.add_many([s for _, s in self.added], self.lo[qs], self.hi[qs], self.depth[qs], (large[qs], c0[qs], c1[qs]))
        self.added = []
        self.position[:] = -1
