"""A declared system's compiled updates (:class:`UpdateMap`: evaluated exactly, or enclosed soundly on a box by an
:class:`~rlverify.models.continuous.base.ActionMap`), and whether the pieces' regions cover the whole state space."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlverify.errors import ModelError
from rlverify.models.continuous.base import ActionMap
from rlverify.models.continuous.terms import SATURATIONS, TERMS

__all__ = ["CompiledPiece", "UpdateMap", "uncovered_point"]


@dataclass(frozen=True)
class UpdateMap:
    """One action's update in one piece: ``y = a0 x + c0 + k f(g x + g0)``, then saturations."""

    a0: np.ndarray  # (n, n)
    c0: np.ndarray  # (n,)
    terms: tuple[tuple[str, np.ndarray, float], ...]  # (name, g (n,), g0)
    k: np.ndarray  # (n, T)
    saturations: tuple[tuple[int, str, float, float], ...]  # (output, clip|wrap, lo, hi)

    @property
    def depends_on_box(self) -> bool:
        """Whether the enclosure depends on the box (it has terms or saturations)."""
        return bool(self.terms or self.saturations)

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        y = x @ self.a0.T + self.c0
        if self.terms:
            f = np.stack([TERMS[name].f(x @ g + g0) for name, g, g0 in self.terms], axis=1)
            y = y + f @ self.k.T
        for i, op, lo, hi in self.saturations:
            y[:, i] = np.clip(y[:, i], lo, hi) if op == "clip" else ((y[:, i] - lo) % (hi - lo)) + lo
        return y

    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> ActionMap:
        """A sound :class:`ActionMap` of this update on the box ``[lo, hi]``."""
        if not self.depends_on_box:
            return ActionMap.affine(self.a0.copy(), self.c0.copy())
        enc = _Enclosing(self.a0.copy(), self.c0.copy())
        ranges = [self._enclose_term(enc, t, lo, hi) for t in range(len(self.terms))]
        for op in SATURATIONS:  # clip columns first, then wrap columns
            for i, sat_op, slo, shi in self.saturations:
                if sat_op == op:
                    self._saturate(enc, i, op, slo, shi, self._output_range(i, lo, hi, ranges))
        out = enc.action_map(len(self.c0))
        if not _finite(out):
            raise ModelError(f"a term cannot be bounded on the box [{lo.tolist()}, {hi.tolist()}] (non-finite enclosure)")
        return out

    def _enclose_term(self, enc: _Enclosing, t: int, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
        """Term ``t`` replaced in ``enc`` by its secant slope plus a disturbance column; its range over the box."""
        name, g, g0 = self.terms[t]
        al, ah = _affine_range(g, g0, lo, hi)
        term = TERMS[name]
        with np.errstate(over="ignore", invalid="ignore"):  # non-finite results are refused below
            s, r_lo, r_hi = term.enclose(al, ah)
            bounds = term.bounds(al, ah)
        with np.errstate(invalid="ignore"):
            enc.a += np.outer(self.k[:, t], s * g)
        if g0:
            enc.c += self.k[:, t] * (s * g0)
        enc.add_column(self.k[:, t].copy(), r_lo, r_hi)
        return bounds

    def _output_range(self, i: int, lo: np.ndarray, hi: np.ndarray, ranges: list[tuple[float, float]]) -> tuple[float, float]:
        """Interval range of output ``i`` before its saturation, over the box (the terms by their ranges)."""
        ylo, yhi = _affine_range(self.a0[i], 0.0, lo, hi)
        for t in range(len(self.terms)):
            kt = self.k[i, t]
            if kt:
                ylo += kt * (ranges[t][0] if kt > 0 else ranges[t][1])
                yhi += kt * (ranges[t][1] if kt > 0 else ranges[t][0])
        return ylo + self.c0[i], yhi + self.c0[i]

    @staticmethod
    def _saturate(enc: _Enclosing, i: int, op: str, slo: float, shi: float, y: tuple[float, float]) -> None:
        """Where the saturation of output ``i`` may act on the range ``y``, the output becomes a disturbance in its
        range (clip: the clipped range; wrap: ``[lo, hi]``); else it is the identity."""
        ylo, yhi = y
        if op == "wrap":
            ylo, yhi = ylo - 1e-9, yhi + 1e-9
            acts = ylo < slo or yhi >= shi
            rng = (slo, shi)
        else:
            acts = ylo < slo or yhi > shi
            rng = (float(np.clip(ylo, slo, shi)), float(np.clip(yhi, slo, shi)))
        if acts:
            enc.replace_output(i, *rng)


class _Enclosing:
    """An :class:`ActionMap` being built: ``a x + c + sum_j cols[j] w_j`` with ``w_j`` in ``[w_lo[j], w_hi[j]]``."""

    def __init__(self, a: np.ndarray, c: np.ndarray) -> None:
        self.a, self.c = a, c
        self.cols: list[np.ndarray] = []
        self.w_lo: list[float] = []
        self.w_hi: list[float] = []

    def add_column(self, col: np.ndarray, w_lo: float, w_hi: float) -> None:
        self.cols.append(col)
        self.w_lo.append(w_lo)
        self.w_hi.append(w_hi)

    def replace_output(self, i: int, w_lo: float, w_hi: float) -> None:
        """Output ``i`` becomes a disturbance in ``[w_lo, w_hi]`` alone."""
        self.a[i] = 0.0
        self.c[i] = 0.0
        for col in self.cols:
            col[i] = 0.0
        e = np.zeros(len(self.c))
        e[i] = 1.0
        self.add_column(e, w_lo, w_hi)

    def action_map(self, n: int) -> ActionMap:
        used = [j for j, col in enumerate(self.cols) if col.any()]  # a saturation may zero a term's column entirely
        b = np.stack([self.cols[j] for j in used], axis=1) if used else np.zeros((n, 0))
        w_lo = np.array([self.w_lo[j] for j in used], dtype=np.float64)
        return ActionMap(self.a, self.c, b, w_lo, np.array([self.w_hi[j] for j in used], dtype=np.float64))


def _finite(out: ActionMap) -> bool:
    return bool(
        np.isfinite(out.a).all() and np.isfinite(out.c).all() and np.isfinite(out.w_lo).all() and np.isfinite(out.w_hi).all()
    )


def _affine_range(g: np.ndarray, g0: float, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    """Range of ``g . x + g0`` over the box ``[lo, hi]`` (the constant added last)."""
    rlo = rhi = 0.0
    for j, gj in enumerate(g):
        if gj > 0:
            rlo += gj * float(lo[j])
            rhi += gj * float(hi[j])
        elif gj < 0:
            rlo += gj * float(hi[j])
            rhi += gj * float(lo[j])
    return rlo + g0, rhi + g0


@dataclass(frozen=True)
class CompiledPiece:
    g_mat: np.ndarray
    g_vec: np.ndarray
    maps: tuple[UpdateMap, ...]


def uncovered_point(guards: Sequence[tuple[np.ndarray, np.ndarray]], n: int, tol: float = 1e-9) -> np.ndarray | None:
    """A point of R^n in none of the closed polyhedra ``{x : G x <= g}``, or None if they cover R^n.

    Exact up to ``tol``: a gap narrower than ``2 tol`` (Euclidean, state units) is not reported.
    """
    regions = [(np.zeros((0, n)), np.zeros(0))]
    for g_mat, g_vec in guards:
        if len(g_vec) == 0:
            return None
        new = []
        for ra, rb in regions:
            for j in range(len(g_vec)):  # inside the first j guards, outside guard j
                na = np.vstack([ra, g_mat[:j], -g_mat[j : j + 1]])
                nb = np.concatenate([rb, g_vec[:j], -g_vec[j : j + 1]])
                if _interior(na, nb)[0] > tol:
                    new.append((na, nb))
        regions = new
        if not regions:
            return None
    return _interior(*regions[0])[1]


def _interior(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray | None]:
    """Radius (capped at 1) and centre of the largest ball inside ``{x : a x <= b}`` (-inf if empty)."""
    from scipy.optimize import linprog  # lazy: scipy, start-up (only the coverage check solves LPs)

    n = a.shape[1]
    if len(b) == 0:
        return 1.0, np.zeros(n)
    norms = np.linalg.norm(a, axis=1)
    res = linprog(
        np.r_[np.zeros(n), -1.0],
        A_ub=np.hstack([a, norms[:, None]]),
        b_ub=b,
        bounds=[(None, None)] * n + [(None, 1.0)],
        method="highs",
    )
    if res.status != 0:
        return -np.inf, None
    return float(-res.fun), res.x[:n]
