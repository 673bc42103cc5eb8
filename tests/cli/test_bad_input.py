"""Every bad input gets exit code 2 and a one-line cause naming the file/field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.policies import MLP, save_mlp_onnx
from tests.small_models import UP_STAY

GOOD = UP_STAY


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.prism"
    path.write_text(GOOD)
    return path


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "p.py"
    path.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(s):\n    return np.tile([0.9, 0.1], (len(s), 1))\n"
        "def nan(s):\n    return np.full((len(s), 2), np.nan)\n"
        "def wide(s):\n    return np.full((len(s), 3), 1 / 3)\n"
    )
    # a module that declares no names: --features/--actions give them (options never change a declaration)
    (tmp_path / "bare.py").write_text("import numpy as np\ndef pi(s):\n    return np.tile([0.9, 0.1], (len(s), 1))\n")
    return path


def with_formula(model: Path) -> str:
    """A copy of ``model`` beside it that defines ``formula at_top``."""
    path = model.parent / "with_formula.prism"
    path.write_text(model.read_text() + "formula at_top = x=3;\n")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["verify", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_good_input_works(capsys, model: Path, policy: Path) -> None:
    code, out = run(capsys, str(model), "-p", 'P=? [F "top"]', "--policy", f"{policy}:pi", "--json")
    assert code == 0
    assert json.loads(out)["result"]["value"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    ("make_args", "expected"),
    [
        (
            lambda m, p: ["/nonexistent/model.prism", "-p", "P=? [F x=3]", "--mode", "monolithic"],
            r"model\.prism: model file not found",
        ),
        (lambda m, p: [str(m.parent), "-p", "P=? [F x=3]", "--mode", "monolithic"], "model file not found"),
        (lambda m, p: [str(m), "-p", "P=? [F x=3]", "--policy", "/nonexistent/p.onnx"], r"p\.onnx: policy file not found"),
        (lambda m, p: [str(m), "-p", "P=? [F x=3", "--mode", "monolithic"], r"does not parse.*expecting"),
        (
            lambda m, p: [str(m), "-p", 'P=? [F "tpo"]', "--mode", "monolithic"],
            r"unknown label \"tpo\" \(did you mean 'top'\?\)",
        ),
        (lambda m, p: [str(m), "-p", "P=? [F y=3]", "--mode", "monolithic"], r"unknown name 'y'"),
        (  # a formula of the file is no unknown name: the cause is the bound's overflow (Storm's message)
            lambda m, p: [with_formula(m), "-p", "P=? [F<=99999999999999999999999 at_top]", "--mode", "monolithic"],
            r"does not parse: Parsing error .*64-bit integer overflow",
        ),
        (
            lambda m, p: [
                str(m),
                "-p",
                "P=? [F x=3]",
                "--policy",
                f"{p.parent / 'bare.py'}:pi",
                "--features",
                "z",
                "--actions",
                "up,stay",
            ],
            r"feature 'z' is not a model variable",
        ),
        (
            lambda m, p: [
                str(m),
                "-p",
                "P=? [F x=3]",
                "--policy",
                f"{p.parent / 'bare.py'}:pi",
                "--features",
                "x",
                "--actions",
                "upp,stay",
            ],
            r"action 'upp' is not an action of the model \(did you mean 'up'\?\)",
        ),
        (
            lambda m, p: [str(m), "-p", "P=? [F x=3]", "--policy", f"{p}:pi", "--features", "z"],
            r"--features z contradicts its features x",
        ),
        (lambda m, p: [str(m), "-p", "P=? [F x=3]", "--policy", f"{p}:nan"], r"NaN"),
        (lambda m, p: [str(m), "-p", "P=? [F x=3]", "--policy", f"{p}:wide"], r"shape \(1, 3\), expected \(1, 2\)"),
        (lambda m, p: [str(m), "-p", "P=? [F x=3]", "--mode", "monolithic", "--max-states", "2"], r"more than --max-states=2"),
        (lambda m, p: [str(m), "-p", "Pmax=? [F x=3]", "--policy", f"{p}:pi"], r"need --mode monolithic"),
        (lambda m, p: [str(m), "-p", "P=? [F x=3]"], r"needs --policy"),
        (lambda m, p: ["no-such-benchmark", "-p", "x"], r"unknown benchmark 'no-such-benchmark'"),
        (lambda m, p: ["running-exampel-v1", "-p", "x"], r"did you mean 'running-example-v1'"),
    ],
    ids=[
        "missing-model",
        "directory-as-model",
        "missing-policy",
        "property-syntax",
        "unknown-label",
        "unknown-variable",
        "formula-is-no-unknown-name",
        "feature-not-variable",
        "unknown-action",
        "features-contradict-module",
        "nan-output",
        "wrong-shape",
        "max-states",
        "pmax-needs-monolithic",
        "no-policy",
        "unknown-benchmark",
        "benchmark-typo",
    ],
)
def test_bad_input(capsys, model: Path, policy: Path, make_args, expected: str) -> None:
    code, out = run(capsys, *make_args(model, policy))
    assert code == 2, out
    assert "Traceback" not in out
    assert __import__("re").search(expected, " ".join(out.split())), out


def test_prism_syntax_error_names_line(capsys, tmp_path: Path) -> None:
    path = tmp_path / "bad.prism"
    path.write_text("mdp\nmodule m\n  x : [0..3] init 0;\n  [a] x<3 -> (x'=x+1)\nendmodule\n")
    code, out = run(capsys, str(path), "-p", "P=? [F x=3]", "--mode", "monolithic")
    assert code == 2 and "bad.prism: PRISM syntax error" in out and "5:1" in out


def test_undefined_constants_are_all_listed(capsys, tmp_path: Path) -> None:
    path = tmp_path / "c.prism"
    path.write_text(
        "mdp\nconst int N;\nconst double p;\nmodule m\n  x : [0..N] init 0;\n"
        "  [a] x<N -> p : (x'=x+1) + 1-p : true;\nendmodule\n"
    )
    code, out = run(capsys, str(path), "-p", "P=? [F x=1]", "--mode", "monolithic")
    assert code == 2 and "undefined constants N, p" in out
    code, out = run(capsys, str(path), "-p", "P=? [F x=1]", "--mode", "monolithic", "-c", "N=2,q=1")
    assert code == 2 and "unknown constant 'q'" in out
    code, out = run(capsys, str(path), "-p", "P=? [F x=2]", "--mode", "monolithic", "-c", "N=2,p=0.5", "--json")
    assert code == 0 and json.loads(out)["result"]["pmax"] == pytest.approx(1.0, abs=1e-6)


def test_ctmc_is_refused(capsys, tmp_path: Path) -> None:
    path = tmp_path / "c.sm"
    path.write_text("ctmc\nmodule m\n  x : [0..1] init 0;\n  [] x=0 -> 2.0 : (x'=1);\nendmodule\n")
    code, out = run(capsys, str(path), "-p", "P=? [F x=1]", "--mode", "monolithic")
    assert code == 2 and "model type CTMC is not supported" in out


PTA = "pta\nmodule m\n  x : [0..2] init 0;\n  c : clock;\n  invariant c<=2 endinvariant\n  [a] x<2 -> (x'=x+1);\nendmodule\n"
SMG = "smg\nplayer p1 m endplayer\nmodule m\n  x : [0..2] init 0;\n  [a] x<2 -> (x'=x+1);\nendmodule\n"


@pytest.mark.parametrize(
    ("kind", "text", "why"), [("PTA", PTA, "clocks run in real time"), ("SMG", SMG, "players")], ids=["pta", "smg"]
)
@pytest.mark.parametrize("command", ["verify", "inspect", "simulate", "report"])
def test_a_timed_automaton_or_a_game_is_refused_naming_its_type(capsys, tmp_path: Path, kind, text, why, command) -> None:
    """stormpy's enumeration of PRISM model types has no PTA or SMG: reading one raised ValueError ("7 is not a valid
    PrismModelType") through every command; now one line naming the type and what rlverify takes."""
    path = tmp_path / "m.nm"
    path.write_text(text)
    args = [command, str(path)] + ([] if command == "inspect" else ["-p", "Pmax=? [F x=2]", "--policy", "uniform"])
    code = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"model type {kind} is not supported (rlverify takes an MDP or a DTMC" in err[0] and why in err[0]


