"""``rlverify abstract``: a sound upper bound by interval-MDP abstraction (continuous benchmarks)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlverify.abstraction.settings import DEFAULT_TIME_BUDGET
from rlverify.cli.console import console, err_console, print_warnings, progress_bar
from rlverify.cli.options import (
    add_backend_options,
    add_outputs,
    add_policy,
    add_system_timeout,
    add_target,
    backend_from_args,
    outputs,
    resolve_target,
    write_json,
)
from rlverify.cli.output import add_fail_on_violation, print_envelope, require_threshold, verdict_exit_code
from rlverify.errors import InputFileError, OptionError

if TYPE_CHECKING:
    import numpy as np


def register(sub: Any) -> argparse.ArgumentParser:
    """Add the ``abstract`` subcommand to ``sub`` (an argparse subparsers object)."""

    p = sub.add_parser(
        "abstract",
        help="sound upper bound by interval-MDP abstraction (continuous systems)",
        description="Build a k-step interval-MDP abstraction over template polyhedra and report a sound "
        "upper bound on the probability of reaching an unsafe state within k steps.",
    )
    add_target(
        p,
        kinds="continuous benchmark id (bouncing-ball-v1, acc-v1, pendulum-v1), or path.py:NAME, a system "
        "declared in a Python file (see rlverify.models.continuous.declared; -c K=V sets its constants)",
    )
    add_policy(p, default_note="default: the benchmark's 'ppo'; the abstraction bounds ONNX/TorchScript ReLU networks")
    add_system_timeout(p)
    p.add_argument("--horizon", "-k", type=int, help="number of steps k (default: the benchmark's)")
    p.add_argument(
        "--domain",
        choices=("box", "octagon", "template", "auto"),
        default="box",
        help="abstract domain (auto: box axes plus directions chosen from the dynamics, the unsafe set's normals and "
        "sampled successors; shown in the output)",
    )
    p.add_argument(
        "--template",
        metavar="FILE",
        help="directions for --domain template: JSON list of rows or CSV "
        "(one direction per line), each used in both signs; they must "
        "bound the state space (include the box rows). Without it, the "
        "system's documented default directions (shown in the output); a "
        "system without defaults needs it",
    )
    p.add_argument("--phi", type=float, default=0.1, help="maximum probability spread per part, in (0, 1] (default 0.1)")
    p.add_argument("--containment", action="store_true", help="merge successors contained in visited abstract states")
    p.add_argument(
        "--refine-where-action-matters",
        action="store_true",
        help="refine only states where the action can change the successor (faster, still sound, coarser; "
        "default: refine every state, as the paper)",
    )
    p.add_argument("--initial", help="initial region name (e.g. 'small' / 'large' for the bouncing ball)")
    p.add_argument(
        "--milp",
        choices=("auto", "always", "never"),
        default="auto",
        help="MILP use: auto (only where splitting cannot help), always (as the paper), never",
    )
    p.add_argument("--samples", type=int, default=400, help="hit-and-run samples per refinement step")
    p.add_argument(
        "--max-states",
        type=int,
        default=200_000,
        help="at most this many abstract states (beyond: counted as failing in the upper bound, safe in the lower; "
        "a warning says so)",
    )
    add_backend_options(p)
    add_outputs(
        p,
        kinds=".png (initial parts by bound and action probability), .json (the result)",
        seed_help="seed of the refinement sampling (the bound is sound for any; default 0)",
    )
    p.add_argument("--out-png", dest="out", action="append", help=argparse.SUPPRESS)  # the former spelling of --out
    p.add_argument(
        "--threshold",
        type=float,
        metavar="B",
        help="check P(F<=k unsafe) <= B from every initial state: holds when the sound upper bound is <= B, "
        "violated when a lower bound on the worst case (a witness start state, or the sound lower bound of a part) "
        "is above B, undecided otherwise; with --gap/--time-budget, refinement stops once it is decided",
    )
    p.add_argument(
        "--gap",
        type=float,
        metavar="G",
        help="refine by the gap: cut the initial region into cells (where upper - lower matters most) until the "
        "sound upper bound is within G of the best lower bound on the worst case (e.g. 0.02); always returns the "
        "best bounds so far",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        metavar="S",
        help="seconds for the whole run (refinement by the gap stops and returns its best bounds; implies refinement); "
        f"default {DEFAULT_TIME_BUDGET:g}, without refinement: after it no new abstract state is expanded (sound, "
        "looser bounds; a warning names this option)",
    )
    p.add_argument("--max-cells", type=int, default=512, help="refinement by the gap: at most this many initial cells")
    p.add_argument(
        "--witness",
        choices=("auto", "enumeration", "simulation", "none"),
        default="auto",
        help="how to find a start state that bounds the worst case from below: every action sequence "
        "(enumeration, exact), simulation (one-sided confidence bound), auto (enumeration when |A|^k is small)",
    )
    p.add_argument(
        "--witness-runs", type=int, default=10_000, help="simulation witness: fresh runs from the chosen start state"
    )
    p.add_argument(
        "--witness-confidence",
        type=float,
        default=0.99,
        help="simulation witness: confidence of its lower bound (default 0.99)",
    )
    add_fail_on_violation(p)
    p.set_defaults(run=run)
    return p


def read_template(path: str) -> np.ndarray:
    """Direction matrix from a JSON (``[[1, 0.5], ...]`` or ``{"directions": [...]}``) or CSV file."""
    import numpy as np  # lazy: numpy, --help start-up

    file = Path(path)
    text = _template_text(file)
    try:
        arr = np.asarray(_template_rows(file, text), dtype=np.float64)
    except RecursionError:
        raise InputFileError(f"{file}: nested too deeply; expected rows of numbers, one direction per row") from None
    except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise InputFileError(
            f"{file}: not a direction matrix ({exc.__class__.__name__}: {exc}); expected rows of "
            "numbers, one direction per row"
        ) from None
    if arr.ndim != 2 or arr.size == 0:
        raise InputFileError(f"{file}: expected a matrix with one direction per row, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise InputFileError(f"{file}: every direction must be finite numbers (found NaN or infinity)")
    return arr


def _template_text(file: Path) -> str:
    """The template file's text (UTF-8), or an :class:`InputFileError` saying why it cannot be read."""
    if not file.is_file():
        raise InputFileError(f"{file}: template file not found")
    try:
        return file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"{file}: not a text file ({exc.reason} at byte {exc.start}); expected JSON or CSV directions"
        ) from None
    except OSError as exc:
        raise InputFileError(f"{file}: cannot read the template file ({exc.strerror})") from None


