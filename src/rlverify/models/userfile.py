"""Run a user's Python code (import a policy module or a system declaration, call its function, a policy's call):
one way, one time limit, one error."""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, ModuleType
from typing import TypeVar

from rlverify.errors import InputFileError, exception_text, safe_repr

T = TypeVar("T")
#: a signal handler as :func:`signal.signal` returns it
_Handler = Callable[[int, FrameType | None], object] | int | None

#: Seconds importing a ``FILE.py:NAME`` system declaration, and then calling ``NAME()``, may each take before they are
#: stopped with an :class:`InputFileError` (``--system-timeout`` / ``load_system(timeout=...)``; None or 0: no limit).
DEFAULT_SYSTEM_TIMEOUT = 120.0

#: whether this process executed a user's Python file (:func:`ran_user_code`)
_RAN_USER_CODE = False


def ran_user_code() -> bool:
    """Whether this process executed a user's Python code (:func:`note_user_code`): the ``rlverify`` process then exits
    as Python does, finalising the user's objects (a log file they left open is flushed), not by
    :func:`rlverify.cli.main.run`'s short exit."""
    return _RAN_USER_CODE


def note_user_code() -> None:
    """Record that the user's own Python code is about to run: a Python file (:func:`import_python_file`), the module
    of ``gym:MODULE:ID`` or a Stable-Baselines3 zip loaded with ``--trust-code``."""
    global _RAN_USER_CODE
    _RAN_USER_CODE = True


class CodeTimeout(BaseException):
    """Raised by :class:`Alarm`'s handler inside the user's code that ran out of time (a BaseException: the user's
    code should not catch it with ``except Exception``)."""


