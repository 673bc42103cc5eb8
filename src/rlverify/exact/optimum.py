"""The optimum over all schedulers: Pmin and Pmax (Rmin and Rmax) of a property on the full MDP, no policy.

:func:`optimum` checks both optima on the property-directed MDP (:class:`~rlverify.exact.chain.FullMDP`, built
here unless given) and says which one the property asks for; :func:`mdp_optimum` is the one way an optimum of an
MDP is computed (also for the adversarial MDP of :func:`~rlverify.exact.robustness`): step-bounded reachability on
the MDP's arrays (:func:`~rlverify.exact.bounded.bounded_until`: a certified bracket, exact graph facts, an
early stop at a fixed point), everything else by Storm (its sound bounds; graph facts from its qualitative check).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

import numpy as np

from rlverify.choices import Mode, Numerics, Strategy
from rlverify.errors import PropertyError
from rlverify.exact.bounded import bounded_until
from rlverify.exact.chain import SHRINK, FullMDP, choose_strategy, mdp_for
from rlverify.exact.checking import check, step_bounded_sets
from rlverify.exact.formulas import StormFormula, quantitative
from rlverify.exact.options import ExactOptions, Progress, check_operator, check_resolved, guarantee, provenance, settings
from rlverify.exact.outcome import CheckOutcome, clipped, verdict
from rlverify.exact.storm_check import StormModel, storm_qualitative
from rlverify.models.explicit import ExplicitModel, out_of_memory
from rlverify.models.numerics import StormEnvironment, environment
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel
from rlverify.results import ExactResult, OptimumResult

log = logging.getLogger(__name__)

#: largest MDP whose threshold verdict is decided in exact rational arithmetic when the float bracket cannot decide it
EXACT_TIE_STATES = 50_000


def optimum(
    model: SymbolicModel,
    prop: Property,
    options: ExactOptions | None = None,
    *,
    mdp: FullMDP | None = None,
    progress: Progress | None = None,
) -> OptimumResult:
    """Pmin and Pmax (Rmin and Rmax) of ``prop`` over all schedulers of ``model``.

    Args:
        model: a loaded PRISM/JANI model; prop: its parsed property (a named JANI ``Pmax``/``Pmin`` property
            parsed without ``fixed_policy`` keeps its optimum).
        options: numerics, precision, max_states, max_memory, max_work, all_states (None: the defaults; the mode is
            monolithic whatever it says, and the strategy must be ``auto`` or ``full``: no policy).
        mdp: the property-directed MDP when already built (:func:`~rlverify.exact.chain.full_mdp`).

    Returns an :class:`~rlverify.results.OptimumResult`; ``value`` is the optimum the property asks for.
    Raises :class:`~rlverify.errors.RlverifyError` subclasses for what cannot be checked, and
    :class:`~rlverify.errors.MemoryBudgetError` when memory runs out.
    """
    try:
        return _optimum(
            model,
            prop,
            dataclasses.replace(options or ExactOptions(), mode=Mode.MONOLITHIC),
            mdp,
            progress or (lambda msg: None),
        )
    except MemoryError:
        raise out_of_memory("exact verification", SHRINK) from None


def _optimum(
    model: SymbolicModel, prop: Property, options: ExactOptions, given: FullMDP | None, say: Progress
) -> OptimumResult:
    check_resolved(model, prop)
    options.validate()
    check_operator(prop, Mode.MONOLITHIC)
    choose_strategy(model, options)  # refuses --strategy merged/onthefly: they need a policy
    built = mdp_for(model, prop, options, given, progress=say)
    mdp = built.mdp
    _refuse_signed(prop, mdp)
    t = time.perf_counter()
    say("checking Pmin and Pmax")
    fmin, threshold, comparison = quantitative(prop, optimality="min")
    fmax, _, _ = quantitative(prop, optimality="max")
    probability = prop.operator == "P"
    env = environment(options.numerics, options.precision)
    lo, hi = (
        mdp_optimum(
            mdp,
            built.storm,
            f,
            o,
            env=env,
            numerics=options.numerics,
            precision=options.precision,
            max_work=options.max_work,
            probability=probability,
            progress=say,
        )
        for f, o in ((fmin, "min"), (fmax, "max"))
    )
    check_seconds = time.perf_counter() - t
    timings = {"parse": model.parse_seconds, "build": built.seconds, "check": check_seconds}
    timings["total"] = sum(timings.values())
    asked = _asked(prop, threshold, comparison)
    out = lo if asked == "min" else hi
    notes = list(prop.notes) + list(mdp.notes)
    satisfied = None
    if threshold is not None:
        assert comparison is not None
        satisfied, why = _decided(model, prop, out, threshold, comparison, probability, options, mdp.num_states)
        if why:
            notes.append(why)
    notes += [o.warning for o in (lo, hi) if o.warning]
    sound = options.numerics is Numerics.SOUND
    return OptimumResult(
        asked=asked,
        value=out.value,
        pmin=lo.value,
        pmax=hi.value,
        pmin_bounds=_bracket(lo) if sound else None,
        pmax_bounds=_bracket(hi) if sound else None,
        satisfied=satisfied,
        guarantee=guarantee(options.numerics),
        precision=options.precision,
        states=mdp.num_states,
        transitions=mdp.num_transitions,
        choices=mdp.num_choices,
        method=out.method,
        precision_note=out.note,
        state_pmin=per_state(lo.values, probability),
        state_pmax=per_state(hi.values, probability),
        state_valuations=mdp.valuations,
        variables=mdp.variables,
        provenance=provenance(
            model, prop, None, timings=timings, settings=settings(options, Strategy.FULL, model), warnings=notes
        ),
    )


def as_exact_result(result: OptimumResult) -> ExactResult:
    """``result`` as ``verify_exact(..., mode="monolithic")`` reports it (``rlverify verify --mode monolithic``: the
    same fields and JSON): ``value`` with its bracket as ``lower``/``upper``, ``pmin``/``pmax`` beside it, the
    per-state optima when the options asked for every state."""
    bounds = result.pmin_bounds if result.asked == "min" else result.pmax_bounds
    every = bool(result.settings.get("all_states"))
    return ExactResult(
        mode=Mode.MONOLITHIC,
        strategy=Strategy.FULL,
        value=result.value,
        lower=None if bounds is None else bounds[0],
        upper=None if bounds is None else bounds[1],
        method=result.method,
        precision_note=result.precision_note,
        guarantee=result.guarantee,
        precision=result.precision,
        satisfied=result.satisfied,
        states=result.states,
        transitions=result.transitions,
        choices=result.choices,
        stalled_probability=0.0,
        pmin=result.pmin,
        pmax=result.pmax,
        state_values=result.state_pmax if every else None,
        state_values_min=result.state_pmin if every else None,
        state_valuations=result.state_valuations if every else None,
        variables=result.variables,
        provenance=result.provenance,
    )


def mdp_optimum(
    mdp: ExplicitModel,
    storm_model: StormModel,
    formula: StormFormula,
    optimum: str,
    *,
    env: StormEnvironment,
    numerics: str,
    precision: float,
    max_work: int | None,
    probability: bool,
    full_model: Callable[[], StormModel] | None = None,
    progress: Progress | None = None,
) -> CheckOutcome:
    """Pmin or Pmax (``optimum`` ``"min"``/``"max"``; Rmin/Rmax) of ``formula`` at the initial state of ``mdp``.

    Step-bounded reachability (``numerics`` sound or direct) by :func:`~rlverify.exact.bounded.bounded_until` on the
    MDP's arrays (a certified bracket, exact graph facts, an early stop at a fixed point); else Storm's check (its
    sound bounds; graph facts from Storm's qualitative check). ``storm_model`` evaluates the state formulas;
    ``full_model``: when it carries the states and labels only, a function returning Storm's full model, for
    Storm's own check. The outcome's ``values`` are per state of ``mdp`` (probabilities clipped to [0, 1]).
    """
    sets = step_bounded_sets(storm_model, formula) if numerics in (Numerics.SOUND, Numerics.DIRECT) else None
    if sets is not None:
        phi, psi, k = sets
        out = bounded_until(
            mdp.transitions,
            phi,
            psi,
            k,
            int(storm_model.initial_states[0]),
            row_groups=mdp.row_groups,
            optimum=optimum,
            precision=precision,
            max_work=max_work,
            progress=progress,
        )
        return clipped(out, probability=probability)
    storm_full = storm_model if full_model is None else full_model()
    out = check(storm_full, formula, env, numerics=numerics, precision=precision, max_work=max_work)
    if probability and numerics != Numerics.FAST:
        zero, one = storm_qualitative(storm_full, formula)
        out = _unless_collapsed(dataclasses.replace(out, zero=zero, one=one), optimum)
    return clipped(out, probability=probability)


def _unless_collapsed(out: CheckOutcome, optimum: str) -> CheckOutcome:
    """``out`` without Storm's bounds where they collapsed onto 0 or 1 and the graph analysis proves the value is not
    (underflow)."""
    zero, one = out.zero, out.one
    if (zero is False and out.upper is not None and out.upper <= 0) or (
        one is False and out.lower is not None and out.lower >= 1
    ):
        return dataclasses.replace(
            out,
            lower=None,
            upper=None,
            warning=(
                f"P{optimum}: Storm's solver returned {out.value:g}, but the graph analysis shows the value is "
                f"{'positive' if zero is False else 'below 1'} (the difference is below the float range): no "
                "certified bracket is known"
            ),
        )
    return out


def per_state(values: np.ndarray, probability: bool) -> np.ndarray:
    """Per-state values as reported: probabilities inside [0, 1] (sums of rounded terms may exceed 1 by an ulp)."""
    return np.clip(values, 0.0, 1.0) if probability else values


def certified_verdict(
    out: CheckOutcome, threshold: float, comparison: str, probability: bool, numerics: str
) -> tuple[bool | None, str | None]:
    """The threshold's verdict from ``out``'s certified bracket and exact graph facts only (see
    :func:`~rlverify.exact.outcome.verdict`); an infinite expected reward is exact (graph analysis)."""
    certified = numerics == Numerics.SOUND or (out.method is not None and out.lower is not None)
    lower, upper = (out.lower, out.upper) if certified else (None, None)
    if np.isinf(out.value):
        lower = upper = out.value
    return verdict(threshold, comparison, lower, upper, zero=out.zero, one=out.one, probability=probability)


def signed_reward(prop: Property, model: ExplicitModel) -> str | None:
    """The name of the reward model a reward property reads when it has negative entries in ``model``, else None."""
    if prop.reward_model is None:
        return None
    names = sorted(set(model.state_rewards) | set(model.choice_rewards))
    name = prop.reward_model if prop.reward_model else (names[0] if len(names) == 1 else "")
    rewards = [r for r in (model.state_rewards.get(name), model.choice_rewards.get(name)) if r is not None]
    return name if any((r < 0).any() for r in rewards) else None


def _refuse_signed(prop: Property, mdp: ExplicitModel) -> None:
    signed = signed_reward(prop, mdp)
    if signed is not None and prop.bound is None:
        raise PropertyError(
            f"property '{prop.text}': reward model '{signed}' has negative rewards; Storm's "
            "Rmin/Rmax over all schedulers assume non-negative rewards (and the optimum of a "
            "difference is not the difference of optima): split it into two non-negative reward "
            "models, or check a policy (its value is computed exactly with signed rewards)"
        )


def _asked(prop: Property, threshold: float | None, comparison: str | None) -> str:
    """The optimum the property asks for: Pmin/Pmax by name; P<=b holds for every scheduler iff Pmax <= b (and
    P>=b iff Pmin >= b), as in PRISM/Storm; P=? without a bound reports Pmax (with Pmin beside it)."""
    raw = prop.storm_formula()
    if raw.has_optimality_type:
        return "min" if str(raw.optimality_type).endswith("MINIMIZE") else "max"
    if threshold is not None:
        return "max" if comparison in ("LESS", "LESS_EQUAL", "LEQ") else "min"
    return "max"


def _decided(
    model: SymbolicModel,
    prop: Property,
    out: CheckOutcome,
    threshold: float,
    comparison: str,
    probability: bool,
    options: ExactOptions,
    states: int,
) -> tuple[bool | None, str | None]:
    """The verdict of a threshold over every scheduler, with Storm's exact arithmetic for a tie on a small MDP."""
    satisfied, why = certified_verdict(out, threshold, comparison, probability, options.numerics)
    if satisfied is None and states <= EXACT_TIE_STATES:
        satisfied = _exact_verdict(model, prop)
        if satisfied is not None:
            why = (
                "the certified bracket contains the threshold: decided by Storm in exact rational "
                f"arithmetic on the MDP ({states:,} states)"
            )
    return satisfied, why


def _exact_verdict(model: SymbolicModel, prop: Property) -> bool | None:
    """The threshold property's truth at the initial state, by Storm in exact rational arithmetic (Pmin/Pmax as
    the property names them, ``P<=b`` over every scheduler): for a value equal to its threshold, which no float
    bracket decides. None if Storm cannot (a reward-bounded or other form its exact engine lacks)."""
    import stormpy  # lazy: stormpy, start-up

    try:
        exact = stormpy.build_model[stormpy.Rational](model.program, [prop.storm])
        if len(exact.initial_states) != 1:
            return None
        result = stormpy.model_checking(exact, prop.storm, only_initial_states=True)
        return int(exact.initial_states[0]) in set(result.get_truth_values_vector())
    except (RuntimeError, TypeError, AttributeError) as exc:
        log.info("exact tie-break declined: %s", exc)
        return None


def _bracket(out: CheckOutcome) -> tuple[float, float] | None:
    return None if out.lower is None or out.upper is None else (out.lower, out.upper)


__all__ = ["EXACT_TIE_STATES", "as_exact_result", "certified_verdict", "mdp_optimum", "optimum", "per_state", "signed_reward"]
