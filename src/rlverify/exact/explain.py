"""Failure paths: the K most probable paths of a policy-induced chain to a property's target.

For ``P=? [F phi]``, ``F<=k phi``, ``psi U phi`` and ``psi U<=k phi`` a *path* is a walk of the induced
chain from the initial state that ends at its first ``phi`` state, every earlier state satisfying
``psi`` (and not ``phi``), with at most ``k`` steps for the bounded forms. Paths may revisit states;
the property's value is the sum of the probabilities of all its paths, so any K of them cover at most
the value.

The search is a K-best A* over walks on the cost ``-log p``: a search node is a state (unbounded
forms) or a state and the number of steps taken (bounded forms), and each is expanded at most K
times — the i-th expansion of a node is the i-th most probable walk to it, so the prefixes of the K
most probable paths are never cut. The heuristic is the exact cost of the most probable remaining
path (Dijkstra on the reversed graph; with a step bound, the most probable path within the
remaining steps, by min-plus iteration), so the search walks straight along the best paths and
their deviations.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import math
import time
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlverify.choices import Mode, Strategy
from rlverify.errors import OptionError, PolicyError, PropertyError
from rlverify.exact.chain import FullMDP, PolicyChain, chain_for, mdp_for, policy_chain, states_of
from rlverify.exact.induced import ask_policy
from rlverify.exact.options import ExactOptions, Progress
from rlverify.exact.verify import verify_exact
from rlverify.figures import map_variables, plot_paths  # re-exported: the drawing lives in rlverify.figures
from rlverify.models.dynamics import ChoiceTable, choice_name, choice_table, policy_weights
from rlverify.models.explicit import ExplicitModel, to_storm
from rlverify.models.properties import Property
from rlverify.models.storm import storm_message, truth_values
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.results import FailurePath, FailurePaths, PathStep, Provenance, StepAction

log = logging.getLogger(__name__)

#: the property forms :func:`explain_paths` explains (also their threshold forms ``P<=b [...]``)
EXPLAINED_FORMS = "P=? [F phi], P=? [F<=k phi], P=? [psi U phi], P=? [psi U<=k phi]"

#: the bounded heuristic keeps one ``(S,)`` row per remaining step up to this many entries in all
#: (80 MB); beyond, the unbounded heuristic (also a lower bound on the remaining cost) is used
_HEURISTIC_ENTRIES = 10_000_000
#: the most paths ``--explain`` lists (each is printed with every state it visits)
MAX_PATHS = 10_000
#: the most partial paths the search keeps (about 100 bytes each): it stops there with the paths found so far
MAX_RECORDS = 5_000_000
#: the most steps the listed paths have in all (each is a row of the printed tables, ~2 ms, and of the JSON): the
#: search stops once its paths reach it, with the paths found so far, and says so
MAX_LISTED_STEPS = 3_000


def check_explainable(prop: Property) -> None:
    """Raise :class:`PropertyError` unless ``prop`` has target paths (see :data:`EXPLAINED_FORMS`)."""
    why = _operator_why(prop) or _path_why(prop)
    if why is not None:
        raise PropertyError(
            f"--explain: property '{prop.text}' has no target paths to list: {why}; explained forms: {EXPLAINED_FORMS}"
        )


def _operator_why(prop: Property) -> str | None:
    """Why ``prop``'s operator has no target paths (None: a P=? operator)."""
    if prop.operator != "P":
        return "it is not a probability (P) property" if prop.operator != "R" else "it is a reward (R) property"
    if prop.optimality is not None:
        return "Pmin/Pmax range over all schedulers; there is no policy chain to take paths from"
    return None


def _path_why(prop: Property) -> str | None:
    """Why ``prop``'s path formula has no target paths (None: F or U, unbounded or with an integer step bound)."""
    if prop.path not in ("F", "U"):
        why = f"its path formula is {prop.path if prop.path != 'other' else 'not F or U'}"
        return why + " (for G phi, explain its complement: P=? [F !phi])" if prop.path == "G" else why
    if prop.lower_bounded:
        return "its step bound has a lower end (paths are explained for F<=k and U<=k only)"
    if prop.bound_text is not None and prop.bound is None:
        return f"its step bound '{prop.bound_text}' is not an integer"
    return None


