"""The exact engine: verify a policy on a PRISM/JANI MDP with Storm.

:func:`verify_exact` reads the chain the policy induces (:func:`~rlverify.exact.chain.policy_chain`, built here
unless given) and checks the property on it; in monolithic mode it reports the optimum over all schedulers
(:func:`~rlverify.exact.optimum.optimum`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rlverify.choices import BackendKind, Mode, Numerics
from rlverify.errors import OptionError, PolicyError, PropertyError, RlverifyError
from rlverify.exact.bounded import Matrix, bounded_until, on_disk
from rlverify.exact.chain import SHRINK, PolicyChain, chain_for, on_chain
from rlverify.exact.checking import check, solved_here, step_bounded_sets, until_sets
from rlverify.exact.formulas import PathKind, StormFormula, path_kind, quantitative, step_upper_bound
from rlverify.exact.induced import STALLED_LABEL
from rlverify.exact.ondisk import RowBlocks, unbounded_until
from rlverify.exact.optimum import as_exact_result, certified_verdict, optimum, per_state, signed_reward
from rlverify.exact.options import ExactOptions, Progress, check_operator, check_resolved, guarantee, provenance, settings
from rlverify.exact.outcome import CheckOutcome, clipped
from rlverify.exact.storm_check import StormEnvironment, StormModel, state_set, storm_qualitative
from rlverify.models.dynamics import untaken_message
from rlverify.models.explicit import ExplicitModel, memory_guard, out_of_memory, to_storm
from rlverify.models.numerics import environment
from rlverify.models.properties import Property
from rlverify.models.property_parser import parse_property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.results import ExactResult

log = logging.getLogger(__name__)

__all__ = ["ExactOptions", "verify_exact"]


def verify_exact(
    model: SymbolicModel,
    prop: Property,
    policy: Policy | None = None,
    options: ExactOptions | None = None,
    *,
    chain: PolicyChain | None = None,
    progress: Progress | None = None,
) -> ExactResult:
    """Check a property on the chain ``policy`` induces on ``model`` (or Pmin/Pmax in monolithic mode).

    Args:
        model: a loaded PRISM/JANI model (:func:`rlverify.load_model`, or :func:`rlverify.resolve.resolve`).
        prop: its parsed property (:func:`rlverify.parse_property`; with a policy, ``fixed_policy=True``).
        policy: any :class:`~rlverify.policies.Policy` (None in monolithic mode).
        options: :class:`~rlverify.exact.ExactOptions` (None: the defaults).
        chain: the policy's chain when already built (:func:`~rlverify.exact.chain.policy_chain` for ``prop`` in
            the same mode); else it is built here. Its build phases are reported as measured when it was built.

    Returns an :class:`~rlverify.results.ExactResult` whose ``value`` is the property's value at
    the initial state. Raises :class:`~rlverify.errors.RlverifyError` subclasses for bad input, and
    :class:`~rlverify.errors.MemoryBudgetError` when memory runs out (estimated before a phase, or a
    ``MemoryError`` during one).
    """
    options = ExactOptions() if options is None else options
    try:
        if options.mode is Mode.MONOLITHIC:
            return _monolithic(model, prop, policy, options, chain, progress)
        return _on_chain(model, prop, policy, options, chain, progress or (lambda msg: None))
    except MemoryError:
        raise out_of_memory("exact verification", SHRINK) from None


def _monolithic(
    model: SymbolicModel,
    prop: Property,
    policy: Policy | None,
    options: ExactOptions,
    chain: PolicyChain | None,
    progress: Progress | None,
) -> ExactResult:
    """Monolithic mode: the optimum over all schedulers, reported as ``verify --mode monolithic`` reports it."""
    options.validate()
    if chain is not None:
        raise OptionError("monolithic mode checks the full MDP: it reads no policy's chain")
    if options.chain_dir is not None:
        raise OptionError("--chain-dir holds a policy's chain: monolithic mode checks the full MDP in memory")
    if policy is not None:
        log.info("monolithic mode ignores the policy")
    return as_exact_result(optimum(model, prop, options, progress=progress))


@dataclass(frozen=True)
class _Checked:
    """The property checked on a chain: the outcome at the initial state, the stalled probability, the threshold's
    verdict, the notes (warnings) gathered on the way and the phases' memory estimates."""

    out: CheckOutcome
    stalled: float
    satisfied: bool | None
    notes: list[str]
    estimates: dict[str, int]


