"""Division by a constant zero refused, as PRISM does (Storm evaluates it to some number and builds on): in a PRISM
file's text before Storm parses it (a small tokenizer finds each divisor), and in Storm's expressions of a PRISM
program or JANI model once its constants are defined."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np

from rlverify.errors import ModelError, OptionError
from rlverify.models.expressions import compile_expression
from rlverify.models.storm import StormExpression, StormProgram

#: where an expression is in a model (``the guard of command m:3``) and the Storm expression
Located = tuple[str, StormExpression]


def refuse_division_by_zero(path: Path, expressions: Iterable[Located]) -> None:
    """Refuse a model dividing by a constant zero (``x/0``, ``mod(x, K)`` with ``K=0``) in a guard, a probability, an
    update or a label, once its constants are defined (``expressions``: :func:`prism_expressions` or
    :func:`jani_expressions` of the program with its constants substituted): PRISM refuses it, while Storm evaluates
    it to some number and builds on (a guard ``x/0>=0`` is false, ``(x+1)/0>=0`` true). A divisor that reads
    variables is evaluated per state by Storm and is not checked here; a PRISM file's constant divisions are checked
    in its text before Storm parses it (:func:`constant_zero_divisor`)."""
    walked: set[str] = set()  # expressions already walked, by their text (commands repeat their probabilities)
    for where, expr in expressions:
        text = str(expr)
        if ("/" not in text and "%" not in text) or text in walked:
            continue
        walked.add(text)
        found = _zero_division(expr)
        if found is not None:
            raise ModelError(
                f"{path}: {where} divides by zero: {found} (PRISM refuses this; Storm would evaluate it to some number "
                "and build on)"
            )


def prism_expressions(program: StormProgram) -> Iterator[Located]:
    """Where each expression of a Storm PRISM program is, and the expression: guards, probabilities, updates and
    labels (its formulas written out)."""
    program = program.substitute_formulas()
    for module in program.modules:
        for k, command in enumerate(module.commands):
            where = f"command {module.name}:{k + 1}"
            yield f"the guard of {where}", command.guard_expression
            for update in command.updates:
                yield f"a probability of {where}", update.probability_expression
                yield from ((f"an update of {where}", a.expression) for a in update.assignments)
    yield from ((f'label "{label.name}"', label.expression) for label in program.labels)


def jani_expressions(program: StormProgram) -> Iterator[Located]:
    """Where each expression of a Storm JANI model is, and the expression: locations' transient assignments (labels),
    guards, probabilities and assignments."""
    for automaton in program.automata:
        for location in automaton.locations:
            for a in location.assignments or ():  # None where a location assigns nothing
                yield f"location {location.name} of {automaton.name}", a.expression
        for edge in automaton.edges:
            where = f"an edge of {automaton.name}"
            yield f"the guard of {where}", edge.guard
            yield from ((f"an assignment of {where}", a.expression) for a in edge.template_edge.assignments)
            for destination, template in zip(edge.destinations, edge.template_edge.destinations, strict=True):
                yield f"a probability of {where}", destination.probability
                yield from ((f"an assignment of {where}", a.expression) for a in template.assignments)


def _operands(e: StormExpression) -> tuple[object, list[StormExpression]] | None:
    """A Storm expression's operator and operands; None for a literal, a variable or a function application (which
    has no operator and is not looked into)."""
    if e.is_literal() or e.is_variable():
        return None
    try:
        return e.operator, [e.get_operand(i) for i in range(e.arity)]
    except (RuntimeError, AttributeError, TypeError):
        return None


def _is_constant_zero(e: StormExpression) -> bool:
    """Whether Storm expression ``e`` reads no variable and evaluates to 0."""
    if e.contains_variables():
        return False
    try:
        return float(e.evaluate_as_double()) == 0.0
    except (RuntimeError, ValueError):
        return False


def _zero_division(expr: StormExpression) -> StormExpression | None:
    """The first division or ``mod`` in Storm expression ``expr`` whose divisor reads no variable and is 0, or None."""
    import stormpy  # lazy: stormpy, start-up

    ops = stormpy.expressions.OperatorType
    stack = [expr]
    while stack:
        e = stack.pop()
        found = _operands(e)
        if found is None:
            continue
        op, operands = found
        if op in (ops.DIVIDE, ops.MODULO) and len(operands) == 2 and _is_constant_zero(operands[1]):
            return e
        stack.extend(operands)
    return None


_CONSTANT = re.compile(r"\bconst\s+(?:(?:int|double|bool)\s+)?([A-Za-z_]\w*)\s*=\s*([^;]*);")
_DIVISOR_START = re.compile(r"/|\bmod\s*\(")
_SPACE = re.compile(r"\s*")
_PRIMARY = re.compile(r"\s*-?\s*(?:[A-Za-z_]\w*|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)")
_CALLED = re.compile(r"\s*-?\s*[A-Za-z_]\w*")
_STRING = re.compile(r'"([^"]*)"')


def _group(text: str, start: int) -> int:
    """The end of the bracketed group opened at ``text[start]`` (``(``), or -1 when it is not closed."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    return -1


def _after_space(text: str, at: int) -> int:
    """The position of the first character from ``at`` on that is not white space (``len(text)`` if none)."""
    found = _SPACE.match(text, at)
    return found.end() if found else at


def _slash_divisor(code: str, start: int) -> str:
    """The operand after a ``/`` ending at ``start``: a number, a name, a call or a bracketed group, possibly negated;
    ``""`` where it is not found."""
    end = -1
    operand = _PRIMARY.match(code, start)
    at = _after_space(code, start)
    if at < len(code) and code[at] == "(":
        end = _group(code, at)
    elif operand is not None:
        end = operand.end()
        after = _after_space(code, end)
        if code.startswith("(", after) and _CALLED.fullmatch(operand.group()):  # a call
            end = _group(code, after)
    return code[start:end] if end > 0 else ""


def _mod_divisor(code: str, start: int) -> str:
    """``mod``'s second argument, its bracket opened just before ``start``; ``""`` where it is not found."""
    end = _group(code, start - 1)
    args, depth, cut = code[start : end - 1] if end > 0 else "", 0, -1
    for i, c in enumerate(args):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            cut = i
    return args[cut + 1 :] if cut >= 0 else ""


def _divisors(code: str) -> Iterator[tuple[int, str]]:
    """Each division's ``(position, divisor text)`` in PRISM ``code`` (comments and strings blanked): the operand after
    ``/`` and ``mod``'s second argument; ``""`` where the divisor is not found (an unclosed bracket), which no one can
    judge."""
    for m in _DIVISOR_START.finditer(code):
        divisor = (_slash_divisor if m.group() == "/" else _mod_divisor)(code, m.end())
        yield m.start(), divisor


def _blank(m: re.Match[str]) -> str:
    """White space as long as the match (positions stay those of the file's text)."""
    return " " * len(m.group())


class _Constants:
    """The values of a PRISM text's constants known so far (numbers, and constants over them)."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def value(self, expression: str) -> float | None:
        """``expression``'s value over the constants known so far; None where it is no such constant; NaN where it
        divides by zero itself."""
        names = list(self.values)
        try:
            evaluate = compile_expression(expression, names, option="", kind="number")
            return float(evaluate(np.array([[self.values[n] for n in names]], dtype=np.float64))[0])
        except OptionError as exc:
            return math.nan if "divides by zero" in str(exc) else None
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
            return None

    def define(self, name: str, expression: str) -> None:
        """Know ``name`` where ``expression`` has a finite value."""
        known = self.value(expression)
        if known is not None and math.isfinite(known):
            self.values[name] = known

    @classmethod
    def of(cls, code: str, given: Mapping[str, str]) -> _Constants:
        """The constants of PRISM ``code`` (``given`` ones by their given values), then the ``given`` ones it lacks."""
        out = cls()
        for name, expression in _CONSTANT.findall(code):
            out.define(name, given.get(name, expression))
        for name, number in given.items():
            if name not in out.values:
                out.define(name, number)
        return out


def _line(text: str, at: int) -> str:
    """``line 7 (its text)`` of position ``at`` in ``text`` (the text shortened to 120 characters)."""
    line = text.count("\n", 0, at) + 1
    written = " ".join(text.split("\n")[line - 1].split())  # (splitlines also splits at \r, \f, ...)
    return f"line {line} ({written[:120]}{'...' if len(written) > 120 else ''})"


def constant_zero_divisor(text: str, given: Mapping[str, str]) -> tuple[str | None, bool]:
    """The line (``line 7 (its text)``) of the first division in PRISM ``text`` whose divisor is a constant zero
    (numbers and constants defined in the file or ``given``, evaluated with
    :func:`rlverify.models.expressions.compile_expression`), or None; and whether every divisor was such a constant.
    A divisor reading variables, formulas or what that language does not read is not judged here."""
    code = _STRING.sub(_blank, re.sub(r"//[^\n]*", _blank, text))
    constants = _Constants.of(code, given)
    divisors: dict[str, float | None] = {}  # each distinct divisor's value (a model repeats its "/2" many times)
    for at, divisor in _divisors(code):
        if divisor not in divisors:
            divisors[divisor] = constants.value(divisor) if len(divisor) <= 1000 else None
        found = divisors[divisor]
        if found is not None and (found == 0 or math.isnan(found)):
            return _line(text, at), False
    return None, all(v is not None for v in divisors.values())
