"""Shields and shielded policies: a policy restricted, state by state, to the actions a shield keeps.

A :class:`Shield` is a table: for each state of the model it was computed for (by its valuation of
``variables``), the agent actions it keeps and, among them, the best ones (by their per-action value,
:mod:`rlverify.exact.action_values`). It records the model (name, constants and a fingerprint of the program
text), the property and the threshold it was computed for (:func:`rlverify.exact.shield.compute_shield`). It is a
file (:meth:`Shield.save` / :func:`read_shield`, JSON) and an object.

A :class:`ShieldedPolicy` is a policy (every engine takes it). In a state the shield covers, the wrapped
policy's distribution is restricted to the kept actions and renormalised; where the policy puts no mass on any
kept action, the distribution is uniform over the best kept action(s) (a *fallback*, counted by
:meth:`Shield.interventions`). In a state the shield does not cover (one that decides the property, where the
property-directed MDP has no choice, or one outside the model it was computed for) the policy is unchanged.
Its features are the shield's variables (the model's), so the shield can tell every state apart even when the
wrapped policy reads fewer of them.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.choices import Optimum, ShieldKind, values
from rlverify.errors import InputFileError, PolicyError, safe_repr
from rlverify.files import write_text
from rlverify.policies.base import Policy, PolicyWrapper

#: the file format's name and version (``"format"``, ``"version"`` in the JSON)
FORMAT = "rlverify-shield"
VERSION = 1
#: threshold kinds (see :func:`rlverify.exact.shield.compute_shield`)
KINDS = values(ShieldKind)
#: what a shield's ``optimum`` may be
OPTIMA = values(Optimum)
#: largest shield file read (bytes)
MAX_SHIELD_BYTES = 1 << 30


class ShieldFileError(InputFileError):
    """A shield file that cannot be read or is not a valid shield (the message names the file and the cause)."""


@dataclass(frozen=True, eq=False)
class Shield:
    """Kept actions per state (see the module docstring).

    Attributes:
        variables: the model's variables, in the order of ``valuations``' columns.
        valuations: ``(S, V)`` int64, the covered states (distinct rows).
        actions: the agent's action names (labels or command names), the columns of ``kept`` and ``best``.
        kept: ``(S, A)`` bool, the actions the shield keeps (at least one per state).
        best: ``(S, A)`` bool, the kept actions with the state's best value (the fallback; at least one per state).
        model, constants, fingerprint: the model it was computed for (name, constants, a hash of the program text
            and constants: :func:`rlverify.exact.shield_file.model_fingerprint`).
        property: the property's text; optimum: ``"min"`` (a bad event) or ``"max"`` (a goal).
        threshold: ``{"kind": "relative" | "absolute" | "factor", "value": float}``.
        info: what else was recorded (the values' guarantee, the remaining step bound), as JSON data.
    """

    variables: tuple[str, ...]
    valuations: np.ndarray
    actions: tuple[str, ...]
    kept: np.ndarray
    best: np.ndarray
    model: str
    constants: str
    fingerprint: str
    property: str
    optimum: str
    threshold: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        problems = self._shape_problems()
        if not problems:
            problems += self._table_problems()
        if len(set(self.variables)) != len(self.variables) or len(set(self.actions)) != len(self.actions):
            problems.append("duplicate variable or action names")
        if self.optimum not in OPTIMA:
            problems.append(f"optimum {safe_repr(self.optimum)} is neither 'min' nor 'max'")
        if problems:
            raise PolicyError("invalid shield: " + "; ".join(problems))

    def _shape_problems(self) -> list[str]:
        """How ``valuations``, ``kept`` and ``best`` do not have the shapes of ``variables`` and ``actions``."""
        S, V = self.valuations.shape if self.valuations.ndim == 2 else (-1, -1)
        A = len(self.actions)
        problems = []
        if V != len(self.variables):
            problems.append(f"valuations have shape {self.valuations.shape}, not (S, {len(self.variables)})")
        for name, m in (("kept", self.kept), ("best", self.best)):
            if m.shape != (S, A) or m.dtype != bool:
                problems.append(f"'{name}' has shape {m.shape} ({m.dtype}), not ({S}, {A}) bool")
        return problems

    def _table_problems(self) -> list[str]:
        """A state without a kept or best action, a best action not kept, a state listed twice."""
        S = len(self.valuations)
        problems = []
        if S and not self.kept.any(axis=1).all():
            problems.append(f"state {int(np.argmin(self.kept.any(axis=1)))} keeps no action")
        if S and not self.best.any(axis=1).all():
            problems.append(f"state {int(np.argmin(self.best.any(axis=1)))} has no best action")
        if (self.best & ~self.kept).any():
            problems.append("a best action that is not kept")
        if S and len(np.unique(self.valuations, axis=0)) != S:
            problems.append("a state listed twice")
        return problems

    # -- lookup --------------------------------------------------------------------------------

    def rows(self, valuations: np.ndarray, variables: Sequence[str] | None = None) -> np.ndarray:
        """``(N,)`` int64: the shield's row of each state of ``valuations`` ``(N, V)`` (columns ``variables``,
        default the shield's), -1 where the shield does not cover it."""
        vals = np.asarray(valuations)
        if variables is not None and tuple(variables) != self.variables:
            missing = [v for v in self.variables if v not in variables]
            if missing:
                raise PolicyError(f"the shield reads variables {missing}, which the states given lack")
            vals = vals[:, [list(variables).index(v) for v in self.variables]]
        return self._index().find(vals)

    def _index(self) -> _RowIndex:
        """The row index, made on first use."""
        index = self.__dict__.get("_row_index")
        if index is None:
            index = _RowIndex(self.valuations)
            object.__setattr__(self, "_row_index", index)
        return index

    def masks(
        self, valuations: np.ndarray, actions: Sequence[str] | None = None, variables: Sequence[str] | None = None
    ) -> np.ndarray:
        """``(N, A)`` bool: the kept actions (columns ``actions``, default the shield's) in each state of
        ``valuations`` ``(N, V)`` (columns ``variables``, default the shield's); every action where the shield does
        not cover the state."""
        cols = self._columns(actions)
        rows = self.rows(valuations, variables)
        out = np.ones((len(rows), len(cols)), dtype=bool)
        known = rows >= 0
        out[known] = _take(self.kept[rows[known]], cols)
        return out

    def _columns(self, actions: Sequence[str] | None) -> np.ndarray:
        """The shield's column of each of ``actions`` (-1: an action the shield does not know)."""
        if actions is None:
            return np.arange(len(self.actions))
        lookup = {a: i for i, a in enumerate(self.actions)}
        return np.array([lookup.get(a, -1) for a in actions], dtype=np.int64)

    def apply(self, probs: np.ndarray, rows: np.ndarray, actions: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The shielded distributions of ``probs`` ``(N, A)`` (columns ``actions``) in the shield's ``rows`` ``(N,)``.

        Returns ``(shielded, removed, fallback)``: the ``(N, A)`` distributions, the ``(N,)`` probability mass the
        shield removed, and ``(N,)`` bool where the policy put no mass on a kept action (uniform over the best
        kept actions instead). Rows with ``rows == -1`` are unchanged (nothing removed).
        """
        cols = self._columns(actions)
        out = np.array(probs, dtype=np.float64, copy=True)
        removed = np.zeros(len(out))
        fallback = np.zeros(len(out), dtype=bool)
        known = np.flatnonzero(rows >= 0)
        if not len(known):
            return out, removed, fallback
        kept = _take(self.kept[rows[known]], cols)
        best = _take(self.best[rows[known]], cols)
        p = out[known]
        mass = np.where(kept, p, 0.0)
        total = mass.sum(axis=1)
        removed[known] = np.where(kept, 0.0, p).sum(axis=1)
        none = total <= 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            shielded = mass / total[:, None]
        if none.any():
            b = best[none].astype(np.float64)
            count = b.sum(axis=1)
            if (count == 0).any():
                i = int(known[np.flatnonzero(none)[np.argmin(count)]])
                raise PolicyError(
                    f"the shield's best actions in state {self.valuation_text(int(rows[i]))} are not among the "
                    f"policy's actions {list(actions)}"
                )
            shielded[none] = b / count[:, None]
        out[known] = shielded
        fallback[known] = none
        return out, removed, fallback

    def valuation_text(self, row: int) -> str:
        """A state of the shield as ``x=1, y=2``."""
        return ", ".join(f"{v}={int(x)}" for v, x in zip(self.variables, self.valuations[row], strict=True))

    # -- files ---------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The shield as the JSON of its file (see :func:`read_shield`)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "model": self.model,
            "constants": self.constants,
            "fingerprint": self.fingerprint,
            "property": self.property,
            "optimum": self.optimum,
            "threshold": self.threshold,
            "info": self.info,
            "variables": list(self.variables),
            "actions": list(self.actions),
            "states": self.valuations.astype(np.int64).tolist(),
            "kept": [np.flatnonzero(r).tolist() for r in self.kept],
            "best": [np.flatnonzero(r).tolist() for r in self.best],
        }

    def save(self, path: str | Path, *, force: bool = False, what: str = "") -> Path:
        """Write the shield to ``path`` (JSON) atomically; an existing file only with ``force``."""
        return write_text(path, json.dumps(self.to_json(), separators=(",", ":")) + "\n", force=force, what=what)


def read_shield(path: str | Path, *, max_states: int | None = None, max_bytes: int | None = None) -> Shield:
    """Read and validate a shield file written by :meth:`Shield.save`.

    Args:
        max_states: refuse a file listing more states (the most its model can have), before any is checked.
        max_bytes: refuse a larger file before reading it (what a shield of ``max_states`` states can take;
            :data:`MAX_SHIELD_BYTES` in any case).

    Raises:
        ShieldFileError: a missing, unreadable, oversized or malformed file, one listing no states or more than
            ``max_states``: one line naming the file and the cause.
    """
    p = Path(path)
    name = safe_repr(str(path))
    try:
        size = os.stat(p).st_size
        if not p.is_file():
            raise ShieldFileError(f"shield file {name}: not a regular file")
        if size > MAX_SHIELD_BYTES:
            raise ShieldFileError(f"shield file {name}: {size:,} bytes, more than the {MAX_SHIELD_BYTES:,} a shield may have")
        if max_bytes is not None and size > max_bytes:
            raise ShieldFileError(
                f"shield file {name}: {size:,} bytes, more than a shield of the model's at most {max_states:,} states "
                f"takes ({max_bytes:,} bytes): a shield for another (larger) model"
            )
        text = p.read_bytes().decode("utf-8")
    except ShieldFileError:
        raise
    except FileNotFoundError:
        raise ShieldFileError(f"shield file {name}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ShieldFileError(f"shield file {name}: cannot be read ({type(exc).__name__})") from None
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ShieldFileError(f"shield file {name}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    try:
        return shield_from_json(data, max_states=max_states)
    except (ShieldFileError, PolicyError) as exc:
        raise ShieldFileError(f"shield file {name}: {exc}") from None


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a number JSON allows")


def shield_from_json(data: Any, *, max_states: int | None = None) -> Shield:
    """A :class:`Shield` from the JSON of its file, every field checked (:class:`ShieldFileError` names the first
    problem); ``max_states``: the most states its model can have (more are refused before any is checked)."""
    texts, threshold, info = _header(data)
    variables = _names(data.get("variables"), "variables")
    actions = _names(data.get("actions"), "actions")
    states = data.get("states")
    if not isinstance(states, list):
        raise ShieldFileError("'states' must be a list of valuations")
    if not states:
        raise ShieldFileError("'states' lists no state: the shield restricts nothing (a file cut short, or not a shield)")
    if max_states is not None and len(states) > max_states:
        raise ShieldFileError(
            f"'states' lists {len(states):,} states, more than the {max_states:,} the model can have: a shield for "
            "another model"
        )
    V = len(variables)
    for i, row in enumerate(states):
        if not isinstance(row, list) or len(row) != V or not all(_integer(x) for x in row):
            raise ShieldFileError(f"state {i}: expected {V} integers (one per variable), got {safe_repr(row)[:80]}")
    valuations = np.array(states, dtype=np.int64).reshape(len(states), V)
    return Shield(
        variables=variables,
        valuations=valuations,
        actions=actions,
        kept=_mask(data.get("kept"), "kept", len(states), len(actions)),
        best=_mask(data.get("best"), "best", len(states), len(actions)),
        model=texts["model"],
        constants=texts["constants"],
        fingerprint=texts["fingerprint"],
        property=texts["property"],
        optimum=texts["optimum"],
        threshold=threshold,
        info=info,
    )


def _header(data: Any) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
    """The file's format, version, texts, threshold and info, checked."""
    if not isinstance(data, dict):
        raise ShieldFileError("expected a JSON object")
    if data.get("format") != FORMAT:
        raise ShieldFileError(f"'format' is {safe_repr(data.get('format'))}, not '{FORMAT}'")
    if data.get("version") != VERSION:
        raise ShieldFileError(f"'version' {safe_repr(data.get('version'))} is not supported (this rlverify reads {VERSION})")
    texts = _texts(data)
    info = data.get("info", {})
    if not isinstance(info, dict):
        raise ShieldFileError("'info' must be an object")
    return texts, _threshold(data.get("threshold")), info


def _texts(data: dict[str, Any]) -> dict[str, str]:
    """The file's model, constants, fingerprint, property and optimum, checked."""
    texts: dict[str, str] = {}
    for k in ("model", "constants", "fingerprint", "property", "optimum"):
        v = data.get(k)
        if not isinstance(v, str):
            raise ShieldFileError(f"'{k}' must be a string, not {type(v).__name__}")
        texts[k] = v
    if texts["optimum"] not in OPTIMA:
        raise ShieldFileError(f"'optimum' must be 'min' or 'max', not {safe_repr(texts['optimum'])}")
    return texts


def _threshold(threshold: Any) -> dict[str, Any]:
    """The file's threshold ``{"kind": one of KINDS, "value": float}``, checked."""
    if (
        not isinstance(threshold, dict)
        or threshold.get("kind") not in KINDS
        or not _number(threshold.get("value"))
        or set(threshold) - {"kind", "value"}
    ):
        raise ShieldFileError(f"'threshold' must be {{'kind': one of {list(KINDS)}, 'value': a finite number}}")
    return {"kind": threshold["kind"], "value": float(threshold["value"])}


def _mask(rows: Any, key: str, S: int, A: int) -> np.ndarray:
    """``(S, A)`` bool from per-state lists of action indices, checked."""
    if not isinstance(rows, list) or len(rows) != S:
        raise ShieldFileError(f"'{key}' must be a list with one entry per state ({S})")
    m = np.zeros((S, A), dtype=bool)
    for i, r in enumerate(rows):
        if not isinstance(r, list) or not r or not all(_integer(x) and 0 <= x < A for x in r) or len(set(r)) != len(r):
            raise ShieldFileError(
                f"'{key}' of state {i}: expected distinct action indices in 0..{A - 1}, got {safe_repr(r)[:80]}"
            )
        m[i, r] = True
    return m


def _names(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ShieldFileError(f"'{what}' must be a non-empty list of names")
    if len(set(value)) != len(value):
        raise ShieldFileError(f"'{what}' lists a name twice")
    return tuple(value)


def _integer(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _take(m: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``m[:, cols]`` with False for ``cols == -1``."""
    out = m[:, np.maximum(cols, 0)]
    out[:, cols < 0] = False
    return out


class _RowIndex:
    """Finds rows of a fixed ``(S, V)`` int64 table: mixed-radix codes, sorted, searched (a dict of row bytes
    when the variables' ranges multiply beyond int64)."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = np.asarray(table, dtype=np.int64)
        S, V = self.table.shape
        self.lo = self.table.min(axis=0) if S else np.zeros(V, dtype=np.int64)
        self.hi = self.table.max(axis=0) if S else np.full(V, -1, dtype=np.int64)
        span = [int(h) - int(lo) + 1 for lo, h in zip(self.lo, self.hi, strict=True)]
        self.radix: np.ndarray | None = None
        self.lookup: dict[bytes, int] | None = None
        if math.prod(max(s, 1) for s in span) < 2**62:
            self.radix = np.array([math.prod(span[i + 1 :]) for i in range(V)], dtype=np.int64)
            codes = (self.table - self.lo) @ self.radix
            self.order = np.argsort(codes, kind="stable")
            self.codes = codes[self.order]
        else:
            self.lookup = {row.tobytes(): i for i, row in enumerate(self.table)}

    def find(self, vals: np.ndarray) -> np.ndarray:
        vals = np.asarray(vals, dtype=np.int64)
        if self.lookup is not None:
            return np.array([self.lookup.get(r.tobytes(), -1) for r in vals], dtype=np.int64)
        assert self.radix is not None
        inside = ((vals >= self.lo) & (vals <= self.hi)).all(axis=1)
        out = np.full(len(vals), -1, dtype=np.int64)
        if not len(self.codes) or not inside.any():
            return out
        codes = (vals[inside] - self.lo) @ self.radix
        at = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
        hit = self.codes[at] == codes
        idx = np.flatnonzero(inside)
        out[idx[hit]] = self.order[at[hit]]
        return out


class ShieldedPolicy(PolicyWrapper):
    """``inner`` restricted to the actions ``shield`` keeps (see the module docstring): a policy.

    Its features are the shield's variables (``inner``'s features must be among them); its actions are
    ``inner``'s (each must be one of the shield's actions). What the shield does not change (how ``inner`` was
    trained, its output kind, timeout, ...) is ``inner``'s (:class:`PolicyWrapper`); it is not greedy (a fallback
    may spread over several best actions). :attr:`inner` is :attr:`policy`.
    """

    no_network = "a shielded policy is the network's distribution restricted by a table: it has no network of its own"

    def __init__(self, inner: Policy, shield: Shield, *, name: str | None = None) -> None:
        missing = [f for f in inner.features if f not in shield.variables]
        if missing:
            raise PolicyError(
                f"the shield was computed for variables {list(shield.variables)}; the policy reads {missing}, which "
                "it does not cover"
            )
        unknown = [a for a in inner.actions if a not in shield.actions]
        if unknown:
            raise PolicyError(f"the policy's actions {unknown} are not among the shield's {list(shield.actions)}")
        super().__init__(inner, features=shield.variables, name=name or f"{inner.name} + shield")
        self.shield = shield
        self._inner_columns = [shield.variables.index(f) for f in inner.features]

    @property
    def inner(self) -> Policy:
        """The policy shielded (:attr:`policy`)."""
        return self.policy

    @property
    def greedy(self) -> bool:
        """False: the shield's fallback may spread a row over several best actions."""
        return False

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        probs = self.inner.action_probabilities(np.asarray(states, dtype=np.float64)[:, self._inner_columns])
        rows = self.shield.rows(np.rint(states).astype(np.int64))
        return self.shield.apply(probs, rows, self.actions)[0]

    def interventions(self, states: np.ndarray, *, deterministic: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For ``(N, d)`` states (features in :attr:`features` order): the shield's ``(N,)`` rows (-1: not covered),
        the ``(N,)`` mass it removes from the policy's distribution (``deterministic``: 1 where it removes the
        policy's argmax action, first on ties, else 0), and ``(N,)`` bool where it falls back to the best kept
        actions (the policy puts no mass on a kept action)."""
        states = np.asarray(states, dtype=np.float64)
        rows = self.shield.rows(np.rint(states).astype(np.int64))
        # the policy is asked only where the shield decides: a state with nothing to choose (a target, a deadlock)
        # is no question for it, and a table policy need not list it
        covered = np.flatnonzero(rows >= 0)
        probs = np.zeros((len(states), len(self.actions)))
        if len(covered):
            probs[covered] = self.inner.action_probabilities(states[covered][:, self._inner_columns])
        _, removed, fallback = self.shield.apply(probs, rows, self.actions)
        if deterministic and len(probs):
            top = np.zeros_like(probs)
            top[np.arange(len(probs)), np.argmax(probs, axis=1)] = 1.0
            removed = self.shield.apply(top, rows, self.actions)[1]
        return rows, removed, fallback


__all__ = ["FORMAT", "KINDS", "Shield", "ShieldFileError", "ShieldedPolicy", "read_shield", "shield_from_json"]
