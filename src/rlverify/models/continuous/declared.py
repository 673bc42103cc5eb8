"""Declare a continuous system as data: one declaration gives ``step``, ``pieces`` and the checks.

A declaration is a plain mapping (it needs no rlverify import), kept in a Python file and given to the
abstraction engine as ``path.py:NAME``::

    rlverify abstract examples/double_integrator.py:SYSTEM --policy examples/double_integrator.onnx -k 6

``NAME`` is a module-level mapping, a :class:`DeclaredSystem`, or a factory (a callable) returning one
of them; ``-c K=V,...`` overrides entries of the mapping's ``constants`` (or, for a factory, is passed
as keyword arguments). A complete example, a double integrator whose velocity saturates at +-1::

    SYSTEM = {
        "name": "double-integrator",
        "variables": ["x", "v"],                      # state, in this order (position m, velocity m/s)
        "domain": {"x": [-2, 2], "v": [-1, 1]},       # the declared state box
        "actions": ["left", "coast", "right"],        # the policy's output order
        "action_values": {"u": {"left": -1, "coast": 0, "right": 1}},   # acceleration, m/s^2
        "constants": {"dt": 0.1},
        "initial": {"default": {"x": [-0.5, 0.5], "v": [-0.2, 0.2]}},
        "unsafe": ["x >= 1", "x <= -1"],              # a union; a list item may be a list (a conjunction)
        "observation": {"x": "x", "v": "v"},          # policy features: affine in the state
        "horizon": 8,
        "pieces": [                                   # x' = x + dt v,  v' = clip(v + dt u, -1, 1)
            {"next": {"x": "x + dt*v", "v": "clip(v + dt*u, -1, 1)"}},
        ],
    }

Fields (required: ``variables``, ``domain``, ``actions``, ``initial``, ``unsafe``, ``pieces``):

* ``variables``: state variable names; ``domain``: ``{var: [lo, hi]}`` (or ``[[lo...], [hi...]]``);
  ``actions``: action names; ``initial``: ``{region: box}``; ``default_initial``: a region name
  (default: the first); ``unsafe``: a union of closed polyhedra, each an inequality (``"x >= 1"``, a
  chain ``"-7 <= v <= 7"``) or a list of them (their conjunction).
* ``constants``: ``{name: number}`` usable in every expression; ``action_values``: ``{name: {action:
  number}}`` (or a list in action order), a per-action constant usable in updates; ``let``: ordered
  ``{name: expression}`` intermediates (may use earlier ones).
* ``pieces``: a list of ``{"when": [inequalities], "next": updates}``. ``when`` (omitted: everywhere)
  is a closed region of the state; ``next`` is ``{var: expression}`` for every variable (the same
  formula for all actions), or ``{action: {var: expression}}`` for every action.
* Optional: ``name``, ``observation`` (``{feature: affine expression}``; default: the variables),
  ``horizon`` (steps, default 10), ``template`` (default template directions, rows over the
  variables), ``min_width`` (state units), ``reward`` (a callable ``(states, actions, next_states) ->
  (N,)`` used only by training).

Expressions are Python syntax over the variables, constants, action values, ``let`` names and ``pi``:
numbers, ``+ - * /`` (a product or quotient needs a constant side: updates are affine), parentheses,
and the terms ``sin``, ``cos``, ``tanh``, ``exp`` of an affine argument. ``clip(e, lo, hi)`` and
``wrap(e, lo, hi)`` (into ``[lo, hi)``) with constant bounds may enclose a whole update.

Semantics, from the one declaration:

* ``step(x, a)``: the first piece (declaration order) whose ``when`` holds at ``x`` gives ``x'`` by its
  update for ``a``, terms evaluated exactly (numpy).
* ``pieces(lo, hi)``: each piece with its affine update; each term ``f(g.x + g0)`` is replaced by
  ``s (g.x + g0) + r`` with ``r`` a disturbance in a sound range over the box (``s`` the secant slope over
  the argument's range). ``clip``/``wrap`` are the identity where the update's interval range over the
  box stays inside the bounds; elsewhere the output becomes a disturbance in the clipped range /
  ``[lo, hi]``. So every ``x`` in a box lies in some piece whose enclosure contains ``step(x, a)``
  (the contract of :class:`~rlverify.models.continuous.base.ContinuousSystem`).

Checked when loaded (a :class:`~rlverify.errors.ModelError` naming the source, the field and what was
expected): missing or unknown fields, shapes of boxes and templates, names, that guards, unsafe sets
and observations are affine in the state, that updates are affine up to the declared terms, that every
term can be bounded on the domain, and that the pieces cover the whole state space (checked by linear
programming; a gap narrower than 1e-9 state units is not detected), so that no state is left without
dynamics.
"""

from __future__ import annotations

import ast
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.arrays import distinct
from rlverify.errors import ConstantsError, InputFileError, ModelError, did_you_mean
from rlverify.models.assignments import parse_assignments
from rlverify.models.continuous.base import ActionMap, ContinuousSystem, Piece, UnsafeSet
from rlverify.models.expressions import MAX_DEPTH, syntax_depth
from rlverify.models.userfile import DEFAULT_SYSTEM_TIMEOUT, call_user_code, import_python_file

REQUIRED = ("variables", "domain", "actions", "initial", "unsafe", "pieces")
OPTIONAL = (
    "name",
    "observation",
    "constants",
    "action_values",
    "let",
    "horizon",
    "default_initial",
    "template",
    "min_width",
    "reward",
    "description",
)
EXPECTED = {
    "variables": "a list of state variable names, e.g. ['x', 'v']",
    "domain": "a box {var: [lo, hi]} over every variable",
    "actions": "a list of action names (the policy's output order)",
    "initial": "initial regions {name: {var: [lo, hi]}}",
    "unsafe": "a list of polyhedra, each an inequality like 'x >= 1' or a list of them",
    "pieces": "a list of {'when': [inequalities], 'next': {var: expression}}",
}


