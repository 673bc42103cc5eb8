"""A decision tree that stands in for the policy, fitted where the policy goes and verified exactly as a policy.

:func:`fit_tree` reads the chain the policy induces for a property ``P=? [F phi]``, ``F<=k phi``, ``psi U phi`` or
``psi U<=k phi`` (the forms :func:`~rlverify.exact.explain_paths` explains), and

1. weighs each chain state by its **expected number of visits while the property is undecided** (:func:`expected_visits`,
   exact, from the chain's matrix): with a step bound ``k``, the expected visits at steps ``0..k-1`` (the steps at
   which a decision can still change the value); unbounded, the expected visits before the run is decided (``phi``
   reached, ``psi`` left, stalled). Unbounded, states from which no decided state can be reached (a run there never
   ends) would be visited infinitely often: they are left out, and their number is reported;
2. labels each visited state with the policy's most likely action there (one batched call; ties: the first action
   in the policy's order) and fits a scikit-learn ``DecisionTreeClassifier`` to the states' features with those
   weights: at the depth given, or the smallest depth (up to ``max_depth``) whose **weighted fidelity** (the share
   of expected visits where the tree picks the policy's most likely action) reaches ``fidelity``;
3. verifies the tree, as a deterministic policy (:class:`~rlverify.policies.tree.TreePolicy`), with
   :func:`~rlverify.exact.verify_exact` on the same model and property: its exact value beside the policy's.

The tree is a policy file (:meth:`~rlverify.policies.tree.TreePolicy.save`) that ``rlverify verify --policy`` loads.
scikit-learn is the optional extra ``explain``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

from rlverify.choices import Mode
from rlverify.errors import OptionError, PropertyError, require
from rlverify.exact.adversarial import feature_ranges
from rlverify.exact.bounded import iterate, step_budget, step_work
from rlverify.exact.chain import PolicyChain, chain_for
from rlverify.exact.explain import _search_space, check_explainable
from rlverify.exact.induced import ask_policy
from rlverify.exact.options import MAX_WORK, ExactOptions, Progress, guarantee, provenance, settings
from rlverify.exact.verify import verify_exact
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.policies.tree import TreePolicy
from rlverify.results import TreeExplanation

log = logging.getLogger(__name__)

#: the default weighted-fidelity target of the depth search
DEFAULT_FIDELITY = 0.95
#: the deepest tree the depth search tries by default
MAX_DEPTH = 12


@dataclass(frozen=True)
class TreeOptions:
    """Settings of :func:`fit_tree`.

    Attributes:
        depth: the tree's maximum depth (None: the smallest depth reaching ``fidelity``, up to ``max_depth``).
        fidelity: the weighted-fidelity target of the depth search, in (0, 1].
        max_depth: the deepest tree the search tries.
        exact: the exact engine's settings (mode, unavailable, numerics, ...), for the chain and the tree's check.
        seed: scikit-learn's ``random_state`` (ties between equally good splits).
    """

    depth: int | None = None
    fidelity: float = DEFAULT_FIDELITY
    max_depth: int = MAX_DEPTH
    exact: ExactOptions = dataclasses.field(default_factory=ExactOptions)
    seed: int = 0

    def validate(self) -> None:
        for name, d in (("--depth", self.depth), ("max_depth", self.max_depth)):
            if d is not None and (isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= 64):
                raise OptionError(f"{name}: expected an integer from 1 to 64, got {d!r}")
        if isinstance(self.fidelity, bool) or not isinstance(self.fidelity, (int, float)) or not 0 < self.fidelity <= 1:
            raise OptionError(f"--fidelity: expected a number in (0, 1], got {self.fidelity!r}")
        if self.exact.mode is Mode.MONOLITHIC:
            raise OptionError("a tree standing in for the policy needs its chain: --mode stochastic or deterministic")
        self.exact.validate()


@dataclass(frozen=True)
class Visits:
    """Expected visits of a chain's states while the property is undecided (:func:`expected_visits`).

    Attributes:
        visits: ``(S,)`` float64 per chain state (0 where it is decided or never visited).
        horizon: how they were counted, in words (for results).
        endless: unbounded: undecided states left out because the chain never reaches the target from them.
    """

    visits: np.ndarray
    horizon: str
    endless: int


def expected_visits(built: PolicyChain, prop: Property, *, max_work: int | None = MAX_WORK) -> Visits:
    """The exact expected number of visits of each chain state while ``prop`` is undecided (see the module).

    ``max_work``: the budget of a step bound's iteration (steps x transitions), which stops early at a fixed point.

    Raises:
        PropertyError: a form other than F/U (bounded or not), or a step bound whose iteration reaches no fixed point
        within ``max_work``.
    """
    check_explainable(prop)
    space = _search_space(prop, built)
    matrix = sp.csr_matrix(built.chain.transitions)
    n = matrix.shape[0]
    undecided = space.left & ~space.right
    start = np.zeros(n)
    start[space.start] = 1.0
    if prop.bound is not None:
        visits = _bounded_visits(matrix, start * undecided, undecided, prop.bound, max_work)
        return Visits(visits=visits, horizon=f"expected visits in steps 0..{prop.bound - 1} while undecided", endless=0)
    hits = _can_reach(matrix, space.right, undecided)
    counted = undecided & hits
    idx = np.flatnonzero(counted)
    visits = np.zeros(n)
    if counted[space.start]:
        q = matrix[idx][:, idx]
        system = (sp.identity(len(idx), format="csc") - q.T.tocsc()).tocsc()
        visits[idx] = np.maximum(np.atleast_1d(spsolve(system, start[idx])), 0.0)
    return Visits(
        visits=visits,
        horizon="expected visits before the run is decided (target reached, path formula left, stalled, or the "
        "target unreachable)",
        endless=int((undecided & ~hits).sum()),
    )


def _bounded_visits(matrix: sp.csr_matrix, x0: np.ndarray, undecided: np.ndarray, k: int, max_work: int | None) -> np.ndarray:
    """``(S,)`` ``sum_{j<k} x_j`` with ``x_{j+1} = (P^T x_j) * undecided``: the pair ``(visits, x)`` is iterated by
    :func:`~rlverify.exact.bounded.iterate`, so a fixed point of both ends it with the values of all ``k`` steps."""
    n = len(x0)
    transposed = matrix.T.tocsr()

    def step(z: np.ndarray) -> np.ndarray:
        return np.concatenate([z[:n] + z[n:], (transposed @ z[n:]) * undecided])

    budget = step_budget(k, matrix.nnz, max_work)
    z, j, stop = iterate(step, np.concatenate([np.zeros(n), x0]), k, budget, what="expected visits")
    if stop is None and j < k:
        raise PropertyError(
            f"the expected visits within the step bound {k:,} take {step_work(k, matrix.nnz)}, above "
            f"--max-work {max_work:,}, and reached no fixed point in the {j:,} steps within it: raise --max-work or "
            "lower the step bound"
        )
    return z[:n]


def _can_reach(matrix: sp.csr_matrix, target: np.ndarray, through: np.ndarray) -> np.ndarray:
    """``(S,)`` bool: ``target`` and the ``through`` states from which a path through ``through`` reaches it."""
    reached = target.copy()
    undecided = through
    while True:
        new = (matrix @ reached.astype(np.float64) > 0) & undecided & ~reached
        if not new.any():
            return reached
        reached = reached | new


def fit_tree(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: TreeOptions | None = None,
    *,
    chain: PolicyChain | None = None,
    progress: Progress | None = None,
) -> TreeExplanation:
    """A decision tree fitted to ``policy`` on its reachable states, weighted by expected visits, verified exactly.

    Args:
        model, prop, policy: as :func:`~rlverify.exact.verify_exact` (``prop``: one of the F/U forms above).
        options: :class:`TreeOptions` (None: the defaults); chain: the policy's chain when already built.

    Returns a :class:`~rlverify.results.TreeExplanation`: the tree (its policy, rules, fidelity, the depths tried) and
    the exact values of the tree and of the policy.

    Raises:
        DependencyNotInstalled: scikit-learn is missing (extra ``explain``); PropertyError: another property form;
        OptionError: bad options; what :func:`~rlverify.exact.verify_exact` raises.
    """
    options = TreeOptions() if options is None else options
    options.validate()
    check_explainable(prop)
    sk_tree = require("sklearn.tree", "explain", purpose="fitting a decision tree to the policy")
    say = progress or (lambda msg: None)
    exact = dataclasses.replace(options.exact, all_states=False, export=None)
    t0 = time.perf_counter()
    built = chain_for(model, prop, policy, exact, chain, progress=say)
    nominal = verify_exact(model, prop, policy, exact, chain=built)
    say("counting the expected visits")
    occ = expected_visits(built, prop, max_work=exact.max_work)
    states = _decision_states(occ.visits, built.origin, prop)
    weights = occ.visits[states]
    x = built.chain.feature_matrix(policy.features, states)
    probs, _ = ask_policy(built.chain, policy, states)
    y = np.argmax(probs, axis=1)
    timings = {"chain": time.perf_counter() - t0}
    t = time.perf_counter()
    tree, tried = _fit(sk_tree, x, y, weights, policy, options)
    fidelity = tried[max(tried)]
    timings["fit"] = time.perf_counter() - t
    notes = list(nominal.warnings)
    if options.depth is None and fidelity < options.fidelity:
        notes.append(
            f"no tree up to depth {max(tried)} reaches the weighted fidelity {options.fidelity:g} (best "
            f"{fidelity:.4g}): the deepest is reported; raise --depth or lower --fidelity"
        )
    say("verifying the tree as a policy")
    t = time.perf_counter()
    checked = verify_exact(model, prop, tree, exact)
    timings["verify_tree"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    tree.metadata = {
        "model": str(model.path),
        "property": prop.text,
        "policy": getattr(policy, "name", "policy"),
        "weighting": occ.horizon,
        "fidelity": fidelity,
        "exact_value": checked.value,
    }
    return TreeExplanation(
        depth=tree.depth,
        leaves=int((tree.feature < 0).sum()),
        fidelity=fidelity,
        fidelity_target=options.fidelity if options.depth is None else None,
        fidelities=tried,
        weighting=occ.horizon,
        fitted_states=len(states),
        left_out_states=occ.endless,
        policy_value=nominal.value,
        tree_value=checked.value,
        tree_lower=checked.lower,
        tree_upper=checked.upper,
        tree_stalled=checked.stalled_probability,
        rules=tuple(tree_rules(tree, model)),
        tree=tree.to_json(),
        tree_policy=tree,
        guarantee=guarantee(exact.numerics),
        precision=exact.precision,
        provenance=provenance(
            model,
            prop,
            policy,
            settings={
                **settings(exact, built.strategy, model),
                "depth": options.depth,
                "fidelity": options.fidelity,
                "max_depth": options.max_depth,
                "seed": options.seed,
            },
            timings=timings,
            warnings=notes + [w for w in checked.warnings if w not in notes],
        ),
    )


def _decision_states(visits: np.ndarray, origin: np.ndarray, prop: Property) -> np.ndarray:
    """The chain's model states with expected visits (refused when there are none: no decision to explain)."""
    states = np.flatnonzero((visits > 0) & (origin >= 0))
    if not len(states):
        raise PropertyError(
            f"'{prop.text}': no policy-reachable state where the property is undecided (and, unbounded, the target "
            "reachable): there is no decision to explain"
        )
    return states


