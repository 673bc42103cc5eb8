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

import inspect
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.arrays import distinct
from rlverify.errors import ConstantsError, InputFileError, ModelError, did_you_mean
from rlverify.models.assignments import parse_assignments
from rlverify.models.continuous.base import ContinuousSystem, Piece
from rlverify.models.continuous.builder import Builder
from rlverify.models.continuous.maps import CompiledPiece
from rlverify.models.userfile import DEFAULT_SYSTEM_TIMEOUT, call_user_code, import_python_file
from rlverify.policies.settings import check_timeout

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
    _pieces: tuple[CompiledPiece, ...]  # compiled, in declaration order
    _regions: tuple[Piece, ...]  # each piece's region (no maps), for step()
    _static: tuple[Piece, ...] | None  # the enclosure when it does not depend on the box (no terms, no saturations)
    _reward: Callable[..., Any] | None  # the declaration's reward (training only)

    def __init__(
        self, declaration: Mapping[str, Any], *, source: str = "declaration", overrides: Mapping[str, float] | None = None
    ) -> None:
        self.source = source
        self.declaration = declaration
        Builder(self, declaration, source, dict(overrides or {})).build()

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
        obj = _call_factory(obj, file, name, overrides, timeout)
        overrides = {}
    return _system_from(obj, source, overrides)


def _call_factory(
    factory: Callable[..., Any], file: Path, name: str, overrides: dict[str, float], timeout: float | None
) -> object:
    """What the factory ``name`` of ``file`` returns when called with the constants ``overrides`` (arguments it cannot
    take are refused before its code runs)."""
    source = f"{file}:{name}"
    try:
        signature: inspect.Signature | None = inspect.signature(factory)
    except Exception:  # no signature to read (a builtin, an odd callable): the call says
        signature = None
    try:
        if signature is not None:
            signature.bind(**overrides)
    except TypeError as exc:
        if overrides:
            raise ConstantsError(
                f"{source}: cannot pass {', '.join(overrides)} to {name}(): {exc}", missing=list(overrides)
            ) from None
        raise ModelError(f"{source}: calling {name}() failed: {exc}") from None
    return call_user_code(factory, str(file), f"calling {name}()", timeout, "--system-timeout", **overrides)


def _system_from(obj: object, source: str, overrides: dict[str, float]) -> DeclaredSystem:
    """The system of a declaration mapping or a built :class:`DeclaredSystem` (which takes no constants)."""
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
