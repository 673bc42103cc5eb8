"""Statistics of deep statistical model checking: sample sizes, confidence intervals, SPRT.

All functions work on Bernoulli outcomes (a run satisfies the property or not). ``delta`` is the
error probability (confidence ``1 - delta``) and ``epsilon`` the half-width of an interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlverify.confidence import check_unit, clopper_pearson_lower
from rlverify.errors import StatisticsError


def okamoto_runs(epsilon: float, delta: float) -> int:
    """Okamoto / Chernoff–Hoeffding sample size ``n = ceil(ln(2/delta) / (2 epsilon^2))``.

    With ``n`` runs, ``P(|p_hat - p| > epsilon) < delta`` for every ``p``.
    """
    epsilon, delta = check_unit("epsilon", epsilon), check_unit("delta", delta)
    n = math.log(2.0 / delta) / (2.0 * epsilon * epsilon) if epsilon > 1e-150 else math.inf
    if not n < 2.0**62:
        raise StatisticsError(
            f"epsilon {epsilon:g} is too small: Okamoto's bound ln(2/delta)/(2 epsilon^2) asks for "
            f"{f'{n:.3g}' if math.isfinite(n) else 'more than 1e300'} runs; give a larger epsilon"
        )
    return math.ceil(n)


def adaptive_runs(p_hat: float, epsilon: float, delta: float) -> int:
    """Runs needed by the adaptive (Chernoff–Hoeffding with variance guess) bound of ``modes``.

    ``n = ceil(4 * n_okamoto * (1/4 - (|p_hat - 1/2| - 2 epsilon / 3)^2))`` (Budde et al., STTT 2020);
    equals the Okamoto size when ``p_hat`` is near 1/2 and needs fewer runs far from it. It is used
    sequentially: sampling stops at the first ``n`` with ``n >= adaptive_runs(p_hat_n, ...)``.
    """
    n0 = okamoto_runs(epsilon, delta)
    if not (0.0 <= p_hat <= 1.0):
        raise StatisticsError(f"p_hat must be in [0, 1], got {p_hat}")
    dist = max(abs(p_hat - 0.5) - 2.0 * epsilon / 3.0, 0.0)
    return math.ceil(4.0 * n0 * (0.25 - dist * dist))


def clopper_pearson(successes: int, runs: int, delta: float) -> tuple[float, float]:
    """Exact (Clopper–Pearson) two-sided ``1 - delta`` interval for a binomial proportion.

    Lower bound ``Beta(delta/2; k, n-k+1)`` (:func:`clopper_pearson_lower` at ``delta/2``), upper
    ``Beta(1-delta/2; k+1, n-k)`` (0 and 1 at the extremes).
    """
    from scipy.special import betainccinv  # lazy: scipy.special (not scipy.stats: ~1.5 s of import for the same call)

    delta = check_unit("delta", delta)
    k, n = _counts(successes, runs)
    lo = float(clopper_pearson_lower(k, n, delta / 2.0))
    hi = 1.0 if k == n else float(betainccinv(k + 1, n - k, delta / 2.0))  # = beta.isf: accurate for a tiny delta
    return lo, hi


def wilson(successes: int, runs: int, delta: float) -> tuple[float, float]:
    """Wilson score two-sided ``1 - delta`` interval (approximate; good coverage away from 0 and 1)."""
    from scipy.special import ndtri  # lazy: scipy.special (not scipy.stats)

    delta = check_unit("delta", delta)
    k, n = _counts(successes, runs)
    z = float(-ndtri(delta / 2.0))  # = norm.isf: finite and accurate for a tiny delta (ppf(1 - delta/2) rounds to 1)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _counts(successes: int, runs: int) -> tuple[int, int]:
    k, n = int(successes), int(runs)
    if n <= 0 or not (0 <= k <= n):
        raise StatisticsError(f"need 0 <= successes <= runs and runs > 0, got {k} of {n}")
    return k, n


@dataclass(frozen=True)
class SprtBounds:
    """Wald's sequential probability ratio test for ``H0: p >= theta + indifference`` vs ``H1: p <= theta - indifference``.

    Attributes:
        p0, p1: the two simple hypotheses ``theta + indifference`` and ``theta - indifference``.
        alpha: bound on P(accept H1 | H0); beta: bound on P(accept H0 | H1).
        accept_h1, accept_h0: the log-likelihood-ratio thresholds ``log((1-beta)/alpha)`` and ``log(beta/(1-alpha))``.
    """

    p0: float
    p1: float
    alpha: float
    beta: float

    @property
    def accept_h1(self) -> float:
        return math.log((1.0 - self.beta) / self.alpha)

    @property
    def accept_h0(self) -> float:
        return math.log(self.beta / (1.0 - self.alpha))

    @property
    def step_success(self) -> float:
        """Change of ``log(L1/L0)`` per satisfying run: ``log(p1/p0)``."""
        return math.log(self.p1 / self.p0)

    @property
    def step_failure(self) -> float:
        """Change of ``log(L1/L0)`` per violating run: ``log((1-p1)/(1-p0))``."""
        return math.log((1.0 - self.p1) / (1.0 - self.p0))

    def llr(self, successes: int, runs: int) -> float:
        """Log likelihood ratio ``log(L(H1)/L(H0))`` after ``successes`` of ``runs``."""
        return successes * self.step_success + (runs - successes) * self.step_failure

    def decide(self, successes: int, runs: int) -> str | None:
        """``"H0"`` (p >= theta + indifference), ``"H1"`` (p <= theta - indifference) or None (continue)."""
        v = self.llr(successes, runs)
        if v >= self.accept_h1:
            return "H1"
        if v <= self.accept_h0:
            return "H0"
        return None


def sprt(theta: float, *, indifference: float = 0.01, alpha: float = 0.05, beta: float = 0.05) -> SprtBounds:
    """Set up Wald's SPRT for ``P >= theta`` with indifference region ``theta +- indifference``.

    Raises:
        StatisticsError: when ``theta +- indifference`` leaves (0, 1) or alpha/beta are not in (0, 1).
    """
    theta = check_unit("theta", theta)
    indifference = check_unit("indifference", indifference)
    alpha, beta = check_unit("alpha", alpha), check_unit("beta", beta)
    p0, p1 = theta + indifference, theta - indifference
    if not (0.0 < p1 < p0 < 1.0):
        raise StatisticsError(
            f"SPRT: theta +- indifference = [{p1:g}, {p0:g}] must lie inside (0, 1); choose a smaller indifference"
        )
    return SprtBounds(p0=p0, p1=p1, alpha=alpha, beta=beta)
