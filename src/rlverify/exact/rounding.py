"""Rigorous floating-point margins of sums of non-negative terms: the roundings every certified bracket of the exact
engine widens its computed values by (the LU certificate, interval iteration, step-bounded iteration, on disk or in
memory)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["relative", "rounded_down", "rounded_up", "step_rounding", "sum_margin"]

#: the absolute rounding error of one product or sum near the underflow threshold (smallest subnormal)
ETA = 5e-324


def relative(v: float, lo: float, hi: float) -> float:
    """A bound on |v - true| / true when lo <= true <= hi."""
    if lo <= 0:
        return math.inf
    try:
        return max(float(hi) - float(v), float(v) - float(lo), 0.0) / float(lo)
    except OverflowError:
        return math.inf


def sum_margin(row_length: int) -> tuple[float, int]:
    """``(gamma, k)`` of :func:`rounded_down` / :func:`rounded_up` for ``fl(A v + b)`` over non-negative terms, rows
    of at most ``row_length`` entries: ``row_length + 1`` additions/products."""
    k = int(row_length) + 2
    return 2.0 * k * 2.0**-53, k


def rounded_down(computed: np.ndarray, gamma: float, k: int) -> np.ndarray:
    """A rigorous lower bound of the exact sums whose computed values are ``computed`` (each a float sum of at most
    ``k`` non-negative products, ``gamma = 2 k u``): relative margin ``gamma`` plus ``k`` subnormal roundings."""
    return np.maximum(computed * (1.0 - gamma) - k * ETA, 0.0)


def rounded_up(computed: np.ndarray, gamma: float, k: int) -> np.ndarray:
    """A rigorous upper bound of the exact sums whose computed values are ``computed`` (see :func:`rounded_down`)."""
    return computed * (1.0 + gamma) + k * ETA


def step_rounding(steps: int, d: int) -> tuple[float, float, float]:
    """``(lo_factor, hi_factor, absolute)`` of ``steps`` rounds of sums of at most ``d`` non-negative products.

    Each round's computed value is within a factor ``1 +- gamma``, ``gamma = d u / (1 - d u)``, of the exact
    sum of its computed inputs (plus ``d`` subnormal roundings); the rounds are monotone, so the true value
    after ``steps`` rounds lies in ``[x lo_factor - absolute, x hi_factor + absolute]`` of the computed ``x``.
    """
    u = 2.0**-53
    gamma = d * u / (1.0 - d * u)
    k = max(int(steps), 0)
    lo = math.exp(-k * math.log1p(gamma)) * (1 - 4 * u)
    hi = math.exp(min(-k * math.log1p(-gamma), 700.0)) * (1 + 4 * u)
    return lo, hi, k * d * 2.0**-1074