@dataclass(frozen=True)
class _StormChain:
    """Storm's copy of the chain: the full chain, or (``skeleton``) its states, labels and valuations with
    self-loops for transitions when the chain's matrix is solved here; ``full`` then builds the full one."""

    chain: StormModel
    full: Callable[[], StormModel] | None = None
    skeleton: bool = False


def _on_chain(
    model: SymbolicModel,
    prop: Property,
    policy: Policy | None,
    options: ExactOptions,
    given: PolicyChain | None,
    say: Progress,
) -> ExactResult:
    """A policy's mode: the chain (built here unless given), then the property checked on it."""
    check_resolved(model, prop)
    options.validate()
    if policy is None:
        raise PolicyError(f"mode '{options.mode}' needs a policy (--policy); use --mode monolithic for Pmin/Pmax")
    if given is not None:
        check_operator(prop, options.mode)
    built = chain_for(model, prop, policy, options, given, progress=say)
    if options.export is not None:  # the chain as checked, written before the check (a refused check still has it)
        from rlverify.exact.export import export_chain  # lazy: only with --export (Storm's DRN writer)

        export_chain(built.chain, options.export, force=options.export_force)
    t = time.perf_counter()
    checked = _check_chain(model, prop, built, options, say)
    return _result(model, prop, policy, options, built, checked, time.perf_counter() - t)


def _check_chain(model: SymbolicModel, prop: Property, built: PolicyChain, options: ExactOptions, say: Progress) -> _Checked:
    """Check ``prop`` on the chain (:mod:`rlverify.exact.checking`): its value, the probability of stalling before
    the property is decided, and a threshold's verdict from the certified bracket and exact graph facts only."""
    chain = built.chain
    say(f"checking on the induced chain ({chain.num_states} states, {chain.num_transitions} transitions)")
    formula, threshold, comparison = quantitative(on_chain(prop, chain, model))
    notes = list(prop.notes) + list(built.build_notes) + [n for n in [built.start_note] if n]
    estimates = dict(built.memory_estimates)
    env = environment(options.numerics, options.precision)
    signed = signed_reward(prop, chain)
    rows_on_disk = on_disk(chain.transitions)
    _refuse_stalls_on_disk(chain, rows_on_disk)
    storm, chain = _storm_chain(prop, chain, formula, signed, options, estimates)
    out = _value(storm, chain, formula, env, signed, rows_on_disk, options, notes, say)
    stalled = 0.0
    if STALLED_LABEL in chain.labels:
        stalled = _stalled_probability(chain, storm.chain, formula, prop, env, options)
    probability = prop.operator == "P"
    out = clipped(out, probability=probability)
    satisfied = None
    if threshold is not None:
        assert comparison is not None
        qualitative = _qualitative_threshold(threshold, probability, storm, signed)
        out, satisfied = _decide(out, storm.chain, formula, threshold, comparison, probability, qualitative, options, notes)
    if prop.operator == "R" and math.isinf(out.value):
        notes.append(_infinite_reward(prop, chain, model, storm.chain, env, options, stalled))
    return _Checked(out=out, stalled=stalled, satisfied=satisfied, notes=notes, estimates=estimates)


def _refuse_stalls_on_disk(chain: ExplicitModel, rows_on_disk: bool) -> None:
    """The probability of stalling is computed on a chain in memory only."""
    if rows_on_disk and STALLED_LABEL in chain.labels:
        raise PropertyError(
            "--chain-dir: the policy's mass stalls (unavailable actions) and the probability of stalling is computed "
            "on a chain in memory only; use --unavailable renormalize, or verify without --chain-dir"
        )


def _qualitative_threshold(threshold: float, probability: bool, storm: _StormChain, signed: str | None) -> bool:
    """Whether a threshold 0 or 1 may be decided by Storm's graph analysis on its copy of the chain."""
    return probability and threshold in (0.0, 1.0) and not storm.skeleton and signed is None


