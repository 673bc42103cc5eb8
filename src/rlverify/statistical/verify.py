"""Deep statistical model checking: estimate a path property's probability under a policy by simulation."""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from rlverify.backends import Backend, BackendOptions, chunks, open_backend
from rlverify.errors import OptionError, PolicyError, PropertyError
from rlverify.models.commands import check_names, is_command_name
from rlverify.models.dynamics import choice_table, forced_start_message, untaken_message
from rlverify.models.properties import Property
from rlverify.policies.base import Policy
from rlverify.results import versions
from rlverify.statistical.engine import SATISFIED, UNDECIDED, Binding, RunOutcomes, SimulationOptions, bind_policy, simulate
from rlverify.statistical.envs import ExplicitEnv, hopeless_states
from rlverify.statistical.properties import PathProperty, decidable, parse_path_property, property_from_storm
from rlverify.statistical.results import StatisticalResult
from rlverify.statistical.stats import StatisticsError, check_unit, clopper_pearson, okamoto_runs, sprt, wilson

log = logging.getLogger(__name__)

METHODS = ("okamoto", "adaptive", "clopper-pearson", "wilson", "sprt")


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
    simulation: SimulationOptions = SimulationOptions()
    backend: BackendOptions = BackendOptions()

    def validate(self) -> None:
        if self.method not in METHODS:
            raise OptionError(f"--method: expected one of {', '.join(METHODS)}, got '{self.method}'")
        check_unit("epsilon", self.epsilon)
        check_unit("delta", self.delta)
        if self.runs is not None and not _positive_int(self.runs):
            raise StatisticsError(f"--runs: expected a positive whole number of runs, got {self.runs!r}")
        if self.runs is not None and self.method not in ("clopper-pearson", "wilson"):
            raise StatisticsError(f"--runs fixes the number of runs of the clopper-pearson and wilson methods; "
                                  f"method '{self.method}' chooses its own (drop --runs or pick one of those methods)")
        if not _positive_int(self.max_runs):
            raise StatisticsError(f"max_runs: expected a positive whole number of runs, got {self.max_runs!r}")
        if not _positive_int(self.run_limit):
            raise StatisticsError(f"--run-limit: expected a positive whole number of runs, got {self.run_limit!r}")
        if self.max_states is not None and not _positive_int(self.max_states):
            raise StatisticsError(f"--max-states: expected a positive whole number of states, got {self.max_states!r}")
        self.simulation.validate()
        self.backend.validate()


def _positive_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and x > 0


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
        why = (f"--epsilon {options.epsilon:g} and --delta {options.delta:g} need {planned:,} runs "
               f"(Okamoto's bound ln(2/delta)/(2 epsilon^2))")
    seconds = planned / 1e6
    shown = (f"{seconds / 86400:,.0f} days" if seconds >= 2 * 86400 else f"{seconds / 3600:,.1f} hours"
             if seconds >= 7200 else f"{seconds / 60:,.0f} minutes")
    raise StatisticsError(f"{why}, more than the guard --run-limit {options.run_limit:,}: at a million runs per second "
                          f"(a fast model) that is {shown}; memory stays bounded (runs are counted in rounds). Raise "
                          "--run-limit to simulate them, or ask for fewer runs")


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
    return simulate(job.env, job.policy, job.prop, ids, starts=job.starts,
                    start_of_run=None if job.runs_per_start is None else ids // job.runs_per_start,
                    options=job.options, record=job.record, binding=job.binding)


def concat_outcomes(parts: Sequence[RunOutcomes], record: Sequence[str] = ()) -> RunOutcomes:
    """The outcomes of consecutive run ranges as one :class:`RunOutcomes` (in run order)."""
    return RunOutcomes(outcome=np.concatenate([p.outcome for p in parts]),
                       stalled=np.concatenate([p.stalled for p in parts]),
                       steps=np.concatenate([p.steps for p in parts]),
                       recorded={name: np.concatenate([p.recorded[name] for p in parts]) for name in record},
                       hopeless=np.concatenate([p.hopeless for p in parts]))


