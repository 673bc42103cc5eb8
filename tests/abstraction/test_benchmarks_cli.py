"""Registry entries, shipped policy files, the ``abstract`` CLI command and PPO training."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pytest

from rlverify.benchmarks.registry import BenchmarkError, make, spec
from rlverify.errors import DependencyNotInstalled, InputFileError
from rlverify.models.continuous import ContinuousSystem
from rlverify.policies import load_policy

IDS = ["bouncing-ball-v1", "acc-v1", "pendulum-v1"]


@pytest.mark.parametrize("bid", IDS)
def test_registered_with_shipped_self_describing_policy(bid):
    s = spec(bid)
    assert s.kind == "continuous"
    for section in ("Description:", "State:", "Actions:", "Labels/failure:", "Initial states:", "Reference results:"):
        assert section in s.doc
    bench = make(bid)
    system = bench.model()
    assert isinstance(system, ContinuousSystem)
    policy = load_policy(str(bench.policies["ppo"]))
    assert policy.features == system.features and policy.actions == system.actions
    assert policy.training["algorithm"].startswith("PPO") and policy.training["benchmark"] == bid
    assert {"seed", "steps", "final_mean_return"} <= set(policy.training)
    # the policy is stochastic on the initial region (the point of the engine)
    x = system.sample_initial(200, np.random.default_rng(0))
    p = policy.action_probabilities(system.observe(x))
    assert (p > 0).all()


def test_acc_acceleration_parameter():
    assert make("acc-v1").model().accel == 3.0
    assert make("acc-v1", accel=1.0).model().accel == 1.0
    with pytest.raises(BenchmarkError, match="out of range"):
        make("acc-v1", accel=100.0)


def cli(argv):
    from rlverify.cli import abstract

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    abstract.register(sub)
    args = parser.parse_args(argv)
    return args.run(args)


def test_cli_json_and_png(tmp_path, capsys):
    png = tmp_path / "acc.png"
    assert (
        cli(
            [
                "abstract",
                "pendulum-v1",
                "--horizon",
                "2",
                "--domain",
                "octagon",
                "--phi",
                "0.5",
                "--containment",
                "--json",
                "--out-png",
                str(png),
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)["result"]
    assert out["guarantee"] == "sound upper bound"
    assert 0.0 <= out["upper_bound"] <= 1.0
    assert out["options"]["horizon"] == 2 and out["options"]["containment"] is True
    assert {"bounds", "refinement", "successors", "solving", "total"} <= set(out["timings"])
    assert png.stat().st_size > 1000


def test_cli_table_and_template_file(tmp_path, capsys):
    tpl = tmp_path / "dirs.csv"
    tpl.write_text("# one direction per line\n1, 0\n0, 1\n1, 1\n1, 2\n")
    assert cli(["abstract", "pendulum-v1", "-k", "2", "--domain", "template", "--template", str(tpl), "--phi", "0.5"]) == 0
    assert "sound upper bound" in capsys.readouterr().out


def test_cli_template_file_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"directions": [[1, 0], [2, 0]]}')
    from rlverify.abstraction import DomainError

    with pytest.raises(DomainError, match="unbounded"):
        cli(["abstract", "acc-v1", "-k", "2", "--domain", "template", "--template", str(bad)])
    with pytest.raises(InputFileError, match="not found"):
        cli(["abstract", "acc-v1", "-k", "2", "--domain", "template", "--template", str(tmp_path / "none.csv")])


def test_cli_rejects_missing_policy_and_unknown_benchmark(tmp_path):
    with pytest.raises(InputFileError, match="policy file not found"):
        cli(["abstract", "acc-v1", "--policy", str(tmp_path / "nope.onnx")])
    with pytest.raises(BenchmarkError, match="unknown benchmark"):
        cli(["abstract", "acc-v2"])


def test_ppo_is_reproducible_and_returns_logit_mlp():
    pytest.importorskip("torch")
    from rlverify.training.continuous import SETUPS, ContinuousEnv
    from rlverify.training.ppo import PPOConfig, train_ppo

    system = make("acc-v1").model()
    cfg = PPOConfig(n_steps=32, epochs=2, minibatch=256)

    def train():
        env = ContinuousEnv(system, SETUPS["acc-v1"], n_envs=16)
        return train_ppo(env, hidden=(8, 8), total_steps=2048, seed=3, obs_scale=np.array([0.5, 0.1]), config=cfg)

    a, stats = train()
    b, _ = train()
    assert a.sizes == (2, 8, 8, 2)
    assert all(np.array_equal(x, y) for x, y in zip(a.weights, b.weights, strict=True))
    assert stats["steps"] >= 2048 and np.isfinite(stats["final_mean_return"])


def test_train_continuous_writes_policy_file(tmp_path):
    pytest.importorskip("torch")
    from rlverify.training.continuous import train_continuous

    path, mlp, stats = train_continuous("pendulum-v1", seed=1, total_steps=4096, out=tmp_path / "p.onnx", hidden=(8, 8))
    policy = load_policy(str(path))
    assert policy.training["seed"] == 1 and policy.training["steps"] == stats["steps"]
    assert mlp.sizes == (2, 8, 8, 3)


def test_training_without_torch_says_which_extra(monkeypatch):
    from rlverify.training import ppo

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(DependencyNotInstalled, match=r"pip install 'rlverify\[torch\]'"):
        ppo.import_torch()


def test_cli_benchmark_parameters_and_no_silent_overwrite(tmp_path, capsys):
    assert cli(["abstract", "acc-v1", "-c", "accel=1", "-k", "1", "--phi", "0.5"]) == 0
    assert "acc-v1 (accel=1)" in capsys.readouterr().out
    png = tmp_path / "mine.png"
    png.write_text("mine")
    with pytest.raises(InputFileError, match="--force"):
        cli(["abstract", "acc-v1", "-k", "1", "--out-png", str(png)])
    assert png.read_text() == "mine"
    with pytest.raises(BenchmarkError, match="accel=20 out of range"):
        cli(["abstract", "acc-v1", "-c", "accel=20", "-k", "1"])
