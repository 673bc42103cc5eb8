"""Heat maps over initial conditions of a Gymnasium environment whose state can be set (classic control, MuJoCo):
the probability of a path property per cell of a grid of start values of one or two state coordinates (e.g.
CartPole's failure probability over its pole angle and angular velocity, as in Gros et al.'s heat maps).

Episode ``i`` of cell ``c`` is a run of the episode simulator (:mod:`rlverify.statistical.episodes`) with the global
run index ``c * STRIDE + i``: it is reset with the seed that index gives (from ``--seed``, ``c`` and ``i`` alone),
then the grid's coordinates are set to the cell's values (the other coordinates stay as the seeded reset drew them)
and the observation is recomputed by the environment (:func:`rlverify.models.gym_vector.set_start_states`).

How the start state reaches the episode loop without a hook in it: the cells run as a :class:`StartedSimulator`
(a :class:`GymSimulator` whose copies :func:`~rlverify.models.gym_vector.open_vector` wraps in a
:class:`~rlverify.models.gym_vector.StartedVector`). The loop resets a slot with its episode's seed; the wrapper looks
that seed up in the task's table (:class:`StartTable`, loaded by :func:`simulate_cells` before it simulates) and sets
the cell's state. Every episode is checked to have been started so (``applied``), so none runs from a drawn state.
"""

from __future__ import annotations

import builtins
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rlverify.backends import Backend, chunks, open_backend
from rlverify.choices import Guarantee
from rlverify.errors import ModelError, OptionError, PropertyError
from rlverify.figures import MapFigure, MapPanel
from rlverify.models.gym_simulator import GymSimulator
from rlverify.models.gym_vector import Coordinate, StartedSimulator, StartTable, StateLayout, state_layout_of
from rlverify.models.properties import Property
from rlverify.policies.base import Policy
from rlverify.results import Provenance, Result, Summary, grid_svg, shown, total_time, versions
from rlverify.statistical.choices import Method
from rlverify.statistical.engine import SATISFIED, UNDECIDED, SimulationOptions, bind_policy, simulate
from rlverify.statistical.episodes import episode_seeds
from rlverify.statistical.jobs import Progress, Shared, task_runs
from rlverify.statistical.outcomes import RunOutcomes
from rlverify.statistical.properties import PathProperty
from rlverify.statistical.simulated import prepare
from rlverify.statistical.stats import clopper_pearson, okamoto_runs
from rlverify.statistical.step import Binding
from rlverify.statistical.verify import StatisticalOptions, check_run_limit, okamoto_interval

__all__ = [
    "MAX_CELLS",
    "STRIDE",
    "GridAxis",
    "GymHeatmapResult",
    "gym_heatmap",
    "gym_heatmap_figure",
    "parse_axes",
    "plot_gym_heatmap",
]

#: episode ``i`` of cell ``c`` is the run ``c * STRIDE + i`` (its seeds depend on ``--seed``, ``c`` and ``i`` only)
STRIDE = 2**32
#: the most cells of one grid (the per-cell arrays, the figure and the JSON grow with them)
MAX_CELLS = 250_000
#: the most grid coordinates (a heat map is a picture: one or two axes)
MAX_AXES = 2


@dataclass(frozen=True)
class GridAxis:
    """One axis of the grid: the state coordinate ``name`` (its ``unit``; ``index``: its position in the state
    vector) and the start ``values`` of its cells, in order (``low`` to ``high``, ``count`` evenly spaced, ends
    included)."""

    name: str
    unit: str
    index: int
    values: tuple[float, ...]

    @builtins.property
    def shown(self) -> str:
        """``theta (rad)``."""
        return Coordinate(self.name, self.unit).shown


