"""The report's sections on a vectorised environment (a simulation and the per-start-cell heat map with Storm's
optimum) and on a continuous system (the abstraction's sound bound and a simulation from random starts)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, cast

import numpy as np

from rlverify.report.common import ReportOptions, Shared, run_plan, runs_text, shown, simulation, timed
from rlverify.report.page import Check, Section, fmt, to_png
from rlverify.targets import EnvironmentTarget, SystemTarget

if TYPE_CHECKING:
    from rlverify.models.racetrack import RacetrackEnv

#: the heat map's optimum comes from Storm's value iteration (a convergence heuristic): compared with this slack
OPTIMUM_SLACK = 1e-3


def environment_sections(t: EnvironmentTarget, options: ReportOptions, shared: Shared) -> tuple[list[Section], list[Check]]:
    return run_plan([_native_statistical, _heatmap], t, options, shared)


def _native_statistical(t: EnvironmentTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    prop, policy = t.property, t.policy
    assert prop is not None and policy is not None
    stat = simulation(t.model, prop, policy, options, shared, "simulation")
    a, b = stat.interval
    return Section(
        "Statistical estimate (simulation from the start line)",
        rows=[
            ("estimate", fmt(stat.estimate)),
            ("interval", f"[{fmt(a)}, {fmt(b)}] at {stat.confidence:.1%}"),
            ("runs", runs_text(stat)),
        ],
        data={"statistical": stat.to_json()},
    ), []


def _heatmap(t: EnvironmentTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    from rlverify.statistical import clopper_pearson_lower  # lazy: the statistical engine, only for an environment
    from rlverify.statistical.engine import SimulationOptions  # lazy: the statistical engine, only for an environment
    from rlverify.statistical.heatmap import heatmap, plot_heatmap  # lazy: the statistical engine, only for an environment
    from rlverify.statistical.verify import StatisticalOptions  # lazy: the statistical engine, only for an environment

    assert t.benchmark is not None and t.policy is not None
    policy, bench = t.policy, t.benchmark
    env = cast("RacetrackEnv", t.model)  # the native benchmarks are Racetrack's
    shared.say("heat map: every start cell, with Storm's optimum")
    hm = timed(
        shared.timings,
        "heatmap",
        lambda: heatmap(
            env,
            policy,
            StatisticalOptions(
                method="clopper-pearson",
                runs=options.heatmap_runs_per_cell,
                delta=options.delta,
                simulation=SimulationOptions(seed=options.seed),
            ),
            optimal=True,
            benchmark=bench.id,
        ),
    )
    hm = t.stamp(hm).with_provenance(policy=shown(t.policy_source))
    png = to_png(lambda p: plot_heatmap(hm, p))
    optimal, gap = hm.optimal, hm.gap
    never = hm.never_decided
    assert optimal is not None and gap is not None  # asked for (optimal=True)
    # one check over M cells: each cell's lower end at delta / M (Bonferroni), so that a false alarm has
    # probability <= delta overall
    low = clopper_pearson_lower(np.rint(hm.goal * hm.runs), hm.runs, options.delta / max(1, len(hm.cells)))
    over = low - OPTIMUM_SLACK > optimal
    first = int(np.argmax(over))
    return Section(
        "Per start cell: goal and crash probability, Storm's optimum, the gap",
        rows=[
            ("cells", f"{len(hm.cells):,} x {int(hm.runs[0]):,} runs"),
            ("mean goal / crash / never decided", f"{hm.goal.mean():.4f} / {hm.crash.mean():.4f} / {never.mean():.4f}"),
            (
                "never decided",
                f"{int((never == 1).sum())} of {len(hm.cells)} start cells never decide a single run (the car stands "
                f"still forever or is still driving after {hm.max_steps:,} steps); goal + crash + never decided = 1 "
                "per cell",
            ),
            ("mean optimum / max gap", f"{optimal.mean():.4f} / {gap.max():.4f}"),
        ],
        images=[("goal, crash, never decided, optimum and gap per start cell", png)],
        data={"never_decided": f"{int((never == 1).sum())} of {len(hm.cells)}", "heatmap": hm.to_json()},
    ), [
        Check(
            f"each cell's goal estimate (lower end at delta/{len(hm.cells)} per cell) at or below Storm's "
            f"optimum (+{OPTIMUM_SLACK:g})",
            not over.any(),
            f"{int(over.sum())} of {len(hm.cells)} cells above the optimum"
            + (
                f" (first: cell {hm.cells[first].tolist()}, lower end {low[first]:.4f} > optimum {optimal[first]:.4f})"
                if over.any()
                else ""
            ),
        )
    ]


def system_shared(t: SystemTarget, options: ReportOptions, shared: Shared) -> Shared:
    horizon = options.horizon or int(getattr(t.model, "horizon", 0) or 3)
    return replace(shared, horizon=horizon)


def system_sections(t: SystemTarget, report: ReportOptions, shared: Shared) -> tuple[list[Section], list[Check]]:
    """The abstraction's sound bound and a simulation from uniform random starts (two sections)."""
    from rlverify.abstraction import AbstractionOptions, verify_abstraction  # lazy: the abstraction engine, only for a system
    from rlverify.abstraction.plots import plot_result  # lazy: the abstraction engine, only for a system
    from rlverify.models.continuous import unsafe_property  # lazy: the abstraction engine, only for a system

    policy, system = t.policy, t.model
    assert policy is not None
    timings, say = shared.timings, shared.say
    horizon = shared.horizon or 3
    options = AbstractionOptions(horizon=horizon, domain=report.domain, phi=report.phi, seed=report.seed)
    say("abstraction: sound upper bound")
    bound = timed(timings, "abstraction", lambda: verify_abstraction(system, policy, options))
    images = []
    if len(bound.variables) == 2:
        images.append(("initial region: parts by bound and by action probability", to_png(lambda p: plot_result(bound, p))))
    sections = [
        Section(
            "Sound abstraction (upper bound on failure within k steps)",
            rows=[
                ("upper bound", fmt(bound.upper_bound)),
                ("guarantee", bound.guarantee),
                ("horizon", str(horizon)),
                ("abstract states", f"{bound.n_abstract_states:,}"),
                ("domain", options.domain),
            ],
            images=images,
        )
    ]
    stat = simulation(system, unsafe_property(system, horizon), policy, report, shared, "simulation from random start states")
    a, b = stat.interval
    sections.append(
        Section(
            "Statistical estimate (uniform random starts in the initial region)",
            rows=[
                ("estimate", fmt(stat.estimate)),
                ("interval", f"[{fmt(a)}, {fmt(b)}] at {stat.confidence:.1%}"),
                ("runs", f"{stat.runs:,}"),
            ],
            data={"statistical": stat.to_json()},
        )
    )
    checks = [
        Check(
            "abstraction bound >= the statistical interval's lower end",
            bound.upper_bound >= a - 1e-12,
            f"bound {fmt(bound.upper_bound)} >= {fmt(a)} (the bound holds for every start state, "
            "the estimate averages over random ones)",
        )
    ]
    return sections, checks
