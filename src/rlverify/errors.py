"""One error hierarchy. Every user-facing error says what was wrong and where.

The CLI maps :class:`RlverifyError` (bad input) to exit code 2 and anything else to 1.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


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


class PolicyError(RlverifyError):
    """A policy does not fit the contract or the model; ``problems`` lists every issue found."""

    def __init__(self, message: str, problems: Iterable[str] = ()) -> None:
        self.problems = tuple(problems)
        if self.problems:
            message = message + "\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(message)


class ModelTooLargeError(RlverifyError):
    """The model exceeds the configured state limit."""


class DependencyNotInstalled(RlverifyError):
    """An optional backend is needed; the message names the extra to install."""


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """Return ' (did you mean 'x'?)' for the closest candidate, or ''."""
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class BenchmarkPolicyError(PolicyError):
    """A benchmark has no reference policy of that name."""
