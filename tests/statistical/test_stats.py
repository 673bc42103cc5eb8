"""Statistics functions against values computed independently (scipy's binomtest, closed forms by hand)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import beta, binomtest

from rlverify.statistical import StatisticsError, adaptive_runs, clopper_pearson, okamoto_runs, sprt, wilson


def test_okamoto_matches_notes():
    # NOTES.md: eps=0.01, delta=0.05 -> 18,445 runs
    assert okamoto_runs(0.01, 0.05) == 18445
    assert okamoto_runs(0.1, 0.1) == math.ceil(math.log(20) / 0.02)


@pytest.mark.parametrize("k,n,delta", [(0, 10, 0.05), (3, 10, 0.05), (10, 10, 0.05), (512, 1000, 0.01), (1, 200, 0.1)])
def test_clopper_pearson_against_scipy(k, n, delta):
    lo, hi = clopper_pearson(k, n, delta)
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - delta, method="exact")
    assert lo == pytest.approx(ci.low, abs=1e-12)
    assert hi == pytest.approx(ci.high, abs=1e-12)
    if 0 < k < n:  # and the beta-quantile definition
        assert lo == pytest.approx(beta.ppf(delta / 2, k, n - k + 1))


@pytest.mark.parametrize("k,n,delta", [(0, 10, 0.05), (3, 10, 0.05), (512, 1000, 0.01), (199, 200, 0.1)])
def test_wilson_against_scipy(k, n, delta):
    lo, hi = wilson(k, n, delta)
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - delta, method="wilson")
    assert lo == pytest.approx(ci.low, abs=1e-9)
    assert hi == pytest.approx(ci.high, abs=1e-9)


def test_adaptive_bound():
    # at p_hat = 1/2 the adaptive bound is the Okamoto number
    assert adaptive_runs(0.5, 0.01, 0.05) == okamoto_runs(0.01, 0.05)
    # NOTES.md: modes reported 4,820 runs at eps = delta = 0.01, p_hat = 0.959 (p_hat rounded to 3 digits)
    assert adaptive_runs(0.959, 0.01, 0.01) == pytest.approx(4820, rel=0.01)
    assert adaptive_runs(0.99, 0.01, 0.05) < adaptive_runs(0.7, 0.01, 0.05) < okamoto_runs(0.01, 0.05)


def test_sprt_by_hand():
    t = sprt(0.5, indifference=0.1, alpha=0.05, beta=0.05)
    assert (t.p0, t.p1) == pytest.approx((0.6, 0.4))
    assert t.accept_h1 == pytest.approx(math.log(0.95 / 0.05))
    assert t.accept_h0 == pytest.approx(math.log(0.05 / 0.95))
    # each success adds log(0.4/0.6) = -0.405; H0 accepted after ceil(2.944/0.405) = 8 successes
    assert t.decide(7, 7) is None
    assert t.decide(8, 8) == "H0"
    assert t.decide(0, 8) == "H1"
    assert t.decide(5, 10) is None


@pytest.mark.parametrize("eps,delta", [(0, 0.05), (1, 0.05), (0.01, 0), (0.01, 1.5), (-0.1, 0.05), (float("nan"), 0.1)])
def test_epsilon_delta_outside_unit_interval(eps, delta):
    with pytest.raises(StatisticsError, match=r"epsilon|delta"):
        okamoto_runs(eps, delta)


def test_bad_counts_and_sprt_range():
    with pytest.raises(StatisticsError, match="successes"):
        clopper_pearson(5, 3, 0.05)
    with pytest.raises(StatisticsError, match="indifference"):
        sprt(0.995, indifference=0.01)
    with pytest.raises(StatisticsError, match="alpha"):
        sprt(0.5, alpha=0)


def test_one_sided_clopper_pearson_lower_bound_against_the_binomial_tail():
    """The one-sided lower bound L at level 1 - alpha solves P(X >= k | n, L) = alpha (the binomial tail, computed
    by scipy's binom, not by the beta quantile); elementwise over arrays, 0 where k = 0."""
    import numpy as np
    from scipy.stats import binom

    from rlverify.statistical import clopper_pearson_lower

    k, n, alpha = np.array([0, 1, 7, 150, 200]), np.array([10, 10, 20, 200, 200]), 1e-4
    low = clopper_pearson_lower(k, n, alpha)
    assert low.shape == (5,) and low[0] == 0.0
    assert binom.sf(k[1:] - 1, n[1:], low[1:]) == pytest.approx(alpha, rel=1e-6)
    assert float(clopper_pearson_lower(3, 10, 0.025)) == clopper_pearson(3, 10, 0.05)[0]  # the two-sided interval's end
    assert clopper_pearson_lower(np.array([3.0]), np.array([10]), 0.05)[0] > 0  # whole numbers given as floats
    with pytest.raises(StatisticsError, match="0 <= successes <= runs"):
        clopper_pearson_lower(np.array([11]), np.array([10]), 0.05)
    with pytest.raises(StatisticsError, match="whole numbers"):
        clopper_pearson_lower(np.array([2.5]), np.array([10]), 0.05)


@given(
    n=st.integers(1, 100_000),
    frac=st.floats(0.0, 1.0),
    delta=st.floats(1e-12, 0.5),
)
@settings(max_examples=300, deadline=None)
def test_intervals_from_scipy_special_are_scipy_stats_quantiles(n, frac, delta):
    """clopper_pearson and wilson use scipy.special (betaincinv, betainccinv, ndtri) instead of importing scipy.stats:
    held against scipy.stats' beta and norm quantiles (independent code paths) to 1e-12 relative."""
    from scipy.stats import norm

    k = round(frac * n)
    lo, hi = clopper_pearson(k, n, delta)
    assert lo == (0.0 if k == 0 else pytest.approx(beta.ppf(delta / 2, k, n - k + 1), rel=1e-12, abs=0))
    assert hi == (1.0 if k == n else pytest.approx(beta.isf(delta / 2, k + 1, n - k), rel=1e-12, abs=0))
    z = norm.isf(delta / 2)
    p = k / n
    centre, half = (
        (p + z * z / (2 * n)) / (1 + z * z / n),
        z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n),
    )
    wl, wh = wilson(k, n, delta)
    assert wl == pytest.approx(max(0.0, centre - half), rel=1e-12, abs=1e-300)
    assert wh == pytest.approx(min(1.0, centre + half), rel=1e-12, abs=0)
