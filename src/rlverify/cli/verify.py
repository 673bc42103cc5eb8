"""``rlverify verify``: the exact engine on a PRISM/JANI model or a registered benchmark."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlverify.choices import Guarantee, Mode, Numerics, Strategy, values
from rlverify.cli.console import console, line, print_warnings, status, styled, warning
from rlverify.cli.options import (
    add_backend_options,
    add_env_kwargs,
    add_outputs,
    add_policy,
    add_property,
    add_shield,
    add_target,
    add_unavailable,
    apply_shield,
    backend_from_args,
    outputs,
    policy_kwargs,
    resolve_target,
    write_json,
)
from rlverify.cli.output import add_fail_on_violation, print_envelope, require_threshold, verdict_exit_code
from rlverify.errors import OptionError
from rlverify.exact.options import ExactOptions
from rlverify.files import save_figure, write_bytes
from rlverify.models.assignments import swept_names
from rlverify.models.properties import parse_structure
from rlverify.models.property_files import PROPERTY_FILE_SUFFIXES

if TYPE_CHECKING:
    from rich.text import Text

    from rlverify.results import ExactResult, FailurePaths
    from rlverify.targets import Target


def register(sub: Any) -> argparse.ArgumentParser:
    from rlverify.exact.options import MAX_WORK  # lazy: numpy (backends), --help start-up

    p = sub.add_parser(
        "verify",
        help="exact verification of a policy with Storm",
        description="Build the Markov chain the policy induces on an MDP and check a PCTL property with Storm.",
    )
    add_target(p)
    add_env_kwargs(p)
    add_property(p, several=True)
    add_policy(p, default_note="default for benchmarks: 'reference'")
    add_shield(p)
    p.add_argument(
        "--mode",
        choices=values(Mode),
        default="stochastic",
        help="stochastic: all actions with pi>0 (default); deterministic: argmax only; monolithic: Pmin/Pmax without policy",
    )
    p.add_argument(
        "--strategy",
        choices=values(Strategy),
        default="auto",
        help="auto (default: merged or full by the program's shape; settings.merged_declined says why full), merged "
        "(explore the policy's chain, never the MDP), full (Storm builds the MDP), onthefly",
    )
    add_unavailable(p)
    p.add_argument(
        "--numerics",
        choices=values(Numerics),
        default="sound",
        help="sound (default, Storm's sound solver), direct (Storm's Eigen solver: no bounds), fast (unsound value iteration)",
    )
    p.add_argument("--precision", type=float, default=1e-6, help="relative precision of iterative solvers (default 1e-6)")
    p.add_argument(
        "--max-states",
        type=int,
        default=2_000_000,
        help="refuse models (with --strategy merged: policy-reachable states) with more states (default 2M)",
    )
    p.add_argument(
        "--max-memory",
        metavar="SIZE",
        help="stop when resident memory would exceed SIZE (e.g. 8G, 500M; default: 80%% of this machine's "
        "memory): --strategy full refuses a phase before it starts from its estimate; merged checks "
        "after every batch",
    )
    p.add_argument(
        "--max-work",
        type=float,
        default=MAX_WORK,
        metavar="N",
        help="budget of a step-bounded property (F<=k, U<=k, C<=k) in multiply-adds, steps x transitions (a step at "
        f"least 3,000; default {MAX_WORK:.0e}, tens of seconds): reachability stops early at a fixed point or "
        "within --precision of the unbounded value, else is refused with the figures",
    )
    p.add_argument(
        "--chain-dir",
        metavar="DIR",
        help="hold the policy's chain on disk in DIR (new or empty; --force replaces an earlier chain there): "
        "memory per state, not per transition; step-bounded reachability (F<=k, U<=k) with the merged strategy",
    )
    add_backend_options(p)  # --backend ray: the --chain-dir chain's rows partitioned across Ray actors
    p.add_argument(
        "--export",
        metavar="FILE",
        help="also write the policy's chain, as checked, to FILE: .drn (Storm's explicit format, read back by "
        "storm --explicit-drn) or .dot (Graphviz, at most 1,000 states); --force replaces an existing file",
    )
    p.add_argument(
        "--explain",
        type=int,
        metavar="K",
        help="also list the K most probable paths from the initial state to the target (P=? [F phi], "
        "F<=k, U, U<=k): each path's probability, states, and the policy's distribution and actions per step",
    )
    p.add_argument(
        "--explain-map",
        metavar="X,Y[,X2,Y2...]",
        help="integer variables to draw the --explain paths on (--out paths.png), in pairs: each pair in its "
        "own colour, one panel per path; default: x,y when the model has them and every pair named alike "
        "(obstacle1_x,obstacle1_y) that moves along the paths",
    )
    add_outputs(
        p,
        kinds=".csv/.npz (every state's value with its valuation), .json (the result), "
        ".png (the --explain paths drawn on the X,Y grid)",
        seed=False,
    )
    p.add_argument("--all-states", dest="out", action="append", help=argparse.SUPPRESS)  # the former spelling of --out
    add_fail_on_violation(p)
    p.set_defaults(run=run)
    return p


def parse_size(text: str, option: str) -> int:
    """Bytes of a size such as ``8G``, ``500M``, ``1.5GB``, ``64K`` or ``1000000`` (powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)i?B?\s*", text, flags=re.IGNORECASE)
    size = None if m is None else _bytes(m.group(1), m.group(2))
    if size is None or size < 1:
        raise OptionError(
            f"{option}: expected a positive size such as 8G, 500M or 2000000 (a whole number of bytes), got '{text}'"
        )
    if size >= 2**63:  # as every integer option (rlverify.cli.main.int64)
        raise OptionError(f"{option}: {text.strip()} is out of range (a 64-bit integer of bytes)")
    return int(size)