# --------------------------------------------------------------------------------------------- terms


def _critical(lo: float, hi: float, roots: Sequence[float], period: float | None) -> list[float]:
    """Points ``root + k period`` (or the roots themselves) inside ``[lo, hi]``."""
    out = []
    for root in roots:
        if period is None:
            if lo <= root <= hi:
                out.append(root)
            continue
        k0 = int(np.floor((lo - root) / period))
        k1 = int(np.floor((hi - root) / period))
        for k in range(k0, k1 + 2):
            t = root + period * k
            if lo <= t <= hi:
                out.append(t)
    return out


@dataclass(frozen=True)
class Term:
    """A scalar function the engine can bound: its values, range and a linear enclosure on intervals.

    Attributes:
        name: how expressions call it.
        f, df: vectorised values and derivative.
        extrema: points of ``[lo, hi]`` (besides the ends) where ``f`` may have a local extremum.
        slope_points: points of ``[lo, hi]`` where ``f' = s`` (the local extrema of ``f(t) - s t``).
        global_range: ``(min, max)`` of ``f`` over the reals, used for arguments wider than
            ``max_width`` (then with slope 0), or None.
    """

    name: str
    f: Callable[[np.ndarray], np.ndarray]
    df: Callable[[np.ndarray], np.ndarray]
    extrema: Callable[[float, float], list[float]]
    slope_points: Callable[[float, float, float], list[float]]
    global_range: tuple[float, float] | None = None
    max_width: float = np.inf

    def bounds(self, lo: float, hi: float) -> tuple[float, float]:
        """Sound range of ``f`` on ``[lo, hi]`` (padded by 1e-12)."""
        if hi - lo > self.max_width and self.global_range is not None:
            return self.global_range[0] - 1e-12, self.global_range[1] + 1e-12
        vals = self.f(np.array([lo, hi, *self.extrema(lo, hi)], dtype=np.float64))
        return float(vals.min()) - 1e-12, float(vals.max()) + 1e-12

    def enclose(self, lo: float, hi: float) -> tuple[float, float, float]:
        """Slope ``s`` and a sound range ``[r_lo, r_hi]`` of ``f(t) - s t`` for ``t`` in ``[lo, hi]``."""
        if hi - lo > self.max_width:
            flo, fhi = self.bounds(lo, hi)
            return 0.0, flo, fhi
        if hi - lo < 1e-12:
            s = float(self.df(np.array([0.5 * (lo + hi)]))[0])
        else:
            ends = self.f(np.array([lo, hi], dtype=np.float64))
            s = float((ends[1] - ends[0]) / (hi - lo))
        cand = np.array([lo, hi, *self.slope_points(lo, hi, s)], dtype=np.float64)
        vals = self.f(cand) - s * cand
        margin = 1e-12 + 1e-12 * float(np.abs(vals).max())
        return s, float(vals.min()) - margin, float(vals.max()) + margin


def _sin_slope(lo: float, hi: float, s: float) -> list[float]:
    if not -1.0 <= s <= 1.0:
        return []
    base = float(np.arccos(s))
    return _critical(lo, hi, (base, -base), 2 * np.pi)


def _cos_slope(lo: float, hi: float, s: float) -> list[float]:
    if not -1.0 <= s <= 1.0:
        return []
    base = float(np.arcsin(-s))  # -sin(t) = s
    return _critical(lo, hi, (base, np.pi - base), 2 * np.pi)


def _tanh_slope(lo: float, hi: float, s: float) -> list[float]:
    if not 0.0 < s <= 1.0:
        return []
    t = float(np.arctanh(min(np.sqrt(1.0 - s), 1.0 - 1e-16)))  # 1 - tanh^2 = s
    return _critical(lo, hi, (t, -t), None)


def _exp_slope(lo: float, hi: float, s: float) -> list[float]:
    return _critical(lo, hi, (float(np.log(s)),), None) if s > 0 else []


#: the terms a declaration may use (each bounded soundly on every finite interval)
TERMS: dict[str, Term] = {
    "sin": Term(
        "sin", np.sin, np.cos, lambda lo, hi: _critical(lo, hi, (np.pi / 2,), np.pi), _sin_slope, (-1.0, 1.0), 20 * np.pi
    ),
    "cos": Term(
        "cos",
        np.cos,
        lambda t: -np.sin(t),
        lambda lo, hi: _critical(lo, hi, (0.0,), np.pi),
        _cos_slope,
        (-1.0, 1.0),
        20 * np.pi,
    ),
    "tanh": Term("tanh", np.tanh, lambda t: 1.0 - np.tanh(t) ** 2, lambda lo, hi: [], _tanh_slope),
    "exp": Term("exp", np.exp, np.exp, lambda lo, hi: [], _exp_slope),
}
#: calls allowed only around a whole update
SATURATIONS = ("clip", "wrap")


# ---------------------------------------------------------------------------------------- expressions


class _ActionDependent(Exception):
    """A name that depends on the action was used where only the state may appear."""


class _Lin:
    """``coef . x + const + sum_k terms[k] * f_k(g_k . x + g0_k)`` (``k = (name, g, g0)``)."""

    __slots__ = ("coef", "const", "terms")

    def __init__(self, coef: np.ndarray, const: float, terms: dict[Any, Any] | None = None) -> None:
        self.coef = coef
        self.const = const
        self.terms = terms or {}

    @property
    def is_const(self) -> bool:
        return not self.coef.any() and not self.terms

    def __add__(self, other: _Lin) -> _Lin:
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0.0) + v
        return _Lin(self.coef + other.coef, self.const + other.const, terms)

    def __sub__(self, other: _Lin) -> _Lin:
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0.0) - v
        return _Lin(self.coef - other.coef, self.const - other.const, terms)

    def scale(self, k: float) -> _Lin:
        return _Lin(self.coef * k, self.const * k, {t: v * k for t, v in self.terms.items()})

    def divide(self, k: float) -> _Lin:
        return _Lin(self.coef / k, self.const / k, {t: v / k for t, v in self.terms.items()})


