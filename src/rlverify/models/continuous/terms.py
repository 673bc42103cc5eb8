"""The scalar terms a declared system's updates may use (``sin``, ``cos``, ``tanh``, ``exp``), each with a sound range
and a sound linear enclosure on every finite interval; and the saturations (``clip``, ``wrap``) allowed around a
whole update."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SATURATIONS", "TERMS", "Term"]


def _critical(lo: float, hi: float, roots: Sequence[float], period: float | None) -> list[float]:
    """Points ``root + k period`` (or the roots themselves) inside ``[lo, hi]``."""
    out = []
    for root in roots:
        if period is None:
            if lo <= root <= hi:
                out.append(root)
            continue
        k0 = int(np.floor((lo - root) / period))
        k1 = int(np.floor((hi - root) / period))
        for k in range(k0, k1 + 2):
            t = root + period * k
            if lo <= t <= hi:
                out.append(t)
    return out


@dataclass(frozen=True)
class Term:
    """A scalar function the engine can bound: its values, range and a linear enclosure on intervals.

    Attributes:
        name: how expressions call it.
        f, df: vectorised values and derivative.
        extrema: points of ``[lo, hi]`` (besides the ends) where ``f`` may have a local extremum.
        slope_points: points of ``[lo, hi]`` where ``f' = s`` (the local extrema of ``f(t) - s t``).
        global_range: ``(min, max)`` of ``f`` over the reals, used for arguments wider than
            ``max_width`` (then with slope 0), or None.
    """

    name: str
    f: Callable[[np.ndarray], np.ndarray]
    df: Callable[[np.ndarray], np.ndarray]
    extrema: Callable[[float, float], list[float]]
    slope_points: Callable[[float, float, float], list[float]]
    global_range: tuple[float, float] | None = None
    max_width: float = np.inf

    def bounds(self, lo: float, hi: float) -> tuple[float, float]:
        """Sound range of ``f`` on ``[lo, hi]`` (padded by 1e-12)."""
        if hi - lo > self.max_width and self.global_range is not None:
            return self.global_range[0] - 1e-12, self.global_range[1] + 1e-12
        vals = self.f(np.array([lo, hi, *self.extrema(lo, hi)], dtype=np.float64))
        return float(vals.min()) - 1e-12, float(vals.max()) + 1e-12

    def enclose(self, lo: float, hi: float) -> tuple[float, float, float]:
        """Slope ``s`` and a sound range ``[r_lo, r_hi]`` of ``f(t) - s t`` for ``t`` in ``[lo, hi]``."""
        if hi - lo > self.max_width:
            flo, fhi = self.bounds(lo, hi)
            return 0.0, flo, fhi
        if hi - lo < 1e-12:
            s = float(self.df(np.array([0.5 * (lo + hi)]))[0])
        else:
            ends = self.f(np.array([lo, hi], dtype=np.float64))
            s = float((ends[1] - ends[0]) / (hi - lo))
        cand = np.array([lo, hi, *self.slope_points(lo, hi, s)], dtype=np.float64)
        vals = self.f(cand) - s * cand
        margin = 1e-12 + 1e-12 * float(np.abs(vals).max())
        return s, float(vals.min()) - margin, float(vals.max()) + margin


def _sin_slope(lo: float, hi: float, s: float) -> list[float]:
    if not -1.0 <= s <= 1.0:
        return []
    base = float(np.arccos(s))
    return _critical(lo, hi, (base, -base), 2 * np.pi)


def _cos_slope(lo: float, hi: float, s: float) -> list[float]:
    if not -1.0 <= s <= 1.0:
        return []
    base = float(np.arcsin(-s))  # -sin(t) = s
    return _critical(lo, hi, (base, np.pi - base), 2 * np.pi)


def _tanh_slope(lo: float, hi: float, s: float) -> list[float]:
    if not 0.0 < s <= 1.0:
        return []
    t = float(np.arctanh(min(np.sqrt(1.0 - s), 1.0 - 1e-16)))  # 1 - tanh^2 = s
    return _critical(lo, hi, (t, -t), None)


def _exp_slope(lo: float, hi: float, s: float) -> list[float]:
    return _critical(lo, hi, (float(np.log(s)),), None) if s > 0 else []


#: the terms a declaration may use (each bounded soundly on every finite interval)
TERMS: dict[str, Term] = {
    "sin": Term(
        "sin", np.sin, np.cos, lambda lo, hi: _critical(lo, hi, (np.pi / 2,), np.pi), _sin_slope, (-1.0, 1.0), 20 * np.pi
    ),
    "cos": Term(
        "cos",
        np.cos,
        lambda t: -np.sin(t),
        lambda lo, hi: _critical(lo, hi, (0.0,), np.pi),
        _cos_slope,
        (-1.0, 1.0),
        20 * np.pi,
    ),
    "tanh": Term("tanh", np.tanh, lambda t: 1.0 - np.tanh(t) ** 2, lambda lo, hi: [], _tanh_slope),
    "exp": Term("exp", np.exp, np.exp, lambda lo, hi: [], _exp_slope),
}
#: calls allowed only around a whole update
SATURATIONS = ("clip", "wrap")
