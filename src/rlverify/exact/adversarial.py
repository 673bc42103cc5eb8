"""The adversarial MDP of observation perturbations: the integer perturbations within the budget, the FGSM baseline,
one policy call over every (decision state, perturbation) pair, and the MDP whose choices are the distinct
distributions the policy gives a state over its admissible observations (cut to the reachable states plus the
``stalled`` sink)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rlverify.errors import OptionError, PolicyError, did_you_mean
from rlverify.exact.cut import Cut, sink_loop
from rlverify.exact.robust_options import MAX_OFFSETS, NORMS, RobustnessOptions, choose_among
from rlverify.models.dynamics import ChoiceTable, policy_weights
from rlverify.models.explicit import ExplicitModel, memory_guard
from rlverify.models.graph import reachable
from rlverify.models.summary import summarize
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy, validate_probabilities
from rlverify.policies.formats import softmax

__all__ = [
    "SHRINK",
    "Pairs",
    "Perturbed",
    "adversarial_mdp",
    "feature_ranges",
    "fgsm",
    "offsets",
    "pair_bytes",
    "perturbation_pairs",
    "perturbed_features",
]


def offsets(epsilon: int, m: int, norm: str) -> np.ndarray:
    """``(P, m)`` int64 integer vectors of L∞ (``linf``) or L1 (``l1``) norm <= ``epsilon``; row 0 is zero.

    Rows are ordered by norm, then lexicographically.

    Raises:
        OptionError: more than :data:`MAX_OFFSETS` vectors.
    """
    choose_among("norm", norm, NORMS)
    if (2 * epsilon + 1) ** m > MAX_OFFSETS:
        raise OptionError(
            f"--epsilon {epsilon} on {m} features gives up to {(2 * epsilon + 1) ** m:,} perturbations "
            f"per state (limit {MAX_OFFSETS:,}): perturb fewer features (--perturb) or lower epsilon"
        )
    grid = np.array(list(itertools.product(range(-epsilon, epsilon + 1), repeat=m)), dtype=np.int64).reshape(-1, m)
    size = np.abs(grid).max(axis=1, initial=0) if norm == "linf" else np.abs(grid).sum(axis=1)
    grid = grid[size <= epsilon]
    size = size[size <= epsilon]
    order = np.lexsort((*grid.T[::-1], size))
    return grid[order]


def feature_ranges(model: SymbolicModel, features: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(d,)`` float64 lowest and highest declared value of each feature (booleans 0..1; NaN where unknown).

    Read as ``rlverify inspect`` reads them (:func:`rlverify.models.summary.summarize`).
    """
    declared = {v["name"]: v for v in summarize(model, build=False)[0].variables}
    lo = np.array([np.nan if declared.get(f, {}).get("low") is None else declared[f]["low"] for f in features], float)
    hi = np.array([np.nan if declared.get(f, {}).get("high") is None else declared[f]["high"] for f in features], float)
    return lo, hi


def fgsm(
    policy: Policy, features: np.ndarray, epsilon: int, norm: str, columns: np.ndarray, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """One gradient-sign perturbation per row: ``(N, d)`` perturbed features (integers, clipped).

    The gradient of the cross-entropy loss of the network's own argmax action (for ``logits``; of
    minus that action's output otherwise) with respect to the input, through the policy's ReLU
    network (:meth:`~rlverify.policies.BasePolicy.network`). ``linf``: every feature in ``columns``
    moves ``epsilon`` along the gradient's sign; ``l1``: the one with the largest gradient does.

    Raises:
        PolicyError: the policy has no readable network.
    """
    network = getattr(policy, "network", None)
    if network is None:
        raise PolicyError(
            f"{getattr(policy, 'name', 'policy')}: the FGSM attack needs a ReLU network policy (ONNX, TorchScript, SB3)"
        )
    mlp = network()
    x = np.asarray(features, dtype=np.float64)
    h, masks = x, []
    for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases, strict=True)):
        h = h @ w.T + b
        if i < len(mlp.weights) - 1:
            masks.append(h > 0)
            h = np.maximum(h, 0.0)
    chosen = np.argmax(h, axis=1)
    onehot = np.zeros_like(h)
    onehot[np.arange(len(h)), chosen] = 1.0
    g = softmax(h) - onehot if getattr(policy, "output", None) in (None, "logits") else -onehot
    for i in range(len(mlp.weights) - 1, -1, -1):
        g = g @ mlp.weights[i]
        if i > 0:
            g = g * masks[i - 1]
    step = np.zeros_like(x)
    gc = g[:, columns]
    if norm == "linf":
        step[:, columns] = epsilon * np.sign(gc)
    else:
        j = np.argmax(np.abs(gc), axis=1)
        rows = np.arange(len(x))
        step[rows, columns[j]] = epsilon * np.sign(gc[rows, j])
    out = x.copy()  # only the perturbed columns move (and are clipped: others may have no declared range)
    out[:, columns] = np.clip(np.rint(x[:, columns] + step[:, columns]), low[columns], high[columns])
    return out


