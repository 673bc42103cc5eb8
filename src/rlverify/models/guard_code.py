"""Python source of a model's guards for a policy template (``rlverify inspect --policy-template x.py`` of a model
with too many decision states to list): each action's availability from the PRISM commands' or JANI edges' guards,
as numpy over the state's features, checked against the built model's choices."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import OptionError
from rlverify.models.commands import JANI_SHIFT, Command
from rlverify.models.dynamics import ChoiceTable
from rlverify.models.explicit import ExplicitModel
from rlverify.models.jani import Json, StormAutomaton, read_jani
from rlverify.models.storm import StormExpression, StormProgram
from rlverify.models.symbolic import ModelFormat, SymbolicModel, prism_variables

#: a module of a Storm PRISM program (``stormpy.PrismModule``)
StormModule = Any


def guard_code(model: SymbolicModel, features: list[str], actions: list[str], path: Path) -> str:
    """Python source of ``available(states) -> (N, |A|) bool`` from the model's guards (see
    :func:`_prism_guard_code`, :func:`_jani_guard_code`).

    Raises:
        OptionError: a guard that cannot be written as code, an action naming no command or edge.
    """
    write = _prism_guard_code if model.kind is ModelFormat.PRISM else _jani_guard_code
    return write(model, features, actions, path)


def one_line(text: object) -> str:
    """``text`` for a ``#`` comment of a generated file (no line breaks)."""
    return " ".join(str(text).split())


#: the head of every generated ``available``: helpers, and its first lines
_HELPERS = (
    "def _any(*xs):",
    "    return np.logical_or.reduce(np.broadcast_arrays(*xs))",
    "",
    "",
    "def _all(*xs):",
    "    return np.logical_and.reduce(np.broadcast_arrays(*xs))",
    "",
    "",
    "def available(states):",
    '    """(N, len(ACTIONS)) bool: the actions whose guards hold in each state (from the model\'s commands)."""',
    "    S = np.rint(np.asarray(states, dtype=float)).astype(np.int64)",
    "    out = np.zeros((len(S), len(ACTIONS)), dtype=bool)",
)


def _prism_guard_code(model: SymbolicModel, features: list[str], actions: list[str], path: Path) -> str:
    """Python source of ``available(states) -> (N, |A|) bool``: each action's availability from the PRISM program's
    guards (constants and formulas substituted), over the features' columns.

    A label is available where every module with it in its alphabet has an enabled command with it; a command
    name ``M:K`` (or ``M:K+N:J``, a synchronised choice) where its commands' guards hold."""
    program = model.program.substitute_constants().substitute_formulas()
    columns = {name: i for i, name in enumerate(features)}
    bools = {v.name for v in prism_variables(program)[1]}
    guards: dict[str, str] = {}
    by_label: dict[str, list[list[str]]] = {}
    try:
        for module in program.modules:
            for label, gs in _module_guards(module, columns, bools, guards).items():
                by_label.setdefault(label, []).append(gs)
    except _NoSource as exc:
        raise _not_written(path, exc) from None

    return _available_code(
        actions, {label: _every([_either(gs) for gs in per]) for label, per in by_label.items()}, guards, path
    )


def _module_guards(
    module: StormModule, columns: dict[str, int], bools: set[str], guards: dict[str, str]
) -> dict[str, list[str]]:
    """The sources of a PRISM module's guards by label; each command's also in ``guards`` by its name ``M:K``."""
    per_label: dict[str, list[str]] = {}
    for k, c in enumerate(module.commands):
        guard = _source(c.guard_expression, columns, bools)
        guards[f"{module.name}:{k + 1}"] = guard
        if c.is_labeled:
            per_label.setdefault(c.action_name, []).append(guard)
    return per_label


def _not_written(path: Path, exc: _NoSource) -> OptionError:
    return OptionError(
        f"--policy-template {path}: a guard cannot be written as code ({exc}); use a model with at most 20,000 decision states"
    )


def _either(gs: list[str]) -> str:
    return gs[0] if len(gs) == 1 else f"_any({', '.join(gs)})"


def _every(gs: list[str]) -> str:
    return gs[0] if len(gs) == 1 else f"_all({', '.join(gs)})"


def _available_code(actions: list[str], labels: dict[str, str], guards: dict[str, str], path: Path) -> str:
    """The source of ``available``: each action's column from its label's condition (``labels``) or, for a command
    name ``M:K+N:J``, from its commands' or edges' ``guards``."""
    lines = [*_HELPERS]
    for j, action in enumerate(actions):
        if action in labels:
            expr = labels[action]
        else:
            names = action.split("+")
            if any(n not in guards for n in names):
                raise OptionError(f"--policy-template {path}: action {action!r} names no command or edge of the model")
            expr = _every([guards[n] for n in names])
        lines.append(f"    out[:, {j}] = {expr}  # {one_line(action)}")
    lines += ["    return out", ""]
    return "\n".join(lines)


