"""The Markov chain a policy induces on an MDP.

``P(s, s') = sum_a pi(a|s) * T(s, a, s')`` over the states reachable from the initial states
(every action with ``pi > 0`` is followed). Mass the policy puts on actions that are not
available in a state is never silently moved: by default it goes to an absorbing ``stalled``
sink; ``unavailable='renormalize'`` (explicit opt-in) rescales the available actions instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlverify.choices import Unavailable
from rlverify.exact.cut import STALLED_LABEL, Cut
from rlverify.models.dynamics import (
    ChoiceTable,
    choice_table,
    labelled_states,
    policy_weights,
    refuse_all_unavailable,
)
from rlverify.models.explicit import ExplicitModel
from rlverify.models.graph import reachable
from rlverify.policies.base import BasePolicy, Policy, validate_probabilities

__all__ = [
    "STALLED_LABEL",
    "ChoiceWeights",
    "ask_features",
    "ask_policy",
    "choice_weights",
    "decision_states",
    "induced_chain",
    "weigh",
    "weights_at",
]


@dataclass(frozen=True)
class ChoiceWeights:
    """Per-choice policy weights of an MDP.

    Attributes:
        weights: ``(C,)`` float64, pi(action of c | state of c); forced choices of states the
            policy is not asked about (absorbing/terminal states) get 1.
        stalled: ``(S,)`` float64 mass on unavailable actions per state (0 when renormalised).
        decision_states: ``(K,)`` int64 states at which the policy was queried.
    """

    weights: np.ndarray
    stalled: np.ndarray
    decision_states: np.ndarray
    #: ``(S,)`` bool or None: states with no available mass to renormalise (``renormalize``, deferred): refused by
    #: :func:`induced_chain` if the policy reaches one
    nothing: np.ndarray | None = None


def decision_states(model: ExplicitModel, columns: np.ndarray | None = None) -> np.ndarray:
    """``(K,)`` int64 states with at least one labelled choice: the policy decides there.

    A state offering only actions the policy does not know is still a decision state (the policy's
    mass there is on unavailable actions and stalls); only states whose choices are all unlabelled
    (Storm's self-loops at terminal states and deadlocks, unlabelled commands) are not asked.
    ``columns`` is not needed (kept for callers that pass it).
    """
    return np.flatnonzero(labelled_states(model))


def choice_weights(
    model: ExplicitModel,
    policy: Policy,
    probs: np.ndarray,
    states: np.ndarray,
    *,
    mode: str,
    unavailable: str,
    all_unavailable: np.ndarray | None = None,
    table: ChoiceTable | None = None,
    defer: bool = False,
) -> ChoiceWeights:
    """Weights of every choice given ``probs`` ``(len(states), |A|)`` evaluated at ``states``.

    ``mode='deterministic'`` keeps only the argmax action (ties: the first in the policy's action
    order; with ``renormalize``, the argmax among available actions). ``all_unavailable`` marks
    states (``(S,)`` bool) where an on-the-fly build masked out every available action because the
    policy gives them probability 0: all their mass is on unavailable actions. ``table``: the
    model's :func:`~rlverify.models.dynamics.choice_table` for ``policy.actions`` (built if None). ``defer``: with
    ``renormalize``, a state with no available mass is refused only if the policy reaches it (by
    :func:`induced_chain`), not where it is merely queried (the full MDP's decision states).
    """
    table = choice_table(model, policy.actions) if table is None else table
    states = np.asarray(states, dtype=np.int64)
    return weights_at(
        probs,
        states,
        table.choice_of[states],
        model.choice_states(),
        model.num_states,
        mode=mode,
        unavailable=unavailable,
        where=lambda i: model.valuation_dict(int(states[i])),
        describe=model.valuation_dict,
        all_unavailable=all_unavailable,
        defer=defer,
    )


def weights_at(
    probs: np.ndarray,
    states: np.ndarray,
    choice_of: np.ndarray,
    choice_state: np.ndarray,
    num_states: int,
    *,
    mode: str,
    unavailable: str,
    where: Callable[[int], Any],
    describe: Callable[[int], Any],
    all_unavailable: np.ndarray | None = None,
    defer: bool = False,
) -> ChoiceWeights:
    """:func:`choice_weights` on arrays: ``probs`` ``(K, |A|)`` at ``states`` ``(K,)`` int64, whose choice for each
    action is ``choice_of`` ``(K, |A|)`` (-1: unavailable); ``choice_state`` ``(C,)`` the state of each choice, of
    ``num_states``. ``where(i)``: row ``i``'s state for messages; ``describe(s)``: state ``s``'s."""
    defer = defer and unavailable == Unavailable.RENORMALIZE
    p, stalled_mass = policy_weights(probs, choice_of >= 0, mode=mode, unavailable=unavailable, where=where, refuse=not defer)
    is_decision = np.zeros(num_states, dtype=bool)
    is_decision[states] = True
    # forced choices of states the policy is not asked about weigh 1; at decision states a choice
    # weighs pi(its action), and choices whose action the policy lacks weigh 0
    weights = np.where(is_decision[choice_state], 0.0, 1.0)
    chosen = choice_of >= 0
    weights[choice_of[chosen]] = p[chosen]
    stalled = np.zeros(num_states)
    stalled[states] = stalled_mass
    nothing = None
    if defer:
        nothing = np.zeros(num_states, dtype=bool)
        nothing[states] = stalled_mass > 0
    if all_unavailable is not None and all_unavailable.any():
        if unavailable == Unavailable.RENORMALIZE and not defer:
            refuse_all_unavailable(all_unavailable, where=describe)
        weights[all_unavailable[choice_state]] = 0.0
        stalled[all_unavailable] = 1.0
        if nothing is not None:
            nothing |= all_unavailable
    return ChoiceWeights(weights=weights, stalled=stalled, decision_states=states, nothing=nothing)


def ask_policy(model: ExplicitModel, policy: Policy, states: np.ndarray) -> tuple[np.ndarray, float]:
    """The policy's distributions ``(K, |A|)`` float64 at ``states`` ``(K,)`` of ``model``: one batched call on
    their features, validated (:func:`~rlverify.policies.base.validate_probabilities`); and the call's seconds."""
    features = model.feature_matrix(policy.features, states) if len(states) else None
    return ask_features(policy, features, len(states))


def ask_features(policy: Policy, features: np.ndarray | None, n: int) -> tuple[np.ndarray, float]:
    """The policy's distributions ``(n, |A|)`` float64 at ``features`` ``(n, d)`` float64 (None when ``n`` is 0): one
    batched call, validated; and the call's seconds."""
    t = time.perf_counter()
    if n:
        assert features is not None
        probs = np.asarray(policy.action_probabilities(features), dtype=np.float64)
    else:
        probs = np.zeros((0, len(policy.actions)))
    seconds = time.perf_counter() - t
    if not isinstance(policy, BasePolicy):  # the adapters validate their output themselves
        validate_probabilities(probs, n, len(policy.actions), source=getattr(policy, "name", "policy"))
    return probs, seconds


def weigh(
    model: ExplicitModel,
    policy: Policy,
    *,
    mode: str,
    unavailable: str,
    table: ChoiceTable | None = None,
    all_unavailable: np.ndarray | None = None,
    defer: bool = False,
    ask: Callable[[ExplicitModel, Policy, np.ndarray], tuple[np.ndarray, float]] | None = None,
) -> tuple[ChoiceWeights, ChoiceTable, float]:
    """The policy's weight on every choice of ``model``: the policy asked once on every decision state
    (:func:`ask_policy`, or ``ask``: distributions already asked), its distributions applied to the choices
    (:func:`choice_weights`, same arguments).

    Returns the weights, the choice table (``table``, or :func:`~rlverify.models.dynamics.choice_table` built here:
    it refuses choices no policy can pick before the policy is asked) and the seconds spent in the policy.
    """
    table = choice_table(model, policy.actions) if table is None else table
    states = np.flatnonzero(table.decision)
    probs, seconds = (ask_policy if ask is None else ask)(model, policy, states)
    cw = choice_weights(
        model,
        policy,
        probs,
        states,
        mode=mode,
        unavailable=unavailable,
        all_unavailable=all_unavailable,
        table=table,
        defer=defer,
    )
    return cw, table, seconds


#: choices whose weights are expanded to their entries at a time (bounds the temporary arrays)
_CHOICE_CHUNK = 1 << 20


def induced_chain(model: ExplicitModel, cw: ChoiceWeights, *, consume: bool = False) -> tuple[ExplicitModel, np.ndarray]:
    """The reachable induced DTMC and the original index of each of its states (sink: -1).

    Choices with weight 0 are dropped; parallel transitions to the same successor are merged.
    A ``stalled`` sink state is added only when stalled mass is reachable. The chain's CSR arrays
    are built in place from the MDP's (each state's choices are consecutive rows: scaling their
    entries by the choice weights and summing duplicate columns gives the state's row), so the
    only big copies are of the MDP's transition arrays (none with ``consume=True``: the MDP's
    arrays become the chain's and ``model.transitions`` is set to None) and, when some states are
    unreachable under the policy, the reachable part.
    """
    S = model.num_states
    M = _weighted_rows(model, cw, consume)
    reach = np.flatnonzero(reachable(M, None, model.initial_states))
    if cw.nothing is not None and cw.nothing[reach].any():
        refuse_all_unavailable(cw.nothing[reach], where=lambda i: model.valuation_dict(int(reach[i])))
    stalled = cw.stalled[reach]
    cut = Cut(reach, bool(stalled.sum() > 0), S)
    sub = M if len(reach) == S else M[reach][:, reach]
    del M
    sub.sort_indices()
    if cut.has_sink:
        sub = _with_sink_column(sub, stalled)
    _check_rows(sub)
    parts = cut.parts(model)
    chain = ExplicitModel(
        model_type="dtmc",
        row_groups=np.arange(cut.size + 1, dtype=np.int64),
        transitions=sub,
        choice_actions=np.zeros(cut.size, dtype=np.int32),
        action_names=("",),
        variables=model.variables,
        valuations=parts.valuations,
        initial_states=cut.index()[model.initial_states],
        labels=parts.labels,
        label_aliases=parts.label_aliases,
        state_rewards=_state_rewards(model, cw, cut),
        choice_rewards={},
        valuation_bytes=parts.valuation_bytes,
        valuation_spec=model.valuation_spec,
    )
    return chain, cut.origin()


def _weighted_rows(model: ExplicitModel, cw: ChoiceWeights, consume: bool) -> sp.csr_matrix:
    """``(S, S)`` CSR: each state's choices scaled by their weights and merged (in place on copies of the MDP's
    arrays, or on the MDP's own with ``consume``), zeros removed."""
    S = model.num_states
    T = model.transitions
    data = T.data if consume else T.data.copy()
    indices = T.indices if consume else T.indices.copy()
    if consume:  # the arrays now belong to the chain: make later use of the MDP's matrix fail loudly
        object.__setattr__(model, "transitions", None)
    per_choice = np.diff(T.indptr)
    for lo in range(0, len(per_choice), _CHOICE_CHUNK):  # data[entries of c] *= weight[c], chunk by chunk
        hi = min(lo + _CHOICE_CHUNK, len(per_choice))
        data[T.indptr[lo] : T.indptr[hi]] *= np.repeat(cw.weights[lo:hi], per_choice[lo:hi])
    M = sp.csr_matrix((data, indices, T.indptr[model.row_groups].astype(indices.dtype)), shape=(S, S), copy=False)
    del T, data, indices
    M.sum_duplicates()  # sorts each row's columns and merges parallel transitions (in place)
    M.eliminate_zeros()  # choices of weight 0
    return M


def _with_sink_column(sub: sp.csr_matrix, stalled: np.ndarray) -> sp.csr_matrix:
    """``(n+1, n+1)``: ``sub`` ``(n, n)`` (sorted rows) with the stalled mass ``(n,)`` in a last column (after every
    row's sorted columns) and the sink's self-loop."""
    n = sub.shape[0]
    rows = np.flatnonzero(stalled > 0)
    at = sub.indptr[rows + 1]
    indices = np.append(np.insert(sub.indices, at, n), n).astype(sub.indices.dtype)
    data = np.append(np.insert(sub.data, at, stalled[rows]), 1.0)
    added = np.zeros(n + 1, dtype=np.int64)
    added[rows + 1] = 1
    indptr = np.append(sub.indptr + np.cumsum(added), len(indices))
    return sp.csr_matrix((data, indices, indptr.astype(indices.dtype)), shape=(n + 1, n + 1), copy=False)


def _check_rows(sub: sp.csr_matrix) -> None:
    """Refuse (internal error) a chain row that does not sum to 1.

    Storm would not notice missing mass (its graph analysis ignores it); the MDP's own rows may be off by rounding
    (e.g. 3 x 0.3333333), which Storm accepted when it built the model."""
    row_sums = sub @ np.ones(sub.shape[0])
    if np.abs(row_sums - 1.0).max(initial=0.0) > 1e-6:
        bad = int(np.argmax(np.abs(row_sums - 1.0)))
        raise AssertionError(f"internal: induced chain row {bad} sums to {row_sums[bad]!r}")


def _state_rewards(model: ExplicitModel, cw: ChoiceWeights, cut: Cut) -> dict[str, np.ndarray]:
    """Each reward model's state rewards on the chain: the state's own plus its choices' weighted by the policy."""
    S = model.num_states
    cs = model.choice_states()
    rewards = {}
    names = set(model.state_rewards) | set(model.choice_rewards)
    for name in names:
        r = np.zeros(S)
        if name in model.state_rewards:
            r += model.state_rewards[name]
        if name in model.choice_rewards:
            r += np.bincount(cs, weights=cw.weights * model.choice_rewards[name], minlength=S)
        rewards[name] = cut.values(r)
    return rewards
