"""Path properties the simulator decides on finite runs.

Supported (see :data:`SUPPORTED_FORMS`): ``P=? [F phi]``, ``P=? [F<=k phi]``,
``P=? [phi1 U phi2]``, ``P=? [phi1 U<=k phi2]`` (``<k`` means ``<=k-1``), and the same with a
threshold ``P>=theta [...]`` (``>``, ``<=``, ``<``) for hypothesis testing. "Not crashed until
goal" is ``P=? [!"crashed" U "goal"]``.

State formulas ``phi`` on native environments: labels ``"name"``, ``true``, ``false``, ``!``,
``&``, ``|`` and parentheses. On PRISM/JANI models any Storm state formula without probability
operators (expressions over variables, formulas and labels); its satisfying states are computed
by Storm on the explicit model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from rlverify.errors import PropertyError, did_you_mean
from rlverify.models.environment import VectorEnv
from rlverify.models.properties import Property, parse_structure
from rlverify.models.property_parser import parse_property
from rlverify.models.storm import truth_values
from rlverify.models.symbolic import SymbolicModel, storm_message
from rlverify.statistical.choices import SUPPORTED_FORMS

#: a model Storm built (stormpy's sparse model: untyped)
StormModel: TypeAlias = Any
#: one of Storm's formula objects (stormpy: untyped)
StormFormula: TypeAlias = Any


@dataclass(frozen=True)
class StateFormula:
    """A propositional state formula: ``op`` in label, mask, const, not, and, or."""

    op: str
    args: tuple[Any, ...] = ()

    def evaluate(self, env: VectorEnv, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool truth values on the run states ``states`` of ``env``."""
        n = len(states)
        if self.op == "const":
            return np.full(n, bool(self.args[0]))
        if self.op == "label":
            return np.asarray(env.label(self.args[0], states), dtype=bool)
        if self.op == "mask":  # precomputed (S,) bool over explicit state indices
            return self.args[0][states]
        if self.op == "not":
            return ~self.args[0].evaluate(env, states)
        if self.op == "and":
            return self.args[0].evaluate(env, states) & self.args[1].evaluate(env, states)
        if self.op == "or":
            return self.args[0].evaluate(env, states) | self.args[1].evaluate(env, states)
        raise AssertionError(self.op)

    def labels(self) -> set[str]:
        """Label names used."""
        if self.op == "label":
            return {self.args[0]}
        return set().union(*(a.labels() for a in self.args if isinstance(a, StateFormula)))


TRUE = StateFormula("const", (True,))


@dataclass(frozen=True)
class PathProperty:
    """``P [left U<=bound right]`` (``F phi`` is ``true U phi``), with an optional threshold.

    Attributes:
        text: as given.
        left, right: state formulas.
        bound: step bound ``k`` (None: unbounded).
        threshold: ``theta`` of ``P>=theta [...]`` (None for ``P=?``); comparison one of ``>=, >, <=, <``.
        notes: how the property was read, for every result to say (``Property.notes``).
        hopeless: states from which ``right`` cannot be reached through ``left`` under any policy (graph
            analysis of an explicit model, :func:`~rlverify.statistical.envs.hopeless_states`): a run there is
            decided false at once; None: not known (native environments).
    """

    text: str
    left: StateFormula
    right: StateFormula
    bound: int | None = None
    threshold: float | None = None
    comparison: str | None = None
    notes: tuple[str, ...] = ()
    hopeless: StateFormula | None = None


def unsupported(text: str, what: str) -> PropertyError:
    return PropertyError(f"property '{text}': {what}; the simulator decides these forms on finite runs: {SUPPORTED_FORMS}")


# ------------------------------------------------------------------------------------------
# native environments: a small parser over labels

_TOKEN = re.compile(
    r'\s*(?:(?P<label>"[^"]*")|(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)'
    r"|(?P<op><=|>=|=\?|<|>|!|&|\||\(|\)|\[|\])|(?P<ident>[A-Za-z_][A-Za-z0-9_]*))"
)


def decidable(prop: Property) -> None:
    """Refuse (naming the supported forms) what the simulator cannot decide on finite runs."""
    _decidable_operator(prop)
    _decidable_path(prop)
    _decidable_numbers(prop)