def _fit(
    sk_tree: Any, x: np.ndarray, y: np.ndarray, weights: np.ndarray, policy: Policy, options: TreeOptions
) -> tuple[TreePolicy, dict[int, float]]:
    """The tree of ``options.depth``, or the shallowest up to ``options.max_depth`` reaching ``options.fidelity`` (the
    visit-weighted share of states where it picks the policy's action), and the fidelity of each depth tried."""
    depths = [options.depth] if options.depth is not None else list(range(1, options.max_depth + 1))
    tried: dict[int, float] = {}
    tree = None
    for d in depths:
        fitted = sk_tree.DecisionTreeClassifier(max_depth=d, random_state=options.seed).fit(x, y, sample_weight=weights)
        candidate = _tree_policy(fitted, policy, d)
        agree = candidate.action_probabilities(x)[np.arange(len(y)), y] == 1.0
        tried[d] = float(weights[agree].sum() / weights.sum())
        tree = candidate
        if tried[d] >= options.fidelity or candidate.depth < d:  # reached, or deeper splits change nothing
            break
    assert tree is not None
    return tree, tried


def _tree_policy(fitted: Any, policy: Policy, depth: int) -> TreePolicy:
    """scikit-learn's fitted tree as a :class:`TreePolicy` over the policy's features and actions (a leaf's action:
    the class of largest weight there)."""
    t = fitted.tree_
    leaf = t.children_left < 0
    classes = np.asarray(fitted.classes_, dtype=np.int64)
    value = np.asarray(t.value)[:, 0, :]
    return TreePolicy(
        policy.features,
        policy.actions,
        feature=np.where(leaf, -1, t.feature),
        threshold=np.where(leaf, 0.0, t.threshold),
        left=np.where(leaf, -1, t.children_left),
        right=np.where(leaf, -1, t.children_right),
        action=np.where(leaf, classes[np.argmax(value, axis=1)], -1),
        name=f"decision tree (depth {depth}) of {getattr(policy, 'name', 'the policy')}",
    )


