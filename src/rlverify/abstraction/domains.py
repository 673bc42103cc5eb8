"""Template polyhedra: boxes, octagons and custom direction sets.

A :class:`Template` is a set of ``k`` *axes* ``Q`` (a ``(k, n)`` matrix); each axis is used in both
signs, so a :class:`Polytope` over a template is ``{x : lo <= Q x <= hi}`` with ``lo, hi`` of shape
``(k,)``. A polytope is kept *tight* (every bound is attained, up to an outward rounding margin),
which makes containment a componentwise comparison of bounds.

Support functions come from :mod:`~rlverify.abstraction.geometry`. Every bound computed here is rounded
*outward* by :func:`~rlverify.abstraction.geometry.pad`, so a polytope computed as the template hull of a set
always contains that set.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rlverify.abstraction.geometry import PAD_ABS, PAD_REL, pad, pairwise_vertices_2d, support, vertices_2d
from rlverify.abstraction.kinds import Domain
from rlverify.errors import DomainError


def _distinct_directions(d: np.ndarray) -> list[np.ndarray]:
    """The rows of ``d`` without duplicates (up to sign and scale), so a direction is not split twice; a row that is
    zero, not finite, or nearly parallel to a kept one is refused."""
    keep: list[np.ndarray] = []
    for i, row in enumerate(d):
        if not np.isfinite(row).all() or np.linalg.norm(row) == 0:
            raise DomainError(f"template: direction {i} {row.tolist()} must be finite and non-zero")
        u = row / np.linalg.norm(row)
        cosines = [abs(u @ (k / np.linalg.norm(k))) for k in keep]
        if any(c >= 1.0 - 1e-12 for c in cosines):
            continue
        if any(c > 1.0 - 1e-10 for c in cosines):
            # nearly parallel, not equal: their intersection points would carry large rounding errors
            raise DomainError(
                f"template: direction {i} {row.tolist()} is nearly parallel to another one "
                "(angle below 1e-5 rad); drop it or make them clearly different"
            )
        keep.append(row)
    return keep


def _domain(kind: Domain | str) -> Domain:
    """The template kind ``box``, ``octagon`` or ``template`` as a :class:`Domain` (a DomainError otherwise)."""
    if kind not in (Domain.BOX, Domain.OCTAGON, Domain.TEMPLATE):
        raise DomainError(f"unknown abstract domain '{kind}' (expected box, octagon or template)")
    return Domain(kind)


@dataclass(frozen=True, eq=False)
class Template:
    """A set of template axes over named state variables.

    Attributes:
        axes: float64 array ``(k, n)``; each row is a direction used with both signs.
        variables: the ``n`` state variable names, in column order.
        kind: :class:`~rlverify.abstraction.kinds.Domain` ``box``, ``octagon`` or ``template`` (text is converted).
    """

    axes: np.ndarray
    variables: tuple[str, ...]
    kind: Domain = Domain.TEMPLATE
    _axis_is_unit: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _domain(self.kind))
        axes = np.asarray(self.axes, dtype=np.float64)
        n = len(self.variables)
        if axes.ndim != 2 or axes.shape[1] != n:
            raise DomainError(
                f"template: directions must be a (k, {n}) matrix over {list(self.variables)}, got shape {axes.shape}"
            )
        norms = np.linalg.norm(axes, axis=1)
        if (norms == 0).any() or not np.isfinite(axes).all():
            raise DomainError(f"template: direction {int(np.argmax(norms == 0))} is zero or not finite")
        if np.linalg.matrix_rank(axes) < n:
            # find a variable direction that is not bounded: a null-space vector of the axes
            _, _, vt = np.linalg.svd(axes)
            free = vt[-1]
            desc = " + ".join(f"{c:.3g}*{v}" for c, v in zip(free, self.variables, strict=True) if abs(c) > 1e-9)
            raise DomainError(
                f"template: the directions do not bound the state space (rank {np.linalg.matrix_rank(axes)}"
                f" < {n} variables); the polyhedron is unbounded along {desc}. Add a direction "
                "with a component along it (e.g. the box directions)"
            )
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "_axis_is_unit", np.isclose(np.abs(axes), 1.0).sum(axis=1) == 1)

    @property
    def n(self) -> int:
        """Number of state variables."""
        return len(self.variables)

    @property
    def k(self) -> int:
        """Number of axes."""
        return self.axes.shape[0]

    @classmethod
    def box(cls, variables: tuple[str, ...] | list[str]) -> Template:
        """Axis-aligned boxes (intervals)."""
        n = len(variables)
        return cls(np.eye(n), tuple(variables), Domain.BOX)

    @classmethod
    def octagon(cls, variables: tuple[str, ...] | list[str]) -> Template:
        """Octagons: ``x_i`` and ``x_i +- x_j`` for all pairs."""
        n = len(variables)
        rows = list(np.eye(n))
        for i, j in itertools.combinations(range(n), 2):
            for s in (1.0, -1.0):
                r = np.zeros(n)
                r[i], r[j] = 1.0, s
                rows.append(r)
        return cls(np.array(rows), tuple(variables), Domain.OCTAGON)

    @classmethod
    def custom(cls, variables: tuple[str, ...] | list[str], directions: np.ndarray, *, include_box: bool = True) -> Template:
        """A custom template from a ``(k, n)`` direction matrix (box directions prepended by default)."""
        d = np.asarray(directions, dtype=np.float64)
        if d.ndim != 2 or d.shape[1] != len(variables):
            raise DomainError(
                f"template: directions must be a (k, {len(variables)}) matrix over {list(variables)}, got shape {d.shape}"
            )
        if include_box:
            d = np.vstack([np.eye(len(variables)), d])
        keep = _distinct_directions(d)
        return cls(np.array(keep) if keep else d, tuple(variables), Domain.TEMPLATE)

    @classmethod
    def named(
        cls, kind: Domain | str, variables: tuple[str, ...] | list[str], directions: np.ndarray | None = None
    ) -> Template:
        """``box``, ``octagon`` or ``template`` (which needs ``directions``, used as given: they must bound the space)."""
        match _domain(kind):
            case Domain.BOX:
                return cls.box(variables)
            case Domain.OCTAGON:
                return cls.octagon(variables)
            case _:
                if directions is None:
                    raise DomainError("domain 'template' needs a direction matrix (--template FILE)")
                return cls.custom(variables, directions, include_box=False)

    def hull(self, points: np.ndarray) -> Polytope:
        """The tight template polytope of a finite point set ``(N, n)`` (padded outward)."""
        proj = np.asarray(points, dtype=np.float64) @ self.axes.T
        lo, hi = pad(proj.min(axis=0), proj.max(axis=0))
        return Polytope(self, lo, hi)

    def from_box(self, lo: np.ndarray, hi: np.ndarray) -> Polytope:
        """The tight template polytope of the box ``[lo, hi]`` (shapes ``(n,)``)."""
        corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))), dtype=np.float64)
        return self.hull(corners)


@dataclass(frozen=True, eq=False)
class Polytope:
    """A template polyhedron ``{x : lo <= Q x <= hi}`` (``Q = template.axes``).

    Attributes:
        template: the :class:`Template`.
        lo, hi: float64 ``(k,)`` bounds along each axis.
    """

    template: Template
    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self) -> None:
        # immutable: the cached constraints, vertices and interior point stay valid (read-only views,
        # so the caller's own arrays are untouched)
        for name in ("lo", "hi"):
            v = getattr(self, name)
            if type(v) is not np.ndarray or v.dtype != np.float64:
                v = np.asarray(v, dtype=np.float64)
            if v.flags.writeable:
                v = v.view()
                v.flags.writeable = False
            object.__setattr__(self, name, v)

    @property
    def constraints(self) -> tuple[np.ndarray, np.ndarray]:
        """``(A, b)`` with ``A x <= b`` describing the polytope (``2k`` rows; cached, do not modify)."""
        cached = self.__dict__.get("_constraints")
        if cached is None:
            q = self.template.axes
            cached = (np.vstack([q, -q]), np.concatenate([self.hi, -self.lo]))
            object.__setattr__(self, "_constraints", cached)
        return cached

    def widths(self) -> np.ndarray:
        """Extent ``hi - lo`` along each axis, in units of the (unnormalised) axis."""
        return self.hi - self.lo

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """The bounding box ``(lo, hi)``, each ``(n,)`` (padded outward)."""
        n = self.template.n
        s = self.support(np.vstack([np.eye(n), -np.eye(n)]))
        if s is None:
            raise DomainError("empty polytope has no bounding box")
        return pad(-s[n:], s[:n])

    def vertices(self) -> np.ndarray:
        """Vertices ``(V, 2)`` (two-dimensional templates only), in counter-clockwise order."""
        if self.template.n != 2:
            raise DomainError("vertices are only computed for two-dimensional polytopes")
        cached = self.__dict__.get("_vertices")
        if cached is not None:
            return cached
        v = self.support_points()
        if len(v):
            c = v.mean(axis=0)
            v = v[np.argsort(np.arctan2(v[:, 1] - c[1], v[:, 0] - c[0]))]
        v.flags.writeable = False
        object.__setattr__(self, "_vertices", v)
        return v

    def support_points(self) -> np.ndarray:
        """Points ``(V, 2)`` whose maxima along any direction are the polygon's (two-dimensional templates only).

        The feasible pairwise intersections of the constraint lines (:func:`vertices_2d`, in its order),
        computed once per polytope (or for a whole batch by :func:`cache_support_points`) and cached.
        """
        if self.template.n != 2:
            raise DomainError("support points are only computed for two-dimensional polytopes")
        cached = self.__dict__.get("_points")
        if cached is None:
            a, b = self.constraints
            cached = vertices_2d(a, b)
            cached.flags.writeable = False
            object.__setattr__(self, "_points", cached)
        return cached

    def support(self, directions: np.ndarray) -> np.ndarray | None:
        """:func:`support` of this polytope: maxima ``(k,)`` of ``directions @ x`` (``(k, n)``), ``None`` if empty.

        In two dimensions the maxima over the cached :meth:`support_points` (no enumeration per call).
        """
        if self.template.n == 2:
            v = self.support_points()
            if len(v) == 0:
                return None
            return (v @ np.asarray(directions, dtype=np.float64).T).max(axis=0)
        a, b = self.constraints
        return support(a, b, directions)

    def contains_points(self, x: np.ndarray, tol: float = 0.0) -> np.ndarray:
        """Boolean ``(N,)``: which rows of ``x`` ``(N, n)`` lie in the polytope (within ``tol``)."""
        proj = np.asarray(x, dtype=np.float64) @ self.template.axes.T
        return ((proj >= self.lo - tol) & (proj <= self.hi + tol)).all(axis=1)

    def contains(self, other: Polytope) -> bool:
        """Whether ``other`` (over the same template) is a subset of this polytope (exact comparison)."""
        if other.template is not self.template:
            a, b = self.constraints
            oa, ob = other.constraints
            s = support(oa, ob, a)
            return s is None or bool((s <= b).all())
        return bool((self.lo <= other.lo).all() and (other.hi <= self.hi).all())

    def intersect(self, a: np.ndarray, b: np.ndarray) -> Polytope | None:
        """Tight template hull of this polytope intersected with ``{x : a x <= b}``, or ``None`` if empty."""
        sa, sb = self.constraints
        q = self.template.axes
        s = support(np.vstack([sa, a]), np.concatenate([sb, b]), np.vstack([q, -q]))
        if s is None:
            return None
        k = self.template.k
        lo, hi = pad(-s[k:], s[:k])
        return Polytope(self.template, np.maximum(lo, self.lo), np.minimum(hi, self.hi))

    def intersects(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Whether the polytope meets ``{x : a x <= b}`` (conservative: touching counts)."""
        sa, sb = self.constraints
        aa = np.vstack([sa, a])
        bb = np.concatenate([sb, b])
        bb = bb + PAD_ABS + PAD_REL * np.abs(bb)
        return support(aa, bb, aa[:1]) is not None

    def split(self, axis: int, value: float) -> tuple[Polytope | None, Polytope | None]:
        """Split along template axis ``axis`` at ``Q[axis] . x = value`` into two tight polytopes (None: empty)."""
        return split_many([self], [axis], [value])[0]

    def tightened(self) -> Polytope | None:
        """The tight form (every bound attained, padded), or ``None`` if the polytope is empty."""
        if self.template.kind is Domain.BOX:
            if (self.lo > self.hi).any():
                return None
            return self
        q = self.template.axes
        s = self.support(np.vstack([q, -q]))
        if s is None:
            return None
        k = self.template.k
        lo, hi = pad(-s[k:], s[:k])
        return Polytope(self.template, np.maximum(lo, self.lo), np.minimum(hi, self.hi))

    def interior_point(self) -> np.ndarray:
        """A point of the polytope (vertex centroid in 2-D, Chebyshev centre otherwise; cached, read-only)."""
        cached = self.__dict__.get("_interior")
        if cached is None:
            cached = self._interior_point()
            cached.flags.writeable = False
            object.__setattr__(self, "_interior", cached)
        return cached

    def _interior_point(self) -> np.ndarray:
        if self.template.n == 2:
            v = self.vertices()
            if len(v):
                return v.mean(axis=0)
        from scipy.optimize import linprog  # lazy: scipy, start-up

        a, b = self.constraints
        n = self.template.n
        norms = np.linalg.norm(a, axis=1)
        res = linprog(
            np.r_[np.zeros(n), -1.0],
            A_ub=np.hstack([a, norms[:, None]]),
            b_ub=b,
            bounds=[(None, None)] * n + [(0, None)],
            method="highs",
        )
        if res.status != 0:
            raise DomainError(f"cannot find a point of the polytope: {res.message}")
        return res.x[:n]

    def sample(self, count: int, rng: np.random.Generator, *, chains: int | None = None, burn_in: int = 3) -> np.ndarray:
        """Approximately uniform points ``(count, n)`` by hit-and-run (plus the vertices in 2-D).

        ``chains`` parallel chains (default ``count // 4``) start at an interior point, take ``burn_in``
        steps, then contribute one point per step. Used only to guide refinement; soundness never
        depends on the samples. :func:`sample_many` of this polytope alone.
        """
        return sample_many([self], count, [rng], chains=chains, burn_in=burn_in)[0]


