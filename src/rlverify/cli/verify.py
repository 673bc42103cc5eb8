"""``rlverify verify``: the exact engine on a PRISM/JANI model or a registered benchmark."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rlverify.cli.options import (add_env_kwargs, add_outputs, add_policy, add_property, add_target, add_unavailable,
                                  dumps, outputs, policy_kwargs, print_warnings, write_json)
from rlverify.exact import ExactOptions, verify_exact
from rlverify.exact.checking import NUMERICS
from rlverify.exact.verify import MODES, STRATEGIES
from rlverify.results import ExactResult

console = Console()
err_console = Console(stderr=True)


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("verify", help="exact verification of a policy with Storm",
                       description="Build the Markov chain the policy induces on an MDP and check a PCTL property with Storm.")
    add_target(p)
    add_env_kwargs(p)
    add_property(p)
    add_policy(p, default_note="default for benchmarks: 'reference'")
    p.add_argument("--mode", choices=MODES, default="stochastic",
                   help="stochastic: all actions with pi>0 (default); deterministic: argmax only; monolithic: Pmin/Pmax without policy")
    p.add_argument("--strategy", choices=STRATEGIES, default="auto", help="full MDP then policy, or on-the-fly exploration")
    add_unavailable(p)
    p.add_argument("--numerics", choices=NUMERICS, default="sound",
                   help="sound (default, Storm's sound solver), direct (Storm's Eigen solver: no bounds), fast (unsound value iteration)")
    p.add_argument("--precision", type=float, default=1e-6, help="relative precision of iterative solvers (default 1e-6)")
    p.add_argument("--max-states", type=int, default=2_000_000,
                   help="refuse to build models with more states (default 2M: dense models need ~10 GB per 1M states)")
    add_outputs(p, kinds=".csv/.npz (every state's value with its valuation), .json (the result)", seed=False)
    p.add_argument("--all-states", dest="out", action="append", help=argparse.SUPPRESS)  # the former spelling of --out
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from rlverify.resolve import resolve

    files = outputs(args, (".csv", ".npz", ".json"))
    target = resolve(args.target, constants=args.constants, property=args.property,
                     needs_policy=args.mode != "monolithic", kinds=("prism",), command="rlverify verify",
                     env_kwargs=args.env_kwargs, **policy_kwargs(args))
    options = ExactOptions(mode=args.mode, strategy=args.strategy, unavailable=args.unavailable, numerics=args.numerics,
                           precision=args.precision, max_states=args.max_states,
                           all_states=".csv" in files or ".npz" in files)
    # progress goes to stderr, so that --json output on stdout stays clean
    with err_console.status("verifying") as status:
        result = verify_exact(target.model, target.property, target.policy, options,
                              progress=lambda msg: status.update(msg))
    from rlverify.policies.loading import policy_warnings

    notes = policy_warnings(target.policy, target, unavailable=args.unavailable) if target.policy is not None else []
    result = dataclasses.replace(result, model=target.name, warnings=list(result.warnings) + notes)
    print_warnings(result.warnings, err_console)
    for suffix in (".csv", ".npz"):
        if suffix in files:
            _write_states(files[suffix], result)
    if ".json" in files:
        write_json(files[".json"], result.to_json())
    if args.json:
        print(dumps(result.to_json()))
    else:
        print_result(result)
    return 0


def print_result(r: ExactResult) -> None:
    """A readable table of ``r``."""
    t = Table(title=f"rlverify exact — {r.mode}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("model", escape(r.model))
    t.add_row("policy", shown_policy(r.policy) if r.policy else "— (all schedulers)")
    t.add_row("property", escape(r.property))
    if r.mode == "monolithic":
        t.add_row("Pmin / Pmax", f"{r.pmin:.6g} / {r.pmax:.6g}")
    else:
        t.add_row("value", f"[bold green]{r.value:.6g}[/]")
        if r.lower is not None and r.upper is not None:
            t.add_row("bounds", f"[{r.lower:.6g}, {r.upper:.6g}]")
    if r.satisfied is not None:
        t.add_row("satisfied", "yes" if r.satisfied else "no")
    guarantee = {"sound": f"sound (Storm, relative precision {r.precision:g})",
                 "direct": "Storm's Eigen solver (no convergence heuristic; not guaranteed exact)",
                 "unsound": "UNSOUND value iteration (convergence heuristic)"}[r.guarantee]
    t.add_row("numerics", guarantee)
    t.add_row("chain" if r.mode != "monolithic" else "MDP", f"{r.states:,} states, {r.transitions:,} transitions")
    t.add_row("strategy", r.strategy)
    if r.mode != "monolithic":
        t.add_row("stalled", f"{r.stalled_probability:.6g}" + ("  [yellow](policy uses unavailable actions)[/]" if r.stalled_probability > 0 else ""))
    t.add_row("time", ", ".join(f"{k} {v:.3f}s" for k, v in r.timings.items() if v))
    console.print(t)


def _write_states(path: Path, r: ExactResult) -> None:
    assert r.state_values is not None and r.state_valuations is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    if r.state_values_min is not None:  # monolithic: Pmin and Pmax per state
        columns, values = ["pmin", "pmax"], [r.state_values_min, r.state_values]
    else:
        columns, values = ["value"], [r.state_values]
    if path.suffix == ".npz":
        np.savez_compressed(path, valuations=r.state_valuations, variables=np.array(r.variables),
                            **dict(zip(["values"] if len(values) == 1 else columns, values)))
    else:
        header = ",".join(list(r.variables) + columns)
        data = np.column_stack([r.state_valuations.astype(np.float64), *values])
        fmt = ["%d"] * len(r.variables) + ["%.17g"] * len(values)
        np.savetxt(path, data, delimiter=",", header=header, comments="", fmt=fmt)


def shown_policy(name: str | None) -> str:
    """A policy's name for a table: shipped package files by their file name, user files as given."""
    if name and "rlverify/benchmarks/data/" in name.replace("\\", "/"):
        return f"{Path(name).name} (shipped)"
    return name or ""
