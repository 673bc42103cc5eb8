"""Robust value iteration against brute force (vertex enumeration) and Storm on tiny random IMDPs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rlverify.abstraction.imdp import IMDP, IMDPBuilder, IntervalError
from rlverify.abstraction.robust_vi import bounded_reachability, storm_bounded_reachability


def random_imdp(rng: np.random.Generator, n_states: int = 5, max_choices: int = 2, max_succ: int = 3) -> IMDP:
    """Random feasible IMDP: intervals around a random distribution; state 0 is fail, the last a leaf."""
    b = IMDPBuilder()
    for s in range(n_states):
        b.add_state(fail=(s == 0))
    for s in range(1, n_states - 1):
        for _ in range(rng.integers(1, max_choices + 1)):
            m = int(rng.integers(1, max_succ + 1))
            targets = rng.choice(n_states, size=m, replace=False)
            p = rng.dirichlet(np.ones(m))
            lo = np.clip(p - rng.uniform(0, 0.3, m), 0, 1)
            hi = np.clip(p + rng.uniform(0, 0.3, m), 0, 1)
            b.add_choice(s, {int(t): (float(lb), float(h)) for t, lb, h in zip(targets, lo, hi, strict=True)})
    return b.build()


def vertices_of_interval_simplex(lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """All vertices of {p : lo <= p <= hi, sum p = 1}: all but one coordinate at a bound."""
    m = len(lo)
    out = []
    for free in range(m):
        others = [i for i in range(m) if i != free]
        for choice in itertools.product((0, 1), repeat=len(others)):
            p = np.zeros(m)
            for i, c in zip(others, choice, strict=True):
                p[i] = hi[i] if c else lo[i]
            p[free] = 1.0 - p[others].sum()
            if lo[free] - 1e-12 <= p[free] <= hi[free] + 1e-12:
                out.append(p)
    return out


def brute_force(imdp: IMDP, horizon: int, maximise_nature: bool) -> np.ndarray:
    v = imdp.fail.astype(float)
    starts = np.searchsorted(imdp.trans_choice, np.arange(imdp.n_choices + 1))
    for _ in range(horizon):
        new = np.zeros(imdp.n_states)
        for c in range(imdp.n_choices):
            sl = slice(starts[c], starts[c + 1])
            vals = [p @ v[imdp.trans_target[sl]] for p in vertices_of_interval_simplex(imdp.trans_lo[sl], imdp.trans_hi[sl])]
            q = max(vals) if maximise_nature else min(vals)
            s = imdp.choice_state[c]
            new[s] = max(new[s], q)
        v = np.where(imdp.fail, 1.0, new)
    return v


@pytest.mark.parametrize("seed", range(25))
def test_robust_vi_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    imdp = random_imdp(rng, n_states=int(rng.integers(3, 7)))
    horizon = int(rng.integers(1, 5))
    for mode, nature_max in (("maxmax", True), ("maxmin", False)):
        ours, _ = bounded_reachability(imdp, horizon, mode=mode)
        assert np.allclose(ours, brute_force(imdp, horizon, nature_max), atol=1e-12)


def test_maxmax_above_maxmin_and_monotone_in_horizon():
    rng = np.random.default_rng(99)
    imdp = random_imdp(rng, n_states=8, max_choices=3)
    prev = np.zeros(imdp.n_states)
    for k in range(6):
        vmax, _ = bounded_reachability(imdp, k, mode="maxmax")
        vmin, _ = bounded_reachability(imdp, k, mode="maxmin")
        assert (vmax >= vmin - 1e-12).all()
        assert (vmax >= prev - 1e-12).all()
        prev = vmax


def test_known_value_by_hand():
    # s1 --[0.2, 0.5]--> fail, --[0.5, 0.8]--> s2 (leaf). Max-max: 0.5; max-min: 0.2; horizon 0: 0.
    b = IMDPBuilder()
    f, s1, s2 = b.add_state(fail=True), b.add_state(), b.add_state()
    b.add_choice(s1, {f: (0.2, 0.5), s2: (0.5, 0.8)})
    imdp = b.build()
    assert bounded_reachability(imdp, 1, mode="maxmax")[0][s1] == pytest.approx(0.5)
    assert bounded_reachability(imdp, 1, mode="maxmin")[0][s1] == pytest.approx(0.2)
    assert bounded_reachability(imdp, 0)[0][s1] == 0.0


@pytest.mark.parametrize(
    "lo,hi,match",
    [
        ((0.6, 0.6), (0.7, 0.7), "lower bounds sum above 1"),
        ((0.1, 0.1), (0.3, 0.3), "upper bounds sum below 1"),
        ((0.5, 0.6), (0.4, 0.9), "not a sub-interval"),
    ],
)
def test_infeasible_intervals_are_rejected(lo, hi, match):
    b = IMDPBuilder()
    f, s1, s2 = b.add_state(fail=True), b.add_state(), b.add_state()
    b.add_choice(s1, {f: (lo[0], hi[0]), s2: (lo[1], hi[1])})
    with pytest.raises(IntervalError, match=match):
        bounded_reachability(b.build(), 2)


def test_tightening_keeps_values():
    rng = np.random.default_rng(7)
    for _ in range(10):
        imdp = random_imdp(rng, n_states=6)
        for mode in ("maxmax", "maxmin"):
            a, _ = bounded_reachability(imdp, 3, mode=mode)
            b, _ = bounded_reachability(imdp.tightened(), 3, mode=mode)
            assert np.allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_storm_interval_engine_agrees(seed):
    pytest.importorskip("stormpy")
    rng = np.random.default_rng(100 + seed)
    imdp = random_imdp(rng, n_states=6).tightened()
    for mode in ("maxmax", "maxmin"):
        ours, _ = bounded_reachability(imdp, 3, mode=mode)
        storm = storm_bounded_reachability(imdp, 3, mode=mode)
        assert np.allclose(ours, storm, atol=1e-6)
