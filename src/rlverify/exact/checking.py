"""Checking PCTL properties with Storm, with the numerics made explicit.

Numerics (``--numerics``):

* ``sound`` (default): Storm's sound environment (optimistic value iteration, topological):
  the result is within ``precision`` (relative) of the true value.
* ``direct``: Storm's Eigen linear equation solver with its own default method: no convergence
  heuristic on ``precision`` (the value does not depend on it), but not exact either: measured
  1.6e-7 relative error on Freeway under a uniform policy (no bounds are reported).
* ``fast``: Storm's plain value iteration with a convergence heuristic (Jacobi/Gauss-Seidel
  style). It can stop far from the true value on ill-conditioned chains (see NOTES.md:
  0.99922 instead of 0.999998); offered for speed studies only.

Step-bounded properties (``F<=k``, ``U<=k``, ``C<=k``) are computed by k matrix-vector steps
in every setting.

Unbounded reachability on a policy-induced chain (``P=? [F t]``, ``P=? [a U b]``; when
:func:`check` is given the chain's ``matrix`` and ``numerics``) is solved here, not by Storm's
iterative solvers, for ``sound`` and ``direct``:

1. graph analysis: states that cannot reach the target are 0, states that reach it with
   probability 1 are 1 (exactly); only the remaining "maybe" states are solved;
2. a sparse LU solve of ``(I - A) x = b`` on the maybe states (float64, with iterative refinement);
3. an a-posteriori certificate: vectors ``l <= x_hat <= u`` with ``A l + b >= l`` and
   ``A u + b <= u`` checked with a rounding-error margin (all terms are non-negative, so the check
   itself is rigorous in floating point); then ``l <= x <= u`` for the true solution ``x``. The
   result's ``lower``/``upper`` are that bracket, so tiny values get a relative error that means
   something (e.g. 3e-20 within 1e-12 relative);
4. ``sound`` only: if the bracket is wider than ``precision`` (relative), interval iteration from
   it (rounded outwards, so still sound) within a time budget; if the budget runs out the result
   keeps the bracket reached and says so (it always answers).

``direct`` reports the LU value, with the bracket when the certificate holds (else no bounds and a
note that only an absolute error is known). ``fast`` stays Storm's plain value iteration (no bounds;
values below ``TINY`` are flagged: their relative error is unknown). Each outcome says which
``method`` answered and a ``note`` on its precision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import math
import re
import time

import numpy as np

from rlverify.errors import PropertyError
from rlverify.models.properties import Property
from rlverify.models.numerics import NUMERICS, environment  # noqa: F401 (re-exported)
from rlverify.models.symbolic import storm_message

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


def quantitative(prop: Any, *, optimality: str | None = None) -> tuple[Any, float | None, str | None]:
    """The formula with its threshold removed (and optimality set), the threshold and its comparison."""
    import stormpy

    formula = (prop.storm_formula() if isinstance(prop, Property) else prop.get_raw_formula()).clone()
    threshold, comparison = None, None
    if formula.has_bound:
        threshold = float(formula.threshold)
        comparison = str(formula.comparison_type).rsplit(".", 1)[-1]
        formula.remove_bound()
    if optimality is not None:
        direction = stormpy.logic.OptimizationDirection.MINIMIZE if optimality == "min" else stormpy.logic.OptimizationDirection.MAXIMIZE
        formula.set_optimality_type(direction)
    elif formula.has_optimality_type:
        formula.remove_optimality_type()
    return formula, threshold, comparison


def compare(value: float, threshold: float, comparison: str) -> bool:
    """``value <comparison> threshold`` for Storm's comparison type names."""
    table = {"LESS": value < threshold, "LESS_EQUAL": value <= threshold, "GREATER": value > threshold,
             "GREATER_EQUAL": value >= threshold}
    table.update(LESS=table["LESS"], LEQ=table["LESS_EQUAL"], GREATER=table["GREATER"], GEQ=table["GREATER_EQUAL"])
    return table[comparison]


#: values below this are "tiny": their relative error is reported (or its absence said plainly)
TINY = 1e-10
#: the sparse LU solve is used up to this many maybe-states (above: Storm's solver for the setting)
MAX_DIRECT_STATES = 2_000_000
#: seconds the sound interval-iteration fallback may take before it reports the bracket it reached
SOUND_BUDGET_SECONDS = 10.0
_STORM_METHOD = {"sound": "Storm sound value iteration", "direct": "Storm Eigen solver",
                 "fast": "Storm plain value iteration (heuristic stop)"}


