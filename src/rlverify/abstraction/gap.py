"""Refinement by the gap: the initial region cut into cells, each abstracted on its own, until the bounds meet the
target; and what finishes every run: the worst-case witness, the gap and the threshold's verdict."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rlverify.abstraction.domains import Polytope, Template
from rlverify.abstraction.kinds import Domain, WitnessMethod
from rlverify.abstraction.options import AbstractionOptions, initial_box, time_budget_text
from rlverify.abstraction.unfolding import Budget
from rlverify.abstraction.witness import Probabilities, search_witness
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.results import AbstractionResult, PartBound, WorstWitness
from rlverify.results.abstraction import Verdict

log = logging.getLogger(__name__)

#: one abstraction of the box ``[lo, hi]`` with ``phi``: its result and the budgets it ran out of
CellRun = Callable[[np.ndarray, np.ndarray, float], tuple[AbstractionResult, frozenset[Budget]]]


def part_polytopes(result: AbstractionResult) -> list[Polytope]:
    """The initial parts of ``result`` as :class:`Polytope` objects."""
    t = Template(np.array(result.template_axes), result.variables, Domain(result.options.domain))
    return [Polytope(t, np.array(p.lo), np.array(p.hi)) for p in result.parts]


def witness(
    system: ContinuousSystem,
    probabilities: Probabilities,
    options: AbstractionOptions,
    results: Sequence[AbstractionResult],
    previous: WorstWitness | None = None,
) -> WorstWitness | None:
    """The best witness from the parts of ``results`` with the highest upper bounds (None with ``witness="none"``)."""
    if options.witness == WitnessMethod.NONE:
        return previous
    boxes = []
    for r in results:
        for poly, pb in zip(part_polytopes(r), r.parts, strict=True):
            lo, hi = poly.box()
            boxes.append((lo, hi, pb.bound))
        if not r.parts:  # the root was not refined (it meets the unsafe set): the cell itself
            boxes.append((np.array(r.initial_lo), np.array(r.initial_hi), r.upper_bound))
    lo0, hi0 = initial_box(system, options)
    return search_witness(
        system,
        probabilities,
        boxes,
        lo0,
        hi0,
        options.horizon,
        method=options.witness,
        runs=options.witness_runs,
        confidence=options.witness_confidence,
        seed=options.seed,
        previous=previous,
    )


def _worst_lower(result_parts: Sequence[PartBound], lower_all: float | None, witness: WorstWitness | None) -> float:
    """The best lower bound on the worst case: the witness's lower end, or a part's sound lower bound (it holds for
    every state of the part, so for one)."""
    best = max((p.lower for p in result_parts if p.lower is not None), default=0.0)
    return max(best, lower_all or 0.0, witness.lower if witness is not None else 0.0)


def _verdict(upper: float, witness: WorstWitness | None, worst_lower: float, threshold: float | None) -> Verdict | None:
    """The :class:`Verdict` on ``Pr <= threshold``; None without one."""
    if threshold is None:
        return None
    if upper <= threshold:
        return Verdict.SAFE
    if worst_lower > threshold:
        statistical = witness is not None and witness.lower == worst_lower and witness.method == WitnessMethod.SIMULATION
        return Verdict.UNSAFE_STATISTICAL if statistical else Verdict.UNSAFE_SOUND
    return Verdict.UNDECIDED


def finish(
    result: AbstractionResult,
    witness: WorstWitness | None,
    options: AbstractionOptions,
    *,
    stopped: str | None,
    cells: int | None,
    history: tuple[tuple[float, float, float, float], ...],
) -> AbstractionResult:
    """``result`` with the witness, the gap, the verdict and the refinement's record."""
    worst_lower = _worst_lower(result.parts, result.lower_all, witness)
    gap = max(0.0, result.upper_bound - worst_lower)
    verdict = _verdict(result.upper_bound, witness, worst_lower, options.threshold)
    warnings = list(result.warnings)
    if witness is not None and witness.lower > result.upper_bound + 1e-9:
        warnings.append(
            f"internal inconsistency: the witness's lower end {witness.lower:.6g} exceeds the sound upper bound "
            f"{result.upper_bound:.6g} (a statistical witness can, with probability 1 - confidence)"
        )
    return replace(
        result,
        worst_witness=witness,
        gap=gap,
        verdict=verdict,
        stopped=stopped,
        cells=cells,
        history=history,
        provenance=replace(result.provenance, warnings=warnings),
    )