def parse_axes(text: str | Sequence[str], layout: StateLayout, *, option: str = "--axes") -> tuple[GridAxis, ...]:
    """``"theta=-0.2:0.2:9,theta_dot=-1:1:9"`` (``NAME=LOW:HIGH:COUNT``, one or two, in the coordinate's unit) as
    grid axes over ``layout``'s coordinates: ``COUNT`` values from ``LOW`` to ``HIGH``, both included (``COUNT`` 1:
    ``LOW`` alone, ``HIGH`` must equal it).

    Raises:
        OptionError: a malformed axis, a name that is not a coordinate (naming them), a coordinate given twice, a
            bound that is not a finite number, ``LOW > HIGH``, a count that is not a positive whole number, no axis
            or more than two, or more than :data:`MAX_CELLS` cells.
    """
    parts = [p.strip() for p in (text.split(",") if isinstance(text, str) else list(text))]
    parts = [p for p in parts if p]
    if not parts:
        raise OptionError(f"{option}: give one or two axes NAME=LOW:HIGH:COUNT, e.g. theta=-0.2:0.2:9,theta_dot=-1:1:9")
    if len(parts) > MAX_AXES:
        raise OptionError(f"{option}: {len(parts)} axes given; a heat map has one or two (NAME=LOW:HIGH:COUNT,...)")
    axes = tuple(_axis(p, layout, option) for p in parts)
    if len({a.name for a in axes}) != len(axes):
        raise OptionError(f"{option}: the coordinate {axes[0].name} is given twice")
    cells = math.prod(len(a.values) for a in axes)
    if cells > MAX_CELLS:
        raise OptionError(
            f"{option}: {' x '.join(str(len(a.values)) for a in axes)} = {cells:,} cells, more than the guard of "
            f"{MAX_CELLS:,} (each cell is simulated --runs times); choose fewer values per axis"
        )
    return axes


def _axis(part: str, layout: StateLayout, option: str) -> GridAxis:
    name, sep, spec = part.partition("=")
    pieces = spec.split(":")
    if not sep or not name.strip() or len(pieces) != 3:
        raise OptionError(f"{option} {part!r}: expected NAME=LOW:HIGH:COUNT, e.g. theta=-0.2:0.2:9")
    name = name.strip()
    index = layout.index(name, option=option)
    try:
        low, high = float(pieces[0]), float(pieces[1])
    except ValueError:
        raise OptionError(f"{option} {part!r}: LOW and HIGH must be numbers") from None
    if not (math.isfinite(low) and math.isfinite(high)):
        raise OptionError(f"{option} {part!r}: LOW and HIGH must be finite numbers")
    count_text = pieces[2].strip()
    if not count_text.isdigit() or int(count_text) == 0:
        raise OptionError(f"{option} {part!r}: COUNT must be a positive whole number (the grid would have 0 cells)")
    count = int(count_text)
    if count > MAX_CELLS:
        raise OptionError(f"{option} {part!r}: {count:,} values, more than the guard of {MAX_CELLS:,} cells")
    if low > high:
        raise OptionError(f"{option} {part!r}: LOW {low:g} is above HIGH {high:g}")
    if count == 1 and low != high:
        raise OptionError(f"{option} {part!r}: one value: give LOW = HIGH (e.g. {name}={low:g}:{low:g}:1)")
    values = tuple(float(v) for v in np.linspace(low, high, count))
    return GridAxis(name, layout.coordinates[index].unit, index, values)


