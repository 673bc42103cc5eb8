"""Continuous dynamics: hand-computed steps and the soundness contract of the piecewise enclosures."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.abstraction.domains import Template
from rlverify.abstraction.successors import intersects_unsafe, meets_unsafe_many, part_successors, successors_many
from rlverify.models.continuous import AdaptiveCruiseControl, BouncingBall, InvertedPendulum


def test_bouncing_ball_steps_by_hand():
    bb = BouncingBall()
    x = np.array([[5.0, 0.0], [0.05, -5.0], [6.0, -1.0], [6.0, -1.0], [6.0, 2.0]])
    a = np.array([0, 0, 1, 0, 1])
    y = bb.step(x, a)
    # free fall: v' = -0.981, p' = 5 - 0.0981
    assert np.allclose(y[0], [4.9019, -0.981])
    # bounce: v' = -5.981, p1 = 0.05 - 0.5981 < 0 -> p = 0, v = 0.9 * 5.981
    assert np.allclose(y[1], [0.0, 5.3829])
    # hit while falling above 4 m: v = -1.981 - 4, p = 4
    assert np.allclose(y[2], [4.0, -5.981])
    assert np.allclose(y[3], [5.8019, -1.981])
    # hit while rising: v' = 1.019 -> v = -0.9 * 1.019 - 4
    assert np.allclose(y[4], [4.0, -0.9 * 1.019 - 4.0])


def test_acc_steps_by_hand():
    acc = AdaptiveCruiseControl()
    y = acc.step(np.array([[5.0, 30.0], [5.0, 35.9]]), np.array([1, 1]))
    assert np.allclose(y[0], [5.0 + 0.1 * (28 - 30.3), 30.3])
    assert np.allclose(y[1], [5.0 + 0.1 * (28 - 36.0), 36.0])  # speed capped at 36
    assert np.allclose(acc.observe(np.array([[5.0, 30.0]])), [[-2.0, 5.0]])


def test_pendulum_step_by_hand():
    pen = InvertedPendulum()
    y = pen.step(np.array([[0.1, 0.0], [0.0, 0.0]]), np.array([0, 2]))
    om = 0.75 * np.sin(0.1)
    assert np.allclose(y[0], [0.1 + 0.05 * om, om])
    assert np.allclose(y[1], [0.05 * 0.3, 0.3])  # torque +2: omega += 3*2*0.05


SYSTEMS = [
    (BouncingBall(), np.array([-1.0, -15.0]), np.array([12.0, 15.0])),
    (AdaptiveCruiseControl(), np.array([-5.0, 20.0]), np.array([20.0, 37.0])),
    (InvertedPendulum(), np.array([-0.5, -3.0]), np.array([0.5, 3.0])),
    (InvertedPendulum(), np.array([-3.1, -9.0]), np.array([3.1, 9.0])),  # clip and wrap active
]


@pytest.mark.parametrize("system,lo,hi", SYSTEMS, ids=["ball", "acc", "pendulum", "pendulum-wide"])
def test_pieces_enclose_step(system, lo, hi):
    """Every state lies in some piece whose map encloses its true successor, for every action."""
    rng = np.random.default_rng(0)
    x = lo + (hi - lo) * rng.random((20000, system.n))
    pieces = system.pieces(lo, hi)
    for a in range(len(system.actions)):
        y = system.step(x, np.full(len(x), a))
        ok = np.zeros(len(x), dtype=bool)
        for piece in pieces:
            ok |= piece.contains(x) & piece.maps[a].contains(x, y)
        assert ok.all(), f"action {a}: {int((~ok).sum())} successors outside every piece"


CENTRES = {
    "bouncing-ball-v1": ([0.0, -12.0], [9.0, 12.0]),
    "acc-v1": ([-2.0, 25.0], [12.0, 36.5]),
    "pendulum-v1": ([-0.3, -1.0], [0.3, 1.0]),
}


def random_parts(system, template, count: int, rng: np.random.Generator) -> list:
    """Small random template polytopes around the region where the system's pieces change."""
    clo, chi = (np.array(v) for v in CENTRES[system.name])
    parts = []
    for _ in range(count):
        c = clo + (chi - clo) * rng.random(2)
        pts = c + rng.normal(size=(5, 2)) * (chi - clo) * rng.uniform(0.005, 0.15)
        parts.append(template.hull(pts))
    return parts


def assert_successors_enclose(system, part, succ, rng: np.random.Generator) -> None:
    """Each sampled state's true successor is in the abstract successor of a piece containing it."""
    x = part.sample(300, rng)
    pieces = system.pieces(*part.box())
    for a in range(len(system.actions)):
        y = system.step(x, np.full(len(x), a))
        ok = np.zeros(len(x), dtype=bool)
        for s in succ:
            ok |= pieces[s.piece].contains(x) & s.polytopes[a].contains_points(y)
        assert ok.all(), f"action {a}: {int((~ok).sum())} true successors outside the abstract successors"


