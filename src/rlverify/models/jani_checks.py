"""A JANI file's JSON checked before Storm parses it: refused, naming the place, where its shape is not JANI's (Storm
crashes on some) or it declares what rlverify does not verify (a model type, feature or variable without a
discrete-step policy semantics)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

from rlverify.errors import ModelError
from rlverify.models.jani import Json

#: JANI model types with a discrete-step policy semantics
_JANI_TYPES = ("dtmc", "mdp")
#: JANI ``features`` rlverify does not support, with why
_JANI_UNSUPPORTED = {
    "nondet-selection": "nondeterministic selection (assignments choosing a value) has no probabilistic step semantics here",
}


def check_jani_supported(path: Path, data: Json) -> None:
    """Refuse, naming the feature and the file, what a JANI file declares that rlverify does not support.

    Checked before Storm parses the file (whose messages do not always name the feature): the model
    type (DTMC and MDP only: no CTMCs, Markov automata, timed or hybrid automata), the declared
    ``features`` listed in :data:`_JANI_UNSUPPORTED`, and clock, continuous or array state variables.

    Raises:
        ModelError: naming the unsupported feature and where it is; a file that is no JSON object.
    """
    if not isinstance(data, dict):
        raise ModelError(f"{path}: not a JANI model (the file's JSON is not an object)")
    _check_jani_shape(path, data)
    _check_jani_type_and_features(path, data)
    scopes = [("", data.get("variables", []))] + [
        (a.get("name", "?"), a.get("variables", [])) for a in data.get("automata", [])
    ]
    for owner, declared in scopes:
        where = f"automaton '{owner}'" if owner else "the global variables"
        for v in declared or []:
            _check_jani_variable(path, v, where)


def _check_jani_type_and_features(path: Path, data: dict[str, Any]) -> None:
    """Refuse a model type other than DTMC and MDP, and a declared feature of :data:`_JANI_UNSUPPORTED`."""
    mtype = data.get("type")
    if isinstance(mtype, str) and mtype.lower() not in _JANI_TYPES:
        raise ModelError(
            f'{path}: JANI model type \'{mtype}\' is not supported (expected "dtmc" or "mdp"; '
            "continuous-time, timed and hybrid models have no discrete-step policy semantics)"
        )
    for feature in data.get("features", []) or []:
        if feature in _JANI_UNSUPPORTED:
            raise ModelError(f"{path}: JANI feature '{feature}' is not supported: {_JANI_UNSUPPORTED[feature]}")


def _check_jani_variable(path: Path, v: dict[str, Any], where: str) -> None:
    """Refuse a clock, continuous or (non-transient) array variable ``v`` declared in ``where``."""
    vtype: Json = v.get("type")  # (a string or an object: the shape is checked)
    match vtype if isinstance(vtype, str) else vtype.get("kind"):
        case "clock" | "continuous" as timed:
            raise ModelError(
                f"{path}: JANI {timed} variable '{v.get('name')}' ({where}) is not supported: "
                "timed and hybrid automata have no discrete-step policy semantics"
            )
        case "array" if not v.get("transient"):
            raise ModelError(
                f"{path}: JANI array variable '{v.get('name')}' ({where}) is not supported (feature "
                "'arrays'): Storm flattens an array into variables NAME_at_I, which a policy could "
                "not name before the model is built; declare one variable per element"
            )


def _check_jani_shape(path: Path, data: dict[str, Any]) -> None:
    """Refuse JSON of the wrong type where the JANI format has lists and objects (Storm's parser does not always
    refuse them: a variable whose type is a list crashes it), naming the place."""
    features = data.get("features")
    if features is not None and not (isinstance(features, list) and all(isinstance(f, str) for f in features)):
        _jani_shape_error(path, "'features'", "a list of strings", features)
    _jani_variables(path, data.get("variables"), "'variables'")
    _jani_objects(path, data.get("constants"), "'constants'")
    _jani_objects(path, data.get("actions"), "'actions'")
    _jani_objects(path, data.get("properties"), "'properties'")
    for i, automaton in enumerate(_jani_objects(path, data.get("automata"), "'automata'")):
        where = f"automaton {automaton.get('name', i)!r}"
        _jani_variables(path, automaton.get("variables"), f"{where}: 'variables'")
        _jani_objects(path, automaton.get("locations"), f"{where}: 'locations'")
        for j, edge in enumerate(_jani_objects(path, automaton.get("edges"), f"{where}: 'edges'")):
            destinations = _jani_objects(path, edge.get("destinations"), f"{where}: edge {j + 1} 'destinations'")
            for k, destination in enumerate(destinations):
                _jani_objects(path, destination.get("assignments"), f"{where}: edge {j + 1} destination {k + 1} 'assignments'")


def _jani_shape_error(path: Path, where: str, expected: str, value: Any) -> NoReturn:
    raise ModelError(f"{path}: not a valid JANI model: {where} must be {expected}, not {json_type(value)}")


def _jani_objects(path: Path, value: Any, where: str) -> list[dict[str, Any]]:
    """``value`` as a list of JSON objects (``None``: empty), else a :class:`ModelError` naming ``where``."""
    if value is None:
        return []
    if not isinstance(value, list):
        _jani_shape_error(path, where, "a list", value)
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            _jani_shape_error(path, f"{where}[{i}]", "an object", item)
    return value


def _jani_variables(path: Path, value: Any, where: str) -> None:
    """Refuse a variable declaration whose name or type has the wrong JSON type."""
    for i, v in enumerate(_jani_objects(path, value, where)):
        if not isinstance(v.get("name"), str):
            _jani_shape_error(path, f"{where}[{i}].name", "a string", v.get("name"))
        vtype = v.get("type")
        if isinstance(vtype, dict):
            if not isinstance(vtype.get("kind"), str):
                _jani_shape_error(path, f"{where}[{i}].type.kind", "a string", vtype.get("kind"))
            if "base" in vtype and not isinstance(vtype["base"], (str, dict)):
                _jani_shape_error(path, f"{where}[{i}].type.base", "a string", vtype["base"])
        elif not isinstance(vtype, str):
            _jani_shape_error(path, f"{where}[{i}].type", "a string or an object", vtype)


def json_type(value: Any) -> str:
    """The JSON type of ``value`` as a user reads it (``a number``, ``a list``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"