@dataclass(eq=False)
class _Cell:
    """A box of the initial region abstracted on its own with its ``phi``."""

    lo: np.ndarray
    hi: np.ndarray
    phi: float
    result: AbstractionResult
    spent: frozenset[Budget] = frozenset()  # the budgets its abstraction ran out of
    splittable: bool = True
    cap: float = 1.0  # an upper bound of an enclosing cell (it holds here too)
    floor: float = 0.0  # a lower bound of an enclosing cell

    @property
    def upper(self) -> float:
        return min(self.result.upper_bound, self.cap)

    @property
    def lower(self) -> float:
        return max(self.result.lower_all if self.result.lower_all is not None else 0.0, self.floor)

    @property
    def coarse(self) -> bool:
        """Whether the cell's own refinement hit its limits (parts accepted above phi, or the part budget): its halves
        then keep its phi (a smaller phi would only make more unresolved parts)."""
        r = self.result
        return r.n_unresolved_parts > 0 or len(r.parts) >= r.options.max_parts // 2


#: the smallest phi a split cell is abstracted with
MIN_PHI = 0.01


def refine_by_gap(
    system: ContinuousSystem,
    options: AbstractionOptions,
    run: CellRun,
    probabilities: Probabilities,
    t_start: float,
    deadline: float | None,
) -> AbstractionResult:
    """Refinement driven by the gap: the initial region is cut into cells, each abstracted on its own by ``run``
    (sound upper and lower bounds per cell; the region's are their max and min). Each round splits the cell with the
    largest gap ``upper - lower`` weighted by how far its upper bound lies above the best lower bound on the worst
    case (the cells whose upper bound decides the answer), in halves along its widest side (relative to the initial
    box), each abstracted with ``phi * phi_decay``; a split whose halves ran out of time is undone (the parent's
    bounds stay). Stops when the gap is at most ``gap``, the threshold is decided, the time budget or ``max_cells``
    is spent, or no cell can be split; always returns the best bounds so far."""
    lo0, hi0 = initial_box(system, options)
    refinement = _GapRefinement(system, options, run, probabilities, clock=(t_start, deadline), box=(lo0, hi0))
    stopped = refinement.loop()
    combined = _combine(refinement.cells, options, lo0, hi0, time.perf_counter() - t_start)
    return finish(
        combined,
        refinement.witness,
        options,
        stopped=stopped,
        cells=len(refinement.cells),
        history=tuple(refinement.history),
    )


class _GapRefinement:
    """The cells of a refinement by the gap, its best witness and its record, round by round."""

    def __init__(
        self,
        system: ContinuousSystem,
        options: AbstractionOptions,
        run: CellRun,
        probabilities: Probabilities,
        *,
        clock: tuple[float, float | None],
        box: tuple[np.ndarray, np.ndarray],
    ) -> None:
        """``clock``: the run's start and deadline (``time.perf_counter()`` times); ``box``: the initial box."""
        self.system, self.options, self.run, self.probabilities = system, options, run, probabilities
        self.t_start, self.deadline = clock
        lo0, hi0 = box
        self.extent = np.where(hi0 > lo0, hi0 - lo0, np.inf)
        self.min_width = options.min_width if options.min_width is not None else system.min_width
        phi = float(options.phi)
        result, spent = run(lo0, hi0, phi)
        self.cells = [_Cell(lo0, hi0, phi, result, spent)]
        self.witness = witness(system, probabilities, options, [result])
        self.history: list[tuple[float, float, float, float]] = []

    def record(self, upper: float, worst_lower: float) -> None:
        self.history.append((time.perf_counter() - self.t_start, upper, min(c.lower for c in self.cells), worst_lower))

    def loop(self) -> str:
        """Rounds until one says why refinement stops."""
        while True:
            stopped = self.round()
            if stopped is not None:
                return stopped

    def round(self) -> str | None:
        """One round: split the cell that matters most (or mark it unsplittable); why refinement stops, or None."""
        upper = max(c.upper for c in self.cells)
        worst_lower = max(_worst_lower(c.result.parts, c.lower, self.witness) for c in self.cells)
        self.record(upper, worst_lower)
        log.info(
            "refinement by the gap: %d cells, upper %.6g, best lower bound on the worst case %.6g",
            len(self.cells),
            upper,
            worst_lower,
        )
        stopped = _stop_reason(self.options, upper, worst_lower, self.witness, len(self.cells), self.deadline)
        if stopped is not None:
            return stopped
        level = _target_level(self.options, worst_lower)
        todo = [c for c in self.cells if c.splittable and c.upper > level]
        if not todo:
            return "no cell above the target can be split further"
        cell = max(todo, key=lambda c: (c.upper - c.lower) * (c.upper - worst_lower))
        return self.split(cell, upper, worst_lower)

    def split(self, cell: _Cell, upper: float, worst_lower: float) -> str | None:
        """Split ``cell`` into halves along its widest sides, or keep it whole (it cannot be split, or a half ran out of
        states); why refinement stops (a half ran out of time: the split is undone), or None."""
        widths = (cell.hi - cell.lo) / self.extent
        axes = np.flatnonzero((widths >= 0.5 * widths.max()) & (cell.hi - cell.lo > 2 * self.min_width))[:SPLIT_AXES]
        if len(axes) == 0:
            cell.splittable = False
            return None
        phi = cell.phi if cell.coarse else max(MIN_PHI, cell.phi * float(self.options.phi_decay) ** len(axes))
        halves = []
        for lo, hi in _bisect(cell.lo, cell.hi, axes):
            result, spent = self.run(lo, hi, phi)
            halves.append(_Cell(lo, hi, phi, result, spent, cap=cell.upper, floor=cell.lower))
        spent = frozenset().union(*(h.spent for h in halves))
        if Budget.TIME in spent:
            self.record(upper, worst_lower)
            return "the time budget ran out (the last split was undone: its pieces were not finished)"
        if spent:  # a piece reached max_states: keep the cell whole (its bounds stay), split others
            cell.splittable = False
            return None
        self.cells.remove(cell)
        self.cells.extend(halves)
        self.witness = witness(
            self.system, self.probabilities, self.options, [h.result for h in halves], previous=self.witness
        )
        return None


