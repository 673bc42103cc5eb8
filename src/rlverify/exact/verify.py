"""The exact engine: verify a policy on a PRISM/JANI MDP with Storm."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlverify.errors import ModelError, OptionError, PolicyError, PropertyError, RlverifyError
from rlverify.exact.checking import (MAX_WORK, NUMERICS, CheckOutcome, bounded_until, check, clipped, environment,
                                     is_reward_bounded, quantitative, solved_here, step_bounded_sets, storm_qualitative,
                                     state_set, step_upper_bound, verdict)
from rlverify.exact.induced import STALLED_LABEL, ChoiceWeights, choice_weights, induced_chain
from rlverify.exact.merged import Unsupported, merged_chain
from rlverify.models.commands import is_command_name
from rlverify.models.dynamics import UNAVAILABLE, ChoiceTable, choice_table, forced_start_message, untaken_message
from rlverify.models.explicit import ExplicitModel, memory_guard, out_of_memory, to_storm
from rlverify.models.properties import Property, excluding_label
from rlverify.models.symbolic import SymbolicModel, as_symbolic, build_explicit, parse_property, storm_message
from rlverify.policies.base import Policy, validate_probabilities
from rlverify.policies.check import check_policy
from rlverify.results import ExactResult, versions

log = logging.getLogger(__name__)

MODES = ("stochastic", "deterministic", "monolithic")
STRATEGIES = ("auto", "full", "onthefly", "merged")




@dataclass(frozen=True)
class ExactOptions:
    """Settings of one exact verification.

    Attributes:
        mode: ``stochastic`` (every action with pi > 0), ``deterministic`` (argmax action only;
            ties go to the first action in the policy's order) or ``monolithic`` (no policy;
            Pmin and Pmax over all schedulers).
        strategy: ``merged`` (the policy's chain explored in numpy batches, never the MDP:
            :mod:`rlverify.exact.merged`), ``full`` (Storm builds the whole property-directed MDP; the policy is
            evaluated on all its decision states in one batch), ``onthefly`` (Storm's explicit
            builder with an action mask explores only policy-reachable states; the policy is
            called per newly explored state, cached) or ``auto`` (``merged`` for PRISM programs, falling back
            to ``full`` where it does not apply; ``full`` for JANI).
        unavailable: ``stall`` (mass on unavailable actions goes to an absorbing ``stalled``
            state) or ``renormalize`` (rescale the available actions' probabilities).
        numerics: ``sound``, ``direct`` or ``fast`` (see :mod:`rlverify.exact.checking`).
        precision: relative precision of iterative solvers.
        max_states: refuse models with more states (None: no limit). The default, 2M, keeps dense
            models within this class of machine (24 GB) with either strategy: peak memory grows with
            transitions, ~15-21 bytes per chain transition on stochastic Avoid with ``merged`` and ~56 with
            ``full`` (Storm's build and its UMB export of the MDP; docs/scaling.md): its chain at n = 10
            (1.8M states, 127M transitions) took 2.0 GB (merged) and 6.8 GB (full).
        all_states: also return the value of every state of the chain.
        max_memory: refuse (``MemoryBudgetError``) before a phase whose estimated resident memory
            (bytes: current RSS + counts x measured bytes per transition, see
            :func:`~rlverify.models.explicit.memory_guard`) exceeds this; None: the default guard, 80% of the
            machine's memory (:func:`~rlverify.models.explicit.memory_limit`). Storm's own build is bounded by
            ``max_states`` only (its counts are not known before it runs); a ``MemoryError`` anywhere becomes a
            ``MemoryBudgetError`` saying what to change.
        max_work: the budget of a step-bounded computation (``F<=k``, ``U<=k``, ``C<=k``, ``I=k``), in
            multiply-adds (steps x transitions); None: no limit. Step-bounded reachability stops early,
            soundly, at a fixed point or once within ``precision`` of the unbounded value
            (:func:`~rlverify.exact.checking.bounded_until`); if neither happens within the budget it is refused
            with the figures; forms Storm computes are refused up front when k x transitions exceeds it.
    """

    mode: str = "stochastic"
    strategy: str = "auto"
    unavailable: str = "stall"
    numerics: str = "sound"
    precision: float = 1e-6
    max_states: int | None = 2_000_000
    all_states: bool = False
    max_memory: int | None = None
    max_work: int | None = MAX_WORK

    def validate(self) -> None:
        for name, value, allowed in (("mode", self.mode, MODES), ("strategy", self.strategy, STRATEGIES),
                                     ("unavailable", self.unavailable, UNAVAILABLE), ("numerics", self.numerics, NUMERICS)):
            if value not in allowed:
                raise OptionError(f"--{name}: expected one of {', '.join(allowed)}, got '{value}'")
        if not (0 < self.precision < 1):
            raise OptionError(f"--precision: expected a number in (0, 1), got {self.precision}")
        if self.max_states is not None and self.max_states <= 0:
            raise OptionError(f"--max-states: expected a positive number, got {self.max_states}")
        if self.max_memory is not None and self.max_memory <= 0:
            raise OptionError(f"--max-memory: expected a positive size, got {self.max_memory}")
        if self.max_work is not None and (isinstance(self.max_work, bool) or self.max_work <= 0):
            raise OptionError(f"--max-work: expected a positive number, got {self.max_work}")


Progress = Callable[[str], None]


def model_and_property(model: Any, property_text: str | Property, constants: str | None = None, *,
                       fixed_policy: bool = True) -> tuple[SymbolicModel, Property]:
    """The engine's input as one step: a model (a loaded one, a PRISM/JANI file loaded with ``constants``, or a
    benchmark, whose property names are accepted) and its property, parsed with Storm. ``fixed_policy``: a
    named JANI ``Pmax``/``Pmin`` property is read as ``P=?`` (its ``notes`` say so); False: over all schedulers."""
    if callable(getattr(model, "property", None)) and hasattr(model, "kind") and isinstance(property_text, str):
        property_text = model.property(property_text)[0]  # a benchmark: its property names
    model = as_symbolic(model, constants)
    return model, parse_property(model, property_text, fixed_policy=fixed_policy)


def verify_exact(model: SymbolicModel | str | Path, property_text: str | Property, policy: Policy | None = None,
                 options: ExactOptions = ExactOptions(), *, constants: str | None = None,
                 progress: Progress | None = None) -> ExactResult:
    """Check a property on the chain ``policy`` induces on ``model`` (or Pmin/Pmax in monolithic mode).

    Args:
        model: a loaded model, or a PRISM/JANI file (loaded with ``constants``).
        property_text: PCTL text, a JANI property name, or a parsed :class:`~rlverify.models.Property`.
        policy: any :class:`~rlverify.policies.Policy` (None in monolithic mode).

    Returns an :class:`~rlverify.results.ExactResult` whose ``value`` is the property's value at
    the initial state. Raises :class:`~rlverify.errors.RlverifyError` subclasses for bad input, and
    :class:`~rlverify.errors.MemoryBudgetError` when memory runs out (estimated before a phase, or a
    ``MemoryError`` during one).
    """
    try:
        return _verify_exact(model, property_text, policy, options, constants=constants, progress=progress)
    except MemoryError:
        raise out_of_memory("exact verification", "verify a smaller model (constants), lower --max-states, use "
                            "--mode deterministic (fewer transitions), or set --max-memory below the machine's memory "
                            "so that phases are refused from their estimates before they start") from None


def _verify_exact(model: Any, property_text: str | Property, policy: Policy | None, options: ExactOptions, *,
                  constants: str | None, progress: Progress | None) -> ExactResult:
    options.validate()
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    model, prop = model_and_property(model, property_text, constants, fixed_policy=options.mode != "monolithic")
    property_text = prop.text
    timings["parse"] = model.parse_seconds + time.perf_counter() - t0
    if options.mode != "monolithic":
        if policy is None:
            raise PolicyError(f"mode '{options.mode}' needs a policy (--policy); use --mode monolithic for Pmin/Pmax")
        check_policy(policy, model)
    elif policy is not None:
        log.info("monolithic mode ignores the policy")
    _check_operator(prop, options.mode, property_text)
    env = environment(options.numerics, options.precision)
    strategy = _choose_strategy(model, options)

    if options.mode == "monolithic":
        say("building the full MDP")
        t = time.perf_counter()
        mdp, storm_mdp = build_explicit(model, [prop], max_states=options.max_states, max_memory=options.max_memory)
        timings["build"] = time.perf_counter() - t
        signed = _signed_reward(prop, mdp)
        if signed is not None and prop.bound is None:
            raise PropertyError(f"property '{property_text}': reward model '{signed}' has negative rewards; Storm's "
                                "Rmin/Rmax over all schedulers assume non-negative rewards (and the optimum of a "
                                "difference is not the difference of optima): split it into two non-negative reward "
                                "models, or check a policy (its value is computed exactly with signed rewards)")
        t = time.perf_counter()
        say("checking Pmin and Pmax")
        fmin, threshold, comparison = quantitative(prop, optimality="min")
        fmax, _, _ = quantitative(prop, optimality="max")
        probability = prop.operator == "P"
        lo = _check_optimum(mdp, storm_mdp, fmin, "min", env, options, say, probability)
        hi = _check_optimum(mdp, storm_mdp, fmax, "max", env, options, say, probability)
        timings["check"] = time.perf_counter() - t
        timings["total"] = model.parse_seconds + time.perf_counter() - t0
        # the optimum the property asks for: Pmin/Pmax by name; P<=b holds for every scheduler iff Pmax <= b (and
        # P>=b iff Pmin >= b), as in PRISM/Storm; P=? without a bound reports Pmax (with Pmin beside it)
        raw = prop.storm_formula()
        if raw.has_optimality_type:
            asked = lo if str(raw.optimality_type).endswith("MINIMIZE") else hi
        elif threshold is not None:
            asked = hi if comparison in ("LESS", "LESS_EQUAL", "LEQ") else lo
        else:
            asked = hi
        notes = list(prop.notes) + list(mdp.notes)
        satisfied = None
        if threshold is not None:
            satisfied, why = _verdict(asked, threshold, comparison, probability, options)
            if satisfied is None and mdp.num_states <= EXACT_TIE_STATES:
                satisfied = _exact_verdict(model, prop)
                if satisfied is not None:
                    why = ("the certified bracket contains the threshold: decided by Storm in exact rational "
                           f"arithmetic on the MDP ({mdp.num_states:,} states)")
            if why:
                notes.append(why)
        notes += [o.warning for o in (lo, hi) if o.warning]
        return ExactResult(
            property=property_text, mode="monolithic", strategy="full", value=asked.value,
            lower=asked.lower if options.numerics == "sound" else None,
            upper=asked.upper if options.numerics == "sound" else None, method=asked.method,
            precision_note=asked.note,
            guarantee=_guarantee(options), precision=options.precision, satisfied=satisfied, states=mdp.num_states,
            transitions=mdp.num_transitions, choices=mdp.num_choices, stalled_probability=0.0, pmin=lo.value,
            pmax=hi.value, timings=timings, settings=_settings(options, "full", model), versions=versions(),
            model=str(model.path), policy=None,
            state_values=_per_state(hi.values, probability) if options.all_states else None,
            state_values_min=_per_state(lo.values, probability) if options.all_states else None,
            state_valuations=mdp.valuations if options.all_states else None, variables=mdp.variables,
            warnings=notes)

    assert policy is not None
    estimates: dict[str, int] = {}
    built = _policy_chain(model, prop, policy, options, strategy, timings, estimates, say)
    chain, origin, strategy, untaken = built.chain, built.origin, built.strategy, built.untaken
    n_transitions = chain.num_transitions
    say(f"checking on the induced chain ({chain.num_states} states, {n_transitions} transitions)")
    t = time.perf_counter()
    formula, threshold, comparison = quantitative(on_chain(prop, chain, model))
    notes = list(prop.notes) + list(built.build_notes) + [n for n in [built.start_note] if n]
    signed = _signed_reward(prop, chain)
    # Reachability (bounded or not) is solved on the chain's matrix (checking.py): Storm then only evaluates the
    # state formulas, on a chain with the states, labels and valuations but self-loops for transitions (the full
    # chain is given to Storm if a solver declines). The signed-reward split rebuilds the chain. Otherwise Storm
    # checks the chain alone, and the arrays are freed before it reads them.
    ours = solved_here(formula, options.numerics)
    keep = signed is not None or ours or STALLED_LABEL in chain.labels
    skeleton = ours and signed is None
    # step-bounded on our side: a few vectors per state; else Storm's copy of the chain (or the LU's rows and fill-in)
    memory_guard(options.max_memory, "check", states=chain.num_states,
                 transitions=0 if skeleton and prop.bound is not None else n_transitions, what="chain transitions",
                 estimates=estimates)
    full_model = None
    if skeleton:
        storm_chain = to_storm(dataclasses.replace(chain, transitions=sp.identity(chain.num_states, format="csr")))
        full_model = lambda c=chain: to_storm(c)
    else:
        storm_chain = to_storm(chain)
    matrix = chain.transitions if keep else None
    chain = dataclasses.replace(chain, transitions=matrix)
    if signed is None:
        out = check(storm_chain, formula, env, matrix=matrix, numerics=options.numerics,
                    precision=options.precision, full_model=full_model, max_work=options.max_work, progress=say)
    else:  # Storm's solvers assume rewards >= 0: E[sum r] = E[sum r+] - E[sum r-], each checked by Storm
        out = _check_signed(chain, signed, formula, env)
        notes.append(f"reward model '{signed}' has negative rewards: the value is E[positive part] - E[negative "
                     "part], each checked by Storm (its solvers assume non-negative rewards)")
    stalled = 0.0
    if STALLED_LABEL in chain.labels:
        stalled = _stalled_probability(chain, storm_chain, formula, prop, env, options)
    probability = prop.operator == "P"
    out = clipped(out, probability=probability)
    satisfied = None
    if threshold is not None:
        if probability and threshold in (0.0, 1.0) and out.zero is None and out.one is None and not skeleton \
                and signed is None and options.numerics != "fast":
            zero, one = storm_qualitative(storm_chain, formula)
            out = dataclasses.replace(out, zero=zero, one=one)
        satisfied, why = _verdict(out, threshold, comparison, probability, options)
        if why:
            notes.append(why)
    if prop.operator == "R" and math.isinf(out.value):
        notes.append(_infinite_reward(prop, chain, model, storm_chain, env, options, stalled))
    timings["check"] = time.perf_counter() - t
    timings["total"] = model.parse_seconds + time.perf_counter() - t0
    bracketed = options.numerics == "sound" or out.method is not None
    return ExactResult(
        property=property_text, mode=options.mode, strategy=strategy, value=out.value,
        # check() reports bounds only when they bracket the true value (sound solver, certified bracket)
        lower=out.lower if bracketed else None, upper=out.upper if bracketed else None, method=out.method,
        precision_note=out.note,
        guarantee=_guarantee(options), precision=options.precision,
        satisfied=satisfied,
        states=chain.num_states, transitions=n_transitions, choices=None, stalled_probability=stalled,
        timings=timings, settings={**_settings(options, strategy, model), "policy_queries": built.decision_states,
                                   "onthefly_policy_calls": built.onthefly_policy_calls,
                                   "merged_declined": built.merged_declined, "mdp_branches": built.mdp_branches,
                                   "memory_estimates": estimates},
        versions=versions(), model=str(model.path), policy=getattr(policy, "name", type(policy).__name__),
        # per-state values of the model's states (the added `stalled` sink is not one of them)
        state_values=_per_state(out.values[origin >= 0], probability) if options.all_states else None,
        state_valuations=chain.valuations[origin >= 0] if options.all_states else None, variables=chain.variables,
        untaken_choices=untaken,
        warnings=notes + ([untaken_message(untaken, "policy-reachable states")] if untaken else [])
        + ([out.warning] if out.warning else []))


def _per_state(values: np.ndarray, probability: bool) -> np.ndarray:
    """Per-state values as reported: probabilities inside [0, 1] (sums of rounded terms may exceed 1 by an ulp)."""
    return np.clip(values, 0.0, 1.0) if probability else values


def _verdict(out: CheckOutcome, threshold: float, comparison: str, probability: bool,
             options: ExactOptions) -> tuple[bool | None, str | None]:
    """The threshold's verdict from ``out``'s certified bracket and exact graph facts only (see
    :func:`~rlverify.exact.checking.verdict`); an infinite expected reward is exact (graph analysis)."""
    certified = options.numerics == "sound" or (out.method is not None and out.lower is not None)
    lower, upper = (out.lower, out.upper) if certified else (None, None)
    if math.isinf(out.value):
        lower = upper = out.value
    return verdict(threshold, comparison, lower, upper, zero=out.zero, one=out.one, probability=probability)


#: largest MDP whose threshold verdict is decided in exact rational arithmetic when the float bracket cannot decide it
EXACT_TIE_STATES = 50_000


def _exact_verdict(model: SymbolicModel, prop: Property) -> bool | None:
    """The threshold property's truth at the initial state, by Storm in exact rational arithmetic (Pmin/Pmax as
    the property names them, ``P<=b`` over every scheduler): for a value equal to its threshold, which no float
    bracket decides. None if Storm cannot (a reward-bounded or other form its exact engine lacks)."""
    import stormpy

    try:
        exact = stormpy.build_model[stormpy.Rational](model.program, [prop.storm])
        if len(exact.initial_states) != 1:
            return None
        result = stormpy.model_checking(exact, prop.storm, only_initial_states=True)
        return int(exact.initial_states[0]) in set(result.get_truth_values_vector())
    except (RuntimeError, TypeError, AttributeError) as exc:
        log.info("exact tie-break declined: %s", exc)
        return None


def _check_optimum(mdp: ExplicitModel, storm_mdp: Any, formula: Any, optimum: str, env: Any, options: ExactOptions,
                   say: Progress, probability: bool) -> CheckOutcome:
    """Pmin or Pmax (Rmin/Rmax) of the MDP at its initial state: step-bounded reachability by
    :func:`~rlverify.exact.checking.bounded_until` on the MDP's arrays (certified bracket, exact graph facts, early
    stop at a fixed point), else Storm's (its sound bounds; graph facts from Storm's qualitative check)."""
    sets = step_bounded_sets(storm_mdp, formula) if options.numerics in ("sound", "direct") else None
    if sets is not None:
        phi, psi, k = sets
        out = bounded_until(mdp.transitions, phi, psi, k, int(storm_mdp.initial_states[0]), row_groups=mdp.row_groups,
                            optimum=optimum, precision=options.precision, max_work=options.max_work, progress=say)
    else:
        out = check(storm_mdp, formula, env, numerics=options.numerics, precision=options.precision,
                    max_work=options.max_work)
        if probability and options.numerics != "fast":
            zero, one = storm_qualitative(storm_mdp, formula)
            out = dataclasses.replace(out, zero=zero, one=one)
            if (zero is False and out.upper is not None and out.upper <= 0) or \
                    (one is False and out.lower is not None and out.lower >= 1):
                # Storm's bounds collapsed onto 0 or 1 where the graph analysis proves the value is not: underflow
                out = dataclasses.replace(out, lower=None, upper=None, warning=(
                    f"P{optimum}: Storm's solver returned {out.value:g}, but the graph analysis shows the value is "
                    f"{'positive' if zero is False else 'below 1'} (the difference is below the float range): no "
                    "certified bracket is known"))
    return clipped(out, probability=probability)


def _infinite_reward(prop: Property, chain: ExplicitModel, model: SymbolicModel, storm_chain: Any, env: Any,
                     options: ExactOptions, stalled: float) -> str:
    """Why an expected reward is infinite: the probability that the target is missed (the reward accumulates
    until the target; a run that never reaches it accumulates forever, so the expectation is infinite by
    definition, whatever the rewards)."""
    target = prop.right
    miss = "a positive probability"
    if target and prop.path == "F":
        try:
            reach_prop = parse_property(model, f"P=? [F ({target})]")
            reach = clipped(check(storm_chain, quantitative(on_chain(reach_prop, chain, model))[0], env,
                                  matrix=chain.transitions, numerics=options.numerics, precision=options.precision),
                            probability=True)
            if reach.lower is not None and reach.upper is not None:
                miss = f"probability {1 - reach.value:.6g} (certified in [{1 - reach.upper:.6g}, {1 - reach.lower:.6g}])"
            else:
                miss = f"probability {1 - reach.value:.6g}"
        except RlverifyError:
            pass
    stall = (f"; the policy stalls with probability {stalled:.6g} (mass on unavailable actions: a stalled run never "
             "reaches the target)") if stalled > 0 else ""
    return (f"the expected reward is infinite by definition: the target {target or ''} is missed with {miss}, and a "
            f"run that never reaches it accumulates reward without end{stall}; R=? [F ...] is finite only when the "
            "target is reached with probability 1 (JSON: \"Infinity\")")


@dataclass
class _PolicyChain:
    """The induced chain and how it was built (see :func:`_policy_chain`); ``origin``: ``(n,)`` int64 state of the
    model each chain state is (-1: the ``stalled`` sink)."""

    chain: ExplicitModel
    origin: np.ndarray
    strategy: str
    decision_states: int
    untaken: dict[str, int]
    start_note: str | None
    merged_declined: str | None = None
    onthefly_policy_calls: int | None = None
    mdp_branches: int | None = None
    build_notes: tuple[str, ...] = ()


def _policy_chain(model: SymbolicModel, prop: Property, policy: Policy, options: ExactOptions, strategy: str,
                  timings: dict[str, float], estimates: dict[str, int], say: Progress) -> _PolicyChain:
    """The chain ``policy`` induces, built by ``strategy`` (``merged``, falling back to ``full`` under ``auto`` for
    what it does not evaluate; ``full``; ``onthefly``). Fills ``timings`` (build, policy, induce) and the
    ``full`` strategy's memory ``estimates``."""
    t = time.perf_counter()
    declined = None
    reward_bounded = is_reward_bounded(prop.storm_formula())
    if strategy == "merged" and reward_bounded:
        if options.strategy == "merged":
            raise ModelError(f"{model.path}: --strategy merged cannot build this model (a reward-bounded property "
                             "needs Storm's reward models); use --strategy full")
        strategy, declined = "full", "a reward-bounded property needs Storm's reward models"
    if strategy == "merged":
        say("exploring the policy's chain (merging its actions as the states are explored)")
        try:
            merged = merged_chain(model, prop, policy, mode=options.mode, unavailable=options.unavailable,
                                  max_states=options.max_states, max_memory=options.max_memory, progress=say)
        except Unsupported as exc:
            if options.strategy == "merged":
                raise ModelError(f"{model.path}: --strategy merged cannot build this model ({exc}); "
                                 "use --strategy full") from None
            strategy, declined = "full", str(exc)
            log.info("strategy merged declined (%s): building the MDP with Storm", exc)
        else:
            timings["policy"] = merged.policy_seconds
            timings["build"] = time.perf_counter() - t - merged.policy_seconds
            timings["induce"] = 0.0
            origin = np.arange(merged.chain.num_states)
            if STALLED_LABEL in merged.chain.labels:
                origin[-1] = -1
            return _PolicyChain(merged.chain, origin, "merged", merged.decision_states, merged.untaken,
                                merged.start_note, mdp_branches=merged.mdp_branches)
    explorer = None
    mask = None
    if strategy == "onthefly":
        say("exploring policy-reachable states with Storm's builder")
        explorer = _MaskedExploration(model, policy, options, progress=say)
        mask = explorer.mask()
    # memory: Storm's MDP is freed once exported (keep_storm=False), the MDP's transition arrays become the
    # chain's (consume=True), and the chain's arrays are dropped once Storm has its copy unless a check needs them
    mdp = build_explicit(model, [prop], max_states=options.max_states, mask=mask,
                         command_names=True if names_commands(policy) else None, keep_storm=False,
                         max_memory=options.max_memory, memory_estimates=estimates)[0]
    timings["build"] = time.perf_counter() - t
    say(f"evaluating the policy on {mdp.num_states} states")
    t = time.perf_counter()
    memory_guard(options.max_memory, "induce", states=mdp.num_states, transitions=mdp.num_transitions,
                 what="MDP transitions", estimates=estimates)
    all_unavailable = explorer.all_unavailable(mdp) if explorer is not None else None
    chain, origin, n_queried, policy_seconds, table = _induce(mdp, policy, options, all_unavailable,
                                                              consume=not reward_bounded,
                                                              split=reward_bounded and bool(mdp.choice_rewards))
    timings["policy"] = policy_seconds
    timings["induce"] = time.perf_counter() - t - policy_seconds
    if prop.path == "I" and prop.reward_model is not None:  # I=k reads state rewards only (PRISM, Storm)
        chain = _state_rewards_only(chain, mdp, origin)
    return _PolicyChain(chain, origin, strategy, n_queried, table.untaken(origin[origin >= 0]),
                        forced_start_message(table, prop.bound), merged_declined=declined,
                        onthefly_policy_calls=None if explorer is None else len(explorer.cache),
                        build_notes=mdp.notes)


