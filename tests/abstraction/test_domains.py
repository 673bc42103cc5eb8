"""Template polyhedra: construction, support functions, splitting, containment, sampling."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.abstraction.domains import DomainError, Polytope, Template
from rlverify.abstraction.geometry import _support_lp, support, vertices_2d
from rlverify.errors import RlverifyError

NAMES = ("x", "y")


def random_polytope(template: Template, rng: np.random.Generator) -> Polytope:
    pts = rng.normal(size=(6, template.n)) * rng.uniform(0.1, 3.0) + rng.normal(size=template.n) * 5
    return template.hull(pts)


@pytest.mark.parametrize("kind", ["box", "octagon"])
def test_hull_contains_points_and_is_tight(kind):
    rng = np.random.default_rng(0)
    t = Template.named(kind, NAMES)
    pts = rng.normal(size=(50, 2))
    p = t.hull(pts)
    assert p.contains_points(pts).all()
    # every bound is attained by some point (up to the padding)
    proj = pts @ t.axes.T
    assert np.allclose(proj.max(axis=0), p.hi, atol=1e-6)
    assert np.allclose(proj.min(axis=0), p.lo, atol=1e-6)


def test_octagon_has_diagonal_axes():
    t = Template.octagon(NAMES)
    assert t.k == 4
    assert {tuple(r) for r in t.axes} == {(1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (1.0, -1.0)}


def test_vertices_support_matches_lp():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = rng.normal(size=(7, 2))
        # a bounded polygon: add a box
        a = np.vstack([a, np.eye(2), -np.eye(2)])
        b = np.concatenate([rng.uniform(0.5, 2.0, 7), np.full(4, 3.0)])
        dirs = rng.normal(size=(5, 2))
        s_v = support(a, b, dirs)
        s_lp = _support_lp(a, b, dirs)
        # the LP path pads outward beyond HiGHS's tolerances: never below the exact vertex maxima
        assert (s_lp >= s_v - 1e-12).all()
        assert np.allclose(s_v, s_lp, atol=1e-4)


def test_empty_polygon_has_no_vertices():
    a = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    b = np.array([0.0, -1.0, 1.0, 1.0])  # x <= 0 and x >= 1
    assert len(vertices_2d(a, b)) == 0
    assert support(a, b, np.eye(2)) is None


@pytest.mark.parametrize("kind", ["box", "octagon"])
def test_split_covers_the_polytope(kind):
    rng = np.random.default_rng(2)
    t = Template.named(kind, NAMES)
    p = random_polytope(t, rng)
    x = p.sample(500, rng)
    assert p.contains_points(x, tol=1e-9).all()
    for axis in range(t.k):
        c = 0.3 * p.lo[axis] + 0.7 * p.hi[axis]
        left, right = p.split(axis, c)
        inside = np.zeros(len(x), dtype=bool)
        for child in (left, right):
            assert child is not None
            assert p.contains(child) or np.all(child.hi <= p.hi + 1e-8)
            inside |= child.contains_points(x, tol=1e-8)
        assert inside.all()


def test_containment_is_exact_on_tight_bounds():
    t = Template.octagon(NAMES)
    big = t.from_box(np.array([0.0, 0.0]), np.array([2.0, 2.0]))
    small = t.from_box(np.array([0.5, 0.5]), np.array([1.0, 1.0]))
    assert big.contains(small)
    assert not small.contains(big)


def test_hit_and_run_stays_inside_and_spreads():
    rng = np.random.default_rng(3)
    t = Template.octagon(NAMES)
    p = t.hull(np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 1.0]]))  # a thin triangle
    x = p.sample(1000, rng)
    assert len(x) >= 1000
    assert p.contains_points(x, tol=1e-9).all()
    assert x[:, 0].max() > 3.0 and x[:, 0].min() < 0.5


def test_unbounded_template_names_the_direction():
    with pytest.raises(DomainError, match=r"unbounded along .*y") as info:
        Template(np.array([[1.0, 0.0], [2.0, 0.0]]), NAMES)
    assert isinstance(info.value, RlverifyError)


def test_template_wrong_shape_is_rejected():
    with pytest.raises(DomainError, match=r"\(k, 2\) matrix"):
        Template.custom(NAMES, np.array([1.0, 2.0, 3.0]))


def test_custom_template_adds_box_and_drops_parallel_rows():
    t = Template.custom(NAMES, np.array([[1.0, 1.0], [-2.0, -2.0], [1.0, 0.0]]))
    assert t.k == 3  # x, y, x+y


def test_nearly_parallel_template_directions_are_refused():
    from rlverify.abstraction.domains import DomainError, Template

    with pytest.raises(DomainError, match="nearly parallel"):
        Template.custom(("x", "y"), np.array([[1.0, 1.0], [1.0, 1.0 + 1e-5]]))
    t = Template.custom(("x", "y"), np.array([[1.0, 1.0], [2.0, 2.0]]))  # the same direction: kept once
    assert len(t.axes) == 3


def test_one_dimensional_support_in_closed_form_agrees_with_the_lp():
    # 1-D polytopes are intervals: their support needs no LP (the LP's optimum is padded by its tolerances)
    from rlverify.abstraction.geometry import _support_1d, _support_lp

    rng = np.random.default_rng(0)
    for _ in range(500):
        m = int(rng.integers(1, 6))
        a = np.vstack([rng.normal(size=(m, 1)), [[1.0]], [[-1.0]]])
        b = np.r_[rng.normal(size=m) * rng.choice([1e-3, 1.0, 1e3]), 10.0, 10.0]
        d = rng.normal(size=(4, 1))
        lp, closed = _support_lp(a, b, d), _support_1d(a[:, 0], b, d[:, 0])
        assert (lp is None) == (closed is None)
        if lp is not None:
            scale = 1.0 + np.abs(lp) + np.abs(d[:, 0]) * 10.0
            assert (closed <= lp + 1e-12).all() and (lp - closed <= 2e-6 * scale).all()