def check_count(k: object) -> int:
    """``k`` as a positive int up to :data:`MAX_PATHS`, else :class:`OptionError` naming ``--explain``."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise OptionError(f"--explain: expected a positive number of paths, got {k!r}")
    if k > MAX_PATHS:
        raise OptionError(
            f"--explain {k}: at most {MAX_PATHS:,} paths are listed (each with every state it visits); "
            f"ask for fewer, e.g. --explain 100"
        )
    return int(k)


def explain_paths(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    k: int,
    options: ExactOptions | None = None,
    *,
    chain: PolicyChain | None = None,
    mdp: FullMDP | None = None,
    value: float | None = None,
    progress: Progress | None = None,
) -> FailurePaths:
    """The ``k`` most probable paths of the chain ``policy`` induces on ``model`` to the property's target.

    Args:
        model: a loaded PRISM/JANI model; prop: its parsed property, of a form in :data:`EXPLAINED_FORMS`.
        policy: any :class:`~rlverify.policies.Policy`.
        k: how many paths (> 0).
        options: :class:`~rlverify.exact.ExactOptions` (mode ``stochastic``/``deterministic``,
            ``unavailable``, ``strategy``, ``numerics``); the chain is the one :func:`verify_exact` checks.
        chain: the policy's chain when already built (:func:`~rlverify.exact.chain.policy_chain`, same mode).
        mdp: the property-directed MDP when already built (:func:`~rlverify.exact.chain.full_mdp`): the paths'
            steps are described with its choices (built here when the chain did not keep the MDP it was induced on).
        value: the property's value if already known (``verify_exact(...).value`` with the same
            options); else it is checked here (:func:`verify_exact` on the chain).

    Returns:
        :class:`~rlverify.results.FailurePaths`: the paths, most probable first, each with its exact
        probability (the product of the chain's transition probabilities), its states, and per step the
        policy's distribution and the actions leading to the next state; plus the share of the value
        they cover. Fewer than ``k`` paths when fewer exist (``exhausted``).
    """
    options = ExactOptions() if options is None else options
    k = check_count(k)
    options.validate()
    if options.mode is Mode.MONOLITHIC:
        raise OptionError(
            "--explain needs a policy's chain: monolithic mode has no policy (Pmin/Pmax range over "
            "all schedulers); use --mode stochastic or deterministic"
        )
    if policy is None:
        raise PolicyError("--explain needs a policy (--policy)")
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    check_explainable(prop)
    say("building the chain to explain")
    built, full = _chain_and_mdp(model, prop, policy, options, chain, mdp, say)
    search = _search_space(prop, built)
    timings["build"] = time.perf_counter() - t0
    if value is None:
        t = time.perf_counter()
        value = verify_exact(model, prop, policy, options, chain=built).value
        timings["check"] = time.perf_counter() - t
    say(f"searching the {k} most probable paths")
    t = time.perf_counter()
    found, exhausted = most_probable_paths(
        built.chain.transitions, search.start, search.right, search.left, k, bound=prop.bound, max_steps=MAX_LISTED_STEPS
    )
    timings["search"] = time.perf_counter() - t
    t = time.perf_counter()
    where = _described_mdp(model, prop, policy, options, built, full, found, say)
    paths, policy_seconds = _describe(found, built.chain, where, policy, options)
    timings["policy"] = policy_seconds
    timings["describe"] = time.perf_counter() - t - policy_seconds
    timings["total"] = time.perf_counter() - t0
    return _explanation(prop, k, paths, exhausted, float(value), built, options, timings)


@dataclass(frozen=True)
class _Search:
    """Where the paths start and the states they may pass (``left``) and end at (``right``), ``(S,)`` bool."""

    start: int
    left: np.ndarray
    right: np.ndarray


@dataclass(frozen=True)
class _Where:
    """The MDP whose choices describe the paths' steps, its choice table for the policy, and the MDP state of each
    chain state on a path (-1: the ``stalled`` sink)."""

    mdp: ExplicitModel
    table: ChoiceTable
    state: dict[int, int]


def _chain_and_mdp(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExactOptions,
    chain: PolicyChain | None,
    mdp: FullMDP | None,
    say: Progress,
) -> tuple[PolicyChain, FullMDP | None]:
    """The chain to explain, and the full MDP when one is at hand. Without a chain, it is induced on the MDP, kept
    to describe the steps (``auto`` as ``full``: on ``mdp`` when given); ``merged`` keeps none."""
    if chain is not None:
        return chain_for(model, prop, policy, options, chain), mdp
    kept = options.strategy in (Strategy.MERGED, Strategy.ONTHEFLY)
    whole = options if kept else dataclasses.replace(options, strategy=Strategy.FULL)
    return policy_chain(model, prop, policy, whole, mdp=mdp, keep_mdp=True, progress=say), mdp


def _search_space(prop: Property, built: PolicyChain) -> _Search:
    """The initial state and the state formulas' sets on the chain (the ``stalled`` sink satisfies none)."""
    chain = built.chain
    if len(chain.initial_states) != 1:
        raise PropertyError(
            f"the model has {len(chain.initial_states)} initial states; --explain lists the paths from a single one"
        )
    if (built.origin == -2).any():
        raise PropertyError(
            f"--explain: property '{prop.text}': its chain has a state per taken choice (a reward "
            f"bound); explained forms: {EXPLAINED_FORMS}"
        )
    loops = dataclasses.replace(chain, transitions=sp.identity(chain.num_states, format="csr"))
    left, right = _state_sets(prop, to_storm(loops))  # the state formulas read labels and valuations only
    sink = built.origin < 0  # a stalled run never reaches the target
    return _Search(start=int(chain.initial_states[0]), left=left & ~sink, right=right & ~sink)


def _described_mdp(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExactOptions,
    built: PolicyChain,
    full: FullMDP | None,
    found: list[tuple[list[int], float]],
    say: Progress,
) -> _Where:
    """The MDP whose choices describe the paths: the one the chain was induced on when kept, else the full MDP
    (given, or built here), the paths' states found in it by their valuations."""
    on_path = sorted({u for states, _ in found for u in states if built.origin[u] >= 0})
    if built.source is not None and built.table is not None:
        state = {u: int(built.origin[u]) for u in on_path}
        return _Where(mdp=built.source, table=built.table, state=state)
    full = mdp_for(model, prop, options, full, policy=policy, progress=say)
    at = states_of(full.mdp.valuations, full.mdp.variables, built.chain.valuations[on_path], built.chain.variables)
    return _Where(
        mdp=full.mdp, table=choice_table(full.mdp, policy.actions), state={u: int(s) for u, s in zip(on_path, at, strict=True)}
    )


def _explanation(
    prop: Property,
    k: int,
    paths: list[FailurePath],
    exhausted: bool,
    value: float,
    built: PolicyChain,
    options: ExactOptions,
    timings: dict[str, float],
) -> FailurePaths:
    chain, origin = built.chain, built.origin
    covered = math.fsum(p.probability for p in paths)
    ranges = (
        {
            v: (int(chain.valuations[origin >= 0, i].min()), int(chain.valuations[origin >= 0, i].max()))
            for i, v in enumerate(chain.variables)
        }
        if (origin >= 0).any()
        else {}
    )
    note = None if len(paths) >= k or exhausted else _short_note(paths, k)
    return FailurePaths(
        k=k,
        paths=tuple(paths),
        value=value,
        covered=covered,
        share=covered / value if value > 0 else None,
        exhausted=exhausted,
        bound=prop.bound,
        mode=options.mode,
        variables=tuple(chain.variables),
        ranges=ranges,
        note=note,
        provenance=Provenance(property=prop.text, timings=timings),
    )


def _short_note(paths: list[FailurePath], k: int) -> str:
    """Why the search stopped with fewer than the ``k`` paths asked for while more exist."""
    steps = sum(p.length for p in paths)
    if steps >= MAX_LISTED_STEPS:
        return (
            f"{len(paths)} of the {k} paths asked for are listed: together they have {steps:,} steps, at least the "
            f"listing's limit of {MAX_LISTED_STEPS:,} steps; ask for fewer (--explain) or a step bound"
        )
    return (
        f"the search stopped after {MAX_RECORDS:,} partial paths (its memory cap) with {len(paths)} of the "
        f"{k} paths asked for; ask for fewer (--explain) or a step bound"
    )


def _state_sets(prop: Property, storm_chain: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(S,)`` bool masks of the chain states satisfying the left (True for F) and right state formulas."""
    path = prop.storm_formula().subformula
    if path.is_until_formula or path.is_bounded_until_formula:
        sub_left, sub_right = path.left_subformula, path.right_subformula
    else:
        sub_left, sub_right = None, path.subformula

    def mask(sub: Any) -> np.ndarray:
        try:
            return truth_values(storm_chain, sub)
        except (RuntimeError, AttributeError) as exc:
            raise PropertyError(
                f"--explain: property '{prop.text}': the state formula '{sub}' cannot be evaluated per "
                f"state ({storm_message(exc) if isinstance(exc, RuntimeError) else 'not propositional'})"
            ) from None

    right = mask(sub_right)
    left = np.ones(storm_chain.nr_states, dtype=bool) if sub_left is None else mask(sub_left)
    return left, right


def most_probable_paths(
    P: sp.csr_matrix,
    start: int,
    target: np.ndarray,
    allowed: np.ndarray,
    k: int,
    *,
    bound: int | None = None,
    max_records: int = MAX_RECORDS,
    max_steps: int | None = None,
) -> tuple[list[tuple[list[int], float]], bool]:
    """The ``k`` most probable walks of a chain from ``start`` to its first ``target`` state.

    Args:
        P: ``(S, S)`` CSR transition probabilities.
        start: the start state.
        target: ``(S,)`` bool; a walk ends at its first target state.
        allowed: ``(S,)`` bool; every state before the last must be allowed (the left formula of ``U``).
        k: how many walks.
        bound: at most this many steps (None: unbounded).
        max_records: the search stops after keeping this many partial walks (memory), with the walks found
            so far (then fewer than ``k`` and ``exhausted`` False).
        max_steps: the search stops once the walks found have this many steps in all (None: no limit), likewise.

    Returns:
        ``(walks, exhausted)``: up to ``k`` pairs ``(states, probability)`` with ``states`` the walk's
        state indices (``steps + 1`` of them) and ``probability`` the product of its transition
        probabilities, most probable first (ties in any order); ``exhausted`` is True when fewer
        than ``k`` walks exist (all are listed).
    """
    P = sp.csr_matrix(P)
    S = P.shape[0]
    target = np.asarray(target, dtype=bool)
    transient = np.asarray(allowed, dtype=bool) & ~target
    if target[start]:
        return [([start], 1.0)], True
    if not transient[start]:
        return [], True
    indptr, indices, cost = _cost_graph(P, transient)
    heuristic = _Heuristic(S, indptr, indices, cost, target, bound)
    h0 = heuristic.row(bound)[start]
    if not np.isfinite(h0):
        return [], True
    search = _AStar(indptr, indices, cost, target, heuristic, bound, start, float(h0))
    found = search.run(k, max_records, max_steps)
    out = [(states, _probability(P, states)) for states in map(search.walk, found)]
    out.sort(key=lambda sp_: -sp_[1])
    return out, len(out) < k and not search.heap


def _cost_graph(P: sp.csr_matrix, transient: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, cost)``: ``-log p`` on the rows of ``transient`` states only (targets end a walk; other
    states are dead ends), explicit zeros dropped (no transitions)."""
    S = P.shape[0]
    keep = np.repeat(transient, np.diff(P.indptr))
    counts = np.bincount(np.repeat(np.arange(S), np.diff(P.indptr))[keep], minlength=S)
    indptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    indices = P.indices[keep].astype(np.int64)
    prob = P.data[keep].astype(np.float64)
    positive = prob > 0
    if not positive.all():  # explicit zeros are no transitions
        rows = np.repeat(np.arange(S), np.diff(indptr))[positive]
        indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=S))].astype(np.int64)
        indices, prob = indices[positive], prob[positive]
    return indptr, indices, np.maximum(-np.log(prob), 0.0)  # p may exceed 1 by rounding