class Alarm:
    """A ``SIGALRM`` timer around one run of the user's code whose handler raises :class:`CodeTimeout` after ``seconds``.

    It is armed only in the main thread, on platforms with ``setitimer``, and when no other interval timer runs
    (a nested call runs under the outer call's limit). Code that swallows the exception (a bare ``except:``) is hit
    again every half second until the call ends, and :attr:`fired` says that the limit was reached even if the call
    then returned. It interrupts Python code (loops, ``time.sleep``, waits); native code only when it returns.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.fired = False
        self._armed = False
        self._previous: _Handler = None

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self._armed:
            self.fired = True
            signal.setitimer(signal.ITIMER_REAL, 0.5)  # again, should the code swallow this one
            raise CodeTimeout

    def __enter__(self) -> Alarm:
        seconds = self.seconds
        if (
            seconds is not None
            and seconds > 0
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and signal.getitimer(signal.ITIMER_REAL)[0] == 0.0
        ):
            self._previous = signal.signal(signal.SIGALRM, self._handler)
            self._armed = True
            signal.setitimer(signal.ITIMER_REAL, float(seconds))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            self._armed = False
            signal.signal(signal.SIGALRM, self._previous if self._previous is not None else signal.SIG_DFL)


@contextlib.contextmanager
def _ctrl_c_marked() -> Iterator[list[bool]]:
    """Inside: ``[True]`` when a ``KeyboardInterrupt`` raised in the block may be a real Ctrl-C (a SIGINT arrived, or
    SIGINT is not watched here: another thread, a handler that is not Python's), ``[False]`` while none arrived (one
    raised then is the user's code's own ``raise KeyboardInterrupt``)."""
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if not callable(previous):  # not the main thread, or SIGINT ignored / default: nothing to tell apart
        yield [True]
        return
    seen = [False]

    def handler(signum: int, frame: FrameType | None) -> object:
        seen[0] = True
        return previous(signum, frame)  # Python's own raises KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def _timed_out(source: str, what: str, seconds: float | None, option: str) -> InputFileError:
    return InputFileError(
        f"{source}: {what} did not finish within {seconds:g} s (the file's code ran); if it is just slow, raise the "
        f"limit with {option} SECONDS (0: no limit)"
    )


@contextlib.contextmanager
def _user_code(source: str, what: str, timeout: float | None, option: str) -> Iterator[None]:
    """The block runs the user's code (``what``: ``"importing the policy module"``, ``"calling SYSTEM()"``): what it
    prints goes to stderr, and it is stopped after ``timeout`` seconds (:class:`Alarm`; None: no limit); a timeout or a
    ``KeyboardInterrupt`` the code raised itself (no Ctrl-C came) is an :class:`InputFileError` naming ``source``."""
    alarm = Alarm(timeout)
    try:
        with _ctrl_c_marked() as ctrl_c, alarm, contextlib.redirect_stdout(sys.stderr):  # stdout is for --json
            yield
            if alarm.fired:  # the code caught the timeout and went on
                raise CodeTimeout
    except CodeTimeout:
        raise _timed_out(source, what, timeout, option) from None
    except KeyboardInterrupt:
        if ctrl_c[0]:
            raise  # the user pressed Ctrl-C: the CLI says "interrupted"
        raise InputFileError(f"{source}: {what} raised KeyboardInterrupt (the file's code ran; no Ctrl-C came)") from None


def import_python_file(file: Path, what: str, *, timeout: float | None = None, option: str = "--system-timeout") -> ModuleType:
    """Execute ``file`` as a fresh module; ``what`` names it in messages (``"policy module"``).

    This runs the user's code, by design (a Python policy or system declaration is code the user asked to run);
    what it prints goes to stderr (stdout is for ``--json``). It is stopped after ``timeout`` seconds (None: no
    limit; see :class:`Alarm`); ``option`` is the one that raises the limit, named in the message.

    Raises:
        InputFileError: the file is missing, or importing it raised (the exception's class and first line, a
            ``KeyboardInterrupt`` that was no Ctrl-C), called ``sys.exit`` or took longer than ``timeout``.
    """
    if not file.is_file():
        raise InputFileError(f"{file}: {what} not found")
    tag = what.replace(" ", "_")
    spec = importlib.util.spec_from_file_location(f"rlverify_user_{tag}_{abs(hash(str(file.resolve())))}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    note_user_code()
    with _user_code(str(file), f"importing the {what}", timeout, option):
        try:
            spec.loader.exec_module(module)
        except SystemExit as exc:  # sys.exit() at import: bad input, not the end of rlverify
            raise InputFileError(f"{file}: importing the {what} called sys.exit({safe_repr(exc.code)})") from None
        except Exception as exc:  # any error in the user's file is reported as bad input
            raise InputFileError(f"{file}: importing the {what} failed: {exception_text(exc)}") from None
    return module


def call_user_code(
    fn: Callable[..., T],
    source: str,
    what: str,
    timeout: float | None = None,
    option: str = "--system-timeout",
    /,
    **kwargs: object,
) -> T:
    """``fn(**kwargs)``: a function of the user's file (``source`` names it, ``what`` the call, e.g.
    ``"calling SYSTEM()"``), with what it prints sent to stderr and under ``timeout``, as :func:`import_python_file`
    (the limit's arguments are positional: ``kwargs`` may hold any name).

    Raises:
        InputFileError: the call raised (also a ``KeyboardInterrupt`` that was no Ctrl-C), called ``sys.exit`` or
            took longer than ``timeout`` (one line: the file, the call, the exception or the option raising the limit).
    """
    note_user_code()
    with _user_code(source, what, timeout, option):
        try:
            out = fn(**kwargs)
        except SystemExit as exc:  # sys.exit() in the user's function: bad input, not the end of rlverify
            raise InputFileError(f"{source}: {what} called sys.exit({safe_repr(exc.code)}) (the file's code ran)") from None
        except Exception as exc:  # any error in the user's code is reported as bad input
            raise InputFileError(f"{source}: {what} raised {exception_text(exc)} (the file's code ran)") from None
    return out
