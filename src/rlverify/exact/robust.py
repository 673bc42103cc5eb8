"""How far a policy's value moves: under perturbed observations (exact) and under model error (interval chains).

**Observation perturbations** (:func:`robustness`). An adversary shows the policy, in each state,
an observation within an integer L∞ or L1 distance ``epsilon`` of the true one (only the features
in ``perturb``; each clipped to its variable's declared range). The policy's distribution at the
shown observation is applied to the *real* state's choices (mass on unavailable actions stalls or
is renormalised, as in the nominal engine). The worst case over every adversary is exactly Pmax (the
best case Pmin) of the MDP whose choices in a state are the distinct distributions the policy gives
over the admissible observations (memoryless deterministic adversaries suffice for unbounded
reachability; for step-bounded properties the optimum may depend on the step, as Pmax does); it is built
from one batched policy call over all (state, perturbation) pairs and checked by Storm. A gradient-
sign (FGSM) attack, one perturbation per state, is the baseline from the literature: its chain's
value lies between Pmin and Pmax.

**Model error** (:func:`model_error_bounds`). Each MDP transition probability ``p`` is known only
within ``p ± delta`` (or ``p (1 ± delta)``), clipped to [0, 1], on the transitions that exist (the
support is known). The induced chain's row ``sum_a pi(a|s) T(s, a, .)`` then lies in the interval
row ``[sum_a pi lo, sum_a pi hi]`` (a sound relaxation of independent per-action uncertainty), rounded
outwards; :func:`robust_reachability` gives a certified lower bound of the min and upper bound of the max of the
property over every chain in it, widened to the nominal value's certified bracket.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from rlverify.errors import IntervalError, OptionError, PolicyError, PropertyError, did_you_mean
from rlverify.exact.chain import FullMDP, PolicyChain, chain_for, mdp_for, on_chain, policy_chain
from rlverify.exact.checking import (
    MAX_WORK,
    CheckOutcome,
    is_reward_bounded,
    quantitative,
    rounded_down,
    rounded_up,
    sum_margin,
    verdict,
)
from rlverify.exact.induced import STALLED_LABEL, choice_weights, induced_chain
from rlverify.exact.optimum import mdp_optimum
from rlverify.exact.options import MODES, ExactOptions, Progress, guarantee, provenance
from rlverify.exact.verify import verify_exact
from rlverify.models.dynamics import UNAVAILABLE, ChoiceTable, choice_table, policy_weights
from rlverify.models.explicit import ExplicitModel, memory_guard, out_of_memory, to_storm
from rlverify.models.numerics import NUMERICS, environment
from rlverify.models.properties import ASSUMED_BAD_EVENT, Property, worst_case
from rlverify.models.storm import truth_values
from rlverify.models.summary import summarize
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.adapters import softmax
from rlverify.policies.base import Policy, validate_probabilities
from rlverify.results import IntervalResult, RobustnessResult

log = logging.getLogger(__name__)

NORMS = ("linf", "l1")
#: the most perturbation vectors enumerated per state
MAX_OFFSETS = 1_000_000
#: path operators of the probability properties these analyses check
PATHS = ("F", "U", "G", "X", "W")


@dataclass(frozen=True)
class RobustnessOptions:
    """Settings of :func:`robustness`.

    Attributes:
        epsilon: integer budget (features are integers or booleans): the L∞ or L1 distance between
            the true and the shown observation, in feature units.
        norm: ``linf`` (each perturbed feature moves by at most ``epsilon``) or ``l1`` (the moves sum
            to at most ``epsilon``).
        perturb: the features the adversary may change (None: all of the policy's features).
        worst: which optimum is the worst case, ``max`` or ``min``; None: ``min`` for a lower-bound
            threshold (``P>=b``), else ``max`` (the property names a failure).
        mode, unavailable: as in :class:`~rlverify.exact.ExactOptions` (the nominal engine's semantics).
        attack: also run the FGSM baseline (network policies only).
        numerics, precision, max_states: as in :class:`~rlverify.exact.ExactOptions`.
        max_memory: refuse before the (state, perturbation) pairs are enumerated when their estimated memory
            (:func:`pair_bytes` each) exceeds this; None: the default guard (80% of the machine's memory).
    """

    epsilon: int = 1
    norm: str = "linf"
    perturb: tuple[str, ...] | None = None
    worst: str | None = None
    mode: str = "stochastic"
    unavailable: str = "stall"
    attack: bool = True
    numerics: str = "sound"
    precision: float = 1e-6
    max_states: int | None = 2_000_000
    max_memory: int | None = None

    def validate(self) -> None:
        if self.max_memory is not None and self.max_memory <= 0:
            raise OptionError(f"--max-memory: expected a positive size, got {self.max_memory}")
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, np.integer)) or self.epsilon < 0:
            raise OptionError(f"--epsilon: expected a non-negative integer (the features are integers), got {self.epsilon!r}")
        _choose("norm", self.norm, NORMS)
        _choose("mode", self.mode, MODES[:2])
        _choose("unavailable", self.unavailable, UNAVAILABLE)
        _choose("numerics", self.numerics, NUMERICS)
        if self.worst is not None:
            _choose("worst", self.worst, ("max", "min"))
        if not (0 < self.precision < 1):
            raise OptionError(f"--precision: expected a number in (0, 1), got {self.precision}")


@dataclass(frozen=True)
class ModelErrorOptions:
    """Settings of :func:`model_error_bounds`.

    Attributes:
        delta: the error of every transition probability ``p`` of the MDP: ``p ± delta`` (absolute),
            or ``p (1 ± delta)`` with ``relative``; intervals are clipped to [0, 1].
        actions: only the choices of these action labels or command names are uncertain (None: all).
        mode, unavailable, max_states: as in :class:`~rlverify.exact.ExactOptions`.
        precision: of Storm's robust value iteration (unbounded properties; step-bounded ones are
            computed by k exact steps).
    """

    delta: float = 0.01
    relative: bool = False
    actions: tuple[str, ...] | None = None
    mode: str = "stochastic"
    unavailable: str = "stall"
    precision: float = 1e-10
    max_states: int | None = 2_000_000

    def validate(self) -> None:
        if isinstance(self.delta, bool) or not isinstance(self.delta, (int, float)) or not (0 <= self.delta < np.inf):
            raise OptionError(f"--delta: expected a non-negative number, got {self.delta!r}")
        if not self.relative and self.delta >= 1:
            raise OptionError(
                f"--delta {self.delta}: an absolute error of 1 or more says nothing about any "
                "probability (every interval is [0, 1])"
            )
        _choose("mode", self.mode, MODES[:2])
        _choose("unavailable", self.unavailable, UNAVAILABLE)
        if not (0 < self.precision < 1):
            raise OptionError(f"--precision: expected a number in (0, 1), got {self.precision}")


def _choose(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise OptionError(f"--{name}: expected one of {', '.join(allowed)}, got '{value}'")


# ---------------------------------------------------------------------------------------------
# observation perturbations


def offsets(epsilon: int, m: int, norm: str) -> np.ndarray:
    """``(P, m)`` int64 integer vectors of L∞ (``linf``) or L1 (``l1``) norm <= ``epsilon``; row 0 is zero.

    Rows are ordered by norm, then lexicographically.

    Raises:
        OptionError: more than :data:`MAX_OFFSETS` vectors.
    """
    _choose("norm", norm, NORMS)
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
    g = softmax(h) - onehot if getattr(policy, "output", "logits") == "logits" else -onehot
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
        raise out_of_memory("the robustness analysis", _SHRINK) from None


#: what makes the adversarial MDP smaller
_SHRINK = (
    "perturb fewer features (--perturb F1,F2), lower --epsilon, use --norm l1 (fewer perturbations per state), "
    "or verify a smaller model (constants); or raise --max-memory"
)


def pair_bytes(features: int, perturbed: int, actions: int, row: float) -> float:
    """Estimated peak bytes per (state, perturbation) pair: the perturbed observations and their sorted copies
    (``4 x features`` float64), offsets, indices and keys (~8 int64), the policy's distribution (``actions``
    float64) and the pair's row of the adversarial MDP (``row`` transitions, ~3 copies of 16 bytes while built)."""
    return 8.0 * (4 * features + perturbed + 8 + actions) + 48.0 * row


@dataclass(frozen=True)
class _Perturbed:
    """The features the adversary may change: the policy's features, the perturbed ``columns`` among them and each
    feature's declared range ``(low, high)`` (``(d,)`` float64 each)."""

    features: tuple[str, ...]
    columns: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class _Pairs:
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
    _check_input(prop, policy)
    chain, full, table = _nominal_and_mdp(model, prop, policy, _exact_options(options), given, mdp, say)
    timings["build"] = time.perf_counter() - t0
    perturbed = _perturbed(model, policy, options)
    worst, assumed = worst_case(prop, options.worst)
    notes: list[str] = list(prop.notes) + ([ASSUMED_BAD_EVENT] if assumed else [])
    t = time.perf_counter()
    pairs = _pairs(full, table, policy, perturbed, options, notes)
    timings["policy"] = pairs.policy_seconds
    adv, origin, row_pair = _adversarial_mdp(
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
    if chain.strategy == "full" and chain.source is not None and chain.table is not None:
        return chain, chain.source, chain.table
    full = mdp_for(model, prop, exact, mdp, policy=policy, progress=say).mdp
    return chain, full, choice_table(full, policy.actions)


def _perturbed(model: SymbolicModel, policy: Policy, options: RobustnessOptions) -> _Perturbed:
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
    return _Perturbed(features=features, columns=columns, low=low, high=high)


def _pairs(
    mdp: ExplicitModel, table: ChoiceTable, policy: Policy, perturbed: _Perturbed, options: RobustnessOptions, notes: list[str]
) -> _Pairs:
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
        f"{len(columns)} features) x {K:,} decision states; " + _SHRINK,
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
    return _Pairs(
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
    pairs: _Pairs,
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
    pairs: _Pairs,
    perturbed: _Perturbed,
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


def _adversarial_mdp(
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
    reach, has_sink = _reachable(rows, owner, S, mdp.initial_states)
    n = len(reach)
    new_index = np.full(S + 1, -1, dtype=np.int64)
    new_index[reach] = np.arange(n)
    if has_sink:
        new_index[S] = n
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
        sub = sp.vstack([sub, sp.csr_matrix(([1.0], ([0], [n])), shape=(1, n + 1))], format="csr")
        counts = np.r_[counts, 1]
        pair = np.r_[pair, -1]
    sub.sort_indices()
    row_sums = np.asarray(sub.sum(axis=1)).ravel()
    if np.abs(row_sums - 1.0).max(initial=0.0) > 1e-6:
        raise AssertionError(f"internal: adversarial MDP row sums to {row_sums[np.argmax(np.abs(row_sums - 1))]!r}")
    adv = _restricted(mdp, reach, has_sink, "mdp", np.r_[0, np.cumsum(counts)].astype(np.int64), sub, new_index)
    origin = np.r_[reach, [-1]] if has_sink else reach
    return adv, origin, pair


def _reachable(rows: sp.csr_matrix, owner: np.ndarray, S: int, initial: np.ndarray) -> tuple[np.ndarray, bool]:
    """The states reachable (through any choice) from the initial states, sorted, and whether the sink (column
    ``S`` of ``rows``, whose row ``i`` is a choice of state ``owner[i]``) is."""
    m = rows.shape[0]
    per_state = sp.csr_matrix((np.ones(m), (owner, np.arange(m))), shape=(S + 1, m))
    pattern = sp.csr_matrix((np.ones(rows.nnz), rows.indices, rows.indptr), shape=(m, S + 2))  # stored: nonzero
    root = sp.csr_matrix((np.ones(len(initial)), (np.zeros(len(initial), dtype=np.int64), initial)), shape=(1, S + 2))
    graph = sp.vstack([per_state @ pattern, root], format="csr")  # (S+2, S+2): row S (the sink) empty, S+1 the root
    reached = breadth_first_order(graph, S + 1, directed=True, return_predecessors=False)
    return np.sort(reached[reached < S]), bool((reached == S).any())


def _restricted(
    mdp: ExplicitModel,
    reach: np.ndarray,
    has_sink: bool,
    model_type: str,
    row_groups: np.ndarray,
    transitions: sp.csr_matrix,
    new_index: np.ndarray,
) -> ExplicitModel:
    """``mdp``'s labels and valuations on ``reach`` (plus a ``stalled`` sink) around new transitions."""
    n = len(reach)
    labels = {k: (np.r_[m[reach], [False]] if has_sink else m[reach]) for k, m in mdp.labels.items()}
    aliases = dict(mdp.label_aliases)
    vals = mdp.valuations[reach]
    vbytes = mdp.valuation_bytes[reach] if mdp.valuation_bytes is not None else None
    if has_sink:
        labels[STALLED_LABEL] = np.r_[np.zeros(n, dtype=bool), [True]]
        aliases[STALLED_LABEL] = STALLED_LABEL
        vals = np.vstack([vals, np.zeros((1, vals.shape[1]), dtype=vals.dtype)])
        if vbytes is not None:
            vbytes = np.vstack([vbytes, np.zeros((1, vbytes.shape[1]), dtype=np.uint8)])
    C = transitions.shape[0]
    return ExplicitModel(
        model_type=model_type,
        row_groups=row_groups,
        transitions=transitions,
        choice_actions=np.zeros(C, dtype=np.int32),
        action_names=("",),
        variables=mdp.variables,
        valuations=vals,
        initial_states=new_index[mdp.initial_states],
        labels=labels,
        label_aliases=aliases,
        valuation_bytes=vbytes,
        valuation_spec=mdp.valuation_spec,
    )


# ---------------------------------------------------------------------------------------------
# model error


def model_error_bounds(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ModelErrorOptions | None = None,
    *,
    chain: PolicyChain | None = None,
    mdp: FullMDP | None = None,
    progress: Progress | None = None,
) -> IntervalResult:
    """The property's range over every MDP whose transition probabilities are within ``delta`` of the model's.

    The induced chain becomes an interval chain (see the module docstring); its rows are checked
    for feasibility (each row: sum of lows <= 1 <= sum of highs) and :func:`robust_reachability` bounds the min from
    below and the max from above, rounded outwards; both are widened to the nominal value's certified bracket, so
    ``lower <= nominal <= upper`` by construction. A threshold's verdict (``satisfied``) follows from them alone.
    Returns an :class:`~rlverify.results.IntervalResult`.

    Args:
        model, prop, policy: a loaded model, its parsed probability property and the policy.
        options: :class:`ModelErrorOptions` (None: the defaults).
        chain: the policy's chain when already built with its MDP kept (``policy_chain(..., keep_mdp=True)``, or
            induced on a :class:`~rlverify.exact.chain.FullMDP`): the intervals are read from the MDP's choices it
            weighs; a chain without them is induced again. mdp: the property-directed MDP when already built.
    """
    options = ModelErrorOptions() if options is None else options
    try:
        return _model_error_bounds(model, prop, policy, options, chain, mdp, progress or (lambda msg: None))
    except MemoryError:
        raise out_of_memory(
            "the model-error analysis", "verify a smaller model (constants), restrict --uncertain, or use --mode deterministic"
        ) from None


def _model_error_bounds(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ModelErrorOptions,
    given: PolicyChain | None,
    mdp: FullMDP | None,
    say: Progress,
) -> IntervalResult:
    """Parse (done by the caller) -> the chain on the MDP -> its interval rows -> their min and max."""
    options.validate()
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    _check_input(prop, policy)
    exact = ExactOptions(
        mode=options.mode, unavailable=options.unavailable, precision=options.precision, max_states=options.max_states
    )
    built = _chain_on_mdp(model, prop, policy, exact, given, mdp, say)
    timings["build"] = time.perf_counter() - t0
    t = time.perf_counter()
    lo, hi, n_clipped = _intervals(model, built, options)
    _check_feasible(lo, hi, built.chain)
    timings["policy_and_induce"] = time.perf_counter() - t
    t = time.perf_counter()
    bounds, converged = _interval_bounds(model, prop, built.chain, lo, hi, options)
    nominal = verify_exact(model, prop, policy, exact, chain=built)
    # the nominal chain is one of the interval chain's: widening to its certified bracket keeps both bounds sound
    # and puts the nominal inside by construction (each bound alone is already certified); by 16 ulps more, so the
    # bracket of another build of the same chain (verify's strategy; its sums rounded in another order) is inside too
    lower = min(bounds[0], max(_NOMINAL_MARGIN[0] * (nominal.value if nominal.lower is None else nominal.lower), 0.0))
    upper = max(bounds[1], min(_NOMINAL_MARGIN[1] * (nominal.value if nominal.upper is None else nominal.upper), 1.0))
    satisfied = None
    if prop.threshold is not None and prop.comparison is not None:
        satisfied, _ = verdict(prop.threshold, prop.comparison, lower, upper)
    timings["check"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    notes, says = _interval_notes(prop, options, n_clipped, converged)
    chain, d = built.chain, options.delta
    recorded = {
        "mode": options.mode,
        "unavailable": options.unavailable,
        "max_states": options.max_states,
        "constants": model.constants,
    }
    return IntervalResult(
        delta=float(d),
        relative=options.relative,
        uncertain_actions=None if options.actions is None else tuple(options.actions),
        nominal=nominal.value,
        lower=lower,
        upper=upper,
        states=chain.num_states,
        transitions=chain.num_transitions,
        clipped=n_clipped,
        guarantee=says,
        precision=options.precision,
        provenance=provenance(model, prop, policy, timings=timings, settings=recorded, warnings=notes),
        satisfied=satisfied,
    )


def _interval_notes(prop: Property, options: ModelErrorOptions, n_clipped: int, converged: bool) -> tuple[list[str], str]:
    """The model-error result's notes, and what its bounds guarantee."""
    notes = list(prop.notes)
    if n_clipped:
        notes.append(
            f"{n_clipped} transition probabilities of the MDP choices the policy takes left [0, 1] at "
            f"delta={options.delta}{' (relative)' if options.relative else ''} and were clipped to it"
        )
    if not converged:
        notes.append(
            "the robust value iteration stopped at its iteration or work limit before converging: the bounds "
            "are sound but may be loose"
        )
    how = f"{prop.bound:,} steps" if prop.bound is not None else f"until no value moves by more than {options.precision:g}"
    return notes, (
        f"sound: rlverify's robust value iteration ({how}), every step rounded outwards (the lower bound iterated from "
        "below, the upper from above), widened to the nominal value's certified bracket"
    )


def _chain_on_mdp(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    exact: ExactOptions,
    given: PolicyChain | None,
    mdp: FullMDP | None,
    say: Progress,
) -> PolicyChain:
    """The policy's chain with the MDP it was induced on and its choices' weights: ``given`` when it kept them,
    else induced here on the full MDP (``mdp`` when given)."""
    if given is not None:
        given = chain_for(model, prop, policy, exact, given)
        if given.source is not None and given.weights is not None:
            return given
    return policy_chain(model, prop, policy, dataclasses.replace(exact, strategy="full"), mdp=mdp, keep_mdp=True, progress=say)


def _uncertain(model: SymbolicModel, mdp: ExplicitModel, actions: tuple[str, ...] | None) -> np.ndarray:
    """``(C,)`` bool: the choices whose probabilities are uncertain (``actions``: by label or command name)."""
    if actions is None:
        return np.ones(mdp.num_choices, dtype=bool)
    label = np.asarray(mdp.action_names, dtype=object)[mdp.choice_actions]
    names = set(label.tolist())
    if mdp.choice_commands is not None:
        command = np.asarray(mdp.command_names, dtype=object)[mdp.choice_commands]
        names |= set(command.tolist())
    else:
        command = np.full(mdp.num_choices, "", dtype=object)
    known = {n for n in names if n} | {c.name for c in model.commands} | {a for a in model.action_names if a}
    for a in actions:
        if a not in known:
            raise OptionError(
                f"--uncertain: '{a}' is neither an action label nor a command name of the model"
                f"{did_you_mean(a, sorted(known))}"
            )
    return np.isin(label, list(actions)) | np.isin(command, list(actions))


def _intervals(
    model: SymbolicModel, built: PolicyChain, options: ModelErrorOptions
) -> tuple[sp.csr_matrix, sp.csr_matrix, int]:
    """The interval rows ``(lo, hi)`` of the induced chain, and how many probabilities of taken choices were
    clipped to [0, 1]."""
    mdp, cw, origin = built.source, built.weights, built.origin
    assert mdp is not None and cw is not None
    T = mdp.transitions.tocsr()
    uncertain = _uncertain(model, mdp, options.actions)
    uncertain &= np.diff(T.indptr) > 1  # a choice with one successor goes there with probability 1 whatever delta
    branch_uncertain = np.repeat(uncertain, np.diff(T.indptr))
    d = options.delta
    raw_lo = np.where(branch_uncertain, T.data * (1 - d) if options.relative else T.data - d, T.data)
    raw_hi = np.where(branch_uncertain, T.data * (1 + d) if options.relative else T.data + d, T.data)
    lo_data, hi_data = np.clip(raw_lo, 0.0, 1.0), np.clip(raw_hi, 0.0, 1.0)
    clipped = (raw_lo < 0) | (raw_hi > 1)
    reached_choice = np.zeros(mdp.num_states, dtype=bool)
    reached_choice[origin[origin >= 0]] = True
    taken = np.repeat(reached_choice[mdp.choice_states()] & (cw.weights > 0), np.diff(T.indptr))
    T_lo = sp.csr_matrix((lo_data, T.indices, T.indptr), shape=T.shape)
    T_hi = sp.csr_matrix((hi_data, T.indices, T.indptr), shape=T.shape)
    lo, hi = _interval_rows(mdp, cw, T_lo, T_hi, origin)
    return lo, hi, int((clipped & taken).sum())


def _interval_bounds(
    model: SymbolicModel,
    prop: Property,
    chain: ExplicitModel,
    lo: sp.csr_matrix,
    hi: sp.csr_matrix,
    options: ModelErrorOptions,
) -> tuple[list[float], bool]:
    """A certified lower bound of the min and upper bound of the max of the property over the interval chain (inside
    [0, 1]) by :func:`robust_reachability`, and whether both iterations converged.

    ``G`` and ``W`` are complements of reachability (``P(G a) = 1 - P(F !a)``, ``P(a W b) = 1 - P(!b U (!a & !b))``),
    ``X`` one step; the state formulas are those :func:`~rlverify.exact.chain.on_chain` gives (a stalled run
    satisfies none).
    """
    if prop.lower_bounded:
        raise PropertyError(
            f"property '{prop.text}': a lower step bound (F>=k, F[a,b]) is not computed under model error; "
            "use an upper step bound (F<=k) or none"
        )
    plain = to_storm(chain)
    n = chain.num_states
    sink = chain.labels.get(STALLED_LABEL, np.zeros(n, dtype=bool))

    def states(formula: Any) -> np.ndarray:
        return np.asarray(truth_values(plain, formula), dtype=bool) & ~sink  # a stalled run satisfies no state formula

    path = prop.storm_formula().subformula
    if prop.path == "X":  # stormpy gives a next formula no subformula: its operand read as an eventually formula's
        from rlverify.models.property_parser import parse_property

        path = parse_property(model, f"P=? [F ({prop.right})]", fixed_policy=True).storm_formula().subformula
    if prop.path in ("U", "W") or path.is_bounded_until_formula:  # F<=k is Storm's true U<=k
        left, right = states(path.left_subformula), states(path.right_subformula)
    else:
        left, right = ~sink, states(path.subformula)
    complement = prop.path in ("G", "W")
    if prop.path == "G":
        stay, target = ~sink, ~right | sink
    elif prop.path == "W":
        stay, target = ~right & ~sink, (~left & ~right) | sink
    else:
        stay, target = left, right
    steps = 1 if prop.path == "X" else prop.bound
    init = int(chain.initial_states[0])
    bounds, converged = [], True
    for maximize in (complement, not complement):  # a complement's min is 1 - the max of its reachability
        values, done = robust_reachability(
            lo, hi, target, stay, maximize=maximize, precision=options.precision, steps=steps, next_step=prop.path == "X"
        )
        bounds.append(float(values[init]))
        converged &= done
    if complement:  # 1 - b rounded outwards: exact for b = 0 or b >= 1/2 (Sterbenz), else within half an ulp
        bounds = [_one_minus(bounds[0], 0.0), _one_minus(bounds[1], 2.0)]
    return [min(max(b, 0.0), 1.0) for b in bounds], converged


#: the factors that widen the nominal's bracket by 16 ulps (relative)
_NOMINAL_MARGIN = (1.0 - 16 * 2.0**-53, 1.0 + 16 * 2.0**-53)


def _one_minus(b: float, toward: float) -> float:
    """``1 - b`` for ``b`` in [0, 1], moved one ulp ``toward`` where the subtraction may have rounded."""
    exact = b == 0.0 or b >= 0.5
    return 1.0 - b if exact else float(np.nextafter(1.0 - b, toward))


def _interval_rows(
    mdp: ExplicitModel, cw: Any, T_lo: sp.csr_matrix, T_hi: sp.csr_matrix, origin: np.ndarray
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Interval rows of the induced chain (states in ``origin``'s order): ``(n, n)`` CSR lows and highs, one pattern."""
    S = mdp.num_states
    cs = mdp.choice_states()
    keep = cw.weights > 0
    W = sp.csr_matrix((cw.weights[keep], (cs[keep], np.flatnonzero(keep))), shape=(S, mdp.num_choices))
    stall = sp.csr_matrix(cw.stalled.reshape(-1, 1))
    has_sink = bool((origin < 0).any())
    n = len(origin)
    cols = np.where(origin >= 0, origin, S)
    rows = origin[origin >= 0]
    out = []
    for T in (T_hi, T_lo):
        full = sp.hstack([W @ T, stall], format="csr")[rows][:, cols].tocsr()
        if has_sink:
            full = sp.vstack([full, sp.csr_matrix(([1.0], ([0], [n - 1])), shape=(1, n))], format="csr")
        out.append(full.tocoo())
    hi, lo = out
    hi.sum_duplicates()
    lo.sum_duplicates()
    # the lows on the highs' pattern (a low may be 0 where the high is not)
    hkey = hi.row.astype(np.int64) * n + hi.col
    lkey = lo.row.astype(np.int64) * n + lo.col
    order = np.argsort(hkey)
    hkey = hkey[order]
    lo_on = np.zeros(len(hkey))
    pos = np.searchsorted(hkey, lkey)
    lo_on[pos] = lo.data
    H = sp.csr_matrix((hi.data[order], (hi.row[order], hi.col[order])), shape=(n, n))
    L = sp.csr_matrix((lo_on, (hi.row[order], hi.col[order])), shape=(n, n))
    H.sort_indices()
    L.sort_indices()  # same pattern as H: both built from the same sorted (row, col) list
    # rounded outwards: each entry is a float sum of at most (choices per state + 1) products of a weight and a
    # computed bound (p -/+ delta, one more rounding), so the exact intervals lie inside [L, H]
    per_state = int(np.diff(mdp.row_groups).max(initial=1)) if mdp.row_groups is not None else 1
    gamma, k = sum_margin(per_state + 2)
    L.data = rounded_down(L.data, gamma, k)
    H.data = np.minimum(rounded_up(H.data, gamma, k), 1.0)
    return L, H


def robust_reachability(
    lo: sp.csr_matrix,
    hi: sp.csr_matrix,
    target: np.ndarray,
    stay: np.ndarray,
    *,
    maximize: bool,
    precision: float = 1e-10,
    steps: int | None = None,
    next_step: bool = False,
    max_iterations: int = 1_000_000,
    max_work: int = MAX_WORK // 20,
) -> tuple[np.ndarray, bool]:
    """A certified bound ``(n,)`` on the min (from below) or max (from above) over the interval chain of
    ``P(stay U target)`` (``U<=steps`` with ``steps``; ``next_step``: ``P(X target)``, one step from every state).

    ``lo``/``hi``: ``(n, n)`` CSR with one pattern (feasible rows). Each step bounds, per row, the adversary's best
    distribution in its intervals by weak duality, for the ``lambda`` of the greedy solution (the lows, then the
    remaining mass to the successors of lowest, or highest, value): ``min_p p.w >= lambda + sum lo (w - lambda)+ -
    sum hi (lambda - w)+`` for every ``lambda`` (the max alike), evaluated with rounding outwards
    (:func:`~rlverify.exact.checking.rounded_down`), so every iterate is a rigorous bound whatever the floating point
    did. The minimum is iterated from the target (every iterate is at most the step-``j`` minimum, itself at most the
    value); the maximum of an unbounded property from 1 on the states that can reach the target (every iterate is at
    least the true maximum), of a step-bounded one from the target for ``steps`` steps (or to a fixed point, bit for
    bit), capped by the unbounded one when ``steps`` x transitions exceeds ``max_work``. Sound whenever it stops.
    Returns the values and whether they converged (no value moved by more than ``precision``, a fixed point, or every
    step done) within ``max_iterations`` and the work budget: ``max_work`` transitions visited (each step costs its
    transitions plus :data:`STEP_COST`; the default about 20 s of steps on two cores).
    """
    n = lo.shape[0]
    rows = np.repeat(np.arange(n), np.diff(hi.indptr))
    gamma, k = sum_margin(int(np.diff(hi.indptr).max(initial=0)) + 1)  # one more rounding: w - lambda
    cap = hi.data - lo.data
    free = 1.0 - np.asarray(lo.sum(axis=1)).ravel()
    starts = hi.indptr[:-1]
    nonempty = np.diff(hi.indptr) > 0
    u = 2.0**-53

    same_row = rows[1:] == rows[:-1]
    chosen: list[np.ndarray] = []  # per row, the successor whose value is lambda (kept while the order holds)

    def split(order: np.ndarray) -> np.ndarray:
        """``(n,)`` per row the entry of the greedy's last successor given mass (the first when none is), the
        successors in ``order`` (within each row, best first; ``rows[order]`` is ``rows``)."""
        c = cap[order]
        before = np.cumsum(c) - c
        before -= np.repeat(before[starts] if n else before, np.diff(hi.indptr))  # per-row cumulative
        given = free[rows] - before > 0  # the greedy gives this successor some mass: a prefix of each row
        count = np.bincount(rows, weights=given, minlength=n).astype(np.int64)
        pick = np.minimum(starts + np.maximum(count - 1, 0), max(len(order) - 1, 0))
        return order[pick] if len(order) else pick

    def step(v: np.ndarray) -> np.ndarray:
        w = v[hi.indices]
        key = -w if maximize else w
        if not chosen:
            order = np.lexsort((key, rows))  # within each row, best successors first
            chosen[:] = [split(order), order]
        else:  # the greedy's split only changes where the order does: only those rows are sorted again
            order = chosen[1]
            ranked = key[order]
            broken = (ranked[1:] < ranked[:-1]) & same_row
            if broken.any():
                at = np.flatnonzero(np.isin(rows, np.unique(rows[1:][broken])))
                sub = order[at]
                order[at] = sub[np.lexsort((key[sub], rows[at]))]
                chosen[0] = split(order)
        lam = np.zeros(n)
        lam[nonempty] = w[chosen[0][nonempty]]
        diff = w - lam[rows]
        over, under = np.maximum(diff, 0.0), np.maximum(-diff, 0.0)
        if maximize:  # max p.w <= lambda + sum hi (w - lambda)+ - sum lo (lambda - w)+
            plus = rounded_up(np.bincount(rows, weights=hi.data * over, minlength=n), gamma, k)
            minus = rounded_down(np.bincount(rows, weights=lo.data * under, minlength=n), gamma, k)
        else:  # min p.w >= lambda + sum lo (w - lambda)+ - sum hi (lambda - w)+
            plus = rounded_down(np.bincount(rows, weights=lo.data * over, minlength=n), gamma, k)
            minus = rounded_up(np.bincount(rows, weights=hi.data * under, minlength=n), gamma, k)
        total = lam + plus
        margin = 2.0 * u * (1.0 + 2.0 * u) * total + 2 * _TINY  # the two final roundings
        out = total - minus + margin if maximize else total - minus - margin
        return np.clip(out, 0.0, 1.0)

    base = target.astype(np.float64)
    if next_step:
        return step(base), True
    fixed = target | ~stay
    cost = int(hi.nnz) + STEP_COST
    if steps is not None:
        budget = steps if steps * cost <= max_work else max(max_work // cost, 1)
        v = np.where(fixed, base, 0.0)
        for _ in range(min(steps, budget)):
            new = np.where(fixed, v, step(v))
            if np.array_equal(new, v):
                return v, True
            v = new
        if budget >= steps or not maximize:  # every step done; or a min's lower bound after fewer steps (still sound)
            return v, budget >= steps
        unbounded, done = robust_reachability(lo, hi, target, stay, maximize=True, precision=precision, max_work=max_work)
        return np.minimum(unbounded, 1.0), done
    # graph facts true of every chain in the intervals: a state that cannot reach the target through stay states (on
    # every edge that may be positive) is 0; one that cannot reach such a state, nor a state where an edge may vanish
    # (a low of 0), reaches it with probability 1 (each chain from it is one finite graph in which every state can)
    go = stay & ~target
    can = _backward(hi, target, go)
    loose = np.bincount(rows, weights=(lo.data <= 0).astype(np.float64), minlength=n) > 0
    surely = go & ~_backward(hi, ~can | (loose & go), go)
    fixed = fixed | ~can | surely
    base = np.where(surely, 1.0, np.where(can, base, 0.0))
    v = np.where(fixed, base, 1.0 if maximize else 0.0)
    moved = np.inf
    for _ in range(min(max_iterations, max(max_work // cost, 1))):
        new = np.where(fixed, v, step(v))
        new = np.minimum(new, v) if maximize else np.maximum(new, v)  # each bound only tightens (still sound)
        change = float(np.abs(new - v).max(initial=0.0))
        rate = min(change / moved, 1.0) if moved > 0 else 0.0
        # converged: the moves, shrinking geometrically at this rate, would add at most ``precision`` in all
        if change == 0.0 or (change <= precision and (rate < 1.0 and change * rate / (1.0 - rate) <= precision)):
            return new, True
        v, moved = new, change
    return v, False


def _backward(graph: sp.csr_matrix, seeds: np.ndarray, through: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: ``seeds`` and the ``through`` states with a path of ``graph``'s stored edges through ``through``
    states to a seed."""
    n = graph.shape[0]
    edges = graph.tocoo()
    keep = through[edges.row]  # edges leaving a through state, reversed: successor -> state
    root = np.full(int(seeds.sum()), n)
    reverse = sp.csr_matrix(
        (np.ones(int(keep.sum()) + len(root)), (np.r_[edges.col[keep], root], np.r_[edges.row[keep], np.flatnonzero(seeds)])),
        shape=(n + 1, n + 1),
    )
    reached = breadth_first_order(reverse, n, directed=True, return_predecessors=False)
    out = np.zeros(n + 1, dtype=bool)
    out[reached] = True
    return out[:n]


#: what one step of :func:`robust_reachability` costs beyond its transitions, in transitions (Python's overhead)
STEP_COST = 10_000

#: the smallest subnormal: the absolute error of one rounding near underflow
_TINY = 5e-324


def _check_feasible(lo: sp.csr_matrix, hi: sp.csr_matrix, chain: ExplicitModel, tol: float = 1e-9) -> None:
    """Raise :class:`IntervalError` for rows whose intervals admit no distribution (sum lo <= 1 <= sum hi)."""
    slo = np.asarray(lo.sum(axis=1)).ravel()
    shi = np.asarray(hi.sum(axis=1)).ravel()
    crossed = sp.csr_matrix(((lo.data > hi.data + tol).astype(np.float64), hi.indices, hi.indptr), shape=hi.shape)
    bad = (slo > 1 + tol) | (shi < 1 - tol) | (np.asarray(crossed.sum(axis=1)).ravel() > 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise IntervalError(
            f"infeasible interval chain: {int(bad.sum())} rows admit no distribution (first: state "
            f"{chain.valuation_dict(i)}, lows sum to {slo[i]:.6g}, highs to {shi[i]:.6g})"
        )


# ---------------------------------------------------------------------------------------------
# shared


def _check_input(prop: Property, policy: Policy | None) -> None:
    """Refuse what these analyses do not compute: other than probability properties of the forms :data:`PATHS`
    (step-bounded or not, no reward bound), and no policy."""
    if (
        prop.operator != "P"
        or prop.optimality is not None
        or prop.path not in PATHS
        or is_reward_bounded(prop.storm_formula())
    ):
        raise PropertyError(
            f"property '{prop.text}': robustness is computed for probability properties "
            "(P=? or P<=b / P>=b with F, U, G, X or W, step-bounded or not); rewards, Pmin/Pmax "
            "and other forms are not supported"
        )
    if policy is None:
        raise PolicyError("robustness needs a policy (--policy)")


def _settings(options: RobustnessOptions, model: SymbolicModel) -> dict[str, Any]:
    d = dataclasses.asdict(options)
    d["perturb"] = None if options.perturb is None else list(options.perturb)
    d["constants"] = model.constants
    return d