class _Compiler:
    """Turns expression strings into :class:`_Lin` forms over ``variables`` (errors name ``source``)."""

    def __init__(self, source: str, variables: Sequence[str]) -> None:
        self.source = source
        self.n = len(variables)
        self.env: dict[str, Any] = {"pi": self.const(math.pi)}
        for i, v in enumerate(variables):
            e = np.zeros(self.n)
            e[i] = 1.0
            self.env[v] = _Lin(e, 0.0)

    def const(self, value: float) -> _Lin:
        return _Lin(np.zeros(self.n), float(value))

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

    def expr(self, text: Any, where: str, env: Mapping[str, Any], *, terms: bool = True) -> _Lin:
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

    def update(self, text: Any, where: str, env: Mapping[str, Any]) -> tuple[_Lin, str | None, float, float]:
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

    def inequalities(self, text: Any, where: str, env: Mapping[str, Any]) -> list[tuple[np.ndarray, float]]:
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

    def _node(self, node: ast.AST, text: str, where: str, env: Mapping[str, Any]) -> _Lin:
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

    def _value(self, node: ast.AST, text: str, where: str, env: Mapping[str, Any]) -> _Lin:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return self.const(node.value)
        if isinstance(node, ast.Name):
            return self._name(node, text, where, env)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self._node(node.operand, text, where, env)
            return inner.scale(-1.0) if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            return self._binary(node, text, where, env)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._term(node, node.func.id, text, where, env)
        raise self._unsupported(node, text, where)

    def _unsupported(self, node: ast.AST, text: str, where: str) -> ModelError:
        return self.fail(
            where,
            f"'{text}': unsupported syntax ({type(node).__name__}); use numbers, names, + - * /, "
            f"parentheses and {', '.join(TERMS)}",
        )

    def _name(self, node: ast.Name, text: str, where: str, env: Mapping[str, Any]) -> _Lin:
        """A variable, constant, action value or ``let`` name."""
        if node.id in env:
            value = env[node.id]
            if isinstance(value, _ActionDependent):
                raise self.fail(
                    where, f"'{text}' uses '{node.id}', which depends on the action; only updates ('next' expressions) may"
                )
            return value
        if node.id in TERMS or node.id in SATURATIONS:
            raise self.fail(where, f"'{text}': {node.id} is a function; call it as {node.id}(...)")
        raise self.fail(where, f"unknown name '{node.id}' in '{text}'{did_you_mean(node.id, env)}; known: {', '.join(env)}")

    def _binary(self, node: ast.BinOp, text: str, where: str, env: Mapping[str, Any]) -> _Lin:
        """``a + b``, ``a - b``; ``a * b`` and ``a / b`` with a constant factor or divisor; ``a ** b`` of constants."""
        a = self._node(node.left, text, where, env)
        b = self._node(node.right, text, where, env)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
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
        if isinstance(node.op, ast.Div):
            if not b.is_const:
                raise self.fail(where, f"'{text}' is not affine: it divides by a state-dependent expression")
            if b.const == 0:
                raise self.fail(where, f"'{text}' divides by zero")
            return a.divide(b.const)
        if not isinstance(node.op, ast.Pow):
            raise self._unsupported(node, text, where)
        if not (a.is_const and b.is_const):
            raise self.fail(where, f"'{text}' is not affine: a power of a state-dependent expression")
        if a.const == 0 and b.const < 0:
            raise self.fail(where, f"'{text}' divides by zero (0 to a negative power)")
        value = a.const**b.const
        if not isinstance(value, float):  # complex: a fractional power of a negative number
            raise TypeError(value)
        return self.const(value)

    def _term(self, node: ast.Call, name: str, text: str, where: str, env: Mapping[str, Any]) -> _Lin:
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
        return _Lin(np.zeros(self.n), 0.0, {key: 1.0})


# -------------------------------------------------------------------------------------- compiled maps


