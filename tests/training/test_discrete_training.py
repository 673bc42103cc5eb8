"""PPO on PRISM benchmarks through the Gymnasium bridge: it learns, it is reproducible, its file is verifier-ready."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks import make
from rlverify.errors import DependencyNotInstalled
from rlverify.policies import OnnxPolicy, check_policy, load_policy, softmax
from rlverify.policies.formats import META_TRAINING
from rlverify.training.discrete import SETUPS, DiscreteSetup, TrainingError, evaluate_returns, setup_for, train_discrete


@pytest.mark.parametrize(
    ("bench_id", "params", "steps"),
    [
        pytest.param("running-example-v1", None, 20_000, id="running-example"),
        pytest.param("avoid-v1", {"xMax": 2, "yMax": 2, "slickness": 0.1}, 60_000, id="avoid-2x2"),
    ],
)
def test_short_training_beats_the_uniform_random_policy(bench_id, params, steps):
    report = train_discrete(bench_id, params=params, steps=steps, seed=0)
    sign = np.sign(setup_for(bench_id).reward_scale)  # -1: the reward model is a cost (running example: steps)
    uniform, _ = evaluate_returns(bench_id, None, params=params, episodes=2000, seed=7)
    trained, _ = evaluate_returns(bench_id, report.mlp, params=params, episodes=2000, seed=7)
    # well beyond the sampling noise of 2,000 episodes
    assert sign * (trained - uniform) > 0.2 * abs(uniform), (uniform, trained)
    assert report.curve and report.steps >= steps
    assert np.isfinite(report.final_mean_return) and 0.0 <= report.final_success_rate <= 1.0


def test_same_seed_same_weights_other_seed_other_weights():
    a = train_discrete("running-example-v1", steps=2048, seed=3)
    b = train_discrete("running-example-v1", steps=2048, seed=3)
    c = train_discrete("running-example-v1", steps=2048, seed=4)
    for wa, wb in zip(a.mlp.weights + a.mlp.biases, b.mlp.weights + b.mlp.biases, strict=True):
        np.testing.assert_array_equal(wa, wb)
    assert a.final_mean_return == b.final_mean_return and a.curve == b.curve
    assert any(not np.array_equal(wa, wc) for wa, wc in zip(a.mlp.weights, c.mlp.weights, strict=True))


def test_policy_file_is_self_describing_and_verifies(tmp_path):
    params = {"xMax": 2, "yMax": 2, "slickness": 0.1}
    out = tmp_path / "avoid.onnx"
    report = train_discrete("avoid-v1", params=params, steps=4096, seed=1, hidden="32,32", out=out)
    assert report.path == out and out.is_file()
    policy = load_policy(str(out))
    assert isinstance(policy, OnnxPolicy)
    model = make("avoid-v1", **params).load_model()
    assert set(policy.features) == set(model.variables) and len(policy.features) == len(model.variables)
    assert policy.actions == ("east", "north", "south", "west")
    meta = json.loads(policy.metadata[META_TRAINING])
    assert meta["benchmark"] == "avoid-v1" and meta["params"] == params and meta["seed"] == 1
    assert meta["steps"] == report.steps and meta["hidden"] == [32, 32]
    for key in ("algorithm", "hyperparameters", "final_mean_return", "final_success_rate", "rlverify"):
        assert key in meta, key
    assert meta["hyperparameters"]["lr"] == SETUPS["avoid-v1"].config.lr
    # the file computes the trained network (float32 weights)
    x = model.initial_valuation()
    x = np.array([[x[f] for f in policy.features]], dtype=np.float64)
    np.testing.assert_allclose(policy.action_probabilities(x), softmax(report.mlp(x)), atol=1e-5)
    check_policy(policy, model)
    r = verify_exact(model, "P=? [F<=10 COLLISION=true]", policy, ExactOptions(mode="stochastic"))
    assert 0.0 <= r.value <= 1.0


def test_bad_input_names_the_field():
    with pytest.raises(TrainingError, match="steps"):
        train_discrete("running-example-v1", steps=0)
    with pytest.raises(TrainingError, match="hidden"):
        train_discrete("running-example-v1", steps=100, hidden="64,x")
    with pytest.raises(TrainingError, match=r"prism|PRISM"):
        train_discrete("racetrack-barto-small-v1", steps=100)
    from rlverify.benchmarks import BenchmarkError

    with pytest.raises(BenchmarkError, match="did you mean 'freeway-v1'"):
        train_discrete("freeway-v2", steps=100)
    with pytest.raises(BenchmarkError, match="xMax"):
        train_discrete("avoid-v1", params={"xMax": 0}, steps=100)


def test_without_torch_training_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(DependencyNotInstalled, match=r"pip install 'rlverify\[torch\]'"):
        train_discrete("running-example-v1", steps=100)


def test_generic_setup_for_benchmarks_without_one():
    assert setup_for("no-such-benchmark") == DiscreteSetup()
