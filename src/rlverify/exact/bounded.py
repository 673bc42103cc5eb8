"""Step-bounded reachability by matrix-vector steps: the one per-step loop (:func:`iterate`) with its work budget, exact
step ranks of graph games (:func:`ranks`, :func:`qualitative`), and ``P(phi U<=k psi)`` with a certified bracket
(:func:`bounded_until`, on a chain or an MDP, in memory or on disk)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlverify.arrays import distinct
from rlverify.errors import PropertyError
from rlverify.exact.ondisk import RowBlocks, block_ranks
from rlverify.exact.options import MAX_WORK, STEP_WORK
from rlverify.exact.outcome import CheckOutcome
from rlverify.exact.rounding import relative, step_rounding

__all__ = ["bounded_until", "iterate", "on_disk", "positive_pattern", "qualitative", "ranks", "step_budget", "step_work"]

#: a transition matrix: scipy CSR ``(C, S)``, or a chain on disk (:class:`~rlverify.exact.ondisk.RowBlocks`, or rows
#: partitioned across Ray actors whose ``local`` rows are on disk)
Matrix = Any


def on_disk(matrix: Matrix) -> bool:
    """Whether ``matrix`` is a chain on disk (:class:`~rlverify.exact.ondisk.RowBlocks`: read in row blocks, or
    partitioned across Ray actors: its ``local`` rows are those on disk)."""
    return isinstance(getattr(matrix, "local", None), RowBlocks)


def step_budget(k: int, nnz: int, max_work: int | None) -> int:
    """How many of ``k`` steps over ``nnz`` transitions a per-step loop may take within ``max_work`` multiply-adds
    (None: all ``k``), a step counting at least :data:`~rlverify.exact.options.STEP_WORK`; at least one."""
    per_step = max(nnz, STEP_WORK)  # a step's fixed cost, however few its transitions
    return k if max_work is None or k * per_step <= max_work else max(max_work // per_step, 1)


def step_work(k: int, nnz: int) -> str:
    """``k`` steps over ``nnz`` transitions as the work :func:`step_budget` counts, in words (for messages)."""
    floor = f" (a step counts at least {STEP_WORK:,})" if nnz < STEP_WORK else ""
    return f"{k:,} steps x {nnz:,} transitions{floor} = {k * max(nnz, STEP_WORK):.3g} multiply-adds"


def _within(x: np.ndarray, j: int, d: int, upper_cap: np.ndarray, precision: float) -> bool:
    """Whether the certified lower bound of the step-``j`` values ``x`` is within ``precision`` (relative) of
    ``upper_cap`` in every state."""
    lo_f, _, ab = step_rounding(j, d)
    lo = np.maximum(x * lo_f - ab, 0.0)
    return bool(np.all(upper_cap - lo <= precision * lo))


def iterate(
    step: Callable[[np.ndarray], np.ndarray],
    target: np.ndarray,
    k: int,
    budget: int,
    *,
    d: int = 1,
    upper_cap: np.ndarray | None = None,
    precision: float = 0.0,
    progress: Callable[[str], None] | None = None,
    what: str = "step-bounded iteration",
) -> tuple[np.ndarray, int, str | None]:
    """The step-``j`` values from ``target`` until ``k`` steps, the ``budget``, a fixed point (``stop`` ``"fixed
    point"``) or, with ``upper_cap``, the certified lower bound within ``precision`` of it (``"precision"``).

    The one per-step loop of step-bounded computations (reachability, expected visits, expected rewards): ``step``
    is deterministic, so once ``step(x) == x`` bit for bit every further step returns ``x`` and the values after
    ``k`` steps are ``x``, exactly as if all ``k`` were taken. ``stop`` None and ``j < k``: the budget ran out.
    """
    x = target.copy()
    j, stop = 0, None
    shown = time.perf_counter()
    while j < min(k, budget):
        nxt = step(x)
        j += 1
        if np.array_equal(nxt, x):
            stop = "fixed point"
            break
        x = nxt
        if upper_cap is not None and j % 16 == 0 and _within(x, j, d, upper_cap, precision):
            stop = "precision"
            break
        if progress is not None and time.perf_counter() - shown > 0.5:
            shown = time.perf_counter()
            progress(f"{what}: step {j:,} of {k:,}")
    return x, j, stop


def _over_budget(
    k: int, nnz: int, max_work: int, precision: float, j: int, d: int, value: float, cap: float | None
) -> PropertyError:
    """The refusal of a step bound the budget did not reach, with the bracket reached after ``j`` steps."""
    lo_f, _, ab = step_rounding(j, d)
    reached = f"after {j:,} steps the value is at least {_digits(max(value * lo_f - ab, 0.0), math.floor)}" + (
        f" and at most {_digits(cap, math.ceil)} (the unbounded value)" if cap is not None else ""
    )
    return PropertyError(
        f"the step bound {k:,} needs {step_work(k, nnz)}, above the budget --max-work {max_work:.3g} "
        f"(about {max_work / 3e8:.0f} s), and the iteration "
        + (
            f"neither reached a fixed point nor came within --precision {precision:g} of the unbounded value"
            if cap is not None
            else "reached no fixed point"
        )
        + f" within it ({reached}); raise --max-work, "
        "lower the step bound, or check the unbounded property (P=? [F ...])"
    )


def _digits(value: float, rounding: Callable[[float], int], digits: int = 6) -> str:
    """``value`` to ``digits`` significant digits rounded with ``rounding`` (math.floor for a lower bound, math.ceil
    for an upper one): a bound printed rounded to nearest can cross what it bounds (0.99999994 shown as 1)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(abs(value))))
    return f"{rounding(value * scale) / scale:.{digits}g}"


