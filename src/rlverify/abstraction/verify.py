"""The abstraction engine: sound upper and lower bounds on the probability of failure within ``k`` steps.

:func:`verify_abstraction` builds the ``k``-step unfolding of an interval MDP over template
polyhedra (Bacci & Parker, NFM 2022): every abstract state is refined into parts with narrow
action-probability intervals, every part is mapped through each piece of the dynamics to one
successor per action, successors meeting the unsafe set become the ``fail`` sink, and (optionally)
successors contained in an already visited abstract state of equal or smaller depth are merged into
it. Robust value iteration (max-max) then gives, per initial part and overall, a sound upper bound on
``Pr(F<=k fail)`` from every state of the initial region; min-min (counting only successors that lie inside
the unsafe set as failed: those that merely meet it go to a may-fail sink) a sound lower bound. A witness
start state (:mod:`~rlverify.abstraction.witness`) bounds the worst case from below, and refinement by the
gap (:func:`_refine_by_gap`) cuts the initial region into cells until the bounds meet the target.

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

from rlverify.abstraction.containment import PendingLookups, VisitedIndex
from rlverify.abstraction.domains import Polytope, Template, validate_region_inside
from rlverify.abstraction.imdp import IMDPBuilder
from rlverify.abstraction.network_bounds import NetworkBounder, fold_observation
from rlverify.abstraction.policy_fit import policy_network
from rlverify.abstraction.refinement import Part, RefinementOptions, RefinementStats, merge_stats, refine_many
from rlverify.abstraction.robust_vi import bounded_reachability
from rlverify.abstraction.settings import DEFAULT_TIME_BUDGET
from rlverify.abstraction.successors import (
    Successors,
    inside_unsafe_many,
    intersects_unsafe,
    meets_unsafe_many,
    successors_many,
)
from rlverify.backends import BackendOptions, chunks, open_backend
from rlverify.errors import AbstractionBudgetError, AbstractionError, DomainError
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.policies.base import Policy
from rlverify.policies.mlp import MLP
from rlverify.results import AbstractionResult, PartBound, Provenance, WorstWitness, versions  # re-exported

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
        domain: ``"box"``, ``"octagon"``, ``"template"`` or ``"auto"`` (directions chosen from the dynamics, the
            unsafe set and sampled successors: :mod:`~rlverify.abstraction.templates`; the result's options then
            say ``"template"`` with the directions chosen).
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
        max_states: at this many abstract states no new one is made: successors that would need one count as
            failing in the upper bound and as safe in the lower (both stay sound; a warning says so).
        seed: seed of the sampling used by refinement (the bound is sound for every seed); abstract
            state ``s`` is refined with its own generator seeded by ``(seed, s)``.
        refine_everywhere: refine every abstract state by the policy (the paper's method). False:
            refine only where the action matters; a state where every action leads to the same
            successor (or, at the last step, to the same outcome) is mapped as a whole. Much faster
            where the dynamics often ignore the action (the bouncing ball in flight), still sound,
            but coarser: the parts of a refined state have smaller successors than the whole.
        chunk: abstract states of a frontier refined (and their parts mapped to successors) per task;
            the frontier is cut into chunks of this size on every backend. The states of a chunk are refined
            side by side, their network bounds, samples and splits computed in batches (bigger chunks, bigger
            batches: on the bouncing ball, k = 12, 256 takes ~30% less CPU than 64, which takes ~20% less than
            16; memory grows with it, ~0.3 GB at 256 there); the result does not depend on it.
        backend: where the chunks run (:class:`~rlverify.backends.BackendOptions`: this process or
            Ray tasks); the same abstraction and bound on every backend for the same seed (as long
            as no MILP stops at ``milp_time_limit``: a stopped MILP's bound depends on its speed).
        gap: refine by the gap (see :func:`verify_abstraction`) until ``upper - (best lower bound on the worst
            case) <= gap``; None: no such target.
        threshold: the property ``Pr(F<=k fail) <= threshold`` from every initial state: the verdict is "safe"
            (upper <= threshold), "unsafe (witness, sound|statistical)" (a lower bound on the worst case above it)
            or "undecided at budget"; with refinement by the gap, refinement stops as soon as it is decided.
        time_budget: seconds for the whole run; refinement by the gap (it runs when ``gap`` or ``time_budget`` is
            given) stops when it is spent and returns the best bounds so far; an abstraction in progress stops
            expanding new states (they count as failing in the upper bound, safe in the lower; a warning says so).
            None: :data:`DEFAULT_TIME_BUDGET` (600 s), without refinement unless ``gap`` asks for it.
        max_cells: refinement by the gap stops at this many initial cells.
        phi_decay: a cell bisected along ``m`` sides is abstracted in pieces with ``phi * phi_decay^m`` (at
            least 0.01; its own ``phi`` when its refinement hit its limits).
        witness: how the worst-case witness is found: ``"auto"`` (enumeration when ``|A|^k`` is small, else
            simulation), ``"enumeration"``, ``"simulation"`` or ``"none"``.
        witness_runs, witness_confidence: simulation witnesses: fresh runs and the confidence of the one-sided
            lower bound.
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
    chunk: int = 256
    backend: BackendOptions = field(default_factory=BackendOptions)
    gap: float | None = None
    threshold: float | None = None
    time_budget: float | None = None
    max_cells: int = 512
    phi_decay: float = 0.7
    witness: str = "auto"
    witness_runs: int = 10_000
    witness_confidence: float = 0.99


#: the most hit-and-run samples per refinement step accepted (memory grows with them)
MAX_SAMPLES = 1_000_000
#: the longest horizon accepted (steps)
MAX_HORIZON = 10_000


def budget_seconds(options: AbstractionOptions) -> float:
    """The seconds the run may take: ``time_budget``, or :data:`DEFAULT_TIME_BUDGET`."""
    return DEFAULT_TIME_BUDGET if options.time_budget is None else float(options.time_budget)


def time_budget_text(options: AbstractionOptions) -> str:
    """How warnings name the time budget (they start "the time budget": :func:`_ran_out`); the default one says
    which option raises it."""
    if options.time_budget is None:
        return f"the time budget of {DEFAULT_TIME_BUDGET:g} s (the default; --time-budget S / time_budget= raises it)"
    return f"the time budget of {float(options.time_budget):g} s"


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
    _validate_two_sided(options)


def _validate_two_sided(options: AbstractionOptions) -> None:
    """The gap, threshold, time budget, cells, phi decay and witness settings."""
    for name in ("gap", "threshold"):
        value = getattr(options, name)
        if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0):
            raise AbstractionError(f"{name} must be a probability in [0, 1], got {value!r}")
    tb = options.time_budget
    if tb is not None and not (isinstance(tb, (int, float)) and not isinstance(tb, bool) and 0.0 < tb < math.inf):
        raise AbstractionError(f"time_budget must be a positive finite number of seconds, got {tb!r}")
    if not _whole(options.max_cells) or options.max_cells <= 0:
        raise AbstractionError(f"max_cells must be a positive integer, got {options.max_cells!r}")
    if not (isinstance(options.phi_decay, (int, float)) and 0.0 < options.phi_decay <= 1.0):
        raise AbstractionError(f"phi_decay must be in (0, 1], got {options.phi_decay!r}")
    if options.witness not in WITNESS_METHODS:
        raise AbstractionError(f"witness must be one of {', '.join(WITNESS_METHODS)}, got {options.witness!r}")
    if not _whole(options.witness_runs) or not 1 <= options.witness_runs <= MAX_SAMPLES * 10:
        raise AbstractionError(f"witness_runs must be an integer in [1, {MAX_SAMPLES * 10:,}], got {options.witness_runs!r}")
    c = options.witness_confidence
    if not (isinstance(c, (int, float)) and 0.0 < c < 1.0):
        raise AbstractionError(f"witness_confidence must be in (0, 1), got {c!r}")


#: how a worst-case witness may be found (:class:`AbstractionOptions`)
WITNESS_METHODS = ("auto", "enumeration", "simulation", "none")


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
    if options.domain not in ("box", "octagon", "template", "auto"):
        raise AbstractionError(f"domain must be 'box', 'octagon', 'template' or 'auto', got {options.domain!r}")
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
        states' parts in order), :func:`unsafe_codes` per successor polytope in that order, the refinement
        statistics, and the time (s) spent on successors.
    """
    from rlverify.abstraction._threads import single_threaded_blas

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
        unsafe = unsafe_codes(job.system, job.template, [sp for lst in succ for sc in lst for sp in sc.polytopes])
        return parts, succ, unsafe, stats, time.perf_counter() - t0