def _stalled_probability(chain: ExplicitModel, storm_chain: Any, formula: Any, prop: Property, env: Any,
                         options: ExactOptions) -> float:
    """The probability that a run enters the ``stalled`` sink before the property is decided (README): on the chain
    with every decided state made absorbing (a later stall changes nothing), reach the sink within the property's
    step bound. ``formula``: the property as checked on the chain (its state formulas exclude the sink)."""
    import stormpy

    n = chain.num_states
    undecided, steps = _undecided(storm_chain, formula, prop, n)
    matrix = sp.csr_matrix(chain.transitions)
    frozen = ~undecided
    absorbing = (sp.diags(undecided.astype(np.float64)) @ matrix + sp.diags(frozen.astype(np.float64))).tocsr()
    absorbing.eliminate_zeros()
    text = f'P=? [F<={steps} "{STALLED_LABEL}"]' if steps is not None else f'P=? [F "{STALLED_LABEL}"]'
    stall = stormpy.parse_properties(text)[0].get_raw_formula()
    out = check(storm_chain, stall, env, matrix=absorbing, numerics=options.numerics, precision=options.precision,
                full_model=lambda: to_storm(dataclasses.replace(chain, transitions=absorbing)),
                max_work=options.max_work)
    return clipped(out, probability=True).value


