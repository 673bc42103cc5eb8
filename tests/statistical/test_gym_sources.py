"""Gymnasium environments given in Python (an Env, a VectorEnv, a factory): the same episodes as ``gym:ID``, counted
against a plain scalar loop."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rlverify
from rlverify.errors import ModelError, OptionError
from rlverify.policies.adapters import CallablePolicy
from rlverify.resolve import resolve
from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.episodes import episode_seeds

PROP = 'P=? [F<=40 "terminated"]'


def _push(obs: np.ndarray) -> np.ndarray:
    right = np.asarray(obs)[:, 2] > 0
    return np.stack([~right, right], axis=1).astype(float)


POLICY = CallablePolicy(_push, features=[f"obs[{i}]" for i in range(4)], actions=["0", "1"])
OPTIONS = rlverify.StatisticalOptions(method="clopper-pearson", runs=60, simulation=SimulationOptions(seed=11))


def _reference(n: int, seed: int) -> int:
    """Episodes terminated within 40 steps, by a scalar loop (the policy is deterministic)."""
    count = 0
    for s in episode_seeds(seed, np.arange(n)):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=s)
        for _ in range(40):
            obs, _, term, trunc, _ = env.step(int(obs[2] > 0))
            if term or trunc:
                count += bool(term)
                break
    return count


@pytest.mark.parametrize(
    "source",
    [
        lambda: "gym:CartPole-v1",
        lambda: lambda: gym.make("CartPole-v1"),
        lambda: gym.make("CartPole-v1"),
        lambda: gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2),
        lambda: gym.make_vec("CartPole-v1", 3),
    ],
    ids=["id", "factory", "env", "sync-vector-env", "make-vec"],
)
def test_every_source_runs_the_reference_episodes(source):
    res = rlverify.verify_statistical(source(), PROP, POLICY, OPTIONS)
    assert res.successes == _reference(60, 11)
    assert res.runs == 60 and res.undecided == 0


def test_a_wrapped_environment_keeps_its_wrappers():
    space = gym.make("CartPole-v1").observation_space
    flipped = gym.wrappers.TransformObservation(gym.make("CartPole-v1"), lambda o: -o, space)
    res = rlverify.verify_statistical(flipped, 'P=? [F<=40 "terminated"]', POLICY, OPTIONS)
    assert "with its wrappers" in res.model
    plain = rlverify.verify_statistical("gym:CartPole-v1", PROP, POLICY, OPTIONS)
    # the policy sees -obs: it pushes the wrong way and the pole falls sooner than under the plain environment
    assert res.successes == 60 > plain.successes


class _NoSpec(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,))
    action_space = gym.spaces.Discrete(2)


@pytest.mark.parametrize(
    "source,error,message",
    [
        (_NoSpec(), ModelError, "pass a factory"),
        (lambda: 1 / 0, ModelError, "ZeroDivisionError"),
        (lambda: 42, ModelError, "not a gymnasium.Env"),
    ],
    ids=["no-spec", "factory-raises", "not-an-env"],
)
def test_bad_sources_are_refused(source, error, message):
    with pytest.raises(error, match=message):
        rlverify.verify_statistical(source, PROP, POLICY, OPTIONS)


def test_constants_with_a_python_environment_are_refused():
    with pytest.raises(OptionError, match="made as given"):
        rlverify.verify_statistical(lambda: gym.make("CartPole-v1"), PROP, POLICY, OPTIONS, constants="x=1")


NAMED = """
import numpy as np
FEATURES = ["x", "x_dot", "theta", "theta_dot"]
ACTIONS = ["0", "1"]
def push(obs):
    right = np.asarray(obs)[:, 2] > 0
    return np.stack([~right, right], axis=1).astype(float)
"""


def test_the_policy_names_the_observation_and_labels_read_its_names(tmp_path):
    """A policy declaring as many features as the observation has names it (by position): labels read the names."""
    path = tmp_path / "named.py"
    path.write_text(NAMED)
    t = resolve("gym:CartPole-v1", policy=f"{path}:push", labels=["fell=terminated"], property='P=? [F<=40 "fell"]')
    assert t.model.features == ("x", "x_dot", "theta", "theta_dot")
    res = rlverify.verify_statistical(t.model, t.property, t.policy, OPTIONS)
    assert res.successes == _reference(60, 11)
    with pytest.raises(OptionError, match="unknown variable 'theta'"):
        resolve("gym:CartPole-v1", policy=POLICY, labels=["tilted=abs(theta) > 0.1"])


def _off_centre(n: int, seed: int, limit: float) -> int:
    """Episodes whose cart leaves ``|x| <= limit`` within 40 steps, by a scalar loop (the pushing rule)."""
    count = 0
    for s in episode_seeds(seed, np.arange(n)):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=s)
        for _ in range(40):
            obs, _, term, trunc, _ = env.step(int(obs[2] > 0))
            if abs(obs[0]) > limit:
                count += 1
                break
            if term or trunc:
                break
    return count


def test_labels_through_the_front_door():
    # verify_statistical takes --label's conditions for a Python environment (here the cart's position)
    r = rlverify.verify_statistical(
        gym.make("CartPole-v1"), 'P=? [F<=40 "off"]', POLICY, OPTIONS, labels=["off=abs(obs[0]) > 0.05"]
    )
    assert r.runs == 60 and round(r.estimate * 60) == _off_centre(60, 11, 0.05) > 0


def test_gymnasium_options_for_a_resolved_model_are_refused():
    model = rlverify.benchmarks.make("running-example-v1").load_model()
    with pytest.raises(OptionError, match="labels are for a Gymnasium target"):
        rlverify.verify_statistical(model, 'P=? [F<=2 "goal"]', POLICY, OPTIONS, labels=["a=step > 1"])
