"""Reading and checking a system declaration: one pass over its fields, each refused with a message naming the
source, the field and what was expected, filling a :class:`~rlverify.models.continuous.declared.DeclaredSystem`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rlverify.errors import ConstantsError, ModelError, did_you_mean
from rlverify.models.continuous.base import Piece, UnsafeSet
from rlverify.models.continuous.compiler import ActionDependent, Compiler
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
        self.comp = comp = Compiler(self.source, s.variables)
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
            self.state_env[name] = ActionDependent(name)
        for name, text in self.let_items:
            try:
                self.state_env[name] = self.comp.expr(
                    text,
                    f"field 'let.{name}'",
                    {k: v for k, v in self.state_env.items() if not isinstance(v, ActionDependent)},
                )
            except ModelError:
                self.state_env[name] = ActionDependent(name)
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
            compiled.append(CompiledPiece(g_mat, g_vec, maps))
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

    def update_map(self, nxt: Any, where: str, ai: int) -> UpdateMap:
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
        return UpdateMap(
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
