"""A command name means the edge of the file it names, and an out-of-range update is refused everywhere.

Storm keeps a JANI location's edges sorted by action (silent first) and, beyond 16 edges, in no stable order;
``AUTOMATON:K`` must still drive the K-th edge as written. Each model here is built so that the edge a name
drives is visible in the value (edge K sets ``y := K``), so the expected values are read off the file, not
computed by rlverify. Storm's builder wraps an update that leaves a variable's range into its bits (``x'=x+1``
from ``x=3`` for ``x:[0..3]`` gives 0); every engine must refuse such a model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.cli.main import main
from rlverify.errors import InputFileError, ModelError
from rlverify.models.property_parser import parse_property
from rlverify.models.storm_build import build_explicit
from rlverify.models.symbolic import load_model
from rlverify.policies import CallablePolicy
from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical


def _edge(k: int, *, action: str | None = None, location: str = "l") -> dict:
    edge = {
        "location": location,
        "guard": {"exp": {"op": "=", "left": "y", "right": 0}},
        "destinations": [{"location": location, "probability": {"exp": 1}, "assignments": [{"ref": "y", "value": k}]}],
    }
    if action is not None:
        edge["action"] = action
    return edge


def _jani(edges: list[dict], actions: tuple[str, ...] = (), top: int = 20) -> dict:
    return {
        "jani-version": 1,
        "name": "edges",
        "type": "mdp",
        "actions": [{"name": a} for a in actions],
        "variables": [
            {"name": "y", "type": {"kind": "bounded", "base": "int", "lower-bound": 0, "upper-bound": top}, "initial-value": 0}
        ],
        "automata": [{"name": "aut", "locations": [{"name": "l"}], "initial-locations": ["l"], "edges": edges}],
        "system": {"elements": [{"automaton": "aut"}], "syncs": [{"synchronise": [a], "result": a} for a in actions]},
        "properties": [],
    }


def _always(names: list[str], weights: list[float]) -> CallablePolicy:
    w = np.asarray(weights, dtype=float)
    return CallablePolicy(lambda x: np.tile(w, (len(x), 1)), ["y"], names, name="fixed")


@pytest.fixture(scope="module")
def twenty_silent(tmp_path_factory) -> Path:
    """One location, 20 silent edges all enabled at y=0; edge k sets y := k (Storm reorders beyond 16)."""
    path = tmp_path_factory.mktemp("jani") / "twenty.jani"
    path.write_text(json.dumps(_jani([_edge(k) for k in range(1, 21)])))
    return path


@pytest.mark.parametrize("k", [1, 2, 3, 17, 18, 20])
def test_a_command_name_drives_the_file_s_kth_of_20_silent_edges(twenty_silent, k):
    policy = _always([f"aut:{k}"], [1.0])
    model = load_model(twenty_silent)
    assert verify_exact(model, f"P=? [F y={k}]", policy).value == 1.0
    other = 20 if k != 20 else 1
    assert verify_exact(model, f"P=? [F y={other}]", policy).value == 0.0


def test_a_stochastic_policy_over_reordered_edges_weighs_the_right_edges(twenty_silent):
    names = [f"aut:{k}" for k in range(1, 21)]
    weights = np.arange(1, 21, dtype=float) / 210.0  # edge k taken with probability k/210
    policy = _always(names, list(weights))
    model = load_model(twenty_silent)
    for k in (2, 16, 17, 19):
        assert verify_exact(model, f"P=? [F y={k}]", policy).value == pytest.approx(k / 210.0, abs=1e-12)


def test_inspect_guard_and_name_belong_to_the_same_file_edge(tmp_path, capsys):
    """Edges with distinct guards: the name printed next to a guard drives that guard's edge."""
    edges = []
    for k in range(1, 19):
        edge = _edge(k)
        edge["guard"] = {"exp": {"op": "<", "left": "y", "right": k}}  # aut:k enabled while y < k
        edges.append(edge)
    path = tmp_path / "guards.jani"
    path.write_text(json.dumps(_jani(edges)))
    assert main(["inspect", str(path), "--json"]) == 0
    listed = {c["name"]: c["guard"] for m in json.loads(capsys.readouterr().out)["result"]["modules"] for c in m["commands"]}
    assert (listed["aut:5"], listed["aut:17"]) == ("(y < 5)", "(y < 17)")
    # aut:5 taken at y=0 leads to y=5, where aut:5 is no longer enabled but aut:17 is
    policy = _always(["aut:5"], [1.0])
    assert verify_exact(load_model(path), "P=? [F y=5]", policy).value == 1.0


