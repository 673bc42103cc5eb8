"""Continuous-state systems as pure functions, with sound piecewise-affine enclosures.

A :class:`ContinuousSystem` declares its state variables, a state-domain box, finite actions,
initial regions and an unsafe set, and provides

* ``step(states, actions)`` — the exact dynamics, vectorised over ``(N, n)`` states and ``(N,)``
  integer actions (a pure function: no hidden state);
* ``pieces(lo, hi)`` — a sound set-valued successor operator valid on the box ``[lo, hi]``: a list of
  :class:`Piece` objects, each a closed region ``{x : G x <= g}`` with, per action, an affine map plus
  a bounded disturbance ``x' = A x + c + B w, w in [w_lo, w_hi]``. The contract (checked by the
  tests on random points): every ``x`` in the box lies in some piece whose enclosure contains
  ``step(x, a)`` for every action ``a``. Non-linear terms (``sin``) are linearised with the
  remainder bounded by interval analysis into ``w``.
* ``observe(states)`` — the policy's input features, an affine map ``O x + o`` of the state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlverify.errors import DomainError, did_you_mean


@dataclass(frozen=True)
class ActionMap:
    """``x' = A x + c + B w`` with ``w`` in the box ``[w_lo, w_hi]``.

    Attributes:
        a: ``(n, n)``; c: ``(n,)``; b: ``(n, q)``; w_lo, w_hi: ``(q,)`` (``q`` may be 0).
    """

    a: np.ndarray
    c: np.ndarray
    b: np.ndarray
    w_lo: np.ndarray
    w_hi: np.ndarray

    @classmethod
    def affine(cls, a: np.ndarray, c: np.ndarray) -> ActionMap:
        """An exact affine map (no disturbance)."""
        a = np.asarray(a, dtype=np.float64)
        n = a.shape[0]
        return cls(a, np.asarray(c, dtype=np.float64), np.zeros((n, 0)), np.zeros(0), np.zeros(0))

    def support(self, vertices: np.ndarray, directions: np.ndarray) -> np.ndarray:
        """Maxima ``(k,)`` of ``directions @ x'`` over the images of the convex hull of ``vertices``."""
        img = vertices @ self.a.T + self.c  # (V, n)
        s = (img @ directions.T).max(axis=0)
        if self.b.shape[1]:
            db = directions @ self.b  # (k, q)
            s = s + np.maximum(db * self.w_lo, db * self.w_hi).sum(axis=1)
        return s

    def contains(self, x: np.ndarray, y: np.ndarray, tol: float = 1e-9) -> np.ndarray:
        """Boolean ``(N,)``: whether each ``y`` can be the image of the matching ``x`` under this map."""
        r = y - (x @ self.a.T + self.c)
        if self.b.shape[1] == 0:
            return (np.abs(r) <= tol * (1 + np.abs(y))).all(axis=1)
        # B w = r with w in the box: check by least squares on the (small) disturbance space
        w, *_ = np.linalg.lstsq(self.b, r.T, rcond=None)
        w = w.T
        ok_box = ((w >= self.w_lo - tol) & (w <= self.w_hi + tol)).all(axis=1)
        ok_eq = (np.abs(w @ self.b.T - r) <= tol * (1 + np.abs(y))).all(axis=1)
        return ok_box & ok_eq


@dataclass(frozen=True)
class Piece:
    """A closed region ``{x : g_mat x <= g_vec}`` with one :class:`ActionMap` per action."""

    g_mat: np.ndarray
    g_vec: np.ndarray
    maps: tuple[ActionMap, ...]

    def contains(self, x: np.ndarray, tol: float = 1e-12) -> np.ndarray:
        """Boolean ``(N,)``: which states ``(N, n)`` lie in the (closed) region."""
        if len(self.g_vec) == 0:
            return np.ones(len(x), dtype=bool)
        return (x @ self.g_mat.T <= self.g_vec + tol * (1 + np.abs(self.g_vec))).all(axis=1)


@dataclass(frozen=True)
class UnsafeSet:
    """A union of closed convex polyhedra ``{x : A_i x <= b_i}``."""

    polyhedra: tuple[tuple[np.ndarray, np.ndarray], ...]

    def contains(self, x: np.ndarray) -> np.ndarray:
        """Boolean ``(N,)`` membership of states ``(N, n)``."""
        out = np.zeros(len(x), dtype=bool)
        for a, b in self.polyhedra:
            out |= (x @ a.T <= b).all(axis=1)
        return out