def task_runs(backend: Backend, planned: int, batch_size: int, tasks_per_worker: int) -> int:
    """Runs per task: one batch locally; on a parallel backend about ``tasks_per_worker`` tasks per worker for
    ``planned`` runs (at most a batch each). Results never depend on it (counter-based random numbers)."""
    if backend.workers <= 1:
        return batch_size
    return max(1, min(batch_size, -(-planned // (backend.workers * tasks_per_worker))))


def simulate_runs(backend: Backend, shared: Any, first: int, stop: int, size: int, *,
                  on_task: Callable[[int], None] | None = None, record: Sequence[str] = ()) -> RunOutcomes:
    """Runs ``first .. stop - 1`` of the shared :class:`SimulationJob`, cut into tasks of ``size`` runs fixed
    before any task runs; ``on_task(runs)`` as each task finishes (in any order: progress only)."""
    tasks = chunks(first, stop, size)
    parts = backend.map(simulate_range, shared, tasks,
                        on_result=None if on_task is None else (lambda i, _: on_task(tasks[i][1] - tasks[i][0])))
    return concat_outcomes(parts, record)


Progress = Callable[[int, int], None]


def prepare(target: Any, property_text: str | Property, *, constants: str | None = None,
            actions: Sequence[str] = (), max_states: int | None = 2_000_000) -> tuple[Any, PathProperty, str]:
    """The environment and parsed property for ``target``.

    ``target`` is a vectorised environment (e.g. :class:`~rlverify.models.racetrack.RacetrackEnv`),
    an :class:`~rlverify.models.ExplicitModel` (label-based properties), a
    :class:`~rlverify.models.SymbolicModel` or a path to a PRISM/JANI file (built property-directed
    by Storm; any propositional state formulas), or a benchmark (``rlverify.benchmarks.make(...)``).
    Actions of a PRISM/JANI model are its declared action labels, also those the property-directed
    build never offers (the policy may name them; they are unavailable where they are not offered),
    plus the command names (``m:2``) among ``actions`` (the policy's), for which the model is built
    with its commands named.
    """
    from pathlib import Path

    from rlverify.models.explicit import ExplicitModel
    from rlverify.models.symbolic import (
        SymbolicModel,
        build_explicit,
        load_model,
        parse_property,
    )

    if callable(getattr(target, "model", None)) and hasattr(target, "kind"):  # a benchmark: its model and names
        if isinstance(property_text, str):
            property_text = target.property(property_text)[0]
        target = target.model()
    if isinstance(target, (str, Path)):
        target = load_model(target, constants)
    if isinstance(target, SymbolicModel):
        prop = parse_property(target, property_text, fixed_policy=True)  # a named JANI Pmax: P=? (its notes say so)
        decidable(prop)
        commands = tuple(a for a in actions if is_command_name(a))
        problems = check_names(commands, target.commands)
        if problems:
            raise PolicyError(f"the policy's actions do not fit model {target.path}", [m for _, m in problems])
        mdp, storm_model = build_explicit(target, [prop], command_names=True if commands else None,
                                          max_states=max_states)
        env = ExplicitEnv(mdp, name=str(target.path),
                          actions=tuple(sorted(a for a in target.action_names if a)) + commands)
        return env, with_graph_analysis(env, property_from_storm(target, storm_model, prop)), str(target.path)
    if isinstance(target, ExplicitModel):
        env = ExplicitEnv(target)
        return env, with_graph_analysis(env, parse_path_property(property_text, env.labels)), env.name
    if all(hasattr(target, a) for a in ("observe", "step", "label", "features", "actions")):
        return target, parse_path_property(property_text, tuple(target.labels)), getattr(target, "name", "")
    raise PropertyError(f"cannot simulate {type(target).__name__}: expected a model file, a SymbolicModel, an "
                        "ExplicitModel, a benchmark with a simulator or a vectorised environment")


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


def verify_statistical(target: Any, property_text: str | Property, policy: Policy,
                       options: StatisticalOptions = StatisticalOptions(), *, constants: str | None = None,
                       starts: np.ndarray | None = None, progress: Progress | None = None) -> StatisticalResult:
    """Estimate the probability of ``property_text`` under ``policy`` by simulation (deep statistical model checking).

    Args:
        target: see :func:`prepare`.
        property_text: one of the forms in :data:`rlverify.statistical.properties.SUPPORTED_FORMS`.
        policy: any :class:`~rlverify.policies.Policy`; called once per step on all active runs.
        options: the statistical method and simulation settings.
        starts: start states (default: the environment's initial states; several: uniform at random).
        progress: ``progress(done_runs, planned_runs)`` after each batch.

    Returns:
        A :class:`~rlverify.statistical.results.StatisticalResult` (a statistical guarantee).
    """
    options.validate()
    t0 = time.perf_counter()
    env, prop, model_name = prepare(target, property_text, constants=constants, actions=policy.actions,
                                    max_states=options.max_states)
    if isinstance(env, ExplicitEnv) and starts is None and len(env.initial_states()) != 1:
        raise PropertyError(f"{model_name}: the model has {len(env.initial_states())} initial states; "
                            "pass starts= to choose (the simulator does not pick among them)")
    binding = bind_policy(env, policy)
    # choices the policy names no action for are never taken: say so (over the model's states)
    table = choice_table(env.model, policy.actions) if isinstance(env, ExplicitEnv) else None
    untaken = table.untaken() if table is not None else {}
    forced_start = forced_start_message(table, prop.bound) if table is not None and starts is None else None
    t_prep = time.perf_counter() - t0
    sim = options.simulation
    eps, delta = options.epsilon, options.delta
    decisions = 0
    k = u = s = n = 0
    backend = open_backend(options.backend)
    t_backend = time.perf_counter() - t0 - t_prep
    shared = backend.share(SimulationJob(env, policy, prop, binding, starts, sim))
    tpw = options.backend.tasks_per_worker

    def run(first: int, count: int, size: int, on_task: Callable[[int], None] | None = None) -> RunOutcomes:
        """Runs ``first .. first + count - 1`` in tasks of ``size`` runs (one round of a sequential method)."""
        nonlocal decisions
        res = simulate_runs(backend, shared, first, first + count, size, on_task=on_task)
        decisions += int(res.steps.sum())
        return res

    decision = satisfied = threshold = None
    tally = _Tally()
    t1 = time.perf_counter()
    if options.method in ("okamoto", "clopper-pearson", "wilson"):
        n = options.runs if (options.runs is not None and options.method != "okamoto") else okamoto_runs(eps, delta)
        check_run_limit(n, options, backend)
        size = task_runs(backend, n, sim.batch_size, tpw)
        done = 0

        def on_task(runs: int) -> None:
            nonlocal done
            done += runs
            if progress:
                progress(done, n)

        # in rounds of a few tasks per worker: memory does not grow with the number of runs
        first = 0
        while first < n:
            count = min(size * backend.workers * tpw, n - first)
            tally.add(run(first, count, size, on_task))
            first += count
    elif options.method == "adaptive":
        n_max = okamoto_runs(eps, delta)
        check_run_limit(n_max, options, backend)
        # sequential methods proceed in rounds fixed in advance (a batch locally, a task per worker on a
        # parallel backend), read in run order: the stopping run is the same on every backend
        size = task_runs(backend, n_max, sim.batch_size, tpw)
        n = 0
        while n < n_max:
            count = min(size * backend.workers, n_max - n)
            res = run(n, count, size)
            sat = res.outcome == SATISFIED
            cum = tally.k + np.cumsum(sat)
            idx = np.arange(n + 1, n + count + 1)
            need = _adaptive_vec(cum / idx, eps, delta)
            stop = np.flatnonzero(idx >= need)
            take = int(stop[0]) + 1 if len(stop) else count
            tally.add(res, take)
            decisions -= int(res.steps[take:].sum())
            n += take
            if progress:
                progress(n, n_max)
            if len(stop):
                break
    else:  # sprt
        if options.threshold is not None and prop.threshold is not None and (
                options.threshold != prop.threshold or (prop.comparison or ">=") not in (">=", ">")):
            raise PropertyError(f"property '{prop.text}' has its own threshold ({prop.comparison} {prop.threshold:g}); "
                                f"the SPRT would test P >= {options.threshold:g} instead: drop --sprt, or write the "
                                "property as P=? [...]")
        threshold = options.threshold if options.threshold is not None else prop.threshold
        if threshold is None:
            raise PropertyError(f"property '{getattr(property_text, 'text', property_text)}': the SPRT needs a threshold: give --sprt THETA or "
                                "write the property as P>=THETA [...]")
        test = sprt(threshold, indifference=options.indifference, alpha=options.alpha, beta=options.beta)
        check_run_limit(options.max_runs, options, backend)
        size = task_runs(backend, options.max_runs, sim.batch_size, tpw)
        n = 0
        while n < options.max_runs and decision is None:
            count = min(size * backend.workers, options.max_runs - n)
            res = run(n, count, size)
            sat = res.outcome == SATISFIED
            cum = tally.k + np.cumsum(sat)
            cum_u = tally.u + np.cumsum(res.outcome == UNDECIDED)
            idx = np.arange(n + 1, n + count + 1)
            # undecided runs may go either way: accept a hypothesis only when it holds for both readings
            llr_fail = cum * test.step_success + (idx - cum) * test.step_failure  # undecided = violated
            llr_sat = (cum + cum_u) * test.step_success + (idx - cum - cum_u) * test.step_failure  # = satisfied
            h0, h1 = llr_fail <= test.accept_h0, llr_sat >= test.accept_h1
            hit = np.flatnonzero(h0 | h1)
            take = int(hit[0]) + 1 if len(hit) else count
            tally.add(res, take)
            decisions -= int(res.steps[take:].sum())
            n += take
            if len(hit):
                decision = "H0" if h0[take - 1] else "H1"
            if progress:
                progress(n, options.max_runs)
        if decision is not None:
            cmp = prop.comparison or ">="
            holds_ge = decision == "H0"
            satisfied = holds_ge if cmp in (">=", ">") else not holds_ge
    k, u, s = tally.k, tally.u, tally.s
    t_sim = time.perf_counter() - t1

    estimate = k / n
    if options.method in ("okamoto", "adaptive"):
        lo, hi = okamoto_interval(k, u, n, eps)
    elif options.method == "wilson":
        lo, hi = wilson(k, n, delta)[0], wilson(k + u, n, delta)[1]
    else:  # clopper-pearson, and the informative interval of the SPRT
        lo, hi = clopper_pearson(k, n, delta)[0], clopper_pearson(k + u, n, delta)[1]
    if options.method != "sprt" and prop.threshold is not None:  # answered from the interval at its confidence
        threshold = prop.threshold
        satisfied = threshold_verdict(prop.comparison or ">=", threshold, lo, hi)
    outcome_notes = []
    if u:  # in the result (every output shows it), not only in the log
        outcome_notes.append(f"{u:,} of {n:,} runs were still undecided after --max-steps {sim.max_steps:,} steps: the "
                             "interval counts them both ways (raise --max-steps to decide them)")
    if s:
        outcome_notes.append(f"{s:,} of {n:,} runs stalled (the policy chose an unavailable action) and count as "
                             "not satisfying the property")
    for note in outcome_notes:
        log.info("%s", note)
    if tally.h:
        log.info("%d of %d runs were decided false by graph analysis (a state from which no policy reaches the "
                 "target)", tally.h, n)
    settings = {k_: v for k_, v in asdict(options).items() if k_ not in ("simulation", "backend")}
    settings.update(asdict(sim))
    settings["backend"] = {**asdict(options.backend), "workers": backend.workers}
    return StatisticalResult(
        property=prop.text, method=options.method, estimate=estimate, interval=(lo, hi),
        # the SPRT's guarantee is its error bounds (alpha, beta); its interval is informative only
        confidence=1.0 - max(options.alpha, options.beta) if options.method == "sprt" else 1.0 - delta,
        runs=n, successes=k, undecided=u, stalled=s, hopeless=tally.h, seed=sim.seed,
        epsilon=eps if options.method in ("okamoto", "adaptive") else None, delta=delta, max_steps=sim.max_steps,
        mode=sim.mode, decisions=decisions, decision=decision, satisfied=satisfied, threshold=threshold,
        comparison=(prop.comparison or ">=") if threshold is not None else None,
        verdict=None if threshold is None else {True: "yes", False: "no", None: "undecided"}[satisfied],
        timings={"prepare": t_prep, "backend": t_backend, "simulate": t_sim, "total": time.perf_counter() - t0,
                 "decisions_per_second": decisions / t_sim if t_sim > 0 else math.inf},
        settings=settings, model=model_name, policy=getattr(policy, "name", type(policy).__name__),
        versions=versions(), untaken_choices=untaken,
        warnings=list(prop.notes) + list(getattr(getattr(env, "model", None), "notes", ())) + outcome_notes
        + ([forced_start] if forced_start else [])
        + ([untaken_message(untaken, "states of the model")] if untaken else []),
    )


@dataclass
class _Tally:
    """Counts over the runs simulated so far (per-run outcomes are not kept: memory does not grow with the runs)."""

    k: int = 0  # satisfied
    u: int = 0  # undecided after max_steps
    s: int = 0  # stalled
    h: int = 0  # decided false by graph analysis (hopeless)

    def add(self, res: RunOutcomes, take: int | None = None) -> None:
        """Count the first ``take`` runs of ``res`` (all: None)."""
        cut = slice(None, take)
        self.k += int((res.outcome[cut] == SATISFIED).sum())
        self.u += int((res.outcome[cut] == UNDECIDED).sum())
        self.s += int(res.stalled[cut].sum())
        self.h += int(res.hopeless[cut].sum())


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
