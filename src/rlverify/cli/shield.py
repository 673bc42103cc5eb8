"""``rlverify shield``: a shield for a policy, with its exact certificate; ``--meet``: the loosest that meets the bound."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlverify.choices import ShieldKind, values
from rlverify.cli.console import console, print_warnings, status, styled
from rlverify.cli.options import (
    add_chain_options,
    add_env_kwargs,
    add_force,
    add_json,
    add_policy,
    add_property,
    add_target,
    resolve_target,
)
from rlverify.cli.output import print_envelope
from rlverify.cli.verify import _max_work, shown_policy
from rlverify.errors import OptionError
from rlverify.exact.options import MAX_WORK, ExactOptions
from rlverify.files import check_target

if TYPE_CHECKING:
    from rlverify.exact.shield import CorrectionResult
    from rlverify.results import ShieldResult

#: ``--meet`` modes
MEET_MODES = ("loosest", "least-intrusive")


def register(sub: Any) -> argparse.ArgumentParser:

    p = sub.add_parser(
        "shield",
        help="a shield for a policy (the actions kept per state), certified by verifying the shielded policy exactly",
        description="From the full MDP, each state-action pair's best achievable value after the action (Q = sum T "
        "x Pmin for a bad event P<=b, Pmax for a goal P>=b; step-bounded forms with the whole bound left); keep the "
        "actions within a threshold of the state's best; verify the shielded policy exactly beside the unshielded "
        "value and the optimum. --meet (loosest) returns the loosest threshold whose shielded policy is certified to "
        "meet the bound; --meet least-intrusive the correction moving the least expected mass (step-bounded "
        "properties; exit 1 when none meets it; exit 2 when the bound is below the optimum). Kept sets come from "
        "bracketed Q: gaps whose brackets overlap are ties, an action overlapping the best is never removed.",
    )
    add_target(p)
    add_env_kwargs(p)
    add_property(p, forms="P<=b / P>=b with F or U (step-bounded or not); Pmin=?/Pmax=? with --threshold")
    add_policy(p, default_note="default for benchmarks: 'reference'")
    p.add_argument(
        "--threshold",
        type=float,
        metavar="T",
        help="keep the actions within T of the state's best (relative, default), with Q <= T / Q >= T (absolute), "
        "or with T x Q <= best / Q >= T x best (factor, T in (0, 1])",
    )
    p.add_argument("--kind", choices=values(ShieldKind), default="relative", help="the threshold's kind")
    p.add_argument(
        "--meet",
        nargs="?",
        const="loosest",
        choices=MEET_MODES,
        metavar="MODE",
        help="meet the property's bound. 'loosest' (the default MODE): the loosest relative threshold whose shield is "
        "certified to meet it; every tie class of the gaps |Q - best| is a candidate, probed from the loosest down "
        "(no monotonicity assumed) and exactly verified; more than --max-probes candidates: the rest bisected and "
        "said. Loosest is not least intrusive. 'least-intrusive': step-bounded properties only: the correction "
        "(step-dependent, possibly randomised) that moves the least expected probability mass away from the "
        "network's choices while meeting the bound (a linear program, HiGHS), then checked exactly on its chain",
    )
    p.add_argument(
        "--max-probes",
        type=int,
        metavar="N",
        help="--meet loosest: the most candidate thresholds verified one by one (default 64)",
    )
    p.add_argument(
        "--remaining",
        type=int,
        metavar="K",
        help="step-bounded properties: the steps left the per-action values are computed for (default: the bound)",
    )
    add_chain_options(p, numerics=True)
    p.add_argument(
        "--max-work",
        type=float,
        default=MAX_WORK,
        metavar="N",
        help=f"budget of step-bounded computations in multiply-adds, steps x transitions, a step at least 3,000 "
        f"(default {MAX_WORK:.0e}; it stops early where the values stop changing)",
    )
    p.add_argument("--out", "-o", type=Path, metavar="FILE.json", help="write the shield to FILE.json (for --shield)")
    add_force(p, "overwrite an existing --out file")
    add_json(p, "print the result as JSON to stdout")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from rlverify.exact.shield import ShieldOptions, shield_policy  # lazy: the engine, --help start-up

    least = args.meet == "least-intrusive"
    shield_options = ShieldOptions(
        kind=args.kind,
        threshold=args.threshold,
        meet=args.meet is not None,
        remaining=args.remaining,
        **({} if args.max_probes is None else {"max_probes": args.max_probes}),
    )
    shield_options.validate()
    if least and (args.out is not None or args.remaining is not None):
        raise OptionError(
            "--meet least-intrusive gives a step-dependent correction, not a shield file: drop --out/--remaining"
        )
    if args.out is not None:
        if args.out.suffix.lower() != ".json":
            raise OptionError(f"--out {args.out}: a shield is written as JSON: give a .json file name")
        check_target(args.out, force=args.force, what="--out")
    options = ExactOptions(
        mode=args.mode,
        strategy="full",
        unavailable=args.unavailable,
        numerics=args.numerics,
        precision=args.precision,
        max_states=args.max_states,
        max_work=_max_work(args.max_work),
    )
    options.validate()
    target = resolve_target(args, "rlverify shield", property=args.property)
    prop, policy = target.property, target.policy
    assert prop is not None and policy is not None  # asked for: resolve parsed and loaded them
    if least:
        return _run_least(args, target, options)
    with status("shielding") as update:
        result = shield_policy(target.model, prop, policy, shield_options, options, progress=update)
    result = target.stamp(result, unavailable=args.unavailable)
    if args.out is not None:
        import dataclasses

        shield = dataclasses.replace(result.shield, model=target.name)
        shield.save(args.out, force=args.force, what="--out")
        result = dataclasses.replace(result, shield_file=str(args.out), shield=shield)
    print_warnings(result.warnings)
    code = 1 if args.meet is not None and result.satisfied is not True else 0
    if args.json:
        print_envelope(args, result, exit_code=code, holds=result.satisfied)
    else:
        _print(result)
    return code


def _run_least(args: argparse.Namespace, target: Any, options: ExactOptions) -> int:
    from rlverify.exact.shield import least_intrusive_policy  # lazy: the engine, --help start-up

    with status("correcting") as update:
        result = least_intrusive_policy(target.model, target.property, target.policy, options, progress=update)
    result = target.stamp(result, unavailable=args.unavailable)
    print_warnings(result.warnings)
    code = 1 if result.satisfied is not True else 0
    if args.json:
        print_envelope(args, result, exit_code=code, holds=result.satisfied)
    else:
        _print_least(result)
    return code


def _print_least(r: CorrectionResult) -> None:
    from rich.table import Table

    from rlverify.results import shown, shown_pair  # lazy: numpy, --help start-up

    t = Table(title="rlverify shield --meet least-intrusive", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("model", r.model)
    t.add_row("policy", shown_policy(r.policy))
    t.add_row("property", r.property)
    verdict = {True: ("meets the bound", "bold green"), False: ("violates the bound", "bold red"), None: ("undecided", "")}
    text, style = verdict[r.satisfied]
    t.add_row("corrected", styled(f"{shown(r.value)} in {shown_pair(r.lower, r.upper)} ({text})", style or "bold"))
    t.add_row("unshielded", shown(r.unshielded))
    t.add_row("minimised", r.measure)
    t.add_row("least intrusion", f"{shown(r.lp_optimum)} (LP optimum, HiGHS); the corrected policy's {shown(r.measure_value)}")
    t.add_row(
        "corrections",
        f"{r.corrected_states:,} model states ({r.corrected_product_states:,} (state, step) pairs, "
        f"{r.randomised_product_states:,} randomised); expected per run {shown(r.expected_interventions)}",
    )
    t.add_row(
        "LP", f"{r.lp_variables:,} variables, {r.lp_constraints:,} constraints; product chain {r.product_states:,} states"
    )
    t.add_row("time", ", ".join(f"{k} {v:.3f}s" for k, v in r.timings.items() if v))
    console.print(t)


def _print(r: ShieldResult) -> None:
    from rich.table import Table

    from rlverify.results import shown, shown_pair  # lazy: numpy, --help start-up

    t = Table(title="rlverify shield", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("model", r.model)
    t.add_row("policy", shown_policy(r.policy))
    t.add_row("property", r.property)
    verdict = {True: ("meets the bound", "bold green"), False: ("violates the bound", "bold red"), None: ("", "")}
    text, style = verdict[r.satisfied]
    bracket = f" in {shown_pair(r.lower, r.upper)}" if r.lower is not None else ""
    t.add_row("shielded", styled(f"{shown(r.value)}{bracket}" + (f" ({text})" if text else ""), style or "bold"))
    t.add_row("unshielded", shown(r.unshielded))
    t.add_row(f"optimum (P{r.optimum_is})", shown(r.optimum))
    t.add_row("threshold", f"{r.threshold_kind} {r.threshold:.10g}" + (" (searched: --meet)" if r.meet else ""))
    t.add_row("restricted", f"{r.restricted_states:,} of {r.covered_states:,} decision states")
    t.add_row(
        "interventions",
        f"{r.intervened_states:,} of {r.reachable_states:,} reached decision states ({100 * r.intervened_share:.3g} %); "
        f"expected per run {shown(r.expected_interventions)} (mass removed {shown(r.expected_removed_mass)})",
    )
    t.add_row("fallback", f"{r.fallback_states:,} reached states")
    if r.probes:
        t.add_row("probes", f"{len(r.probes)} exact verifications")
    t.add_row("MDP", f"{r.states:,} states, {r.choices:,} choices, {r.transitions:,} transitions")
    t.add_row("numerics", f"{r.guarantee} (relative precision {r.precision:g})")
    if r.shield_file:
        t.add_row("shield file", r.shield_file)
    t.add_row("time", ", ".join(f"{k} {v:.3f}s" for k, v in r.timings.items() if v))
    console.print(t)