def _bytes(number: str, unit: str) -> float | None:
    """``number`` (digits, maybe a fraction) times the power of 1024 of ``unit`` (``""``, K, M, G, T); exact when
    whole; None for a fraction of a byte without a unit."""
    scale = 1024 ** "_KMGT".index(unit.upper())
    size: float = int(number) * scale if number.isdigit() else float(number) * scale
    return None if not unit and isinstance(size, float) and not size.is_integer() else size


def run(args: argparse.Namespace) -> int:
    files = outputs(args, (".csv", ".npz", ".json", ".png"))
    if _is_experiment(args):
        if args.shield:
            raise OptionError("--shield: verify one property at a time (no sweep, no properties file)")
        return _run_experiment(args, files)
    _check_explain_options(args, files)
    target = resolve_target(args, "rlverify verify", property=args.property[0], needs_policy=args.mode != Mode.MONOLITHIC)
    target = apply_shield(target, args)
    prop = target.property
    assert prop is not None  # asked for: resolve parsed it
    require_threshold(args, prop.comparison is not None)
    grid = _explained_grid(args, target, files)  # refuse what cannot be explained before verifying
    options = exact_options(args, files)
    result = _verified(args, target, options, grid, files)
    print_warnings(result.warnings)
    for suffix in (".csv", ".npz"):
        if suffix in files:
            _write_states(files[suffix], result, suffix=suffix, force=args.force)
    if ".json" in files:
        write_json(files[".json"], result.to_json(), force=args.force)
    code = verdict_exit_code(args, result.satisfied)
    if args.json:
        print_envelope(args, result, exit_code=code, holds=result.satisfied)
    else:
        print_result(result)
        if result.explanation is not None:
            print_explanation(result.explanation)
    return code


def _explained_grid(args: argparse.Namespace, target: Target[Any], files: dict[str, Path]) -> Any:
    """The variable pairs ``--explain-map`` draws the paths on (None: none asked, or the pairs that move); the
    property refused here when it cannot be explained."""
    if args.explain is None:
        return None
    from rlverify.exact.explain import check_explainable, map_variables  # lazy: stormpy, start-up

    assert target.property is not None
    check_explainable(target.property)
    return map_variables(target.model.variables, args.explain_map) if ".png" in files else None


def _verified(args: argparse.Namespace, target: Target[Any], options: Any, grid: Any, files: dict[str, Path]) -> ExactResult:
    """The exact result (stamped), with ``--explain``'s most probable paths from the same chain."""
    from rlverify.exact.chain import policy_chain  # lazy: stormpy, start-up
    from rlverify.exact.verify import verify_exact  # lazy: the engine, --help start-up

    prop = target.property
    assert prop is not None
    # progress goes to stderr, so that --json output on stdout stays clean
    with status("verifying") as update:
        chain = None
        if args.explain is not None:  # one chain for the value and the paths (with the MDP it was induced on)
            assert target.policy is not None
            chain = policy_chain(target.model, prop, target.policy, options, keep_mdp=True, progress=update)
        result = verify_exact(target.model, prop, target.policy, options, chain=chain, progress=update)
    result = target.stamp(result, unavailable=args.unavailable)
    if args.explain is None:
        return result
    from rlverify.exact.explain import explain_paths, plot_paths  # lazy: the engine, --help start-up

    assert target.policy is not None
    with status("explaining") as update:
        explanation = explain_paths(
            target.model, prop, target.policy, args.explain, options, chain=chain, value=result.value, progress=update
        )
    explanation = target.stamp(explanation).with_provenance(policy=shown_policy(result.policy) or None)
    if ".png" in files:  # grid None: the pairs that move (rlverify.figures.path_pairs)
        plot_paths(explanation, files[".png"], grid, force=args.force)
    return dataclasses.replace(result, explanation=explanation)


