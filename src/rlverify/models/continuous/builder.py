"""Reading and checking a system declaration: one pass over its fields, each refused with a message naming the
source, the field and what was expected, filling a :class:`~rlverify.models.continuous.declared.DeclaredSystem`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rlverify.errors import ConstantsError, ModelError, did_you_mean
from rlverify.models.continuous.base import Piece, UnsafeSet
from rlverify.models.continuous.compiler import ActionDependent, Binding, Compiler, Lin, TermKey
from rlverify.models.continuous.maps import CompiledPiece, UpdateMap, uncovered_point
from rlverify.models.continuous.terms import SATURATIONS, TERMS

if TYPE_CHECKING:
    from rlverify.models.continuous.declared import DeclaredSystem

__all__ = ["EXPECTED", "OPTIONAL", "REQUIRED", "Builder"]

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


class Builder:
    """Checks a declaration and fills a :class:`DeclaredSystem` (one pass, errors name the field)."""

    def __init__(self, system: DeclaredSystem, decl: Any, source: str, overrides: dict[str, float]) -> None:
        self.sys, self.decl, self.source, self.overrides = system, decl, source, overrides

    def fail(self, field: str, message: str) -> ModelError:
        return ModelError(f"{self.source}: field '{field}': {message}")

    def build(self) -> None:
        """Read every field, in an order where each needs only those before it."""
        self.fields()
        d, s = self.decl, self.sys
        s.name = str(d.get("name", self.source))
        s.variables = self.names("variables")
        s.actions = self.names("actions")
        self.comp = Compiler(self.source, s.variables)
        self.constants()
        s.domain_lo, s.domain_hi = self.box("domain", d["domain"])
        if not (np.isfinite(s.domain_lo).all() and np.isfinite(s.domain_hi).all()):
            raise self.fail("domain", "bounds must be finite numbers")
        self.initial()
        self.unsafe()
        self.observation()
        self.horizon()
        self.min_width()
        self.template()
        self.reward()
        self.action_values()
        self.lets()
        self.pieces()
        self.comp.env = {}  # release
        self.coverage()

    def fields(self) -> None:
        """Refuse a declaration that is no mapping, or misses or misnames a field (every one named)."""
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

    def horizon(self) -> None:
        horizon = self.decl.get("horizon", 10)
        if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
            raise self.fail("horizon", f"expected a positive integer number of steps, got {horizon!r}")
        self.sys.horizon = int(horizon)

    def min_width(self) -> None:
        if "min_width" not in self.decl:
            return
        mw = self.decl["min_width"]
        if isinstance(mw, bool) or not isinstance(mw, (int, float)) or not 0 < mw < math.inf:
            raise self.fail("min_width", f"expected a positive number (state units), got {mw!r}")
        self.sys.min_width = float(mw)

    def template(self) -> None:
        s, d = self.sys, self.decl
        n = len(s.variables)
        s.template_directions = None
        if d.get("template") is None:
            return
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

    def reward(self) -> None:
        reward = self.decl.get("reward")
        if reward is not None and not callable(reward):
            raise self.fail("reward", "expected a callable (states, actions, next_states) -> (N,) array")
        self.sys._reward = reward

    # -- small fields -------------------------------------------------------------------------------

    def names(self, field: str) -> tuple[str, ...]:
        value = self.decl[field]
        if not _identifiers(value):
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
        """``{var: [lo, hi]}`` or ``[[lo...], [hi...]]`` as bound vectors, checked (finite, ``lo <= hi``)."""
        s = self.sys
        want = f"a box {{var: [lo, hi]}} over {list(s.variables)} (or [[lo, ...], [hi, ...]])"
        lo, hi = self._box_mapping(field, value, want) if isinstance(value, Mapping) else self._box_rows(field, value, want)
        if np.isnan(lo).any() or np.isnan(hi).any() or (lo > hi).any():
            i = int(np.argmax(~(lo <= hi)))
            raise self.fail(field, f"lower bound {lo[i]} of {s.variables[i]} is not <= the upper bound {hi[i]}")
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            i = int(np.argmax(~(np.isfinite(lo) & np.isfinite(hi))))
            raise self.fail(field, f"the bounds of {s.variables[i]} must be finite numbers, got [{lo[i]}, {hi[i]}]")
        return lo.copy(), hi.copy()

    def _box_mapping(self, field: str, value: Mapping[Any, Any], want: str) -> tuple[np.ndarray, np.ndarray]:
        variables = self.sys.variables
        missing, extra = _missing_extra(variables, value)
        if missing or extra:
            what = f"no bounds for {missing}" if missing else f"unknown variables {extra}"
            raise self.fail(field, f"{what}; expected {want}")
        arr = _floats([value[v] for v in variables])
        if arr is None or arr.shape != (len(variables), 2):
            raise self.fail(field, f"expected [lo, hi] for each variable ({want}), got {value!r}")
        return arr[:, 0], arr[:, 1]

    def _box_rows(self, field: str, value: Any, want: str) -> tuple[np.ndarray, np.ndarray]:
        arr = _floats(value)
        if arr is None or arr.shape != (2, len(self.sys.variables)):
            shape = None if arr is None else arr.shape
            raise self.fail(field, f"expected {want}, got shape {shape}")
        return arr[0], arr[1]

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

    def conjunction(self, texts: Sequence[Any], field: str, env: Mapping[str, Binding]) -> list[tuple[np.ndarray, float]]:
        """The rows ``(g, h)`` of the inequalities ``texts`` (``field[j]`` each)."""
        return [r for j, t in enumerate(texts) for r in self.comp.inequalities(t, f"field '{field}[{j}]'", env)]

    def unsafe(self) -> None:
        items = self.decl["unsafe"]
        if not _is_list(items):
            raise self.fail("unsafe", f"expected {EXPECTED['unsafe']}, got {items!r}")
        polys = []
        for i, item in enumerate(items):
            texts = [item] if isinstance(item, str) else item
            if not _is_list(texts):
                raise self.fail(f"unsafe[{i}]", f"expected an inequality or a list of them, got {item!r}")
            rows = self.conjunction(texts, f"unsafe[{i}]", self.comp.env)
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
        values = self.decl.get("action_values", {}) or {}
        if not isinstance(values, Mapping):
            raise self.fail("action_values", f"expected {{name: {{action: number}}}}, got {values!r}")
        self.per_action: dict[str, list[float]] = {}
        for name, by_action in values.items():
            self.reserve("action_values", name)
            self.per_action[name] = self._action_value(f"action_values.{name}", by_action)

    def _action_value(self, where: str, by_action: Any) -> list[float]:
        """One per-action constant: ``{action: number}`` or a list in action order."""
        actions = self.sys.actions
        if isinstance(by_action, Mapping):
            missing, extra = _missing_extra(actions, by_action)
            if missing or extra:
                raise self.fail(
                    where,
                    f"expected a number for each action {list(actions)}; "
                    + (f"missing {missing}" if missing else f"unknown actions {extra}"),
                )
            return [self.constant(f"{where}.{a}", by_action[a]) for a in actions]
        if _is_list(by_action) and len(by_action) == len(actions):
            return [self.constant(where, v) for v in by_action]
        raise self.fail(
            where,
            f"expected {{action: number}} for {list(actions)} or a list of {len(actions)} numbers, got {by_action!r}",
        )

    def lets(self) -> None:
        lets = self.decl.get("let", {}) or {}
        if not isinstance(lets, Mapping):
            raise self.fail("let", f"expected {{name: expression}} (in order), got {lets!r}")
        for name in lets:
            self.reserve("let", name)
        self.let_items = list(lets.items())
        self.state_env = self._state_env()
        self.action_envs = [self._action_env(ai) for ai in range(len(self.sys.actions))]

    def _state_env(self) -> dict[str, Binding]:
        """The state-only environment: action values (and lets using them) may not appear."""
        state_env: dict[str, Binding] = dict(self.comp.env)
        for name in self.per_action:
            state_env[name] = ActionDependent(name)
        for name, text in self.let_items:
            try:
                state_env[name] = self.comp.expr(
                    text,
                    f"field 'let.{name}'",
                    {k: v for k, v in state_env.items() if not isinstance(v, ActionDependent)},
                )
            except ModelError:
                state_env[name] = ActionDependent(name)
        return state_env

    def _action_env(self, ai: int) -> dict[str, Binding]:
        """The environment of action ``ai``: its action values and the lets over them."""
        env: dict[str, Binding] = dict(self.comp.env)
        for name, vals in self.per_action.items():
            env[name] = self.comp.const(vals[ai])
        for name, text in self.let_items:
            env[name] = self.comp.expr(text, f"field 'let.{name}'", env)
        return env

    # -- pieces ---------------------------------------------------------------------------------------

    def pieces(self) -> None:
        s = self.sys
        items = self.decl["pieces"]
        if isinstance(items, Mapping) or not _is_list(items):
            raise self.fail("pieces", f"expected {EXPECTED['pieces']}, got {items!r}")
        compiled = [self.piece(i, item) for i, item in enumerate(items)]
        s._pieces = tuple(compiled)
        s._regions = tuple(Piece(p.g_mat, p.g_vec, ()) for p in compiled)
        static = not any(m.depends_on_box for p in compiled for m in p.maps)
        s.pieces_depend_on_box = not static
        s._static = None
        if static:
            s._static = tuple(
                Piece(p.g_mat, p.g_vec, tuple(m.enclosure(s.domain_lo, s.domain_hi) for m in p.maps)) for p in compiled
            )
        else:
            self.boundable(compiled)

    def piece(self, i: int, item: Any) -> CompiledPiece:
        """``pieces[i]``: its region (``when``) and one update per action (``next``)."""
        s = self.sys
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
        g_mat, g_vec = _rows_matrix(self.conjunction(when, f"{where}.when", self.state_env), len(s.variables))
        maps = tuple(self.update_map(item["next"], f"{where}.next", ai) for ai in range(len(s.actions)))
        return CompiledPiece(g_mat, g_vec, maps)

    def boundable(self, compiled: Sequence[CompiledPiece]) -> None:
        """Refuse a term that cannot be bounded on the domain (every term must be)."""
        s = self.sys
        for i, p in enumerate(compiled):
            for ai, m in enumerate(p.maps):
                try:
                    m.enclosure(s.domain_lo, s.domain_hi)
                except (ModelError, FloatingPointError, OverflowError) as exc:
                    raise self.fail(
                        f"pieces[{i}].next",
                        f"action {s.actions[ai]}: {exc}; the terms must have finite bounds on the domain",
                    ) from None

    def update_map(self, nxt: Any, where: str, ai: int) -> UpdateMap:
        """Action ``ai``'s update of a piece: ``{var: expression}`` for all actions, or ``{action: {var: expression}}``."""
        s = self.sys
        if not isinstance(nxt, Mapping) or not nxt:
            raise self.fail(where, f"expected {{var: expression}} or {{action: {{var: expression}}}}, got {nxt!r}")
        nxt, where = self._for_action(nxt, where, ai)
        missing, extra = _missing_extra(s.variables, nxt)
        if missing or extra:
            what = f"no update for {missing}" if missing else f"unknown variable(s) {extra}"
            raise self.fail(
                where, f"{what}; expected an expression for each of {list(s.variables)} (or per action {list(s.actions)})"
            )
        env = self.action_envs[ai]
        return _update_map([self.comp.update(nxt[v], f"field '{where}.{v}'", env) for v in s.variables])

    def _for_action(self, nxt: Mapping[Any, Any], where: str, ai: int) -> tuple[Mapping[Any, Any], str]:
        """Action ``ai``'s ``{var: expression}`` of a ``next`` given per action (else ``next`` itself), and its field."""
        actions = self.sys.actions
        if not (set(nxt) <= set(actions) and all(isinstance(v, Mapping) for v in nxt.values())):
            return nxt, where
        missing = [a for a in actions if a not in nxt]
        if missing:
            raise self.fail(
                where,
                f"no update for action(s) {missing}; give one per action {list(actions)} or one {{var: expression}} for all",
            )
        return nxt[actions[ai]], f"{where}.{actions[ai]}"

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