def _decidable_operator(prop: Property) -> None:
    """Refuse rewards, other operators and Pmin/Pmax."""
    text = prop.text
    if prop.operator == "R" or prop.operator == "other":
        op = "R" if prop.operator == "R" else text.strip().split("=")[0].split("[")[0].strip() or text
        raise unsupported(text, f"'{op}' properties are not supported by the simulator")
    if prop.optimality is not None:
        raise unsupported(text, "Pmin/Pmax quantify over all policies; with a fixed policy use P=?")


def _decidable_path(prop: Property) -> None:
    """Refuse path formulas other than ``F``/``U``, reward bounds and lower step bounds."""
    text = prop.text
    if prop.path not in ("F", "U"):
        what = f"the path operator '{prop.path}'" if prop.path != "other" else f"the path formula '{prop.right}'"
        raise unsupported(text, f"{what} is not supported")
    if prop.reward_bound is not None:
        raise unsupported(
            text,
            f"reward bounds ('{prop.bound_text or 'rew'}') are not supported by the simulator "
            "(rlverify verify checks them exactly)",
        )
    if prop.lower_bounded:
        raise unsupported(text, "lower step bounds are not supported")


def _decidable_numbers(prop: Property) -> None:
    """Refuse a threshold or step bound that is not a number, and a missing target formula."""
    text = prop.text
    if prop.comparison is not None and prop.threshold is None:
        raise PropertyError(
            f"property '{text}': the threshold is not a number (on a PRISM/JANI model a constant "
            "or expression is evaluated by Storm)"
        )
    if prop.bound_text is not None and prop.bound is None:
        raise unsupported(
            text,
            f"the step bound '{prop.bound_text}' is not a whole number (define it as a constant of "
            "a PRISM model, or write the number)",
        )
    if prop.right is None or not prop.right.strip():
        raise PropertyError(f"property '{text}': expected a state formula after '{prop.path}'")


def parse_path_property(text: str | Property, labels: tuple[str, ...] | None = None) -> PathProperty:
    """A label-based path property (native environments): structure from
    :func:`~rlverify.models.properties.parse_structure`, state formulas over ``labels``.

    Raises:
        PropertyError: for syntax errors (with the position), unknown labels (listing ``labels``)
            and forms the simulator cannot decide (listing the supported forms).
    """
    prop = text if isinstance(text, Property) else parse_structure(text)
    decidable(prop)
    left = TRUE if prop.left is None else parse_state_formula(prop.left, prop.text, labels)
    right = parse_state_formula(prop.right or "", prop.text, labels)
    return PathProperty(
        text=prop.text, left=left, right=right, bound=prop.bound, threshold=prop.threshold, comparison=prop.comparison
    )


def parse_state_formula(formula: str, text: str, labels: tuple[str, ...] | None) -> StateFormula:
    """A propositional formula over quoted labels (``!"crashed" & ("goal" | false)``) of property ``text``."""
    return _FormulaParser(_tokens(formula, text), text, labels).parse()


Token = tuple[str, str, int]  # (kind, text, column from 0 in the property text)


def _tokens(formula: str, text: str) -> list[Token]:
    """The tokens of ``formula`` (a part of property ``text``), ending with an ``end`` token."""
    tokens: list[Token] = []
    pos = 0
    offset = max(text.find(formula), 0)
    formula_s = formula.rstrip()
    while pos < len(formula_s):
        m = _TOKEN.match(formula_s, pos)
        if not m or m.end() == pos or m.lastgroup is None:
            raise PropertyError(
                f"property '{text}': unexpected character {formula_s[pos:].lstrip()[:1]!r} at column {offset + pos + 1}"
            )
        kind = m.lastgroup
        tokens.append((kind, m.group(kind), offset + m.start(kind)))
        pos = m.end()
    tokens.append(("end", "", offset + len(formula_s)))
    return tokens


