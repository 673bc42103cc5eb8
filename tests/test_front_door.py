"""One front door: the same input means the same thing in every command and every engine.

Each test reproduces a case where the engines disagreed about one input (issue "one front door"),
with values checked against a brute-force numpy computation or against the exact engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlverify.benchmarks import all_ids, make, spec
from rlverify.cli.main import main

# A robot walks right along a corridor; `goalReached` is enabled only in the goal cell, which the
# property-directed build makes absorbing (so the built MDP never offers it).
ROBOT = """mdp
module robot
  x : [0..3] init 0;
  [right] x<3 -> 0.7 : (x'=x+1) + 0.3 : (x'=x);
  [left] x>0 & x<3 -> (x'=x-1);
  [goalReached] x=3 -> (x'=x);
endmodule
label "goal" = x=3;
"""
ROBOT_POLICY = """import numpy as np
FEATURES = ['x']
ACTIONS = ['right', 'left', 'goalReached']
def pi(s):
    x = s[:, 0]
    out = np.zeros((len(s), 3))
    out[:, 0] = np.where(x == 0, 1.0, 0.8)
    out[:, 1] = np.where(x == 0, 0.0, 0.2)
    out[x == 3] = [0.0, 0.0, 1.0]
    return out
"""

# State 0 offers two unlabelled commands; a policy addresses them by their command names m:1 and m:2.
UNLABELLED = """mdp
module m
  x : [0..2] init 0;
  [] x=0 -> (x'=1);
  [] x=0 -> (x'=2);
  [a] x>0 -> (x'=x);
endmodule
label "two" = x=2;
"""
A_POLICY = "import numpy as np\nFEATURES = ['x']\nACTIONS = ['a']\ndef pi(s):\n    return np.ones((len(s), 1))\n"


def robot_brute_force(k: int) -> float:
    """P(F<=k goal) of the robot under ROBOT_POLICY, by dynamic programming over x."""
    v = np.array([0.0, 0.0, 0.0, 1.0])
    for _ in range(k):
        new = v.copy()
        for x in range(3):
            right, left = (1.0, 0.0) if x == 0 else (0.8, 0.2)
            new[x] = right * (0.7 * v[x + 1] + 0.3 * v[x]) + (left * v[x - 1] if x > 0 else 0.0)
        v = new
    return float(v[0])


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in (
        ("robot.prism", ROBOT),
        ("robot_pi.py", ROBOT_POLICY),
        ("unlabelled.prism", UNLABELLED),
        ("a_pi.py", A_POLICY),
    ):
        out[name] = tmp_path / name
        out[name].write_text(text)
    return out


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_verify_and_simulate_agree_on_an_action_only_the_goal_offers(capsys, files):
    exact_value = robot_brute_force(6)
    model, pol = str(files["robot.prism"]), f"{files['robot_pi.py']}:pi"
    code, out, _ = run(capsys, "verify", model, "-p", 'P=? [F<=6 "goal"]', "--policy", pol, "--json")
    assert code == 0 and json.loads(out)["result"]["value"] == pytest.approx(exact_value, abs=1e-9)
    code, out, err = run(
        capsys, "simulate", model, "-p", 'P=? [F<=6 "goal"]', "--policy", pol, "--runs", "4000", "--delta", "0.001", "--json"
    )
    assert code == 0, err
    r = json.loads(out)["result"]
    assert r["interval"][0] <= exact_value <= r["interval"][1] and r["stalled"] == 0


def test_unlabelled_choices_the_policy_does_not_name_stall_alike_in_verify_and_simulate(capsys, files):
    # x=0 offers two unlabelled commands (m:1, m:2) and the policy names only `a`: all its mass there is unavailable
    model, pol = str(files["unlabelled.prism"]), f"{files['a_pi.py']}:pi"
    code, out, err = run(capsys, "verify", model, "-p", 'P=? [F "two"]', "--policy", pol, "--json")
    r = json.loads(out)["result"]
    assert code == 0 and r["value"] == 0.0 and r["stalled_probability"] == 1.0
    assert r["untaken_choices"] == {"m:1": 1, "m:2": 1} and "never takes them: m:1 (1 policy-reachable states)" in err
    code, out, err = run(capsys, "simulate", model, "-p", 'P=? [F "two"]', "--policy", pol, "--runs", "100", "--json")
    r = json.loads(out)["result"]
    assert code == 0 and r["stalled"] == 100 and r["successes"] == 0 and r["untaken_choices"] == {"m:1": 1, "m:2": 1}
    # a policy naming the commands chooses between them: 0.3 * 0 + 0.7 * 1 exactly, in both engines
    named = files["a_pi.py"].parent / "named.py"
    named.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['m:1', 'm:2', 'a']\n"
        "def pi(s):\n    return np.where(s[:, :1] == 0, [0.3, 0.7, 0.0], [0.0, 0.0, 1.0])\n"
    )
    code, out, _ = run(capsys, "verify", model, "-p", 'P=? [F "two"]', "--policy", f"{named}:pi", "--json")
    r = json.loads(out)["result"]
    assert code == 0 and r["value"] == pytest.approx(0.7, abs=1e-12) and r["untaken_choices"] == {}
    code, out, _ = run(capsys, "simulate", model, "-p", 'P=? [F "two"]', "--policy", f"{named}:pi", "--runs", "3000", "--json")
    r = json.loads(out)["result"]
    assert code == 0 and r["interval"][0] <= 0.7 <= r["interval"][1] and r["stalled"] == 0


@pytest.mark.parametrize(
    "text,verdict", [('P>=0.5 [F<=2 "goal"]', "no"), ('P<=0.5 [F<=2 "goal"]', "yes"), ('P>0.26 [F<=2 "goal"]', "undecided")]
)
def test_simulate_answers_threshold_properties_without_sprt(capsys, text, verdict):
    # running example: P(F<=2 goal) = 0.264 exactly (worked out by hand in tests/test_running_example.py)
    code, out, _ = run(capsys, "simulate", "running-example-v1", "-p", text, "--runs", "2000", "--json")
    r = json.loads(out)["result"]
    assert code == 0 and r["verdict"] == verdict and r["threshold"] == float(text[3:].split(" ")[0].lstrip("="))
    assert r["satisfied"] == {"yes": True, "no": False, "undecided": None}[verdict]
    assert r["interval"][0] <= 0.264 <= r["interval"][1]


def test_simulate_takes_registered_prism_benchmarks_and_their_reference_policy(capsys):
    code, out, err = run(
        capsys,
        "simulate",
        "running-example-v1",
        "--policy",
        "reference",
        "--property",
        "reach-goal-2",
        "--runs",
        "3000",
        "--json",
    )
    assert code == 0, err
    r = json.loads(out)["result"]
    assert r["interval"][0] <= 0.264 <= r["interval"][1] and r["model"] == "running-example-v1"


def test_an_unknown_benchmark_property_name_says_so(capsys):
    code, _, err = run(capsys, "verify", "avoid-v1", "-p", "collision-1000")
    err = " ".join(err.split())
    assert code == 2 and "avoid-v1 has no property 'collision-1000' (did you mean 'collision-100'?)" in err
    code, _, err = run(capsys, "simulate", "running-example-v1", "-p", "goal")
    assert code == 2 and "has no property 'goal'" in " ".join(err.split())


def test_unavailable_renormalize_means_the_same_in_verify_and_simulate(capsys, files):
    # the uniform policy over {up, stay, down} offers `up` where it is unavailable (x=4): renormalised there
    model = files["robot.prism"].parent / "col.prism"
    model.write_text(
        "mdp\nmodule m\n  x : [0..2] init 0;\n  [up] x<2 -> 0.5 : (x'=x+1) + 0.5 : (x'=x);\n"
        '  [down] x>0 -> (x\'=x-1);\nendmodule\nlabel "top" = x=2;\n'
    )
    pol = model.parent / "ud.py"
    pol.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'down']\n"
        "def pi(s):\n    return np.tile([0.5, 0.5], (len(s), 1))\n"
    )
    values = {}
    for how in ("stall", "renormalize"):
        code, out, _ = run(
            capsys, "verify", str(model), "-p", 'P=? [F<=4 "top"]', "--policy", f"{pol}:pi", "--unavailable", how, "--json"
        )
        values[how] = json.loads(out)["result"]["value"]
        code, out, err = run(
            capsys,
            "simulate",
            str(model),
            "-p",
            'P=? [F<=4 "top"]',
            "--policy",
            f"{pol}:pi",
            "--unavailable",
            how,
            "--runs",
            "4000",
            "--delta",
            "0.001",
            "--json",
        )
        assert code == 0, err
        r = json.loads(out)["result"]
        assert r["interval"][0] <= values[how] <= r["interval"][1], (how, values[how], r["interval"])
        assert (r["stalled"] > 0) == (how == "stall")
    # by hand: from x=0 'down' is unavailable; stall loses it, renormalize always goes up
    assert values["renormalize"] > values["stall"]


@pytest.mark.parametrize("command", ["simulate", "heatmap"])
def test_policy_name_options_exist_in_every_command(capsys, tmp_path, command):
    # --features/--actions/--output are accepted (they override the policy file's own names)
    target = "racetrack-barto-small-v1"
    args = [command, target, "--features", "a,b", "--actions", "x", "--output", "logits", "--runs", "10"]
    args += ["-p", "goal"] if command == "simulate" else ["--out", str(tmp_path / "m.png")]
    code, _, err = run(capsys, *args)
    assert code == 2 and "unrecognized" not in err
    assert "feature" in err or "features" in err  # the overrides reached the policy: its names no longer fit


def test_a_usage_error_prints_the_subcommands_usage(capsys):
    code = None
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "running-example-v1", "-p", "reach-goal", "--bogus", "1"])
    code = exc.value.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("usage: rlverify simulate") and "--bogus" in err


def test_heatmap_json_prints_and_out_writes(capsys, tmp_path):
    png, cells = tmp_path / "m.png", tmp_path / "cells.json"
    code, out, err = run(
        capsys,
        "heatmap",
        "racetrack-barto-small-v1",
        "--runs",
        "5",
        "--max-steps",
        "50",
        "--json",
        "--out",
        str(png),
        "--out",
        str(cells),
    )
    assert code == 0, err
    printed, written = json.loads(out)["result"], json.loads(cells.read_text())
    assert printed["cells"] == written["cells"] and png.stat().st_size > 0
    code, _, err = run(capsys, "heatmap", "racetrack-barto-small-v1", "--runs", "5", "--out", str(png))
    assert code == 2 and "pass --force" in err  # nothing the user wrote is overwritten


def test_python_api_accepts_paths(files):
    from rlverify import ExactOptions, load_policy, verify_exact

    policy = load_policy(f"{files['robot_pi.py']}:pi")
    r = verify_exact(str(files["robot.prism"]), 'P=? [F<=6 "goal"]', policy, ExactOptions())
    assert r.value == pytest.approx(robot_brute_force(6), abs=1e-9)


def test_abstract_refuses_a_python_callable_with_the_reason(capsys, tmp_path):
    pol = tmp_path / "x.py"
    pol.write_text(
        "import numpy as np\nFEATURES = ['dv', 'dx']\nACTIONS = ['decelerate', 'accelerate']\n"
        "def pi(s):\n    return np.tile([0.5, 0.5], (len(s), 1))\n"
    )
    code, _, err = run(capsys, "abstract", "acc-v1", "-k", "1", "--policy", f"{pol}:pi")
    err = " ".join(err.split())
    assert code == 2 and "a Python callable cannot be bounded" in err and "policy file not found" not in err


def test_abstract_template_without_file_says_which_directions(capsys):
    code, out, _ = run(capsys, "abstract", "acc-v1", "--domain", "template", "-k", "1", "--phi", "0.5", "--json")
    r = json.loads(out)["result"]
    assert code == 0 and [list(a) for a in r["template_axes"]] == [[1, 0], [0, 1], [-0.5, 1], [1, 0.5]]


def test_a_prism_benchmark_given_to_abstract_points_to_the_right_engine(capsys):
    code, _, err = run(capsys, "abstract", "avoid-v1")
    assert code == 2 and "use rlverify verify avoid-v1" in " ".join(err.split())


SIMULATED = [
    (i, name)
    for i in all_ids()
    if spec(i).kind in ("prism", "native")
    for name, text in spec(i).properties.items()
    if text.startswith("P=?") and "((" not in text
][:20]


@pytest.mark.parametrize("bench_id,name", SIMULATED, ids=[f"{i}:{n}" for i, n in SIMULATED])
def test_simulate_every_registered_benchmark_property_by_name(capsys, bench_id, name):
    code, out, err = run(capsys, "simulate", bench_id, "--property", name, "--runs", "50", "--max-steps", "300", "--json")
    assert code == 0, err
    r = json.loads(out)["result"]
    assert r["runs"] == 50 and r["property"] == spec(bench_id).properties[name]
    assert r["model"].startswith(bench_id)


def test_every_benchmark_resolves_to_one_type():
    from rlverify.benchmarks import Benchmark
    from rlverify.resolve import resolve

    for i in all_ids():
        b = make(i)
        assert isinstance(b, Benchmark) and b.kind == spec(i).kind
        t = resolve(i)
        assert t.policy is not None and Path(t.policy_source).is_file()  # the reference policy, a real file


def test_a_jani_file_with_a_properties_section_verifies_and_simulates(capsys, tmp_path):
    """Storm's own JANI export of the running example, plus a named property (stormpy 2.0 names
    JANI properties with get_name(); this crashed with an AttributeError before)."""
    import stormpy

    from rlverify.benchmarks.registry import data_path

    program = stormpy.parse_prism_program(str(data_path("models/running_example.prism")))
    jani, _ = program.to_jani([])
    model = json.loads(str(jani))
    model["properties"] = [
        {
            "name": "reach-2",
            "expression": {
                "op": "filter",
                "fun": "values",
                "states": {"op": "initial"},
                "values": {
                    "op": "Pmax",
                    "exp": {
                        "op": "U",
                        "left": True,
                        "right": {"op": "=", "left": "x", "right": 4},
                        "step-bounds": {"upper": 2},
                    },
                },
            },
        }
    ]
    path = tmp_path / "running_example.jani"
    path.write_text(json.dumps(model))
    policy = str(data_path("policies/running_example.json"))
    code, out, err = run(capsys, "verify", str(path), "-p", "reach-2", "--mode", "monolithic", "--json")
    assert code == 0, err
    assert json.loads(out)["result"]["pmax"] == pytest.approx(0.96, abs=1e-9)  # UP twice from A: 0.2*0.8 + 0.8 (by hand)
    code, out, _ = run(capsys, "verify", str(path), "-p", 'P=? [F<=2 "goal"]', "--policy", policy, "--json")
    assert json.loads(out)["result"]["value"] == pytest.approx(0.264, abs=1e-9)
    code, out, _ = run(
        capsys, "simulate", str(path), "-p", 'P=? [F<=2 "goal"]', "--policy", policy, "--runs", "3000", "--json"
    )
    lo, hi = json.loads(out)["result"]["interval"]
    assert code == 0 and lo <= 0.264 <= hi


MIXED = """mdp
module m
  x : [0..2] init 0;
  [a] x=0 -> (x'=1);
  [] x=0 -> (x'=2);
  [a] x>0 -> (x'=x);
endmodule
"""


def test_an_unlabelled_command_beside_labelled_ones_is_never_dropped_silently(capsys, tmp_path):
    # Pmax(F x=2) = 1 through the unlabelled command m:2; a policy over {a} never takes it: the result says so
    model = tmp_path / "mixed.prism"
    model.write_text(MIXED)
    pol = tmp_path / "a.py"
    pol.write_text(A_POLICY)
    for command in (["verify"], ["simulate", "--runs", "100"]):
        code, out, err = run(capsys, *command, str(model), "-p", "P=? [F x=2]", "--policy", f"{pol}:pi", "--json")
        assert code == 0 and json.loads(out)["result"]["untaken_choices"] == {"m:2": 1}, command
        assert "the policy names no action for these choices, so it never takes them: m:2" in " ".join(err.split())
    from rlverify.gym import load_dynamics

    dyn = load_dynamics(model)  # the Gym bridge, on the same core: the agent gets the command as an action
    assert dyn.actions == ("a", "m:2")
    # a policy naming the command takes it: P(F x=2) = 0.4 with pi(m:2) = 0.4 at x=0
    both = tmp_path / "both.py"
    both.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['a', 'm:2']\n"
        "def pi(s):\n    return np.tile([0.6, 0.4], (len(s), 1))\n"
    )
    code, out, _ = run(capsys, "verify", str(model), "-p", "P=? [F x=2]", "--policy", f"{both}:pi", "--json")
    r = json.loads(out)["result"]
    assert code == 0 and r["value"] == pytest.approx(0.4, abs=1e-12) and r["stalled_probability"] == pytest.approx(0.6)
    code, out, _ = run(capsys, "verify", str(model), "-p", "P=? [F x=2]", "--mode", "monolithic", "--json")
    assert code == 0 and json.loads(out)["result"]["pmax"] == pytest.approx(1.0)


CONSTS = ROBOT.replace("mdp\n", "mdp\nconst int N = 2;\nconst double p = 0.3;\n", 1)  # the robot, with constants


@pytest.mark.parametrize("bounded", ["F<=(N+4)", "F<=2*N+2", "F<7", "F<=6"])
def test_step_bounds_written_as_expressions_mean_the_same_in_every_engine(capsys, files, bounded):
    model = files["robot.prism"].parent / "consts.prism"
    model.write_text(CONSTS)
    pol = f"{files['robot_pi.py']}:pi"
    exact_value = robot_brute_force(6)  # every spelling is the bound 6
    code, out, _ = run(capsys, "verify", str(model), "-p", f'P=? [{bounded} "goal"]', "--policy", pol, "--json")
    assert code == 0 and json.loads(out)["result"]["value"] == pytest.approx(exact_value, abs=1e-9)
    code, out, _ = run(
        capsys,
        "simulate",
        str(model),
        "-p",
        f'P=? [{bounded} "goal"]',
        "--policy",
        pol,
        "--runs",
        "3000",
        "--seed",
        "5",
        "--json",
    )
    r = json.loads(out)["result"]
    assert r["interval"][0] <= exact_value <= r["interval"][1]
    # the same seed gives the same runs: every spelling of the bound decides them alike
    code, out, _ = run(
        capsys, "simulate", str(model), "-p", 'P=? [F<=6 "goal"]', "--policy", pol, "--runs", "3000", "--seed", "5", "--json"
    )
    assert json.loads(out)["result"]["successes"] == r["successes"]


def test_a_threshold_written_as_a_constant_is_evaluated_by_storm(capsys, files):
    model = files["robot.prism"].parent / "consts.prism"
    model.write_text(CONSTS)
    pol = f"{files['robot_pi.py']}:pi"
    v = robot_brute_force(6)
    code, out, err = run(capsys, "verify", str(model), "-p", 'P>=p [F<=6 "goal"]', "--policy", pol, "--json")
    assert code == 0, err
    r = json.loads(out)["result"]
    assert r["value"] == pytest.approx(v, abs=1e-9) and r["satisfied"] == (v >= 0.3)
    code, out, _ = run(capsys, "simulate", str(model), "-p", 'P>=p [F<=6 "goal"]', "--policy", pol, "--runs", "3000", "--json")
    assert json.loads(out)["result"]["threshold"] == 0.3


def test_sprt_does_not_silently_replace_the_propertys_threshold(capsys):
    code, _, err = run(capsys, "simulate", "running-example-v1", "-p", 'P<=0.001 [F<=2 "goal"]', "--sprt", "0.5")
    assert code == 2 and "has its own threshold" in " ".join(err.split())


def test_cross_check_allows_stalled_mass_below_pmin(tmp_path):
    from rlverify import cross_check

    model = tmp_path / "stall.prism"
    model.write_text(
        "mdp\nmodule m\n  s : [0..2] init 0;\n  [a] s=0 -> (s'=1);\n  [b] s=0 -> (s'=2);\n"
        '  [c] s>0 -> (s\'=s);\nendmodule\nlabel "goal" = s=1;\n'
    )
    pol = tmp_path / "p.py"  # half its mass on `c`, unavailable in s=0: stalls (no scheduler of the MDP does that)
    pol.write_text(
        "import numpy as np\nFEATURES = ['s']\nACTIONS = ['a', 'c']\ndef pi(x):\n    return np.tile([0.5, 0.5], (len(x), 1))\n"
    )
    a = cross_check(str(model), 'P=? [F "goal"]', f"{pol}:pi", runs=2000)
    assert a.exact.value == pytest.approx(0.5) and a.exact.stalled_probability == pytest.approx(0.5)
    assert a.ok, a.disagreements()


def test_the_package_verify_statistical_takes_a_target_as_verify_exact_does():
    """``rlverify.verify_statistical`` takes a benchmark id, a file or a loaded model, like ``rlverify.verify_exact``
    (it took only a resolved model: a string was refused). The running example's value is 0.264 by hand
    (test_running_example): 20,000 runs' 99.9 % interval must hold it, from the id and from the loaded model."""
    import rlverify
    from rlverify.resolve import resolve

    opts = rlverify.StatisticalOptions(method="clopper-pearson", runs=20_000, delta=0.001)
    by_id = rlverify.verify_statistical("running-example-v1", "reach-goal-2", options=opts)
    assert by_id.model == "running-example-v1" and by_id.runs == 20_000
    assert by_id.interval[0] <= 0.264 <= by_id.interval[1] and by_id.interval[1] - by_id.interval[0] < 0.03
    t = resolve("running-example-v1", property="reach-goal-2")
    loaded = rlverify.verify_statistical(t.model, t.property, t.policy, opts)
    assert loaded.estimate == by_id.estimate  # the same seed, the same runs
    # a continuous system's default property is its unsafe set within the horizon, as in `rlverify simulate`
    ball = rlverify.verify_statistical(
        "bouncing-ball-v1", None, options=rlverify.StatisticalOptions(method="clopper-pearson", runs=100)
    )
    assert ball.property == 'P=? [F<=20 "unsafe"]'
    with pytest.raises(rlverify.RlverifyError, match="give the property to estimate"):
        rlverify.verify_statistical("running-example-v1", None)
    with pytest.raises(rlverify.RlverifyError, match="give a policy"):
        rlverify.verify_statistical(t.model, t.property)