def _jani_guard_code(model: SymbolicModel, features: list[str], actions: list[str], path: Path) -> str:
    """Python source of ``available(states) -> (N, |A|) bool`` from a JANI model's edges (constants and functions
    substituted), over the features' columns.

    An edge is enabled where its automaton is in the edge's location (``_loc_AUTOMATON``, for automata with several
    locations) and its guard holds; a label where some synchronisation with that result has an enabled edge of its
    action in every automaton it names; a command name ``A:K`` (or ``A:K+B:J``) where its edges are enabled. A
    variable no edge assigns (not a feature: Storm's builder makes it a constant) is read as its initial value."""
    program = model.program.substitute_constants()
    program.substitute_functions()
    columns = {name: i for i, name in enumerate(features)}
    try:
        guards, by_action = _jani_edge_guards(model, program, columns)
    except _NoSource as exc:
        raise _not_written(path, exc) from None
    by_label = _sync_guards(read_jani(model.path).get("system", {}), by_action)
    return _available_code(actions, {label: _either(gs) for label, gs in by_label.items()}, guards, path)


def _sync_parts(sync: Json, elements: list[str]) -> list[tuple[str, str]]:
    """A synchronisation's ``(automaton, action)`` parts (the automata not taking part left out)."""
    return [(elements[i], a) for i, a in enumerate(sync.get("synchronise", [])) if a is not None and i < len(elements)]


def _sync_guards(system: Json, by_action: dict[tuple[str, str], list[str]]) -> dict[str, list[str]]:
    """By label: the source of each synchronisation of the JANI ``system`` with that result (silent ones left out:
    their choices are named by command) whose every part has edges (``by_action``)."""
    elements = [e.get("automaton") for e in system.get("elements", [])]
    by_label: dict[str, list[str]] = {}
    for sync in system.get("syncs", []) or []:
        result = sync.get("result")
        if not result:
            continue  # a silent result: its choices are named by command
        parts = _sync_parts(sync, elements)
        if parts and all(p in by_action for p in parts):
            by_label.setdefault(result, []).append(_every([_either(by_action[p]) for p in parts]))
    return by_label


def _fixed_sources(program: StormProgram, columns: dict[str, int]) -> dict[str, str]:
    """The source of each variable no edge assigns (no feature: Storm's builder makes it a constant, its literal
    initial value)."""
    fixed: dict[str, str] = {}
    for v in [*program.global_variables, *(v for a in program.automata for v in a.variables)]:
        name = v.expression_variable.name
        if name not in columns and not v.is_transient and v.init_expression is not None and v.init_expression.is_literal():
            fixed[name] = _source(v.init_expression, {}, set())
    return fixed


def _edge_command(model: SymbolicModel, automaton: StormAutomaton, ai: int, si: int) -> Command:
    """The command (file edge) of Storm's edge ``si`` of automaton number ``ai``."""
    k = model.command_keys.get((ai << JANI_SHIFT) | si)
    if k is None:
        raise _NoSource(f"edge {si} of automaton '{automaton.name}' is not matched to the file's")
    return model.commands[k]


def _jani_edge_guards(
    model: SymbolicModel, program: StormProgram, columns: dict[str, int]
) -> tuple[dict[str, str], dict[tuple[str, str], list[str]]]:
    """The source of each JANI edge's enabledness by its command name, and by (automaton, action) the sources of
    the edges with that action."""
    fixed = _fixed_sources(program, columns)
    bools = set(model.boolean_variables)
    guards: dict[str, str] = {}
    by_action: dict[tuple[str, str], list[str]] = {}
    for ai, automaton in enumerate(program.automata):
        location = automaton.location_variable.name if len(automaton.locations) > 1 else None
        if location is not None and location not in columns:
            raise _NoSource(f"the location of '{automaton.name}' is not a feature")
        for si, edge in enumerate(automaton.edges):
            command = _edge_command(model, automaton, ai, si)
            guard = _source(edge.guard, columns, bools, fixed)
            if location is not None:
                guard = f"np.logical_and(np.equal(S[:, {columns[location]}], {int(edge.source_location_index)}), {guard})"
            guards[command.name] = guard
            if command.action:
                by_action.setdefault((automaton.name, command.action), []).append(guard)
    return guards, by_action


class _NoSource(Exception):
    """An expression :func:`_source` does not write."""


