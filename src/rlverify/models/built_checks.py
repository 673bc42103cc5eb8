"""A model Storm built without its own exploration checks, checked as PRISM and Storm's checks would: no update
leaves its variable's range (Storm's out-of-bounds state; a PRISM program's commands evaluated in every state; a
JANI model's edges evaluated in the state found), and every choice is a probability distribution."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from rlverify.errors import ModelError
from rlverify.models.explicit import ExplicitModel
from rlverify.models.program import Unsupported, check_update_ranges, compiled, terminal_functions
from rlverify.models.storm import StormExpression, StormProgram, StormProperty
from rlverify.models.symbolic import ModelFormat, SymbolicModel

log = logging.getLogger("rlverify.models.symbolic")  # (the name its warnings have always had)

#: the label of the state Storm's builder sends out-of-range updates to (``BuilderOptions.set_add_out_of_bounds_state``)
OUT_OF_BOUNDS = "out_of_bounds"
#: the valuation bit Storm adds for that state
OUT_OF_BOUNDS_BIT = "_OutOfBoundsBit"

_PRISM_UNCHECKED = (
    "the updates' ranges were checked only where Storm reports them ({}): an update of synchronised commands leaving "
    "its variable's range may have wrapped around"
)
_JANI_UNCHECKED = (
    "the updates' ranges were checked only where Storm reports them (its own checks refuse this model's "
    "probabilities, which sum to 1 only up to rounding): an update of synchronised edges leaving its "
    "variable's range may have wrapped around"
)


def _prism_ranges_note(explicit: ExplicitModel, model: SymbolicModel, properties: list[StormProperty] | None) -> str | None:
    """Refuse an update of a PRISM program leaving its variable's range in a state of ``explicit``; the note to give
    where the program's commands could not all be evaluated, else None."""
    try:
        program = compiled(model.program, model.shown)
        terminal = (
            terminal_functions(properties[0].get_raw_formula(), program.label_functions.get, program.by_name)
            if properties and len(properties) == 1
            else []
        )
        check_update_ranges(program, explicit.variables, explicit.valuations, terminal)
    except Unsupported as exc:
        return _PRISM_UNCHECKED.format(exc)
    return None


def ranges_checked(explicit: ExplicitModel, model: SymbolicModel, properties: list[StormProperty] | None) -> ExplicitModel:
    """``explicit`` (built without Storm's exploration checks) after refusing an update that leaves its variable's
    range: a PRISM program's commands are evaluated in every expanded state (:func:`~rlverify.models.program.
    check_update_ranges`); Storm's out-of-bounds state (:func:`distributions_checked`) covers the rest, but not every
    synchronised update, which the returned model's ``notes`` then say."""
    note = None
    if model.kind is ModelFormat.PRISM:
        note = _prism_ranges_note(explicit, model, properties)
    elif len(model.program.automata) > 1:
        note = _JANI_UNCHECKED
    if note is not None:
        log.warning("%s: %s", model.path, note)
        explicit = replace(explicit, notes=(*explicit.notes, note))
    return explicit


def _out_of_range_update(model: SymbolicModel, valuation: dict[str, int]) -> str | None:
    """Which command writes which value outside which variable's range in the state ``valuation`` (a PRISM
    program's commands evaluated there, :mod:`rlverify.models.program`), as a message; None if not found."""
    if model.kind is not ModelFormat.PRISM:
        return _out_of_range_edge(model, valuation)
    try:
        program = compiled(model.program, model.shown)
        row = np.asarray([[valuation[v.name] for v in program.variables]], dtype=np.int64)
        program.check(row)
    except ModelError as exc:
        if "outside its range" in str(exc):
            return f"{exc} (PRISM and Storm's checks refuse this; rlverify does not wrap the value around)"
        return None
    except (Unsupported, KeyError, ValueError, RuntimeError):
        return None
    return None


def _substitution(program: StormProgram, model: SymbolicModel, valuation: dict[str, int]) -> dict[object, object]:
    """Storm's substitution of ``valuation``'s values for the variables of JANI ``program``."""
    manager = program.expression_manager
    subst: dict[object, object] = {}
    for name, value in valuation.items():
        if manager.has_variable(name):
            variable = manager.get_variable(name)
            subst[variable] = manager.boolean(bool(value)) if name in model.boolean_variables else manager.integer(int(value))
    return subst


def _bounds(program: StormProgram) -> dict[str, tuple[int, int]]:
    """The range of each bounded state variable of JANI ``program``."""
    bounds = {}
    for v in list(program.global_variables) + [v for a in program.automata for v in a.variables]:
        if v.type.is_bounded_type and not v.is_transient:
            bounds[v.expression_variable.name] = (
                int(v.type.lower_bound.evaluate_as_int()),
                int(v.type.upper_bound.evaluate_as_int()),
            )
    return bounds


