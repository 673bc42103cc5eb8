"""``rlverify train`` and ``rlverify reproduce table2`` through the CLI entry point (exit codes, messages, files)."""

from __future__ import annotations

import json
import sys

import pytest

import rlverify.cli.main as cli_main
from rlverify.cli.train import benchmark_kind


def run(argv, capsys):
    code = cli_main.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_train_a_prism_benchmark_writes_a_verifiable_policy(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "re.onnx"
    code, stdout, err = run(
        [
            "train",
            "running-example-v1",
            "--algo",
            "ppo",
            "--steps",
            "2048",
            "--seed",
            "5",
            "--out",
            str(out),
            "--hidden",
            "8,8",
        ],
        capsys,
    )
    assert code == 0, err
    assert out.is_file() and "saved" in stdout
    code, stdout, err = run(
        ["verify", "running-example-v1", "--property", "reach-goal", "--policy", str(out), "--json"], capsys
    )
    assert code == 0, err
    assert json.loads(stdout)["result"]["value"] == pytest.approx(1.0, abs=1e-6)


def test_train_with_benchmark_parameters(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "a.onnx"
    code, _, err = run(
        ["train", "avoid-v1", "--steps", "1024", "--out", str(out), "-c", "xMax=2,yMax=3,slickness=0.2"], capsys
    )
    assert code == 0, err
    from rlverify.policies import load_policy

    meta = load_policy(str(out)).training
    assert meta["params"] == {"xMax": 2, "yMax": 3, "slickness": 0.2}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "freway-v1", "--out", "x.onnx"], "did you mean 'freeway-v1'"),
        (["train", "avoid-v1", "--out", "x.onnx", "-c", "xMax=99"], "xMax=99 out of range"),
        (["train", "avoid-v1", "--out", "x.onnx", "-c", "size=3"], "unknown parameter 'size'"),
        (["train", "avoid-v1", "--algo", "dqn", "--out", "x.onnx"], "--algo ppo"),
        (["train", "acc-v1", "--algo", "dqn", "--out", "x.onnx"], "--algo ppo"),
        (["train", "racetrack-barto-small-v1", "--algo", "ppo", "--out", "x.onnx"], "--algo dqn"),
        (["train", "avoid-v1", "--steps", "0", "--out", "x.onnx"], "--steps"),
        (["train", "avoid-v1", "--hidden", "64,,-1", "--out", "x.onnx"], "hidden"),
        (["train", "acc-v1", "--out", "x.onnx", "-c", "accel=2"], "takes no parameters"),
        (["train", "racetrack-barto-small-v1", "--hidden", "32,32", "--out", "x.onnx"], "drop --hidden"),
        (["reproduce", "table2", "--rows", "avoid"], "rows:"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(argv, message, capsys, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(argv, capsys)
    assert code == 2
    assert message in " ".join(err.split()), err
    assert not (tmp_path / "x.onnx").exists()


def test_train_without_torch_names_the_extra(capsys, monkeypatch, tmp_path):
    # Needs cli/main.py to print error messages with rich.markup.escape: unescaped, rich takes
    # "[torch]" in "pip install 'rlverify[torch]'" for a style tag and drops it.
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    code, _, err = run(["train", "freeway-v1", "--steps", "100", "--out", str(tmp_path / "f.onnx")], capsys)
    assert code == 2
    assert "pip install 'rlverify[torch]'" in " ".join(err.split())


def test_missing_trainer_module_is_named(capsys, monkeypatch, tmp_path):
    pytest.importorskip("torch")
    monkeypatch.setitem(sys.modules, "rlverify.training.dqn", None)
    code, _, err = run(["train", "racetrack-barto-small-v1", "--out", str(tmp_path / "r.onnx")], capsys)
    assert code == 2
    assert "rlverify.training.dqn" in " ".join(err.split())


def test_benchmark_kinds():
    assert benchmark_kind("freeway-v1") == "prism"
    assert benchmark_kind("acc-v1") == "continuous"
    assert benchmark_kind("racetrack-ring-v1") == "native"


def test_reproduce_table2_reduced_rows_json_and_files(tmp_path, capsys):
    code, stdout, err = run(
        ["reproduce", "table2", "--rows", "freeway-goal,freeway-mid", "--json", "--out", str(tmp_path)], capsys
    )
    assert code == 0, err
    data = json.loads(stdout)["result"]
    assert [r["id"] for r in data["rows"]] == ["freeway-goal", "freeway-mid"]
    mid = data["rows"][1]["methods"]
    assert (mid["stochastic"]["ours"]["states"], mid["stochastic"]["ours"]["transitions"]) == (272, 1_120)
    assert (mid["monolithic"]["ours"]["states"], mid["monolithic"]["ours"]["transitions"]) == (272, 1_552)
    assert (tmp_path / "table2.json").is_file() and (tmp_path / "table2.md").is_file()


def test_reproduce_table2_prints_a_table(capsys):
    code, stdout, err = run(["reproduce", "table2", "--rows", "freeway-mid"], capsys)
    assert code == 0, err
    assert "272" in stdout and "1,552" in stdout and "Freeway" in stdout


# --- verify while training (--verify-every) -----------------------------------------------------------------------


def test_train_verify_every_prints_each_check_and_the_last_is_the_saved_policys_value(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "re.onnx"
    argv = ["train", "running-example-v1", "--steps", "2048", "--hidden", "8,8", "--out", str(out)]
    code, stdout, err = run([*argv, "--verify-every", "1024", "-p", "reach-goal-2"], capsys)
    assert code == 0, err
    checks = [line for line in stdout.splitlines() if line.startswith("verified at step")]
    assert [c.split(":")[0] for c in checks] == ["verified at step 1,024", "verified at step 2,048"]
    assert all('P=? [F<=2 "goal"] = ' in c and "4 states" in c for c in checks)
    # the last check is of the final actor, the one saved: the saved file verified from its path gives its value
    code, verified, err = run(["verify", "running-example-v1", "-p", "reach-goal-2", "--policy", str(out), "--json"], capsys)
    assert code == 0, err
    printed = float(checks[-1].split(" = ")[1].split()[0])
    assert printed == pytest.approx(json.loads(verified)["result"]["value"], rel=1e-5)
    # by hand (tests/policies/test_sb3.py): UP in A, then UP in B (0.8 to D) or the slip to C and UP there
    from rlverify.policies import load_policy

    saved = load_policy(str(out))
    up = saved.actions.index("UP")
    p_up = {x: saved.action_probabilities([[x]])[0, up] for x in (1, 2, 3)}
    assert printed == pytest.approx(p_up[1] * (0.2 * p_up[2] * 0.8 + 0.8 * p_up[3]), rel=1e-5)


def test_train_stop_when_holds_stops_at_the_first_check_that_decides_it(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "re.onnx"
    argv = ["train", "running-example-v1", "--steps", "8192", "--hidden", "8,8", "--out", str(out)]
    code, stdout, err = run([*argv, "--verify-every", "1024", "-p", 'P>=0.01 [F<=2 "goal"]', "--stop-when", "holds"], capsys)
    assert code == 0, err
    checks = [line for line in stdout.splitlines() if line.startswith("verified at step")]
    assert len(checks) == 1 and checks[0].startswith("verified at step 1,024") and ", holds," in checks[0]
    assert "stopped training: the property holds" in stdout and "1,024 steps" in stdout
    from rlverify.policies import load_policy

    assert load_policy(str(out)).training["steps"] == 1024 and load_policy(str(out)).training["stopped_early"] is True


@pytest.mark.parametrize(
    "extra,message",
    [
        (["-p", "reach-goal"], "--property: checked during training with --verify-every"),
        (["--stop-when", "holds"], "--stop-when: checked during training with --verify-every"),
        (["--verify-every", "1024"], "--verify-every: give the property"),
        (["--verify-every", "0", "-p", "reach-goal"], "--verify-every: expected a positive number"),
        (["--verify-every", "1024", "-p", "reach-goal", "--stop-when", "holds"], "has no threshold"),
        (["--verify-every", "1024", "-p", 'P=? [F "gaol"]'], "gaol"),
    ],
    ids=["property-alone", "stop-when-alone", "no-property", "zero", "no-threshold", "unknown-label"],
)
def test_train_verify_options_are_refused_before_training(tmp_path, capsys, extra, message):
    pytest.importorskip("torch")
    out = tmp_path / "re.onnx"
    code, _, err = run(["train", "running-example-v1", "--steps", "1024", "--out", str(out), *extra], capsys)
    assert code == 2 and message in " ".join(err.split()) and "Traceback" not in err
    assert not out.exists()


def test_train_verify_every_on_a_continuous_benchmark_is_refused(tmp_path, capsys):
    pytest.importorskip("torch")
    code, _, err = run(
        ["train", "acc-v1", "--out", str(tmp_path / "a.onnx"), "--verify-every", "1000", "-p", "unsafe"], capsys
    )
    assert code == 2 and "PRISM benchmarks only" in " ".join(err.split())
