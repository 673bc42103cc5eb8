"""What a policy file declares, read without its weights or its runtime (the bottom of :mod:`rlverify.policies`).

A policy is verified as its file declares it: the names of its features and actions, what its network outputs
(:data:`OUTPUT_KINDS`) and, optionally, how it was trained. This module reads those declarations wherever a file
format keeps them and applies the one rule that merges them with the command-line options (:func:`declaration`):

* ONNX ``metadata_props`` (keys :data:`META_FEATURES`, :data:`META_ACTIONS`, :data:`META_OUTPUT`,
  :data:`META_TRAINING`; :func:`onnx_names`, :func:`onnx_output`, :func:`onnx_training`);
* a sidecar ``FILE.json`` beside a TorchScript module or an SB3 zip (:func:`read_sidecar`, :func:`sidecar_declaration`);
* a table policy file (:func:`read_table`) and a Python policy module's FEATURES/ACTIONS/OUTPUT
  (:func:`module_declaration`).

Stable-Baselines3 zips are read by :mod:`rlverify.policies.sb3zip`, on the same level. Nothing here imports
another policies module, onnx, onnxruntime or torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.arrays import row_softmax
from rlverify.choices import OutputKind, values
from rlverify.errors import InputFileError, PolicyError, safe_repr

#: ONNX ``metadata_props`` keys of a self-describing rlverify policy file.
META_FEATURES = "rlverify.features"
META_ACTIONS = "rlverify.actions"
META_OUTPUT = "rlverify.output"  # one of OUTPUT_KINDS
META_TRAINING = "rlverify.training"  # JSON: algorithm, seed, steps, benchmark, ...

#: How a network's outputs become action probabilities: ``probabilities`` as they are, ``logits``
#: through a softmax, ``q-values`` greedily (a one-hot argmax; ties go to the first action in the
#: declared order), as a DQN policy acts.
OUTPUT_KINDS = values(OutputKind)

#: Keys of a policy sidecar (``model.zip.json``, ``module.pt.json``) besides the names and the output kind:
#: where the policy was trained (``benchmark``: a benchmark id, ``gym:ID`` or a model file; ``params``:
#: its parameters/constants/environment arguments), as ONNX files record them in ``rlverify.training``.
SIDECAR_KEYS = ("features", "actions", "output", "benchmark", "params")

#: The most problems a table file's refusal lists (then "... and N more").
MAX_TABLE_PROBLEMS = 20


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of an ``(N, |A|)`` array (float64, numerically stable): what ``logits`` outputs mean."""
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 2:
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)
    return row_softmax(z)


def check_output_kind(kind: str, where: str) -> OutputKind:
    """``kind`` as an :class:`~rlverify.choices.OutputKind` if it is one of :data:`OUTPUT_KINDS`, else a
    :class:`PolicyError` naming ``where``."""
    if kind not in OUTPUT_KINDS:
        raise PolicyError(f"{where}: output must be one of {', '.join(repr(k) for k in OUTPUT_KINDS)}, got {kind!r}")
    return OutputKind(kind)


def declaration(name: str, where: str, given: Mapping[str, Any], declared: Mapping[str, Any]) -> dict[str, Any]:
    """What a policy file is verified with, per key (``features``, ``actions``, ``output``): what the file declares
    (``declared``; None: nothing), else the option's value (``given``, from ``--features/--actions/--output``; None or
    empty: not given).

    One rule for every format that declares names (a Python module's FEATURES/ACTIONS/OUTPUT, a table, ONNX
    metadata, a sidecar ``FILE.json``): the options supply what the file does not declare and may repeat what it
    does, but never change it: an option that contradicts the declaration is refused (the policy would be verified
    as something other than what its file says). ``where`` names the declaration in the message.

    Raises:
        PolicyError: one line listing every contradicted declaration.
    """
    out: dict[str, Any] = {}
    conflicts = []
    for key in ("features", "actions", "output"):
        have, want = _declared_value(declared.get(key)), _declared_value(given.get(key))
        if have is not None and want is not None and want != have:
            conflicts.append(f"--{key} {_show_declared(want)} contradicts its {key} {_show_declared(have)}")
        out[key] = have if have is not None else want
    if conflicts:
        raise PolicyError(
            f"{name}: {'; '.join(conflicts)} (declared by {where}); a policy is verified as its file "
            f"declares it: drop {', '.join(c.split()[0] for c in conflicts)} or change the file"
        )
    return out