def _undecided(storm_chain: Any, formula: Any, prop: Property, n: int) -> tuple[np.ndarray, int | None]:
    """``(S,)`` bool: the chain's states where ``formula``'s path is not yet decided, and its step bound (None:
    unbounded). ``F phi``: not phi; ``phi U psi`` (bounded or not): phi and not psi; ``G phi``: phi; ``X``, ``C<=k``,
    ``I=k``: every state, 1 or k steps. A form not read here: every state, unbounded (a stall at any time counts)."""
    everything = np.ones(n, dtype=bool)
    sub = formula.subformula
    kind = type(sub).__name__
    try:
        if kind == "EventuallyFormula":
            return ~state_set(storm_chain, sub.subformula), None
        if kind == "UntilFormula":
            return state_set(storm_chain, sub.left_subformula) & ~state_set(storm_chain, sub.right_subformula), None
        if kind == "BoundedUntilFormula":
            k = step_upper_bound(sub)
            if k is not None:
                return state_set(storm_chain, sub.left_subformula) & ~state_set(storm_chain, sub.right_subformula), k
        if kind == "GloballyFormula":
            return state_set(storm_chain, sub.subformula), None
    except PropertyError:  # a nested operator: not a propositional state formula
        return everything, None
    if prop.path == "X":
        return everything, 1
    if prop.path in ("C", "I") and prop.bound is not None:
        return everything, prop.bound
    return everything, None


