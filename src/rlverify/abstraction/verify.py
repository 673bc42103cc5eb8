"""The abstraction engine: a sound upper bound on the probability of failure within ``k`` steps.

:func:`verify_abstraction` builds the ``k``-step unfolding of an interval MDP over template
polyhedra (Bacci & Parker, NFM 2022): every abstract state is refined into parts with narrow
action-probability intervals, every part is mapped through each piece of the dynamics to one
successor per action, successors meeting the unsafe set become the ``fail`` sink, and (optionally)
successors contained in an already visited abstract state of equal or smaller depth are merged into
it. Robust value iteration (max-max) then gives, per initial part and overall, a sound upper bound on
``Pr(F<=k fail)`` from every state of the initial region.

Savings that lose nothing: a successor that is exactly the set of an abstract state reached at the
same or a smaller depth shares that state (its subtree is at least as deep); actions of a part with
the same successor share one target; a state whose successors at the last step are all safe is not
refined; every safe successor at the horizon goes to one shared leaf of value 0. With
``refine_everywhere=False`` a state where the action cannot matter is not refined at all (faster,
coarser: see :class:`AbstractionOptions`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.abstraction.containment import VisitedIndex
from rlverify.abstraction.domains import Polytope, Template, validate_region_inside
from rlverify.abstraction.imdp import IMDPBuilder
from rlverify.abstraction.network_bounds import NetworkBounder, fold_observation
from rlverify.abstraction.policy_fit import policy_network
from rlverify.abstraction.refinement import Part, RefinementOptions, RefinementStats, merge_stats, refine_many
from rlverify.abstraction.robust_vi import bounded_reachability
from rlverify.abstraction.successors import Successors, intersects_unsafe, meets_unsafe_many, successors_many
from rlverify.backends import BackendOptions, chunks, open_backend
from rlverify.errors import AbstractionBudgetError, AbstractionError, DomainError
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.policies.base import Policy
from rlverify.policies.mlp import MLP
from rlverify.results import AbstractionResult, PartBound, Provenance, versions  # re-exported

log = logging.getLogger(__name__)

GUARANTEE = "sound upper bound"


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
class AbstractionOptions:
    """Settings of :func:`verify_abstraction` (keyword-only, immutable).

    Attributes:
        horizon: number of steps ``k >= 1``.
        domain: ``"box"``, ``"octagon"`` or ``"template"``.
        template: directions ``(k, n)`` for ``domain="template"``, used as given (each in both signs;
            they must bound the state space). None: the system's default template
            (``system.default_template()``: the box axes plus the directions its docstring names), or
            an :class:`AbstractionError` if it declares none. The result's ``template_axes`` are the
            directions used.
        phi: maximum probability spread per part, in (0, 1].
        containment: merge successors contained in a visited abstract state (smaller IMDP, coarser).
        initial: name of the system's initial region, or an explicit box ``((lo...), (hi...))``.
        samples: hit-and-run samples per part during refinement.
        min_width: smallest splittable width (state units); default: the system's.
        min_split_fraction: minimum relative size of each side of a split.
        max_parts: parts per abstract state at most.
        milp: ``"auto"``, ``"always"`` or ``"never"`` (see :class:`RefinementOptions`).
        milp_time_limit: seconds per MILP (the dual bound keeps the result sound when it stops).
        max_states: abort (:class:`AbstractionBudgetError`) beyond this many abstract states.
        seed: seed of the sampling used by refinement (the bound is sound for every seed); abstract
            state ``s`` is refined with its own generator seeded by ``(seed, s)``.
        refine_everywhere: refine every abstract state by the policy (the paper's method). False:
            refine only where the action matters; a state where every action leads to the same
            successor (or, at the last step, to the same outcome) is mapped as a whole. Much faster
            where the dynamics often ignore the action (the bouncing ball in flight), still sound,
            but coarser: the parts of a refined state have smaller successors than the whole.
        chunk: abstract states of a frontier refined (and their parts mapped to successors) per task;
            the frontier is cut into chunks of this size on every backend. The states of a chunk are refined
            side by side, their network bounds computed in batches (bigger chunks, bigger batches: 64 takes ~20%
            less CPU than 16 on the bouncing ball); the result does not depend on it.
        backend: where the chunks run (:class:`~rlverify.backends.BackendOptions`: this process or
            Ray tasks); the same abstraction and bound on every backend for the same seed (as long
            as no MILP stops at ``milp_time_limit``: a stopped MILP's bound depends on its speed).
    """

    horizon: int
    domain: str = "box"
    template: tuple[tuple[float, ...], ...] | None = None
    phi: float = 0.1
    containment: bool = False
    initial: str | tuple[tuple[float, ...], tuple[float, ...]] | None = None
    samples: int = 400
    min_width: float | None = None
    min_split_fraction: float = 0.1
    max_parts: int = 512
    milp: str = "auto"
    milp_time_limit: float = 5.0
    max_states: int = 200_000
    seed: int = 0
    refine_everywhere: bool = True
    chunk: int = 64
    backend: BackendOptions = field(default_factory=BackendOptions)


#: the most hit-and-run samples per refinement step accepted (memory grows with them)
MAX_SAMPLES = 1_000_000
#: the longest horizon accepted (steps)
MAX_HORIZON = 10_000


def _whole(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def validate_options(system: ContinuousSystem, options: AbstractionOptions) -> None:
    """Raise an :class:`AbstractionError` naming the first bad setting."""
    _validate_method(options)
    _validate_budgets(options)
    if options.template is not None:
        try:
            t = np.asarray(options.template, dtype=np.float64)
        except (TypeError, ValueError):
            raise AbstractionError("template: expected rows of numbers, one direction per row") from None
        if t.ndim != 2 or t.shape[1] != system.n or not np.isfinite(t).all():
            raise AbstractionError(
                f"template: expected rows of {system.n} finite numbers (one direction over "
                f"{list(system.variables)} per row), got {options.template!r}"
            )
    if options.initial is not None and not isinstance(options.initial, str):
        initial_box(system, options)  # refuses bad bounds naming them
    if isinstance(options.chunk, bool) or not isinstance(options.chunk, (int, np.integer)) or options.chunk <= 0:
        raise AbstractionError(f"chunk must be a positive integer number of abstract states, got {options.chunk!r}")
    options.backend.validate()


def _validate_method(options: AbstractionOptions) -> None:
    """The horizon, phi, domain, MILP use, samples and split settings."""
    h = options.horizon
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h <= 0:
        raise AbstractionError(f"horizon must be a positive integer number of steps, got {h!r}")
    if h > MAX_HORIZON:
        raise AbstractionError(
            f"horizon {h:,}: more than {MAX_HORIZON:,} steps, refused (the abstraction and its "
            "robust value iteration take time in every step)"
        )
    if not (isinstance(options.phi, (int, float)) and 0.0 < float(options.phi) <= 1.0):
        raise AbstractionError(f"phi (maximum probability spread) must be in (0, 1], got {options.phi!r}")
    if options.domain not in ("box", "octagon", "template"):
        raise AbstractionError(f"domain must be 'box', 'octagon' or 'template', got {options.domain!r}")
    if options.milp not in ("auto", "always", "never"):
        raise AbstractionError(f"milp must be 'auto', 'always' or 'never', got {options.milp!r}")
    if not _whole(options.samples) or not 2 <= options.samples <= MAX_SAMPLES:
        raise AbstractionError(
            f"samples (hit-and-run samples per refinement step) must be an integer in "
            f"[2, {MAX_SAMPLES:,}], got {options.samples!r}"
        )
    if not (isinstance(options.min_split_fraction, (int, float)) and 0.0 <= options.min_split_fraction < 0.5):
        raise AbstractionError(f"min_split_fraction must be in [0, 0.5), got {options.min_split_fraction!r}")
    if options.min_width is not None and not (
        isinstance(options.min_width, (int, float)) and 0.0 < options.min_width < math.inf
    ):
        raise AbstractionError(f"min_width must be a positive finite number (state units), got {options.min_width!r}")


def _validate_budgets(options: AbstractionOptions) -> None:
    """The MILP time limit, the part and state budgets and the seed."""
    if not (isinstance(options.milp_time_limit, (int, float)) and 0.0 < options.milp_time_limit < math.inf):
        raise AbstractionError(f"milp_time_limit must be a positive finite number of seconds, got {options.milp_time_limit!r}")
    for name in ("max_parts", "max_states"):
        value = getattr(options, name)
        if not _whole(value) or value <= 0:
            raise AbstractionError(f"{name} must be a positive integer, got {value!r}")
    if not _whole(options.seed) or not 0 <= options.seed < 2**63:
        raise AbstractionError(
            f"seed must be a whole number in [0, 2**63-1] (numpy's generators take no negative seed), got {options.seed!r}"
        )


def make_template(system: ContinuousSystem, options: AbstractionOptions) -> Template:
    """The template of ``options.domain`` over the system's variables.

    ``domain="template"`` takes ``options.template``, else the system's documented default template.

    Raises:
        AbstractionError: ``domain="template"`` without directions for a system that declares no default.
    """
    directions = None
    if options.domain == "template":
        if options.template is not None:
            directions = np.asarray(options.template, dtype=np.float64)
        else:
            directions = system.default_template()
            if directions is None:
                raise AbstractionError(
                    f"domain 'template' needs template= directions: a (k, {system.n}) matrix over "
                    f"{list(system.variables)}, one direction per row (CLI: --template FILE); {system.name} "
                    "declares no default template"
                )
            log.info("domain 'template': %s's default template %s", system.name, directions.tolist())
    return Template.named(options.domain, system.variables, directions)


def initial_box(system: ContinuousSystem, options: AbstractionOptions) -> tuple[np.ndarray, np.ndarray]:
    """The initial box, validated against the system's state domain."""
    if options.initial is None or isinstance(options.initial, str):
        lo, hi = system.initial_region(options.initial)
    else:
        try:
            lo, hi = (np.asarray(v, dtype=np.float64) for v in options.initial)
        except (TypeError, ValueError):
            raise DomainError(f"initial region must be a name or a pair of bound vectors, got {options.initial!r}") from None
        if lo.shape != (system.n,) or hi.shape != (system.n,):
            raise DomainError(
                f"initial region bounds must have {system.n} values ({list(system.variables)}), got {lo.shape} and {hi.shape}"
            )
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            i = int(np.argmax(~(np.isfinite(lo) & np.isfinite(hi))))
            raise DomainError(
                f"initial region: the bounds of {system.variables[i]} must be finite numbers, got [{lo[i]}, {hi[i]}]"
            )
        if (lo > hi).any():
            i = int(np.argmax(lo > hi))
            raise DomainError(f"initial region: lower bound {lo[i]} of {system.variables[i]} exceeds upper bound {hi[i]}")
    return lo, hi


@dataclass(frozen=True)
class _ExpandJob:
    """What every frontier task needs (shipped to each worker once)."""

    system: ContinuousSystem
    template: Template
    bounder: NetworkBounder
    refinement: RefinementOptions
    seed: int


def expand_chunk(job: _ExpandJob, states: Sequence[tuple[int, Polytope]]):
    """A task: refine each abstract state ``(id, polytope)`` of a frontier chunk (state ``s`` with the
    generator seeded by ``(seed, s)``), then the successors of every part and whether each meets the unsafe set.

    Returns:
        ``(parts, successors, unsafe, stats, seconds)``: parts per state, successors per part (all
        states' parts in order), unsafe flags per successor polytope in that order, the refinement
        statistics, and the time (s) spent on successors.
    """
    from rlverify.abstraction._threads import single_threaded_blas

    with single_threaded_blas():
        stats = RefinementStats()
        parts = refine_many(
            [p for _, p in states],
            job.bounder,
            job.refinement,
            [np.random.default_rng([job.seed, st]) for st, _ in states],
            stats,
        )
        t0 = time.perf_counter()
        flat: list[Part] = [part for lst in parts for part in lst]
        succ = successors_many(job.system, job.template, [part.polytope for part in flat])
        unsafe = meets_unsafe_many(job.system, job.template, [sp for lst in succ for sc in lst for sp in sc.polytopes])
        return parts, succ, unsafe, stats, time.perf_counter() - t0


def _same_for_all_actions(succ: Successors) -> bool:
    first = succ.polytopes[0]
    return all(np.array_equal(p.lo, first.lo) and np.array_equal(p.hi, first.hi) for p in succ.polytopes[1:])


def verify_abstraction(
    system: ContinuousSystem,
    policy: Policy | str | Path | MLP,
    options: AbstractionOptions,
    *,
    progress: Callable[[AbstractionProgress], None] | None = None,
) -> AbstractionResult:
    """Sound upper bound on ``Pr(F<=k fail)`` (see :func:`_verify`); numpy's BLAS runs single-threaded meanwhile.

    ``progress`` (optional) is called with an :class:`AbstractionProgress` at each stage of each depth.
    """
    from rlverify.abstraction._threads import single_threaded_blas

    if not isinstance(system, ContinuousSystem):
        raise AbstractionError(
            f"verify_abstraction takes a continuous system, not a {type(system).__name__}: a "
            "benchmark's system is make(ID).model(), a file's is rlverify.resolve.resolve(TARGET).model"
        )
    if not isinstance(system, ContinuousSystem):
        raise AbstractionError(
            f"verify_abstraction takes a continuous system, not a {type(system).__name__}: a "
            "benchmark's system is make(ID).model(), a file's is rlverify.resolve.resolve(TARGET).model"
        )
    with single_threaded_blas():
        return _verify(system, policy, options, progress)


def _verify(
    system: ContinuousSystem,
    policy: Policy | str | Path | MLP,
    options: AbstractionOptions,
    progress: Callable[[AbstractionProgress], None] | None = None,
) -> AbstractionResult:
    """Sound upper bound on ``Pr(F<=k fail)`` from every state of the initial region.

    Args:
        system: the continuous dynamics, or a continuous benchmark (``rlverify.benchmarks.make("acc-v1")``).
        policy: a policy that wraps a ReLU network with logit outputs, taking exactly the system's
            ``features`` and choosing among its ``actions`` (in order): a loaded policy
            (``rlverify.load_policy``: ONNX, TorchScript, SB3 with ReLU), a policy file (loaded by
            ``rlverify.policies.load_network_policy``), or an :class:`MLP` over the features (taken as given).
            See :func:`~rlverify.abstraction.policy_fit.policy_network`.
        options: :class:`AbstractionOptions`.

    Returns:
        An :class:`AbstractionResult` (``guarantee == "sound upper bound"``).

    Raises:
        AbstractionError, DomainError, PolicyError: bad settings, regions, or a policy that cannot be
            bounded or does not fit the system (every problem listed).
    """
    t_start = time.perf_counter()
    validate_options(system, options)
    template = make_template(system, options)
    lo0, hi0 = initial_box(system, options)
    root_poly = template.from_box(lo0, hi0)
    validate_region_inside(root_poly, system.domain_lo, system.domain_hi, system.variables, "initial region")
    mlp, policy_name = policy_network(system, policy, seed=options.seed)
    bounder = NetworkBounder(
        fold_observation(mlp, system.obs_matrix, system.obs_offset), milp_time_limit=options.milp_time_limit
    )
    ropts = RefinementOptions(
        phi=float(options.phi),
        samples=options.samples,
        min_width=options.min_width if options.min_width is not None else system.min_width,
        min_split_fraction=options.min_split_fraction,
        max_parts=options.max_parts,
        milp=options.milp,
    )
    backend = open_backend(options.backend)
    expand_job = backend.share(_ExpandJob(system, template, bounder, ropts, int(options.seed)))
    u = _Unfolding(system, template, options, root_poly, progress)
    frontier = [] if u.root_fail else [u.root]
    for depth in range(options.horizon):
        frontier = u.expand(frontier, depth, backend, expand_job)

    u.report(options.horizon, "solving", frontier)
    t0 = time.perf_counter()
    imdp = u.builder.build().tightened()  # validates the intervals as built, then tightens
    values, q = bounded_reachability(imdp, options.horizon, mode="maxmax")
    vmin, _ = bounded_reachability(imdp, options.horizon, mode="maxmin", validate=False)
    t_solve = time.perf_counter() - t0
    upper, part_bounds = u.root_bounds(values, q)
    stats = u.stats
    return AbstractionResult(
        guarantee=GUARANTEE,
        upper_bound=upper,
        maxmin_value=float(vmin[u.root]),
        parts=tuple(part_bounds),
        n_abstract_states=imdp.n_states,
        n_polyhedra=stats.parts,
        n_containment_merges=u.merges,
        n_shared_successors=u.shared,
        n_unrefined_states=u.unrefined,
        n_choices=imdp.n_choices,
        n_transitions=imdp.n_transitions,
        n_unresolved_parts=stats.unresolved,
        n_milp_parts=stats.milp_parts,
        options=options,
        seed=options.seed,
        variables=tuple(system.variables),
        actions=tuple(system.actions),
        template_axes=tuple(tuple(map(float, r)) for r in template.axes),
        initial_lo=tuple(map(float, lo0)),
        initial_hi=tuple(map(float, hi0)),
        imdp=imdp,
        provenance=Provenance(
            timings={
                "bounds": stats.bounds_time,
                "refinement": stats.refine_time,
                "successors": u.t_succ,
                "solving": t_solve,
                "total": time.perf_counter() - t_start,
            },
            model=system.name,
            property=f'Pmax=? [F<={options.horizon} "fail"]',
            policy=policy_name,
            versions=versions(),
        ),
    )


#: one refined part of a frontier state: ``(state, part index, part)``
_PartJob = tuple[int, int, Part]


class _Unfolding:
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
        self.fail_sink = self.builder.add_state(fail=True)
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
        self.root = self.builder.add_state(fail=self.root_fail)
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

    def expand(self, frontier: list[int], depth: int, backend: Any, expand_job: Any) -> list[int]:
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
        options = self.options
        last = depth + 1 == options.horizon
        candidates = [st for st in frontier if st != self.root] if last or not options.refine_everywhere else []
        whole = successors_many(self.system, self.template, [self.polys[st] for st in candidates])
        unsafe_whole = meets_unsafe_many(
            self.system, self.template, [sp for lst in whole for sc in lst for sp in sc.polytopes]
        )
        simple: list[tuple[int, list[Successors], list[bool]]] = []
        pos = 0
        for st, lst in zip(candidates, whole, strict=True):
            flags, ok = [], True
            for sc in lst:
                f = unsafe_whole[pos : pos + len(sc.polytopes)]
                pos += len(sc.polytopes)
                flags.append(bool(f[0]))
                if options.refine_everywhere:  # lossless: only a last step that is safe whatever happens
                    ok = ok and not f.any()
                else:
                    ok = ok and ((last and bool((f == f[0]).all())) or _same_for_all_actions(sc))
            if ok:
                simple.append((st, lst, flags))
        for st, lst, flags in simple:
            for sc, unsafe in zip(lst, flags, strict=True):
                self.builder.add_choice(st, {self.successor_state(sc.polytopes[0], unsafe, depth + 1): (1.0, 1.0)})
        self.unrefined += len(simple)
        self.t_succ += time.perf_counter() - t0
        return {st for st, _, _ in simple}

    def refine(
        self, to_refine: list[int], backend: Any, expand_job: Any
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
        flags = iter(np.concatenate(unsafe) if unsafe else np.zeros(0, dtype=bool))
        for (st, pi, part), lst in zip(jobs, part_succ, strict=True):
            for sc in lst:
                trans: dict[int, tuple[float, float]] = {}
                for a, sp in enumerate(sc.polytopes):
                    target = self.successor_state(sp, bool(next(flags)), depth + 1)  # equal sets: one state
                    lo_p, hi_p = trans.get(target, (0.0, 0.0))
                    trans[target] = (lo_p + float(part.bounds.lower[a]), hi_p + float(part.bounds.upper[a]))
                self.builder.add_choice(st, trans)
                if st == self.root:
                    self.root_choice_part.append(pi)
        self.t_succ += time.perf_counter() - t0

    def new_state(self, poly: Polytope, depth: int, key: bytes) -> int:
        state = self.builder.add_state()
        self.polys[state] = poly
        self.identical[key] = state
        if self.options.containment:
            self.visited.add(state, poly.lo, poly.hi, depth)
        if state + 1 > self.options.max_states:  # states are numbered from 0 in creation order
            raise AbstractionBudgetError(
                f"the abstraction exceeded max_states={self.options.max_states} abstract states at "
                f"depth {depth} of {self.options.horizon}; use a larger phi, --containment, an "
                "octagon domain, a smaller horizon or a larger max_states"
            )
        return state

    def successor_state(self, sp: Polytope, unsafe: bool, depth: int) -> int:
        """The abstract state of successor ``sp`` reached at ``depth``.

        The fail sink if ``sp`` meets the unsafe set; the shared safe leaf at the horizon; else the
        state of the very same set reached before (at this or a smaller depth: its subtree is at least
        as deep, so sharing loses nothing); else (with containment) a visited state containing it;
        else a new state on the next frontier.
        """
        if unsafe:
            return self.fail_sink
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
            found = self.visited.find(sp.lo, sp.hi, depth)
            if found is not None:
                self.merges += 1
                return found
        target = self.new_state(sp, depth, key)
        self.next_frontier.append(target)
        return target

    def root_bounds(self, values: np.ndarray, q: np.ndarray) -> tuple[float, list[PartBound]]:
        """The bound from the initial region (1 if it meets the unsafe set) and the bound of each of its parts,
        from the robust values of the states and of the (tightened IMDP's) choices."""
        if self.root_fail:
            return 1.0, []
        remap = self.builder.choice_index_map()
        root_choices = np.flatnonzero(np.asarray(self.builder.choice_state) == self.root)
        per_part = np.zeros(len(self.root_parts))
        for c_ins, pi in zip(root_choices, self.root_choice_part, strict=True):
            per_part[pi] = max(per_part[pi], q[remap[c_ins]])
        part_bounds = [
            PartBound(
                tuple(map(float, part.polytope.lo)),
                tuple(map(float, part.polytope.hi)),
                tuple(map(float, part.bounds.lower)),
                tuple(map(float, part.bounds.upper)),
                float(min(val, 1.0)),
            )
            for part, val in zip(self.root_parts, per_part, strict=True)
        ]
        return float(min(float(values[self.root]), 1.0)), part_bounds


def part_polytopes(result: AbstractionResult) -> list[Polytope]:
    """The initial parts of ``result`` as :class:`Polytope` objects."""
    t = Template(np.array(result.template_axes), result.variables, result.options.domain)
    return [Polytope(t, np.array(p.lo), np.array(p.hi)) for p in result.parts]


__all__: Sequence[str] = [
    "GUARANTEE",
    "AbstractionBudgetError",
    "AbstractionError",
    "AbstractionOptions",
    "AbstractionProgress",
    "AbstractionResult",
    "PartBound",
    "part_polytopes",
    "verify_abstraction",
]
