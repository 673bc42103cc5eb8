"""A JANI choice's command name is the file's edge that Storm fired, on generated models.

The models repeat action labels within automata and locations, hold more than 16 edges in a location (Storm's
edge order among equal actions is then not the file's), list the automata in the system in another order than
in the file, and synchronise with results that rename the action (``{"synchronise": ["a", null], "result":
"r"}``, as public models do) or make it silent. Oracle: Storm's own transitions and labels. The K-th edge of
automaton X assigns ``eX := K``, so each successor of a choice Storm built shows which edges fired; the choice's
label must be the result the generator wrote for those edges' actions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlverify.cli.main import main
from rlverify.errors import ModelError
from rlverify.models import build_explicit, load_model

ACTIONS = ("a", "b", "c")


def _bounded(name: str, top: int) -> dict:
    return {"name": name, "type": {"kind": "bounded", "base": "int", "lower-bound": 0, "upper-bound": top}, "initial-value": 0}


@st.composite
def models(draw: st.DrawFn) -> tuple[dict, dict[tuple, str]]:
    """A JANI MDP of one or two automata and the label each combination of edge actions must carry."""
    names = draw(st.sampled_from([("A",), ("Station_1", "Station_2"), ("A", "B")]))
    automata = []
    for i, name in enumerate(names):
        locations = draw(st.sampled_from([("l0",), ("l0", "l1")]))
        n = draw(st.integers(17, 30)) if i == 0 else draw(st.integers(2, 8))
        edges = []
        for k in range(1, n + 1):
            action = draw(st.sampled_from((*ACTIONS, None)))
            source = locations[0] if k <= 17 or len(locations) == 1 else draw(st.sampled_from(locations))
            assign = [{"ref": f"e{i}", "value": k}, {"ref": f"y{i}", "value": {"op": "+", "left": f"y{i}", "right": 1}}]
            destinations = [{"location": draw(st.sampled_from(locations)), "probability": {"exp": 1}, "assignments": assign}]
            if draw(st.booleans()):
                destinations[0]["probability"] = {"exp": 0.5}
                destinations.append(
                    {"location": draw(st.sampled_from(locations)), "probability": {"exp": 0.5}, "assignments": assign}
                )
            edge = {
                "location": source,
                "guard": {"exp": {"op": "<", "left": f"y{i}", "right": draw(st.integers(1, 2))}},
                "destinations": destinations,
            }
            if action is not None:
                edge["action"] = action
            edges.append(edge)
        automata.append(
            {"name": name, "locations": [{"name": loc} for loc in locations], "initial-locations": ["l0"], "edges": edges}
        )
    order = list(range(len(names)))
    if draw(st.booleans()):
        order.reverse()
    results: dict[tuple, str] = {}  # (action per system element, None: not taking part) -> label ("": silent)
    syncs = []
    for a in ACTIONS:
        result = draw(st.sampled_from([a, f"r{a}", "", "shared"]))
        together = len(names) == 2 and draw(st.booleans())
        vectors = (
            [tuple(a for _ in order)]
            if together
            else [tuple(a if j == e else None for j in range(len(order))) for e in range(len(order))]
        )
        for v in vectors:
            syncs.append({"synchronise": list(v), **({"result": result} if result else {})})
            results[v] = result
    declared = sorted({a for a in ACTIONS} | {r for r in results.values() if r})
    data = {
        "jani-version": 1,
        "name": "generated",
        "type": "mdp",
        "actions": [{"name": a} for a in declared],
        "variables": [v for i, a in enumerate(automata) for v in (_bounded(f"y{i}", 2), _bounded(f"e{i}", len(a["edges"])))],
        "automata": automata,
        "system": {"elements": [{"automaton": names[j]} for j in order], "syncs": syncs},
        "properties": [],
    }
    return data, results


def _check_names(path: Path, data: dict, results: dict[tuple, str]) -> int:
    """Every choice's name against the edges its successors show and the label Storm gave it; the choices checked."""
    model = load_model(path)
    mdp, _ = build_explicit(model, None, command_names=True)
    assert mdp.choice_commands is not None
    automata = [a["name"] for a in data["automata"]]
    elements = [automata.index(e["automaton"]) for e in data["system"]["elements"]]
    column = {f"e{i}": mdp.variables.index(f"e{i}") for i in range(len(automata))}
    source = mdp.choice_states()
    checked = 0
    for c in range(mdp.num_choices):
        name = mdp.command_names[mdp.choice_commands[c]]
        label = mdp.action_names[mdp.choice_actions[c]]
        row = mdp.transitions.getrow(c)
        if not name:  # Storm's self-loop at a deadlock
            assert row.indices.tolist() == [source[c]] and label == ""
            continue
        fired = {}
        for part in name.split("+"):
            automaton, k = part.rsplit(":", 1)
            fired[automata.index(automaton)] = int(k)
        for successor in row.indices:
            for i in range(len(automata)):
                expected = fired.get(i, mdp.valuations[source[c], column[f"e{i}"]])
                assert mdp.valuations[successor, column[f"e{i}"]] == expected, (name, i)
        actions = [data["automata"][i]["edges"][k - 1].get("action") for i, k in fired.items()]
        if actions == [None]:
            assert label == ""
        else:
            vector = tuple(data["automata"][i]["edges"][fired[i] - 1]["action"] if i in fired else None for i in elements)
            assert label == results[vector], (name, vector)
        checked += 1
    return checked


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(generated=models())
def test_every_choice_is_named_by_the_file_edges_that_fired(tmp_path, generated):
    data, results = generated
    path = tmp_path / "generated.jani"
    path.write_text(json.dumps(data))
    assert _check_names(path, data, results) > 0


