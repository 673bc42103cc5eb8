"""``rlverify`` entry point: parse arguments, dispatch to a subcommand, map errors to exit codes.

Exit codes: 0 result, 2 bad input (:class:`~rlverify.errors.RlverifyError`, or what only the input or the
machine causes: see :func:`_input_problem`), 1 internal error (with the trace). Argument values may start
with ``-`` (:func:`dash_values`); number options refuse NaN, infinity and integers beyond 64 bits.
All output goes through :mod:`rlverify.cli.console` (user text is never markup).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import logging
import math
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from rlverify import __version__
from rlverify.cli.console import err_console, error, set_verbosity
from rlverify.cli.output import print_envelope
from rlverify.errors import RlverifyError
from rlverify.files import all_or_nothing

#: The subcommands, in the order ``--help`` lists them; ``rlverify.cli.NAME`` defines ``register(subparsers)``.
COMMANDS = (
    "verify",
    "abstract",
    "simulate",
    "heatmap",
    "map",
    "train",
    "reproduce",
    "inspect",
    "report",
    "benchmarks",
    "robust",
    "examples",
    "explain",
    "shield",
)
COMMAND_MODULES = [f"rlverify.cli.{name}" for name in COMMANDS]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: every subcommand's, or (``command``) only that one's in full and the others by name.

    The modules of the subcommands import only the standard library and rlverify's light modules (their
    options' choices): ``rlverify --help`` loads no engine. A parser for one ``command`` skips importing
    and building the others (their names remain, for argparse's messages).
    """

    parser = Parser(prog="rlverify", description="How safe is this trained policy, really?")
    parser.add_argument("--version", action="version", version=f"rlverify {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log progress details to stderr (where stderr is not a terminal: plain timestamped progress lines)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print only the result, its warnings and errors: no progress or notes"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        if command in (None, name):
            importlib.import_module(f"rlverify.cli.{name}").register(sub)
        else:
            sub.add_parser(name)
    for p in _parsers(parser):
        if p is not parser:  # -v/-q after the subcommand too (not overriding one given before it)
            p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
            p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        for action in p._actions:  # every number option refuses NaN/inf and what its type cannot hold
            if action.type is float:
                action.type = finite_float
            elif action.type is int:
                action.type = int64
    return parser


class Parser(argparse.ArgumentParser):
    """argparse's parser (on stderr, exit 2) that also keeps the message, for ``--json``'s envelope (:func:`main`);
    subcommand parsers are of the same class. A usage error (an unknown option, a missing argument) prints the
    usage, then the message; a bad value of an option (``--precision nan``, ``--mode fast-ish``) prints only the
    one line naming the option and the value."""

    #: the last usage error's message (one parse per process)
    last_error: str | None = None

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError:
            self._bad_value = True
            raise

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError:
            self._bad_value = True
            raise

    def error(self, message: str) -> Any:
        Parser.last_error = f"{self.prog}: {message}"
        if getattr(self, "_bad_value", False):
            self.exit(2, f"{self.prog}: error: {message}\n")
        super().error(message)


def finite_float(text: str) -> float:
    """An option's float value: a finite number, and not a non-zero one that double precision rounds to 0
    (``--policy-timeout 1e-400`` would mean "no limit"); argparse reports the message."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got '{text}'")
    if value == 0 and any(c in "123456789" for c in text.lower().split("e")[0]):
        raise argparse.ArgumentTypeError(f"'{text}' is not 0 but rounds to 0 in double precision")
    return value


def int64(text: str) -> int:
    """An option's integer value, which must fit a 64-bit signed integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
    if not -(2**63) <= value < 2**63:
        raise argparse.ArgumentTypeError(f"{text} is out of range (a 64-bit integer)")
    return value


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every (nested) subcommand parser."""
    yield parser
    sub = _subparsers(parser)
    if sub is not None:
        for child in dict.fromkeys(sub.choices.values()):
            yield from _parsers(child)


def _subparsers(parser: argparse.ArgumentParser) -> Any:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _option(parser: argparse.ArgumentParser, token: str) -> argparse.Action | None:
    """The action ``token`` names in ``parser`` (an option string or an unambiguous ``--`` prefix), or None."""
    known = parser._option_string_actions
    key = token.split("=", 1)[0]
    if key in known:
        return known[key]
    if key.startswith("--") and len(key) > 2:
        matches = {known[o] for o in known if o.startswith(key)}
        if len(matches) == 1:
            return matches.pop()
    return None


def dash_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``--opt -value`` as ``--opt=-value`` when ``-value`` is not an option of the command.

    argparse reads a value starting with ``-`` as an option (``--importance '-abs(x-12)'``, ``--max-memory -5G``
    then fail with "expected one argument"); every option taking one value may take such a value here,
    which the option's own check then accepts or refuses with a proper message.
    """
    out: list[str] = []
    current = parser
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return out + list(argv[i:])
        sub = _subparsers(current)
        if sub is not None and token in sub.choices:
            current = sub.choices[token]
            out.append(token)
            i += 1
            continue
        taken, used = _with_value(current, argv, i)
        out += taken
        i += used
    return out


def _with_value(parser: argparse.ArgumentParser, argv: Sequence[str], i: int) -> tuple[list[str], int]:
    """``argv[i]`` and, for an option taking one value, that value: ``[--opt=-value]`` when it starts with ``-``
    and is no option of the command, ``[--opt, value]`` otherwise (never read as a subcommand); else ``[argv[i]]``;
    and how many tokens of ``argv`` that took."""
    token = argv[i]
    action = _option(parser, token)
    if action is None or action.nargs is not None or "=" in token or i + 1 >= len(argv):
        return [token], 1
    value = argv[i + 1]
    if value.startswith("-") and value != "-" and _option(parser, value) is None:
        return [f"{token}={value}"], 2
    return [token, value], 2


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an option the subcommand does not know is reported with *that subcommand's* usage."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(dash_values(parser, argv))
    if extra:
        sub = _subparsers(parser)
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def invoked(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is not an option, if a subcommand), or None."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


#: Python's cyclic collector while a command runs: every 100,000 net allocations of container objects rather than
#: 700. A command imports ~500 modules (few reference cycles: the big data are numpy arrays, which the collector
#: does not track), so at the default it ran ~100 collections in a small verification, ~30 ms of 0.7 s.
COLLECTOR_THRESHOLDS = (100_000, 50, 100)


@contextlib.contextmanager
def coarser_collection() -> Iterator[None]:
    """:data:`COLLECTOR_THRESHOLDS` inside the block; the caller's thresholds after (``main`` may run in a notebook)."""
    before = gc.get_threshold()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    with coarser_collection():
        return _main(argv)


def run() -> NoReturn:
    """The ``rlverify`` process (the console script and ``python -m rlverify``): :func:`main`, then exit with its code
    without the interpreter's teardown of every module, which took 0.1-0.15 s of a small verification's 0.8 s once
    scipy and stormpy are loaded. What the teardown does that a command may need is done first (:func:`_finish`).
    Where the command ran the user's own Python code, or something runs ``run`` that carries on after it (a profiler,
    IPython's ``%run``: :func:`_outermost`), it raises ``SystemExit`` as ``sys.exit`` does: Python's own exit.

    The collector's coarser thresholds (:data:`COLLECTOR_THRESHOLDS`) hold to the end and the collector is off once
    the command returns: restoring the default thresholds, as :func:`main` does for its caller, made the next
    allocation collect every object young since the command began (~35 ms of a small verification)."""
    before = gc.get_threshold()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    try:
        code: str | int | None = _main(None)
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        code = exc.code
    if _ran_user_code() or not _outermost():
        gc.set_threshold(*before)
        sys.exit(code)  # Python's exit: the user's objects finalised, or the code that called run() carries on
    gc.disable()
    os._exit(_finish(code))


def _ran_user_code() -> bool:
    """Whether the command ran the user's own Python code (:func:`rlverify.models.userfile.ran_user_code`)."""
    userfile = sys.modules.get("rlverify.models.userfile")
    return userfile is not None and bool(userfile.ran_user_code())


def _outermost() -> bool:
    """Whether :func:`run` was called by the process's main program with nothing of Python's above it but ``runpy``
    (the console script, ``python -m rlverify``, ``python -c``): not under a profiler, a coverage or trace runner or
    IPython's ``%run``, which carry on after the command and must get its ``SystemExit``."""
    frame = sys._getframe(2)  # 0: here, 1: run, 2: its caller
    if frame.f_globals.get("__name__") != "__main__":
        return False
    above = frame.f_back
    while above is not None:
        if above.f_globals.get("__name__") != "runpy":
            return False
        above = above.f_back
    return True


def _finish(code: str | int | None) -> int:
    """What the interpreter does at exit, but for freeing its modules: the exit status of ``code`` (as ``sys.exit``
    takes it), with non-daemon threads joined, ``atexit`` handlers run (Ray's shutdown, temporary directories removed,
    logging flushed, a Python policy's own handlers) and Python's and the C library's output buffers flushed."""
    status = _exit_status(code)
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)  # what Python's exit calls: threading's own exit hooks, then joins
    if shutdown is not None:
        try:
            shutdown()
        except KeyboardInterrupt:  # Ctrl-C while a thread is waited for
            status = 130
    atexit._run_exitfuncs()
    if not _flushed() and status == 0:  # what was written is lost (a full disk): 120 as in Python's exit, unless the
        status = 120  # command already failed (its own status says more)
    _flush_c_streams()
    return status