def exact_options(args: argparse.Namespace, files: dict[str, Path]) -> Any:
    """The :class:`~rlverify.exact.options.ExactOptions` of ``verify``'s options."""

    return ExactOptions(
        mode=args.mode,
        strategy=args.strategy,
        unavailable=args.unavailable,
        numerics=args.numerics,
        precision=args.precision,
        max_states=args.max_states,
        max_memory=None if args.max_memory is None else parse_size(args.max_memory, "--max-memory"),
        max_work=_max_work(args.max_work),
        all_states=".csv" in files or ".npz" in files,
        chain_dir=args.chain_dir,
        chain_dir_force=args.force,
        export=args.export,
        export_force=args.force,
        backend=backend_from_args(args) if args.backend != "local" else None,
    )


def _is_experiment(args: argparse.Namespace) -> bool:
    """Several runs: more than one ``-p``, a properties file, or a constant sweep (``-c N=4:8``)."""
    given = args.property
    return (
        len(given) > 1 or any(p.lower().endswith(PROPERTY_FILE_SUFFIXES) for p in given) or bool(swept_names(args.constants))
    )


def _run_experiment(args: argparse.Namespace, files: dict[str, Path]) -> int:
    """Every property at every point of the sweep (:func:`rlverify.experiments.verify_experiments`): a table, and
    ``--out FILE.png`` the values against the swept constant."""
    from rlverify.experiments import experiment_figure, verify_experiments  # lazy: numpy, --help start-up

    _check_experiment_options(args, files)
    options = exact_options(args, files)
    with status("verifying") as update:
        result = verify_experiments(
            args.target,
            args.property,
            constants=args.constants,
            options=options,
            progress=update,
            env_kwargs=args.env_kwargs,
            **policy_kwargs(args),
        )
    thresholds = any(_threshold(r.result.property) for r in result.runs)
    require_threshold(args, thresholds)
    if ".png" in files:
        save_figure(experiment_figure(result), files[".png"], force=args.force, what="--out", dpi=120)
    print_warnings(result.warnings)
    if ".json" in files:
        write_json(files[".json"], result.to_json(), force=args.force)
    code = verdict_exit_code(args, result.holds) if thresholds else 0
    if args.json:
        print_envelope(args, result, exit_code=code, holds=result.holds)
    else:
        print_experiment(result)
    return code


def _check_experiment_options(args: argparse.Namespace, files: dict[str, Path]) -> None:
    """Refuse the options of one run (``--explain``, ``--export``, ``--chain-dir``, per-state files), a plot
    without a sweep and (``--fail-on-violation``) formulas without a threshold, before any work."""
    asked = (("--explain", args.explain), ("--export", args.export), ("--chain-dir", args.chain_dir))
    per_run = [o for o, value in asked if value is not None]
    per_run += [f"--out {files[s]}" for s in (".csv", ".npz") if s in files]
    if per_run:
        raise OptionError(f"{', '.join(per_run)}: one run at a time (this verify checks several properties or points)")
    if ".png" in files and not swept_names(args.constants):
        raise OptionError(f"--out {files['.png']}: plots a sweep; give one with -c NAME=START:END")
    _require_formula_threshold(args)


def _require_formula_threshold(args: argparse.Namespace) -> None:
    """``--fail-on-violation`` without a threshold refused before the work when every ``-p`` is a formula."""
    texts = [p for p in args.property if not p.lower().endswith(PROPERTY_FILE_SUFFIXES)]
    if len(texts) == len(args.property) and all(parse_structure(p).operator != "other" for p in texts):
        require_threshold(args, any(_threshold(p) for p in texts))  # formulas only: known before the work


def _threshold(text: str) -> bool:
    return parse_structure(text).comparison is not None