def _renamed() -> dict:
    """One automaton 'Station_1' of 40 edges in one location, each label on many edges, 'go' renamed 'reseto2'."""
    edges = []
    for k in range(1, 41):
        assign = [{"ref": "e0", "value": k}, {"ref": "y", "value": {"op": "+", "left": "y", "right": 1}}]
        edges.append(
            {
                "location": "l0",
                "action": "go" if k % 3 else "stop",
                "guard": {"exp": {"op": "<", "left": "y", "right": 1}},
                "destinations": [{"location": "l0", "probability": {"exp": 1}, "assignments": assign}],
            }
        )
    return {
        "jani-version": 1,
        "name": "renamed",
        "type": "mdp",
        "actions": [{"name": "go"}, {"name": "stop"}, {"name": "reseto2"}],
        "variables": [_bounded("y", 1), _bounded("e0", 40)],
        "automata": [{"name": "Station_1", "locations": [{"name": "l0"}], "initial-locations": ["l0"], "edges": edges}],
        "system": {
            "elements": [{"automaton": "Station_1"}],
            "syncs": [{"synchronise": ["go"], "result": "reseto2"}, {"synchronise": ["stop"], "result": "stop"}],
        },
        "properties": [],
    }


def test_a_renamed_label_over_many_edges_names_the_edges(tmp_path):
    data = _renamed()
    path = tmp_path / "renamed.jani"
    path.write_text(json.dumps(data))
    assert _check_names(path, data, {("go",): "reseto2", ("stop",): "stop"}) == 40


def test_cli_inspects_and_verifies_a_renamed_label_over_many_edges(tmp_path, capsys):
    """Was ``AssertionError: choice origins do not match the choice's label 'reseto2'`` (exit 1, a traceback)."""
    path = tmp_path / "renamed.jani"
    path.write_text(json.dumps(_renamed()))
    assert main(["inspect", str(path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["result"]
    commands = [c for m in listed["modules"] for c in m["commands"]]
    assert [c["name"] for c in commands] == [f"Station_1:{k}" for k in range(1, 41)]
    assert main(["verify", str(path), "-p", "Pmax=? [F e0=3]", "--mode", "monolithic", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["result"]
    # 40 edges from the start, each to its own deadlock (a self-loop each): 41 states, 80 transitions
    assert (out["pmin"], out["pmax"], out["states"], out["transitions"]) == (0.0, 1.0, 41, 80)
    pi = tmp_path / "pi.py"
    pi.write_text(
        'import numpy as np\nFEATURES = ["e0"]\nACTIONS = ["Station_1:3", "Station_1:4"]\n'
        "def pi(x):\n    return np.tile([0.25, 0.75], (len(x), 1))\n"
    )
    for k, expected in ((3, 0.25), (4, 0.75), (5, 0.0)):
        assert main(["verify", str(path), "-p", f"P=? [F e0={k}]", "--policy", f"{pi}:pi", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["result"]["value"] == expected


def test_an_automaton_run_twice_is_refused_naming_it(tmp_path, caplog):
    """Storm numbers the second instance's edges as another automaton's: no command name can be given to them,
    and the refusal's "see the warning above" has a warning saying why (none was printed)."""
    data = _renamed()
    automaton = data["automata"][0]
    automaton["locations"].append({"name": "l1"})
    automaton["edges"] = [{**e, "action": "stop"} for e in automaton["edges"][:2]]
    automaton["edges"][0]["destinations"][0]["location"] = "l1"
    data["system"] = {
        "elements": [{"automaton": "Station_1"}] * 2,
        "syncs": [{"synchronise": v, "result": "stop"} for v in (["stop", None], [None, "stop"])],
    }
    path = tmp_path / "twice.jani"
    path.write_text(json.dumps(data))
    with pytest.raises(ModelError, match="see the warning above"):
        build_explicit(load_model(path), None, command_names=True)
    assert "automaton 'Station_1' runs 2 times in the system" in caplog.text
