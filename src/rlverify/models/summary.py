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
from rlverify.files import check_target, write_text
from rlverify.models.dynamics import ChoiceTable, agent_actions, choice_table
from rlverify.models.explicit import ExplicitModel
from rlverify.models.guard_code import check_guard_code, guard_code, one_line
from rlverify.models.jani import Json, read_jani
from rlverify.models.storm import constant_value
from rlverify.models.storm_build import build_explicit
from rlverify.models.symbolic import ModelFormat, SymbolicModel

#: the most initial states listed
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
        kind=model.kind.value,
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
    """The ``variables`` of :class:`ModelSummary` (see there)."""
    if model.kind is ModelFormat.PRISM:
        return _prism_variables(model)
    data = read_jani(model.path)
    return [*_jani_locations(model, data), *_jani_variables(model, data)]


def _prism_variables(model: SymbolicModel) -> list[dict[str, Any]]:
    """A PRISM program's variables: global ones, then each module's; integers, then booleans."""
    p = model.program.substitute_constants()
    has_init = not p.has_initial_states_expression  # an init...endinit block: no per-variable initial values
    scopes = [("", p.global_integer_variables, p.global_boolean_variables)]
    scopes += [(m.name, m.integer_variables, m.boolean_variables) for m in p.modules]
    out = []
    for module, ints, bools in scopes:
        for v in ints:
            low, high = constant_value(v.lower_bound_expression), constant_value(v.upper_bound_expression)
            init = constant_value(v.initial_value_expression) if has_init else None
            out.append({"name": v.name, "type": "int", "module": module, "low": low, "high": high, "init": init})
        for v in bools:
            init = constant_value(v.initial_value_expression, as_bool=True) if has_init else None
            out.append({"name": v.name, "type": "bool", "module": module, "low": 0, "high": 1, "init": init})
    return out


def _jani_locations(model: SymbolicModel, data: Json) -> list[dict[str, Any]]:
    """The location feature of each JANI automaton with several locations."""
    out = []
    for a in data.get("automata", []):
        feature = f"_loc_{a['name']}"
        if feature not in model.locations:
            continue
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
    return out


def _jani_declared_bounds(vtype: Json) -> tuple[int | bool | None, int | bool | None]:
    """A JANI variable type's bounds as written (``(0, 1)`` for a boolean; None where an expression or none)."""
    base = vtype.get("base") if isinstance(vtype, dict) else vtype
    if base == "bool":
        return 0, 1
    if not isinstance(vtype, dict):
        return None, None
    return _literal(vtype.get("lower-bound")), _literal(vtype.get("upper-bound"))


def _jani_variable(
    v: Json, name: str, module: str, evaluated: tuple[int | None, int | None, int | None] | None
) -> dict[str, Any]:
    """One JANI state variable's entry: bounds and initial value as written, else as evaluated (``evaluated``)."""
    vtype = v.get("type")
    base = vtype.get("base") if isinstance(vtype, dict) else vtype
    low, high = _jani_declared_bounds(vtype)
    init = _literal(v.get("initial-value"))
    if evaluated is not None:  # bounds and initial values written as expressions (over constants)
        pairs = zip((low, high, init), evaluated, strict=True)
        low, high, init = (known if mine is None else mine for mine, known in pairs)
    return {
        "name": name,
        "type": "bool" if base == "bool" else "int",
        "module": module,
        "low": low,
        "high": high,
        "init": int(init) if init is not None else None,
    }


def _jani_variables(model: SymbolicModel, data: Json) -> list[dict[str, Any]]:
    """A JANI model's state variables: global ones, then each automaton's (transient and never assigned ones left
    out: Storm's builder makes the latter constants, no features)."""
    evaluated = _jani_values(model)
    scopes = [("", data.get("variables", [])), *((a["name"], a.get("variables", [])) for a in data.get("automata", []))]
    out = []
    for module, declared in scopes:
        for v in declared:
            name = f"{module}_{v['name']}" if module else v["name"]  # Storm's name of a local variable
            if not v.get("transient") and name in model.variables:
                out.append(_jani_variable(v, name, module, evaluated.get(name)))
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
        rows = _rows(mdp, table, states, features, actions)
        text = (
            _json_table(features, actions, rows) if suffix == ".json" else _python_template(summary, features, actions, rows)
        )
    elif suffix == ".json":
        raise OptionError(
            f"--policy-template {path}: {len(states):,} decision states are too many for a table; write a .py template"
        )
    else:
        text = _guarded_template(path, summary, mdp, table, states, model, max_rows)
    return write_text(path, text, force=force, what="--policy-template")


#: one row per observation: its feature values and the actions available in it
_Rows = list[tuple[tuple[int, ...], list[str]]]


def _rows(mdp: ExplicitModel, table: ChoiceTable, states: np.ndarray, features: list[str], actions: list[str]) -> _Rows:
    """One row per observation: states that look alike to the policy share it (union of their choices); observations
    with no choice left out."""
    values = mdp.feature_matrix(features, states).astype(np.int64)
    available = table.available(states)
    merged: dict[tuple[int, ...], np.ndarray] = {}
    for key, avail in zip(map(tuple, values.tolist()), available, strict=True):
        merged[key] = merged.get(key, np.zeros(len(actions), dtype=bool)) | avail
    return [(k, [a for a, ok in zip(actions, avail, strict=True) if ok]) for k, avail in merged.items() if avail.any()]


def _json_table(features: list[str], actions: list[str], rows: _Rows) -> str:
    """A ``.json`` table policy uniform over each row's actions."""
    doc = {
        "features": features,
        "actions": actions,
        "table": [
            {"state": dict(zip(features, k, strict=True)), "probabilities": {a: 1.0 / len(avail) for a in avail}}
            for k, avail in rows
        ],
    }
    return json.dumps(doc, indent=1) + "\n"


def _guarded_template(
    path: Path,
    summary: ModelSummary,
    mdp: ExplicitModel,
    table: ChoiceTable,
    states: np.ndarray,
    model: SymbolicModel | None,
    max_rows: int,
) -> str:
    """A ``.py`` template evaluating the model's guards (checked on every decision state)."""
    if model is None:
        raise OptionError(
            f"--policy-template {path}: {len(states):,} decision states are too many to list, and the guards "
            f"cannot be written without the model; use a model with at most {max_rows:,} decision states"
        )
    features, actions = list(summary.features), list(summary.actions)
    code = guard_code(model, features, actions, path)
    check_guard_code(code, mdp, table, states, features, path)
    return _python_template(summary, features, actions, None, guard_code=code)


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
        f"# model: {one_line(summary.path)}" + (f" ({one_line(summary.constants)})" if summary.constants else ""),
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
