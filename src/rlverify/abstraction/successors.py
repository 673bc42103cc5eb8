"""Sound abstract successors in the template domain.

For a part ``P`` (a template polytope) and a piece ``R`` of the system's piecewise-affine enclosure,
the successor under action ``a`` is the template hull of ``{A x + c + B w : x in P cap R, w in W}``:
its bound along a direction ``d`` is ``max_{x in P cap R} (A^T d) . x + d . c + max_{w in W} (B^T d) . w``,
an LP (exact by vertex enumeration in 2-D). Bounds are rounded outward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlverify.abstraction.domains import Polytope, Template, pad, support, vertices_2d
from rlverify.models.continuous.base import ContinuousSystem


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
    k = template.k
    out: list[Successors] = []
    for idx, piece in enumerate(system.pieces(lo, hi)):
        a = np.vstack([pa, piece.g_mat]) if len(piece.g_vec) else pa
        b = np.concatenate([pb, piece.g_vec]) if len(piece.g_vec) else pb
        if two_d:
            if len(piece.g_vec) == 0:
                verts = pverts
            else:
                g = pverts @ piece.g_mat.T - piece.g_vec  # (V, r): <= 0 inside the region
                tol = 1e-9 * (1 + np.abs(piece.g_vec))
                if (g <= 0).all():
                    verts = pverts  # the part lies inside the region
                elif (g > tol).all(axis=0).any():
                    continue  # one guard excludes the whole part
                else:
                    verts = vertices_2d(a, b)
            if len(verts) == 0:
                continue
            polys = []
            for m in piece.maps:
                s = m.support(verts, dirs)
                slo, shi = pad(-s[k:], s[:k])
                polys.append(Polytope(template, slo, shi))
        else:
            polys = []
            empty = False
            for m in piece.maps:
                s = support(a, b, dirs @ m.a)
                if s is None:
                    empty = True
                    break
                s = s + dirs @ m.c
                if m.b.shape[1]:
                    db = dirs @ m.b
                    s = s + np.maximum(db * m.w_lo, db * m.w_hi).sum(axis=1)
                slo, shi = pad(-s[k:], s[:k])
                polys.append(Polytope(template, slo, shi))
            if empty:
                continue
        out.append(Successors(idx, tuple(polys)))
    return out


def intersects_unsafe(system: ContinuousSystem, poly: Polytope) -> bool:
    """Whether ``poly`` meets the unsafe set (conservative: touching counts).

    Unsafe constraints parallel to a template axis are first checked against the polytope's bound
    on that axis (exact, cheap); an LP / vertex test decides the rest.
    """
    axes = poly.template.axes
    for a, b in system.unsafe.polyhedra:
        separated = False
        for row, rhs in zip(a, b):
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