def _template_rows(file: Path, text: str) -> Any:
    """The rows of a JSON (a list, or ``{"directions": ...}``) or CSV template (``#`` comments, ``;`` or ``,``)."""
    if file.suffix.lower() == ".json":
        data = json.loads(text)
        return data["directions"] if isinstance(data, dict) else data
    return [
        [float(v) for v in line.replace(";", ",").split(",") if v.strip()]
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def run(args: argparse.Namespace) -> int:
    from rlverify.targets import SystemTarget  # lazy: numpy, --help start-up

    files = outputs(args, (".png", ".json"))
    backend = backend_from_args(args)
    template = _checked_template(args)
    require_threshold(args, args.threshold is not None, "here: --threshold B, for P(F<=k unsafe) <= B")
    target = resolve_target(args, "rlverify abstract", kinds=(SystemTarget,))
    system, policy = target.model, target.policy
    if policy is None:  # resolve refuses a missing policy (needs_policy is set)
        raise RuntimeError(f"resolve returned no policy for {args.target}")
    params = dict(target.benchmark.parameters) if target.benchmark is not None else dict(getattr(system, "constants", {}))
    options = _abstraction_options(args, system, template, backend)
    result = target.stamp(_abstract(system, policy, options))
    holds = threshold_verdict(result, args.threshold)
    if args.threshold is not None and holds is None:
        result = _undecided(result, args.threshold, options.horizon)
    code = verdict_exit_code(args, holds)
    print_warnings(result.warnings)
    if ".png" in files:
        from rlverify.abstraction.plots import plot_result  # lazy: matplotlib

        plot_result(result, files[".png"], force=args.force)
    if ".json" in files:
        write_json(files[".json"], result.to_json(), force=args.force)
    if args.json:
        print_envelope(args, result, exit_code=code, holds=holds)
        return code
    _print_result(result, options, args.threshold, params)
    return code


def _checked_template(args: argparse.Namespace) -> np.ndarray | None:
    """``--template``'s directions (None without one), after refusing bad settings of the options, naming each."""
    if args.template and args.domain != "template":
        raise OptionError("--template is used with --domain template")
    template = read_template(args.template) if args.template else None
    if args.threshold is not None and not 0 <= args.threshold <= 1:
        raise OptionError(f"--threshold: expected a probability in [0, 1], got {args.threshold:g}")
    _check_two_sided(args)
    return template


def _undecided(result: Any, threshold: float, horizon: int) -> Any:
    """``result`` with the warning that ``P(F<=k unsafe) <= threshold`` is undecided, and the way to decide it."""
    return result.with_provenance(
        warnings=[
            *result.warnings,
            f"P(F<={horizon} unsafe) <= {threshold:g} is undecided: the sound upper bound "
            f"{result.upper_bound:.6g} is above it and no lower bound on the worst case is (--gap / --time-budget "
            "refine until it is decided; a smaller --phi or --domain octagon/template may tighten the bound)",
        ]
    )


def _abstraction_options(args: argparse.Namespace, system: Any, template: np.ndarray | None, backend: Any) -> Any:
    """The :class:`~rlverify.abstraction.AbstractionOptions` of the command line (horizon: the system's by default)."""
    from rlverify.abstraction import AbstractionOptions  # lazy: the abstraction engine

    return AbstractionOptions(
        horizon=args.horizon if args.horizon is not None else system.horizon,
        domain=args.domain,
        template=None if template is None else tuple(map(tuple, template.tolist())),
        phi=args.phi,
        containment=args.containment,
        initial=args.initial,
        milp=args.milp,
        samples=args.samples,
        max_states=args.max_states,
        seed=args.seed,
        refine_everywhere=not args.refine_where_action_matters,
        backend=backend,
        gap=args.gap,
        threshold=args.threshold,
        time_budget=args.time_budget,
        max_cells=args.max_cells,
        witness=args.witness,
        witness_runs=args.witness_runs,
        witness_confidence=args.witness_confidence,
    )


def _abstract(system: Any, policy: Any, options: Any) -> Any:
    """:func:`~rlverify.abstraction.verify_abstraction` under a progress bar on stderr (transient; shown only when
    stderr is a terminal, as for simulate), so that --json output on stdout stays clean; -v also logs one line per
    depth."""
    from rlverify.abstraction import AbstractionProgress, verify_abstraction  # lazy: the abstraction engine

    with progress_bar("abstracting: depth", detail=True, target=err_console) as bar:
        task = bar.add_task("", total=options.horizon)

        def show(p: AbstractionProgress) -> None:
            done = p.depth if p.stage in ("expanded", "solving") else p.depth - 1
            bar.update(
                task,
                completed=done,
                description=f"{p.stage}: frontier {p.frontier:,}, {p.states:,} states explored, {p.polyhedra:,} polyhedra",
            )

        return verify_abstraction(system, policy, options, progress=show)


def _print_result(result: Any, options: Any, threshold: float | None, params: dict[str, Any]) -> None:
    """The result as a table, and the initial parts with the highest bounds."""
    from rich.table import Table  # lazy: rich, --help start-up

    shown = result.model + (" (" + ", ".join(f"{k}={v:g}" for k, v in params.items()) + ")" if params else "")
    table = Table(title=f"{shown}: P(F<={options.horizon} unsafe) — {result.guarantee}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for r in _result_rows(result, options, threshold):
        table.add_row(*r)
    console.print(table)
    worst = sorted(result.parts, key=lambda p: -p.bound)[:5]
    if worst and worst[0].bound > 0:
        pt = Table(title="initial parts with the highest bounds (template bounds lo..hi per axis)")
        pt.add_column("bound", justify="right")
        pt.add_column("part")
        for p in worst:
            pt.add_row(f"{p.bound:.4g}", ", ".join(f"[{a:.4g}, {b:.4g}]" for a, b in zip(p.lo, p.hi, strict=True)))
        console.print(pt)


def _result_rows(result: Any, options: Any, threshold: float | None) -> list[tuple[str, str]]:
    t = result.timings
    return [
        ("upper bound (all initial states)", f"{result.upper_bound:.6g} (sound)"),
        *two_sided_rows(result),
        *([(f"P <= {threshold:g}", _verdict_text(result.verdict))] if threshold is not None else []),
        ("domain / phi / containment", f"{options.domain} / {options.phi:g} / {'on' if options.containment else 'off'}"),
        ("refinement", "every state" if options.refine_everywhere else "where the action matters"),
        *_template_rows_shown(result, options),
        ("initial parts", str(len(result.parts))),
        ("polyhedra (refined parts)", str(result.n_polyhedra)),
        ("containment merges / identical successors shared", f"{result.n_containment_merges} / {result.n_shared_successors}"),
        ("states not refined (safe last step, or the action cannot matter)", str(result.n_unrefined_states)),
        ("IMDP states / choices / transitions", f"{result.n_abstract_states} / {result.n_choices} / {result.n_transitions}"),
        ("parts above phi (min size) / MILP parts", f"{result.n_unresolved_parts} / {result.n_milp_parts}"),
        (
            "time: bounds / refinement / successors / solving",
            f"{t['bounds']:.1f} / {t['refinement']:.1f} / {t['successors']:.1f} / {t['solving']:.2f} s",
        ),
        ("time: total", f"{t['total']:.1f} s"),
    ]


def _template_rows_shown(result: Any, options: Any) -> list[tuple[str, str]]:
    """The template's directions (a template or automatic domain only)."""
    if options.domain not in ("template", "auto"):
        return []
    how = (
        " (chosen automatically)"
        if options.domain == "auto"
        else " (the system's default)"
        if options.template is None
        else ""
    )
    return [
        (
            "template directions" + how,
            "; ".join("(" + ", ".join(f"{x:.4g}" for x in row) + ")" for row in result.template_axes),
        )
    ]


def _check_two_sided(args: argparse.Namespace) -> None:
    """Refuse bad --gap, --time-budget, --max-cells and witness settings, naming the option."""
    import math

    if args.gap is not None and not 0 <= args.gap <= 1:
        raise OptionError(f"--gap: expected a probability in [0, 1], got {args.gap:g}")
    if args.time_budget is not None and not (0 < args.time_budget < math.inf):
        raise OptionError(f"--time-budget: expected a positive finite number of seconds, got {args.time_budget:g}")
    if args.max_cells <= 0:
        raise OptionError(f"--max-cells: expected a positive number of cells, got {args.max_cells}")
    if args.witness_runs <= 0:
        raise OptionError(f"--witness-runs: expected a positive number of runs, got {args.witness_runs}")
    if not 0 < args.witness_confidence < 1:
        raise OptionError(f"--witness-confidence: expected a number in (0, 1), got {args.witness_confidence:g}")


def threshold_verdict(result: Any, threshold: float | None) -> bool | None:
    """Whether ``P(F<=k unsafe) <= threshold`` holds: True when the sound upper bound is at most the threshold, False
    when a lower bound on the worst case is above it (the result's verdict "unsafe (witness, ...)"), None otherwise
    (undecided) and without a threshold."""
    if threshold is None:
        return None
    if result.upper_bound <= threshold:
        return True
    return False if result.unsafe else None


def _verdict_text(verdict: str | None) -> str:
    return {
        "safe": "holds (the sound upper bound is below)",
        "undecided at budget": "undecided (see the warning)",
    }.get(verdict or "", f"violated: {verdict} (a start state fails with a larger probability)")


def two_sided_rows(result: Any) -> list[tuple[str, str]]:
    """The lower bound, the worst witness, the gap and the refinement of ``result``, each labelled with its guarantee."""
    rows = []
    if result.lower_all is not None:
        rows.append(
            (
                "lower bound (all initial states)",
                f"{result.lower_all:.6g} (sound: every start state fails at least this often)",
            )
        )
    w = result.worst_witness
    if w is not None:
        at = ", ".join(f"{name}={x:.6g}" for name, x in zip(result.variables, w.state, strict=False))
        rows.append(("worst witness", f"{w.lower:.6g} at ({at}); {w.guarantee}"))
    if result.gap is not None:
        rows.append(("gap (upper - best lower bound on the worst case)", f"{result.gap:.6g}"))
    if result.stopped is not None:
        rows.append(("refinement by the gap", f"{result.cells:,} cells; stopped: {result.stopped}"))
    return rows
