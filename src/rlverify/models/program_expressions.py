"""Storm expressions compiled to numpy functions of a batch of states, and looked up in tables where they read few
variables."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rlverify.models.program_types import Env, Fn, Unsupported, Var

#: a Storm expression (``stormpy.Expression``; stormpy is untyped)
StormExpression = Any


def compile_expression(expr: StormExpression, variables: dict[str, Var]) -> Fn:
    """A numpy function of a Storm expression: env (variable name -> ``(N,)`` int64) -> array or scalar.

    Integer arithmetic stays int64; ``/`` is real division (as Storm evaluates probabilities and
    ``floor``/``ceil`` arguments); ``%`` truncates (C++, as Storm; PRISM's ``mod`` arrives rewritten).
    """
    if expr.is_literal():
        return _literal(expr)
    if expr.is_variable():
        return _variable(expr, variables)
    try:
        op = expr.operator
    except Exception:  # e.g. a user-defined function: no operator
        raise Unsupported(f"expression '{expr}'") from None
    args = [compile_expression(expr.get_operand(i), variables) for i in range(expr.arity)]
    name = _operator_name(op, len(args))
    special = _SPECIAL.get(name)
    if special is not None:
        return special(*args)
    f = _power(expr) if name == "POWER" else _BINARY.get(name)
    if f is None or len(args) != 2:
        raise Unsupported(f"operator {op} in '{expr}'")
    a, b = args
    return lambda env: f(a(env), b(env))


def _operator_name(op: Any, arity: int) -> str:
    """Storm's name of operator ``op`` (``""``: unknown; a one-operand MINUS: :data:`_UNARY_MINUS`)."""
    name = _operator_names().get(op, "")  # one lookup: the enum's members hash in Python
    return _UNARY_MINUS if name == "MINUS" and arity == 1 else name


def _literal(expr: StormExpression) -> Fn:
    """A literal's constant function (bool, int or float, by the literal's type)."""
    if expr.has_boolean_type():
        value: Any = bool(expr.evaluate_as_bool())
    elif expr.has_integer_type():
        value = int(expr.evaluate_as_int())
    else:
        value = float(expr.evaluate_as_double())
    return lambda env: value


def _variable(expr: StormExpression, variables: dict[str, Var]) -> Fn:
    """A variable's values (a boolean's as bool)."""
    name = expr.get_identifier()
    var = variables.get(name)
    if var is None:
        raise Unsupported(f"unknown identifier '{name}'")
    if var.is_bool:
        return lambda env: env[name] != 0
    return lambda env: env[name]


def _negate(a: Fn) -> Fn:
    return lambda env: -a(env)


def _not(a: Fn) -> Fn:
    return lambda env: np.logical_not(a(env))


def _ite(c: Fn, a: Fn, b: Fn) -> Fn:
    return lambda env: np.where(c(env), a(env), b(env))


def _floor(a: Fn) -> Fn:
    return lambda env: np.asarray(np.floor(a(env))).astype(np.int64)


def _ceil(a: Fn) -> Fn:
    return lambda env: np.asarray(np.ceil(a(env))).astype(np.int64)


def _power(expr: StormExpression) -> Callable[[Any, Any], Any]:
    """Storm's pow: in double (std::pow), an integer result truncated; negative exponents are fine."""
    if expr.has_integer_type():
        return lambda x, y: np.trunc(np.power(np.asarray(x, dtype=np.float64), y)).astype(np.int64)
    return lambda x, y: np.power(np.asarray(x, dtype=np.float64), y)


#: the key of a one-operand MINUS (Storm names it as the binary one)
_UNARY_MINUS = "-MINUS"
#: operators that are not element-wise binary functions: their compilers, by operator name
_SPECIAL: dict[str, Callable[..., Fn]] = {
    _UNARY_MINUS: _negate,
    "NOT": _not,
    "ITE": _ite,
    "FLOOR": _floor,
    "CEIL": _ceil,
}

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "AND": np.logical_and,
    "OR": np.logical_or,
    "XOR": np.logical_xor,
    "IMPLIES": lambda x, y: np.logical_or(np.logical_not(x), y),
    "IFF": np.equal,
    "PLUS": np.add,
    "MINUS": np.subtract,
    "TIMES": np.multiply,
    "DIVIDE": lambda x, y: np.true_divide(x, y),
    "MIN": np.minimum,
    "MAX": np.maximum,
    "MODULO": np.fmod,
    "EQUAL": np.equal,
    "NOT_EQUAL": np.not_equal,
    "LESS": np.less,
    "LESS_OR_EQUAL": np.less_equal,
    "GREATER": np.greater,
    "GREATER_OR_EQUAL": np.greater_equal,
}


@functools.cache
def _operator_names() -> dict[Any, str]:
    """Storm's operators (``stormpy.expressions.OperatorType``) -> their names."""
    import stormpy  # lazy: stormpy, start-up

    return {member: name for name, member in stormpy.expressions.OperatorType.__members__.items()}


class Tabled:
    """An expression looked up in a table of its values over the few variables it reads (``(D,)``, ``D`` the product
    of their domains, at most :data:`~rlverify.models.program_tables.TABLE_DOMAIN`), built on first use by evaluating it
    once on every combination
    of their values: a gather per batch instead of one numpy call per operator."""

    __slots__ = ("fn", "key", "los", "sizes", "strides", "table")

    def __init__(self, fn: Fn, variables: list[Var]) -> None:
        self.fn = fn
        self.key = tuple(v.name for v in variables)
        self.los = [v.lo for v in variables]
        self.sizes = [v.hi - v.lo + 1 for v in variables]
        self.strides = [math.prod(self.sizes[:i]) for i in range(len(variables))]
        self.table: np.ndarray | None = None

    def row(self, env: Env) -> np.ndarray:
        """``(N,)`` int64: each state's row in the table (cached in a :class:`States` batch)."""
        rows = getattr(env, "rows", None)
        found = None if rows is None else rows.get(self.key)
        if found is None:
            found = env[self.key[0]] - self.los[0]
            for name, lo, stride in zip(self.key[1:], self.los[1:], self.strides[1:], strict=True):
                found = found + (env[name] - lo) * stride
            if rows is not None:
                rows[self.key] = found
        return found

    def __call__(self, env: Env) -> Any:
        if self.table is None:
            size = math.prod(self.sizes)
            every = np.arange(size, dtype=np.int64)
            grid = {
                name: lo + (every // stride) % n
                for name, lo, n, stride in zip(self.key, self.los, self.sizes, self.strides, strict=True)
            }
            with np.errstate(all="ignore"):
                self.table = np.array(np.broadcast_to(np.asarray(self.fn(grid)), (size,)))
        return self.table[self.row(env)]


def count_operators(expr: StormExpression) -> int:
    """How many operators a Storm expression applies (0: a literal or a variable)."""
    if expr.is_literal() or expr.is_variable():
        return 0
    return 1 + sum(count_operators(expr.get_operand(i)) for i in range(expr.arity))
