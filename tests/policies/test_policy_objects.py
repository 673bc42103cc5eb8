"""load_policy takes a policy in memory (an SB3 model, a torch module, ONNX bytes) as its file would be read: the same
adapter, the same probabilities, no file written; anything else is refused in one line naming what is taken."""

from __future__ import annotations

import json
import os

import gymnasium as gym
import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.errors import PolicyError
from rlverify.policies import load_policy
from rlverify.policies.mlp import MLP, save_mlp_onnx
from rlverify.policies.onnx_policy import OnnxPolicy
from rlverify.policies.sb3_policy import SB3Policy
from rlverify.policies.torch_policy import TorchPolicy
from rlverify.resolve import resolve

torch = pytest.importorskip("torch")
sb3 = pytest.importorskip("stable_baselines3")

GOAL = 'P=? [F "goal"]'
STATES = np.arange(16, dtype=np.float64)[:, None]


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _sb3_probs(model, n=16):
    """SB3's own distribution for FrozenLake's states, computed as SB3 samples from it."""
    with torch.no_grad():
        obs, _ = model.policy.obs_to_tensor(np.arange(n))
        return model.policy.get_distribution(obs).distribution.probs.double().numpy()


@pytest.mark.parametrize("algo", ["PPO", "A2C", "DQN"])
def test_an_sb3_model_object_is_the_policy_its_zip_is(algo, tmp_path):
    env = gym.make("FrozenLake-v1")
    kwargs = {"learning_starts": 0} if algo == "DQN" else {"n_steps": 64}
    model = getattr(sb3, algo)("MlpPolicy", env, seed=1, device="cpu", policy_kwargs={"net_arch": [8]}, **kwargs)
    model.learn(128)
    names = {"features": ["s"], "actions": ["left", "down", "right", "up"]}
    live = load_policy(model, **names)
    assert isinstance(live, SB3Policy) and live.algorithm == algo and live.name == f"{algo} model (in memory)"
    path = tmp_path / "m.zip"
    model.save(str(path))
    saved = load_policy(str(path), **names)
    np.testing.assert_array_equal(live.action_probabilities(STATES), saved.action_probabilities(STATES))
    if algo == "DQN":  # greedy: one-hot on the first maximal Q-value, as predict(deterministic=True)
        with torch.no_grad():
            q = model.q_net(model.policy.obs_to_tensor(np.arange(16))[0]).numpy()
        np.testing.assert_array_equal(live.action_probabilities(STATES).argmax(axis=1), q.argmax(axis=1))
    else:
        np.testing.assert_allclose(live.action_probabilities(STATES), _sb3_probs(model), rtol=1e-6, atol=1e-7)


def test_a_model_in_training_is_read_at_each_call_not_copied():
    env = gym.make("FrozenLake-v1")
    model = sb3.PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0, device="cpu", policy_kwargs={"net_arch": [8]})
    policy = load_policy(model, features=["s"], actions=["left", "down", "right", "up"])
    before = policy.action_probabilities(STATES)
    model.learn(128)
    after = policy.action_probabilities(STATES)
    assert not np.array_equal(before, after)
    np.testing.assert_allclose(after, _sb3_probs(model), rtol=1e-6, atol=1e-7)


def test_resolve_gives_an_sb3_model_the_gym_targets_names_and_verifies_it_as_its_zip(tmp_path):
    env = gym.make("FrozenLake-v1")
    model = sb3.PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0, device="cpu", policy_kwargs={"net_arch": [8]})
    model.learn(128)
    live = resolve("gym:FrozenLake-v1", policy=model, property=GOAL)
    assert live.policy.features == ("s",) and live.policy.actions == ("left", "down", "right", "up")
    path = tmp_path / "ppo.zip"
    model.save(str(path))
    saved = resolve("gym:FrozenLake-v1", policy=str(path), property=GOAL)
    a = verify_exact(live.model, live.property, live.policy, ExactOptions())
    b = verify_exact(saved.model, saved.property, saved.policy, ExactOptions())
    assert a.value == pytest.approx(b.value, abs=1e-12) and a.states == b.states == 16


