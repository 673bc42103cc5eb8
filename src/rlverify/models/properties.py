"""One property object for every engine: a PCTL property parsed once.

:func:`parse_structure` reads what every engine needs from the text itself — the operator
(``P``/``R``), ``min``/``max``, a threshold with its comparison, the reward model, the path operator
(``F``, ``G``, ``X``, ``U``, ``W``, ``C``, ``I``), its step bound (``F<5`` is ``F<=4``) and the state
formulas' texts. :func:`rlverify.models.symbolic.parse_property` adds Storm's parse of the same text
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
from pathlib import Path
from typing import Any

from rlverify.errors import InputFileError, PropertyError

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
    storm: Any = None
    notes: tuple[str, ...] = ()

    def holds(self, value: float) -> bool:
        """Whether ``value`` satisfies the threshold (only for threshold forms)."""
        if self.threshold is None or self.comparison is None:
            raise PropertyError(f"property '{self.text}' has no threshold")
        t = self.threshold
        return {">=": value >= t, ">": value > t, "<=": value <= t, "<": value < t}[self.comparison]

    def storm_formula(self) -> Any:
        """Storm's raw formula (needs :attr:`storm`)."""
        if self.storm is None:
            raise PropertyError(f"property '{self.text}' was not parsed against a PRISM/JANI model")
        return self.storm.get_raw_formula()

    def with_storm(self, storm_property: Any, bound: int | None, threshold: float | None = None) -> Property:
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
    operator = {"Pmin": "P", "Pmax": "P", "P": "P", "Rmin": "R", "Rmax": "R", "R": "R"}.get(op, "other")
    optimality = "min" if op.endswith("min") else "max" if op.endswith("max") else m.group("opt")
    threshold = comparison = None
    if m.group("cmp"):
        comparison = m.group("cmp")
        try:
            threshold = float(m.group("threshold"))
        except ValueError:  # a constant or an expression: Storm evaluates it (parse_property); else refused there
            threshold = None
        if threshold is not None and operator == "P" and not 0.0 <= threshold <= 1.0:
            raise PropertyError(f"property '{text}': a probability threshold must lie in [0, 1], got {threshold:g}")
    reward = m.group("reward")
    if operator == "R" and reward is None:
        reward = ""
    base = Property(
        text=text,
        name=name or m.group("name"),
        operator=operator,
        optimality=optimality,
        comparison=comparison,
        threshold=threshold,
        reward_model=reward,
    )
    return _path(base, _strip_parens(m.group("body")))


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
    reward = _REWARD_BOUND.match(rest)
    if reward is not None or rew:  # a reward bound, not a step bound: no step count
        start = reward.end() if reward is not None else 0
        name = reward.group("name") if reward is not None else ""
        if rest[start:].lstrip().startswith("["):  # an interval [a, b]
            close = rest.index("]", start) + 1
            return {"reward_bound": name, "bound_text": rest[:close].strip(), "lower_bounded": True}, rest[close:]
        c = _CMP.match(rest[start:])
        if c is None:
            return {"reward_bound": reward.group("name") if reward is not None else ""}, rest[start:]
        after = rest[start + c.end() :]
        m = re.match(r"\s*(\[[^\]]*\]|[^\s\[\]]+)", after)
        value = m.group(1) if m else ""
        return (
            {
                "reward_bound": reward.group("name") if reward is not None else "",
                "bound_text": rest[: start + c.end()].strip() + value,
                "strict": c.group(1) == "<",
                "lower_bounded": c.group(1) in (">=", ">"),
            },
            after[m.end() if m else 0 :],
        )
    return _step_bound(text, rest)