#: polytopes per vectorised chunk of :func:`cache_support_points` (bounds its temporaries to a few MB)
_CHUNK = 4096


def cache_support_points(polys: Sequence[Polytope]) -> None:
    """Compute and cache :meth:`Polytope.support_points` of every two-dimensional polytope in ``polys`` not cached
    yet, in one vectorised enumeration per template (the same points, in the same order, as one at a time)."""
    groups: dict[int, list[Polytope]] = {}
    for p in polys:
        if p.template.n == 2 and "_points" not in p.__dict__:
            groups.setdefault(id(p.template), []).append(p)
    for group in groups.values():
        a = group[0].constraints[0]
        for start in range(0, len(group), _CHUNK):
            chunk = group[start : start + _CHUNK]
            b = np.hstack([np.array([p.hi for p in chunk]), -np.array([p.lo for p in chunk])])  # rows: constraints[1]
            pts, feasible = pairwise_vertices_2d(a, b)
            for p, pp, ff in zip(chunk, pts, feasible, strict=True):
                v = pp[ff]
                v.flags.writeable = False
                object.__setattr__(p, "_points", v)


def split_many(
    polys: Sequence[Polytope], axes: Sequence[int], values: Sequence[float]
) -> list[tuple[Polytope | None, Polytope | None]]:
    """:meth:`Polytope.split` of ``polys[i]`` along ``axes[i]`` at ``values[i]``: the tight form (:meth:`Polytope.tightened`)
    of both sides; in 2-D (other than boxes) the vertices of every side of a template enumerated at once, each
    side's bounds the maxima over its own feasible points (bit for bit those of one polytope at a time)."""
    out: list[tuple[Polytope | None, Polytope | None]] = [(None, None)] * len(polys)
    groups: dict[int, list[int]] = {}
    sides: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for i, (p, axis, value) in enumerate(zip(polys, axes, values, strict=True)):
        hi = p.hi.copy()
        hi[axis] = value
        lo = p.lo.copy()
        lo[axis] = value
        sides.append((p.lo, hi, lo, p.hi))
        t = p.template
        if t.n != 2 or t.kind is Domain.BOX:
            out[i] = (Polytope(t, p.lo.copy(), hi).tightened(), Polytope(t, lo, p.hi.copy()).tightened())
        else:
            groups.setdefault(id(t), []).append(i)
    for group in groups.values():
        _split_2d(polys, group, sides, out)
    return out