@dataclass(frozen=True)
class GymHeatmapResult(Result):
    """The probability of a path property per cell of a grid of start states of a Gymnasium environment, estimated
    by simulation (a *statistical* guarantee per cell, not a simultaneous one over the cells).

    Cell ``c`` is ``itertools.product`` of the axes' values in order (the last axis fastest): its start values are
    ``starts[c]``. Each cell's interval holds with probability ``confidence``; undecided episodes (truncated, or open
    after ``max_steps``) widen it (counted violated at its lower end, satisfied at its upper end) and count as
    violated in ``estimate``.

    Attributes:
        axes: the grid's axes (:class:`GridAxis`); starts: ``(M, k)`` float64 start values per cell (axis order).
        estimate: ``(M,)`` float64 share of a cell's episodes that satisfied the property; interval: ``(M, 2)``.
        runs, satisfied, undecided: ``(M,)`` int64 episodes per cell, those satisfying, those undecided.
        method: ``clopper-pearson`` or ``okamoto``; confidence: ``1 - delta``; epsilon: Okamoto's half-width.
        seed, mode, max_steps: of the simulation; decisions: policy decisions over all episodes.
    """

    axes: tuple[GridAxis, ...]
    starts: np.ndarray
    estimate: np.ndarray
    interval: np.ndarray
    runs: np.ndarray
    satisfied: np.ndarray
    undecided: np.ndarray
    method: str
    confidence: float
    epsilon: float | None
    seed: int
    mode: str
    max_steps: int
    decisions: int

    KEEPS_MODEL_NAME: ClassVar[bool] = False

    @builtins.property
    def guarantee(self) -> Guarantee:
        """:attr:`~rlverify.choices.Guarantee.STATISTICAL`: per-cell intervals at a stated confidence."""
        return Guarantee.STATISTICAL

    @builtins.property
    def shape(self) -> tuple[int, ...]:
        """The grid's shape: values per axis, in axis order."""
        return tuple(len(a.values) for a in self.axes)

    def grid(self, values: np.ndarray) -> np.ndarray:
        """``(M,)`` per-cell values as an image ``(H, W)``: columns the first axis, rows the second (one row for one
        axis)."""
        v = np.asarray(values, dtype=np.float64).reshape(self.shape)
        return v.T if v.ndim == 2 else v[None, :]

    def _summary(self) -> Summary:
        """The mean, the lowest and highest cell, the runs."""
        lo, hi = int(np.argmin(self.estimate)), int(np.argmax(self.estimate))

        def cell(c: int) -> str:
            return ", ".join(f"{a.name}={self.starts[c][j]:g}" for j, a in enumerate(self.axes))

        width = self.interval[:, 1] - self.interval[:, 0]
        rows = (
            (
                "grid",
                " x ".join(f"{a.shown}: {len(a.values)} values in [{a.values[0]:g}, {a.values[-1]:g}]" for a in self.axes),
            ),
            ("lowest cell", f"{cell(lo)}: {shown(float(self.estimate[lo]))}"),
            ("highest cell", f"{cell(hi)}: {shown(float(self.estimate[hi]))}"),
            (
                "runs",
                f"{int(self.runs[0]):,} per cell, {int(self.runs.sum()):,} in all ({int(self.undecided.sum()):,} undecided)",
            ),
            ("interval width", f"at most {shown(float(width.max()), 3)} ({self.method}, {self.confidence:.4g} per cell)"),
            ("seed", str(self.seed)),
            ("time", total_time(self)),
        )
        a = self.axes
        picture = grid_svg(
            self.grid(self.estimate),
            np.asarray(a[0].values),
            np.asarray(a[1].values if len(a) > 1 else (0.0,)),
            x=a[0].name,
            y=a[1].name if len(a) > 1 else "",
            label=self.property,
            high_is_bad=True,
        )
        return Summary(
            "probability per start state, by simulation",
            f"{shown(float(np.mean(self.estimate)))} (mean over {len(self.estimate):,} cells)",
            f"statistical: each cell's interval holds with probability {self.confidence:.4g} (per cell, not simultaneous)",
            rows,
            picture,
        )


@dataclass(frozen=True)
class CellJob:
    """What every task of a heat map needs (shipped to each worker once): the started simulator, the policy, the
    property, the binding, the simulation options and the episodes per cell."""

    sim: StartedSimulator
    policy: Policy
    prop: PathProperty
    binding: Binding
    options: SimulationOptions
    runs: int


