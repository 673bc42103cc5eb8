"""``rlverify simulate``: deep statistical model checking of a policy on a model or a benchmark."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rlverify.cli.verify import shown_policy
from rlverify.errors import InputFileError, PolicyError
from rlverify.statistical.stats import StatisticsError

console = Console()
err_console = Console(stderr=True)


def register(sub: Any) -> None:
    from rlverify.policies.loading import SPEC_HELP
    from rlverify.statistical.properties import SUPPORTED_FORMS
    from rlverify.statistical.verify import METHODS

    p = sub.add_parser("simulate", help="statistical verification: simulate the policy in lockstep (DSMC)",
                       description="Estimate the probability of a path property under a policy by simulating many "
                                   "runs in lockstep, with a statistical guarantee.")
    p.add_argument("model", help="PRISM/JANI file or a benchmark id (e.g. racetrack-barto-small-v1)")
    p.add_argument("--policy", help=f"policy spec: {SPEC_HELP}; for Racetrack benchmarks default: the shipped DQN policy")
    p.add_argument("--property", "-p", required=True,
                   help=f"path property ({SUPPORTED_FORMS}) or a benchmark property name (goal, crash, reach)")
    p.add_argument("--constants", "-c", help="undefined model constants, e.g. xMax=4,yMax=4,slickness=0.1")
    p.add_argument("--noise", type=float, help="Racetrack: probability that an acceleration fails (default 0.2)")
    p.add_argument("--epsilon", type=float, default=0.01, help="half-width of the interval (default 0.01)")
    p.add_argument("--delta", type=float, default=0.05, help="error probability; confidence 1-delta (default 0.05)")
    p.add_argument("--method", choices=METHODS, default=None,
                   help="okamoto (default), adaptive, clopper-pearson, wilson, or sprt (implied by --sprt)")
    p.add_argument("--runs", type=int, help="a fixed number of runs for clopper-pearson (the default with --runs) or wilson")
    p.add_argument("--sprt", type=float, metavar="THETA", help="test P >= THETA with Wald's SPRT")
    p.add_argument("--indifference", type=float, default=0.01, help="SPRT indifference half-width (default 0.01)")
    p.add_argument("--alpha", type=float, default=0.05, help="SPRT bound on wrongly rejecting P >= THETA")
    p.add_argument("--beta", type=float, default=0.05, help="SPRT bound on wrongly accepting P >= THETA")
    p.add_argument("--max-steps", type=int, default=10_000, help="maximal run length (default 10000)")
    p.add_argument("--mode", choices=("stochastic", "deterministic"), default=None,
                   help="sample actions from pi (stochastic, default) or take the argmax (deterministic); "
                        "Q-value policies (DQN) are greedy in both")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--batch-size", type=int, default=20_000, help="runs simulated in lockstep (default 20000)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)


def resolve_target(model: str, *, noise: float | None, constants: str | None, policy_spec: str | None,
                   property_text: str) -> tuple[Any, str, str, bool]:
    """The simulation target, policy spec, property text and whether it is a Racetrack benchmark."""
    from rlverify.benchmarks.racetrack import PROPERTIES, is_racetrack, make_racetrack, policy_path

    if is_racetrack(model):
        env = make_racetrack(model, **({} if noise is None else {"noise": noise}))
        spec = policy_spec or str(policy_path(model))
        if policy_spec is None and not Path(spec).is_file():
            raise PolicyError(f"{model}: the reference policy {spec} is not installed; pass --policy")
        return env, spec, PROPERTIES.get(property_text, property_text), True
    if noise is not None:
        raise InputFileError("--noise applies to Racetrack benchmarks only")
    path = Path(model)
    if path.suffix.lower() in (".prism", ".pm", ".nm", ".jani") or path.exists():
        from rlverify.models import load_model

        if policy_spec is None:
            raise PolicyError("--policy is required for a model file")
        return load_model(path, constants), policy_spec, property_text, False
    from rlverify.benchmarks.registry import make, spec

    s = spec(model)  # unknown ids raise BenchmarkError with suggestions
    target = make(model)
    prop = s.properties.get(property_text, property_text)
    if policy_spec is None:
        raise PolicyError(f"{model}: pass --policy (reference policies: {', '.join(s.policies) or 'none'})")
    pol = s.policies.get(policy_spec, policy_spec)
    return target, pol, prop, False


def run(args: argparse.Namespace) -> int:
    from rlverify.policies.loading import load_policy
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.verify import StatisticalOptions, verify_statistical

    target, policy_spec, prop, racetrack = resolve_target(args.model, noise=args.noise, constants=args.constants,
                                                          policy_spec=args.policy, property_text=args.property)
    policy = load_policy(policy_spec)
    if args.sprt is not None and args.method not in (None, "sprt"):
        raise StatisticsError(f"--sprt runs Wald's sequential test; it cannot be combined with --method {args.method}")
    method = "sprt" if args.sprt is not None else (args.method or "okamoto")
    if args.runs is not None and args.method is None and args.sprt is None:
        method = "clopper-pearson"  # a fixed number of runs: the exact interval
    mode = args.mode or "stochastic"
    options = StatisticalOptions(
        method=method, epsilon=args.epsilon, delta=args.delta, runs=args.runs, threshold=args.sprt,
        indifference=args.indifference, alpha=args.alpha, beta=args.beta,
        simulation=SimulationOptions(mode=mode, max_steps=args.max_steps, seed=args.seed, batch_size=args.batch_size))
    # progress on stderr (transient), so that --json output on stdout stays clean
    with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task("runs", total=None)
        result = verify_statistical(target, prop, policy, options, constants=args.constants,
                                    progress=lambda done, total: bar.update(task, completed=done, total=total))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    table = Table(title=f"{result.property}", show_header=False)
    table.add_row("model", result.model)
    table.add_row("policy", f"{shown_policy(result.policy)} ({result.mode})")
    if result.decision is not None or method == "sprt":
        verdict = {None: "no decision", "H0": f"P >= {result.threshold:g} (accept H0)",
                   "H1": f"P < {result.threshold:g} (accept H1)"}[result.decision]
        table.add_row("SPRT", f"{verdict}; alpha={args.alpha:g}, beta={args.beta:g}, indifference={args.indifference:g}")
    table.add_row("estimate", f"{result.estimate:.6f}")
    if method == "sprt":
        table.add_row("interval", f"[{result.interval[0]:.6f}, {result.interval[1]:.6f}] (informative only: "
                                  "Clopper-Pearson after a sequential stop)")
    else:
        table.add_row("interval", f"[{result.interval[0]:.6f}, {result.interval[1]:.6f}] at {result.confidence:.1%} "
                                  f"confidence ({result.method})")
    table.add_row("runs", f"{result.runs:,} ({result.successes:,} satisfied)")
    table.add_row("undecided", f"{result.undecided:,} (after {result.max_steps:,} steps)")
    table.add_row("stalled", f"{result.stalled:,}")
    table.add_row("seed", str(result.seed))
    table.add_row("time", f"{result.timings['total']:.2f} s ({result.decisions:,} decisions, "
                          f"{result.timings['decisions_per_second']:,.0f}/s)")
    console.print(table)
    return 0
