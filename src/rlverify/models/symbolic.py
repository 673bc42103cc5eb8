"""PRISM and JANI models through stormpy: the :class:`SymbolicModel` type and :func:`load_model`, which reads a file,
refuses what rlverify does not verify, defines its constants and names its variables, actions, labels and commands.

Only this package, :mod:`rlverify.exact` and :mod:`rlverify.abstraction` import stormpy. Properties are parsed
against a model in :mod:`rlverify.models.property_parser`, and models built in :mod:`rlverify.models.storm_build`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from rlverify.errors import ConstantsError, InputFileError, ModelError, did_you_mean
from rlverify.files import check_input
from rlverify.models.commands import Command, jani_commands, prism_commands
from rlverify.models.constants import constant_values, parse_constants
from rlverify.models.divisions import Located, jani_expressions, prism_expressions, refuse_division_by_zero
from rlverify.models.jani import Json, read_jani
from rlverify.models.jani_checks import check_jani_supported
from rlverify.models.prism_text import check_prism_text, declared_type, declared_variables, parse_prism_file
from rlverify.models.storm import (
    StormDescription,
    StormProgram,
    StormProperty,
    StormVariable,
    constant_value,
    is_initialized,
    storm_log_off,
    storm_message,
)


class ModelFormat(StrEnum):
    """The language of a model file (a string: ``"prism"``, ``"jani"``)."""

    PRISM = "prism"
    JANI = "jani"

    @classmethod
    def of(cls, path: Path) -> ModelFormat:
        """The format of ``path`` by its extension (``.jani``: JANI; the others PRISM)."""
        return cls.JANI if path.suffix.lower() == ".jani" else cls.PRISM

    @property
    def language(self) -> str:
        """The language as messages name it (``PRISM``, ``JANI``)."""
        return self.value.upper()


@dataclass
class SymbolicModel:
    """A parsed PRISM program or JANI model with all constants defined.

    Attributes:
        path: the source file.
        kind: :class:`ModelFormat` (a string: ``"prism"`` or ``"jani"``).
        model_type: ``"mdp"`` or ``"dtmc"`` (others are rejected at load).
        variables: state variable names (as Storm keeps them: never-updated variables are dropped
            from built valuations). JANI: as Storm names them in the states it builds: an automaton's
            local variable ``p`` of automaton ``a`` is ``a_p``, and each automaton with several
            locations adds its location ``_loc_AUTOMATON`` (first; codes in :attr:`locations`).
        boolean_variables: the subset of ``variables`` that are booleans (features 0/1).
        action_names: action labels of the commands/edges (``""`` for unlabelled ones).
        labels: label names defined in the file.
        reward_models: reward model names defined in the file (``""`` for an unnamed one).
        constants: the constant definitions applied, as given.
        file_properties: properties defined in a JANI file (name -> text).
        locations: JANI automata with more than one location: the location's feature name (Storm's
            ``_loc_AUTOMATON``, a policy feature like any variable) -> the location names by code
            (code = position in the automaton's ``locations``, as in the file).
        name: what messages call the model when not its file: a benchmark and its parameters (its file is a
            private temporary one); see :attr:`shown`.
        unassigned: PRISM variables declared in the file but never assigned: Storm's parser makes each a constant
            (its initial value), so it is no state variable and no policy feature.
    """

    path: Path
    kind: ModelFormat
    program: StormProgram
    model_type: str
    variables: tuple[str, ...]
    boolean_variables: tuple[str, ...]
    action_names: tuple[str, ...]
    labels: tuple[str, ...]
    reward_models: tuple[str, ...]
    constants: str
    file_properties: dict[str, StormProperty]
    parse_seconds: float = 0.0
    #: every command/edge with its name (see :mod:`rlverify.models.commands`), and Storm's origin index -> position
    commands: tuple[Command, ...] = ()
    command_keys: dict[int, int] = field(default_factory=dict, repr=False)
    locations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    name: str = ""
    unassigned: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """The model as messages name it: :attr:`name`, else its file."""
        return self.name or str(self.path)

    def initial_valuation(self) -> dict[str, int] | None:
        """Variable -> initial value when every variable has a constant initial value (PRISM), else None."""
        if self.kind is not ModelFormat.PRISM or self.program.has_initial_states_expression:
            return None
        p = self.program.substitute_constants()
        out: dict[str, int | None] = {}
        ints, bools = prism_variables(p)
        for v in ints:
            out[v.name] = constant_value(v.initial_value_expression)
        for v in bools:
            out[v.name] = constant_value(v.initial_value_expression, as_bool=True)
        constant = {name: x for name, x in out.items() if x is not None}
        return constant if len(constant) == len(out) else None

    def description(self) -> StormDescription:
        """Storm's description of the program (what its builders take)."""
        import stormpy.developer as dev  # lazy: stormpy, start-up

        return dev.SymbolicModelDescription(self.program)


def prism_variables(program: StormProgram) -> tuple[list[StormVariable], list[StormVariable]]:
    """A Storm PRISM program's integer and boolean variables: the global ones, then each module's."""
    ints = [*program.global_integer_variables, *(v for m in program.modules for v in m.integer_variables)]
    bools = [*program.global_boolean_variables, *(v for m in program.modules for v in m.boolean_variables)]
    return ints, bools


#: why a model type rlverify does not take has no policy to verify (the others: continuous time)
_CONTINUOUS_TIME = "continuous-time models and Markov automata have no discrete-step policy semantics"
_UNSUPPORTED_TYPES = {
    "pta": "a probabilistic timed automaton's clocks run in real time, with no discrete step for a policy to act in",
    "smg": "a stochastic game's players choose against each other; model one player's choices as an MDP",
    "pomdp": "a POMDP's policy sees observations, not states",
}
#: each format's expressions with where they are (for the division-by-zero check)
_EXPRESSIONS: dict[ModelFormat, Callable[[StormProgram], Iterator[Located]]] = {
    ModelFormat.PRISM: prism_expressions,
    ModelFormat.JANI: jani_expressions,
}


@dataclass(frozen=True)
class _Names:
    """What a model names: its state variables (integers, booleans), actions, labels, reward models, JANI location
    features and PRISM variables never assigned."""

    ints: list[str]
    bools: list[str]
    actions: list[str]
    labels: tuple[str, ...]
    rewards: tuple[str, ...]
    locations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unassigned: tuple[str, ...] = ()


def property_name(prop: StormProperty) -> str:
    """A JANI property's name (stormpy 2.0 spells it ``get_name()``; older versions ``name``)."""
    getter = getattr(prop, "get_name", None)
    return getter() if callable(getter) else prop.name


def parse_file(path: Path, fmt: ModelFormat) -> tuple[StormProgram, dict[str, StormProperty]]:
    """Storm's parse of a model file, and (JANI) the file's properties by name."""
    if fmt is ModelFormat.PRISM:
        return parse_prism_file(path), {}
    import stormpy  # lazy: stormpy, start-up

    program, props = stormpy.parse_jani_model(str(path))
    return program, {property_name(p): p for p in props}


def instantiate(program: StormProgram, given: Mapping[str, str]) -> StormProgram:
    """``program`` with the ``given`` constants defined (Storm's errors raised as they are)."""
    import stormpy  # lazy: stormpy, start-up

    instantiated, _ = stormpy.instantiate_constants(program, constant_values(program, given))
    return instantiated


def _check_readable(path: Path) -> None:
    """Refuse a model file that is missing, no regular file, of an unknown extension or unreadable."""
    check_input(path, "model file")
    try:
        path.open("rb").close()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read model file ({exc.strerror})") from None


def _read_jani_checked(path: Path) -> Json:
    """A JANI file's JSON, refused where rlverify does not support what it declares."""
    data = read_jani(path)
    check_jani_supported(path, data)
    return data


def _parse(path: Path, fmt: ModelFormat, given: Mapping[str, str]) -> tuple[StormProgram, dict[str, StormProperty], bool]:
    """Storm's parse of the file (a PRISM file's text checked first), its properties by name, and whether every
    divisor of a PRISM file's text was a constant judged already (:func:`~rlverify.models.prism_text.check_prism_text`).
    """
    try:
        judged = check_prism_text(path, given) if fmt is ModelFormat.PRISM else False
        with storm_log_off():
            program, props = parse_file(path, fmt)
    except RuntimeError as exc:
        raise ModelError(f"{path}: {fmt.language} syntax error: {storm_message(exc)}") from None
    except UnicodeDecodeError:  # Storm's message quotes the file's bytes, which are not text
        raise ModelError(
            f"{path}: not a {fmt.language} file (Storm's parser stopped at bytes that are not UTF-8 text)"
        ) from None
    return program, props, judged


def _check_constant_names(path: Path, program: StormProgram, given: Mapping[str, str]) -> None:
    """Refuse a given constant the model does not declare (then one left undefined: :func:`_check_defined`)."""
    defined_names = {c.name for c in program.constants}
    unknown = [k for k in given if k not in defined_names]
    if unknown:
        k = unknown[0]
        raise ConstantsError(
            f"{path}: unknown constant '{k}'{did_you_mean(k, defined_names)}; "
            f"the model declares: {', '.join(sorted(defined_names)) or 'no constants'}"
        )
    _check_defined(path, program, given)


def _check_defined(path: Path, program: StormProgram, given: Mapping[str, str]) -> None:
    """Refuse a constant of the model that neither the file nor ``given`` defines (all of them listed)."""
    undefined = [c.name for c in program.constants if not c.defined]
    missing = [c for c in undefined if c not in given]
    if missing:
        raise ConstantsError(
            f"{path}: undefined constants {', '.join(missing)}; pass --constants " + ",".join(f"{c}=VALUE" for c in missing),
            missing=missing,
        )


def _instantiated(path: Path, program: StormProgram, given: Mapping[str, str]) -> StormProgram:
    """``program`` with the ``given`` constants defined (``program`` where none are given)."""
    from stormpy.exceptions import StormError  # lazy: stormpy, start-up

    if not given:
        return program
    try:
        with storm_log_off():
            return instantiate(program, given)
    except (RuntimeError, ValueError, TypeError, StormError) as exc:
        raise ConstantsError(
            f"{path}: cannot define constants {given}: {storm_message(exc)} (values must be "
            "numbers, true/false, or rationals like 1/10)"
        ) from None


def _model_type(path: Path, program: StormProgram) -> str:
    """``"mdp"`` or ``"dtmc"``; any other type refused, saying why it has no policy to verify."""
    try:
        model_type = str(program.model_type).rsplit(".", 1)[-1].lower()
    except ValueError:  # a type stormpy's enumeration lacks (PRISM's pta and smg: "7 is not a valid PrismModelType")
        model_type = declared_type(path)
    if model_type not in ("mdp", "dtmc"):
        why = _UNSUPPORTED_TYPES.get(model_type, _CONTINUOUS_TIME)
        raise ModelError(f"{path}: model type {model_type.upper()} is not supported (rlverify takes an MDP or a DTMC; {why})")
    return model_type


def _prism_names(path: Path, program: StormProgram, as_parsed: StormProgram) -> _Names:
    """What a PRISM program names (``as_parsed``: before its constants were defined, to find the variables Storm's
    parser made constants)."""
    ints, bools = prism_variables(program)
    declared = declared_variables(path)
    return _Names(
        ints=[v.name for v in ints],
        bools=[v.name for v in bools],
        actions=sorted({c.action_name for m in program.modules for c in m.commands}),
        labels=tuple(lab.name for lab in program.labels),
        rewards=tuple(r.name for r in program.reward_models),
        unassigned=tuple(c.name for c in as_parsed.constants if c.name in declared),
    )


def _jani_locations(program: StormProgram) -> dict[str, tuple[str, ...]]:
    """Each automaton with several locations: its location feature -> the location names by code."""
    locations: dict[str, tuple[str, ...]] = {}
    for automaton in program.automata:
        names = [loc.name for loc in automaton.locations]
        if len(names) > 1:
            locations[automaton.location_variable.name] = tuple(sorted(names, key=automaton.get_location_index))
    return locations


def _jani_assigned(program: StormProgram) -> set[str]:
    """The variables some edge of a Storm JANI model assigns."""
    return {
        a.variable.expression_variable.name
        for automaton in program.automata
        for edge in automaton.edges
        for a in (*edge.template_edge.assignments, *(x for d in edge.template_edge.destinations for x in d.assignments))
    }


def _jani_actions(data: Json) -> list[str]:
    """A JANI file's action names, sorted, and ``""`` where some edge has no action."""
    actions = sorted({a["name"] for a in data.get("actions", [])})
    if any("action" not in e for a in data.get("automata", []) for e in a.get("edges", [])):
        actions.append("")
    return actions


def _jani_names(data: Json, program: StormProgram) -> _Names:
    """State variables, actions, labels (transient booleans), reward names (transient numbers) and location
    features of a JANI model, named as Storm names them in the states it builds.

    Storm names an automaton's local variable ``AUTOMATON_VAR`` (``p`` of automaton ``agent`` is
    ``agent_p``) and an automaton's location ``_loc_AUTOMATON`` (an integer code: the location's
    position in the file); the state valuations, hence the policy features, carry these names.
    Automata with a single location add no feature. A variable with an initial value that no edge assigns is not a
    feature either: Storm's builder replaces it by that value (a constant), so its states do not carry it.
    """
    locations = _jani_locations(program)
    ints: list[str] = list(locations)
    bools: list[str] = []
    labels: list[str] = []
    rewards: list[str] = []
    assigned = _jani_assigned(program)
    for v in [*program.global_variables, *(v for a in program.automata for v in a.variables)]:
        name = v.expression_variable.name
        is_bool = str(v.type) == "bool"
        if v.is_transient:
            (labels if is_bool else rewards).append(name)
        elif name in assigned or not is_initialized(v.init_expression):
            (bools if is_bool else ints).append(name)
    return _Names(ints, bools, _jani_actions(data), tuple(labels), tuple(rewards), locations)


def load_model(path: str | Path, constants: str | Mapping[str, object] | None = None) -> SymbolicModel:
    """Parse a PRISM (``.prism``, ``.pm``, ``.nm``) or JANI (``.jani``) file and define its constants.

    Raises:
        InputFileError: missing/unreadable file or unknown extension.
        ModelError: syntax error (Storm's message, with line and column), or a model type other
            than MDP/DTMC (CTMCs and Markov automata are not policy-controlled MDPs).
        ConstantsError: undefined constants (all listed) or unknown constant names.
    """
    import stormpy  # noqa: F401  # lazy: stormpy, start-up; imported before the clock starts, as parse_seconds is the parse

    started = time.perf_counter()
    path = Path(path)
    _check_readable(path)
    given = parse_constants(constants)
    fmt = ModelFormat.of(path)
    jani_data = _read_jani_checked(path) if fmt is ModelFormat.JANI else None
    as_parsed, file_props, divisions_judged = _parse(path, fmt, given)
    _check_constant_names(path, as_parsed, given)
    # (as_parsed: the file's edges as Storm parsed them, matched to the file before constants are substituted)
    program = _instantiated(path, as_parsed, given)
    model_type = _model_type(path, program)
    if not divisions_judged:  # (a PRISM file whose every divisor was a constant: judged already)
        refuse_division_by_zero(path, _EXPRESSIONS[fmt](program.substitute_constants()))
    if fmt is ModelFormat.PRISM:
        names = _prism_names(path, program, as_parsed)
        commands, keys = prism_commands(program)
    else:
        names = _jani_names(jani_data, program)
        commands, keys = jani_commands(path, as_parsed, jani_data)
    return SymbolicModel(
        path=path,
        kind=fmt,
        program=program,
        model_type=model_type,
        variables=tuple(names.ints + names.bools),
        boolean_variables=tuple(names.bools),
        action_names=tuple(names.actions),
        labels=names.labels,
        reward_models=names.rewards,
        constants=",".join(f"{k}={v}" for k, v in given.items()),
        file_properties=file_props,
        parse_seconds=time.perf_counter() - started,
        commands=commands,
        command_keys=keys,
        locations=names.locations,
        unassigned=names.unassigned,
    )