def unsafe_codes(system: ContinuousSystem, template: Template, polys: Sequence[Polytope]) -> np.ndarray:
    """int8 ``(N,)`` per polytope: 0 disjoint from the unsafe set, 1 meets it, 2 lies inside it (every state fails)."""
    meets = meets_unsafe_many(system, template, polys)
    codes = meets.astype(np.int8)
    idx = np.flatnonzero(meets)
    codes[idx[inside_unsafe_many(system, [polys[int(i)] for i in idx])]] = 2
    return codes


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
    """Sound upper and lower bounds on ``Pr(F<=k fail)`` (see :func:`_verify`), a worst-case witness and the gap;
    with ``gap`` or ``time_budget``, refinement by the gap (:func:`_refine_by_gap`). numpy's BLAS runs single-threaded
    meanwhile.

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
        return _two_sided(system, policy, options, progress)


def _verify(
    system: ContinuousSystem,
    policy: Policy | str | Path | MLP,
    options: AbstractionOptions,
    progress: Callable[[AbstractionProgress], None] | None = None,
    deadline: float | None = None,
    network: tuple[MLP, str] | None = None,
) -> AbstractionResult:
    """Sound upper and lower bounds on ``Pr(F<=k fail)`` from every state of the initial region.

    ``deadline`` (a ``time.perf_counter()`` time): after it no new abstract state is expanded (each
    left unexpanded counts as failing in the upper bound, as safe in the lower; a warning says so).
    ``network``: the policy's checked network and name (:func:`policy_network`), when already made.

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
    mlp, policy_name = network if network is not None else policy_network(system, policy, seed=options.seed)
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
    u.deadline = deadline
    frontier = [] if u.root_fail else [u.root]
    for depth in range(options.horizon):
        if deadline is not None and time.perf_counter() > deadline:
            u.abandon(frontier, depth, f"{time_budget_text(options)} ran out")
            frontier = []
            break
        frontier = u.expand(frontier, depth, backend, expand_job)

    u.finish()  # the may-fail sink, if any successor needs it: the "solving" report counts every state
    u.report(options.horizon, "solving", frontier)
    t0 = time.perf_counter()
    imdp = u.builder.build().tightened()  # validates the intervals as built, then tightens
    values, q = bounded_reachability(imdp, options.horizon, mode="maxmax")
    vmin, _ = bounded_reachability(imdp, options.horizon, mode="maxmin", validate=False)
    vlow, q_low = bounded_reachability(imdp, options.horizon, mode="minmin", validate=False)
    t_solve = time.perf_counter() - t0
    upper, lower, part_bounds = u.root_bounds(values, q, vlow, q_low)
    stats = u.stats
    warnings = [
        f"{note}: the states not expanded count as failing in the upper bound and as safe in the lower bound "
        "(both stay sound, but looser); a larger max_states / time budget, a larger phi or --containment helps"
        for note in u.budget_notes
    ]
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
            warnings=warnings,
        ),
        lower_all=lower,
    )