def cell_run_ids(first: int, stop: int, runs: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``first .. stop - 1`` (cell-major, ``runs`` per cell) as ``(cells, run ids)`` ``(N,)`` int64: the
    episode ``i`` of cell ``c`` is run ``c * STRIDE + i``."""
    pos = np.arange(first, stop, dtype=np.int64)
    cells = pos // runs
    return cells, cells * STRIDE + pos % runs


def simulate_cells(job: CellJob, first: int, stop: int) -> RunOutcomes:
    """A task: episodes ``first .. stop - 1`` of the grid (cell-major); loads their starts, then simulates them.

    Raises:
        ModelError: an episode was not started from its cell's state (an internal check), or the environment's own.
    """
    cells, ids = cell_run_ids(first, stop, job.runs)
    table = job.sim.starts
    assert table is not None  # (gym_heatmap makes it)
    table.load(episode_seeds(job.options.seed, ids), cells)
    out = simulate(job.sim, job.policy, job.prop, ids, options=job.options, binding=job.binding)
    if table.applied != len(ids):
        raise ModelError(
            f"{job.sim.name}: {table.applied:,} of {len(ids):,} episodes were started from their cell's state; "
            "the copies reset episodes in a way the heat map does not know"
        )
    return out


def gym_heatmap(
    sim: GymSimulator,
    policy: Policy,
    prop: str | Property | PathProperty,
    axes: str | Sequence[str],
    options: StatisticalOptions | None = None,
    *,
    progress: Progress | None = None,
) -> GymHeatmapResult:
    """Estimate ``prop`` per cell of a grid of start states of ``sim`` (see the module docstring).

    Args:
        sim: a Gymnasium environment whose state can be set (classic control, MuJoCo; copies in this process).
        policy: the oracle, over ``sim``'s observation features and actions.
        prop: the path property over the episodes' labels (``P=? [F<=200 "terminated"]``).
        axes: ``"theta=-0.2:0.2:9,theta_dot=-1:1:9"`` or ``["theta=-0.2:0.2:9", ...]`` (:func:`parse_axes`).
        options: ``runs`` per cell with Clopper-Pearson intervals, or ``okamoto`` (``okamoto_runs(epsilon, delta)``
            per cell, ``+- epsilon``); the simulation's seed, mode, max_steps; the backend.
        progress: ``progress(done_episodes, total_episodes)`` as tasks finish.

    Returns:
        A :class:`GymHeatmapResult` (per-cell statistical guarantees).

    Raises:
        ModelError: an environment whose state cannot be set; OptionError: bad axes, async copies;
        PropertyError: a method other than okamoto and clopper-pearson; StatisticsError: past ``run_limit``.
    """
    options = StatisticalOptions() if options is None else options
    options.validate()
    t0 = time.perf_counter()
    if not isinstance(sim, GymSimulator):
        raise OptionError(f"{getattr(sim, 'name', type(sim).__name__)}: heat maps over start states take a gym:ID environment")
    if options.method not in (Method.OKAMOTO, Method.CLOPPER_PEARSON):
        raise PropertyError(f"heat maps support the methods okamoto and clopper-pearson, got '{options.method}'")
    if str(sim.vectorization) == "async":
        raise OptionError("--vectorization async: start states are set in copies stepped in this process; use sync or auto")
    layout = state_layout_of(sim)
    grid = parse_axes(axes, layout)
    starts = np.array(list(itertools.product(*(a.values for a in grid))), dtype=np.float64).reshape(-1, len(grid))
    n = (
        options.runs
        if options.method == Method.CLOPPER_PEARSON and options.runs
        else okamoto_runs(options.epsilon, options.delta)
    )
    M = len(starts)
    backend = open_backend(options.backend)
    check_run_limit(M * n, options, backend, what=f"{M:,} cells x {n:,} runs")
    env, path, name = prepare(sim, prop, actions=policy.actions)
    assert isinstance(env, GymSimulator)
    started = _started(env, StartTable(tuple(a.index for a in grid), starts))
    binding = bind_policy(started, policy)
    shared = backend.share(CellJob(started, policy, path, binding, options.simulation, n))
    t1 = time.perf_counter()
    counts = _count(backend, shared, M, n, options, progress)
    t_sim = time.perf_counter() - t1
    k, u = counts["satisfied"], counts["undecided"]
    interval = _intervals(options, k, u, n)
    timings = {"prepare": t1 - t0, "simulate": t_sim, "total": time.perf_counter() - t0}
    timings["decisions_per_second"] = counts["decisions"] / t_sim if t_sim > 0 else math.inf
    sim_opts = options.simulation
    return GymHeatmapResult(
        axes=grid,
        starts=starts,
        estimate=k / n,
        interval=interval,
        runs=np.full(M, n, dtype=np.int64),
        satisfied=k,
        undecided=u,
        method=str(options.method),
        confidence=1.0 - options.delta,
        epsilon=options.epsilon if options.method == Method.OKAMOTO else None,
        seed=int(sim_opts.seed),
        mode=str(sim_opts.mode),
        max_steps=int(sim_opts.max_steps),
        decisions=int(counts["decisions"]),
        provenance=Provenance(
            model=name,
            property=path.text,
            policy=getattr(policy, "name", type(policy).__name__),
            settings={
                "axes": ",".join(f"{a.name}={a.values[0]!r}:{a.values[-1]!r}:{len(a.values)}" for a in grid),
                "runs_per_cell": n,
                "method": str(options.method),
                "delta": options.delta,
                "epsilon": options.epsilon,
                "seed": int(sim_opts.seed),
                "mode": str(sim_opts.mode),
                "max_steps": int(sim_opts.max_steps),
                "backend": str(backend.kind),
                "workers": backend.workers,
                "episode_seeds": f"cell c's episode i: run index c * {STRIDE} + i, seeded from --seed and that index",
            },
            timings=timings,
            versions=versions(),
            warnings=list(path.notes) + _warnings(u, n, sim_opts.max_steps),
        ),
    )


def _started(env: GymSimulator, table: StartTable) -> StartedSimulator:
    """``env`` as a :class:`StartedSimulator` whose episodes start as ``table`` says (every other field the same)."""
    same = {f.name: getattr(env, f.name) for f in fields(GymSimulator) if f.init and f.name != "_compiled"}
    return StartedSimulator(**same, starts=table)


def _count(
    backend: Backend, shared: Shared, M: int, n: int, options: StatisticalOptions, progress: Progress | None
) -> dict[str, Any]:
    """Simulate the ``M * n`` episodes in tasks fixed before any runs, counting per cell only (memory does not grow
    with the episodes)."""
    total = M * n
    size = task_runs(backend, total, options.simulation.batch_size, options.backend.tasks_per_worker)
    satisfied, undecided = np.zeros(M, dtype=np.int64), np.zeros(M, dtype=np.int64)
    decisions = 0
    done = 0

    def on_result(i: int, _: object) -> None:
        nonlocal done
        done += tasks[i][1] - tasks[i][0]
        if progress is not None:
            progress(done, total)

    per_round = size * max(1, backend.workers) * options.backend.tasks_per_worker
    for first in range(0, total, per_round):
        tasks = chunks(first, min(total, first + per_round), size)
        parts = backend.map(simulate_cells, shared, tasks, on_result=on_result)
        for (a, b), res in zip(tasks, parts, strict=True):
            cells = np.arange(a, b, dtype=np.int64) // n
            satisfied += np.bincount(cells[res.outcome == SATISFIED], minlength=M)
            undecided += np.bincount(cells[res.outcome == UNDECIDED], minlength=M)
            decisions += int(res.steps.sum())
    return {"satisfied": satisfied, "undecided": undecided, "decisions": decisions}


def _intervals(options: StatisticalOptions, k: np.ndarray, u: np.ndarray, n: int) -> np.ndarray:
    """``(M, 2)`` per-cell intervals, the undecided episodes counted both ways."""
    if options.method == Method.OKAMOTO:
        pairs = [okamoto_interval(a, b, n, options.epsilon) for a, b in zip(k.tolist(), u.tolist(), strict=True)]
    else:
        pairs = [
            (clopper_pearson(a, n, options.delta)[0], clopper_pearson(a + b, n, options.delta)[1])
            for a, b in zip(k.tolist(), u.tolist(), strict=True)
        ]
    return np.array(pairs, dtype=np.float64).reshape(-1, 2)


def _warnings(undecided: np.ndarray, n: int, max_steps: int) -> list[str]:
    total = int(undecided.sum())
    if not total:
        return []
    worst = int(undecided.max())
    return [
        f"{total:,} episodes were undecided (truncated, or open after {max_steps:,} steps): they widen their cells' "
        f"intervals (up to {worst:,} of {n:,} in one cell)"
    ]


def gym_heatmap_figure(result: GymHeatmapResult, *, title: str | None = None) -> MapFigure:
    """The heat map as a :class:`~rlverify.figures.MapFigure`: the estimate per cell (colour bar: the property),
    and the share of undecided episodes when there are any; axes named with their units; the title names the runs
    per cell and the interval width."""
    a = result.axes
    width = result.interval[:, 1] - result.interval[:, 0]
    panels = [MapPanel(f"estimate of {result.property}", result.grid(result.estimate), "RdYlGn_r", 0.0, 1.0, result.property)]
    if result.undecided.any():
        share = result.undecided / result.runs
        panels.append(
            MapPanel(
                "undecided (truncated or open at max steps)", result.grid(share), "Purples", 0.0, 1.0, "share of the episodes"
            )
        )
    conf = f"{result.confidence:.1%}"
    kind = f"±{result.epsilon:g} (Okamoto)" if result.epsilon is not None else "Clopper-Pearson"
    return MapFigure(
        panels=tuple(panels),
        x_label=a[0].shown,
        y_label=a[1].shown if len(a) > 1 else "",
        x_values=np.asarray(a[0].values),
        y_values=np.asarray(a[1].values if len(a) > 1 else (0.0,)),
        title=title
        or f"{result.model} — policy {result.policy}\n{int(result.runs[0]):,} runs per cell, {conf} {kind} intervals, "
        f"width ≤ {float(width.max()):.3g}",
        origin="lower",
        note=f"seed {result.seed}; the other state coordinates as the seeded reset draws them; intervals per cell",
    )


def plot_gym_heatmap(result: GymHeatmapResult, out: str | Path, *, force: bool = False) -> Path:
    """Write :func:`gym_heatmap_figure` as a PNG (atomically; an existing file only with ``force``)."""
    return gym_heatmap_figure(result).draw(out, force=force, what="--out")
