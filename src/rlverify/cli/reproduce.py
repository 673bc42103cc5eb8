"""``rlverify reproduce table2``: the 2024 paper's Table 2 for rlverify's models and reference policies."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlverify.choices import Strategy
from rlverify.cli.console import console, line, note, status, styled
from rlverify.cli.options import add_force, add_json
from rlverify.cli.output import print_envelope
from rlverify.files import check_target

if TYPE_CHECKING:
    from rich.text import Text

#: Terminal width from which Table 2 is printed as one table (else one table per method).
WIDE = 150


def register(sub: Any) -> None:
    """Add the ``reproduce`` subcommand (``reproduce table2``)."""
    p = sub.add_parser("reproduce", help="reproduce a paper's experiment (table2: Gross & Spieker 2024)")
    rsub = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    t2 = rsub.add_parser(
        "table2",
        help="Table 2 of Gross & Spieker 2024: deterministic / stochastic / monolithic",
        description="Verify the shipped reference policies on Freeway, Crazy Climber and Avoid three "
        "ways and print the results beside the paper's.",
    )
    t2.add_argument("--out", help="directory to write table2.json and table2.md into")
    add_force(t2, "overwrite table2.json / table2.md in --out")
    add_json(t2, "print JSON instead of a table")
    t2.add_argument(
        "--rows", help="comma-separated row ids (default: all): freeway-goal, freeway-mid, crazy-climber-coll, avoid-coll-100"
    )
    t2.add_argument(
        "--strategy",
        choices=(Strategy.FULL.value, Strategy.ONTHEFLY.value, Strategy.AUTO.value),
        default="full",
        help="build strategy of the policy columns (default full: same chain, faster here)",
    )
    t2.set_defaults(run=run_table2)


def run_table2(args: argparse.Namespace) -> int:
    from rlverify.benchmarks.table2 import compute_table2  # lazy: stormpy, start-up

    rows = [r.strip() for r in args.rows.split(",") if r.strip()] if args.rows else None
    if args.out:
        for name in ("table2.json", "table2.md"):
            check_target(Path(args.out) / name, force=args.force, what="--out")
    with status("Table 2") as update:  # on stderr: --json's stdout stays clean
        table = compute_table2(rows, strategy=args.strategy, progress=update)
    if args.out:
        js, md = table.write(args.out, force=args.force)
    if args.json:
        print_envelope(args, table.to_json())
        return 0
    _print_table2(table)
    if args.out:
        note(f"wrote {js} and {md}")
    return 0


def _print_table2(table: Any) -> None:
    """One wide table on a wide terminal, else one table per method (each fits 80 columns); ours over the paper's."""
    from rlverify.benchmarks.table2 import METHODS  # lazy: stormpy, start-up

    groups = [METHODS] if console.width >= WIDE else [(m,) for m in METHODS]
    for group in groups:
        console.print(_method_table(table, group))
    console.print(
        styled(
            "second line of each cell: the paper's figure; monolithic result = Pmin–Pmax "
            "(the paper prints Pmax); our time = parse + build + policy + induce + check",
            "dim",
        )
    )
    console.print(f"total {table.seconds:.1f} s")


def _method_table(table: Any, group: tuple[str, ...]) -> Any:
    """The rows of Table 2 for the methods of ``group``: states, transitions, result and time, ours / paper."""
    from rich.table import Table  # lazy: rich, --help start-up

    from rlverify.benchmarks.table2 import PAPER_TABLE2, format_result  # lazy: loads the exact engine

    title = "Table 2 (Gross & Spieker 2024), ours / paper" + ("" if len(group) > 1 else f": {group[0]}")
    t = Table(title=title, title_justify="left")
    t.add_column("Environment")
    t.add_column("Measurement")
    for m in group:
        short = {"deterministic": "det.", "stochastic": "stoch.", "monolithic": "mono."}[m] if len(group) > 1 else ""
        for col in ("states", "trans.", "result", "time s"):
            t.add_column(f"{short}\n{col}".strip(), justify="right", no_wrap=True)
    for r in table.rows:
        cells: list[str | Text] = [r.environment, r.measurement]
        for m in group:
            c = table.cells[r.id][m]
            p = PAPER_TABLE2[r.id][m]
            cells += [
                line(f"{c.states:,}\n", styled(f"{p[0]:,}", "dim")),
                line(f"{c.transitions:,}\n", styled(f"{p[1]:,}", "dim")),
                line(f"{format_result(c)}\n", styled(f"{p[2]:g}", "dim")),
                line(f"{c.seconds:.2f}\n", styled(f"{p[3]:g}", "dim")),
            ]
        t.add_row(*cells)
    return t
