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

from rlverify.choices import Mode, Strategy
from rlverify.errors import ModelError, OptionError, PolicyError, PropertyError, RlverifyError
from rlverify.exact.cut import STALLED_LABEL
from rlverify.exact.formulas import is_reward_bounded
from rlverify.exact.induced import ChoiceWeights, induced_chain, weigh
from rlverify.exact.onthefly import PolicyMask, available_actions
from rlverify.exact.options import ExactOptions, Progress, check_operator, check_resolved
from rlverify.exact.strategy import check_on_disk, choose_strategy, is_prism, strategy_and_reason
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
    from rlverify.exact.merged import MergedChain
    from rlverify.exact.storm_probe import StormProbe

log = logging.getLogger(__name__)

#: Storm's untyped objects: a sparse model, a property (stormpy has no type hints)
StormModel = Any
StormProperty = Any

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
    storm: StormModel
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
        if options.mode == Mode.MONOLITHIC:
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


def on_chain(prop: Property, chain: ExplicitModel, model: SymbolicModel) -> Property | StormProperty:
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
    import stormpy  # lazy: stormpy, start-up

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
    if options.chain_dir is not None and options.strategy == Strategy.AUTO and is_prism(model):
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
    if chosen[0] != "merged" or not is_prism(model) or prop.operator != "P" or is_reward_bounded(prop.storm_formula()):
        return chosen, None
    from rlverify.exact.storm_probe import StormProbe  # lazy: the full strategy's runs never load the exploration

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
    if strategy == Strategy.MERGED:
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
        from rlverify.exact.merged import Unsupported, merged_chain  # lazy: the full strategy's runs never load it

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
    if options.strategy == Strategy.MERGED:
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
    given = given if strategy == Strategy.FULL else None
    kept = given is not None or keep_mdp
    mask = PolicyMask(model, policy, options, progress=say) if strategy == Strategy.ONTHEFLY else None
    if given is not None:
        mdp = mdp_for(model, prop, options, given, policy=policy).mdp
    else:
        mdp = _storm_mdp(model, prop, policy, options, mask, estimates, say)
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
    cw, table, policy_seconds = _weigh(mdp, policy, options, mask)
    chain, origin = _chain_of(mdp, cw, prop, consume=not kept)
    timings["policy"] = policy_seconds
    timings["induce"] = time.perf_counter() - t - policy_seconds
    built = PolicyChain(
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
        policy_calls=None if mask is None else len(mask.looked_up),
        build_notes=mdp.notes,
        timings=timings,
        memory_estimates=estimates,
    )
    return dataclasses.replace(built, source=mdp, table=table, weights=cw) if kept else built


def _weigh(
    mdp: ExplicitModel, policy: Policy, options: ExactOptions, mask: PolicyMask | None
) -> tuple[ChoiceWeights, ChoiceTable, float]:
    """:func:`~rlverify.exact.induced.weigh` on ``mdp``; with ``mask`` (``onthefly``) from the policy's answers to
    the mask, and the states the mask emptied stalled."""
    if mask is None:
        return weigh(mdp, policy, mode=options.mode, unavailable=options.unavailable, defer=True)
    return weigh(
        mdp,
        policy,
        mode=options.mode,
        unavailable=options.unavailable,
        all_unavailable=mask.all_unavailable(mdp),
        defer=True,
        ask=mask.probabilities,
    )


def _chain_of(mdp: ExplicitModel, cw: ChoiceWeights, prop: Property, *, consume: bool) -> tuple[ExplicitModel, np.ndarray]:
    """The chain the weights ``cw`` induce on ``mdp`` for ``prop`` (a state per taken choice for a reward-bounded
    property with action rewards; state rewards only for ``I=k``), and each chain state's MDP state; ``consume``:
    the MDP's arrays may become the chain's (not for a reward-bounded property)."""
    reward_bounded = is_reward_bounded(prop.storm_formula())
    if reward_bounded and mdp.choice_rewards:
        chain, origin = _split_chain(mdp, cw)
    else:
        chain, origin = induced_chain(mdp, cw, consume=consume and not reward_bounded)
    if prop.path == "I" and prop.reward_model is not None:  # I=k reads state rewards only (PRISM, Storm)
        chain = _state_rewards_only(chain, mdp, origin)
    return chain, origin


def _storm_mdp(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExactOptions,
    mask: PolicyMask | None,
    estimates: dict[str, int],
    say: Progress,
) -> ExplicitModel:
    """The property-directed MDP built by Storm here: whole, or (``mask``: ``onthefly``) its policy-reachable part,
    the policy asked a layer at a time before the build."""
    if mask is not None:
        say("exploring policy-reachable states with Storm's builder")
        mask.prefetch(prop, options.max_states)
    # memory: Storm's MDP is freed once exported (keep_storm=False), the MDP's transition arrays become the
    # chain's (consume=True), and the chain's arrays are dropped once Storm has its copy unless a check needs them
    return build_explicit(
        model,
        [prop],
        max_states=options.max_states,
        mask=None if mask is None else mask.mask(),
        command_names=True if names_commands(policy) else None,
        keep_storm=False,
        max_memory=options.max_memory,
        memory_estimates=estimates,
    )[0]


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