def check_name_options(
    features: Sequence[str] | None, actions: Sequence[str] | None, labels: tuple[str, str] = ("--features", "--actions")
) -> None:
    """Refuse ``--features``/``--actions`` values (``labels`` name them) that are not lists of names (None: not given);
    a string is no list of names (``"row"`` is not ``["r", "o", "w"]``)."""
    for what, names in zip(labels, (features, actions), strict=True):
        if names is None:
            continue
        try:
            ok = not isinstance(names, (str, bytes)) and is_name_list(list(names))
        except Exception:  # not iterable, or its iteration raised
            ok = False
        if not ok:
            raise PolicyError(f"{what}: expected a list of names, got {safe_repr(names)}")


def _declared_value(value: Any) -> Any:
    """A declared value as :func:`declaration` compares it: a list of names (None if empty), or the value."""
    if isinstance(value, (list, tuple)):
        return list(value) or None
    return value


def _show_declared(value: Any) -> str:
    return ",".join(value) if isinstance(value, list) else str(value)


# ------------------------------------------------------------------------------------------------ JSON values


def read_json(path: Path) -> Any:
    """The JSON value in ``path``, or an :class:`InputFileError` naming what is wrong (unreadable, not UTF-8 text,
    invalid JSON, nested too deeply)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read file ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not a JSON text file (byte {exc.start} is not UTF-8)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputFileError(f"{path}: invalid JSON: nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's int conversion limit)
        raise InputFileError(f"{path}: invalid JSON: {str(exc).split(';')[0]}") from None


def is_name_list(value: Any) -> bool:
    """Whether ``value`` is a non-empty list (or tuple) of non-empty strings: feature or action names."""
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, str) and v for v in value)


def is_number(value: Any) -> bool:
    """Whether a JSON value is a number rlverify can hold: a finite float, or an integer of at most 64 bits (JSON
    has no limit: ``99999999999999999999999`` is refused, not rounded)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return math.isfinite(value)


