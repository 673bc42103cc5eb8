"""What every section of a report shares: the options, what is built once for all sections, and the helpers that
time an engine run, name a policy's source and run the one simulation."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rlverify.errors import OptionError
from rlverify.exact.maps import MapOptions
from rlverify.report.page import Check, Section
from rlverify.targets import Target

if TYPE_CHECKING:
    from rlverify.exact import FullMDP, PolicyChain
    from rlverify.results import ExactResult, OptimumResult


T = TypeVar("T")
#: a kind of target a section takes
K = TypeVar("K", bound="Target[Any]")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReportOptions:
    """Settings of one report.

    Attributes:
        runs, delta, seed: the simulation (a Clopper–Pearson interval at confidence ``1 - delta``).
        epsilon: the observation-perturbation budget of the robustness section (L-infinity, integer).
        explain: how many failure paths to list.
        map_vars: the two variables of the risk map (None: the first two integer features of the policy, if any).
        map_where, map_agg: the states each cell of the risk map shows (:class:`~rlverify.exact.maps.MapOptions`):
            ``"initial"`` (default: the other variables at their initial values, so that the panels differ from
            cell to cell), None (every state, aggregated with ``map_agg``: ``max``, ``min`` or ``mean``), or a filter.
        optimum: how the property is read: ``min`` (a bad event: the best policy gets Pmin, regret = value - Pmin)
            or ``max`` (a goal: Pmax, regret = Pmax - value); None (default): from the property's comparison
            (``P<=b``: min, ``P>=b``: max), else unknown: the headline then shows Pmin and Pmax without calling
            either the best, and the risk map and robustness sections read it as a bad event and say so.
        heatmap_runs_per_cell: a native environment's heat map: runs per start cell.
        horizon, domain, phi: a continuous system's abstraction (horizon None: the system's, else 3).
    """

    runs: int = 10_000
    delta: float = 0.001
    seed: int = 0
    epsilon: int = 1
    explain: int = 5
    map_vars: tuple[str, str] | None = None
    map_where: str | None = "initial"
    map_agg: str = "max"
    optimum: str | None = None
    heatmap_runs_per_cell: int = 200
    horizon: int | None = None
    domain: str = "box"
    phi: float = 0.5
    #: add the explanations of the policy (features, decision tree, critical states); off by default (slower)
    explain_policy: bool = False

    def validate(self) -> None:
        """Raise :class:`~rlverify.errors.OptionError` naming the first setting out of its range."""
        for name in ("runs", "explain"):
            if getattr(self, name) <= 0:
                raise OptionError(f"--{name} must be positive, got {getattr(self, name)}")
        if self.epsilon < 0:
            raise OptionError(f"--epsilon must be a non-negative integer, got {self.epsilon}")
        if not 0 < self.delta < 1:
            raise OptionError(f"--delta must be in (0, 1), got {self.delta}")
        if self.optimum not in (None, "min", "max"):
            raise OptionError(f"--optimum: expected min or max, got '{self.optimum}'")
        MapOptions(agg=self.map_agg).validate()


@dataclass(frozen=True)
class Shared:
    """What more than one section reads, built once before the sections run.

    Attributes:
        say: the progress callback; timings: the report's timing table (seconds per engine run), filled as they run.
        chain: the policy's stochastic chain (PRISM/JANI); exact: its value (:func:`~rlverify.exact.verify_exact`).
        mdp: the property-directed MDP (None when it is too large: ``mdp_skipped`` says why); optimum: Pmin/Pmax on it.
        slack: the exact value's numerical slack in the consistency checks (:func:`~rlverify.crosscheck.slack`).
        map_vars: the risk map's variables (None: no map); horizon: a continuous system's abstraction horizon.
    """

    say: Progress
    timings: dict[str, float]
    chain: PolicyChain | None = None
    exact: ExactResult | None = None
    mdp: FullMDP | None = None
    mdp_skipped: str | None = None
    optimum: OptimumResult | None = None
    slack: float = 0.0
    map_vars: tuple[str, str] | None = None
    horizon: int | None = None
    #: how the property is read (:func:`~rlverify.exact.maps.reading`): min, max or None (it does not say)
    reading: str | None = None


#: a section of a report: the target, the options and what is shared -> its section and its consistency checks
SectionFn = Callable[[K, ReportOptions, Shared], tuple[Section, list[Check]]]


def shown(source: str | None) -> str | None:
    """A policy's source for the page: a shipped file by its name, a user's file as given."""
    if source and "rlverify/benchmarks/data/" in source.replace("\\", "/"):
        return f"{Path(source).name} (shipped with rlverify)"
    return source


def timed(timings: dict[str, float], name: str, fn: Callable[[], T]) -> T:
    start = time.perf_counter()
    try:
        return fn()
    finally:
        timings[name] = time.perf_counter() - start


def run_plan(plan: list[SectionFn[K]], t: K, options: ReportOptions, shared: Shared) -> tuple[list[Section], list[Check]]:
    sections, checks = [], []
    for section in plan:
        s, c = section(t, options, shared)
        sections.append(s)
        checks += c
    return sections, checks


def simulation(model: Any, prop: Any, policy: Any, options: ReportOptions, shared: Shared, what: str) -> Any:
    """The report's one simulation: ``options.runs`` runs, Clopper–Pearson at ``1 - options.delta``, its seed."""
    from rlverify.statistical import (  # lazy: the statistical engine, only when a section simulates
        SimulationOptions,
        StatisticalOptions,
        verify_statistical,
    )

    shared.say(what)
    settings = StatisticalOptions(
        method="clopper-pearson", runs=options.runs, delta=options.delta, simulation=SimulationOptions(seed=options.seed)
    )
    return timed(shared.timings, "statistical", lambda: verify_statistical(model, prop, policy, settings))


def runs_text(stat: Any) -> str:
    """The runs of a simulation and how they ended when not by the property's own verdict."""
    return (
        f"{stat.runs:,} (stood still forever {stat.stuck:,}, still open after {stat.max_steps:,} steps "
        f"{stat.undecided:,}, stalled {stat.stalled:,})"
    )


#: what the risk map and robustness sections say when they read a property that does not say how it is read
ASSUMED_FAILURE = "read as a bad event because the property does not say (--optimum max for a goal)"
