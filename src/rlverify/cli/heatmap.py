"""``rlverify heatmap``: goal/crash probability per start cell of a Racetrack map, as a PNG."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rlverify.errors import InputFileError

console = Console()
err_console = Console(stderr=True)


def register(sub: Any) -> None:
    from rlverify.policies.loading import SPEC_HELP

    p = sub.add_parser("heatmap", help="Racetrack heat map: goal/crash probability per start cell (PNG)",
                       description="Simulate the policy from every free cell (velocity 0) and draw goal and crash "
                                   "probability; with --optimal also Storm's Pmax(goal) and the gap.")
    p.add_argument("benchmark", help="a Racetrack benchmark id, e.g. racetrack-barto-small-v1")
    p.add_argument("--policy", help=f"policy spec ({SPEC_HELP}); default: the shipped DQN policy")
    p.add_argument("--out", "-o", required=True, help="PNG file to write")
    p.add_argument("--noise", type=float, help="probability that an acceleration fails (default 0.2; e.g. 0.5 for a stress test)")
    p.add_argument("--epsilon", type=float, default=0.01, help="per-cell interval half-width (default 0.01)")
    p.add_argument("--delta", type=float, default=0.05, help="per-cell error probability (default 0.05)")
    p.add_argument("--runs", type=int, help="runs per cell with Clopper-Pearson intervals instead of Okamoto")
    p.add_argument("--optimal", action="store_true", help="add Storm's optimal Pmax(goal) map and the gap map")
    p.add_argument("--max-steps", type=int, default=10_000, help="maximal run length (default 10000)")
    p.add_argument("--mode", choices=("stochastic", "deterministic"), default=None,
                   help="sample actions from pi (stochastic, default) or take the argmax; Q-value policies (DQN) are greedy in both")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=50_000)
    p.add_argument("--json", metavar="FILE", help="also write per-cell values as JSON")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rlverify.benchmarks.racetrack import is_racetrack, make_racetrack, policy_path
    from rlverify.policies.loading import load_policy
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.heatmap import heatmap, plot_heatmap
    from rlverify.statistical.verify import StatisticalOptions

    if not is_racetrack(args.benchmark):
        make_racetrack(args.benchmark)  # raises the unknown-benchmark error with suggestions
    for f in (args.out, args.json):
        if f and Path(f).exists() and not args.force:
            raise InputFileError(f"{f}: file exists; pass --force to overwrite it")
    if not str(args.out).lower().endswith(".png"):
        raise InputFileError(f"--out {args.out}: expected a .png file")
    env = make_racetrack(args.benchmark, **({} if args.noise is None else {"noise": args.noise}))
    policy = load_policy(args.policy or str(policy_path(args.benchmark)))
    mode = args.mode or "stochastic"
    options = StatisticalOptions(
        method="clopper-pearson" if args.runs else "okamoto", epsilon=args.epsilon, delta=args.delta, runs=args.runs,
        simulation=SimulationOptions(mode=mode, max_steps=args.max_steps, seed=args.seed, batch_size=args.batch_size))
    with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task("runs", total=None)
        result = heatmap(env, policy, options, optimal=args.optimal, benchmark=args.benchmark,
                         progress=lambda done, total: bar.update(task, completed=done, total=total))
    plot_heatmap(result, args.out)
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_json(), indent=1))
    console.print(f"[bold]{args.benchmark}[/] noise {env.noise:g}, policy {result.policy} ({mode}): "
                  f"{len(result.cells)} cells x {int(result.runs[0]):,} runs in {result.timings['total']:.1f} s "
                  f"({result.timings['decisions_per_second']:,.0f} decisions/s)")
    console.print(f"mean goal probability {result.goal.mean():.4f}, mean crash probability {result.crash.mean():.4f}"
                  + (f", mean optimal {result.optimal.mean():.4f}, max gap {result.gap.max():.4f}"
                     if result.optimal is not None else "")
                  + f"; undecided runs {int(result.undecided.sum()):,}, stalled {int(result.stalled.sum()):,}")
    console.print(f"wrote {args.out}" + (f" and {args.json}" if args.json else ""))
    return 0
