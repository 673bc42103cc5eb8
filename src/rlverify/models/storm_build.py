"""A :class:`~rlverify.models.symbolic.SymbolicModel` built by Storm as an :class:`~rlverify.models.explicit.
ExplicitModel`: Storm's builder with its exploration checks, and without them (retried on a fresh parse) where they
refuse distributions that sum to 1 only up to rounding; the state limit, the memory budget, and the choices' command
names where labels do not tell them apart."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from rlverify.arrays import distinct
from rlverify.errors import ModelError, ModelTooLargeError
from rlverify.models.built_checks import OUT_OF_BOUNDS, OUT_OF_BOUNDS_BIT, distributions_checked, ranges_checked
from rlverify.models.commands import choice_commands
from rlverify.models.constants import parse_constants
from rlverify.models.explicit import ExplicitModel, export_umb, memory_guard, read_umb
from rlverify.models.properties import Property
from rlverify.models.storm import StormMask, StormModel, StormProgram, StormProperty, storm_log_off, storm_message
from rlverify.models.symbolic import ModelFormat, SymbolicModel, instantiate, parse_file

#: properties to build for: rlverify's (:func:`~rlverify.models.property_parser.parse_property`) or Storm's
BuildProperties = Sequence[Property | StormProperty]
#: a memory budget in bytes (None: none) and where its estimates are recorded
_Budget = tuple[int | None, dict[str, int] | None]


def build_explicit(
    model: SymbolicModel,
    properties: BuildProperties | None,
    *,
    max_states: int | None = None,
    mask: StormMask = None,
    command_names: bool | None = None,
    keep_storm: bool = True,
    max_memory: int | None = None,
    memory_estimates: dict[str, int] | None = None,
) -> tuple[ExplicitModel, StormModel]:
    """Build the model with Storm (property-directed when ``properties`` are given) as arrays.

    Property-directed: states that already decide the properties are terminal (absorbing), as in
    Storm's own builder. ``mask`` is an optional ``stormpy.developer.StateValuationFunctionMask``
    restricting the explored choices (on-the-fly construction). ``command_names``: give every choice
    its command name (``ExplicitModel.choice_commands``); None: only where labels do not identify the
    choices (a state with two choices of one label, or an unlabelled choice among several), which
    costs a second build with Storm's choice origins. Returns the explicit model and the stormpy model;
    with ``keep_storm=False`` the stormpy model is freed as soon as it is exported, before its arrays
    are read (peak memory: Storm's build or the arrays, not both), and None is returned in its place.
    ``max_memory`` (bytes): refuse before exporting/reading the arrays when the estimated resident memory
    would exceed it (:func:`~rlverify.models.explicit.memory_guard`; Storm's own build is limited by
    ``max_states`` only); the estimates are recorded in ``memory_estimates``.

    Raises:
        ModelTooLargeError: more than ``max_states`` states would be explored.
        MemoryBudgetError: a phase would exceed ``max_memory``.
    """
    budget = (max_memory, memory_estimates)
    if command_names is None and sum(1 for c in model.commands if not c.action) >= 2:
        # two unlabelled commands: a state with an unlabelled choice among several is all but certain, and finding
        # it after the build would cost a second build (csma: 2 x 0.27 s); so build with Storm's choice origins at
        # once and drop the names where labels do tell the choices apart (the same model as the label-only build)
        explicit, storm_model = _build(model, properties, max_states, mask, True, keep_storm, budget)
        if not ambiguous_choices(explicit):
            explicit = replace(explicit, choice_commands=None, command_names=())
        return explicit, storm_model
    explicit, storm_model = _build(model, properties, max_states, mask, bool(command_names), keep_storm, budget)
    if command_names is None and ambiguous_choices(explicit):
        del explicit, storm_model
        explicit, storm_model = _build(model, properties, max_states, mask, True, keep_storm, budget)
    return explicit, storm_model


def ambiguous_choices(model: ExplicitModel) -> bool:
    """Whether some state has two choices with one action label, or an unlabelled choice among several."""
    cs = model.choice_states()
    A = len(model.action_names)
    keys = cs * A + model.choice_actions
    if len(distinct(keys)) != len(keys):
        return True
    unlabelled = np.array([not a for a in model.action_names], dtype=bool)[model.choice_actions]
    several = np.diff(model.row_groups) > 1
    return bool(several[cs[unlabelled]].any())


def _fresh_program(model: SymbolicModel) -> tuple[StormProgram, dict[str, StormProperty]]:
    """A fresh parse of the model's file with its constants defined, and (JANI) its properties by name."""
    given = parse_constants(model.constants)
    try:
        program, by_name = parse_file(model.path, model.kind)
        return (instantiate(program, given) if given else program), by_name
    except (RuntimeError, OSError) as exc:
        raise ModelError(
            f"{model.shown}: cannot read the model file again to build it (was it changed or removed "
            f"since it was loaded?): {storm_message(exc)}"
        ) from None


def _fresh_property(
    model: SymbolicModel, p: Property | StormProperty, program: StormProgram, by_name: dict[str, StormProperty]
) -> StormProperty:
    """Property ``p`` parsed against a fresh ``program`` (a JANI file's property by name, a typed one from its text)."""
    import stormpy  # lazy: stormpy, start-up

    if not isinstance(p, Property):
        raise ModelError("build_explicit: give properties as rlverify Property objects (parse_property)")
    if model.kind is ModelFormat.JANI and p.name is not None and p.name in by_name:
        return by_name[p.name]
    return stormpy.parse_properties(p.text, program)[0]


def _build_input(model: SymbolicModel, properties: BuildProperties | None) -> tuple[StormProgram, list[StormProperty] | None]:
    """The program and property formulas to give Storm's builder.

    Storm's builder declares a variable for its out-of-bounds state in the program's expression manager, once:
    a second such build of the same program would fail. The first build uses the loaded program and properties;
    later ones a fresh parse of the file with the same constants, and the properties parsed against it (a JANI
    file's property by name, a typed property from its text)."""
    if not model.program.expression_manager.has_variable(OUT_OF_BOUNDS_BIT):
        storm_props = [p.storm if isinstance(p, Property) else p for p in properties] if properties else None
        return model.program, storm_props
    program, by_name = _fresh_program(model)
    if not properties:
        return program, None
    return program, [_fresh_property(model, p, program, by_name) for p in properties]


@dataclass(frozen=True)
class _Request:
    """What one build asks of Storm's builder."""

    model: SymbolicModel
    properties: BuildProperties | None
    mask: StormMask
    explore: object  # stormpy.developer.ExplicitModelBuilderOptions
    origins: bool

    def options(self, storm_properties: list[StormProperty] | None, checked: bool) -> object:
        """Storm's builder options: what the arrays need; choice origins (costly) only where commands must be named;
        ``checked``: Storm's exploration checks, else out-of-range updates to a labelled state, refused once built."""
        import stormpy  # lazy: stormpy, start-up

        opts = stormpy.BuilderOptions(storm_properties) if storm_properties else stormpy.BuilderOptions()
        opts.set_build_state_valuations()
        opts.set_build_choice_labels()
        opts.set_build_all_labels()
        opts.set_build_all_reward_models()
        if self.origins:
            opts.set_build_choice_origins()
        if checked:
            opts.set_exploration_checks(True)
        elif OUT_OF_BOUNDS not in self.model.labels:
            opts.set_add_out_of_bounds_state()
        return opts

    def build(self, program: StormProgram, storm_properties: list[StormProperty] | None, checked: bool) -> StormModel:
        """Storm's build of ``program`` (Storm's ``RuntimeError`` raised as it is)."""
        import stormpy.developer as dev  # lazy: stormpy, start-up

        description = dev.SymbolicModelDescription(program)
        builder = dev.make_explicit_model_builder[float](
            description, self.options(storm_properties, checked), self.mask, self.explore
        )
        return builder.build()


def _refused(model: SymbolicModel, exc: RuntimeError, properties: BuildProperties | None) -> ModelError | None:
    """The error for Storm's checked build refused with ``exc``; None where it refused only distributions that sum
    to 1 up to rounding (built again unchecked)."""
    message = storm_message(exc)
    if "out-of-bounds value" in message:
        return ModelError(
            f"{model.shown}: {message.rstrip('.')} (PRISM, JANI and Storm's checks refuse this; rlverify "
            "does not wrap the value around): guard the update or widen the range"
        )
    if "ExprTk" in message:  # a deep expression the nesting check let through (a label, reward, state formula)
        cause = message.rsplit("Returned error:", 1)[-1].strip(" ).")[:160]
        return ModelError(
            f"{model.shown}: an expression of {'the properties or ' if properties else ''}the model's labels "
            f"or rewards is too deep for Storm's ExprTk evaluator ({cause}); split it"
        )
    if "sum to one" not in message and "some to one" not in message:
        return _not_built(model, exc)
    return None


def _not_built(model: SymbolicModel, exc: RuntimeError) -> ModelError:
    return ModelError(f"{model.shown}: Storm could not build the model: {storm_message(exc, limit=600)}")


def _storm_model(request: _Request) -> tuple[StormModel, list[StormProperty] | None, bool]:
    """Storm's build with its exploration checks, or (where they refuse distributions that sum to 1 only up to
    rounding: 0.1 + 0.2 + 0.7, in Avoid, Freeway and the PPDDL models) again without them, on a fresh program (Storm
    wraps an out-of-range value into the variable's bits then: the arrays are range-checked); with the properties
    built for and whether the checks ran."""
    model, properties = request.model, request.properties
    program, storm_properties = _build_input(model, properties)
    with storm_log_off():  # a refused attempt is reported by rlverify (or retried), not logged by Storm
        try:
            return request.build(program, storm_properties, True), storm_properties, True
        except RuntimeError as exc:
            refused = _refused(model, exc, properties)
            if refused is not None:
                raise refused from None
        program, storm_properties = _build_input(model, properties)
        try:
            return request.build(program, storm_properties, False), storm_properties, False
        except RuntimeError as exc2:
            raise _not_built(model, exc2) from None


def _refuse_too_large(model: SymbolicModel, storm_model: StormModel, max_states: int | None) -> None:
    """Refuse a build whose exploration stopped at the state limit ``max_states``."""
    if max_states is None or storm_model.nr_states <= max_states:
        return
    smaller = (
        ", or (verify, PRISM models) use --strategy merged or onthefly with a policy to explore only policy-reachable states"
        if model.kind is ModelFormat.PRISM
        else ""
    )
    raise ModelTooLargeError(
        f"{model.shown}: the model has more than --max-states={max_states} states "
        f"(exploration stopped at {storm_model.nr_states}); raise --max-states{smaller}"
    )


def _build(
    model: SymbolicModel,
    properties: BuildProperties | None,
    max_states: int | None,
    mask: StormMask,
    origins: bool,
    keep_storm: bool = True,
    budget: _Budget = (None, None),
) -> tuple[ExplicitModel, StormModel]:
    """One build (see :func:`build_explicit`); ``origins``: with Storm's choice origins, naming every choice's command."""
    import stormpy.developer as dev  # lazy: stormpy, start-up

    explore = dev.ExplicitModelBuilderOptions[float]()
    if max_states is not None:
        explore.exploration_state_limit = int(max_states) + 1
    storm_model, storm_properties, checked = _storm_model(_Request(model, properties, mask, explore, origins))
    _refuse_too_large(model, storm_model, max_states)
    counts = {"states": storm_model.nr_states, "transitions": storm_model.nr_transitions, "what": "MDP transitions"}
    memory_guard(budget[0], "export", **counts, estimates=budget[1])
    with tempfile.TemporaryDirectory(prefix="rlverify-") as tmp:
        path = Path(tmp) / "model.umb"
        export_umb(storm_model, path)
        if not (keep_storm or origins):
            del storm_model  # Storm's copy goes before the arrays are read (stormpy frees it here)
            memory_guard(budget[0], "read", **counts, estimates=budget[1])
            explicit = distributions_checked(read_umb(path), model.path, model)
            return (explicit if checked else ranges_checked(explicit, model, storm_properties)), None
        explicit = distributions_checked(read_umb(path), model.path, model)
    if not checked:
        explicit = ranges_checked(explicit, model, storm_properties)
    if origins:
        labels = np.asarray(explicit.action_names, dtype=object)[explicit.choice_actions]
        ids, names = choice_commands(storm_model, model.commands, model.command_keys, labels)
        explicit = replace(explicit, choice_commands=ids, command_names=names)
    return explicit, (storm_model if keep_storm else None)