def on_chain(prop: Property, chain: ExplicitModel, model: SymbolicModel) -> Any:
    """The property to check on the chain: with a ``stalled`` sink, its state formulas exclude the sink.

    The sink has no labels and all-zero variables, so ``!"alive"`` or ``x=0`` would hold there and a
    stalled run would count as reaching the target; a stalled run satisfies no state formula.
    """
    if STALLED_LABEL not in chain.labels or prop.path in ("C", "I"):  # no state formulas: the sink earns nothing
        return prop
    text = excluding_label(prop, STALLED_LABEL)
    if text is None:
        raise PropertyError(f"property '{prop.text}': the policy's mass stalls (unavailable actions), and rlverify "
                            "cannot make the stalled runs satisfy no state formula of this form; use P=? with F, G, "
                            "X, U or W, or --unavailable renormalize")
    import stormpy

    try:
        return stormpy.parse_properties(text, model.program)[0]
    except RuntimeError as exc:
        raise PropertyError(f"property '{prop.text}': on the policy's chain it reads '{text}', which Storm refuses: "
                            f"{storm_message(exc)}") from None


def _state_rewards_only(chain: ExplicitModel, mdp: ExplicitModel, origin: np.ndarray) -> ExplicitModel:
    """The chain with each reward model's state rewards only (the induced chain folds the policy-weighted
    action rewards into its state rewards, which instantaneous rewards ``I=k`` must not see)."""
    rewards = {}
    for name, r in chain.state_rewards.items():
        state = mdp.state_rewards.get(name)
        rewards[name] = np.zeros_like(r) if state is None else np.where(origin >= 0, state[np.maximum(origin, 0)], 0.0)
    return dataclasses.replace(chain, state_rewards=rewards)


