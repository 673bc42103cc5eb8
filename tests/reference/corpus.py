"""The QVBS corpus in tests/data/qvbs (CC-BY 4.0, see its README) and the restricted forms the tests build.

No rlverify import here: this module and :mod:`tests.reference.oracle` are the reference side.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.reference.oracle import read_jani

QVBS = Path(__file__).resolve().parents[1] / "data" / "qvbs"

#: the step counter :func:`restrict_steps` adds
STEPS = "refSteps"


def path(family: str, name: str) -> Path:
    """A model file of the corpus (``path("csma", "csma.3-2.prism")``)."""
    p = QVBS / family / name
    assert p.is_file(), p
    return p


def published(family: str, result_file: str) -> dict[str, float]:
    """Storm's published values by property name from ``results/<result_file>`` (exact results: their approximation)."""
    data = json.loads((QVBS / family / "results" / result_file).read_text(encoding="utf-8-sig"))
    out = {}
    for entry in data["data"]:
        if "property" not in entry:
            continue
        v = entry["value"]
        out[entry["property"]] = v["approx"] if isinstance(v, dict) else v
    return out


def exact_result(family: str, file: str, prop: str, constants: dict[str, int] | None = None) -> float:
    """Storm's exact result (``Storm/exact`` in the family's ``index.json``) for ``prop`` of ``file`` with the open
    parameters ``constants``; the results/*.json of non-exact runs are off by up to ~1e-5 relative."""
    data = json.loads((QVBS / family / "index.json").read_text(encoding="utf-8-sig"))
    for entry in data["files"]:
        if entry["file"] != file:
            continue
        for run in entry.get("open-parameter-values", []):
            if {v["name"]: v["value"] for v in run.get("values", [])} != (constants or {}):
                continue
            for r in run.get("results", []):
                if r["property"] == prop and r.get("note") == "Storm/exact":
                    v = r["value"]
                    return float(v["num"]) / float(v["den"]) if isinstance(v, dict) else float(v)
    raise KeyError(f"{family}/{file}: no exact result for {prop} at {constants}")


def restrict_steps(source: Path, target: Path, k: int) -> Path:
    """Write to ``target`` a copy of JANI ``source`` whose edges are enabled only in the first ``k`` steps.

    A global counter ``refSteps : [0..k]`` (initially 0) is conjoined to every edge's guard (``refSteps < k``)
    and increased by every destination; after ``k`` steps the state is a deadlock (Storm's self-loop). Every
    edge stays in place, so an automaton with hundreds of edges in one location keeps them, and the reachable
    part is the states within ``k`` steps.
    """
    data = read_jani(source)
    data["variables"].append(
        {"name": STEPS, "type": {"kind": "bounded", "base": "int", "lower-bound": 0, "upper-bound": k}, "initial-value": 0}
    )
    for automaton in data["automata"]:
        for edge in automaton["edges"]:
            more = {"op": "<", "left": STEPS, "right": k}
            guard = edge.get("guard", {}).get("exp", True)
            edge["guard"] = {"exp": {"op": "∧", "left": guard, "right": more}}
            for dest in edge["destinations"]:
                dest.setdefault("assignments", []).append({"ref": STEPS, "value": {"op": "+", "left": STEPS, "right": 1}})
    target.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return target