def _two_sided(
    system: ContinuousSystem,
    policy: Policy | str | Path | MLP,
    options: AbstractionOptions,
    progress: Callable[[AbstractionProgress], None] | None,
) -> AbstractionResult:
    """One abstraction, or refinement by the gap (with ``gap`` or ``time_budget``: it also stops once ``threshold`` is
    decided); then the worst-case witness, the gap and the threshold's verdict."""
    t_start = time.perf_counter()
    validate_options(system, options)
    if options.domain == "auto":
        options = _auto_template(system, options)
    deadline = t_start + budget_seconds(options)
    if isinstance(policy, (str, Path)):
        from rlverify.policies.loading import load_network_policy

        policy = load_network_policy(str(policy))
    network = policy_network(system, policy, seed=options.seed)
    probabilities = _policy_probabilities(system, policy, network[0])
    if options.gap is None and options.time_budget is None:
        result = _verify(system, policy, options, progress, deadline, network)
        witness = _witness(system, probabilities, options, [result])
        return _finish(result, witness, options, stopped=None, cells=None, history=())
    return _refine_by_gap(system, policy, options, progress, network, probabilities, t_start, deadline)


def _auto_template(system: ContinuousSystem, options: AbstractionOptions) -> AbstractionOptions:
    """``domain="auto"``: the directions of :func:`~rlverify.abstraction.templates.auto_directions`, chosen once from
    the dynamics and the whole initial region, then used as ``domain="template"`` (the result shows them)."""
    from dataclasses import replace

    from rlverify.abstraction.templates import auto_directions

    lo, hi = initial_box(system, options)
    directions = auto_directions(system, lo, hi, seed=options.seed)
    log.info("domain 'auto': template directions %s", directions.tolist())
    return replace(options, domain="template", template=tuple(tuple(map(float, r)) for r in directions))