def _value(
    storm: _StormChain,
    chain: ExplicitModel,
    formula: StormFormula,
    env: StormEnvironment,
    signed: str | None,
    rows_on_disk: bool,
    options: ExactOptions,
    notes: list[str],
    say: Progress,
) -> CheckOutcome:
    """The property's value on the chain: over its rows on disk, split by the sign of its rewards, or by :func:`check`."""
    if rows_on_disk:
        return _check_on_disk(storm.chain, formula, chain.transitions, options, say)
    if signed is not None:  # Storm's solvers assume rewards >= 0: E[sum r] = E[sum r+] - E[sum r-], each checked by Storm
        out = _check_signed(chain, signed, formula, env)
        notes.append(
            f"reward model '{signed}' has negative rewards: the value is E[positive part] - E[negative "
            "part], each checked by Storm (its solvers assume non-negative rewards)"
        )
        return out
    return check(
        storm.chain,
        formula,
        env,
        matrix=chain.transitions,
        numerics=options.numerics,
        precision=options.precision,
        full_model=storm.full,
        max_work=options.max_work,
        progress=say,
    )


def _check_on_disk(
    storm_chain: StormModel, formula: StormFormula, blocks: RowBlocks, options: ExactOptions, say: Progress
) -> CheckOutcome:
    """Reachability on a chain on disk, over its row blocks (the state formulas evaluated by Storm on the chain's
    states, labels and valuations): step-bounded by :func:`~rlverify.exact.bounded.bounded_until`, as in memory but
    without the unbounded value as an early stop; unbounded by :func:`~rlverify.exact.ondisk.unbounded_until`
    (graph analysis by passes over the blocks, then interval iteration)."""
    bounded = step_bounded_sets(storm_chain, formula)
    unbounded = None if bounded is not None else until_sets(storm_chain, formula)
    if bounded is None and unbounded is None:  # refused before the build (chain.check_on_disk)
        raise PropertyError(f"--chain-dir: '{formula}' is not reachability (F, U, F<=k, U<=k) over state formulas")
    init = storm_chain.initial_states
    if len(init) != 1:
        raise PropertyError(f"the model has {len(init)} initial states; rlverify reports the value of a single one")
    s, precision, max_work = int(init[0]), options.precision, options.max_work

    def run(matrix: Matrix) -> CheckOutcome:
        if bounded is not None:
            phi, psi, k = bounded
            return bounded_until(matrix, phi, psi, k, s, precision=precision, max_work=max_work, progress=say)
        assert unbounded is not None
        return unbounded_until(matrix, *unbounded, s, precision=precision, max_work=max_work, progress=say)

    if options.backend is None or options.backend.kind != BackendKind.RAY:
        return run(blocks)
    from rlverify.exact.partition import RayRows  # lazy: only with --backend ray

    say(f"loading the chain's rows into Ray actors ({blocks.nnz:,} transitions)")
    rows = RayRows(blocks, options.backend, options.partitions)
    try:
        return run(rows)
    finally:
        rows.close()


def _storm_chain(
    prop: Property,
    chain: ExplicitModel,
    formula: StormFormula,
    signed: str | None,
    options: ExactOptions,
    estimates: dict[str, int],
) -> tuple[_StormChain, ExplicitModel]:
    """Storm's copy of the chain, and the chain with its transition arrays kept only where a check needs them.

    Reachability (bounded or not) is solved on the chain's matrix (checking.py): Storm then only evaluates the
    state formulas, on a chain with the states, labels and valuations but self-loops for transitions (the full
    chain is given to Storm if a solver declines). The signed-reward split rebuilds the chain. Otherwise Storm
    checks the chain alone, and the arrays are not needed once it has its copy.
    """
    ours = solved_here(formula, options.numerics)
    keep = signed is not None or ours or STALLED_LABEL in chain.labels
    skeleton = ours and signed is None
    # step-bounded on our side: a few vectors per state; else Storm's copy of the chain (or the LU's rows and fill-in)
    memory_guard(
        options.max_memory,
        "check",
        states=chain.num_states,
        transitions=0 if skeleton and (prop.bound is not None or on_disk(chain.transitions)) else chain.num_transitions,
        what="chain transitions",
        estimates=estimates,
    )
    if skeleton:
        loops = dataclasses.replace(chain, transitions=sp.identity(chain.num_states, format="csr"))
        storm = _StormChain(chain=to_storm(loops), full=functools.partial(to_storm, chain), skeleton=True)
    else:
        storm = _StormChain(chain=to_storm(chain))
    return storm, dataclasses.replace(chain, transitions=chain.transitions if keep else None)


