"""Classifying Storm's formulas: which path formula an operator holds (:func:`path_kind`), its bound (:func:`bound`,
the one place a step bound is read), whether its state formulas are propositional (:func:`has_operator`), and the
quantitative form that is checked (:func:`quantitative`).

Read from stormpy.logic's objects (their classes, ``upper_bound_expression``, ``has_lower_bound``); stormpy 2.0
exposes neither a bound's kind (steps or a reward) nor its strictness, nor the bound of ``C``/``I``, nor the
operands of a binary state formula: those are read from Storm's printing of that one node.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from rlverify.models.properties import Property

__all__ = [
    "Bound",
    "PathKind",
    "StormFormula",
    "bound",
    "has_operator",
    "is_reward_bounded",
    "path_kind",
    "path_of",
    "quantitative",
    "step_upper_bound",
]

#: a stormpy.logic formula (stormpy's objects are untyped)
StormFormula = Any


class PathKind(enum.Enum):
    """The path formula inside a P or R operator."""

    EVENTUALLY = "F"
    UNTIL = "U"
    BOUNDED_UNTIL = "U<=k"  # step-, reward- or interval-bounded (F<=k is true U<=k)
    GLOBALLY = "G"
    CUMULATIVE = "C"
    INSTANTANEOUS = "I"
    OTHER = "other"  # X (stormpy has no class for it), long-run average, ...


#: the forms whose bound Storm iterates step by step
BOUNDED = frozenset({PathKind.BOUNDED_UNTIL, PathKind.CUMULATIVE, PathKind.INSTANTANEOUS})


def path_kind(path: StormFormula) -> PathKind:
    """Which path formula ``path`` is (by its stormpy.logic class)."""
    from stormpy import logic  # lazy: stormpy, start-up

    for cls, kind in (
        (logic.BoundedUntilFormula, PathKind.BOUNDED_UNTIL),
        (logic.UntilFormula, PathKind.UNTIL),
        (logic.EventuallyFormula, PathKind.EVENTUALLY),
        (logic.GloballyFormula, PathKind.GLOBALLY),
        (logic.CumulativeRewardFormula, PathKind.CUMULATIVE),
        (logic.InstantaneousRewardFormula, PathKind.INSTANTANEOUS),
    ):
        if isinstance(path, cls):
            return kind
    return PathKind.OTHER


def path_of(formula: StormFormula) -> StormFormula | None:
    """The path formula of an operator formula (``P=? [F a]``: ``F a``), None for a formula without one."""
    from stormpy import logic  # lazy: stormpy, start-up

    return formula.subformula if isinstance(formula, (logic.UnaryStateFormula, logic.UnaryPathFormula)) else None


@dataclass(frozen=True)
class Bound:
    """The bound of a bounded path formula (``U<=k``, ``U<k``, ``Urew{"r"}<=k``, ``U[a,b]``, ``U>=a``, ``C<=k``,
    ``I=k``)."""

    #: the upper bound as Storm evaluates it (None: none, or not an integer)
    upper: int | None
    #: written as a number (not an expression of constants)
    literal: bool
    #: ``<k``: the last step excluded
    strict: bool = False
    #: a lower bound (``U>=a``, ``U[a,b]``) or several dimensions
    lower: bool = False
    #: bounded by a reward (``Urew{"r"}<=k``), not by steps
    reward: bool = False

    @property
    def steps(self) -> int | None:
        """The steps of a step bound of a number (``<=k``: k, ``<k``: k-1), else None."""
        if self.upper is None or not self.literal or self.lower or self.reward:
            return None
        return self.upper - int(self.strict)


def bound(path: StormFormula | None) -> Bound | None:
    """The bound of ``path`` (None: no bounded path formula)."""
    kind = None if path is None else path_kind(path)
    if kind is PathKind.BOUNDED_UNTIL:
        return _until_bound(path)
    if kind in (PathKind.CUMULATIVE, PathKind.INSTANTANEOUS):
        spec = str(path).replace(" ", "")[1:]  # "C<=5", "C<5", "I=5": stormpy exposes no accessor
        number = spec.lstrip("<=")
        literal = number.isdigit()
        return Bound(
            upper=int(number) if literal else None, literal=literal, strict=spec.startswith("<") and not spec.startswith("<=")
        )
    return None


def _until_bound(path: StormFormula) -> Bound:
    try:
        expression = path.upper_bound_expression
        upper: int | None = int(expression.evaluate_as_int())
        literal = bool(expression.is_literal())
    except (AttributeError, RuntimeError, ValueError):  # no upper bound (U>=a), or not an integer
        upper, literal = None, False
    spec = _until_spec(path)
    lower = bool(path.has_lower_bound or path.is_multi_dimensional)
    return Bound(
        upper=upper,
        literal=literal,
        strict=spec.startswith("<") and not spec.startswith("<="),
        lower=lower,
        reward=spec.startswith("rew"),
    )


def _until_spec(path: StormFormula) -> str:
    """What Storm prints after the ``U`` of a bounded until (``<=5``, ``rew{"r"}<=5``, ``[2, 5]``): it writes
    ``<left> U<bound> <right>``, the left operand parenthesised when composite."""
    text, left = str(path), str(path.left_subformula)
    for head in (f"{left} U", f"({left}) U"):
        if text.startswith(head):
            return text[len(head) :]
    return "rew"  # not as expected: read as a bound Storm alone checks


def step_upper_bound(path: StormFormula) -> int | None:
    """``k`` of ``phi U<=k psi`` (``U<k``: k-1) with a step bound of a number only (no lower bound, not
    reward-bounded), else None."""
    found = bound(path) if path_kind(path) is PathKind.BOUNDED_UNTIL else None
    return None if found is None else found.steps


def is_reward_bounded(formula: StormFormula) -> bool:
    """Whether ``formula``'s path is bounded by a reward (``F{"r"}<=5``, ``a Urew{"r"}>=5 b``): Storm checks
    those for the initial states only."""
    found = bound(path_of(formula))
    return found is not None and path_kind(path_of(formula)) is PathKind.BOUNDED_UNTIL and found.reward


def has_operator(formula: StormFormula) -> bool:
    """Whether ``formula`` holds a P/R operator (so its state formulas need the chain's transitions, not only its
    labels): walked through stormpy's objects; a binary state formula's operands, which stormpy 2.0 does not expose,
    by its printing (Storm prints every operator with a bracket, ``P>0.5 [X a]``; labels' quotes stripped)."""
    from stormpy import logic  # lazy: stormpy, start-up

    if isinstance(formula, logic.OperatorFormula):
        return True
    if isinstance(formula, (logic.UnaryStateFormula, logic.UnaryPathFormula)):
        return has_operator(formula.subformula)
    if isinstance(formula, logic.BinaryPathFormula):
        return has_operator(formula.left_subformula) or has_operator(formula.right_subformula)
    if isinstance(formula, logic.BinaryStateFormula):
        return "[" in re.sub(r'"[^"]*"', "", str(formula))
    return False


def quantitative(
    prop: Property | StormFormula, *, optimality: str | None = None
) -> tuple[StormFormula, float | None, str | None]:
    """The formula with its threshold removed (and optimality set), the threshold and its comparison."""
    import stormpy  # lazy: stormpy, start-up

    formula = (prop.storm_formula() if isinstance(prop, Property) else prop.get_raw_formula()).clone()
    threshold, comparison = None, None
    if formula.has_bound:
        threshold = float(formula.threshold)
        comparison = str(formula.comparison_type).rsplit(".", 1)[-1]
        formula.remove_bound()
    if optimality is not None:
        directions = stormpy.logic.OptimizationDirection
        formula.set_optimality_type(directions.MINIMIZE if optimality == "min" else directions.MAXIMIZE)
    elif formula.has_optimality_type:
        formula.remove_optimality_type()
    return formula, threshold, comparison
