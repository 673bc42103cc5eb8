"""Racetrack heat maps: goal and crash probability per start cell, the share of runs that never decide (the car
stood still forever, or was cut at ``max_steps``) and the gap to Storm's optimum — drawn as a
:class:`~rlverify.figures.MapFigure`, like the exact risk maps."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlverify.backends import Backend, open_backend
from rlverify.errors import PropertyError
from rlverify.figures import MapFigure, MapPanel, MapShade
from rlverify.models.racetrack.env import RacetrackEnv
from rlverify.models.racetrack.track import GOAL, WALL
from rlverify.policies.base import Policy
from rlverify.results import Provenance, versions
from rlverify.statistical.choices import Method
from rlverify.statistical.engine import SATISFIED, UNDECIDED, SimulationOptions, bind_policy
from rlverify.statistical.jobs import Progress, Shared, SimulationJob, simulate_runs, task_runs
from rlverify.statistical.properties import parse_path_property
from rlverify.statistical.results import HeatmapResult
from rlverify.statistical.stats import clopper_pearson, okamoto_runs
from rlverify.statistical.verify import StatisticalOptions, check_run_limit

log = logging.getLogger(__name__)

GOAL_PROPERTY = 'P=? [!"crashed" U "goal"]'


def heatmap(
    env: RacetrackEnv,
    policy: Policy,
    options: StatisticalOptions | None = None,
    *,
    cells: np.ndarray | None = None,
    optimal: bool = False,
    benchmark: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> HeatmapResult:
    """Estimate goal (``!"crashed" U "goal"``) and crash probability from every start cell at velocity 0.

    Args:
        env: a :class:`~rlverify.models.racetrack.RacetrackEnv`.
        policy: the oracle (15 Racetrack features, the 9 acceleration actions).
        options: ``okamoto`` (``n = okamoto_runs(epsilon, delta)`` runs per cell, intervals
            ``p_hat +- epsilon``; the default) or ``clopper-pearson`` (``runs`` per cell, default the Okamoto
            number); ``options.backend``: where the runs are simulated (the same arrays on every backend).
        cells: ``(M, 2)`` start cells ``(x, y)``; default every non-wall, non-goal cell.
        optimal: also compute Storm's ``Pmax=? [F "goal"]`` per cell on the explicit MDP.
        progress: ``progress(done_runs, total_runs)``.

    Returns:
        A :class:`~rlverify.statistical.results.HeatmapResult` (per-cell statistical guarantees).
    """
    options = StatisticalOptions() if options is None else options
    options.validate()
    if options.method not in (Method.OKAMOTO, Method.CLOPPER_PEARSON):
        raise PropertyError(f"heat maps support the methods okamoto and clopper-pearson, got '{options.method}'")
    t0 = time.perf_counter()
    track = env.track
    cells = track.free_cells() if cells is None else np.asarray(cells, dtype=np.int64).reshape(-1, 2)
    starts = env.start_states(cells)
    prop = parse_path_property(GOAL_PROPERTY, tuple(env.labels))
    binding = bind_policy(env, policy)
    eps, delta = options.epsilon, options.delta
    n = _runs_per_cell(options)
    M = len(cells)
    sim: SimulationOptions = options.simulation
    backend = open_backend(options.backend)
    check_run_limit(M * n, options, backend, what=f"{M:,} start cells x {n:,} runs")
    t_sim0 = time.perf_counter()
    # run i starts in cell i // n: tasks are ranges of run indices, fixed before any runs
    shared = backend.share(SimulationJob(env, policy, prop, binding, starts, sim, ("crashed",), runs_per_start=n))
    counts = _count(backend, shared, M, n, options, progress)
    t_sim = time.perf_counter() - t_sim0
    k, c, u = counts.goal, counts.crash, counts.undecided
    timings = {"backend": t_sim0 - t0, "simulate": t_sim}
    opt = _optimal(env, cells, timings) if optimal else None
    timings["total"] = time.perf_counter() - t0
    timings["decisions_per_second"] = counts.decisions / t_sim if t_sim > 0 else float("inf")
    return HeatmapResult(
        noise=float(env.noise),
        cells=cells,
        goal=k / n,
        crash=c / n,
        goal_interval=_intervals(options.method, k, u, n, eps, delta),
        crash_interval=_intervals(options.method, c, u, n, eps, delta),
        runs=np.full(M, n, dtype=np.int64),
        undecided=u,
        stalled=counts.stalled,
        grid=track.grid.copy(),
        method=options.method,
        confidence=1.0 - delta,
        epsilon=eps if options.method == Method.OKAMOTO else None,
        seed=sim.seed,
        max_steps=sim.max_steps,
        decisions=counts.decisions,
        optimal=opt,
        optimal_numerics=None if opt is None else "Storm value iteration, relative precision 1e-6 (unsound heuristic)",
        stuck=counts.stuck,
        provenance=Provenance(model=benchmark or env.name, policy=policy.name, timings=timings, versions=versions()),
    )


def _runs_per_cell(options: StatisticalOptions) -> int:
    """``runs`` for clopper-pearson when given, else Okamoto's number for ``epsilon``, ``delta``."""
    if options.method == Method.CLOPPER_PEARSON and options.runs:
        return options.runs
    return okamoto_runs(options.epsilon, options.delta)