def _exit_status(code: str | int | None) -> int:
    """The exit status of ``code`` as ``sys.exit`` takes it (a message: printed to stderr, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _flushed() -> bool:
    """Python's stdout and stderr flushed; False when what was written is lost (a full disk)."""
    ok = True
    for stream in (sys.stdout, sys.stderr):
        if stream is None or stream.closed:  # started without it (``>&-``), or closed: nothing to write
            continue
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went away (``| head``): not an error, as in _broken_pipe
            pass
        except (OSError, ValueError):
            ok = False
    return ok


def _flush_c_streams() -> None:
    """``fflush(NULL)``: what native code (Storm's log, a library's ``printf``) left in the C library's buffers,
    which ``exit`` would have written and ``os._exit`` does not."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError, TypeError):  # (TypeError: no CDLL(None) off POSIX)
        ctypes.CDLL(None).fflush(None)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(invoked(argv))
    try:
        args = parse(parser, argv)
        if args.verbose and args.quiet:
            parser.error("-v/--verbose and -q/--quiet: give one of them")
    except SystemExit as exc:  # a usage error (exit 2): with --json also the envelope on stdout
        if exc.code == 2 and _wants_json(argv):
            print_envelope(argparse.Namespace(command=invoked(argv)), None, exit_code=2, error=Parser.last_error)
        raise
    level = logging.INFO if args.verbose else (logging.ERROR if args.quiet else logging.WARNING)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # libraries' warnings (numpy overflow in a policy's network, torch's notices) are details: shown with -v
    logging.captureWarnings(True)
    logging.getLogger("py.warnings").setLevel(logging.WARNING if args.verbose else logging.ERROR)
    from rlverify.models.numerics import set_storm_logging  # (loads no stormpy: applied when a command does)

    set_verbosity(verbose=args.verbose, quiet=args.quiet)
    set_storm_logging(args.verbose)
    with results_only_on_stdout():
        return _run(args)


def _wants_json(argv: Sequence[str]) -> bool:
    """``--json`` among the options of ``argv`` (before a ``--``)."""
    options = argv[: list(argv).index("--")] if "--" in argv else argv
    return "--json" in options


def _run(args: argparse.Namespace) -> int:
    code, message = _outcome(args)
    if getattr(args, "json", False) and not getattr(args, "json_printed", False) and code != 0:
        try:  # the error as the envelope on stdout too (its one line is on stderr)
            print_envelope(args, None, exit_code=code, error=message)
        except (BrokenPipeError, OSError):
            pass
    return code


def _outcome(args: argparse.Namespace) -> tuple[int, str | None]:
    """Run the command: its exit code and, for a failure, the one-line cause (printed on stderr here)."""

    try:
        with all_or_nothing():  # a command that fails leaves none of its output files
            return int(args.run(args) or 0), None
    except RlverifyError as exc:
        error(exc)
        return exc.exit_code, str(exc)
    except BrokenPipeError:
        return _broken_pipe(), None
    except (MemoryError, RecursionError, UnicodeDecodeError, OverflowError, OSError) as exc:
        message = _input_problem(exc)
        if message is None:
            return _internal_error(), _internal_message()
        error(message + ("" if args.verbose else " (-v shows where)"))
        if args.verbose:
            err_console.print_exception()
        return 2, message
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130, "interrupted"
    except Exception:  # an internal error: show the trace, exit 1
        return _internal_error(), _internal_message()


def _internal_message() -> str:
    """The exception being handled, as the envelope's one-line error."""
    exc = sys.exc_info()[1]
    return f"internal error: {type(exc).__name__}: {exc}" if exc is not None else "internal error"