@functools.cache
def _operators() -> tuple[dict[object, Callable[[list[str], StormExpression], str]], dict[object, str]]:
    """Storm's operators as numpy source: the special ones (their operands' sources and the expression -> source) and
    the binary ones (a numpy function's name)."""
    import stormpy  # lazy: stormpy, start-up

    op = stormpy.expressions.OperatorType

    def power(args: list[str], expr: StormExpression) -> str:
        power = f"np.power(np.asarray({args[0]}, dtype=np.float64), {args[1]})"
        return f"np.trunc({power}).astype(np.int64)" if expr.has_integer_type() else power

    special: dict[object, Callable[[list[str], StormExpression], str]] = {
        op.NOT: lambda args, _: f"np.logical_not({args[0]})",
        op.ITE: lambda args, _: f"np.where({args[0]}, {args[1]}, {args[2]})",
        op.FLOOR: lambda args, _: f"np.floor({args[0]}).astype(np.int64)",
        op.CEIL: lambda args, _: f"np.ceil({args[0]}).astype(np.int64)",
        op.POWER: power,
    }
    binary = {
        op.AND: "np.logical_and",
        op.OR: "np.logical_or",
        op.XOR: "np.logical_xor",
        op.IFF: "np.equal",
        op.PLUS: "np.add",
        op.MINUS: "np.subtract",
        op.TIMES: "np.multiply",
        op.DIVIDE: "np.true_divide",
        op.MIN: "np.minimum",
        op.MAX: "np.maximum",
        op.MODULO: "np.fmod",
        op.EQUAL: "np.equal",
        op.NOT_EQUAL: "np.not_equal",
        op.LESS: "np.less",
        op.LESS_OR_EQUAL: "np.less_equal",
        op.GREATER: "np.greater",
        op.GREATER_OR_EQUAL: "np.greater_equal",
    }
    return special, binary


def _literal_source(expr: StormExpression) -> str:
    """numpy source of a Storm literal."""
    if expr.has_boolean_type():
        return "True" if expr.evaluate_as_bool() else "False"
    if expr.has_integer_type():
        return repr(int(expr.evaluate_as_int()))
    return repr(float(expr.evaluate_as_double()))


def _variable_source(expr: StormExpression, columns: dict[str, int], bools: set[str], fixed: dict[str, str] | None) -> str:
    """numpy source of a Storm variable: its feature's column (a boolean's as ``!= 0``), or its ``fixed`` source."""
    name = expr.get_identifier()
    if fixed and name not in columns and name in fixed:
        return fixed[name]
    if name not in columns:
        raise _NoSource(f"the variable '{name}' is not a feature")
    col = f"S[:, {columns[name]}]"
    return f"({col} != 0)" if name in bools else col


def _source(expr: StormExpression, columns: dict[str, int], bools: set[str], fixed: dict[str, str] | None = None) -> str:
    """numpy source of a Storm expression over ``S`` (``(N, d)`` int64 feature values; booleans as 0/1); ``fixed``:
    the source of variables that are no feature (their constant value)."""
    if expr.is_literal():
        return _literal_source(expr)
    if expr.is_variable():
        return _variable_source(expr, columns, bools, fixed)
    try:
        op = expr.operator
    except Exception:  # e.g. a user-defined function: no operator
        raise _NoSource(f"expression '{expr}'") from None
    args = [_source(expr.get_operand(i), columns, bools, fixed) for i in range(expr.arity)]
    return _operation_source(op, args, expr)


def _operation_source(op: object, args: list[str], expr: StormExpression) -> str:
    """numpy source of Storm operator ``op`` applied to operands of source ``args`` (``expr``: the operation)."""
    import stormpy  # lazy: stormpy, start-up

    op_type = stormpy.expressions.OperatorType
    special, binary = _operators()
    if op == op_type.MINUS and len(args) == 1:
        return f"(-{args[0]})"
    if op in special:
        return special[op](args, expr)
    if op == op_type.IMPLIES and len(args) == 2:
        return f"np.logical_or(np.logical_not({args[0]}), {args[1]})"
    name = binary.get(op)
    if name is None or len(args) != 2:
        raise _NoSource(f"operator {op} in '{expr}'")
    return f"{name}({args[0]}, {args[1]})"


def check_guard_code(
    code: str, mdp: ExplicitModel, table: ChoiceTable, states: np.ndarray, features: list[str], path: Path
) -> None:
    """Run the generated ``available`` on every decision state and compare it with the built MDP's availability."""
    namespace: dict[str, object] = {"np": np, "ACTIONS": list(table.actions)}
    exec(compile(code, f"<policy template {path}>", "exec"), namespace)  # our own generated source
    for start in range(0, len(states), 200_000):
        chunk = states[start : start + 200_000]
        available = namespace["available"]
        assert callable(available)
        ours = np.asarray(available(mdp.feature_matrix(features, chunk)), dtype=bool)
        theirs = table.available(chunk)
        differ = np.flatnonzero((ours != theirs).any(axis=1))
        if len(differ):
            s = int(chunk[differ[0]])
            raise OptionError(
                f"--policy-template {path}: the guards read do not give the built model's choices in state "
                f"{mdp.valuation_dict(s)}; use a model with at most 20,000 decision states"
            )
