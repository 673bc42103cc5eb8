"""``rlverify robust``: how far the value moves under perturbed observations (exact) or model error (intervals)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rlverify.choices import Optimum
from rlverify.cli.console import console, print_warnings, status, styled
from rlverify.cli.options import (
    add_chain_options,
    add_env_kwargs,
    add_outputs,
    add_policy,
    add_property,
    add_target,
    names,
    outputs,
    resolve_target,
    write_json,
)
from rlverify.cli.output import print_envelope
from rlverify.cli.verify import parse_size, shown_policy
from rlverify.errors import OptionError

if TYPE_CHECKING:
    from rich.table import Table

    from rlverify.results import IntervalResult, RobustnessResult


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "robust",
        help="robustness to observation perturbations (exact) or to model error (intervals)",
        description="Worst and best case of a probability property when an adversary perturbs the "
        "policy's observations within an integer budget (Pmax/Pmin of the adversarial MDP, "
        "checked by Storm; plus an FGSM attack baseline), or, with --delta, when the "
        "model's transition probabilities are known only within +-delta (interval chain).",
    )
    add_target(p)
    add_env_kwargs(p)
    add_property(p, forms="P=? or P<=b/P>=b with F, U, G, X or W")
    add_policy(p, default_note="default for benchmarks: 'reference'")
    p.add_argument(
        "--epsilon", default=None, metavar="N", help="observation budget, a non-negative integer in feature units (default 1)"
    )
    p.add_argument("--norm", choices=("linf", "l1"), default=None, help="budget norm: linf (default) or l1")
    p.add_argument("--perturb", metavar="F1,F2", help="features the adversary may change (default: all)")
    p.add_argument(
        "--worst",
        choices=(Optimum.MAX.value, Optimum.MIN.value),
        help="which optimum is the worst case: max when the property is a bad event (P<=b; P=? is read so, and the "
        "result says so), "
        "min when it is a goal (default for P>=b)",
    )
    p.add_argument("--no-attack", action="store_true", help="skip the FGSM attack baseline")
    p.add_argument(
        "--delta",
        type=float,
        default=None,
        help="model error instead: every transition probability p is in [p-delta, p+delta] (clipped to [0, 1])",
    )
    p.add_argument("--relative", action="store_true", help="with --delta: p*(1-delta) .. p*(1+delta)")
    p.add_argument("--uncertain", metavar="A,B", help="with --delta: only these action labels / command names are uncertain")
    add_chain_options(p)
    p.add_argument(
        "--max-memory",
        metavar="SIZE",
        help="refuse when the estimated memory would exceed SIZE (e.g. 8G, 500M; default: 80%% of this "
        "machine's memory): the (state, perturbation) pairs are estimated before they are enumerated",
    )
    add_outputs(p, kinds=".json (the result)", seed=False)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from rlverify.results import IntervalResult  # lazy: numpy, --help start-up

    files = outputs(args, (".json",))
    _check_options(args)
    target = resolve_target(args, "rlverify robust", property=args.property)
    prop, policy = target.property, target.policy
    assert prop is not None and policy is not None  # asked for: resolve parsed and loaded them
    with status("checking") as update:
        if args.delta is not None:
            result: RobustnessResult | IntervalResult = _model_error(args, target, update)
        else:
            result = _observations(args, target, update)
    result = target.stamp(result, unavailable=args.unavailable)
    print_warnings(result.warnings)
    if ".json" in files:
        write_json(files[".json"], result.to_json(), force=args.force)
    if args.json:
        print_envelope(args, result, holds=result.satisfied if isinstance(result, IntervalResult) else None)
    elif isinstance(result, IntervalResult):
        _print_interval(result)
    else:
        _print_robustness(result)
    return 0


def _check_options(args: argparse.Namespace) -> None:
    """Refuse model-error and observation options together, and model-error options without ``--delta``."""
    flags = (
        ("--epsilon", args.epsilon),
        ("--norm", args.norm),
        ("--perturb", args.perturb),
        ("--worst", args.worst),
        ("--max-memory", args.max_memory),
    )
    observation_flags = [f for f, v in flags if v is not None]
    if args.delta is not None and observation_flags:
        raise OptionError(
            f"--delta (model error) does not combine with {', '.join(observation_flags)} "
            "(observation perturbations): run them separately"
        )
    if args.delta is None and (args.relative or args.uncertain):
        raise OptionError("--relative and --uncertain need --delta")


def _model_error(args: argparse.Namespace, target: Any, update: Any) -> IntervalResult:
    """Bounds on the value over every model within ``--delta`` of the target's transition probabilities."""
    from rlverify.exact.model_error import model_error_bounds  # lazy: stormpy, start-up
    from rlverify.exact.robust_options import ModelErrorOptions  # lazy: stormpy, start-up

    uncertain = names(args.uncertain)
    options = ModelErrorOptions(
        delta=args.delta,
        relative=args.relative,
        actions=tuple(uncertain) if uncertain else None,
        mode=args.mode,
        unavailable=args.unavailable,
        max_states=args.max_states,
    )
    return model_error_bounds(target.model, target.property, target.policy, options, progress=update)


