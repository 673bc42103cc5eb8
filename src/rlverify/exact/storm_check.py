"""Storm's checks, annotated with what is known of their precision: a formula on a Storm model (:func:`storm_check`),
its state formulas' state sets (:func:`state_set`), Storm's qualitative graph analysis (:func:`storm_qualitative`),
and the refusal of a step bound Storm would iterate beyond the work budget (:func:`refuse_storm_steps`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlverify.choices import Numerics
from rlverify.errors import PropertyError
from rlverify.exact.formulas import BOUNDED, PathKind, StormFormula, bound, has_operator, is_reward_bounded, path_kind, path_of
from rlverify.exact.outcome import TINY, CheckOutcome
from rlverify.models.numerics import StormEnvironment
from rlverify.models.storm import bit_mask
from rlverify.models.symbolic import storm_message

__all__ = [
    "StormEnvironment",
    "StormModel",
    "refuse_storm_steps",
    "state_set",
    "storm_bracket",
    "storm_check",
    "storm_qualitative",
    "storm_steps",
]

#: a stormpy sparse model (a DTMC or MDP; stormpy's objects are untyped)
StormModel = Any

_STORM_METHOD = {
    Numerics.SOUND: "Storm sound value iteration",
    Numerics.DIRECT: "Storm Eigen solver",
    Numerics.FAST: "Storm plain value iteration (heuristic stop)",
}


def storm_check(
    storm_model: StormModel,
    formula: StormFormula,
    env: StormEnvironment,
    init: int,
    *,
    numerics: str | None = None,
    precision: float | None = None,
    max_work: int | None = None,
) -> CheckOutcome:
    """Storm's check of ``formula`` on ``storm_model``, its value at ``init`` with what is known of its precision
    (``numerics`` None: Storm's answer as is, ``method``/``note`` None). Reward-bounded formulas are checked for the
    initial state only (``values`` NaN elsewhere); a step bound above ``max_work`` is refused up front."""
    import stormpy  # lazy: stormpy, start-up

    refuse_storm_steps(formula, storm_model, max_work)
    reward_bounded = is_reward_bounded(formula)
    try:
        result = stormpy.model_checking(storm_model, formula, environment=env, only_initial_states=reward_bounded)
    except RuntimeError as exc:
        raise PropertyError(f"Storm cannot check '{formula}' on this model: {storm_message(exc)}") from None
    if reward_bounded:
        values = np.full(storm_model.nr_states, np.nan)
        values[init] = float(result.get_value(init))
        return _reward_bounded(float(values[init]), values, numerics, precision)
    values = np.asarray(result.get_value_vector(), dtype=np.float64)
    lower, upper = _storm_bounds(result, formula, init)
    value = float(values[init])
    if numerics is None:
        return CheckOutcome(value=value, lower=lower, upper=upper, values=values)
    if numerics != Numerics.SOUND:  # no bracket: Storm's bounds hold for its sound solver only
        return _annotate_storm(formula, value, None, None, values, numerics, precision)
    if lower is not None and upper is not None:
        is_probability = formula.is_probability_operator_formula
        lower, upper = storm_bracket(value, lower, upper, precision or 1e-6, probability=is_probability)
    return _annotate_storm(formula, value, lower, upper, values, numerics, precision)


def _storm_bounds(result: Any, formula: StormFormula, init: int) -> tuple[float | None, float | None]:
    """Storm's bounds at ``init`` (None where it reports none). Storm's bounds of a step-bounded result are its value:
    no rounding margin, so none."""
    if storm_steps(formula) is not None:
        return None, None
    lower = float(result.get_lower_bound(init)) if result.has_lower_bounds() else None
    upper = float(result.get_upper_bound(init)) if result.has_upper_bounds() else None
    return lower, upper


def _reward_bounded(value: float, values: np.ndarray, numerics: str | None, precision: float | None) -> CheckOutcome:
    """Storm's reward-bounded answer: no bounds reported; its sound setting claims |value - true| <= precision x true."""
    p = precision or 1e-6
    lower, upper = (value / (1 + p), value / (1 - p)) if numerics == Numerics.SOUND else (None, None)
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


def storm_qualitative(storm_model: StormModel, formula: StormFormula) -> tuple[bool | None, bool | None]:
    """``(zero, one)``: whether ``formula``'s value (optimality kept) at the initial state is exactly 0 / 1, by
    Storm's graph analysis (its qualitative check of ``>0`` and ``>=1``).

    Only for unbounded path formulas other than ``X`` (``F``, ``U``, ``G``) over propositional state formulas: Storm
    decides those by graph analysis, whereas its qualitative answer for step- or reward-bounded forms and ``X`` comes
    from computed values (measured: ``P>0 [F<=8 goal]`` false on a chain reaching the goal with probability 1e-600).
    Else ``(None, None)``.
    """
    import stormpy  # lazy: stormpy, start-up

    if not formula.is_probability_operator_formula:
        return None, None
    path = formula.subformula
    if path_kind(path) not in (PathKind.EVENTUALLY, PathKind.UNTIL, PathKind.GLOBALLY) or has_operator(path):
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
    from stormpy.developer.storage import ExpressionManager  # lazy: stormpy, start-up

    return ExpressionManager()


def storm_steps(formula: StormFormula) -> int | None:
    """The step bound of a step-bounded path formula (``U<=k``, ``C<=k``, ``I=k``) Storm would iterate, else None
    (``U<k`` and ``U[a,k]`` counted as k steps, ``C<k`` as k-1)."""
    path = path_of(formula)
    found = bound(path)
    if found is None or found.reward:
        return None
    return found.upper if path_kind(path) is PathKind.BOUNDED_UNTIL else found.steps


def refuse_storm_steps(formula: StormFormula, storm_model: StormModel, max_work: int | None) -> None:
    """Refuse (``PropertyError``) up front a step-bounded formula whose k Storm steps exceed ``max_work``
    multiply-adds (Storm cannot stop early and shows no progress)."""
    k = storm_steps(formula)
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
    formula: StormFormula,
    value: float,
    lower: float | None,
    upper: float | None,
    values: np.ndarray,
    numerics: str,
    precision: float | None,
) -> CheckOutcome:
    """Storm's answer with the method and what is known of its precision."""
    path = path_of(formula)
    bounded = path is not None and path_kind(path) in BOUNDED
    method = "Storm step-bounded matrix-vector steps" if bounded else _STORM_METHOD[Numerics(numerics)]
    if bounded:
        note = _bounded_note(formula, path)
    else:
        note = _solver_note(numerics, lower, upper, precision)
    warning = None
    if not bounded and numerics != Numerics.SOUND and 0 < abs(value) < TINY:
        warning = (
            f"value {value:.3g} is below {TINY:g} and {method} gives no relative error bound: only an "
            "absolute error (at best ~1e-16 x the largest value, far more on slowly mixing chains) is known; "
            "use --numerics sound for a certified bracket"
        )
    return CheckOutcome(value=value, lower=lower, upper=upper, values=values, method=method, note=note, warning=warning)


