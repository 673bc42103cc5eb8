"""Sound abstract successors in the template domain.

For a part ``P`` (a template polytope) and a piece ``R`` of the system's piecewise-affine enclosure,
the successor under action ``a`` is the template hull of ``{A x + c + B w : x in P cap R, w in W}``:
its bound along a direction ``d`` is ``max_{x in P cap R} (A^T d) . x + d . c + max_{w in W} (B^T d) . w``,
an LP (exact by vertex enumeration in 2-D). Bounds are rounded outward.

:func:`successors_many` and :func:`meets_unsafe_many` do the same for a whole batch of polytopes at
once (vectorised vertex enumeration) for two-dimensional systems whose pieces do not depend on the
box; otherwise they loop over the per-polytope functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlverify.abstraction.domains import Polytope, Template
from rlverify.abstraction.geometry import PAD_ABS, PAD_REL, pad, pairwise_vertices_2d, support, vertices_2d
from rlverify.models.continuous.base import ActionMap, ContinuousSystem, Piece


@dataclass(frozen=True)
class Successors:
    """Successors of one part within one piece: ``polytopes[a]`` for each action ``a``."""

    piece: int
    polytopes: tuple[Polytope, ...]


def part_successors(system: ContinuousSystem, part: Polytope, template: Template) -> list[Successors]:
    """Sound successors of ``part`` for every piece it meets and every action.

    Every concrete ``x`` in ``part`` lies in some returned piece whose ``polytopes[a]`` contains
    ``system.step(x, a)`` (the enclosure contract of :class:`ContinuousSystem`).
    """
    two_d = part.template.n == 2
    if two_d:
        pverts = part.vertices()
        lo, hi = pad(pverts.min(axis=0), pverts.max(axis=0))
    else:
        lo, hi = part.box()
    pa, pb = part.constraints
    dirs = np.vstack([template.axes, -template.axes])
    out: list[Successors] = []
    for idx, piece in enumerate(system.pieces(lo, hi)):
        a = np.vstack([pa, piece.g_mat]) if len(piece.g_vec) else pa
        b = np.concatenate([pb, piece.g_vec]) if len(piece.g_vec) else pb
        polys = _by_vertices(piece, pverts, a, b, dirs, template) if two_d else _by_support(piece, a, b, dirs, template)
        if polys is not None:
            out.append(Successors(idx, tuple(polys)))
    return out


def _piece_vertices(piece: Piece, pverts: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """The vertices of a 2-D part (vertices ``pverts``, constraints with the piece's ``a x <= b``) within the piece's
    region; None when one guard excludes the whole part."""
    if len(piece.g_vec) == 0:
        return pverts
    g = pverts @ piece.g_mat.T - piece.g_vec  # (V, r): <= 0 inside the region
    tol = 1e-9 * (1 + np.abs(piece.g_vec))
    if (g <= 0).all():
        return pverts  # the part lies inside the region
    if (g > tol).all(axis=0).any():
        return None  # one guard excludes the whole part
    return vertices_2d(a, b)


def _by_vertices(
    piece: Piece, pverts: np.ndarray, a: np.ndarray, b: np.ndarray, dirs: np.ndarray, template: Template
) -> list[Polytope] | None:
    """2-D: each action's successor from the vertices of the part within the piece (None: they do not meet)."""
    verts = _piece_vertices(piece, pverts, a, b)
    if verts is None or len(verts) == 0:
        return None
    k = template.k
    polys = []
    for m in piece.maps:
        s = m.support(verts, dirs)
        slo, shi = pad(-s[k:], s[:k])
        polys.append(Polytope(template, slo, shi))
    return polys


def _by_support(piece: Piece, a: np.ndarray, b: np.ndarray, dirs: np.ndarray, template: Template) -> list[Polytope] | None:
    """Each action's successor by linear programming over the part within the piece (None: they do not meet)."""
    k = template.k
    polys = []
    for m in piece.maps:
        found = support(a, b, dirs @ m.a)
        if found is None:
            return None
        s = _with_disturbance(found + dirs @ m.c, dirs, m)
        slo, shi = pad(-s[k:], s[:k])
        polys.append(Polytope(template, slo, shi))
    return polys


def _with_disturbance(s: np.ndarray, dirs: np.ndarray, m: ActionMap) -> np.ndarray:
    """Support values ``s`` (along ``dirs``, last axis) plus the largest contribution of the map's disturbance."""
    if not m.b.shape[1]:
        return s
    db = dirs @ m.b
    return s + np.maximum(db * m.w_lo, db * m.w_hi).sum(axis=1)


def intersects_unsafe(system: ContinuousSystem, poly: Polytope) -> bool:
    """Whether ``poly`` meets the unsafe set (conservative: touching counts).

    Unsafe constraints parallel to a template axis are first checked against the polytope's bound
    on that axis (exact, cheap); an LP / vertex test decides the rest.
    """
    axes = poly.template.axes
    for a, b in system.unsafe.polyhedra:
        separated = False
        for row, rhs in zip(a, b, strict=True):
            # min over poly of row . x > rhs  =>  disjoint from this polyhedron
            cos = axes @ row / (np.linalg.norm(axes, axis=1) * np.linalg.norm(row))
            j = int(np.argmax(np.abs(cos)))
            if abs(abs(cos[j]) - 1.0) < 1e-12:
                scale = (row @ axes[j]) / (axes[j] @ axes[j])  # row = scale * axis
                low = scale * poly.lo[j] if scale > 0 else scale * poly.hi[j]
                if low > rhs + 1e-9 * (1 + abs(rhs)):
                    separated = True
                    break
        if not separated and poly.intersects(a, b):
            return True
    return False


#: polytopes per vectorised chunk (bounds the (chunk, pairs, constraints) temporaries to a few MB)
_CHUNK = 4096


def _bounds_of(polys: Sequence[Polytope]) -> tuple[np.ndarray, np.ndarray]:
    """The template bounds of every polytope, ``(lo (N, k), hi (N, k))``."""
    return np.array([p.lo for p in polys]), np.array([p.hi for p in polys])


def _vectorised(system: ContinuousSystem, template: Template) -> bool:
    return template.n == 2 and not system.pieces_depend_on_box


def successors_many(system: ContinuousSystem, template: Template, polys: Sequence[Polytope]) -> list[list[Successors]]:
    """:func:`part_successors` of every polytope in ``polys`` (same template), vectorised where possible.

    For two-dimensional systems whose pieces do not depend on the box, the vertices of every
    ``polytope cap piece`` are enumerated for the whole batch at once (the same pairwise-intersection
    rule as :func:`vertices_2d`); the successor bounds are maxima over those vertices, padded outward.
    """
    if not _vectorised(system, template):
        return [part_successors(system, p, template) for p in polys]
    out: list[list[Successors]] = [[] for _ in polys]
    if not polys:
        return out
    q, k = template.axes, template.k
    dirs = np.vstack([q, -q])
    pieces = system.pieces(np.asarray(system.domain_lo, dtype=np.float64), np.asarray(system.domain_hi, dtype=np.float64))
    lo_all, hi_all = _bounds_of(polys)
    for start in range(0, len(polys), _CHUNK):
        lo, hi = lo_all[start : start + _CHUNK], hi_all[start : start + _CHUNK]
        for idx, piece in enumerate(pieces):
            rows, bounds = _batch_bounds(piece, lo, hi, dirs, k)
            for r, i in enumerate(rows):
                out[start + i].append(Successors(idx, tuple(Polytope(template, slo[r], shi[r]) for slo, shi in bounds)))
    return out


def _batch_bounds(
    piece: Piece, lo: np.ndarray, hi: np.ndarray, dirs: np.ndarray, k: int
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """The polytopes ``lo``, ``hi`` ``(N, k)`` that meet the piece (their rows) and, per action, the template bounds
    ``(lo, hi)`` of their successors (one row each), from the vertices of every ``polytope cap piece`` at once."""
    n = len(lo)
    if len(piece.g_vec):
        a = np.vstack([dirs, piece.g_mat])
        b = np.hstack([hi, -lo, np.broadcast_to(piece.g_vec, (n, len(piece.g_vec)))])
    else:
        a, b = dirs, np.hstack([hi, -lo])
    pts, feasible = pairwise_vertices_2d(a, b)
    rows = np.flatnonzero(feasible.any(axis=1))
    if len(rows) == 0:
        return rows, []
    pts, feasible = pts[rows], feasible[rows]
    bounds = []
    for m in piece.maps:
        vals = pts @ (dirs @ m.a).T  # (r, P, 2k)
        vals = _with_disturbance(np.where(feasible[:, :, None], vals, -np.inf).max(axis=1) + dirs @ m.c, dirs, m)
        bounds.append(pad(-vals[:, k:], vals[:, :k]))
    return rows, bounds


def meets_unsafe_many(system: ContinuousSystem, template: Template, polys: Sequence[Polytope]) -> np.ndarray:
    """Boolean ``(N,)``: :func:`intersects_unsafe` for every polytope in ``polys`` (same template), vectorised in 2-D."""
    if not _vectorised(system, template):
        return np.array([intersects_unsafe(system, p) for p in polys], dtype=bool)
    out = np.zeros(len(polys), dtype=bool)
    if not polys:
        return out
    q = template.axes
    dirs = np.vstack([q, -q])
    lo_all, hi_all = _bounds_of(polys)
    for ua, ub in system.unsafe.polyhedra:
        a = np.vstack([dirs, ua])
        for start in range(0, len(polys), _CHUNK):
            lo, hi = lo_all[start : start + _CHUNK], hi_all[start : start + _CHUNK]
            b = np.hstack([hi, -lo, np.broadcast_to(ub, (len(lo), len(ub)))])
            b = b + PAD_ABS + PAD_REL * np.abs(b)  # touching counts (as in Polytope.intersects)
            _, feasible = pairwise_vertices_2d(a, b)
            out[start : start + len(lo)] |= feasible.any(axis=1)
    return out


def inside_unsafe_many(system: ContinuousSystem, polys: Sequence[Polytope]) -> np.ndarray:
    """Boolean ``(N,)``: which polytopes lie inside one polyhedron of the unsafe set (so every state in them fails).

    Decided by the support of each polytope along the polyhedron's constraint rows, with a margin of
    ``1e-9 (1 + |b|)`` inward: False is always safe to answer (the lower bound then counts the
    polytope as possibly safe).
    """
    out = np.zeros(len(polys), dtype=bool)
    if not polys:
        return out
    # first the enclosing box from the template's unit axes (exact for boxes, an outer bound otherwise): vectorised
    axes = polys[0].template.axes
    unit = _unit_axes(axes)
    if min(unit) >= 0:
        out |= _inside_by_box(system, polys, unit)
        if polys[0].template.k == axes.shape[1]:  # a box template: the box test is exact
            return out
    for i, p in enumerate(polys):
        if not out[i]:
            out[i] = _inside_by_support(system, p)
    return out


def _unit_axes(axes: np.ndarray) -> list[int]:
    """Per variable ``j``, the index of the template axis that is the unit vector ``e_j`` (-1: none)."""
    n = axes.shape[1]
    out = []
    for j in range(n):
        hits = np.flatnonzero(np.all(axes == np.eye(n)[j], axis=1))
        out.append(int(hits[0]) if len(hits) else -1)
    return out


def _inside_by_box(system: ContinuousSystem, polys: Sequence[Polytope], unit: list[int]) -> np.ndarray:
    """Boolean ``(N,)``: the enclosing box (from the unit axes) lies inside one unsafe polyhedron (with the margin)."""
    blo = np.array([p.lo[unit] for p in polys])
    bhi = np.array([p.hi[unit] for p in polys])
    out = np.zeros(len(polys), dtype=bool)
    for ua, ub in system.unsafe.polyhedra:
        s = np.maximum(blo[:, None, :] * ua[None], bhi[:, None, :] * ua[None]).sum(axis=2)  # (N, rows)
        out |= (s <= ub - 1e-9 * (1.0 + np.abs(ub))).all(axis=1)
    return out


def _inside_by_support(system: ContinuousSystem, p: Polytope) -> bool:
    """Whether ``p`` lies inside one unsafe polyhedron (with the margin), by its support along the rows."""
    a_p, b_p = p.constraints
    for ua, ub in system.unsafe.polyhedra:
        s = support(a_p, b_p, ua)
        if s is not None and bool((s <= ub - 1e-9 * (1.0 + np.abs(ub))).all()):
            return True
    return False