class ContinuousSystem:
    """Base class for continuous-state benchmarks (see the module docstring for the contract).

    Subclasses set the class attributes and implement :meth:`step`, :meth:`pieces` and
    (for training) :meth:`reward`.

    Attributes:
        name: benchmark id.
        variables: state variable names, e.g. ``("p", "v")``.
        actions: action names (the policy's output order).
        features: the policy's input feature names (see :meth:`observe`).
        domain_lo, domain_hi: ``(n,)`` declared state-domain box (initial regions must lie inside).
            Only initial regions are checked against it: the dynamics and their set-valued
            successors are defined for every state, so runs that leave the box are still followed
            soundly (nothing outside it is treated as safe or dropped).
        initial_regions: name -> ``(lo, hi)`` boxes.
        unsafe: the :class:`UnsafeSet`.
        obs_matrix, obs_offset: features = ``states @ obs_matrix.T + obs_offset``.
        horizon: the default verification horizon (steps).
        template_directions: ``(k, n)`` directions of the default template (see :meth:`default_template`),
            or None (the ``template`` domain then needs explicit directions). Each system documents its own.
    """

    name: str = "continuous"
    variables: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    domain_lo: np.ndarray
    domain_hi: np.ndarray
    initial_regions: dict[str, tuple[np.ndarray, np.ndarray]]
    unsafe: UnsafeSet
    obs_matrix: np.ndarray
    obs_offset: np.ndarray
    horizon: int = 10
    default_initial: str = "default"
    #: directions (besides the box) of the default template of the ``template`` domain
    template_directions: np.ndarray | None = None
    #: smallest width along a template axis (state units) that refinement may still split
    min_width: float = 1e-3
    #: whether :meth:`pieces` uses its box (False: the same pieces are valid everywhere, which lets
    #: the abstraction engine compute successors of many polytopes at once)
    pieces_depend_on_box: bool = True

    @property
    def n(self) -> int:
        """Number of state variables."""
        return len(self.variables)

    def default_template(self) -> np.ndarray | None:
        """The directions ``(n + k, n)`` the ``template`` domain uses when none are given.

        The box axes followed by :attr:`template_directions` (each used in both signs), or None if
        the system declares no default template.
        """
        if self.template_directions is None:
            return None
        return np.vstack([np.eye(self.n), np.asarray(self.template_directions, dtype=np.float64).reshape(-1, self.n)])

    def step(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        """Successor states ``(N, n)`` of ``states`` ``(N, n)`` under integer ``actions`` ``(N,)``."""
        raise NotImplementedError

    def pieces(self, lo: np.ndarray, hi: np.ndarray) -> list[Piece]:  # pragma: no cover - abstract
        """Sound piecewise-affine enclosure of :meth:`step` on the box ``[lo, hi]``."""
        raise NotImplementedError

    def reward(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        """Training reward ``(N,)`` (not used by verification)."""
        raise NotImplementedError

    def observe(self, states: np.ndarray) -> np.ndarray:
        """Policy features ``(N, len(features))`` of states ``(N, n)``."""
        return np.asarray(states, dtype=np.float64) @ self.obs_matrix.T + self.obs_offset

    def is_unsafe(self, states: np.ndarray) -> np.ndarray:
        """Boolean ``(N,)``: which states are failure states."""
        return self.unsafe.contains(np.asarray(states, dtype=np.float64))

    def initial_region(self, name: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``(lo, hi)`` box of an initial region by name (default: :attr:`default_initial`)."""
        name = name or self.default_initial
        if name not in self.initial_regions:
            raise DomainError(
                f"{self.name}: unknown initial region '{name}'{did_you_mean(name, self.initial_regions)};"
                f" known: {', '.join(self.initial_regions)}"
            )
        lo, hi = self.initial_regions[name]
        return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)

    def sample_initial(self, count: int, rng: np.random.Generator, region: str | None = None) -> np.ndarray:
        """Uniform states ``(count, n)`` from an initial box."""
        lo, hi = self.initial_region(region)
        return lo + (hi - lo) * rng.random((count, self.n))
