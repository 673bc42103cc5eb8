"""A JANI guard is shown as the expression it is: ``rlverify inspect`` used to print the file's JSON (with ``\\u2227``
escapes for ``∧``). The oracle is Storm's own printing of the expression it parsed from the file, on generated guards
over the operators Storm prints as written, and on every edge of the public QVBS JANI models shipped for the tests;
JANI's derived operators, which Storm expands on parsing, are held to texts written out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlverify.cli.main import main
from rlverify.models.jani import expression_text, file_edge_order, read_jani
from tests.models.test_file_edges import _jani

QVBS = Path(__file__).resolve().parents[1] / "data" / "qvbs"


def _one_edge(guard: object) -> dict:
    """A JANI MDP with one edge guarded by ``guard`` over ``y`` (int in [0, 5]), ``b`` (bool) and a constant ``K``."""
    edge = {"location": "l", "guard": {"exp": guard}, "destinations": [{"location": "l", "probability": {"exp": 1}}]}
    data = _jani([edge], top=5)
    data["variables"].append({"name": "b", "type": "bool", "initial-value": False})
    data["constants"] = [{"name": "K", "type": "int", "value": 3}]
    return data


def _storm_guard(tmp_path: Path, guard: object) -> str:
    import stormpy

    path = tmp_path / "guard.jani"
    path.write_text(json.dumps(_one_edge(guard), ensure_ascii=False), encoding="utf-8")
    model, _ = stormpy.parse_jani_model(str(path))
    return str(model.automata[0].edges[0].guard)


def _binary(op: str, left: st.SearchStrategy, right: st.SearchStrategy) -> st.SearchStrategy:
    return st.builds(lambda a, b: {"op": op, "left": a, "right": b}, left, right)


def _numbers() -> st.SearchStrategy:
    leaves = st.one_of(st.integers(-20, 20), st.sampled_from(["y", "K"]))
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            *(_binary(op, inner, inner) for op in ("+", "-", "*")),
            st.builds(lambda e: {"op": "floor", "exp": {"op": "/", "left": e, "right": 2}}, inner),
            st.builds(lambda e: {"op": "ceil", "exp": {"op": "/", "left": e, "right": 3}}, inner),
        ),
        max_leaves=6,
    )


def _booleans() -> st.SearchStrategy:
    numbers = _numbers()
    atoms = st.one_of(
        st.booleans(),
        st.just("b"),
        *(_binary(op, numbers, numbers) for op in ("=", "≠", "<", "≤", ">", "≥")),
    )
    return st.recursive(
        atoms,
        lambda inner: st.one_of(
            _binary("∧", inner, inner),
            _binary("∨", inner, inner),
            st.builds(lambda e: {"op": "¬", "exp": e}, inner),
            st.builds(
                lambda c, a, b: {"op": "<", "left": {"op": "ite", "if": c, "then": a, "else": b}, "right": 4},
                inner,
                numbers,
                numbers,
            ),
        ),
        max_leaves=8,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(guard=_booleans())
def test_a_generated_guard_reads_as_storm_prints_it(tmp_path, guard):
    assert expression_text(guard) == _storm_guard(tmp_path, guard)


@pytest.mark.parametrize("name", sorted(p.name for p in QVBS.glob("*/*.jani")))
def test_every_qvbs_edge_guard_reads_as_storm_prints_it(name):
    import stormpy

    path = next(QVBS.glob(f"*/{name}"))
    data = read_jani(path)
    model, _ = stormpy.parse_jani_model(str(path))
    order = file_edge_order(path, data, model)
    edges = {a["name"]: a["edges"] for a in data["automata"]}
    compared = 0
    for automaton in model.automata:
        for storm_index, edge in enumerate(automaton.edges):
            written = edges[automaton.name][order[automaton.name][storm_index]]["guard"]["exp"]
            assert expression_text(written) == str(edge.guard), (automaton.name, storm_index)
            compared += 1
    assert compared == sum(len(e) for e in edges.values()) > 0


@pytest.mark.parametrize(
    ("guard", "text"),
    [
        ({"op": "⇒", "left": "b", "right": {"op": "=", "left": "y", "right": 1}}, "(b => (y = 1))"),
        ({"op": "<", "left": {"op": "%", "left": "y", "right": 2}, "right": 1}, "((y % 2) < 1)"),
        ({"op": "<", "left": {"op": "pow", "left": "y", "right": 2}, "right": 9}, "(pow(y, 2) < 9)"),
        (
            {"op": "<", "left": {"op": "min", "left": "y", "right": 2}, "right": {"op": "max", "left": "y", "right": "K"}},
            "(min(y, 2) < max(y, K))",
        ),
        (
            {"op": "≥", "left": {"op": "abs", "exp": {"op": "-", "left": "y", "right": 2}}, "right": 0.5},
            "(abs((y - 2)) >= 0.5)",
        ),
        ({"op": "<", "left": "y", "right": {"op": "*", "left": {"constant": "π"}, "right": 2}}, "(y < (π * 2))"),
        ({"op": "∧", "left": "b", "right": {"op": "unknown-op"}}, '(b & {"op": "unknown-op"})'),
    ],
)
def test_derived_operators_read_as_the_file_writes_them(guard, text):
    assert expression_text(guard) == text


def test_a_hostile_nesting_is_cut_not_a_crash():
    guard: object = True
    for _ in range(5000):
        guard = {"op": "¬", "exp": guard}
    text = expression_text(guard)
    assert text.startswith("!(" * 101 + "…") and len(text) < 1000


def test_inspect_lists_a_jani_guard_as_text_not_json(tmp_path, capsys):
    guard = {"op": "∧", "left": {"op": "=", "left": "y", "right": 2}, "right": {"op": "¬", "exp": "b"}}
    path = tmp_path / "guard.jani"
    path.write_text(json.dumps(_one_edge(guard)), encoding="utf-8")  # ensure_ascii: the file has \u2227 escapes
    assert main(["inspect", str(path), "--json"]) == 0
    commands = [c for m in json.loads(capsys.readouterr().out)["result"]["modules"] for c in m["commands"]]
    assert [(c["name"], c["guard"]) for c in commands] == [("aut:1", "((y = 2) & !(b))")]