def _split_2d(
    polys: Sequence[Polytope],
    group: list[int],
    sides: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    out: list[tuple[Polytope | None, Polytope | None]],
) -> None:
    """The sides of the 2-D polytopes ``group`` (one template) into ``out``: the vertices of all sides at once, each
    side's bounds the maxima over its own feasible points."""
    t = polys[group[0]].template
    dirs = np.vstack([t.axes, -t.axes])
    k = t.k
    for start in range(0, len(group), _CHUNK // 2):
        chunk = group[start : start + _CHUNK // 2]
        # rows 2j, 2j+1: the lower and upper side of chunk[j], as constraints[1]
        b = np.array([np.concatenate([s_hi, -s_lo]) for i in chunk for s_lo, s_hi in (sides[i][:2], sides[i][2:])])
        pts, feasible = pairwise_vertices_2d(dirs, b)
        vals = np.where(feasible[:, :, None], pts @ dirs.T, -np.inf).max(axis=1)  # (2G, 2k)
        met = np.asarray(feasible.any(axis=1), dtype=bool)
        with np.errstate(invalid="ignore"):  # an empty side: -inf bounds, not used
            tlo, thi = pad(-vals[:, k:], vals[:, :k])
        for j, i in enumerate(chunk):
            pair: list[Polytope | None] = []
            for r, (s_lo, s_hi) in ((2 * j, sides[i][:2]), (2 * j + 1, sides[i][2:])):
                pair.append(Polytope(t, np.maximum(tlo[r], s_lo), np.minimum(thi[r], s_hi)) if met[r] else None)
            out[i] = (pair[0], pair[1])


def cache_vertices(polys: Sequence[Polytope]) -> None:
    """Compute and cache :meth:`Polytope.vertices` and :meth:`Polytope.interior_point` of every two-dimensional, non-empty
    polytope in ``polys`` that has neither yet: the polytopes of a template with the same number of support points
    at once (each polytope's own sort and means: the same arrays as one at a time)."""
    todo = [p for p in polys if p.template.n == 2 and "_vertices" not in p.__dict__ and "_interior" not in p.__dict__]
    cache_support_points(todo)
    groups: dict[tuple[int, int], list[Polytope]] = {}
    for p in todo:
        count = len(p.support_points())
        if count:
            groups.setdefault((id(p.template), count), []).append(p)
    for group in groups.values():
        pts = np.stack([p.support_points() for p in group])  # (G, V, 2)
        c = pts.mean(axis=1)
        angle = np.arctan2(pts[:, :, 1] - c[:, 1:2], pts[:, :, 0] - c[:, 0:1])
        verts = np.take_along_axis(pts, np.argsort(angle, axis=1)[:, :, None], axis=1)
        inner = verts.mean(axis=1)
        verts.flags.writeable = False
        inner.flags.writeable = False
        for p, v, x in zip(group, verts, inner, strict=True):
            object.__setattr__(p, "_vertices", v)
            object.__setattr__(p, "_interior", x)


def _starting_points(polys: Sequence[Polytope]) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each polytope: the chains' starting point (:meth:`Polytope.interior_point`) and the extra sample points
    (in 2-D its vertices pulled slightly inside, those that then lie in it; else none); the two-dimensional polytopes
    of a template with the same number of vertices at once."""
    cache_vertices(polys)
    out: list[tuple[np.ndarray, np.ndarray]] = [(np.empty(0), np.empty(0))] * len(polys)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, p in enumerate(polys):
        n = p.template.n
        if n == 2 and len(p.vertices()):
            groups.setdefault((id(p.template), len(p.vertices())), []).append(i)
        else:
            out[i] = (p.interior_point(), np.empty((0, n)))
    for idx in groups.values():
        x0 = np.array([polys[i].interior_point() for i in idx])[:, None, :]  # (G, 1, 2)
        extra = x0 + (np.stack([polys[i].vertices() for i in idx]) - x0) * (1.0 - 1e-7)  # pulled slightly inside
        proj = extra @ polys[idx[0]].template.axes.T
        lo = np.array([polys[i].lo for i in idx])[:, None, :]
        hi = np.array([polys[i].hi for i in idx])[:, None, :]
        inside = ((proj >= lo) & (proj <= hi)).all(axis=2)  # Polytope.contains_points
        for g, i in enumerate(idx):
            out[i] = (polys[i].interior_point(), extra[g][inside[g]])
    return out


def sample_many(
    polys: Sequence[Polytope],
    count: int,
    rngs: Sequence[np.random.Generator],
    *,
    chains: int | None = None,
    burn_in: int = 3,
) -> list[np.ndarray]:
    """:meth:`Polytope.sample` of each polytope with its own generator, the chains of all of them stepped together.

    Each polytope's points are bit for bit those of ``polys[i].sample(count, rngs[i])`` (its generator draws the
    same numbers in the same order). Generators must be distinct objects (a shared one would interleave draws).

    Returns:
        One ``(count, n)`` array per polytope, in order.
    """
    if len({id(r) for r in rngs}) != len(rngs) or len(rngs) != len(polys):
        raise ValueError("sample_many needs one distinct generator per polytope")
    chains = chains or max(1, count // 4)
    out: list[np.ndarray] = [np.empty(0)] * len(polys)
    for (_, steps), group in _walk_groups(polys, count, chains, burn_in).items():
        _sample_group(polys, group, rngs, steps, burn_in, chains, out)
    return out


def _sample_group(
    polys: Sequence[Polytope],
    group: list[tuple[int, np.ndarray, np.ndarray, int]],
    rngs: Sequence[np.random.Generator],
    steps: int,
    burn_in: int,
    chains: int,
    out: list[np.ndarray],
) -> None:
    """The points of one group of polytopes (one template, one number of steps) into ``out``."""
    idx = [g[0] for g in group]
    a = polys[idx[0]].constraints[0]
    b = np.array([polys[i].constraints[1] for i in idx])[:, None, :]  # (G, 1, m)
    x = np.repeat(np.array([g[1] for g in group])[:, None, :], chains, axis=1)  # (G, chains, n)
    walks = _hit_and_run(a, b, x, [rngs[i] for i in idx], steps, burn_in)
    for j, (i, _, extra, need) in enumerate(group):
        pts = np.vstack([w[j] for w in walks])[:need] if walks else np.empty((0, a.shape[1]))
        out[i] = np.vstack([pts, extra])


def _walk_groups(
    polys: Sequence[Polytope], count: int, chains: int, burn_in: int
) -> dict[tuple[int, int], list[tuple[int, np.ndarray, np.ndarray, int]]]:
    """The polytopes by (template, steps) as ``(index, starting point, extra points, points needed)``."""
    groups: dict[tuple[int, int], list[tuple[int, np.ndarray, np.ndarray, int]]] = {}
    starts = _starting_points(polys)
    for i, p in enumerate(polys):
        x0, extra = starts[i]
        need = max(count - len(extra), 1)
        steps = burn_in + int(np.ceil(need / chains))
        groups.setdefault((id(p.template), steps), []).append((i, x0, extra, need))
    return groups


def _hit_and_run(
    a: np.ndarray, b: np.ndarray, x: np.ndarray, gens: Sequence[np.random.Generator], steps: int, burn_in: int
) -> list[np.ndarray]:
    """``steps`` hit-and-run steps of the chains ``x`` ``(G, chains, n)`` in the polytopes ``{y : a y <= b[g]}``
    (``b`` ``(G, 1, m)``), each polytope's chains drawing from its own generator; the points after ``burn_in``
    steps, one ``(G, chains, n)`` array per step."""
    g_count, chains, n = x.shape
    walks = []
    at = a.T
    u = np.empty((g_count, chains, n))
    r = np.empty((g_count, chains))
    for s in range(steps):
        for j, g in enumerate(gens):  # each generator: normal, then uniform (as one polytope at a time)
            u[j] = g.normal(size=(chains, n))
            r[j] = g.random(chains)
        u /= np.sqrt(np.add.reduce(u * u, axis=2, keepdims=True))  # np.linalg.norm(u, axis=2), unrolled
        au = u @ at  # (G, chains, m)
        slack = b - x @ at  # >= 0 (up to rounding)
        slack = np.maximum(slack, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = slack / au
        tmax = np.where(au > 1e-15, t, np.inf).min(axis=2)
        tmin = np.where(au < -1e-15, t, -np.inf).max(axis=2)
        tmax = np.where(np.isfinite(tmax), tmax, 0.0)
        tmin = np.where(np.isfinite(tmin), tmin, 0.0)
        x = x + (tmin + (tmax - tmin) * r)[:, :, None] * u
        if s >= burn_in:
            walks.append(x)
    return walks


def validate_region_inside(region: Polytope, lo: np.ndarray, hi: np.ndarray, names: tuple[str, ...], what: str) -> None:
    """Raise :class:`DomainError` if ``region`` is not inside the box ``[lo, hi]`` (naming the variable)."""
    blo, bhi = region.box()
    problems = []
    for i, name in enumerate(names):
        # tolerate the outward padding of the bounding box
        tol = 1e-6 * (1.0 + abs(lo[i]) + abs(hi[i]))
        if blo[i] < lo[i] - tol or bhi[i] > hi[i] + tol:
            problems.append(
                f"{name} in [{blo[i]:.6g}, {bhi[i]:.6g}] is not within the declared domain [{lo[i]:.6g}, {hi[i]:.6g}]"
            )
    if problems:
        raise DomainError(f"{what} lies outside the state domain: " + "; ".join(problems))
