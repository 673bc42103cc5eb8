"""Support functions and vertices of ``{x : a x <= b}``: the maximum of ``d . x`` computed exactly by vertex
enumeration in two dimensions and by linear programming (HiGHS via scipy) otherwise; and :func:`pad`, the outward
rounding every computed bound gets."""

from __future__ import annotations

import numpy as np

from rlverify.errors import DomainError

#: Relative and absolute outward rounding applied to every computed bound.
PAD_REL = 1e-9
PAD_ABS = 1e-9


def pad(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Round bounds outward by ``PAD_ABS + PAD_REL * |value|`` (soundness against float error)."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    return lo - (PAD_ABS + PAD_REL * np.abs(lo)), hi + (PAD_ABS + PAD_REL * np.abs(hi))


_PAIRS: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _pairs(m: int) -> tuple[np.ndarray, np.ndarray]:
    if m not in _PAIRS:
        _PAIRS[m] = np.triu_indices(m, 1)
    return _PAIRS[m]


def vertices_2d(a: np.ndarray, b: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """Vertices ``(V, 2)`` of the bounded polygon ``{x : a x <= b}`` (empty array if it is empty).

    Every pairwise intersection of constraint lines is kept if it satisfies all constraints within
    ``tol * (1 + |b|)``; for a bounded polygon these include all its vertices, so maxima of linear
    functions over the returned points equal the maxima over the polygon (up to rounding).
    """
    pts, feasible = pairwise_vertices_2d(a, np.asarray(b, dtype=np.float64)[None, :], tol)
    return pts[0][feasible[0]]


def pairwise_vertices_2d(a: np.ndarray, b: np.ndarray, tol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """:func:`vertices_2d` for a batch of polygons ``{x : a x <= b[i]}`` sharing the constraint matrix.

    Args:
        a: ``(m, 2)`` constraint rows; b: ``(N, m)`` right-hand sides.

    Returns:
        ``(points, feasible)``: every pairwise intersection of non-parallel constraint lines,
        ``(N, P, 2)``, and whether it satisfies all constraints within ``tol * (1 + |b|)``, ``(N, P)``.
        For bounded polygons the feasible points include all vertices; a polygon is empty iff no
        point is feasible.
    """
    m = len(a)
    i, j = _pairs(m)
    a1, a2 = a[i], a[j]
    det = a1[:, 0] * a2[:, 1] - a1[:, 1] * a2[:, 0]
    n2 = a[:, 0] ** 2 + a[:, 1] ** 2
    ok = np.abs(det) > 1e-12 * np.sqrt(n2[i] * n2[j])
    i, j, a1, a2, det = i[ok], j[ok], a1[ok], a2[ok], det[ok]
    bi, bj = b[:, i], b[:, j]  # (N, P)
    x = (bi * a2[:, 1] - bj * a1[:, 1]) / det
    y = (a1[:, 0] * bj - a2[:, 0] * bi) / det
    pts = np.stack([x, y], axis=2)
    slack = (b + tol * (1.0 + np.abs(b)))[:, None, :]  # (N, 1, m)
    feasible = (pts @ a.T <= slack).all(axis=2)
    return pts, feasible


def support(a: np.ndarray, b: np.ndarray, directions: np.ndarray) -> np.ndarray | None:
    """Maxima of ``directions @ x`` over ``{x : a x <= b}``; ``None`` if the set is empty.

    Args:
        a: constraint matrix ``(m, n)``; b: ``(m,)``; directions: ``(k, n)``.

    Returns:
        ``(k,)`` float64 maxima (not padded), or ``None`` when infeasible.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    directions = np.asarray(directions, dtype=np.float64)
    if a.shape[1] == 1:
        return _support_1d(a[:, 0], b, directions[:, 0])
    if a.shape[1] == 2:
        v = vertices_2d(a, b)
        if len(v) == 0:
            return None
        return (v @ directions.T).max(axis=0)
    return _support_lp(a, b, directions)


def _support_1d(a: np.ndarray, b: np.ndarray, d: np.ndarray, tol: float = 1e-9) -> np.ndarray | None:
    """:func:`support` of an interval ``{x : a x <= b}`` in one dimension, in closed form (no LP).

    ``a``, ``b``: ``(m,)``; ``d``: ``(k,)`` directions. ``None`` when empty (beyond ``tol``, relative).
    """
    zero = a == 0
    if (b[zero] < -tol * (1.0 + np.abs(b[zero]))).any():
        return None
    pos, neg = a > 0, a < 0
    hi = float(np.min(b[pos] / a[pos])) if pos.any() else np.inf
    lo = float(np.max(b[neg] / a[neg])) if neg.any() else -np.inf
    if lo > hi:
        if lo - hi > tol * (1.0 + max(abs(lo), abs(hi))):
            return None
        lo = hi = max(lo, hi)  # a point, up to rounding
    with np.errstate(invalid="ignore"):
        out = np.where(d > 0, d * hi, np.where(d < 0, d * lo, 0.0))
    if not np.isfinite(out).all():
        raise DomainError("LP for a support function failed: the set is unbounded in a direction asked for")
    return out


def _support_lp(a: np.ndarray, b: np.ndarray, directions: np.ndarray) -> np.ndarray | None:
    from scipy.optimize import linprog  # lazy: scipy, start-up

    out = np.empty(len(directions))
    for i, d in enumerate(directions):
        res = linprog(-d, A_ub=a, b_ub=b, bounds=[(None, None)] * a.shape[1], method="highs")
        if res.status == 2:
            return None
        if res.status != 0:
            raise DomainError(f"LP for a support function failed: {res.message}")
        # HiGHS's optimum is exact only up to its feasibility/optimality tolerances (1e-7): pad by
        # more than those, relative to the magnitudes involved, before the caller's float padding
        scale = 1.0 + abs(res.fun) + float(np.abs(d).sum()) * float(np.abs(res.x).max(initial=0.0))
        out[i] = -res.fun + 1e-6 * scale
    return out
