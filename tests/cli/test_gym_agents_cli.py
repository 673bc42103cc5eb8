"""SB3 agents given to the wrong environment, engine or statistics: ``rlverify`` refuses in one line (exit 2).

The zips are SB3's own ``save`` of untrained models (a refusal needs no training): a TD3 (Box actions) and a PPO
(discrete) of Pendulum / CartPole, and a TD3 of a one-feature environment (so that only its Box action, not its
observation count, can be what does not fit a one-variable model). Each refusal is checked with and without
``--trust-code`` where the policy is read differently (SB3's loader vs the zip's JSON and weights).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from tests.incli import cli, one_line

sb3 = pytest.importorskip("stable_baselines3")
gym = pytest.importorskip("gymnasium")

ONE_VARIABLE = """mdp
module m
  x : [0..3] init 0;
  [a] x<3 -> 0.5:(x'=x+1) + 0.5:(x'=x);
  [b] x<3 -> (x'=x);
endmodule
label "goal" = x=3;
"""


class _OneFeature(gym.Env):
    """One observation in [-1, 1], one action in [-1, 1] (only to build a TD3 zip of that shape)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}


class _System:
    """Unpickling this runs ``os.system(command)`` (a hostile statistics file)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    d = tmp_path_factory.mktemp("agents_cli")
    small = {"net_arch": [8]}
    sb3.TD3("MlpPolicy", "Pendulum-v1", seed=0, device="cpu", policy_kwargs=small).save(d / "td3.zip")
    sb3.PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu", policy_kwargs=small).save(d / "ppo.zip")
    sb3.TD3("MlpPolicy", _OneFeature(), seed=0, device="cpu", policy_kwargs=small).save(d / "td3_1d.zip")
    VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0)).save(str(d / "pendulum_stats.pkl"))
    (d / "one.prism").write_text(ONE_VARIABLE)
    return {p.stem: p for p in d.iterdir()}


TRUST = pytest.mark.parametrize("trust", [[], ["--trust-code"]], ids=["no-code", "trust-code"])


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = cli(capsys, *args)
    assert code == 2, (code, out, err)
    return one_line(err)


@TRUST
def test_a_continuous_policy_on_cartpole_is_refused_by_its_observation_count(capsys, files, trust):
    line = refused(
        capsys, "simulate", "gym:CartPole-v1", "--policy", str(files["td3"]), "-p", 'P=? [F<=10 "terminated"]',
        "--runs", "5", *trust,
    )  # fmt: skip
    assert "td3.zip" in line and "3 features" in line and "the features declared are [" in line


@TRUST
def test_a_discrete_policy_on_pendulum_is_refused(capsys, files, trust):
    line = refused(
        capsys, "simulate", "gym:Pendulum-v1", "--policy", str(files["ppo"]), "-p", "P=? [F<=10 false]", "--runs", "5",
        *trust,
    )  # fmt: skip
    assert "ppo.zip" in line and "Discrete(2)" in line and "a[0]" in line


@pytest.mark.parametrize("command", ["verify", "simulate"])
def test_a_continuous_policy_on_a_prism_model_is_refused(capsys, files, command):
    runs = ["--runs", "5"] if command == "simulate" else []
    line = refused(
        capsys, command, str(files["one"]), "--policy", str(files["td3_1d"]), "--features", "x", "-p",
        'P=? [F "goal"]', *runs,
    )  # fmt: skip
    assert "td3_1d.zip" in line and "a[0]" in line
    if command == "verify":  # the exact engine says why first: a continuous policy gives actions
        assert str(files["one"]) in line and "continuous policy" in line and "simulate it" in line
    else:
        assert "'a[0]'" in line and "a, b" in line


@TRUST
def test_a_continuous_policy_with_verify_on_a_finite_gym_model_is_refused(capsys, files, trust):
    line = refused(capsys, "verify", "gym:FrozenLake-v1", "--policy", str(files["td3_1d"]), "-p", 'P=? [F "goal"]', *trust)
    assert "td3_1d.zip" in line and "gym:FrozenLake-v1" in line and "continuous policy" in line and "a[0]" in line


def test_the_refusal_on_a_finite_gym_model_names_the_users_target(capsys, files):
    line = refused(capsys, "verify", "gym:FrozenLake-v1", "--policy", str(files["td3_1d"]), "-p", 'P=? [F "goal"]')
    assert "rlverify-gym-" not in line and "gym:FrozenLake-v1" in line


def test_the_refusal_of_a_continuous_policy_by_verify_says_it_is_continuous(capsys, files):
    line = refused(capsys, "verify", "gym:FrozenLake-v1", "--policy", str(files["td3_1d"]), "-p", 'P=? [F "goal"]')
    assert "continuous" in line


@TRUST
def test_a_missing_statistics_file_is_refused(capsys, files, trust, tmp_path):
    missing = tmp_path / "nowhere.pkl"
    line = refused(
        capsys, "simulate", "gym:Pendulum-v1", "--policy", str(files["td3"]), "-p", "P=? [F<=10 false]", "--runs", "5",
        "--vec-normalize", str(missing), *trust,
    )  # fmt: skip
    assert "nowhere.pkl" in line and "No such file" in line


@TRUST
def test_a_statistics_pickle_that_calls_os_system_is_refused_and_does_not_run(capsys, files, trust, tmp_path):
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps({"obs_rms": _System(f"touch {marker}")}))
    line = refused(
        capsys, "simulate", "gym:Pendulum-v1", "--policy", str(files["td3"]), "-p", "P=? [F<=10 false]", "--runs", "5",
        "--vec-normalize", str(evil), *trust,
    )  # fmt: skip
    assert "evil.pkl" in line and "system" in line and not marker.exists()
    pickle.loads(evil.read_bytes())  # the same file unpickled plainly does run the command: the check can fail
    assert marker.exists()


@TRUST
def test_statistics_for_another_observation_count_are_refused(capsys, files, trust):
    line = refused(
        capsys, "simulate", "gym:CartPole-v1", "--policy", str(files["ppo"]), "-p", 'P=? [F<=10 "terminated"]',
        "--runs", "5", "--vec-normalize", str(files["pendulum_stats"]), *trust,
    )  # fmt: skip
    assert "pendulum_stats.pkl" in line and "3 observations" in line and "4 features" in line


def test_an_empty_statistics_file_name_is_refused(capsys, files):
    refused(
        capsys, "simulate", "gym:Pendulum-v1", "--policy", str(files["td3"]), "-p", "P=? [F<=10 false]", "--runs", "5",
        "--vec-normalize", "",
    )  # fmt: skip
