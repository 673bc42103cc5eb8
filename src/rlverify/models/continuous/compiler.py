"""Expressions of a declared system, compiled: Python syntax over the variables, constants, action values and ``let``
names into affine forms plus declared terms (:class:`Lin`); errors name the source and the field."""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlverify.errors import ModelError, did_you_mean
from rlverify.models.continuous.terms import SATURATIONS, TERMS
from rlverify.models.expressions import MAX_DEPTH, syntax_depth

__all__ = ["ActionDependent", "Compiler", "Lin"]

#: a term of a :class:`Lin`: ``(name, g, g0)`` for ``f_name(g . x + g0)``
TermKey = tuple[str, tuple[float, ...], float]


class ActionDependent(Exception):
    """A name that depends on the action was used where only the state may appear."""


class Lin:
    """``coef . x + const + sum_k terms[k] * f_k(g_k . x + g0_k)`` (``k = (name, g, g0)``)."""

    __slots__ = ("coef", "const", "terms")

    def __init__(self, coef: np.ndarray, const: float, terms: dict[TermKey, float] | None = None) -> None:
        self.coef = coef
        self.const = const
        self.terms = terms or {}

    @property
    def is_const(self) -> bool:
        return not self.coef.any() and not self.terms

    def __add__(self, other: Lin) -> Lin:
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0.0) + v
        return Lin(self.coef + other.coef, self.const + other.const, terms)

    def __sub__(self, other: Lin) -> Lin:
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0.0) - v
        return Lin(self.coef - other.coef, self.const - other.const, terms)

    def scale(self, k: float) -> Lin:
        return Lin(self.coef * k, self.const * k, {t: v * k for t, v in self.terms.items()})

    def divide(self, k: float) -> Lin:
        return Lin(self.coef / k, self.const / k, {t: v / k for t, v in self.terms.items()})


#: what a name means while compiling: an affine form, or a marker of a name that depends on the action
Binding = Lin | ActionDependent