def _policy_probabilities(system: ContinuousSystem, policy: Policy | MLP, mlp: MLP) -> Callable[[np.ndarray], np.ndarray]:
    """The policy's own distribution on states ``(N, n) -> (N, |A|)``: its runtime when it has one, else the softmax of
    the network (an :class:`MLP` given as the policy)."""
    if not isinstance(policy, MLP) and callable(getattr(policy, "action_probabilities", None)):
        return lambda x: np.asarray(policy.action_probabilities(system.observe(x)), dtype=np.float64)
    return NetworkBounder(fold_observation(mlp, system.obs_matrix, system.obs_offset))


def _witness(
    system: ContinuousSystem,
    probabilities: Callable[[np.ndarray], np.ndarray],
    options: AbstractionOptions,
    results: Sequence[AbstractionResult],
    previous: WorstWitness | None = None,
) -> WorstWitness | None:
    """The best witness from the parts of ``results`` with the highest upper bounds (None with ``witness="none"``)."""
    if options.witness == "none":
        return previous
    from rlverify.abstraction.witness import search_witness

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


def _verdict(upper: float, witness: WorstWitness | None, worst_lower: float, threshold: float | None) -> str | None:
    """``"safe"``, ``"unsafe (witness)"`` or ``"undecided at budget"`` for ``Pr <= threshold``; None without one."""
    if threshold is None:
        return None
    if upper <= threshold:
        return "safe"
    if worst_lower > threshold:
        how = (
            "statistical"
            if witness is not None and witness.lower == worst_lower and witness.method == "simulation"
            else "sound"
        )
        return f"unsafe (witness, {how})"
    return "undecided at budget"


def _finish(
    result: AbstractionResult,
    witness: WorstWitness | None,
    options: AbstractionOptions,
    *,
    stopped: str | None,
    cells: int | None,
    history: tuple[tuple[float, float, float, float], ...],
) -> AbstractionResult:
    """``result`` with the witness, the gap, the verdict and the refinement's record."""
    from dataclasses import replace

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


def _refine_by_gap(
    system: ContinuousSystem,
    policy: Policy | MLP,
    options: AbstractionOptions,
    progress: Callable[[AbstractionProgress], None] | None,
    network: tuple[MLP, str],
    probabilities: Callable[[np.ndarray], np.ndarray],
    t_start: float,
    deadline: float | None,
) -> AbstractionResult:
    """Refinement driven by the gap: the initial region is cut into cells, each abstracted on its own (sound upper and
    lower bounds per cell; the region's are their max and min). Each round splits the cell with the largest gap
    ``upper - lower`` weighted by how far its upper bound lies above the best lower bound on the worst case (the
    cells whose upper bound decides the answer), in halves along its widest side (relative to the initial box), each
    abstracted with ``phi * phi_decay``; a split whose halves ran out of time is undone (the parent's bounds stay).
    Stops when the gap is at most ``gap``, the threshold is decided, the time budget or ``max_cells`` is spent, or
    no cell can be split; always returns the best bounds so far."""
    from dataclasses import replace

    lo0, hi0 = initial_box(system, options)
    extent = np.where(hi0 > lo0, hi0 - lo0, np.inf)
    min_width = options.min_width if options.min_width is not None else system.min_width

    def run(lo: np.ndarray, hi: np.ndarray, phi: float) -> AbstractionResult:
        cell_options = replace(
            options, initial=(tuple(map(float, lo)), tuple(map(float, hi))), phi=phi, gap=None, threshold=None
        )
        return _verify(system, policy, cell_options, progress, deadline, network)

    cells = [_Cell(lo0, hi0, float(options.phi), run(lo0, hi0, float(options.phi)))]
    witness = _witness(system, probabilities, options, [cells[0].result])
    history: list[tuple[float, float, float, float]] = []
    while True:
        upper = max(c.upper for c in cells)
        worst_lower = max(_worst_lower(c.result.parts, c.lower, witness) for c in cells)
        history.append((time.perf_counter() - t_start, upper, min(c.lower for c in cells), worst_lower))
        log.info(
            "refinement by the gap: %d cells, upper %.6g, best lower bound on the worst case %.6g",
            len(cells),
            upper,
            worst_lower,
        )
        stopped = _stop_reason(options, upper, worst_lower, witness, len(cells), deadline)
        if stopped is not None:
            break
        level = worst_lower
        if options.gap is not None:
            level = worst_lower + float(options.gap)
        if options.threshold is not None:
            level = min(level, float(options.threshold)) if options.gap is not None else float(options.threshold)
        todo = [c for c in cells if c.splittable and c.upper > level]
        if not todo:
            stopped = "no cell above the target can be split further"
            break
        cell = max(todo, key=lambda c: (c.upper - c.lower) * (c.upper - worst_lower))
        widths = (cell.hi - cell.lo) / extent
        axes = np.flatnonzero((widths >= 0.5 * widths.max()) & (cell.hi - cell.lo > 2 * min_width))[:SPLIT_AXES]
        if len(axes) == 0:
            cell.splittable = False
            continue
        phi = cell.phi if cell.coarse else max(MIN_PHI, cell.phi * float(options.phi_decay) ** len(axes))
        halves = [
            _Cell(lo, hi, phi, run(lo, hi, phi), cap=cell.upper, floor=cell.lower)
            for lo, hi in _bisect(cell.lo, cell.hi, axes)
        ]
        spent = {why for h in halves for why in _ran_out(h.result)}
        if "time" in spent:
            stopped = "the time budget ran out (the last split was undone: its pieces were not finished)"
            history.append((time.perf_counter() - t_start, upper, min(c.lower for c in cells), worst_lower))
            break
        if spent:  # a piece reached max_states: keep the cell whole (its bounds stay), split others
            cell.splittable = False
            continue
        cells.remove(cell)
        cells.extend(halves)
        witness = _witness(system, probabilities, options, [h.result for h in halves], previous=witness)
    combined = _combine(cells, options, lo0, hi0, time.perf_counter() - t_start)
    return _finish(combined, witness, options, stopped=stopped, cells=len(cells), history=tuple(history))


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


