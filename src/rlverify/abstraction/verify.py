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
gap (:func:`~rlverify.abstraction.gap.refine_by_gap`) cuts the initial region into cells until the bounds meet the target.

Savings that lose nothing: a successor that is exactly the set of an abstract state reached at the
same or a smaller depth shares that state (its subtree is at least as deep); actions of a part with
the same successor share one target; a state whose successors at the last step are all safe is not
refined; every safe successor at the horizon goes to one shared leaf of value 0. With
``refine_everywhere=False`` a state where the action cannot matter is not refined at all (faster,
coarser: see :class:`AbstractionOptions`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from rlverify.abstraction._threads import single_threaded_blas
from rlverify.abstraction.domains import validate_region_inside
from rlverify.abstraction.gap import CellRun, Probabilities, finish, part_polytopes, refine_by_gap, witness
from rlverify.abstraction.kinds import Domain
from rlverify.abstraction.network_bounds import NetworkBounder, fold_observation
from rlverify.abstraction.options import AbstractionOptions, budget_seconds, initial_box, make_template, validate_options
from rlverify.abstraction.policy_fit import policy_network
from rlverify.abstraction.refinement import RefinementOptions
from rlverify.abstraction.robust_vi import bounded_reachability
from rlverify.abstraction.templates import auto_directions
from rlverify.abstraction.unfolding import AbstractionProgress, Budget, ExpandJob, Unfolding
from rlverify.backends import open_backend
from rlverify.errors import AbstractionBudgetError, AbstractionError
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.policies.base import Policy
from rlverify.policies.loading import load_network_policy
from rlverify.policies.mlp import MLP
from rlverify.results import AbstractionResult, PartBound, Provenance, versions  # re-exported

log = logging.getLogger(__name__)

GUARANTEE = "sound upper bound"

#: what the engine bounds: a loaded policy that wraps a network, or the network itself
NetworkPolicy = Policy | MLP
#: the progress callback of :func:`verify_abstraction`
Progress = Callable[[AbstractionProgress], None]


def verify_abstraction(
    system: ContinuousSystem,
    policy: Policy | str | Path | MLP,
    options: AbstractionOptions,
    *,
    progress: Progress | None = None,
) -> AbstractionResult:
    """Sound upper and lower bounds on ``Pr(F<=k fail)`` (see :func:`_verify`), a worst-case witness and the gap;
    with ``gap`` or ``time_budget``, refinement by the gap (:func:`~rlverify.abstraction.gap.refine_by_gap`). numpy's
    BLAS runs single-threaded meanwhile.

    ``policy``: a loaded policy, an :class:`MLP`, or a policy file (loaded here, once, by
    :func:`~rlverify.policies.loading.load_network_policy`). ``progress`` (optional) is called with an
    :class:`AbstractionProgress` at each stage of each depth.
    """
    if not isinstance(system, ContinuousSystem):
        raise AbstractionError(
            f"verify_abstraction takes a continuous system, not a {type(system).__name__}: a "
            "benchmark's system is make(ID).model(), a file's is rlverify.resolve.resolve(TARGET).model"
        )
    with single_threaded_blas():
        return _two_sided(system, policy, options, progress)


def _two_sided(
    system: ContinuousSystem,
    policy: Policy | str | Path | MLP,
    options: AbstractionOptions,
    progress: Progress | None,
) -> AbstractionResult:
    """One abstraction, or refinement by the gap (with ``gap`` or ``time_budget``: it also stops once ``threshold`` is
    decided); then the worst-case witness, the gap and the threshold's verdict. The options are checked here, once."""
    t_start = time.perf_counter()
    options = validate_options(system, options)
    if options.domain == Domain.AUTO:
        options = _auto_template(system, options)
    deadline = t_start + budget_seconds(options)
    loaded = load_network_policy(str(policy)) if isinstance(policy, (str, Path)) else policy
    network = policy_network(system, loaded, seed=options.seed)
    probabilities = _policy_probabilities(system, loaded, network[0])
    if options.gap is None and options.time_budget is None:
        result, _ = _verify(system, options, network, progress, deadline)
        found = witness(system, probabilities, options, [result])
        return finish(result, found, options, stopped=None, cells=None, history=())
    run = _cell_run(system, options, network, progress, deadline)
    return refine_by_gap(system, options, run, probabilities, t_start, deadline)


def _cell_run(
    system: ContinuousSystem,
    options: AbstractionOptions,
    network: tuple[MLP, str],
    progress: Progress | None,
    deadline: float | None,
) -> CellRun:
    """The abstraction of one cell ``[lo, hi]`` of the initial region with its ``phi`` (no gap, no threshold)."""

    def run(lo: np.ndarray, hi: np.ndarray, phi: float) -> tuple[AbstractionResult, frozenset[Budget]]:
        cell_options = replace(
            options, initial=(tuple(map(float, lo)), tuple(map(float, hi))), phi=phi, gap=None, threshold=None
        )
        return _verify(system, cell_options, network, progress, deadline)

    return run


def _verify(
    system: ContinuousSystem,
    options: AbstractionOptions,
    network: tuple[MLP, str],
    progress: Progress | None = None,
    deadline: float | None = None,
) -> tuple[AbstractionResult, frozenset[Budget]]:
    """Sound upper and lower bounds on ``Pr(F<=k fail)`` from every state of the initial region (the options
    checked by :func:`verify_abstraction`), and the budgets that ran out.

    ``deadline`` (a ``time.perf_counter()`` time): after it no new abstract state is expanded (each
    left unexpanded counts as failing in the upper bound, as safe in the lower; a warning says so).
    ``network``: the policy's checked network and name (:func:`policy_network`).

    Returns:
        An :class:`AbstractionResult` (``guarantee == "sound upper bound"``) and the :class:`Budget` s spent.

    Raises:
        DomainError: an initial region outside the system's domain.
    """
    t_start = time.perf_counter()
    template = make_template(system, options)
    lo0, hi0 = initial_box(system, options)
    root_poly = template.from_box(lo0, hi0)
    validate_region_inside(root_poly, system.domain_lo, system.domain_hi, system.variables, "initial region")
    mlp, policy_name = network
    u = Unfolding(system, template, options, root_poly, progress)
    frontier = _unfold(u, system, options, mlp, deadline)
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
    result = AbstractionResult(
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
            warnings=_budget_warnings(u.budget_notes),
        ),
        lower_all=lower,
    )
    return result, frozenset(u.spent)


