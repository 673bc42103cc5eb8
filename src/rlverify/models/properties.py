"""One property object for every engine: a PCTL property parsed once.

:func:`parse_structure` reads what every engine needs from the text itself — the operator
(``P``/``R``), ``min``/``max``, a threshold with its comparison, the reward model, the path operator
(``F``, ``G``, ``X``, ``U``, ``W``, ``C``, ``I``), its step bound (``F<5`` is ``F<=4``) and the state
formulas' texts. :func:`rlverify.models.property_parser.parse_property` adds Storm's parse of the same text
against a PRISM/JANI model (``Property.storm``), which the exact engine checks and from which the
statistical engine computes the states satisfying each state formula. Native environments
evaluate the state-formula texts over their labels (:mod:`rlverify.statistical.properties`).

Storm is the authority on what a PRISM/JANI property means: a form this module does not
recognise is kept (``path == "other"``) for Storm to check, and refused only by the engines that
cannot decide it, with a message saying which forms they decide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rlverify.errors import PropertyError
from rlverify.models.nesting import check_nesting

if TYPE_CHECKING:  # (models/storm.py imports numpy: the CLI's parser reads this module)
    from rlverify.models.storm import StormFormula, StormProperty

#: path operators read from the text; ``other`` is anything else (Storm may still check it)
PATHS = ("F", "G", "X", "U", "W", "C", "I", "other")

_HEAD = re.compile(
    r"^\s*(?:(?P<name>[A-Za-z_][\w.-]*)\s*:\s*)?"  # an optional "name:" (PRISM property files)
    r"(?P<op>Pmin|Pmax|P|Rmin|Rmax|R|S|LRA)\s*"
    r'(?:\{\s*"(?P<reward>[^"]*)"\s*\})?\s*'
    r"(?P<opt>min|max)?\s*"
    r"(?:(?P<query>=\s*\?)|(?P<cmp><=|>=|<|>)\s*(?P<threshold>[^\s\[]+))\s*"
    r"\[(?P<body>.*)\]\s*$",
    re.S,
)
_BOUND = re.compile(r"^\s*(?P<cmp><=|<|>=|>|=)\s*(?P<k>[A-Za-z_0-9.]+)\s*", re.S)
_CMP = re.compile(r"^\s*(<=|<|>=|>|=)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Property:
    """A PCTL property as every engine reads it.

    Attributes:
        text: as given (for a property named in a JANI file or a benchmark: its formula).
        name: the name it was given by (benchmark or JANI property name), else None.
        operator: ``"P"`` (probability), ``"R"`` (expected reward) or ``"other"`` (``S``, ``LRA``...).
        optimality: ``"min"``/``"max"`` (``Pmin``/``Pmax``: over all schedulers), else None.
        comparison, threshold: ``>=``/``>``/``<=``/``<`` and the bound of a threshold form
            (``P>=0.9 [...]``), else None.
        reward_model: the reward model name of ``R{"name"}`` (``""``: the unnamed one), else None.
        path: ``F``, ``G``, ``X``, ``U``, ``W``, ``C``, ``I`` or ``other``.
        bound: the inclusive upper step bound (``F<5`` gives 4), None when unbounded or not an
            integer literal; bound_text: the bound as written (a constant name, say), with
            ``strict`` (``<`` rather than ``<=``) and ``lower_bounded`` (a ``>=``/interval bound).
        reward_bound: the reward model of a reward bound (``F{"r"}<=5``: ``"r"``; ``""`` unnamed), else None;
            ``bound`` is then None (it counts reward, not steps) and ``bound_text`` the bound as written.
        left, right: the state formulas' texts (``left`` only for ``U``/``W``).
        storm: Storm's parse against a PRISM/JANI model (``stormpy`` Property), else None.
        notes: what reading the property decided that every result must say (a named JANI ``Pmax``
            read as ``P=?`` under a fixed policy); engines add them to their warnings.
    """

    text: str
    name: str | None = None
    operator: str = "other"
    optimality: str | None = None
    comparison: str | None = None
    threshold: float | None = None
    reward_model: str | None = None
    path: str = "other"
    bound: int | None = None
    bound_text: str | None = None
    strict: bool = False
    lower_bounded: bool = False
    reward_bound: str | None = None
    left: str | None = None
    right: str | None = None
    storm: StormProperty = None  # (None until parsed against a PRISM/JANI model)
    notes: tuple[str, ...] = ()

    def holds(self, value: float) -> bool:
        """Whether ``value`` satisfies the threshold (only for threshold forms)."""
        if self.threshold is None or self.comparison is None:
            raise PropertyError(f"property '{self.text}' has no threshold")
        t = self.threshold
        return {">=": value >= t, ">": value > t, "<=": value <= t, "<": value < t}[self.comparison]

    def storm_formula(self) -> StormFormula:
        """Storm's raw formula (needs :attr:`storm`)."""
        if self.storm is None:
            raise PropertyError(f"property '{self.text}' was not parsed against a PRISM/JANI model")
        return self.storm.get_raw_formula()

    def with_storm(self, storm_property: StormProperty, bound: int | None, threshold: float | None = None) -> Property:
        """A copy with Storm's parse attached, and the step bound and threshold as Storm evaluated them."""
        return replace(
            self,
            storm=storm_property,
            bound=bound if bound is not None else self.bound,
            threshold=self.threshold if self.threshold is not None else threshold,
        )


