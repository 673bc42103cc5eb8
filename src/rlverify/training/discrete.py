"""Train PPO policies on registered PRISM benchmarks through the Gymnasium bridge (optional extra ``torch``).

The benchmark's MDP is built by Storm (property-directed for its terminal condition, as the
verifier builds it) and simulated with :class:`~rlverify.gym.VectorMDPEnv`; :class:`DiscreteVecEnv`
adapts it to the :class:`~rlverify.training.ppo.VecEnv` protocol of :func:`~rlverify.training.ppo.train_ppo`.
The result is a self-describing ONNX file the verifier loads as it is: features = the model's
variables (Storm's valuation order), actions = the PRISM action labels, output = logits, and the
training metadata (algorithm, seed, steps, hyper-parameters, final mean return and success rate,
benchmark id and parameters, rlverify version).

Semantics of training episodes (per benchmark: :data:`SETUPS`): the reward is the benchmark's
reward model times ``reward_scale`` (the reported returns are in the model's own units); an
episode ends in a terminal state, after ``max_episode_steps`` (treated as a termination by the
PPO, see its docstring), or on an unavailable action (the verifier's ``stall``: reward 0, episode
over). Same seed, same weights (single-threaded torch on CPU).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.arrays import distinct
from rlverify.choices import values
from rlverify.errors import TrainingError, require
from rlverify.gym.dynamics import MDPDynamics
from rlverify.policies.adapters import CallablePolicy
from rlverify.policies.base import BasePolicy
from rlverify.policies.formats import softmax
from rlverify.policies.mlp import MLP, save_mlp_onnx
from rlverify.training.ppo import PPOConfig, check_seed, parse_hidden, train_ppo

log = logging.getLogger(__name__)


class Success(StrEnum):
    """What counts as a successful episode: ending in a terminal state (``reach``), or not ending in one before the
    step limit (``survive``)."""

    REACH = "reach"
    SURVIVE = "survive"


SUCCESS_KINDS = values(Success)


@dataclass(frozen=True)
class DiscreteSetup:
    """How a PRISM benchmark is trained with PPO.

    Attributes:
        hidden: hidden layer widths (ReLU), e.g. ``(64, 64)``.
        total_steps: default environment steps (summed over the parallel environments).
        n_envs: parallel environments.
        reward_scale: factor on the model's rewards seen by PPO (``-1`` turns a cost into a reward).
        success: what counts as a successful episode: ``reach`` (ended in a terminal state,
            optionally with ``success_variable`` non-zero there) or ``survive`` (reached the time
            limit without entering a terminal state).
        success_variable: model variable that must be non-zero in the final state for ``reach``.
        config: PPO hyper-parameters.
        policy_file: file name of the shipped reference policy (``benchmarks/data/policies``).
        params: benchmark parameters of the reference policy.
    """

    hidden: tuple[int, ...] = (64, 64)
    total_steps: int = 200_000
    n_envs: int = 64
    reward_scale: float = 1.0
    success: str = "reach"
    success_variable: str | None = None
    config: PPOConfig = field(default_factory=PPOConfig)
    policy_file: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


#: Per-benchmark training setups (network sizes as in Table 1 of Gross & Spieker 2024).
SETUPS: dict[str, DiscreteSetup] = {
    "freeway-v1": DiscreteSetup(
        hidden=(64, 64),
        total_steps=1_000_000,
        success="reach",
        success_variable="won",
        config=PPOConfig(lr=5e-4, ent_coef=0.01),
        policy_file="freeway_ppo.onnx",
    ),
    "avoid-v1": DiscreteSetup(
        hidden=(64, 64),
        total_steps=1_000_000,
        reward_scale=0.01,
        success="survive",
        config=PPOConfig(lr=5e-4, ent_coef=0.01),
        policy_file="avoid_4x4_ppo.onnx",
        params={"xMax": 4, "yMax": 4, "slickness": 0.1},
    ),
    "crazy-climber-v1": DiscreteSetup(
        hidden=(1024, 1024),
        total_steps=250_000,
        n_envs=32,
        reward_scale=0.1,
        success="survive",
        config=PPOConfig(lr=2e-4, epochs=3, ent_coef=0.01),
        policy_file="crazy_climber_ppo.onnx",
    ),
    # reward model "steps" counts actions: minimise it (reach the goal fast)
    "running-example-v1": DiscreteSetup(
        hidden=(16, 16),
        total_steps=20_000,
        n_envs=16,
        reward_scale=-1.0,
        success="reach",
        config=PPOConfig(n_steps=64, minibatch=256),
    ),
}


@dataclass(frozen=True)
class TrainingReport:
    """What a training run produced.

    Attributes:
        benchmark: registry id; params: its parameters (defaults filled in).
        path: the ONNX file written (None if not saved).
        mlp: the trained actor (logits over raw observations).
        features, actions: the policy's feature order and action labels.
        seed, steps: training seed and environment steps actually taken (whole PPO rollouts of
            ``n_envs * n_steps``, so at least the steps asked for).
        hidden: hidden layer widths.
        final_mean_return: mean undiscounted return (model's reward units) of the episodes that
            ended in the last 10 % of training.
        final_success_rate: fraction of those episodes that were successful (see :class:`DiscreteSetup`).
        final_episodes: how many episodes those figures average.
        curve: per PPO update ``(steps, mean return, success rate)`` of the episodes finished in it.
        seconds: wall time of training.
        metadata: the training metadata stored in the file.
    """

    benchmark: str
    params: Mapping[str, Any]
    path: Path | None
    mlp: MLP = field(repr=False)
    features: tuple[str, ...]
    actions: tuple[str, ...]
    seed: int
    steps: int
    hidden: tuple[int, ...]
    final_mean_return: float
    final_success_rate: float
    final_episodes: int
    curve: tuple[tuple[int, float, float], ...] = field(repr=False)
    seconds: float
    metadata: Mapping[str, Any] = field(repr=False)


class DiscreteVecEnv:
    """A :class:`~rlverify.gym.VectorMDPEnv` in the :class:`~rlverify.training.ppo.VecEnv` protocol.

    Records every finished episode as ``(global step, return, success)`` (return in the model's
    reward units, before ``reward_scale``) for the training curve.
    """

    def __init__(
        self,
        dynamics: MDPDynamics,
        n_envs: int,
        *,
        max_episode_steps: int | None,
        reward_scale: float = 1.0,
        success: str = "reach",
        success_variable: str | None = None,
    ) -> None:
        from rlverify.gym.env import VectorMDPEnv

        if success not in SUCCESS_KINDS:
            raise TrainingError(f"success: expected one of {', '.join(SUCCESS_KINDS)}, got '{success}'")
        self.venv = VectorMDPEnv(dynamics, n_envs, max_episode_steps=max_episode_steps)
        self.dynamics = dynamics
        self.n_envs = n_envs
        self.obs_dim = len(dynamics.features)
        self.n_actions = len(dynamics.actions)
        self.reward_scale = float(reward_scale)
        self.success = Success(success)
        self._success_col = None
        if success_variable is not None:
            if success_variable not in dynamics.model.variables:
                raise TrainingError(
                    f"success_variable '{success_variable}' is not a model variable "
                    f"(variables: {', '.join(dynamics.model.variables)})"
                )
            self._success_col = dynamics.model.variables.index(success_variable)
        self.steps = 0
        self.episodes: list[tuple[int, float, bool]] = []
        self._ret = np.zeros(n_envs)

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        """Start all copies; the environment's generator is seeded from ``rng`` (reproducible)."""
        obs, _ = self.venv.reset(seed=int(rng.integers(2**63 - 1)))
        self._ret[:] = 0.0
        return obs

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One lockstep step; finished copies are reset (``obs`` is then the next episode's first)."""
        obs, rew, terminated, truncated, infos = self.venv.step(actions)
        self.steps += self.n_envs
        self._ret += rew
        done = terminated | truncated
        if done.any():
            idx = np.flatnonzero(done)
            ok = self._successful(infos["final_state"][idx], terminated[idx], infos["stalled"][idx])
            for i, s in zip(idx, ok, strict=True):
                self.episodes.append((self.steps, float(self._ret[i]), bool(s)))
            self._ret[done] = 0.0
        return obs, rew * self.reward_scale, done, infos

    def _successful(self, final: np.ndarray, terminated: np.ndarray, stalled: np.ndarray) -> np.ndarray:
        if self.success is Success.SURVIVE:
            return ~terminated
        ok = terminated & ~stalled
        if self._success_col is not None:
            ok &= self.dynamics.model.valuations[final, self._success_col] != 0
        return ok


def require_torch() -> None:
    """Raise :class:`DependencyNotInstalled` naming the extra when PyTorch is missing."""
    require("torch", "torch", purpose="training")


def setup_for(benchmark_id: str) -> DiscreteSetup:
    """The training setup of ``benchmark_id`` (a generic 2x64 setup for PRISM benchmarks without one)."""
    return SETUPS.get(benchmark_id, DiscreteSetup())


def training_parameters(benchmark_id: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The benchmark parameters :func:`train_discrete` trains with: ``params`` (None: the setup's reference
    parameters), completed with the registry's defaults."""
    from rlverify.benchmarks.registry import spec

    setup = setup_for(benchmark_id)
    return dict(spec(benchmark_id).resolve(dict(setup.params) if params is None else dict(params)))


def train_discrete(
    benchmark_id: str,
    *,
    params: Mapping[str, Any] | None = None,
    steps: int | None = None,
    seed: int = 0,
    hidden: tuple[int, ...] | str | None = None,
    out: str | Path | None = None,
    config: PPOConfig | None = None,
    n_envs: int | None = None,
    force: bool = False,
    on_update: Callable[[int, BasePolicy], bool] | None = None,
) -> TrainingReport:
    """Train a PPO policy on a registered PRISM benchmark and save it as a verifier-ready ONNX file.

    Args:
        benchmark_id: registry id of a ``prism`` benchmark, e.g. ``"avoid-v1"``.
        params: benchmark parameters (default: the setup's reference parameters, then the registry's).
        steps: environment steps (default: the benchmark's setup in :data:`SETUPS`).
        seed: seeds the environment, the PPO sampling and the network initialisation.
        hidden: hidden layer widths, a tuple or ``"64,64"`` (default: the setup's).
        out: ONNX path to write (None: do not write); written atomically, checked before training.
        force: replace an existing ``out`` file (else :class:`~rlverify.files.FileWriteError`).
        config: PPO hyper-parameters (default: the setup's).
        n_envs: parallel environments (default: the setup's).
        on_update: ``on_update(steps, policy)`` after each PPO update, the policy the actor as it is then, as it
            would be saved (logits over the model's features, its action labels); False stops training (see
            :func:`~rlverify.training.ppo.train_ppo`). :func:`verify_every` makes one that verifies it.

    Returns:
        A :class:`TrainingReport` (final figures from the last 10 % of training episodes).

    Raises:
        DependencyNotInstalled: PyTorch is missing (``pip install 'rlverify[torch]'``).
        BenchmarkError: unknown benchmark or parameter out of range.
        TrainingError: not a PRISM benchmark, bad ``steps``/``hidden``/``n_envs``.
    """
    seed = check_seed(seed)
    require_torch()
    from rlverify import __version__
    from rlverify.benchmarks.registry import spec
    from rlverify.files import check_target

    if out is not None:
        check_target(out, force=force)  # before the training, not after it
    from rlverify.gym.build import benchmark_dynamics

    s = spec(benchmark_id)
    if s.kind != "prism":
        raise TrainingError(f"{benchmark_id} is a '{s.kind}' benchmark; train_discrete trains PRISM benchmarks")
    setup = setup_for(benchmark_id)
    _check_counts(steps, n_envs)
    hidden_t = parse_hidden(hidden) if hidden is not None else setup.hidden
    cfg = config or setup.config
    n = int(n_envs or setup.n_envs)
    total = int(steps or setup.total_steps)
    resolved = training_parameters(benchmark_id, params)

    dyn, defaults = benchmark_dynamics(benchmark_id, resolved)
    env = DiscreteVecEnv(
        dyn,
        n,
        max_episode_steps=defaults.max_episode_steps,
        reward_scale=setup.reward_scale,
        success=setup.success,
        success_variable=setup.success_variable,
    )
    scale = 1.0 / np.maximum(np.maximum(np.abs(dyn.obs_low), np.abs(dyn.obs_high)), 1.0).astype(np.float64)
    log.info("training PPO on %s %s: %d steps, hidden %s, %d envs, seed %d", benchmark_id, resolved, total, hidden_t, n, seed)
    t0 = time.perf_counter()
    actor_update = _actor_update(on_update, dyn)
    mlp, stats = train_ppo(
        env, hidden=hidden_t, total_steps=total, seed=seed, obs_scale=scale, config=cfg, on_update=actor_update
    )
    seconds = time.perf_counter() - t0

    taken = int(stats["steps"])
    tail, final_return, final_success = _final_figures(env.episodes, taken)
    curve = _curve(env.episodes, cfg.n_steps * n)
    metadata = {
        "algorithm": "PPO (rlverify.training.ppo: clipped surrogate, GAE)",
        "benchmark": benchmark_id,
        "params": resolved,
        "seed": int(seed),
        "steps": taken,
        "hidden": list(hidden_t),
        "hyperparameters": {
            **asdict(cfg),
            "n_envs": n,
            "reward_scale": setup.reward_scale,
            "reward_model": dyn.reward_model,
            "terminal": dyn.terminal_description,
            "max_episode_steps": defaults.max_episode_steps,
            "obs_scale": [round(float(x), 6) for x in scale],
            "unavailable_actions": dyn.unavailable,
        },
        "final_mean_return": _finite(final_return),
        "final_success_rate": _finite(final_success),
        "final_episodes": len(tail),
        "success": setup.success + (f" ({setup.success_variable} != 0)" if setup.success_variable else ""),
        "episodes": len(env.episodes),
        **({"stopped_early": True} if stats.get("stopped") else {}),
        "seconds": round(seconds, 1),
        "rlverify": __version__,
    }
    path = _save(out, mlp, dyn, metadata, force)
    return TrainingReport(
        benchmark=benchmark_id,
        params=resolved,
        path=path,
        mlp=mlp,
        features=tuple(dyn.features),
        actions=tuple(dyn.actions),
        seed=int(seed),
        steps=taken,
        hidden=hidden_t,
        final_mean_return=final_return,
        final_success_rate=final_success,
        final_episodes=len(tail),
        curve=curve,
        seconds=seconds,
        metadata=metadata,
    )


def _save(out: str | Path | None, mlp: MLP, dyn: MDPDynamics, metadata: dict[str, Any], force: bool) -> Path | None:
    """Save the actor as an ONNX file over the model's names, with the training metadata (None: ``out`` is None)."""
    if out is None:
        return None
    save_mlp_onnx(
        out, mlp, features=list(dyn.features), actions=list(dyn.actions), output="logits", training=metadata, force=force
    )
    path = Path(out)
    log.info("saved %s", path)
    return path


def _check_counts(steps: int | None, n_envs: int | None) -> None:
    if steps is not None and int(steps) <= 0:
        raise TrainingError(f"steps: expected a positive number of environment steps, got {steps}")
    if n_envs is not None and int(n_envs) <= 0:
        raise TrainingError(f"n_envs: expected a positive number, got {n_envs}")


def _actor_update(on_update: Callable[[int, BasePolicy], bool] | None, dyn: MDPDynamics) -> Callable[[int, MLP], bool] | None:
    """``train_ppo``'s ``on_update``: the user's, given the actor as a policy over the model's names (None: none)."""
    if on_update is None:
        return None
    user_update = on_update

    def actor_update(steps: int, actor: MLP) -> bool:
        name = f"PPO actor at step {steps:,}"
        return user_update(steps, CallablePolicy(actor, list(dyn.features), list(dyn.actions), output="logits", name=name))

    return actor_update


def _final_figures(episodes: list[tuple[int, float, bool]], taken: int) -> tuple[list[tuple[float, bool]], float, float]:
    """The episodes of the last 10 % of ``taken`` steps (else the last 100), their mean return and success rate
    (NaN: none)."""
    tail = [(r, ok) for t, r, ok in episodes if t > 0.9 * taken] or [(r, ok) for _, r, ok in episodes[-100:]]
    final_return = float(np.mean([r for r, _ in tail])) if tail else float("nan")
    final_success = float(np.mean([ok for _, ok in tail])) if tail else float("nan")
    return tail, final_return, final_success


def _finite(x: float) -> float | None:
    """``x`` rounded for the metadata, None when no episode finished (NaN is not JSON)."""
    return round(float(x), 4) if np.isfinite(x) else None


def _curve(episodes: list[tuple[int, float, bool]], per_update: int) -> tuple[tuple[int, float, float], ...]:
    """``(steps, mean return, success rate)`` per update window, for windows where episodes ended."""
    if not episodes:
        return ()
    t = np.array([e[0] for e in episodes])
    r = np.array([e[1] for e in episodes])
    ok = np.array([e[2] for e in episodes], dtype=float)
    window = (t - 1) // per_update
    out = []
    for w in distinct(window):
        sel = window == w
        out.append((int((w + 1) * per_update), float(r[sel].mean()), float(ok[sel].mean())))
    return tuple(out)


def evaluate_returns(
    benchmark_id: str,
    mlp: MLP | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    episodes: int = 1000,
    seed: int = 0,
    greedy: bool = False,
) -> tuple[float, float]:
    """Mean return and success rate of a policy by simulation (a statistical estimate, not a guarantee).

    Args:
        benchmark_id: a PRISM benchmark with a training setup (episodes as in training).
        mlp: actor giving logits over raw observations; None = the uniform random policy.
        params: benchmark parameters (default as :func:`train_discrete`).
        episodes: number of episodes averaged (run in lockstep).
        seed: seeds the environment and the action sampling.
        greedy: take the argmax action instead of sampling.

    Returns:
        ``(mean return in the model's reward units, success rate)``.
    """
    from rlverify.benchmarks.registry import spec
    from rlverify.gym.build import benchmark_dynamics

    s = spec(benchmark_id)
    setup = setup_for(benchmark_id)
    resolved = s.resolve(dict(setup.params) if params is None else dict(params))
    dyn, defaults = benchmark_dynamics(benchmark_id, resolved)
    if defaults.max_episode_steps is None:
        raise TrainingError(f"{benchmark_id}: evaluation needs a finite max_episode_steps")
    env = DiscreteVecEnv(
        dyn,
        episodes,
        max_episode_steps=defaults.max_episode_steps,
        success=setup.success,
        success_variable=setup.success_variable,
    )
    rng = np.random.default_rng(seed)
    obs = env.reset(rng)
    alive = np.ones(episodes, dtype=bool)
    returns = np.zeros(episodes)
    success = np.zeros(episodes, dtype=bool)
    for _ in range(defaults.max_episode_steps):
        if mlp is None:
            act = rng.integers(env.n_actions, size=episodes)
        else:
            p = softmax(mlp(obs))
            act = p.argmax(axis=1) if greedy else (rng.random(episodes)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
            act = np.minimum(act, env.n_actions - 1)
        before = len(env.episodes)
        obs, rew, done, _ = env.step(act)
        returns[alive] += rew[alive]
        # episodes of still-alive copies that ended now (each copy's first episode only)
        ended = np.flatnonzero(done & alive)
        if len(ended):
            finished = env.episodes[before:]
            flags = dict(zip(np.flatnonzero(done), (ok for _, _, ok in finished), strict=True))
            for i in ended:
                success[i] = flags[i]
            alive[ended] = False
        if not alive.any():
            break
    return float(returns.mean()), float(success.mean())


def verify_every(
    verifier: Any, every: int, *, report: Callable[[Any], None] | None = None
) -> Callable[[int, BasePolicy], bool]:
    """An ``on_update`` for :func:`train_discrete` that verifies the actor with ``verifier`` (a
    :class:`~rlverify.training.verifying.TrainingVerifier`) the first time training reaches each multiple of ``every``
    environment steps, passes each :class:`~rlverify.training.verifying.TrainingCheck` to ``report``, and stops
    training when the verifier says so (its ``stop_when``)."""
    from rlverify.training.verifying import EveryNSteps

    schedule = EveryNSteps(every, "--verify-every")

    def on_update(steps: int, policy: BasePolicy) -> bool:
        if not schedule.due(steps):
            return True
        check = verifier.check(policy, steps)
        if report is not None:
            report(check)
        return not verifier.should_stop(check)

    return on_update
