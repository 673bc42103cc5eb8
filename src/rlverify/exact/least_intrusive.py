"""The least intrusive correction of a policy meeting a step-bounded bound: a linear program over occupation measures.

For ``P<=b [phi U<=k psi]`` (a bad event; ``F<=k psi`` is ``true U<=k psi``) or ``P>=b [...]`` (a goal) on the
property-directed MDP, a *correction* replaces the network's distribution ``pi(.|s)`` by ``sigma(.|s, j)``, which may
depend on the step ``j`` (the product of the MDP with the step counter ``0..k``) and be randomised. Its intrusion is
the **expected probability mass moved away from the network's choices**, summed over the steps of a run before it
decides the property::

    M(sigma) = E_sigma [ sum_{j < k, s_j in phi & !psi} TV(pi(.|s_j), sigma(.|s_j, j)) ],
    TV(p, q) = sum_c max(0, p_c - q_c)

The least intrusive correction minimises ``M`` subject to the bound. With occupation measures ``x[j, c]`` (the
probability of being at choice ``c``'s state at step ``j`` undecided and taking ``c``) both are linear: flow
conservation per ``(j, s)``, the reach probability ``sum x[j, c] T(c, psi)``, and ``M = sum y`` with
``y[j, c] >= occ(j, s) pi(c) - x[j, c]``, ``y >= 0``. The optimum over these step-dependent randomised corrections is
the optimum over every history-dependent one (a history-dependent correction has the occupation measure of a
step-dependent one and, TV being convex, at least its intrusion). HiGHS solves the LP (``scipy.optimize.linprog``).

The LP's answer is then **verified exactly**: the corrected policy's chain on the product (state x step) is checked by
the exact engine's certified reachability solve (:func:`~rlverify.exact.linear.reachability`: graph analysis, sparse
LU, certified bracket), and its intrusion recomputed on that chain. The verdict follows the certified bracket only;
when HiGHS's tolerance leaves the corrected value a hair beyond the bound, the LP is solved again with the bound
tightened by that excess (said in the result), so the reported intrusion is the optimum for the tightened bound, and
the LP's optimum at the bound itself is reported as the least any correction can intrude (up to HiGHS's tolerance).

Unbounded properties are refused: a correction there needs memory of unbounded size in general, and the product with
a step counter does not apply.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rlverify.choices import Numerics
from rlverify.errors import OptionError, PolicyError, PropertyError
from rlverify.exact.interventions import expected_total
from rlverify.exact.linear import reachability
from rlverify.exact.outcome import verdict

log = logging.getLogger(__name__)

__all__ = ["MAX_LP_VARIABLES", "MEASURE", "Correction", "least_intrusive"]

#: what the LP minimises (the result's ``measure``)
MEASURE = "expected probability mass moved away from the network's choices per run (within the step bound)"
#: largest LP (variables) solved; above it the mode is refused naming the size
MAX_LP_VARIABLES = 4_000_000
#: tightening rounds when HiGHS's tolerance leaves the corrected value beyond the bound
_ROUNDS = 4
#: comparisons of a bad event's bound (as text or Storm's names)
_BELOW = ("<=", "<", "LESS", "LESS_EQUAL", "LEQ")
#: a product state counts as corrected when it moves more than this much mass
MOVED = 1e-12


@dataclass(frozen=True)
class Correction:
    """The least intrusive correction and its exact check (:func:`least_intrusive`).

    Attributes:
        sigma: ``(L, C)`` float64, the corrected weight of each choice at steps ``0..L-1`` (rows sum to 1 per state
            over its choices; ``pi`` where the state is not reached undecided at that step).
        layers: ``(L,)`` the states that are reachable undecided at each step (int64 arrays).
        lp_optimum: the LP's optimal intrusion at the bound (HiGHS, float; the least any correction can do).
        measure_value: the corrected policy's intrusion :data:`MEASURE`, recomputed on its product chain.
        tightened: how much the bound was tightened for the corrected value to be certified within it (0: none).
        value, lower, upper: the corrected policy's probability of the property, certified bracket on the product.
        satisfied: the verdict from the bracket (None: undecided).
        corrected_product_states: reached (state, step) pairs where mass is moved; corrected_states: distinct model
            states among them; randomised_product_states: corrected pairs where sigma keeps more than one choice.
        expected_interventions: expected number of steps per run at which mass is moved.
        lp_variables, lp_constraints: the LP's size; product_states: the product chain's states; seconds: per phase.
    """

    sigma: np.ndarray
    layers: tuple[np.ndarray, ...]
    lp_optimum: float
    measure_value: float
    tightened: float
    value: float
    lower: float | None
    upper: float | None
    satisfied: bool | None
    corrected_product_states: int
    corrected_states: int
    randomised_product_states: int
    expected_interventions: float
    lp_variables: int
    lp_constraints: int
    product_states: int
    seconds: dict[str, float]


def _layers(T: sp.csr_matrix, row_groups: np.ndarray, go: np.ndarray, init: int, k: int) -> list[np.ndarray]:
    """The states reachable undecided (in ``go``) at each step ``0..k-1`` under some choice."""
    layers = [np.array([init], dtype=np.int64)] if go[init] else []
    while layers and len(layers) < k:
        choices = _choices_of(layers[-1], row_groups)
        succ = np.unique(T[choices].indices)
        nxt = succ[go[succ]]
        if not len(nxt):
            break
        layers.append(nxt.astype(np.int64))
    return layers


def _choices_of(states: np.ndarray, row_groups: np.ndarray) -> np.ndarray:
    lo, hi = row_groups[states], row_groups[states + 1]
    counts = hi - lo
    return np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))


def least_intrusive(
    T: sp.csr_matrix,
    row_groups: np.ndarray,
    pi: np.ndarray,
    phi: np.ndarray,
    psi: np.ndarray,
    init: int,
    k: int,
    bound: float,
    comparison: str,
    *,
    precision: float = 1e-6,
    max_variables: int = MAX_LP_VARIABLES,
) -> Correction:
    """The least intrusive correction of ``pi`` meeting ``bound`` (see the module docstring), verified exactly.

    Args:
        T: ``(C, S)`` CSR, the MDP's choices' distributions; row_groups: ``(S + 1,)`` each state's choices.
        pi: ``(C,)`` the network's weight on each choice (summing to 1 over each undecided state's choices).
        phi, psi: ``(S,)`` bool, ``P [phi U<=k psi]``; init: the initial state; k: the step bound (>= 0).
        bound, comparison: the property's bound and its comparison (``<=``/``<`` a bad event, ``>=``/``>`` a goal).

    Raises:
        PolicyError: ``pi`` does not sum to 1 over an undecided reachable state's choices (mass on unavailable
            actions); PropertyError: no correction meets the bound; OptionError: the LP is larger than
            ``max_variables``.
    """
    from scipy.optimize import linprog  # lazy: scipy.optimize, start-up

    times: dict[str, float] = {}
    t0 = time.perf_counter()
    T = sp.csr_matrix(T, dtype=np.float64)
    S = len(row_groups) - 1
    go = phi & ~psi
    bad = comparison in _BELOW
    layers = _layers(T, row_groups, go, init, k)
    choice_layers = [_choices_of(states, row_groups) for states in layers]
    sizes = [len(c) for c in choice_layers]
    N = int(sum(sizes))
    if 2 * N > max_variables:
        raise OptionError(
            f"least-intrusive: the LP over (state x step) would have {2 * N:,} variables, more than {max_variables:,}: "
            "use a smaller step bound or model, or --meet loosest"
        )
    cs = np.repeat(np.arange(S), np.diff(row_groups))
    for states, choices in zip(layers, choice_layers, strict=True):
        totals = np.bincount(cs[choices], weights=pi[choices], minlength=S)[states]
        off = np.flatnonzero(np.abs(totals - 1.0) > 1e-9)
        if len(off):
            raise PolicyError(
                f"least-intrusive: the policy's weights in state {int(states[off[0]])} sum to {totals[off[0]]:.9g}, "
                "not 1 (mass on unavailable actions): use --unavailable renormalize"
            )
    times["layers"] = time.perf_counter() - t0
    if not N:  # the initial state decides the property: nothing to correct
        value = float(psi[init])
        ok, _ = verdict(bound, comparison, value, value, probability=True)
        if ok is not True:
            raise PropertyError(
                f"least-intrusive: the initial state decides the property (value {value:g}): no correction can"
            )
        return Correction(np.zeros((0, len(pi))), (), 0.0, 0.0, 0.0, value, value, value, True, 0, 0, 0, 0.0, 0, 0, 1, times)
    offsets = np.r_[0, np.cumsum(sizes)]
    rows_eq, cols_eq, vals_eq, b_eq = [], [], [], []
    row_of = np.full(S, -1, dtype=np.int64)
    eq_start = 0
    reach = np.zeros(N)
    for j, (states, choices) in enumerate(zip(layers, choice_layers, strict=True)):
        row_of[:] = -1
        row_of[states] = eq_start + np.arange(len(states))
        # sum_{c in s} x[j, c]
        rows_eq.append(row_of[cs[choices]])
        cols_eq.append(offsets[j] + np.arange(len(choices)))
        vals_eq.append(np.ones(len(choices)))
        rhs = np.zeros(len(states))
        if j == 0:
            rhs[0] = 1.0
        else:
            # - sum_{c' in layer j-1} T(c', s) x[j-1, c']
            sub = T[choice_layers[j - 1]].tocoo()
            into = row_of[sub.col]
            keep = into >= 0
            rows_eq.append(into[keep])
            cols_eq.append(offsets[j - 1] + sub.row[keep])
            vals_eq.append(-sub.data[keep])
        b_eq.append(rhs)
        reach[offsets[j] : offsets[j + 1]] = T[choices] @ psi.astype(np.float64)
        eq_start += len(states)
    a_eq = sp.csr_matrix(
        (np.concatenate(vals_eq), (np.concatenate(rows_eq), np.concatenate(cols_eq))), shape=(eq_start, 2 * N)
    )
    # y[j, c] >= pi_c occ(j, s) - x[j, c]:  pi_c sum_{c'' in s} x[j, c''] - x[j, c] - y[j, c] <= 0
    all_choices = np.concatenate(choice_layers)  # variable i is x of all_choices[i] (states' choices contiguous)
    first = row_groups[cs[all_choices]]
    count = row_groups[cs[all_choices] + 1] - first
    r_ub = np.repeat(np.arange(N), count)
    sibling = np.repeat(np.arange(N) - (all_choices - first), count) + _ranges(count)
    a_moved = sp.csr_matrix(
        (
            np.r_[np.repeat(pi[all_choices], count), -np.ones(N), -np.ones(N)],
            (np.r_[r_ub, np.arange(N), np.arange(N)], np.r_[sibling, np.arange(N), N + np.arange(N)]),
        ),
        shape=(N, 2 * N),
    )
    sign = 1.0 if bad else -1.0
    a_reach = sp.csr_matrix(np.r_[sign * reach, np.zeros(N)][None, :])
    a_ub = sp.vstack([a_moved, a_reach]).tocsr()
    cost = np.r_[np.zeros(N), np.ones(N)]
    times["assemble"] = time.perf_counter() - t0 - times["layers"]

    def solve(b: float) -> tuple[np.ndarray, float]:
        res = linprog(
            cost,
            A_ub=a_ub,
            b_ub=np.r_[np.zeros(N), sign * b],
            A_eq=a_eq,
            b_eq=np.concatenate(b_eq),
            bounds=(0, None),
            method="highs",
        )
        if res.status == 2:
            raise PropertyError(
                f"least-intrusive: no correction meets the bound {bound:g} (the optimum over all schedulers is on the "
                "wrong side of it)"
            )
        if res.status != 0:
            raise PropertyError(f"least-intrusive: HiGHS did not solve the LP ({res.message})")
        return np.maximum(res.x[:N], 0.0), float(res.fun)

    t1 = time.perf_counter()
    x, lp_optimum = solve(bound)
    times["lp"] = time.perf_counter() - t1
    tightened = 0.0
    for _ in range(_ROUNDS):
        sigma = _sigma(x, pi, layers, choice_layers, offsets, cs, S)
        t2 = time.perf_counter()
        checked = _verify(T, row_groups, sigma, layers, choice_layers, psi, go, init, k, pi, precision)
        times["verify"] = times.get("verify", 0.0) + time.perf_counter() - t2
        value, lower, upper = checked[0], checked[1], checked[2]
        ok, _ = verdict(bound, comparison, lower, upper, probability=True)
        if ok is True:
            break
        if upper is None or lower is None:
            break
        excess = (upper - bound) if bad else (bound - lower)
        if not excess < 1e-5:
            break
        tightened = max(2 * tightened, 2 * abs(excess) + 1e-12)
        log.info("least-intrusive: the corrected value misses the bound by %.3g; tightening by %.3g", excess, tightened)
        t1 = time.perf_counter()
        x, _ = solve(bound - tightened if bad else bound + tightened)
        times["lp"] += time.perf_counter() - t1
    _, _, _, mass, interventions, corrected, model_states, randomised, n_product = checked
    return Correction(
        sigma=sigma,
        layers=tuple(layers),
        lp_optimum=lp_optimum,
        measure_value=mass,
        tightened=tightened,
        value=value,
        lower=lower,
        upper=upper,
        satisfied=ok,
        corrected_product_states=corrected,
        corrected_states=model_states,
        randomised_product_states=randomised,
        expected_interventions=interventions,
        lp_variables=2 * N,
        lp_constraints=int(a_eq.shape[0] + a_ub.shape[0]),
        product_states=n_product,
        seconds=times,
    )


def _ranges(count: np.ndarray) -> np.ndarray:
    """``[0..count[0]-1, 0..count[1]-1, ...]``."""
    total = int(count.sum())
    return np.arange(total) - np.repeat(np.cumsum(count) - count, count)


def _sigma(
    x: np.ndarray,
    pi: np.ndarray,
    layers: list[np.ndarray],
    choice_layers: list[np.ndarray],
    offsets: np.ndarray,
    cs: np.ndarray,
    S: int,
) -> np.ndarray:
    """``(L, C)`` the corrected weights from the occupation measure (``pi`` where a state is not occupied)."""
    sigma = np.tile(pi, (len(layers), 1))
    for j, choices in enumerate(choice_layers):
        xj = x[offsets[j] : offsets[j + 1]]
        occ = np.bincount(cs[choices], weights=xj, minlength=S)[cs[choices]]
        with np.errstate(invalid="ignore", divide="ignore"):
            sigma[j, choices] = np.where(occ > 0, xj / occ, pi[choices])
    return sigma


def _verify(
    T: sp.csr_matrix,
    row_groups: np.ndarray,
    sigma: np.ndarray,
    layers: list[np.ndarray],
    choice_layers: list[np.ndarray],
    psi: np.ndarray,
    go: np.ndarray,
    init: int,
    k: int,
    pi: np.ndarray,
    precision: float,
) -> tuple[float, float | None, float | None, float, float, int, int, int, int]:
    """The corrected policy's chain on the product: (value, lower, upper) by the certified reachability solve, the
    expected moved mass and interventions, corrected product / model states, randomised ones, product size."""
    S = len(row_groups) - 1
    cs = np.repeat(np.arange(S), np.diff(row_groups))
    starts = np.r_[0, np.cumsum([len(s) for s in layers])]
    n = int(starts[-1])
    hit, out = n, n + 1
    rows, cols, vals = [], [], []
    moved = np.zeros(n + 2)
    multi = np.zeros(n + 2, dtype=bool)
    index = np.full(S, -1, dtype=np.int64)
    for j, (states, choices) in enumerate(zip(layers, choice_layers, strict=True)):
        nxt = np.full(S, -1, dtype=np.int64)
        if j + 1 < len(layers):
            nxt[layers[j + 1]] = starts[j + 1] + np.arange(len(layers[j + 1]))
        index[:] = -1
        index[states] = starts[j] + np.arange(len(states))
        sub = sp.diags(sigma[j, choices]) @ T[choices]
        sub = sub.tocoo()
        src = index[cs[choices][sub.row]]
        dst = np.where(psi[sub.col], hit, np.where(go[sub.col] & (j + 1 < k), nxt[sub.col], out))
        dst = np.where(dst < 0, out, dst)
        rows.append(src)
        cols.append(dst)
        vals.append(sub.data)
        tv = np.maximum(pi[choices] - sigma[j, choices], 0.0)
        moved[:n] += np.bincount(index[cs[choices]], weights=tv, minlength=n + 2)[:n]
        kept = (sigma[j, choices] > 0).astype(np.int64)
        multi[:n] |= np.bincount(index[cs[choices]], weights=kept, minlength=n + 2)[:n] > 1
    rows.append(np.array([hit, out]))
    cols.append(np.array([hit, out]))
    vals.append(np.ones(2))
    P = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n + 2, n + 2))
    P.sum_duplicates()
    target = np.zeros(n + 2, dtype=bool)
    target[hit] = True
    start = 0  # layer 0 is the initial state
    outcome = reachability(P, np.ones(n + 2, dtype=bool), target, start, Numerics.SOUND, precision, 60.0)
    if outcome is None:
        raise PropertyError("least-intrusive: the product chain's exact solve was declined (too large)")
    corrected = moved > MOVED
    totals = expected_total(P, np.c_[corrected.astype(np.float64), moved], start, None, None)
    reached = _reached(P, start)
    model_of = np.concatenate(layers)
    hits = corrected[:n] & reached[:n]
    return (
        outcome.value,
        outcome.lower,
        outcome.upper,
        float(totals[1]),
        float(totals[0]),
        int(hits.sum()),
        len(np.unique(model_of[hits])),
        int((hits & multi[:n]).sum()),
        n + 2,
    )


def _reached(P: sp.csr_matrix, start: int) -> np.ndarray:
    """``(n,)`` bool: the states reached from ``start`` with positive probability."""
    from scipy.sparse.csgraph import breadth_first_order  # lazy: scipy.sparse.csgraph

    seen = np.zeros(P.shape[0], dtype=bool)
    graph = sp.csr_matrix((P.data > 0, P.indices, P.indptr), shape=P.shape)
    seen[breadth_first_order(graph, start, return_predecessors=False)] = True
    return seen
