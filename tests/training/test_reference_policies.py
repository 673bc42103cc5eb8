"""The shipped reference policies: registered, self-describing, they fit their benchmark (and only it), and verify well."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks import make, spec
from rlverify.benchmarks.discrete import data_path
from rlverify.errors import PolicyError
from rlverify.policies import CallablePolicy, check_policy
from rlverify.policies.formats import META_TRAINING

# benchmark, parameters, property trained for, whether lower is better, network sizes (paper Table 1)
CASES = [
    pytest.param("freeway-v1", {}, "goal", False, (31, 64, 64, 3), id="freeway"),
    pytest.param("avoid-v1", {"xMax": 4, "yMax": 4, "slickness": 0.1}, "collision-100", True, (7, 64, 64, 4), id="avoid"),
    # every full-support policy collides eventually (P(F coll) = 1): compare the 20-step horizon
    pytest.param("crazy-climber-v1", {}, "collision-20", True, (23, 1024, 1024, 4), id="crazy-climber"),
]


def uniform(model, actions):
    return CallablePolicy(
        lambda x: np.full((len(x), len(actions)), 1.0 / len(actions)), model.variables, actions, name="uniform"
    )


@pytest.mark.parametrize(("bench_id", "params", "prop", "lower_better", "sizes"), CASES)
def test_registered_and_self_describing(bench_id, params, prop, lower_better, sizes):
    rel = spec(bench_id).policies["reference"]
    path = data_path(rel)
    assert path.is_file() and path.stat().st_size < 10 * 1024**2
    bench = make(bench_id, **params)
    assert bench.policies["reference"] == path
    policy = bench.load_policy("reference")
    meta = json.loads(policy.metadata[META_TRAINING])
    assert meta["benchmark"] == bench_id and meta["params"] == params
    assert {"seed", "steps", "hyperparameters", "final_mean_return", "final_success_rate", "rlverify"} <= set(meta)
    from rlverify.policies import mlp_from_onnx

    assert mlp_from_onnx(path).sizes == sizes
    check_policy(policy, bench.load_model())


@pytest.mark.parametrize(("bench_id", "params", "prop", "lower_better", "sizes"), CASES)
def test_reference_policy_verifies_and_beats_uniform_random(bench_id, params, prop, lower_better, sizes):
    bench = make(bench_id, **params)
    model = bench.load_model()
    policy = bench.load_policy("reference")
    check_policy(policy, model)
    text = bench.properties[prop]
    mono = verify_exact(model, text, None, ExactOptions(mode="monolithic"))
    ours = verify_exact(model, text, policy, ExactOptions(mode="stochastic"))
    rand = verify_exact(model, text, uniform(model, list(policy.actions)), ExactOptions(mode="stochastic"))
    tol = 1e-6
    assert mono.pmin - tol <= ours.value <= mono.pmax + tol
    assert ours.stalled_probability == 0.0
    if lower_better:
        assert ours.value < rand.value - 0.05, (ours.value, rand.value)
    else:
        assert ours.value > rand.value + 0.05, (ours.value, rand.value)


def test_avoid_reference_policy_is_attached_only_on_its_grid():
    assert "reference" in make("avoid-v1", xMax=4, yMax=4, slickness=0.3).policies
    assert make("avoid-v1", xMax=5, yMax=5).policies == {}


@pytest.mark.parametrize(
    ("policy_of", "model_of", "problem"),
    [
        pytest.param("freeway-v1", "avoid-v1", "feature 'px0' is not a model variable", id="freeway-on-avoid"),
        pytest.param("avoid-v1", "crazy-climber-v1", "feature 'x' is not a model variable", id="avoid-on-crazy-climber"),
        pytest.param(
            "crazy-climber-v1", "freeway-v1", "action 'left' is not an action of the model", id="crazy-climber-on-freeway"
        ),
    ],
)
def test_policy_of_another_benchmark_is_rejected(policy_of, model_of, problem):
    policy = make(policy_of).load_policy("reference")
    model = make(model_of).load_model()
    with pytest.raises(PolicyError) as err:
        check_policy(policy, model)
    assert problem in str(err.value)
    with pytest.raises(PolicyError):
        verify_exact(model, next(iter(make(model_of).properties.values())), policy, ExactOptions())