@pytest.mark.parametrize("bom", [False, True])
def test_a_location_with_labelled_and_silent_edges(tmp_path, bom):
    """Labelled, silent, labelled in file order (Storm puts the silent one first); with and without a BOM."""
    path = tmp_path / "mixed.jani"
    text = json.dumps(_jani([_edge(1, action="go"), _edge(2), _edge(3, action="go")], actions=("go",), top=3))
    path.write_bytes((("\ufeff" if bom else "") + text).encode("utf-8"))
    policy = _always(["aut:3", "aut:2"], [0.25, 0.75])
    model = load_model(path)
    assert [c.name for c in model.commands] == ["aut:1", "aut:2", "aut:3"]
    values = [verify_exact(model, f"P=? [F y={k}]", policy).value for k in (1, 2, 3)]
    assert values == [0.0, 0.75, 0.25]
    mono = verify_exact(model, "Pmax=? [F y=2]", options=ExactOptions(mode="monolithic"))
    assert (mono.pmin, mono.pmax) == (0.0, 1.0)


def test_not_json_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "garbage.jani"
    path.write_bytes(b"\x00\xff\xfe binary \x89PNG")
    with pytest.raises(InputFileError, match="not a JANI file"):
        load_model(path)
    assert main(["verify", str(path), "-p", "P=? [F true]", "--mode", "monolithic"]) == 2
    err = capsys.readouterr().err
    assert "not a JANI file" in err and "Traceback" not in err


# --- out-of-range updates ------------------------------------------------------------------------------------

WRAPS = """mdp
module m
  x : [0..3] init 3;
  [up] true -> (x'=x+1);
endmodule
label "zero" = x=0;
"""

WRAPS_JANI = {
    "jani-version": 1,
    "name": "wraps",
    "type": "mdp",
    "actions": [{"name": "up"}],
    "variables": [
        {"name": "x", "type": {"kind": "bounded", "base": "int", "lower-bound": 0, "upper-bound": 3}, "initial-value": 3}
    ],
    "automata": [
        {
            "name": "aut",
            "locations": [{"name": "l"}],
            "initial-locations": ["l"],
            "edges": [
                {
                    "location": "l",
                    "action": "up",
                    "guard": {"exp": True},
                    "destinations": [
                        {
                            "location": "l",
                            "probability": {"exp": 1},
                            "assignments": [{"ref": "x", "value": {"op": "+", "left": "x", "right": 1}}],
                        }
                    ],
                }
            ],
        }
    ],
    "system": {"elements": [{"automaton": "aut"}], "syncs": [{"synchronise": ["up"], "result": "up"}]},
    "properties": [],
}

#: the refusal names the variable and the value (Storm's checks' words, or rlverify's own where Storm's cannot run)
OUT_OF_RANGE = r"(x=4 outside its range \[0\.\.3\]|out-of-bounds value \(4\) for the variable 'x')"

UP = CallablePolicy(lambda x: np.ones((len(x), 1)), ["x"], ["up"], name="up")


@pytest.fixture(params=["prism", "jani"])
def wraps(request, tmp_path) -> Path:
    if request.param == "prism":
        path = tmp_path / "wraps.nm"
        path.write_text(WRAPS)
    else:
        path = tmp_path / "wraps.jani"
        path.write_text(json.dumps(WRAPS_JANI))
    return path


