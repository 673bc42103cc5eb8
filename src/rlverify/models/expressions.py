"""One small expression language over state variables, evaluated on numpy arrays (``--where``, ``--importance``).

PRISM style (``x=1 & !done``) and Python style (``x == 1 and not done``) both parse. Accepted:
variables, numbers, ``true``/``false``, comparisons (chains too), ``& | !`` (``and or not``, on
conditions), ``+ - * / // % **``, ``abs()``, ``min()``, ``max()``, ``a if c else b`` and parentheses.
The text is parsed into a syntax tree and walked; nothing is executed. A division by zero in some
state is an error (numpy would answer ``x % 0`` with 0), never a silent value; so is an integer result
beyond 64 bits (``2**64``: numpy would wrap it), a float overflow (``10.0**400``), a value that is not
a real number (``(-8)**0.5``) and an expression nested more than :data:`MAX_DEPTH` deep. A negative
integer power (``x**-1``) is a float, as in Python.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

import numpy as np

from rlverify.errors import OptionError, did_you_mean

ALLOWED = (
    "variables, numbers, true/false, comparisons = != < <= > >=, & | ! (or and/or/not), "
    "+ - * / // % **, abs(), min(), max(), 'a if c else b', parentheses"
)
_CMP = {
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
}
_ARITH = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide,
    ast.Mod: np.mod,
    ast.Pow: np.power,
}
_FUNCS = {"abs": np.abs, "min": np.minimum, "max": np.maximum}
_CONSTANTS = {"true": True, "false": False, "True": True, "False": False}
_NODES = (
    ast.Expression,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.BinOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    *_CMP,
    *_ARITH,
)

Expression = Callable[[np.ndarray], np.ndarray]


class ResultKind(StrEnum):
    """What an expression must give: a condition (bool) or a number (float64; comparisons count 1 for true)."""

    CONDITION = "condition"
    NUMBER = "number"


#: the deepest syntax tree accepted (nesting of operators and parentheses)
MAX_DEPTH = 200
_INT_LIMIT = 2.0**63  # |integer result| from here on does not fit int64


def compile_expression(
    text: str,
    variables: Sequence[str],
    *,
    option: str,
    booleans: Sequence[str] = (),
    kind: ResultKind | str = ResultKind.CONDITION,
) -> Expression:
    """Parse ``text`` over ``variables`` into ``f(values (N, len(variables))) -> (N,)``.

    ``kind``: ``"condition"`` (the result must be a comparison or logic: bool) or ``"number"`` (float64;
    comparisons count 1 for true). ``booleans``: the variables whose 0/1 values read as false/true.
    ``option`` names the option in messages (``--where``).

    Raises:
        OptionError: a syntax error, an unknown variable or function (naming the known ones), another
            construct, a number where a condition is needed; when evaluated: a division by zero.
    """
    where = f"{option} {text!r}" if len(text) <= 200 else f"{option} {text[:100]!r}... ({len(text):,} characters)"
    py = _python_spelling(text).strip()
    tree = _parse(py, where)
    known = list(variables)
    _check_constructs(tree, where)
    _check_names(tree, known, where)
    _check_numbers(tree, py, where)
    flags = set(booleans)
    result = ResultKind(kind)

    def evaluate(values: np.ndarray) -> np.ndarray:
        values = np.asarray(values)
        column = {n: values[:, i].astype(bool) if n in flags else values[:, i] for i, n in enumerate(known)}
        out = np.asarray(_eval(tree.body, column, where))
        if result is ResultKind.CONDITION:
            if out.dtype != np.bool_:
                raise OptionError(f"{where}: is a number, not a condition (compare it: x=1, x>=2)")
            return np.broadcast_to(out, (len(values),)).copy()
        return np.broadcast_to(out.astype(np.float64), (len(values),)).copy()

    evaluate(np.ones((1, len(known)), dtype=np.int64))  # refuse a wrong kind now (1s: no spurious division by zero)
    return evaluate


def _python_spelling(text: str) -> str:
    """``text`` with PRISM's ``& | ! =`` (and ``&& ||``) spelled as Python's ``and or not ==``."""
    py = re.sub(r"&&?", " and ", text)
    py = re.sub(r"\|\|?", " or ", py)
    py = re.sub(r"!(?!=)", " not ", py)
    return re.sub(r"(?<![<>!=])=(?!=)", "==", py)


def _parse(py: str, where: str) -> ast.Expression:
    """The syntax tree of ``py``, refusing a syntax error and nesting deeper than :data:`MAX_DEPTH`."""
    try:
        tree = ast.parse(py, mode="eval")
    except SyntaxError as exc:
        raise OptionError(f"{where}: syntax error ({exc.msg}); use {ALLOWED}") from None
    except (RecursionError, MemoryError):
        raise OptionError(f"{where}: nested too deeply to parse (at most {MAX_DEPTH} levels)") from None
    depth = syntax_depth(tree)
    if depth > MAX_DEPTH:
        raise OptionError(
            f"{where}: nested {depth} levels deep, more than {MAX_DEPTH} (split it, or use min()/max() with many arguments)"
        )
    return tree


def _allowed(node: ast.AST) -> bool:
    """Whether ``node`` is a construct of the language (a call: of a plain name, without keywords)."""
    if not isinstance(node, _NODES):
        return False
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and not node.keywords
    return not isinstance(node, ast.Constant) or isinstance(node.value, (int, float))


def _check_constructs(tree: ast.Expression, where: str) -> None:
    """Refuse every construct outside the language (and a call of an unknown function)."""
    for node in ast.walk(tree):
        if not _allowed(node):
            shown = ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__
            raise OptionError(f"{where}: '{shown}' is not allowed; use {ALLOWED}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in _FUNCS:
            raise OptionError(
                f"{where}: '{ast.unparse(node)}' is not allowed: unknown function "
                f"'{node.func.id}'; the functions: {', '.join(_FUNCS)}"
            )


def _check_names(tree: ast.Expression, known: list[str], where: str) -> None:
    """Refuse a name that is neither a variable in ``known``, a constant, nor a called function."""
    functions = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and id(node) not in functions and node.id not in known and node.id not in _CONSTANTS:
            raise OptionError(
                f"{where}: unknown variable '{node.id}'{did_you_mean(node.id, known)}; the variables: {', '.join(known)}"
            )


def _check_numbers(tree: ast.Expression, py: str, where: str) -> None:
    """Refuse a float literal that overflows and an integer literal beyond 64 bits."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, float) and not np.isfinite(node.value):
                raise OptionError(
                    f"{where}: the number '{ast.get_source_segment(py, node) or node.value}' is too large for a float"
                )
            if isinstance(node.value, int) and not isinstance(node.value, bool) and abs(node.value) >= 2**63:
                raise OptionError(f"{where}: the number {node.value} does not fit in 64 bits")


