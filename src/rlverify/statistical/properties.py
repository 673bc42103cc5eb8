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
from typing import Any

import numpy as np

from rlverify.errors import PropertyError

SUPPORTED_FORMS = ('P=? [F phi], P=? [F<=k phi], P=? [phi1 U phi2], P=? [phi1 U<=k phi2] '
                   '(or P>=theta / P>theta / P<=theta / P<theta [...] for hypothesis tests), '
                   'e.g. P=? [!"crashed" U "goal"]')


@dataclass(frozen=True)
class StateFormula:
    """A propositional state formula: ``op`` in label, mask, const, not, and, or."""

    op: str
    args: tuple[Any, ...] = ()

    def evaluate(self, env: Any, states: np.ndarray) -> np.ndarray:
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
    """

    text: str
    left: StateFormula
    right: StateFormula
    bound: int | None = None
    threshold: float | None = None
    comparison: str | None = None


def unsupported(text: str, what: str) -> PropertyError:
    return PropertyError(f"property '{text}': {what}; the simulator decides these forms on finite runs: "
                         f"{SUPPORTED_FORMS}")


# ------------------------------------------------------------------------------------------
# native environments: a small parser over labels

_TOKEN = re.compile(r'\s*(?:(?P<label>"[^"]*")|(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)'
                    r'|(?P<op><=|>=|=\?|<|>|!|&|\||\(|\)|\[|\])|(?P<ident>[A-Za-z_][A-Za-z0-9_]*))')


def parse_path_property(text: str, labels: tuple[str, ...] | None = None) -> PathProperty:
    """Parse a label-based path property (native environments).

    Raises:
        PropertyError: for syntax errors (with the position), unknown labels (listing ``labels``)
            and forms the simulator cannot decide (listing the supported forms).
    """
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    text_s = text.rstrip()
    while pos < len(text_s):
        m = _TOKEN.match(text_s, pos)
        if not m or m.end() == pos:
            raise PropertyError(f"property '{text}': unexpected character {text_s[pos:].lstrip()[:1]!r} at column {pos + 1}")
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    tokens.append(("end", "", len(text_s)))
    i = 0

    def peek() -> tuple[str, str, int]:
        return tokens[i]

    def take(kind: str | None = None, value: str | None = None) -> tuple[str, str, int]:
        nonlocal i
        tok = tokens[i]
        if (kind and tok[0] != kind) or (value and tok[1] != value):
            want = value or kind
            got = tok[1] or "end of text"
            raise PropertyError(f"property '{text}': expected '{want}' at column {tok[2] + 1}, got '{got}'")
        i += 1
        return tok

    # operator
    tok = take("ident")
    if tok[1] in ("R", "Rmin", "Rmax", "S", "LRA"):
        raise unsupported(text, f"'{tok[1]}' properties are not supported by the simulator")
    if tok[1] in ("Pmin", "Pmax"):
        raise unsupported(text, "Pmin/Pmax quantify over all policies; with a fixed policy use P=?")
    if tok[1] != "P":
        raise unsupported(text, f"expected a P operator, got '{tok[1]}'")
    threshold, comparison = None, None
    op = take("op")
    if op[1] != "=?":
        if op[1] not in (">=", ">", "<=", "<"):
            raise PropertyError(f"property '{text}': expected '=?' or a comparison after P at column {op[2] + 1}")
        num = take("num")
        threshold, comparison = float(num[1]), op[1]
        if not 0.0 <= threshold <= 1.0:
            raise PropertyError(f"property '{text}': probability threshold must be in [0, 1], got {threshold}")
    take("op", "[")

    def bound() -> int | None:
        t = peek()
        if t[0] == "op" and t[1] in ("<=", "<"):
            take()
            n = take("num")
            if not n[1].isdigit():
                raise PropertyError(f"property '{text}': step bound must be a non-negative integer, got {n[1]}")
            k = int(n[1]) - (1 if t[1] == "<" else 0)
            if k < 0:
                raise PropertyError(f"property '{text}': the bound '<0' is empty")
            return k
        if t[0] == "op" and t[1] in (">=", ">"):
            raise unsupported(text, "lower step bounds are not supported")
        return None

    def state() -> StateFormula:
        left = conj()
        while peek()[:2] == ("op", "|"):
            take()
            left = StateFormula("or", (left, conj()))
        return left

    def conj() -> StateFormula:
        left = unary()
        while peek()[:2] == ("op", "&"):
            take()
            left = StateFormula("and", (left, unary()))
        return left

    def unary() -> StateFormula:
        t = peek()
        if t[:2] == ("op", "!"):
            take()
            return StateFormula("not", (unary(),))
        if t[:2] == ("op", "("):
            take()
            f = state()
            take("op", ")")
            return f
        if t[0] == "label":
            take()
            name = t[1][1:-1]
            if labels is not None and name not in labels:
                from rlverify.errors import did_you_mean

                raise PropertyError(f"property '{text}': unknown label \"{name}\"{did_you_mean(name, labels)}; "
                                    f"labels: {', '.join(repr(x) for x in labels)}")
            return StateFormula("label", (name,))
        if t[0] == "ident" and t[1] in ("true", "false"):
            take()
            return StateFormula("const", (t[1] == "true",))
        if t[0] == "ident" and t[1] in ("F", "G", "X", "U", "W", "R", "P"):
            raise unsupported(text, f"nested or unsupported temporal operator '{t[1]}' at column {t[2] + 1}")
        if t[0] == "ident":
            raise PropertyError(f"property '{text}': '{t[1]}' at column {t[2] + 1} is not a label; write labels in "
                                f"quotes (\"{t[1]}\")")
        raise PropertyError(f"property '{text}': expected a state formula at column {t[2] + 1}, got '{t[1] or 'end of text'}'")

    t = peek()
    if t[:2] == ("ident", "F"):
        take()
        k = bound()
        left, right = TRUE, state()
    elif t[0] == "ident" and t[1] in ("G", "X", "W", "R"):
        raise unsupported(text, f"the path operator '{t[1]}' is not supported")
    else:
        left = state()
        u = peek()
        if u[:2] != ("ident", "U"):
            raise unsupported(text, f"expected 'U' at column {u[2] + 1}")
        take()
        k = bound()
        right = state()
    take("op", "]")
    if peek()[0] != "end":
        raise PropertyError(f"property '{text}': unexpected '{peek()[1]}' at column {peek()[2] + 1}")
    return PathProperty(text=text, left=left, right=right, bound=k, threshold=threshold, comparison=comparison)


# ------------------------------------------------------------------------------------------
# PRISM/JANI models: Storm parses, and computes the satisfying states of the state subformulas

_STORM_CMP = {"GREATER_EQUAL": ">=", "GEQ": ">=", "GREATER": ">", "LESS_EQUAL": "<=", "LEQ": "<=", "LESS": "<"}


def property_from_storm(model: Any, storm_model: Any, text: str) -> PathProperty:
    """A :class:`PathProperty` for a PRISM/JANI property, with state sets computed by Storm.

    Args:
        model: the :class:`~rlverify.models.SymbolicModel` (for parsing).
        storm_model: the built sparse model whose state indices the simulator uses.
        text: the property.
    """
    import stormpy  # the statistical engine touches Storm only here, to evaluate state formulas

    from rlverify.models.symbolic import parse_property, storm_message

    prop = parse_property(model, text)
    f = prop.get_raw_formula()
    if not f.is_probability_operator_formula:
        raise unsupported(text, "only P operators are supported")
    if f.has_optimality_type:
        raise unsupported(text, "Pmin/Pmax quantify over all policies; with a fixed policy use P=?")
    threshold = comparison = None
    if f.has_bound:
        threshold = float(f.threshold)
        comparison = _STORM_CMP[str(f.comparison_type).rsplit(".", 1)[-1]]
    path = f.subformula
    k = None
    if path.is_bounded_until_formula:
        if path.has_lower_bound:
            raise unsupported(text, "lower step bounds are not supported")
        m = re.search(r"U(<=|<)", str(path))
        if m is None:
            raise unsupported(text, "only step bounds of the form <=k or <k are supported")
        k = int(path.upper_bound_expression.evaluate_as_int()) - (1 if m.group(1) == "<" else 0)
        sub_left, sub_right = path.left_subformula, path.right_subformula
    elif path.is_until_formula:
        sub_left, sub_right = path.left_subformula, path.right_subformula
    elif path.is_eventually_formula:
        sub_left, sub_right = None, path.subformula
    else:
        raise unsupported(text, f"the path formula '{path}' is not supported")

    def mask(sub: Any) -> StateFormula:
        try:
            result = stormpy.model_checking(storm_model, sub)
            bits = result.get_truth_values_vector()
        except (RuntimeError, AttributeError) as exc:
            raise unsupported(text, f"the state formula '{sub}' cannot be evaluated per state "
                                    f"({storm_message(exc) if isinstance(exc, RuntimeError) else 'not propositional'})") from None
        out = np.zeros(storm_model.nr_states, dtype=bool)
        out[np.fromiter(iter(bits), dtype=np.int64)] = True
        return StateFormula("mask", (out,))

    left = TRUE if sub_left is None else mask(sub_left)
    return PathProperty(text=text, left=left, right=mask(sub_right), bound=k, threshold=threshold, comparison=comparison)
