"""Policies from the RL ecosystem: sb3-contrib MaskablePPO (verified with its mask as the model's availability),
RecurrentPPO (refused), the Gym bridge's policy metadata sidecar, the trained-parameters warning, reward warnings."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks.discrete import data_path
from rlverify.cli.main import main
from rlverify.errors import EnvError, InputFileError, PolicyError
from rlverify.gym import MDPEnv, RewardWarning, reward_spec
from rlverify.policies import load_policy
from rlverify.policies.loading import policy_warnings

RUNNING = data_path("models/running_example.prism")
AVOID_POLICY = data_path("policies/avoid_4x4_ppo.onnx")

# The running example by hand (its PRISM file): T[x][action] = {x': p}; UP is not available in D (x = 4).
T = {
    1: {"UP": {2: 0.2, 3: 0.8}, "NOP": {1: 1.0}, "DOWN": {1: 1.0}},
    2: {"UP": {3: 0.2, 4: 0.8}, "NOP": {2: 1.0}, "DOWN": {1: 1.0}},
    3: {"UP": {4: 1.0}, "NOP": {3: 1.0}, "DOWN": {2: 1.0}},
    4: {"NOP": {4: 1.0}, "DOWN": {3: 1.0}},
}


def bounded_reach(pi, target, k, start=1):
    """P(F<=k x=target) from ``start`` under ``pi[x] = {action: p}``, by k steps of iteration."""
    v = {x: 1.0 if x == target else 0.0 for x in T}
    for _ in range(k):
        v = {
            x: 1.0 if x == target else sum(pa * sum(p * v[y] for y, p in T[x][a].items()) for a, pa in pi[x].items())
            for x in T
        }
    return v[start]


def test_maskable_ppo_trained_on_the_gym_bridge_verifies_as_its_masked_policy(tmp_path):
    contrib = pytest.importorskip("sb3_contrib")
    torch = pytest.importorskip("torch")
    env = MDPEnv.from_model(RUNNING, reward="label:goal=1", unavailable="renormalize", max_episode_steps=10)
    model = contrib.MaskablePPO(
        "MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu", policy_kwargs={"net_arch": [8]}
    )
    model.learn(total_timesteps=128)
    path = tmp_path / "maskable.zip"
    model.save(str(path))
    env.save_policy_metadata(path, algorithm="MaskablePPO", seed=0)
    policy = load_policy(str(path))
    assert policy.algorithm == "MaskablePPO" and policy.maskable
    assert policy.features == ("x",) and policy.actions == env.action_names == ("DOWN", "NOP", "UP")
    # SB3's own masked distribution in every state (the mask: UP unavailable in D)
    obs = np.array([[1.0], [2.0], [3.0], [4.0]], dtype=np.float32)
    masks = np.array([[True, True, True]] * 3 + [[True, True, False]])
    with torch.no_grad():
        masked = model.policy.get_distribution(torch.as_tensor(obs), action_masks=masks).distribution.probs.numpy()
    pi = {x: {a: float(masked[x - 1, i]) for i, a in enumerate(env.action_names) if masks[x - 1, i]} for x in T}
    assert pi[4].keys() == {"DOWN", "NOP"}
    expected = bounded_reach(pi, target=3, k=3)  # from A, within 3 steps, reach C (through D too: D's mask matters)
    r = verify_exact(str(RUNNING), "P=? [F<=3 x=3]", policy, ExactOptions(unavailable="renormalize"))
    assert r.value == pytest.approx(expected, rel=1e-5)
    assert r.stalled_probability == 0.0
    # with stall, the unmasked network's mass on UP in D stalls; the verification says so
    notes = policy_warnings(policy, None, unavailable="stall")
    assert len(notes) == 1 and "MaskablePPO" in notes[0] and "renormalize" in notes[0]
    assert policy_warnings(policy, None, unavailable="renormalize") == []


def test_maskable_stall_note_reaches_the_cli_result(tmp_path, capsys):
    contrib = pytest.importorskip("sb3_contrib")
    env = MDPEnv.from_model(RUNNING, reward="steps", unavailable="renormalize", max_episode_steps=5)
    model = contrib.MaskablePPO(
        "MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=1, device="cpu", policy_kwargs={"net_arch": [4]}
    )
    path = tmp_path / "m.zip"
    model.save(str(path))
    env.save_policy_metadata(path)
    assert main(["verify", str(RUNNING), "-p", "P=? [F<=3 x=3]", "--policy", str(path), "--json"]) == 0
    out = capsys.readouterr()
    assert any("MaskablePPO" in w for w in json.loads(out.out)["result"]["warnings"])
    assert "renormalize" in out.err


def test_recurrent_ppo_is_refused_with_the_reason(tmp_path):
    contrib = pytest.importorskip("sb3_contrib")
    env = MDPEnv.from_model(RUNNING, reward="steps", max_episode_steps=5)
    model = contrib.RecurrentPPO("MlpLstmPolicy", env, n_steps=16, batch_size=16, seed=0, device="cpu")
    path = tmp_path / "lstm.zip"
    model.save(str(path))
    env.save_policy_metadata(path)
    with pytest.raises(PolicyError, match=r"recurrent.*memoryless"):
        load_policy(str(path))


def test_policy_metadata_and_sidecar_round_trip(tmp_path):
    sb3 = pytest.importorskip("stable_baselines3")
    env = MDPEnv.from_benchmark("avoid-v1", {"xMax": 2, "yMax": 2})
    meta = env.policy_metadata(algorithm="PPO")
    assert meta["features"] == list(env.dynamics.features) and meta["actions"] == list(env.action_names)
    assert meta["benchmark"] == "avoid-v1" and meta["params"]["xMax"] == 2 and meta["output"] == "logits"
    model = sb3.PPO(
        "MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0, device="cpu", policy_kwargs={"net_arch": [4]}
    )
    path = tmp_path / "avoid.zip"
    model.save(str(path))
    side = env.save_policy_metadata(path, algorithm="PPO")
    assert side == tmp_path / "avoid.zip.json" and json.loads(side.read_text())["algorithm"] == "PPO"
    with pytest.raises(InputFileError, match="exists; pass force=True"):
        env.save_policy_metadata(path)
    env.save_policy_metadata(path, force=True)
    policy = load_policy(str(path))
    assert policy.features == tuple(env.dynamics.features) and policy.actions == tuple(env.action_names)
    assert policy.training == {"benchmark": "avoid-v1", "params": meta["params"]}


def test_a_policy_verified_with_other_parameters_than_it_was_trained_for_warns(capsys):
    argv = ["verify", "avoid-v1", "-c", "xMax=2,yMax=2", "--policy", str(AVOID_POLICY), "-p", "collision-100", "--json"]
    assert main(argv) == 0
    out = capsys.readouterr()
    notes = json.loads(out.out)["result"]["warnings"]
    assert len(notes) == 1 and "xMax=4, yMax=4" in notes[0] and "xMax=2, yMax=2" in notes[0]
    assert "trained with xMax=4" in " ".join(out.err.split())
    from rlverify.resolve import resolve

    same = resolve("avoid-v1", property="collision-100")  # the reference policy at its own parameters
    assert policy_warnings(same.policy, same, unavailable="stall") == []


def test_a_policy_trained_on_another_benchmark_warns():
    from rlverify.resolve import resolve

    t = resolve("freeway-v1", property="P=? [F<=10 won=true]", needs_policy=False)
    policy = load_policy(str(AVOID_POLICY))
    notes = policy_warnings(policy, t)
    assert len(notes) == 1 and "trained on avoid-v1, not on freeway-v1" in notes[0]


def test_the_bridge_warns_when_every_reward_is_zero():
    with pytest.warns(RewardWarning, match="no reward model selected.*'steps'.*label:NAME=VALUE.*goal"):
        MDPEnv.from_model(RUNNING)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a reward model, or a label reward: no warning
        MDPEnv.from_model(RUNNING, reward="steps")
        MDPEnv.from_model(RUNNING, reward_label="goal")


def test_label_rewards_pay_on_entering_the_label_without_editing_the_model():
    env = MDPEnv.from_model(RUNNING, reward="label:goal=5", max_episode_steps=50)
    up = env.action_names.index("UP")
    nop = env.action_names.index("NOP")
    env.reset(seed=0)
    total, landed = 0.0, 0
    for _ in range(10):  # UP until D (x = 4), then NOP: it stays in D
        a = up if env.dynamics.observations[env.state][0] < 4 else nop
        _, r, _, _, _ = env.step(a)
        landed += int(env.dynamics.observations[env.state][0] == 4)
        total += r
    # every step that ends in a "goal" state pays 5, every other step 0 (no reward model)
    assert landed >= 7 and total == 5.0 * landed
    assert reward_spec("label:goal=1,hole=-2") == (None, {"goal": 1.0, "hole": -2.0})
    assert reward_spec("r", "goal") == ("r", {"goal": 1.0})
    with pytest.raises(EnvError, match="must be a number"):
        reward_spec("label:goal=high")
    with pytest.raises(EnvError, match="unknown label"):
        MDPEnv.from_model(RUNNING, reward="label:gaol=1")