@dataclass
class _Counts:
    """Per start cell ``(M,)`` int64: runs that reached the goal, crashed, were undecided, stalled, stood still; and
    the policy decisions of all runs."""

    goal: np.ndarray
    crash: np.ndarray
    undecided: np.ndarray
    stalled: np.ndarray
    stuck: np.ndarray
    decisions: int = 0

    @classmethod
    def zeros(cls, M: int) -> _Counts:
        """No run counted yet, over ``M`` cells."""
        goal, crash, undecided, stalled, stuck = (np.zeros(M, dtype=np.int64) for _ in range(5))
        return cls(goal, crash, undecided, stalled, stuck)


def _count(
    backend: Backend, shared: Shared, M: int, n: int, options: StatisticalOptions, progress: Progress | None
) -> _Counts:
    """Simulate the ``M * n`` runs (run ``i`` from cell ``i // n``) in rounds, counting per cell only (memory does not
    grow with the runs); ``progress(done_runs, total_runs)`` as each task finishes."""
    total = M * n
    sim = options.simulation
    tpw = options.backend.tasks_per_worker
    size = task_runs(backend, total, sim.batch_size, tpw)
    out = _Counts.zeros(M)
    done = 0

    def on_batch(count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(done, total)

    first = 0
    while first < total:
        count = min(size * backend.workers * tpw, total - first)
        res = simulate_runs(backend, shared, first, first + count, size, on_task=on_batch, record=("crashed",))
        cell_of = np.arange(first, first + count, dtype=np.int64) // n
        for acc, hit in (
            (out.goal, res.outcome == SATISFIED),
            (out.crash, res.recorded["crashed"]),
            (out.undecided, res.outcome == UNDECIDED),
            (out.stalled, res.stalled),
            (out.stuck, res.stuck),
        ):
            acc += np.bincount(cell_of[hit], minlength=M)
        out.decisions += int(res.steps.sum())
        first += count
    return out


def _intervals(method: str, hits: np.ndarray, undecided: np.ndarray, n: int, eps: float, delta: float) -> np.ndarray:
    """``(M, 2)`` per-cell intervals, the undecided runs counted both ways: ``p_hat +- eps`` (okamoto) or
    Clopper-Pearson at confidence ``1 - delta``."""
    if method == Method.OKAMOTO:
        return np.stack([np.maximum(hits / n - eps, 0), np.minimum((hits + undecided) / n + eps, 1)], axis=1)
    return np.array(
        [
            (clopper_pearson(a, n, delta)[0], clopper_pearson(a + b, n, delta)[1])
            for a, b in zip(hits.tolist(), undecided.tolist(), strict=True)
        ]
    )


def _optimal(env: RacetrackEnv, cells: np.ndarray, timings: dict[str, float]) -> np.ndarray:
    """Storm's ``Pmax=? [F "goal"]`` per start cell (its time in ``timings["optimal"]``)."""
    from rlverify.models.racetrack.explicit import pmax_goal  # lazy: scipy.sparse and Storm, only with --optimal

    t = time.perf_counter()
    opt = pmax_goal(env, cells)
    timings["optimal"] = time.perf_counter() - t
    return opt


PANELS = {
    "goal": "goal probability (policy)",
    "crash": "crash probability (policy)",
    "never": "never decided: stood still forever or cut at max steps (share)",
    "stalled": "stalled: chose an unavailable action (share)",
    "optimal": "optimal goal probability (Storm Pmax, value iteration)",
    "gap": "gap: optimal - policy goal",
}


def never_decided_share(result: HeatmapResult) -> np.ndarray:
    """``(M,)`` float64: per start cell, the share of runs that never decide the race — the car stood still forever
    (``stuck``) or was still driving after ``max_steps`` (``undecided``): neither goal nor crash
    (:attr:`~rlverify.statistical.results.HeatmapResult.never_decided`)."""
    return result.never_decided


def heatmap_figure(result: HeatmapResult, *, panels: tuple[str, ...] | None = None, title: str | None = None) -> MapFigure:
    """The heat map as a :class:`~rlverify.figures.MapFigure` (the drawing the exact risk maps use too; its
    :meth:`~rlverify.figures.MapFigure.render` is a matplotlib figure).

    ``panels`` from ``goal``, ``crash``, ``never`` (:func:`never_decided_share`), ``stalled``, ``optimal``, ``gap``
    (default: goal, crash and never decided — the three shares of every cell's runs, which add up to 1 — plus stalled
    when a run stalled, and optimal and gap when the result has the optimum). Cells are ``(x, y)`` of the track, row
    ``y = 0`` at the top as the map file reads; walls, goal cells and cells not simulated are shaded and named in the
    legend. The title names the benchmark and the policy as the result names them (:class:`Provenance`).
    """
    panels = _checked_panels(result, panels)
    H, W = result.grid.shape
    values = {
        "goal": result.goal,
        "crash": result.crash,
        "never": never_decided_share(result),
        "stalled": result.stalled / result.runs,
        "optimal": result.optimal,
        "gap": result.gap,
    }
    style = {
        "goal": ("RdYlGn", 0.0, 1.0, "P(goal before a crash)"),
        "crash": ("RdYlGn_r", 0.0, 1.0, "P(crash)"),
        "never": ("Purples", 0.0, 1.0, "share of the runs (goal + crash + this = 1)"),
        "stalled": ("Greys", 0.0, 1.0, "share of the runs"),
        "optimal": ("RdYlGn", 0.0, 1.0, "Pmax(goal)"),
        "gap": ("magma_r", 0.0, None, "Pmax(goal) - estimate"),
    }
    out = []
    for p in panels:
        img = np.full((H, W), np.nan)
        img[result.cells[:, 1], result.cells[:, 0]] = values[p]
        cmap, lo, hi, label = style[p]
        out.append(MapPanel(PANELS[p], img, cmap, lo, hi, label))
    simulated = np.zeros((H, W), dtype=bool)
    simulated[result.cells[:, 1], result.cells[:, 0]] = True
    walls, goals = result.grid == WALL, result.grid == GOAL
    shades = (
        MapShade(walls, "wall", "#404040"),
        MapShade(goals, "goal cell (not a start)", "#d9f0d3", "xx"),
        MapShade(~(simulated | walls | goals), "not simulated", "#e0e0e0", ".."),
    )
    conf = f"{result.confidence:.1%} confidence" + (f", ±{result.epsilon:g}" if result.epsilon else "")
    note = _figure_note(result, conf)
    return MapFigure(
        panels=tuple(out),
        x_label="x",
        y_label="y",
        x_values=np.arange(W),
        y_values=np.arange(H),
        title=title
        or f"{result.model} (noise {result.noise:g}) — policy {result.policy}: {result.runs[0]} runs per start cell, {conf}",
        shades=shades,
        origin="upper",
        note=note,
    )


def _checked_panels(result: HeatmapResult, panels: tuple[str, ...] | None) -> tuple[str, ...]:
    """``panels``, each known and computed (default: goal, crash, never decided, stalled when a run stalled, optimal
    and gap with the optimum)."""
    if panels is None:
        panels = ("goal", "crash", "never") + (("stalled",) if result.stalled.any() else ())
        panels += ("optimal", "gap") if result.optimal is not None else ()
    for p in panels:
        if p not in PANELS:
            raise PropertyError(f"unknown heat-map panel '{p}'; choose from {', '.join(PANELS)}")
        if p in ("optimal", "gap") and result.optimal is None:
            raise PropertyError(f"panel '{p}' needs the optimal values (heatmap(..., optimal=True) / --optimal)")
    return panels


def _figure_note(result: HeatmapResult, conf: str) -> str:
    """The line under the legend: the runs' outcomes in numbers."""
    stuck = 0 if result.stuck is None else int(result.stuck.sum())
    total = int(result.runs.sum())
    return (
        f"start cells at velocity 0; per-cell intervals at {conf}; of {total:,} runs, "
        f"{int(np.rint(result.goal * result.runs).sum()):,} reached the goal, "
        f"{int(np.rint(result.crash * result.runs).sum()):,} crashed, {stuck:,} stood still forever, "
        f"{int(result.undecided.sum()):,} were still driving after {result.max_steps:,} steps"
        + (f", {int(result.stalled.sum()):,} stalled" if result.stalled.any() else "")
    )


def plot_heatmap(
    result: HeatmapResult, out: str | Path, *, panels: tuple[str, ...] | None = None, title: str | None = None
) -> Path:
    """Write the heat map (:func:`heatmap_figure`) as a PNG: one panel per quantity, each with axes and a
    colour bar; walls, goal cells and unsimulated cells shaded and explained in the legend."""
    return heatmap_figure(result, panels=panels, title=title).draw(out)
