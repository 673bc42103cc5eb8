"""What a PRISM/JANI model offers a policy: variables, actions and command names, labels, size.

:func:`summarize` is what ``rlverify inspect`` prints; :func:`policy_template` writes a policy
skeleton with the names filled in, so that finding what a policy must declare never takes writing a
wrong policy and reading the error.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import OptionError
from rlverify.models.dynamics import agent_actions, choice_table
from rlverify.models.explicit import ExplicitModel
from rlverify.models.jani import read_jani
from rlverify.models.storm import constant_value

#: the most initial states listed
from rlverify.models.storm_build import build_explicit
from rlverify.models.symbolic import SymbolicModel

MAX_LISTED = 10


@dataclass(frozen=True)
class ModelSummary:
    """A model as a policy sees it.

    Attributes:
        path, kind (``prism``/``jani``), model_type (``mdp``/``dtmc``), constants: as loaded.
        variables: ``{"name", "type" (int/bool/location), "module", "low", "high", "init"}`` per state
            variable (bounds and initial value as declared, None where not a constant); a JANI
            automaton with several locations has a ``location`` entry (its feature ``_loc_AUTOMATON``)
            with ``"locations"``: the location names by code (code = position in the file). JANI names
            are Storm's: an automaton's local variable ``p`` of automaton ``a`` is ``a_p``.
        modules: ``{"name", "actions", "commands": [{"name", "action", "guard"}]}`` per module/automaton.
        labels, reward_models: declared names.
        built: whether the reachable state space was built (``states``/``transitions``/... are None if not).
        states, transitions, choices: of the reachable MDP (property-free build).
        initial_states: valuations of up to :data:`MAX_LISTED` initial states; n_initial: how many.
        decision_states: states where a policy is asked (see :mod:`rlverify.models.dynamics`).
        features: the names a policy may observe (the variables, in order).
        actions: the fewest names addressing every choice (:func:`~rlverify.models.dynamics.agent_actions`):
            labels where they identify a choice, command names where they do not.
        ambiguous: whether some choices need command names (unlabelled or repeated labels in a state).
        unassigned: variables declared but never assigned (Storm makes them constants: no features).
    """

    path: str
    kind: str
    model_type: str
    constants: str
    variables: list[dict[str, Any]]
    modules: list[dict[str, Any]]
    labels: list[str]
    reward_models: list[str]
    features: list[str]
    actions: list[str]
    built: bool
    ambiguous: bool | None = None
    states: int | None = None
    transitions: int | None = None
    choices: int | None = None
    decision_states: int | None = None
    n_initial: int | None = None
    initial_states: list[dict[str, int]] = field(default_factory=list)
    unassigned: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(
    model: SymbolicModel, *, build: bool = True, max_states: int | None = None
) -> tuple[ModelSummary, ExplicitModel | None]:
    """Summarize ``model``; with ``build``, also its reachable state space (refused beyond ``max_states``).

    Returns the summary and the built explicit model (None without ``build``).

    Raises:
        ModelTooLargeError: more than ``max_states`` reachable states.
    """
    variables = _variables(model)
    modules: dict[str, dict[str, Any]] = {}
    for c in model.commands:
        m = modules.setdefault(c.module, {"name": c.module, "actions": [], "commands": []})
        if c.action and c.action not in m["actions"]:
            m["actions"].append(c.action)
        m["commands"].append({"name": c.name, "action": c.action, "guard": c.guard})
    common: dict[str, Any] = dict(
        path=str(model.path),
        kind=model.kind,
        model_type=model.model_type,
        constants=model.constants,
        variables=variables,
        modules=list(modules.values()),
        labels=list(model.labels),
        reward_models=list(model.reward_models),
        features=list(model.variables),
        unassigned=list(model.unassigned),
    )
    if not build:
        return ModelSummary(**common, actions=[a for a in model.action_names if a], built=False), None
    mdp, _ = build_explicit(model, None, max_states=max_states)
    if model.model_type == "dtmc":  # no choices: nothing for a policy to decide
        return ModelSummary(
            **common,
            actions=[],
            built=True,
            ambiguous=False,
            states=mdp.num_states,
            transitions=mdp.num_transitions,
            choices=mdp.num_choices,
            decision_states=0,
            n_initial=len(mdp.initial_states),
            initial_states=[mdp.valuation_dict(int(s)) for s in mdp.initial_states[:MAX_LISTED]],
        ), mdp
    table = choice_table(mdp, agent_actions(mdp))
    init = [mdp.valuation_dict(int(s)) for s in mdp.initial_states[:MAX_LISTED]]
    return ModelSummary(
        **common,
        actions=list(table.actions),
        built=True,
        ambiguous=mdp.choice_commands is not None,
        states=mdp.num_states,
        transitions=mdp.num_transitions,
        choices=mdp.num_choices,
        decision_states=int(table.decision.sum()),
        n_initial=len(mdp.initial_states),
        initial_states=init,
    ), mdp


def _variables(model: SymbolicModel) -> list[dict[str, Any]]:
    value = constant_value

    out = []
    if model.kind == "prism":
        p = model.program.substitute_constants()
        has_init = not p.has_initial_states_expression  # an init...endinit block: no per-variable initial values
        scopes = [("", p.global_integer_variables, p.global_boolean_variables)]
        scopes += [(m.name, m.integer_variables, m.boolean_variables) for m in p.modules]
        for module, ints, bools in scopes:
            for v in ints:
                out.append(
                    {
                        "name": v.name,
                        "type": "int",
                        "module": module,
                        "low": value(v.lower_bound_expression),
                        "high": value(v.upper_bound_expression),
                        "init": value(v.initial_value_expression) if has_init else None,
                    }
                )
            for v in bools:
                out.append(
                    {
                        "name": v.name,
                        "type": "bool",
                        "module": module,
                        "low": 0,
                        "high": 1,
                        "init": value(v.initial_value_expression, as_bool=True) if has_init else None,
                    }
                )
        return out
    data = read_jani(model.path)
    for a in data.get("automata", []):
        feature = f"_loc_{a['name']}"
        if feature in model.locations:
            names = list(model.locations[feature])
            initial = a.get("initial-locations", [])
            out.append(
                {
                    "name": feature,
                    "type": "location",
                    "module": a["name"],
                    "low": 0,
                    "high": len(names) - 1,
                    "init": names.index(initial[0]) if len(initial) == 1 and initial[0] in names else None,
                    "locations": names,
                }
            )
    evaluated = _jani_values(model)
    jani_scopes = [("", data.get("variables", [])), *((a["name"], a.get("variables", [])) for a in data.get("automata", []))]
    for module, declared in jani_scopes:
        for v in declared:
            if v.get("transient"):
                continue
            name = f"{module}_{v['name']}" if module else v["name"]  # Storm's name of a local variable
            if name not in model.variables:  # never assigned: Storm's builder makes it a constant, no feature
                continue
            vtype = v.get("type")
            base = vtype.get("base") if isinstance(vtype, dict) else vtype
            low, high = (
                (0, 1)
                if base == "bool"
                else (
                    _literal(vtype.get("lower-bound")) if isinstance(vtype, dict) else None,
                    _literal(vtype.get("upper-bound")) if isinstance(vtype, dict) else None,
                )
            )
            init = _literal(v.get("initial-value"))
            if name in evaluated:  # bounds and initial values written as expressions (over constants)
                pairs = zip((low, high, init), evaluated[name], strict=True)
                low, high, init = (known if mine is None else mine for mine, known in pairs)
            out.append(
                {
                    "name": name,
                    "type": "bool" if base == "bool" else "int",
                    "module": module,
                    "low": low,
                    "high": high,
                    "init": int(init) if init is not None else None,
                }
            )
    return out


def _jani_values(model: SymbolicModel) -> dict[str, tuple[int | None, int | None, int | None]]:
    """Storm's name of each JANI state variable -> its bounds and initial value, evaluated once the model's constants
    are defined (None where one is not a constant: an unbounded type, no initial value)."""
    program = model.program.substitute_constants()
    out = {}
    for scope in (program.global_variables, *(a.variables for a in program.automata)):
        for v in scope:
            bounded = getattr(v.type, "is_bounded_type", False)
            low = constant_value(v.type.lower_bound) if bounded else None
            high = constant_value(v.type.upper_bound) if bounded else None
            is_bool = str(v.type) == "bool"
            init = constant_value(v.init_expression, as_bool=is_bool) if v.init_expression is not None else None
            out[v.expression_variable.name] = (low, high, init)
    return out


def _literal(x: Any) -> int | bool | None:
    """A bound written as a literal in JANI, or None (an expression)."""
    return x if isinstance(x, (int, bool)) else None


def policy_template(
    path: str | Path,
    summary: ModelSummary,
    mdp: ExplicitModel,
    *,
    force: bool = False,
    max_rows: int = 20_000,
    model: SymbolicModel | None = None,
) -> Path:
    """Write a policy skeleton for the model: ``.py`` (``FEATURES``, ``ACTIONS``, ``pi``) or ``.json`` (a table policy).

    The skeleton is uniform over the choices available in each decision state of the reachable MDP. Up to
    ``max_rows`` decision states they are listed per state (the ``.json`` table, or ``AVAILABLE`` in the ``.py``);
    beyond that the ``.py`` evaluates the model's guards on the state's features (PRISM commands' or JANI edges';
    ``model`` is needed for that), and the guards read are checked against the built MDP's availability in every
    decision state before the file is written. The file is written atomically (a temporary file renamed into place).

    Raises:
        OptionError: unknown suffix, too many states for a ``.json`` table, or (beyond ``max_rows``) a guard that
            cannot be written as code or does not give the built MDP's choices.
        FileWriteError: the file exists without ``force``, or cannot be written (written atomically).
    """
    from rlverify.files import check_target, write_text

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".py", ".json"):
        raise OptionError(f"--policy-template {path}: expected a .py or .json file name")
    check_target(path, force=force, what="--policy-template")
    if not summary.actions:
        raise OptionError(
            f"--policy-template {path}: {summary.path} has no decision states ({summary.model_type.upper()}"
            "): no policy is needed; check it with rlverify verify --mode monolithic"
        )
    table = choice_table(mdp, summary.actions)
    states = np.flatnonzero(table.decision)
    features = list(summary.features)
    actions = list(summary.actions)
    if len(states) <= max_rows:
        values = mdp.feature_matrix(features, states).astype(np.int64)
        available = table.available(states)
        # one row per observation: states that look alike to the policy share it (union of their choices)
        merged: dict[tuple[int, ...], np.ndarray] = {}
        for key, avail in zip(map(tuple, values.tolist()), available, strict=True):
            merged[key] = merged.get(key, np.zeros(len(actions), dtype=bool)) | avail
        rows = [(k, [a for a, ok in zip(actions, avail, strict=True) if ok]) for k, avail in merged.items() if avail.any()]
        if suffix == ".json":
            doc = {
                "features": features,
                "actions": actions,
                "table": [
                    {"state": dict(zip(features, k, strict=True)), "probabilities": {a: 1.0 / len(avail) for a in avail}}
                    for k, avail in rows
                ],
            }
            text = json.dumps(doc, indent=1) + "\n"
        else:
            text = _python_template(summary, features, actions, rows)
    elif suffix == ".json":
        raise OptionError(
            f"--policy-template {path}: {len(states):,} decision states are too many for a table; write a .py template"
        )
    else:
        if model is None:
            raise OptionError(
                f"--policy-template {path}: {len(states):,} decision states are too many to list, and the guards "
                f"cannot be written without the model; use a model with at most {max_rows:,} decision states"
            )
        code = (_guard_code if model.kind == "prism" else _jani_guard_code)(model, features, actions, path)
        _check_guard_code(code, mdp, table, states, features, path)
        text = _python_template(summary, features, actions, None, guard_code=code)
    return write_text(path, text, force=force, what="--policy-template")


def _inert(text: str) -> str:
    """``text`` for a docstring or comment of generated Python: escapes, so that no name (a model path
    with ``\"\"\"`` or a newline) can end the docstring or comment and become code."""
    return repr(str(text))[1:-1].replace('"', '\\"')


def _python_template(
    summary: ModelSummary,
    features: list[str],
    actions: list[str],
    rows: list[tuple[tuple[int, ...], list[str]]] | None,
    *,
    guard_code: str = "",
) -> str:
    lines = [
        f'"""A policy for {_inert(summary.path)}, written by rlverify inspect: replace pi with your own.',
        "",
        "pi maps an (N, len(FEATURES)) array of feature values to (N, len(ACTIONS)) probabilities.",
        "Use it as --policy THIS_FILE.py:pi. Action names are the model's labels, or command names",
        "(MODULE:K, the K-th command of MODULE) where labels do not tell the choices apart.",
        '"""',
        "",
        f"# model: {_one_line(summary.path)}" + (f" ({_one_line(summary.constants)})" if summary.constants else ""),
        "",
        "import numpy as np",
        "",
    ]
    codes = {v["name"]: v["locations"] for v in summary.variables if v.get("locations")}
    for name in features:
        if name in codes:  # a JANI automaton's location: say what each code means
            lines.append(f"# {_inert(name)}: " + ", ".join(f"{i} = {_inert(loc)}" for i, loc in enumerate(codes[name])))
    lines += [f"FEATURES = {features!r}", f"ACTIONS = {actions!r}", ""]
    if rows is None:
        lines += [
            guard_code,
            "",
            "def pi(states):",
            '    """Uniform over the actions available in each state (by the model\'s guards; none: uniform over all)."""',
            "    avail = available(states)",
            "    counts = avail.sum(axis=1, keepdims=True)",
            "    return np.where(counts > 0, avail / np.maximum(counts, 1), 1.0 / len(ACTIONS))",
            "",
        ]
        return "\n".join(lines)
    lines += ["# the actions available in each reachable decision state, keyed by its feature values", "AVAILABLE = {"]
    lines += [f"    {k!r}: {avail!r}," for k, avail in rows]
    lines += [
        "}",
        "",
        "",
        "def pi(states):",
        '    """Uniform over the actions available in each state (a state not listed: uniform over all)."""',
        "    out = np.full((len(states), len(ACTIONS)), 1.0 / len(ACTIONS))",
        "    for i, row in enumerate(np.rint(states).astype(int).tolist()):",
        "        avail = AVAILABLE.get(tuple(row))",
        "        if avail:",
        "            out[i] = [1.0 / len(avail) if a in avail else 0.0 for a in ACTIONS]",
        "    return out",
        "",
    ]
    return "\n".join(lines)


def _one_line(text: Any) -> str:
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


def _guard_code(model: SymbolicModel, features: list[str], actions: list[str], path: Path) -> str:
    """Python source of ``available(states) -> (N, |A|) bool``: each action's availability from the PRISM program's
    guards (constants and formulas substituted), over the features' columns.

    A label is available where every module with it in its alphabet has an enabled command with it; a command
    name ``M:K`` (or ``M:K+N:J``, a synchronised choice) where its commands' guards hold."""
    program = model.program.substitute_constants().substitute_formulas()
    columns = {name: i for i, name in enumerate(features)}
    bools = {v.name for v in program.global_boolean_variables} | {v.name for m in program.modules for v in m.boolean_variables}
    guards: dict[str, str] = {}
    by_label: dict[str, list[list[str]]] = {}
    try:
        for module in program.modules:
            per_label: dict[str, list[str]] = {}
            for k, c in enumerate(module.commands):
                guard = _source(c.guard_expression, columns, bools)
                guards[f"{module.name}:{k + 1}"] = guard
                if c.is_labeled:
                    per_label.setdefault(c.action_name, []).append(guard)
            for label, gs in per_label.items():
                by_label.setdefault(label, []).append(gs)
    except _NoSource as exc:
        raise OptionError(
            f"--policy-template {path}: a guard cannot be written as code ({exc}); use a model with at "
            "most 20,000 decision states"
        ) from None

    return _available_code(
        actions, {label: _every([_either(gs) for gs in per]) for label, per in by_label.items()}, guards, path
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
        lines.append(f"    out[:, {j}] = {expr}  # {_one_line(action)}")
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
        raise OptionError(
            f"--policy-template {path}: a guard cannot be written as code ({exc}); use a model with at "
            "most 20,000 decision states"
        ) from None
    system = read_jani(model.path).get("system", {})
    elements = [e.get("automaton") for e in system.get("elements", [])]
    by_label: dict[str, list[str]] = {}
    for sync in system.get("syncs", []) or []:
        result = sync.get("result")
        if not result:
            continue  # a silent result: its choices are named by command
        parts = [(elements[i], a) for i, a in enumerate(sync.get("synchronise", [])) if a is not None and i < len(elements)]
        if parts and all(p in by_action for p in parts):
            by_label.setdefault(result, []).append(_every([_either(by_action[p]) for p in parts]))
    return _available_code(actions, {label: _either(gs) for label, gs in by_label.items()}, guards, path)


def _jani_edge_guards(
    model: SymbolicModel, program: Any, columns: dict[str, int]
) -> tuple[dict[str, str], dict[tuple[str, str], list[str]]]:
    """The source of each JANI edge's enabledness by its command name, and by (automaton, action) the sources of
    the edges with that action."""
    from rlverify.models.commands import _JANI_SHIFT

    fixed: dict[str, str] = {}  # variables no edge assigns: Storm's builder makes them constants
    for scope in [program.global_variables, *(a.variables for a in program.automata)]:
        for v in scope:
            name = v.expression_variable.name
            if name not in columns and not v.is_transient and v.init_expression is not None and v.init_expression.is_literal():
                fixed[name] = _source(v.init_expression, {}, set())
    bools = set(model.boolean_variables)
    guards: dict[str, str] = {}
    by_action: dict[tuple[str, str], list[str]] = {}
    for ai, automaton in enumerate(program.automata):
        location = automaton.location_variable.name if len(automaton.locations) > 1 else None
        if location is not None and location not in columns:
            raise _NoSource(f"the location of '{automaton.name}' is not a feature")
        for si, edge in enumerate(automaton.edges):
            k = model.command_keys.get((ai << _JANI_SHIFT) | si)
            if k is None:
                raise _NoSource(f"edge {si} of automaton '{automaton.name}' is not matched to the file's")
            guard = _source(edge.guard, columns, bools, fixed)
            if location is not None:
                guard = f"np.logical_and(np.equal(S[:, {columns[location]}], {int(edge.source_location_index)}), {guard})"
            command = model.commands[k]
            guards[command.name] = guard
            if command.action:
                by_action.setdefault((automaton.name, command.action), []).append(guard)
    return guards, by_action


class _NoSource(Exception):
    """An expression :func:`_source` does not write."""


def _source(expr: Any, columns: dict[str, int], bools: set[str], fixed: dict[str, str] | None = None) -> str:
    """numpy source of a Storm expression over ``S`` (``(N, d)`` int64 feature values; booleans as 0/1); ``fixed``:
    the source of variables that are no feature (their constant value)."""
    import stormpy

    op_type = stormpy.expressions.OperatorType
    if expr.is_literal():
        if expr.has_boolean_type():
            return "True" if expr.evaluate_as_bool() else "False"
        if expr.has_integer_type():
            return repr(int(expr.evaluate_as_int()))
        return repr(float(expr.evaluate_as_double()))
    if expr.is_variable():
        name = expr.get_identifier()
        if fixed and name not in columns and name in fixed:
            return fixed[name]
        if name not in columns:
            raise _NoSource(f"the variable '{name}' is not a feature")
        col = f"S[:, {columns[name]}]"
        return f"({col} != 0)" if name in bools else col
    try:
        op = expr.operator
    except Exception:  # e.g. a user-defined function: no operator
        raise _NoSource(f"expression '{expr}'") from None
    args = [_source(expr.get_operand(i), columns, bools, fixed) for i in range(expr.arity)]
    if op == op_type.MINUS and len(args) == 1:
        return f"(-{args[0]})"
    if op == op_type.NOT:
        return f"np.logical_not({args[0]})"
    if op == op_type.ITE:
        return f"np.where({args[0]}, {args[1]}, {args[2]})"
    if op in (op_type.FLOOR, op_type.CEIL):
        return f"np.{'floor' if op == op_type.FLOOR else 'ceil'}({args[0]}).astype(np.int64)"
    if op == op_type.POWER:
        power = f"np.power(np.asarray({args[0]}, dtype=np.float64), {args[1]})"
        return f"np.trunc({power}).astype(np.int64)" if expr.has_integer_type() else power
    binary = {
        op_type.AND: "np.logical_and",
        op_type.OR: "np.logical_or",
        op_type.XOR: "np.logical_xor",
        op_type.IFF: "np.equal",
        op_type.PLUS: "np.add",
        op_type.MINUS: "np.subtract",
        op_type.TIMES: "np.multiply",
        op_type.DIVIDE: "np.true_divide",
        op_type.MIN: "np.minimum",
        op_type.MAX: "np.maximum",
        op_type.MODULO: "np.fmod",
        op_type.EQUAL: "np.equal",
        op_type.NOT_EQUAL: "np.not_equal",
        op_type.LESS: "np.less",
        op_type.LESS_OR_EQUAL: "np.less_equal",
        op_type.GREATER: "np.greater",
        op_type.GREATER_OR_EQUAL: "np.greater_equal",
    }
    if op == op_type.IMPLIES and len(args) == 2:
        return f"np.logical_or(np.logical_not({args[0]}), {args[1]})"
    name = binary.get(op)
    if name is None or len(args) != 2:
        raise _NoSource(f"operator {op} in '{expr}'")
    return f"{name}({args[0]}, {args[1]})"


def _check_guard_code(code: str, mdp: ExplicitModel, table: Any, states: np.ndarray, features: list[str], path: Path) -> None:
    """Run the generated ``available`` on every decision state and compare it with the built MDP's availability."""
    namespace: dict[str, Any] = {"np": np, "ACTIONS": list(table.actions)}
    exec(compile(code, f"<policy template {path}>", "exec"), namespace)  # our own generated source
    for start in range(0, len(states), 200_000):
        chunk = states[start : start + 200_000]
        ours = np.asarray(namespace["available"](mdp.feature_matrix(features, chunk)), dtype=bool)
        theirs = table.available(chunk)
        differ = np.flatnonzero((ours != theirs).any(axis=1))
        if len(differ):
            s = int(chunk[differ[0]])
            raise OptionError(
                f"--policy-template {path}: the guards read do not give the built model's choices in state "
                f"{mdp.valuation_dict(s)}; use a model with at most 20,000 decision states"
            )