@pytest.mark.parametrize("strategy", ["full", "onthefly", "merged", "auto"])
def test_out_of_range_update_is_refused_by_every_strategy(wraps, strategy):
    if wraps.suffix == ".jani" and strategy in ("onthefly", "merged"):
        pytest.skip("PRISM-only strategy")
    with pytest.raises(ModelError, match="range"):
        verify_exact(load_model(wraps), "P=? [F x=0]", UP, ExactOptions(strategy=strategy))


def test_out_of_range_update_is_refused_in_monolithic_mode(wraps):
    with pytest.raises(ModelError, match=OUT_OF_RANGE):
        verify_exact(load_model(wraps), "P=? [F x=0]", options=ExactOptions(mode="monolithic"))


def test_out_of_range_update_is_refused_by_simulation(wraps):
    with pytest.raises(ModelError, match="range"):
        verify_statistical(
            load_model(wraps),
            "P=? [F x=0]",
            UP,
            StatisticalOptions(method="clopper-pearson", runs=100, simulation=SimulationOptions(seed=0)),
        )


def test_cli_refuses_the_wrapping_model_in_one_line(wraps, tmp_path, capsys):
    pi = tmp_path / "up.py"
    pi.write_text('import numpy as np\nFEATURES = ["x"]\nACTIONS = ["up"]\ndef pi(x):\n    return np.ones((len(x), 1))\n')
    for argv in (
        ["verify", str(wraps), "-p", "P=? [F x=0]", "--mode", "monolithic"],
        ["verify", str(wraps), "-p", "P=? [F x=0]", "--policy", f"{pi}:pi", "--strategy", "full"],
        ["simulate", str(wraps), "-p", "P=? [F x=0]", "--runs", "100", "--policy", f"{pi}:pi"],
    ):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, err
        assert re.search(OUT_OF_RANGE, err) and "Traceback" not in err


def test_an_in_range_model_builds_as_before_and_the_marker_is_not_a_variable(tmp_path):
    """No out-of-range update: same counts and valuations with and without the check, built repeatedly."""
    path = tmp_path / "ok.nm"
    path.write_text(WRAPS.replace("x'=x+1", "x'=min(x+1,3)").replace("init 3", "init 0"))
    model = load_model(path)
    prop = parse_property(model, "P=? [F x=3]")
    for _ in range(3):  # a second build of one program takes a fresh parse (Storm declares its marker once)
        mdp, _ = build_explicit(model, [prop])
        assert mdp.variables == ("x",)
        assert (mdp.num_states, mdp.num_transitions) == (4, 4)
        assert sorted(mdp.valuations[:, 0].tolist()) == [0, 1, 2, 3]


def test_without_the_edge_map_a_command_name_is_refused_not_guessed(twenty_silent):
    """If Storm's edges could not be matched to the file's (the map is empty), naming a choice by command is an
    error: falling back to Storm's order would drive the wrong edge."""
    import dataclasses

    model = dataclasses.replace(load_model(twenty_silent), command_keys={})
    with pytest.raises(ModelError, match="name choices by action label"):
        verify_exact(model, "P=? [F y=2]", _always(["aut:2"], [1.0]))


@pytest.mark.parametrize(
    "change, where",
    [
        (lambda d: d.update(features=5), "'features' must be a list of strings"),
        (lambda d: d.update(features=[{"a": 1}]), "'features' must be a list of strings"),
        (lambda d: d.update(variables=5), "'variables' must be a list"),
        (lambda d: d["variables"][0].update(type=[1]), "'variables'[0].type must be a string or an object"),  # Storm: SIGSEGV
        (lambda d: d.update(automata=5), "'automata' must be a list"),
        (lambda d: d.update(automata=["x"]), "'automata'[0] must be an object"),
        (lambda d: d["automata"][0].update(edges=5), "automaton 'aut': 'edges' must be a list"),
    ],
    ids=[
        "features-int",
        "features-objects",
        "variables-int",
        "variable-type-list",
        "automata-int",
        "automata-strings",
        "edges-int",
    ],
)
def test_jani_json_of_the_wrong_type_is_refused_naming_the_place(tmp_path, capsys, change, where):
    data = json.loads(json.dumps(WRAPS_JANI))
    change(data)
    path = tmp_path / "wrong.jani"
    path.write_text(json.dumps(data))
    with pytest.raises(ModelError, match=re.escape(where)):
        load_model(path)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not a valid JANI model" in err and "Traceback" not in err