def _signed_reward(prop: Property, model: ExplicitModel) -> str | None:
    """The name of the reward model a reward property reads when it has negative entries in ``model``, else None."""
    if prop.reward_model is None:
        return None
    names = sorted(set(model.state_rewards) | set(model.choice_rewards))
    name = prop.reward_model if prop.reward_model else (names[0] if len(names) == 1 else "")
    rewards = [r for r in (model.state_rewards.get(name), model.choice_rewards.get(name)) if r is not None]
    return name if any((r < 0).any() for r in rewards) else None


def _check_signed(chain: ExplicitModel, name: str, formula: Any, env: Any) -> Any:
    """Check a reward formula whose reward model ``name`` has negative state rewards on the chain, as the
    difference of its positive and negative parts (linearity of expectation; both parts must be finite)."""
    r = chain.state_rewards[name]
    parts = []
    for part in (np.maximum(r, 0.0), np.maximum(-r, 0.0)):
        split = dataclasses.replace(chain, state_rewards={**chain.state_rewards, name: part})
        parts.append(check(to_storm(split), formula, env))
    pos, neg = parts
    if math.isinf(pos.value) and math.isinf(neg.value):
        raise PropertyError(f"reward model '{name}': both its positive and its negative part are infinite from the "
                            "initial state (the target is missed with positive probability): the value is undefined")
    lower = pos.lower - neg.upper if pos.lower is not None and neg.upper is not None else None
    upper = pos.upper - neg.lower if pos.upper is not None and neg.lower is not None else None
    with np.errstate(invalid="ignore"):
        values = pos.values - neg.values
    return CheckOutcome(value=pos.value - neg.value, lower=lower, upper=upper, values=values)


