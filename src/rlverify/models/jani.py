"""JANI files: reading the JSON, and which edge *of the file* each of Storm's edges is.

Storm keeps each location's edges sorted by action (silent edges first), and with more than 16 edges in a
location the order among equal actions is not the file's either (an unstable sort). Storm's choice origins
name edges by that internal index, so a command name ``AUTOMATON:K`` (the K-th edge as written) cannot be read
from the order. :func:`file_edge_order` asks Storm itself: it parses a copy of the file in which every edge
assigns its file position to a fresh transient variable (transient variables are not part of the state: the
model is unchanged), and reads the position back from each of Storm's edges.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from rlverify.errors import InputFileError, ModelError
from rlverify.models.storm import StormProgram

#: the smallest positive normal double
_TINY = 2.2250738585072014e-308
#: the transient variable carrying an edge's file position (a prefix made unique against the file's names)
_MARKER = "rlverifyFileEdge"
#: a JANI file's JSON as :func:`json.loads` gives it (dicts, lists, strings, numbers, booleans, None)
Json = Any
#: an automaton of a Storm JANI model (``stormpy.JaniAutomaton``)
StormAutomaton = Any
#: an edge of one (``stormpy.JaniEdge``)
StormEdge = Any


def read_jani(path: str | Path) -> Json:
    """The JSON of a JANI file (a UTF-8 byte-order mark, which Storm accepts, is allowed).

    Raises:
        InputFileError: unreadable, not UTF-8, or not JSON (with the position).
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read JANI file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not a JANI file (not UTF-8 text: byte {exc.start})") from None

    def number(literal: str) -> float:
        value = float(literal)
        if math.isinf(value):
            shown = literal if len(literal) <= 40 else literal[:40] + "..."
            raise ModelError(f"{path}: the number {shown} is beyond double precision (it would be infinite)")
        if (value == 0.0 and any(c in "123456789" for c in literal.lower().split("e")[0])) or 0.0 < abs(value) < _TINY:
            raise ModelError(
                f"{path}: the number {literal} is below the smallest normal double {_TINY:.3g} (rlverify "
                "computes in double precision: it would become 0 or lose its precision)"
            )
        return value

    try:
        return json.loads(text, parse_float=number)
    except json.JSONDecodeError as exc:
        raise InputFileError(
            f"{path}: not a JANI file (JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise InputFileError(f"{path}: not a JANI file (JSON nested too deeply)") from None
    except ValueError as exc:  # an integer literal beyond Python's digit limit for int(str)
        raise InputFileError(f"{path}: an integer in the file is too long to read ({str(exc).split(';')[0]})") from None


#: JANI's operators as Storm prints PRISM expressions (``rlverify inspect`` shows PRISM guards in Storm's form)
_INFIX = {
    "∧": "&",
    "∨": "|",
    "⇒": "=>",
    "=": "=",
    "≠": "!=",
    "<": "<",
    "≤": "<=",
    ">": ">",
    "≥": ">=",
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
}
#: nesting beyond which an expression is shown as ``…`` (a hostile file's guard must not exhaust the stack)
_MAX_DEPTH = 100


def expression_text(expr: Json, depth: int = 0) -> str:
    """A JANI expression (the file's JSON) as text, written as the file has it, in the form Storm prints PRISM
    expressions: every binary operation parenthesised (``((b = 1) | (b = 2))``), ``!`` for negation, ``(c ? a : b)``
    for ``ite``, other operators as functions (``min(a, b)``, ``floor(x)``, ``pow(x, 2)``); JANI's derived operators
    (``⇒``, ``%``, ``abs``, ...) are kept, not expanded as Storm does. A part of a shape JANI does not define is shown
    as compact JSON; beyond a nesting of 100, as ``…``."""
    if depth > _MAX_DEPTH:
        return "…"
    if isinstance(expr, bool):
        return "true" if expr else "false"
    if isinstance(expr, int | float):
        return repr(expr)
    if isinstance(expr, str):
        return expr
    written = _operation_text(expr, depth) if isinstance(expr, dict) else None
    return written if written is not None else json.dumps(expr, ensure_ascii=False, separators=(", ", ": "))


def _operation_text(expr: dict[str, Json], depth: int) -> str | None:
    """A JANI expression object as text (see :func:`expression_text`); None for a shape JANI does not define."""
    op = expr.get("op")

    def sub(key: str) -> str:
        return expression_text(expr.get(key), depth + 1)

    if "constant" in expr and len(expr) == 1:
        return str(expr["constant"])
    if op == "ite" and {"if", "then", "else"} <= expr.keys():
        return f"({sub('if')} ? {sub('then')} : {sub('else')})"
    if not isinstance(op, str):
        return None
    if {"left", "right"} <= expr.keys():
        if op in _INFIX:
            return f"({sub('left')} {_INFIX[op]} {sub('right')})"
        return f"{op}({sub('left')}, {sub('right')})"
    if "exp" in expr:
        return f"!({sub('exp')})" if op == "¬" else f"{op}({sub('exp')})"
    return None


def _declared_names(items: Json) -> set[str]:
    """The names of a JSON list of declarations (objects with a string ``name``)."""
    return {item["name"] for item in items or [] if isinstance(item, dict) and isinstance(item.get("name"), str)}


def _names(data: Json) -> set[str]:
    """Every identifier the file declares (variables, constants, automata, locations, actions)."""
    names: set[str] = set()
    for key in ("variables", "constants", "actions", "automata"):
        names |= _declared_names(data.get(key, []))
    for automaton in data.get("automata", []) or []:
        if isinstance(automaton, dict):
            names |= _declared_names(automaton.get("variables", [])) | _declared_names(automaton.get("locations", []))
    return names


def _marked(data: Json) -> tuple[Json, str]:
    """A copy of ``data`` in which every destination of the K-th edge (1-based, file order) of every automaton
    assigns K to a fresh transient integer variable; and that variable's name."""
    taken = _names(data)
    marker = _MARKER
    i = 0
    while marker in taken:
        i += 1
        marker = f"{_MARKER}{i}"
    out = dict(data)
    out["variables"] = [
        *(data.get("variables", []) or []),
        {"name": marker, "type": "int", "transient": True, "initial-value": 0},
    ]
    automata = []
    for automaton in data.get("automata", []) or []:
        automaton = dict(automaton)
        edges = []
        for k, edge in enumerate(automaton.get("edges", []) or []):
            edge = dict(edge)
            destinations = []
            for destination in edge.get("destinations", []) or []:
                destination = dict(destination)
                destination["assignments"] = [*(destination.get("assignments", []) or []), {"ref": marker, "value": k + 1}]
                destinations.append(destination)
            edge["destinations"] = destinations
            edges.append(edge)
        automaton["edges"] = edges
        automata.append(automaton)
    out["automata"] = automata
    return out, marker


def _signature(edge: StormEdge, skip: str | None = None) -> tuple[Any, ...]:
    """What Storm's edge does: source location, action, guard, and per destination its probability, target and
    assignments (the marker's left out): two edges with one signature are interchangeable."""
    template = edge.template_edge
    destinations = []
    for d, td in zip(edge.destinations, template.destinations, strict=True):
        assignments = tuple(sorted((a.variable.name, str(a.expression)) for a in td.assignments if a.variable.name != skip))
        destinations.append((d.target_location_index, str(d.probability), assignments))
    edge_level = tuple(sorted((a.variable.name, str(a.expression)) for a in template.assignments if a.variable.name != skip))
    return (edge.source_location_index, edge.action_index, str(edge.guard), edge_level, tuple(destinations))


def _marker_value(edge: StormEdge, marker: str) -> int | None:
    values = {str(a.expression) for td in edge.template_edge.destinations for a in td.assignments if a.variable.name == marker}
    values |= {str(a.expression) for a in edge.template_edge.assignments if a.variable.name == marker}
    if len(values) != 1:
        return None
    try:
        return int(next(iter(values)))
    except ValueError:
        return None


def file_edge_order(path: str | Path, data: Json, model: StormProgram) -> dict[str, list[int]]:
    """For each automaton of Storm's parsed ``model``: Storm's edge index -> 0-based position of that edge in the
    file's ``edges`` of the automaton of the same name.

    ``data`` is the file's JSON (:func:`read_jani`). Each of Storm's edges is matched to the marked copy's edge
    that does the same (same source location, action, guard, destinations); edges that do the same are
    interchangeable, and are matched in order.

    Raises:
        ModelError: an edge of Storm's model matches no edge of the marked copy (the marked file would not be
            the same model), or has another action than the file's edge it matches; no command name could then be trusted.
    """
    marked, marker = _marked(data)
    reference = _parse_marked(path, marked)
    actions = [str(a.get("name")) for a in data.get("actions", []) or [] if isinstance(a, dict)]
    by_name = {a.name: a for a in reference.automata}
    file_automata = {a.get("name"): a for a in data.get("automata", []) or [] if isinstance(a, dict)}
    order: dict[str, list[int]] = {}
    for automaton in model.automata:
        pool = _marked_positions(path, automaton, by_name.get(automaton.name), marker)
        positions = _matched(path, automaton, pool)
        _check_actions(path, automaton, positions, file_automata.get(automaton.name, {}).get("edges", []), actions)
        order[automaton.name] = positions
    return order


def _parse_marked(path: str | Path, marked: Json) -> StormProgram:
    """Storm's parse of the marked copy of the file."""
    import stormpy  # lazy: stormpy, start-up

    with tempfile.TemporaryDirectory(prefix="rlverify-jani-") as tmp:
        copy = Path(tmp) / "marked.jani"
        copy.write_text(json.dumps(marked))
        try:
            reference, _ = stormpy.parse_jani_model(str(copy))
        except RuntimeError as exc:
            raise ModelError(f"{path}: cannot identify the file's edges in Storm's model ({str(exc).strip()})") from None
    return reference


def _marked_positions(
    path: str | Path, automaton: StormAutomaton, marked_automaton: StormAutomaton | None, marker: str
) -> dict[tuple[Any, ...], list[int]]:
    """By signature: the file positions (0-based) of the marked automaton's edges, last first."""
    if marked_automaton is None or len(marked_automaton.edges) != len(automaton.edges):
        raise ModelError(f"{path}: cannot identify the edges of automaton '{automaton.name}' in Storm's model")
    pool: dict[tuple[Any, ...], list[int]] = {}
    for edge in marked_automaton.edges:
        k = _marker_value(edge, marker)
        if k is None:
            raise ModelError(f"{path}: cannot identify the edges of automaton '{automaton.name}' in Storm's model")
        pool.setdefault(_signature(edge, skip=marker), []).append(k - 1)
    for ks in pool.values():
        ks.sort(reverse=True)
    return pool


def _matched(path: str | Path, automaton: StormAutomaton, pool: dict[tuple[Any, ...], list[int]]) -> list[int]:
    """The file position of each of Storm's edges of ``automaton``: the first unmatched one of its signature."""
    positions = []
    for i, edge in enumerate(automaton.edges):
        candidates = pool.get(_signature(edge))
        if not candidates:
            raise ModelError(f"{path}: edge {i} of automaton '{automaton.name}' in Storm's model matches no edge of the file")
        positions.append(candidates.pop())
    return positions


def _check_actions(
    path: str | Path, automaton: StormAutomaton, positions: list[int], file_edges: Json, actions: list[str]
) -> None:
    """Refuse an edge of Storm's whose action is not that of the file's edge it was matched to."""
    for i, (edge, k) in enumerate(zip(automaton.edges, positions, strict=True)):
        if k >= len(file_edges) or _action_name(actions, edge.action_index) != file_edges[k].get("action", ""):
            raise ModelError(
                f"{path}: edge {i} of automaton '{automaton.name}' in Storm's model has another action than "
                f"the file's edge {automaton.name}:{k + 1} it was matched to"
            )


def _action_name(actions: list[str], index: int) -> str:
    """The name of Storm's action ``index`` (0: the silent action, ``""``; then the file's ``actions`` in order)."""
    return "" if index == 0 else actions[index - 1] if index <= len(actions) else f"#{index}"