@dataclass(frozen=True)
class _Map:
    """One action's update in one piece: ``y = a0 x + c0 + k f(g x + g0)``, then saturations."""

    a0: np.ndarray  # (n, n)
    c0: np.ndarray  # (n,)
    terms: tuple[tuple[str, np.ndarray, float], ...]  # (name, g (n,), g0)
    k: np.ndarray  # (n, T)
    saturations: tuple[tuple[int, str, float, float], ...]  # (output, clip|wrap, lo, hi)

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        y = x @ self.a0.T + self.c0
        if self.terms:
            f = np.stack([TERMS[name].f(x @ g + g0) for name, g, g0 in self.terms], axis=1)
            y = y + f @ self.k.T
        for i, op, lo, hi in self.saturations:
            y[:, i] = np.clip(y[:, i], lo, hi) if op == "clip" else ((y[:, i] - lo) % (hi - lo)) + lo
        return y

    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> ActionMap:
        """A sound :class:`ActionMap` of this update on the box ``[lo, hi]``."""
        n = len(self.c0)
        if not self.terms and not self.saturations:
            return ActionMap.affine(self.a0.copy(), self.c0.copy())
        a, c = self.a0.copy(), self.c0.copy()
        cols, w_lo, w_hi = [], [], []
        ranges = []
        for t, (name, g, g0) in enumerate(self.terms):
            al, ah = _affine_range(g, g0, lo, hi)
            term = TERMS[name]
            with np.errstate(over="ignore", invalid="ignore"):  # non-finite results are refused below
                s, r_lo, r_hi = term.enclose(al, ah)
                ranges.append(term.bounds(al, ah))
            with np.errstate(invalid="ignore"):
                a += np.outer(self.k[:, t], s * g)
            if g0:
                c += self.k[:, t] * (s * g0)
            cols.append(self.k[:, t].copy())
            w_lo.append(r_lo)
            w_hi.append(r_hi)
        for kind in SATURATIONS:  # clip columns first, then wrap columns
            for i, op, slo, shi in self.saturations:
                if op != kind:
                    continue
                ylo, yhi = _affine_range(self.a0[i], 0.0, lo, hi)
                for t in range(len(self.terms)):
                    kt = self.k[i, t]
                    if kt:
                        ylo += kt * (ranges[t][0] if kt > 0 else ranges[t][1])
                        yhi += kt * (ranges[t][1] if kt > 0 else ranges[t][0])
                ylo, yhi = ylo + self.c0[i], yhi + self.c0[i]
                if op == "wrap":
                    ylo, yhi = ylo - 1e-9, yhi + 1e-9
                    acts = ylo < slo or yhi >= shi
                    rng = (slo, shi)
                else:
                    acts = ylo < slo or yhi > shi
                    rng = (float(np.clip(ylo, slo, shi)), float(np.clip(yhi, slo, shi)))
                if not acts:
                    continue
                a[i] = 0.0
                c[i] = 0.0
                for col in cols:
                    col[i] = 0.0
                e = np.zeros(n)
                e[i] = 1.0
                cols.append(e)
                w_lo.append(rng[0])
                w_hi.append(rng[1])
        used = [j for j, col in enumerate(cols) if col.any()]  # a saturation may zero a term's column entirely
        b = np.stack([cols[j] for j in used], axis=1) if used else np.zeros((n, 0))
        out = ActionMap(
            a, c, b, np.array([w_lo[j] for j in used], dtype=np.float64), np.array([w_hi[j] for j in used], dtype=np.float64)
        )
        if not (
            np.isfinite(out.a).all()
            and np.isfinite(out.c).all()
            and np.isfinite(out.w_lo).all()
            and np.isfinite(out.w_hi).all()
        ):
            raise ModelError(f"a term cannot be bounded on the box [{lo.tolist()}, {hi.tolist()}] (non-finite enclosure)")
        return out


