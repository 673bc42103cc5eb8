"""Gymnasium environments over explicit MDPs: one episode (:class:`MDPEnv`) or N in lockstep (:class:`VectorMDPEnv`).

Both can add a reward for *entering* a labelled state (``reward="label:goal=1"`` or ``reward_label="goal"``)
without editing the model, warn when every reward is 0, and tell a policy file what it was trained on
(:meth:`MDPEnv.policy_metadata`, :func:`save_policy_metadata`: the ``model.zip.json`` sidecar that
``rlverify verify --policy model.zip`` reads).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlverify.errors import EnvError
from rlverify.gym.build import benchmark_dynamics, load_dynamics, reward_spec
from rlverify.gym.dynamics import MDPDynamics, label_key

if TYPE_CHECKING:
    from rlverify.policies.shielded import Shield


class RewardWarning(UserWarning):
    """The environment's rewards cannot teach anything (no reward model selected, or all rewards 0)."""


def entry_rewards(dynamics: MDPDynamics, labels: Mapping[str, float] | None) -> np.ndarray:
    """``(S,)`` float64 reward earned by a step that ends in each state: the sum of ``labels[L]`` over its
    labels ``L`` (a terminal label pays once; a label the agent stays in pays on every step that stays).

    Warns (:class:`RewardWarning`) when the agent would earn nothing at all: no reward model and no
    label rewards, or only zeros.

    Raises:
        EnvError: an unknown label (the close ones named).
    """
    entry = np.zeros(dynamics.num_states)
    for name, value in (labels or {}).items():
        entry += float(value) * dynamics.model.labels[label_key(dynamics.model, name)]
    if dynamics.reward_model is None and not labels:
        warnings.warn(_no_reward_model(dynamics), RewardWarning, stacklevel=3)
    elif not np.any(dynamics.rewards) and not np.any(entry):
        warnings.warn(
            f"every reward is 0 (reward model {dynamics.reward_model!r}"
            f"{', label rewards ' + str(dict(labels)) if labels else ''}): an agent learns nothing",
            RewardWarning,
            stacklevel=3,
        )
    return entry


def _no_reward_model(dynamics: MDPDynamics) -> str:
    """The warning for an environment without a reward model or label rewards, naming what the model has."""
    model = dynamics.model
    rewards = [repr(n) for n in dict.fromkeys(list(model.state_rewards) + list(model.choice_rewards))]
    labelled = sorted(model.label_aliases.get(k, k) for k in model.labels)
    return (
        f"no reward model selected: every reward is 0, an agent learns nothing; pass reward=NAME "
        f"(the model has {', '.join(rewards) or 'none'}) or reward='label:NAME=VALUE' to reward entering "
        f"a labelled state (labels: {', '.join(labelled) or 'none'})"
    )


def save_policy_metadata(policy_path: str | Path, metadata: Mapping[str, Any], *, force: bool = False) -> Path:
    """Write ``metadata`` (see :meth:`MDPEnv.policy_metadata`) as the sidecar ``<policy_path>.json``.

    ``rlverify verify --policy model.zip`` (or ``module.pt``) reads the sidecar for the policy's
    feature and action names, its output kind, and where it was trained (a verification with other
    parameters then warns). Returns the sidecar's path.

    Raises:
        InputFileError: the sidecar exists and ``force`` is False (a :class:`~rlverify.files.FileWriteError`, as
            for a sidecar that cannot be written).
        EnvError: ``metadata`` lacks ``features`` or ``actions``.
    """
    side = Path(str(policy_path) + ".json")
    missing = [k for k in ("features", "actions") if not metadata.get(k)]
    if missing:
        raise EnvError(f"policy metadata needs {' and '.join(missing)}")
    from rlverify.files import write_text

    return write_text(side, json.dumps(dict(metadata), indent=2, default=str) + "\n", force=force)


def _source(model: Any, constants: Any = None) -> dict[str, Any]:
    """Where a model comes from, as a policy sidecar records it (``benchmark``, ``params``)."""
    if getattr(model, "env_id", ""):  # rlverify.models.from_gymnasium
        return {"benchmark": f"gym:{model.env_id}", "params": dict(model.env_kwargs)}
    from rlverify.models.constants import parse_constants

    path = getattr(model, "path", model)
    constants = constants or getattr(model, "constants", None)
    return {"benchmark": None, "model": str(path), "params": parse_constants(constants) if constants else {}}