def _observations(args: argparse.Namespace, target: Any, update: Any) -> RobustnessResult:
    """The worst and best value under observation perturbations within ``--epsilon``."""
    from rlverify.exact.robust import RobustnessOptions, robustness  # lazy: stormpy, start-up

    perturb = names(args.perturb)
    options = RobustnessOptions(
        epsilon=_epsilon(args.epsilon),
        norm=args.norm or "linf",
        perturb=tuple(perturb) if perturb else None,
        worst=args.worst,
        mode=args.mode,
        unavailable=args.unavailable,
        attack=not args.no_attack,
        max_states=args.max_states,
        max_memory=None if args.max_memory is None else parse_size(args.max_memory, "--max-memory"),
    )
    return robustness(target.model, target.property, target.policy, options, progress=update)


def _epsilon(text: str | None) -> int:
    if text is None:
        return 1
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"--epsilon: expected a non-negative integer (the features are integers), got '{text}'") from None
    return value  # the sign is checked by RobustnessOptions


def _table(title: str, r: Any) -> Table:
    from rich.table import Table

    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("model", r.model)
    t.add_row("policy", shown_policy(r.policy))
    t.add_row("property", r.property)
    return t


def _print_robustness(r: RobustnessResult) -> None:
    t = _table(f"rlverify robust — observations, {r.norm} epsilon {r.epsilon}", r)
    t.add_row("perturbed", ", ".join(r.perturbed))
    t.add_row("nominal", f"{r.nominal:.6g}")
    reading = "the property read as a failure" if r.worst_is == "max" else "the property read as a goal"
    t.add_row(
        f"worst (P{r.worst_is}: {reading}; --worst {'min' if r.worst_is == 'max' else 'max'} for the other)",
        styled(f"{r.worst:.6g}", "bold red"),
    )
    t.add_row(f"best (P{'min' if r.worst_is == 'max' else 'max'})", styled(f"{r.best:.6g}", "bold green"))
    t.add_row("FGSM attack", "—" if r.attack is None else f"{r.attack:.6g}")
    t.add_row("argmax changes", f"{r.changed_states:,} of {r.decision_states:,} decision states")
    t.add_row("adversarial MDP", f"{r.states:,} states, {r.choices:,} choices, {r.transitions:,} transitions")
    t.add_row(
        "policy queries",
        f"{r.observations:,} distinct observations ({r.decision_states:,} states x {r.perturbations_per_state} perturbations)",
    )
    for p in r.worst_perturbations[:5]:
        state = ", ".join(f"{k}={v}" for k, v in p["state"].items())
        shown = ", ".join(f"{k}={v}" for k, v in p["observed"].items())
        t.add_row("worst perturbation", f"at {state}: shows {shown} (+{p['gain']:.3g})")
    t.add_row("numerics", f"{r.guarantee} (relative precision {r.precision:g})")
    t.add_row("time", ", ".join(f"{k} {v:.3f}s" for k, v in r.timings.items() if v))
    console.print(t)


def _print_interval(r: IntervalResult) -> None:
    t = _table(f"rlverify robust — model error {'relative' if r.relative else 'absolute'} delta {r.delta:g}", r)
    if r.uncertain_actions:
        t.add_row("uncertain", ", ".join(r.uncertain_actions))
    t.add_row("nominal", f"{r.nominal:.6g}")
    t.add_row("range", styled(f"[{r.lower:.6g}, {r.upper:.6g}]", "bold"))
    if r.satisfied is not None:
        t.add_row("holds", "yes, on every model within delta" if r.satisfied else "no, on every model within delta")
    t.add_row("interval chain", f"{r.states:,} states, {r.transitions:,} transitions; {r.clipped:,} intervals clipped")
    t.add_row("numerics", r.guarantee)
    t.add_row("time", ", ".join(f"{k} {v:.3f}s" for k, v in r.timings.items() if v))
    console.print(t)