def _step_bound(text: str, rest: str) -> tuple[dict[str, Any], str]:
    literal = re.match(r"^\s*(<=|<|>=|>|=)\s*(-?\s*\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?![\w.])", rest)
    if literal is not None:
        number = literal.group(2).replace(" ", "")
        if number.startswith("-"):
            raise PropertyError(f"property '{text}': the step bound {number} is negative")
        if not number.isdigit():
            raise PropertyError(f"property '{text}': the step bound {number} is not a whole number of steps")
    if rest.lstrip().startswith("["):  # an interval bound [a, b]
        close = rest.index("]")
        return {"lower_bounded": True, "bound_text": rest[: close + 1].strip()}, rest[close + 1 :]
    m = _BOUND.match(rest)
    if m is None or not re.fullmatch(r"\d+", m.group("k")) or rest[m.end() : m.end() + 1] in ("*", "+", "-", "/"):
        c = _CMP.match(rest)
        if c is None:
            return {}, rest
        # an expression bound (F<=(N+2), F<=2*N): its value comes from Storm (PRISM/JANI models only); the state
        # formula starts after it (a bracketed group, or a run of names, numbers and + - * / without spaces)
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
    cmp, k = m.group("cmp"), m.group("k")
    out: dict[str, Any] = {"bound_text": k}
    if cmp in (">=", ">"):
        out["lower_bounded"] = True
    else:
        out["strict"] = cmp == "<"
        if k.isdigit():
            value = int(k) - (1 if cmp == "<" else 0)
            if value < 0:
                raise PropertyError(f"property '{text}': the step bound '<{k}' admits no step")
            out["bound"] = value
    return out, rest[m.end() :]


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
        elif depth == 0 and (c.isalpha() or c == "_") and (i == 0 or not (body[i - 1].isalnum() or body[i - 1] == "_")):
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


#: deepest nesting of brackets and prefix operators (``!``, unary ``-``, ``X``, ``F``, ``G``) handed to Storm's parsers:
#: they recurse on the stack once per level (measured with an 8 MB stack: 2,000 brackets, 3,000 ``X`` or ``F``, 2,000
#: nested ``P`` operators and 7,000 ``!`` crash the process; 5,000 ``!`` in a label crash Storm's model builder)
MAX_NESTING = 500
#: most binary operators along one path of an expression's syntax tree (``a+b+c`` chains two): Storm's parser reads
#: a flat chain in a loop but builds it as a tree that deep, which its builder walks recursively (a guard or label
#: summing 30,000 terms crashes the process; 20,000 pass)
MAX_CHAIN = 10_000
#: most binary operators along one path in an expression Storm evaluates with ExprTk: a property's state formulas (each
#: becomes a label), a model's labels and rewards. ExprTk refuses deeper ones ("stack depth 10001 exceeds maximum
#: allowed stack depth of 10000"; measured: 4,998 pass, 4,999 are refused, for sums and disjunctions alike, in a
#: property, a label and a reward). Guards and updates are evaluated otherwise, up to :data:`MAX_CHAIN`.
MAX_EVALUATED_CHAIN = 4_998

_TOKEN = re.compile(
    r"//[^\n]*|\"[^\"\n]*\"?|[A-Za-z_]\w*|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|<=>|=>|->|<=|>=|!=|\.\.|\n|[^\s\w]"
)
_BLANKED = re.compile(r'//[^\n]*|"[^"\n]*"?')
_PREFIX_WORDS = frozenset({"X", "F", "G"})
#: binary operators by precedence, lowest first (PRISM's, and the path operators and separators as the lowest)
_PRECEDENCE = {
    **dict.fromkeys(("?", ":", ",", "..", "U", "W"), 0),
    **dict.fromkeys(("=>", "<=>"), 1),
    "|": 2,
    "&": 3,
    **dict.fromkeys(("=", "!=", "<", "<=", ">", ">="), 4),
    **dict.fromkeys(("+", "-"), 5),
    **dict.fromkeys(("*", "/"), 6),
    "^": 7,
}
_TOP = 7
#: words that start a PRISM statement (an expression before them has ended)
_STATEMENT_WORDS = frozenset(
    {"module", "endmodule", "label", "formula", "const", "rewards", "endrewards", "init", "endinit", "global", "system"}
)
_REWARDS_WORD = re.compile(r"\b(endrewards|rewards)\b")


class _Level:
    """One bracket level of :func:`expression_depth`'s scan: the operators of each precedence in the current operand
    of the next lower one (``count``), and the deepest chain among that operand's finished operands (``below``)."""

    __slots__ = ("below", "count", "nest", "operand", "prefix")

    def __init__(self) -> None:
        self.prefix = self.nest = 0
        self.count = [0] * (_TOP + 1)
        self.below = [0] * (_TOP + 1)
        self.operand = False  # the last token was an operand (a ``-`` after it is binary)

    def item(self, nest: int, chain: int) -> None:
        """An operand (an atom: 0, 0; a bracketed group: its depths) after the pending prefix operators."""
        self.nest = max(self.nest, self.prefix + nest)
        self.below[_TOP] = max(self.below[_TOP], chain)
        self.prefix, self.operand = 0, True

    def operator(self, precedence: int) -> None:
        """A binary operator: the operands of higher precedence before it are finished."""
        for p in range(_TOP, precedence, -1):
            self.below[p - 1] = max(self.below[p - 1], self.count[p] + self.below[p])
            self.count[p] = self.below[p] = 0
        self.count[precedence] += 1
        self.operand = False

    def depths(self) -> tuple[int, int]:
        self.operator(0)
        return max(self.nest, self.prefix), self.count[0] - 1 + self.below[0]


