"""``rlverify inspect``: the names a policy must declare, and a policy skeleton that verifies as written."""

from __future__ import annotations

import json

import pytest

from rlverify.cli.main import main

# x=0 offers [a] (to x=1) and an unlabelled command (to x=2); x>0 offers [a] alone
MIXED = """mdp
module m
  x : [0..2] init 0;
  b : bool init false;
  [a] x=0 -> (x'=1);
  [] x=0 -> (x'=2) & (b'=true);
  [a] x>0 -> (x'=x);
endmodule
label "two" = x=2;
rewards "r"
  [a] true : 1;
endrewards
"""


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "mixed.prism"
    path.write_text(MIXED)
    return path


def test_inspect_lists_variables_commands_and_the_names_a_policy_needs(capsys, model):
    code, out, _ = run(capsys, "inspect", str(model), "--json")
    s = json.loads(out)["result"]
    assert code == 0
    assert s["variables"] == [
        {"name": "x", "type": "int", "module": "m", "low": 0, "high": 2, "init": 0},
        {"name": "b", "type": "bool", "module": "m", "low": 0, "high": 1, "init": 0},
    ]
    assert [(c["name"], c["action"]) for c in s["modules"][0]["commands"]] == [("m:1", "a"), ("m:2", ""), ("m:3", "a")]
    assert s["features"] == ["x", "b"] and s["actions"] == ["a", "m:2"] and s["ambiguous"] is True
    # reachable: (x,b) = (0,0), (1,0), (2,1); x=0 is the one state with two choices
    assert (s["states"], s["choices"], s["decision_states"]) == (3, 4, 3)
    assert s["labels"] == ["two"] and s["reward_models"] == ["r"] and s["initial_states"] == [{"x": 0, "b": 0}]


@pytest.mark.parametrize("suffix", [".py", ".json"])
def test_the_policy_template_is_uniform_over_the_available_choices(capsys, model, tmp_path, suffix):
    template = tmp_path / f"pi{suffix}"
    code, _, err = run(capsys, "inspect", str(model), "--policy-template", str(template))
    assert code == 0 and template.is_file(), err
    spec = f"{template}:pi" if suffix == ".py" else str(template)
    # uniform over {a, m:2} at x=0: P(F x=2) = 1/2 exactly, nothing stalls, nothing untaken
    code, out, _ = run(capsys, "verify", str(model), "-p", 'P=? [F "two"]', "--policy", spec, "--json")
    r = json.loads(out)["result"]
    assert code == 0 and r["value"] == pytest.approx(0.5, abs=1e-12)
    assert r["stalled_probability"] == 0 and r["untaken_choices"] == {}
    # the file is the user's now: not overwritten without --force
    code, _, err = run(capsys, "inspect", str(model), "--policy-template", str(template))
    assert code == 2 and "exists; pass --force" in err
    assert run(capsys, "inspect", str(model), "--policy-template", str(template), "--force")[0] == 0


def test_inspect_takes_benchmark_ids_and_refuses_what_it_cannot_describe(capsys, tmp_path):
    code, out, _ = run(capsys, "inspect", "running-example-v1", "--json")
    s = json.loads(out)["result"]
    assert code == 0 and s["actions"] == ["DOWN", "NOP", "UP"] and s["states"] == 4 and s["ambiguous"] is False
    code, _, err = run(capsys, "inspect", "running-example-v1", "--no-build", "--policy-template", str(tmp_path / "p.py"))
    assert code == 2 and "drop --no-build" in err
    code, _, err = run(capsys, "inspect", "running-example-v1", "--policy-template", str(tmp_path / "p.txt"))
    assert code == 2 and "expected a .py or .json file name" in err
    code, _, err = run(capsys, "inspect", "acc-v1")
    assert code == 2 and "rlverify abstract acc-v1" in " ".join(err.split())
    code, _, err = run(capsys, "inspect", "running-example-v1", "--max-states", "2")
    assert code == 2 and "--max-states=2" in " ".join(err.split())


def test_a_dtmc_needs_no_policy_and_gets_no_template(capsys, tmp_path):
    dtmc = tmp_path / "coin.pm"
    dtmc.write_text(
        "dtmc\nmodule c\n  s : [0..2] init 0;\n  [flip] s=0 -> 0.5 : (s'=1) + 0.5 : (s'=2);\n"
        '  [] s>0 -> true;\nendmodule\nlabel "heads" = s=1;\n'
    )
    code, out, _ = run(capsys, "inspect", str(dtmc), "--json")
    assert code == 0 and json.loads(out)["result"]["actions"] == [] and json.loads(out)["result"]["decision_states"] == 0
    code, _, err = run(capsys, "inspect", str(dtmc), "--policy-template", str(tmp_path / "p.py"))
    assert code == 2 and "no policy is needed" in err and not (tmp_path / "p.py").exists()
    code, _, err = run(capsys, "verify", str(dtmc), "-p", 'P=? [F "heads"]')
    assert code == 2 and "is a DTMC" in " ".join(err.split()) and "--mode monolithic" in err
    code, _, err = run(capsys, "simulate", str(dtmc), "-p", 'P=? [F "heads"]')  # simulate has no --mode monolithic:
    assert code == 2 and "rlverify verify" in " ".join(err.split())  # the message names the command that has it
    code, out, _ = run(capsys, "verify", str(dtmc), "-p", 'P=? [F "heads"]', "--mode", "monolithic", "--json")
    assert code == 0 and json.loads(out)["result"]["pmin"] == pytest.approx(0.5) == json.loads(out)["result"]["pmax"]


def test_python_files_without_a_name_say_how_to_give_one(capsys, tmp_path, model):
    (tmp_path / "pi.py").write_text("FEATURES = ['x']\n")
    code, _, err = run(capsys, "verify", str(model), "-p", 'P=? [F "two"]', "--policy", str(tmp_path / "pi.py"))
    assert code == 2 and "FILE.py:NAME" in err
    code, _, err = run(capsys, "abstract", str(tmp_path / "system.py"))
    assert code == 2 and "FILE.py:NAME" in err and "system.py:SYSTEM" in " ".join(err.split())


def test_a_misspelt_jani_property_name_gets_the_close_one(capsys, tmp_path):
    import stormpy

    prism = tmp_path / "m.prism"
    prism.write_text(MIXED)
    jani = tmp_path / "m.jani"
    model = json.loads(str(stormpy.parse_prism_program(str(prism)).to_jani([])[0]))
    model["properties"] = [
        {
            "name": "reach_two",
            "expression": {
                "op": "filter",
                "fun": "values",
                "states": {"op": "initial"},
                "values": {"op": "Pmax", "exp": {"op": "U", "left": True, "right": {"op": "=", "left": "x", "right": 2}}},
            },
        }
    ]
    jani.write_text(json.dumps(model))
    code, _, err = run(capsys, "verify", str(jani), "-p", "reach_tow", "--mode", "monolithic")
    err = " ".join(err.split())
    assert code == 2 and "did you mean 'reach_two'?" in err
