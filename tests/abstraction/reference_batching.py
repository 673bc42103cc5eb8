"""The abstraction's per-item computations as they were before they were batched: references that the batched
versions must match bit for bit (``test_containment.py``, ``test_batched_split.py``)."""

from __future__ import annotations

import numpy as np

from rlverify.abstraction.domains import Polytope
from rlverify.abstraction.geometry import pad, pairwise_vertices_2d


class ReferenceIndex:
    """The index as it was before batching (one state added and one query answered at a time): the reference the
    batched lookups must match exactly, ties included."""

    def __init__(self, k, cell, max_cells=256):
        self.k, self.g = k, min(2, k)
        self.cell = np.asarray(cell, dtype=np.float64)[: self.g]
        self.max_cells = max_cells
        self.lo, self.hi, self.depth, self.ids = [], [], [], []
        self.grid, self.large = {}, []

    def _cells(self, v):
        return np.floor(v[: self.g] / self.cell).astype(np.int64)

    def add(self, state, lo, hi, depth):
        i = len(self.ids)
        self.lo.append(np.array(lo, dtype=float))
        self.hi.append(np.array(hi, dtype=float))
        self.depth.append(depth)
        self.ids.append(state)
        c0, c1 = self._cells(lo), self._cells(hi)
        if not np.isfinite(lo).all() or int(np.prod(c1 - c0 + 1)) > self.max_cells:
            self.large.append(i)
            return
        ranges = [range(int(a), int(b) + 1) for a, b in zip(c0, c1, strict=True)]
        keys = [(a,) for a in ranges[0]] if self.g == 1 else [(a, b) for a in ranges[0] for b in ranges[1]]
        for key in keys:
            self.grid.setdefault(key, []).append(i)

    def find(self, lo, hi, max_depth):
        cand = self.grid.get(tuple(int(c) for c in self._cells(lo)), []) + self.large
        if not cand:
            return None
        idx = np.asarray(cand, dtype=np.int64)
        vlo, vhi = np.array([self.lo[i] for i in cand]), np.array([self.hi[i] for i in cand])
        dep = np.array([self.depth[i] for i in cand])
        m = (dep <= max_depth) & (vlo <= lo).all(axis=1) & (hi <= vhi).all(axis=1)
        if not m.any():
            return None
        idx = idx[m]
        size = (vhi[m] - vlo[m]).sum(axis=1)
        return self.ids[int(idx[int(np.argmin(size))])]


def reference_choose_split(p, x, y, splittable, options):
    """choose_split as it was before batching (one polytope, every splittable axis at once)."""
    q = p.template.axes
    eps = 1e-7
    yc = np.clip(y, eps, 1 - eps)
    bins = np.minimum((yc * options.bins).astype(int), options.bins - 1)
    counts = np.bincount(bins, minlength=options.bins)
    w = 1.0 / counts[bins]
    w /= w.sum()
    best = (np.inf, -1, 0.0)
    flat = float(y.max() - y.min()) < 1e-9
    ks = np.flatnonzero(splittable)
    if len(ks):
        lo, hi = p.lo[ks], p.hi[ks]
        width = hi - lo
        cmin, cmax = lo + options.min_split_fraction * width, hi - options.min_split_fraction * width
        if flat:
            costs_k = -width / np.linalg.norm(q[ks], axis=1)
            cuts_k = 0.5 * (lo + hi)
        else:
            proj = np.stack([x @ q[k] for k in ks], axis=1)
            order = np.argsort(proj, axis=0)
            ps = np.take_along_axis(proj, order, axis=0)
            ws, ys = w[order], yc[order]
            l1 = -ws * np.log(ys)
            l0 = -ws * np.log(1 - ys)
            zero = np.zeros((1, len(ks)))
            c1 = np.concatenate([zero, np.cumsum(l1, axis=0)])
            c0 = np.concatenate([zero, np.cumsum(l0, axis=0)])
            cost_a = c1[1:-1] + (c0[-1] - c0[1:-1])
            cost_b = c0[1:-1] + (c1[-1] - c1[1:-1])
            costs = np.minimum(cost_a, cost_b)
            cuts = 0.5 * (ps[:-1] + ps[1:])
            ok = (cuts >= cmin) & (cuts <= cmax)
            pick = np.argmin(np.where(ok, costs, np.inf), axis=0)
            free = np.argmin(costs, axis=0)
            cols = np.arange(len(ks))
            inside = ok.any(axis=0)
            cuts_k = np.where(inside, cuts[pick, cols], np.clip(cuts[free, cols], cmin, cmax))
            sliver = free.copy()
            for col in np.flatnonzero(~inside):
                sliver[col] = int(np.clip(np.searchsorted(ps[:, col], cuts_k[col]), 1, len(ps) - 1)) - 1
            costs_k = np.where(inside, costs[pick, cols], costs[np.where(inside, pick, sliver), cols])
        j = int(np.argmin(costs_k))
        if costs_k[j] < np.inf:
            best = (float(costs_k[j]), int(ks[j]), float(cuts_k[j]))
    if best[1] < 0:
        widest = int(np.argmax(p.widths() / np.linalg.norm(q, axis=1)))
        return widest, float(0.5 * (p.lo[widest] + p.hi[widest]))
    return best[1], best[2]


def reference_split(p, axis, value):
    """Polytope.split as it was before batching (2-D, not a box)."""
    hi = p.hi.copy()
    hi[axis] = value
    lo = p.lo.copy()
    lo[axis] = value
    t = p.template
    dirs = np.vstack([t.axes, -t.axes])
    sides = ((p.lo, hi), (lo, p.hi))
    pts, feasible = pairwise_vertices_2d(dirs, np.array([np.concatenate([s_hi, -s_lo]) for s_lo, s_hi in sides]))
    out = []
    for (side_lo, side_hi), pp, ff in zip(sides, pts, feasible, strict=True):
        v = pp[ff]
        if len(v) == 0:
            out.append(None)
            continue
        sup = (v @ dirs.T).max(axis=0)
        tlo, thi = pad(-sup[t.k :], sup[: t.k])
        out.append(Polytope(t, np.maximum(tlo, side_lo), np.minimum(thi, side_hi)))
    return out[0], out[1]


def reference_starting_point(p):
    """A polytope's (2-D, non-empty) vertices, interior point and extra sample points as computed one polytope at a
    time before batching (Polytope.vertices, Polytope.interior_point and the start of sample_many)."""
    a, b = p.constraints
    pts, feasible = pairwise_vertices_2d(a, np.asarray(b, dtype=np.float64)[None, :])
    v = pts[0][feasible[0]]
    c = v.mean(axis=0)
    v = v[np.argsort(np.arctan2(v[:, 1] - c[1], v[:, 0] - c[0]))]
    x0 = v.mean(axis=0)
    extra = x0 + (v - x0) * (1.0 - 1e-7)
    proj = extra @ p.template.axes.T
    extra = extra[((proj >= p.lo - 0.0) & (proj <= p.hi + 0.0)).all(axis=1)]
    return v, x0, extra
