"""``rlverify simulate``: deep statistical model checking of a policy on a model or a benchmark."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlverify.benchmarks.registry import all_ids, spec
from rlverify.choices import BackendKind, Mode
from rlverify.cli.console import console, err_console
from rlverify.cli.options import (
    add_backend_options,
    add_env_kwargs,
    add_episode_options,
    add_outputs,
    add_policy,
    add_property,
    add_shield,
    add_system_timeout,
    add_target,
    add_unavailable,
    backend_from_args,
    emit,
    outputs,
    resolve_simulated_target,
    with_progress,
)
from rlverify.cli.output import add_fail_on_violation, require_threshold, verdict_exit_code
from rlverify.cli.rare import add_rare_arguments, refuse_rare_options, run_rare
from rlverify.cli.verify import shown_policy
from rlverify.errors import OptionError, StatisticsError
from rlverify.statistical.choices import METHODS, SUPPORTED_FORMS

if TYPE_CHECKING:
    from rich.table import Table


def register(sub: Any) -> argparse.ArgumentParser:

    p = sub.add_parser(
        "simulate",
        help="statistical verification: simulate the policy in lockstep (DSMC)",
        description="Estimate the probability of a path property under a policy by simulating many "
        "runs in lockstep, with a statistical guarantee.",
    )
    add_target(
        p, kinds="PRISM/JANI file, a benchmark id (PRISM, Racetrack, continuous), gym:ID, or a continuous system FILE.py:NAME"
    )
    add_env_kwargs(p)
    add_episode_options(p)
    add_property(
        p,
        required=False,
        forms=SUPPORTED_FORMS + "; a continuous system: default unsafe, P=? [F<=k "
        '"unsafe"] with k its horizon, from a uniformly random '
        "start state in its initial region",
    )
    add_policy(p)
    add_system_timeout(p)
    add_shield(p)
    p.add_argument(
        "--noise", type=float, help="Racetrack: probability that an acceleration fails (default 0.2; the same as -c noise=...)"
    )
    p.add_argument("--epsilon", type=float, default=0.01, help="half-width of the interval (default 0.01)")
    p.add_argument("--delta", type=float, default=0.05, help="error probability; confidence 1-delta (default 0.05)")
    p.add_argument(
        "--method",
        choices=METHODS,
        default=None,
        help="okamoto (default), adaptive, clopper-pearson, wilson, or sprt (implied by --sprt)",
    )
    p.add_argument(
        "--runs",
        type=whole_number,
        help="a fixed number of runs for clopper-pearson (the default with --runs) "
        "or wilson (a whole number; 1e6 is read as 1000000)",
    )
    p.add_argument(
        "--max-states",
        type=int,
        default=2_000_000,
        help="refuse to build a PRISM/JANI model with more states (default 2000000; the model is built "
        "explicitly before it is simulated)",
    )
    p.add_argument(
        "--run-limit",
        type=whole_number,
        default=100_000_000,
        help="refuse to plan more runs than this (default 100000000): the guard on --runs and on the "
        "runs --epsilon/--delta need",
    )
    p.add_argument("--sprt", type=float, metavar="THETA", help="test P >= THETA with Wald's SPRT")
    p.add_argument("--indifference", type=float, default=0.01, help="SPRT indifference half-width (default 0.01)")
    p.add_argument("--alpha", type=float, default=0.05, help="SPRT bound on wrongly rejecting P >= THETA")
    p.add_argument("--beta", type=float, default=0.05, help="SPRT bound on wrongly accepting P >= THETA")
    p.add_argument("--max-steps", type=int, default=10_000, help="maximal run length (default 10000)")
    p.add_argument(
        "--mode",
        choices=(Mode.STOCHASTIC.value, Mode.DETERMINISTIC.value),
        default="stochastic",
        help="sample actions from pi (stochastic, default) or take the argmax (deterministic); "
        "Q-value policies (DQN) are greedy in both",
    )
    add_unavailable(p)
    p.add_argument("--batch-size", type=int, default=20_000, help="runs simulated in lockstep (default 20000)")
    p.add_argument(
        "--discount",
        type=float,
        default=1.0,
        help="R=? [C<=k] on a gym:ID environment: the return sums discount**t * r_t (default 1: undiscounted)",
    )
    p.add_argument(
        "--reward-range",
        type=reward_range,
        metavar="LO:HI",
        help="R=? [C<=k]: every per-step reward lies in [LO, HI] (CartPole: 1:1): the interval is then Hoeffding's, "
        "a guarantee; without it, an asymptotic Student-t interval",
    )
    add_backend_options(p)

    add_rare_arguments(p)
    add_outputs(p, kinds=".json (the result)")
    add_fail_on_violation(p)
    p.set_defaults(run=run)
    return p


def whole_number(text: str) -> int:
    """A positive whole number below 2**63 from the command line: ``1000``, ``1_000`` or ``1e13`` (an integral value)."""
    try:
        value = int(text)
    except ValueError:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive whole number, got '{text}'") from None
        if not (x == x and abs(x) != float("inf")) or x != int(x):
            raise argparse.ArgumentTypeError(f"expected a positive whole number, got '{text}'") from None
        value = int(x)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got '{text}'")
    if value >= 2**63:  # as every integer option (rlverify.cli.main.int64); 1e30 is not exactly 10**30 either
        raise argparse.ArgumentTypeError(f"{text} is out of range (a 64-bit integer)")
    return value


def shown_interval(interval: tuple[float, float], digits: int = 6) -> str:
    """``[lo, hi]`` with ``digits`` decimals, rounded outward (the shown interval contains the computed one)."""
    scale = 10**digits
    lo, hi = math.floor(interval[0] * scale) / scale, math.ceil(interval[1] * scale) / scale
    return f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def constants_with_noise(constants: str | None, noise: float | None, target: str) -> str | None:
    """``--noise X`` as the benchmark parameter ``noise=X`` (one way to set it), refused (:class:`OptionError`) for a
    ``target`` without that parameter (the registry would call it an unknown model constant) or out of its range."""
    if noise is None:
        return constants
    if Path(target).suffix or "/" in target or ":" in target:
        raise OptionError("--noise applies to Racetrack benchmarks only (for a model file, set its constants with -c)")
    if target in all_ids():  # (an unknown name is the resolver's to refuse, with near names)
        _check_noise(target, noise)
    return f"{constants},noise={noise!r}" if constants else f"noise={noise!r}"


def _check_noise(benchmark_id: str, noise: float) -> None:
    """Refuse ``--noise`` for a benchmark without a ``noise`` parameter, or out of its range."""
    parameter = spec(benchmark_id).parameters.get("noise")
    if parameter is None:
        raise OptionError(f"--noise applies to Racetrack benchmarks only; {benchmark_id} has no noise parameter")
    low, high = parameter.low or 0.0, 1.0 if parameter.high is None else parameter.high
    if not (math.isfinite(noise) and low <= noise <= high):
        raise OptionError(f"--noise {noise:g}: the probability that an acceleration fails, in [{low:g}, {high:g}]")


def run(args: argparse.Namespace) -> int:
    from rlverify.statistical.verify import verify_statistical  # lazy: the engine, --help start-up

    files = outputs(args, (".json",))
    backend = backend_from_args(args)
    target = resolved(args)

    if args.rare is not None:  # rare events: importance splitting (rlverify.statistical.splitting)
        if backend.kind != BackendKind.LOCAL:
            raise OptionError("--backend ray is not supported with --rare (importance splitting runs in this process)")
        return run_rare(args, target)
    refuse_rare_options(args)
    if target.property.operator == "R":
        return run_return(args, target, backend, files)
    if args.discount != 1.0 or args.reward_range is not None:
        raise OptionError("--discount and --reward-range apply to expected returns (R=? [C<=k] on a gym:ID environment)")
    require_threshold(
        args,
        args.sprt is not None or target.property.comparison is not None,
        "or --sprt THETA, which tests P >= THETA",
    )
    options = statistical_options(args, backend)
    result = with_progress(
        "simulating",
        err_console,
        lambda progress: verify_statistical(target.model, target.property, target.policy, options, progress=progress),
    )
    result = target.stamp(result, unavailable=args.unavailable)
    code = verdict_exit_code(args, result.satisfied)
    if not emit(result, args, files, exit_code=code, holds=result.satisfied):
        console.print(render(result, args))
    return code


def run_return(args: argparse.Namespace, target: Any, backend: Any, files: Any) -> int:
    """``R=? [C<=k]`` on a Gymnasium environment: the expected return (statistical.returns)."""
    from rlverify.statistical.returns import estimate_return  # lazy: the engine, --help start-up

    if args.sprt is not None or args.method in ("sprt", "adaptive"):
        raise OptionError("--sprt/--method: an expected return is estimated from a fixed number of episodes (--runs)")
    options = statistical_options(args, backend)
    result = with_progress(
        "simulating",
        err_console,
        lambda progress: estimate_return(
            target.model,
            target.property,
            target.policy,
            options,
            discount=args.discount,
            reward_range=args.reward_range,
            progress=progress,
        ),
    )
    result = target.stamp(result, unavailable=args.unavailable)
    code = verdict_exit_code(args, result.satisfied)
    if not emit(result, args, files, exit_code=code, holds=result.satisfied):
        console.print(render_return(result))
    return code


def reward_range(text: str) -> tuple[float, float]:
    """``LO:HI`` from the command line: two finite numbers, ``LO <= HI``."""
    lo, sep, hi = text.partition(":")
    try:
        low, high = float(lo), float(hi)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO:HI (two numbers, e.g. 0:1), got '{text}'") from None
    if not sep or not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise argparse.ArgumentTypeError(f"expected LO:HI with finite LO <= HI (e.g. 0:1), got '{text}'")
    return low, high


def render_return(result: Any) -> Table:
    """A rich table of a :class:`~rlverify.statistical.ReturnResult`."""
    from rich.table import Table

    from rlverify.results import outward_pair  # lazy: results (numpy), not for --help

    table = Table(title=result.property, show_header=False)
    table.add_row("model", result.model)
    table.add_row("policy", f"{shown_policy(result.policy)} ({result.mode})")
    if result.verdict is not None:
        table.add_row(
            "satisfied",
            f"{result.verdict} (R {result.comparison} {result.threshold!r}, from the interval at {result.confidence:.1%})",
        )
    summed = f'info["{result.reward}"]' if result.reward else "reward"
    table.add_row("expected return", f"{result.estimate:.6g} (sum of {summed}, discount {result.discount:g})")
    how = (
        f"Hoeffding, rewards in [{result.reward_range[0]:g}, {result.reward_range[1]:g}]"
        if result.method == "hoeffding"
        else "Student t: asymptotic, not a guarantee (give --reward-range)"
    )
    table.add_row("interval", f"{outward_pair(*result.interval)} at {result.confidence:.1%} ({how})")
    table.add_row("std", f"{result.std:.6g}")
    table.add_row(
        "episodes",
        f"{result.runs:,} ({result.counted:,} counted, {result.truncated:,} truncated by the time limit, "
        f"{result.cut:,} still open after {result.max_steps:,} steps)",
    )
    table.add_row("seed", str(result.seed))
    table.add_row(
        "time",
        f"{result.timings['total']:.2f} s ({result.decisions:,} decisions, {result.timings['decisions_per_second']:,.0f}/s)",
    )
    return table


def resolved(args: argparse.Namespace) -> Any:
    """The target, its policy (under ``--shield``) and its property (:func:`rlverify.resolve.resolve_simulated`)."""
    constants = constants_with_noise(args.constants, args.noise, args.target)
    return resolve_simulated_target(args, "rlverify simulate", constants=constants)


def statistical_options(args: argparse.Namespace, backend: Any) -> Any:
    """The :class:`~rlverify.statistical.StatisticalOptions` of the command line (``--sprt`` implies the SPRT,
    ``--runs`` alone Clopper-Pearson)."""
    from rlverify.statistical.engine import SimulationOptions  # lazy: the engine, --help start-up
    from rlverify.statistical.verify import StatisticalOptions  # lazy: the engine, --help start-up

    if args.sprt is not None and args.method not in (None, "sprt"):
        raise StatisticsError(f"--sprt runs Wald's sequential test; it cannot be combined with --method {args.method}")
    method = "sprt" if args.sprt is not None else (args.method or "okamoto")
    if args.runs is not None and args.method is None and args.sprt is None:
        method = "clopper-pearson"  # a fixed number of runs: the exact interval
    return StatisticalOptions(
        method=method,
        epsilon=args.epsilon,
        delta=args.delta,
        runs=args.runs,
        threshold=args.sprt,
        run_limit=args.run_limit,
        max_states=args.max_states,
        indifference=args.indifference,
        alpha=args.alpha,
        beta=args.beta,
        simulation=SimulationOptions(
            mode=args.mode, max_steps=args.max_steps, seed=args.seed, batch_size=args.batch_size, unavailable=args.unavailable
        ),
        backend=backend,
    )


def render(result: Any, args: argparse.Namespace) -> Table:
    """A rich table of a :class:`~rlverify.statistical.StatisticalResult`."""
    from rich.table import Table

    method = result.method
    table = Table(title=result.property, show_header=False)
    table.add_row("model", result.model)
    table.add_row("policy", f"{shown_policy(result.policy)} ({result.mode})")
    if result.decision is not None or method == "sprt":
        verdict = {
            None: "no decision",
            "H0": f"P >= {result.threshold!r} (accept H0)",
            "H1": f"P < {result.threshold!r} (accept H1)",
        }[result.decision]
        table.add_row("SPRT", f"{verdict}; alpha={args.alpha:g}, beta={args.beta:g}, indifference={args.indifference:g}")
    if result.verdict is not None:
        how = "by the SPRT" if method == "sprt" else f"from the interval at {result.confidence:.1%} confidence"
        table.add_row("satisfied", f"{result.verdict} (P {result.comparison} {result.threshold!r}, {how})")
    table.add_row("estimate", f"{result.estimate:.6f}")
    if method == "sprt":
        table.add_row(
            "interval", f"{shown_interval(result.interval)} (informative only: Clopper-Pearson after a sequential stop)"
        )
    else:
        table.add_row("interval", f"{shown_interval(result.interval)} at {result.confidence:.1%} confidence ({result.method})")
    table.add_row("runs", f"{result.runs:,} ({result.successes:,} satisfied)")
    table.add_row("undecided", f"{result.undecided:,} (after {result.max_steps:,} steps)")
    table.add_row("stalled", f"{result.stalled:,}")
    if result.hopeless:
        table.add_row(
            "decided by graph analysis",
            f"{result.hopeless:,} runs reached a state from which no policy satisfies the property (counted false at once)",
        )
    table.add_row("seed", str(result.seed))
    table.add_row(
        "time",
        f"{result.timings['total']:.2f} s ({result.decisions:,} decisions, {result.timings['decisions_per_second']:,.0f}/s)",
    )
    return table
