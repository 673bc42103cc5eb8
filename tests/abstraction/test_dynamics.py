"""Continuous dynamics: hand-computed steps and the soundness contract of the piecewise enclosures."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.abstraction.domains import Template
from rlverify.abstraction.successors import part_successors
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


@pytest.mark.parametrize("system", [BouncingBall(), AdaptiveCruiseControl(), InvertedPendulum()],
                         ids=["ball", "acc", "pendulum"])
@pytest.mark.parametrize("kind", ["box", "octagon"])
def test_concrete_successors_lie_in_abstract_successors(system, kind):
    """For random parts: each sampled state's true successor is in the abstract successor of a piece containing it."""
    rng = np.random.default_rng(1)
    t = Template.named(kind, system.variables)
    centres = {"bouncing-ball-v1": ([0.0, -12.0], [9.0, 12.0]), "acc-v1": ([0.0, 25.0], [12.0, 36.5]),
               "pendulum-v1": ([-0.3, -1.0], [0.3, 1.0])}[system.name]
    clo, chi = np.array(centres[0]), np.array(centres[1])
    for _ in range(25):
        c = clo + (chi - clo) * rng.random(2)
        pts = c + rng.normal(size=(5, 2)) * (chi - clo) * rng.uniform(0.005, 0.15)
        part = t.hull(pts)
        x = part.sample(300, rng)
        succ = part_successors(system, part, t)
        box_lo, box_hi = part.box()
        pieces = system.pieces(box_lo, box_hi)
        for a in range(len(system.actions)):
            y = system.step(x, np.full(len(x), a))
            ok = np.zeros(len(x), dtype=bool)
            for s in succ:
                in_piece = pieces[s.piece].contains(x)
                ok |= in_piece & s.polytopes[a].contains_points(y)
            assert ok.all()


def test_unsafe_sets():
    bb = BouncingBall()
    assert bb.is_unsafe(np.array([[0.5, 3.0], [0.5, 8.0], [2.0, 0.0]])).tolist() == [True, False, False]
    pen = InvertedPendulum()
    lim = np.deg2rad(12)
    assert pen.is_unsafe(np.array([[lim, 0.0], [-lim, 0.0], [0.9 * lim, 5.0]])).tolist() == [True, True, False]