def print_experiment(result: Any) -> None:
    """The runs of an experiment as one table: constants, property, value, certified bracket, verdict."""
    from rich.table import Table

    t = Table(title=f"{result.model}: {len(result.runs)} runs", title_justify="left")
    if result.swept or any(r.constants for r in result.runs):
        t.add_column("constants")
    t.add_column("property")
    t.add_column("value", justify="right")
    t.add_column("bracket", justify="right")
    t.add_column("holds")
    for run in result.runs:
        r = run.result
        cells = [run.constants] if t.columns[0].header == "constants" else []
        what = f"{run.name}: {r.property}" if run.name else r.property
        bracket = f"[{r.lower:.6g}, {r.upper:.6g}]" if r.lower is not None and r.upper is not None else "—"
        verdict = "—" if not _threshold(r.property) else {True: "yes", False: "no", None: "undecided"}[r.satisfied]
        t.add_row(*cells, what, f"{r.value:.6g}", bracket, verdict)
    console.print(t)


def _max_work(value: float) -> int:
    if not (value >= 1) or value != value or value == float("inf") or not float(value).is_integer():
        raise OptionError(f"--max-work: expected a positive whole number of multiply-adds (e.g. 1e10), got {value:g}")
    if value >= 2**63:  # as every integer option (rlverify.cli.main.int64)
        raise OptionError(f"--max-work: {value:g} is out of range (a 64-bit integer of multiply-adds)")
    return int(value)


def _check_explain_options(args: argparse.Namespace, files: dict[str, Path]) -> None:
    """Refuse --explain settings that cannot work, before any model is built."""
    if args.explain is None:
        if args.explain_map is not None:
            raise OptionError("--explain-map draws the --explain paths: add --explain K")
        if ".png" in files:
            raise OptionError(f"--out {files['.png']}: verify draws a .png of the failure paths only: add --explain K")
        return
    from rlverify.exact.explain import check_count  # lazy: the engine, --help start-up

    check_count(args.explain)
    if args.chain_dir is not None:
        raise OptionError("--explain reads the policy's chain in memory: drop --chain-dir")
    if args.mode == Mode.MONOLITHIC:
        raise OptionError(
            "--explain needs a policy's chain: monolithic mode has no policy (Pmin/Pmax range over all "
            "schedulers); use --mode stochastic or deterministic"
        )
    if args.explain_map is not None and ".png" not in files:
        raise OptionError("--explain-map: add --out FILE.png to draw the paths")


def print_explanation(e: FailurePaths, *, max_actions: int = 4) -> None:
    """The most probable paths as one table each: state, the policy's distribution, the actions taken, p(step)."""
    share = f" = {100 * e.share:.3g}% of the value {e.value:.6g}" if e.share is not None else " (the value is 0)"
    bound = f" within {e.bound} steps" if e.bound is not None else ""
    console.print(
        line(
            styled(f"{len(e.paths)} most probable paths to the target{bound}", "bold"),
            f": together {e.covered:.6g}{share}",
            styled(f" (only {len(e.paths)} exist: all listed)", "dim") if e.exhausted else "",
        )
    )
    if e.note:
        warning(e.note)
    for rank, path in enumerate(e.paths, 1):
        console.print(_path_table(rank, path, max_actions))


def _path_table(rank: int, path: Any, max_actions: int) -> Any:
    """One path's table: each step's state (the first in full, then what changed), policy, actions, p(step)."""
    from rich.table import Table  # lazy: rich, --help start-up

    t = Table(title=f"path {rank}: probability {path.probability:.6g}, {path.length} steps", title_justify="left")
    t.add_column("step", justify="right")
    t.add_column("state")
    t.add_column("policy")
    t.add_column("taken (pi x T)")
    t.add_column("p(step)", justify="right")
    previous: dict[str, Any] = {}
    for i, step in enumerate(path.steps):
        changed = {k: v for k, v in step.state.items() if previous.get(k) != v} if previous else step.state
        state = " ".join(f"{k}={v}" for k, v in changed.items()) or "(unchanged)"
        previous = step.state
        probability = "" if step.probability is None else f"{step.probability:.4g}"
        t.add_row(str(i), state, _step_policy(step, max_actions), _step_taken(step, max_actions), probability)
    return t


def _step_policy(step: Any, max_actions: int) -> str:
    """The policy's distribution at a step (its likeliest actions), ``(forced)`` or ``—``."""
    if step.policy is None:
        return "—" if step.probability is None else "(forced)"
    top = sorted(step.policy.items(), key=lambda kv: -kv[1])
    policy = ", ".join(f"{a} {p:.3g}" for a, p in top[:max_actions] if p > 0)
    return policy + (", …" if sum(1 for _, p in top if p > 0) > max_actions else "")


def _step_taken(step: Any, max_actions: int) -> str | Text:
    """The actions a step takes (weight x transition probability), or ``target`` at its end."""
    if step.probability is None:
        return styled("target", "bold red")
    ranked = sorted(step.actions, key=lambda a: -a.probability)
    taken = " + ".join(f"{a.action or a.choice} {a.weight:.3g}x{a.transition:.3g}" for a in ranked[:max_actions])
    return taken + (" + …" if len(ranked) > max_actions else "")