#: what makes the adversarial MDP smaller
SHRINK = (
    "perturb fewer features (--perturb F1,F2), lower --epsilon, use --norm l1 (fewer perturbations per state), "
    "or verify a smaller model (constants); or raise --max-memory"
)


def pair_bytes(features: int, perturbed: int, actions: int, row: float) -> float:
    """Estimated peak bytes per (state, perturbation) pair: the perturbed observations and their sorted copies
    (``4 x features`` float64), offsets, indices and keys (~8 int64), the policy's distribution (``actions``
    float64) and the pair's row of the adversarial MDP (``row`` transitions, ~3 copies of 16 bytes while built)."""
    return 8.0 * (4 * features + perturbed + 8 + actions) + 48.0 * row


@dataclass(frozen=True)
class Perturbed:
    """The features the adversary may change: the policy's features, the perturbed ``columns`` among them and each
    feature's declared range ``(low, high)`` (``(d,)`` float64 each)."""

    features: tuple[str, ...]
    columns: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class Pairs:
    """Every (decision state, perturbation) pair and the policy's distribution at each distinct observation.

    ``states`` ``(K,)`` the MDP's decision states; ``D`` ``(P, m)`` the perturbations; ``unique`` the distinct
    observations (pairs, then the FGSM ones) and ``probs`` the policy's distribution at each; ``pair_obs`` ``(K, P)``
    each pair's observation; ``pair_k``, ``pair_j`` ``(N,)``: the pairs that give a state a distinct distribution
    (one adversarial choice each, the nominal first); ``attack`` ``(K,)`` each state's FGSM observation (or None);
    ``changed`` ``(K,)``: some perturbation changes the argmax action.
    """

    states: np.ndarray
    D: np.ndarray
    unique: np.ndarray
    probs: np.ndarray
    pair_obs: np.ndarray
    pair_k: np.ndarray
    pair_j: np.ndarray
    attack: np.ndarray | None
    changed: np.ndarray
    policy_seconds: float


def perturbed_features(model: SymbolicModel, policy: Policy, options: RobustnessOptions) -> Perturbed:
    """The perturbed features, checked: the policy's, each with a constant declared range to clip to."""
    features = tuple(policy.features)
    perturbed = tuple(features) if options.perturb is None else tuple(options.perturb)
    for f in perturbed:
        if f not in features:
            raise OptionError(
                f"--perturb: '{f}' is not a feature of the policy{did_you_mean(f, features)} (features: {', '.join(features)})"
            )
    columns = np.array([features.index(f) for f in dict.fromkeys(perturbed)], dtype=np.int64)
    low, high = feature_ranges(model, features)
    unknown = [features[c] for c in columns if np.isnan(low[c]) or np.isnan(high[c])]
    if unknown:
        raise OptionError(
            f"--perturb: feature(s) {', '.join(unknown)} have no constant declared range to clip to; "
            "leave them out of --perturb"
        )
    return Perturbed(features=features, columns=columns, low=low, high=high)


