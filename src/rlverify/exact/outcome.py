"""A check's outcome (:class:`CheckOutcome`: the value at the initial state, its certified bracket, exact graph facts)
and what may be decided from it: a threshold's verdict from what is certain only (:func:`verdict`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

__all__ = ["TINY", "CheckOutcome", "clipped", "verdict"]

#: values below this are "tiny": their relative error is reported (or its absence said plainly)
TINY = 1e-10


@dataclass(frozen=True)
class CheckOutcome:
    """Storm's answer for the initial state, plus the per-state values."""

    value: float
    lower: float | None
    upper: float | None
    values: np.ndarray
    #: which method answered (``"graph analysis + sparse LU + certified bracket"``, ``"Storm ..."``)
    method: str | None = None
    #: what the precision of ``value`` is known to be (relative error bound, or absolute only)
    note: str | None = None
    #: a note the user must see (the requested precision was not reached, a tiny value without a
    #: relative error bound); None when all is as asked
    warning: str | None = None
    #: exact facts at the initial state from graph analysis (no floating point): the value is exactly 0 /
    #: exactly 1; None where no such analysis was made
    zero: bool | None = None
    one: bool | None = None
    #: ``(S,)`` per-state certified lower/upper bounds (same order as ``values``) when known
    lowers: np.ndarray | None = field(default=None, repr=False)
    uppers: np.ndarray | None = field(default=None, repr=False)


_OPERATOR = {
    "LESS": "<",
    "LESS_EQUAL": "<=",
    "GREATER": ">",
    "GREATER_EQUAL": ">=",
    "LEQ": "<=",
    "GEQ": ">=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
}
Decide = Callable[[float, float, float], bool]
#: ``(lower, upper, threshold)``: the whole bracket satisfies the comparison
_HOLDS: dict[str, Decide] = {
    "<": lambda lo, hi, t: hi < t,
    "<=": lambda lo, hi, t: hi <= t,
    ">": lambda lo, hi, t: lo > t,
    ">=": lambda lo, hi, t: lo >= t,
}
#: ``(lower, upper, threshold)``: the whole bracket violates it
_FAILS: dict[str, Decide] = {
    "<": lambda lo, hi, t: lo >= t,
    "<=": lambda lo, hi, t: lo > t,
    ">": lambda lo, hi, t: hi <= t,
    ">=": lambda lo, hi, t: hi < t,
}


def verdict(
    threshold: float,
    comparison: str,
    lower: float | None,
    upper: float | None,
    *,
    zero: bool | None = None,
    one: bool | None = None,
    probability: bool = True,
) -> tuple[bool | None, str | None]:
    """Whether ``true value <comparison> threshold`` holds, decided from what is certain only.

    Args:
        threshold, comparison: the bound (Storm's comparison names or ``<``, ``<=``, ``>``, ``>=``).
        lower, upper: a certified bracket of the true value (None: none is known).
        zero, one: exact graph-analysis facts: the true value is exactly 0 / exactly 1 (None: unknown).
        probability: the value is a probability (in [0, 1] by definition).

    Returns ``(satisfied, why)``: ``satisfied`` is True/False when the bracket (or, for the
    qualitative thresholds ``>0``, ``<=0``, ``>=1``, ``<1``, the graph analysis) decides it, else None
    with ``why`` saying why it is undecided and what to change. Never decided from a rounded value.
    """
    op, t = _OPERATOR[comparison], float(threshold)
    if probability:
        decided = _by_range(op, t)
        decided = _by_graph(op, t, zero, one) if decided is None else decided
        if decided is not None:
            return decided, None
    if lower is None or upper is None or math.isnan(lower) or math.isnan(upper):
        return None, (
            f"undecided: no certified bracket of the value is known, so whether it is {op} {t:g} cannot be "
            "decided (use --numerics sound)"
        )
    if _HOLDS[op](lower, upper, t):
        return True, None
    if _FAILS[op](lower, upper, t):
        return False, None
    return None, (
        f"undecided: the true value lies in the certified bracket [{lower:.17g}, {upper:.17g}], which "
        f"contains the threshold {t:g}; a smaller --precision (with --numerics sound) may decide it"
    )


def _by_range(op: str, t: float) -> bool | None:
    """A threshold every probability meets (True) or none does (False), whatever the value; else None."""
    if (op == ">=" and t <= 0) or (op == "<=" and t >= 1):
        return True
    if (op == "<" and t <= 0) or (op == ">" and t >= 1):
        return False
    return None


def _by_graph(op: str, t: float, zero: bool | None, one: bool | None) -> bool | None:
    """The qualitative thresholds (``>0``, ``<=0``, ``>=1``, ``<1``) decided by the exact graph facts; else None."""
    if t == 0 and zero is not None:  # > 0 or <= 0: is the target reachable at all
        return (not zero) if op == ">" else zero
    if t == 1 and one is not None:  # >= 1 or < 1: is it reached with probability 1
        return one if op == ">=" else (not one)
    return None


def clipped(out: CheckOutcome, *, probability: bool) -> CheckOutcome:
    """``out`` with its bracket inside [0, 1] (a probability) and its value inside its bracket."""
    lower, upper, value = out.lower, out.upper, out.value
    if probability:
        lower = None if lower is None else min(max(lower, 0.0), 1.0)
        upper = None if upper is None else min(max(upper, 0.0), 1.0)
        value = min(max(value, 0.0), 1.0)
    if lower is not None and upper is not None and lower <= upper:
        value = min(max(value, lower), upper)
    if (lower, upper, value) == (out.lower, out.upper, out.value):
        return out
    return replace(out, value=float(value), lower=lower, upper=upper)
