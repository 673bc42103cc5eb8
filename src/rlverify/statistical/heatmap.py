"""Racetrack heat maps: goal and crash probability per start cell, and the gap to Storm's optimum."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import PropertyError
from rlverify.policies.base import Policy
from rlverify.statistical.engine import SATISFIED, UNDECIDED, SimulationOptions, bind_policy, simulate
from rlverify.statistical.properties import parse_path_property
from rlverify.statistical.results import HeatmapResult
from rlverify.statistical.stats import clopper_pearson, okamoto_runs
from rlverify.statistical.verify import StatisticalOptions

log = logging.getLogger(__name__)

GOAL_PROPERTY = 'P=? [!"crashed" U "goal"]'


def heatmap(env: Any, policy: Policy, options: StatisticalOptions = StatisticalOptions(), *,
            cells: np.ndarray | None = None, optimal: bool = False, benchmark: str = "",
            progress: Callable[[int, int], None] | None = None) -> HeatmapResult:
    """Estimate goal (``!"crashed" U "goal"``) and crash probability from every start cell at velocity 0.

    Args:
        env: a :class:`~rlverify.models.racetrack.RacetrackEnv`.
        policy: the oracle (15 Racetrack features, the 9 acceleration actions).
        options: ``okamoto`` (``n = okamoto_runs(epsilon, delta)`` runs per cell, intervals
            ``p_hat +- epsilon``) or ``clopper-pearson`` (``runs`` per cell, default the Okamoto number).
        cells: ``(M, 2)`` start cells ``(x, y)``; default every non-wall, non-goal cell.
        optimal: also compute Storm's ``Pmax=? [F "goal"]`` per cell on the explicit MDP.
        progress: ``progress(done_runs, total_runs)``.

    Returns:
        A :class:`~rlverify.statistical.results.HeatmapResult` (per-cell statistical guarantees).
    """
    options.validate()
    if options.method not in ("okamoto", "clopper-pearson"):
        raise PropertyError(f"heat maps support the methods okamoto and clopper-pearson, got '{options.method}'")
    t0 = time.perf_counter()
    track = env.track
    cells = track.free_cells() if cells is None else np.asarray(cells, dtype=np.int64).reshape(-1, 2)
    starts = env.start_states(cells)
    prop = parse_path_property(GOAL_PROPERTY, tuple(env.labels))
    binding = bind_policy(env, policy)
    eps, delta = options.epsilon, options.delta
    n = options.runs if (options.method == "clopper-pearson" and options.runs) else okamoto_runs(eps, delta)
    M = len(cells)
    total = M * n
    sim: SimulationOptions = options.simulation
    done = 0

    def on_batch(count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(done, total)

    run_ids = np.arange(total, dtype=np.int64)
    res = simulate(env, policy, prop, run_ids, starts=starts, start_of_run=run_ids // n, options=sim,
                   record=("crashed",), binding=binding, on_batch=on_batch)
    t_sim = time.perf_counter() - t0
    cell_of = run_ids // n
    k = np.bincount(cell_of, weights=res.outcome == SATISFIED, minlength=M).astype(np.int64)
    c = np.bincount(cell_of, weights=res.recorded["crashed"], minlength=M).astype(np.int64)
    u = np.bincount(cell_of, weights=res.outcome == UNDECIDED, minlength=M).astype(np.int64)
    s = np.bincount(cell_of, weights=res.stalled, minlength=M).astype(np.int64)
    if options.method == "okamoto":
        gi = np.stack([np.maximum(k / n - eps, 0), np.minimum((k + u) / n + eps, 1)], axis=1)
        ci = np.stack([np.maximum(c / n - eps, 0), np.minimum((c + u) / n + eps, 1)], axis=1)
    else:
        gi = np.array([(clopper_pearson(a, n, delta)[0], clopper_pearson(a + b, n, delta)[1]) for a, b in zip(k, u)])
        ci = np.array([(clopper_pearson(a, n, delta)[0], clopper_pearson(a + b, n, delta)[1]) for a, b in zip(c, u)])
    opt = None
    timings = {"simulate": t_sim}
    if optimal:
        from rlverify.models.racetrack.explicit import pmax_goal

        t = time.perf_counter()
        opt = pmax_goal(env, cells)
        timings["optimal"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    decisions = int(res.steps.sum())
    timings["decisions_per_second"] = decisions / t_sim if t_sim > 0 else float("inf")
    return HeatmapResult(
        benchmark=benchmark or env.name, policy=getattr(policy, "name", None), noise=float(env.noise), cells=cells,
        goal=k / n, crash=c / n, goal_interval=gi, crash_interval=ci, runs=np.full(M, n, dtype=np.int64),
        undecided=u, stalled=s, grid=track.grid.copy(), method=options.method, confidence=1.0 - delta,
        epsilon=eps if options.method == "okamoto" else None, seed=sim.seed, max_steps=sim.max_steps,
        decisions=decisions, optimal=opt, timings=timings,
        optimal_numerics=None if opt is None else "Storm value iteration, relative precision 1e-6 (unsound heuristic)")


PANELS = {"goal": "goal probability (policy)", "crash": "crash probability (policy)",
          "optimal": "optimal goal probability (Storm Pmax, value iteration)", "gap": "gap: optimal - policy goal"}


def plot_heatmap(result: HeatmapResult, out: str | Path, *, panels: tuple[str, ...] | None = None,
                 title: str | None = None) -> Path:
    """Draw per-cell values as a PNG: one panel per quantity, walls in dark grey, goal cells hatched, a colour bar each.

    ``panels`` from ``goal``, ``crash``, ``optimal``, ``gap`` (default: goal and crash, plus
    optimal and gap when the result has the optimum).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    from rlverify.models.racetrack.track import GOAL, WALL

    if panels is None:
        panels = ("goal", "crash") + (("optimal", "gap") if result.optimal is not None else ())
    for p in panels:
        if p not in PANELS:
            raise PropertyError(f"unknown heat-map panel '{p}'; choose from {', '.join(PANELS)}")
        if p in ("optimal", "gap") and result.optimal is None:
            raise PropertyError(f"panel '{p}' needs the optimal values (heatmap(..., optimal=True) / --optimal)")
    H, W = result.grid.shape
    fig, axes = plt.subplots(1, len(panels), figsize=(max(4.0, W * 0.22) * len(panels) + 1, max(3.0, H * 0.22) + 1),
                             squeeze=False)
    values = {"goal": result.goal, "crash": result.crash, "optimal": result.optimal, "gap": result.gap}
    walls = np.where(result.grid == WALL, 1.0, np.nan)
    goals = result.grid == GOAL
    for ax, p in zip(axes[0], panels):
        img = np.full((H, W), np.nan)
        img[result.cells[:, 1], result.cells[:, 0]] = values[p]
        cmap = "RdYlGn" if p in ("goal", "optimal") else ("RdYlGn_r" if p == "crash" else "magma_r")
        vmin, vmax = (0.0, 1.0) if p != "gap" else (min(0.0, float(np.nanmin(img))), max(1e-9, float(np.nanmax(img))))
        im = ax.imshow(img, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
        ax.imshow(walls, cmap=ListedColormap(["#404040"]), interpolation="nearest")
        gy, gx = np.nonzero(goals)
        ax.scatter(gx, gy, marker="s", s=30, facecolors="none", edgecolors="black", linewidths=0.8)
        ax.set_title(PANELS[p], fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    conf = f"{result.confidence:.0%} confidence" + (f", ±{result.epsilon:g}" if result.epsilon else "")
    fig.suptitle(title or f"{result.benchmark} (noise {result.noise:g}; {result.runs[0]} runs/cell, {conf})", fontsize=10)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out