#: the note a result carries when :func:`worst_case` had to assume how a property reads
ASSUMED_BAD_EVENT = (
    "read as a bad event (the worst case is the largest value) because the property does not say: give a threshold "
    "(P<=b / P>=b) or --worst min for a goal"
)


def worst_case(prop: Property, worst: str | None) -> tuple[str, bool]:
    """Which optimum is the worst case: ``max`` (the property is a bad event, e.g. a crash) or ``min`` (a goal), and
    whether that was assumed. ``worst`` when given; else from the property: ``P>=b``/``P>b`` or ``Pmax`` read as a
    goal, ``P<=b``/``P<b`` or ``Pmin`` as a bad event; else (``P=?``) assumed a bad event (True: the caller says so,
    :data:`ASSUMED_BAD_EVENT`)."""
    if worst is not None:
        return worst, False
    if prop.comparison is not None:
        return ("min" if prop.comparison in (">=", ">") else "max"), False
    if prop.optimality is not None:
        return ("min" if prop.optimality == "max" else "max"), False
    return "max", True


def excluding_label(prop: Property, label: str) -> str | None:
    """``prop``'s text with every state formula of its path conjoined with ``!"label"``, or None if its form is not
    one this rewrites (``F``, ``G``, ``X``, ``U``, ``W``, bounded or not).

    Used to make an added state (the ``stalled`` sink) satisfy no state formula, negated ones included:
    ``P=? [F !"alive"]`` becomes ``P=? [F ((!"alive") & !"stalled")]``.
    """
    if prop.path not in ("F", "G", "X", "U", "W") or not prop.right:
        return None
    text = prop.text
    m = _HEAD.match(text)
    if m is None:
        return None
    body = _strip_parens(m.group("body"))
    head = text[: m.start("body")]
    tail = text[m.end("body") :]
    no = f' & !"{label}"'
    k = body.rfind(prop.right)
    if k < 0:
        return None
    out = body[:k] + f"(({prop.right}){no})" + body[k + len(prop.right) :]
    if prop.path in ("U", "W") and prop.left:
        j = out.find(prop.left)
        if j != 0:
            return None
        out = f"(({prop.left}){no})" + out[len(prop.left) :]
    return head + out + tail


def parse_structure(text: str, *, name: str | None = None) -> Property:
    """Read the operator, threshold, path operator, bound and state formulas of ``text``.

    Lenient by design: a form it does not recognise comes back with ``operator``/``path``
    ``"other"`` (Storm decides for PRISM/JANI models). Raises :class:`PropertyError` only for what
    no engine accepts: an empty text, unbalanced brackets or quotes, a threshold that is no number
    or a probability threshold outside [0, 1].
    """
    if not isinstance(text, str) or not text.strip():
        raise PropertyError("property: expected a PCTL property such as 'P=? [F \"goal\"]', got an empty text")
    _check_balanced(text)
    m = _HEAD.match(text)
    if m is None:
        return Property(text=text, name=name)
    op = m.group("op")
    operator = _OPERATORS.get(op, "other")
    optimality = "min" if op.endswith("min") else "max" if op.endswith("max") else m.group("opt")
    reward = m.group("reward")
    base = Property(
        text=text,
        name=name or m.group("name"),
        operator=operator,
        optimality=optimality,
        comparison=m.group("cmp") or None,
        threshold=_threshold(text, m, operator),
        reward_model="" if operator == "R" and reward is None else reward,
    )
    return _path(base, _strip_parens(m.group("body")))