def perturbation_pairs(
    mdp: ExplicitModel, table: ChoiceTable, policy: Policy, perturbed: Perturbed, options: RobustnessOptions, notes: list[str]
) -> Pairs:
    """Every (decision state, perturbation) pair, and the FGSM observation of each state: one policy call."""
    columns, low, high = perturbed.columns, perturbed.low, perturbed.high
    states = np.flatnonzero(table.decision)
    K = len(states)
    x = mdp.feature_matrix(perturbed.features, states)
    D = offsets(int(options.epsilon), len(columns), options.norm)
    P = len(D)
    row = mdp.num_transitions / max(mdp.num_choices, 1)
    memory_guard(
        options.max_memory,
        "perturb",
        states=K,
        transitions=K * P,
        what="(state, perturbation) pairs",
        extra=int(K * P * pair_bytes(len(perturbed.features), len(columns), len(policy.actions), row)),
        advice=f"{P:,} perturbations per state ({options.norm} epsilon {options.epsilon} on "
        f"{len(columns)} features) x {K:,} decision states; " + SHRINK,
    )
    obs = np.repeat(x, P, axis=0)
    obs[:, columns] += np.tile(D, (K, 1))
    obs[:, columns] = np.clip(obs[:, columns], low[columns], high[columns])
    attack_obs = None
    if options.attack and K:
        try:
            attack_obs = fgsm(policy, x, int(options.epsilon), options.norm, columns, low, high)
        except PolicyError as exc:
            notes.append(f"no FGSM baseline: {str(exc).splitlines()[0]}")
    everything = obs if attack_obs is None else np.vstack([obs, attack_obs])
    if len(everything):
        unique, inverse = np.unique(everything, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
    else:
        unique, inverse = everything, np.zeros(0, dtype=np.int64)
    tp = time.perf_counter()
    probs = (
        np.asarray(policy.action_probabilities(unique), dtype=np.float64)
        if len(unique)
        else np.zeros((0, len(policy.actions)))
    )
    policy_seconds = time.perf_counter() - tp
    validate_probabilities(probs, len(unique), len(policy.actions), source=getattr(policy, "name", "policy"))
    pair_obs = inverse[: K * P].reshape(K, P)
    pair_k, pair_j = _distinct_choices(probs, pair_obs, K, P)
    argmax = np.argmax(probs, axis=1) if len(probs) else np.zeros(0, dtype=np.int64)
    changed = (argmax[pair_obs] != argmax[pair_obs[:, :1]]).any(axis=1) if K else np.zeros(0, dtype=bool)
    return Pairs(
        states=states,
        D=D,
        unique=unique,
        probs=probs,
        pair_obs=pair_obs,
        pair_k=pair_k,
        pair_j=pair_j,
        attack=None if attack_obs is None else inverse[K * P :],
        changed=changed,
        policy_seconds=policy_seconds,
    )


def _distinct_choices(probs: np.ndarray, pair_obs: np.ndarray, K: int, P: int) -> tuple[np.ndarray, np.ndarray]:
    """``(pair_k, pair_j)``: one pair per distinct distribution per state, state-major, each state's nominal first."""
    if len(probs):
        _, dist_of_obs = np.unique(probs, axis=0, return_inverse=True)
        dist_of_obs = dist_of_obs.reshape(-1)
    else:
        dist_of_obs = np.zeros(0, dtype=np.int64)
    pair_dist = dist_of_obs[pair_obs] if K else np.zeros((0, P), dtype=np.int64)
    keys = np.arange(K)[:, None] * (int(dist_of_obs.max(initial=0)) + 1) + pair_dist
    _, first = np.unique(keys.reshape(-1), return_index=True)
    first = np.sort(first)  # state-major, then by perturbation order: each state's nominal choice first
    return first // P, first % P


def adversarial_mdp(
    mdp: ExplicitModel,
    table: ChoiceTable,
    states: np.ndarray,
    probs: np.ndarray,
    pair_k: np.ndarray,
    options: RobustnessOptions,
) -> tuple[ExplicitModel, np.ndarray, np.ndarray]:
    """The MDP whose choices in decision state ``states[pair_k[i]]`` are the distributions ``probs[i]``.

    Args:
        probs: ``(N, A)`` one distinct policy distribution per (state, choice) pair, grouped by state.
        pair_k: ``(N,)`` int64 index into ``states`` of each pair, non-decreasing.

    Returns the reachable MDP (plus a ``stalled`` sink where stalled mass is reachable), the MDP state
    of each of its states (sink: -1) and, per choice, its pair index (-1: a forced choice).
    """
    S = mdp.num_states
    s_of_pair = states[pair_k]
    choice_of = table.choice_of[s_of_pair]
    try:
        p, stalled = policy_weights(
            probs,
            choice_of >= 0,
            mode=options.mode,
            unavailable=options.unavailable,
            where=lambda i: mdp.valuation_dict(int(s_of_pair[i])),
        )
    except PolicyError as exc:  # at an observation the adversary shows, not at the state's own
        raise PolicyError(
            f"{exc} — at an observation the adversary may show there (the nominal one is fine "
            "if verify answers); with --unavailable renormalize every admissible observation must put "
            "some mass on an available action: use stall, or a smaller --epsilon/--perturb"
        ) from None
    keep = (choice_of >= 0) & (p > 0)
    rows_i, cols_a = np.nonzero(keep)
    W = sp.csr_matrix(
        (p[rows_i, cols_a], (rows_i, choice_of[rows_i, cols_a].astype(np.int64))), shape=(len(probs), mdp.num_choices)
    )
    T = mdp.transitions.tocsr()
    with_sink = sp.csr_matrix((T.data, T.indices, T.indptr), shape=(T.shape[0], S + 1))  # column S: the sink
    dec_rows = (W @ with_sink).tocsr()
    if stalled.any():
        at = np.flatnonzero(stalled)
        dec_rows = (dec_rows + sp.csr_matrix((stalled[at], (at, np.full(len(at), S))), shape=dec_rows.shape)).tocsr()
    forced_states = np.flatnonzero(~table.decision)
    forced_rows = with_sink[table.forced[forced_states].astype(np.int64)]
    owner = np.r_[s_of_pair, forced_states]
    pair = np.r_[np.arange(len(probs)), np.full(len(forced_states), -1)]
    order = np.argsort(owner, kind="stable")  # each state's nominal pair stays first
    rows = sp.vstack([dec_rows, forced_rows], format="csr")[order]
    owner, pair = owner[order], pair[order]
    rows.eliminate_zeros()
    groups = np.r_[0, np.cumsum(np.bincount(owner, minlength=S))]
    cut = Cut.of(reachable(rows, groups, mdp.initial_states), S)
    reach, has_sink, n = cut.reach, cut.has_sink, len(cut.reach)
    new_index = cut.index()
    in_reach = new_index[owner] >= 0
    if n == S:  # every state reached: the columns stay (the sink's, S, only where it is reached)
        sub = rows[in_reach]
        if not has_sink:
            sub = sp.csr_matrix((sub.data, sub.indices, sub.indptr), shape=(sub.shape[0], S))
    else:
        sub = rows[in_reach][:, np.r_[reach, S] if has_sink else reach].tocsr()
    counts = np.bincount(new_index[owner[in_reach]], minlength=n)
    pair = pair[in_reach]
    if has_sink:
        sub = sink_loop(sub)
        counts = np.r_[counts, 1]
        pair = np.r_[pair, -1]
    sub.sort_indices()
    row_sums = np.asarray(sub.sum(axis=1)).ravel()
    if np.abs(row_sums - 1.0).max(initial=0.0) > 1e-6:
        raise AssertionError(f"internal: adversarial MDP row sums to {row_sums[np.argmax(np.abs(row_sums - 1))]!r}")
    adv = _restricted(mdp, cut, np.r_[0, np.cumsum(counts)].astype(np.int64), sub)
    return adv, cut.origin(), pair


def _restricted(mdp: ExplicitModel, cut: Cut, row_groups: np.ndarray, transitions: sp.csr_matrix) -> ExplicitModel:
    """``mdp``'s labels and valuations on the cut's states (plus a ``stalled`` sink) around new transitions (an
    MDP's: ``row_groups`` its choices)."""
    parts = cut.parts(mdp)
    C = transitions.shape[0]
    return ExplicitModel(
        model_type="mdp",
        row_groups=row_groups,
        transitions=transitions,
        choice_actions=np.zeros(C, dtype=np.int32),
        action_names=("",),
        variables=mdp.variables,
        valuations=parts.valuations,
        initial_states=cut.index()[mdp.initial_states],
        labels=parts.labels,
        label_aliases=parts.label_aliases,
        valuation_bytes=parts.valuation_bytes,
        valuation_spec=mdp.valuation_spec,
    )