def _eval(node: ast.AST, column: dict[str, np.ndarray], where: str) -> Any:
    """The value of ``node`` over the variables' columns (``column``)."""
    if isinstance(node, ast.Name):
        return column[node.id] if node.id in column else _CONSTANTS[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    evaluate = _EVAL.get(type(node), _call)
    return evaluate(node, column, where)


def _bool_op(node: ast.BoolOp, column: dict[str, np.ndarray], where: str) -> Any:
    parts = [_condition(_eval(v, column, where), where) for v in node.values]
    return (np.logical_and if isinstance(node.op, ast.And) else np.logical_or).reduce(np.broadcast_arrays(*parts))


def _unary(node: ast.UnaryOp, column: dict[str, np.ndarray], where: str) -> Any:
    v = _eval(node.operand, column, where)
    if isinstance(node.op, ast.Not):
        return np.logical_not(_condition(v, where))
    return -_number(v) if isinstance(node.op, ast.USub) else _number(v)


def _binary(node: ast.BinOp, column: dict[str, np.ndarray], where: str) -> Any:
    return _arithmetic(node, _number(_eval(node.left, column, where)), _number(_eval(node.right, column, where)), where)


def _if(node: ast.IfExp, column: dict[str, np.ndarray], where: str) -> Any:
    return np.where(
        _condition(_eval(node.test, column, where), where),
        _eval(node.body, column, where),
        _eval(node.orelse, column, where),
    )


def _check_divisor(node: ast.BinOp, left: np.ndarray, right: np.ndarray, where: str) -> None:
    """Refuse a division (``/ // %``) by zero and 0 to a negative power (in some state)."""
    if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and (right == 0).any():
        raise OptionError(f"{where}: '{ast.unparse(node)}' divides by zero (in some state)")
    if isinstance(node.op, ast.Pow) and ((left == 0) & (right < 0)).any():
        raise OptionError(f"{where}: '{ast.unparse(node)}' divides by zero (0 to a negative power, in some state)")


def _check_int64(
    node: ast.BinOp, op: Callable[[np.ndarray, np.ndarray], np.ndarray], left: np.ndarray, right: np.ndarray, where: str
) -> None:
    """Refuse integer arithmetic whose result would not fit 64 bits (it would wrap)."""
    with np.errstate(all="ignore"):
        approx = op(left.astype(np.float64), right.astype(np.float64))
    if (np.abs(approx) >= _INT_LIMIT).any():
        raise OptionError(
            f"{where}: '{ast.unparse(node)}' is beyond 64-bit integers (in some state); "
            "write a float (e.g. 2.0**64) for an approximate value"
        )


def _arithmetic(node: ast.BinOp, left: np.ndarray, right: np.ndarray, where: str) -> Any:
    """``left op right``, refusing a division by zero, an integer result beyond 64 bits, a float overflow
    and a result that is not a real number."""
    _check_divisor(node, left, right, where)
    whole = np.issubdtype(left.dtype, np.integer) and np.issubdtype(right.dtype, np.integer)
    if whole and isinstance(node.op, ast.Pow) and (right < 0).any():  # a negative integer power is a fraction
        left, whole = left.astype(np.float64), False
    op = _ARITH[type(node.op)]
    if whole and not isinstance(node.op, (ast.Div, ast.Mod)):  # int64 arithmetic: refuse what would wrap
        _check_int64(node, op, left, right, where)
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            return op(left, right)
    except FloatingPointError as exc:
        what = "overflows a float" if "overflow" in str(exc) else "is not a real number"
        raise OptionError(f"{where}: '{ast.unparse(node)}' {what} (in some state)") from None


def _compare(node: ast.Compare, column: dict[str, np.ndarray], where: str) -> Any:
    """A comparison, chains too (``0 < x <= 3``)."""
    left = _eval(node.left, column, where)
    out: Any = True
    for cmp, right_node in zip(node.ops, node.comparators, strict=True):
        right = _eval(right_node, column, where)
        out = np.logical_and(out, _CMP[type(cmp)](left, right))
        left = right
    return out


def _call(node: ast.AST, column: dict[str, np.ndarray], where: str) -> Any:
    """``abs(x)``, ``min(a, b, ...)`` or ``max(a, b, ...)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):  # refused when compiled
        raise TypeError(f"not an expression of the language: {ast.dump(node)}")
    args = [_number(_eval(a, column, where)) for a in node.args]
    name = node.func.id
    if name == "abs":
        if len(args) != 1:
            raise OptionError(f"{where}: abs takes one argument")
        return np.abs(args[0])
    if len(args) < 2:
        raise OptionError(f"{where}: {name} takes two or more arguments")
    out = args[0]
    for a in args[1:]:
        out = _FUNCS[name](out, a)
    return out


#: how each kind of node is evaluated (names and constants: in :func:`_eval`; the rest: a call)
_EVAL: dict[type[ast.AST], Callable[[Any, dict[str, np.ndarray], str], Any]] = {
    ast.BoolOp: _bool_op,
    ast.UnaryOp: _unary,
    ast.BinOp: _binary,
    ast.Compare: _compare,
    ast.IfExp: _if,
}


def syntax_depth(tree: ast.AST) -> int:
    """The depth of ``tree`` (iteratively: a deep tree must not exhaust Python's stack)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if d <= MAX_DEPTH + 1:  # deeper is refused anyway
            stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _condition(v: Any, where: str) -> np.ndarray:
    a = np.asarray(v)
    if a.dtype != np.bool_:
        raise OptionError(f"{where}: 'and'/'or'/'not' (& | !) and 'if' need conditions, got a number (compare it: x=1, x>=2)")
    return a


def _number(v: Any) -> np.ndarray:
    a = np.asarray(v)
    return a.astype(np.float64) if a.dtype == np.bool_ else a
