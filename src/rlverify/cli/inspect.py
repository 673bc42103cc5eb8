"""``rlverify inspect``: what a model offers a policy (variables, actions, command names, labels, size)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from rlverify.cli.console import console, note, one_line, styled
from rlverify.cli.options import add_env_kwargs, add_force, add_json, add_target, resolve_target
from rlverify.cli.output import print_envelope
from rlverify.errors import OptionError


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "inspect",
        help="what a model offers a policy: variables, actions, command names, labels, size",
        description="Print a PRISM/JANI model's variables (types, ranges), action labels and command "
        "names per module, labels, reward models, initial states and reachable size, and "
        "the feature and action names a policy must declare.",
    )
    add_target(p)
    add_env_kwargs(p)
    p.add_argument(
        "--max-states",
        type=int,
        default=1_000_000,
        metavar="N",
        help="refuse to build more reachable states than N (default 1,000,000)",
    )
    p.add_argument("--no-build", action="store_true", help="only read the declarations; do not build the state space")
    p.add_argument(
        "--policy-template",
        metavar="FILE.py|FILE.json",
        type=Path,
        help="write a policy skeleton with FEATURES/ACTIONS filled in, uniform over the available choices",
    )
    add_force(p, "overwrite an existing --policy-template file")
    add_json(p, "print the summary as JSON")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from rlverify.models.summary import policy_template, summarize  # lazy: stormpy, start-up

    _check_options(args)
    target = resolve_target(args, "rlverify inspect", needs_policy=False, policy=False)
    summary, mdp = summarize(target.model, build=not args.no_build, max_states=args.max_states)
    summary = dataclasses.replace(summary, path=target.name)
    written = None
    if args.policy_template is not None:
        assert mdp is not None
        written = policy_template(args.policy_template, summary, mdp, force=args.force, model=target.model)
    if args.json:
        print_envelope(
            args, {**summary.to_json(), "target": target.name, "policy_template": str(written) if written else None}
        )
        return 0
    show(summary, target.name)
    if written is not None:
        note(f"wrote {written}" + (f" (use --policy {written}:pi)" if written.suffix == ".py" else ""))
    return 0


def _check_options(args: argparse.Namespace) -> None:
    if args.max_states is not None and args.max_states <= 0:
        raise OptionError(f"--max-states must be positive, got {args.max_states}")
    if args.policy_template is not None and args.no_build:
        raise OptionError("--policy-template needs the state space (the available choices per state): drop --no-build")


def show(s: Any, name: str) -> None:
    """Readable tables of a :class:`~rlverify.models.summary.ModelSummary`."""
    head = f"{name} — {s.kind.upper()} {s.model_type.upper()}" + (f" ({s.constants})" if s.constants else "")
    console.print(styled(one_line(head), "bold"))
    console.print(_variables_table(s))
    console.print(_commands_table(s))
    console.print(_model_table(s))


def _variables_table(s: Any) -> Any:
    from rich.table import Table  # lazy: rich, --help start-up

    t = Table("variable", "type", "range", "init", "module", title="variables (policy features)", title_justify="left")
    for v in s.variables:
        rng = "" if v["type"] == "bool" else f"[{_v(v['low'])}..{_v(v['high'])}]"
        if v.get("locations"):  # a JANI automaton's location: its codes and names
            rng += " " + ", ".join(f"{i}={name}" for i, name in enumerate(v["locations"]))
        t.add_row(one_line(v["name"]), v["type"], one_line(rng), _v(v["init"]), one_line(v["module"] or "(global)"))
    if s.unassigned:  # declared in the file, but no state variable: say why it is not listed
        t.caption = one_line(
            f"declared but never assigned: {', '.join(s.unassigned)} (Storm's builder makes such a variable a "
            "constant, its initial value: no state variable, no policy feature)"
        )
        t.caption_justify = "left"
    return t


def _commands_table(s: Any) -> Any:
    from rich.table import Table  # lazy: rich, --help start-up

    t = Table(
        "command",
        "action",
        "guard",
        title="commands (a policy may name a choice by label or by command)",
        title_justify="left",
    )
    for m in s.modules:
        for c in m["commands"]:
            t.add_row(one_line(c["name"]), one_line(c["action"] or "(unlabelled)"), one_line(c["guard"]))
    return t


def _model_table(s: Any) -> Any:
    from rich.table import Table  # lazy: rich, --help start-up

    t = Table(show_header=False, title="model", title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("labels", one_line(", ".join(f'"{lab}"' for lab in s.labels)) or "—")
    t.add_row("reward models", one_line(", ".join(f'"{r}"' for r in s.reward_models)) or "—")
    if s.built:
        t.add_row(
            "reachable",
            f"{s.states:,} states, {s.choices:,} choices, {s.transitions:,} transitions; "
            f"{s.decision_states:,} decision states",
        )
        t.add_row("initial", one_line(_initial_states(s)))
    t.add_row("policy FEATURES", repr(s.features))
    t.add_row("policy ACTIONS", repr(s.actions) + ("" if s.built else " (labels; build to see command names)"))
    if s.ambiguous:
        t.add_row("note", "labels do not tell every choice apart: some actions are command names (MODULE:K)")
    return t


def _initial_states(s: Any) -> str:
    features = set(s.features)  # Storm's states may also carry location codes and JANI's transient variables
    shown = "; ".join(
        ", ".join(f"{k}={v}" for k, v in init.items() if k in features or not features) for init in s.initial_states
    )
    return shown + (f" (+{s.n_initial - len(s.initial_states)} more)" if s.n_initial > len(s.initial_states) else "")


def _v(x: Any) -> str:
    return "?" if x is None else str(x)
