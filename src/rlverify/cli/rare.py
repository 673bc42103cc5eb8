"""``rlverify simulate --rare splitting``: the options and output of rare-event estimation (a thin layer over
:func:`rlverify.statistical.splitting.verify_splitting`)."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from rlverify.cli.console import console, err_console
from rlverify.cli.options import emit, outputs, with_progress
from rlverify.cli.verify import shown_policy
from rlverify.errors import OptionError
from rlverify.statistical.choices import RARE_METHODS

if TYPE_CHECKING:
    from rich.table import Table

#: plain-simulation options that --rare does not use (it would silently ignore them otherwise)
_PLAIN_ONLY = {"method": None, "runs": None, "sprt": None, "epsilon": 0.01, "run_limit": 100_000_000}


def add_rare_arguments(p: argparse.ArgumentParser) -> None:
    """``--rare``, ``--importance``, ``--levels``, ``--effort``, ``--repetitions``."""

    g = p.add_argument_group("rare events (importance splitting)")
    g.add_argument(
        "--rare",
        choices=RARE_METHODS,
        help="estimate a rare probability by importance splitting instead of plain simulation: splitting "
        "(fixed effort) or restart (RESTART) "
        "(P=? [F phi], [F<=k phi], [phi1 U phi2], [phi1 U<=k phi2]); the interval is a Student-t "
        "interval over independent repetitions at confidence 1-delta",
    )
    g.add_argument(
        "--importance",
        metavar="EXPR|auto",
        help="importance function over the state variables/features, higher = closer to the target "
        "(e.g. '-abs(x-ox)-abs(y-oy)'), or auto (explicit models: minus the graph distance to the "
        "target; default)",
    )
    g.add_argument("--levels", metavar="L1,L2,...", help="importance thresholds, increasing (default: chosen by a pilot run)")
    g.add_argument(
        "--effort", type=int, help="runs per level and repetition; restart: main trials per repetition (default 1000)"
    )
    g.add_argument("--repetitions", type=int, help="independent repetitions for the interval (default 20)")


def refuse_rare_options(args: argparse.Namespace) -> None:
    """Splitting options without ``--rare`` would be ignored: refuse them."""
    given = [f"--{k}" for k in ("importance", "levels", "effort", "repetitions") if getattr(args, k, None) is not None]
    if given:
        raise OptionError(f"{', '.join(given)} only apply to rare-event estimation: add --rare splitting")


def parse_levels(text: str | None) -> tuple[float, ...] | None:
    """``--levels 1,2,3`` as floats, or an :class:`OptionError` naming the bad item."""
    if text is None:
        return None
    out = []
    for item in text.split(","):
        try:
            out.append(float(item))
        except ValueError:
            raise OptionError(
                f"--levels: '{item.strip()}' is not a number; expected increasing thresholds like '2,4,6'"
            ) from None
    return tuple(out)


def run_rare(args: argparse.Namespace, target: Any) -> int:
    """Estimate with :func:`~rlverify.statistical.splitting.verify_splitting` and print the result."""
    from rlverify.models.gym_simulator import GymSimulator  # lazy: the simulator's types
    from rlverify.statistical.engine import SimulationOptions  # lazy: the engine, --help start-up
    from rlverify.statistical.splitting import SplittingOptions, verify_splitting  # lazy: the engine, --help start-up

    if isinstance(target.model, GymSimulator):
        raise OptionError(
            f"--rare: importance splitting restarts runs from states saved along the way; {target.name}'s state cannot "
            "be saved and restored in general (Gymnasium has no such API; deepcopy of an environment need not "
            "reproduce it, and Box2D/MuJoCo hold native state): simulate without --rare (more --runs for a rarer event)"
        )
    if getattr(args, "fail_on_violation", False):
        raise OptionError(
            "--fail-on-violation: a --rare estimate gives no verdict on a threshold (its interval is over repetitions); "
            "drop one of them"
        )
    given = [f"--{k.replace('_', '-')}" for k, default in _PLAIN_ONLY.items() if getattr(args, k, default) != default]
    if given:
        raise OptionError(
            f"--rare splitting chooses its own runs and interval: {', '.join(given)} do not apply "
            "(use --effort, --repetitions, --delta)"
        )
    files = outputs(args, (".json",))
    options = SplittingOptions(
        method=args.rare,
        importance="auto" if args.importance is None else args.importance,
        levels=parse_levels(args.levels),
        effort=1000 if args.effort is None else args.effort,
        repetitions=20 if args.repetitions is None else args.repetitions,
        delta=args.delta,
        simulation=SimulationOptions(
            mode=args.mode, max_steps=args.max_steps, seed=args.seed, batch_size=args.batch_size, unavailable=args.unavailable
        ),
    )
    result = with_progress(
        "splitting",
        err_console,
        lambda progress: verify_splitting(target.model, target.property, target.policy, options, progress=progress),
    )
    result = target.stamp(result, unavailable=args.unavailable)
    if not emit(result, args, files):
        console.print(render(result))
    return 0


def render(result: Any) -> Table:
    """A rich table of a :class:`~rlverify.statistical.splitting.SplittingResult`."""
    from rich.table import Table

    table = Table(title=result.property, show_header=False)
    table.add_row("model", result.model)
    table.add_row("policy", f"{shown_policy(result.policy)} ({result.mode})")
    table.add_row("estimate", f"{result.estimate:.4g}")
    table.add_row(
        "interval",
        f"[{result.interval[0]:.4g}, {result.interval[1]:.4g}] at {result.confidence:.1%} confidence ({result.interval_kind})",
    )
    rel = "inf" if not math.isfinite(result.relative_error) else f"{result.relative_error:.3f}"
    table.add_row("relative error", f"{rel} (standard error / estimate)")
    per = "runs per level" if result.splits is None else "main trials"
    table.add_row("method", f"{result.method}: {result.repetitions} repetitions x {result.effort:,} {per}")
    table.add_row("importance", result.importance)
    shown = ", ".join(f"{x:g}" for x in result.levels) or "none (one stage to the target)"
    table.add_row("levels", f"{shown} ({result.levels_from})")
    for row in _level_rows(result):
        table.add_row(*row)
    if result.zero_repetitions:
        table.add_row("zero repetitions", f"{result.zero_repetitions} of {result.repetitions} (biased low in practice)")
    table.add_row("undecided / stalled", f"{result.undecided:,} / {result.stalled:,} stage runs")
    if result.hopeless:
        table.add_row(
            "decided by graph analysis",
            f"{result.hopeless:,} stage runs reached a state from which no "
            "policy satisfies the property (counted false at once)",
        )
    table.add_row("seed", str(result.seed))
    table.add_row("decisions", f"{result.decisions:,} (+ {result.pilot_decisions:,} in the pilot)")
    table.add_row("time", f"{result.timings['total']:.2f} s ({result.timings['decisions_per_second']:,.0f} decisions/s)")
    return table


def _level_rows(result: Any) -> list[tuple[str, str]]:
    """Each level's probability (fixed effort), or the splits and up-crossings (fixed splitting)."""
    if result.splits is None:
        return [("per level", ", ".join(f"{p:.3g}" for p in result.level_probabilities))]
    return [
        ("splits", ", ".join(str(k) for k in result.splits) or "none"),
        ("up-crossings, hits", ", ".join(f"{h:,}" for h in result.level_hits)),
    ]
