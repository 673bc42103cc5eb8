"""Unbounded reachability on a chain by a linear solve with a certificate: graph analysis (exact 0/1 states), an
LU of ``(I - A) x = b`` on the remaining states (numpy's dense LU up to :data:`DENSE_STATES` states; above, a sparse
LU or, without cycles, substitution) with iterative refinement, an a-posteriori certified bracket, and (``sound``)
interval iteration from it (see :mod:`rlverify.exact.checking`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlverify.choices import Numerics
from rlverify.exact.outcome import TINY, CheckOutcome
from rlverify.exact.rounding import relative, rounded_down, rounded_up, sum_margin
from rlverify.models.graph import prob01

__all__ = [
    "DENSE_STATES",
    "MAX_DIRECT_STATES",
    "MAX_LU_WORK",
    "SOUND_BUDGET_SECONDS",
    "lu_work",
    "reachability",
    "triangular_order",
]

#: up to this many maybe-states the system is solved densely by numpy's LAPACK solve (a few ms at most), so that a
#: small chain needs neither scipy.sparse.linalg nor scipy.sparse.csgraph (~0.3 s of CPU to import); the certificate
#: (the sub/super-solution checks of :func:`_certify`, on the sparse matrix) is the same whatever solved the system
DENSE_STATES = 256

#: the sparse LU solve is used up to this many maybe-states (above: Storm's solver for the setting)
MAX_DIRECT_STATES = 2_000_000
#: seconds the sound interval-iteration fallback may take before it reports the bracket it reached
SOUND_BUDGET_SECONDS = 10.0
#: largest estimated work of a sparse LU (multiply-adds) tried before leaving the solve to Storm's sound solver
MAX_LU_WORK = 2e10

#: a scipy sparse matrix (CSR/CSC)
Sparse = Any
Solve = Callable[[np.ndarray], np.ndarray]


def lu_work(system: Sparse) -> float:
    """An estimate of a sparse LU's multiply-adds on ``system`` ``(m, m)``: ``m * w**2`` for ``w`` the half-bandwidth
    after a reverse Cuthill-McKee ordering (a banded factorisation's cost; SuperLU's own ordering does no worse on
    the grid-like chains where this matters). Linear time in the entries."""
    from scipy.sparse.csgraph import reverse_cuthill_mckee  # lazy: scipy.sparse.csgraph, only for large systems

    pattern = sp.csr_matrix(system)
    pattern = (pattern + pattern.T).tocsr()
    order = reverse_cuthill_mckee(pattern, symmetric_mode=True)
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    coo = pattern.tocoo()
    width = int(np.abs(place[coo.row] - place[coo.col]).max(initial=0))
    return float(pattern.shape[0]) * float(width) ** 2


def triangular_order(a: Sparse) -> np.ndarray | None:
    """``(m,)`` int64: an order of ``a``'s states (``(m, m)`` CSR) in which every stored entry off the diagonal goes from a
    state to an earlier one (successors first), so that ``I - A`` in that order is lower triangular; None when ``a``'s
    pattern has a cycle through two or more states (self-loops stay on the diagonal). Checked entry by entry: the
    numbering of the strongly connected components only proposes the order."""
    from scipy.sparse.csgraph import connected_components  # lazy: scipy.sparse.csgraph, only for large systems

    m = a.shape[0]
    count, labels = connected_components(a, directed=True, connection="strong")
    if count < m:  # a cycle through two or more states
        return None
    rows = np.repeat(np.arange(m), np.diff(a.indptr))
    off = rows != a.indices
    tails, heads = labels[rows[off]], labels[a.indices[off]]
    if np.all(tails > heads):
        return np.argsort(labels)
    if np.all(tails < heads):
        return np.argsort(-labels)
    return None


def _solver(system: Sparse, order: np.ndarray | None) -> Solve:
    """``r -> system^-1 r`` for ``system`` ``(m, m)`` CSC: densely (LAPACK's LU with partial pivoting, numpy) up to
    :data:`DENSE_STATES` states, else by forward substitution when ``order`` makes it lower triangular
    (:func:`triangular_order`; no fill-in, no pivoting), else by a sparse LU. Raises what ``numpy.linalg.solve``,
    ``splu`` and ``spsolve_triangular`` raise."""
    if system.shape[0] <= DENSE_STATES:
        dense = system.toarray()
        return lambda r: np.linalg.solve(dense, r)
    from scipy.sparse.linalg import splu, spsolve_triangular  # lazy: scipy.sparse.linalg, only above DENSE_STATES

    if order is None:
        return splu(system).solve
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    coo = system.tocoo()
    # CSC, lower: scipy's quickest substitution (~0.8 ms on csma; CSC upper ~1.2, the same values bit for bit)
    lower = sp.csc_matrix((coo.data, (place[coo.row], place[coo.col])), shape=system.shape)
    lower.sort_indices()
    unit = bool(np.all(lower.diagonal() == 1.0))

    def solve(r: np.ndarray) -> np.ndarray:
        out = np.empty(len(order))
        # overwrite: scipy's copies skipped (``lower`` is canonical, its unit diagonal set to 1 again: no change)
        out[order] = spsolve_triangular(lower, r[order], lower=True, unit_diagonal=unit, overwrite_A=True, overwrite_b=True)
        return out

    return solve


@dataclass
class _Solved:
    """The maybe states' system ``x = A x + b`` (``A`` ``(m, m)``), its solution ``x`` and certified bracket
    ``lo <= true <= hi`` (``(m,)``), the rounding margin ``(gamma, k)`` of its sums, and ``j`` the initial state's
    place among the maybe states (None: decided by the graph analysis)."""

    a: Sparse
    b: np.ndarray
    x: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    gamma: float
    k: int
    j: int | None

    def rel(self) -> float:
        """The certified relative error at the initial state."""
        assert self.j is not None
        return relative(self.x[self.j], self.lo[self.j], self.hi[self.j])


def reachability(
    matrix: Sparse, phi: np.ndarray, psi: np.ndarray, init: int, numerics: str, precision: float, budget: float
) -> CheckOutcome | None:
    """``P(phi U psi)`` on a DTMC: graph analysis, sparse LU, certified bracket (see the module docstring); None
    when the solve is declined (too many states, too much fill-in, a failed factorisation): Storm's then."""
    matrix = sp.csr_matrix(matrix, dtype=np.float64)
    no, yes = prob01(matrix, phi, psi)
    maybe = ~yes & ~no
    values = yes.astype(np.float64)
    m = int(maybe.sum())
    graph_note = f"graph analysis: {int(yes.sum())} states 1, {int(no.sum())} states 0, {m} solved"
    if m == 0:
        return _exact(values, no, yes, init, graph_note)
    if m > MAX_DIRECT_STATES:
        return None
    rows = matrix[maybe]
    a = rows[:, maybe].tocsr()
    b = np.asarray(rows[:, yes].sum(axis=1)).ravel()
    t0 = time.perf_counter()
    j = int(np.flatnonzero(maybe).searchsorted(init)) if maybe[init] else None
    solved = _solve(a, b, j, precision)
    if solved is None:
        return None
    zero, one = bool(no[init]), bool(yes[init])
    lu = _lu_name(m)
    method = f"graph analysis + {lu} + certified bracket"
    if j is None:  # the initial state is decided by the graph analysis
        v = float(values[init])
        values[maybe] = solved.x
        return CheckOutcome(
            value=v,
            lower=v,
            upper=v,
            values=values,
            method=method,
            note=f"exact: the initial state is decided by the graph analysis ({graph_note})",
            lowers=_bounds(values, maybe, solved.lo),
            uppers=_bounds(values, maybe, solved.hi),
            zero=zero,
            one=one,
        )
    if numerics == Numerics.SOUND and not solved.rel() <= precision and solved.hi[j] > 1e-250:  # below: only absolute
        _tighten(solved, precision, budget - (time.perf_counter() - t0))
        method = f"graph analysis + {lu} + interval iteration"
    values[maybe] = solved.x
    lowers, uppers = _bounds(values, maybe, solved.lo), _bounds(values, maybe, solved.hi)
    return _reach_outcome(solved, values, lowers, uppers, zero, one, method, graph_note, numerics, precision, budget)


def _lu_name(m: int) -> str:
    """How :func:`_solver` solves a system of ``m`` states, as the outcome's method names it."""
    return "dense LU" if m <= DENSE_STATES else "sparse LU"


def _exact(values: np.ndarray, no: np.ndarray, yes: np.ndarray, init: int, graph_note: str) -> CheckOutcome:
    """The outcome when the graph analysis decides every state."""
    v = float(values[init])
    return CheckOutcome(
        value=v,
        lower=v,
        upper=v,
        values=values,
        method="graph analysis (exact)",
        note=f"exact: {graph_note}",
        zero=bool(no[init]),
        one=bool(yes[init]),
        lowers=values,
        uppers=values,
    )


def _solve(a: Sparse, b: np.ndarray, j: int | None, precision: float) -> _Solved | None:
    """``x = A x + b`` solved (substitution or LU, refined) and certified, the columns rescaled while that tightens
    the initial state's bracket; None when the factorisation is declined or fails."""
    m = a.shape[0]
    gamma, k = sum_margin(int(np.diff(a.indptr).max(initial=0)))
    system = (sp.identity(m, format="csc") - a.tocsc()).tocsc()
    order = triangular_order(a) if m > DENSE_STATES else None  # (a dense solve needs no order)
    # the factors' fill would take minutes to hours (6-D grids): Storm solves it. m (m-1)^2 bounds lu_work; a
    # triangular system has no fill
    if order is None and m * (m - 1) ** 2 > MAX_LU_WORK and lu_work(system) > MAX_LU_WORK:
        return None
    try:
        solve = _solver(system, order)
    except (RuntimeError, MemoryError, np.linalg.LinAlgError):
        return None
    x = _refined(a, b, solve)
    lo, hi = _certify(a, b, x, solve, gamma, k)
    solved = _Solved(a, b, x, lo, hi, gamma, k, j)
    _rescale(solved, system, order, precision)
    return solved


def _rescale(solved: _Solved, system: Sparse, order: np.ndarray | None, precision: float) -> None:
    """LU's error is normwise: tiny components can be off by orders of magnitude. Scaling the columns by the current
    solution (solve for w = x / scale) makes it relative per component; repeated (in place) while it helps."""
    j, a, b = solved.j, solved.a, solved.b
    for _ in range(4):
        if j is None or solved.rel() <= min(precision, 1e-10):
            break
        scale = np.maximum(solved.x, 1e-300)
        try:
            scaled = _solver((system @ sp.diags(scale)).tocsc(), order)
        except (RuntimeError, MemoryError, np.linalg.LinAlgError):  # (substitution: a zero on the diagonal)
            break
        solve_scaled = lambda r, f=scaled, c=scale: c * f(r)  # noqa: E731
        x2 = _refined(a, b, solve_scaled)
        lo2, hi2 = _certify(a, b, x2, solve_scaled, solved.gamma, solved.k)
        lo, hi = solved.lo, solved.hi
        if not relative(x2[j], lo2[j], hi2[j]) < solved.rel() and hi2[j] - lo2[j] >= hi[j] - lo[j]:
            break
        solved.x, solved.lo, solved.hi = x2, lo2, hi2


def _tighten(solved: _Solved, precision: float, budget: float) -> None:
    """``sound``: interval iteration from the certified bracket within ``budget`` seconds, the value moved inside it
    (to its middle where that is closer), in place."""
    j = solved.j
    assert j is not None
    lo, hi = _interval_iteration(solved.a, solved.b, solved.lo, solved.hi, j, precision, solved.gamma, solved.k, budget)
    x = np.clip(solved.x, lo, hi)
    mid = (lo + hi) / 2
    if relative(mid[j], lo[j], hi[j]) < min(1.0, relative(x[j], lo[j], hi[j])):
        x = mid
    solved.x, solved.lo, solved.hi = x, lo, hi


def _reach_outcome(
    solved: _Solved,
    values: np.ndarray,
    lowers: np.ndarray,
    uppers: np.ndarray,
    zero: bool,
    one: bool,
    method: str,
    graph_note: str,
    numerics: str,
    precision: float,
    budget: float,
) -> CheckOutcome:
    """The outcome of :func:`reachability` at the (undecided) initial state, with what its bracket certifies."""
    j = solved.j
    assert j is not None
    rel = solved.rel()
    value, lower, upper = float(solved.x[j]), float(solved.lo[j]), float(solved.hi[j])
    warning = None
    if lower > 0:
        note = f"{graph_note}; true value in [{lower:.6g}, {upper:.6g}] (certified): relative error <= {rel:.2g}"
        if numerics == Numerics.SOUND and rel > precision:
            warning = (
                f"the requested precision {precision:g} (relative) was not reached within {budget:g} s: the "
                f"true value is in [{lower:.6g}, {upper:.6g}] (relative error <= {rel:.2g})"
            )
    else:
        note = (
            f"{graph_note}; only an absolute bound is known: true value in [0, {upper:.3g}] (the certified lower "
            "bound is 0; the value is positive: the graph analysis finds the target reachable)"
        )
        warning = (
            f"value {value:.3g}: no relative error bound could be certified; only the absolute bound [0, {upper:.3g}] is known"
        )
    if numerics == Numerics.DIRECT and lower <= 0:
        return CheckOutcome(
            value=value,
            lower=None,
            upper=None,
            values=values,
            method=f"graph analysis + {_lu_name(len(solved.x))}",
            note=note,
            warning=warning if value < TINY else None,
            zero=zero,
            one=one,
        )
    return CheckOutcome(
        value=value,
        lower=lower,
        upper=upper,
        values=values,
        method=method,
        note=note,
        warning=warning,
        lowers=lowers,
        uppers=uppers,
        zero=zero,
        one=one,
    )


def _bounds(exact: np.ndarray, maybe: np.ndarray, solved: np.ndarray) -> np.ndarray:
    """``(S,)``: the graph analysis's exact 0/1 values with ``solved`` on the ``maybe`` states."""
    out = exact.copy()
    out[maybe] = solved
    return out


def _refined(a: Sparse, b: np.ndarray, solve: Solve) -> np.ndarray:
    """``(I - A)^-1 b`` by ``solve`` plus iterative refinement (residuals of non-negative sums are small
    componentwise), clipped to [0, 1]."""
    x = np.clip(solve(b), 0.0, 1.0)
    for _ in range(3):
        x = np.clip(x + solve(b + a @ x - x), 0.0, 1.0)
    return x


def _sub_solution(a: Sparse, b: np.ndarray, v: np.ndarray, gamma: float, k: int) -> np.ndarray:
    """A rigorous lower bound of ``A v + b`` for ``v >= 0``: relative margin ``gamma`` (non-negative sums of
    row length ``k``) plus ``k`` subnormal roundings."""
    return rounded_down(a @ v + b, gamma, k)


def _super_solution(a: Sparse, b: np.ndarray, v: np.ndarray, gamma: float, k: int) -> np.ndarray:
    return rounded_up(a @ v + b, gamma, k)


def _certify(a: Sparse, b: np.ndarray, x: np.ndarray, solve: Solve, gamma: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectors ``l <= x <= u`` that pass the sub/super-solution checks (so ``l <= true <= u``), as tight as found.

    ``y = x + tau (I - A)^-1 x`` is positive wherever ``x`` is and ``(I - A) y = b + tau x > 0``, so
    ``x -/+ eps y`` absorbs the solve's residual once ``eps`` exceeds it relative to ``tau x``. The upper
    candidate adds ``theta (I - A)^-1 1`` (slack ``theta`` in every row) so that values below the float
    range get an absolute bound (~1e-280); the lower candidate is zeroed where it fails (values that
    underflow). Falls back to ``l = 0`` / ``u = 1`` (always valid).
    """
    z = np.clip(solve(x), 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(z > 0, x / z, np.inf)
    tau = float(min(1.0, ratio.min(initial=1.0)))
    y = np.maximum(x + tau * z, x)
    w = np.clip(solve(np.ones_like(x)), 1.0, None)  # expected steps in the maybe states (>= 1)
    w = w * (1e-280 / float(w.max(initial=1.0)))
    lo, hi = np.zeros_like(x), np.ones_like(x)
    found_lo = found_hi = False
    for e in range(-15, 1):
        eps = 10.0**e
        if not found_lo:
            cand = np.maximum(x - eps * y - w, 0.0)
            if np.all(_sub_solution(a, b, cand, gamma, k) >= cand):
                lo, found_lo = cand, True
        if not found_hi:
            cand = np.minimum(x + eps * y + w, 1.0)
            # u >= min(A u + b, 1) suffices: the true values are <= 1 (and ``cand`` is capped at 1)
            if np.all((_super_solution(a, b, cand, gamma, k) <= cand) | (cand >= 1.0)):
                hi, found_hi = cand, True
        if found_lo and found_hi:
            break
    return lo, hi


def _interval_iteration(
    a: Sparse, b: np.ndarray, lo: np.ndarray, hi: np.ndarray, j: int, precision: float, gamma: float, k: int, budget: float
) -> tuple[np.ndarray, np.ndarray]:
    """Sound interval iteration from a certified bracket, rounded outwards, until state ``j``'s bracket is
    within ``precision`` (relative) or ``budget`` seconds pass."""
    deadline = time.perf_counter() + max(budget, 0.0)
    while True:
        for _ in range(50):
            lo = np.maximum(lo, _sub_solution(a, b, lo, gamma, k))
            hi = np.minimum(hi, _super_solution(a, b, hi, gamma, k))
        mid = (lo[j] + hi[j]) / 2
        if relative(mid, lo[j], hi[j]) <= precision or time.perf_counter() > deadline:
            return lo, hi
