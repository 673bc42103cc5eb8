"""``rlverify examples [DIR]``: copy the example files the README's commands use (``examples/...``) out of the package."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rlverify.benchmarks.examples import copy_examples, example_files
from rlverify.cli.console import console
from rlverify.cli.options import add_force, add_json
from rlverify.cli.output import print_envelope


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "examples",
        help="copy the shipped example files (models, policies, systems) into a directory",
        description="Copy the example files the README's commands use into DIR (default: ./examples, so that the "
        "README's paths examples/... work as written). Existing files are never replaced without --force.",
    )
    p.add_argument(
        "directory", nargs="?", default="examples", metavar="DIR", type=Path, help="where to copy (default: examples)"
    )
    p.add_argument("--list", action="store_true", help="only list the shipped example files")
    add_force(p, "overwrite existing files of the same names")
    add_json(p, "print the files (listed or written) as JSON to stdout")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:

    if args.list:
        names = example_files()
        if args.json:
            print_envelope(args, {"files": names})
            return 0
        for name in names:
            console.print(name, soft_wrap=True, markup=False, highlight=False)
        return 0
    written = copy_examples(args.directory, force=args.force)
    if args.json:
        print_envelope(args, {"directory": str(args.directory), "written": [str(p) for p in written]})
        return 0
    console.print(f"{len(written)} example files written to {args.directory}", soft_wrap=True, markup=False)
    return 0