def positive_pattern(transitions: Matrix) -> Matrix:
    """``(C, S)`` int8 CSR of the positive entries of ``transitions`` (CSR), canonical, the input left untouched.

    Its index arrays are the input's own when it is canonical with no zero entries (1 byte per transition).
    """
    T = sp.csr_matrix(transitions)
    positive = T.data > 0
    if positive.all() and T.has_canonical_format:
        return sp.csr_matrix((positive.view(np.int8), T.indices, T.indptr), shape=T.shape, copy=False)
    pattern = sp.csr_matrix((positive.view(np.int8), T.indices.copy(), T.indptr.copy()), shape=T.shape)
    pattern.eliminate_zeros()
    pattern.sum_duplicates()
    return pattern


def _settled(need: np.ndarray, at: np.ndarray, every: bool) -> np.ndarray:
    """The distinct ``at`` whose ``need`` is met by this level's hits: each hit counts one (``every``: all of an
    element's successors or choices must be hit) or any hit settles it."""
    if every:
        np.subtract.at(need, at, 1)
    else:
        need[at] = 0
    at = distinct(at)
    return at[need[at] <= 0]


def ranks(
    transitions: Matrix,
    row_groups: np.ndarray | None,
    allowed: np.ndarray,
    target: np.ndarray,
    *,
    all_choices: bool,
    all_successors: bool,
    limit: int,
) -> np.ndarray:
    """``(S,)`` int64 exact step ranks of a graph game towards ``target`` (-1: above ``limit`` or never).

    ``rank = 0`` on ``target``; on ``allowed`` states ``1 + Q_c Q_t rank(t)`` over the state's choices ``c``
    and their successors ``t`` (positive entries of ``transitions``, ``(C, S)`` CSR; ``row_groups``
    ``(S+1,)``, None: one choice per state), with ``Q_c`` max (``all_choices``) or min and ``Q_t`` max
    (``all_successors``) or min. So ``rank <= k`` means: some path reaches the target within k steps
    (min, min); for every scheduler some path does (max, min); surely within k steps under some scheduler
    (min, max) or under every one (max, max). Pure graph analysis: no floating point.
    """
    C, S = transitions.shape
    groups = np.arange(S + 1, dtype=np.int64) if row_groups is None else np.asarray(row_groups, dtype=np.int64)
    choice_state = np.repeat(np.arange(S), np.diff(groups))
    pattern = positive_pattern(transitions)
    choice_need = np.diff(pattern.indptr).astype(np.int64) if all_successors else np.ones(C, dtype=np.int64)
    reverse = pattern.T.tocsr()  # (S, C): the choices having each state as a successor
    del pattern
    rank = np.full(S, -1, dtype=np.int64)
    rank[target] = 0
    state_need = np.diff(groups).astype(np.int64) if all_choices else np.ones(S, dtype=np.int64)
    choice_done = np.zeros(C, dtype=bool)
    may = np.asarray(allowed, dtype=bool) & ~np.asarray(target, dtype=bool)
    frontier = np.flatnonzero(target)
    level = 0
    while len(frontier) and level < limit:
        ch = reverse[frontier].indices  # scipy's row gather: 5 bytes per entry, not three int64 index arrays
        if len(ch) == 0:
            break
        ch = _settled(choice_need, ch[~choice_done[ch]], all_successors)
        choice_done[ch] = True
        st = choice_state[ch]
        st = _settled(state_need, st[may[st] & (rank[st] < 0)], all_choices)
        level += 1
        rank[st] = level
        frontier = st
    return rank


