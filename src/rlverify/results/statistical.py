"""Results of the statistical engine: estimates with confidence intervals, splitting, heatmaps."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from rlverify.choices import Guarantee
from rlverify.results import Result, Summary, grid_svg, outward_pair, shown, shown_pair, total_time


class _Statistical(Result):
    """What every statistical result says of its guarantee (a property: not in the JSON, which says it in words)."""

    @builtins.property
    def guarantee(self) -> Guarantee:
        """:attr:`~rlverify.choices.Guarantee.STATISTICAL`: an interval (or a test's decision) at a stated confidence."""
        return Guarantee.STATISTICAL


@dataclass(frozen=True)
class SplittingResult(_Statistical):
    """A rare-event estimate of ``P(path property)`` by importance splitting: fixed effort or RESTART (a *statistical*
    estimate).

    The guarantee is approximate: ``interval`` is a Student-t interval over ``repetitions`` independent
    repetitions of the unbiased product estimator (``interval_kind``); it covers the true value with
    probability about ``confidence`` when the repetitions' mean is close to normal. Runs still open
    after ``max_steps`` steps (``undecided``) and stalled runs count as not crossing: the estimate is
    then of the probability within ``max_steps`` (a lower bound of the property's value).

    Attributes:
        importance: how levels were measured (what was estimated: the provenance's property, model and policy).
        estimate: mean of the repetitions' products; interval: ``(low, high)`` (low clipped at 0).
        confidence: ``1 - delta``; interval_kind: how the interval was made.
        std_error: standard deviation of the repetitions' products over ``sqrt(R)``;
        relative_error: ``std_error / estimate`` (inf when the estimate is 0).
        repetitions, effort: ``R`` and runs per stage and repetition (RESTART: main trials per repetition).
        levels: the thresholds (the last stage ends at ``right``); levels_from: ``given`` or ``pilot``.
        level_probabilities: fixed effort: per stage ``(m + 1)``, the mean over repetitions of the crossing
            fraction (RESTART: empty); level_hits: fixed effort: per stage, runs that crossed (summed over
            repetitions); RESTART: per level ``j = 1..m`` the up-crossings (splits), then the target hits.
        splits: RESTART's splitting factor per level (None for fixed effort).
        repetition_estimates: each repetition's product.
        zero_repetitions: repetitions in which no run crossed some stage (their product is 0).
        decisions: steps over all estimation runs (policy rows evaluated, plus forced steps);
        pilot_decisions: the pilot's steps (not in ``decisions``).
        undecided, stalled: stage runs open after ``max_steps`` / whose policy chose an unavailable action.
        hopeless: stage runs decided false at once by graph analysis of the explicit model (they reached a
            state from which no policy can satisfy the property any more).
        seed, mode, max_steps: as for :class:`StatisticalResult`.
    """

    method: str
    estimate: float
    interval: tuple[float, float]
    confidence: float
    interval_kind: str
    std_error: float
    relative_error: float
    repetitions: int
    effort: int
    levels: tuple[float, ...]
    levels_from: str
    level_probabilities: tuple[float, ...]
    level_hits: tuple[int, ...]
    repetition_estimates: tuple[float, ...]
    zero_repetitions: int
    decisions: int
    pilot_decisions: int
    undecided: int
    stalled: int
    seed: int
    mode: str
    max_steps: int
    importance: str
    untaken_choices: dict[str, int] = field(default_factory=dict)
    splits: tuple[int, ...] | None = None
    hopeless: int = 0

    def _summary(self) -> Summary:
        """The estimate, its interval and what it rests on (repetitions, levels, open runs)."""
        rows = [
            ("relative error", shown(self.relative_error, 3)),
            ("levels", f"{len(self.levels)} ({self.levels_from})"),
            ("effort", f"{self.repetitions} repetitions x {self.effort:,} runs, {self.decisions:,} decisions"),
        ]
        if self.undecided or self.stalled:
            rows.append(
                ("not crossing", f"{self.undecided:,} undecided after {self.max_steps:,} steps, {self.stalled:,} stalled")
            )
        rows += [("seed", str(self.seed)), ("time", total_time(self))]
        guarantee = (
            f"statistical (approximate): the true value is in {shown_pair(*self.interval)} with probability about "
            f"{self.confidence:.4g} ({self.interval_kind})"
        )
        return Summary(
            f"rare-event estimate by importance splitting ({self.method})", shown(self.estimate), guarantee, tuple(rows)
        )


@dataclass(frozen=True)
class StatisticalResult(_Statistical):
    """An estimate of ``P(path property)`` from simulated runs (a *statistical* guarantee, not a bound).

    The guarantee: with probability at least ``confidence`` the true value lies in ``interval``
    (methods ``okamoto``/``adaptive``/``clopper-pearson``; ``wilson`` is approximate). Undecided
    runs (still open after ``max_steps``) widen the interval: its lower end counts them as
    violated, its upper end as satisfied; ``estimate`` counts them as violated. Stalled runs
    count as violated.

    Attributes:
        method: ``okamoto``, ``adaptive``, ``clopper-pearson``, ``wilson`` or ``sprt``.
        estimate: fraction of runs that satisfied the property.
        interval: ``(low, high)``.
        confidence: ``1 - delta``; for the SPRT ``1 - max(alpha, beta)`` (its error bounds; its
            interval is then informative only: a Clopper–Pearson interval after a sequential stop).
        runs: simulated runs; successes: runs satisfying the property.
        undecided: runs undecided after ``max_steps``; stalled: runs whose policy chose an unavailable action.
        hopeless: runs decided false at once by graph analysis of the explicit model: they reached a state
            from which no policy can satisfy the property any more (``Pmax = 0``).
        stuck: runs decided false because they would stay in their state forever (the policy surely takes an
            action that surely leads back to it): they never decide on their own; counted as violated.
        seed: the seed (same seed, same result, whatever the batch size).
        epsilon, delta: the requested precision (``epsilon`` None for interval methods with fixed runs).
        decision: SPRT only: ``"H0"`` (``p >= theta + indifference``), ``"H1"`` (``p <= theta - indifference``) or None
            (no decision within ``max_runs``).
        threshold, comparison: of a threshold property (``P>=0.9 [...]``) or the SPRT's ``theta``.
        satisfied, verdict: whether the threshold property holds — by the SPRT, or else from the
            interval at ``confidence``: ``"yes"`` (the whole interval satisfies it), ``"no"`` (none of
            it does) or ``"undecided"`` (it straddles the threshold; ``satisfied`` None).
        decisions: policy decisions made (steps over all runs).
        untaken_choices: choices of the model's decision states the policy names no action for (it
            never takes them): name -> number of states of the built model offering them.
    """

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
    comparison: str | None = None
    verdict: str | None = None
    untaken_choices: dict[str, int] = field(default_factory=dict)
    hopeless: int = 0
    stuck: int = 0

    def _summary(self) -> Summary:
        """The estimate, its interval at its confidence, the verdict and the runs it rests on."""
        rows = []
        if self.verdict is not None:
            rows.append(("satisfied", self.verdict))
        if self.decision is not None:
            rows.append(("SPRT decision", self.decision))
        rows.append(("runs", f"{self.runs:,} ({self.successes:,} satisfied, {self.decisions:,} decisions)"))
        if self.undecided or self.stalled:
            rows.append(
                ("open / stalled", f"{self.undecided:,} undecided after {self.max_steps:,} steps, {self.stalled:,} stalled")
            )
        rows += [("seed", str(self.seed)), ("time", total_time(self))]
        approximate = self.method == "wilson" or self.method == "sprt"
        guarantee = (
            f"statistical: the true value is in {shown_pair(*self.interval)} with probability "
            f"{'about' if approximate else 'at least'} {self.confidence:.4g} ({self.method})"
        )
        return Summary(
            f"statistical estimate from simulated runs ({self.mode} policy)", shown(self.estimate), guarantee, tuple(rows)
        )


@dataclass(frozen=True)
class ReturnResult(_Statistical):
    """An estimate of an episode's expected (discounted) return, ``R=? [C<=k]``, from simulated Gymnasium episodes.

    The guarantee depends on ``method``: ``hoeffding`` (the per-step reward declared to lie in ``reward_range``:
    with probability at least ``confidence`` the true value is in ``interval``, whatever the distribution; episodes
    cut by ``max_steps`` are counted at both ends of the return's range) or ``student-t`` (no range declared: an
    asymptotic interval from the central limit theorem, *not* a guarantee; cut episodes are left out and said so).

    Attributes:
        estimate: the mean return of the episodes that ended (terminated, truncated by the environment's time limit,
            or at the bound ``k``).
        interval: ``(low, high)``; confidence: ``1 - delta``.
        runs: episodes simulated; counted: those whose return is known; cut: those still open after ``max_steps``.
        truncated: episodes the environment's time limit ended before ``k`` steps (their return is summed up to
            there, as SB3's ``evaluate_policy`` does).
        reward: ``""`` (the environment's reward) or the ``info`` entry summed; discount: ``gamma`` in ``(0, 1]``;
        bound: ``k`` (None: until the episode ends); reward_range: the declared per-step range, or None.
        std: the sample standard deviation of the counted returns.
        threshold, comparison, satisfied, verdict: of a threshold property (``R>=200 [C<=500]``), read from the interval.
    """

    method: str
    estimate: float
    interval: tuple[float, float]
    confidence: float
    runs: int
    counted: int
    cut: int
    truncated: int
    reward: str
    discount: float
    bound: int | None
    reward_range: tuple[float, float] | None
    std: float
    seed: int
    max_steps: int
    mode: str
    decisions: int
    threshold: float | None = None
    comparison: str | None = None
    satisfied: bool | None = None
    verdict: str | None = None

    def _summary(self) -> Summary:
        """The mean return, its interval and what it rests on."""
        rows = []
        if self.verdict is not None:
            rows.append(("satisfied", self.verdict))
        rows.append(("episodes", f"{self.runs:,} ({self.counted:,} counted, {self.cut:,} cut by max_steps)"))
        rows += [("seed", str(self.seed)), ("time", total_time(self))]
        if self.method == "hoeffding":
            guarantee = (
                f"statistical: the true value is in {outward_pair(*self.interval)} with probability "
                f"at least {self.confidence:.4g} (Hoeffding, rewards in {list(self.reward_range or ())})"
            )
        else:
            guarantee = (
                f"approximate: {outward_pair(*self.interval)} is an asymptotic {self.confidence:.4g} "
                "interval (Student t, no reward range declared): not a guarantee"
            )
        return Summary(
            f"expected return from simulated episodes ({self.mode} policy)", f"{self.estimate:.6g}", guarantee, tuple(rows)
        )


@dataclass(frozen=True)
class HeatmapResult(_Statistical):
    """Goal and crash probability per start cell (velocity 0) of a Racetrack map, estimated by simulation.

    Every per-cell interval holds with probability ``confidence`` (a per-cell guarantee, not a
    simultaneous one over all cells).

    Attributes:
        cells: ``(M, 2)`` int64 ``(x, y)`` start cells.
        goal, crash: ``(M,)`` estimated probabilities of ``!"crashed" U "goal"`` and of crashing.
        goal_interval, crash_interval: ``(M, 2)`` intervals.
        runs: ``(M,)`` runs per cell; undecided, stalled: ``(M,)`` counts.
        stuck: ``(M,)`` counts of the runs that stood still forever (the policy surely keeps velocity 0: neither goal
            nor crash, decided at once instead of simulated to ``max_steps``); with ``undecided`` they are the runs
            that *never decide* (:attr:`never_decided`): goal + crash + never decided + stalled = the runs.
        optimal: ``(M,)`` Storm's ``Pmax=? [F "goal"]`` per cell (when computed), gap = optimal - goal;
            optimal_numerics: how Storm computed it (plain value iteration: a convergence heuristic,
            not a guaranteed bound; Storm's sound methods do not finish on Racetrack MDPs in minutes).
        grid: ``(rows, cols)`` cell codes of the map (for plotting).
        provenance: model (the benchmark), policy, timings, warnings, ...
    """

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
    stuck: np.ndarray | None = None

    KEEPS_MODEL_NAME: ClassVar[bool] = True

    @builtins.property
    def gap(self) -> np.ndarray | None:
        """``(M,)`` optimal goal probability minus the policy's estimate (None without ``optimal``)."""
        return None if self.optimal is None else self.optimal - self.goal

    @builtins.property
    def never_decided(self) -> np.ndarray:
        """``(M,)`` float64 share of the runs per cell that never decide: stood still forever (``stuck``) or still
        driving after ``max_steps`` (``undecided``); goal + crash + never_decided + stalled share = 1."""
        stuck = np.zeros_like(self.undecided) if self.stuck is None else self.stuck
        return (self.undecided + stuck) / self.runs

    def _summary(self) -> Summary:
        """The start cells' goal and crash estimates: mean, best and worst cell, runs left open."""
        rows = []
        if len(self.cells):
            best, worst = int(np.argmax(self.goal)), int(np.argmin(self.goal))
            rows += [
                (
                    "best cell",
                    f"({int(self.cells[best][0])}, {int(self.cells[best][1])}): goal {shown(float(self.goal[best]))}",
                ),
                (
                    "worst cell",
                    f"({int(self.cells[worst][0])}, {int(self.cells[worst][1])}): goal {shown(float(self.goal[worst]))}",
                ),
            ]
        stuck = 0 if self.stuck is None else int(np.sum(self.stuck))
        rows.append(
            (
                "runs",
                f"{int(np.sum(self.runs)):,} ({int(np.sum(self.undecided)) + stuck:,} never decided: "
                f"{stuck:,} stuck, {int(np.sum(self.undecided)):,} cut at max_steps; {int(np.sum(self.stalled)):,} stalled)",
            )
        )
        rows += [("noise", shown(self.noise)), ("seed", str(self.seed)), ("time", total_time(self))]
        guarantee = (
            f"statistical: each cell's interval holds with probability {self.confidence:.4g} ({self.method}; "
            "per cell, not simultaneous)"
        )
        return Summary(
            "goal and crash probability per start cell, by simulation",
            f"goal {shown(float(np.mean(self.goal)))}, crash {shown(float(np.mean(self.crash)))} (means over "
            f"{len(self.cells):,} start cells)"
            if len(self.cells)
            else "no start cell",
            guarantee,
            tuple(rows),
            self._goal_picture(),
        )

    def _goal_picture(self) -> str:
        """The goal estimate per start cell on the track (:func:`grid_svg`; row ``y = 0`` at the top, as the map
        file reads; cells not simulated blank)."""
        rows, cols = np.asarray(self.grid).shape[:2]
        goal = np.full((rows, cols), np.nan)
        for (x, y), g in zip(self.cells, self.goal, strict=True):
            goal[int(y), int(x)] = g
        return grid_svg(
            goal,
            np.arange(cols),
            np.arange(rows),
            x="x",
            y="y",
            label="goal probability per start cell (estimate)",
            high_is_bad=False,
            origin="upper",
            cell=max(3, min(14, 600 // max(cols, 1))),
        )

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """The settings, then one record per cell (``cells``)."""
        keep = ("noise", "method", "confidence", "epsilon", "seed", "max_steps", "decisions", "optimal_numerics")
        out: dict[str, Any] = {
            **{k: own[k] for k in keep},
            "cells": [
                {
                    "x": int(x),
                    "y": int(y),
                    "goal": float(g),
                    "goal_interval": [float(a), float(b)],
                    "crash": float(c),
                    "crash_interval": [float(e), float(f)],
                    "runs": int(r),
                    "undecided": int(u),
                    "stalled": int(s),
                    "stuck": int(self.stuck[i]) if self.stuck is not None else 0,
                    "never_decided": float(self.never_decided[i]),
                    **({"optimal": float(self.optimal[i])} if self.optimal is not None else {}),
                }
                for i, ((x, y), g, (a, b), c, (e, f), r, u, s) in enumerate(
                    zip(
                        self.cells,
                        self.goal,
                        self.goal_interval,
                        self.crash,
                        self.crash_interval,
                        self.runs,
                        self.undecided,
                        self.stalled,
                        strict=True,
                    )
                )
            ],
        }
        return out
