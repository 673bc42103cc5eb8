"""Python policy files for Box action spaces (``ACTION_LOW``/``ACTION_HIGH``, ``fn(obs, noise)``): episodes against a
plain scalar Gymnasium loop that applies the same formula with rlverify's documented noise, and bad declarations
refused in one line (exit 2)."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from scipy.special import ndtri

from rlverify.errors import PolicyError
from rlverify.policies import load_policy
from rlverify.policies.continuous import CallableContinuousPolicy
from rlverify.statistical.episodes import NOISE_STREAM, episode_seeds
from rlverify.statistical.rng import run_keys, seed_key, uniforms
from tests.incli import cli, one_line

PD = """
import numpy as np
FEATURES = ["cos", "sin", "omega"]
ACTION_LOW = [-2.0]
ACTION_HIGH = [2.0]
def pd(obs, noise):
    torque = -3.0 * np.arctan2(obs[:, 1], obs[:, 0]) - 0.8 * obs[:, 2]
    if noise is not None:
        torque = torque + 0.3 * noise[:, 0]
    return np.clip(torque, -2.0, 2.0)[:, None]
def wild(obs, noise):
    return np.full((len(obs), 1), 3.0) * (obs[:, 2:3] > 1.0)
"""


def _torque(obs: np.ndarray, z: float | None) -> float:
    """The PD rule of :data:`PD`, on one float64 observation (written again here, not imported)."""
    t = -3.0 * np.arctan2(obs[1], obs[0]) - 0.8 * obs[2] + (0.0 if z is None else 0.3 * z)
    return float(np.clip(t, -2.0, 2.0))


def _returns(seed: int, n: int, k: int, stochastic: bool) -> list[float]:
    """Each episode's k-step Pendulum return by a scalar loop, with the noise rlverify documents for episode i at step
    t: ``ndtri(uniforms(run_keys(seed_key(seed), [i]), t, NOISE_STREAM))``."""
    out = []
    for i, s in enumerate(episode_seeds(seed, np.arange(n))):
        env = gym.make("Pendulum-v1")
        obs, _ = env.reset(seed=int(s))
        total = 0.0
        keys = run_keys(seed_key(seed), np.array([i]))
        for t in range(k):
            z = float(ndtri(uniforms(keys, np.array([t]), NOISE_STREAM))[0]) if stochastic else None
            obs, r, term, trunc, _ = env.step(np.array([_torque(np.asarray(obs, np.float64), z)], np.float32))
            total += float(r)
            if term or trunc:
                break
        out.append(total)
    return out


@pytest.fixture()
def pd_file(tmp_path):
    path = tmp_path / "pd.py"
    path.write_text(PD)
    return path


@pytest.mark.parametrize("mode", ["deterministic", "stochastic"])
def test_episodes_equal_a_scalar_loop(capsys, pd_file, mode):
    code, out, err = cli(
        capsys, "simulate", "gym:Pendulum-v1", "--policy", f"{pd_file}:pd", "-p", "R=? [C<=40]", "--runs", "12",
        "--seed", "4", "--mode", mode, "--json",
    )  # fmt: skip
    assert code == 0, err
    ref = _returns(4, 12, 40, mode == "stochastic")
    assert json.loads(out)["result"]["estimate"] == pytest.approx(np.mean(ref), rel=1e-6)
    other = _returns(4, 12, 40, mode != "stochastic")  # the noise matters: the other mode's loop differs
    assert abs(np.mean(other) - np.mean(ref)) > 1e-3


def test_the_file_loads_as_a_continuous_policy(pd_file):
    p = load_policy(f"{pd_file}:pd")
    assert isinstance(p, CallableContinuousPolicy)
    assert list(p.features) == ["cos", "sin", "omega"] and list(p.actions) == ["a[0]"]
    assert p.low.tolist() == [-2.0] and p.high.tolist() == [2.0]
    obs = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]])
    np.testing.assert_allclose(p.act(obs, None)[:, 0], [-0.4, -2.0])  # -0.8 * 0.5; -3 * pi/2 clipped


def test_an_action_outside_its_bounds_names_episode_and_step(capsys, pd_file):
    code, _, err = cli(
        capsys, "simulate", "gym:Pendulum-v1", "--policy", f"{pd_file}:wild", "-p", "R=? [C<=200]", "--runs", "20",
        "--seed", "6",
    )  # fmt: skip
    line = one_line(err)
    assert code == 2 and "episode " in line and ", step " in line and "[3.0]" in line


@pytest.mark.parametrize(
    ("extra", "cause"),
    [
        ("ACTION_LOW = [-2.0]\nACTION_HIGH = None\n", "both ACTION_LOW and ACTION_HIGH"),
        ("ACTION_LOW = ['a']\nACTION_HIGH = [2.0]\n", "ACTION_LOW must be a list of finite numbers"),
        ("ACTION_LOW = [-2.0, -1.0]\nACTION_HIGH = [2.0]\n", "ACTION_LOW has 2 numbers and ACTION_HIGH 1"),
        ("ACTION_LOW = [float('nan')]\nACTION_HIGH = [2.0]\n", "finite numbers"),
        ("ACTION_LOW = [2.0]\nACTION_HIGH = [-2.0]\n", "not low <= high"),
        ("ACTIONS = ['left', 'right']\n", "a continuous policy's actions are ['a[0]']"),
        ("OUTPUT = 'logits'\n", "OUTPUT/--output do not apply"),
    ],
)
def test_bad_declarations_are_refused(capsys, tmp_path, extra, cause):
    path = tmp_path / "bad.py"
    path.write_text(PD + extra)
    code, _, err = cli(capsys, "simulate", "gym:Pendulum-v1", "--policy", f"{path}:pd", "-p", "R=? [C<=5]", "--runs", "2")
    assert code == 2 and cause in one_line(err)
    with pytest.raises(PolicyError, match=r"bad\.py"):
        load_policy(f"{path}:pd")


def test_a_continuous_file_on_a_discrete_environment_or_the_exact_engine_is_refused(capsys, pd_file):
    code, _, err = cli(
        capsys, "simulate", "gym:CartPole-v1", "--policy", f"{pd_file}:pd", "-p", 'P=? [F<=5 "terminated"]', "--runs", "2",
    )  # fmt: skip
    assert code == 2 and "pd.py:pd" in one_line(err)
    code, _, err = cli(capsys, "verify", "gym:FrozenLake-v1", "--policy", f"{pd_file}:pd", "-p", 'P=? [F "goal"]')
    line = one_line(err)
    assert code == 2 and "continuous policy" in line and "gym:FrozenLake-v1" in line