def expression_depth(
    text: str, formulas: dict[str, tuple[int, int]] | None = None, *, evaluated: bool = False
) -> tuple[int, int, int]:
    """The deepest nesting of brackets and prefix operators, and the most binary operators along one path, of the
    expressions in PRISM or property ``text`` (``//`` comments and quoted labels skipped), with the line the first one
    over :data:`MAX_NESTING` or :data:`MAX_CHAIN` starts on (else 1): ``(nesting, chain, line)``. Expressions end at
    ``;`` and PRISM's statement keywords; a command's guard at ``->``, each update's probability at ``:`` and its
    assignments at the ``+`` before the next update. ``chain`` is the depth of the tree of binary operators by
    precedence (``x=1 | x=2 | x=3`` is three deep), an upper bound on Storm's. ``formulas``: the depths of the PRISM
    formulas a name stands for (Storm writes a formula out where it is used). ``evaluated``: every expression is one
    ExprTk evaluates (a property's), else a label's or rewards' (limited to :data:`MAX_EVALUATED_CHAIN`)."""
    scan = _scan(text, formulas, evaluated=evaluated)
    return scan.nest, scan.chain, scan.over_at or 1


def _scan(text: str, formulas: dict[str, tuple[int, int]] | None, *, evaluated: bool, rewards: bool = False) -> _Scan:
    scan = _Scan(formulas or {}, evaluated=evaluated, rewards=rewards)
    for m in _TOKEN.finditer(text):
        scan.token(m.group())
    scan.finish()
    return scan


class _Scan:
    """:func:`expression_depth`'s state: the open bracket levels, the deepest values so far, the line."""

    def __init__(self, formulas: dict[str, tuple[int, int]], *, evaluated: bool = False, rewards: bool = False) -> None:
        self.formulas = formulas
        self.levels = [_Level()]
        self.nest = self.chain = self.over_at = 0
        self.line = self.start = 1
        self.updates = self.assignments = False  # after a command's ``->`` / in an update's assignments (level 0)
        self.evaluated, self.rewards, self.label = evaluated, rewards, False  # ExprTk evaluates: always / in these
        self.over_evaluated: tuple[int, int] | None = None  # (chain, line) of the first over MAX_EVALUATED_CHAIN

    def finish(self) -> None:
        """The end of an expression at bracket level 0."""
        levels = self.levels
        while len(levels) > 1:  # an unclosed bracket: as if closed here
            inner = levels.pop().depths()
            levels[-1].item(inner[0] + 1, inner[1])
        nest, chain = levels[0].depths()
        self.nest, self.chain = max(self.nest, nest), max(self.chain, chain)
        if (nest > MAX_NESTING or chain > MAX_CHAIN) and not self.over_at:
            self.over_at = self.start
        # one level above the expression ExprTk sees is the statement's: a property's operator (``P=?``, ``P>=b``), a
        # label's ``"name" =``, a reward's ``guard :`` (a step bound or ``U`` adds another: refused one level early)
        evaluated = self.evaluated or self.rewards or self.label
        if evaluated and chain > MAX_EVALUATED_CHAIN + 1 and self.over_evaluated is None:
            self.over_evaluated = (chain, self.start)
        self.levels = [_Level()]

    def token(self, token: str) -> None:
        level, top = self.levels[-1], len(self.levels) == 1
        if token == "\n" or token.startswith("//"):
            self.line += token == "\n"
            return
        if top and not any(level.count) and not level.operand and not level.prefix:
            self.start = self.line
        if token in ("(", "[", "{"):
            self.levels.append(_Level())
        elif token in (")", "]", "}"):
            if not top:
                inner = self.levels.pop().depths()
                self.levels[-1].item(inner[0] + 1, inner[1])
        elif token == ";" or (top and (token == "->" or token in _STATEMENT_WORDS)):
            self.finish()
            self.updates, self.assignments = token == "->", False
            self.label = token == "label" or (self.label and token != ";")
            self.rewards = token == "rewards" or (self.rewards and token != "endrewards")
        elif top and ((self.updates and token == ":") or (self.assignments and token == "+")):
            self.finish()  # an update's probability ends at ':', its assignments at the '+' before the next update
            self.assignments = token == ":"
        elif token == "!" or token in _PREFIX_WORDS or (token == "-" and not level.operand):
            level.prefix += 1
            level.operand = False
        elif token in _PRECEDENCE:
            level.operator(_PRECEDENCE[token])
        elif token != "'":
            level.item(*self.formulas.get(token, (0, 0)))


