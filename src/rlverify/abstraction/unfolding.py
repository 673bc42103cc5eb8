"""The ``k``-step unfolding of the interval MDP: abstract states refined into parts, each part mapped to its
successors, successors merged into the states already made (identical sets, or containment), into an
:class:`~rlverify.abstraction.imdp.IMDPBuilder`; budgets that run out leave states to the may-fail sink."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from rlverify.abstraction._threads import single_threaded_blas
from rlverify.abstraction.containment import PendingLookups, VisitedIndex
from rlverify.abstraction.domains import Polytope, Template
from rlverify.abstraction.imdp import IMDPBuilder
from rlverify.abstraction.network_bounds import NetworkBounder
from rlverify.abstraction.options import AbstractionOptions, time_budget_text
from rlverify.abstraction.refinement import Part, RefinementOptions, RefinementStats, merge_stats, refine_many
from rlverify.abstraction.successors import (
    Successors,
    inside_unsafe_many,
    intersects_unsafe,
    meets_unsafe_many,
    successors_many,
)
from rlverify.backends import Backend, chunks
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.results import PartBound

log = logging.getLogger(__name__)


class Budget(Enum):
    """A budget that ran out while the unfolding was built (its states then count as may-fail)."""

    STATES = "max_states"
    TIME = "time"


@dataclass(frozen=True)
class AbstractionProgress:
    """Where a running abstraction is (passed to the ``progress`` callback of :func:`verify_abstraction`).

    Attributes:
        depth: the step being expanded, 1..``horizon`` (its frontier holds the states reached after
            ``depth - 1`` steps).
        horizon: ``k``.
        frontier: abstract states being expanded at this depth.
        states: abstract states created so far (the IMDP's states, sinks included).
        polyhedra: refined parts so far.
        stage: ``"refining"``, ``"successors"``, ``"expanded"`` (the depth is done) or ``"solving"``.
    """

    depth: int
    horizon: int
    frontier: int
    states: int
    polyhedra: int
    stage: str


@dataclass(frozen=True)
class ExpandJob:
    """What every frontier task needs (shipped to each worker once)."""

    system: ContinuousSystem
    template: Template
    bounder: NetworkBounder
    refinement: RefinementOptions
    seed: int


#: what a frontier task returns: parts per state, successors per part, unsafe codes, statistics, seconds
ChunkResult = tuple[list[list[Part]], list[list[Successors]], np.ndarray, RefinementStats, float]

#: the handle of an :class:`ExpandJob` shared with a backend's workers (:meth:`~rlverify.backends.Backend.share`)
SharedJob = object


def expand_chunk(job: ExpandJob, states: Sequence[tuple[int, Polytope]]) -> ChunkResult:
    """A task: refine each abstract state ``(id, polytope)`` of a frontier chunk (state ``s`` with the
    generator seeded by ``(seed, s)``), then the successors of every part and whether each meets the unsafe set.

    Returns:
        ``(parts, successors, unsafe, stats, seconds)``: parts per state, successors per part (all
        states' parts in order), :func:`unsafe_codes` per successor polytope in that order, the refinement
        statistics, and the time (s) spent on successors.
    """
    with single_threaded_blas():
        stats = RefinementStats()
        parts = refine_many(
            [p for _, p in states],
            job.bounder,
            job.refinement,
            lambda i: np.random.default_rng([job.seed, states[i][0]]),  # made for the states that need samples
            stats,
        )
        t0 = time.perf_counter()
        flat: list[Part] = [part for lst in parts for part in lst]
        succ = successors_many(job.system, job.template, [part.polytope for part in flat])
        unsafe = unsafe_codes(job.system, job.template, _successor_polytopes(succ))
        return parts, succ, unsafe, stats, time.perf_counter() - t0


def unsafe_codes(system: ContinuousSystem, template: Template, polys: Sequence[Polytope]) -> np.ndarray:
    """int8 ``(N,)`` per polytope: 0 disjoint from the unsafe set, 1 meets it, 2 lies inside it (every state fails)."""
    meets = meets_unsafe_many(system, template, polys)
    codes = meets.astype(np.int8)
    idx = np.flatnonzero(meets)
    codes[idx[inside_unsafe_many(system, [polys[int(i)] for i in idx])]] = 2
    return codes


def _successor_polytopes(successors: Sequence[Sequence[Successors]]) -> list[Polytope]:
    """Every successor polytope, in order (per part, per piece, per action)."""
    return [sp for lst in successors for sc in lst for sp in sc.polytopes]


def _same_for_all_actions(succ: Successors) -> bool:
    first = succ.polytopes[0]
    return all(np.array_equal(p.lo, first.lo) and np.array_equal(p.hi, first.hi) for p in succ.polytopes[1:])


#: the may-fail sink's target number until the unfolding is finished (:meth:`Unfolding.finish`)
MAYBE_SINK = -2

#: one refined part of a frontier state: ``(state, part index, part)``
_PartJob = tuple[int, int, Part]


class Unfolding:
    """The ``k``-step unfolding being built: the IMDP builder and the bookkeeping of its abstract states.

    States are numbered in creation order: the fail sink (0), the root (1), then as reached; the
    shared safe leaf when first needed.
    """

    def __init__(
        self,
        system: ContinuousSystem,
        template: Template,
        options: AbstractionOptions,
        root_poly: Polytope,
        progress: Callable[[AbstractionProgress], None] | None,
    ) -> None:
        self.system, self.template, self.options, self.progress = system, template, options, progress
        self.builder = IMDPBuilder()
        self.fail_sink = self.builder.add_state(fail=True)  # successors inside the unsafe set: every state fails
        # successors that meet the unsafe set, and states left unexpanded (upper 1, lower 0): a placeholder target
        # until finish() makes the state last, so that every other state keeps the number (and the refinement seed)
        # it had before this sink existed
        self.maybe_sink = MAYBE_SINK
        self.maybe_used = False
        self.budget_notes: list[str] = []  # why states were left unexpanded (a budget ran out)
        self.spent: set[Budget] = set()  # the budgets that ran out
        self.noted: set[Budget] = set()  # the budgets whose first depth of running out is noted
        self.deadline: float | None = None  # perf_counter() time after which no new state is expanded
        self.safe_leaf = -1  # one shared leaf for every safe successor at the horizon (its value is 0)
        # grid cells of ~1/16 of the initial region's extent along the first template axes
        self.visited = VisitedIndex(template.k, np.maximum((root_poly.hi - root_poly.lo) / 16.0, 1e-9))
        self.identical: dict[bytes, int] = {}  # template bounds -> the abstract state of exactly that set
        self.merges = self.shared = self.unrefined = 0
        self.polys: dict[int, Polytope] = {}
        self.next_frontier: list[int] = []
        self.stats = RefinementStats()
        self.t_succ = 0.0  # seconds spent on successors
        self.root_fail = intersects_unsafe(system, root_poly)
        self.root_sure = self.root_fail and bool(inside_unsafe_many(system, [root_poly])[0])
        self.root = self.builder.add_state(fail=self.root_fail, sure=self.root_sure)
        self.polys[self.root] = root_poly
        if options.containment:
            self.visited.add(self.root, root_poly.lo, root_poly.hi, 0)
        self.identical[root_poly.lo.tobytes() + root_poly.hi.tobytes()] = self.root
        self.root_parts: list[Part] = []
        self.root_choice_part: list[int] = []  # the root's part of each of its choices, in choice order

    def report(self, depth: int, stage: str, frontier: Sequence[int]) -> None:
        if self.progress is not None:
            self.progress(
                AbstractionProgress(
                    depth=depth,
                    horizon=self.options.horizon,
                    frontier=len(frontier),
                    states=len(self.builder.fail),
                    polyhedra=self.stats.parts,
                    stage=stage,
                )
            )

    def expand(self, frontier: list[int], depth: int, backend: Backend, expand_job: SharedJob) -> list[int]:
        """Add the choices of every ``frontier`` state (reached after ``depth`` steps); the next frontier."""
        self.next_frontier = []
        self.report(depth + 1, "refining", frontier)
        simple = self.expand_whole(frontier, depth)
        to_refine = [st for st in frontier if st not in simple]
        jobs, part_succ, unsafe = self.refine(to_refine, backend, expand_job)
        self.report(depth + 1, "successors", frontier)
        self.add_part_choices(jobs, part_succ, unsafe, depth)
        log.info(
            "depth %d/%d: %d abstract states expanded (%d without refinement), %d new, %d states and %d parts so "
            "far, %d identical successors shared, %d containment merges",
            depth + 1,
            self.options.horizon,
            len(frontier),
            len(simple),
            len(self.next_frontier),
            len(self.builder.fail),
            self.stats.parts,
            self.shared,
            self.merges,
        )
        self.report(depth + 1, "expanded", frontier)
        for st in frontier:  # expanded: only the frontier's polytopes are needed from here on
            del self.polys[st]
        return self.next_frontier

    def expand_whole(self, frontier: list[int], depth: int) -> set[int]:
        """Step 1: the states expanded as a whole (one choice per action and piece, probability 1).

        At the last step, a state whose successors are all safe (or, with ``refine_everywhere=False``,
        all unsafe) needs no refinement; with ``refine_everywhere=False`` neither does a state where
        every action leads to the same successor (a ball out of the paddle's reach): the policy's
        probabilities cannot matter there.
        """
        t0 = time.perf_counter()
        last = depth + 1 == self.options.horizon
        candidates = [st for st in frontier if st != self.root] if last or not self.options.refine_everywhere else []
        whole = successors_many(self.system, self.template, [self.polys[st] for st in candidates])
        codes_whole = unsafe_codes(self.system, self.template, _successor_polytopes(whole))
        simple: list[tuple[int, list[Successors], list[tuple[bool, bool]]]] = []
        pos = 0
        for st, lst in zip(candidates, whole, strict=True):
            flags, ok, pos = self._whole_outcomes(lst, codes_whole, pos, last)
            if ok:
                simple.append((st, lst, flags))
        self._add_whole_choices(simple, depth)
        self.t_succ += time.perf_counter() - t0
        return {st for st, _, _ in simple}

    def _add_whole_choices(self, simple: list[tuple[int, list[Successors], list[tuple[bool, bool]]]], depth: int) -> None:
        """One choice per piece of each state expanded as a whole: its (one) successor with probability 1."""
        wanted = [
            (sc.polytopes[0], unsafe, sure) for _, lst, flags in simple for sc, (unsafe, sure) in zip(lst, flags, strict=True)
        ]
        targets = iter(self.successor_states(wanted, depth + 1))
        for st, lst, _ in simple:
            for _ in lst:
                self.builder.add_choice(st, {next(targets): (1.0, 1.0)})
        self.unrefined += len(simple)

    def _whole_outcomes(
        self, lst: list[Successors], codes_whole: np.ndarray, pos: int, last: bool
    ) -> tuple[list[tuple[bool, bool]], bool, int]:
        """Per piece of one candidate state, ``(meets the unsafe set, every action's successor lies inside it)``;
        whether the state may be expanded as a whole; and the position after its codes in ``codes_whole``."""
        flags, ok = [], True
        for sc in lst:
            codes = codes_whole[pos : pos + len(sc.polytopes)]
            pos += len(sc.polytopes)
            f = codes > 0
            # (meets the unsafe set, every action's successor lies inside it): all actions share the outcome
            flags.append((bool(f[0]), bool((codes == 2).all())))
            if self.options.refine_everywhere:  # lossless: only a last step that is safe whatever happens
                ok = ok and not f.any()
            else:
                ok = ok and ((last and bool((f == f[0]).all())) or _same_for_all_actions(sc))
        return flags, ok, pos

    def refine(
        self, to_refine: list[int], backend: Backend, expand_job: SharedJob
    ) -> tuple[list[_PartJob], list[list[Successors]], list[np.ndarray]]:
        """Step 2: refine ``to_refine`` into parts with narrow action-probability intervals and map every part
        and action to its successor, in tasks of ``chunk`` states fixed before any runs (read in order).

        Returns:
            the parts ``(state, part index, part)``, the successors of each part, and the unsafe flags of
            the successor polytopes (per task, in order).
        """
        tasks = [([(st, self.polys[st]) for st in to_refine[a:b]],) for a, b in chunks(0, len(to_refine), self.options.chunk)]
        done = backend.map(expand_chunk, expand_job, tasks)
        jobs: list[_PartJob] = []
        part_succ: list[list[Successors]] = []
        unsafe: list[np.ndarray] = []
        for (chunk,), (chunk_parts, chunk_succ, chunk_unsafe, chunk_stats, seconds) in zip(tasks, done, strict=True):
            for (st, _), parts in zip(chunk, chunk_parts, strict=True):
                jobs.extend((st, pi, part) for pi, part in enumerate(parts))
                if st == self.root:
                    self.root_parts = parts
            part_succ.extend(chunk_succ)
            unsafe.append(chunk_unsafe)
            merge_stats(self.stats, chunk_stats)
            self.t_succ += seconds
        return jobs, part_succ, unsafe

    def add_part_choices(
        self, jobs: list[_PartJob], part_succ: list[list[Successors]], unsafe: list[np.ndarray], depth: int
    ) -> None:
        """Step 3: one choice per part and piece; actions with the same successor share its target
        (:meth:`successor_state` returns the state already made for an identical set), intervals summed."""
        t0 = time.perf_counter()
        codes = (np.concatenate(unsafe) if unsafe else np.zeros(0, dtype=np.int8)).tolist()
        sps = _successor_polytopes(part_succ)
        targets = iter(self.successor_states([(sp, c > 0, c == 2) for sp, c in zip(sps, codes, strict=True)], depth + 1))
        for (st, pi, part), lst in zip(jobs, part_succ, strict=True):
            for sc in lst:
                trans: dict[int, tuple[float, float]] = {}
                for a in range(len(sc.polytopes)):
                    target = next(targets)  # equal sets: one state
                    lo_p, hi_p = trans.get(target, (0.0, 0.0))
                    trans[target] = (lo_p + float(part.bounds.lower[a]), hi_p + float(part.bounds.upper[a]))
                self.builder.add_choice(st, trans)
                if st == self.root:
                    self.root_choice_part.append(pi)
        self.t_succ += time.perf_counter() - t0

    def maybe_fail(self) -> int:
        """The sink of successors that may fail: upper bound 1, lower bound 0 (a placeholder until :meth:`finish`)."""
        self.maybe_used = True
        return self.maybe_sink

    def finish(self) -> None:
        """Make the may-fail sink (the last state) and point the placeholder targets at it."""
        if not self.maybe_used:
            return
        sink = self.builder.add_state(fail=True, sure=False)
        self.builder.trans = [(c, sink if t == MAYBE_SINK else t, lo, hi) for c, t, lo, hi in self.builder.trans]
        self.maybe_sink = sink

    def budget_spent(self, depth: int) -> tuple[Budget, str] | None:
        """Which budget (states or time) forbids a new abstract state at ``depth``, and the note saying so; or None."""
        if len(self.builder.fail) >= self.options.max_states:  # states are numbered from 0 in creation order
            note = f"max_states={self.options.max_states:,} abstract states reached at depth {depth} of {self.options.horizon}"
            return Budget.STATES, note
        if self.deadline is not None and time.perf_counter() > self.deadline:
            return Budget.TIME, f"{time_budget_text(self.options)} reached at depth {depth} of {self.options.horizon}"
        return None

    def new_state(self, poly: Polytope, depth: int, key: bytes, lookups: PendingLookups | None = None, slot: int = -1) -> int:
        """A new abstract state for ``poly``; at a spent budget, the may-fail sink instead (the bounds stay sound).

        With containment it joins the visited index (through ``lookups``, as its query ``slot``, when given)."""
        spent = self.budget_spent(depth)
        if spent is not None:
            budget, note = spent
            self.spent.add(budget)
            if budget not in self.noted:  # the first depth each budget ran out at
                self.noted.add(budget)
                self.budget_notes.append(note)
            return self.maybe_fail()
        state = self.builder.add_state()
        self.polys[state] = poly
        self.identical[key] = state
        if self.options.containment:
            if lookups is not None:
                lookups.add(slot, state)
            else:
                self.visited.add(state, poly.lo, poly.hi, depth)
        return state

    def successor_states(self, successors: Sequence[tuple[Polytope, bool, bool]], depth: int) -> list[int]:
        """:meth:`successor_state` of each ``(polytope, meets the unsafe set, lies inside it)`` in order, reached at
        ``depth``; with containment, the visited index is searched for all of them at once
        (:class:`~rlverify.abstraction.containment.PendingLookups`: the same answers as one at a time)."""
        lookups = None
        slots = [-1] * len(successors)
        if self.options.containment and depth < self.options.horizon:
            need = [i for i, (_, unsafe, _) in enumerate(successors) if not unsafe]
            for r, i in enumerate(need):
                slots[i] = r
            k = self.template.k
            lookups = PendingLookups(
                self.visited,
                np.array([successors[i][0].lo for i in need]).reshape(-1, k),
                np.array([successors[i][0].hi for i in need]).reshape(-1, k),
                np.full(len(need), depth, dtype=np.int64),
            )
        out = [
            self.successor_state(sp, unsafe, depth, sure=sure, lookups=lookups, slot=slot)
            for (sp, unsafe, sure), slot in zip(successors, slots, strict=True)
        ]
        if lookups is not None:
            lookups.commit()
        return out

    def successor_state(
        self,
        sp: Polytope,
        unsafe: bool,
        depth: int,
        *,
        sure: bool = False,
        lookups: PendingLookups | None = None,
        slot: int = -1,
    ) -> int:
        """The abstract state of successor ``sp`` reached at ``depth``.

        The fail sink if ``sp`` lies inside the unsafe set, the may-fail sink if it only meets it (or at a
        spent budget: :meth:`new_state`); the shared safe leaf at the horizon; else the
        state of the very same set reached before (at this or a smaller depth: its subtree is at least
        as deep, so sharing loses nothing); else (with containment) a visited state containing it;
        else a new state on the next frontier. ``lookups``, ``slot``: the containment search made for a
        batch of successors (:meth:`successor_states`) and this one's query in it.
        """
        if unsafe:
            return self.fail_sink if sure else self.maybe_fail()
        if depth == self.options.horizon:
            if self.safe_leaf < 0:
                self.safe_leaf = self.builder.add_state()
            return self.safe_leaf
        key = sp.lo.tobytes() + sp.hi.tobytes()
        same = self.identical.get(key)
        if same is not None:
            self.shared += 1
            return same
        if self.options.containment:
            found = lookups.find(slot) if lookups is not None else self.visited.find(sp.lo, sp.hi, depth)
            if found is not None:
                self.merges += 1
                return found
        target = self.new_state(sp, depth, key, lookups, slot)
        if target != self.maybe_sink:
            self.next_frontier.append(target)
        return target

    def abandon(self, frontier: Sequence[int], depth: int) -> None:
        """Leave ``frontier`` unexpanded (the time budget ran out): each of its states may fail (upper 1, lower 0)."""
        for st in frontier:
            self.builder.fail[st] = True
            self.builder.sure_fail[st] = False
        if frontier:
            self.spent.add(Budget.TIME)
            self.budget_notes.append(
                f"{time_budget_text(self.options)} ran out at depth {depth} of {self.options.horizon}: "
                f"{len(frontier):,} states not expanded"
            )

    def root_bounds(
        self, values: np.ndarray, q: np.ndarray, low: np.ndarray, q_low: np.ndarray
    ) -> tuple[float, float, list[PartBound]]:
        """The upper and lower bounds from the initial region (1 and 0/1 if it meets the unsafe set) and the bounds of
        each of its parts, from the robust values of the states and of the (tightened IMDP's) choices (max-max for
        the upper, min-min for the lower)."""
        if self.root_fail:
            return 1.0, 1.0 if self.root_sure else 0.0, []
        remap = self.builder.choice_index_map()
        root_choices = np.flatnonzero(np.asarray(self.builder.choice_state) == self.root)
        per_part = np.zeros(len(self.root_parts))
        per_part_low = np.ones(len(self.root_parts))
        for c_ins, pi in zip(root_choices, self.root_choice_part, strict=True):
            per_part[pi] = max(per_part[pi], q[remap[c_ins]])
            per_part_low[pi] = min(per_part_low[pi], q_low[remap[c_ins]])
        part_bounds = [
            PartBound(
                tuple(map(float, part.polytope.lo)),
                tuple(map(float, part.polytope.hi)),
                tuple(map(float, part.bounds.lower)),
                tuple(map(float, part.bounds.upper)),
                float(min(val, 1.0)),
                float(max(min(val_low, val), 0.0)),
            )
            for part, val, val_low in zip(self.root_parts, per_part, per_part_low, strict=True)
        ]
        upper = float(min(float(values[self.root]), 1.0))
        return upper, float(max(min(float(low[self.root]), upper), 0.0)), part_bounds
