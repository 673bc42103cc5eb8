"""Properties parsed against a :class:`~rlverify.models.symbolic.SymbolicModel`: the structure rlverify reads
(:func:`~rlverify.models.properties.parse_structure`) with Storm's parse attached, a JANI file's named properties,
and the refusals naming what is wrong (an unknown label or reward model, too deep a nesting, a division by zero)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from rlverify.errors import PropertyError, did_you_mean
from rlverify.models.constants import parse_constants
from rlverify.models.nesting import check_nesting
from rlverify.models.properties import Property, parse_structure
from rlverify.models.property_files import PROPERTY_FILE_SUFFIXES, read_properties_file, split_properties
from rlverify.models.storm import StormProperty, storm_log_off, storm_message
from rlverify.models.symbolic import ModelFormat, SymbolicModel

_LABEL = re.compile(r'"([^"]*)"')
_DIVISION_BY_ZERO = re.compile(r"/\s*\(?\s*0+(?:\.0*)?\s*\)?(?![\w.])")
#: Storm prints a JANI step bound as ``Usteps<=k`` (``Csteps<=k``), and ``F phi`` of a JANI file as ``true U phi``
_STEPS_BOUND = re.compile(r'(?<![\w"])([UFC])\s*steps\s*(?=<=|<)')
_TRUE_UNTIL = re.compile(r"^([^\[]*\[)\s*true\s+U(?![\w])")


def _prism_text(text: str) -> str:
    """Storm's text of a JANI property in the PRISM syntax every engine reads (same formula):
    ``P=? [true Usteps<=12 "goal"]`` is ``P=? [F<=12 "goal"]``."""
    return _TRUE_UNTIL.sub(r"\1F", _STEPS_BOUND.sub(r"\1", text))


#: a reward accumulation Storm prints for a JANI property that collects less than all rewards (``F [steps](...)``)
_ACCUMULATION = re.compile(r'(?<![\w"])([FCI])\s*\[\s*((?:steps|time|exit)(?:\s*,\s*(?:steps|time|exit))*)?\s*\]')
_REWARD_NAME = re.compile(r'\{\s*"[^"]*"\s*\}')
_IDENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\b")
_KEYWORDS = {
    "P",
    "R",
    "Pmin",
    "Pmax",
    "Rmin",
    "Rmax",
    "F",
    "G",
    "U",
    "X",
    "C",
    "I",
    "true",
    "false",
    "min",
    "max",
    "S",
    "LRA",
    "T",
    "W",
    "floor",
    "ceil",
    "pow",
    "mod",
    "log",
    "filter",
    "forall",
    "exists",
}


def parse_property(model: SymbolicModel, text: str | Property, *, fixed_policy: bool = False) -> Property:
    """Parse one PCTL property against ``model`` (structure read once, then Storm's parse attached).

    ``text`` may also name a property of a JANI file. Unknown labels, variables and reward models
    are errors naming the close alternatives.

    ``fixed_policy``: the property is evaluated on the chain of a fixed policy, where Pmin = Pmax = P
    (and Rmin = Rmax = R). A *named* JANI property asking ``Pmax``/``Pmin``/``Rmax``/``Rmin`` (as most
    public JANI benchmarks do) is then read as ``P=?``/``R=?`` (its ``text`` says so; see
    :func:`fixed_policy_note` for the note to show); a typed ``Pmax=? [...]`` is kept as written.
    """
    import stormpy  # lazy: stormpy, start-up

    if isinstance(text, Property):
        if text.storm is not None:
            return text
        text = text.text
    if model.kind is ModelFormat.JANI and text in model.file_properties:
        return _named_jani_property(model, text, fixed_policy=fixed_policy)
    malformed: PropertyError | None = None
    try:
        structure = parse_structure(text)
    except PropertyError as exc:  # Storm's message says more (with the position) where it parses the text too
        structure, malformed = Property(text=text), exc
    _check_names_and_values(model, text, structure)
    try:
        with storm_log_off():
            props = stormpy.parse_properties(text, model.program)
    except RuntimeError as exc:
        raise _storm_parse_error(model, text, structure, exc) from None
    if malformed is not None:
        raise malformed
    if len(props) != 1:
        raise PropertyError(f"expected exactly one property, got {len(props)} in '{text}'")
    return structure.with_storm(props[0], _storm_bound(structure, props[0]), _storm_threshold(props[0]))


def parse_properties(
    model: SymbolicModel, source: str | Path, *, constants: str | dict[str, str] | None = None, fixed_policy: bool = False
) -> list[Property]:
    """Several properties against ``model``: a PRISM properties file (``.props``, ``.pctl``, ``.prop``, ``.csl``) or
    text holding one or more (separated by ``;`` or line ends), each parsed as :func:`parse_property` does.

    Read by :func:`~rlverify.models.property_files.split_properties`: ``//`` comments, ``"name": P=? [...]`` names,
    ``const`` declarations with literal values, or without a value and given in ``constants`` (``"T=10"`` or a
    dict). Properties keep their file names (None where unnamed).

    Raises:
        InputFileError: the file cannot be read.
        PropertyError: see :func:`split_properties` and :func:`parse_property`.
    """
    path = Path(source) if isinstance(source, Path) or str(source).lower().endswith(PROPERTY_FILE_SUFFIXES) else None
    text, where = (read_properties_file(path), str(path)) if path is not None else (str(source), "properties")
    out = []
    for name, body in split_properties(text, parse_constants(constants), source=where):
        prop = parse_property(model, body, fixed_policy=fixed_policy)
        out.append(replace(prop, name=name) if name is not None else prop)
    return out


def _named_jani_property(model: SymbolicModel, name: str, *, fixed_policy: bool) -> Property:
    """The JANI file's property ``name`` (see :func:`parse_property` for ``fixed_policy``)."""
    storm_prop = model.file_properties[name]
    formula = storm_prop.get_raw_formula()
    if fixed_policy and getattr(formula, "has_optimality_type", False) and formula.has_optimality_type:
        import stormpy.developer as dev  # lazy: stormpy, start-up

        formula = formula.clone()
        formula.remove_optimality_type()
        storm_prop = dev.Property(name, formula, set())
    if re.match(r"\s*T(?:min|max)?\s*[=<>]", str(formula)):  # Storm's time operator: expected steps
        raise PropertyError(
            f"{model.shown}: property '{name}' ({formula}) asks for an expected number of steps (a JANI expected "
            "value of 1 accumulated over steps), which is not supported; declare a reward of 1 per step (a transient "
            "real variable) and ask for its expected value"
        )
    accumulated = _ACCUMULATION.search(str(formula))
    if accumulated is not None:
        raise PropertyError(
            f"{model.shown}: property '{name}' ({formula}) accumulates only "
            f"[{accumulated.group(2) or 'nothing'}] of its rewards: a JANI reward accumulation other than "
            'state and action rewards together is not supported; declare "accumulate": ["steps", "exit"] '
            "(state rewards are exit rewards in discrete time) or give the property as text, e.g. "
            'R{"r"}=? [F "goal"]'
        )
    structure = parse_structure(_prism_text(str(formula)), name=name)
    structure = structure.with_storm(storm_prop, _storm_bound(structure, storm_prop), _storm_threshold(storm_prop))
    note = fixed_policy_note(model, structure)
    return replace(structure, notes=(note,)) if note else structure


def _check_reward_model(model: SymbolicModel, text: str, structure: Property) -> None:
    """Refuse an ``R`` property naming no reward model where the model has not exactly one, or an unknown one."""
    reward = structure.reward_model
    if structure.operator == "R" and not reward and len(model.reward_models) != 1:
        known = ", ".join(f'"{r}"' for r in model.reward_models)
        raise PropertyError(
            f"property '{text}': the model defines no reward model"
            if not model.reward_models
            else f"property '{text}' names no reward model and the model defines {len(model.reward_models)} "
            f'({known}): name one, e.g. R{{"{model.reward_models[0]}"}}=? [...]'
        )
    if reward and reward not in model.reward_models:
        raise PropertyError(
            f"property '{text}': unknown reward model \"{reward}\""
            f"{did_you_mean(reward, model.reward_models)}; "
            f"the model defines: {', '.join(repr(x) for x in model.reward_models) or 'none'}"
        )


def _check_labels(model: SymbolicModel, text: str) -> None:
    """Refuse a label the model does not define (naming close ones, and a file's property quoted as a label)."""
    known_labels = set(model.labels) | {"init", "deadlock"}
    for lab in _LABEL.findall(_REWARD_NAME.sub("", text)):
        if lab in known_labels:
            continue
        named = (
            f" ('{lab}' names one of the file's properties, not a label: give the property as {lab} to check "
            "it as the file states it)"
            if lab in (model.file_properties or {})
            else ""
        )
        raise PropertyError(
            f"property '{text}': unknown label \"{lab}\"{did_you_mean(lab, known_labels)}; "
            f"the model defines: {', '.join(sorted(known_labels))}{named}"
        )


def _check_names_and_values(model: SymbolicModel, text: str, structure: Property) -> None:
    """Refuse an unknown reward model or label (naming close ones), too deep a nesting, a division by zero."""
    _check_reward_model(model, text, structure)
    _check_labels(model, text)
    check_nesting(text, f"property '{text[:60]}{'...' if len(text) > 60 else ''}'", evaluated=True)
    if _DIVISION_BY_ZERO.search(_LABEL.sub('""', text)):
        raise PropertyError(
            f"property '{text}': a division by zero (Storm would evaluate it to some number and check the property on it)"
        )


def _unknown_name_hint(model: SymbolicModel, text: str, structure: Property) -> str:
    """`` (unknown name 'x'...)`` for the first name of ``text`` the model does not know, and a step-bounded G's hint."""
    reward = structure.reward_model
    names = set(model.variables) | {c.name for c in model.program.constants} | _KEYWORDS | ({reward} if reward else set())
    names |= _formula_names(model)
    unknown = [w for w in _IDENT.findall(_LABEL.sub("", text)) if w not in names and not w.isdigit()]
    hint = f" (unknown name '{unknown[0]}'{did_you_mean(unknown[0], model.variables)})" if unknown else ""
    if structure.path == "G" and structure.bound_text is not None:
        hint += " (Storm has no step-bounded G; use P=? [F<=k !phi] and 1 minus its value)"
    return hint


def _storm_parse_error(model: SymbolicModel, text: str, structure: Property, exc: Exception) -> PropertyError:
    """The error for a property Storm does not parse: an unknown name, a misspelt property name of the file."""
    hint = _unknown_name_hint(model, text, structure)
    if model.file_properties and not re.match(r"\s*[PR](min|max)?\s*[=<>{]", text):  # a misspelt property name?
        close = did_you_mean(text, model.file_properties)
        return PropertyError(
            f"property '{text}' is neither a property of {model.shown}{close} nor a formula; its "
            f"properties: {', '.join(repr(n) for n in model.file_properties)}"
        )
    return PropertyError(f"property '{text}' does not parse{hint}: {storm_message(exc)}")


def _formula_names(model: SymbolicModel) -> set[str]:
    """The names a PRISM file defines with ``formula NAME = ...`` (Storm's program does not list them), read from its
    text for a parse error's hint only (one in a comment counts: it only keeps a name from being called unknown)."""
    if model.kind is not ModelFormat.PRISM:
        return set()
    try:
        return set(re.findall(r"\bformula\s+([A-Za-z_]\w*)\s*=", model.path.read_text("utf-8-sig", errors="replace")))
    except OSError:
        return set()


def fixed_policy_note(model: SymbolicModel, prop: Property) -> str | None:
    """What a user must be told when ``prop`` is a named JANI property whose ``Pmax``/``Pmin`` (``Rmax``/``Rmin``)
    :func:`parse_property` read as ``P=?`` (``R=?``) for a fixed policy; None otherwise."""
    if model.kind is not ModelFormat.JANI or prop.name is None or prop.name not in model.file_properties or prop.optimality:
        return None
    formula = model.file_properties[prop.name].get_raw_formula()
    if not (getattr(formula, "has_optimality_type", False) and formula.has_optimality_type):
        return None
    asked = ("P" if formula.is_probability_operator_formula else "R") + (
        "min" if str(formula.optimality_type).endswith("MINIMIZE") else "max"
    )
    plain = asked[0]
    return (
        f"property '{prop.name}' of {model.path.name} asks {asked}; under the fixed policy it is evaluated as "
        f"{plain}=? ({prop.text}): on the policy's chain {plain}min = {plain}max = {plain}"
    )


def _storm_bound(structure: Property, storm_prop: StormProperty) -> int | None:
    """The inclusive step bound as Storm evaluates it (``F<=(N+2)``), strictness read from the text."""
    if structure.lower_bounded or structure.reward_bound is not None:
        return None
    try:
        path = storm_prop.get_raw_formula().subformula
        if path.is_bounded_until_formula and not path.has_lower_bound:
            bound = int(path.upper_bound_expression.evaluate_as_int()) - (1 if structure.strict else 0)
        else:
            return None
    except (AttributeError, RuntimeError):
        return None
    if bound < 0:
        raise PropertyError(
            f"property '{structure.text}': the step bound evaluates to "
            f"{bound + (1 if structure.strict else 0)}, which is negative"
        )
    return bound


def _storm_threshold(storm_prop: StormProperty) -> float | None:
    """The threshold of ``P>=t [...]`` as Storm evaluates it (a constant or an expression), else None."""
    formula = storm_prop.get_raw_formula()
    return float(formula.threshold) if getattr(formula, "has_bound", False) and formula.has_bound else None
