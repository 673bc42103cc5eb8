"""How far a policy's value moves under perturbed observations (exact).

An adversary shows the policy, in each state, an observation within an integer L∞ or L1 distance ``epsilon`` of the
true one (only the features in ``perturb``; each clipped to its variable's declared range). The policy's distribution
at the shown observation is applied to the *real* state's choices (mass on unavailable actions stalls or is
renormalised, as in the nominal engine). The worst case over every adversary is exactly Pmax (the best case Pmin) of
the MDP whose choices in a state are the distinct distributions the policy gives over the admissible observations
(memoryless deterministic adversaries suffice for unbounded reachability; for step-bounded properties the optimum may
depend on the step, as Pmax does); it is built from one batched policy call over all (state, perturbation) pairs
(:mod:`rlverify.exact.adversarial`) and checked by Storm. A gradient-sign (FGSM) attack, one perturbation per state,
is the baseline from the literature: its chain's value lies between Pmin and Pmax.

Model error is :mod:`rlverify.exact.model_error`; the options of both are :mod:`rlverify.exact.robust_options`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlverify.choices import Strategy
from rlverify.exact.adversarial import (
    SHRINK,
    Pairs,
    Perturbed,
    adversarial_mdp,
    perturbation_pairs,
    perturbed_features,
)
from rlverify.exact.chain import FullMDP, PolicyChain, chain_for, mdp_for, on_chain, policy_chain
from rlverify.exact.formulas import quantitative
from rlverify.exact.induced import choice_weights, induced_chain
from rlverify.exact.optimum import mdp_optimum
from rlverify.exact.options import MAX_WORK, ExactOptions, Progress, guarantee, provenance
from rlverify.exact.outcome import CheckOutcome
from rlverify.exact.robust_options import RobustnessOptions, check_input
from rlverify.exact.verify import verify_exact
from rlverify.models.dynamics import ChoiceTable, choice_table
from rlverify.models.explicit import ExplicitModel, out_of_memory, to_storm
from rlverify.models.numerics import environment
from rlverify.models.properties import ASSUMED_BAD_EVENT, Property, worst_case
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.results import RobustnessResult

__all__ = ["robustness"]

log = logging.getLogger(__name__)


def robustness(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: RobustnessOptions | None = None,
    *,
    chain: PolicyChain | None = None,
    mdp: FullMDP | None = None,
    progress: Progress | None = None,
) -> RobustnessResult:
    """The property's exact range when an adversary perturbs the policy's observations.

    Args:
        model: a loaded PRISM/JANI model.
        prop: its parsed property, a probability property (``P=? [F ...]``, ``U``, ``G``, ``X``, bounded or not).
        policy: any :class:`~rlverify.policies.Policy`; the FGSM baseline needs a network policy.
        options: :class:`RobustnessOptions` (None: the defaults).
        chain: the policy's chain when already built (:func:`~rlverify.exact.chain.policy_chain`, same mode and
            ``unavailable``): the nominal value is checked on it.
        mdp: the property-directed MDP when already built (:func:`~rlverify.exact.chain.full_mdp` with the policy):
            the adversarial MDP is built from its decision states.

    Returns a :class:`~rlverify.results.RobustnessResult`: nominal value, Pmax and Pmin of the
    adversarial MDP (exact, ``numerics``), the FGSM chain's value, the states where a
    perturbation changes the policy's argmax action and the worst perturbation per state.

    Raises :class:`~rlverify.errors.MemoryBudgetError` before enumerating the (state, perturbation) pairs
    when their estimate exceeds ``options.max_memory`` (or the default guard), and for a ``MemoryError``.
    """
    options = RobustnessOptions() if options is None else options
    try:
        return _robustness(model, prop, policy, options, chain, mdp, progress or (lambda msg: None))
    except MemoryError:
        raise out_of_memory("the robustness analysis", SHRINK) from None


def _robustness(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: RobustnessOptions,
    given: PolicyChain | None,
    mdp: FullMDP | None,
    say: Progress,
) -> RobustnessResult:
    """Parse (done by the caller) -> the nominal chain and the MDP -> the adversarial MDP -> its optima."""
    options.validate()
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    check_input(prop, policy)
    chain, full, table = _nominal_and_mdp(model, prop, policy, _exact_options(options), given, mdp, say)
    timings["build"] = time.perf_counter() - t0
    perturbed = perturbed_features(model, policy, options)
    worst, assumed = worst_case(prop, options.worst)
    notes: list[str] = list(prop.notes) + ([ASSUMED_BAD_EVENT] if assumed else [])
    t = time.perf_counter()
    pairs = perturbation_pairs(full, table, policy, perturbed, options, notes)
    timings["policy"] = pairs.policy_seconds
    adv, origin, row_pair = adversarial_mdp(
        full, table, pairs.states, pairs.probs[pairs.pair_obs[pairs.pair_k, pairs.pair_j]], pairs.pair_k, options
    )
    timings["induce"] = time.perf_counter() - t - timings["policy"]
    t = time.perf_counter()
    say("checking Pmax and Pmin of the adversarial MDP")
    lo, hi = _optima(adv, prop, model, options)
    exact = _exact_options(options)
    nominal = verify_exact(model, prop, policy, exact, chain=chain).value
    attack = None
    if pairs.attack is not None:
        attack = _attack_value(model, prop, policy, exact, full, table, pairs)
    timings["check"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    if attack is not None and not (lo.value - 1e-6 <= attack <= hi.value + 1e-6):
        raise AssertionError(f"internal: the FGSM chain's value {attack} lies outside [Pmin, Pmax] = [{lo.value}, {hi.value}]")
    values = hi.values if worst == "max" else lo.values
    listed, changed = _worst_perturbations(full, adv, origin, row_pair, pairs, perturbed, values, worst)
    features, columns = perturbed.features, perturbed.columns
    return RobustnessResult(
        epsilon=int(options.epsilon),
        norm=options.norm,
        perturbed=tuple(features[c] for c in columns),
        worst_is=worst,
        nominal=nominal,
        pmax=hi.value,
        pmin=lo.value,
        worst=hi.value if worst == "max" else lo.value,
        best=lo.value if worst == "max" else hi.value,
        attack=attack,
        attack_method="fgsm" if attack is not None else None,
        states=adv.num_states,
        choices=adv.num_choices,
        transitions=adv.num_transitions,
        decision_states=len(pairs.states),
        perturbations_per_state=len(pairs.D),
        observations=len(pairs.unique),
        changed_states=len(changed),
        changed_valuations=changed,
        worst_perturbations=listed,
        guarantee=guarantee(options.numerics),
        precision=options.precision,
        variables=full.variables,
        provenance=provenance(model, prop, policy, timings=timings, settings=_settings(options, model), warnings=notes),
    )


def _exact_options(options: RobustnessOptions) -> ExactOptions:
    """The nominal engine's settings for the analyses' chains (mode, unavailable, numerics, sizes)."""
    return ExactOptions(
        mode=options.mode,
        unavailable=options.unavailable,
        numerics=options.numerics,
        precision=options.precision,
        max_states=options.max_states,
        max_memory=options.max_memory,
    )


def _nominal_and_mdp(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    exact: ExactOptions,
    chain: PolicyChain | None,
    mdp: FullMDP | None,
    say: Progress,
) -> tuple[PolicyChain, ExplicitModel, ChoiceTable]:
    """The policy's chain (given, or induced here on the full MDP, which it keeps) and the full MDP with its choice
    table for the policy (the chain's when it was induced on it; else ``mdp`` or one built here)."""
    if chain is None:
        chain = policy_chain(
            model, prop, policy, dataclasses.replace(exact, strategy="full"), mdp=mdp, keep_mdp=True, progress=say
        )
    else:
        chain = chain_for(model, prop, policy, exact, chain)
    if chain.strategy == Strategy.FULL and chain.source is not None and chain.table is not None:
        return chain, chain.source, chain.table
    full = mdp_for(model, prop, exact, mdp, policy=policy, progress=say).mdp
    return chain, full, choice_table(full, policy.actions)


def _optima(
    adv: ExplicitModel, prop: Property, model: SymbolicModel, options: RobustnessOptions
) -> tuple[CheckOutcome, CheckOutcome]:
    """Pmin and Pmax of the adversarial MDP (:func:`~rlverify.exact.optimum.mdp_optimum`: step-bounded forms on its
    arrays, Storm's model built only when Storm checks), probabilities and their brackets inside [0, 1]."""
    env = environment(options.numerics, options.precision)
    n = adv.num_states
    loops = dataclasses.replace(
        adv,
        model_type="dtmc",
        row_groups=np.arange(n + 1, dtype=np.int64),
        transitions=sp.identity(n, format="csr"),
        choice_actions=np.zeros(n, dtype=np.int32),
    )
    labels = to_storm(loops)  # the state formulas read labels and valuations only
    formula = on_chain(prop, adv, model)
    out = []
    for optimum in ("min", "max"):
        f, _, _ = quantitative(formula, optimality=optimum)
        out.append(
            mdp_optimum(
                adv,
                labels,
                f,
                optimum,
                env=env,
                numerics=options.numerics,
                precision=options.precision,
                max_work=MAX_WORK,
                probability=True,
                full_model=lambda: to_storm(adv),
            )
        )
    return out[0], out[1]


def _attack_value(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    exact: ExactOptions,
    mdp: ExplicitModel,
    table: ChoiceTable,
    pairs: Pairs,
) -> float:
    """The value of the chain the FGSM observations induce (one per decision state), checked as
    :func:`~rlverify.exact.verify_exact` checks the policy's chain."""
    assert pairs.attack is not None
    cw = choice_weights(
        mdp, policy, pairs.probs[pairs.attack], pairs.states, mode=exact.mode, unavailable=exact.unavailable, table=table
    )
    chain, origin = induced_chain(mdp, cw)
    attacked = PolicyChain(
        chain=chain,
        origin=origin,
        strategy="full",
        property=prop.text,
        mode=exact.mode,
        unavailable=exact.unavailable,
        decision_states=len(pairs.states),
    )
    return verify_exact(model, prop, policy, exact, chain=attacked).value


def _worst_perturbations(
    mdp: ExplicitModel,
    adv: ExplicitModel,
    origin: np.ndarray,
    row_pair: np.ndarray,
    pairs: Pairs,
    perturbed: Perturbed,
    values: np.ndarray,
    worst: str,
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Per reachable decision state, the perturbation best for the adversary one step ahead (largest gain first),
    and the valuations ``(n, V)`` of the reachable decision states where some perturbation changes the argmax."""
    features, columns, states = perturbed.features, perturbed.columns, pairs.states
    q = adv.transitions @ values
    sign = 1.0 if worst == "max" else -1.0
    reach_state = np.full(mdp.num_states, -1, dtype=np.int64)
    reach_state[origin[origin >= 0]] = np.flatnonzero(origin >= 0)
    state_of_k = reach_state[states]
    listed: list[dict[str, Any]] = []
    for k in np.flatnonzero(state_of_k >= 0):
        s = state_of_k[k]
        rows = np.arange(adv.row_groups[s], adv.row_groups[s + 1])
        best = rows[np.argmax(sign * q[rows])]
        gain = sign * (q[best] - q[rows[0]])  # rows[0]: the nominal observation
        if gain > 0:
            j = pairs.pair_j[row_pair[best]]
            listed.append(
                {
                    "state": mdp.valuation_dict(int(states[k])),
                    "observed": {features[c]: int(pairs.unique[pairs.pair_obs[k, j], c]) for c in columns},
                    "offset": {features[c]: int(v) for c, v in zip(columns, pairs.D[j], strict=True)},
                    "gain": float(gain),
                }
            )
    listed.sort(key=lambda p: -p["gain"])
    reachable_changed = pairs.changed & (state_of_k >= 0)
    return listed, mdp.valuations[states[reachable_changed]]


def _settings(options: RobustnessOptions, model: SymbolicModel) -> dict[str, Any]:
    d = dataclasses.asdict(options)
    d["perturb"] = None if options.perturb is None else list(options.perturb)
    d["constants"] = model.constants
    return d