def _decide(
    out: CheckOutcome,
    storm_chain: StormModel,
    formula: StormFormula,
    threshold: float,
    comparison: str,
    probability: bool,
    qualitative: bool,
    options: ExactOptions,
    notes: list[str],
) -> tuple[CheckOutcome, bool | None]:
    """A threshold's verdict (its reason appended to ``notes`` when undecided); ``qualitative``: a threshold 0 or 1
    may be decided by Storm's graph analysis where the check made none."""
    if qualitative and out.zero is None and out.one is None and options.numerics is not Numerics.FAST:
        zero, one = storm_qualitative(storm_chain, formula)
        out = dataclasses.replace(out, zero=zero, one=one)
    satisfied, why = certified_verdict(out, threshold, comparison, probability, options.numerics)
    if why:
        notes.append(why)
    return out, satisfied


def _result(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExactOptions,
    built: PolicyChain,
    checked: _Checked,
    check_seconds: float,
) -> ExactResult:
    """The :class:`~rlverify.results.ExactResult` of a policy's chain (timings: the chain's phases, then the check)."""
    out, chain, origin = checked.out, built.chain, built.origin
    probability = prop.operator == "P"
    timings = {"parse": model.parse_seconds, **built.timings, "check": check_seconds}
    timings["total"] = sum(timings.values())
    bracketed = options.numerics is Numerics.SOUND or out.method is not None
    untaken = built.untaken
    return ExactResult(
        mode=options.mode,
        strategy=built.strategy,
        value=out.value,
        # check() reports bounds only when they bracket the true value (sound solver, certified bracket)
        lower=out.lower if bracketed else None,
        upper=out.upper if bracketed else None,
        method=out.method,
        precision_note=out.note,
        guarantee=guarantee(options.numerics),
        precision=options.precision,
        satisfied=checked.satisfied,
        states=chain.num_states,
        transitions=chain.num_transitions,
        choices=None,
        stalled_probability=checked.stalled,
        # per-state values of the model's states (the added `stalled` sink is not one of them)
        state_values=per_state(out.values[origin >= 0], probability) if options.all_states else None,
        state_valuations=chain.valuations[origin >= 0] if options.all_states else None,
        variables=chain.variables,
        untaken_choices=untaken,
        provenance=provenance(
            model,
            prop,
            policy,
            timings=timings,
            settings={
                **settings(options, built.strategy, model),
                "policy_queries": built.decision_states,
                "onthefly_policy_calls": built.policy_calls,
                "merged_declined": built.merged_declined,
                "mdp_branches": built.mdp_branches,
                "memory_estimates": checked.estimates,
            },
            warnings=checked.notes
            + ([untaken_message(untaken, "policy-reachable states")] if untaken else [])
            + ([out.warning] if out.warning else []),
        ),
    )


def _infinite_reward(
    prop: Property,
    chain: ExplicitModel,
    model: SymbolicModel,
    storm_chain: StormModel,
    env: StormEnvironment,
    options: ExactOptions,
    stalled: float,
) -> str:
    """Why an expected reward is infinite: the probability that the target is missed (the reward accumulates
    until the target; a run that never reaches it accumulates forever, so the expectation is infinite by
    definition, whatever the rewards)."""
    target = prop.right
    miss = "a positive probability"
    if target and prop.path == "F":
        try:
            reach_prop = parse_property(model, f"P=? [F ({target})]")
            reach = clipped(
                check(
                    storm_chain,
                    quantitative(on_chain(reach_prop, chain, model))[0],
                    env,
                    matrix=chain.transitions,
                    numerics=options.numerics,
                    precision=options.precision,
                ),
                probability=True,
            )
            if reach.lower is not None and reach.upper is not None:
                miss = f"probability {1 - reach.value:.6g} (certified in [{1 - reach.upper:.6g}, {1 - reach.lower:.6g}])"
            else:
                miss = f"probability {1 - reach.value:.6g}"
        except RlverifyError:
            pass
    stall = (
        (
            f"; the policy stalls with probability {stalled:.6g} (mass on unavailable actions: a stalled run never "
            "reaches the target)"
        )
        if stalled > 0
        else ""
    )
    return (
        f"the expected reward is infinite by definition: the target {target or ''} is missed with {miss}, and a "
        f"run that never reaches it accumulates reward without end{stall}; R=? [F ...] is finite only when the "
        'target is reached with probability 1 (JSON: "Infinity")'
    )


