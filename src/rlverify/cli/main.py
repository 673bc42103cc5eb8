"""``rlverify`` entry point: parse arguments, dispatch to a subcommand, map errors to exit codes.

Exit codes: 0 result, 2 bad input (:class:`~rlverify.errors.RlverifyError`), 1 internal error.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from rlverify.errors import RlverifyError

#: Modules adding subcommands; each defines ``register(subparsers)``.
COMMAND_MODULES = [
    "rlverify.cli.verify",
    "rlverify.cli.abstract",
    "rlverify.cli.simulate",
    "rlverify.cli.heatmap",
    "rlverify.cli.map",
    "rlverify.cli.train",
    "rlverify.cli.reproduce",
    "rlverify.cli.inspect",
    "rlverify.cli.report",
    "rlverify.cli.benchmarks",
    "rlverify.cli.robust",
]

err_console = Console(stderr=True)


def build_parser() -> argparse.ArgumentParser:
    from rlverify import __version__

    parser = argparse.ArgumentParser(prog="rlverify", description="How safe is this trained policy, really?")
    parser.add_argument("--version", action="version", version=f"rlverify {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an option the subcommand does not know is reported with *that subcommand's* usage."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    parser = build_parser()
    args = parse(parser, argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from rlverify.models.symbolic import set_storm_logging

    set_storm_logging(args.verbose)
    try:
        return int(args.run(args) or 0)
    except RlverifyError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
        return exc.exit_code
    except BrokenPipeError:  # the reader went away (e.g. `| head`): nothing left to report to
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except Exception:  # an internal error: show the trace, exit 1
        err_console.print("[bold red]internal error[/] (please report it with the command line):")
        err_console.print_exception()
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
