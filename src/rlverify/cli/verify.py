"""``rlverify verify``: the exact engine on a PRISM/JANI model or a registered benchmark."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rlverify.benchmarks.registry import BenchmarkError
from rlverify.errors import InputFileError, PolicyError
from rlverify.exact import ExactOptions, verify_exact
from rlverify.exact.checking import NUMERICS
from rlverify.exact.verify import MODES, STRATEGIES, UNAVAILABLE
from rlverify.policies.loading import SPEC_HELP, load_policy
from rlverify.results import ExactResult

console = Console()
err_console = Console(stderr=True)


def register(sub: Any) -> None:
    p = sub.add_parser("verify", help="exact verification of a policy with Storm",
                       description="Build the Markov chain the policy induces on an MDP and check a PCTL property with Storm.")
    p.add_argument("model", help="PRISM (.prism/.pm/.nm) or JANI (.jani) file, or a benchmark id (see 'rlverify benchmarks list')")
    p.add_argument("--property", "-p", required=True, help="PCTL property, e.g. 'P=? [F<=100 COLLISION=true]', or a benchmark property name")
    p.add_argument("--policy", help=f"policy spec: {SPEC_HELP}; for benchmarks a reference policy name (default 'reference')")
    p.add_argument("--output", choices=("logits", "probabilities", "q-values"),
                   help="what the policy network outputs, overriding the file's metadata (q-values: greedy argmax)")
    p.add_argument("--features", help="comma-separated feature (model variable) names, overriding the policy file's")
    p.add_argument("--actions", help="comma-separated action labels, overriding the policy file's")
    p.add_argument("--constants", "-c", help="undefined constants, e.g. xMax=4,yMax=4,slickness=0.1")
    p.add_argument("--mode", choices=MODES, default="stochastic",
                   help="stochastic: all actions with pi>0 (default); deterministic: argmax only; monolithic: Pmin/Pmax without policy")
    p.add_argument("--strategy", choices=STRATEGIES, default="auto", help="full MDP then policy, or on-the-fly exploration")
    p.add_argument("--unavailable", choices=UNAVAILABLE, default="stall",
                   help="policy mass on unavailable actions: to a 'stalled' sink (default) or renormalised (opt-in)")
    p.add_argument("--numerics", choices=NUMERICS, default="sound",
                   help="sound (default, Storm's sound solver), direct (sparse LU), fast (unsound value iteration)")
    p.add_argument("--precision", type=float, default=1e-6, help="relative precision of iterative solvers (default 1e-6)")
    p.add_argument("--max-states", type=int, default=2_000_000,
                   help="refuse to build models with more states (default 2M: dense models need ~10 GB per 1M states)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--all-states", metavar="FILE", help="write per-state values with valuations to FILE (.csv or .npz)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --all-states file")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rlverify.benchmarks.registry import spec as benchmark_spec

    features = _names(args.features)
    actions = _names(args.actions)
    if args.all_states and Path(args.all_states).exists() and not args.force:
        raise InputFileError(f"{args.all_states}: file exists; pass --force to overwrite it")
    prop = args.property
    model_name = args.model
    path = Path(args.model)
    if path.suffix.lower() in (".prism", ".pm", ".nm", ".jani") or path.exists():
        from rlverify.models import load_model

        model = load_model(path, args.constants)
        policy = load_policy(args.policy, features=features, actions=actions, output=args.output) if args.policy else None
    else:
        bench_spec = benchmark_spec(args.model)
        if bench_spec.kind != "prism":
            other = {"continuous": "rlverify abstract", "native": "rlverify simulate"}.get(bench_spec.kind, "another engine")
            raise BenchmarkError(f"{bench_spec.id} is a {bench_spec.kind} benchmark, not a PRISM MDP: "
                                 f"the exact engine cannot build it; use {other} {bench_spec.id}")
        from rlverify.benchmarks.registry import parse_parameters

        params = bench_spec.resolve(parse_parameters(args.constants))
        bench = bench_spec.entry_point(**params)
        model_name = bench_spec.id + (" (" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")" if params else "")
        model = bench.load_model()
        prop = bench.properties.get(prop, prop)
        policy = None
        if args.mode != "monolithic":
            name = args.policy or "reference"
            if args.policy is None and name not in bench.policies:
                trained = f" (its reference policies: {', '.join(bench_spec.policies)}, trained for the default " \
                          "parameters only)" if bench_spec.policies else ""
                raise PolicyError(f"{model_name} has no reference policy{trained}; pass --policy FILE, "
                                  "or --mode monolithic for Pmin/Pmax")
            policy = (bench.load_policy(name) if name in bench.policies
                      else load_policy(name, features=features, actions=actions, output=args.output))
    if policy is None and args.mode != "monolithic":
        raise PolicyError(f"--mode {args.mode} needs --policy (or --mode monolithic for Pmin/Pmax)")
    options = ExactOptions(mode=args.mode, strategy=args.strategy, unavailable=args.unavailable, numerics=args.numerics,
                           precision=args.precision, max_states=args.max_states, all_states=bool(args.all_states))
    # progress goes to stderr, so that --json output on stdout stays clean
    with err_console.status("verifying") as status:
        result = verify_exact(model, prop, policy, options, progress=lambda msg: status.update(msg))
    result = dataclasses.replace(result, model=model_name)
    if args.all_states:
        _write_states(Path(args.all_states), result)
    if args.json:
        print(json.dumps(_finite(result.to_json()), indent=2, allow_nan=False))
    else:
        print_result(result)
    return 0


def print_result(r: ExactResult) -> None:
    """A readable table of ``r``."""
    t = Table(title=f"rlverify exact — {r.mode}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("model", r.model)
    t.add_row("policy", shown_policy(r.policy) if r.policy else "— (all schedulers)")
    t.add_row("property", r.property)
    if r.mode == "monolithic":
        t.add_row("Pmin / Pmax", f"{r.pmin:.6g} / {r.pmax:.6g}")
    else:
        t.add_row("value", f"[bold green]{r.value:.6g}[/]")
        if r.lower is not None and r.upper is not None:
            t.add_row("bounds", f"[{r.lower:.6g}, {r.upper:.6g}]")
    if r.satisfied is not None:
        t.add_row("satisfied", "yes" if r.satisfied else "no")
    guarantee = {"sound": f"sound (Storm, relative precision {r.precision:g})",
                 "direct": "direct solve (exact up to floating-point rounding)",
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


def _names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None



def _finite(obj: Any) -> Any:
    """JSON has no infinity: an infinite value (an expected reward whose target is missed with
    positive probability) is written as the string "inf" / "-inf", NaN as null."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not np.isfinite(obj):
        return None if np.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def shown_policy(name: str | None) -> str:
    """A policy's name for a table: shipped package files by their file name, user files as given."""
    if name and "rlverify/benchmarks/data/" in name.replace("\\", "/"):
        return f"{Path(name).name} (shipped)"
    return name or ""