def tree_rules(tree: TreePolicy, model: SymbolicModel | None = None) -> list[str]:
    """The tree as rules, one per leaf: ``if 2 <= x <= 3 and y >= 1 then east`` over the model's variables (integer
    features: a threshold 1.5 reads ``<= 1`` / ``>= 2``, clipped to the declared ranges when ``model`` is given)."""
    features = tree.features
    low, high = feature_ranges(model, tuple(features)) if model is not None else (np.full(len(features), np.nan),) * 2
    out: list[str] = []

    def walk(node: int, bounds: dict[int, tuple[float, float]]) -> None:
        if tree.feature[node] < 0:
            conds = [_condition(features[c], lo, hi, low[c], high[c]) for c, (lo, hi) in sorted(bounds.items())]
            conds = [c for c in conds if c]
            action = tree.actions[int(tree.action[node])]
            out.append(f"if {' and '.join(conds)} then {action}" if conds else f"always {action}")
            return
        c, t = int(tree.feature[node]), float(tree.threshold[node])
        lo, hi = bounds.get(c, (-np.inf, np.inf))
        walk(int(tree.left[node]), {**bounds, c: (lo, min(hi, np.floor(t)))})
        walk(int(tree.right[node]), {**bounds, c: (max(lo, np.floor(t) + 1), hi)})

    walk(0, {})
    return out


def _condition(name: str, lo: float, hi: float, low: float, high: float) -> str:
    """``lo <= name <= hi`` without the sides that the declared range ``[low, high]`` already implies."""
    has_lo = np.isfinite(lo) and not _implied(low, lo <= low)
    has_hi = np.isfinite(hi) and not _implied(high, hi >= high)
    if has_lo and has_hi:
        return f"{name} = {lo:g}" if lo == hi else f"{lo:g} <= {name} <= {hi:g}"
    if has_lo:
        return f"{name} = {lo:g}" if lo == high else f"{name} >= {lo:g}"
    if has_hi:
        return f"{name} = {hi:g}" if hi == low else f"{name} <= {hi:g}"
    return ""


def _implied(end: float, within: bool) -> bool:
    """Whether a side of a condition is implied by a finite end of the declared range (``within``: it lies beyond)."""
    return bool(np.isfinite(end) and within)