#: the operator of each operator word (``Pmax`` is ``P``; the others, ``S`` and ``LRA``, are ``other``)
_OPERATORS = {"Pmin": "P", "Pmax": "P", "P": "P", "Rmin": "R", "Rmax": "R", "R": "R"}


def _threshold(text: str, m: re.Match[str], operator: str) -> float | None:
    """The threshold of ``P>=t``/``R<t`` where it is a number (a constant or an expression: Storm evaluates it in
    :func:`~rlverify.models.property_parser.parse_property`; else refused there); a probability's in [0, 1]."""
    if not m.group("cmp"):
        return None
    try:
        threshold = float(m.group("threshold"))
    except ValueError:
        return None
    if operator == "P" and not 0.0 <= threshold <= 1.0:
        raise PropertyError(f"property '{text}': a probability threshold must lie in [0, 1], got {threshold:g}")
    return threshold


def _path(base: Property, body: str) -> Property:
    words = _top_level_words(body)
    first = words[0] if words else None
    if first is not None and first[1] == 0 and _operator(first[0]) in ("F", "G", "X", "C", "I"):
        rest = body[len(first[0]) :]
        bound, rest = _bound(base.text, rest, first[0].endswith("rew"))
        return replace(base, path=_operator(first[0]), right=rest.strip() or None, **bound)
    for word, pos in words:
        if _operator(word) in ("U", "W"):
            left, rest = body[:pos], body[pos + len(word) :]
            bound, rest = _bound(base.text, rest, word.endswith("rew"))
            return replace(base, path=_operator(word), left=left.strip(), right=rest.strip(), **bound)
    return replace(base, path="other", right=body.strip())


def _operator(word: str) -> str:
    """A path operator word: ``Frew``/``Urew`` (Storm's spelling of a reward bound) are ``F``/``U``."""
    return word[:-3] if word in ("Frew", "Urew", "Grew", "Wrew") else word


#: a reward bound's reward model after a path operator: ``F{"r"}<=5``, ``Urew{"r"}>=5``
_REWARD_BOUND = re.compile(r'^\s*\{\s*"(?P<name>[^"]*)"\s*\}')


def _bound(text: str, rest: str, rew: bool = False) -> tuple[dict[str, Any], str]:
    """The bound after a path operator (``rest``: the text after it; ``rew``: Storm's ``Frew``/``Urew`` spelling) as
    :class:`Property` fields, and the text after the bound."""
    reward = _REWARD_BOUND.match(rest)
    if reward is not None or rew:  # a reward bound, not a step bound: no step count
        return _reward_bound(rest, reward)
    return _step_bound(text, rest)


def _reward_bound(rest: str, reward: re.Match[str] | None) -> tuple[dict[str, Any], str]:
    """A reward bound (``F{"r"}<=5``, ``Frew>=5``, an interval ``[a, b]``): its fields and the text after it."""
    start = reward.end() if reward is not None else 0
    name = reward.group("name") if reward is not None else ""
    if rest[start:].lstrip().startswith("["):  # an interval [a, b]
        close = rest.index("]", start) + 1
        return {"reward_bound": name, "bound_text": rest[:close].strip(), "lower_bounded": True}, rest[close:]
    c = _CMP.match(rest[start:])
    if c is None:
        return {"reward_bound": name}, rest[start:]
    after = rest[start + c.end() :]
    m = re.match(r"\s*(\[[^\]]*\]|[^\s\[\]]+)", after)
    value = m.group(1) if m else ""
    return (
        {
            "reward_bound": name,
            "bound_text": rest[: start + c.end()].strip() + value,
            "strict": c.group(1) == "<",
            "lower_bounded": c.group(1) in (">=", ">"),
        },
        after[m.end() if m else 0 :],
    )


_LITERAL_BOUND = re.compile(r"^\s*(<=|<|>=|>|=)\s*(-?\s*\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?![\w.])")


def _check_literal_bound(text: str, rest: str) -> None:
    """Refuse a step bound written as a negative or fractional number."""
    literal = _LITERAL_BOUND.match(rest)
    if literal is None:
        return
    number = literal.group(2).replace(" ", "")
    if number.startswith("-"):
        raise PropertyError(f"property '{text}': the step bound {number} is negative")
    if not number.isdigit():
        raise PropertyError(f"property '{text}': the step bound {number} is not a whole number of steps")


