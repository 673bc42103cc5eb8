"""Checks over a compiled PRISM program: Storm's property-directed terminal states, and the updates' ranges in built
states."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rlverify.models.program_expressions import compile_expression
from rlverify.models.program_types import Fn, Unsupported, Var

if TYPE_CHECKING:
    from rlverify.models.program import CompiledProgram

#: a Storm formula (``stormpy.logic.Formula``; stormpy is untyped)
StormFormula = Any


def terminal_functions(
    formula: StormFormula, label_fn: Callable[[str], Fn | None], variables: dict[str, Var]
) -> list[tuple[Fn, bool]]:
    """Storm's property-directed terminal states: ``(function, value)`` pairs, a state is terminal when one
    function takes its value there (the rules of Storm's ``getTerminalStatesFromFormula``)."""
    L = _logic()
    if not isinstance(formula, L.ProbabilityOperatorFormula):
        return []
    sub = formula.subformula
    # only where every operand is an atom or a literal: for nested path formulas Storm's builder keeps
    # exploring (measured: Freeway's P=? [(true U px24=0) U px17=0]), and exploring more never changes a value
    operands = [getattr(sub, a) for a in ("subformula", "left_subformula", "right_subformula") if hasattr(sub, a)]
    simple = all(_is_atom(f) or isinstance(f, L.BooleanLiteralFormula) for f in operands)
    if not (isinstance(sub, (L.EventuallyFormula, L.UntilFormula, L.BoundedUntilFormula)) and simple):
        return []
    out: list[tuple[Fn, bool]] = []
    for f, value in _path_atoms(sub):
        fn = _atom_function(f, label_fn, variables)
        if fn is not None:
            out.append((fn, value))
    return out


def _logic() -> Any:
    """``stormpy.logic``."""
    import stormpy  # lazy: stormpy, start-up

    return stormpy.logic


def _is_atom(f: StormFormula) -> bool:
    L = _logic()
    return isinstance(f, (L.AtomicExpressionFormula, L.AtomicLabelFormula))


def _path_atoms(f: StormFormula) -> list[tuple[StormFormula, bool]]:
    """The operands of a path formula whose value makes a state terminal, with that value (Storm's rules)."""
    L = _logic()
    if isinstance(f, L.EventuallyFormula):
        return [(f.subformula, True)] if _is_atom(f.subformula) else []
    if isinstance(f, L.BoundedUntilFormula):
        right = not positive_lower_bound(f) and _is_atom(f.right_subformula)
    elif isinstance(f, L.UntilFormula):
        right = _is_atom(f.right_subformula)
    else:
        return []
    return ([(f.right_subformula, True)] if right else []) + [(f.left_subformula, False)]


def _atom_function(f: StormFormula, label_fn: Callable[[str], Fn | None], variables: dict[str, Var]) -> Fn | None:
    """An atom's numpy function: an expression compiled, a label's function (None: not an atom, or no such label)."""
    L = _logic()
    if isinstance(f, L.AtomicExpressionFormula):
        return compile_expression(f.get_expression(), variables)
    if isinstance(f, L.AtomicLabelFormula):
        return label_fn(f.label)
    return None


def positive_lower_bound(f: StormFormula) -> bool:
    """Whether a bounded until has a lower step bound other than a non-strict 0 (``U[0,k]``, ``U>=0`` count as none,
    as in Storm; stormpy exposes only the upper bound, so the lower one is read from the formula's text)."""
    if not f.has_lower_bound:
        return False
    m = re.search(r"U\[\s*([^,\]]+?)\s*,", str(f)) or re.search(r"U>=\s*([^\s(]+)", str(f))
    try:
        return m is None or float(m.group(1)) != 0.0
    except ValueError:  # a constant's name: not known to be 0
        return True


def check_update_ranges(
    program: CompiledProgram,
    variables: tuple[str, ...],
    valuations: np.ndarray,
    terminal: list[tuple[Fn, bool]],
    *,
    batch: int = 1 << 14,
) -> None:
    """Refuse (``ModelError`` naming the command, the variable, the value and the state) an update of any command
    enabled in one of the states ``valuations`` ``(S, len(variables))`` (columns named ``variables``, as Storm keeps
    them: variables it dropped take their constant initial value) that leaves its variable's range. States where a
    ``terminal`` function (:func:`terminal_functions`) takes its value are not expanded (Storm's rule).

    Raises:
        Unsupported: a variable of the program missing from ``variables`` without one initial value.
    """
    columns = _columns(program, variables)
    for lo in range(0, len(valuations), batch):
        part = valuations[lo : lo + batch]
        n = len(part)
        vals = np.empty((n, len(program.variables)), dtype=np.int64)
        for i, (column, constant) in enumerate(columns):
            vals[:, i] = constant if column is None else part[:, column]
        inside = np.ones(n, dtype=bool)
        for i, v in enumerate(program.variables):  # a value Storm could not store in range: checked by the caller
            inside &= (vals[:, i] >= v.lo) & (vals[:, i] <= v.hi)
        vals = vals[inside]
        n = len(vals)
        env = program.env(vals)
        stop = np.zeros(n, dtype=bool)
        for fn, value in terminal:
            stop |= program.evaluate(fn, env, n) == value
        program.check(vals[~stop])


def _columns(program: CompiledProgram, variables: tuple[str, ...]) -> list[tuple[int | None, int]]:
    """Per program variable: its column in the built states (None: not built) and else its constant initial value."""
    columns: list[tuple[int | None, int]] = []
    for i, v in enumerate(program.variables):
        if v.name in variables:
            columns.append((variables.index(v.name), 0))
        elif len(program.initial) == 1:
            columns.append((None, int(program.initial[0][i])))
        else:
            raise Unsupported(f"variable '{v.name}' is not in the built states and has several initial values")
    return columns
