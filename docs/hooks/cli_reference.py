"""MkDocs hook: the command-line reference page, generated from the CLI's own parsers at build time.

``docs/reference/cli.md`` holds the marker ``<!-- rlverify-cli -->``; it is replaced by ``rlverify --help`` and every
subcommand's ``--help``, so the page can never disagree with the program (the help texts are the single source).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- rlverify-cli -->"


def _help(parser: argparse.ArgumentParser) -> str:
    return parser.format_help().rstrip()


def cli_reference() -> str:
    """The reference as Markdown: the top-level help, then one section per subcommand (in ``--help`` order)."""
    from rlverify.cli.main import COMMANDS, build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal's width: fixed, so the page does not depend on it
    top = build_parser()
    parts = ["## rlverify", "", "```text", _help(top), "```", ""]
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name in COMMANDS:
        parts += [f"## rlverify {name}", "", "```text", _help(sub.choices[name]), "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())
