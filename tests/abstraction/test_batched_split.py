"""Splits chosen and made for many polytopes at once are bit for bit those of one polytope at a time (the
refinement's parts, so the abstraction, must not change with the batching)."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.abstraction.domains import Polytope, Template, pad, pairwise_vertices_2d, split_many
from rlverify.abstraction.refinement import RefinementOptions, choose_split_many


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


def _polytopes(rng, kind, count):
    t = Template.named(kind, ("a", "b"))
    return [t.hull(rng.normal(size=(5, 2)) * rng.exponential(1.0) + rng.normal(size=2) * 10) for _ in range(count)]


@pytest.mark.parametrize("kind", ["octagon", "box"])
def test_choosing_many_splits_at_once_gives_the_cuts_of_one_at_a_time(kind):
    rng = np.random.default_rng(3)
    polys = _polytopes(rng, kind, 240)
    options = RefinementOptions(min_split_fraction=0.1)
    xs, ys, splittables = [], [], []
    for i, p in enumerate(polys):
        blo, bhi = p.box()
        x = blo + (bhi - blo) * rng.random((400, 2))
        case = i % 6
        if case == 0:  # noise
            y = rng.random(400)
        elif case == 1:  # flat: bisect the widest splittable axis
            y = np.full(400, 0.3)
        elif case == 2:  # a clean boundary
            y = 1.0 / (1.0 + np.exp(-(x[:, 0] - x[:, 0].mean()) * 5))
        elif case == 3:  # every sample in a sliver near a face: the cut is moved inside the allowed range
            x[:, 0] = blo[0] + (bhi[0] - blo[0]) * 0.03 * rng.random(400)
            y = (x[:, 1] > np.median(x[:, 1])).astype(float)
        elif case == 4:  # ties: probabilities on a coarse grid
            y = np.round(rng.random(400) * 2) / 2
        else:  # probabilities 0 and 1 exactly (clipped)
            y = (rng.random(400) < 0.1).astype(float)
        xs.append(x)
        ys.append(y)
        splittables.append(rng.random(p.template.k) < 0.75 if i % 7 else np.zeros(p.template.k, dtype=bool))
    got = choose_split_many(polys, xs, ys, splittables, options)
    for i, p in enumerate(polys):
        assert got[i] == reference_choose_split(p, xs[i], ys[i], splittables[i], options), i


def test_splitting_many_polytopes_at_once_gives_the_sides_of_one_at_a_time():
    rng = np.random.default_rng(5)
    polys = _polytopes(rng, "octagon", 600)
    axes = rng.integers(0, 4, len(polys))
    values = [p.lo[a] + rng.uniform(-0.1, 1.1) * (p.hi[a] - p.lo[a]) for p, a in zip(polys, axes, strict=True)]
    empty = 0
    for p, a, v, sides in zip(polys, axes, values, split_many(polys, axes, values), strict=True):
        expected_sides = reference_split(p, int(a), v)
        for got in (sides, p.split(int(a), v)):  # the one-polytope method is the batch of one
            for side, expected in zip(got, expected_sides, strict=True):
                assert (side is None) == (expected is None)
                if side is not None:
                    assert np.array_equal(side.lo, expected.lo) and np.array_equal(side.hi, expected.hi)
        empty += sum(side is None for side in expected_sides)
    assert empty > 20  # cuts outside the polytope leave one side empty
