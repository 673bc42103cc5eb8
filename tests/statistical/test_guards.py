"""Big or odd numbers from the user are refused with exit 2 and one line naming the option, or computed within
bounded memory; never an out-of-memory kill, a hang or a traceback (issue 21)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.errors import OptionError, StatisticsError
from rlverify.policies import CallablePolicy
from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

MODEL = """mdp
module m
  x : [0..3] init 0;
  [up] x<3 -> 0.5 : (x'=x+1) + 0.5 : (x'=x);
  [stay] true -> (x'=x);
endmodule
label "top" = x=3;
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    model, policy = tmp_path / "m.prism", tmp_path / "p.py"
    model.write_text(MODEL)
    policy.write_text("import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
                      "def pi(s):\n    return np.tile([1.0, 0.0], (len(s), 1))\n")
    return model, policy


def simulate(capsys, files, *args: str) -> tuple[int, str, str]:
    model, policy = files
    code = main(["simulate", str(model), "-p", 'P=? [F<=2 "top"]', "--policy", f"{policy}:pi", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("runs", ["1e13", "10000000000000"])
def test_runs_beyond_the_guard_are_refused_with_the_figures(capsys, files, runs):
    code, out, err = simulate(capsys, files, "--runs", runs)
    assert code == 2 and out == ""
    assert "10,000,000,000,000 runs" in err and "--run-limit" in err and "days" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("runs", ["1.5", "0", "-3", "nan", "inf", "many"])
def test_runs_must_be_a_positive_whole_number(capsys, files, runs):
    with pytest.raises(SystemExit) as exc:
        simulate(capsys, files, "--runs", runs)
    assert exc.value.code == 2
    assert f"--runs: expected a positive whole number, got '{runs}'" in capsys.readouterr().err


def test_epsilon_needing_too_many_runs_is_refused(capsys, files):
    code, out, err = simulate(capsys, files, "--epsilon", "1e-6")
    assert code == 2 and "--epsilon 1e-06" in err and "--run-limit" in err


def test_runs_as_1e_notation_accepted_and_exact(capsys, files):
    # P(F<=2 top) = 0 from x=0 (three steps needed): all 2000 runs false
    code, out, err = simulate(capsys, files, "--runs", "2e3", "--json")
    assert code == 0 and json.loads(out)["runs"] == 2000 and json.loads(out)["successes"] == 0


def test_memory_does_not_grow_with_the_runs(files):
    from rlverify.models import load_model

    model = load_model(files[0])
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["x"], ["up", "stay"])

    def peak(runs: int) -> int:
        tracemalloc.start()
        r = verify_statistical(model, 'P=? [F<=1 "top"]', policy, StatisticalOptions(
            method="clopper-pearson", runs=runs, simulation=SimulationOptions(batch_size=2000)))
        assert r.runs == runs and r.successes == 0
        size = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size

    peak(2000)  # first use: imports, caches
    small, large = peak(16_000), peak(400_000)
    assert large < small + 1_000_000, (small, large)  # per-run outcomes are not kept (400k runs: > 4 MB)


@pytest.mark.parametrize("kw,match", [
    ({"max_steps": 10**12}, "--max-steps 1,000,000,000,000: more than 10,000,000"),
    ({"max_steps": float("inf")}, "--max-steps"),
    ({"max_steps": 2.5}, "--max-steps"),
    ({"batch_size": 10**12}, "--batch-size"),
])
def test_simulation_guards(kw, match):
    with pytest.raises(OptionError, match=match):
        SimulationOptions(**kw).validate()


@pytest.mark.parametrize("kw,match", [({"runs": 10**13, "method": "wilson"}, "--run-limit"),
                                      ({"runs": 2.5, "method": "wilson"}, "--runs"),
                                      ({"runs": True, "method": "wilson"}, "--runs"),
                                      ({"max_runs": 10**12, "method": "sprt", "threshold": 0.5}, "max_runs")])
def test_statistical_guards(files, kw, match):
    from rlverify.models import load_model

    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["x"], ["up", "stay"])
    with pytest.raises(StatisticsError, match=match):
        verify_statistical(load_model(files[0]), 'P=? [F<=1 "top"]', policy, StatisticalOptions(**kw))
