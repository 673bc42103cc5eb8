"""Hostile and plain Gymnasium environments for the episode-simulator tests, registered on import.

A target names them as ``gym:tests.gym_fixtures:ID`` (``--trust-code``: rlverify imports this module, which
registers the ids). Each environment is small and deterministic given its reset seed; the hostile ones fail in one
documented way at a known step, so a test can check that the error names it:

- ``RaiseStep-v0``: ``step`` raises ``RuntimeError("boom at step K")`` on its ``K``-th call (``K = FAIL_AT``).
- ``RaiseReset-v0``: ``reset`` raises ``RuntimeError`` always.
- ``RaiseResetSeedZero-v0``: ``reset(seed=0)`` raises (any other seed works): a refusal of one seed.
- ``NanObs-v0``: the observation returned by the ``K``-th ``step`` has ``obs[1] = nan``.
- ``NanReset-v0``: the observation returned by ``reset`` has ``obs[1] = nan``.
- ``ShapeChange-v0``: the ``K``-th ``step`` returns 3 numbers instead of 2.
- ``NanReward-v0``: the ``K``-th ``step`` returns the reward ``nan``.
- ``Forever-v0``: never terminates, no time limit registered.
- ``Counter-v0``: a plain episode (no failure) of ``LENGTH`` steps with ``info["cost"]`` = the step count, a
  random start position, and the action added to the position; terminates at step ``LENGTH``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: the step call (1-based) at which the hostile environments fail
FAIL_AT = 5
#: the length of a Counter-v0 episode (steps)
LENGTH = 12
MODULE = "tests.gym_fixtures"


class _Base(gym.Env[np.ndarray, int]):
    """Two features (position, step count), two actions; the position starts uniform in [0, 1)."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)
        self.t = 0
        self.x = 0.0

    def _obs(self) -> np.ndarray:
        return np.array([self.x, float(self.t)])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        self.x = float(self.np_random.uniform(0.0, 1.0))
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        self.x += float(action)
        return self._obs(), 1.0, False, False, {}


class RaiseStep(_Base):
    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.t + 1 == FAIL_AT:
            raise RuntimeError(f"boom at step {FAIL_AT}")
        return super().step(action)


class RaiseReset(_Base):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        raise RuntimeError("reset refused")


class RaiseResetSeedZero(_Base):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        if seed == 0:
            raise RuntimeError("seed 0 refused")
        return super().reset(seed=seed, options=options)


class NanObs(_Base):
    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        if self.t == FAIL_AT:
            obs[1] = np.nan
        return obs, reward, terminated, truncated, info


class NanReset(_Base):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        obs, info = super().reset(seed=seed, options=options)
        obs[1] = np.nan
        return obs, info


class ShapeChange(_Base):
    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        if self.t == FAIL_AT:
            obs = np.array([self.x, float(self.t), 0.0])
        return obs, reward, terminated, truncated, info


class NanReward(_Base):
    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, (float("nan") if self.t == FAIL_AT else reward), terminated, truncated, info


class Forever(_Base):
    """Never terminates (and no time limit is registered)."""


class Counter(_Base):
    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, _, _, _, _ = super().step(action)
        return obs, float(action), self.t >= LENGTH, False, {"cost": float(self.t)}


ENVS = {
    "RaiseStep-v0": RaiseStep,
    "RaiseReset-v0": RaiseReset,
    "RaiseResetSeedZero-v0": RaiseResetSeedZero,
    "NanObs-v0": NanObs,
    "NanReset-v0": NanReset,
    "ShapeChange-v0": ShapeChange,
    "NanReward-v0": NanReward,
    "Forever-v0": Forever,
    "Counter-v0": Counter,
}

for _id, _cls in ENVS.items():
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=f"{MODULE}:{_cls.__name__}", disable_env_checker=True)


def target(env_id: str) -> str:
    """The CLI target of one of these environments."""
    return f"gym:{MODULE}:{env_id}"


#: CartPole policies as Python policy files (``FEATURES``, ``ACTIONS``, functions ``(N, 4) -> (N, 2)``): ``balance``
#: (deterministic, survives 500 steps from every start tried), ``lean`` (deterministic, falls within about 25..60
#: steps), ``soft`` (stochastic: a logistic of the angle, so its episodes depend on the policy's random numbers)
CARTPOLE_POLICIES = """
import numpy as np

FEATURES = ["obs[0]", "obs[1]", "obs[2]", "obs[3]"]
ACTIONS = ["0", "1"]


def _onehot(right):
    return np.stack([~right, right], axis=1).astype(float)


def balance(obs):
    return _onehot(obs[:, 2] + 0.3 * obs[:, 3] + 0.01 * obs[:, 0] + 0.1 * obs[:, 1] > 0)


def lean(obs):
    return _onehot(obs[:, 2] > 0)


def soft(obs):
    p = 1.0 / (1.0 + np.exp(-20.0 * obs[:, 2]))
    return np.stack([1.0 - p, p], axis=1)


def three_columns(obs):
    return np.full((len(obs), 3), 1.0 / 3.0)


def nan_probabilities(obs):
    out = np.full((len(obs), 2), 0.5)
    out[:, 0] = np.nan
    return out


def not_summing(obs):
    return np.full((len(obs), 2), 0.7)
"""

#: a policy naming an action CartPole does not have
CARTPOLE_EXTRA_ACTION = """
import numpy as np

FEATURES = ["obs[0]", "obs[1]", "obs[2]", "obs[3]"]
ACTIONS = ["0", "1", "7"]


def policy(obs):
    out = np.zeros((len(obs), 3))
    out[:, 2] = 1.0
    return out
"""

#: the fixtures' environments' policy (two features, two actions): always action 1, and uniform
FIXTURE_POLICIES = """
import numpy as np

FEATURES = ["obs[0]", "obs[1]"]
ACTIONS = ["0", "1"]


def one(obs):
    out = np.zeros((len(obs), 2))
    out[:, 1] = 1.0
    return out


def uniform(obs):
    return np.full((len(obs), 2), 0.5)
"""