def check_nesting(
    text: str,
    what: str,
    *,
    lines: bool = False,
    formulas: dict[str, tuple[int, int]] | None = None,
    evaluated: bool = False,
) -> None:
    """Refuse ``text`` whose expressions nest deeper than :data:`MAX_NESTING` or chain more than :data:`MAX_CHAIN`
    operators, or :data:`MAX_EVALUATED_CHAIN` in an expression ExprTk evaluates (see :func:`expression_depth`, and
    there ``formulas`` and ``evaluated``: a property's text); ``what`` names it ("property '...'", a file; ``lines``:
    name the line)."""
    formulas = formulas or {}
    deepest = (max((n for n, _ in formulas.values()), default=0), max((c for _, c in formulas.values()), default=0))
    nest, chain, line = 0, 0, 1
    over_evaluated: tuple[int, int] | None = None
    lines_before = 0
    rewards = False  # inside a rewards block (a statement of its own between each ';')
    for piece in _BLANKED.sub(lambda m: "" if m.group().startswith("//") else '""', text).split(";"):
        # a statement that cannot reach either limit (few enough brackets and prefix characters, short enough, even
        # with the deepest formula in it) is not scanned token by token: a 20,000-command file costs string counts
        bound = sum(piece.count(c) for c in "([{!-XFG")
        if bound + deepest[0] > MAX_NESTING or len(piece) + deepest[1] > MAX_EVALUATED_CHAIN:
            scan = _scan(piece, formulas, evaluated=evaluated, rewards=rewards)
            found = (scan.nest, scan.chain, scan.over_at or 1)
            if (found[0] > MAX_NESTING or found[1] > MAX_CHAIN) and not (nest > MAX_NESTING or chain > MAX_CHAIN):
                nest, chain, line = found[0], found[1], lines_before + found[2]
            if scan.over_evaluated is not None and over_evaluated is None:
                over_evaluated = (scan.over_evaluated[0], lines_before + scan.over_evaluated[1])
        words = _REWARDS_WORD.findall(piece)
        rewards = words[-1] == "rewards" if words else rewards
        lines_before += piece.count("\n")
    where = f"{what}: line {line}" if lines else what
    if nest > MAX_NESTING:
        raise PropertyError(
            f"{where}: an expression nested {nest} deep, more than {MAX_NESTING} (brackets and the operators ! - X F G "
            "before an operand; Storm's parser would run out of stack and crash); simplify the expression"
        )
    if chain > MAX_CHAIN:
        raise PropertyError(
            f"{where}: an expression chaining {chain} operators, more than {MAX_CHAIN:,} (a+b+c..., with the formulas it "
            "uses written out, is a tree that deep, which Storm walks recursively and would run out of stack and crash); "
            "split it"
        )
    if over_evaluated is not None:
        where = f"{what}: line {over_evaluated[1]}" if lines else what
        chained = over_evaluated[0] - 1  # (the expression's, without the statement's level)
        raise PropertyError(
            f"{where}: an expression chaining {chained:,} operators, more than the {MAX_EVALUATED_CHAIN:,} "
            "Storm's ExprTk evaluator takes in a label, a reward or a property's state formula (a+b+c..., with the "
            "formulas it uses written out; ExprTk's stack depth is 10,000); split it"
        )


def _check_balanced(text: str) -> None:
    check_nesting(text, f"property '{text[:60]}{'...' if len(text) > 60 else ''}'", evaluated=True)
    if text.count('"') % 2:
        raise PropertyError(f"property '{text}': unbalanced quotes")
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


#: suffixes of PRISM properties files (``-p FILE`` reads every property in it)
PROPERTY_FILE_SUFFIXES = (".props", ".pctl", ".prop", ".csl")
_CONST_DECL = re.compile(r"^const\s+(?:(?:int|double|bool)\s+)?(?P<name>[A-Za-z_]\w*)\s*(?:=\s*(?P<value>.+))?$", re.S)
_NAMED_PROPERTY = re.compile(r'^"(?P<name>[^"]+)"\s*:\s*(?P<body>.+)$', re.S)
_LITERAL = re.compile(r"^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|true|false)$")