def _bounded_note(formula: StormFormula, path: StormFormula) -> str:
    """The precision of Storm's step-bounded answer."""
    if not formula.is_probability_operator_formula:
        return "step-bounded: exact up to floating-point rounding"
    found = bound(path)
    steps = found.upper if found is not None and found.literal and path_kind(path) is PathKind.BOUNDED_UNTIL else None
    # k steps of sums of non-negative products: each step adds at most ~(row length) roundings
    return (
        "step-bounded: exact up to floating-point rounding in sums of non-negative terms (relative error "
        f"about {steps if steps else 'k'} steps x row length x 1.1e-16)"
    )


def _solver_note(numerics: str, lower: float | None, upper: float | None, precision: float | None) -> str:
    """The precision of Storm's unbounded answer for ``numerics``."""
    if numerics == Numerics.SOUND and lower is not None and upper is not None:
        return f"Storm's sound solver: within {precision:g} relative; true value in [{lower:.6g}, {upper:.6g}]"
    if numerics == Numerics.DIRECT:
        return "Storm's Eigen solver: no error bound (absolute error at rounding level is typical)"
    return "plain value iteration stopped by a heuristic: no error bound"


def state_set(storm_model: StormModel, state_formula: StormFormula) -> np.ndarray:
    """``(S,)`` bool: the states of ``storm_model`` satisfying the propositional ``state_formula`` (PropertyError if Storm
    cannot evaluate it alone)."""
    import stormpy  # lazy: stormpy, start-up

    try:
        result = stormpy.model_checking(storm_model, state_formula)
    except RuntimeError as exc:
        raise PropertyError(f"Storm cannot check '{state_formula}' on this model: {storm_message(exc)}") from None
    return bit_mask(result.get_truth_values_vector(), storm_model.nr_states)