def check(storm_model: Any, formula: Any, env: Any, *, matrix: Any = None, numerics: str | None = None,
          precision: float | None = None, budget: float | None = None,
          full_model: Callable[[], Any] | None = None) -> CheckOutcome:
    """Check ``formula`` on ``storm_model``; value at the (single) initial state.

    With ``matrix`` (the chain's ``(S, S)`` CSR transition matrix, same state order as the Storm
    DTMC) and ``numerics``, unbounded reachability is solved by graph analysis + sparse LU + a
    certified bracket (see the module docstring); everything else is Storm's, annotated with its
    precision. Without them: Storm's answer as is (``method``/``note`` None). ``full_model``: when
    ``storm_model`` carries only the chain's states, labels and valuations (for its state formulas;
    the transitions are ``matrix``), a function returning the full Storm chain for when Storm must
    check ``formula`` itself.
    """
    import stormpy

    init = storm_model.initial_states
    if len(init) != 1:
        raise PropertyError(f"the model has {len(init)} initial states; rlverify reports the value of a single one")
    s = int(init[0])
    if numerics is not None and matrix is not None and numerics in ("sound", "direct") \
            and str(storm_model.model_type).endswith("DTMC") and matrix.shape == (storm_model.nr_states,) * 2:
        sets = _until_sets(storm_model, formula)
        if sets is not None:
            out = _reachability(matrix, sets[0], sets[1], s, numerics, precision or 1e-6,
                                SOUND_BUDGET_SECONDS if budget is None else budget)
            if out is not None:
                return out
        bounded = _bounded_until(storm_model, formula)
        if bounded is not None:
            return _bounded_reachability(matrix, *bounded, s)
    if full_model is not None:
        storm_model = full_model()
    try:
        result = stormpy.model_checking(storm_model, formula, environment=env)
    except RuntimeError as exc:
        raise PropertyError(f"Storm cannot check '{formula}' on this model: {storm_message(exc)}") from None
    values = np.asarray(result.get_value_vector(), dtype=np.float64)
    lower = float(result.get_lower_bound(s)) if result.has_lower_bounds() else None
    upper = float(result.get_upper_bound(s)) if result.has_upper_bounds() else None
    value = float(values[s])
    if numerics is None:
        return CheckOutcome(value=value, lower=lower, upper=upper, values=values)
    return _annotate_storm(formula, value, lower if numerics == "sound" else None,
                           upper if numerics == "sound" else None, values, numerics, precision)


def _annotate_storm(formula: Any, value: float, lower: float | None, upper: float | None, values: np.ndarray,
                    numerics: str, precision: float | None) -> CheckOutcome:
    """Storm's answer with the method and what is known of its precision."""
    sub = formula.subformula if hasattr(formula, "subformula") else None
    bounded = sub is not None and type(sub).__name__ in ("BoundedUntilFormula", "CumulativeRewardFormula",
                                                         "InstantaneousRewardFormula")
    method = "Storm step-bounded matrix-vector steps" if bounded else _STORM_METHOD[numerics]
    warning = None
    if bounded and formula.is_probability_operator_formula:
        steps = _step_bound(sub)
        # k steps of sums of non-negative products: each step adds at most ~(row length) roundings
        note = ("step-bounded: exact up to floating-point rounding in sums of non-negative terms (relative error "
                f"about {steps if steps else 'k'} steps x row length x 1.1e-16)")
    elif bounded:
        note = "step-bounded: exact up to floating-point rounding"
    elif numerics == "sound" and lower is not None and upper is not None:
        note = f"Storm's sound solver: within {precision:g} relative; true value in [{lower:.6g}, {upper:.6g}]"
    elif numerics == "direct":
        note = "Storm's Eigen solver: no error bound (absolute error at rounding level is typical)"
    else:
        note = "plain value iteration stopped by a heuristic: no error bound"
    if not bounded and numerics != "sound" and 0 < abs(value) < TINY:
        warning = (f"value {value:.3g} is below {TINY:g} and {method} gives no relative error bound: only an "
                   "absolute error (at best ~1e-16 x the largest value, far more on slowly mixing chains) is known; "
                   "use --numerics sound for a certified bracket")
    return CheckOutcome(value=value, lower=lower, upper=upper, values=values, method=method, note=note,
                        warning=warning)


def _step_bound(sub: Any) -> int | None:
    try:
        return int(str(sub.upper_bound_expression))
    except (AttributeError, ValueError, RuntimeError):
        return None