def _affine_range(g: np.ndarray, g0: float, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    """Range of ``g . x + g0`` over the box ``[lo, hi]`` (the constant added last)."""
    rlo = rhi = 0.0
    for j, gj in enumerate(g):
        if gj > 0:
            rlo += gj * float(lo[j])
            rhi += gj * float(hi[j])
        elif gj < 0:
            rlo += gj * float(hi[j])
            rhi += gj * float(lo[j])
    return rlo + g0, rhi + g0


@dataclass(frozen=True)
class _Piece:
    g_mat: np.ndarray
    g_vec: np.ndarray
    maps: tuple[_Map, ...]


# ------------------------------------------------------------------------------------------ the system


class DeclaredSystem(ContinuousSystem):
    """A :class:`ContinuousSystem` built from a declaration (see the module docstring).

    Args:
        declaration: the mapping.
        source: where it came from, for messages (``"file.py:SYSTEM"``).
        overrides: values replacing entries of the declaration's ``constants``.

    Raises:
        ModelError: the declaration is malformed (the message names the source and the field);
            ConstantsError for an override of an undeclared constant.
    """

    #: the declaration's constants (overrides applied)
    constants: dict[str, float]
    _pieces: tuple[_Piece, ...]  # compiled, in declaration order
    _regions: tuple[Piece, ...]  # each piece's region (no maps), for step()
    _static: tuple[Piece, ...] | None  # the enclosure when it does not depend on the box (no terms, no saturations)
    _reward: Callable[..., Any] | None  # the declaration's reward (training only)

    def __init__(
        self, declaration: Mapping[str, Any], *, source: str = "declaration", overrides: Mapping[str, float] | None = None
    ) -> None:
        self.source = source
        self.declaration = declaration
        _Builder(self, declaration, source, dict(overrides or {})).build()

    def step(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Successors ``(N, n)`` of ``states`` ``(N, n)`` under integer ``actions`` ``(N,)``: the first piece
        (declaration order) containing a state gives its update."""
        x = np.asarray(states, dtype=np.float64)
        act = np.broadcast_to(np.asarray(actions), (len(x),))
        if len(act) and (act.min() < 0 or act.max() >= len(self.actions)):
            raise ModelError(f"{self.name}: action index out of range 0..{len(self.actions) - 1}")
        out = np.empty_like(x)
        todo = np.ones(len(x), dtype=bool)
        for piece, region in zip(self._pieces, self._regions, strict=True):
            inside = todo & region.contains(x)
            if not inside.any():
                continue
            for a in distinct(act[inside]):
                sel = inside & (act == a)
                out[sel] = piece.maps[int(a)].evaluate(x[sel])
            todo &= ~inside
        if todo.any():
            raise ModelError(f"{self.name}: state {x[todo][0].tolist()} lies in no piece (not a finite state?)")
        return out

    def pieces(self, lo: np.ndarray, hi: np.ndarray) -> list[Piece]:
        """Sound piecewise-affine enclosure of :meth:`step` on the box ``[lo, hi]`` (see the module docstring)."""
        if self._static is not None:
            return list(self._static)
        lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        return [Piece(p.g_mat, p.g_vec, tuple(m.enclosure(lo, hi) for m in p.maps)) for p in self._pieces]

    def reward(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        """The declaration's ``reward`` (training only)."""
        if self._reward is None:
            raise ModelError(f"{self.name}: the declaration has no 'reward' (needed for training only)")
        return np.asarray(self._reward(states, actions, next_states), dtype=np.float64)


class _Builder:
    """Checks a declaration and fills a :class:`DeclaredSystem` (one pass, errors name the field)."""

    def __init__(self, system: DeclaredSystem, decl: Any, source: str, overrides: dict[str, float]) -> None:
        self.sys, self.decl, self.source, self.overrides = system, decl, source, overrides

    def fail(self, field: str, message: str) -> ModelError:
        return ModelError(f"{self.source}: field '{field}': {message}")

    def build(self) -> None:
        d = self.decl
        if not isinstance(d, Mapping):
            raise ModelError(
                f"{self.source}: a system declaration is a mapping of fields ({', '.join(REQUIRED)}, ...), "
                f"got {type(d).__name__}"
            )
        missing = [f for f in REQUIRED if f not in d]
        unknown = [f for f in d if f not in REQUIRED + OPTIONAL]
        if missing or unknown:
            parts = [f"missing field '{f}' (expected {EXPECTED[f]})" for f in missing]
            parts += [f"unknown field '{f}'{did_you_mean(str(f), REQUIRED + OPTIONAL)}" for f in unknown]
            raise ModelError(f"{self.source}: " + "; ".join(parts))
        s = self.sys
        s.name = str(d.get("name", self.source))
        s.variables = self.names("variables")
        s.actions = self.names("actions")
        n = len(s.variables)
        self.comp = comp = _Compiler(self.source, s.variables)
        self.constants()
        s.domain_lo, s.domain_hi = self.box("domain", d["domain"])
        if not (np.isfinite(s.domain_lo).all() and np.isfinite(s.domain_hi).all()):
            raise self.fail("domain", "bounds must be finite numbers")
        self.initial()
        self.unsafe()
        self.observation()
        horizon = d.get("horizon", 10)
        if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
            raise self.fail("horizon", f"expected a positive integer number of steps, got {horizon!r}")
        s.horizon = int(horizon)
        if "min_width" in d:
            mw = d["min_width"]
            if isinstance(mw, bool) or not isinstance(mw, (int, float)) or not 0 < mw < math.inf:
                raise self.fail("min_width", f"expected a positive number (state units), got {mw!r}")
            s.min_width = float(mw)
        s.template_directions = None
        if d.get("template") is not None:
            try:
                t = np.asarray(d["template"], dtype=np.float64)
            except (TypeError, ValueError):
                t = None
            if t is None or t.ndim != 2 or t.shape[1] != n or not np.isfinite(t).all():
                raise self.fail(
                    "template",
                    f"expected rows of {n} numbers (one direction over {list(s.variables)} per row), got {d['template']!r}",
                )
            s.template_directions = t
        reward = d.get("reward")
        if reward is not None and not callable(reward):
            raise self.fail("reward", "expected a callable (states, actions, next_states) -> (N,) array")
        s._reward = reward
        self.action_values()
        self.lets()
        self.pieces()
        comp.env = {}  # release
        self.coverage()

    # -- small fields -------------------------------------------------------------------------------

    def names(self, field: str) -> tuple[str, ...]:
        value = self.decl[field]
        if (
            isinstance(value, str)
            or not isinstance(value, Sequence)
            or not value
            or not all(isinstance(v, str) and v.isidentifier() for v in value)
        ):
            raise self.fail(field, f"expected {EXPECTED[field]} (non-empty, identifiers), got {value!r}")
        if len(set(value)) != len(value):
            raise self.fail(field, f"names must be unique, got {list(value)}")
        if field == "variables":
            clash = [v for v in value if v in TERMS or v in SATURATIONS or v == "pi"]
            if clash:
                raise self.fail(field, f"'{clash[0]}' is a reserved name")
        return tuple(value)

    def number(self, field: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise self.fail(field, f"expected a number, got {value!r}")
        try:
            out = float(value)
        except OverflowError:
            out = math.inf
        if not math.isfinite(out):
            shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:20]}... ({len(repr(value))} digits)"
            raise self.fail(field, f"expected a finite number, got {shown}")
        return out

    def constant(self, field: str, value: Any) -> float:
        """A number, or an expression string over the constants."""
        if isinstance(value, str):
            lin = self.comp.expr(value, f"field '{field}'", self.comp.env, terms=False)
            if not lin.is_const:
                raise self.fail(field, f"'{value}' depends on the state; expected a constant")
            return lin.const
        return self.number(field, value)

    def reserve(self, field: str, name: Any) -> str:
        if not isinstance(name, str) or not name.isidentifier():
            raise self.fail(field, f"names must be identifiers, got {name!r}")
        if name in self.comp.env or name in TERMS or name in SATURATIONS:
            raise self.fail(field, f"'{name}' is already a variable, constant or function name")
        return name

    def constants(self) -> None:
        consts = self.decl.get("constants", {}) or {}
        if not isinstance(consts, Mapping):
            raise self.fail("constants", f"expected {{name: number}}, got {consts!r}")
        unknown = [k for k in self.overrides if k not in consts]
        if unknown:
            known = ", ".join(consts) or "none"
            raise ConstantsError(
                f"{self.source}: no constant '{unknown[0]}'{did_you_mean(unknown[0], consts)} to "
                f"set (declared constants: {known})",
                missing=unknown,
            )
        values = {}
        for name, value in consts.items():
            self.reserve("constants", name)
            v = self.number(f"constants.{name}", self.overrides.get(name, value))
            values[name] = v
            self.comp.env[name] = self.comp.const(v)
        self.sys.constants = values

    def box(self, field: str, value: Any) -> tuple[np.ndarray, np.ndarray]:
        s = self.sys
        n = len(s.variables)
        want = f"a box {{var: [lo, hi]}} over {list(s.variables)} (or [[lo, ...], [hi, ...]])"
        if isinstance(value, Mapping):
            missing = [v for v in s.variables if v not in value]
            extra = [k for k in value if k not in s.variables]
            if missing or extra:
                what = f"no bounds for {missing}" if missing else f"unknown variables {extra}"
                raise self.fail(field, f"{what}; expected {want}")
            rows = [value[v] for v in s.variables]
            try:
                arr = np.asarray(rows, dtype=np.float64)
            except (TypeError, ValueError):
                arr = None
            if arr is None or arr.shape != (n, 2):
                raise self.fail(field, f"expected [lo, hi] for each variable ({want}), got {value!r}")
            lo, hi = arr[:, 0], arr[:, 1]
        else:
            try:
                arr = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                arr = None
            if arr is None or arr.shape != (2, n):
                shape = None if arr is None else arr.shape
                raise self.fail(field, f"expected {want}, got shape {shape}")
            lo, hi = arr[0], arr[1]
        if np.isnan(lo).any() or np.isnan(hi).any() or (lo > hi).any():
            i = int(np.argmax(~(lo <= hi)))
            raise self.fail(field, f"lower bound {lo[i]} of {s.variables[i]} is not <= the upper bound {hi[i]}")
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            i = int(np.argmax(~(np.isfinite(lo) & np.isfinite(hi))))
            raise self.fail(field, f"the bounds of {s.variables[i]} must be finite numbers, got [{lo[i]}, {hi[i]}]")
        return lo.copy(), hi.copy()

    def initial(self) -> None:
        s, d = self.sys, self.decl
        regions = d["initial"]
        if not isinstance(regions, Mapping) or not regions:
            raise self.fail("initial", f"expected {EXPECTED['initial']}, got {regions!r}")
        s.initial_regions = {}
        for name, box in regions.items():
            lo, hi = self.box(f"initial.{name}", box)
            if (lo < s.domain_lo).any() or (hi > s.domain_hi).any():
                raise self.fail(
                    f"initial.{name}",
                    f"the region [{lo.tolist()}, {hi.tolist()}] is not inside the domain "
                    f"[{s.domain_lo.tolist()}, {s.domain_hi.tolist()}]",
                )
            s.initial_regions[str(name)] = (lo, hi)
        default = d.get("default_initial", next(iter(s.initial_regions)))
        if default not in s.initial_regions:
            raise self.fail("default_initial", f"unknown region {default!r}{did_you_mean(str(default), s.initial_regions)}")
        s.default_initial = default

    def unsafe(self) -> None:
        items = self.decl["unsafe"]
        if isinstance(items, str) or not isinstance(items, Sequence) or not items:
            raise self.fail("unsafe", f"expected {EXPECTED['unsafe']}, got {items!r}")
        polys = []
        for i, item in enumerate(items):
            texts = [item] if isinstance(item, str) else item
            if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
                raise self.fail(f"unsafe[{i}]", f"expected an inequality or a list of them, got {item!r}")
            rows = [
                r for j, t in enumerate(texts) for r in self.comp.inequalities(t, f"field 'unsafe[{i}][{j}]'", self.comp.env)
            ]
            polys.append((np.array([r[0] for r in rows]), np.array([r[1] for r in rows])))
        self.sys.unsafe = UnsafeSet(tuple(polys))

    def observation(self) -> None:
        s = self.sys
        obs = self.decl.get("observation")
        if obs is None:
            obs = {v: v for v in s.variables}
        if not isinstance(obs, Mapping) or not obs:
            raise self.fail("observation", f"expected {{feature: affine expression}}, got {obs!r}")
        rows = [self.comp.expr(text, f"field 'observation.{f}'", self.comp.env, terms=False) for f, text in obs.items()]
        s.features = tuple(str(f) for f in obs)
        s.obs_matrix = np.array([r.coef for r in rows])
        s.obs_offset = np.array([r.const for r in rows])

    def action_values(self) -> None:
        s = self.sys
        values = self.decl.get("action_values", {}) or {}
        if not isinstance(values, Mapping):
            raise self.fail("action_values", f"expected {{name: {{action: number}}}}, got {values!r}")
        self.per_action: dict[str, list[float]] = {}
        for name, by_action in values.items():
            self.reserve("action_values", name)
            where = f"action_values.{name}"
            if isinstance(by_action, Mapping):
                missing = [a for a in s.actions if a not in by_action]
                extra = [a for a in by_action if a not in s.actions]
                if missing or extra:
                    raise self.fail(
                        where,
                        f"expected a number for each action {list(s.actions)}; "
                        + (f"missing {missing}" if missing else f"unknown actions {extra}"),
                    )
                vals = [self.constant(f"{where}.{a}", by_action[a]) for a in s.actions]
            elif isinstance(by_action, Sequence) and not isinstance(by_action, str) and len(by_action) == len(s.actions):
                vals = [self.constant(where, v) for v in by_action]
            else:
                raise self.fail(
                    where,
                    f"expected {{action: number}} for {list(s.actions)} or a list of "
                    f"{len(s.actions)} numbers, got {by_action!r}",
                )
            self.per_action[name] = vals

    def lets(self) -> None:
        lets = self.decl.get("let", {}) or {}
        if not isinstance(lets, Mapping):
            raise self.fail("let", f"expected {{name: expression}} (in order), got {lets!r}")
        for name in lets:
            self.reserve("let", name)
        self.let_items = list(lets.items())
        # the state-only environment: action values (and lets using them) may not appear
        self.state_env = dict(self.comp.env)
        for name in self.per_action:
            self.state_env[name] = _ActionDependent(name)
        for name, text in self.let_items:
            try:
                self.state_env[name] = self.comp.expr(
                    text,
                    f"field 'let.{name}'",
                    {k: v for k, v in self.state_env.items() if not isinstance(v, _ActionDependent)},
                )
            except ModelError:
                self.state_env[name] = _ActionDependent(name)
        # one environment per action
        self.action_envs = []
        for ai in range(len(self.sys.actions)):
            env = dict(self.comp.env)
            for name, vals in self.per_action.items():
                env[name] = self.comp.const(vals[ai])
            for name, text in self.let_items:
                env[name] = self.comp.expr(text, f"field 'let.{name}'", env)
            self.action_envs.append(env)

    # -- pieces ---------------------------------------------------------------------------------------

    def pieces(self) -> None:
        s, comp = self.sys, self.comp
        items = self.decl["pieces"]
        if isinstance(items, (str, Mapping)) or not isinstance(items, Sequence) or not items:
            raise self.fail("pieces", f"expected {EXPECTED['pieces']}, got {items!r}")
        compiled, regions = [], []
        for i, item in enumerate(items):
            where = f"pieces[{i}]"
            if not isinstance(item, Mapping) or "next" not in item:
                raise self.fail(where, f"expected {{'when': [inequalities], 'next': {{var: expression}}}}, got {item!r}")
            extra = [k for k in item if k not in ("when", "next")]
            if extra:
                raise self.fail(where, f"unknown key '{extra[0]}'{did_you_mean(str(extra[0]), ('when', 'next'))}")
            when = item.get("when") or []
            when = [when] if isinstance(when, str) else when
            if not isinstance(when, Sequence):
                raise self.fail(f"{where}.when", f"expected a list of inequalities, got {when!r}")
            rows = [r for j, t in enumerate(when) for r in comp.inequalities(t, f"field '{where}.when[{j}]'", self.state_env)]
            g_mat = np.array([r[0] for r in rows]) if rows else np.zeros((0, len(s.variables)))
            g_vec = np.array([r[1] for r in rows]) if rows else np.zeros(0)
            maps = tuple(self.update_map(item["next"], f"{where}.next", ai) for ai in range(len(s.actions)))
            compiled.append(_Piece(g_mat, g_vec, maps))
            regions.append(Piece(g_mat, g_vec, ()))
        s._pieces, s._regions = tuple(compiled), tuple(regions)
        static = all(not m.terms and not m.saturations for p in compiled for m in p.maps)
        s.pieces_depend_on_box = not static
        s._static = None
        if static:
            s._static = tuple(
                Piece(p.g_mat, p.g_vec, tuple(m.enclosure(s.domain_lo, s.domain_hi) for m in p.maps)) for p in compiled
            )
        else:  # every term must be boundable on the domain
            for i, p in enumerate(compiled):
                for ai, m in enumerate(p.maps):
                    try:
                        m.enclosure(s.domain_lo, s.domain_hi)
                    except (ModelError, FloatingPointError, OverflowError) as exc:
                        raise self.fail(
                            f"pieces[{i}].next",
                            f"action {s.actions[ai]}: {exc}; the terms must have finite bounds on the domain",
                        ) from None

    def update_map(self, nxt: Any, where: str, ai: int) -> _Map:
        s, comp = self.sys, self.comp
        if not isinstance(nxt, Mapping) or not nxt:
            raise self.fail(where, f"expected {{var: expression}} or {{action: {{var: expression}}}}, got {nxt!r}")
        keys = set(nxt)
        if keys <= set(s.actions) and all(isinstance(v, Mapping) for v in nxt.values()):
            missing = [a for a in s.actions if a not in nxt]
            if missing:
                raise self.fail(
                    where,
                    f"no update for action(s) {missing}; give one per action {list(s.actions)} "
                    "or one {var: expression} for all",
                )
            action = s.actions[ai]
            nxt, where = nxt[action], f"{where}.{action}"
        missing = [v for v in s.variables if v not in nxt]
        extra = [k for k in nxt if k not in s.variables]
        if missing or extra:
            what = f"no update for {missing}" if missing else f"unknown variable(s) {extra}"
            raise self.fail(
                where, f"{what}; expected an expression for each of {list(s.variables)} (or per action {list(s.actions)})"
            )
        n = len(s.variables)
        env = self.action_envs[ai]
        outs = [comp.update(nxt[v], f"field '{where}.{v}'", env) for v in s.variables]
        keys_order: list[tuple[Any, ...]] = []
        for lin, _, _, _ in outs:
            for key in lin.terms:
                if key not in keys_order:
                    keys_order.append(key)
        k = np.zeros((n, len(keys_order)))
        for i, (lin, _, _, _) in enumerate(outs):
            for key, coef in lin.terms.items():
                k[i, keys_order.index(key)] = coef
        return _Map(
            a0=np.array([lin.coef for lin, _, _, _ in outs]),
            c0=np.array([lin.const for lin, _, _, _ in outs]),
            terms=tuple((key[0], np.array(key[1]), key[2]) for key in keys_order),
            k=k,
            saturations=tuple((i, op, lo, hi) for i, (_, op, lo, hi) in enumerate(outs) if op is not None),
        )

    def coverage(self) -> None:
        """Refuse pieces that leave a region of the state space (of positive width) without dynamics."""
        s = self.sys
        point = uncovered_point([(p.g_mat, p.g_vec) for p in s._pieces], len(s.variables))
        if point is not None:
            shown = ", ".join(f"{v}={x:.6g}" for v, x in zip(s.variables, point, strict=True))
            raise self.fail(
                "pieces",
                f"the pieces' 'when' regions do not cover the state space: e.g. ({shown}) lies "
                "in no piece; add a piece for it (the dynamics must be defined everywhere, also "
                "outside the domain, since successors may leave it)",
            )


def uncovered_point(guards: Sequence[tuple[np.ndarray, np.ndarray]], n: int, tol: float = 1e-9) -> np.ndarray | None:
    """A point of R^n in none of the closed polyhedra ``{x : G x <= g}``, or None if they cover R^n.

    Exact up to ``tol``: a gap narrower than ``2 tol`` (Euclidean, state units) is not reported.
    """
    regions = [(np.zeros((0, n)), np.zeros(0))]
    for g_mat, g_vec in guards:
        if len(g_vec) == 0:
            return None
        new = []
        for ra, rb in regions:
            for j in range(len(g_vec)):  # inside the first j guards, outside guard j
                na = np.vstack([ra, g_mat[:j], -g_mat[j : j + 1]])
                nb = np.concatenate([rb, g_vec[:j], -g_vec[j : j + 1]])
                if _interior(na, nb)[0] > tol:
                    new.append((na, nb))
        regions = new
        if not regions:
            return None
    return _interior(*regions[0])[1]


def _interior(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray | None]:
    """Radius (capped at 1) and centre of the largest ball inside ``{x : a x <= b}`` (-inf if empty)."""
    from scipy.optimize import linprog

    n = a.shape[1]
    if len(b) == 0:
        return 1.0, np.zeros(n)
    norms = np.linalg.norm(a, axis=1)
    res = linprog(
        np.r_[np.zeros(n), -1.0],
        A_ub=np.hstack([a, norms[:, None]]),
        b_ub=b,
        bounds=[(None, None)] * n + [(None, 1.0)],
        method="highs",
    )
    if res.status != 0:
        return -np.inf, None
    return float(-res.fun), res.x[:n]


# ------------------------------------------------------------------------------------------- loading


def declare(declaration: Mapping[str, Any], **constants: float) -> DeclaredSystem:
    """Build a :class:`DeclaredSystem` from a declaration mapping; ``constants`` override its ``constants``."""
    return DeclaredSystem(declaration, overrides=constants)


def parse_constants(text: str | None) -> dict[str, float]:
    """``"a=1,b=2.5"`` -> ``{"a": 1.0, "b": 2.5}``.

    Raises:
        ConstantsError: an entry that is not ``NAME=NUMBER`` (or has an empty name), a name given
            twice, or a number that is not finite.
    """

    def malformed(entry: str) -> str:
        return f"malformed constant '{entry}'; expected NAME=NUMBER[,NAME=NUMBER...]"

    out: dict[str, float] = {}
    for name, value in parse_assignments(text, malformed=malformed).items():
        try:
            out[name] = float(value)
        except ValueError:
            raise ConstantsError(malformed(f"{name}={value}")) from None
        if not math.isfinite(out[name]):
            raise ConstantsError(f"constant '{name}={value}': expected a finite number", missing=[name])
    return out


def is_declaration_target(target: str) -> bool:
    """Whether ``target`` has the form ``path.py:NAME``."""
    file, sep, name = str(target).rpartition(":")
    return bool(sep) and file.lower().endswith(".py") and name.isidentifier()


def load_system(
    target: str, constants: str | None = None, *, timeout: float | None = DEFAULT_SYSTEM_TIMEOUT
) -> DeclaredSystem:
    """The system ``NAME`` declared in the Python file of ``target`` = ``"path.py:NAME"``.

    ``NAME`` is a declaration mapping, a :class:`DeclaredSystem`, or a callable returning one of them
    (called with ``constants`` as keyword arguments). ``constants`` (``"K=V,..."``) otherwise override
    the mapping's ``constants``. Importing the file, and calling ``NAME()``, may each take ``timeout`` seconds
    (``--system-timeout``; None or 0: no limit; see :class:`~rlverify.models.userfile.Alarm`).

    Raises:
        InputFileError: the file is missing or fails to import, or ``NAME()`` raises or calls ``sys.exit``, or either
            takes longer than ``timeout``; ModelError: no such name or a malformed declaration; ConstantsError: a
            constant that cannot be set. OptionError: a ``timeout`` that is not seconds.
    """
    from rlverify.policies.settings import check_timeout

    timeout = check_timeout(timeout, "timeout")
    file_text, _, name = str(target).rpartition(":")
    file = Path(file_text)
    if not file_text.lower().endswith(".py") or not name.isidentifier():
        raise InputFileError(f"{target}: expected path.py:NAME (a Python file and the name of a system declaration in it)")
    module = import_python_file(file, "system declaration file", timeout=timeout)
    source = f"{file}:{name}"
    if not hasattr(module, name):
        public = [k for k in vars(module) if not k.startswith("_")]
        raise ModelError(
            f"{file}: defines no '{name}'{did_you_mean(name, public)} (expected a system declaration: a "
            "mapping, a DeclaredSystem, or a function returning one)"
        )
    obj = getattr(module, name)
    overrides = parse_constants(constants)
    if callable(obj) and not isinstance(obj, (Mapping, DeclaredSystem)):
        try:
            signature: inspect.Signature | None = inspect.signature(obj)
        except Exception:  # no signature to read (a builtin, an odd callable): the call says
            signature = None
        try:  # arguments it cannot take are refused before its code runs
            if signature is not None:
                signature.bind(**overrides)
        except TypeError as exc:
            if overrides:
                raise ConstantsError(
                    f"{source}: cannot pass {', '.join(overrides)} to {name}(): {exc}", missing=list(overrides)
                ) from None
            raise ModelError(f"{source}: calling {name}() failed: {exc}") from None
        obj = call_user_code(obj, str(file), f"calling {name}()", timeout, "--system-timeout", **overrides)
        overrides = {}
    if isinstance(obj, DeclaredSystem):
        if overrides:
            raise ConstantsError(
                f"{source}: the system is already built; declare it as a mapping with 'constants' "
                "(or a function taking them) to set constants"
            )
        return obj
    if isinstance(obj, Mapping):
        return DeclaredSystem(obj, source=source, overrides=overrides)
    raise ModelError(
        f"{source}: expected a system declaration (a mapping of fields, a DeclaredSystem, or a function "
        f"returning one), got {type(obj).__name__}"
    )