class Compiler:
    """Turns expression strings into :class:`Lin` forms over ``variables`` (errors name ``source``)."""

    def __init__(self, source: str, variables: Sequence[str]) -> None:
        self.source = source
        self.n = len(variables)
        self.env: dict[str, Binding] = {"pi": self.const(math.pi)}
        for i, v in enumerate(variables):
            e = np.zeros(self.n)
            e[i] = 1.0
            self.env[v] = Lin(e, 0.0)

    def const(self, value: float) -> Lin:
        return Lin(np.zeros(self.n), float(value))

    def fail(self, where: str, message: str) -> ModelError:
        return ModelError(f"{self.source}: {where}: {message}")

    def parse(self, text: Any, where: str, mode: str = "eval") -> ast.AST:
        if not isinstance(text, str):
            raise self.fail(where, f"expected an expression string, got {text!r}")
        shown = text if len(text) <= 200 else f"{text[:100]}... ({len(text):,} characters)"
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise self.fail(where, f"'{shown}' does not parse ({exc.msg})") from None
        except (RecursionError, MemoryError):
            raise self.fail(where, f"'{shown}' is nested too deeply to parse (at most {MAX_DEPTH} levels)") from None
        depth = syntax_depth(tree)
        if depth > MAX_DEPTH:
            raise self.fail(where, f"'{shown}' is nested {depth} levels deep, more than {MAX_DEPTH}")
        return tree.body

    def expr(self, text: Any, where: str, env: Mapping[str, Binding], *, terms: bool = True) -> Lin:
        """An expression; ``terms=False``: must be affine in the state (guards, unsafe, observation)."""
        node = self.parse(text, where)
        lin = self._node(node, text, where, env)
        if lin.terms and not terms:
            names = ", ".join(sorted({k[0] for k in lin.terms}))
            raise self.fail(
                where,
                f"'{text}' is not affine in the state (it uses {names}); only updates ('next' expressions) may use terms",
            )
        return lin

    def update(self, text: Any, where: str, env: Mapping[str, Binding]) -> tuple[Lin, str | None, float, float]:
        """A ``next`` expression: ``(lin, saturation or None, lo, hi)``."""
        node = self.parse(text, where)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in SATURATIONS:
            op = node.func.id
            if len(node.args) != 3 or node.keywords:
                raise self.fail(where, f"{op} takes (expression, lo, hi), got '{text}'")
            inner = self._node(node.args[0], text, where, env)
            bounds = [self._node(a, text, where, env) for a in node.args[1:]]
            if not all(b.is_const for b in bounds):
                raise self.fail(where, f"the bounds of {op} in '{text}' must be constants")
            lo, hi = bounds[0].const, bounds[1].const
            if not lo < hi:
                raise self.fail(where, f"{op} in '{text}' needs lo < hi, got {lo:g} and {hi:g}")
            return inner, op, lo, hi
        return self._node(node, text, where, env), None, 0.0, 0.0

    def inequalities(self, text: Any, where: str, env: Mapping[str, Binding]) -> list[tuple[np.ndarray, float]]:
        """``'a <= b'``, ``'a >= b'`` or a chain, as rows ``(g, h)`` meaning ``g . x <= h``."""
        node = self.parse(text, where)
        if not isinstance(node, ast.Compare):
            raise self.fail(where, f"'{text}' is not an inequality; expected e.g. 'x <= 1' or '0 <= x <= 1'")
        sides = [node.left, *node.comparators]
        lins = [self._node(s, text, where, env) for s in sides]
        rows = []
        for op, a, b in zip(node.ops, lins[:-1], lins[1:], strict=True):
            if isinstance(op, ast.LtE):
                d = a - b
            elif isinstance(op, ast.GtE):
                d = b - a
            else:
                raise self.fail(where, f"'{text}': use <= or >= (regions are closed)")
            if d.terms:
                raise self.fail(where, f"'{text}' is not affine in the state; inequalities must be affine")
            rows.append((d.coef, -d.const + 0.0))
        return rows

    def _node(self, node: ast.AST, text: str, where: str, env: Mapping[str, Binding]) -> Lin:
        """:meth:`_value` of ``node``, refused unless every coefficient is a finite real number."""
        try:
            with np.errstate(all="raise"):
                lin = self._value(node, text, where, env)
            finite = (
                np.isfinite(lin.coef).all()
                and math.isfinite(lin.const)
                and all(
                    math.isfinite(w) and math.isfinite(k[2]) and all(math.isfinite(c) for c in k[1])
                    for k, w in lin.terms.items()
                )
            )
        except (OverflowError, FloatingPointError, TypeError):  # TypeError: a complex number, e.g. (-8) ** 0.5
            finite = False
        if not finite:
            part = ast.get_source_segment(text.strip(), node) or ast.unparse(node)
            raise self.fail(
                where, f"'{part}' in '{text}' is not a finite real number (overflow, or a root of a negative number?)"
            )
        return lin

    def _value(self, node: ast.AST, text: str, where: str, env: Mapping[str, Binding]) -> Lin:
        match node:
            case ast.Constant(value=int() | float() as value) if not isinstance(value, bool):
                return self.const(value)
            case ast.Name():
                return self._name(node, text, where, env)
            case ast.UnaryOp(op=ast.USub() | ast.UAdd()):
                inner = self._node(node.operand, text, where, env)
                return inner.scale(-1.0) if isinstance(node.op, ast.USub) else inner
            case ast.BinOp():
                return self._binary(node, text, where, env)
            case ast.Call(func=ast.Name(id=name)):
                return self._term(node, name, text, where, env)
        raise self._unsupported(node, text, where)

    def _unsupported(self, node: ast.AST, text: str, where: str) -> ModelError:
        return self.fail(
            where,
            f"'{text}': unsupported syntax ({type(node).__name__}); use numbers, names, + - * /, "
            f"parentheses and {', '.join(TERMS)}",
        )

    def _name(self, node: ast.Name, text: str, where: str, env: Mapping[str, Binding]) -> Lin:
        """A variable, constant, action value or ``let`` name."""
        if node.id in env:
            value = env[node.id]
            if isinstance(value, ActionDependent):
                raise self.fail(
                    where, f"'{text}' uses '{node.id}', which depends on the action; only updates ('next' expressions) may"
                )
            return value
        if node.id in TERMS or node.id in SATURATIONS:
            raise self.fail(where, f"'{text}': {node.id} is a function; call it as {node.id}(...)")
        raise self.fail(where, f"unknown name '{node.id}' in '{text}'{did_you_mean(node.id, env)}; known: {', '.join(env)}")

    def _binary(self, node: ast.BinOp, text: str, where: str, env: Mapping[str, Binding]) -> Lin:
        """``a + b``, ``a - b``; ``a * b`` and ``a / b`` with a constant factor or divisor; ``a ** b`` of constants."""
        a = self._node(node.left, text, where, env)
        b = self._node(node.right, text, where, env)
        match node.op:
            case ast.Add():
                return a + b
            case ast.Sub():
                return a - b
            case ast.Mult():
                return self._product(a, b, text, where)
            case ast.Div():
                return self._quotient(a, b, text, where)
            case ast.Pow():
                return self._power(a, b, text, where)
        raise self._unsupported(node, text, where)

    def _product(self, a: Lin, b: Lin, text: str, where: str) -> Lin:
        if a.is_const:
            return b.scale(a.const)
        if b.is_const:
            return a.scale(b.const)
        raise self.fail(
            where,
            f"'{text}' is not affine: it multiplies two state-dependent expressions; "
            "split the state space into pieces ('when') or use a declared term "
            f"({', '.join(TERMS)})",
        )

    def _quotient(self, a: Lin, b: Lin, text: str, where: str) -> Lin:
        if not b.is_const:
            raise self.fail(where, f"'{text}' is not affine: it divides by a state-dependent expression")
        if b.const == 0:
            raise self.fail(where, f"'{text}' divides by zero")
        return a.divide(b.const)

    def _power(self, a: Lin, b: Lin, text: str, where: str) -> Lin:
        if not (a.is_const and b.is_const):
            raise self.fail(where, f"'{text}' is not affine: a power of a state-dependent expression")
        if a.const == 0 and b.const < 0:
            raise self.fail(where, f"'{text}' divides by zero (0 to a negative power)")
        value = a.const**b.const
        if not isinstance(value, float):  # complex: a fractional power of a negative number
            raise TypeError(value)
        return self.const(value)

    def _term(self, node: ast.Call, name: str, text: str, where: str, env: Mapping[str, Binding]) -> Lin:
        """A declared term ``f(affine)`` (a saturation only around a whole update, see :meth:`update`)."""
        if name in SATURATIONS:
            raise self.fail(
                where, f"'{text}': {name}(...) may only enclose a whole update (the outermost call of a 'next' expression)"
            )
        if name not in TERMS:
            raise self.fail(
                where,
                f"unknown term '{name}' in '{text}'{did_you_mean(name, TERMS)}: the engine "
                f"can bound {', '.join(TERMS)} (of an affine argument), and "
                f"{' and '.join(SATURATIONS)} around a whole update",
            )
        if len(node.args) != 1 or node.keywords:
            raise self.fail(where, f"'{text}': {name} takes one argument")
        arg = self._node(node.args[0], text, where, env)
        if arg.terms:
            raise self.fail(where, f"'{text}': the argument of {name} must be affine in the state")
        if arg.is_const:
            return self.const(float(TERMS[name].f(np.array([arg.const]))[0]))
        key = (name, tuple(float(c) for c in arg.coef), float(arg.const))
        return Lin(np.zeros(self.n), 0.0, {key: 1.0})