def _statements(text: str) -> list[str]:
    """``text`` without ``//`` comments, split at ``;`` and at line ends outside brackets and quotes."""
    out: list[str] = []
    current: list[str] = []
    depth, quoted, i = 0, False, 0
    while i < len(text):
        ch = text[i]
        if quoted:
            quoted = ch != '"'
        elif ch == '"':
            quoted = True
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ";" or (ch == "\n" and depth <= 0):
            out.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(ch)
        i += 1
    out.append("".join(current).strip())
    return [s for s in out if s]


def _substitute(text: str, values: dict[str, str]) -> str:
    """``text`` with each constant (a whole word outside quotes) replaced by its literal value."""
    if not values:
        return text
    parts = re.split(r'("[^"]*")', text)
    word = re.compile(r"\b(" + "|".join(re.escape(k) for k in values) + r")\b")
    return "".join(p if p.startswith('"') else word.sub(lambda m: values[m.group(1)], p) for p in parts)


def declared_constants(text: str) -> list[str]:
    """The constants a properties file's ``text`` declares (``const int T;``, ``const double p = 0.5;``), in order."""
    return [m.group("name") for s in _statements(text) if (m := _CONST_DECL.match(s)) is not None]


#: the largest properties file read (a property is a line; a file of this size holds some 100,000)
MAX_PROPERTIES_BYTES = 16 * 2**20


def read_properties_file(path: str | Path) -> str:
    """The text of a PRISM properties file (a leading UTF-8 byte-order mark is allowed, as in model files).

    Raises:
        InputFileError: the file is missing, unreadable, no regular file (a FIFO, a directory, a device), larger than
            :data:`MAX_PROPERTIES_BYTES` or not UTF-8 text.
    """
    from rlverify.files import read_input

    try:
        return read_input(path, "properties file", MAX_PROPERTIES_BYTES).decode("utf-8-sig")  # a byte-order mark, as JANI
    except UnicodeDecodeError:
        raise InputFileError(f"{path}: the properties file is not UTF-8 text") from None


def written_properties(text: str) -> list[str]:
    """The properties of a properties file's ``text`` as written (constants not substituted, names dropped), in the
    order :func:`split_properties` returns them."""
    out = []
    for statement in _statements(text):
        if _CONST_DECL.match(statement) is None:
            named = _NAMED_PROPERTY.match(statement)
            out.append((named.group("body") if named else statement).strip())
    return out


def split_properties(
    text: str, constants: dict[str, str] | None = None, *, source: str = "properties"
) -> list[tuple[str | None, str]]:
    """The properties of a PRISM properties file's ``text``: ``(name or None, property text)`` in file order.

    ``//`` comments are dropped; properties end at ``;`` or at a line end outside brackets; ``"name": P=? [...]``
    names one. ``const`` declarations are substituted into the properties after them: with a literal value
    (``const int T = 10;``), or — declared without one (``const int T;``) — the value in ``constants``.

    Raises:
        PropertyError: no property; a constant without a value; a constant defined by an expression (rlverify reads
            literals: write the number, or declare it without a value and give it); a name given twice.
    """
    given = {k: str(v) for k, v in (constants or {}).items()}
    values: dict[str, str] = {}
    found: list[tuple[str | None, str]] = []
    for statement in _statements(text):
        const = _CONST_DECL.match(statement)
        if const is not None:
            name, value = const.group("name"), const.group("value")
            if value is None:
                if name not in given:
                    raise PropertyError(f"{source}: constant {name} has no value: give it with -c {name}=VALUE")
                value = given[name]
            elif name in given:
                raise PropertyError(f"{source}: constant {name} is defined in the file (= {value.strip()}); drop -c {name}")
            value = _substitute(value.strip(), values)
            if not _LITERAL.match(value):
                raise PropertyError(
                    f"{source}: constant {name} = {value}: rlverify reads literal values in property files; write the "
                    f"number, or declare 'const {name};' and give -c {name}=VALUE"
                )
            values[name] = value
            continue
        named = _NAMED_PROPERTY.match(statement)
        name, body = (named.group("name"), named.group("body")) if named else (None, statement)
        if name is not None and any(n == name for n, _ in found):
            raise PropertyError(f'{source}: property "{name}" is named twice')
        found.append((name, _substitute(body.strip(), values)))
    unused = sorted(set(given) - set(values))
    if unused:
        raise PropertyError(
            f"{source}: -c {', '.join(unused)}: no such constant in the properties (declared: {', '.join(values) or 'none'})"
        )
    if not found:
        raise PropertyError(f"{source}: no property in it (one per line or ';'-separated, e.g. P=? [F \"goal\"])")
    return found
