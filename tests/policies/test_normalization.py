"""VecNormalize statistics: read without running code, applied as SB3's ``VecNormalize.normalize_obs`` applies them.

The oracle is SB3: a model trained under ``VecNormalize``, ``vec_env.normalize_obs(obs)`` then ``model.predict`` (or its
own action distribution, for a discrete policy), against rlverify's ``normalized(policy, stats)`` on the raw obs.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from rlverify.errors import PolicyError
from rlverify.policies import load_policy
from rlverify.policies.normalization import load_vec_normalize, normalized

sb3 = pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402


def _trained(env_id: str, tmp_path, **vec_kwargs):
    """A PPO trained for one short update under VecNormalize; its zip, its statistics file and the VecNormalize."""
    venv = VecNormalize(make_vec_env(env_id, n_envs=2, seed=0), clip_obs=vec_kwargs.pop("clip_obs", 10.0), **vec_kwargs)
    model = sb3.PPO(
        "MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu", policy_kwargs={"net_arch": [16]}
    )
    model.learn(128)
    model.save(tmp_path / "model.zip")
    venv.save(str(tmp_path / "vecnormalize.pkl"))
    venv.training = False
    return tmp_path / "model.zip", tmp_path / "vecnormalize.pkl", model, venv


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    return _trained("Pendulum-v1", tmp_path_factory.mktemp("pendulum"))


def _pendulum_obs(n: int) -> np.ndarray:
    rng = np.random.default_rng(2)
    theta = rng.uniform(-np.pi, np.pi, n)
    return np.stack([np.cos(theta), np.sin(theta), rng.uniform(-8, 8, n)], axis=1).astype(np.float32)


def test_the_statistics_are_vecnormalizes(pendulum):
    _, stats_path, _, venv = pendulum
    stats = load_vec_normalize(stats_path)
    np.testing.assert_array_equal(stats.mean, venv.obs_rms.mean)
    np.testing.assert_array_equal(stats.var, venv.obs_rms.var)
    assert (stats.clip_obs, stats.epsilon, stats.count, stats.norm_obs) == (
        venv.clip_obs,
        venv.epsilon,
        venv.obs_rms.count,
        True,
    )
    obs = _pendulum_obs(100) * 3  # far outside: the clip matters
    np.testing.assert_array_equal(stats.normalize(obs), venv.normalize_obs(obs))


@pytest.mark.parametrize("trust", [False, True], ids=["json+weights", "trust-code"])
def test_normalized_continuous_actions_are_predict_on_normalized_obs(pendulum, trust):
    zip_path, stats_path, model, venv = pendulum
    policy = normalized(load_policy(str(zip_path), trust_code=trust), load_vec_normalize(stats_path))
    obs = _pendulum_obs(200)
    expected, _ = model.predict(venv.normalize_obs(obs), deterministic=True)
    np.testing.assert_allclose(policy.act(obs.astype(np.float64)), expected, atol=1e-5, rtol=0)
    # without the statistics, the same policy gives other actions (the test can fail)
    assert np.abs(load_policy(str(zip_path)).act(obs.astype(np.float64)) - expected).max() > 1e-3
    assert policy.features == ("obs[0]", "obs[1]", "obs[2]") and policy.kind == "gaussian"


def test_normalized_discrete_probabilities_are_sb3s_on_normalized_obs(tmp_path):
    zip_path, stats_path, model, venv = _trained("CartPole-v1", tmp_path)
    names = {"features": ["x", "v", "theta", "omega"], "actions": ["left", "right"]}
    policy = normalized(load_policy(str(zip_path), **names), load_vec_normalize(stats_path))
    obs = np.random.default_rng(4).normal(size=(100, 4)).astype(np.float32) * [1, 2, 0.2, 2]
    tensor, _ = model.policy.obs_to_tensor(venv.normalize_obs(obs.astype(np.float32)))
    with torch.no_grad():
        expected = model.policy.get_distribution(tensor).distribution.probs.double().numpy()
    np.testing.assert_allclose(policy.action_probabilities(obs), expected, atol=1e-6)
    np.testing.assert_array_equal(policy.choose(obs)[0], expected.argmax(axis=1))
    assert policy.actions == ("left", "right") and policy.unwrapped is not policy


def test_norm_obs_false_is_the_identity(tmp_path):
    zip_path, stats_path, _, _ = _trained("Pendulum-v1", tmp_path, norm_obs=False)
    policy = load_policy(str(zip_path))
    stats = load_vec_normalize(stats_path)
    assert stats.norm_obs is False and normalized(policy, stats) is policy


def test_an_observation_count_mismatch_is_one_line(pendulum):
    zip_path, stats_path, _, _ = pendulum
    stats = load_vec_normalize(stats_path)
    cartpole_like = load_policy(str(zip_path), features=["a", "b", "c"])
    smaller = type(stats)(stats.mean[:2], stats.var[:2], stats.count, stats.clip_obs, stats.epsilon)
    with pytest.raises(PolicyError, match="for 2 observations, the policy has 3 features") as exc:
        normalized(cartpole_like, smaller)
    assert "\n" not in str(exc.value)


class _System:
    """Unpickling this calls os.system (what a hostile statistics file could do)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_a_pickle_that_calls_os_system_is_refused_before_running(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps({"obs_rms": _System(f"touch {marker}")}))
    with pytest.raises(PolicyError, match=r"refers to (posix|os|nt)\.system, which rlverify does not unpickle") as exc:
        load_vec_normalize(evil)
    assert "\n" not in str(exc.value) and not marker.exists()
    pickle.loads(evil.read_bytes())  # the same file, unpickled plainly, does run it: the test can fail
    assert marker.exists()


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"", "not a VecNormalize statistics pickle"),
        (pickle.dumps({"a": 1}), "holds a dict, not a VecNormalize"),
        (pickle.dumps(eval), r"refers to builtins\.eval"),
    ],
    ids=["empty", "a-dict", "builtins"],
)
def test_malformed_statistics_are_one_line(tmp_path, raw, match):
    path = tmp_path / "stats.pkl"
    path.write_bytes(raw)
    with pytest.raises(PolicyError, match=match) as exc:
        load_vec_normalize(path)
    assert "\n" not in str(exc.value)


def test_a_truncated_statistics_file_is_one_line(pendulum, tmp_path):
    raw = pendulum[1].read_bytes()
    path = tmp_path / "truncated.pkl"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(PolicyError, match="not a VecNormalize statistics pickle") as exc:
        load_vec_normalize(path)
    assert "\n" not in str(exc.value)