@contextlib.contextmanager
def results_only_on_stdout() -> Iterator[None]:
    """While a command runs, file descriptor 1 is stderr's and only rlverify's own output (``sys.stdout``, on a copy of
    the original descriptor) reaches the real stdout: what native code writes there (HiGHS's banner, Storm's log with
    ``-v``, a policy's ``os.write(1, ...)``) goes to stderr, so ``--json`` output stays JSON. A no-op where
    ``sys.stdout`` is not descriptor 1 (a captured stream)."""
    import os

    try:
        if sys.stdout.fileno() != 1:
            raise ValueError
    except (AttributeError, OSError, ValueError):
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    original = sys.stdout
    sys.stdout = os.fdopen(saved, "w", encoding=original.encoding, errors=original.errors, buffering=1)
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
        except (BrokenPipeError, OSError):
            pass
        os.dup2(saved, 1)
        try:
            sys.stdout.close()
        except (BrokenPipeError, OSError):
            pass
        sys.stdout = original


def _input_problem(exc: BaseException) -> str | None:
    """The one-line cause of an exception that only the input or the machine causes (exit code 2), or None.

    Where the input is read, errors are raised as :class:`RlverifyError` naming the file; this is the net
    for what escapes a reader: an OS error on a named file (unreadable, unwritable, full disk), text that
    is not UTF-8, input nested too deeply to parse, a number too large, exhausted memory.
    """
    if isinstance(exc, MemoryError):
        return (
            "out of memory: the model, the number of runs or the abstraction is too large for this machine "
            "(see --max-states / --max-memory / --batch-size)"
        )
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply to be read (a property, expression or JSON file)"
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"an input file is not UTF-8 text ({exc.reason} at byte {exc.start}: "
            f"{bytes(exc.object[exc.start : exc.start + 1])!r}); rlverify reads text files as UTF-8"
        )
    if isinstance(exc, OverflowError):
        return f"a number is too large: {exc}"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc.__class__.__name__}"
    return None


def _broken_pipe() -> int:
    """The reader went away (e.g. ``| head``): nothing left to report to."""
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _internal_error() -> int:
    """Show the trace of the exception being handled; exit code 1."""
    error("(please report it with the command line):", label="internal error")
    err_console.print_exception()
    return 1


if __name__ == "__main__":  # pragma: no cover
    run()
