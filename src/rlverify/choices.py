"""Every named choice of rlverify's options and results, as ``enum.StrEnum`` types.

Each member *is* its string (``Mode.MONOLITHIC == "monolithic"``), so the JSON keeps strings and text given by a
user or an older caller still compares equal; :func:`choose` turns text into a member at the door (an
:class:`~rlverify.errors.OptionError` naming the option and the allowed values otherwise), and the CLI's
``choices=`` lists are :func:`values` of the same types. Imports nothing heavy: the CLI's parser reads it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from rlverify.errors import OptionError, safe_repr

__all__ = [
    "Aggregate",
    "BackendKind",
    "Guarantee",
    "Mode",
    "Numerics",
    "Optimum",
    "OutputKind",
    "ShieldKind",
    "Strategy",
    "Unavailable",
    "choose",
    "values",
]


class Mode(StrEnum):
    """How a policy is read by the exact engine: every action it gives mass (``stochastic``), its argmax action
    only (``deterministic``; ties to the first action in its order), or no policy (``monolithic``: Pmin/Pmax over
    all schedulers)."""

    STOCHASTIC = "stochastic"
    DETERMINISTIC = "deterministic"
    MONOLITHIC = "monolithic"


class Strategy(StrEnum):
    """How the policy's chain is built (:class:`~rlverify.exact.options.ExactOptions`)."""

    AUTO = "auto"
    FULL = "full"
    ONTHEFLY = "onthefly"
    MERGED = "merged"


class Unavailable(StrEnum):
    """What happens to a policy's mass on an action the state does not offer: an absorbing ``stalled`` state
    (``stall``, the default: the chain stays the policy's) or rescaling the offered actions (``renormalize``)."""

    STALL = "stall"
    RENORMALIZE = "renormalize"


class Numerics(StrEnum):
    """Which solver computes an exact value: ``sound`` (a certified bracket), ``direct`` (a linear solve, exact up
    to floating point) or ``fast`` (value iteration on a convergence heuristic: no guarantee)."""

    SOUND = "sound"
    DIRECT = "direct"
    FAST = "fast"


class OutputKind(StrEnum):
    """How a network's outputs become action probabilities: as they are, through a softmax, or greedily (one-hot
    argmax, ties to the first action in the declared order)."""

    PROBABILITIES = "probabilities"
    LOGITS = "logits"
    Q_VALUES = "q-values"


class ShieldKind(StrEnum):
    """How a shield's threshold compares an action's value with the best (:func:`rlverify.exact.shield.compute_shield`)."""

    RELATIVE = "relative"
    ABSOLUTE = "absolute"
    FACTOR = "factor"


class Aggregate(StrEnum):
    """How a risk map aggregates the states of one cell."""

    MAX = "max"
    MIN = "min"
    MEAN = "mean"


class Optimum(StrEnum):
    """Which optimum over all schedulers a result is compared with."""

    MIN = "min"
    MAX = "max"


class BackendKind(StrEnum):
    """Where work runs: this process or Ray tasks/actors."""

    LOCAL = "local"
    RAY = "ray"


class Guarantee(StrEnum):
    """The kind of guarantee a result carries (its ``guarantee`` field; words for people in its summary).

    ``sound``: a certified bracket around the exact value; ``direct``: an exact method in floating point (a linear
    solve, enumeration); ``unsound``: value iteration stopped on a heuristic; ``sound upper bound``: the abstraction's
    bound over a whole initial region; ``statistical``: an interval or a test's decision at a stated confidence."""

    SOUND = "sound"
    DIRECT = "direct"
    UNSOUND = "unsound"
    SOUND_UPPER_BOUND = "sound upper bound"
    STATISTICAL = "statistical"


E = TypeVar("E", bound=StrEnum)


def values(kind: type[StrEnum]) -> tuple[str, ...]:
    """The allowed texts of ``kind``, in declaration order (a CLI's ``choices=``)."""
    return tuple(m.value for m in kind)


def choose(kind: type[E], value: object, option: str) -> E:
    """``value`` (a member or its text) as a member of ``kind``.

    Raises:
        OptionError: naming ``option`` (e.g. ``"--mode"``), the allowed values and what was given.
    """
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    raise OptionError(f"{option}: expected one of {', '.join(values(kind))}, got {safe_repr(value)}")