def qualitative(
    transitions: Matrix,
    row_groups: np.ndarray | None,
    phi: np.ndarray,
    psi: np.ndarray,
    steps: int,
    init: int,
    optimum: str | None = None,
) -> tuple[bool, bool]:
    """``(zero, one)``: whether ``P(phi U<=steps psi)`` at ``init`` is exactly 0 / exactly 1 (graph analysis).

    ``optimum``: ``"max"``/``"min"`` over an MDP's schedulers (step-dependent ones, as Storm's Pmax/Pmin of a
    step-bounded property); None for a chain.
    """
    every = optimum == "min"
    positive = ranks(transitions, row_groups, phi, psi, all_choices=every, all_successors=False, limit=steps)
    surely = ranks(transitions, row_groups, phi, psi, all_choices=every, all_successors=True, limit=steps)
    return bool(positive[init] < 0), bool(surely[init] >= 0)


@dataclass(frozen=True)
class _Problem:
    """``P(phi U<=k psi)`` at ``init`` on ``matrix``: ``d`` bounds a row's products (its longest row + 1), ``groups``
    an MDP's row groups (None: a chain) and ``optimum`` its ``"max"``/``"min"``."""

    matrix: Matrix
    phi: np.ndarray
    psi: np.ndarray
    k: int
    init: int
    groups: np.ndarray | None
    optimum: str | None
    d: int
    nnz: int

    def step(self) -> Callable[[np.ndarray], np.ndarray]:
        """One matrix-vector step ``x -> psi + (phi & ~psi) (max/min over choices) (M x)``."""
        matrix, groups = self.matrix, self.groups
        go = (self.phi & ~self.psi).astype(np.float64)
        target = self.psi.astype(np.float64)
        reduce = None if self.optimum is None else (np.maximum if self.optimum == "max" else np.minimum)

        def step(x: np.ndarray) -> np.ndarray:
            q = matrix @ x
            if reduce is not None:
                assert groups is not None
                q = reduce.reduceat(q, groups[:-1])
            return target + go * q  # psi and go are disjoint: no rounding outside the products' sums

        return step


def _problem(
    matrix: Matrix, phi: np.ndarray, psi: np.ndarray, steps: int, init: int, row_groups: np.ndarray | None, optimum: str | None
) -> _Problem:
    if not on_disk(matrix):
        matrix = sp.csr_matrix(matrix, dtype=np.float64)
    groups = None if row_groups is None else np.asarray(row_groups, dtype=np.int64)
    if groups is not None and (np.diff(groups) <= 0).any():
        raise PropertyError("internal: an MDP state without choices")
    d = int(np.diff(matrix.indptr).max(initial=0)) + 1
    k, nnz = max(int(steps), 0), max(int(matrix.nnz), 1)
    return _Problem(matrix, phi, psi, k, init, groups, optimum, d, nnz)


