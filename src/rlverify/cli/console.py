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

__all__ = [
    "console",
    "err_console",
    "error",
    "line",
    "note",
    "print_warnings",
    "progress_bar",
    "set_verbosity",
    "shown",
    "status",
    "styled",
    "warning",
]

#: C0/C1 control characters other than tab and newline
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: Any) -> str:
    """``str(text)`` with control characters as Python escapes (``\\x1b``); everything else verbatim."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))


def one_line(text: Any) -> str:
    """:func:`shown`, with newlines as ``\\n`` too: user text (a name, a path) inside a line of ours."""
    return shown(text).replace("\n", "\\n")


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
    err_console.print(line(styled(label, "bold red"), " ", one_line(message)), soft_wrap=True)


def warning(message: Any) -> None:
    """``warning: MESSAGE`` on stderr (never wrapped)."""
    err_console.print(line(styled("warning:", "yellow"), " ", one_line(message)), soft_wrap=True)


def note(message: Any) -> None:
    """An informational line on stderr (``wrote FILE``), left out with ``-q``."""
    if not _VERBOSITY["quiet"]:
        err_console.print(str(message), soft_wrap=True)


def print_warnings(warnings: Sequence[str], target: Any = None) -> None:
    """A result's warnings on stderr, one per line (``target`` is accepted for the former signature)."""
    for w in warnings:
        warning(w)


#: the CLI's ``-v`` / ``-q`` (:func:`set_verbosity`)
_VERBOSITY = {"verbose": False, "quiet": False}

#: seconds between two plain progress lines of one bar or spinner (the first and a finished one are always shown)
PROGRESS_INTERVAL = 1.0


def set_verbosity(*, verbose: bool = False, quiet: bool = False) -> None:
    """``-v``: progress also where stderr is not a terminal, as plain timestamped lines; ``-q``: no progress, no notes."""
    _VERBOSITY.update(verbose=bool(verbose), quiet=bool(quiet))


def _live(con: Any) -> bool:
    """Whether Rich's live displays (spinner, bar) show on ``con``: a terminal or a notebook, not ``-q``."""
    return not _VERBOSITY["quiet"] and bool(con.is_terminal or con.is_jupyter)


def _plain() -> bool:
    """Plain progress lines instead: ``-v`` where stderr is not a terminal (a pipe, a file, CI's log)."""
    return _VERBOSITY["verbose"] and not _VERBOSITY["quiet"]


class PlainProgress:
    """Progress as plain lines on stderr, ``HH:MM:SS LABEL: DONE/TOTAL DETAIL``: no Rich live display, no ANSI codes.

    The interface of the ``rich.progress.Progress`` the CLI uses (a context manager; ``add_task``, ``update``); a line
    at the first update, then at most one per :data:`PROGRESS_INTERVAL` seconds, and the last state when it ends.
    """

    def __init__(self, label: str, *, interval: float | None = None) -> None:
        self.label = shown(label)
        self.interval = PROGRESS_INTERVAL if interval is None else interval
        self.tasks: dict[int, dict[str, Any]] = {}
        self._last_line = -float("inf")
        self._last_text: str | None = None

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self._emit(force=True)

    def add_task(self, description: str = "", total: float | None = None, **_: Any) -> int:
        task = len(self.tasks)
        self.tasks[task] = {"description": description, "total": total, "completed": 0}
        return task

    def update(self, task: int, *, advance: float | None = None, **fields: Any) -> None:
        state = self.tasks[task]
        state.update((k, v) for k, v in fields.items() if k in ("description", "total", "completed") and v is not None)
        if advance:
            state["completed"] += advance
        self._emit()

    def text(self) -> str:
        """The current line's text (without the time)."""
        parts = []
        for state in self.tasks.values():
            done, total = state["completed"], state["total"]
            count = f"{done:,.0f}" + (f"/{total:,.0f}" if total else "") if total or done else ""
            detail = shown(state["description"]) if state["description"] and state["description"] != self.label else ""
            parts.append(" ".join(p for p in (count, detail) if p))
        return f"{self.label}: " + "; ".join(parts) if parts else self.label

    def _emit(self, *, force: bool = False) -> None:
        import time

        text = self.text()
        now = time.monotonic()
        if text == self._last_text or (not force and now - self._last_line < self.interval):
            return
        self._last_line, self._last_text = now, text
        _plain_line(text)


def _plain_line(text: str) -> None:
    """``HH:MM:SS TEXT`` on stderr as plain text (never wrapped, no styles)."""
    import sys
    import time

    try:
        sys.stderr.write(f"{time.strftime('%H:%M:%S')} {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed stderr must not stop the work
        pass


@contextlib.contextmanager
def status(label: str, target: Console | None = None) -> Iterator[Callable[[Any], None]]:
    """A transient spinner on stderr; yields ``update(message)`` (the message shown verbatim).

    Where stderr is not a terminal (a pipe, a file: scripts, sweeps, CI) Rich's spinner shows nothing, so none is
    made (nor its refresh thread); with ``-v`` the label and the messages are printed as plain timestamped lines
    (:class:`PlainProgress`'s pace) instead. ``-q`` shows nothing.
    """
    from rich.text import Text

    con = target or err_console
    if not _live(con):
        if not _plain():
            yield lambda message: None
            return
        plain = PlainProgress(label)
        task = plain.add_task(label)
        _plain_line(plain.label)

        def update(message: Any) -> None:
            plain.update(task, description=str(message))

        yield update
        return
    with con.status(Text(shown(label))) as st:
        yield lambda message: st.update(Text(shown(message)))


def progress_bar(label: str, *, detail: bool = False, target: Console | None = None) -> Any:
    """A transient progress bar on stderr (label, bar, done/total, [detail,] elapsed); texts are not markup.

    Where stderr is not a terminal: with ``-v`` a :class:`PlainProgress` (timestamped lines), else nothing (a
    disabled bar); with ``-q`` nothing.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    con = target or err_console
    if not _live(con) and _plain():
        return PlainProgress(label)
    literal = shown(label).replace("{", "{{").replace("}", "}}")  # the column formats its text with the task
    columns: list[Any] = [TextColumn(literal, markup=False), BarColumn(), MofNCompleteColumn()]
    if detail:
        columns.append(TextColumn("{task.description}", markup=False))
    columns.append(TimeElapsedColumn())
    # disabled off a terminal: a transient bar there still wrote an empty line to stderr when it stopped
    return Progress(*columns, console=real(con), transient=True, disable=not _live(con))
