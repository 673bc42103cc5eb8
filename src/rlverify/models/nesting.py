"""How deep an expression nests and chains, refused before Storm's recursive parsers and evaluators would crash on it:
a token scan of PRISM or property text (brackets, prefix and binary operators by precedence, PRISM statements), with
the limits Storm survives (:data:`MAX_NESTING`, :data:`MAX_CHAIN`, :data:`MAX_EVALUATED_CHAIN`)."""

from __future__ import annotations

import re

from rlverify.errors import PropertyError

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
        """Scan one token (:data:`_TOKEN`)."""
        level, top = self.levels[-1], len(self.levels) == 1
        if token == "\n" or token.startswith("//"):
            self.line += token == "\n"
            return
        if top and not any(level.count) and not level.operand and not level.prefix:
            self.start = self.line
        if not self._bracket(token, top) and not self._statement(token, top):
            self._expression(token, level)

    def _bracket(self, token: str, top: bool) -> bool:
        """Open or close a bracket level (a closing bracket at level 0 is ignored); whether ``token`` is a bracket."""
        if token in ("(", "[", "{"):
            self.levels.append(_Level())
        elif token in (")", "]", "}"):
            if not top:
                inner = self.levels.pop().depths()
                self.levels[-1].item(inner[0] + 1, inner[1])
        else:
            return False
        return True

    def _statement(self, token: str, top: bool) -> bool:
        """End an expression at ``;``, a command's ``->``, a statement keyword, an update's ``:`` and the ``+`` before
        the next update (all at level 0 but ``;``); whether ``token`` ended one."""
        if token == ";" or (top and (token == "->" or token in _STATEMENT_WORDS)):
            self.finish()
            self.updates, self.assignments = token == "->", False
            self.label = token == "label" or (self.label and token != ";")
            self.rewards = token == "rewards" or (self.rewards and token != "endrewards")
            return True
        return top and self._update(token)

    def _update(self, token: str) -> bool:
        """End an update's probability at ``:`` and its assignments at the ``+`` before the next update (level 0);
        whether ``token`` ended one."""
        if (self.updates and token == ":") or (self.assignments and token == "+"):
            self.finish()  # an update's probability ends at ':', its assignments at the '+' before the next update
            self.assignments = token == ":"
            return True
        return False

    def _expression(self, token: str, level: _Level) -> None:
        """A prefix operator, a binary operator or an operand (a formula's name: its depths) of the current level."""
        if token == "!" or token in _PREFIX_WORDS or (token == "-" and not level.operand):
            level.prefix += 1
            level.operand = False
        elif token in _PRECEDENCE:
            level.operator(_PRECEDENCE[token])
        elif token != "'":
            level.item(*self.formulas.get(token, (0, 0)))


class _Deepest:
    """:func:`check_nesting`'s findings: the first expression over :data:`MAX_NESTING` or :data:`MAX_CHAIN` (its
    depths and line), and the first over :data:`MAX_EVALUATED_CHAIN` where ExprTk evaluates it (chain and line)."""

    def __init__(self) -> None:
        self.nest, self.chain, self.line = 0, 0, 1
        self.over_evaluated: tuple[int, int] | None = None

    def over(self) -> bool:
        return self.nest > MAX_NESTING or self.chain > MAX_CHAIN

    def add(self, scan: _Scan, lines_before: int) -> None:
        """A statement's scan, its first line ``lines_before + 1``."""
        nest, chain = scan.nest, scan.chain
        if (nest > MAX_NESTING or chain > MAX_CHAIN) and not self.over():
            self.nest, self.chain, self.line = nest, chain, lines_before + (scan.over_at or 1)
        if scan.over_evaluated is not None and self.over_evaluated is None:
            self.over_evaluated = (scan.over_evaluated[0], lines_before + scan.over_evaluated[1])


def _deepest(text: str, formulas: dict[str, tuple[int, int]], evaluated: bool) -> _Deepest:
    """Scan each statement of ``text`` (``;``-separated) that may reach a limit."""
    deepest_formula = (max((n for n, _ in formulas.values()), default=0), max((c for _, c in formulas.values()), default=0))
    found = _Deepest()
    lines_before = 0
    rewards = False  # inside a rewards block (a statement of its own between each ';')
    for piece in _BLANKED.sub(lambda m: "" if m.group().startswith("//") else '""', text).split(";"):
        # a statement that cannot reach either limit (few enough brackets and prefix characters, short enough, even
        # with the deepest formula in it) is not scanned token by token: a 20,000-command file costs string counts
        bound = sum(piece.count(c) for c in "([{!-XFG")
        if bound + deepest_formula[0] > MAX_NESTING or len(piece) + deepest_formula[1] > MAX_EVALUATED_CHAIN:
            found.add(_scan(piece, formulas, evaluated=evaluated, rewards=rewards), lines_before)
        words = _REWARDS_WORD.findall(piece)
        rewards = words[-1] == "rewards" if words else rewards
        lines_before += piece.count("\n")
    return found


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
    found = _deepest(text, formulas or {}, evaluated)
    where = f"{what}: line {found.line}" if lines else what
    if found.nest > MAX_NESTING:
        raise PropertyError(
            f"{where}: an expression nested {found.nest} deep, more than {MAX_NESTING} (brackets and the operators ! - "
            "X F G before an operand; Storm's parser would run out of stack and crash); simplify the expression"
        )
    if found.chain > MAX_CHAIN:
        raise PropertyError(
            f"{where}: an expression chaining {found.chain} operators, more than {MAX_CHAIN:,} (a+b+c..., with the "
            "formulas it uses written out, is a tree that deep, which Storm walks recursively and would run out of "
            "stack and crash); split it"
        )
    if found.over_evaluated is not None:
        where = f"{what}: line {found.over_evaluated[1]}" if lines else what
        chained = found.over_evaluated[0] - 1  # (the expression's, without the statement's level)
        raise PropertyError(
            f"{where}: an expression chaining {chained:,} operators, more than the {MAX_EVALUATED_CHAIN:,} "
            "Storm's ExprTk evaluator takes in a label, a reward or a property's state formula (a+b+c..., with the "
            "formulas it uses written out; ExprTk's stack depth is 10,000); split it"
        )