#: how a result's numerics are described (``{precision}``: its relative precision)
GUARANTEE_WORDS = {
    Guarantee.SOUND: "sound (relative precision {precision:g})",
    Guarantee.DIRECT: "direct (no convergence heuristic; not guaranteed exact)",
    Guarantee.UNSOUND: "UNSOUND value iteration (convergence heuristic)",
}


def print_result(r: ExactResult) -> None:
    """A readable table of ``r``."""
    from rich.table import Table  # lazy: rich, --help start-up

    monolithic = r.mode == Mode.MONOLITHIC
    t = Table(title=f"rlverify exact — {r.mode}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("model", r.model)
    t.add_row("policy", shown_policy(r.policy) if r.policy else "— (all schedulers)")
    t.add_row("property", r.property)
    for row in _value_rows(r):
        t.add_row(*row)
    guarantee = GUARANTEE_WORDS[Guarantee(r.guarantee)].format(precision=r.precision)
    t.add_row("numerics", f"{guarantee}: {r.method}" if r.method else guarantee)
    if r.precision_note:
        t.add_row("precision", r.precision_note)
    t.add_row("chain" if not monolithic else "MDP", f"{r.states:,} states, {r.transitions:,} transitions")
    t.add_row("strategy", r.strategy)
    if not monolithic:
        stalled = styled("  (policy uses unavailable actions)", "yellow") if r.stalled_probability > 0 else ""
        t.add_row("stalled", line(f"{r.stalled_probability:.6g}", stalled))
    t.add_row("time", ", ".join(f"{k} {v:.3f}s" for k, v in r.timings.items() if v))
    console.print(t)


def _value_rows(r: ExactResult) -> list[tuple[str, str | Text]]:
    """The value (or Pmin/Pmax), its bounds and the verdict."""
    has_bounds = r.lower is not None and r.upper is not None
    rows: list[tuple[str, str | Text]]
    if r.mode == Mode.MONOLITHIC:
        rows = [("Rmin / Rmax" if r.property.lstrip().startswith("R") else "Pmin / Pmax", f"{r.pmin:.6g} / {r.pmax:.6g}")]
        if has_bounds:
            rows.append(("bounds", f"[{r.lower:.6g}, {r.upper:.6g}] (of {r.value:.6g}, the optimum asked for)"))
    else:
        rows = [("value", styled(f"{r.value:.6g}", "bold green"))]
        if has_bounds:
            rows.append(("bounds", f"[{r.lower:.6g}, {r.upper:.6g}]"))
    if r.satisfied is not None:
        rows.append(("satisfied", "yes" if r.satisfied else "no"))
    elif parse_structure(r.property).comparison is not None:
        undecided = line(styled("undecided", "yellow"), " (the certified bracket contains the threshold: see the warning)")
        rows.append(("satisfied", undecided))
    return rows


def _write_states(path: Path, r: ExactResult, *, suffix: str, force: bool) -> None:
    """Every state's value with its valuation, as ``suffix`` (``.csv`` or ``.npz``, whatever the case of ``path``'s)."""
    import numpy as np

    valuations = r.state_valuations
    assert r.state_values is not None and valuations is not None
    if r.state_values_min is not None:  # monolithic: Pmin and Pmax per state
        columns, values = ["pmin", "pmax"], [r.state_values_min, r.state_values]
    else:
        columns, values = ["value"], [r.state_values]
    if suffix == ".npz":
        arrays: dict[str, Any] = {
            "valuations": valuations,
            "variables": np.array(r.variables),
            **dict(zip(["values"] if len(values) == 1 else columns, values, strict=True)),
        }
        write_bytes(path, lambda f: np.savez_compressed(f, **arrays), force=force, what="--out")
    else:
        header = ",".join(list(r.variables) + columns)
        data = np.column_stack([valuations.astype(np.float64), *values])
        fmt = ["%d"] * len(r.variables) + ["%.17g"] * len(values)
        write_bytes(
            path, lambda f: np.savetxt(f, data, delimiter=",", header=header, comments="", fmt=fmt), force=force, what="--out"
        )


def shown_policy(name: str | None) -> str:
    """A policy's name for a table: shipped package files by their file name, user files as given."""
    if name and "rlverify/benchmarks/data/" in name.replace("\\", "/"):
        return f"{Path(name).name} (shipped)"
    return name or ""
