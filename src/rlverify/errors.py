"""One error hierarchy. Every user-facing error says what was wrong and where.

The CLI maps :class:`RlverifyError` (bad input) to exit code 2 and anything else to 1.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable
from types import ModuleType
from typing import Any


class RlverifyError(Exception):
    """Base class for errors caused by the user's input (exit code 2)."""

    exit_code = 2


class InputFileError(RlverifyError):
    """A file is missing, unreadable, or not in the expected format."""


class ModelError(RlverifyError):
    """The environment model cannot be parsed, built or used."""


class ConstantsError(ModelError):
    """Undefined or malformed model constants."""

    def __init__(self, message: str, missing: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.missing = tuple(missing)


class PropertyError(RlverifyError):
    """A property does not parse or does not fit the model or mode."""


class OptionError(RlverifyError):
    """An option (CLI flag or options-dataclass field) has a value outside what it accepts."""


class PolicyError(RlverifyError):
    """A policy does not fit the contract or the model; ``problems`` lists every issue found (in the message, on its
    one line: ``message: problem; problem``). ``row``: the row of the batch the policy failed on, when known (the
    caller names the episode and step it was)."""

    def __init__(self, message: str, problems: Iterable[str] = (), *, row: int | None = None) -> None:
        self.problems = tuple(problems)
        self.row = row
        if self.problems:
            message = f"{message}: " + "; ".join(self.problems)
        super().__init__(message)


class ModelTooLargeError(RlverifyError):
    """The model exceeds the configured state limit."""


class DependencyNotInstalled(RlverifyError):
    """An optional backend is needed; the message names the extra to install."""


def require(module: str, extra: str, *, purpose: str = "this feature") -> ModuleType:
    """Import the optional dependency ``module`` when it is first needed (the one way rlverify does it).

    Args:
        module: what to import (``torch``, ``stable_baselines3``, ``ray.util``).
        extra: the extra of rlverify that installs it (``torch``, ``sb3``, ``ray``).
        purpose: what needs it, for the message (``training``, ``a TorchScript policy``).

    Raises:
        DependencyNotInstalled: ``module`` cannot be imported; the message names the package and
            ``pip install 'rlverify[EXTRA]'`` (and the import's own error when a package it needs is missing).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]
        missing = exc.name.split(".")[0] if exc.name else package
        cause = "which is not installed" if missing == package else f"which cannot be imported ({exception_text(exc)})"
        raise DependencyNotInstalled(
            f"{purpose} needs the Python package '{package}', {cause}: pip install 'rlverify[{extra}]'"
        ) from None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """Return ' (did you mean 'x'?)' for the closest candidate, or ''."""
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class BenchmarkPolicyError(PolicyError):
    """A benchmark has no reference policy of that name."""


# Errors of the engines and layers above; each module re-exports its own.


class BenchmarkError(RlverifyError):
    """Unknown benchmark id or parameter out of range."""


class StatisticsError(RlverifyError):
    """A statistical parameter is out of range."""


class UnavailableActionError(PolicyError):
    """An action that is not available in the current state was chosen with ``unavailable='renormalize'``."""


class EnvError(RlverifyError):
    """The environment cannot be set up as asked (unknown reward model, terminal label, feature...)."""


class AbstractionError(RlverifyError):
    """Bad settings for the abstraction engine (horizon, phi, budgets)."""


class AbstractionBudgetError(AbstractionError):
    """The abstraction grew beyond ``max_states``; the message suggests how to make it smaller."""


class IntervalError(RlverifyError):
    """An interval MDP whose intervals admit no distribution (or are not intervals at all)."""


class DomainError(RlverifyError):
    """An abstract domain (template, region) is inconsistent or does not fit the system."""


class TrackError(InputFileError):
    """A malformed track file; the message names the line and column."""


class TrainingError(RlverifyError):
    """A training request cannot be carried out as asked (bad steps, hidden sizes, benchmark kind...)."""


class Table2Error(RlverifyError):
    """Unknown row id or method."""


class TrainCommandError(RlverifyError):
    """The training request does not fit the benchmark (algorithm, options) or its trainer is missing."""


class MemoryBudgetError(RlverifyError):
    """A phase of the exact engine would exceed ``--max-memory`` (estimated before the phase starts).

    Attributes: ``phase`` (what was about to run), ``estimate`` and ``limit`` (bytes of resident memory).
    """

    def __init__(self, message: str, *, phase: str, estimate: int, limit: int) -> None:
        super().__init__(message)
        self.phase, self.estimate, self.limit = phase, estimate, limit


# Naming what the user's code raised, without running more of it than needed


def type_name(value: Any) -> str:
    """``type(value).__name__`` (a string even for an odd class)."""
    try:
        return str.__str__(type(value).__name__)
    except Exception:  # a metaclass with a broken __name__
        return "object"


def exception_text(exc: BaseException, limit: int = 300) -> str:
    """One line naming an exception that the user's code raised: ``ValueError: first line of its message``
    (its class name alone when the message is empty; ``<unprintable E>`` when its ``__str__`` itself fails).
    Never raises."""
    name = type_name(exc)
    try:
        text = str(exc)
        text = str.__str__(text)  # a str subclass returned by __str__: a plain copy
    except BaseException as inner:  # __str__ is the user's code; anything it raises is caught
        if isinstance(inner, KeyboardInterrupt):
            raise
        return f"<unprintable {name}>"
    lines = text.strip().splitlines()
    return f"{name}: {lines[0].strip()[:limit]}" if lines else name


def safe_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` shortened to ``limit`` characters, or ``<unprintable T>`` when ``__repr__`` fails. Never
    raises."""
    try:
        text = str.__str__(repr(value))
    except BaseException as inner:  # __repr__ is the user's code
        if isinstance(inner, KeyboardInterrupt):
            raise
        return f"<unprintable {type_name(value)}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