def induce(mdp: ExplicitModel, policy: Policy, *, mode: str = "stochastic", unavailable: str = "stall") -> tuple[ExplicitModel, np.ndarray]:
    """The reachable chain ``policy`` induces on an explicit MDP (policy evaluated in one batch)."""
    chain, origin, _, _, _ = _induce(mdp, policy, ExactOptions(mode=mode, unavailable=unavailable))
    return chain, origin


def names_commands(policy: Policy) -> bool:
    """Whether ``policy`` names some of its actions by command (``m:2``) rather than by label."""
    return any(is_command_name(a) for a in policy.actions)


def _induce(mdp: ExplicitModel, policy: Policy, options: ExactOptions, all_unavailable: np.ndarray | None = None,
            consume: bool = False, split: bool = False) -> tuple[ExplicitModel, np.ndarray, int, float, ChoiceTable]:
    """The chain ``policy`` induces on ``mdp`` (see :func:`~rlverify.exact.induced.induced_chain`); ``split``: with a
    state per taken choice (:func:`_split_chain`), for reward-bounded properties."""
    table = choice_table(mdp, policy.actions)  # refuses choices no policy can pick before the policy is asked
    states = np.flatnonzero(table.decision)
    features = mdp.feature_matrix(policy.features, states)
    t = time.perf_counter()
    probs = policy.action_probabilities(features) if len(states) else np.zeros((0, len(policy.actions)))
    policy_seconds = time.perf_counter() - t
    probs = np.asarray(probs, dtype=np.float64)
    validate_probabilities(probs, len(states), len(policy.actions), source=getattr(policy, "name", "policy"))
    cw = choice_weights(mdp, policy, probs, states, mode=options.mode, unavailable=options.unavailable, defer=True,
                        all_unavailable=all_unavailable, table=table)
    if split:
        chain, origin = _split_chain(mdp, cw)
    else:
        chain, origin = induced_chain(mdp, cw, consume=consume)
    return chain, origin, len(states), policy_seconds, table


