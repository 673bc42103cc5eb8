"""Gymnasium environments over explicit MDPs: one episode (:class:`MDPEnv`) or N in lockstep (:class:`VectorMDPEnv`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlverify.errors import EnvError
from rlverify.gym.build import benchmark_dynamics, load_dynamics
from rlverify.gym.dynamics import MDPDynamics


class MDPEnv(gymnasium.Env):
    """A PRISM/JANI MDP as a Gymnasium environment.

    Observations are the state's variable values in ``dynamics.features`` order (a policy's
    feature order), shape ``(d,)``; actions are ``Discrete(|A|)``, action ``i`` being the PRISM
    action label ``action_names[i]``. Rewards come from the named reward model (state reward plus
    state-action reward of the state left). Episodes end (``terminated``) in terminal states, in
    dead ends (no action available), or on an unavailable action with ``unavailable='stall'``
    (``info['stalled']``); ``truncated`` after ``max_episode_steps``. Initial states: one of the
    model's initial states, uniformly. All randomness comes from ``self.np_random`` (seeded by
    ``reset(seed=...)``).

    ``info`` has ``state`` (index in ``dynamics.model``), ``action_mask`` ``(|A|,)`` bool and
    ``stalled``; :meth:`action_masks` serves maskable agents (``unavailable='renormalize'``).
    """

    metadata = {"render_modes": []}

    def __init__(self, dynamics: MDPDynamics, *, max_episode_steps: int | None = None) -> None:
        if max_episode_steps is not None and max_episode_steps <= 0:
            raise EnvError(f"max_episode_steps must be positive, got {max_episode_steps}")
        self.dynamics = dynamics
        self.max_episode_steps = max_episode_steps
        self.action_names = dynamics.actions
        self.observation_space = spaces.Box(dynamics.obs_low, dynamics.obs_high, dtype=dynamics.observations.dtype)
        self.action_space = spaces.Discrete(len(dynamics.actions))
        self._state: int | None = None
        self._steps = 0
        self._over = True

    @classmethod
    def from_model(cls, model: Any, *, max_episode_steps: int | None = None, **kwargs: Any) -> MDPEnv:
        """Build from a PRISM/JANI path or loaded model; ``kwargs`` as :func:`~rlverify.gym.build.load_dynamics`."""
        return cls(load_dynamics(model, **kwargs), max_episode_steps=max_episode_steps)

    @classmethod
    def from_benchmark(cls, benchmark_id: str, params: Mapping[str, Any] | None = None, **overrides: Any) -> MDPEnv:
        """A registered PRISM benchmark with its training defaults (reward, terminal, episode length)."""
        dyn, defaults = benchmark_dynamics(benchmark_id, params, **overrides)
        return cls(dyn, max_episode_steps=defaults.max_episode_steps)

    @property
    def state(self) -> int | None:
        """Index of the current state in ``dynamics.model`` (None before the first reset)."""
        return self._state

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        init = self.dynamics.model.initial_states
        init = init[~self.dynamics.terminal[init]]
        self._state = int(init[self.np_random.integers(len(init))]) if len(init) > 1 else int(init[0])
        self._steps = 0
        self._over = False
        return self._obs(), self._info(stalled=False)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._state is None or self._over:
            raise EnvError("the episode is over (or was never started): call reset()")
        a = int(action)
        nxt, reward, stalled = self.dynamics.step(np.array([self._state]), np.array([a]), self.np_random)
        self._state = int(nxt[0])
        self._steps += 1
        terminated = bool(stalled[0] or self.dynamics.terminal[self._state])
        truncated = bool(not terminated and self.max_episode_steps is not None and self._steps >= self.max_episode_steps)
        self._over = terminated or truncated
        return self._obs(), float(reward[0]), terminated, truncated, self._info(stalled=bool(stalled[0]))

    def action_masks(self) -> np.ndarray:
        """``(|A|,)`` bool: the actions available in the current state."""
        if self._state is None:
            raise EnvError("call reset() first")
        return self.dynamics.choice_of[self._state] >= 0

    def _obs(self) -> np.ndarray:
        return self.dynamics.observations[self._state].copy()

    def _info(self, *, stalled: bool) -> dict[str, Any]:
        return {"state": self._state, "action_mask": self.action_masks(), "stalled": stalled}


class VectorMDPEnv(VectorEnv):
    """``num_envs`` copies of an MDP stepped in lockstep with numpy (no per-copy Python loop).

    Same semantics as :class:`MDPEnv` per copy. Autoreset is same-step: a copy whose episode ended
    is reset within the same ``step`` call; its last observation and state are in
    ``infos['final_obs']`` / ``infos['final_state']`` (rows where ``infos['_final_obs']`` is True). ``infos`` also has ``state`` ``(N,)``,
    ``action_mask`` ``(N, |A|)`` and ``stalled`` ``(N,)``. One generator (seeded by
    ``reset(seed=...)``) drives all copies, so a seed fixes every trajectory for given actions.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, dynamics: MDPDynamics, num_envs: int, *, max_episode_steps: int | None = None) -> None:
        if num_envs <= 0:
            raise EnvError(f"num_envs must be positive, got {num_envs}")
        if max_episode_steps is not None and max_episode_steps <= 0:
            raise EnvError(f"max_episode_steps must be positive, got {max_episode_steps}")
        self.dynamics = dynamics
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps
        self.action_names = dynamics.actions
        self.single_observation_space = spaces.Box(dynamics.obs_low, dynamics.obs_high, dtype=dynamics.observations.dtype)
        self.single_action_space = spaces.Discrete(len(dynamics.actions))
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._rng = np.random.default_rng()
        init = dynamics.model.initial_states
        self._init = init[~dynamics.terminal[init]]
        self._states = np.zeros(num_envs, dtype=np.int64)
        self._steps = np.zeros(num_envs, dtype=np.int64)

    @classmethod
    def from_model(cls, model: Any, num_envs: int, *, max_episode_steps: int | None = None, **kwargs: Any) -> VectorMDPEnv:
        """Build from a PRISM/JANI path or loaded model; ``kwargs`` as :func:`~rlverify.gym.build.load_dynamics`."""
        return cls(load_dynamics(model, **kwargs), num_envs, max_episode_steps=max_episode_steps)

    @classmethod
    def from_benchmark(cls, benchmark_id: str, num_envs: int, params: Mapping[str, Any] | None = None,
                       **overrides: Any) -> VectorMDPEnv:
        """A registered PRISM benchmark with its training defaults."""
        dyn, defaults = benchmark_dynamics(benchmark_id, params, **overrides)
        return cls(dyn, num_envs, max_episode_steps=defaults.max_episode_steps)

    @property
    def states(self) -> np.ndarray:
        """``(N,)`` int64 current state indices (a copy)."""
        return self._states.copy()

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(seed, (list, tuple)):
            seed = int(seed[0]) if seed and seed[0] is not None else None
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._states = self._initial(self.num_envs)
        self._steps[:] = 0
        return self.dynamics.observations[self._states], self._infos(np.zeros(self.num_envs, dtype=bool))

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        if actions.shape != (self.num_envs,):
            raise EnvError(f"expected {self.num_envs} actions, got shape {np.shape(actions)}")
        nxt, rewards, stalled = self.dynamics.step(self._states, actions, self._rng)
        self._steps += 1
        terminated = stalled | self.dynamics.terminal[nxt]
        truncated = ~terminated & (self._steps >= self.max_episode_steps if self.max_episode_steps is not None else False)
        done = terminated | truncated
        final: dict[str, Any] = {}
        if done.any():
            final = {"final_obs": self.dynamics.observations[nxt], "final_state": nxt.copy(), "_final_obs": done.copy()}
            nxt = nxt.copy()
            nxt[done] = self._initial(int(done.sum()))
            self._steps[done] = 0
        self._states = nxt
        infos = {**self._infos(stalled), **final}
        return self.dynamics.observations[nxt], rewards, terminated, truncated, infos

    def action_masks(self) -> np.ndarray:
        """``(N, |A|)`` bool: the actions available in each copy's current state."""
        return self.dynamics.choice_of[self._states] >= 0

    def _initial(self, n: int) -> np.ndarray:
        if len(self._init) == 1:
            return np.full(n, self._init[0], dtype=np.int64)
        return self._init[self._rng.integers(len(self._init), size=n)].astype(np.int64)

    def _infos(self, stalled: np.ndarray) -> dict[str, Any]:
        return {"state": self._states.copy(), "action_mask": self.action_masks(), "stalled": stalled}
