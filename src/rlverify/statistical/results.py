"""Frozen results of the statistical engine; each says which statistical guarantee it carries."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class StatisticalResult:
    """An estimate of ``P(path property)`` from simulated runs (a *statistical* guarantee, not a bound).

    The guarantee: with probability at least ``confidence`` the true value lies in ``interval``
    (methods ``okamoto``/``adaptive``/``clopper-pearson``; ``wilson`` is approximate). Undecided
    runs (still open after ``max_steps``) widen the interval: its lower end counts them as
    violated, its upper end as satisfied; ``estimate`` counts them as violated. Stalled runs
    count as violated.

    Attributes:
        property: as given.
        method: ``okamoto``, ``adaptive``, ``clopper-pearson``, ``wilson`` or ``sprt``.
        estimate: fraction of runs that satisfied the property.
        interval: ``(low, high)``.
        confidence: ``1 - delta``; for the SPRT ``1 - max(alpha, beta)`` (its error bounds; its
            interval is then informative only: a Clopper–Pearson interval after a sequential stop).
        runs: simulated runs; successes: runs satisfying the property.
        undecided: runs undecided after ``max_steps``; stalled: runs whose policy chose an unavailable action.
        seed: the seed (same seed, same result, whatever the batch size).
        epsilon, delta: the requested precision (``epsilon`` None for interval methods with fixed runs).
        decision: SPRT only: ``"H0"`` (``p >= theta + indifference``), ``"H1"`` (``p <= theta - indifference``) or None
            (no decision within ``max_runs``); satisfied: whether the threshold property holds per the test.
        decisions: policy decisions made (steps over all runs); timings: seconds per phase.
        versions: package versions.
    """

    property: str
    method: str
    estimate: float
    interval: tuple[float, float]
    confidence: float
    runs: int
    successes: int
    undecided: int
    stalled: int
    seed: int
    epsilon: float | None
    delta: float
    max_steps: int
    mode: str
    decisions: int
    decision: str | None = None
    satisfied: bool | None = None
    threshold: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    policy: str | None = None
    versions: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (keys estimate, interval, confidence, method, runs, undecided, stalled, seed, timings, ...)."""
        d = asdict(self)
        d["interval"] = list(self.interval)
        return d


@dataclass(frozen=True)
class HeatmapResult:
    """Goal and crash probability per start cell (velocity 0) of a Racetrack map, estimated by simulation.

    Every per-cell interval holds with probability ``confidence`` (a per-cell guarantee, not a
    simultaneous one over all cells).

    Attributes:
        cells: ``(M, 2)`` int64 ``(x, y)`` start cells.
        goal, crash: ``(M,)`` estimated probabilities of ``!"crashed" U "goal"`` and of crashing.
        goal_interval, crash_interval: ``(M, 2)`` intervals.
        runs: ``(M,)`` runs per cell; undecided, stalled: ``(M,)`` counts.
        optimal: ``(M,)`` Storm's ``Pmax=? [F "goal"]`` per cell (when computed), gap = optimal - goal;
            optimal_numerics: how Storm computed it (plain value iteration: a convergence heuristic,
            not a guaranteed bound; Storm's sound methods do not finish on Racetrack MDPs in minutes).
        grid: ``(rows, cols)`` cell codes of the map (for plotting).
    """

    benchmark: str
    policy: str | None
    noise: float
    cells: np.ndarray
    goal: np.ndarray
    crash: np.ndarray
    goal_interval: np.ndarray
    crash_interval: np.ndarray
    runs: np.ndarray
    undecided: np.ndarray
    stalled: np.ndarray
    grid: np.ndarray
    method: str
    confidence: float
    epsilon: float | None
    seed: int
    max_steps: int
    decisions: int
    optimal: np.ndarray | None = None
    optimal_numerics: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def gap(self) -> np.ndarray | None:
        """``(M,)`` optimal goal probability minus the policy's estimate (None without ``optimal``)."""
        return None if self.optimal is None else self.optimal - self.goal

    def to_json(self) -> dict[str, Any]:
        """Per-cell values as lists plus the settings."""
        out: dict[str, Any] = {
            "benchmark": self.benchmark, "policy": self.policy, "noise": self.noise, "method": self.method,
            "confidence": self.confidence, "epsilon": self.epsilon, "seed": self.seed, "max_steps": self.max_steps,
            "decisions": self.decisions, "timings": self.timings, "optimal_numerics": self.optimal_numerics,
            "cells": [
                {"x": int(x), "y": int(y), "goal": float(g), "goal_interval": [float(a), float(b)], "crash": float(c),
                 "crash_interval": [float(e), float(f)], "runs": int(r), "undecided": int(u), "stalled": int(s),
                 **({"optimal": float(self.optimal[i])} if self.optimal is not None else {})}
                for i, ((x, y), g, (a, b), c, (e, f), r, u, s) in enumerate(zip(
                    self.cells, self.goal, self.goal_interval, self.crash, self.crash_interval, self.runs,
                    self.undecided, self.stalled))
            ],
        }
        return out
