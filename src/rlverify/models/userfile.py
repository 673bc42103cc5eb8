"""Import a user's Python file (a policy module, a system declaration): one way, one error."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from rlverify.errors import InputFileError, exception_text, safe_repr

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


def import_python_file(file: Path, what: str) -> ModuleType:
    """Execute ``file`` as a fresh module; ``what`` names it in messages (``"policy module"``).

    This runs the user's code, by design (a Python policy or system declaration is code the user asked to run);
    what it prints goes to stderr (stdout is for ``--json``).

    Raises:
        InputFileError: the file is missing, or importing it raised (the exception's class and first line) or
            called ``sys.exit``.
    """
    if not file.is_file():
        raise InputFileError(f"{file}: {what} not found")
    tag = what.replace(" ", "_")
    spec = importlib.util.spec_from_file_location(f"rlverify_user_{tag}_{abs(hash(str(file.resolve())))}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    note_user_code()
    try:
        with contextlib.redirect_stdout(sys.stderr):  # what it prints must not mix into --json output
            spec.loader.exec_module(module)
    except SystemExit as exc:  # sys.exit() at import: bad input, not the end of rlverify
        raise InputFileError(f"{file}: importing the {what} called sys.exit({safe_repr(exc.code)})") from None
    except Exception as exc:  # any error in the user's file is reported as bad input
        raise InputFileError(f"{file}: importing the {what} failed: {exception_text(exc)}") from None
    return module


def call_user_code(fn: Any, source: str, what: str, /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``: a function of the user's file (``source`` names it, ``what`` the call, e.g.
    ``"calling SYSTEM()"``), with what it prints sent to stderr, as :func:`import_python_file` does.

    Raises:
        InputFileError: the call raised or called ``sys.exit`` (one line: the file, the call, the exception).
    """
    note_user_code()
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return fn(*args, **kwargs)
    except SystemExit as exc:  # sys.exit() in the user's function: bad input, not the end of rlverify
        raise InputFileError(f"{source}: {what} called sys.exit({safe_repr(exc.code)}) (the file's code ran)") from None
    except Exception as exc:  # any error in the user's code is reported as bad input
        raise InputFileError(f"{source}: {what} raised {exception_text(exc)} (the file's code ran)") from None