class _FormulaParser:
    """Recursive descent over the tokens: ``state := conj ('|' conj)*``, ``conj := unary ('&' unary)*``,
    ``unary := '!' unary | '(' state ')' | "label" | true | false``."""

    def __init__(self, tokens: list[Token], text: str, labels: tuple[str, ...] | None) -> None:
        self.tokens, self.text, self.labels, self.i = tokens, text, labels, 0

    def parse(self) -> StateFormula:
        f = self.state()
        if self.peek()[0] != "end":
            raise PropertyError(f"property '{self.text}': unexpected '{self.peek()[1]}' at column {self.peek()[2] + 1}")
        return f

    def peek(self) -> Token:
        return self.tokens[self.i]

    def take(self, kind: str | None = None, value: str | None = None) -> Token:
        tok = self.tokens[self.i]
        if (kind and tok[0] != kind) or (value and tok[1] != value):
            want = value or kind
            got = tok[1] or "end of text"
            raise PropertyError(f"property '{self.text}': expected '{want}' at column {tok[2] + 1}, got '{got}'")
        self.i += 1
        return tok

    def state(self) -> StateFormula:
        left = self.conj()
        while self.peek()[:2] == ("op", "|"):
            self.take()
            left = StateFormula("or", (left, self.conj()))
        return left

    def conj(self) -> StateFormula:
        left = self.unary()
        while self.peek()[:2] == ("op", "&"):
            self.take()
            left = StateFormula("and", (left, self.unary()))
        return left

    def unary(self) -> StateFormula:
        t = self.peek()
        if t[:2] == ("op", "!"):
            self.take()
            return StateFormula("not", (self.unary(),))
        if t[:2] == ("op", "("):
            self.take()
            f = self.state()
            self.take("op", ")")
            return f
        if t[0] == "label":
            self.take()
            return self.label(t[1][1:-1])
        if t[0] == "ident" and t[1] in ("true", "false"):
            self.take()
            return StateFormula("const", (t[1] == "true",))
        raise self.unexpected(t)

    def label(self, name: str) -> StateFormula:
        if self.labels is not None and name not in self.labels:
            raise PropertyError(
                f"property '{self.text}': unknown label \"{name}\"{did_you_mean(name, self.labels)}; "
                f"labels: {', '.join(repr(x) for x in self.labels)}"
            )
        return StateFormula("label", (name,))

    def unexpected(self, t: Token) -> PropertyError:
        text = self.text
        if t[0] == "ident" and t[1] in ("F", "G", "X", "U", "W", "R", "P"):
            return unsupported(text, f"nested or unsupported temporal operator '{t[1]}' at column {t[2] + 1}")
        if t[0] == "ident":
            return PropertyError(
                f"property '{text}': '{t[1]}' at column {t[2] + 1} is not a label; write labels in quotes (\"{t[1]}\")"
            )
        return PropertyError(
            f"property '{text}': expected a state formula at column {t[2] + 1}, got '{t[1] or 'end of text'}'"
        )


# ------------------------------------------------------------------------------------------
# PRISM/JANI models: Storm parses, and computes the satisfying states of the state subformulas


def property_from_storm(model: SymbolicModel, storm_model: StormModel, text: str | Property) -> PathProperty:
    """A :class:`PathProperty` for a PRISM/JANI property, with state sets computed by Storm.

    Args:
        model: the :class:`~rlverify.models.SymbolicModel` (for parsing).
        storm_model: the built sparse model whose state indices the simulator uses.
        text: the property (text, JANI property name, or parsed :class:`Property`).
    """
    prop = parse_property(model, text)
    decidable(prop)
    path = prop.storm_formula().subformula
    if not (path.is_until_formula or path.is_bounded_until_formula):  # F phi (Storm's eventually formula)
        sub_left, sub_right = None, path.subformula
    else:
        sub_left, sub_right = path.left_subformula, path.right_subformula

    def mask(sub: StormFormula) -> StateFormula:
        try:
            return StateFormula("mask", (truth_values(storm_model, sub),))
        except (RuntimeError, AttributeError) as exc:
            why = storm_message(exc) if isinstance(exc, RuntimeError) else "not propositional"
            raise unsupported(prop.text, f"the state formula '{sub}' cannot be evaluated per state ({why})") from None

    left = TRUE if sub_left is None else mask(sub_left)
    return PathProperty(
        text=prop.text,
        left=left,
        right=mask(sub_right),
        bound=prop.bound,
        threshold=prop.threshold,
        comparison=prop.comparison,
        notes=prop.notes,
    )