def _ran_out(result: AbstractionResult) -> set[str]:
    """Which budgets an abstraction ran out of: ``"time"``, ``"states"`` (from its warnings, :meth:`_Unfolding.abandon`
    and :meth:`_Unfolding.budget_spent`)."""
    out = set()
    for w in result.warnings:
        if w.startswith("the time budget"):
            out.add("time")
        if w.startswith("max_states="):
            out.add("states")
    return out


def _stop_reason(
    options: AbstractionOptions,
    upper: float,
    worst_lower: float,
    witness: WorstWitness | None,
    n_cells: int,
    deadline: float | None,
) -> str | None:
    """Why refinement by the gap stops now, or None."""
    if options.threshold is not None and _verdict(upper, witness, worst_lower, options.threshold) != "undecided at budget":
        return f"the threshold {options.threshold:g} is decided"
    if options.gap is not None and upper - worst_lower <= options.gap:
        return f"the gap {upper - worst_lower:.4g} is at most {options.gap:g}"
    if deadline is not None and time.perf_counter() > deadline:
        return f"{time_budget_text(options)} is spent"
    if n_cells >= options.max_cells:
        return f"max_cells={options.max_cells} cells reached"
    return None


def _combine(
    cells: Sequence[_Cell], options: AbstractionOptions, lo0: np.ndarray, hi0: np.ndarray, total: float
) -> AbstractionResult:
    """The cells' results as one: upper bound the largest, lower bound the smallest, parts and counts together."""
    from dataclasses import replace

    results = [c.result for c in cells]
    first = results[0]
    # a cell's bounds are also those of the cells it was split from (cap / floor)
    timings = {k: sum(r.timings.get(k, 0.0) for r in results) for k in ("bounds", "refinement", "successors", "solving")}
    timings["total"] = total
    warnings: list[str] = []
    for r in results:
        warnings += [w for w in r.warnings if w not in warnings]
    return replace(
        first,
        upper_bound=max(c.upper for c in cells),
        lower_all=min(c.lower for c in cells),
        maxmin_value=max(r.maxmin_value for r in results),
        parts=tuple(
            replace(p, bound=min(p.bound, c.upper), lower=max(p.lower or 0.0, c.lower)) for c in cells for p in c.result.parts
        ),
        n_abstract_states=sum(r.n_abstract_states for r in results),
        n_polyhedra=sum(r.n_polyhedra for r in results),
        n_containment_merges=sum(r.n_containment_merges for r in results),
        n_shared_successors=sum(r.n_shared_successors for r in results),
        n_unrefined_states=sum(r.n_unrefined_states for r in results),
        n_choices=sum(r.n_choices for r in results),
        n_transitions=sum(r.n_transitions for r in results),
        n_unresolved_parts=sum(r.n_unresolved_parts for r in results),
        n_milp_parts=sum(r.n_milp_parts for r in results),
        options=options,
        initial_lo=tuple(map(float, lo0)),
        initial_hi=tuple(map(float, hi0)),
        imdp=None if len(results) > 1 else first.imdp,
        provenance=replace(first.provenance, timings=timings, warnings=warnings),
    )


