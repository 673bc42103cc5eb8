"""Index of visited abstract states for the containment check.

A successor ``S`` may be merged into a visited state ``V`` (same template) when ``V.lo <= S.lo`` and
``S.hi <= V.hi`` componentwise and ``V`` was visited at a depth no larger than ``S``'s. A linear scan
over all visited states makes the check quadratic (it dominated the run time on the bouncing ball);
this index buckets states on a grid over the first two template axes: every ``V`` containing ``S``
covers ``S.lo`` on those axes, so only the states registered in that grid cell (and the few very
large ones kept in a separate list) are candidates. The test itself stays exact.
"""

from __future__ import annotations

import numpy as np


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
        self.n = 0
        self.grid: dict[tuple[int, ...], list[int]] = {}
        self.large: list[int] = []

    def _cells(self, v: np.ndarray) -> np.ndarray:
        return np.floor(v[: self.g] / self.cell).astype(np.int64)

    def add(self, state: int, lo: np.ndarray, hi: np.ndarray, depth: int) -> None:
        """Register ``state`` with template bounds ``lo, hi`` ``(k,)`` visited at ``depth``."""
        if self.n == len(self.ids):
            cap = 2 * self.n
            self.lo = np.resize(self.lo, (cap, self.k))
            self.hi = np.resize(self.hi, (cap, self.k))
            self.depth = np.resize(self.depth, cap)
            self.ids = np.resize(self.ids, cap)
        i = self.n
        self.lo[i], self.hi[i], self.depth[i], self.ids[i] = lo, hi, depth, state
        self.n += 1
        c0, c1 = self._cells(lo), self._cells(hi)
        span = c1 - c0 + 1
        if not np.isfinite(lo).all() or int(np.prod(span)) > self.max_cells:
            self.large.append(i)
            return
        ranges = [range(int(a), int(b) + 1) for a, b in zip(c0, c1, strict=True)]
        keys: list[tuple[int, ...]]
        if self.g == 1:
            keys = [(a,) for a in ranges[0]]
        else:
            keys = [(a, b) for a in ranges[0] for b in ranges[1]]
        for key in keys:
            self.grid.setdefault(key, []).append(i)

    def find(self, lo: np.ndarray, hi: np.ndarray, max_depth: int) -> int | None:
        """The state id of the smallest visited polytope containing ``[lo, hi]`` at depth ``<= max_depth``."""
        cand = self.grid.get(tuple(int(c) for c in self._cells(lo)), [])
        if self.large:
            cand = cand + self.large
        if not cand:
            return None
        idx = np.asarray(cand, dtype=np.int64)
        m = (self.depth[idx] <= max_depth) & (self.lo[idx] <= lo).all(axis=1) & (hi <= self.hi[idx]).all(axis=1)
        if not m.any():
            return None
        idx = idx[m]
        size = (self.hi[idx] - self.lo[idx]).sum(axis=1)
        return int(self.ids[idx[int(np.argmin(size))]])