def _expression_bound(rest: str) -> tuple[dict[str, Any], str]:
    """An expression step bound (``F<=(N+2)``, ``F<=2*N``): its value comes from Storm (PRISM/JANI models only); the
    state formula starts after it (a bracketed group, or a run of names, numbers and + - * / without spaces). No
    comparison: no bound."""
    c = _CMP.match(rest)
    if c is None:
        return {}, rest
    after = rest[c.end() :]
    end = len(after) - len(after.lstrip())
    while end < len(after) and (after[end] == "(" or after[end].isalnum() or after[end] in "_.+-*/"):
        end = _closing(after, end) + 1 if after[end] == "(" else end + 1
        if end == 0:  # an unclosed bracket (refused by the balance check before this)
            end = len(after)
    return {
        "bound_text": after[:end].strip(),
        "strict": c.group(1) == "<",
        "lower_bounded": c.group(1) in (">=", ">"),
    }, after[end:]


def _numbered_bound(text: str, cmp: str, k: str) -> dict[str, Any]:
    """A step bound ``cmp k`` with ``k`` a whole number: ``F<5`` is ``F<=4``."""
    out: dict[str, Any] = {"bound_text": k}
    if cmp in (">=", ">"):
        out["lower_bounded"] = True
        return out
    out["strict"] = cmp == "<"
    if k.isdigit():
        value = int(k) - (1 if cmp == "<" else 0)
        if value < 0:
            raise PropertyError(f"property '{text}': the step bound '<{k}' admits no step")
        out["bound"] = value
    return out


def _step_bound(text: str, rest: str) -> tuple[dict[str, Any], str]:
    """A step bound (a number, an interval ``[a, b]`` or an expression) as fields, and the text after it."""
    _check_literal_bound(text, rest)
    if rest.lstrip().startswith("["):  # an interval bound [a, b]
        close = rest.index("]")
        return {"lower_bounded": True, "bound_text": rest[: close + 1].strip()}, rest[close + 1 :]
    m = _BOUND.match(rest)
    if m is None or not re.fullmatch(r"\d+", m.group("k")) or rest[m.end() : m.end() + 1] in ("*", "+", "-", "/"):
        return _expression_bound(rest)
    return _numbered_bound(text, m.group("cmp"), m.group("k")), rest[m.end() :]


def _word_starts(body: str, i: int) -> bool:
    """Whether an identifier starts at ``body[i]``."""
    c = body[i]
    return (c.isalpha() or c == "_") and (i == 0 or not (body[i - 1].isalnum() or body[i - 1] == "_"))


def _top_level_words(body: str) -> list[tuple[str, int]]:
    """Identifiers outside parentheses, braces and quotes, with their positions."""
    out = []
    depth = 0
    i = 0
    while i < len(body):
        c = body[i]
        if c == '"':
            i = body.index('"', i + 1) + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and _word_starts(body, i):
            m = _WORD.match(body, i)
            assert m is not None
            out.append((m.group(0), i))
            i = m.end()
            continue
        i += 1
    return out


def _strip_parens(body: str) -> str:
    """``body`` without parentheses that wrap all of it."""
    s = body.strip()
    while s.startswith("(") and s.endswith(")") and _closing(s, 0) == len(s) - 1:
        s = s[1:-1].strip()
    return s


def _closing(s: str, start: int) -> int:
    depth = 0
    i = start
    while i < len(s):
        c = s[i]
        if c == '"':
            i = s.index('"', i + 1) + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _check_balanced(text: str) -> None:
    check_nesting(text, f"property '{text[:60]}{'...' if len(text) > 60 else ''}'", evaluated=True)
    if text.count('"') % 2:
        raise PropertyError(f"property '{text}': unbalanced quotes")
    _check_brackets(text)


def _check_brackets(text: str) -> None:
    """Refuse an unmatched or unclosed bracket outside quotes."""
    depth = {"(": 0, "[": 0, "{": 0}
    pairs = {")": "(", "]": "[", "}": "{"}
    inside = False
    for col, c in enumerate(text, 1):
        if c == '"':
            inside = not inside
        elif inside:
            continue
        elif c in depth:
            depth[c] += 1
        elif c in pairs:
            depth[pairs[c]] -= 1
            if depth[pairs[c]] < 0:
                raise PropertyError(f"property '{text}': unmatched '{c}' at column {col}")
    for opener, n in depth.items():
        if n:
            closer = {"(": ")", "[": "]", "{": "}"}[opener]
            raise PropertyError(f"property '{text}': expected '{closer}' (an unclosed '{opener}')")