def test_maskable_ppo_object_is_maskable():
    contrib = pytest.importorskip("sb3_contrib")
    from rlverify.gym import MDPEnv

    env = MDPEnv.from_benchmark("running-example-v1")
    model = contrib.MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=32, seed=0, device="cpu")
    policy = load_policy(model, features=list(env.unwrapped.dynamics.features), actions=list(env.action_names))
    assert policy.algorithm == "MaskablePPO" and policy.maskable
    obs = env.unwrapped.dynamics.observations.astype(np.float32)
    with torch.no_grad():
        own = model.policy.get_distribution(torch.as_tensor(obs)).distribution.probs.double().numpy()
    np.testing.assert_allclose(policy.action_probabilities(obs), own, rtol=1e-6, atol=1e-7)


def _mlp() -> MLP:
    rng = np.random.default_rng(3)
    return MLP((rng.normal(size=(5, 2)), rng.normal(size=(3, 5))), (rng.normal(size=5), rng.normal(size=3)))


def test_onnx_bytes_are_the_policy_their_file_is_and_write_no_file(tmp_path, monkeypatch):
    path = tmp_path / "p.onnx"
    save_mlp_onnx(path, _mlp(), features=["x", "y"], actions=["a", "b", "c"], output="logits")
    data = path.read_bytes()
    import onnxruntime  # noqa: F401  (its import writes a session file .ses in $TMPDIR: before the check below)

    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(work))
    states = np.array([[0.0, 1.0], [2.0, -1.0], [0.5, 0.25]])
    from_bytes = load_policy(data)
    assert isinstance(from_bytes, OnnxPolicy) and from_bytes.name == "ONNX bytes" and from_bytes.path is None
    assert from_bytes.features == ("x", "y") and from_bytes.actions == ("a", "b", "c")
    np.testing.assert_array_equal(from_bytes.action_probabilities(states), load_policy(path).action_probabilities(states))
    import onnx

    proto = load_policy(onnx.load(str(path)))
    np.testing.assert_array_equal(proto.action_probabilities(states), from_bytes.action_probabilities(states))
    assert os.listdir(work) == []


def test_onnx_bytes_that_are_no_model_are_refused():
    with pytest.raises(PolicyError, match="ONNX bytes: not"):
        load_policy(b"\x00\x01garbage")
    with pytest.raises(PolicyError, match="ONNX bytes: not an ONNX model"):
        load_policy(b"")


def test_a_torch_module_with_its_names_is_a_policy_and_stays_in_training_mode():
    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Dropout(0.5), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    net.train()
    policy = load_policy(net, features=["x", "y"], actions=["a", "b", "c"], output="logits")
    assert isinstance(policy, TorchPolicy)
    states = np.array([[0.0, 1.0], [2.0, -1.0]])
    p1, p2 = policy.action_probabilities(states), policy.action_probabilities(states)
    np.testing.assert_array_equal(p1, p2)  # eval mode while evaluated: dropout off
    with torch.no_grad():
        net.eval()
        expected = torch.softmax(net(torch.as_tensor(states, dtype=torch.float32)), dim=1).double().numpy()
        net.train()
    np.testing.assert_allclose(p1, expected, rtol=1e-6)
    assert net.training  # left as the trainer had it


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"actions": ["a", "b", "c"], "output": "logits"}, "features are unknown"),
        ({"features": ["x", "y"], "actions": ["a", "b", "c"]}, "what the module outputs is unknown"),
    ],
)
def test_a_torch_module_without_its_declaration_is_refused(kwargs, message):
    with pytest.raises(PolicyError, match=message):
        load_policy(torch.nn.Linear(2, 3), **kwargs)


def test_an_sb3_models_policy_attribute_is_refused_naming_the_model():
    model = sb3.PPO("MlpPolicy", gym.make("FrozenLake-v1"), n_steps=64, device="cpu")
    with pytest.raises(PolicyError, match=r"pass the model itself"):
        load_policy(model.policy, features=["s"], actions=["left", "down", "right", "up"])