def test_onnx_without_metadata(capsys, model: Path, tmp_path: Path) -> None:
    import onnx

    path = save_mlp_onnx(tmp_path / "p.onnx", MLP.random([1, 4, 2], seed=0), features=["x"], actions=["up", "stay"])
    m = onnx.load(str(path))
    del m.metadata_props[:]
    onnx.save(m, str(path))
    code, out = run(capsys, str(model), "-p", "P=? [F x=3]", "--policy", str(path))
    assert code == 2 and "no rlverify.features or rlverify.actions metadata" in " ".join(out.split())
    code, out = run(
        capsys, str(model), "-p", "P=? [F x=3]", "--policy", str(path), "--features", "x", "--actions", "up,stay", "--json"
    )
    assert code == 2 and "--output logits|probabilities|q-values" in out
    code, out = run(
        capsys,
        str(model),
        "-p",
        "P=? [F x=3]",
        "--policy",
        str(path),
        "--features",
        "x",
        "--actions",
        "up,stay",
        "--output",
        "logits",
        "--json",
    )
    assert code == 0


def test_all_states_file_is_not_overwritten(capsys, model: Path, policy: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "values.csv"
    out_file.write_text("mine")
    code, out = run(capsys, str(model), "-p", "P=? [F x=3]", "--policy", f"{policy}:pi", "--all-states", str(out_file))
    assert code == 2 and "pass --force" in out and out_file.read_text() == "mine"
    code, _ = run(
        capsys, str(model), "-p", "P=? [F<=2 x=3]", "--policy", f"{policy}:pi", "--all-states", str(out_file), "--force"
    )
    assert code == 0
    data = np.genfromtxt(out_file, delimiter=",", names=True)
    # x=0 -> two steps up needs both to succeed: 0.9*0.5 then 0.9*0.5
    assert float(data["value"][data["x"] == 0][0]) == pytest.approx(0), "x=0 cannot reach x=3 in 2 steps"
    assert float(data["value"][data["x"] == 1][0]) == pytest.approx(0.45 * 0.45)


PARAM = GOOD.replace("mdp\n", "mdp\nconst double q;\n").replace("0.5 : (x'=x+1) + 0.5 : (x'=x)", "q : (x'=x+1) + 1-q : (x'=x)")


@pytest.mark.parametrize(("value", "ok"), [("foo", False), ("1/0", False), ("1/10", True), ("0.1", True)])
def test_constant_values(capsys, tmp_path: Path, value: str, ok: bool) -> None:
    path = tmp_path / "param.prism"
    path.write_text(PARAM)
    code, out = run(capsys, str(path), "-c", f"q={value}", "-p", 'P=? [F<=1 "top"]', "--mode", "monolithic", "--json")
    if ok:
        assert code == 0, out
        assert json.loads(out)["result"]["upper"] == pytest.approx(0.0)  # x=3 is 3 steps away
    else:
        assert code == 2
        assert "param.prism: cannot define constants" in out and "rationals like 1/10" in out


def test_benchmark_parameters_without_a_reference_policy(capsys) -> None:
    code, out = run(capsys, "avoid-v1", "-c", "xMax=2,yMax=2", "-p", "collision-100")
    assert code == 2
    said = " ".join(out.split())
    assert "has no reference policy" in said and "--policy FILE" in out
    # the shipped policy named once, in a sentence that reads ("its reference policies reference were trained" before)
    assert "its reference policy 'reference' was trained for the default parameters only" in said


def test_non_numeric_benchmark_parameter(capsys) -> None:
    code, out = run(capsys, "avoid-v1", "-c", "xMax=4,yMax=4,slickness=abc", "-p", "collision-100")
    assert code == 2
    assert "slickness='abc' must be a number" in out


STALLS = """mdp
module m
  x : [0..3] init 0;
  [up] x<3 & x!=1 -> 0.5 : (x'=x+1) + 0.5 : (x'=x);
  [stay] x=1 -> (x'=2);
  [stay] x=3 -> true;
endmodule
label "top" = x=3;
rewards "r" true : 1; endrewards
"""


def test_all_states_leaves_out_the_stalled_sink_and_json_has_no_infinity(capsys, tmp_path: Path) -> None:
    model = tmp_path / "stalls.prism"
    model.write_text(STALLS)
    pol = tmp_path / "up.py"
    pol.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(s):\n    return np.tile([1.0, 0.0], (len(s), 1))\n"
    )
    out_file = tmp_path / "v.csv"
    code, out = run(
        capsys, str(model), "-p", 'P=? [F "top"]', "--policy", f"{pol}:pi", "--all-states", str(out_file), "--json"
    )
    assert code == 0, out
    assert json.loads(out)["result"]["stalled_probability"] == pytest.approx(1.0)
    data = np.genfromtxt(out_file, delimiter=",", names=True)
    assert sorted(data["x"].tolist()) == [0.0, 1.0]  # x=0 and x=1 (where 'up' is unavailable); no sink row
    # the expected reward to "top" is infinite (it is never reached): valid JSON, the value as "Infinity" (the
    # proto3 JSON spelling, read back by float()), and a warning says why (the probability of missing the target)
    code = main(["verify", str(model), "-p", 'R{"r"}=? [F "top"]', "--policy", f"{pol}:pi", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)["result"]
    assert data["value"] == "Infinity" and float(data["value"]) == float("inf")
    assert any("infinite by definition" in w and "missed with probability 1" in w for w in data["warnings"])


def test_all_states_monolithic_writes_pmin_and_pmax(capsys, model: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "mono.csv"
    code, out = run(capsys, str(model), "-p", "P=? [F<=1 x=3]", "--mode", "monolithic", "--all-states", str(out_file))
    assert code == 0, out
    data = np.genfromtxt(out_file, delimiter=",", names=True)
    row = data[data["x"] == 2][0]
    assert (float(row["pmin"]), float(row["pmax"])) == pytest.approx((0.0, 0.5))


@pytest.mark.parametrize(
    "extra,said",
    [
        (["--mode", "monolithic", "-c", "xMax=3"], "avoid-v1 (xMax=3, yMax=4, slickness=0.1): the model has more than"),
        (["--mode", "monolithic", "-c", "xMax=3:4"], "at -c xMax=3: avoid-v1 (xMax=3, yMax=4, slickness=0.1): the model"),
        (["--strategy", "merged"], "avoid-v1 (xMax=4, yMax=4, slickness=0.1): the policy reaches more than"),
    ],
)
def test_a_benchmarks_errors_name_the_benchmark_not_its_temporary_file(capsys, extra, said) -> None:
    # the benchmark's PRISM text is parsed from a private temporary file: its path means nothing to the user
    code, err = run(capsys, "avoid-v1", "-p", "collision-100", "--max-states", "100", *extra)
    assert code == 2 and said in err and "/tmp" not in err and ".prism" not in err, err


def test_a_fifo_or_a_device_as_the_model_is_named_as_such(capsys, tmp_path: Path) -> None:
    """A FIFO (or /dev/zero through a link) named as the model file was called "model file not found"; it is named as
    what it is, without being opened (opening a FIFO blocks until someone writes)."""
    import os

    fifo = tmp_path / "pipe.prism"
    os.mkfifo(fifo)
    device = tmp_path / "zero.nm"
    device.symlink_to("/dev/zero")
    for path in (fifo, device):
        code, out = run(capsys, str(path), "-p", "P=? [F x=1]", "--mode", "monolithic")
        assert code == 2 and f"{path}: not a regular file (a pipe, device or socket), not a model file" in out, out
