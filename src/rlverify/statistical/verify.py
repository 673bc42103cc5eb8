"""Deep statistical model checking: estimate a path property's probability under a policy by simulation."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from rlverify.backends import Backend, BackendOptions, chunks, open_backend
from rlverify.errors import OptionError, PolicyError, PropertyError
from rlverify.models.commands import check_names, is_command_name
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.models.continuous.env import ContinuousEnv, unsafe_property
from rlverify.models.dynamics import choice_table, forced_start_message, untaken_message
from rlverify.models.explicit import ExplicitModel
from rlverify.models.properties import Property, parse_structure
from rlverify.policies.base import Policy
from rlverify.results import Provenance, versions
from rlverify.statistical.choices import METHODS
from rlverify.statistical.engine import SATISFIED, UNDECIDED, RunOutcomes, SimulationOptions, positive_int, simulate
from rlverify.statistical.envs import ExplicitEnv, VectorEnv, hopeless_states
from rlverify.statistical.properties import PathProperty, decidable, parse_path_property, property_from_storm
from rlverify.statistical.results import StatisticalResult
from rlverify.statistical.stats import SprtBounds, StatisticsError, check_unit, clopper_pearson, okamoto_runs, sprt, wilson
from rlverify.statistical.step import Binding, bind_policy

if TYPE_CHECKING:
    from rlverify.models.symbolic import SymbolicModel

log = logging.getLogger(__name__)

#: what the statistical engine simulates: a resolved model (:func:`rlverify.resolve.resolve` turns files and benchmark
#: ids into one)
SimulatedModel: TypeAlias = "SymbolicModel | ExplicitModel | ContinuousSystem | VectorEnv"


@dataclass(frozen=True)
class StatisticalOptions:
    """Settings of one statistical verification.

    Attributes:
        method: ``okamoto`` (Okamoto/Chernoff–Hoeffding: ``n = ceil(ln(2/delta)/(2 eps^2))`` runs,
            interval ``p_hat +- epsilon``), ``adaptive`` (modes' adaptive bound: stop at the first
            ``n >= adaptive_runs(p_hat_n)``, interval ``p_hat +- epsilon``), ``clopper-pearson`` /
            ``wilson`` (``runs`` runs, default the Okamoto number; exact / score interval at
            confidence ``1 - delta``), ``sprt`` (Wald's test of ``P >= threshold``).
        epsilon, delta: half-width and error probability, both in (0, 1).
        runs: number of runs for the interval methods (None: Okamoto's number for epsilon, delta).
        threshold: SPRT ``theta`` (default: the property's own ``P>=theta``);
        indifference, alpha, beta: SPRT indifference half-width and error bounds.
        max_runs: SPRT gives up (decision None) after this many runs.
        run_limit: the guard on the runs a method plans (``runs``, Okamoto's number for ``epsilon``/``delta``,
            ``max_runs``): more are refused up front with the figures (time at a million runs per second).
            Memory does not grow with the runs (they are simulated and counted in rounds).
        simulation: mode, max run length, seed, batch size.
        backend: where the runs are simulated (:class:`~rlverify.backends.BackendOptions`: this process,
            or Ray tasks); the result is the same on every backend for the same seed.
    """

    method: str = "okamoto"
    epsilon: float = 0.01
    delta: float = 0.05
    runs: int | None = None
    threshold: float | None = None
    indifference: float = 0.01
    alpha: float = 0.05
    beta: float = 0.05
    max_runs: int = 1_000_000
    run_limit: int = 100_000_000
    max_states: int | None = 2_000_000
    simulation: SimulationOptions = field(default_factory=SimulationOptions)
    backend: BackendOptions = field(default_factory=BackendOptions)

    def validate(self) -> None:
        if self.method not in METHODS:
            raise OptionError(f"--method: expected one of {', '.join(METHODS)}, got '{self.method}'")
        check_unit("epsilon", self.epsilon)
        check_unit("delta", self.delta)
        for name in ("alpha", "beta", "indifference"):  # checked with or without --sprt: never silently unused
            check_unit(name, getattr(self, name))
        if self.runs is not None and not positive_int(self.runs):
            raise StatisticsError(f"--runs: expected a positive whole number of runs, got {self.runs!r}")
        if self.runs is not None and self.method not in ("clopper-pearson", "wilson"):
            raise StatisticsError(
                f"--runs fixes the number of runs of the clopper-pearson and wilson methods; "
                f"method '{self.method}' chooses its own (drop --runs or pick one of those methods)"
            )
        if not positive_int(self.max_runs):
            raise StatisticsError(f"max_runs: expected a positive whole number of runs, got {self.max_runs!r}")
        if not positive_int(self.run_limit):
            raise StatisticsError(f"--run-limit: expected a positive whole number of runs, got {self.run_limit!r}")
        if self.max_states is not None and not positive_int(self.max_states):
            raise StatisticsError(f"--max-states: expected a positive whole number of states, got {self.max_states!r}")
        self.simulation.validate()
        self.backend.validate()


def check_run_limit(planned: int, options: StatisticalOptions, backend: Backend, *, what: str | None = None) -> None:
    """Refuse (:class:`StatisticsError`, with the figures and the option) a method planning more than
    ``options.run_limit`` runs (``what``: how they add up, for the message)."""
    if planned <= options.run_limit:
        return
    if what is not None:
        why = f"{what} are {planned:,} runs"
    elif options.method == "sprt":
        why = f"the SPRT may simulate up to max_runs = {planned:,} runs"
    elif options.runs is not None:
        why = f"--runs {planned:,} asks for {planned:,} runs"
    else:
        why = (
            f"--epsilon {options.epsilon:g} and --delta {options.delta:g} need {planned:,} runs "
            f"(Okamoto's bound ln(2/delta)/(2 epsilon^2))"
        )
    seconds = planned / 1e6
    shown = (
        f"{seconds / 86400:,.0f} days"
        if seconds >= 2 * 86400
        else f"{seconds / 3600:,.1f} hours"
        if seconds >= 7200
        else f"{seconds / 60:,.0f} minutes"
    )
    raise StatisticsError(
        f"{why}, more than the guard --run-limit {options.run_limit:,}: at a million runs per second "
        f"(a fast model) that is {shown}; memory stays bounded (runs are counted in rounds). Raise "
        "--run-limit to simulate them, or ask for fewer runs"
    )


@dataclass(frozen=True)
class SimulationJob:
    """What every simulation task needs, shipped to each worker once (see :mod:`rlverify.backends`).

    Attributes:
        env, policy, prop, binding: as for :func:`~rlverify.statistical.engine.simulate`.
        starts: ``(K, ...)`` start states (None: the environment's initial states).
        options: the simulation settings (seed, mode, batch size...).
        record: labels recorded in the final state.
        runs_per_start: None: each run draws its start state from the seed; else run ``i`` starts in
            ``starts[i // runs_per_start]`` (heat maps: a block of runs per start cell).
    """

    env: Any
    policy: Policy
    prop: PathProperty
    binding: Binding
    starts: np.ndarray | None
    options: SimulationOptions
    record: tuple[str, ...] = ()
    runs_per_start: int | None = None


def simulate_range(job: SimulationJob, first: int, stop: int) -> RunOutcomes:
    """Simulate runs ``first .. stop - 1`` of ``job`` (a task: its result depends only on ``job`` and the range,
    because run ``i``'s random numbers depend only on the seed and ``i``)."""
    ids = np.arange(first, stop, dtype=np.int64)
    return simulate(
        job.env,
        job.policy,
        job.prop,
        ids,
        starts=job.starts,
        start_of_run=None if job.runs_per_start is None else ids // job.runs_per_start,
        options=job.options,
        record=job.record,
        binding=job.binding,
    )


def concat_outcomes(parts: Sequence[RunOutcomes], record: Sequence[str] = ()) -> RunOutcomes:
    """The outcomes of consecutive run ranges as one :class:`RunOutcomes` (in run order)."""
    return RunOutcomes(
        outcome=np.concatenate([p.outcome for p in parts]),
        stalled=np.concatenate([p.stalled for p in parts]),
        steps=np.concatenate([p.steps for p in parts]),
        recorded={name: np.concatenate([p.recorded[name] for p in parts]) for name in record},
        hopeless=np.concatenate([p.hopeless for p in parts]),
        stuck=np.concatenate([p.stuck for p in parts]),
    )


def task_runs(backend: Backend, planned: int, batch_size: int, tasks_per_worker: int) -> int:
    """Runs per task: one batch locally; on a parallel backend about ``tasks_per_worker`` tasks per worker for
    ``planned`` runs (at most a batch each). Results never depend on it (counter-based random numbers)."""
    if backend.workers <= 1:
        return batch_size
    return max(1, min(batch_size, -(-planned // (backend.workers * tasks_per_worker))))


def simulate_runs(
    backend: Backend,
    shared: Any,
    first: int,
    stop: int,
    size: int,
    *,
    on_task: Callable[[int], None] | None = None,
    record: Sequence[str] = (),
) -> RunOutcomes:
    """Runs ``first .. stop - 1`` of the shared :class:`SimulationJob`, cut into tasks of ``size`` runs fixed
    before any task runs; ``on_task(runs)`` as each task finishes (in any order: progress only)."""
    tasks = chunks(first, stop, size)
    parts = backend.map(
        simulate_range, shared, tasks, on_result=None if on_task is None else (lambda i, _: on_task(tasks[i][1] - tasks[i][0]))
    )
    return concat_outcomes(parts, record)


Progress = Callable[[int, int], None]


def prepare(
    model: SimulatedModel,
    prop: str | Property | PathProperty,
    *,
    actions: Sequence[str] = (),
    max_states: int | None = 2_000_000,
) -> tuple[Any, PathProperty, str]:
    """The environment, the path property and the model's name for a resolved ``model`` (see
    :func:`rlverify.resolve.resolve`).

    ``model`` is a :class:`~rlverify.models.SymbolicModel` (built property-directed by Storm; any propositional
    state formulas), an :class:`~rlverify.models.ExplicitModel` (label-based properties), a
    :class:`~rlverify.models.continuous.ContinuousSystem` (runs start uniformly in its initial region; one label,
    ``unsafe``: :class:`~rlverify.models.continuous.ContinuousEnv`) or a vectorised environment
    (:class:`~rlverify.statistical.envs.VectorEnv`, e.g. :class:`~rlverify.models.racetrack.RacetrackEnv`).
    ``prop`` is a parsed :class:`~rlverify.models.Property` (or its text, parsed for ``model``), or, for an
    environment, a :class:`PathProperty` over it. Actions of a PRISM/JANI model are its declared action labels,
    also those the property-directed build never offers (the policy may name them; they are unavailable where they
    are not offered), plus the command names (``m:2``) among ``actions`` (the policy's), for which the model is
    built with its commands named.

    Raises:
        PropertyError: a property the simulator cannot decide, or a model of another kind.
    """
    from rlverify.models.symbolic import SymbolicModel

    if isinstance(model, SymbolicModel):
        return _symbolic(model, prop, actions, max_states)
    if isinstance(model, ExplicitModel):
        env = ExplicitEnv(model)
        return env, with_graph_analysis(env, _path_property(env, prop)), env.name
    if isinstance(model, ContinuousSystem):
        return _continuous(ContinuousEnv(model), prop)
    if isinstance(model, VectorEnv):
        return model, _path_property(model, prop), model.name
    raise PropertyError(
        f"cannot simulate {type(model).__name__}: expected a SymbolicModel, an ExplicitModel, a "
        "ContinuousSystem or a vectorised environment (resolve a file or benchmark id first: "
        "rlverify.resolve.resolve)"
    )


def _path_property(env: Any, prop: str | Property | PathProperty) -> PathProperty:
    """``prop`` over the labels of ``env``."""
    return prop if isinstance(prop, PathProperty) else parse_path_property(prop, tuple(env.labels))


def _symbolic(
    model: SymbolicModel, prop: str | Property | PathProperty, actions: Sequence[str], max_states: int | None
) -> tuple[ExplicitEnv, PathProperty, str]:
    """A PRISM/JANI model built property-directed by Storm, as an explicit environment."""
    from rlverify.models.property_parser import parse_property
    from rlverify.models.storm_build import build_explicit

    if isinstance(prop, PathProperty):
        raise PropertyError(
            f"property '{prop.text}': a PathProperty is over one environment's states; give the "
            f"property of {model.shown} (text or Property) to simulate it"
        )
    parsed = parse_property(model, prop, fixed_policy=True)  # a named JANI Pmax: P=? (its notes say so)
    decidable(parsed)
    commands = tuple(a for a in actions if is_command_name(a))
    problems = check_names(commands, model.commands)
    if problems:
        raise PolicyError(f"the policy's actions do not fit model {model.shown}", [m for _, m in problems])
    mdp, storm_model = build_explicit(model, [parsed], command_names=True if commands else None, max_states=max_states)
    env = ExplicitEnv(mdp, name=model.shown, actions=tuple(sorted(a for a in model.action_names if a)) + commands)
    return env, with_graph_analysis(env, property_from_storm(model, storm_model, parsed)), model.shown


def _continuous(env: ContinuousEnv, prop: str | Property | PathProperty) -> tuple[ContinuousEnv, PathProperty, str]:
    """A continuous system's environment and property (``Pmax``/``Pmin``, over the start states, refused)."""
    if isinstance(prop, PathProperty):
        return env, prop, env.name
    parsed = prop if isinstance(prop, Property) else parse_structure(prop)
    if parsed.optimality is not None:
        raise PropertyError(
            f"property '{parsed.text}': on a continuous system P{parsed.optimality} is the "
            f"{'largest' if parsed.optimality == 'max' else 'smallest'} probability over the start "
            "states of the initial region (rlverify abstract bounds the largest); the simulator "
            f"estimates P=? [...] from a uniformly random start state (e.g. "
            f"{unsafe_property(env.system).text})"
        )
    return env, parse_path_property(parsed, env.labels), env.name


def with_start_note(env: Any, prop: PathProperty, starts: np.ndarray | None) -> PathProperty:
    """``prop`` with a note saying where the runs start when they start anywhere in a continuous initial region
    (``starts`` None and an env with an ``initial_box``): the estimate is then an average over the region."""
    if starts is not None or not isinstance(env, ContinuousEnv):
        return prop
    note = (
        f"{env.name}: the runs start uniformly at random in the initial region '{env.region}' "
        f"({env.describe_start()}): the estimate is the probability from a random start state there, not the "
        "largest over the region (which rlverify abstract bounds)"
    )
    return dataclasses.replace(prop, notes=(*prop.notes, note))


def with_graph_analysis(env: ExplicitEnv, prop: PathProperty) -> PathProperty:
    """``prop`` with its :attr:`~PathProperty.hopeless` states on the explicit model of ``env`` (runs reaching them are
    decided false at once instead of wandering until ``max_steps``)."""
    return dataclasses.replace(prop, hopeless=hopeless_states(env, prop.left, prop.right))


def threshold_verdict(comparison: str, threshold: float, low: float, high: float) -> bool | None:
    """Whether ``P <comparison> threshold`` holds given an interval ``[low, high]`` for P:
    True/False when the whole interval decides it, None (undecided) when it straddles the threshold."""
    holds = {">=": low >= threshold, ">": low > threshold, "<=": high <= threshold, "<": high < threshold}[comparison]
    fails = {">=": high < threshold, ">": high <= threshold, "<=": low > threshold, "<": low >= threshold}[comparison]
    return True if holds else False if fails else None


@dataclass(frozen=True)
class _Setup:
    """What one statistical verification simulates: the environment, the path property, the policy's binding, the
    model's name, and what the result must say about the policy's choices."""

    env: Any
    prop: PathProperty
    binding: Binding
    name: str
    untaken: dict[str, Any]
    forced_start: str | None


def _setup(
    model: SimulatedModel,
    prop: str | Property | PathProperty,
    policy: Policy,
    options: StatisticalOptions,
    starts: np.ndarray | None,
) -> _Setup:
    env, path, name = prepare(model, prop, actions=policy.actions, max_states=options.max_states)
    path = with_start_note(env, path, starts)
    if isinstance(env, ExplicitEnv) and starts is None and len(env.initial_states()) != 1:
        raise PropertyError(
            f"{name}: the model has {len(env.initial_states())} initial states; "
            "pass starts= to choose (the simulator does not pick among them)"
        )
    binding = bind_policy(env, policy)
    # choices the policy names no action for are never taken: say so (over the model's states)
    table = choice_table(env.model, policy.actions) if isinstance(env, ExplicitEnv) else None
    untaken = table.untaken() if table is not None else {}
    forced_start = forced_start_message(table, path.bound) if table is not None and starts is None else None
    return _Setup(env, path, binding, name, untaken, forced_start)


def verify_statistical(
    model: SimulatedModel,
    prop: str | Property | PathProperty,
    policy: Policy,
    options: StatisticalOptions | None = None,
    *,
    starts: np.ndarray | None = None,
    progress: Progress | None = None,
) -> StatisticalResult:
    """Estimate the probability of ``prop`` under ``policy`` by simulation (deep statistical model checking).

    Args:
        model: a resolved model (see :func:`prepare`: a SymbolicModel, an ExplicitModel, a ContinuousSystem or a
            vectorised environment; :func:`rlverify.resolve.resolve` turns files and benchmark ids into one).
        prop: the property (a :class:`~rlverify.models.Property`, its text, or a :class:`PathProperty` over an
            environment), one of the forms in :data:`rlverify.statistical.properties.SUPPORTED_FORMS`.
        policy: a :class:`~rlverify.policies.Policy`; called once per step on all active runs.
        options: the statistical method and simulation settings (default :class:`StatisticalOptions`).
        starts: start states (default: the environment's initial states, or its initial region; several: uniform at
            random).
        progress: ``progress(done_runs, planned_runs)`` after each batch.

    Returns:
        A :class:`~rlverify.statistical.results.StatisticalResult` (a statistical guarantee).
    """
    options = StatisticalOptions() if options is None else options
    options.validate()
    t0 = time.perf_counter()
    setup = _setup(model, prop, policy, options, starts)
    threshold, test = setup.prop.threshold, None  # answered from the interval at its confidence
    if options.method == "sprt":
        theta = _sprt_threshold(setup.prop, options)
        threshold, test = theta, sprt(theta, indifference=options.indifference, alpha=options.alpha, beta=options.beta)
    t_prep = time.perf_counter() - t0
    backend = open_backend(options.backend)
    t_backend = time.perf_counter() - t0 - t_prep
    shared = backend.share(SimulationJob(setup.env, policy, setup.prop, setup.binding, starts, options.simulation))
    t1 = time.perf_counter()
    if test is not None:
        tally = _sequential(backend, shared, options, options.max_runs, _sprt_stop(test), progress)
    elif options.method == "adaptive":
        tally = _sequential(
            backend,
            shared,
            options,
            okamoto_runs(options.epsilon, options.delta),
            _adaptive_stop(options.epsilon, options.delta),
            progress,
        )
    else:
        tally = _fixed_runs(backend, shared, options, progress)
    t_sim = time.perf_counter() - t1
    timings = {"prepare": t_prep, "backend": t_backend, "simulate": t_sim}
    return _result(setup, tally, threshold, options, backend, policy, timings, t0)


def _sprt_threshold(prop: PathProperty, options: StatisticalOptions) -> float:
    """The SPRT's ``theta``: ``options.threshold`` or the property's (refused when they disagree, or when there is
    none)."""
    if (
        options.threshold is not None
        and prop.threshold is not None
        and (options.threshold != prop.threshold or (prop.comparison or ">=") not in (">=", ">"))
    ):
        raise PropertyError(
            f"property '{prop.text}' has its own threshold ({prop.comparison} {prop.threshold:g}); "
            f"the SPRT would test P >= {options.threshold:g} instead: drop --sprt, or write the "
            "property as P=? [...]"
        )
    threshold = options.threshold if options.threshold is not None else prop.threshold
    if threshold is None:
        raise PropertyError(
            f"property '{prop.text}': the SPRT needs a threshold: give --sprt THETA or write the property as P>=THETA [...]"
        )
    return threshold


def _fixed_runs(backend: Backend, shared: Any, options: StatisticalOptions, progress: Progress | None) -> _Tally:
    """``runs`` runs (default: Okamoto's number for ``epsilon``, ``delta``), in rounds of a few tasks per worker
    (memory does not grow with the number of runs)."""
    n = (
        options.runs
        if (options.runs is not None and options.method != "okamoto")
        else okamoto_runs(options.epsilon, options.delta)
    )
    check_run_limit(n, options, backend)
    tpw = options.backend.tasks_per_worker
    size = task_runs(backend, n, options.simulation.batch_size, tpw)
    tally = _Tally()
    done = 0

    def on_task(runs: int) -> None:
        nonlocal done
        done += runs
        if progress:
            progress(done, n)

    while tally.n < n:
        count = min(size * backend.workers * tpw, n - tally.n)
        tally.add(simulate_runs(backend, shared, tally.n, tally.n + count, size, on_task=on_task))
    return tally


#: where a sequential method stops in a round: ``stop(round's outcomes, tally before it)`` -> None (go on), or the
#: position of the run it stops at and its decision (the SPRT's ``H0``/``H1``; None for the adaptive method)
Stop = Callable[[RunOutcomes, "_Tally"], "tuple[int, str | None] | None"]


def _sequential(
    backend: Backend, shared: Any, options: StatisticalOptions, limit: int, stop: Stop, progress: Progress | None
) -> _Tally:
    """Up to ``limit`` runs in rounds fixed in advance (a batch locally, a task per worker on a parallel backend),
    read in run order until ``stop`` says so: the stopping run is the same on every backend."""
    check_run_limit(limit, options, backend)
    size = task_runs(backend, limit, options.simulation.batch_size, options.backend.tasks_per_worker)
    tally = _Tally()
    while tally.n < limit:
        count = min(size * backend.workers, limit - tally.n)
        res = simulate_runs(backend, shared, tally.n, tally.n + count, size)
        hit = stop(res, tally)
        tally.add(res, count if hit is None else hit[0] + 1)
        if hit is not None:
            tally.decision = hit[1]
        if progress:
            progress(tally.n, limit)
        if hit is not None:
            break
    return tally


def _adaptive_stop(eps: float, delta: float) -> Stop:
    """The adaptive method stops at the first run ``n`` with ``n >= adaptive_runs(p_hat_n)``."""

    def stop(res: RunOutcomes, tally: _Tally) -> tuple[int, str | None] | None:
        cum = tally.k + np.cumsum(res.outcome == SATISFIED)
        idx = np.arange(tally.n + 1, tally.n + len(res.outcome) + 1)
        hit = np.flatnonzero(idx >= _adaptive_vec(cum / idx, eps, delta))
        return (int(hit[0]), None) if len(hit) else None

    return stop


def _sprt_stop(test: SprtBounds) -> Stop:
    """Wald's SPRT stops at the first run where a hypothesis is accepted; undecided runs may go either way, so a
    hypothesis is accepted only when it holds for both readings."""

    def stop(res: RunOutcomes, tally: _Tally) -> tuple[int, str | None] | None:
        cum = tally.k + np.cumsum(res.outcome == SATISFIED)
        cum_u = tally.u + np.cumsum(res.outcome == UNDECIDED)
        idx = np.arange(tally.n + 1, tally.n + len(res.outcome) + 1)
        llr_fail = cum * test.step_success + (idx - cum) * test.step_failure  # undecided = violated
        llr_sat = (cum + cum_u) * test.step_success + (idx - cum - cum_u) * test.step_failure  # = satisfied
        h0, h1 = llr_fail <= test.accept_h0, llr_sat >= test.accept_h1
        hit = np.flatnonzero(h0 | h1)
        if not len(hit):
            return None
        return int(hit[0]), "H0" if h0[hit[0]] else "H1"

    return stop


def _interval(tally: _Tally, options: StatisticalOptions) -> tuple[float, float]:
    """The method's interval; undecided runs are counted both ways."""
    k, u, n, delta = tally.k, tally.u, tally.n, options.delta
    if options.method in ("okamoto", "adaptive"):
        return okamoto_interval(k, u, n, options.epsilon)
    if options.method == "wilson":
        return wilson(k, n, delta)[0], wilson(k + u, n, delta)[1]
    return clopper_pearson(k, n, delta)[0], clopper_pearson(k + u, n, delta)[1]  # and the SPRT's informative one


def _satisfied(
    prop: PathProperty, tally: _Tally, threshold: float | None, interval: tuple[float, float], options: StatisticalOptions
) -> bool | None:
    """The verdict on the threshold: the SPRT's decision, or read from the interval at its confidence."""
    if options.method == "sprt":
        if tally.decision is None:
            return None
        holds_ge = tally.decision == "H0"
        return holds_ge if (prop.comparison or ">=") in (">=", ">") else not holds_ge
    if threshold is None:
        return None
    return threshold_verdict(prop.comparison or ">=", threshold, *interval)


def _notes(tally: _Tally, sim: SimulationOptions) -> list[str]:
    """What the result must say about the runs (every output shows it, not only the log)."""
    n, notes = tally.n, []
    if tally.u:
        notes.append(
            f"{tally.u:,} of {n:,} runs were still undecided after --max-steps {sim.max_steps:,} steps: the "
            "interval counts them both ways (raise --max-steps to decide them)"
        )
    if tally.s:
        notes.append(
            f"{tally.s:,} of {n:,} runs stalled (the policy chose an unavailable action) and count as "
            "not satisfying the property"
        )
    if tally.st:
        notes.append(
            f"{tally.st:,} of {n:,} runs stood still forever (the policy surely takes an action that surely "
            "leads back to the same state): they never reach the target and count as not satisfying the property"
        )
    for note in notes:
        log.info("%s", note)
    if tally.h:
        log.info(
            "%d of %d runs were decided false by graph analysis (a state from which no policy reaches the target)", tally.h, n
        )
    return notes


def _result(
    setup: _Setup,
    tally: _Tally,
    threshold: float | None,
    options: StatisticalOptions,
    backend: Backend,
    policy: Policy,
    timings: dict[str, float],
    t0: float,
) -> StatisticalResult:
    sim, prop = options.simulation, setup.prop
    lo, hi = _interval(tally, options)
    satisfied = _satisfied(prop, tally, threshold, (lo, hi), options)
    settings = {k_: v for k_, v in asdict(options).items() if k_ not in ("simulation", "backend")}
    settings.update(asdict(sim))
    settings["backend"] = {**asdict(options.backend), "workers": backend.workers}
    model_notes = list(setup.env.model.notes) if isinstance(setup.env, ExplicitEnv) else []
    t_sim = timings["simulate"]
    return StatisticalResult(
        method=options.method,
        estimate=tally.k / tally.n,
        interval=(lo, hi),
        # the SPRT's guarantee is its error bounds (alpha, beta); its interval is informative only
        confidence=1.0 - max(options.alpha, options.beta) if options.method == "sprt" else 1.0 - options.delta,
        runs=tally.n,
        successes=tally.k,
        undecided=tally.u,
        stalled=tally.s,
        hopeless=tally.h,
        stuck=tally.st,
        seed=sim.seed,
        epsilon=options.epsilon if options.method in ("okamoto", "adaptive") else None,
        delta=options.delta,
        max_steps=sim.max_steps,
        mode=sim.mode,
        decisions=tally.decisions,
        decision=tally.decision,
        satisfied=satisfied,
        threshold=threshold,
        comparison=(prop.comparison or ">=") if threshold is not None else None,
        verdict=None if threshold is None else {True: "yes", False: "no", None: "undecided"}[satisfied],
        untaken_choices=setup.untaken,
        provenance=Provenance(
            property=prop.text,
            timings={
                **timings,
                "total": time.perf_counter() - t0,
                "decisions_per_second": tally.decisions / t_sim if t_sim > 0 else math.inf,
            },
            settings=settings,
            model=setup.name,
            policy=getattr(policy, "name", type(policy).__name__),
            versions=versions(),
            warnings=list(prop.notes)
            + model_notes
            + _notes(tally, sim)
            + ([setup.forced_start] if setup.forced_start else [])
            + ([untaken_message(setup.untaken, "states of the model")] if setup.untaken else []),
        ),
    )


@dataclass
class _Tally:
    """Counts over the runs simulated so far (per-run outcomes are not kept: memory does not grow with the runs)."""

    n: int = 0  # runs counted
    k: int = 0  # satisfied
    u: int = 0  # undecided after max_steps
    s: int = 0  # stalled
    h: int = 0  # decided false by graph analysis (hopeless)
    st: int = 0  # stood still forever (stuck), decided false
    decisions: int = 0  # policy decisions of the runs counted
    decision: str | None = None  # the SPRT's: H0 or H1 (None: none)

    def add(self, res: RunOutcomes, take: int | None = None) -> None:
        """Count the first ``take`` runs of ``res`` (all: None)."""
        cut = slice(None, take)
        self.n += len(res.outcome[cut])
        self.k += int((res.outcome[cut] == SATISFIED).sum())
        self.u += int((res.outcome[cut] == UNDECIDED).sum())
        self.s += int(res.stalled[cut].sum())
        self.h += int(res.hopeless[cut].sum())
        self.st += int(res.stuck[cut].sum())
        self.decisions += int(res.steps[cut].sum())


def okamoto_interval(successes: int, undecided: int, runs: int, epsilon: float) -> tuple[float, float]:
    """``[k/n - epsilon, (k+u)/n + epsilon]`` clipped to [0, 1], each end rounded outward to a float (computed
    exactly): the float interval contains the exact one, so a verdict read from it is never the rounding's."""
    lo = max(0.0, _below(Fraction(successes, runs) - Fraction(epsilon)))
    hi = min(1.0, _above(Fraction(successes + undecided, runs) + Fraction(epsilon)))
    return lo, hi


def _below(x: Fraction) -> float:
    """The largest float ``<= x``."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def _above(x: Fraction) -> float:
    """The smallest float ``>= x``."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _adaptive_vec(p_hat: np.ndarray, eps: float, delta: float) -> np.ndarray:
    """:func:`~rlverify.statistical.stats.adaptive_runs` over an array of estimates."""
    n0 = okamoto_runs(eps, delta)
    dist = np.maximum(np.abs(p_hat - 0.5) - 2.0 * eps / 3.0, 0.0)
    return np.ceil(4.0 * n0 * (0.25 - dist * dist)).astype(np.int64)
