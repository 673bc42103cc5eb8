"""Training environments and reference-policy training for the continuous benchmarks."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.models.continuous.base import ContinuousSystem
from rlverify.policies.mlp import MLP, save_mlp_onnx
from rlverify.training.ppo import PPOConfig, check_seed, parse_hidden, train_ppo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingSetup:
    """How a continuous benchmark's reference policy is trained.

    Attributes:
        hidden: hidden layer widths.
        total_steps: environment steps.
        episode_steps: time limit of a training episode.
        init_lo, init_hi: box of training start states (wider than the verified region).
        crash_reward: reward when an unsafe state is entered (the episode then ends).
        obs_scale: per-feature input scaling used during training (folded into the network).
        policy_file: file name under ``benchmarks/data/policies``.
    """

    hidden: tuple[int, ...]
    total_steps: int
    episode_steps: int
    init_lo: tuple[float, ...]
    init_hi: tuple[float, ...]
    crash_reward: float
    obs_scale: tuple[float, ...]
    policy_file: str


#: Reference setups. Sizes as in the paper's text (2x32 bouncing ball, 2x64 ACC and pendulum).
SETUPS: dict[str, TrainingSetup] = {
    "bouncing-ball-v1": TrainingSetup(
        (32, 32), 2_000_000, 200, (3.0, -3.0), (10.0, 3.0), -20.0, (0.2, 0.1), "bouncing_ball_ppo.onnx"
    ),
    "acc-v1": TrainingSetup((64, 64), 1_000_000, 100, (3.0, 26.0), (10.0, 32.0), -20.0, (0.5, 0.1), "acc_ppo.onnx"),
    "pendulum-v1": TrainingSetup((64, 64), 1_000_000, 100, (-0.1, -0.1), (0.1, 0.1), 0.0, (5.0, 1.0), "pendulum_ppo.onnx"),
}


class ContinuousEnv:
    """Vectorised training environment around a :class:`ContinuousSystem` (auto-reset)."""

    def __init__(self, system: ContinuousSystem, setup: TrainingSetup, n_envs: int = 64) -> None:
        self.system = system
        self.setup = setup
        self.n_envs = n_envs
        self.obs_dim = len(system.features)
        self.n_actions = len(system.actions)
        self._rng: np.random.Generator | None = None
        self._x = np.zeros((n_envs, system.n))
        self._t = np.zeros(n_envs, dtype=np.int64)

    def _sample(self, count: int) -> np.ndarray:
        assert self._rng is not None
        lo, hi = np.array(self.setup.init_lo), np.array(self.setup.init_hi)
        return lo + (hi - lo) * self._rng.random((count, self.system.n))

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        self._rng = rng
        self._x = self._sample(self.n_envs)
        self._t[:] = 0
        return self.system.observe(self._x)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        nx = self.system.step(self._x, actions)
        reward = self.system.reward(self._x, actions, nx)
        crash = self.system.is_unsafe(nx)
        reward = np.where(crash, self.setup.crash_reward, reward)
        self._t += 1
        done = crash | (self._t >= self.setup.episode_steps)
        if done.any():
            nx[done] = self._sample(int(done.sum()))
            self._t[done] = 0
        self._x = nx
        return self.system.observe(nx), reward, done, {"crash": crash}


def train_continuous(
    benchmark_id: str,
    *,
    seed: int = 0,
    total_steps: int | None = None,
    out: str | Path | None = None,
    hidden: tuple[int, ...] | None = None,
    config: PPOConfig | None = None,
    force: bool = False,
) -> tuple[Path, MLP, dict[str, Any]]:
    """Train the reference PPO policy of a continuous benchmark and save it as a self-describing ONNX file.

    Args:
        benchmark_id: ``bouncing-ball-v1``, ``acc-v1`` or ``pendulum-v1``.
        seed: training seed (same seed, same network).
        total_steps: environment steps (default: the benchmark's setup).
        out: output path (default: the packaged policy file, which is replaced); written atomically.
        hidden: hidden widths (default: the setup's).
        config: the PPO settings (default: ``PPOConfig()``).
        force: replace an existing ``out`` file (else :class:`~rlverify.files.FileWriteError`, before training).

    Returns:
        ``(path, mlp, stats)``.
    """
    from rlverify.benchmarks.registry import BenchmarkError, make

    if benchmark_id not in SETUPS:
        from rlverify.errors import did_you_mean

        raise BenchmarkError(
            f"no training setup for '{benchmark_id}'{did_you_mean(benchmark_id, SETUPS)}; "
            f"continuous benchmarks: {', '.join(SETUPS)}"
        )
    setup = SETUPS[benchmark_id]
    from rlverify.files import check_target

    seed = check_seed(seed)
    config = config if config is not None else PPOConfig()
    if hidden is not None:
        setup = TrainingSetup(**{**setup.__dict__, "hidden": parse_hidden(hidden)})
    if out is not None:
        check_target(out, force=force)  # before the training, not after it
    system = make(benchmark_id).model()
    env = ContinuousEnv(system, setup)
    steps = int(total_steps or setup.total_steps)
    mlp, stats = train_ppo(
        env, hidden=setup.hidden, total_steps=steps, seed=seed, obs_scale=np.array(setup.obs_scale), config=config
    )
    packaged = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "policies" / setup.policy_file
    path = Path(out) if out is not None else packaged
    training = {
        "algorithm": "PPO (rlverify.training.ppo)",
        "seed": seed,
        "steps": stats["steps"],
        "final_mean_return": round(stats["final_mean_return"], 3),
        "benchmark": benchmark_id,
        "hidden": list(setup.hidden),
        "episode_steps": setup.episode_steps,
        "lr": config.lr,
        "init_box": [list(setup.init_lo), list(setup.init_hi)],
        "crash_reward": setup.crash_reward,
        "seconds": stats["seconds"],
    }
    save_mlp_onnx(
        path,
        mlp,
        features=list(system.features),
        actions=list(system.actions),
        output="logits",
        training=training,
        force=force or out is None,
    )
    log.info("saved %s (%s)", path, training)
    return path, mlp, stats
