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