def show_json(value: Any, limit: int = 40) -> str:
    """A JSON value as messages show it: its repr, shortened (a 5,000-digit integer is not printed whole)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"an integer of {len(str(abs(value))) if value.bit_length() < 14000 else 'thousands of'} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_type(value: Any) -> str:
    """How a JSON value is named in messages (``a number``, ``a string``, ``an object``, ...)."""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else f"{kinds.get(type(value), type(value).__name__)} ({json.dumps(value)[:40]})"


# ------------------------------------------------------------------------------------------------ ONNX metadata


def onnx_names(
    meta: Mapping[str, str], path: Path, given: Mapping[str, Any], defaults: Mapping[str, Sequence[str]]
) -> tuple[list[str], list[str], str | None]:
    """``(features, actions, output or None)`` of an ONNX policy from its ``metadata_props`` ``meta``, the options
    ``given`` (``features``/``actions``/``output``; see :func:`declaration`) and the model's ``defaults``.

    Raises:
        PolicyError: an invalid :data:`META_OUTPUT` or name list, an option contradicting the metadata, or no names.
    """
    if meta.get(META_OUTPUT) is not None:
        check_output_kind(meta[META_OUTPUT], f"{path}: metadata {META_OUTPUT}")
    merged = declaration(
        str(path),
        "its metadata",
        given,
        {
            "features": _json_list(meta, META_FEATURES, path),
            "actions": _json_list(meta, META_ACTIONS, path),
            "output": meta.get(META_OUTPUT),
        },
    )
    features = merged["features"] or defaults.get("features")
    actions = merged["actions"] or defaults.get("actions")
    if features is None or actions is None:
        raise _no_onnx_names(path, features is None, actions is None)
    return list(features), list(actions), merged["output"]


def _no_onnx_names(path: Path, no_features: bool, no_actions: bool) -> PolicyError:
    missing = [k for k, absent in (("features", no_features), ("actions", no_actions)) if absent]
    keys = " or ".join(META_FEATURES if m == "features" else META_ACTIONS for m in missing)
    return PolicyError(
        f"{path}: ONNX file has no {keys} "
        f"metadata; pass {' and '.join('--' + m for m in missing)} (e.g. --features x,y --actions up,down)"
    )


def onnx_output(kind: str | None, path: Path) -> OutputKind:
    """What an ONNX policy's network outputs (``kind``, from :func:`onnx_names`), or a :class:`PolicyError` saying
    that nobody said so."""
    if kind is None:
        raise PolicyError(
            f"{path}: ONNX file has no {META_OUTPUT} metadata saying what the network outputs; "
            "pass --output logits|probabilities|q-values"
        )
    return check_output_kind(kind, f"{path}: metadata {META_OUTPUT}")


def onnx_training(meta: Mapping[str, str], path: Path) -> dict[str, Any] | None:
    """How an ONNX policy was trained (its :data:`META_TRAINING` JSON object), or None if it does not say.

    Raises:
        PolicyError: the metadata is there but not a JSON object."""
    if META_TRAINING not in meta:
        return None
    try:
        training = json.loads(meta[META_TRAINING])
    except (json.JSONDecodeError, RecursionError):
        training = None
    if not isinstance(training, dict):
        raise PolicyError(
            f"{path}: metadata {META_TRAINING} must be a JSON object (how the policy was trained), "
            f"got {meta[META_TRAINING][:80]!r}"
        )
    return training


def _json_list(meta: Mapping[str, str], key: str, path: Path) -> list[str] | None:
    if key not in meta:
        return None
    try:
        value = json.loads(meta[key])
    except json.JSONDecodeError:
        value = [v.strip() for v in meta[key].split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{path}: metadata {key} must be a JSON list of names, got {meta[key]!r}")
    return value


# ------------------------------------------------------------------------------------------------ sidecars


def read_sidecar(side: Path) -> dict[str, Any]:
    """A policy sidecar (``model.zip.json``, ``module.pt.json``), its fields checked: ``features``/``actions`` lists of
    names, ``output`` one of the output kinds, ``benchmark`` a string, ``params`` an object.

    Raises:
        InputFileError: not a JSON object. PolicyError: a field of the wrong type (each named).
    """
    meta = read_json(side)
    if not isinstance(meta, dict):
        raise InputFileError(f"{side}: expected a JSON object with {', '.join(SIDECAR_KEYS)}, got {json_type(meta)}")
    problems = _sidecar_name_problems(meta) + _sidecar_training_problems(meta)
    if problems:
        raise PolicyError(f"{side}: invalid policy sidecar", problems)
    return meta


def _sidecar_name_problems(meta: dict[str, Any]) -> list[str]:
    """What is wrong with a sidecar's ``features``, ``actions`` and ``output``."""
    problems = []
    for key in ("features", "actions"):
        if key in meta and not is_name_list(meta[key]):
            problems.append(f"'{key}' must be a list of names (strings), got {json_type(meta[key])}")
    if "output" in meta and meta["output"] not in OUTPUT_KINDS:
        problems.append(f"'output' must be one of {', '.join(repr(k) for k in OUTPUT_KINDS)}, got {json_type(meta['output'])}")
    return problems