def bounded_until(
    matrix: Matrix,
    phi: np.ndarray,
    psi: np.ndarray,
    steps: int,
    init: int,
    *,
    row_groups: np.ndarray | None = None,
    optimum: str | None = None,
    precision: float = 1e-6,
    max_work: int | None = MAX_WORK,
    cap: Callable[[], np.ndarray | None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> CheckOutcome:
    """``P(phi U<=steps psi)`` by matrix-vector steps, with a certified bracket and exact graph facts.

    ``matrix``: ``(C, S)`` CSR, a chain's (``row_groups`` None) or an MDP's (``optimum`` ``"max"``/``"min"``
    over its choices, ``row_groups`` ``(S+1,)``). The step-j values ``x_j`` only grow with j and are at most the
    unbounded value, so the iteration stops early, soundly, when

    * ``x_{j+1} = x_j`` bit for bit: the computation would return ``x_j`` after every further step, and the
      rounding analysis of ``steps`` steps (:func:`~rlverify.exact.rounding.step_rounding`) applies to it; or
    * ``cap()`` (per-state certified upper bounds of the unbounded value, asked for when the work exceeds
      ``max_work``) is within ``precision`` (relative) of the certified lower bound of ``x_j`` in every state:
      the step-``steps`` value lies between them.

    Raises:
        PropertyError: ``steps`` x transitions exceeds ``max_work`` and neither stop was reached within it
            (the message gives the estimate, the bracket reached and the option to change).
    """
    p = _problem(matrix, phi, psi, steps, init, row_groups, optimum)
    x, j, stop, upper_cap = _run(p, precision, max_work, cap, progress)
    lowers, uppers = _bracket(x, j, p, stop, upper_cap)
    zero, one = _facts(p, x if stop != "precision" else None)
    return _bounded_outcome(x, lowers, uppers, zero, one, j, p.k, stop, precision, init)


def _run(
    p: _Problem,
    precision: float,
    max_work: int | None,
    cap: Callable[[], np.ndarray | None] | None,
    progress: Callable[[str], None] | None,
) -> tuple[np.ndarray, int, str | None, np.ndarray | None]:
    """``(x, j, stop, upper_cap)``: the step-``j`` values of :func:`bounded_until` within the budget, why they
    stopped, and the unbounded value's certified upper bounds when asked for; refused when no stop is reached."""
    budget = step_budget(p.k, p.nnz, max_work)
    # the unbounded value (an LU of the chain: memory and time) only where the k steps would exceed the budget
    # (the precision stop checked as it goes, as before the per-step floor of STEP_WORK); where only that floor keeps
    # the budget below k steps, the precision is checked once the budget is spent: a fixed point before it stays exact
    early = cap is not None and p.k * p.nnz > (MAX_WORK if max_work is None else max_work)
    upper_cap = cap() if cap is not None and (early or budget < p.k) else None
    x, j, stop = iterate(
        p.step(),
        p.psi.astype(np.float64),
        p.k,
        budget,
        d=p.d,
        upper_cap=upper_cap if early else None,
        precision=precision,
        progress=progress,
    )
    if stop is None and j < p.k:
        stop = _budget_spent(p, x, j, upper_cap, not early, precision, max_work)
    return x, j, stop, upper_cap


def _budget_spent(
    p: _Problem, x: np.ndarray, j: int, upper_cap: np.ndarray | None, late: bool, precision: float, max_work: int | None
) -> str:
    """``"precision"`` when the budget stopped the steps within ``precision`` of ``upper_cap`` (``late``: not checked
    as it went), else the refusal with the bracket reached."""
    if upper_cap is not None and late and _within(x, j, p.d, upper_cap, precision):
        return "precision"
    assert max_work is not None  # the budget stopped the iteration
    cap_at = None if upper_cap is None else float(upper_cap[p.init])
    raise _over_budget(p.k, p.nnz, max_work, precision, j, p.d, float(x[p.init]), cap_at)


def _bracket(
    x: np.ndarray, j: int, p: _Problem, stop: str | None, upper_cap: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(lowers, uppers)`` ``(S,)``: certified bounds of the step-``k`` values from the step-``j`` values ``x``."""
    lo_j, _, ab_j = step_rounding(j, p.d)
    _, hi_k, ab_k = step_rounding(p.k, p.d)
    lowers = np.maximum(x * lo_j - ab_j, 0.0)
    if stop == "precision":
        assert upper_cap is not None
        uppers = np.minimum(upper_cap, 1.0)
    else:  # every step done, or a fixed point: the computed step-k values are x
        uppers = np.minimum(x * hi_k + ab_k, 1.0)
        if upper_cap is not None:
            uppers = np.minimum(uppers, upper_cap)
    return lowers, np.maximum(uppers, lowers)


def _bounded_outcome(
    x: np.ndarray,
    lowers: np.ndarray,
    uppers: np.ndarray,
    zero: bool,
    one: bool,
    j: int,
    k: int,
    stop: str | None,
    precision: float,
    init: int,
) -> CheckOutcome:
    """The outcome of :func:`bounded_until`: the value at ``init`` inside its bracket, and what was computed."""
    value, lower, upper = float(x[init]), float(lowers[init]), float(uppers[init])
    if zero:
        value = lower = upper = 0.0
    elif one:
        value = lower = upper = 1.0
    value = min(max(value, lower), upper)
    how = {
        None: f"{k:,} matrix-vector steps",
        "fixed point": f"{j:,} matrix-vector steps (a fixed point: every further step gives the same values)",
        "precision": f"{j:,} of {k:,} matrix-vector steps (stopped when the values after {j:,} steps were within "
        f"{precision:g} of the unbounded value, an upper bound of the step-bounded one)",
    }[stop]
    rel = relative(value, lower, upper)
    note = (
        f"step-bounded: {how}; true value in [{lower:.12g}, {upper:.12g}] (certified: rounding of sums of "
        f"non-negative terms{', and the unbounded value' if stop == 'precision' else ''}), relative error <= "
        f"{rel:.2g}"
    )
    warning = None
    if zero or one:
        note = f"step-bounded: exactly {int(one)} by graph analysis ({how} for the other states)"
    elif lower <= 0 < upper:
        note = (
            f"step-bounded: {how}; only an absolute bound is known: true value in [0, {upper:.3g}] (positive: the "
            "target is reachable within the bound)"
        )
        warning = (
            f"value {value:.3g}: only the absolute bound [0, {upper:.3g}] is known (underflow); the value is "
            "positive (graph analysis)"
        )
    method = "step-bounded matrix-vector steps (certified bracket)"
    return CheckOutcome(
        value=value,
        lower=lower,
        upper=upper,
        values=x,
        method=method,
        note=note,
        warning=warning,
        zero=zero,
        one=one,
        lowers=lowers,
        uppers=uppers,
    )


def _facts(p: _Problem, x: np.ndarray | None) -> tuple[bool, bool]:
    """``(zero, one)`` of :func:`qualitative`, read off the computed step-``k`` values ``x`` where they decide both
    (no reversed graph: ~6 bytes per transition), else by :func:`qualitative`.

    On a chain, computed values are sums of products of the stored (non-negative) probabilities, so ``x[init] > 0``
    means a path of positive transitions reaches ``psi`` within ``k`` steps: not zero. If every path reached ``psi``
    within ``k`` steps, the value would be at least ``m^k`` for ``m`` the least row sum of the ``phi & ~psi`` rows
    (by induction on the steps), so a computed ``x[init]`` below its rounding-adjusted bound means: not one.
    """
    if p.optimum is None and x is not None and x[p.init] > 0 and _surely_not_one(p, x):
        return False, False
    if on_disk(p.matrix):  # the ranks by passes over the row blocks (no reversed chain on disk)
        positive, surely = block_ranks(p.matrix.local, p.phi, p.psi, p.k)
        return bool(positive[p.init] < 0), bool(surely[p.init] >= 0)
    return qualitative(p.matrix, p.groups, p.phi, p.psi, p.k, p.init, p.optimum)


def _surely_not_one(p: _Problem, x: np.ndarray) -> bool:
    """Whether the computed chain values ``x`` (positive at ``init``) are below what a value of 1 would give."""
    go = p.phi & ~p.psi
    row_sums = p.matrix @ np.ones(p.matrix.shape[1])
    least = float(row_sums[go].min(initial=1.0)) * (1.0 - p.d * 2.0**-52)  # computed sums round by < d ulps
    _, hi_f, ab = step_rounding(p.k, p.d)  # the true value is at most x hi_f + ab
    return bool(least > 0 and x[p.init] * hi_f + ab < math.exp(p.k * math.log(min(least, 1.0))))