def _target_level(options: AbstractionOptions, worst_lower: float) -> float:
    """The upper bound above which a cell needs splitting: the best lower bound plus ``gap``, or the threshold (the
    smaller of both when both are given)."""
    level = worst_lower
    if options.gap is not None:
        level = worst_lower + float(options.gap)
    if options.threshold is not None:
        level = min(level, float(options.threshold)) if options.gap is not None else float(options.threshold)
    return level


#: a cell is bisected along at most this many of its widest sides at once (2^SPLIT_AXES pieces)
SPLIT_AXES = 2


def _bisect(lo: np.ndarray, hi: np.ndarray, axes: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The ``2^len(axes)`` boxes of ``[lo, hi]`` bisected along each of ``axes``."""
    boxes = [(lo.copy(), hi.copy())]
    for axis in axes:
        mid = 0.5 * (lo[axis] + hi[axis])
        nxt = []
        for a, b in boxes:
            left_hi, right_lo = b.copy(), a.copy()
            left_hi[axis], right_lo[axis] = mid, mid
            nxt += [(a, left_hi), (right_lo, b)]
        boxes = nxt
    return boxes


def _stop_reason(
    options: AbstractionOptions,
    upper: float,
    worst_lower: float,
    witness: WorstWitness | None,
    n_cells: int,
    deadline: float | None,
) -> str | None:
    """Why refinement by the gap stops now, or None."""
    if options.threshold is not None and _verdict(upper, witness, worst_lower, options.threshold) != Verdict.UNDECIDED:
        return f"the threshold {options.threshold:g} is decided"
    if options.gap is not None and upper - worst_lower <= options.gap:
        return f"the gap {upper - worst_lower:.4g} is at most {options.gap:g}"
    if deadline is not None and time.perf_counter() > deadline:
        return f"{time_budget_text(options)} is spent"
    if n_cells >= options.max_cells:
        return f"max_cells={options.max_cells} cells reached"
    return None


#: the counts of a result that the cells' results add up to
_COUNTS = (
    "n_abstract_states",
    "n_polyhedra",
    "n_containment_merges",
    "n_shared_successors",
    "n_unrefined_states",
    "n_choices",
    "n_transitions",
    "n_unresolved_parts",
    "n_milp_parts",
)


def _combine(
    cells: Sequence[_Cell], options: AbstractionOptions, lo0: np.ndarray, hi0: np.ndarray, total: float
) -> AbstractionResult:
    """The cells' results as one: upper bound the largest, lower bound the smallest, parts and counts together."""
    results = [c.result for c in cells]
    first = results[0]
    timings = {k: sum(r.timings.get(k, 0.0) for r in results) for k in ("bounds", "refinement", "successors", "solving")}
    timings["total"] = total
    counts = {name: sum(getattr(r, name) for r in results) for name in _COUNTS}
    return replace(
        first,
        upper_bound=max(c.upper for c in cells),
        lower_all=min(c.lower for c in cells),
        maxmin_value=max(r.maxmin_value for r in results),
        parts=_cell_parts(cells),
        **counts,
        options=options,
        initial_lo=tuple(map(float, lo0)),
        initial_hi=tuple(map(float, hi0)),
        imdp=None if len(results) > 1 else first.imdp,
        provenance=replace(first.provenance, timings=timings, warnings=_distinct_warnings(results)),
    )


def _cell_parts(cells: Sequence[_Cell]) -> tuple[PartBound, ...]:
    """Every cell's parts, their bounds tightened by the cell's: a cell's bounds are also those of the cells it was
    split from (cap / floor)."""
    return tuple(
        replace(p, bound=min(p.bound, c.upper), lower=max(p.lower or 0.0, c.lower)) for c in cells for p in c.result.parts
    )


def _distinct_warnings(results: Sequence[AbstractionResult]) -> list[str]:
    """The results' warnings, each once, in order."""
    warnings: list[str] = []
    for r in results:
        warnings += [w for w in r.warnings if w not in warnings]
    return warnings
