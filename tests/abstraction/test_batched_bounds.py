"""Bounds over a batch of polytopes: the same numbers as one polytope at a time, sound, and cheap.

The reference below is the per-polytope algorithm as it stood before batching (exact first layer by the
support function, interval propagation, backward linear relaxation), written out independently of
:class:`NetworkBounder`; the batched bounds must equal it bit for bit, whatever else is in the batch.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlverify.abstraction import domains
from rlverify.abstraction.domains import Template, sample_many
from rlverify.abstraction.geometry import support
from rlverify.abstraction.network_bounds import NetworkBounder, _widen, probabilities_from_differences
from rlverify.abstraction.refinement import RefinementOptions, refine, refine_many
from rlverify.policies.mlp import MLP


def _pad(lb, ub):
    pad = 1e-9 * (1 + np.abs(lb) + np.abs(ub))
    return lb - pad, ub + pad


def reference_bounds(mlp: MLP, poly, enough):
    """(lower, upper, method) of one polytope, the pre-batching way."""
    a, b = poly.constraints
    ws, bs = mlp.weights, mlp.biases

    def backward(lam, layer, pre):
        const = np.zeros(len(lam)) + lam @ bs[layer]
        lam = lam @ ws[layer]
        for k in range(layer - 1, -1, -1):
            lb, ub = pre[k]
            active, dead = lb >= 0, ub <= 0
            unstable = ~active & ~dead
            denom = np.where(unstable, ub - lb, 1.0)
            up_slope = np.where(active, 1.0, np.where(unstable, ub / denom, 0.0))
            up_icpt = np.where(unstable, -ub * lb / denom, 0.0)
            lo_slope = np.where(active, 1.0, np.where(unstable & (ub >= -lb), 1.0, 0.0))
            pos = lam >= 0
            const = const + (lam * np.where(pos, 0.0, up_icpt[None, :])).sum(axis=1)
            lam = lam * np.where(pos, lo_slope[None, :], up_slope[None, :])
            const = const + lam @ bs[k]
            lam = lam @ ws[k]
        return const - support(a, b, -lam)

    def preactivations(linear):
        h = ws[0].shape[0]
        s = support(a, b, np.vstack([ws[0], -ws[0]]))
        out = [_pad(-s[h:] + bs[0], s[:h] + bs[0])]
        for k in range(1, len(ws) - 1):
            lb, ub = out[-1]
            lo, hi = np.maximum(lb, 0.0), np.maximum(ub, 0.0)
            wp, wn = np.maximum(ws[k], 0.0), np.minimum(ws[k], 0.0)
            lb, ub = wp @ lo + wn @ hi + bs[k], wp @ hi + wn @ lo + bs[k]
            if linear:
                m = ws[k].shape[0]
                lin = backward(np.vstack([np.eye(m), -np.eye(m)]), k, out)
                lb, ub = np.maximum(lb, lin[:m]), np.minimum(ub, -lin[m:])
            out.append(_pad(lb, ub))
        return out

    def ibp(pre):
        lo, hi = np.maximum(pre[-1][0], 0.0), np.maximum(pre[-1][1], 0.0)
        dw = ws[-1][None, :, :] - ws[-1][:, None, :]
        db = bs[-1][None, :] - bs[-1][:, None]
        return (
            np.maximum(dw, 0) @ lo + np.minimum(dw, 0) @ hi + db,
            np.maximum(dw, 0) @ hi + np.minimum(dw, 0) @ lo + db,
        )

    def probabilities(dl, du):
        dl = np.maximum(dl, -du.T)
        du = np.minimum(du, -dl.T)
        return probabilities_from_differences(*_widen(dl, du))

    if enough is not None:
        lower, upper = probabilities(*ibp(preactivations(False)))
        if (upper - lower).max() <= enough:
            return lower, upper, "interval"
    pre = preactivations(True)
    dl, du = ibp(pre)
    na = len(bs[-1])
    pairs = [(i, j) for i in range(na) for j in range(na) if i != j]
    lam = np.zeros((len(pairs), na))
    for r, (i, j) in enumerate(pairs):
        lam[r, j] += 1.0
        lam[r, i] -= 1.0
    low = backward(lam, len(ws) - 1, pre)
    cl = np.full((na, na), -np.inf)
    for r, (i, j) in enumerate(pairs):
        cl[i, j] = low[r]
    np.fill_diagonal(cl, 0.0)
    lower, upper = probabilities(np.maximum(dl, cl), np.minimum(du, -cl.T))
    return lower, upper, "linear"


@st.composite
def batches(draw):
    n = draw(st.sampled_from([1, 2, 2, 2, 3]))
    hidden = draw(st.lists(st.integers(2, 24), min_size=1, max_size=3))
    sizes = (n, *hidden, draw(st.integers(2, 4)))
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    template = Template.named(draw(st.sampled_from(["box", "octagon"])), tuple("xyz"[:n]))
    count = draw(st.integers(1, 12)) if n < 3 else draw(st.integers(1, 3))
    scales = 10.0 ** rng.uniform(-4, 0.5, size=count)
    polys = [template.hull(rng.normal(size=(4, n)) * s + rng.normal(size=n)) for s in scales]
    enough = draw(st.sampled_from([None, 1e-2, 0.2, 1.0]))
    return MLP.random(sizes, seed=seed), polys, enough, rng


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_batched_bounds_equal_the_per_polytope_reference_bit_for_bit_and_contain_samples(case):
    mlp, polys, enough, rng = case
    bounder = NetworkBounder(mlp)
    batched = bounder.bounds_many(polys, enough=enough)
    reordered = bounder.bounds_many(polys[::-1], enough=enough)[::-1]
    for poly, got, again in zip(polys, batched, reordered, strict=True):
        lower, upper, method = reference_bounds(mlp, poly, enough)
        assert got.method == method == again.method
        assert np.array_equal(got.lower, lower) and np.array_equal(got.upper, upper)
        assert np.array_equal(again.lower, lower) and np.array_equal(again.upper, upper)
        alone = bounder.bounds(poly, milp=False, enough=enough)
        assert np.array_equal(alone.lower, lower) and np.array_equal(alone.upper, upper)
        probs = bounder(poly.sample(200, rng))  # soundness: the network's values at points of the polytope
        assert (probs >= got.lower).all() and (probs <= got.upper).all()


def test_vertices_are_enumerated_once_per_batch_not_per_bound(monkeypatch):
    calls = []
    real = domains.pairwise_vertices_2d
    monkeypatch.setattr(domains, "pairwise_vertices_2d", lambda a, b, *r: calls.append(len(b)) or real(a, b, *r))
    t = Template.named("octagon", ("a", "b"))
    rng = np.random.default_rng(3)
    polys = [t.hull(rng.normal(size=(4, 2)) * 0.3 + rng.normal(size=2)) for _ in range(50)]
    bounder = NetworkBounder(MLP.random((2, 16, 16, 3), seed=3))
    bounder.bounds_many(polys, enough=None)
    assert calls == [50]  # one enumeration for the whole batch (was ~6 per polytope and bound)
    bounder.bounds_many(polys, enough=1e-3)
    [p.sample(50, rng) for p in polys]
    [p.box() for p in polys]
    assert calls == [50]  # cached on each polytope


def test_polytopes_are_immutable_and_leave_the_callers_arrays_alone():
    t = Template.named("box", ("a", "b"))
    lo, hi = np.array([0.0, 0.0]), np.array([1.0, 1.0])
    p = domains.Polytope(t, lo, hi)
    with pytest.raises(ValueError, match="read-only"):
        p.lo[0] = -1.0
    lo[0] = 5.0  # the caller's array is still writable
    assert lo.flags.writeable


def test_sampling_many_polytopes_together_draws_the_same_points_as_one_at_a_time():
    rng = np.random.default_rng(4)
    polys = []
    for n, kind in [(1, "box"), (2, "box"), (2, "octagon"), (3, "octagon")] * 3:
        polys.append(Template.named(kind, tuple("xyz"[:n])).hull(rng.normal(size=(4, n)) * 0.5 + rng.normal(size=n)))
    together = sample_many(polys, 120, [np.random.default_rng([9, i]) for i in range(len(polys))])
    for i, (p, x) in enumerate(zip(polys, together, strict=True)):
        assert np.array_equal(x, p.sample(120, np.random.default_rng([9, i])))
        assert p.contains_points(x, tol=1e-7).all()
    shared = np.random.default_rng(0)
    with pytest.raises(ValueError, match="distinct generator"):
        sample_many(polys[:2], 10, [shared, shared])


@pytest.mark.parametrize("milp", ["auto", "never"])
def test_refining_side_by_side_gives_the_parts_of_one_at_a_time(milp):
    bounder = NetworkBounder(MLP.random((2, 16, 16, 2), seed=5))
    t = Template.named("octagon", ("a", "b"))
    rng = np.random.default_rng(6)
    polys = [t.hull(rng.normal(size=(4, 2)) * s + rng.normal(size=2)) for s in np.geomspace(1e-3, 1.0, 12)]
    opts = RefinementOptions(phi=0.2, min_width=1e-2, samples=100, milp=milp)
    together = refine_many(polys, bounder, opts, [np.random.default_rng([1, i]) for i in range(len(polys))])
    shared = np.random.default_rng(2)
    in_order = refine_many(polys, bounder, opts, shared)  # one shared generator: one refinement after another
    shared_again = np.random.default_rng(2)
    assert sum(len(parts) for parts in together) > 2 * len(polys)  # real refinement happened
    for i, poly in enumerate(polys):
        for got, expected in (
            (together[i], refine(poly, bounder, opts, np.random.default_rng([1, i]))),
            (in_order[i], refine(poly, bounder, opts, shared_again)),
        ):
            assert len(got) == len(expected)
            for a, b in zip(got, expected, strict=True):
                assert np.array_equal(a.polytope.lo, b.polytope.lo) and np.array_equal(a.polytope.hi, b.polytope.hi)
                assert np.array_equal(a.bounds.lower, b.bounds.lower) and a.bounds.method == b.bounds.method
