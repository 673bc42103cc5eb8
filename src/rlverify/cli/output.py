"""What every command prints for scripts: one JSON envelope (``--json``) and one set of exit codes.

With ``--json`` every command prints exactly one JSON document to stdout, of the same shape::

    {
      "command": "verify",            # the subcommand as typed: "verify", "benchmarks list", "reproduce table2"
      "rlverify": "0.9.0",            # the version that made it
      "exit_code": 0,                 # the process's exit code (see below)
      "error": null,                  # the one-line cause when exit_code is 1 or 2, else null
      "holds": null,                  # a threshold property's verdict: true, false, or null (none, or undecided)
      "result": {...},                # the command's data: a result's own JSON (Result.to_json(), as --out FILE.json
                                      #   writes it) or the command's listing/summary; null after an error
      "warnings": [...]               # what to know before trusting the result (also printed on stderr)
    }

Exit codes: 0 the command did its work (and, with ``--fail-on-violation``, the threshold property holds); 1 the
threshold property is violated (``--fail-on-violation``), engines disagree (``report``), or an internal error;
2 bad input (one line on stderr naming the cause); 3 the threshold property is undecided (``--fail-on-violation``:
the certified bracket or the statistical interval contains the bound; the abstraction's upper bound is above it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from rlverify import __version__
from rlverify.cli.console import note
from rlverify.errors import OptionError

__all__ = [
    "EXIT_UNDECIDED",
    "EXIT_VIOLATED",
    "add_fail_on_violation",
    "command_name",
    "envelope",
    "print_envelope",
    "require_threshold",
    "verdict_exit_code",
]

#: ``--fail-on-violation``: the threshold property does not hold
EXIT_VIOLATED = 1
#: ``--fail-on-violation``: the threshold property could be neither shown nor refuted
EXIT_UNDECIDED = 3


def command_name(args: argparse.Namespace | None, fallback: str | None = None) -> str | None:
    """The subcommand ``args`` ran, as typed (``"verify"``, ``"benchmarks list"``, ``"reproduce table2"``)."""
    if args is None or getattr(args, "command", None) is None:
        return fallback
    words = [args.command]
    for nested in ("action", "experiment"):  # benchmarks ACTION, reproduce EXPERIMENT
        if getattr(args, nested, None) is not None:
            words.append(getattr(args, nested))
    return " ".join(words)


def envelope(
    command: str | None,
    result: Any,
    *,
    exit_code: int = 0,
    error: str | None = None,
    holds: bool | None = None,
    warnings: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The one JSON envelope (see the module's docstring): ``result`` is a :class:`~rlverify.results.Result` (its
    :meth:`~rlverify.results.Result.to_json`), JSON-ready data, or None; ``warnings`` default to the result's."""
    from rlverify.results import Result, jsonable  # lazy: numpy, --help start-up

    if isinstance(result, Result):
        if warnings is None:
            warnings = result.warnings
        result = result.to_json()
    return {
        "command": command,
        "rlverify": __version__,
        "exit_code": int(exit_code),
        "error": error,
        "holds": holds,
        "result": jsonable(result),
        "warnings": list(warnings or ()),
    }


def print_envelope(args: argparse.Namespace, result: Any, **kwargs: Any) -> None:
    """Print :func:`envelope` of ``args``'s command as indented JSON to stdout (once: marks ``args``)."""
    from rlverify.results import jsonable  # lazy: numpy, --help start-up

    data = envelope(command_name(args), result, **kwargs)
    print(json.dumps(jsonable(data), indent=2, allow_nan=False, default=str))
    args.json_printed = True


def add_fail_on_violation(p: argparse.ArgumentParser) -> None:
    """``--fail-on-violation``: the exit code says whether the threshold property holds (1 violated, 3 undecided)."""
    p.add_argument(
        "--fail-on-violation",
        action="store_true",
        help="exit 1 when the threshold property (P<=b [...], P>=b [...]) does not hold, 3 when it is undecided "
        "(the bound lies within the certified bracket or the interval), 0 when it holds; for scripts and CI",
    )


def verdict_exit_code(args: argparse.Namespace, holds: bool | None) -> int:
    """The exit code of a threshold verdict: 0 unless ``--fail-on-violation`` (then 0 holds, 1 violated, 3 undecided)."""
    if not getattr(args, "fail_on_violation", False) or holds:
        return 0

    code = EXIT_UNDECIDED if holds is None else EXIT_VIOLATED
    note(f"--fail-on-violation: the threshold property {'is undecided' if holds is None else 'does not hold'} (exit {code})")
    return code


def require_threshold(args: argparse.Namespace, has_threshold: bool, hint: str = "") -> None:
    """Refuse ``--fail-on-violation`` (before the work) when there is no threshold to fail on.

    Raises:
        OptionError: ``--fail-on-violation`` with a property that asks for a value (``P=?``).
    """

    if getattr(args, "fail_on_violation", False) and not has_threshold:
        raise OptionError(
            "--fail-on-violation needs a threshold property, e.g. 'P<=0.1 [F \"crash\"]' or 'P>=0.9 [F \"goal\"]'"
            + (f" ({hint})" if hint else "")
            + "; a P=? property has no verdict"
        )