def _split_chain(mdp: ExplicitModel, cw: ChoiceWeights) -> tuple[ExplicitModel, np.ndarray]:
    """The induced chain with a state per taken choice: ``s -> (s, c)`` with probability ``pi(c|s)``, then
    ``(s, c) -> s'`` with ``T(s, c, s')``; ``(s, c)`` copies ``s``'s labels and valuation and earns ``c``'s action
    reward as its state reward (``s`` keeps its state reward).

    The usual chain folds action rewards into ``sum_c pi(c|s) r(s, c)``, exact for expected rewards but not for
    the reward a path accumulates, which a reward-bounded property (``F{"r"}<=5``) reads: it depends on the action
    actually taken. A path ``s, (s, c), s'`` earns ``r(s) + r(s, c)`` as in the MDP, and ``(s, c)`` satisfies a
    state formula iff ``s`` does, so unbounded and reward-bounded until keep their meaning (step counts double:
    not for step-bounded properties). ``origin``: the MDP state of each chain state (-1: the ``stalled`` sink,
    -2: a choice state).
    """
    S, C = mdp.num_states, mdp.num_choices
    T = mdp.transitions.tocsr()
    cs = mdp.choice_states()
    row_groups = np.r_[mdp.row_groups, mdp.row_groups[-1] + np.arange(1, C + 1)].astype(np.int64)
    to_choice = sp.csr_matrix((np.ones(C), (np.arange(C), S + np.arange(C))), shape=(C, S + C))
    transitions = sp.vstack([to_choice, sp.hstack([T, sp.csr_matrix((C, C))])], format="csr")
    rewards = {}
    for name in set(mdp.state_rewards) | set(mdp.choice_rewards):
        state = mdp.state_rewards.get(name, np.zeros(S))
        rewards[name] = np.r_[state, mdp.choice_rewards.get(name, np.zeros(C))]
    vbytes = None if mdp.valuation_bytes is None else np.vstack([mdp.valuation_bytes, mdp.valuation_bytes[cs]])
    fake = ExplicitModel(
        model_type="mdp", row_groups=row_groups, transitions=transitions,
        choice_actions=np.r_[mdp.choice_actions, np.zeros(C, dtype=np.int32)].astype(np.int32),
        action_names=mdp.action_names, variables=mdp.variables, valuations=np.vstack([mdp.valuations, mdp.valuations[cs]]),
        initial_states=mdp.initial_states, labels={k: np.r_[m, m[cs]] for k, m in mdp.labels.items()},
        label_aliases=dict(mdp.label_aliases), state_rewards=rewards, choice_rewards={}, valuation_bytes=vbytes,
        valuation_spec=mdp.valuation_spec)
    weights = ChoiceWeights(weights=np.r_[cw.weights, np.ones(C)], stalled=np.r_[cw.stalled, np.zeros(C)],
                            decision_states=cw.decision_states)
    chain, origin = induced_chain(fake, weights)
    origin = np.where(origin >= S, -2, origin)
    return chain, origin