def _floats(value: Any) -> np.ndarray | None:
    """``value`` as a float64 array, or None if it is not numbers."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def _update_map(outs: Sequence[tuple[Lin, str | None, float, float]]) -> UpdateMap:
    """The :class:`UpdateMap` of the compiled updates ``(lin, saturation or None, lo, hi)`` of every variable: the
    terms in order of first use, ``k[i, t]`` the coefficient of term ``t`` in variable ``i``'s update."""
    keys_order = _term_keys(outs)
    k = np.zeros((len(outs), len(keys_order)))
    for i, (lin, _, _, _) in enumerate(outs):
        for key, coef in lin.terms.items():
            k[i, keys_order.index(key)] = coef
    return UpdateMap(
        a0=np.array([lin.coef for lin, _, _, _ in outs]),
        c0=np.array([lin.const for lin, _, _, _ in outs]),
        terms=tuple((key[0], np.array(key[1]), key[2]) for key in keys_order),
        k=k,
        saturations=tuple((i, op, lo, hi) for i, (_, op, lo, hi) in enumerate(outs) if op is not None),
    )


def _missing_extra(wanted: Sequence[str], given: Mapping[Any, Any]) -> tuple[list[str], list[Any]]:
    """The names of ``wanted`` that ``given`` lacks, and its keys that are not wanted."""
    return [w for w in wanted if w not in given], [k for k in given if k not in wanted]


def _is_list(value: object) -> bool:
    """A non-empty sequence that is no string."""
    return not isinstance(value, str) and isinstance(value, Sequence) and bool(value)


def _identifiers(value: object) -> bool:
    """A non-empty sequence of identifiers (and no string)."""
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        return False
    return all(isinstance(v, str) and v.isidentifier() for v in value)


def _rows_matrix(rows: Sequence[tuple[np.ndarray, float]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Inequality rows ``(g, h)`` as ``(G, h)`` (empty: no constraint over ``n`` variables)."""
    if not rows:
        return np.zeros((0, n)), np.zeros(0)
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def _term_keys(outs: Sequence[tuple[Lin, str | None, float, float]]) -> list[TermKey]:
    """The terms of the updates, in order of first use."""
    keys: list[TermKey] = []
    for lin, _, _, _ in outs:
        keys += [key for key in lin.terms if key not in keys]
    return keys
