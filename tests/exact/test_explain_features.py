"""Safety-relevant features (rlverify.exact.features): each ablation value equals a separate `rlverify verify` run of a
policy FILE with that feature fixed, written here independently of the wrapper (a table; a network whose first layer
absorbs the fixed input), and a brute-force value on the running example; the ±1 values are the robustness engine's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.exact.features import FeatureOptions, feature_effects
from rlverify.exact.robust import robustness
from rlverify.exact.robust_options import RobustnessOptions
from rlverify.policies.ablated import FixedFeaturePolicy
from rlverify.resolve import resolve

REPO = Path(__file__).resolve().parents[2]
FROZEN_PPO = REPO / "examples" / "gymnasium" / "ppo_frozenlake.zip"


def verify_value(capsys, *argv: str) -> float:
    """The value of a separate `rlverify verify ... --json` run (in-process main)."""
    capsys.readouterr()
    assert main(["verify", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["result"]["value"]


# the running example (Fig. 2 of Gross & Spieker 2024), written out by hand: x in 1..4, actions UP, NOP, DOWN
PI = {1: [0.3, 0.0, 0.7], 2: [0.5, 0.5, 0.0], 3: [1.0, 0.0, 0.0], 4: [0.0, 1.0, 0.0]}  # the shipped table policy
T = {  # T[x][action] = {x': p}
    1: {0: {2: 0.2, 3: 0.8}, 1: {1: 1.0}, 2: {1: 1.0}},
    2: {0: {3: 0.2, 4: 0.8}, 1: {2: 1.0}, 2: {1: 1.0}},
    3: {0: {4: 1.0}, 1: {3: 1.0}, 2: {2: 1.0}},
    4: {1: {4: 1.0}, 2: {3: 1.0}},  # UP is not available at x=4
}


def brute_reach(pi: dict[int, list[float]], k: int) -> float:
    """P(F<=k x=4) from x=1 (mass on an unavailable action stalls: it never reaches the goal)."""
    v = {x: float(x == 4) for x in T}
    for _ in range(k):
        step = {x: sum(pi[x][a] * sum(p * v[y] for y, p in T[x].get(a, {}).items()) for a in range(3)) for x in T}
        v = {x: 1.0 if x == 4 else step[x] for x in T}
    return v[1]


def test_running_example_ablation_against_brute_force_and_a_separate_verify_of_a_table(tmp_path, capsys):
    t = resolve("running-example-v1", property='P=? [F<=3 "goal"]')
    r = feature_effects(t.model, t.property, t.policy, FeatureOptions(reference="range"))
    assert abs(r.nominal - brute_reach(PI, 3)) < 1e-9
    (e,) = r.effects
    assert e.feature == "x" and e.reference == 1.0
    for v in (1, 2, 3, 4):  # the policy shown x=v everywhere: pi(.|v) in every state
        fixed = {x: PI[v] for x in T}
        assert abs(e.range_values[str(v)] - brute_reach(fixed, 3)) < 1e-9, v
        table = tmp_path / f"fixed{v}.json"
        rows = [{"state": {"x": x}, "probabilities": dict(zip(["UP", "NOP", "DOWN"], PI[v], strict=True))} for x in T]
        table.write_text(json.dumps({"features": ["x"], "actions": ["UP", "NOP", "DOWN"], "table": rows}))
        separate = verify_value(capsys, "running-example-v1", "-p", 'P=? [F<=3 "goal"]', "--policy", str(table))
        assert abs(e.range_values[str(v)] - separate) < 1e-9, v
    assert e.fixed == e.range_values["1"]
    # x=3 shows "always UP": the goal within 3 steps surely; the default worst case is max (a failure reading)
    assert e.worst_at == 3.0 and abs(e.worst_fixed - 1.0) < 1e-9
    rob = robustness(t.model, t.property, t.policy, RobustnessOptions(epsilon=1, perturb=("x",), attack=False))
    assert (e.perturbed_worst, e.perturbed_best) == (rob.worst, rob.best)
    assert e.effect == pytest.approx(max(abs(v - r.nominal) for v in [*e.range_values.values(), rob.worst, rob.best]))


def test_avoid_ablation_equals_a_separate_verify_of_a_network_with_the_input_absorbed(tmp_path, capsys):
    from rlverify.policies.mlp import MLP, save_mlp_onnx

    prop = "P=? [F<=100 COLLISION=true]"
    t = resolve("avoid-v1", property=prop)
    feature = "obstacle1_y"
    r = feature_effects(t.model, t.property, t.policy, FeatureOptions(features=(feature,), perturb=False))
    (e,) = r.effects
    assert abs(r.nominal - 0.8461287531597388) < 1e-9  # the README's value
    # the network with the feature's column removed and its fixed value added to the first layer's biases
    mlp = t.policy.network()
    c = t.policy.features.index(feature)
    w0 = mlp.weights[0].copy()
    b0 = mlp.biases[0] + w0[:, c] * e.reference
    w0[:, c] = 0.0
    surgery = MLP(weights=(w0, *mlp.weights[1:]), biases=(b0, *mlp.biases[1:]))
    path = save_mlp_onnx(tmp_path / "fixed.onnx", surgery, features=t.policy.features, actions=t.policy.actions)
    separate = verify_value(capsys, "avoid-v1", "-p", prop, "--policy", str(path))
    # float32 weights: the biases are rounded once more than the wrapped network's sums (1e-7 relative)
    assert abs(e.fixed - separate) < 1e-6
    assert abs(e.fixed - r.nominal) > 1e-3  # the ablation moves the value by more than that tolerance
    assert e.effect == pytest.approx(abs(e.fixed - r.nominal))


def test_frozenlake_without_its_only_feature_is_a_constant_policy(tmp_path, capsys):
    prop = 'P=? [F "goal"]'
    t = resolve("gym:FrozenLake-v1", policy=str(FROZEN_PPO), property=prop)
    r = feature_effects(t.model, t.property, t.policy, FeatureOptions(perturb=False))
    (e,) = r.effects
    assert e.feature == "s" and e.reference == 0.0
    p0 = t.policy.action_probabilities(np.zeros((1, 1)))[0]
    rows = [{"state": {"s": s}, "probabilities": dict(zip(t.policy.actions, map(float, p0), strict=True))} for s in range(16)]
    table = tmp_path / "constant.json"
    table.write_text(json.dumps({"features": ["s"], "actions": list(t.policy.actions), "table": rows}))
    separate = verify_value(capsys, "gym:FrozenLake-v1", "-p", prop, "--policy", str(table))
    assert abs(e.fixed - separate) < 1e-9
    assert abs(r.nominal - verify_value(capsys, "gym:FrozenLake-v1", "-p", prop, "--policy", str(FROZEN_PPO))) < 1e-9


def test_the_wrapper_replaces_only_its_column_in_one_batched_call():
    calls = []

    class Spy:
        name, features, actions = "spy", ("a", "b"), ("L", "R")

        def action_probabilities(self, states):
            calls.append(np.array(states))
            return np.tile([0.25, 0.75], (len(states), 1))

    w = FixedFeaturePolicy(Spy(), {"b": 7})
    out = w.action_probabilities(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    assert out.shape == (3, 2) and len(calls) == 1
    assert calls[0].tolist() == [[1.0, 7.0], [3.0, 7.0], [5.0, 7.0]]


def test_unknown_feature_and_too_many_runs_are_refused_naming_the_cause():
    from rlverify.errors import OptionError

    t = resolve("running-example-v1", property='P=? [F<=3 "goal"]')
    with pytest.raises(OptionError, match="'y' is not a feature of the policy"):
        feature_effects(t.model, t.property, t.policy, FeatureOptions(features=("y",)))
    with pytest.raises(OptionError, match=r"takes 6 exact checks \(limit 2\)"):
        feature_effects(t.model, t.property, t.policy, FeatureOptions(reference="range", max_runs=2))


def test_the_bar_chart_has_a_bar_per_feature():
    t = resolve("running-example-v1", property='P=? [F<=3 "goal"]')
    r = feature_effects(t.model, t.property, t.policy, FeatureOptions(reference="range"))
    fig = r.figure()
    ax = fig.axes[0]
    assert [tick.get_text() for tick in ax.get_yticklabels()] == ["x"]
    assert len(ax.patches) == 2  # fixed to the initial value, worst over the range


@pytest.mark.parametrize("value", [float("nan"), "1", True, None], ids=["nan", "text", "bool", "none"])
def test_the_wrapper_refuses_a_value_that_is_not_a_finite_number(value):
    from rlverify.errors import PolicyError

    t = resolve("running-example-v1", property='P=? [F<=3 "goal"]')
    with pytest.raises(PolicyError, match=r"the fixed values of \['x'\] are not finite numbers"):
        FixedFeaturePolicy(t.policy, {"x": value})
    with pytest.raises(PolicyError, match=r"cannot fix \['y'\]: its features are \['x'\]"):
        FixedFeaturePolicy(t.policy, {"y": 1})


def test_an_infinite_expected_reward_is_named_and_written_on_the_chart():
    # R{"steps"}=? [F "goal"]: shown x=4 everywhere the policy takes NOP at x=1 and never reaches the goal
    t = resolve("running-example-v1", property='R{"steps"}=? [F "goal"]')
    r = feature_effects(t.model, t.property, t.policy, FeatureOptions(reference="range"))
    (e,) = r.effects
    assert e.range_values["4"] == float("inf") and e.worst_at == 4.0 and e.effect == float("inf")
    assert e.perturbed_worst is None  # the robustness engine takes probabilities only
    assert any("x fixed to 4: the value is infinite" in w for w in r.warnings)
    assert any("are not computed" in w for w in r.warnings)
    texts = [t.get_text() for t in r.figure().axes[0].texts]
    assert texts == ["+infinite (worst over its range)"]