#: the may-fail sink's target number until the unfolding is finished (:meth:`_Unfolding.finish`)
MAYBE_SINK = -2

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
        self.fail_sink = self.builder.add_state(fail=True)  # successors inside the unsafe set: every state fails
        # successors that meet the unsafe set, and states left unexpanded (upper 1, lower 0): a placeholder target
        # until finish() makes the state last, so that every other state keeps the number (and the refinement seed)
        # it had before this sink existed
        self.maybe_sink = MAYBE_SINK
        self.maybe_used = False
        self.budget_notes: list[str] = []  # why states were left unexpanded (a budget ran out)
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
        codes_whole = unsafe_codes(self.system, self.template, [sp for lst in whole for sc in lst for sp in sc.polytopes])
        simple: list[tuple[int, list[Successors], list[tuple[bool, bool]]]] = []
        pos = 0
        for st, lst in zip(candidates, whole, strict=True):
            flags, ok = [], True
            for sc in lst:
                codes = codes_whole[pos : pos + len(sc.polytopes)]
                pos += len(sc.polytopes)
                f = codes > 0
                # (meets the unsafe set, every action's successor lies inside it): all actions share the outcome
                flags.append((bool(f[0]), bool((codes == 2).all())))
                if options.refine_everywhere:  # lossless: only a last step that is safe whatever happens
                    ok = ok and not f.any()
                else:
                    ok = ok and ((last and bool((f == f[0]).all())) or _same_for_all_actions(sc))
            if ok:
                simple.append((st, lst, flags))
        wanted = [
            (sc.polytopes[0], unsafe, sure) for _, lst, flags in simple for sc, (unsafe, sure) in zip(lst, flags, strict=True)
        ]
        targets = iter(self.successor_states(wanted, depth + 1))
        for st, lst, _ in simple:
            for _ in lst:
                self.builder.add_choice(st, {next(targets): (1.0, 1.0)})
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
        codes = (np.concatenate(unsafe) if unsafe else np.zeros(0, dtype=np.int8)).tolist()
        sps = [sp for lst in part_succ for sc in lst for sp in sc.polytopes]
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

    def budget_spent(self, depth: int) -> str | None:
        """Why no new abstract state may be made at ``depth`` (the state or time budget), or None."""
        if len(self.builder.fail) >= self.options.max_states:  # states are numbered from 0 in creation order
            return f"max_states={self.options.max_states:,} abstract states reached at depth {depth} of {self.options.horizon}"
        if self.deadline is not None and time.perf_counter() > self.deadline:
            return f"{time_budget_text(self.options)} reached at depth {depth} of {self.options.horizon}"
        return None

    def new_state(self, poly: Polytope, depth: int, key: bytes, lookups: PendingLookups | None = None, slot: int = -1) -> int:
        """A new abstract state for ``poly``; at a spent budget, the may-fail sink instead (the bounds stay sound).

        With containment it joins the visited index (through ``lookups``, as its query ``slot``, when given)."""
        spent = self.budget_spent(depth)
        if spent is not None:
            if not any(note.split(" reached")[0] == spent.split(" reached")[0] for note in self.budget_notes):
                self.budget_notes.append(spent)  # the first depth each budget ran out at
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

    def abandon(self, frontier: Sequence[int], depth: int, why: str) -> None:
        """Leave ``frontier`` unexpanded (a budget ran out): each of its states may fail (upper 1, lower 0)."""
        for st in frontier:
            self.builder.fail[st] = True
            self.builder.sure_fail[st] = False
        if frontier:
            self.budget_notes.append(
                f"{why} at depth {depth} of {self.options.horizon}: {len(frontier):,} states not expanded"
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
