"""Splits chosen and made for many polytopes at once are bit for bit those of one polytope at a time (the
refinement's parts, so the abstraction, must not change with the batching)."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.abstraction.domains import Template, split_many
from rlverify.abstraction.refinement import RefinementOptions, choose_split_many
from tests.abstraction.reference_batching import reference_choose_split, reference_split


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


def test_the_batched_abstraction_is_the_one_polytope_at_a_time_abstraction(monkeypatch):
    """End to end: the bouncing ball's abstraction (octagons, containment, k = 10) built with the
    batched splits and containment search is, array for array, the one built with the old per-polytope code (the
    references put in their place), and so is its bound."""
    from rlverify.abstraction import AbstractionOptions, verify_abstraction
    from rlverify.abstraction import refinement as refinement_module
    from rlverify.abstraction import unfolding as unfolding_module
    from rlverify.benchmarks.registry import make
    from tests.abstraction.reference_batching import ReferenceIndex

    system = make("bouncing-ball-v1")
    opts = AbstractionOptions(horizon=10, domain="octagon", phi=0.1, containment=True, initial="small")
    batched = verify_abstraction(system.model(), system.policies["ppo"], opts)

    def one_at_a_time_cuts(polys, xs, ys, splittables, options):
        return [reference_choose_split(*item, options) for item in zip(polys, xs, ys, splittables, strict=True)]

    def one_at_a_time_sides(polys, axes, values):
        return [reference_split(p, int(a), float(v)) for p, a, v in zip(polys, axes, values, strict=True)]

    def one_at_a_time_successors(self, successors, depth):
        return [self.successor_state(sp, unsafe, depth, sure=sure) for sp, unsafe, sure in successors]

    monkeypatch.setattr(refinement_module, "choose_split_many", one_at_a_time_cuts)
    monkeypatch.setattr(refinement_module, "split_many", one_at_a_time_sides)
    monkeypatch.setattr(unfolding_module, "VisitedIndex", ReferenceIndex)
    monkeypatch.setattr(unfolding_module.Unfolding, "successor_states", one_at_a_time_successors)
    reference = verify_abstraction(system.model(), system.policies["ppo"], opts)

    assert batched.n_containment_merges > 500 and batched.n_polyhedra > 2000  # containment and refinement at work
    assert (batched.upper_bound, batched.lower_all) == (reference.upper_bound, reference.lower_all)
    for name in ("n_abstract_states", "n_polyhedra", "n_containment_merges", "n_shared_successors", "n_choices"):
        assert getattr(batched, name) == getattr(reference, name), name
    for name in ("fail", "choice_state", "trans_choice", "trans_target", "trans_lo", "trans_hi", "sure_fail"):
        assert np.array_equal(getattr(batched.imdp, name), getattr(reference.imdp, name)), name
    assert batched.parts == reference.parts


def test_generators_made_when_first_needed_give_the_parts_of_generators_made_up_front():
    """refine_many with a function making polytope i's generator (only for the polytopes that get sampled) refines
    exactly as with the generators made beforehand, and makes none for a polytope accepted without samples."""
    from rlverify.abstraction.network_bounds import NetworkBounder
    from rlverify.abstraction.refinement import refine_many
    from rlverify.policies.mlp import MLP

    bounder = NetworkBounder(MLP.random((2, 16, 16, 2), seed=5))
    t = Template.named("octagon", ("a", "b"))
    rng = np.random.default_rng(6)
    polys = [t.hull(rng.normal(size=(4, 2)) * s + rng.normal(size=2)) for s in np.geomspace(1e-4, 1.0, 12)]
    opts = RefinementOptions(phi=0.2, min_width=1e-2, samples=100)
    made: list[int] = []

    def make(i):
        made.append(i)
        return np.random.default_rng([1, i])

    lazy = refine_many(polys, bounder, opts, make)
    upfront = refine_many(polys, bounder, opts, [np.random.default_rng([1, i]) for i in range(len(polys))])
    assert len(made) == len(set(made)) and 0 < len(made) < len(polys)  # the tiny polytopes were never sampled
    for got, expected in zip(lazy, upfront, strict=True):
        assert len(got) == len(expected)
        for a, b in zip(got, expected, strict=True):
            assert np.array_equal(a.polytope.lo, b.polytope.lo) and np.array_equal(a.polytope.hi, b.polytope.hi)
            assert np.array_equal(a.bounds.lower, b.bounds.lower) and np.array_equal(a.bounds.upper, b.bounds.upper)


def test_vertices_and_starting_points_of_many_polytopes_at_once_are_those_of_one_at_a_time():
    """The vertices (sorted by angle), interior points and extra hit-and-run points of many polytopes computed at
    once (sample_many's start) are bit for bit those computed one polytope at a time before batching."""
    from rlverify.abstraction.domains import Polytope, _starting_points
    from tests.abstraction.reference_batching import reference_starting_point

    rng = np.random.default_rng(8)
    polys = []
    for kind in ("octagon", "box", "template"):
        t = Template.named(kind, ("a", "b"), np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 2.0]]) if kind == "template" else None)
        for _ in range(300):
            scale = 10.0 ** rng.integers(-6, 2)
            polys.append(t.hull(rng.normal(size=(int(rng.integers(1, 6)), 2)) * scale + rng.normal(size=2) * 5))
    fresh = [Polytope(p.template, p.lo, p.hi) for p in polys]  # no cached points: the reference computes its own
    starts = _starting_points(polys)
    for p, q, (x0, extra) in zip(polys, fresh, starts, strict=True):
        v, x0_ref, extra_ref = reference_starting_point(q)
        assert np.array_equal(p.vertices(), v) and np.array_equal(p.interior_point(), x0_ref)
        assert np.array_equal(x0, x0_ref) and np.array_equal(extra, extra_ref)
    assert len({len(p.vertices()) for p in polys}) >= 3  # several groups (point counts), single points included
