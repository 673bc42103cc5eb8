"""Robust value iteration on an interval chain: certified bounds on the min and max reachability probability over
every chain whose rows lie in the intervals, each step bounded by weak duality and rounded outwards."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from rlverify.exact.checking import MAX_WORK
from rlverify.exact.rounding import rounded_down, rounded_up, sum_margin

__all__ = ["STEP_COST", "robust_reachability"]


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
    (:func:`~rlverify.exact.rounding.rounded_down`), so every iterate is a rigorous bound whatever the floating point
    did. The minimum is iterated from the target (every iterate is at most the step-``j`` minimum, itself at most the
    value); the maximum of an unbounded property from 1 on the states that can reach the target (every iterate is at
    least the true maximum), of a step-bounded one from the target for ``steps`` steps (or to a fixed point, bit for
    bit), capped by the unbounded one when ``steps`` x transitions exceeds ``max_work``. Sound whenever it stops.
    Returns the values and whether they converged (no value moved by more than ``precision``, a fixed point, or every
    step done) within ``max_iterations`` and the work budget: ``max_work`` transitions visited (each step costs its
    transitions plus :data:`STEP_COST`; the default about 20 s of steps on two cores).
    """
    greedy = _Greedy(lo, hi, maximize)
    base = target.astype(np.float64)
    if next_step:
        return greedy.step(base), True
    fixed = target | ~stay
    cost = int(hi.nnz) + STEP_COST
    if steps is not None:
        budget = steps if steps * cost <= max_work else max(max_work // cost, 1)
        v, done = _iterate_steps(greedy.step, np.where(fixed, base, 0.0), fixed, min(steps, budget))
        if done or budget >= steps or not maximize:  # every step done; or a min's lower bound after fewer steps
            return v, done or budget >= steps
        unbounded, done = robust_reachability(lo, hi, target, stay, maximize=True, precision=precision, max_work=max_work)
        return np.minimum(unbounded, 1.0), done
    # graph facts true of every chain in the intervals: a state that cannot reach the target through stay states (on
    # every edge that may be positive) is 0; one that cannot reach such a state, nor a state where an edge may vanish
    # (a low of 0), reaches it with probability 1 (each chain from it is one finite graph in which every state can)
    go = stay & ~target
    can = _backward(hi, target, go)
    loose = np.bincount(greedy.rows, weights=(lo.data <= 0).astype(np.float64), minlength=greedy.n) > 0
    surely = go & ~_backward(hi, ~can | (loose & go), go)
    fixed = fixed | ~can | surely
    base = np.where(surely, 1.0, np.where(can, base, 0.0))
    v = np.where(fixed, base, 1.0 if maximize else 0.0)
    return _iterate_to_convergence(greedy.step, v, fixed, maximize, precision, min(max_iterations, max(max_work // cost, 1)))


def _iterate_steps(
    step: Callable[[np.ndarray], np.ndarray], v: np.ndarray, fixed: np.ndarray, count: int
) -> tuple[np.ndarray, bool]:
    """``count`` steps from ``v`` (``fixed`` states kept), and whether a fixed point (bit for bit) ended them early."""
    for _ in range(count):
        new = np.where(fixed, v, step(v))
        if np.array_equal(new, v):
            return v, True
        v = new
    return v, False


def _iterate_to_convergence(
    step: Callable[[np.ndarray], np.ndarray],
    v: np.ndarray,
    fixed: np.ndarray,
    maximize: bool,
    precision: float,
    most: int,
) -> tuple[np.ndarray, bool]:
    """At most ``most`` steps from ``v``, each bound only tightening, until converged (see
    :func:`robust_reachability`); the values and whether they converged."""
    moved = np.inf
    for _ in range(most):
        new = np.where(fixed, v, step(v))
        new = np.minimum(new, v) if maximize else np.maximum(new, v)  # each bound only tightens (still sound)
        change = float(np.abs(new - v).max(initial=0.0))
        rate = min(change / moved, 1.0) if moved > 0 else 0.0
        # converged: the moves, shrinking geometrically at this rate, would add at most ``precision`` in all
        if change == 0.0 or (change <= precision and (rate < 1.0 and change * rate / (1.0 - rate) <= precision)):
            return new, True
        v, moved = new, change
    return v, False


class _Greedy:
    """One step of the robust iteration on the interval chain ``lo``/``hi`` (see :func:`robust_reachability`): per
    row, the weak-duality bound at the ``lambda`` of the greedy distribution, rounded outwards; the greedy's order is
    kept between steps and sorted again only in the rows where it broke."""

    def __init__(self, lo: sp.csr_matrix, hi: sp.csr_matrix, maximize: bool) -> None:
        self.lo, self.hi, self.maximize = lo, hi, maximize
        self.n = n = lo.shape[0]
        self.rows = np.repeat(np.arange(n), np.diff(hi.indptr))
        self.gamma, self.k = sum_margin(int(np.diff(hi.indptr).max(initial=0)) + 1)  # one more rounding: w - lambda
        self.cap = hi.data - lo.data
        self.free = 1.0 - np.asarray(lo.sum(axis=1)).ravel()
        self.starts = hi.indptr[:-1]
        self.nonempty = np.diff(hi.indptr) > 0
        self.same_row = self.rows[1:] == self.rows[:-1]
        self.chosen: list[np.ndarray] = []  # per row, the successor whose value is lambda (kept while the order holds)

    def split(self, order: np.ndarray) -> np.ndarray:
        """``(n,)`` per row the entry of the greedy's last successor given mass (the first when none is), the
        successors in ``order`` (within each row, best first; ``rows[order]`` is ``rows``)."""
        n, rows, starts = self.n, self.rows, self.starts
        c = self.cap[order]
        before = np.cumsum(c) - c
        before -= np.repeat(before[starts] if n else before, np.diff(self.hi.indptr))  # per-row cumulative
        given = self.free[rows] - before > 0  # the greedy gives this successor some mass: a prefix of each row
        count = np.bincount(rows, weights=given, minlength=n).astype(np.int64)
        pick = np.minimum(starts + np.maximum(count - 1, 0), max(len(order) - 1, 0))
        return order[pick] if len(order) else pick

    def _lambda_entries(self, key: np.ndarray) -> np.ndarray:
        """Per row the entry whose value is the greedy's ``lambda`` for sort keys ``key`` (best first)."""
        rows, chosen = self.rows, self.chosen
        if not chosen:
            order = np.lexsort((key, rows))  # within each row, best successors first
            chosen[:] = [self.split(order), order]
        else:  # the greedy's split only changes where the order does: only those rows are sorted again
            order = chosen[1]
            ranked = key[order]
            broken = (ranked[1:] < ranked[:-1]) & self.same_row
            if broken.any():
                at = np.flatnonzero(np.isin(rows, np.unique(rows[1:][broken])))
                sub = order[at]
                order[at] = sub[np.lexsort((key[sub], rows[at]))]
                chosen[0] = self.split(order)
        return chosen[0]

    def step(self, v: np.ndarray) -> np.ndarray:
        """``(n,)``: the bound one step from ``v``, inside [0, 1]."""
        n, rows, lo, hi, gamma, k = self.n, self.rows, self.lo, self.hi, self.gamma, self.k
        w = v[hi.indices]
        entry = self._lambda_entries(-w if self.maximize else w)
        lam = np.zeros(n)
        lam[self.nonempty] = w[entry[self.nonempty]]
        diff = w - lam[rows]
        over, under = np.maximum(diff, 0.0), np.maximum(-diff, 0.0)
        u = 2.0**-53
        if self.maximize:  # max p.w <= lambda + sum hi (w - lambda)+ - sum lo (lambda - w)+
            plus = rounded_up(np.bincount(rows, weights=hi.data * over, minlength=n), gamma, k)
            minus = rounded_down(np.bincount(rows, weights=lo.data * under, minlength=n), gamma, k)
        else:  # min p.w >= lambda + sum lo (w - lambda)+ - sum hi (lambda - w)+
            plus = rounded_down(np.bincount(rows, weights=lo.data * over, minlength=n), gamma, k)
            minus = rounded_up(np.bincount(rows, weights=hi.data * under, minlength=n), gamma, k)
        total = lam + plus
        margin = 2.0 * u * (1.0 + 2.0 * u) * total + 2 * _TINY  # the two final roundings
        out = total - minus + margin if self.maximize else total - minus - margin
        return np.clip(out, 0.0, 1.0)


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
