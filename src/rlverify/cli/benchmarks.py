"""``rlverify benchmarks list|show``."""

from __future__ import annotations

import argparse
from typing import Any

from rlverify.benchmarks.registry import all_ids, spec
from rlverify.cli.console import console, line, styled
from rlverify.cli.options import add_json
from rlverify.cli.output import print_envelope


def register(sub: Any) -> None:
    p = sub.add_parser("benchmarks", help="list or describe the registered benchmarks")
    bsub = p.add_subparsers(dest="action", required=True)
    ls = bsub.add_parser("list", help="all benchmark ids")
    add_json(ls, "print the list as JSON to stdout")
    ls.set_defaults(run=run_list)
    show = bsub.add_parser("show", help="one benchmark's description, parameters, properties and policies")
    show.add_argument("name")
    add_json(show, "print the description as JSON to stdout")
    show.set_defaults(run=run_show)


def _describe(s: Any) -> dict[str, Any]:
    return {
        "id": s.id,
        "kind": s.kind,
        "description": s.doc.strip(),
        "parameters": {k: {"default": p.default, "low": p.low, "high": p.high, "doc": p.doc} for k, p in s.parameters.items()},
        "properties": dict(s.properties),
        "policies": {k: str(v) for k, v in s.policies.items()},
    }


def run_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    if args.json:
        print_envelope(args, {"benchmarks": [_describe(spec(i)) for i in all_ids()]})
        return 0
    t = Table()
    t.add_column("id", no_wrap=True)  # ids are what users type: never cut
    for name in ("kind", "properties", "reference policies"):
        t.add_column(name)
    for i in all_ids():
        s = spec(i)
        t.add_row(i, s.kind, ", ".join(s.properties), ", ".join(s.policies))
    console.print(t)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from rich.table import Table

    s = spec(args.name)
    if args.json:
        print_envelope(args, _describe(s))
        return 0
    console.print(line(styled(s.id, "bold"), f" ({s.kind})\n"))
    console.print(s.doc.strip(), soft_wrap=True)
    if s.parameters:
        t = Table("parameter", "default", "range", "meaning", title="parameters", title_justify="left")
        for k, p in s.parameters.items():
            t.add_row(k, str(p.default), f"[{p.low}, {p.high}]", p.doc)
        console.print(t)
    if s.properties:
        t = Table("name", "property", title="properties", title_justify="left")
        for k, v in s.properties.items():
            t.add_row(k, v)
        console.print(t)
    if s.policies:
        t = Table("name", "file (package data)", title="reference policies", title_justify="left")
        for k, v in s.policies.items():
            t.add_row(k, str(v))
        console.print(t)
    return 0
