"""The least intrusive correction (rlverify.exact.least_intrusive) against brute force on generated small MDPs.

What is comparable: the LP optimises over step-dependent randomised corrections. Its optimum is attained by mixing
*pure* corrections (per (state, step), all of the network's mass on a set of actions moved to one action: the
minimisers of TV + linear, the Lagrangian's), so the brute force enumerates every combination of pure corrections on
the product (state x step), computes each one's (moved mass, reach probability) by a plain loop, and takes the lower
convex hull of those points at the bound (mixing two corrections' occupation measures is a correction). No code is
shared with the LP: no occupation measures, no HiGHS.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlverify.errors import PropertyError
from rlverify.exact.least_intrusive import least_intrusive


def _pure(pi: np.ndarray) -> list[np.ndarray]:
    """Every pure correction of ``pi``: the mass of a subset of the other actions moved onto one action."""
    A = len(pi)
    out = [pi.copy()]
    for m in range(A):
        others = [a for a in range(A) if a != m]
        for r in range(1, len(others) + 1):
            for moved in itertools.combinations(others, r):
                q = pi.copy()
                q[m] += q[list(moved)].sum()
                q[list(moved)] = 0.0
                out.append(q)
    return out


def _brute(T: np.ndarray, pi: np.ndarray, bad: int, bound: float) -> float | None:
    """Least moved mass within 2 steps s.t. P(reach bad within 2) <= bound, over mixtures of pure corrections."""
    n = T.shape[0]
    points = []
    for s0 in _pure(pi[0]):
        p1 = s0 @ T[0]  # distribution after one step
        tv0 = np.maximum(pi[0] - s0, 0).sum()
        go = [s for s in range(n) if s != bad and p1[s] > 0]
        options = []
        for s in go:
            options.append([(p1[s] * np.maximum(pi[s] - q, 0).sum(), p1[s] * (q @ T[s][:, bad])) for q in _pure(pi[s])])
        for combo in itertools.product(*options) if options else [()]:
            points.append((tv0 + sum(c for c, _ in combo), p1[bad] + sum(r for _, r in combo)))
    pts = sorted(set(points), key=lambda p: (p[1], p[0]))
    if pts[0][1] > bound + 1e-12:
        return None
    # lower convex hull of (reach, cost), then the least cost at reach <= bound
    hull: list[tuple[float, float]] = []
    for c, r in pts:
        while len(hull) >= 2:
            (c1, r1), (c2, r2) = hull[-2], hull[-1]
            if (r2 - r1) * (c - c1) - (c2 - c1) * (r - r1) <= 0:
                hull.pop()
            else:
                break
        hull.append((c, r))
    best = min(c for c, r in hull if r <= bound + 1e-15)
    for (c1, r1), (c2, r2) in itertools.pairwise(hull):
        if r1 <= bound < r2:
            w = (r2 - bound) / (r2 - r1)
            best = min(best, w * c1 + (1 - w) * c2)
    return best


@st.composite
def _models(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int, float]:
    A = draw(st.integers(2, 3))
    n = draw(st.integers(3, 6 if A == 2 else 4))
    bad = n - 1
    T = np.zeros((n, A, n))
    for s in range(n):
        for a in range(A):
            w = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), dtype=float)
            if w.sum() == 0:
                w[draw(st.integers(0, n - 1))] = 1.0
            T[s, a] = w / w.sum()
    T[bad] = 0.0
    T[bad, :, bad] = 1.0
    z = np.array(draw(st.lists(st.integers(0, 6), min_size=n * A, max_size=n * A)), dtype=float).reshape(n, A)
    pi = np.exp(z / 2)
    pi /= pi.sum(axis=1, keepdims=True)
    frac = draw(st.floats(0.05, 0.95))
    return T, pi, bad, frac


def _arrays(T: np.ndarray, pi: np.ndarray, bad: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    n, A, _ = T.shape
    # the bad state has one (self-loop) choice, as in a property-directed MDP
    rows, weights, groups = [], [], [0]
    for s in range(n):
        acts = [0] if s == bad else range(A)
        for a in acts:
            rows.append(T[s, a])
            weights.append(1.0 if s == bad else pi[s, a])
        groups.append(len(rows))
    psi = np.zeros(n, dtype=bool)
    psi[bad] = True
    return sp.csr_matrix(np.array(rows)), np.array(groups), np.array(weights), psi


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_models())
def test_the_lp_optimum_equals_brute_force_over_mixtures_of_pure_corrections(case) -> None:
    T, pi, bad, frac = case
    n = T.shape[0]
    # the bound between the least reach any correction achieves and the network's own (by brute force over pure)
    unshielded = _brute(T, pi, bad, 1.0)
    assert unshielded == pytest.approx(0.0, abs=1e-12)
    lo_reach = min(
        (p @ T[0])[bad] + sum((p @ T[0])[s] * min(T[s][:, bad]) for s in range(n) if s != bad) for p in np.eye(T.shape[1])
    )
    own = (pi[0] @ T[0])[bad] + sum((pi[0] @ T[0])[s] * (pi[s] @ T[s][:, bad]) for s in range(n) if s != bad)
    bound = float(lo_reach + frac * (own - lo_reach))
    expected = _brute(T, pi, bad, bound)
    M, groups, weights, psi = _arrays(T, pi, bad)
    if expected is None:
        with pytest.raises(PropertyError):
            least_intrusive(M, groups, weights, np.ones(n, dtype=bool), psi, 0, 2, bound, "<=")
        return
    c = least_intrusive(M, groups, weights, np.ones(n, dtype=bool), psi, 0, 2, bound, "<=")
    assert c.lp_optimum == pytest.approx(expected, abs=1e-7)
    # the corrected policy, checked on its product chain, meets the bound, and its recomputed intrusion is the LP's
    assert c.satisfied is True and c.upper <= bound + 1e-12
    assert c.measure_value == pytest.approx(expected, abs=1e-6)
    # the corrected reach probability by a plain loop over sigma (independent of the product chain's solve)
    s0 = np.array([c.sigma[0, groups[0] + a] for a in range(T.shape[1])])
    p1 = s0 @ T[0]
    reach = p1[bad]
    for s in range(n):
        if s != bad and p1[s] > 0:
            q = np.array([c.sigma[1, groups[s] + a] for a in range(T.shape[1])])
            reach += p1[s] * (q @ T[s][:, bad])
    assert reach == pytest.approx(c.value, abs=1e-9)


def test_a_bound_no_correction_meets_is_refused() -> None:
    T = np.zeros((3, 2, 3))
    T[0, 0] = [0, 0.5, 0.5]
    T[0, 1] = [0, 0.8, 0.2]
    T[1, :, 1] = 1.0
    T[2, :, 2] = 1.0
    pi = np.full((3, 2), 0.5)
    M, groups, weights, psi = _arrays(T, pi, 2)
    with pytest.raises(PropertyError, match="no correction meets the bound"):
        least_intrusive(M, groups, weights, np.ones(3, dtype=bool), psi, 0, 2, 0.1, "<=")
    # 0.25 = 0.5 q + 0.2 (1 - q) at q = 1/6: 1/2 - 1/6 = 1/3 of the mass moved from action 0 to action 1
    c = least_intrusive(M, groups, weights, np.ones(3, dtype=bool), psi, 0, 2, 0.25, "<=")
    assert c.lp_optimum == pytest.approx(1 / 3, abs=1e-9) and c.satisfied is True
    assert c.measure_value == pytest.approx(1 / 3, abs=1e-9) and c.randomised_product_states == 1
