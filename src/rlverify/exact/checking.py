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
in every setting; step-bounded reachability (:func:`bounded_until`, on a chain or an MDP) stops early,
soundly, at a fixed point or once within ``precision`` of the unbounded value, within a work budget
(``max_work``, steps x transitions, a step counting at least ``STEP_WORK``); forms Storm iterates are refused up
front above it.

Threshold verdicts (:func:`verdict`) come from a certified bracket and exact graph analysis only
(:func:`ranks`, :func:`qualitative`, :func:`storm_qualitative`), never from a rounded value.

Unbounded reachability on a policy-induced chain (``P=? [F t]``, ``P=? [a U b]``; when
:func:`check` is given the chain's ``matrix`` and ``numerics``) is solved here, not by Storm's
iterative solvers, for ``sound`` and ``direct``:

1. graph analysis: states that cannot reach the target are 0, states that reach it with
   probability 1 are 1 (exactly); only the remaining "maybe" states are solved;
2. a sparse LU solve of ``(I - A) x = b`` on the maybe states (float64, with iterative refinement); where
   they have no cycle (self-loops aside; e.g. QVBS csma) ``I - A`` is triangular in a topological
   order, its own LU factor, and is solved by substitution (no fill-in);
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

import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rlverify.arrays import distinct
from rlverify.errors import PropertyError
from rlverify.exact.options import MAX_WORK, STEP_WORK
from rlverify.models.numerics import NUMERICS, environment
from rlverify.models.properties import Property
from rlverify.models.storm import bit_mask, storm_message

__all__ = [
    "MAX_WORK",
    "NUMERICS",
    "CheckOutcome",
    "bounded_until",
    "check",
    "clipped",
    "environment",
    "is_reward_bounded",
    "iterate",
    "quantitative",
    "ranks",
    "solved_here",
    "state_set",
    "step_bounded_sets",
    "step_budget",
    "step_upper_bound",
    "step_work",
    "storm_qualitative",
    "until_sets",
    "verdict",
]


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
        directions = stormpy.logic.OptimizationDirection
        formula.set_optimality_type(directions.MINIMIZE if optimality == "min" else directions.MAXIMIZE)
    elif formula.has_optimality_type:
        formula.remove_optimality_type()
    return formula, threshold, comparison


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
        if (op == ">=" and t <= 0) or (op == "<=" and t >= 1):
            return True, None
        if (op == "<" and t <= 0) or (op == ">" and t >= 1):
            return False, None
        if t == 0 and zero is not None:  # > 0 or <= 0: is the target reachable at all
            return (not zero) if op == ">" else zero, None
        if t == 1 and one is not None:  # >= 1 or < 1: is it reached with probability 1
            return one if op == ">=" else (not one), None
    if lower is None or upper is None or math.isnan(lower) or math.isnan(upper):
        return None, (
            f"undecided: no certified bracket of the value is known, so whether it is {op} {t:g} cannot be "
            "decided (use --numerics sound)"
        )
    holds = {"<": upper < t, "<=": upper <= t, ">": lower > t, ">=": lower >= t}[op]
    fails = {"<": lower >= t, "<=": lower > t, ">": upper <= t, ">=": upper < t}[op]
    if holds:
        return True, None
    if fails:
        return False, None
    return None, (
        f"undecided: the true value lies in the certified bracket [{lower:.17g}, {upper:.17g}], which "
        f"contains the threshold {t:g}; a smaller --precision (with --numerics sound) may decide it"
    )


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


#: values below this are "tiny": their relative error is reported (or its absence said plainly)
TINY = 1e-10
#: the sparse LU solve is used up to this many maybe-states (above: Storm's solver for the setting)
MAX_DIRECT_STATES = 2_000_000
#: seconds the sound interval-iteration fallback may take before it reports the bracket it reached
SOUND_BUDGET_SECONDS = 10.0
_STORM_METHOD = {
    "sound": "Storm sound value iteration",
    "direct": "Storm Eigen solver",
    "fast": "Storm plain value iteration (heuristic stop)",
}


def check(
    storm_model: Any,
    formula: Any,
    env: Any,
    *,
    matrix: Any = None,
    numerics: str | None = None,
    precision: float | None = None,
    budget: float | None = None,
    full_model: Callable[[], Any] | None = None,
    max_work: int | None = MAX_WORK,
    progress: Callable[[str], None] | None = None,
) -> CheckOutcome:
    """Check ``formula`` on ``storm_model``; value at the (single) initial state.

    With ``matrix`` (the chain's ``(S, S)`` CSR transition matrix, same state order as the Storm
    DTMC) and ``numerics``, unbounded reachability is solved by graph analysis + sparse LU + a
    certified bracket and step-bounded reachability by :func:`bounded_until` (see the module docstring);
    everything else is Storm's, annotated with its precision. Without them: Storm's answer as is
    (``method``/``note`` None). ``full_model``: when ``storm_model`` carries only the chain's states, labels
    and valuations (for its state formulas; the transitions are ``matrix``), a function returning the full
    Storm chain for when Storm must check ``formula`` itself. ``max_work``: the budget of step-bounded
    computations (steps x transitions, see :func:`bounded_until`); a step-bounded formula Storm computes is
    refused up front above it. Reward-bounded formulas (``F{"r"}<=5``) are checked by Storm for the initial
    state only (``values`` is NaN elsewhere).
    """
    import stormpy

    init = storm_model.initial_states
    if len(init) != 1:
        raise PropertyError(f"the model has {len(init)} initial states; rlverify reports the value of a single one")
    s = int(init[0])
    if (
        numerics is not None
        and matrix is not None
        and numerics in ("sound", "direct")
        and str(storm_model.model_type).endswith("DTMC")
        and matrix.shape == (storm_model.nr_states,) * 2
    ):
        sets = until_sets(storm_model, formula)
        if sets is not None:
            out = _reachability(
                matrix, sets[0], sets[1], s, numerics, precision or 1e-6, SOUND_BUDGET_SECONDS if budget is None else budget
            )
            if out is not None:
                return out
        bounded = step_bounded_sets(storm_model, formula)
        if bounded is not None:
            phi, psi, k = bounded

            def cap(m: Any = matrix, a: np.ndarray = phi, b: np.ndarray = psi) -> np.ndarray | None:
                unbounded = _reachability(m, a, b, s, "sound", precision or 1e-6, SOUND_BUDGET_SECONDS)
                return None if unbounded is None else unbounded.uppers

            return bounded_until(
                matrix, phi, psi, k, s, precision=precision or 1e-6, max_work=max_work, cap=cap, progress=progress
            )
    if full_model is not None:
        storm_model = full_model()
    refuse_storm_steps(formula, storm_model, max_work)
    reward_bounded = is_reward_bounded(formula)
    try:
        result = stormpy.model_checking(storm_model, formula, environment=env, only_initial_states=reward_bounded)
    except RuntimeError as exc:
        raise PropertyError(f"Storm cannot check '{formula}' on this model: {storm_message(exc)}") from None
    if reward_bounded:
        values = np.full(storm_model.nr_states, np.nan)
        values[s] = float(result.get_value(s))
    else:
        values = np.asarray(result.get_value_vector(), dtype=np.float64)
    lower = float(result.get_lower_bound(s)) if result.has_lower_bounds() else None
    upper = float(result.get_upper_bound(s)) if result.has_upper_bounds() else None
    value = float(values[s])
    if _storm_steps(formula) is not None:  # Storm's bounds of a step-bounded result are its value: no rounding margin
        lower = upper = None
    if reward_bounded:  # Storm reports no bounds here; its sound setting claims |value - true| <= precision x true
        p = precision or 1e-6
        lower, upper = (value / (1 + p), value / (1 - p)) if numerics == "sound" else (None, None)
        note = (
            None
            if numerics is None
            else "reward-bounded: Storm's epoch unfolding for the initial state; "
            + (
                f"its sound solver's relative error <= {p:g}: true value in [{lower:.6g}, {upper:.6g}]"
                if lower is not None
                else "no error bound is known (--numerics sound gives one)"
            )
        )
        return CheckOutcome(
            value=value,
            lower=lower,
            upper=upper,
            values=values,
            note=note,
            method=None if numerics is None else "Storm reward-bounded unfolding (initial state only)",
        )
    if numerics is None:
        return CheckOutcome(value=value, lower=lower, upper=upper, values=values)
    if numerics == "sound" and lower is not None and upper is not None:
        is_probability = formula.is_probability_operator_formula
        lower, upper = storm_bracket(value, lower, upper, precision or 1e-6, probability=is_probability)
    return _annotate_storm(
        formula,
        value,
        lower if numerics == "sound" else None,
        upper if numerics == "sound" else None,
        values,
        numerics,
        precision,
    )


def storm_bracket(value: float, lower: float, upper: float, precision: float, *, probability: bool) -> tuple[float, float]:
    """A bracket that holds for Storm's sound answer: its bounds, widened to what its guarantee says.

    Storm's sound solvers guarantee ``|value - true| <= precision x |true|``; the bounds they report are the last
    iterates, computed in floating point and not rounded outwards (on QVBS's csma, Pmax's bounds collapsed to the value,
    one ulp below the exact rational Storm's exact mode publishes). So the bracket is the union of Storm's bounds and
    ``value`` +- ``precision / (1 - precision) x |value|``, one ulp further out, and a probability's kept in [0, 1].
    """
    delta = abs(value) * precision / (1.0 - precision)
    lo = math.nextafter(min(lower, value - delta), -math.inf)
    hi = math.nextafter(max(upper, value + delta), math.inf)
    if probability:
        lo, hi = max(lo, 0.0), min(hi, 1.0)
    return lo, hi


def storm_qualitative(storm_model: Any, formula: Any) -> tuple[bool | None, bool | None]:
    """``(zero, one)``: whether ``formula``'s value (optimality kept) at the initial state is exactly 0 / 1, by
    Storm's graph analysis (its qualitative check of ``>0`` and ``>=1``).

    Only for unbounded path formulas other than ``X`` (``F``, ``U``, ``G``, ``W``): Storm decides those by graph
    analysis, whereas its qualitative answer for step- or reward-bounded forms and ``X`` comes from computed
    values (measured: ``P>0 [F<=8 goal]`` false on a chain reaching the goal with probability 1e-600). Else
    ``(None, None)``.
    """
    import stormpy

    if not formula.is_probability_operator_formula:
        return None, None
    kind = type(formula.subformula).__name__
    if (
        kind in ("BoundedUntilFormula", "NextFormula")
        or kind not in ("EventuallyFormula", "UntilFormula", "GloballyFormula", "WeakUntilFormula")
        or "[" in re.sub(r'"[^"]*"', "", str(formula.subformula))
    ):
        return None, None
    s = int(storm_model.initial_states[0])
    manager = _expression_manager()
    answers = []
    for comparison, t in ((stormpy.logic.ComparisonType.GREATER, 0), (stormpy.logic.ComparisonType.GEQ, 1)):
        f = formula.clone()
        f.set_bound(comparison, manager.rational(stormpy.Rational(t)))
        try:
            result = stormpy.model_checking(storm_model, f)
        except RuntimeError:
            return None, None
        answers.append(s in set(result.get_truth_values_vector()))
    positive, one = answers
    return not positive, one


def _expression_manager() -> Any:
    """A fresh Storm expression manager (for the constant thresholds of qualitative checks)."""
    from stormpy.developer.storage import ExpressionManager

    return ExpressionManager()


def is_reward_bounded(formula: Any) -> bool:
    """Whether ``formula``'s path is bounded by a reward (``F{"r"}<=5``, ``a Urew{"r"}>=5 b``): Storm checks
    those for the initial states only."""
    sub = getattr(formula, "subformula", None)
    return (
        sub is not None
        and type(sub).__name__ == "BoundedUntilFormula"
        and "Urew" in re.sub(r'"[^"]*"', "", str(sub)).replace(" ", "")
    )


def _storm_steps(formula: Any) -> int | None:
    """The step bound of a step-bounded path formula (``U<=k``, ``C<=k``, ``I=k``) Storm would iterate, else None."""
    sub = getattr(formula, "subformula", None)
    if sub is None or is_reward_bounded(formula):
        return None
    kind = type(sub).__name__
    if kind == "BoundedUntilFormula":
        try:
            return int(sub.upper_bound_expression.evaluate_as_int())
        except (AttributeError, RuntimeError, ValueError):
            return None
    if kind in ("CumulativeRewardFormula", "InstantaneousRewardFormula"):
        m = re.fullmatch(r"[CI](<=|<|=)(\d+)", str(sub).replace(" ", ""))
        return None if m is None else int(m.group(2)) - (m.group(1) == "<")
    return None


def refuse_storm_steps(formula: Any, storm_model: Any, max_work: int | None) -> None:
    """Refuse (``PropertyError``) up front a step-bounded formula whose k Storm steps exceed ``max_work``
    multiply-adds (Storm cannot stop early and shows no progress)."""
    k = _storm_steps(formula)
    if k is None or max_work is None:
        return
    nnz = max(int(storm_model.nr_transitions), 1)
    if k * nnz > max_work:
        raise PropertyError(
            f"'{formula}': the step bound {k:,} needs {k:,} steps x {nnz:,} transitions = {k * nnz:.3g} multiply-adds "
            f"(about {k * nnz / 3e8:.3g} s), above the budget --max-work {max_work:.3g}; raise --max-work or lower the "
            "step bound (step-bounded reachability on a policy's chain or a monolithic MDP stops early at a fixed "
            "point; this form is computed by Storm, step by step)"
        )


def _annotate_storm(
    formula: Any,
    value: float,
    lower: float | None,
    upper: float | None,
    values: np.ndarray,
    numerics: str,
    precision: float | None,
) -> CheckOutcome:
    """Storm's answer with the method and what is known of its precision."""
    sub = formula.subformula if hasattr(formula, "subformula") else None
    bounded = sub is not None and type(sub).__name__ in (
        "BoundedUntilFormula",
        "CumulativeRewardFormula",
        "InstantaneousRewardFormula",
    )
    method = "Storm step-bounded matrix-vector steps" if bounded else _STORM_METHOD[numerics]
    warning = None
    if bounded and formula.is_probability_operator_formula:
        steps = _step_bound(sub)
        # k steps of sums of non-negative products: each step adds at most ~(row length) roundings
        note = (
            "step-bounded: exact up to floating-point rounding in sums of non-negative terms (relative error "
            f"about {steps if steps else 'k'} steps x row length x 1.1e-16)"
        )
    elif bounded:
        note = "step-bounded: exact up to floating-point rounding"
    elif numerics == "sound" and lower is not None and upper is not None:
        note = f"Storm's sound solver: within {precision:g} relative; true value in [{lower:.6g}, {upper:.6g}]"
    elif numerics == "direct":
        note = "Storm's Eigen solver: no error bound (absolute error at rounding level is typical)"
    else:
        note = "plain value iteration stopped by a heuristic: no error bound"
    if not bounded and numerics != "sound" and 0 < abs(value) < TINY:
        warning = (
            f"value {value:.3g} is below {TINY:g} and {method} gives no relative error bound: only an "
            "absolute error (at best ~1e-16 x the largest value, far more on slowly mixing chains) is known; "
            "use --numerics sound for a certified bracket"
        )
    return CheckOutcome(value=value, lower=lower, upper=upper, values=values, method=method, note=note, warning=warning)


def _step_bound(sub: Any) -> int | None:
    try:
        return int(str(sub.upper_bound_expression))
    except (AttributeError, ValueError, RuntimeError):
        return None


def until_sets(storm_model: Any, formula: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``(phi, psi)`` state masks when ``formula`` is ``P=? [phi U psi]`` or ``P=? [F psi]`` (unbounded)."""
    if not formula.is_probability_operator_formula:
        return None
    sub = formula.subformula
    kind = type(sub).__name__
    n = storm_model.nr_states
    try:  # a nested path formula (PCTL* / LTL: ((true U a) U b)) is no state formula: Storm's route then
        if kind == "EventuallyFormula":
            return np.ones(n, dtype=bool), state_set(storm_model, sub.subformula)
        if kind == "UntilFormula":
            return state_set(storm_model, sub.left_subformula), state_set(storm_model, sub.right_subformula)
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
    if kind == "BoundedUntilFormula" and step_upper_bound(sub) is None:
        return False
    # propositional state formulas only: a nested P/R operator needs the chain's transitions in Storm.
    # Storm prints every operator formula with a bracket (``P>0.5 [X a]``), expressions and labels have none
    return "[" not in re.sub(r'"[^"]*"', "", str(sub))


def step_upper_bound(sub: Any) -> int | None:
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


def step_bounded_sets(storm_model: Any, formula: Any) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``(phi, psi, k)`` when ``formula`` is ``P=? [phi U<=k psi]`` or ``P=? [F<=k psi]`` (step-bounded)."""
    if not formula.is_probability_operator_formula or type(formula.subformula).__name__ != "BoundedUntilFormula":
        return None
    sub = formula.subformula
    k = step_upper_bound(sub)
    if k is None:
        return None
    try:
        return state_set(storm_model, sub.left_subformula), state_set(storm_model, sub.right_subformula), k
    except PropertyError:
        return None


def _rounding(steps: int, d: int) -> tuple[float, float, float]:
    """``(lo_factor, hi_factor, absolute)`` of ``steps`` rounds of sums of at most ``d`` non-negative products.

    Each round's computed value is within a factor ``1 +- gamma``, ``gamma = d u / (1 - d u)``, of the exact
    sum of its computed inputs (plus ``d`` subnormal roundings); the rounds are monotone, so the true value
    after ``steps`` rounds lies in ``[x lo_factor - absolute, x hi_factor + absolute]`` of the computed ``x``.
    """
    u = 2.0**-53
    gamma = d * u / (1.0 - d * u)
    k = max(int(steps), 0)
    lo = math.exp(-k * math.log1p(gamma)) * (1 - 4 * u)
    hi = math.exp(min(-k * math.log1p(-gamma), 700.0)) * (1 + 4 * u)
    return lo, hi, k * d * 2.0**-1074


def positive_pattern(transitions: Any) -> Any:
    """``(C, S)`` int8 CSR of the positive entries of ``transitions`` (CSR), canonical, the input left untouched.

    Its index arrays are the input's own when it is canonical with no zero entries (1 byte per transition).
    """
    import scipy.sparse as sp

    T = sp.csr_matrix(transitions)
    positive = T.data > 0
    if positive.all() and T.has_canonical_format:
        return sp.csr_matrix((positive.view(np.int8), T.indices, T.indptr), shape=T.shape, copy=False)
    pattern = sp.csr_matrix((positive.view(np.int8), T.indices.copy(), T.indptr.copy()), shape=T.shape)
    pattern.eliminate_zeros()
    pattern.sum_duplicates()
    return pattern


def ranks(
    transitions: Any,
    row_groups: np.ndarray | None,
    allowed: np.ndarray,
    target: np.ndarray,
    *,
    all_choices: bool,
    all_successors: bool,
    limit: int,
) -> np.ndarray:
    """``(S,)`` int64 exact step ranks of a graph game towards ``target`` (-1: above ``limit`` or never).

    ``rank = 0`` on ``target``; on ``allowed`` states ``1 + Q_c Q_t rank(t)`` over the state's choices ``c``
    and their successors ``t`` (positive entries of ``transitions``, ``(C, S)`` CSR; ``row_groups``
    ``(S+1,)``, None: one choice per state), with ``Q_c`` max (``all_choices``) or min and ``Q_t`` max
    (``all_successors``) or min. So ``rank <= k`` means: some path reaches the target within k steps
    (min, min); for every scheduler some path does (max, min); surely within k steps under some scheduler
    (min, max) or under every one (max, max). Pure graph analysis: no floating point.
    """
    C, S = transitions.shape
    groups = np.arange(S + 1, dtype=np.int64) if row_groups is None else np.asarray(row_groups, dtype=np.int64)
    choice_state = np.repeat(np.arange(S), np.diff(groups))
    pattern = positive_pattern(transitions)
    choice_need = np.diff(pattern.indptr).astype(np.int64) if all_successors else np.ones(C, dtype=np.int64)
    reverse = pattern.T.tocsr()  # (S, C): the choices having each state as a successor
    del pattern
    rank = np.full(S, -1, dtype=np.int64)
    rank[target] = 0
    state_need = np.diff(groups).astype(np.int64) if all_choices else np.ones(S, dtype=np.int64)
    choice_done = np.zeros(C, dtype=bool)
    may = np.asarray(allowed, dtype=bool) & ~np.asarray(target, dtype=bool)
    frontier = np.flatnonzero(target)
    level = 0
    while len(frontier) and level < limit:
        ch = reverse[frontier].indices  # scipy's row gather: 5 bytes per entry, not three int64 index arrays
        if len(ch) == 0:
            break
        ch = ch[~choice_done[ch]]
        if all_successors:
            np.subtract.at(choice_need, ch, 1)
        else:
            choice_need[ch] = 0
        ch = distinct(ch)
        ch = ch[choice_need[ch] <= 0]
        choice_done[ch] = True
        st = choice_state[ch]
        st = st[may[st] & (rank[st] < 0)]
        if all_choices:
            np.subtract.at(state_need, st, 1)
        else:
            state_need[st] = 0
        st = distinct(st)
        st = st[state_need[st] <= 0]
        level += 1
        rank[st] = level
        frontier = st
    return rank


def qualitative(
    transitions: Any,
    row_groups: np.ndarray | None,
    phi: np.ndarray,
    psi: np.ndarray,
    steps: int,
    init: int,
    optimum: str | None = None,
) -> tuple[bool, bool]:
    """``(zero, one)``: whether ``P(phi U<=steps psi)`` at ``init`` is exactly 0 / exactly 1 (graph analysis).

    ``optimum``: ``"max"``/``"min"`` over an MDP's schedulers (step-dependent ones, as Storm's Pmax/Pmin of a
    step-bounded property); None for a chain.
    """
    every = optimum == "min"
    positive = ranks(transitions, row_groups, phi, psi, all_choices=every, all_successors=False, limit=steps)
    surely = ranks(transitions, row_groups, phi, psi, all_choices=every, all_successors=True, limit=steps)
    return bool(positive[init] < 0), bool(surely[init] >= 0)


def bounded_until(
    matrix: Any,
    phi: np.ndarray,
    psi: np.ndarray,
    steps: int,
    init: int,
    *,
    row_groups: np.ndarray | None = None,
    optimum: str | None = None,
    precision: float = 1e-6,
    max_work: int | None = MAX_WORK,
    cap: Callable[[], np.ndarray | None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> CheckOutcome:
    """``P(phi U<=steps psi)`` by matrix-vector steps, with a certified bracket and exact graph facts.

    ``matrix``: ``(C, S)`` CSR, a chain's (``row_groups`` None) or an MDP's (``optimum`` ``"max"``/``"min"``
    over its choices, ``row_groups`` ``(S+1,)``). The step-j values ``x_j`` only grow with j and are at most the
    unbounded value, so the iteration stops early, soundly, when

    * ``x_{j+1} = x_j`` bit for bit: the computation would return ``x_j`` after every further step, and the
      rounding analysis of ``steps`` steps (:func:`_rounding`) applies to it; or
    * ``cap()`` (per-state certified upper bounds of the unbounded value, asked for when the work exceeds
      ``max_work``) is within ``precision`` (relative) of the certified lower bound of ``x_j`` in every state:
      the step-``steps`` value lies between them.

    Raises:
        PropertyError: ``steps`` x transitions exceeds ``max_work`` and neither stop was reached within it
            (the message gives the estimate, the bracket reached and the option to change).
    """
    import scipy.sparse as sp

    if not on_disk(matrix):
        matrix = sp.csr_matrix(matrix, dtype=np.float64)
    k = max(int(steps), 0)
    nnz = max(int(matrix.nnz), 1)
    go = (phi & ~psi).astype(np.float64)
    target = psi.astype(np.float64)
    groups = None if row_groups is None else np.asarray(row_groups, dtype=np.int64)
    if groups is not None and (np.diff(groups) <= 0).any():
        raise PropertyError("internal: an MDP state without choices")
    reduce = None if optimum is None else (np.maximum if optimum == "max" else np.minimum)

    def step(x: np.ndarray) -> np.ndarray:
        q = matrix @ x
        if reduce is not None:
            assert groups is not None
            q = reduce.reduceat(q, groups[:-1])
        return target + go * q  # psi and go are disjoint: no rounding outside the products' sums

    d = int(np.diff(matrix.indptr).max(initial=0)) + 1
    budget = step_budget(k, nnz, max_work)
    # the unbounded value (an LU of the chain: memory and time) only where the k steps would exceed the budget
    # (the precision stop checked as it goes, as before the per-step floor of STEP_WORK); where only that floor keeps
    # the budget below k steps, the precision is checked once the budget is spent: a fixed point before it stays exact
    early = cap is not None and k * nnz > (MAX_WORK if max_work is None else max_work)
    upper_cap = cap() if cap is not None and (early or budget < k) else None
    x, j, stop = iterate(
        step, target, k, budget, d=d, upper_cap=upper_cap if early else None, precision=precision, progress=progress
    )
    if stop is None and j < k and upper_cap is not None and not early:
        lo_f, _, ab = _rounding(j, d)
        reached = np.maximum(x * lo_f - ab, 0.0)
        if np.all(upper_cap - reached <= precision * reached):
            stop = "precision"
    if stop is None and j < k:
        assert max_work is not None  # the budget stopped the iteration
        raise _over_budget(
            k, nnz, max_work, precision, j, d, float(x[init]), None if upper_cap is None else float(upper_cap[init])
        )
    lo_j, _, ab_j = _rounding(j, d)
    _, hi_k, ab_k = _rounding(k, d)
    lowers = np.maximum(x * lo_j - ab_j, 0.0)
    if stop == "precision":
        assert upper_cap is not None
        uppers = np.minimum(upper_cap, 1.0)
    else:  # every step done, or a fixed point: the computed step-k values are x
        uppers = np.minimum(x * hi_k + ab_k, 1.0)
        if upper_cap is not None:
            uppers = np.minimum(uppers, upper_cap)
    uppers = np.maximum(uppers, lowers)
    zero, one = _facts(matrix, groups, phi, psi, k, init, optimum, x if stop != "precision" else None, d)
    value, lower, upper = float(x[init]), float(lowers[init]), float(uppers[init])
    if zero:
        value = lower = upper = 0.0
    elif one:
        value = lower = upper = 1.0
    value = min(max(value, lower), upper)
    how = {
        None: f"{k:,} matrix-vector steps",
        "fixed point": f"{j:,} matrix-vector steps (a fixed point: every further step gives the same values)",
        "precision": f"{j:,} of {k:,} matrix-vector steps (stopped when the values after {j:,} steps were within "
        f"{precision:g} of the unbounded value, an upper bound of the step-bounded one)",
    }[stop]
    rel = _relative(value, lower, upper)
    note = (
        f"step-bounded: {how}; true value in [{lower:.12g}, {upper:.12g}] (certified: rounding of sums of "
        f"non-negative terms{', and the unbounded value' if stop == 'precision' else ''}), relative error <= "
        f"{rel:.2g}"
    )
    warning = None
    if zero or one:
        note = f"step-bounded: exactly {int(one)} by graph analysis ({how} for the other states)"
    elif lower <= 0 < upper:
        note = (
            f"step-bounded: {how}; only an absolute bound is known: true value in [0, {upper:.3g}] (positive: the "
            "target is reachable within the bound)"
        )
        warning = (
            f"value {value:.3g}: only the absolute bound [0, {upper:.3g}] is known (underflow); the value is "
            "positive (graph analysis)"
        )
    method = "step-bounded matrix-vector steps (certified bracket)"
    return CheckOutcome(
        value=value,
        lower=lower,
        upper=upper,
        values=x,
        method=method,
        note=note,
        warning=warning,
        zero=zero,
        one=one,
        lowers=lowers,
        uppers=uppers,
    )


def _facts(
    matrix: Any,
    groups: np.ndarray | None,
    phi: np.ndarray,
    psi: np.ndarray,
    k: int,
    init: int,
    optimum: str | None,
    x: np.ndarray | None,
    d: int,
) -> tuple[bool, bool]:
    """``(zero, one)`` of :func:`qualitative`, read off the computed step-``k`` values ``x`` where they decide both
    (no reversed graph: ~6 bytes per transition), else by :func:`qualitative`.

    On a chain, computed values are sums of products of the stored (non-negative) probabilities, so ``x[init] > 0``
    means a path of positive transitions reaches ``psi`` within ``k`` steps: not zero. If every path reached ``psi``
    within ``k`` steps, the value would be at least ``m^k`` for ``m`` the least row sum of the ``phi & ~psi`` rows
    (by induction on the steps), so a computed ``x[init]`` below its rounding-adjusted bound means: not one.
    """
    if optimum is None and x is not None and x[init] > 0:
        go = phi & ~psi
        row_sums = matrix @ np.ones(matrix.shape[1])
        least = float(row_sums[go].min(initial=1.0)) * (1.0 - d * 2.0**-52)  # computed sums round by < d ulps
        _, hi_f, ab = _rounding(k, d)  # the true value is at most x hi_f + ab
        if least > 0 and x[init] * hi_f + ab < math.exp(k * math.log(min(least, 1.0))):
            return False, False
    if on_disk(matrix):  # the ranks by passes over the row blocks (no reversed chain on disk)
        from rlverify.exact.ondisk import block_ranks

        positive, surely = block_ranks(matrix.local, phi, psi, k)
        return bool(positive[init] < 0), bool(surely[init] >= 0)
    return qualitative(matrix, groups, phi, psi, k, init, optimum)


def on_disk(matrix: Any) -> bool:
    """Whether ``matrix`` is a chain on disk (:class:`~rlverify.exact.ondisk.RowBlocks`: read in row blocks, or
    partitioned across Ray actors: its ``local`` rows are those on disk). Only ``--chain-dir`` makes one, after importing
    that module: a process that has not has none (and a chain in memory does not import it)."""
    ondisk = sys.modules.get("rlverify.exact.ondisk")
    return ondisk is not None and isinstance(getattr(matrix, "local", None), ondisk.RowBlocks)


def step_budget(k: int, nnz: int, max_work: int | None) -> int:
    """How many of ``k`` steps over ``nnz`` transitions a per-step loop may take within ``max_work`` multiply-adds
    (None: all ``k``), a step counting at least :data:`~rlverify.exact.options.STEP_WORK`; at least one."""
    per_step = max(nnz, STEP_WORK)  # a step's fixed cost, however few its transitions
    return k if max_work is None or k * per_step <= max_work else max(max_work // per_step, 1)


def step_work(k: int, nnz: int) -> str:
    """``k`` steps over ``nnz`` transitions as the work :func:`step_budget` counts, in words (for messages)."""
    floor = f" (a step counts at least {STEP_WORK:,})" if nnz < STEP_WORK else ""
    return f"{k:,} steps x {nnz:,} transitions{floor} = {k * max(nnz, STEP_WORK):.3g} multiply-adds"


def iterate(
    step: Callable[[np.ndarray], np.ndarray],
    target: np.ndarray,
    k: int,
    budget: int,
    *,
    d: int = 1,
    upper_cap: np.ndarray | None = None,
    precision: float = 0.0,
    progress: Callable[[str], None] | None = None,
    what: str = "step-bounded iteration",
) -> tuple[np.ndarray, int, str | None]:
    """The step-``j`` values from ``target`` until ``k`` steps, the ``budget``, a fixed point (``stop`` ``"fixed
    point"``) or, with ``upper_cap``, the certified lower bound within ``precision`` of it (``"precision"``).

    The one per-step loop of step-bounded computations (reachability, expected visits, expected rewards): ``step``
    is deterministic, so once ``step(x) == x`` bit for bit every further step returns ``x`` and the values after
    ``k`` steps are ``x``, exactly as if all ``k`` were taken. ``stop`` None and ``j < k``: the budget ran out.
    """
    x = target.copy()
    j, stop = 0, None
    shown = time.perf_counter()
    while j < min(k, budget):
        nxt = step(x)
        j += 1
        if np.array_equal(nxt, x):
            stop = "fixed point"
            break
        x = nxt
        if upper_cap is not None and j % 16 == 0:
            lo_f, _, ab = _rounding(j, d)
            lo = np.maximum(x * lo_f - ab, 0.0)
            if np.all(upper_cap - lo <= precision * lo):
                stop = "precision"
                break
        if progress is not None and time.perf_counter() - shown > 0.5:
            shown = time.perf_counter()
            progress(f"{what}: step {j:,} of {k:,}")
    return x, j, stop


def _over_budget(
    k: int, nnz: int, max_work: int, precision: float, j: int, d: int, value: float, cap: float | None
) -> PropertyError:
    """The refusal of a step bound the budget did not reach, with the bracket reached after ``j`` steps."""
    lo_f, _, ab = _rounding(j, d)
    reached = f"after {j:,} steps the value is at least {_digits(max(value * lo_f - ab, 0.0), math.floor)}" + (
        f" and at most {_digits(cap, math.ceil)} (the unbounded value)" if cap is not None else ""
    )
    return PropertyError(
        f"the step bound {k:,} needs {step_work(k, nnz)}, above the budget --max-work {max_work:.3g} "
        f"(about {max_work / 3e8:.0f} s), and the iteration "
        + (
            f"neither reached a fixed point nor came within --precision {precision:g} of the unbounded value"
            if cap is not None
            else "reached no fixed point"
        )
        + f" within it ({reached}); raise --max-work, "
        "lower the step bound, or check the unbounded property (P=? [F ...])"
    )


def _digits(value: float, rounding: Callable[[float], int], digits: int = 6) -> str:
    """``value`` to ``digits`` significant digits rounded with ``rounding`` (math.floor for a lower bound, math.ceil
    for an upper one): a bound printed rounded to nearest can cross what it bounds (0.99999994 shown as 1)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(abs(value))))
    return f"{rounding(value * scale) / scale:.{digits}g}"


def state_set(storm_model: Any, state_formula: Any) -> np.ndarray:
    """``(S,)`` bool: the states of ``storm_model`` satisfying the propositional ``state_formula`` (PropertyError if Storm
    cannot evaluate it alone)."""
    import stormpy

    try:
        result = stormpy.model_checking(storm_model, state_formula)
    except RuntimeError as exc:
        raise PropertyError(f"Storm cannot check '{state_formula}' on this model: {storm_message(exc)}") from None
    return bit_mask(result.get_truth_values_vector(), storm_model.nr_states)


#: largest estimated work of a sparse LU (multiply-adds) tried before leaving the solve to Storm's sound solver
MAX_LU_WORK = 2e10


def lu_work(system: Any) -> float:
    """An estimate of a sparse LU's multiply-adds on ``system`` ``(m, m)``: ``m * w**2`` for ``w`` the half-bandwidth
    after a reverse Cuthill-McKee ordering (a banded factorisation's cost; SuperLU's own ordering does no worse on
    the grid-like chains where this matters). Linear time in the entries."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    pattern = sp.csr_matrix(system)
    pattern = (pattern + pattern.T).tocsr()
    order = reverse_cuthill_mckee(pattern, symmetric_mode=True)
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    coo = pattern.tocoo()
    width = int(np.abs(place[coo.row] - place[coo.col]).max(initial=0))
    return float(pattern.shape[0]) * float(width) ** 2


def triangular_order(a: Any) -> np.ndarray | None:
    """``(m,)`` int64: an order of ``a``'s states (``(m, m)`` CSR) in which every stored entry off the diagonal goes from a
    state to an earlier one (successors first), so that ``I - A`` in that order is lower triangular; None when ``a``'s
    pattern has a cycle through two or more states (self-loops stay on the diagonal). Checked entry by entry: the
    numbering of the strongly connected components only proposes the order."""
    from scipy.sparse.csgraph import connected_components

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


def _solver(system: Any, order: np.ndarray | None) -> Callable[[np.ndarray], np.ndarray]:
    """``r -> system^-1 r`` for ``system`` ``(m, m)`` CSC: by forward substitution when ``order`` makes it lower triangular
    (:func:`triangular_order`; no fill-in, no pivoting), else by a sparse LU. Raises what ``splu`` and ``spsolve_triangular``
    raise."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import splu, spsolve_triangular

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


def _reachability(
    matrix: Any, phi: np.ndarray, psi: np.ndarray, init: int, numerics: str, precision: float, budget: float
) -> CheckOutcome | None:
    """``P(phi U psi)`` on a DTMC: graph analysis, sparse LU, certified bracket (see the module docstring)."""
    import scipy.sparse as sp

    from rlverify.models.graph import prob01

    matrix = sp.csr_matrix(matrix, dtype=np.float64)
    no, yes = prob01(matrix, phi, psi)
    maybe = ~yes & ~no
    values = yes.astype(np.float64)
    m = int(maybe.sum())
    graph_note = f"graph analysis: {int(yes.sum())} states 1, {int(no.sum())} states 0, {m} solved"
    if m == 0:
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
    if m > MAX_DIRECT_STATES:
        return None
    rows = matrix[maybe]
    a = rows[:, maybe].tocsr()
    b = np.asarray(rows[:, yes].sum(axis=1)).ravel()
    gamma, k = sum_margin(int(np.diff(a.indptr).max(initial=0)))
    t0 = time.perf_counter()
    system = (sp.identity(m, format="csc") - a.tocsc()).tocsc()
    order = triangular_order(a)
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
    j = int(np.flatnonzero(maybe).searchsorted(init)) if maybe[init] else None
    # LU's error is normwise: tiny components can be off by orders of magnitude. Scaling the columns by the
    # current solution (solve for w = x / scale) makes it relative per component; repeat while it helps.
    for _ in range(4):
        if j is None or _relative(x[j], lo[j], hi[j]) <= min(precision, 1e-10):
            break
        scale = np.maximum(x, 1e-300)
        try:
            scaled = _solver((system @ sp.diags(scale)).tocsc(), order)
        except (RuntimeError, MemoryError, np.linalg.LinAlgError):  # (substitution: a zero on the diagonal)
            break
        solve_scaled = lambda r, f=scaled, c=scale: c * f(r)  # noqa: E731
        x2 = _refined(a, b, solve_scaled)
        lo2, hi2 = _certify(a, b, x2, solve_scaled, gamma, k)
        if not _relative(x2[j], lo2[j], hi2[j]) < _relative(x[j], lo[j], hi[j]) and hi2[j] - lo2[j] >= hi[j] - lo[j]:
            break
        x, lo, hi = x2, lo2, hi2
    method = "graph analysis + sparse LU + certified bracket"
    zero, one = bool(no[init]), bool(yes[init])
    if j is None:  # the initial state is decided by the graph analysis
        v = float(values[init])
        values[maybe] = x
        return CheckOutcome(
            value=v,
            lower=v,
            upper=v,
            values=values,
            method=method,
            note=f"exact: the initial state is decided by the graph analysis ({graph_note})",
            lowers=_bounds(values, maybe, lo),
            uppers=_bounds(values, maybe, hi),
            zero=zero,
            one=one,
        )
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
    lowers, uppers = _bounds(values, maybe, lo), _bounds(values, maybe, hi)
    if numerics == "direct" and lower <= 0:
        return CheckOutcome(
            value=value,
            lower=None,
            upper=None,
            values=values,
            method="graph analysis + sparse LU",
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
    return rounded_down(a @ v + b, gamma, k)


def _super_solution(a: Any, b: np.ndarray, v: np.ndarray, gamma: float, k: int) -> np.ndarray:
    return rounded_up(a @ v + b, gamma, k)


def sum_margin(row_length: int) -> tuple[float, int]:
    """``(gamma, k)`` of :func:`rounded_down` / :func:`rounded_up` for ``fl(A v + b)`` over non-negative terms, rows
    of at most ``row_length`` entries: ``row_length + 1`` additions/products."""
    k = int(row_length) + 2
    return 2.0 * k * 2.0**-53, k


def rounded_down(computed: np.ndarray, gamma: float, k: int) -> np.ndarray:
    """A rigorous lower bound of the exact sums whose computed values are ``computed`` (each a float sum of at most
    ``k`` non-negative products, ``gamma = 2 k u``): relative margin ``gamma`` plus ``k`` subnormal roundings."""
    return np.maximum(computed * (1.0 - gamma) - k * _ETA, 0.0)


def rounded_up(computed: np.ndarray, gamma: float, k: int) -> np.ndarray:
    """A rigorous upper bound of the exact sums whose computed values are ``computed`` (see :func:`rounded_down`)."""
    return computed * (1.0 + gamma) + k * _ETA


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
    a: Any, b: np.ndarray, lo: np.ndarray, hi: np.ndarray, j: int, precision: float, gamma: float, k: int, budget: float
) -> tuple[np.ndarray, np.ndarray]:
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
