"""``rlverify heatmap``: goal/crash probability per start cell of a Racetrack map, or a path property's probability per
cell of a grid of start states of a Gymnasium environment (``gym:CartPole-v1 --axes theta=...,theta_dot=...``), as a
PNG and JSON."""

from __future__ import annotations

import argparse
from typing import Any

from rlverify.choices import Mode
from rlverify.cli.console import console, line, note, print_warnings, progress_bar, styled
from rlverify.cli.options import (
    add_backend_options,
    add_env_kwargs,
    add_episode_options,
    add_outputs,
    add_policy,
    add_property,
    add_target,
    backend_from_args,
    outputs,
    resolve_simulated_target,
    resolve_target,
    write_json,
)
from rlverify.cli.output import print_envelope
from rlverify.cli.simulate import constants_with_noise, whole_number
from rlverify.cli.verify import shown_policy
from rlverify.errors import OptionError


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "heatmap",
        help="heat map: Racetrack goal/crash probability per start cell, or a property per start state of gym:ID (PNG)",
        description="Racetrack: simulate the policy from every free cell (velocity 0) and draw goal and crash "
        "probability and the share of runs that never decide (the car stands still forever, or is still "
        "driving after --max-steps): the three add up to 1 per cell; with --optimal also "
        "Storm's Pmax(goal) and the gap. gym:ID (classic control, MuJoCo): estimate -p per cell of a grid of start "
        "values of one or two state coordinates (--axes; the other coordinates as the seeded reset draws them), e.g. "
        "rlverify heatmap gym:CartPole-v1 --policy P -p 'P=? [F<=200 \"terminated\"]' "
        "--axes 'theta=-0.2:0.2:9,theta_dot=-1:1:9' --runs 100 --out map.png.",
    )
    add_target(p, kinds="a Racetrack benchmark id, e.g. racetrack-barto-small-v1, or gym:ID with a settable state")
    add_env_kwargs(p)
    add_episode_options(p)
    add_property(
        p, required=False, forms="gym:ID only: the path property estimated per cell, e.g. 'P=? [F<=200 \"terminated\"]'"
    )
    p.add_argument(
        "--axes",
        metavar="NAME=LOW:HIGH:COUNT,...",
        help="gym:ID only: one or two state coordinates and their start values, COUNT evenly spaced from LOW to HIGH "
        "(both included), in the coordinate's unit, e.g. 'theta=-0.2:0.2:9,theta_dot=-1:1:9' (CartPole: x m, x_dot "
        "m/s, theta rad, theta_dot rad/s; Pendulum: theta rad, theta_dot rad/s; Acrobot: theta1, theta2 rad, "
        "theta1_dot, theta2_dot rad/s; MountainCar: position m, velocity m/s; MuJoCo: qpos[i], qvel[i])",
    )
    add_policy(p, default_note="default: the shipped DQN policy (Racetrack)")
    p.add_argument(
        "--noise",
        type=float,
        help="probability that an acceleration fails (default 0.2; e.g. 0.5 for a stress test; the same as -c noise=...)",
    )
    p.add_argument("--epsilon", type=float, default=0.01, help="per-cell interval half-width (default 0.01)")
    p.add_argument("--delta", type=float, default=0.05, help="per-cell error probability (default 0.05)")
    p.add_argument("--runs", type=whole_number, help="runs per cell with Clopper-Pearson intervals instead of Okamoto")
    p.add_argument(
        "--run-limit",
        type=whole_number,
        default=100_000_000,
        help="refuse to plan more runs in all (cells x runs per cell) than this (default 100000000)",
    )
    p.add_argument("--optimal", action="store_true", help="add Storm's optimal Pmax(goal) map and the gap map")
    p.add_argument("--max-steps", type=int, default=10_000, help="maximal run length (default 10000)")
    p.add_argument(
        "--mode",
        choices=(Mode.STOCHASTIC.value, Mode.DETERMINISTIC.value),
        default="stochastic",
        help="sample actions from pi (stochastic, default) or take the argmax; Q-value policies (DQN) are greedy in both",
    )
    p.add_argument("--batch-size", type=int, default=50_000)
    add_backend_options(p)
    add_outputs(p, kinds=".png (the maps), .json (per-cell values)")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    if str(args.target).startswith("gym:"):
        return run_gym(args)
    _refuse_gym_options(args)
    from rlverify.statistical.heatmap import heatmap  # lazy: numpy, --help start-up
    from rlverify.targets import EnvironmentTarget  # lazy: numpy, --help start-up

    files = outputs(args, (".png", ".json"))
    backend = backend_from_args(args)
    if not files and not args.json:
        raise OptionError("nothing to write: give --out FILE.png (the maps) and/or --out FILE.json, or --json")
    target = resolve_target(
        args,
        "rlverify heatmap",
        kinds=(EnvironmentTarget,),
        constants=constants_with_noise(args.constants, args.noise, args.target),
    )
    env, bench, policy = target.model, target.benchmark, target.policy
    if bench is None or policy is None:  # (a native target is a benchmark; resolve loads its policy or refuses)
        raise OptionError(f"{args.target}: a heat map needs a Racetrack benchmark and a policy")
    options = _options(args, backend)
    with progress_bar("simulating") as bar:
        task = bar.add_task("runs", total=None)
        result = heatmap(
            env,
            policy,
            options,
            optimal=args.optimal,
            benchmark=bench.id,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    result = target.stamp(result)
    result = result.with_provenance(policy=shown_policy(result.policy) or None)  # as the user named it
    print_warnings(result.warnings)
    _write(result, files, args.force)
    if args.json:
        print_envelope(args, result)
        return 0
    _print_summary(result, bench.id, env.noise, args.mode)
    if files:
        note("wrote " + " and ".join(str(f) for f in files.values()))
    return 0


def _write(result: Any, files: dict[str, Any], force: bool) -> None:
    """``--out FILE.png`` (the maps) and ``--out FILE.json`` (per-cell values)."""
    if ".png" in files:
        from rlverify.statistical.heatmap import heatmap_figure  # lazy: matplotlib

        heatmap_figure(result).draw(files[".png"], force=force, what="--out")  # plot_heatmap's figure, written safely
    if ".json" in files:
        write_json(files[".json"], result.to_json(), force=force)


def _options(args: argparse.Namespace, backend: Any) -> Any:
    """The :class:`~rlverify.statistical.StatisticalOptions` of each cell (``--runs``: Clopper-Pearson, else Okamoto)."""
    from rlverify.statistical.engine import SimulationOptions  # lazy: numpy, --help start-up
    from rlverify.statistical.verify import StatisticalOptions  # lazy: the engine, --help start-up

    return StatisticalOptions(
        method="clopper-pearson" if args.runs else "okamoto",
        epsilon=args.epsilon,
        delta=args.delta,
        runs=args.runs,
        run_limit=args.run_limit,
        simulation=SimulationOptions(mode=args.mode, max_steps=args.max_steps, seed=args.seed, batch_size=args.batch_size),
        backend=backend,
    )


def _print_summary(result: Any, benchmark_id: str, noise: float, mode: str) -> None:
    """Two lines: the runs and their speed; the mean probabilities and how the undecided runs ended."""
    from rlverify.statistical.heatmap import never_decided_share  # lazy: numpy, --help start-up

    console.print(
        line(
            styled(benchmark_id, "bold"),
            f" noise {noise:g}, policy {result.policy} ({mode}): "
            f"{len(result.cells)} cells x {int(result.runs[0]):,} runs in {result.timings['total']:.1f} s "
            f"({result.timings['decisions_per_second']:,.0f} decisions/s)",
        )
    )
    gap, never = result.gap, never_decided_share(result)
    stuck = 0 if result.stuck is None else int(result.stuck.sum())
    optimal = (
        f", mean optimal {result.optimal.mean():.4f}, max gap {gap.max():.4f}"
        if result.optimal is not None and gap is not None
        else ""
    )
    console.print(
        f"mean goal probability {result.goal.mean():.4f}, mean crash probability {result.crash.mean():.4f}"
        + optimal
        + f"; mean never decided {never.mean():.4f} (stood still forever {stuck:,} runs, still driving after "
        f"--max-steps {result.max_steps:,}: {int(result.undecided.sum()):,}; largest share in one cell {never.max():.3f})"
        + (f", stalled {int(result.stalled.sum()):,}" if result.stalled.any() else "")
    )


#: the options of a gym:ID heat map only (argparse's destination, the option)
GYM_ONLY = (("axes", "--axes"), ("property", "--property"), ("label", "--label"), ("vectorization", "--vectorization"))
#: the options of a Racetrack heat map only
RACETRACK_ONLY = (("noise", "--noise"), ("optimal", "--optimal"))


def _refuse_gym_options(args: argparse.Namespace) -> None:
    """A Racetrack heat map: refuse the options of a gym:ID one (its event is fixed: goal and crash)."""
    for dest, option in GYM_ONLY:
        if getattr(args, dest, None):
            raise OptionError(f"{option}: applies to gym:ID heat maps (a Racetrack heat map estimates goal and crash)")


def run_gym(args: argparse.Namespace) -> int:
    """``rlverify heatmap gym:ID --axes ... -p ...``: the property per cell of a grid of start states."""
    from rlverify.statistical.gym_heatmap import gym_heatmap  # lazy: numpy, gymnasium, --help start-up
    from rlverify.targets import SimulatorTarget  # lazy: numpy, --help start-up

    for dest, option in RACETRACK_ONLY:
        if getattr(args, dest, None):
            raise OptionError(f"{option}: applies to Racetrack heat maps, not to {args.target}")
    if not args.axes:
        raise OptionError(f"{args.target}: give the grid with --axes NAME=LOW:HIGH:COUNT,... e.g. theta=-0.2:0.2:9")
    files = outputs(args, (".png", ".json"))
    if not files and not args.json:
        raise OptionError("nothing to write: give --out FILE.png (the map) and/or --out FILE.json, or --json")
    backend = backend_from_args(args)
    target = resolve_simulated_target(args, "rlverify heatmap")
    if not isinstance(target, SimulatorTarget):
        raise OptionError(
            f"{args.target} has a transition table (a finite model): a heat map over start states takes a Gymnasium "
            "environment without one (classic control, MuJoCo)"
        )
    if target.policy is None:
        raise OptionError(f"{args.target}: a heat map needs a policy (--policy)")
    if target.property is None:  # (resolve_simulated asks for one first)
        raise OptionError(f"{args.target}: give the property with -p, e.g. 'P=? [F<=200 \"terminated\"]'")
    options = _options(args, backend)
    with progress_bar("simulating") as bar:
        task = bar.add_task("episodes", total=None)
        result = gym_heatmap(
            target.model,
            target.policy,
            target.property,
            args.axes,
            options,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    result = target.stamp(result)
    result = result.with_provenance(policy=shown_policy(result.policy) or None)
    print_warnings(result.warnings)
    _write_gym(result, files, args.force)
    if args.json:
        print_envelope(args, result)
        return 0
    _print_gym_summary(result, args.mode)
    if files:
        note("wrote " + " and ".join(str(f) for f in files.values()))
    return 0


def _write_gym(result: Any, files: dict[str, Any], force: bool) -> None:
    """``--out FILE.png`` (the map) and ``--out FILE.json`` (the grid and the per-cell values), each atomically."""
    if ".png" in files:
        from rlverify.statistical.gym_heatmap import gym_heatmap_figure  # lazy: matplotlib

        gym_heatmap_figure(result).draw(files[".png"], force=force, what="--out")
    if ".json" in files:
        write_json(files[".json"], result.to_json(), force=force)


def _print_gym_summary(result: Any, mode: str) -> None:
    """Two lines: the grid, the runs and their speed; the mean, lowest and highest cell."""
    width = result.interval[:, 1] - result.interval[:, 0]
    console.print(
        line(
            styled(result.model, "bold"),
            f" policy {result.policy} ({mode}): {len(result.estimate):,} cells x {int(result.runs[0]):,} runs in "
            f"{result.timings['total']:.1f} s ({result.timings['decisions_per_second']:,.0f} decisions/s)",
        )
    )
    console.print(
        line(
            f"{result.property}: mean {result.estimate.mean():.4f}, lowest cell {result.estimate.min():.4f}, highest "
            f"{result.estimate.max():.4f}; interval width at most {width.max():.4f} ({result.method}, "
            f"{result.confidence:.1%} per cell); undecided episodes {int(result.undecided.sum()):,}"
        )
    )
