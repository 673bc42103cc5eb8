"""``rlverify map``: risk and regret maps — the policy's value, the optimum and their difference on two variables."""

from __future__ import annotations

import argparse
from typing import Any

from rlverify.choices import Aggregate, Optimum, values
from rlverify.cli.console import console, note, print_warnings, status
from rlverify.cli.options import (
    add_chain_options,
    add_env_kwargs,
    add_outputs,
    add_policy,
    add_property,
    add_shield,
    add_target,
    apply_shield,
    outputs,
    resolve_target,
    write_json,
)
from rlverify.cli.output import print_envelope
from rlverify.cli.verify import shown_policy
from rlverify.exact.options import ExactOptions


def register(sub: Any) -> argparse.ArgumentParser:

    p = sub.add_parser(
        "map",
        help="risk/regret map: policy value, optimum over all policies, and the regret per cell",
        description="Check the property on the policy's chain and Pmin/Pmax (Rmin/Rmax) on the full MDP "
        "with Storm, per state; join the states on their valuations and draw value, "
        "optimum and regret over two variables (by default the others at their initial values; "
        "--where all --agg max|min|mean aggregates over them).",
    )
    add_target(p)
    add_env_kwargs(p)
    add_property(p, forms="P=? or R=? (or a threshold form, whose comparison gives --optimum)")
    add_policy(p, default_note="default for benchmarks: 'reference'")
    add_shield(p)
    p.add_argument("--map", dest="xy", required=True, metavar="X,Y", help="the two variables of the map, e.g. x,y")
    add_map_view(p, values(Aggregate))
    p.add_argument(
        "--optimum",
        choices=values(Optimum),
        help="min: the property is a bad event (the best policy minimises it: Pmin); max: a goal (Pmax). "
        "Default: from the property's comparison (P<=b: min, P>=b: max); needed for P=?/R=?",
    )
    p.add_argument(
        "--y-down",
        action="store_true",
        help="draw the smallest y value at the top (as grid worlds such as FrozenLake print their rows)",
    )
    add_chain_options(p, numerics=True)
    add_outputs(p, kinds=".png (three panels: value, optimum, regret), .json (the grid)", seed=False)
    p.set_defaults(run=run)
    return p


def add_map_view(p: argparse.ArgumentParser, aggregates: tuple[str, ...]) -> None:
    """``--where`` and ``--agg``: which states a map's cell shows (``map`` and ``report``; :func:`map_view`)."""
    p.add_argument(
        "--where",
        metavar="EXPR|initial|all",
        help="the states each cell shows: 'initial' (the default without --agg: the other variables at their "
        "initial values, i.e. the run started from that cell), 'all' (every state, aggregated with --agg; the "
        "default with --agg), or EXPR, e.g. 'done=false & obstacle1_x=4' (variables, numbers, = != < <= > >=, "
        "& | !, + - * / %%)",
    )
    p.add_argument(
        "--agg",
        choices=aggregates,
        help="how a cell aggregates its states when several remain (--where all or EXPR): max (default: the "
        "worst case of a bad event), min, mean",
    )


def map_view(where: str | None, agg: str | None) -> tuple[str | None, str]:
    """``(where, agg)`` for :class:`~rlverify.exact.maps.MapOptions` from ``--where``/``--agg``: neither given: the
    initial slice (:data:`~rlverify.exact.maps.INITIAL`); ``--agg`` alone or ``--where all``: every state; else EXPR."""
    if where is None:
        where = "initial" if agg is None else "all"
    return (None if where.strip() == "all" else where), (agg or "max")


def run(args: argparse.Namespace) -> int:
    from rlverify.exact.maps import MapOptions, risk_map  # lazy: the engine, --help start-up

    files = outputs(args, (".png", ".json"))
    where, agg = map_view(args.where, args.agg)
    options = MapOptions(
        agg=agg,
        where=where,
        optimum=args.optimum,
        exact=ExactOptions(
            mode=args.mode,
            unavailable=args.unavailable,
            numerics=args.numerics,
            precision=args.precision,
            max_states=args.max_states,
        ),
    )
    options.validate()
    target = resolve_target(args, "rlverify map", property=args.property)
    target = apply_shield(target, args)
    prop, policy = target.property, target.policy
    assert prop is not None and policy is not None  # asked for: resolve parsed and loaded them
    with status("mapping") as update:
        result = risk_map(target.model, prop, policy, args.xy, options, progress=update)
    result = target.stamp(result, unavailable=args.unavailable)
    result = result.with_provenance(policy=shown_policy(result.policy) or None)
    print_warnings(result.warnings)
    if ".png" in files:
        result.figure(origin="upper" if args.y_down else "lower").draw(files[".png"], force=args.force, what="--out")
    if ".json" in files:
        write_json(files[".json"], result.to_json(), force=args.force)
    if args.json:
        print_envelope(args, result)
        return 0
    print_map(result)
    if files:
        note("wrote " + " and ".join(str(f) for f in files.values()))
    return 0


def print_map(r: Any, top: int = 5) -> None:
    """A summary of a :class:`~rlverify.results.RiskMap`: the initial state, the state sets, the worst cells."""
    import numpy as np
    from rich.table import Table

    opt = ("P" if r.property.lstrip().startswith("P") else "R") + r.optimum
    t = Table(title=f"rlverify map — {r.x},{r.y} ({r.agg})", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("model", r.model)
    t.add_row("policy", f"{r.policy} ({r.mode})")
    t.add_row("property", r.property)
    t.add_row("optimum", f"{opt} (from {r.optimum_source})")
    if r.where:
        t.add_row("where", r.where)
    t.add_row("initial state", f"value {r.initial_value:.6g}, {opt} {r.initial_optimum:.6g}, regret {r.initial_regret:.6g}")
    s = r.states
    t.add_row(
        "states",
        f"policy's chain {s['policy']:,}; full MDP {s['mdp']:,} ({s['mdp_only']:,} never reached by the "
        f"policy); after the filter {s['policy_filtered']:,} / {s['mdp_filtered']:,}",
    )
    t.add_row("time", ", ".join(f"{k} {v:.2f}s" for k, v in r.timings.items()))
    console.print(t)
    flat = np.where(np.isfinite(r.regret), r.regret, -np.inf).ravel()
    order = [int(i) for i in np.argsort(-flat, kind="stable")[:top] if np.isfinite(flat[i])]
    if order:
        cells = Table(title=f"largest regret ({r.agg} per cell)", title_justify="left")
        for c in (r.x, r.y, "value", opt, "regret", "states"):
            cells.add_column(c, justify="right")
        for i in order:
            row, col = divmod(i, r.regret.shape[1])
            cells.add_row(
                str(r.x_values[col]),
                str(r.y_values[row]),
                f"{r.value[row, col]:.4g}",
                f"{r.optimum_value[row, col]:.4g}",
                f"{r.regret[row, col]:.4g}",
                str(r.policy_states[row, col]),
            )
        console.print(cells)