def _sidecar_training_problems(meta: dict[str, Any]) -> list[str]:
    """What is wrong with a sidecar's ``benchmark`` and ``params``."""
    problems = []
    if meta.get("benchmark") is not None and not isinstance(meta["benchmark"], str):
        problems.append(f"'benchmark' must be a string, got {json_type(meta['benchmark'])}")
    if meta.get("params") is not None and not isinstance(meta["params"], dict):
        problems.append(f"'params' must be an object, got {json_type(meta['params'])}")
    return problems


def sidecar_declaration(
    path: Path,
    features: Sequence[str] | None,
    actions: Sequence[str] | None,
    output: str | None,
    defaults: Mapping[str, Sequence[str]],
    *,
    output_known: bool = False,
) -> tuple[list[str], list[str], str, dict[str, Any]]:
    """Names and output kind of a TorchScript module or SB3 zip, and its sidecar: the sidecar ``FILE.json``'s, else the
    options', else ``defaults``; an option contradicting the sidecar is refused (``output_known``: the file itself says
    what it outputs (an SB3 zip: its algorithm), the sidecar's ``output`` is not read and ``output`` is returned).

    Returns:
        ``(features, actions, output, sidecar)``; ``sidecar`` is ``{}`` when there is none.
    """
    side = path.with_name(path.name + ".json")
    meta = read_sidecar(side) if side.is_file() else {}
    given = declaration(
        str(path),
        str(side),
        {"features": features, "actions": actions, "output": _unless(output_known, output)},
        {
            "features": meta.get("features"),
            "actions": meta.get("actions"),
            "output": _unless(output_known, meta.get("output")),
        },
    )
    feats = list(given["features"] or defaults.get("features") or [])
    acts = list(given["actions"] or defaults.get("actions") or [])
    if not feats or not acts:
        raise PolicyError(
            f"{path}: features/actions unknown; pass --features and --actions or write {side} "
            '({"features": [...], "actions": [...]}; rlverify.gym.save_policy_metadata writes it)'
        )
    said = output if output_known else given["output"]
    if said is None:
        raise PolicyError(
            f"{path}: what the network outputs is unknown; pass --output logits|probabilities|q-values "
            f'or add "output" to {side}'
        )
    return feats, acts, said, meta


def _unless(known: bool, value: Any) -> Any:
    """``value``, or None when the file itself says it (then the sidecar's and the option's are not read)."""
    return None if known else value


