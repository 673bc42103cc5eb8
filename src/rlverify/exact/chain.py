"""The Markov chain a policy induces on a PRISM/JANI model, built once; every exact analysis of a policy reads it.

:func:`policy_chain` asks the policy on the model's decision states, validates its distributions, weighs the
choices (:func:`~rlverify.exact.induced.weigh`) and keeps the reachable induced chain, by one of three
strategies (:class:`~rlverify.exact.ExactOptions`): ``merged`` (the chain explored in numpy batches, never the
MDP: :mod:`rlverify.exact.merged`), ``full`` (Storm builds the property-directed MDP) or ``onthefly`` (Storm's
builder explores policy-reachable states only). The result, a :class:`PolicyChain`, is what
:func:`~rlverify.exact.verify_exact`, :func:`~rlverify.exact.explain_paths`, :func:`~rlverify.exact.risk_map`,
:func:`~rlverify.exact.robustness` and :func:`~rlverify.exact.model_error_bounds` read: build it once and hand it
to each (``chain=``). :func:`full_mdp` builds the property-directed MDP once (:class:`FullMDP`) for the analyses
that range over all its states (the optimum, the adversarial MDP, the description of failure paths).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from rlverify.errors import ModelError, OptionError, PolicyError, PropertyError, RlverifyError
from rlverify.exact.checking import is_reward_bounded, solved_here
from rlverify.exact.induced import STALLED_LABEL, ChoiceWeights, induced_chain, weigh
from rlverify.exact.options import ExactOptions, Progress, check_operator, check_resolved
from rlverify.models.commands import is_command_name
from rlverify.models.dynamics import ChoiceTable, forced_start_message
from rlverify.models.explicit import ExplicitModel, memory_guard, out_of_memory
from rlverify.models.properties import Property, excluding_label
from rlverify.models.storm import storm_log_off, storm_message
from rlverify.models.storm_build import build_explicit
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.policies.check import check_policy

if TYPE_CHECKING:
    from rlverify.exact.merged import MergedChain, StormProbe

log = logging.getLogger(__name__)

#: what makes a chain or an MDP smaller (the advice of an out-of-memory error)
SHRINK = (
    "verify a smaller model (constants), lower --max-states, use --mode deterministic (fewer transitions), or "
    "set --max-memory below the machine's memory so that phases are refused from their estimates before they start"
)


@dataclass(frozen=True)
class FullMDP:
    """The property-directed MDP of a model, built once by Storm (:func:`full_mdp`).

    Attributes:
        mdp: the explicit MDP: every reachable state (states that decide the property are terminal, as in Storm's
            property-directed build), every choice named by command where a policy needs it.
        storm: Storm's model of it (for Storm's own checks).
        property: the text of the property it was built for.
        seconds: the build's time.
    """

    mdp: ExplicitModel
    storm: Any
    property: str
    seconds: float = 0.0


@dataclass(frozen=True)
class PolicyChain:
    """The Markov chain a policy induces on a model, and how it was built (:func:`policy_chain`).

    Attributes:
        chain: the reachable induced DTMC (a ``stalled`` sink last when stalled mass is reachable).
        origin: ``(n,)`` int64, the model state each chain state is: the MDP's state index (strategies ``full``
            and ``onthefly``) or the exploration's (``merged``, whose chain states are the model states it
            reached); -1 the ``stalled`` sink, -2 a choice state of a split chain (reward-bounded properties).
        strategy: the strategy used (``merged``, ``full`` or ``onthefly``); merged_declined: why ``merged`` was
            not used where ``auto`` asked for it (None: it was, or was not asked for).
        property, mode, unavailable: what the chain was built for (the build is property-directed).
        decision_states: how many states the policy was asked about; policy_calls: ``onthefly``: how many distinct
            states the policy was called on (None otherwise); mdp_branches: ``merged``: the MDP's branches generated.
        untaken: choice name -> number of policy-reachable states offering a choice the policy names no action for.
        start_note: the forced-start note (:func:`~rlverify.models.dynamics.forced_start_message`) or None;
            build_notes: what the build said (e.g. how far update ranges were checked).
        timings: wall-clock seconds per phase: build (with the policy's and property's checks before it, which
            compile a PRISM program), policy, induce; memory_estimates: the phases' estimated memory (bytes).
        source, table, weights: the explicit MDP the chain was induced on (``full``: the property-directed MDP;
            ``onthefly``: its policy-reachable part), its choice table for the policy and the policy's weight on
            each of its choices, kept when the MDP was given (:class:`FullMDP`) or asked for (``keep_mdp``);
            else None (``merged`` never builds the MDP; otherwise its arrays became the chain's).
    """

    chain: ExplicitModel
    origin: np.ndarray
    strategy: str
    property: str
    mode: str
    unavailable: str
    decision_states: int
    untaken: dict[str, int] = field(default_factory=dict)
    start_note: str | None = None
    merged_declined: str | None = None
    policy_calls: int | None = None
    mdp_branches: int | None = None
    build_notes: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    memory_estimates: dict[str, int] = field(default_factory=dict)
    source: ExplicitModel | None = None
    table: ChoiceTable | None = None
    weights: ChoiceWeights | None = None


def policy_chain(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExactOptions | None = None,
    *,
    mdp: FullMDP | None = None,
    keep_mdp: bool = False,
    progress: Progress | None = None,
) -> PolicyChain:
    """The chain ``policy`` induces on ``model`` for ``prop``, built once by ``options.strategy``.

    Args:
        model: a loaded PRISM/JANI model; prop: its parsed property (the build is property-directed).
        policy: any :class:`~rlverify.policies.Policy` (checked against the model first).
        options: mode (``stochastic``/``deterministic``), strategy, unavailable, max_states, max_memory (None: the
            defaults).
        mdp: the model's :class:`FullMDP` when already built: the ``full`` strategy induces the chain on it
            (nothing is built) and keeps it in the result (``source``).
        keep_mdp: ``full``/``onthefly``: keep the MDP the chain is induced on (``source``, ``table``, ``weights``:
            more memory) for analyses that read its choices.

    Raises:
        PolicyError: no policy, or one that does not fit the model; PropertyError: what the exact engine does not
        check (:func:`~rlverify.exact.options.check_operator`); ModelError, ModelTooLargeError, MemoryBudgetError.
    """
    options = ExactOptions() if options is None else options
    try:
        options.validate()
        if options.mode == "monolithic":
            raise OptionError(
                "a policy's chain needs --mode stochastic or deterministic (monolithic mode has no "
                "policy: Pmin/Pmax range over all schedulers)"
            )
        if policy is None:
            raise PolicyError(f"mode '{options.mode}' needs a policy (--policy); use --mode monolithic for Pmin/Pmax")
        started = time.perf_counter()
        check_resolved(model, prop)
        chosen, probe = _chosen_and_probe(model, prop, options)
        try:
            check_policy(policy, model)  # compiles a PRISM program, which the merged exploration then reuses
            check_operator(prop, options.mode)
            checks = time.perf_counter() - started
            built = _build(model, prop, policy, options, mdp, keep_mdp, progress or (lambda msg: None), chosen, probe)
        finally:
            if probe is not None:  # joined by the exploration, unless something was refused before it
                probe.wait()
        built.timings["build"] += checks  # the build's phase includes the checks before it (and the compile)
        return built
    except MemoryError:
        raise out_of_memory("exact verification", SHRINK) from None


def chain_for(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExactOptions,
    chain: PolicyChain | None = None,
    *,
    mdp: FullMDP | None = None,
    keep_mdp: bool = False,
    progress: Progress | None = None,
) -> PolicyChain:
    """``chain`` when given (refused unless it was built for ``prop`` in ``options``' mode), else :func:`policy_chain`."""
    if chain is None:
        return policy_chain(model, prop, policy, options, mdp=mdp, keep_mdp=keep_mdp, progress=progress)
    for what, built, asked in (
        ("property", chain.property, prop.text),
        ("mode", chain.mode, options.mode),
        ("unavailable", chain.unavailable, options.unavailable),
    ):
        if built != asked:
            raise OptionError(
                f"the policy's chain given was built for {what} '{built}', not '{asked}': build it "
                "with policy_chain(...) for this property and these options"
            )
    return chain


def full_mdp(
    model: SymbolicModel,
    prop: Property,
    options: ExactOptions | None = None,
    *,
    policy: Policy | None = None,
    progress: Progress | None = None,
) -> FullMDP:
    """The property-directed MDP of ``model`` for ``prop``, built by Storm once (``options.max_states``,
    ``options.max_memory``; None: the defaults); with ``policy``, its choices are named by command where the policy
    names them so."""
    options = ExactOptions() if options is None else options
    (progress or (lambda msg: None))("building the full MDP")
    t = time.perf_counter()
    try:
        explicit, storm = build_explicit(
            model,
            [prop],
            max_states=options.max_states,
            max_memory=options.max_memory,
            command_names=True if policy is not None and names_commands(policy) else None,
        )
    except MemoryError:
        raise out_of_memory("building the full MDP", SHRINK) from None
    return FullMDP(mdp=explicit, storm=storm, property=prop.text, seconds=time.perf_counter() - t)


def mdp_for(
    model: SymbolicModel,
    prop: Property,
    options: ExactOptions,
    mdp: FullMDP | None = None,
    *,
    policy: Policy | None = None,
    progress: Progress | None = None,
) -> FullMDP:
    """``mdp`` when given (refused unless it was built for ``prop``, with command names if ``policy`` uses them),
    else :func:`full_mdp`."""
    if mdp is None:
        return full_mdp(model, prop, options, policy=policy, progress=progress)
    if mdp.property != prop.text:
        raise OptionError(f"the full MDP given was built for property '{mdp.property}', not '{prop.text}'")
    if policy is not None and names_commands(policy) and mdp.mdp.choice_commands is None:
        raise OptionError(
            "the full MDP given was built without command names, which the policy uses: build it with "
            "full_mdp(..., policy=policy)"
        )
    return mdp


#: ``auto`` picks ``merged`` for a PRISM MDP whose choices have at least this many branches on average (the
#: policy's chain fans out: a few wide breadth-first steps, where exploring in numpy batches is cheapest) ...
AUTO_BRANCHING = 2.2
#: ... or whose variables' domains multiply to at least this (large state spaces: the steps grow wide) ...
AUTO_DOMAIN = 2**45
#: ... or whose choices branch at least AUTO_FANNING ways on average over a domain of at least AUTO_FANNED valuations
#: (csma: 1.7 over 3e11); elsewhere Storm's builder is faster: the chain is explored in many narrow steps, each with a
#: fixed cost in numpy (measured in benchmarks/exact.py --files: the paper's Avoid, Freeway, Crazy Climber; QVBS
#: consensus, csma, firewire, leader)
AUTO_FANNING = 1.5
AUTO_FANNED = 2**30
#: ... or whose choices branch two ways or more on average over at most AUTO_TINY valuations: a handful of breadth-first
#: steps, cheaper than the fixed set-up of Storm's builder (its state table; ij: 7 states, merged ~0.9x full once
#: Storm's one-state build runs beside the policy's check). A program of that size explored in many narrow steps
#: costs at most AUTO_TINY of them (a 64-state chain: ~50 vs ~25 ms)
AUTO_TINY = 64


def choose_strategy(model: SymbolicModel, options: ExactOptions, prop: Property | None = None) -> str:
    """The strategy ``options`` ask for on ``model`` (see :func:`strategy_and_reason`)."""
    return strategy_and_reason(model, options, prop)[0]


def strategy_and_reason(model: SymbolicModel, options: ExactOptions, prop: Property | None = None) -> tuple[str, str | None]:
    """The strategy ``options`` ask for on ``model`` (for ``prop``), and why ``auto`` did not pick ``merged`` (None: it
    did, or ``auto`` was not asked for).

    ``auto`` is ``full`` for JANI; for a PRISM MDP it is ``merged`` where the program's choices branch widely or its
    variables span a large domain (:data:`AUTO_BRANCHING`, :data:`AUTO_DOMAIN`, :data:`AUTO_FANNING` over
    :data:`AUTO_FANNED`), or it is tiny and branching (:data:`AUTO_TINY`): cheap facts of the compiled program,
    never of its states), else ``full``; ``merged`` falls back to ``full`` for what it does not evaluate (a reward
    property, say: then ``merged`` is returned and declines, saying why). Monolithic mode builds the full MDP.
    """
    if options.mode == "monolithic":
        if options.strategy in ("onthefly", "merged"):
            raise PropertyError(f"--strategy {options.strategy} needs a policy; monolithic mode builds the full MDP")
        return "full", None
    if options.strategy != "auto":
        if options.strategy in ("onthefly", "merged") and model.kind != "prism":
            raise PropertyError(f"--strategy {options.strategy} is available for PRISM models (JANI: use full)")
        return options.strategy, None
    if model.kind != "prism":
        return "full", None
    if prop is not None and (prop.operator != "P" or is_reward_bounded(prop.storm_formula())):
        return "merged", None  # merged declines it, saying why
    shape = program_shape(model.program)
    if shape is None:  # merged declines it, saying why
        return "merged", None
    branching, domain = shape
    if (
        branching >= AUTO_BRANCHING
        or domain >= AUTO_DOMAIN
        or (branching >= AUTO_FANNING and domain >= AUTO_FANNED)
        or (branching >= 2 and domain <= AUTO_TINY)
    ):
        return "merged", None
    reason = (
        f"auto chose Storm's builder: the program's choices have {branching:.3g} branches on average over "
        f"{domain:.3g} valuations of its variables, so the merged exploration would take many narrow steps"
    )
    log.info("strategy %s", reason)
    return "full", reason


def program_shape(program: Any) -> tuple[float, int] | None:
    """Cheap facts of a Storm PRISM program (nothing compiled): branches per choice, averaged over its unlabelled
    commands and its labels (a label's: the product over its modules of their commands' mean number of updates), and
    how many valuations its variables have (the product of their domains).

    None where a variable's bounds are not constants (``merged`` declines the program, saying why). Here, not in
    :mod:`rlverify.models.program`: deciding loads nothing of the exploration.
    """
    program = program.substitute_constants()
    domain = 1
    for v in [*program.global_integer_variables, *(v for m in program.modules for v in m.integer_variables)]:
        if any(str(e) == "__storm::notinitialized__" for e in (v.lower_bound_expression, v.upper_bound_expression)):
            return None  # an unbounded int: evaluating unset bounds crashes Storm
        try:
            domain *= int(v.upper_bound_expression.evaluate_as_int()) - int(v.lower_bound_expression.evaluate_as_int()) + 1
        except Exception:  # an unbounded int, or bounds that are not constants
            return None
    domain *= 2 ** (len(program.global_boolean_variables) + sum(len(m.boolean_variables) for m in program.modules))
    per_group: list[float] = []
    labels: dict[str, float] = {}
    for m in program.modules:
        updates: dict[str, list[int]] = {}
        for c in m.commands:
            if c.is_labeled:
                updates.setdefault(c.action_name, []).append(len(c.updates))
            else:
                per_group.append(len(c.updates))
        for label, counts in updates.items():
            labels[label] = labels.get(label, 1.0) * float(np.mean(counts))
    per_group += labels.values()
    return (float(np.mean(per_group)) if per_group else 0.0), domain


def check_on_disk(model: SymbolicModel, prop: Property, options: ExactOptions, strategy: str) -> None:
    """Refuse (``OptionError``, before anything is built) what a chain on disk (``--chain-dir``) cannot check: it is
    built by the ``merged`` strategy (PRISM programs) and checked for reachability, step-bounded or not
    (:func:`~rlverify.exact.checking.solved_here`: ``--numerics sound`` or ``direct``), only."""
    if strategy != "merged":
        why = "JANI models are built by Storm" if model.kind != "prism" else f"not with --strategy {options.strategy}"
        raise OptionError(f"--chain-dir needs the merged strategy (PRISM programs, --strategy auto or merged): {why}")
    formula = prop.storm_formula()
    if not solved_here(formula, options.numerics):  # F, U (bounded by steps or not) over state formulas
        raise OptionError(
            f"--chain-dir checks reachability only (P=? [F phi], P=? [phi U psi], their step-bounded forms F<=k, "
            f"U<=k, and thresholds, over labels and expressions, --numerics sound or direct), not '{prop.text}' "
            f"with --numerics {options.numerics}"
        )


def names_commands(policy: Policy) -> bool:
    """Whether ``policy`` names some of its actions by command (``m:2``) rather than by label."""
    return any(is_command_name(a) for a in policy.actions)


def induce(
    mdp: ExplicitModel, policy: Policy, *, mode: str = "stochastic", unavailable: str = "stall"
) -> tuple[ExplicitModel, np.ndarray]:
    """The reachable chain ``policy`` induces on an explicit MDP (policy evaluated in one batch), and each chain
    state's MDP state (``(n,)`` int64; -1: the ``stalled`` sink)."""
    cw, _, _ = weigh(mdp, policy, mode=mode, unavailable=unavailable, defer=True)
    return induced_chain(mdp, cw)


def on_chain(prop: Property, chain: ExplicitModel, model: SymbolicModel) -> Any:
    """The property to check on the chain: with a ``stalled`` sink, its state formulas exclude the sink.

    The sink has no labels and all-zero variables, so ``!"alive"`` or ``x=0`` would hold there and a
    stalled run would count as reaching the target; a stalled run satisfies no state formula.
    """
    if STALLED_LABEL not in chain.labels or prop.path in ("C", "I"):  # no state formulas: the sink earns nothing
        return prop
    text = excluding_label(prop, STALLED_LABEL)
    if text is None:
        raise PropertyError(
            f"property '{prop.text}': the policy's mass stalls (unavailable actions), and rlverify "
            "cannot make the stalled runs satisfy no state formula of this form; use P=? with F, G, "
            "X, U or W, or --unavailable renormalize"
        )
    import stormpy

    try:
        with storm_log_off():
            return stormpy.parse_properties(text, model.program)[0]
    except RuntimeError as exc:
        raise PropertyError(
            f"property '{prop.text}': on the policy's chain it reads '{text}', which Storm refuses: {storm_message(exc)}"
        ) from None


def states_of(
    known: np.ndarray, known_variables: tuple[str, ...], valuations: np.ndarray, variables: tuple[str, ...]
) -> np.ndarray:
    """``(P,)`` int64: the row of ``known`` ``(N, V)`` (an MDP's valuations, columns ``known_variables``) with each row
    of ``valuations`` ``(P, V)`` (columns ``variables``).

    A state of a PRISM/JANI model is its valuation (JANI locations included), so a chain built without the MDP
    (``merged``) is joined to it here. Raises :class:`PropertyError` when the variables differ.
    """
    have, want = tuple(variables), tuple(known_variables)
    if have != want:
        if set(have) != set(want):
            raise PropertyError(f"the policy's chain has variables {have}, the full MDP {want}; cannot join their states")
        valuations = valuations[:, [have.index(v) for v in want]]
    n = len(known)
    _, inverse = np.unique(np.vstack([known, valuations]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    lookup = np.full(int(inverse.max()) + 1 if len(inverse) else 0, -1, dtype=np.int64)
    lookup[inverse[:n]] = np.arange(n)
    at = lookup[inverse[n:]]
    if (at < 0).any():  # both are built from the same property-directed model: a bug, not bad input
        raise RuntimeError(f"{int((at < 0).sum())} states of the policy's chain are not states of the full MDP")
    return at


# ---------------------------------------------------------------------------------------------
# building


def _chosen_strategy(model: SymbolicModel, prop: Property, options: ExactOptions) -> tuple[str, str | None]:
    """:func:`strategy_and_reason`, with ``auto`` taking ``merged`` for ``--chain-dir`` on a PRISM model."""
    strategy, declined = strategy_and_reason(model, options, prop)
    if options.chain_dir is not None and options.strategy == "auto" and model.kind == "prism":
        strategy, declined = "merged", None  # only the merged exploration writes a chain to disk
    return strategy, declined


def _chosen_and_probe(
    model: SymbolicModel, prop: Property, options: ExactOptions
) -> tuple[tuple[str, str | None] | None, StormProbe | None]:
    """The strategy (None: refused, which :func:`_build` says after the policy's checks) and, where it is ``merged``
    and the exploration will run, Storm's one-state build started in a thread while the policy is checked and the
    program compiled (:class:`~rlverify.exact.merged.StormProbe`; it releases the GIL), else None."""
    try:
        chosen = _chosen_strategy(model, prop, options)
    except RlverifyError:
        return None, None
    if chosen[0] != "merged" or model.kind != "prism" or prop.operator != "P" or is_reward_bounded(prop.storm_formula()):
        return chosen, None
    from rlverify.exact.merged import StormProbe

    return chosen, StormProbe(model, prop)


def _build(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExactOptions,
    mdp: FullMDP | None,
    keep_mdp: bool,
    say: Progress,
    chosen: tuple[str, str | None] | None,
    probe: StormProbe | None,
) -> PolicyChain:
    """The chain by the strategy ``options`` ask for (``merged`` falling back to ``full`` under ``auto``); ``chosen``:
    :func:`_chosen_strategy` (None: refused, said here), ``probe``: as :func:`_chosen_and_probe` started it."""
    strategy, declined = _chosen_strategy(model, prop, options) if chosen is None else chosen
    if options.chain_dir is not None:
        check_on_disk(model, prop, options, strategy)
    if strategy == "merged":
        merged, declined = _merged(model, prop, policy, options, say, probe)
        if merged is not None:
            return merged
        strategy = "full"
    return _induced(model, prop, policy, options, strategy, declined, mdp, keep_mdp, say)


def _merged(
    model: SymbolicModel, prop: Property, policy: Policy, options: ExactOptions, say: Progress, probe: StormProbe | None
) -> tuple[PolicyChain | None, str | None]:
    """The chain by ``merged``, or None and why it does not apply (refused when ``merged`` was asked for by name)."""
    reason = "a reward-bounded property needs Storm's reward models" if is_reward_bounded(prop.storm_formula()) else None
    if reason is None:
        from rlverify.exact.merged import Unsupported, merged_chain  # here: the full strategy's runs never load it

        say("exploring the policy's chain (merging its actions as the states are explored)")
        t = time.perf_counter()
        try:
            built = merged_chain(
                model,
                prop,
                policy,
                mode=options.mode,
                unavailable=options.unavailable,
                max_states=options.max_states,
                max_memory=options.max_memory,
                progress=say,
                chain_dir=options.chain_dir,
                force=options.chain_dir_force,
                probe=probe,
            )
        except Unsupported as exc:
            reason = str(exc)
            if probe is not None:  # before Storm builds the MDP: never two of Storm's builds at once
                probe.wait()
        else:
            return _from_merged(built, prop, options, time.perf_counter() - t), None
    if options.chain_dir is not None:
        raise OptionError(f"{model.shown}: --chain-dir needs the merged strategy, which cannot build this model ({reason})")
    if options.strategy == "merged":
        raise ModelError(f"{model.shown}: --strategy merged cannot build this model ({reason}); use --strategy full")
    log.info("strategy merged declined (%s): building the MDP with Storm", reason)
    return None, reason


def _from_merged(built: MergedChain, prop: Property, options: ExactOptions, seconds: float) -> PolicyChain:
    origin = np.arange(built.chain.num_states)
    if STALLED_LABEL in built.chain.labels:
        origin[-1] = -1
    timings = {"policy": built.policy_seconds, "build": seconds - built.policy_seconds, "induce": 0.0}
    return PolicyChain(
        chain=built.chain,
        origin=origin,
        strategy="merged",
        property=prop.text,
        mode=options.mode,
        unavailable=options.unavailable,
        decision_states=built.decision_states,
        untaken=built.untaken,
        start_note=built.start_note,
        mdp_branches=built.mdp_branches,
        timings=timings,
    )


def _induced(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExactOptions,
    strategy: str,
    declined: str | None,
    given: FullMDP | None,
    keep_mdp: bool,
    say: Progress,
) -> PolicyChain:
    """The chain induced on an explicit MDP: ``given`` (``full``), or one Storm builds here (whole, or masked by the
    policy: ``onthefly``), kept in the result when it was given or ``keep_mdp`` asks for it."""
    timings: dict[str, float] = {}
    estimates: dict[str, int] = {}
    t = time.perf_counter()
    explorer = None
    use_given = given is not None and strategy == "full"
    kept = use_given or keep_mdp
    if use_given:
        assert given is not None
        mdp = mdp_for(model, prop, options, given, policy=policy).mdp
    else:
        mask = None
        if strategy == "onthefly":
            say("exploring policy-reachable states with Storm's builder")
            explorer = _MaskedExploration(model, policy, options, progress=say)
            mask = explorer.mask()
        # memory: Storm's MDP is freed once exported (keep_storm=False), the MDP's transition arrays become the
        # chain's (consume=True), and the chain's arrays are dropped once Storm has its copy unless a check needs them
        mdp = build_explicit(
            model,
            [prop],
            max_states=options.max_states,
            mask=mask,
            command_names=True if names_commands(policy) else None,
            keep_storm=False,
            max_memory=options.max_memory,
            memory_estimates=estimates,
        )[0]
    timings["build"] = time.perf_counter() - t
    say(f"evaluating the policy on {mdp.num_states} states")
    t = time.perf_counter()
    memory_guard(
        options.max_memory,
        "induce",
        states=mdp.num_states,
        transitions=mdp.num_transitions,
        what="MDP transitions",
        estimates=estimates,
    )
    all_unavailable = explorer.all_unavailable(mdp) if explorer is not None else None
    cw, table, policy_seconds = weigh(
        mdp, policy, mode=options.mode, unavailable=options.unavailable, all_unavailable=all_unavailable, defer=True
    )
    reward_bounded = is_reward_bounded(prop.storm_formula())
    if reward_bounded and mdp.choice_rewards:
        chain, origin = _split_chain(mdp, cw)
    else:
        chain, origin = induced_chain(mdp, cw, consume=not reward_bounded and not kept)
    timings["policy"] = policy_seconds
    timings["induce"] = time.perf_counter() - t - policy_seconds
    if prop.path == "I" and prop.reward_model is not None:  # I=k reads state rewards only (PRISM, Storm)
        chain = _state_rewards_only(chain, mdp, origin)
    return PolicyChain(
        chain=chain,
        origin=origin,
        strategy=strategy,
        property=prop.text,
        mode=options.mode,
        unavailable=options.unavailable,
        decision_states=len(cw.decision_states),
        untaken=table.untaken(origin[origin >= 0]),
        start_note=forced_start_message(table, prop.bound),
        merged_declined=declined,
        policy_calls=None if explorer is None else len(explorer.cache),
        build_notes=mdp.notes,
        timings=timings,
        memory_estimates=estimates,
        source=mdp if kept else None,
        table=table if kept else None,
        weights=cw if kept else None,
    )


def _state_rewards_only(chain: ExplicitModel, mdp: ExplicitModel, origin: np.ndarray) -> ExplicitModel:
    """The chain with each reward model's state rewards only (the induced chain folds the policy-weighted
    action rewards into its state rewards, which instantaneous rewards ``I=k`` must not see)."""
    rewards = {}
    for name, r in chain.state_rewards.items():
        state = mdp.state_rewards.get(name)
        rewards[name] = np.zeros_like(r) if state is None else np.where(origin >= 0, state[np.maximum(origin, 0)], 0.0)
    return dataclasses.replace(chain, state_rewards=rewards)


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
        model_type="mdp",
        row_groups=row_groups,
        transitions=transitions,
        choice_actions=np.r_[mdp.choice_actions, np.zeros(C, dtype=np.int32)].astype(np.int32),
        action_names=mdp.action_names,
        variables=mdp.variables,
        valuations=np.vstack([mdp.valuations, mdp.valuations[cs]]),
        initial_states=mdp.initial_states,
        labels={k: np.r_[m, m[cs]] for k, m in mdp.labels.items()},
        label_aliases=dict(mdp.label_aliases),
        state_rewards=rewards,
        choice_rewards={},
        valuation_bytes=vbytes,
        valuation_spec=mdp.valuation_spec,
    )
    weights = ChoiceWeights(
        weights=np.r_[cw.weights, np.ones(C)], stalled=np.r_[cw.stalled, np.zeros(C)], decision_states=cw.decision_states
    )
    chain, origin = induced_chain(fake, weights)
    origin = np.where(origin >= S, -2, origin)
    return chain, origin


class _MaskedExploration:
    """A Storm action mask keeping the actions the policy may take; one cached policy call per state.

    It also remembers states where every available action was masked out (the policy gives them
    probability 0), which Storm then treats as deadlocks: their mass is stalled, as with ``full``.
    """

    def __init__(self, model: SymbolicModel, policy: Policy, options: ExactOptions, progress: Progress | None = None) -> None:
        self.model, self.policy, self.options = model, policy, options
        self.progress = progress
        manager = model.program.expression_manager
        self.variables = [manager.get_variable(f) for f in policy.features]
        self.is_bool = [f in model.boolean_variables for f in policy.features]
        self.action_col = {a: i for i, a in enumerate(policy.actions)}
        self.cache: dict[tuple[int, ...], np.ndarray] = {}
        self.names: dict[int, str] = {}
        # prune by label only where that cannot change what is verified: a label does not say which command a
        # choice is (choices named by command are weighed when induced), and removing the labelled choices of a
        # state that also offers an unlabelled command would leave that command to be taken without asking
        self.prune = not names_commands(policy) and all(c.action for c in model.commands)

    def mask(self) -> Any:
        import stormpy.developer as dev

        return dev.StateValuationFunctionMask[float](self._allowed)

    def _allowed(self, valuation: Any, action_index: int) -> bool:
        keep = self._keep(valuation)
        name = self.names.get(action_index)
        if name is None:
            name = self.names[action_index] = self.model.program.get_action_name(action_index)
        col = self.action_col.get(name)
        if col is None or not self.prune:  # as with 'full': such choices are weighed (or refused) when the chain is induced
            return True
        # deterministic + renormalize needs every available action to find the best available one
        return bool(keep[col]) or (self.options.mode == "deterministic" and self.options.unavailable == "renormalize")

    def _keep(self, valuation: Any) -> np.ndarray:
        """``(|A|,)`` bool: the actions the policy may take in the state (one policy call per state, cached)."""
        key = tuple(
            int(valuation.get_boolean_value(v)) if b else valuation.get_integer_value(v)
            for v, b in zip(self.variables, self.is_bool, strict=True)
        )
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
        return keep

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


__all__ = [
    "FullMDP",
    "PolicyChain",
    "available_actions",
    "chain_for",
    "check_on_disk",
    "choose_strategy",
    "full_mdp",
    "induce",
    "mdp_for",
    "names_commands",
    "on_chain",
    "policy_chain",
    "states_of",
    "strategy_and_reason",
]