def _model_kwargs(model: Any, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float] | None]:
    """``load_dynamics`` keyword arguments with the reward spec split off (and a gym model's features)."""
    kwargs = dict(kwargs)
    reward, labels = reward_spec(kwargs.pop("reward", None), kwargs.pop("reward_label", None))
    interface = getattr(model, "policy_interface", None)
    if reward is None and labels is None and interface:
        from rlverify.models.gymnasium import REWARD_MODEL

        reward = REWARD_MODEL  # the Gymnasium environment's own reward
    kwargs["reward"] = reward
    if kwargs.get("features") is None and interface:
        kwargs["features"] = interface["features"]  # the observation the Gymnasium agent saw
    if kwargs.get("actions") is None and interface:
        kwargs["actions"] = interface["actions"]  # in Gymnasium's action-index order
    return kwargs, labels


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
    ``stalled``; :meth:`action_masks` serves maskable agents (sb3-contrib MaskablePPO: verify it with
    ``unavailable='renormalize'``, which is the masked policy).

    ``reward_labels`` (``{"goal": 1.0}``) adds a reward on entering a state with that label, on top
    of the reward model (also given as ``reward="label:goal=1"`` to :meth:`from_model`).
    ``source`` (``{"benchmark": ..., "params": ...}``) is where the model comes from, for
    :meth:`policy_metadata`.
    """

    def __init__(
        self,
        dynamics: MDPDynamics,
        *,
        max_episode_steps: int | None = None,
        reward_labels: Mapping[str, float] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> None:
        if max_episode_steps is not None and max_episode_steps <= 0:
            raise EnvError(f"max_episode_steps must be positive, got {max_episode_steps}")
        self.metadata = {"render_modes": []}  # per environment (Gymnasium's class-level dict would be shared)
        self.dynamics = dynamics
        self.reward_labels = dict(reward_labels or {})
        self._entry = entry_rewards(dynamics, self.reward_labels)
        self.source = dict(source or {})
        self.max_episode_steps = max_episode_steps
        self.action_names = dynamics.actions
        self.observation_space = spaces.Box(dynamics.obs_low, dynamics.obs_high, dtype=dynamics.observations.dtype)
        self.action_space = spaces.Discrete(len(dynamics.actions))
        self._state: int | None = None
        self._steps = 0
        self._over = True

    @classmethod
    def from_model(cls, model: Any, *, max_episode_steps: int | None = None, **kwargs: Any) -> MDPEnv:
        """Build from a PRISM/JANI path or loaded model; ``kwargs`` as :func:`~rlverify.gym.build.load_dynamics`,
        where ``reward`` may also be a label reward spec (``"label:goal=1,hole=-1"``, see
        :func:`~rlverify.gym.build.reward_spec`) and ``reward_label="goal"`` is short for ``"label:goal=1"``.

        A model made by :func:`rlverify.models.from_gymnasium` is observed as the Gymnasium agent
        observes it (the state index ``s``) unless ``features`` say otherwise.
        """
        kwargs, labels = _model_kwargs(model, kwargs)
        return cls(
            load_dynamics(model, **kwargs),
            max_episode_steps=max_episode_steps,
            reward_labels=labels,
            source=_source(model, kwargs.get("constants")),
        )

    @classmethod
    def from_benchmark(cls, benchmark_id: str, params: Mapping[str, Any] | None = None, **overrides: Any) -> MDPEnv:
        """A registered PRISM benchmark with its training defaults (reward, terminal, episode length)."""
        from rlverify.benchmarks import spec

        dyn, defaults = benchmark_dynamics(benchmark_id, params, **overrides)
        return cls(
            dyn,
            max_episode_steps=defaults.max_episode_steps,
            source={"benchmark": benchmark_id, "params": dict(spec(benchmark_id).resolve(dict(params or {})))},
        )

    def policy_metadata(self, *, output: str = "logits", **extra: Any) -> dict[str, Any]:
        """What a policy trained on this environment declares: ``features`` (the observation, in order),
        ``actions`` (action ``i`` is ``actions[i]``), ``output`` (``logits`` for SB3 PPO/A2C/MaskablePPO
        networks, ``q-values`` for DQN; an SB3 zip's distribution is read directly), ``benchmark`` and
        ``params`` (where it was trained: a verification with other parameters warns), how the
        environment played the model (``env``), and ``extra`` (algorithm, seed, steps, ...)."""
        return {
            "features": list(self.dynamics.features),
            "actions": list(self.action_names),
            "output": output,
            "benchmark": self.source.get("benchmark"),
            "params": self.source.get("params", {}),
            **({"model": self.source["model"]} if self.source.get("model") else {}),
            "env": {
                "reward_model": self.dynamics.reward_model,
                "reward_labels": self.reward_labels,
                "terminal": self.dynamics.terminal_description,
                "unavailable": self.dynamics.unavailable,
                "max_episode_steps": self.max_episode_steps,
            },
            **extra,
        }

    def save_policy_metadata(
        self, policy_path: str | Path, *, output: str = "logits", force: bool = False, **extra: Any
    ) -> Path:
        """Write :meth:`policy_metadata` as the sidecar ``<policy_path>.json`` (``model.zip.json``); see
        :func:`save_policy_metadata`. Returns its path."""
        return save_policy_metadata(policy_path, self.policy_metadata(output=output, **extra), force=force)

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
        gained = float(reward[0]) + (0.0 if stalled[0] else float(self._entry[self._state]))
        return self._obs(), gained, terminated, truncated, self._info(stalled=bool(stalled[0]))

    def action_masks(self) -> np.ndarray:
        """``(|A|,)`` bool: the actions available in the current state (and kept by the shield, see
        :meth:`use_shield`)."""
        if self._state is None:
            raise EnvError("call reset() first")
        available = self.dynamics.choice_of[self._state] >= 0
        shield = getattr(self, "_shield_masks", None)
        return available if shield is None else available & shield[self._state]

    def use_shield(self, shield: Shield | None) -> MDPEnv:
        """Restrict :meth:`action_masks` to the actions ``shield`` (:class:`~rlverify.policies.shielded.Shield`)
        keeps, so that a maskable agent (sb3-contrib MaskablePPO) trains under it; None removes it. Returns
        ``self``. States the shield does not cover keep every available action."""
        self._shield_masks = None if shield is None else shield_masks(self.dynamics, shield)
        return self

    def _obs(self) -> np.ndarray:
        return self.dynamics.observations[self._state].copy()

    def _info(self, *, stalled: bool) -> dict[str, Any]:
        return {"state": self._state, "action_mask": self.action_masks(), "stalled": stalled}


class VectorMDPEnv(VectorEnv):
    """``num_envs`` copies of an MDP stepped in lockstep with numpy (no per-copy Python loop).

    Same semantics as :class:`MDPEnv` per copy. Autoreset is same-step: a copy whose episode ended
    is reset within the same ``step`` call; its last observation and state are in
    ``infos['final_obs']`` / ``infos['final_state']`` (rows where ``infos['_final_obs']`` is True).
    ``infos`` also has ``state`` ``(N,)``, ``action_mask`` ``(N, |A|)`` and ``stalled`` ``(N,)``. One generator (seeded by
    ``reset(seed=...)``) drives all copies, so a seed fixes every trajectory for given actions.
    """

    def __init__(
        self,
        dynamics: MDPDynamics,
        num_envs: int,
        *,
        max_episode_steps: int | None = None,
        reward_labels: Mapping[str, float] | None = None,
    ) -> None:
        if num_envs <= 0:
            raise EnvError(f"num_envs must be positive, got {num_envs}")
        if max_episode_steps is not None and max_episode_steps <= 0:
            raise EnvError(f"max_episode_steps must be positive, got {max_episode_steps}")
        self.metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}  # per environment
        self.dynamics = dynamics
        self.reward_labels = dict(reward_labels or {})
        self._entry = entry_rewards(dynamics, self.reward_labels)
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
        """Build from a PRISM/JANI path or loaded model; ``kwargs`` as :meth:`MDPEnv.from_model`."""
        kwargs, labels = _model_kwargs(model, kwargs)
        return cls(load_dynamics(model, **kwargs), num_envs, max_episode_steps=max_episode_steps, reward_labels=labels)

    @classmethod
    def from_benchmark(
        cls, benchmark_id: str, num_envs: int, params: Mapping[str, Any] | None = None, **overrides: Any
    ) -> VectorMDPEnv:
        """A registered PRISM benchmark with its training defaults."""
        dyn, defaults = benchmark_dynamics(benchmark_id, params, **overrides)
        return cls(dyn, num_envs, max_episode_steps=defaults.max_episode_steps)

    @property
    def states(self) -> np.ndarray:
        """``(N,)`` int64 current state indices (a copy)."""
        return self._states.copy()

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
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
        rewards = rewards + np.where(stalled, 0.0, self._entry[nxt])
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
        """``(N, |A|)`` bool: the actions available in each copy's current state (and kept by the shield, see
        :meth:`MDPEnv.use_shield`)."""
        available = self.dynamics.choice_of[self._states] >= 0
        shield = getattr(self, "_shield_masks", None)
        return available if shield is None else available & shield[self._states]

    def use_shield(self, shield: Shield | None) -> VectorMDPEnv:
        """As :meth:`MDPEnv.use_shield`, for every copy."""
        self._shield_masks = None if shield is None else shield_masks(self.dynamics, shield)
        return self

    def _initial(self, n: int) -> np.ndarray:
        if len(self._init) == 1:
            return np.full(n, self._init[0], dtype=np.int64)
        return self._init[self._rng.integers(len(self._init), size=n)].astype(np.int64)

    def _infos(self, stalled: np.ndarray) -> dict[str, Any]:
        return {"state": self._states.copy(), "action_mask": self.action_masks(), "stalled": stalled}


def shield_masks(dynamics: MDPDynamics, shield: Shield) -> np.ndarray:
    """``(S, A)`` bool over the environment's states and actions: the actions ``shield`` keeps (every action in a
    state it does not cover; the available ones where it would keep none of them).

    Raises:
        EnvError: a shield over variables the model lacks, or without some of the environment's actions.
    """
    model = dynamics.model
    missing = [v for v in shield.variables if v not in model.variables]
    if missing:
        raise EnvError(
            f"the shield reads variables {missing}, which this environment's model lacks: a shield for another model"
        )
    unknown = [a for a in dynamics.actions if a not in shield.actions]
    if unknown:
        raise EnvError(f"the environment's actions {unknown} are not among the shield's {list(shield.actions)}")
    masks = shield.masks(model.valuations, dynamics.actions, model.variables)
    available = dynamics.choice_of >= 0
    empty = ~(masks & available).any(axis=1) & available.any(axis=1)
    masks[empty] = True
    return masks
