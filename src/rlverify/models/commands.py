"""Command names: the choices of a PRISM/JANI model that action labels alone do not identify.

Classic models express the scheduler's choice with unlabelled commands (``[] ...``) or with several
commands sharing a label in one state. rlverify names every command so a policy can address it:

* a PRISM command is ``MODULE:K``, ``K`` its 1-based position among ``MODULE``'s commands as written
  (``robot:3`` is the third command of module ``robot``; a renamed module numbers like its source);
* a JANI edge is ``AUTOMATON:K``, ``K`` its 1-based position in the automaton's ``edges`` as written (Storm's
  own order differs: :mod:`rlverify.models.jani` maps it);
* a choice made by commands of several modules synchronising on one label is their names joined by
  ``+`` in module order (``m:3+n:1``);
* Storm's own self-loops at deadlocks have no command and no name.

A policy names a choice by its action label where the label identifies it and otherwise by its
command name; in each state a choice is matched by its command name first, then by its label
(:func:`rlverify.models.dynamics.choice_table`). ``rlverify inspect`` prints the names.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlverify.errors import ModelError, did_you_mean
from rlverify.models.jani import Json, expression_text, file_edge_order, read_jani
from rlverify.models.storm import StormModel, StormProgram

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[^:+\s]+:[1-9][0-9]*$")
#: bits of a JANI origin index holding the edge index (Storm encodes ``automaton << 32 | edge``)
JANI_SHIFT = 32


@dataclass(frozen=True)
class Command:
    """One PRISM command or JANI edge: its name (``module:k``), module, action label (``""``: unlabelled) and guard text.

    ``synchronises``: the modules whose commands of this label run together (PRISM: every module with the
    label in its alphabet, in module order); empty for unlabelled commands and JANI edges (not known here).
    """

    name: str
    module: str
    action: str
    guard: str
    synchronises: tuple[str, ...] = ()


def is_command_name(name: str) -> bool:
    """Whether ``name`` has the form of a command name (``m:3`` or ``m:3+n:1``), not of an action label."""
    return bool(name) and all(_NAME.match(part) for part in name.split("+"))


def _prism_command(module: StormProgram, k: int, c: StormProgram, alphabet: dict[str, set[str]]) -> Command:
    """Command ``c``, the ``k``-th (0-based) of PRISM ``module`` (``alphabet``: each module's labels)."""
    label = c.action_name if c.is_labeled else ""
    together = tuple(m for m, acts in alphabet.items() if label in acts) if label else ()
    return Command(
        f"{module.name}:{k + 1}",
        module.name,
        label,
        str(c.guard_expression),
        together if len(together) > 1 else (),
    )


def prism_commands(program: StormProgram) -> tuple[tuple[Command, ...], dict[int, int]]:
    """The commands of a PRISM program and Storm's origin index (global command index) -> position."""
    commands: list[Command] = []
    key: dict[int, int] = {}
    alphabet = {m.name: {c.action_name for c in m.commands if c.is_labeled} for m in program.modules}
    for module in program.modules:
        for k, c in enumerate(module.commands):
            key[int(c.global_index)] = len(commands)
            commands.append(_prism_command(module, k, c, alphabet))
    return tuple(commands), key


def _warn_repeated(path: Path, data: Json) -> None:
    """Warn where an automaton runs several times in the JANI system: Storm numbers a second instance's edges as
    another automaton's, which the file does not name."""
    system = data.get("system") if isinstance(data.get("system"), dict) else {}
    elements = Counter(e.get("automaton") for e in system.get("elements", []) or [] if isinstance(e, dict))
    repeated = [a for a, n in elements.items() if n > 1]
    if repeated:
        log.warning(
            "%s: automaton '%s' runs %d times in the system: its instances' edges have no command names (choices "
            "are named by action label)",
            path,
            repeated[0],
            elements[repeated[0]],
        )


def _edge_command(automaton: str, i: int, e: Json) -> Command:
    """The ``i``-th (0-based) edge ``e`` of JANI ``automaton`` as written in the file."""
    guard = e.get("guard", {}).get("exp", True) if isinstance(e.get("guard"), dict) else True
    return Command(f"{automaton}:{i + 1}", automaton, e.get("action", ""), expression_text(guard))


def jani_commands(path: Path, model: StormProgram, data: Json = None) -> tuple[tuple[Command, ...], dict[int, int]]:
    """The edges of a JANI file and Storm's origin index (``automaton << 32 | edge``) -> position.

    Storm reorders each location's edges (by action, silent first; beyond 16 edges not stably), so its edge
    index is not the file's: :func:`rlverify.models.jani.file_edge_order` reads which file edge each of Storm's
    edges is from Storm's own parse. ``data``: the file's JSON if already read.
    """
    data = read_jani(path) if data is None else data
    try:
        order: dict[str, list[int]] | None = file_edge_order(path, data, model)
    except ModelError as exc:  # names stay usable by label; a choice needing its edge's name is refused then
        log.warning("%s", exc)
        order = None
    _warn_repeated(path, data)
    commands: list[Command] = []
    key: dict[int, int] = {}
    automata = {a["name"]: a for a in data.get("automata", []) if isinstance(a, dict)}
    for ai, automaton in enumerate(model.automata):
        edges = automata.get(automaton.name, {}).get("edges", [])
        base = len(commands)
        commands += [_edge_command(automaton.name, i, e) for i, e in enumerate(edges)]
        for storm_index, file_index in enumerate(order[automaton.name] if order is not None else ()):
            key[(ai << JANI_SHIFT) | storm_index] = base + file_index
    return tuple(commands), key


#: Storm's choice origins of a built model (``stormpy.PrismChoiceOrigins`` / ``JaniChoiceOrigins``)
_Origins = StormModel


def _origin_set(origins: _Origins, jani: bool, c: int) -> tuple[int, ...]:
    """The Storm edge (JANI) or command (PRISM) indices choice ``c`` comes from."""
    return tuple(int(x) for x in (origins.get_edge_index_set(c) if jani else origins.get_command_set(c)))


def _distinct_origins(origins: _Origins, jani: bool, n: int) -> tuple[np.ndarray, list[int]]:
    """``(n,)`` int32: each choice's distinct origin, and each distinct origin's first choice."""
    # Storm describes an origin by its commands' text: two commands written alike (``[] x=0 -> (x'=1);`` twice)
    # share a description but not an origin, so for those descriptions the command set itself is the key
    described = [origins.get_identifier_info(i) for i in range(origins.get_number_of_identifiers())]
    alike = {d for d, count in Counter(described).items() if count > 1}
    info_id: dict[object, int] = {}
    first: list[int] = []
    ids = np.empty(n, dtype=np.int32)
    for c in range(n):  # one string per choice; the command sets are read once per distinct origin
        info: object = origins.get_choice_info(c)
        if info in alike:
            info = (info, _origin_set(origins, jani, c))
        i = info_id.get(info)
        if i is None:
            i = info_id[info] = len(first)
            first.append(c)
        ids[c] = i
    return ids, first


def _origin_name(raw: tuple[int, ...], commands: Sequence[Command], key: dict[int, int], label: str | None) -> str:
    """The command name of a choice from Storm's commands/edges ``raw``; ``label``: the PRISM choice's action label,
    checked to be its commands' (None: JANI, checked when the map was made)."""
    if any(x not in key for x in raw):
        raise ModelError(
            "cannot tell which command/edge of the file one of Storm's choices is, so no choice can be "
            "named by command here (see the warning above); name choices by action label"
        )
    parts = sorted(key[x] for x in raw)
    name = "+".join(commands[p].name for p in parts)
    actions = {commands[p].action for p in parts}
    if label is not None and parts and (len(actions) != 1 or actions != {label}):
        raise ModelError(
            f"internal error: Storm's choice labelled '{label}' comes from {name}, whose label is "
            f"'{'/'.join(sorted(actions))}': no choice can be named by command here; name choices by action label"
        )
    return name


def choice_commands(
    storm_model: StormModel, commands: Sequence[Command], key: dict[int, int], labels: Sequence[str]
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per choice of a Storm model built with choice origins: ``(C,)`` int32 index into the returned names.

    Name 0 is ``""`` (no command: Storm's deadlock self-loops). ``labels`` ``(C,)`` are the choices'
    action labels: each named PRISM choice is checked to carry its commands' label (a wrong mapping would
    address the wrong choice). A JANI choice's label is its synchronisation's result, which may differ from its
    edges' actions (``{"synchronise": ["a", null], "result": "r"}``): there each edge's action was checked against
    Storm's own edge when the map was made (:func:`rlverify.models.jani.file_edge_order`).

    Raises:
        ModelError: a choice's edges are not in the map, or (PRISM) a choice's commands have another label.
    """
    origins = storm_model.choice_origins
    jani = origins.is_jani_choice_origins()
    origins = origins.as_jani_choice_origins() if jani else origins.as_prism_choice_origins()
    ids, first = _distinct_origins(origins, jani, storm_model.nr_choices)
    names = [""]
    remap = np.empty(len(first), dtype=np.int32)
    index = {"": 0}
    for i, c in enumerate(first):
        name = _origin_name(_origin_set(origins, jani, c), commands, key, None if jani else labels[c])
        if name not in index:
            index[name] = len(names)
            names.append(name)
        remap[i] = index[name]
    return remap[ids], tuple(names)


def _unknown_command(name: str, parts: list[str], by_name: dict[str, Command]) -> str | None:
    """The problem with a command name naming a command the model lacks, else None."""
    unknown = [p for p in parts if p not in by_name]
    if not unknown:
        return None
    u = unknown[0]
    where = "" if parts == [u] else f" (in '{name}')"
    return (
        f"action '{u}'{where} is not a command of the model{did_you_mean(u, by_name)} "
        "(rlverify inspect MODEL lists the command names)"
    )


def _synchronised_problem(name: str, cs: list[Command], commands: Sequence[Command]) -> str | None:
    """The problem with a choice ``cs`` naming other modules than its label synchronises, else None."""
    if not cs[0].synchronises or {c.module for c in cs} == set(cs[0].synchronises):
        return None
    example = "+".join(
        next(c.name for c in commands if c.module == m and c.action == cs[0].action) for m in cs[0].synchronises
    )
    return (
        f"'{name}': label '{cs[0].action}' synchronises modules "
        f"{', '.join(cs[0].synchronises)}: a choice takes one command of each, e.g. "
        f"'{example}' (rlverify inspect lists the choices)"
    )


def _order_problem(name: str, parts: list[str], by_name: dict[str, Command], modules: list[str]) -> str | None:
    """The problem with a command name whose commands are not in module order (``modules``), else None."""
    cs = [by_name[p].module for p in parts]
    if cs == sorted(cs, key=modules.index):
        return None
    canonical = "+".join(sorted(parts, key=lambda p: modules.index(by_name[p].module)))
    return f"'{name}': write the commands in module order: '{canonical}'"


def _choice_problem(
    name: str, parts: list[str], by_name: dict[str, Command], commands: Sequence[Command], modules: list[str]
) -> str | None:
    """The problem with a command name of known commands (mixed labels, one module twice, not the modules its label
    synchronises, not in module order), else None."""
    cs = [by_name[p] for p in parts]
    if len(cs) > 1 and (len({c.action for c in cs}) != 1 or not cs[0].action):
        return f"'{name}': only commands with one action label synchronise"
    if len({c.module for c in cs}) != len(cs):
        return f"'{name}': names two commands of one module"
    return _synchronised_problem(name, cs, commands) or _order_problem(name, parts, by_name, modules)


def check_names(names: Sequence[str], commands: Sequence[Command]) -> list[tuple[str, str]]:
    """Problems ``(name, message)`` with command names a policy uses (unknown commands, mixed labels, one module twice)."""
    by_name = {c.name: c for c in commands}
    modules = list(dict.fromkeys(c.module for c in commands))
    problems = []
    for name in names:
        if not is_command_name(name):
            continue
        parts = name.split("+")
        problem = _unknown_command(name, parts, by_name) or _choice_problem(name, parts, by_name, commands, modules)
        if problem is not None:
            problems.append((name, problem))
    return problems
