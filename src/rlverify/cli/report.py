"""``rlverify report``: every engine that applies, side by side, checked against each other, as one HTML page."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from rlverify.benchmarks.registry import BenchmarkKind
from rlverify.choices import Aggregate, Optimum, values
from rlverify.cli.console import console, error, note, status, styled
from rlverify.cli.map import add_map_view, map_view
from rlverify.cli.options import (
    add_env_kwargs,
    add_force,
    add_json,
    add_policy,
    add_seed,
    add_shield,
    add_system_timeout,
    add_target,
    policy_kwargs,
)
from rlverify.cli.output import print_envelope
from rlverify.errors import OptionError
from rlverify.files import check_target


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "report",
        help="run every engine that applies, check them against each other, write one HTML page",
        description="Exact value, deterministic estimate and Pmin/Pmax (PRISM/JANI), simulation (always), "
        "failure paths, risk map and robustness (discrete models), heat maps (Racetrack), the "
        "abstraction's bound (continuous systems); cross-method consistency is asserted: a "
        "disagreement is printed with both numbers and exits 1.",
    )
    add_target(p)
    add_env_kwargs(p)
    p.add_argument("--property", "-p", metavar="TEXT|NAME", help="property (default: the benchmark's first)")
    add_policy(p)
    add_system_timeout(p)
    add_shield(p)
    p.add_argument("--runs", type=int, default=10_000, help="simulated runs (default 10,000)")
    p.add_argument("--delta", type=float, default=0.001, help="1 - confidence of the statistical interval (default 0.001)")
    add_seed(p)
    p.add_argument("--epsilon", type=int, default=1, help="observation-perturbation budget of the robustness section")
    p.add_argument("--explain", type=int, default=5, metavar="K", help="failure paths to list (default 5)")
    p.add_argument("--map", metavar="X,Y", help="the two variables of the risk map (default: the first two integer features)")
    add_map_view(p, values(Aggregate))
    p.add_argument(
        "--optimum",
        choices=values(Optimum),
        help="how the property is read: min = a bad event (the best policy gets Pmin; regret = value - Pmin), "
        "max = a goal (Pmax; regret = Pmax - value). Default: from the property's comparison (P<=b: min, P>=b: max); "
        "else the headline shows Pmin and Pmax without calling either the best",
    )
    p.add_argument(
        "--explain-policy",
        action="store_true",
        help="add the explanations of the policy (rlverify explain: features, decision tree, critical states)",
    )
    p.add_argument("--out", "-o", type=Path, metavar="FILE.html", help="where to write the page (default report.html)")
    add_force(p, "overwrite an existing --out file")
    add_json(p, "also print the report's numbers as JSON")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from rlverify.report import make_report, write_report  # lazy: numpy and the engines, --help start-up

    out = args.out or Path("report.html")
    if out.suffix.lower() not in (".html", ".htm"):
        raise OptionError(f"--out {out}: expected an .html file name")
    check_target(out, force=args.force, what="--out")
    options = _report_options(args)
    with status("report") as update:
        report = make_report(
            args.target,
            options=options,
            property=args.property,
            constants=args.constants,
            env_kwargs=args.env_kwargs,
            progress=update,
            shield=args.shield,
            **policy_kwargs(args),
        )
    if args.explain_policy and report.kind != BenchmarkKind.PRISM:
        note(f"--explain-policy: the explanations are computed for PRISM/JANI models; {report.kind} targets have none")
    path = write_report(report, out, force=args.force)
    disagreements = list(report.disagreements())
    _show(args, report, disagreements)
    note(f"wrote {path} ({', '.join(f'{k} {v:.1f}s' for k, v in report.timings.items())})")
    for disagreement in disagreements:
        error(f"engines disagree: {disagreement}")
    return 0 if report.ok else 1


def _report_options(args: argparse.Namespace) -> Any:
    """The :class:`~rlverify.report.ReportOptions` of the command line, validated (``--map X,Y`` checked)."""
    from rlverify.report import ReportOptions  # lazy: numpy and the engines, --help start-up

    where, agg = map_view(args.where, args.agg)
    options = ReportOptions(
        runs=args.runs,
        delta=args.delta,
        seed=args.seed,
        epsilon=args.epsilon,
        explain=args.explain,
        optimum=args.optimum,
        map_where=where,
        map_agg=agg,
        explain_policy=args.explain_policy,
    )
    options.validate()
    if not args.map:
        return options
    parts = [v.strip() for v in args.map.split(",")]
    if len(parts) != 2 or not all(parts):
        raise OptionError(f"--map: expected two variable names X,Y, got '{args.map}'")
    return dataclasses.replace(options, map_vars=(parts[0], parts[1]))


def _show(args: argparse.Namespace, report: Any, disagreements: list[str]) -> None:
    """The report's JSON envelope (``--json``), else its verdict and checks as tables."""
    if args.json:
        print_envelope(
            args,
            report.to_json(),
            exit_code=0 if report.ok else 1,
            error="; ".join(f"engines disagree: {d}" for d in disagreements) or None,
        )
    else:
        _print_report(report)


def _print_report(report: Any) -> None:
    """The verdict and the consistency checks as tables (the page has the rest)."""
    from rich.table import Table  # lazy: rich, --help start-up

    if report.headline:
        head = Table(title=f"rlverify report — {report.model}: verdict", show_header=False, title_justify="left")
        head.add_column(style="bold")
        head.add_column()
        for k, v in report.headline:
            head.add_row(k, v)
        console.print(head)
    t = Table(title=f"rlverify report — {report.model}", show_header=True, title_justify="left")
    t.add_column("check")
    t.add_column("holds")
    t.add_column("numbers")
    for c in report.checks:
        t.add_row(c.name, styled("yes", "green") if c.ok else styled("NO", "bold red"), c.detail)
    console.print(t)
