"""Confidence bounds every engine may use: the exact (Clopper-Pearson) lower bound of a binomial proportion.

The statistical engine's intervals (:mod:`rlverify.statistical.stats`) and the abstraction's worst-case witness
(:mod:`rlverify.abstraction.witness`) both bound a failure probability from below from counted runs: one function.
This module imports numpy, scipy (on first call) and :mod:`rlverify.errors` only.
"""

from __future__ import annotations

import math

import numpy as np

from rlverify.errors import StatisticsError

__all__ = ["check_unit", "clopper_pearson_lower"]


def check_unit(name: str, value: float) -> float:
    """``value`` as a float if it lies in the open interval (0, 1), else :class:`StatisticsError` naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise StatisticsError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not (0.0 < v < 1.0) or math.isnan(v):
        raise StatisticsError(f"{name} must be in the open interval (0, 1), got {value}")
    return v


def clopper_pearson_lower(successes: int | np.ndarray, runs: int | np.ndarray, alpha: float) -> np.ndarray:
    """Exact one-sided lower confidence bound at level ``1 - alpha`` for binomial proportions: ``Beta(alpha; k, n-k+1)``,
    0 where ``k = 0``; elementwise over arrays of counts (e.g. one bound per cell, at ``alpha = delta / cells`` for a
    Bonferroni check of all of them at once).

    Returns:
        float64 array of the broadcast shape of ``successes`` and ``runs`` (0-d for two numbers).

    Raises:
        StatisticsError: ``alpha`` outside (0, 1), or counts with ``runs <= 0`` or outside ``0 <= successes <= runs``.
    """
    from scipy.special import betaincinv  # lazy: scipy.special (= scipy.stats.beta.ppf, without its ~1.5 s import)

    alpha = check_unit("alpha", alpha)
    k, n = np.asarray(successes), np.asarray(runs)
    if k.dtype.kind not in "iu" or n.dtype.kind not in "iu":
        k_int, n_int = np.rint(k).astype(np.int64), np.rint(n).astype(np.int64)
        if (k_int != k).any() or (n_int != n).any():
            raise StatisticsError("Clopper-Pearson: the successes and runs must be whole numbers")
        k, n = k_int, n_int
    if (n <= 0).any() or (k < 0).any() or (k > n).any():
        raise StatisticsError("need 0 <= successes <= runs and runs > 0 for every count")
    return np.where(k > 0, betaincinv(np.maximum(k, 1), n - k + 1, alpha), 0.0)
