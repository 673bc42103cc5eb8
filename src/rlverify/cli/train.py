"""``rlverify train BENCHMARK``: train a policy on a registered benchmark and save it as a verifier-ready ONNX file.

Dispatch by benchmark kind: PRISM benchmarks -> :func:`rlverify.training.discrete.train_discrete`
(PPO); continuous benchmarks (``bouncing-ball-v1``, ``acc-v1``, ``pendulum-v1``) ->
:func:`rlverify.training.continuous.train_continuous` (PPO); native Racetrack benchmarks ->
:func:`rlverify.training.dqn.train_racetrack` (DQN). All need the ``torch`` extra.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlverify.benchmarks.registry import BenchmarkKind, parse_parameters, spec
from rlverify.cli.console import console, err_console, status
from rlverify.cli.options import add_force, add_json, add_property, add_seed
from rlverify.cli.output import print_envelope
from rlverify.errors import OptionError, TrainCommandError
from rlverify.files import check_target

#: The engines and stop conditions of --verify-mode and --stop-when (as rlverify.training.verifying has them; kept
#: here so that the parser imports no engine).
VERIFY_MODES = ("exact", "statistical")
STOP_WHEN = ("holds", "violated")

#: Benchmarks trained by ``rlverify.training.continuous`` (registered by ``rlverify.benchmarks.continuous``).
ALGORITHMS = {BenchmarkKind.PRISM: "ppo", BenchmarkKind.CONTINUOUS: "ppo", BenchmarkKind.NATIVE: "dqn"}


def register(sub: Any) -> None:
    """Add the ``train`` subcommand."""
    p = sub.add_parser(
        "train",
        help="train a policy on a benchmark (needs the torch extra)",
        description="Train a policy on a registered benchmark and write a self-describing ONNX file "
        "(features, actions, training metadata and seed) that 'rlverify verify' loads.",
    )
    p.add_argument("benchmark", help="benchmark id, e.g. freeway-v1, avoid-v1, acc-v1, racetrack-barto-small-v1")
    p.add_argument(
        "--algo",
        choices=("ppo", "dqn"),
        default=None,
        help="training algorithm (default: ppo for PRISM and continuous benchmarks, dqn for Racetrack)",
    )
    p.add_argument("--steps", type=int, help="environment steps (default: the benchmark's training setup)")
    add_seed(p, "training seed (default 0): the same seed gives the same network")
    p.add_argument("--out", required=True, help="output .onnx file (never replaced without --force)")
    add_force(p, "overwrite an existing --out file")
    p.add_argument("--hidden", help="hidden layer widths, e.g. 64,64 (default: the benchmark's setup)")
    p.add_argument("--constants", "-c", help="benchmark parameters, e.g. xMax=4,yMax=4,slickness=0.1")
    add_json(p, "print the training summary as JSON to stdout")
    verify = p.add_argument_group("verify while training (PRISM benchmarks)")
    verify.add_argument(
        "--verify-every",
        type=int,
        metavar="N",
        help="verify the policy being trained the first time training reaches each multiple of N environment steps "
        "(after that PPO update), and print each check: the value with its bracket or interval, stalled mass, states",
    )
    add_property(verify, required=False, forms="checked with --verify-every")
    verify.add_argument(
        "--verify-mode",
        choices=VERIFY_MODES,
        default="exact",
        help="exact (Storm on the policy's chain: the value and its certified bracket; default) or statistical "
        "(simulation: an estimate and its 95%% confidence interval, epsilon 0.01)",
    )
    verify.add_argument(
        "--stop-when",
        choices=STOP_WHEN,
        help="stop training after the first check that decides the threshold property (-p 'P>=0.9 [...]') holds, or "
        "is violated; the policy saved is the one checked last",
    )
    p.set_defaults(run=run)


def benchmark_kind(benchmark_id: str) -> BenchmarkKind:
    """``prism``, ``continuous`` or ``native`` for a benchmark id (unknown ids raise BenchmarkError with a suggestion)."""
    return BenchmarkKind(spec(benchmark_id).kind)


def train_benchmark(
    benchmark_id: str,
    *,
    out: str | Path,
    algo: str | None = None,
    steps: int | None = None,
    seed: int = 0,
    hidden: str | tuple[int, ...] | None = None,
    params: Mapping[str, Any] | None = None,
    force: bool = False,
    on_update: Any = None,
) -> dict[str, Any]:
    """Train ``benchmark_id`` with its trainer and write ``out`` (atomically; an existing file only with ``force``);
    returns a summary (path, sizes, final figures). ``on_update``: PRISM benchmarks only, see
    :func:`rlverify.training.discrete.train_discrete`.

    Raises:
        FileWriteError: ``out`` exists without ``force`` or cannot be written (checked before and after training).
        DependencyNotInstalled: without PyTorch (``pip install 'rlverify[torch]'``).
        TrainCommandError: algorithm or options that the benchmark's trainer does not take, or a missing trainer.
        BenchmarkError: unknown benchmark or parameter.
    """
    from rlverify.training.discrete import require_torch  # lazy: torch
    from rlverify.training.ppo import check_seed, parse_hidden  # lazy: the engine, --help start-up

    kind = benchmark_kind(benchmark_id)
    expected = ALGORITHMS.get(kind)
    if expected is None:
        raise TrainCommandError(f"{benchmark_id}: no trainer for '{kind}' benchmarks")
    if algo is not None and algo != expected:
        raise TrainCommandError(f"{benchmark_id} is a {kind} benchmark, trained with --algo {expected} (got --algo {algo})")
    if steps is not None and steps <= 0:
        raise TrainCommandError(f"--steps: expected a positive number of environment steps, got {steps}")
    job = _Training(benchmark_id, out, steps, check_seed(seed), parse_hidden(hidden) if hidden is not None else None)
    require_torch()
    if on_update is not None and kind is not BenchmarkKind.PRISM:
        raise TrainCommandError(
            f"{benchmark_id}: --verify-every verifies while training on PRISM benchmarks only (not '{kind}' ones); "
            "verify the saved policy afterwards"
        )
    return _TRAINERS[kind](job, dict(params or {}), force, on_update)


@dataclass(frozen=True)
class _Training:
    """What every trainer is given: the benchmark, the file, the steps (None: the trainer's), seed and network."""

    benchmark_id: str
    out: str | Path
    steps: int | None
    seed: int
    hidden: tuple[int, ...] | None


def _train_prism(job: _Training, params: dict[str, Any], force: bool, on_update: Any) -> dict[str, Any]:
    from rlverify.training.discrete import train_discrete  # lazy: torch

    rep = train_discrete(
        job.benchmark_id,
        params=params or None,
        steps=job.steps,
        seed=job.seed,
        hidden=job.hidden,
        out=job.out,
        force=force,
        on_update=on_update,
    )
    return {
        "path": str(rep.path),
        "benchmark": job.benchmark_id,
        "algorithm": "ppo",
        "network": list(rep.mlp.sizes),
        "steps": rep.steps,
        "final_mean_return": rep.final_mean_return,
        "final_success_rate": rep.final_success_rate,
        "seconds": round(rep.seconds, 1),
        **({"stopped_early": True} if rep.metadata.get("stopped_early") else {}),
    }


def _train_continuous(job: _Training, params: dict[str, Any], force: bool, on_update: Any) -> dict[str, Any]:
    train_continuous = _trainer("rlverify.training.continuous", "train_continuous")
    if params:
        raise TrainCommandError(
            f"{job.benchmark_id}: the continuous trainer takes no parameters (-c {_show(params)}); "
            "its training setup is fixed in rlverify.training.continuous.SETUPS"
        )
    path, mlp, stats = train_continuous(
        job.benchmark_id, seed=job.seed, total_steps=job.steps, out=job.out, hidden=job.hidden, force=force
    )
    return {
        "path": str(path),
        "benchmark": job.benchmark_id,
        "algorithm": "ppo",
        "network": list(mlp.sizes),
        "steps": stats.get("steps"),
        "final_mean_return": stats.get("final_mean_return"),
        "seconds": stats.get("seconds"),
    }


def _train_racetrack(job: _Training, params: dict[str, Any], force: bool, on_update: Any) -> dict[str, Any]:
    train_racetrack = _trainer("rlverify.training.dqn", "train_racetrack")
    if job.hidden is not None:
        raise TrainCommandError(
            f"{job.benchmark_id}: the Racetrack DQN has the DSMC paper's fixed 2x64 network; drop --hidden"
        )
    unknown = [k for k in params if k != "noise"]
    if unknown:
        raise TrainCommandError(f"{job.benchmark_id}: unknown parameter '{unknown[0]}'; Racetrack training takes -c noise=P")
    noise = float(params["noise"]) if "noise" in params else None
    path = train_racetrack(job.benchmark_id, job.out, seed=job.seed, steps=job.steps, noise=noise, force=force)
    return {"path": str(path), "benchmark": job.benchmark_id, "algorithm": "dqn"}


#: the trainer of each kind of benchmark
_TRAINERS = {
    BenchmarkKind.PRISM: _train_prism,
    BenchmarkKind.CONTINUOUS: _train_continuous,
    BenchmarkKind.NATIVE: _train_racetrack,
}


def _trainer(module: str, name: str) -> Any:
    """``module.name``, or a TrainCommandError naming what is missing."""
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        if exc.name == module:
            raise TrainCommandError(
                f"the trainer module {module} is not available in this installation (it provides {name}); update rlverify"
            ) from None
        raise
    fn = getattr(mod, name, None)
    if fn is None:
        raise TrainCommandError(f"{module} has no {name}(): this trainer is not ready in this version of rlverify")
    return fn


def _show(params: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items())


def run(args: argparse.Namespace) -> int:
    from rlverify.resolve import resolve  # lazy: numpy, --help start-up

    if not args.out.lower().endswith(".onnx"):
        raise OptionError(f"--out {args.out}: train writes an ONNX policy; give a FILE.onnx name")
    check_target(args.out, force=args.force, what="--out")  # before the training (and again when writing)
    not_a_benchmark = TrainCommandError(
        f"{args.benchmark}: 'rlverify train' trains on a registered benchmark (see 'rlverify "
        "benchmarks list'); for your own model use rlverify.gym.MDPEnv.from_model"
    )
    if ".py:" in args.benchmark.lower():
        from rlverify.models.continuous.declared import is_declaration_target  # lazy: the continuous engine

        if is_declaration_target(args.benchmark):  # refused before the file's code runs
            raise not_a_benchmark
    target = resolve(args.benchmark, constants=args.constants, needs_policy=False)  # the one way to read a target
    if target.benchmark is None:
        raise not_a_benchmark
    params = parse_parameters(args.constants)  # only the parameters given (trainers refuse what they cannot vary)
    on_update = _verify_while_training(args, target.KIND, params)
    with status(f"training {args.benchmark}"):
        summary = train_benchmark(
            args.benchmark,
            out=args.out,
            algo=args.algo,
            steps=args.steps,
            seed=args.seed,
            hidden=args.hidden,
            params=params,
            force=args.force,
            on_update=on_update,
        )
    if args.json:
        print_envelope(args, summary)
        return 0
    if summary.get("stopped_early"):
        console.print(f"stopped training: the property {args.stop_when} (--stop-when {args.stop_when})", soft_wrap=True)
    console.print(", ".join(_summary_parts(summary)), soft_wrap=True)
    return 0


def _summary_parts(summary: dict[str, Any]) -> list[str]:
    """The training summary's figures, each as a few words (those the trainer reported)."""
    parts = [f"saved {summary['path']}"]
    if "network" in summary:
        parts.append(f"network {'-'.join(str(n) for n in summary['network'])}")
    shown = (
        ("steps", "{:,} steps"),
        ("final_mean_return", "final mean return {:.4g}"),
        ("final_success_rate", "success rate {:.3f}"),
        ("seconds", "{} s"),
    )
    return parts + [form.format(summary[key]) for key, form in shown if summary.get(key) is not None]


def _verify_while_training(args: argparse.Namespace, kind: BenchmarkKind, params: Mapping[str, Any]) -> Any:
    """The ``on_update`` that verifies the policy every ``--verify-every`` steps and prints each check, or None;
    the target and property are resolved (and refused) before any training."""
    if args.verify_every is None:
        _refuse_verify_options(args)
        return None
    if args.verify_every <= 0:
        raise OptionError(f"--verify-every: expected a positive number of environment steps, got {args.verify_every}")
    if args.property is None:
        raise OptionError("--verify-every: give the property to check with -p (e.g. -p 'P=? [F \"goal\"]' or a property name)")
    if kind is not BenchmarkKind.PRISM:
        raise TrainCommandError(
            f"{args.benchmark}: --verify-every verifies while training on PRISM benchmarks only (not '{kind}' ones); "
            "verify the saved policy afterwards"
        )
    from rlverify.training.discrete import training_parameters, verify_every  # lazy: the engine, --help start-up
    from rlverify.training.verifying import TrainingVerifier  # lazy: the engine, --help start-up

    trained = training_parameters(args.benchmark, dict(params) or None)  # what the trainer trains on
    verifier = TrainingVerifier(
        args.benchmark,
        args.property,
        mode=args.verify_mode,
        stop_when=args.stop_when,
        constants=",".join(f"{k}={v}" for k, v in trained.items()) or None,
    )

    shown = err_console if args.json else console  # with --json, stdout holds the envelope only

    def report(check: Any) -> None:
        shown.print(f"verified at {check.summary()}", soft_wrap=True, markup=False, highlight=False)

    return verify_every(verifier, args.verify_every, report=report)


def _refuse_verify_options(args: argparse.Namespace) -> None:
    """``-p``, ``--stop-when`` and ``--verify-mode`` without ``--verify-every`` (what they apply to)."""
    for option, given in (("--property", args.property), ("--stop-when", args.stop_when)):
        if given is not None:
            raise OptionError(f"{option}: checked during training with --verify-every N; add it")
    if args.verify_mode != "exact":
        raise OptionError("--verify-mode: the engine of --verify-every N checks; add it")
