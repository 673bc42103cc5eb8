"""Simulation as backend tasks: the job shipped to every worker once, ranges of runs as tasks (their outcomes depend only
on the seed and the run indices), and rounds of them put back together in run order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from rlverify.backends import Backend, chunks
from rlverify.models.environment import VectorEnv
from rlverify.policies.base import Policy
from rlverify.statistical.engine import RunOutcomes, SimulationOptions, simulate
from rlverify.statistical.properties import PathProperty
from rlverify.statistical.step import Binding

__all__ = ["Progress", "Shared", "SimulationJob", "concat_outcomes", "simulate_range", "simulate_runs", "task_runs"]


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

    env: VectorEnv
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
        returns=None if any(p.returns is None for p in parts) else np.concatenate([p.returns for p in parts]),
    )


def task_runs(backend: Backend, planned: int, batch_size: int, tasks_per_worker: int) -> int:
    """Runs per task: one batch locally; on a parallel backend about ``tasks_per_worker`` tasks per worker for
    ``planned`` runs (at most a batch each). Results never depend on it (counter-based random numbers)."""
    if backend.workers <= 1:
        return batch_size
    return max(1, min(batch_size, -(-planned // (backend.workers * tasks_per_worker))))


def simulate_runs(
    backend: Backend,
    shared: Shared,
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
#: a :class:`SimulationJob` as the backend shares it with its workers (itself locally, a Ray object reference)
Shared: TypeAlias = Any