def _unfold(
    u: Unfolding, system: ContinuousSystem, options: AbstractionOptions, mlp: MLP, deadline: float | None
) -> list[int]:
    """Expand ``u`` depth by depth to the horizon, or until ``deadline`` (the frontier then left unexpanded); the last
    frontier (empty)."""
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
    expand_job = backend.share(ExpandJob(system, u.template, bounder, ropts, int(options.seed)))
    u.deadline = deadline
    frontier = [] if u.root_fail else [u.root]
    for depth in range(options.horizon):
        if deadline is not None and time.perf_counter() > deadline:
            u.abandon(frontier, depth)
            return []
        frontier = u.expand(frontier, depth, backend, expand_job)
    return frontier


def _budget_warnings(notes: Sequence[str]) -> list[str]:
    """A warning per budget note: what the states left unexpanded mean, and what helps."""
    return [
        f"{note}: the states not expanded count as failing in the upper bound and as safe in the lower bound "
        "(both stay sound, but looser); a larger max_states / time budget, a larger phi or --containment helps"
        for note in notes
    ]


def _auto_template(system: ContinuousSystem, options: AbstractionOptions) -> AbstractionOptions:
    """``domain="auto"``: the directions of :func:`~rlverify.abstraction.templates.auto_directions`, chosen once from
    the dynamics and the whole initial region, then used as ``domain="template"`` (the result shows them)."""
    lo, hi = initial_box(system, options)
    directions = auto_directions(system, lo, hi, seed=options.seed)
    log.info("domain 'auto': template directions %s", directions.tolist())
    return replace(options, domain=Domain.TEMPLATE, template=tuple(tuple(map(float, r)) for r in directions))


def _policy_probabilities(system: ContinuousSystem, policy: NetworkPolicy, mlp: MLP) -> Probabilities:
    """The policy's own distribution on states ``(N, n) -> (N, |A|)``: its runtime when it has one, else the softmax of
    the network (an :class:`MLP` given as the policy)."""
    if not isinstance(policy, MLP) and callable(getattr(policy, "action_probabilities", None)):
        return lambda x: np.asarray(policy.action_probabilities(system.observe(x)), dtype=np.float64)
    return NetworkBounder(fold_observation(mlp, system.obs_matrix, system.obs_offset))


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