def test_edges_with_constants_are_matched_after_the_constants_are_given(tmp_path):
    """Guards reading an undefined constant: the edges are matched as the file writes them, then instantiated."""
    edges = []
    for k in range(1, 19):
        edge = _edge(k)
        edge["guard"] = {"exp": {"op": "<", "left": "y", "right": "N"}}
        edges.append(edge)
    data = _jani(edges)
    data["constants"] = [{"name": "N", "type": "int"}]
    path = tmp_path / "constants.jani"
    path.write_text(json.dumps(data))
    model = load_model(path, "N=1")
    assert verify_exact(model, "P=? [F y=17]", _always(["aut:17"], [1.0])).value == 1.0


#: Storm's checks refuse 1/2 + 1/5 + 1/5 + 1/10 (a float sum of 1 - 1e-16): the model is built unchecked and the
#: updates' ranges are checked by rlverify; here a synchronised update (which Storm's out-of-bounds state misses)
ROUNDED_AND_WRAPPING = """mdp
module A
  x : [0..2] init 2;
  [] true -> 1/2:(x'=x) + 1/5:(x'=x) + 1/5:(x'=x) + 1/10:(x'=x);
  [go] true -> 0.5:(x'=x-1) + 0.5:true;
endmodule
module B
  y : [0..3] init 0;
  [go] y<3 -> 0.5:(y'=y+1) + 0.5:true;
endmodule
"""


def test_a_synchronised_update_out_of_range_is_refused_where_storm_s_checks_cannot_run(tmp_path):
    path = tmp_path / "rounded.nm"
    path.write_text(ROUNDED_AND_WRAPPING)
    with pytest.raises(ModelError, match=r"command A:2 assigns x=-1 outside its range \[0\.\.2\]"):
        verify_exact(load_model(path), "Pmax=? [F y=3]", options=ExactOptions(mode="monolithic"))
    path.write_text(ROUNDED_AND_WRAPPING.replace("x'=x-1", "x'=max(0, x-1)"))
    result = verify_exact(load_model(path), "Pmax=? [F y=3]", options=ExactOptions(mode="monolithic"))
    assert result.pmax == 1.0  # go, repeated, moves y up with probability 1/2 each time
    assert not any("ranges were checked only" in w for w in result.warnings)


def test_a_jani_model_storm_cannot_check_says_what_was_not_checked(tmp_path):
    data = json.loads(json.dumps(WRAPS_JANI))
    data["variables"][0]["initial-value"] = 0
    edge = data["automata"][0]["edges"][0]
    edge["guard"] = {"exp": {"op": "<", "left": "x", "right": 3}}
    data["automata"][0]["edges"].append(
        {
            "location": "l",
            "guard": {"exp": True},
            "destinations": [{"location": "l", "probability": {"exp": p}} for p in (0.5, 0.2, 0.2, 0.1)],
        }
    )
    second = json.loads(json.dumps(data["automata"][0]))
    second["name"] = "other"
    second["edges"] = [second["edges"][1]]
    data["automata"].append(second)
    data["system"]["elements"].append({"automaton": "other"})
    data["system"]["syncs"] = [{"synchronise": ["up", None], "result": "up"}]
    path = tmp_path / "rounded.jani"
    path.write_text(json.dumps(data))
    result = verify_exact(load_model(path), "Pmax=? [F x=3]", options=ExactOptions(mode="monolithic"))
    assert result.pmax == 1.0
    assert any("ranges were checked only where Storm reports them" in w for w in result.warnings)