def _until_sets(storm_model: Any, formula: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``(phi, psi)`` state masks when ``formula`` is ``P=? [phi U psi]`` or ``P=? [F psi]`` (unbounded)."""
    if not formula.is_probability_operator_formula:
        return None
    sub = formula.subformula
    kind = type(sub).__name__
    n = storm_model.nr_states
    try:  # a nested path formula (PCTL* / LTL: ((true U a) U b)) is no state formula: Storm's route then
        if kind == "EventuallyFormula":
            return np.ones(n, dtype=bool), _states(storm_model, sub.subformula)
        if kind == "UntilFormula":
            return _states(storm_model, sub.left_subformula), _states(storm_model, sub.right_subformula)
    except PropertyError:
        return None
    return None


def solved_here(formula: Any, numerics: str) -> bool:
    """Whether :func:`check` solves ``formula`` on the chain's matrix (else Storm checks it alone)."""
    if numerics not in ("sound", "direct") or not formula.is_probability_operator_formula:
        return False
    sub = formula.subformula
    kind = type(sub).__name__
    if kind not in ("EventuallyFormula", "UntilFormula", "BoundedUntilFormula"):
        return False
    if kind == "BoundedUntilFormula" and _step_upper_bound(sub) is None:
        return False
    # propositional state formulas only: a nested P/R operator needs the chain's transitions in Storm.
    # Storm prints every operator formula with a bracket (``P>0.5 [X a]``), expressions and labels have none
    return "[" not in re.sub(r'"[^"]*"', "", str(sub))


def _step_upper_bound(sub: Any) -> int | None:
    """``k`` of ``phi U<=k psi`` (``U<k``: k-1) with a step bound only (no lower bound, not reward-bounded), else None."""
    try:
        if sub.has_lower_bound or sub.is_multi_dimensional:
            return None
        k = int(sub.upper_bound_expression.evaluate_as_int())
    except (AttributeError, RuntimeError, ValueError):
        return None
    found = re.findall(r"U(<=?)(\d+)", str(sub).replace(" ", ""))
    if len(found) != 1 or int(found[0][1]) != k:  # nested or reward-bounded: Storm's route
        return None
    return k - 1 if found[0][0] == "<" else k


def _bounded_until(storm_model: Any, formula: Any) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``(phi, psi, k)`` when ``formula`` is ``P=? [phi U<=k psi]`` or ``P=? [F<=k psi]`` (step-bounded)."""
    if not formula.is_probability_operator_formula or type(formula.subformula).__name__ != "BoundedUntilFormula":
        return None
    sub = formula.subformula
    k = _step_upper_bound(sub)
    if k is None:
        return None
    try:
        return _states(storm_model, sub.left_subformula), _states(storm_model, sub.right_subformula), k
    except PropertyError:
        return None


def _bounded_reachability(matrix: Any, phi: np.ndarray, psi: np.ndarray, steps: int, init: int) -> CheckOutcome:
    """``P(phi U<=steps psi)`` on a DTMC by ``steps`` matrix-vector products, with a certified bracket.

    Every product sums at most ``d`` (longest row) non-negative terms, so its computed value is
    within a factor ``1 +- gamma``, ``gamma = d u / (1 - d u)``, of the exact sum of the computed
    inputs; the matrix is monotone, so after ``k`` steps the true value (of this float chain) is
    within ``[x / (1 + gamma)^k, x / (1 - gamma)^k]`` of the computed ``x``, plus an absolute
    ``k d 2^-1074`` for underflow.
    """
    import scipy.sparse as sp

    matrix = sp.csr_matrix(matrix, dtype=np.float64)
    go = (phi & ~psi).astype(np.float64)
    target = psi.astype(np.float64)
    x = target.copy()
    for _ in range(max(steps, 0)):
        x = target + go * (matrix @ x)  # psi and go are disjoint: no rounding outside the product
    d = int(np.diff(matrix.indptr).max(initial=0)) + 1
    u = 2.0 ** -53
    gamma = d * u / (1.0 - d * u)
    k = max(steps, 0)
    lo_factor = math.exp(-k * math.log1p(gamma)) * (1 - 4 * u)
    hi_factor = math.exp(-k * math.log1p(-gamma)) * (1 + 4 * u)
    value = float(x[init])
    lower = max(value * lo_factor - k * d * 2.0 ** -1074, 0.0)
    upper = min(value * hi_factor + k * d * 2.0 ** -1074, 1.0)
    rel = _relative(value, lower, upper)
    note = (f"step-bounded: {k} matrix-vector steps; true value in [{lower:.12g}, {upper:.12g}] (certified: rounding of "
            f"sums of non-negative terms), relative error <= {rel:.2g}")
    warning = None
    if lower <= 0 < value:
        note = f"step-bounded: {k} matrix-vector steps; only an absolute bound is known: true value in [0, {upper:.3g}]"
        warning = f"value {value:.3g}: only the absolute bound [0, {upper:.3g}] is known (underflow)"
    return CheckOutcome(value=value, lower=lower, upper=upper, values=x, method="step-bounded matrix-vector steps "
                        "(certified bracket)", note=note, warning=warning)


def _states(storm_model: Any, state_formula: Any) -> np.ndarray:
    import stormpy

    try:
        result = stormpy.model_checking(storm_model, state_formula)
    except RuntimeError as exc:
        raise PropertyError(f"Storm cannot check '{state_formula}' on this model: {storm_message(exc)}") from None
    mask = np.zeros(storm_model.nr_states, dtype=bool)
    idx = np.fromiter(iter(result.get_truth_values_vector()), dtype=np.int64)
    mask[idx] = True
    return mask


def _backward(matrix: Any, seeds: np.ndarray, through: np.ndarray) -> np.ndarray:
    """States that reach ``seeds`` along positive transitions whose sources (except the seeds) are in ``through``."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order

    n = matrix.shape[0]
    pos = matrix.copy()
    pos.data = (pos.data > 0).astype(np.int8)
    pos.eliminate_zeros()
    # reversed graph: edge t -> s when P[s, t] > 0 and s may be passed through
    rev = (sp.diags(through.astype(np.int8), dtype=np.int8) @ pos).T.tocsr()
    super_edges = sp.csr_matrix((np.ones(int(seeds.sum()), dtype=np.int8), (np.zeros(int(seeds.sum()), dtype=np.int64),
                                 np.flatnonzero(seeds))), shape=(1, n + 1))
    graph = sp.vstack([sp.hstack([rev, sp.csr_matrix((n, 1), dtype=np.int8)]), super_edges]).tocsr()
    order = breadth_first_order(graph, n, directed=True, return_predecessors=False)
    out = np.zeros(n + 1, dtype=bool)
    out[order] = True
    return out[:n]


def _reachability(matrix: Any, phi: np.ndarray, psi: np.ndarray, init: int, numerics: str, precision: float,
                  budget: float) -> CheckOutcome | None:
    """``P(phi U psi)`` on a DTMC: graph analysis, sparse LU, certified bracket (see the module docstring)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import splu

    matrix = sp.csr_matrix(matrix, dtype=np.float64)
    pass_through = phi & ~psi
    no = ~_backward(matrix, psi, pass_through)
    yes = ~_backward(matrix, no, pass_through)
    maybe = ~yes & ~no
    values = yes.astype(np.float64)
    m = int(maybe.sum())
    graph_note = f"graph analysis: {int(yes.sum())} states 1, {int(no.sum())} states 0, {m} solved"
    if m == 0:
        v = float(values[init])
        return CheckOutcome(value=v, lower=v, upper=v, values=values, method="graph analysis (exact)",
                            note=f"exact: {graph_note}")
    if m > MAX_DIRECT_STATES:
        return None
    rows = matrix[maybe]
    a = rows[:, maybe].tocsr()
    b = np.asarray(rows[:, yes].sum(axis=1)).ravel()
    # rounding margin for fl(A v + b) over non-negative terms: row length + 1 additions/products
    k = int(np.diff(a.indptr).max(initial=0)) + 2
    gamma = 2.0 * k * 2.0 ** -53
    t0 = time.perf_counter()
    system = (sp.identity(m, format="csc") - a.tocsc()).tocsc()
    try:
        lu = splu(system)
    except (RuntimeError, MemoryError):
        return None
    solve = lu.solve
    x = _refined(a, b, solve)
    lo, hi = _certify(a, b, x, solve, gamma, k)
    j = int(np.flatnonzero(maybe).searchsorted(init)) if maybe[init] else None
    # LU's error is normwise: tiny components can be off by orders of magnitude. Scaling the columns by the
    # current solution (solve for w = x / scale) makes it relative per component; repeat while it helps.
    for _ in range(4):
        if j is None or _relative(x[j], lo[j], hi[j]) <= min(precision, 1e-10):
            break
        scale = np.maximum(x, 1e-300)
        try:
            lu_scaled = splu((system @ sp.diags(scale)).tocsc())
        except (RuntimeError, MemoryError):
            break
        solve_scaled = lambda r, f=lu_scaled, c=scale: c * f.solve(r)  # noqa: E731
        x2 = _refined(a, b, solve_scaled)
        lo2, hi2 = _certify(a, b, x2, solve_scaled, gamma, k)
        if not _relative(x2[j], lo2[j], hi2[j]) < _relative(x[j], lo[j], hi[j]) and hi2[j] - lo2[j] >= hi[j] - lo[j]:
            break
        x, lo, hi = x2, lo2, hi2
    method = "graph analysis + sparse LU + certified bracket"
    if j is None:  # the initial state is decided by the graph analysis
        v = float(values[init])
        values[maybe] = x
        return CheckOutcome(value=v, lower=v, upper=v, values=values, method=method,
                            note=f"exact: the initial state is decided by the graph analysis ({graph_note})")
    rel = _relative(x[j], lo[j], hi[j])
    if numerics == "sound" and not rel <= precision and hi[j] > 1e-250:  # below: only an absolute bound exists
        lo, hi = _interval_iteration(a, b, lo, hi, j, precision, gamma, k, budget - (time.perf_counter() - t0))
        x = np.clip(x, lo, hi)
        mid = (lo + hi) / 2
        if _relative(mid[j], lo[j], hi[j]) < min(1.0, _relative(x[j], lo[j], hi[j])):
            x = mid
        method = "graph analysis + sparse LU + interval iteration"
        rel = _relative(x[j], lo[j], hi[j])
    values[maybe] = x
    value, lower, upper = float(x[j]), float(lo[j]), float(hi[j])
    warning = None
    if lower > 0:
        note = f"{graph_note}; true value in [{lower:.6g}, {upper:.6g}] (certified): relative error <= {rel:.2g}"
        if numerics == "sound" and rel > precision:
            warning = (f"the requested precision {precision:g} (relative) was not reached within {budget:g} s: the "
                       f"true value is in [{lower:.6g}, {upper:.6g}] (relative error <= {rel:.2g})")
    else:
        note = (f"{graph_note}; only an absolute bound is known: true value in [0, {upper:.3g}] (the certified lower "
                "bound is 0)")
        warning = (f"value {value:.3g}: no relative error bound could be certified; only the absolute bound "
                   f"[0, {upper:.3g}] is known")
    if numerics == "direct" and lower <= 0:
        return CheckOutcome(value=value, lower=None, upper=None, values=values, method="graph analysis + sparse LU",
                            note=note, warning=warning if value < TINY else None)
    return CheckOutcome(value=value, lower=lower, upper=upper, values=values, method=method, note=note,
                        warning=warning)


def _relative(v: float, lo: float, hi: float) -> float:
    """A bound on |v - true| / true when lo <= true <= hi."""
    if lo <= 0:
        return math.inf
    try:
        return max(float(hi) - float(v), float(v) - float(lo), 0.0) / float(lo)
    except OverflowError:
        return math.inf


def _refined(a: Any, b: np.ndarray, solve: Any) -> np.ndarray:
    """``(I - A)^-1 b`` by ``solve`` plus iterative refinement (residuals of non-negative sums are small
    componentwise), clipped to [0, 1]."""
    x = np.clip(solve(b), 0.0, 1.0)
    for _ in range(3):
        x = np.clip(x + solve(b + a @ x - x), 0.0, 1.0)
    return x


#: the absolute rounding error of one product or sum near the underflow threshold (smallest subnormal)
_ETA = 5e-324


def _sub_solution(a: Any, b: np.ndarray, v: np.ndarray, gamma: float, k: int) -> np.ndarray:
    """A rigorous lower bound of ``A v + b`` for ``v >= 0``: relative margin ``gamma`` (non-negative sums of
    row length ``k``) plus ``k`` subnormal roundings."""
    return np.maximum((a @ v + b) * (1.0 - gamma) - k * _ETA, 0.0)


def _super_solution(a: Any, b: np.ndarray, v: np.ndarray, gamma: float, k: int) -> np.ndarray:
    return (a @ v + b) * (1.0 + gamma) + k * _ETA


def _certify(a: Any, b: np.ndarray, x: np.ndarray, solve: Any, gamma: float, k: int) -> tuple[np.ndarray, np.ndarray]:
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
        eps = 10.0 ** e
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


def _interval_iteration(a: Any, b: np.ndarray, lo: np.ndarray, hi: np.ndarray, j: int, precision: float,
                        gamma: float, k: int, budget: float) -> tuple[np.ndarray, np.ndarray]:
    """Sound interval iteration from a certified bracket, rounded outwards, until state ``j``'s bracket is
    within ``precision`` (relative) or ``budget`` seconds pass."""
    deadline = time.perf_counter() + max(budget, 0.0)
    while True:
        for _ in range(50):
            lo = np.maximum(lo, _sub_solution(a, b, lo, gamma, k))
            hi = np.minimum(hi, _super_solution(a, b, hi, gamma, k))
        mid = (lo[j] + hi[j]) / 2
        if _relative(mid, lo[j], hi[j]) <= precision or time.perf_counter() > deadline:
            return lo, hi