def _probability(P: sp.csr_matrix, states: list[int]) -> float:
    """The product of a walk's transition probabilities."""
    p = 1.0
    for a, b in pairwise(states):
        p *= _entry(P, a, b)
    return p


class _AStar:
    """A* over walks (the records of its search tree: node state, parent record, steps, cost), each (state, steps)
    expanded at most ``k`` times."""

    def __init__(
        self,
        indptr: np.ndarray,
        indices: np.ndarray,
        cost: np.ndarray,
        target: np.ndarray,
        heuristic: _Heuristic,
        bound: int | None,
        start: int,
        h0: float,
    ) -> None:
        self.indptr, self.indices, self.cost, self.target = indptr, indices, cost, target
        self.heuristic, self.bound = heuristic, bound
        self.state: list[int] = [start]
        self.parent: list[int] = [-1]
        self.steps: list[int] = [0]
        self.g: list[float] = [0.0]
        self.heap: list[tuple[float, int]] = [(h0, 0)]
        self.expanded: dict[int, int] = {}

    def run(self, k: int, max_records: int, max_steps: int | None) -> list[int]:
        """The records of up to ``k`` walks found, best first, within ``max_records`` and ``max_steps``."""
        found: list[int] = []
        found_steps = 0
        stride = (self.bound + 1) if self.bound is not None else 1
        while self.heap and len(found) < k and len(self.state) < max_records:
            if max_steps is not None and found_steps >= max_steps:
                break
            _, rec = heapq.heappop(self.heap)
            u, t = self.state[rec], self.steps[rec]
            key = u * stride + (t if self.bound is not None else 0)
            n = self.expanded.get(key, 0)
            if n >= k:
                continue
            self.expanded[key] = n + 1
            if self.target[u]:
                found.append(rec)
                found_steps += t
                continue
            self._expand(rec, u, t)
        return found

    def _expand(self, rec: int, u: int, t: int) -> None:
        """Push the successors of record ``rec`` (state ``u`` after ``t`` steps) that can still reach the target."""
        lo, hi = self.indptr[u], self.indptr[u + 1]
        if lo == hi or (self.bound is not None and t >= self.bound):
            return
        succ = self.indices[lo:hi]
        h = self.heuristic.row(None if self.bound is None else self.bound - t - 1)[succ]
        ok = np.isfinite(h)
        g2 = self.g[rec] + self.cost[lo:hi][ok]
        for v, gv, f in zip(succ[ok].tolist(), g2.tolist(), (g2 + h[ok]).tolist(), strict=True):
            self.state.append(v)
            self.parent.append(rec)
            self.steps.append(t + 1)
            self.g.append(gv)
            heapq.heappush(self.heap, (f, len(self.state) - 1))

    def walk(self, rec: int) -> list[int]:
        """The states of the walk ending at record ``rec``."""
        states = []
        while rec >= 0:
            states.append(self.state[rec])
            rec = self.parent[rec]
        states.reverse()
        return states


