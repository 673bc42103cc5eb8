"""The simulate and heatmap subcommands (argparse wiring built locally; main.py wires them for users)."""

from __future__ import annotations

import argparse
import json

from rlverify.errors import RlverifyError


def run(argv):
    from rlverify.cli import heatmap, simulate

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    simulate.register(sub)
    heatmap.register(sub)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except RlverifyError as exc:
        return exc.exit_code, str(exc)


POLICY = """
import numpy as np
from rlverify.models.racetrack import FEATURES, ACTIONS
OUTPUT = "probabilities"
def pi(x):
    return np.full((len(x), 9), 1 / 9)
"""


def model_args(model) -> list[str]:
    """The CLI arguments naming ``model``'s file and constants (the generated Avoid has none left)."""
    return [str(model.path)] + (["--constants", model.constants] if model.constants else [])


def test_simulate_json(avoid_model, capsys, tmp_path):
    pol = tmp_path / "p.py"
    pol.write_text(
        "import numpy as np\nFEATURES=['x','y']\nACTIONS=['north','east','south','west']\n"
        "def pi(x):\n    return np.full((len(x), 4), 0.25)\n"
    )
    code = run(
        [
            "simulate",
            *model_args(avoid_model),
            "--policy",
            f"{pol}:pi",
            "--property",
            "P=? [F<=100 COLLISION=true]",
            "--epsilon",
            "0.05",
            "--delta",
            "0.1",
            "--seed",
            "3",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)["result"]
    for key in ("estimate", "interval", "confidence", "method", "runs", "undecided", "stalled", "seed", "timings"):
        assert key in out
    assert out["runs"] == 600 and out["seed"] == 3 and out["method"] == "okamoto"


def test_simulate_bad_input_exit_code_2(avoid_model, tmp_path):
    pol = tmp_path / "p.py"
    pol.write_text("import numpy as np\nFEATURES=['x']\nACTIONS=['north']\ndef pi(x):\n    return np.ones((len(x), 1))\n")
    base = ["simulate", *model_args(avoid_model), "--policy", f"{pol}:pi"]
    code, msg = run([*base, "--property", "P=? [F<=100 COLLISION=true]", "--epsilon", "1.5"])
    assert code == 2 and "epsilon" in msg
    code, msg = run([*base, "--property", "P=? [G COLLISION=false]"])
    assert code == 2 and "supported" in msg
    code, msg = run([*base, "--property", "P=? [F<=100 COLLISION=true]", "--max-steps", "0"])
    assert code == 2 and "max-steps" in msg


def test_heatmap_png(tmp_path, capsys):
    pol = tmp_path / "uniform.py"
    pol.write_text(POLICY)
    out = tmp_path / "map.png"
    code = run(
        [
            "heatmap",
            "racetrack-barto-small-v1",
            "--policy",
            f"{pol}:pi",
            "--out",
            str(out),
            "--runs",
            "20",
            "--max-steps",
            "200",
            "--optimal",
            "--out",
            str(tmp_path / "cells.json"),
        ]
    )
    assert code == 0 and out.stat().st_size > 1000
    cells = json.loads((tmp_path / "cells.json").read_text())["cells"]
    assert len(cells) == 233 and all(0 <= c["goal"] <= 1 and 0 <= c["optimal"] <= 1 for c in cells)
    code, msg = run(["heatmap", "racetrack-barto-smal-v1", "--out", str(tmp_path / "x.png")])
    assert code == 2 and "did you mean" in msg


def test_shipped_policy_heatmap_never_beats_the_optimum(tmp_path):
    """No policy can beat Storm's Pmax: every cell's goal interval starts below the optimal value,
    at the training noise 0.2 and in the stress test at noise 0.5 (the shipped DQN policy)."""
    for noise in ("0.2", "0.5"):
        out, cells_json = tmp_path / f"map{noise}.png", tmp_path / f"cells{noise}.json"
        code = run(
            [
                "heatmap",
                "racetrack-barto-small-v1",
                "--noise",
                noise,
                "--out",
                str(out),
                "--runs",
                "300",
                "--optimal",
                "--out",
                str(cells_json),
                "--seed",
                "4",
            ]
        )
        assert code == 0 and out.stat().st_size > 1000
        data = json.loads(cells_json.read_text())
        assert data["noise"] == float(noise) and "unsound" in data["optimal_numerics"]
        cells = data["cells"]
        assert max(c["goal_interval"][0] - c["optimal"] for c in cells) <= 1e-6
        assert sum(c["goal"] for c in cells) / len(cells) > 0.3  # the shipped policy does reach the goal


def test_simulate_shipped_racetrack_policy_and_sprt(capsys):
    code = run(["simulate", "racetrack-barto-small-v1", "--property", "goal", "--runs", "2000", "--json"])
    assert code == 0
    r = json.loads(capsys.readouterr().out)["result"]
    assert r["method"] == "clopper-pearson" and r["runs"] == 2000 and r["undecided"] == 0
    # the policy's training metadata records 0.927 from the start line (2,000 runs, another seed)
    assert r["interval"][0] - 0.03 <= 0.927 <= r["interval"][1] + 0.03
    code = run(["simulate", "racetrack-barto-small-v1", "--property", "goal", "--sprt", "0.5", "--json"])
    assert code == 0
    r = json.loads(capsys.readouterr().out)["result"]
    assert r["decision"] == "H0" and r["satisfied"] is True  # P(goal) >= 0.5 + indifference
    code, msg = run(["simulate", "racetrack-barto-small-v1", "--property", "goal", "--sprt", "0.5", "--method", "wilson"])
    assert code == 2 and "--sprt" in msg


def test_noise_is_an_option_of_racetrack_benchmarks_not_a_model_constant():
    """``simulate running-example-v1 --noise -1`` said "unknown parameter 'noise'; parameters: none", as if the user had
    given a model constant: --noise became ``-c noise=...`` for any benchmark. Now the option is refused as an option:
    on a benchmark without the parameter, and out of Racetrack's range (before either runs)."""
    cases = [
        (["simulate", "running-example-v1", "-p", "reach-goal-2", "--noise", "-1"], "running-example-v1 has no noise"),
        (["heatmap", "running-example-v1", "--noise", "0.5", "--json"], "has no noise parameter"),
        (["simulate", "racetrack-barto-small-v1", "-p", "goal", "--noise", "-1"], "--noise -1: the probability that"),
        (["simulate", "racetrack-barto-small-v1", "-p", "goal", "--noise", "nan"], "--noise nan: the probability"),
    ]
    for argv, words in cases:
        code, msg = run(argv)
        assert code == 2 and msg.startswith("--noise") and words in msg and "unknown parameter" not in msg, msg