def _edge_assignments(edge: StormExpression, subst: dict[object, object]) -> Iterator[tuple[str, StormExpression]]:
    """The assignments ``(variable, expression)`` of ``edge``'s destinations of positive probability under ``subst``."""
    for d, td in zip(edge.destinations, edge.template_edge.destinations, strict=True):
        if float(d.probability.substitute(subst).evaluate_as_double()) > 0:
            yield from ((a.variable.expression_variable.name, a.expression) for a in td.assignments)


def _out_of_range_edge(model: SymbolicModel, valuation: dict[str, int]) -> str | None:
    """:func:`_out_of_range_update` for a JANI model: its edges enabled in ``valuation`` (location and guard) and
    their destinations' assignments, evaluated by Storm; None if none leaves a bounded variable's range."""
    try:
        program = model.program.substitute_constants()
        subst = _substitution(program, model, valuation)
        bounds = _bounds(program)
        for ai, automaton in enumerate(program.automata):
            location = valuation.get(automaton.location_variable.name, 0)
            for ei, edge in enumerate(automaton.edges):
                if edge.source_location_index != location or not edge.guard.substitute(subst).evaluate_as_bool():
                    continue
                for name, expression in _edge_assignments(edge, subst):
                    if name not in bounds:
                        continue
                    new = int(expression.substitute(subst).evaluate_as_int())
                    lo, hi = bounds[name]
                    if not lo <= new <= hi:
                        position = model.command_keys.get((ai << 32) | ei)
                        edge_name = model.commands[position].name if position is not None else f"of {automaton.name}"
                        return (
                            f"{model.shown}: edge {edge_name} assigns {name}={new} outside its range [{lo}..{hi}] "
                            f"in state {valuation} (JANI and Storm's checks refuse this; rlverify does not wrap "
                            "the value around)"
                        )
    except (RuntimeError, ValueError, AttributeError, TypeError):
        return None
    return None


def _choice_state(model: ExplicitModel, choice: int) -> int:
    """The state whose row group holds ``choice``."""
    return int(np.searchsorted(model.row_groups, choice, side="right") - 1)


def _refuse_out_of_bounds(model: ExplicitModel, path: Path, symbolic: SymbolicModel | None) -> None:
    """Refuse a choice leading (with positive probability, from outside it) to Storm's out-of-bounds state."""
    oob = model.labels.get(OUT_OF_BOUNDS)
    if oob is None or not oob.any():
        return
    target = int(np.flatnonzero(oob)[0])
    column = model.transitions[:, target].tocoo()
    sources = column.row[(column.data > 0) & ~oob[model.choice_states()[column.row]]]
    if not len(sources):
        return
    c = int(sources[0])
    label = model.action_names[model.choice_actions[c]] or "unlabelled"
    valuation = model.valuation_dict(_choice_state(model, c))
    precise = _out_of_range_update(symbolic, valuation) if symbolic is not None else None
    raise ModelError(
        precise
        or f"{path}: in state {valuation}, an update of the {label} choice leaves a "
        "variable's declared range (PRISM and Storm's checks refuse this; rlverify does not wrap "
        "the value around): guard the update or widen the range"
    )


def distributions_checked(model: ExplicitModel, path: Path, symbolic: SymbolicModel | None = None) -> ExplicitModel:
    """``model``, after checking that no update left a variable's range and that every choice is a distribution.

    Storm's builder wraps an out-of-range value into the variable's bits (``x'=x+1`` from ``x=3`` for ``x:[0..3]``
    gives ``x=0``) unless it is asked to route such updates to an ``out_of_bounds`` state (done in
    :func:`rlverify.models.storm_build.build_explicit`); its own checks, which would refuse both, also refuse
    distributions that sum to 1 only up to rounding. PRISM refuses both. Raises :class:`ModelError` naming the state
    and the choice's label."""
    if OUT_OF_BOUNDS_BIT in model.variables:  # Storm's marker of that state, not a variable of the model
        keep = [i for i, v in enumerate(model.variables) if v != OUT_OF_BOUNDS_BIT]
        model = replace(model, variables=tuple(model.variables[i] for i in keep), valuations=model.valuations[:, keep])
    _refuse_out_of_bounds(model, path, symbolic)
    sums = model.transitions @ np.ones(model.transitions.shape[1])
    bad = np.abs(sums - 1.0) > 1e-6
    if bad.any():
        c = int(np.argmax(bad))
        label = model.action_names[model.choice_actions[c]] or "unlabelled"
        raise ModelError(
            f"{path}: the probabilities of a '{label}' command sum to {float(sums[c]):.6g}, not 1, in state "
            f"{model.valuation_dict(_choice_state(model, c))}"
        )
    return model