class _MaskedExploration:
    """A Storm action mask keeping the actions the policy may take; one cached policy call per state.

    It also remembers states where every available action was masked out (the policy gives them
    probability 0), which Storm then treats as deadlocks: their mass is stalled, as with ``full``.
    """

    def __init__(self, model: SymbolicModel, policy: Policy, options: ExactOptions,
                 progress: Progress | None = None) -> None:
        self.model, self.policy, self.options = model, policy, options
        self.progress = progress
        manager = model.program.expression_manager
        self.variables = [manager.get_variable(f) for f in policy.features]
        self.is_bool = [f in model.boolean_variables for f in policy.features]
        self.action_col = {a: i for i, a in enumerate(policy.actions)}
        self.cache: dict[tuple, np.ndarray] = {}
        self.names: dict[int, str] = {}
        # prune by label only where that cannot change what is verified: a label does not say which command a
        # choice is (choices named by command are weighed when induced), and removing the labelled choices of a
        # state that also offers an unlabelled command would leave that command to be taken without asking
        self.prune = not names_commands(policy) and all(c.action for c in model.commands)

    def mask(self) -> Any:
        import stormpy.developer as dev

        return dev.StateValuationFunctionMask[float](self._allowed)

    def _allowed(self, valuation: Any, action_index: int) -> bool:
        key = tuple(int(valuation.get_boolean_value(v)) if b else valuation.get_integer_value(v)
                    for v, b in zip(self.variables, self.is_bool))
        keep = self.cache.get(key)
        if keep is None:
            p = np.asarray(self.policy.action_probabilities(np.asarray([key], dtype=np.float64)), dtype=np.float64)[0]
            if self.options.mode == "deterministic":
                keep = np.zeros(len(p), dtype=bool)
                keep[int(np.argmax(p))] = True
            else:
                keep = p > 0
            self.cache[key] = keep
            if self.progress is not None and len(self.cache) % 10_000 == 0:
                self.progress(f"exploring policy-reachable states with Storm's builder: {len(self.cache):,} so far")
        name = self.names.get(action_index)
        if name is None:
            name = self.names[action_index] = self.model.program.get_action_name(action_index)
        col = self.action_col.get(name)
        if col is None or not self.prune:  # as with 'full': such choices are weighed (or refused) when the chain is induced
            return True
        # deterministic + renormalize needs every available action to find the best available one
        return bool(keep[col]) or (self.options.mode == "deterministic" and self.options.unavailable == "renormalize")

    def all_unavailable(self, mdp: ExplicitModel) -> np.ndarray:
        """``(S,)`` bool: deadlocks of the masked model that have available actions in the real one.

        The mask removed them all (probability 0), so all the policy's mass is on unavailable actions.
        Few states; their guards are evaluated on their valuations.
        """
        out = np.zeros(mdp.num_states, dtype=bool)
        dead = mdp.labels.get("deadlock")
        if dead is None or not dead.any():
            return out
        for i in np.flatnonzero(dead):
            out[i] = bool(available_actions(self.model, mdp.valuation_dict(int(i))))
        return out


def available_actions(model: SymbolicModel, valuation: dict[str, int]) -> set[str]:
    """Action labels enabled in a state of a PRISM program (synchronisation respected; "" = unlabelled)."""
    program = model.program.substitute_constants()  # Storm crashes evaluating undefined identifiers
    manager = program.expression_manager
    subst = {}
    for name, value in valuation.items():
        if manager.has_variable(name):
            var = manager.get_variable(name)
            subst[var] = manager.boolean(bool(value)) if name in model.boolean_variables else manager.integer(int(value))
    enabled: dict[str, bool] = {}
    unlabelled = False
    for module in program.modules:
        here: dict[str, bool] = {}
        for command in module.commands:
            on = command.guard_expression.substitute(subst).evaluate_as_bool()
            if not command.action_name:
                unlabelled |= on
            else:
                here[command.action_name] = here.get(command.action_name, False) or on
        for a, on in here.items():
            enabled[a] = enabled.get(a, True) and on
    return {a for a, on in enabled.items() if on} | ({""} if unlabelled else set())


def _choose_strategy(model: SymbolicModel, options: ExactOptions) -> str:
    if options.mode == "monolithic":
        if options.strategy in ("onthefly", "merged"):
            raise PropertyError(f"--strategy {options.strategy} needs a policy; monolithic mode builds the full MDP")
        return "full"
    if options.strategy != "auto":
        if options.strategy in ("onthefly", "merged") and model.kind != "prism":
            raise PropertyError(f"--strategy {options.strategy} is available for PRISM models (JANI: use full)")
        return options.strategy
    if model.kind == "prism":  # merged falls back to full for what it does not evaluate (reward properties, say)
        return "merged"
    return "full"


def _check_operator(prop: Property, mode: str, text: str) -> None:
    formula = prop.storm_formula()
    if not (formula.is_probability_operator_formula or formula.is_reward_operator_formula):
        raise PropertyError(f"property '{text}': expected a P or R operator (P=? [...], R{{\"r\"}}=? [...])")
    if prop.operator == "R" and prop.path == "F" and prop.bound is not None:
        raise PropertyError(f"property '{text}': a step-bounded reachability reward (R=? [F<=k ...]) is not supported "
                            "(Storm does not check it); use the cumulative reward R=? [C<=k] for the first k steps")
    if mode != "monolithic" and formula.has_optimality_type:
        raise PropertyError(f"property '{text}': Pmin/Pmax/Rmin/Rmax need --mode monolithic; "
                            "on the policy's chain use P=? or R=?")


def _guarantee(options: ExactOptions) -> str:
    return {"sound": "sound", "direct": "direct", "fast": "unsound"}[options.numerics]


def _settings(options: ExactOptions, strategy: str, model: SymbolicModel) -> dict[str, Any]:
    d = asdict(options)
    d["strategy"] = strategy
    d["constants"] = model.constants
    return d