def _stalled_probability(
    chain: ExplicitModel,
    storm_chain: StormModel,
    formula: StormFormula,
    prop: Property,
    env: StormEnvironment,
    options: ExactOptions,
) -> float:
    """The probability that a run enters the ``stalled`` sink before the property is decided (README): on the chain
    with every decided state made absorbing (a later stall changes nothing), reach the sink within the property's
    step bound. ``formula``: the property as checked on the chain (its state formulas exclude the sink)."""
    import stormpy  # lazy: stormpy, start-up

    n = chain.num_states
    undecided, steps = _undecided(storm_chain, formula, prop, n)
    matrix = sp.csr_matrix(chain.transitions)
    frozen = ~undecided
    absorbing = (sp.diags(undecided.astype(np.float64)) @ matrix + sp.diags(frozen.astype(np.float64))).tocsr()
    absorbing.eliminate_zeros()
    text = f'P=? [F<={steps} "{STALLED_LABEL}"]' if steps is not None else f'P=? [F "{STALLED_LABEL}"]'
    stall = stormpy.parse_properties(text)[0].get_raw_formula()
    out = check(
        storm_chain,
        stall,
        env,
        matrix=absorbing,
        numerics=options.numerics,
        precision=options.precision,
        full_model=lambda: to_storm(dataclasses.replace(chain, transitions=absorbing)),
        max_work=options.max_work,
    )
    return clipped(out, probability=True).value


def _undecided(storm_chain: StormModel, formula: StormFormula, prop: Property, n: int) -> tuple[np.ndarray, int | None]:
    """``(S,)`` bool: the chain's states where ``formula``'s path is not yet decided, and its step bound (None:
    unbounded). ``F phi``: not phi; ``phi U psi`` (bounded or not): phi and not psi; ``G phi``: phi; ``X``, ``C<=k``,
    ``I=k``: every state, 1 or k steps. A form not read here: every state, unbounded (a stall at any time counts)."""
    path = formula.subformula
    try:
        found = _path_undecided(storm_chain, path)
    except PropertyError:  # a nested operator: not a propositional state formula
        return np.ones(n, dtype=bool), None
    if found is not None:
        return found
    if prop.path == "X":
        return np.ones(n, dtype=bool), 1
    if prop.path in ("C", "I") and prop.bound is not None:
        return np.ones(n, dtype=bool), prop.bound
    return np.ones(n, dtype=bool), None


def _path_undecided(storm_chain: StormModel, path: StormFormula) -> tuple[np.ndarray, int | None] | None:
    """:func:`_undecided` of the forms read from their state formulas (``F``, ``U``, ``U<=k``, ``G``), else None."""
    match path_kind(path):
        case PathKind.EVENTUALLY:
            return ~state_set(storm_chain, path.subformula), None
        case PathKind.UNTIL:
            return state_set(storm_chain, path.left_subformula) & ~state_set(storm_chain, path.right_subformula), None
        case PathKind.BOUNDED_UNTIL if (k := step_upper_bound(path)) is not None:
            return state_set(storm_chain, path.left_subformula) & ~state_set(storm_chain, path.right_subformula), k
        case PathKind.GLOBALLY:
            return state_set(storm_chain, path.subformula), None
    return None


def _check_signed(chain: ExplicitModel, name: str, formula: StormFormula, env: StormEnvironment) -> CheckOutcome:
    """Check a reward formula whose reward model ``name`` has negative state rewards on the chain, as the
    difference of its positive and negative parts (linearity of expectation; both parts must be finite)."""
    r = chain.state_rewards[name]
    parts = []
    for part in (np.maximum(r, 0.0), np.maximum(-r, 0.0)):
        split = dataclasses.replace(chain, state_rewards={**chain.state_rewards, name: part})
        parts.append(check(to_storm(split), formula, env))
    pos, neg = parts
    if math.isinf(pos.value) and math.isinf(neg.value):
        raise PropertyError(
            f"reward model '{name}': both its positive and its negative part are infinite from the "
            "initial state (the target is missed with positive probability): the value is undefined"
        )
    lower = pos.lower - neg.upper if pos.lower is not None and neg.upper is not None else None
    upper = pos.upper - neg.lower if pos.upper is not None and neg.lower is not None else None
    with np.errstate(invalid="ignore"):
        values = pos.values - neg.values
    return CheckOutcome(value=pos.value - neg.value, lower=lower, upper=upper, values=values)