@pytest.mark.parametrize(
    "system", [BouncingBall(), AdaptiveCruiseControl(), InvertedPendulum()], ids=["ball", "acc", "pendulum"]
)
@pytest.mark.parametrize("kind", ["box", "octagon"])
def test_concrete_successors_lie_in_abstract_successors(system, kind):
    rng = np.random.default_rng(1)
    t = Template.named(kind, system.variables)
    for part in random_parts(system, t, 25, rng):
        assert_successors_enclose(system, part, part_successors(system, part, t), rng)


@pytest.mark.parametrize("system", [BouncingBall(), AdaptiveCruiseControl()], ids=["ball", "acc"])
def test_pieces_declared_box_independent_do_not_depend_on_the_box(system):
    assert not system.pieces_depend_on_box
    rng = np.random.default_rng(2)
    ref = system.pieces(system.domain_lo, system.domain_hi)
    for _ in range(5):
        lo = system.domain_lo + (system.domain_hi - system.domain_lo) * rng.random(2) * 0.5
        hi = lo + (system.domain_hi - lo) * rng.random(2)
        got = system.pieces(lo, hi)
        assert len(got) == len(ref)
        for p, q in zip(got, ref, strict=True):
            assert np.array_equal(p.g_mat, q.g_mat) and np.array_equal(p.g_vec, q.g_vec)
            for m, n in zip(p.maps, q.maps, strict=True):
                assert np.array_equal(m.a, n.a) and np.array_equal(m.c, n.c) and np.array_equal(m.b, n.b)


@pytest.mark.parametrize(
    "system", [BouncingBall(), AdaptiveCruiseControl(), InvertedPendulum()], ids=["ball", "acc", "pendulum"]
)
@pytest.mark.parametrize("kind", ["box", "octagon"])
def test_batched_successors_contain_concrete_successors_and_match_per_part(system, kind):
    """successors_many (vectorised over the batch) encloses every true successor and equals part_successors."""
    rng = np.random.default_rng(3)
    t = Template.named(kind, system.variables)
    parts = random_parts(system, t, 60, rng)
    batched = successors_many(system, t, parts)
    assert len(batched) == len(parts)
    for part, succ in zip(parts, batched, strict=True):
        assert_successors_enclose(system, part, succ, rng)
        single = {s.piece: s for s in part_successors(system, part, t)}
        assert set(single) <= {s.piece for s in succ}
        for s in succ:
            if s.piece in single:  # a piece only touched may be kept by one path and not the other
                for p, q in zip(s.polytopes, single[s.piece].polytopes, strict=True):
                    assert np.allclose(p.lo, q.lo, rtol=1e-9, atol=1e-9) and np.allclose(p.hi, q.hi, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("system", [BouncingBall(), AdaptiveCruiseControl()], ids=["ball", "acc"])
@pytest.mark.parametrize("kind", ["box", "octagon"])
def test_batched_unsafe_check_agrees_with_single_check(system, kind):
    rng = np.random.default_rng(4)
    t = Template.named(kind, system.variables)
    # parts around the unsafe set's boundary: p = 1 / |v| = 7 for the ball, dx = 0 for ACC
    centre = {"bouncing-ball-v1": ([0.5, -9.0], [1.5, 9.0]), "acc-v1": ([-1.0, 25.0], [1.0, 36.0])}[system.name]
    clo, chi = (np.array(v) for v in centre)
    parts = [t.hull(clo + (chi - clo) * rng.random(2) + rng.normal(size=(4, 2)) * rng.uniform(0.01, 0.5)) for _ in range(300)]
    batched = meets_unsafe_many(system, t, parts)
    single = np.array([intersects_unsafe(system, p) for p in parts])
    assert batched.tolist() == single.tolist()
    assert 50 < batched.sum() < 250  # both answers occur
    # and both agree with sampled points: a part with an unsafe sample meets the unsafe set
    for part, meets in zip(parts, batched, strict=True):
        if system.is_unsafe(part.sample(100, rng)).any():
            assert meets


def test_unsafe_sets():
    bb = BouncingBall()
    assert bb.is_unsafe(np.array([[0.5, 3.0], [0.5, 8.0], [2.0, 0.0]])).tolist() == [True, False, False]
    pen = InvertedPendulum()
    lim = np.deg2rad(12)
    assert pen.is_unsafe(np.array([[lim, 0.0], [-lim, 0.0], [0.9 * lim, 5.0]])).tolist() == [True, True, False]
