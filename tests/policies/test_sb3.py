"""A real Stable-Baselines3 PPO model, trained here on rlverify's Gymnasium bridge, verified exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks import make
from rlverify.gym import MDPEnv
from rlverify.policies import load_policy


def test_sb3_ppo_zip_verifies_with_its_own_action_distribution(tmp_path):
    sb3 = pytest.importorskip("stable_baselines3")
    torch = pytest.importorskip("torch")
    env = MDPEnv.from_benchmark("running-example-v1")
    model = sb3.PPO(
        "MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu", policy_kwargs={"net_arch": [8]}
    )
    model.learn(total_timesteps=128)
    path = tmp_path / "ppo.zip"
    model.save(str(path))
    (tmp_path / "ppo.zip.json").write_text(
        json.dumps({"features": list(env.unwrapped.dynamics.features), "actions": list(env.action_names)})
    )
    policy = load_policy(str(path))
    # the adapter's probabilities are SB3's own distribution
    obs = env.unwrapped.dynamics.observations.astype(np.float32)
    with torch.no_grad():
        own = model.policy.get_distribution(torch.as_tensor(obs)).distribution.probs.numpy()
    np.testing.assert_allclose(policy.action_probabilities(obs), own, rtol=1e-6, atol=1e-7)
    bench = make("running-example-v1")
    r = verify_exact(bench.load_model(), bench.properties["reach-goal-2"], policy, ExactOptions())
    # by hand from SB3's own probabilities of UP in A, B, C (x = 1, 2, 3): reaching D within two
    # steps from A needs UP in A, then UP in B (0.8 to D) or UP in C (1.0 to D)
    up = env.action_names.index("UP")
    p_up = {int(s[0]): p[up] for s, p in zip(obs, own, strict=True)}
    expected = p_up[1] * (0.2 * p_up[2] * 0.8 + 0.8 * p_up[3])
    assert r.value == pytest.approx(expected, rel=1e-5)