class _Heuristic:
    """Exact cost of the most probable remaining path per state: ``row(r)`` ``(S,)`` within ``r`` steps, ``row(None)``
    unbounded."""

    def __init__(
        self, S: int, indptr: np.ndarray, indices: np.ndarray, cost: np.ndarray, target: np.ndarray, bound: int | None
    ) -> None:
        self.S, self.indptr, self.indices, self.cost, self.target = S, indptr, indices, cost, target
        self.rows: list[np.ndarray] = []
        self.converged = False
        self._unbounded: np.ndarray | None = None
        if bound is not None:
            self._iterate(bound)

    def _iterate(self, bound: int) -> None:
        """Min-plus steps ``h_r(u) = min_v cost(u, v) + h_{r-1}(v)`` until ``bound``, a fixpoint or the memory cap."""
        h = np.where(self.target, 0.0, np.inf)
        self.rows.append(h)
        nonempty = np.diff(self.indptr) > 0
        starts = self.indptr[:-1][nonempty]
        max_rows = max(2, _HEURISTIC_ENTRIES // max(self.S, 1))
        for _ in range(bound):
            nxt = np.where(self.target, 0.0, np.inf)
            if len(starts):
                nxt[nonempty] = np.minimum.reduceat(self.cost + h[self.indices], starts)
            nxt[self.target] = 0.0
            if np.array_equal(nxt, h):
                self.converged = True
                return
            if len(self.rows) >= max_rows:
                return
            self.rows.append(nxt)
            h = nxt
        self.converged = True  # rows cover every remaining step count up to the bound

    def row(self, remaining: int | None) -> np.ndarray:
        if remaining is not None and (remaining < len(self.rows)):
            return self.rows[remaining]
        if remaining is not None and self.converged:
            return self.rows[-1]
        if self._unbounded is None:
            self._unbounded = self._dijkstra()
        return self._unbounded

    def _dijkstra(self) -> np.ndarray:
        from scipy.sparse.csgraph import dijkstra  # lazy: scipy.sparse.csgraph, start-up

        targets = np.flatnonzero(self.target)
        if not len(targets):
            return np.full(self.S, np.inf)
        # reversed graph; a zero cost (probability 1) as the smallest positive number, so that no sparse
        # routine can take it for a missing edge (it shifts no sum of normal floats)
        w = np.where(self.cost > 0, self.cost, np.nextafter(0.0, 1.0))
        G = sp.csr_matrix((w, self.indices, self.indptr), shape=(self.S, self.S)).T.tocsr()
        d = dijkstra(G, directed=True, indices=targets, min_only=True)
        return np.asarray(d, dtype=np.float64)


def _entry(P: sp.csr_matrix, a: int, b: int) -> float:
    lo, hi = P.indptr[a], P.indptr[a + 1]
    hit = np.flatnonzero(P.indices[lo:hi] == b)
    return float(P.data[lo + hit].sum())


def _describe(
    found: list[tuple[list[int], float]], chain: ExplicitModel, where: _Where, policy: Policy, options: ExactOptions
) -> tuple[list[FailurePath], float]:
    """The paths with valuations, the policy's distributions (one batched call) and the actions per step."""
    mdp, table = where.mdp, where.table
    acting = sorted({where.state[u] for states, _ in found for u in states[:-1] if u in where.state})
    decision = np.array([s for s in acting if table.decision[s]], dtype=np.int64)
    row_of = {int(s): i for i, s in enumerate(decision)}
    probs, seconds = ask_policy(mdp, policy, decision)
    if len(decision):
        raw = probs / probs.sum(axis=1, keepdims=True)
        followed, _ = policy_weights(
            probs,
            table.available(decision),
            mode=options.mode,
            unavailable=options.unavailable,
            where=lambda i: mdp.valuation_dict(int(decision[i])),
        )
    else:
        raw = followed = probs
    steps = _Steps(chain, where, policy, row_of, raw, followed)
    paths = [FailurePath(probability=p, steps=steps.of(states)) for states, p in found]
    return paths, seconds


@dataclass(frozen=True)
class _Steps:
    """What :func:`_describe` reads a path's steps from: the chain, the MDP describing it, and the policy's raw and
    followed distributions (rows ``row_of`` its MDP decision states)."""

    chain: ExplicitModel
    where: _Where
    policy: Policy
    row_of: dict[int, int]
    raw: np.ndarray
    followed: np.ndarray

    def of(self, states: list[int]) -> tuple[PathStep, ...]:
        """The steps of the path through ``states`` (the last: its end, with no policy)."""
        out = [self.step(u, v) for u, v in pairwise(states)]
        return (*out, PathStep(state=self.valuation(states[-1]), policy=None, actions=(), probability=None))

    def valuation(self, u: int) -> dict[str, Any]:
        return self.chain.valuation_dict(u) if self.where.state.get(u, -1) >= 0 else {"state": "stalled"}

    def step(self, u: int, v: int) -> PathStep:
        """The step from chain state ``u`` to ``v``: the policy's distribution there and the actions leading to ``v``."""
        where, policy = self.where, self.policy
        s = where.state.get(u, -1)
        row = self.row_of.get(s)
        chosen = None if row is None else self.followed[row]
        actions = _step_actions(where.mdp, where.table, policy, s, where.state.get(v, -1), chosen)
        dist = None if row is None else {a: float(x) for a, x in zip(policy.actions, self.raw[row], strict=True)}
        probability = _entry(self.chain.transitions, u, v)
        return PathStep(state=self.valuation(u), policy=dist, actions=tuple(actions), probability=probability)


def _step_actions(
    mdp: ExplicitModel, table: ChoiceTable, policy: Policy, s: int, s2: int, followed: np.ndarray | None
) -> list[StepAction]:
    """The choices of MDP state ``s`` that lead to ``s2`` (-1: the ``stalled`` sink, which no choice leads to), with
    the weight the chain gives each (``followed``: the policy's per action; None: a forced step, weight 1)."""
    actions = []
    for c in range(int(mdp.row_groups[s]), int(mdp.row_groups[s + 1])):
        col = int(table.columns[c])
        if followed is None:
            weight = 1.0  # a forced step: the state's only choice, the policy is not asked
        else:
            weight = float(followed[col]) if col >= 0 else 0.0
        tr = _entry(mdp.transitions, c, s2) if s2 >= 0 else 0.0
        if weight > 0 and tr > 0:
            actions.append(
                StepAction(
                    action=policy.actions[col] if (followed is not None and col >= 0) else None,
                    choice=choice_name(mdp, c),
                    weight=weight,
                    transition=tr,
                    probability=weight * tr,
                )
            )
    return actions


__all__ = [
    "EXPLAINED_FORMS",
    "check_count",
    "check_explainable",
    "explain_paths",
    "map_variables",
    "most_probable_paths",
    "plot_paths",
]