def recorded_training(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where a sidecar says the policy was trained (``benchmark``, ``params``), or None."""
    out = {k: meta[k] for k in ("benchmark", "params") if meta.get(k) is not None}
    return out or None


# ------------------------------------------------------------------------------------------------ table files


@dataclass(frozen=True)
class TableFile:
    """A table policy file's contents, checked (see :func:`read_table`).

    Attributes:
        features, actions: the declared names.
        table: per state (its integer feature values, in ``features`` order), the probabilities in ``actions`` order.
        default: the probabilities of a state the table does not list, or None (then such a state is an error).
    """

    features: list[str]
    actions: list[str]
    table: dict[tuple[int, ...], list[float]]
    default: list[float] | None


def read_table(path: Path) -> TableFile:
    """Read a table policy file, reporting every problem at once.

    JSON format::

        {"features": ["x"], "actions": ["UP", "NOP", "DOWN"],
         "table": [{"state": {"x": 1}, "probabilities": {"UP": 0.3, "DOWN": 0.7}}, ...],
         "default": {"NOP": 1.0}}            # optional; without it an unlisted state is an error

    Actions missing from a row's ``probabilities`` get probability 0. Keys are the integer (or boolean) feature
    values of a state: a row whose state has a non-integer value (``x: 0.7``) is refused, not rounded, and so is a
    state listed twice (no row silently wins).

    Raises:
        InputFileError: not a readable JSON file. PolicyError: every problem of its contents, each named.
    """
    data = read_json(path)
    features, actions = _table_names(data, path)
    reader = _TableReader(features, actions)
    for i, row in enumerate(data["table"]):
        reader.row(i, row)
    default = reader.distribution(data["default"], "default") if data.get("default") is not None else None
    problems = reader.problems
    if problems:
        extra = len(problems) - MAX_TABLE_PROBLEMS
        raise PolicyError(
            f"{path}: invalid table policy", problems[:MAX_TABLE_PROBLEMS] + ([f"... and {extra} more"] if extra > 0 else [])
        )
    return TableFile(features, actions, reader.table, default)


def _table_names(data: Any, path: Path) -> tuple[list[str], list[str]]:
    """The features and actions of a table file's JSON value ``data``, after checking its fields' types."""
    if not isinstance(data, dict):
        raise PolicyError(
            f"{path}: not a table policy (expected a JSON object with features, actions, table; got {json_type(data)})"
        )
    problems = [f"missing field '{key}'" for key in ("features", "actions", "table") if key not in data]
    if problems:
        raise PolicyError(f"{path}: not a table policy", problems)
    for key in ("features", "actions"):
        if not is_name_list(data[key]):
            problems.append(f"'{key}' must be a list of names (strings), got {json_type(data[key])}")
    if not isinstance(data["table"], list):
        problems.append(f"'table' must be a list of rows, got {json_type(data['table'])}")
    if problems:
        raise PolicyError(f"{path}: invalid table policy", problems)
    return data["features"], data["actions"]


class _TableReader:
    """Reads a table file's rows one by one, collecting every problem (``problems``) and the rows read (``table``)."""

    def __init__(self, features: list[str], actions: list[str]) -> None:
        self.features, self.actions = features, actions
        self.problems: list[str] = []
        self.table: dict[tuple[int, ...], list[float]] = {}
        self._first_row: dict[tuple[int, ...], int] = {}

    def row(self, i: int, row: Any) -> None:
        where = f"table[{i}]"
        if not isinstance(row, dict):
            self.problems.append(f"{where}: expected an object with 'state' and 'probabilities', got {json_type(row)}")
            return
        raw = self._state(row.get("state"), where)
        if raw is None:
            return
        values = [self._value(v, f"{where}.state.{f}") for f, v in raw]
        p = self.distribution(row.get("probabilities", {}), f"{where}.probabilities")
        key = tuple(v for v in values if v is not None)
        if len(key) < len(values) or p is None:
            return
        if key in self._first_row:
            self.problems.append(
                f"{where}: the state {dict(zip(self.features, key, strict=True))} is already given by "
                f"table[{self._first_row[key]}]"
            )
            return
        self._first_row[key] = i
        self.table[key] = p

    def _state(self, state: Any, where: str) -> list[tuple[str, Any]] | None:
        """``(feature, value)`` pairs of a row's ``state`` (an object by name or a list in order), or None."""
        features = self.features
        if isinstance(state, dict):
            return self._named_state(state, where)
        if isinstance(state, list) and len(state) == len(features):
            return list(zip(features, state, strict=True))
        self.problems.append(f"{where}.state: expected an object or a list of {len(features)} values")
        return None

    def _named_state(self, state: dict[str, Any], where: str) -> list[tuple[str, Any]] | None:
        """``(feature, value)`` pairs of a row's ``state`` given by name, or None (the problem noted)."""
        missing = [f for f in self.features if f not in state]
        extra = [k for k in state if k not in self.features]
        if not missing and not extra:
            return [(f, state[f]) for f in self.features]
        said = ([f"missing features {missing}"] if missing else []) + ([f"unknown features {extra}"] if extra else [])
        self.problems.append(f"{where}.state: " + "; ".join(said))
        return None

    def _value(self, v: Any, where: str) -> int | None:
        """A state's feature value as an integer (booleans as 0/1), or None with a problem recorded."""
        if isinstance(v, bool):
            return int(v)
        whole = isinstance(v, int) or (isinstance(v, float) and math.isfinite(v) and v == int(v))
        if whole and -(2**63) <= int(v) < 2**63:
            return int(v)
        if whole:
            self.problems.append(
                f"{where}: {show_json(v)} does not fit a 64-bit integer (table keys are the integer or "
                "boolean values of the features)"
            )
        else:
            self.problems.append(
                f"{where}: {show_json(v)} is not an integer (table keys are the integer or boolean values of the features)"
            )
        return None

    def distribution(self, entry: Any, where: str) -> list[float] | None:
        """``{action: probability}`` as probabilities in action order (missing actions 0), or None with a problem."""
        actions = self.actions
        if not isinstance(entry, dict):
            self.problems.append(f"{where}: expected an object {{action: probability}}, got {json_type(entry)}")
            return None
        unknown = [a for a in entry if a not in actions]
        if unknown:
            self.problems.append(f"{where}: unknown actions {unknown} (declared: {actions})")
        bad = [a for a, p in entry.items() if not is_number(p)]
        if bad:
            self.problems.append(
                f"{where}: probabilities of {bad} are not finite numbers (a float; an integer of at "
                f"most 64 bits), got {', '.join(show_json(entry[a]) for a in bad[:3])}"
            )
            return None
        return [float(entry.get(a, 0.0)) for a in actions]


# ------------------------------------------------------------------------------------------------ Python modules


def _module_names(value: Any, attr: str, problems: list[str]) -> list[str] | None:
    """A module's FEATURES or ACTIONS as plain strings (read once), None if absent; a problem noted if it is not a
    list of names."""
    if value is None:
        return None
    if not is_name_list(value):
        problems.append(f"{attr} must be a list of names (strings), got {type(value).__name__} {safe_repr(value)}")
        return None
    return [str.__str__(v) for v in value]


def _module_bounds(value: Any, attr: str, problems: list[str]) -> list[float] | None:
    """A module's ACTION_LOW or ACTION_HIGH as finite floats (read once), None if absent; a problem noted if it is
    not a non-empty list of finite numbers."""
    if value is None:
        return None
    try:
        items = list(value) if isinstance(value, (list, tuple)) else None
        floats = (
            [float(v) for v in items] if items is not None and not any(isinstance(v, (bool, str)) for v in items) else None
        )
    except (TypeError, ValueError, OverflowError):
        floats = None
    if not floats or not all(math.isfinite(f) for f in floats):
        problems.append(f"{attr} must be a list of finite numbers (one per action dimension), got {safe_repr(value)}")
        return None
    return floats


def module_declaration(module: Any, file: Path, name: str) -> tuple[Any, dict[str, Any]]:
    """The callable ``name`` of a Python policy ``module`` and its declaration (FEATURES and ACTIONS as lists of plain
    strings, OUTPUT, and a continuous policy's ACTION_LOW/ACTION_HIGH as floats; None where absent), checked. The
    module's objects are the user's code: this may raise anything.

    Raises:
        PolicyError: no callable ``name``; FEATURES/ACTIONS not lists of names or OUTPUT not an output kind (each named).
    """
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        raise PolicyError(f"{file}: defines no callable '{name}'")
    problems: list[str] = []
    declared: dict[str, Any] = {}
    for attr, key in (("FEATURES", "features"), ("ACTIONS", "actions")):
        declared[key] = _module_names(getattr(module, attr, None), attr, problems)
    for attr, key in (("ACTION_LOW", "low"), ("ACTION_HIGH", "high")):
        declared[key] = _module_bounds(getattr(module, attr, None), attr, problems)
    if (declared["low"] is None) != (declared["high"] is None):
        problems.append("a continuous policy declares both ACTION_LOW and ACTION_HIGH (lists of numbers), not one")
    output = getattr(module, "OUTPUT", None)
    declared["output"] = None if output is None or not isinstance(output, str) else str.__str__(output)
    if output is not None and declared["output"] not in OUTPUT_KINDS:
        problems.append(f"OUTPUT must be one of {', '.join(repr(k) for k in OUTPUT_KINDS)}, got {safe_repr(output)}")
    if problems:
        raise PolicyError(f"{file}: invalid policy module", problems)
    return fn, declared
