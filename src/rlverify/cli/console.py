"""The CLI's one console layer: every string is printed as text, never interpreted.

File names, variable names, policy specs, properties and messages come from the user; printed with
Rich markup on, ``[/]`` in one crashes the command (often after all the work) and ``p[bold]y.py``
is shown as ``py.py``. Here both consoles have markup, emoji codes and highlighting off, so a
string (a table cell, a title, a message) is shown exactly as written; the CLI's own styling is
explicit (:func:`styled`, :func:`line`). Control characters (an ANSI escape in a file name) are
shown as escapes (``\\x1b``) so that user text cannot move the cursor or recolour the terminal.

Every CLI print goes through :data:`console` (stdout) or :data:`err_console` (stderr, for progress,
warnings and errors, so that ``--json`` on stdout stays clean). Both are made on first use: importing this
module does not import Rich (``rlverify --help`` never does).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

__all__ = ["console", "err_console", "error", "line", "print_warnings", "progress_bar", "shown", "status", "styled", "warning"]

#: C0/C1 control characters other than tab and newline
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: Any) -> str:
    """``str(text)`` with control characters as Python escapes (``\\x1b``); everything else verbatim."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))


def plain_console(**kwargs: Any) -> Console:
    """A Rich console that renders every string as plain text (no markup, emoji or highlighting)."""
    from rich.console import Console

    class PlainConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Text:  # every str a table, title or print renders
            kwargs["markup"] = False
            kwargs["emoji"] = False
            return super().render_str(shown(text), **kwargs)

    return PlainConsole(markup=False, emoji=False, highlight=False, **kwargs)


class _OnFirstUse:
    """Stands for the console :func:`plain_console` makes (with ``kwargs``) when it is first used."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console: Console | None = None

    def made(self) -> Console:
        if self._console is None:
            self._console = plain_console(**self._kwargs)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.made(), name)


console = cast("Console", _OnFirstUse())
err_console = cast("Console", _OnFirstUse(stderr=True))


def real(target: Console) -> Console:
    """The Rich console ``target`` stands for (:data:`console` is made on first use), for Rich's own classes."""
    return target.made() if isinstance(target, _OnFirstUse) else target


def styled(text: Any, style: str) -> Text:
    """``text`` (shown verbatim) in ``style`` (e.g. ``"bold red"``)."""
    from rich.text import Text

    return Text(shown(text), style=style)


def line(*parts: str | Text) -> Text:
    """One line of plain strings (verbatim) and :func:`styled` pieces."""
    from rich.text import Text

    return Text.assemble(*(p if isinstance(p, Text) else shown(p) for p in parts))


def error(message: Any, *, label: str = "error:") -> None:
    """``error: MESSAGE`` on stderr (never wrapped)."""
    err_console.print(line(styled(label, "bold red"), " ", str(message)), soft_wrap=True)


def warning(message: Any) -> None:
    """``warning: MESSAGE`` on stderr (never wrapped)."""
    err_console.print(line(styled("warning:", "yellow"), " ", str(message)), soft_wrap=True)


def print_warnings(warnings: Sequence[str], target: Any = None) -> None:
    """A result's warnings on stderr, one per line (``target`` is accepted for the former signature)."""
    for w in warnings:
        warning(w)


@contextlib.contextmanager
def status(label: str, target: Console | None = None) -> Iterator[Callable[[Any], None]]:
    """A transient spinner on stderr; yields ``update(message)`` (the message shown verbatim).

    Where stderr is not a terminal (a pipe, a file: scripts, sweeps, CI) Rich's spinner shows nothing, so none is
    made (nor its refresh thread).
    """
    from rich.text import Text

    con = target or err_console
    if not (con.is_terminal or con.is_jupyter):
        yield lambda message: None
        return
    with con.status(Text(shown(label))) as st:
        yield lambda message: st.update(Text(shown(message)))


def progress_bar(label: str, *, detail: bool = False, target: Console | None = None) -> Any:
    """A transient progress bar on stderr (label, bar, done/total, [detail,] elapsed); texts are not markup."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    literal = shown(label).replace("{", "{{").replace("}", "}}")  # the column formats its text with the task
    columns: list[Any] = [TextColumn(literal, markup=False), BarColumn(), MofNCompleteColumn()]
    if detail:
        columns.append(TextColumn("{task.description}", markup=False))
    columns.append(TimeElapsedColumn())
    return Progress(*columns, console=real(target or err_console), transient=True)