def test_an_sb3_dqn_object_declared_as_logits_is_refused():
    model = sb3.DQN("MlpPolicy", gym.make("FrozenLake-v1"), device="cpu")
    with pytest.raises(PolicyError, match="contradicts"):
        load_policy(model, features=["s"], actions=["left", "down", "right", "up"], output="logits")


def test_an_sb3_continuous_object_with_named_actions_is_refused():
    """A SAC agent's actions are the Box's coordinates a[0].. (a continuous policy): other names contradict them."""
    model = sb3.SAC("MlpPolicy", gym.make("Pendulum-v1"), device="cpu", buffer_size=10)
    with pytest.raises(PolicyError, match=r"a\[0\]"):
        load_policy(model, features=["a", "b", "c"], actions=["x"])


@pytest.mark.parametrize(
    "given,shown",
    [({"features": ["x"]}, "a builtins.dict"), (3.5, "a builtins.float"), (MLP, "a class"), (json, "a builtins.module")],
    ids=["dict", "float", "class", "module"],
)
def test_a_wrong_object_is_refused_in_one_line_naming_what_is_taken(given, shown):
    with pytest.raises(PolicyError) as info:
        load_policy(given)
    message = str(info.value)
    assert "\n" not in message
    assert f"load_policy was given {shown}" in message
    for taken in ("policy file", "Stable-Baselines3 model", "torch.nn.Module", "ONNX bytes"):
        assert taken in message


def test_an_onnx_policy_shipped_to_a_ray_worker_is_rebuilt_from_its_bytes_without_a_file(tmp_path, monkeypatch):
    import tempfile

    from rlverify.backends import _onnx_restore, _onnx_state

    path = tmp_path / "p.onnx"
    save_mlp_onnx(path, _mlp(), features=["x", "y"], actions=["a", "b", "c"], output="logits")
    policy = load_policy(str(path))

    def no_temporary_files(*args, **kwargs):
        raise AssertionError("a temporary file was made")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_temporary_files)
    monkeypatch.setattr(tempfile, "NamedTemporaryFile", no_temporary_files)
    restored = _onnx_restore(_onnx_state(policy))
    states = np.array([[0.0, 1.0], [2.0, -1.0]])
    assert restored.name == str(path) and restored.path == path
    np.testing.assert_array_equal(restored.action_probabilities(states), policy.action_probabilities(states))


def test_a_torch_module_that_is_a_policy_object_stays_a_policy_object():
    """A module of the user's class with features/actions/action_probabilities is taken by its protocol, not as a
    network whose output kind is unknown."""
    from rlverify.policies import as_policy
    from rlverify.policies.adapters import ProtocolPolicy

    class Uniform(torch.nn.Module):
        features = ("x",)
        actions = ("DOWN", "NOP", "UP")

        def action_probabilities(self, states):
            return np.full((len(states), 3), 1 / 3)

    target = resolve("running-example-v1", policy=Uniform(), property="reach-goal-2")
    assert isinstance(target.policy, ProtocolPolicy) and isinstance(as_policy(Uniform()), ProtocolPolicy)
    # by hand (tests/policies/test_sb3.py): UP in A, then UP in B (0.8 to D) or the slip to C and UP there
    value = verify_exact(target.model, target.property, target.policy).value
    assert value == pytest.approx((1 / 3) * (0.2 * (1 / 3) * 0.8 + 0.8 * (1 / 3)), rel=1e-9)


@pytest.mark.parametrize("kind", ["sb3", "torch", "onnx"])
def test_as_policy_names_load_policy_for_a_network_in_memory(kind):
    from rlverify.policies import as_policy

    given = {
        "sb3": lambda: sb3.PPO("MlpPolicy", gym.make("FrozenLake-v1"), n_steps=64, device="cpu"),
        "torch": lambda: torch.nn.Linear(2, 3),
        "onnx": lambda: b"\x08\x07",
    }[kind]()
    with pytest.raises(PolicyError, match=r"rlverify.load_policy reads it") as info:
        as_policy(given)
    assert "\n" not in str(info.value)
