"""Deep Q-learning for Racetrack reference policies (optional extra ``torch``).

As in the DSMC paper: 15 integer features, two hidden ReLU layers of 64, 9 actions, reward +100
at the goal and -50 for a crash (0 otherwise), discount 0.99, episodes from random start cells at
velocity 0. Implementation: double DQN with a Huber loss, Adam, a replay buffer, a hard-updated
target network and many environments in lockstep (the numpy Racetrack env). Rewards are divided
by 100 inside training (same greedy policy, better-conditioned targets); the saved network's
outputs are therefore Q-values / 100. Inputs are scaled for training and the scaling is folded
into the first layer, so the saved network takes the raw integer features.

The saved ONNX file declares its outputs as ``q-values``: every engine reads the policy greedily
(one-hot argmax, ties to the first action), as DQN acts. Training is reproducible from its seed (single-threaded torch,
deterministic algorithms, seeded numpy generator).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.files import check_target
from rlverify.models.racetrack.env import ACCELERATIONS, ACTIONS, AT_GOAL, CRASHED, FEATURES, RacetrackEnv, move
from rlverify.models.racetrack.track import GOAL, WALL, Track
from rlverify.policies.adapters import CallablePolicy
from rlverify.policies.mlp import MLP, save_mlp_onnx
from rlverify.training.ppo import check_seed, import_torch, restores_torch_settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DQNConfig:
    """Hyperparameters (defaults train Barto-small in about two minutes on two cores).

    Attributes:
        steps: environment transitions in total (over all parallel environments).
        n_envs: environments advanced in lockstep.
        hidden: hidden layer widths.
        gamma: discount; goal_reward, crash_reward: as in the DSMC paper.
        lr, batch_size, buffer_size: optimiser and replay settings.
        updates_per_step: gradient steps per lockstep step.
        target_every: gradient steps between target-network copies.
        eps_start, eps_end, eps_fraction: linear epsilon-greedy schedule over this fraction of training.
        max_episode_steps: episodes are truncated (not terminated) after this many steps.
        eval_runs: runs per evaluation of the greedy policy at the end.
        shaping: potential-based reward shaping (Ng, Harada & Russell 1999), in reward units per
            cell of shortest-path distance to the goal: ``r + gamma * Phi(s') - Phi(s)`` with
            ``Phi = -shaping * distance`` (0 at terminal states). It leaves the optimal policies of
            the paper's reward unchanged and speeds learning on large maps; 0 disables it.
    """

    steps: int = 600_000
    n_envs: int = 32
    hidden: tuple[int, ...] = (64, 64)
    gamma: float = 0.99
    goal_reward: float = 100.0
    crash_reward: float = -50.0
    lr: float = 1e-3
    batch_size: int = 256
    buffer_size: int = 200_000
    updates_per_step: int = 1
    target_every: int = 500
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_fraction: float = 0.5
    max_episode_steps: int = 100
    eval_runs: int = 2000
    shaping: float = 0.0


#: Per-benchmark training setups that differ from :class:`DQNConfig`'s defaults (larger maps need
#: longer episodes and more experience before the goal's reward propagates back).
BENCHMARK_CONFIGS: dict[str, DQNConfig] = {
    "racetrack-barto-big-v1": DQNConfig(
        steps=6_000_000,
        max_episode_steps=300,
        buffer_size=500_000,
        shaping=1.0,
        updates_per_step=2,
        lr=5e-4,
        target_every=1000,
        eps_end=0.02,
        eps_fraction=0.3,
    ),
    "racetrack-ring-v1": DQNConfig(
        steps=6_000_000,
        max_episode_steps=300,
        buffer_size=500_000,
        shaping=1.0,
        updates_per_step=2,
        lr=5e-4,
        target_every=1000,
        eps_end=0.02,
        eps_fraction=0.3,
    ),
}


def goal_distances(track: Track) -> np.ndarray:
    """``(rows, cols)`` shortest number of king moves from each cell to a goal cell through non-wall
    cells (multi-source BFS; ``inf`` for walls and cells that cannot reach a goal)."""

    grid = track.grid
    dist = np.full(grid.shape, np.inf)
    frontier = np.argwhere(grid == GOAL)
    dist[tuple(frontier.T)] = 0
    d = 0
    moves = np.array([(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx])
    while len(frontier):
        d += 1
        nb = (frontier[:, None, :] + moves[None, :, :]).reshape(-1, 2)
        ok = (nb[:, 0] >= 0) & (nb[:, 0] < grid.shape[0]) & (nb[:, 1] >= 0) & (nb[:, 1] < grid.shape[1])
        nb = np.unique(nb[ok], axis=0)
        nb = nb[(grid[nb[:, 0], nb[:, 1]] != WALL) & np.isinf(dist[nb[:, 0], nb[:, 1]])]
        dist[nb[:, 0], nb[:, 1]] = d
        frontier = nb
    return dist


def feature_scale(env: RacetrackEnv) -> np.ndarray:
    """``(15,)`` positive scales that bring the Racetrack features to about [-1, 1] for training."""
    H, W = env.track.height, env.track.width
    m = float(max(H, W))
    return np.array([W, H, 5, 5, *([m] * 8), W, H, H + W], dtype=np.float64)


@restores_torch_settings
def train_dqn(
    env: RacetrackEnv, *, seed: int = 0, config: DQNConfig = DQNConfig(), progress: Callable[[int, int], None] | None = None
) -> tuple[MLP, dict[str, Any]]:
    """Train a DQN on a :class:`~rlverify.models.racetrack.RacetrackEnv`.

    Returns:
        The trained network as an :class:`~rlverify.policies.MLP` (raw features in, Q/100 out) and
        a dict of training facts (settings, seed, time, final evaluation).
    """
    seed = check_seed(seed)
    torch = import_torch()

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    cells = env.track.free_cells()
    scale = feature_scale(env)
    sizes = [15, *config.hidden, len(ACCELERATIONS)]

    q, target = _q_network(torch, sizes), _q_network(torch, sizes)
    target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=config.lr)
    B = config.buffer_size
    buf_obs = np.zeros((B, 15))
    buf_next = np.zeros((B, 15))
    buf_act = np.zeros(B, dtype=np.int64)
    buf_rew = np.zeros(B)
    buf_done = np.zeros(B)
    size = ptr = 0

    def reset(n: int) -> np.ndarray:
        return env.start_states(cells[rng.integers(0, len(cells), size=n)])

    potential = _potential(env, config)
    states = reset(config.n_envs)
    ep_len = np.zeros(config.n_envs, dtype=np.int64)
    n_steps = config.steps // config.n_envs
    updates = 0
    episodes = goals = crashes = 0
    for step in range(n_steps):
        eps = _epsilon(step, n_steps, config)
        obs = env.observe(states) / scale
        with torch.no_grad():
            greedy = q(torch.from_numpy(obs)).argmax(dim=1).numpy()
        explore = rng.random(config.n_envs) < eps
        actions = np.where(explore, rng.integers(0, 9, size=config.n_envs), greedy)
        fail = rng.random(config.n_envs) < env.noise
        nxt, status, reward, terminal = _transition(env, states, actions, fail, config, potential)
        idx = (ptr + np.arange(config.n_envs)) % B
        buf_obs[idx], buf_next[idx] = obs, env.observe(nxt) / scale
        buf_act[idx], buf_rew[idx], buf_done[idx] = actions, reward, terminal
        ptr = (ptr + config.n_envs) % B
        size = min(B, size + config.n_envs)
        ep_len += 1
        end = terminal | (ep_len >= config.max_episode_steps)
        episodes += int(end.sum())
        goals += int((status == AT_GOAL).sum())
        crashes += int((status == CRASHED).sum())
        states = nxt
        if end.any():
            states[end] = reset(int(end.sum()))
            ep_len[end] = 0
        if size >= config.batch_size * 4:
            buffers = (buf_obs, buf_next, buf_act, buf_rew, buf_done)
            updates = _learn(torch, q, target, opt, buffers, size, rng, config, updates)
        if progress is not None and step % 200 == 0:
            progress(step * config.n_envs, n_steps * config.n_envs)
    mlp = _as_mlp(torch, q, scale)
    train_time = time.perf_counter() - t0
    facts = {
        "algorithm": "DQN (double, Huber, hard target updates)",
        "seed": seed,
        "steps": n_steps * config.n_envs,
        "gradient_updates": updates,
        "episodes": episodes,
        "train_goal_episodes": goals,
        "train_crash_episodes": crashes,
        "train_seconds": round(train_time, 1),
        "reward": {"goal": config.goal_reward, "crash": config.crash_reward, "scaled_by": 0.01},
        "gamma": config.gamma,
        "noise": env.noise,
        "start": "random free cell, velocity 0",
        "output": "Q-values / 100 (rlverify.output = q-values: the policy is their argmax)",
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(config).items()},
    }
    return mlp, facts


def _epsilon(step: int, n_steps: int, config: DQNConfig) -> float:
    """The exploration rate at lockstep ``step``: linear from ``eps_start`` to ``eps_end`` over ``eps_fraction``."""
    frac = min(1.0, step / max(1.0, config.eps_fraction * n_steps))
    return config.eps_start + frac * (config.eps_end - config.eps_start)


def _as_mlp(torch: Any, q: Any, scale: np.ndarray) -> MLP:
    """The Q-network as a float64 :class:`MLP` over raw features (the input scaling folded into its first layer)."""
    linears = [m for m in q if isinstance(m, torch.nn.Linear)]
    ws = [m.weight.detach().numpy().astype(np.float64).copy() for m in linears]
    bs = [m.bias.detach().numpy().astype(np.float64).copy() for m in linears]
    ws[0] = ws[0] / scale[None, :]  # fold the input scaling into the first layer
    return MLP(tuple(ws), tuple(bs))


def _q_network(torch: Any, sizes: list[int]) -> Any:
    """A float64 ReLU network with layer sizes ``sizes``."""
    layers: list[Any] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).double()


def _transition(
    env: RacetrackEnv,
    states: np.ndarray,
    actions: np.ndarray,
    fail: np.ndarray,
    config: DQNConfig,
    potential: Callable[[np.ndarray], np.ndarray] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One step of every copy (``fail``: the acceleration is lost): next states, their status, the scaled (and
    shaped) rewards, and which steps end in a terminal state."""

    vel = states[:, 2:4] + np.where(fail[:, None], 0, ACCELERATIONS[actions])
    nxt = move(env.track, states, vel)
    status = nxt[:, 4]
    reward = np.where(status == AT_GOAL, config.goal_reward, np.where(status == CRASHED, config.crash_reward, 0.0)) / 100.0
    terminal = status != 0
    if potential is not None:
        reward = reward + (config.gamma * np.where(terminal, 0.0, potential(nxt)) - potential(states))
    return nxt, status, reward, terminal


def _potential(env: RacetrackEnv, config: DQNConfig) -> Callable[[np.ndarray], np.ndarray] | None:
    """The shaping potential of states ``(N, 5)``: minus ``config.shaping`` times the goal distance / 100 (None: no
    shaping)."""
    if not config.shaping:
        return None
    dist = goal_distances(env.track)
    finite = np.where(np.isfinite(dist), dist, np.nanmax(np.where(np.isfinite(dist), dist, np.nan)) + 1)

    def potential(s: np.ndarray) -> np.ndarray:
        y = np.clip(s[:, 1], 0, env.track.height - 1)
        x = np.clip(s[:, 0], 0, env.track.width - 1)
        return -config.shaping * finite[y, x] / 100.0

    return potential


def _learn(
    torch: Any,
    q: Any,
    target: Any,
    opt: Any,
    buffers: tuple[np.ndarray, ...],
    size: int,
    rng: np.random.Generator,
    config: DQNConfig,
    updates: int,
) -> int:
    """``config.updates_per_step`` double-DQN steps (Huber loss) on minibatches from the first ``size`` entries of the
    replay ``buffers`` (observations, next observations, actions, rewards, done flags); the target network copied
    every ``config.target_every`` updates. Returns the updates made so far."""
    buf_obs, buf_next, buf_act, buf_rew, buf_done = buffers
    for _ in range(config.updates_per_step):
        j = rng.integers(0, size, size=config.batch_size)
        o = torch.from_numpy(buf_obs[j])
        o2 = torch.from_numpy(buf_next[j])
        a = torch.from_numpy(buf_act[j])
        r = torch.from_numpy(buf_rew[j])
        d = torch.from_numpy(buf_done[j])
        with torch.no_grad():
            a2 = q(o2).argmax(dim=1, keepdim=True)
            y = r + config.gamma * (1.0 - d) * target(o2).gather(1, a2).squeeze(1)
        pred = q(o).gather(1, a.unsqueeze(1)).squeeze(1)
        loss = torch.nn.functional.smooth_l1_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        updates += 1
        if updates % config.target_every == 0:
            target.load_state_dict(q.state_dict())
    return updates


def evaluate_greedy(env: RacetrackEnv, mlp: MLP, *, runs: int, seed: int = 12345) -> dict[str, float | str]:
    """Goal rate of the greedy policy from the start line and from random free cells (simulated, deterministic mode)."""
    from rlverify.statistical.engine import SimulationOptions  # lazy: the statistical engine, only to evaluate
    from rlverify.statistical.verify import StatisticalOptions, verify_statistical  # lazy: with the line above

    policy = CallablePolicy(mlp, FEATURES, ACTIONS, output="q-values", name="dqn")
    opts = StatisticalOptions(
        method="clopper-pearson",
        runs=runs,
        delta=0.05,
        simulation=SimulationOptions(mode="deterministic", max_steps=1_000, seed=seed),
    )
    out: dict[str, float | str] = {}
    line = verify_statistical(env, 'P=? [!"crashed" U "goal"]', policy, opts)
    crash = verify_statistical(env, 'P=? [F "crashed"]', policy, opts)
    anywhere = verify_statistical(
        env, 'P=? [!"crashed" U "goal"]', policy, opts, starts=env.start_states(env.track.free_cells())
    )
    out["goal_rate_start_line"] = round(line.estimate, 4)
    out["crash_rate_start_line"] = round(crash.estimate, 4)
    out["goal_rate_random_cells"] = round(anywhere.estimate, 4)
    out["eval_runs"] = runs
    out["eval_mode"] = "deterministic (argmax)"
    return out


def train_racetrack(
    benchmark_id: str,
    out: str | Path,
    *,
    seed: int = 0,
    steps: int | None = None,
    noise: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    force: bool = False,
) -> Path:
    """Train a DQN reference policy for a registered Racetrack benchmark and save it as self-describing ONNX.

    Args:
        benchmark_id: e.g. ``"racetrack-barto-small-v1"``.
        out: the ``.onnx`` file to write (atomically; checked before training).
        seed: training seed (same seed, same network).
        steps: environment transitions (default :class:`DQNConfig`'s).
        noise: training noise (default: the benchmark's, 0.2).

    Returns:
        The written path; the final evaluation is stored in the ONNX training metadata.
    """
    from rlverify.benchmarks.racetrack import make_racetrack  # lazy: the benchmark registry, only when training one

    seed = check_seed(seed)
    check_target(out, force=force)  # before the training, not after it
    params = {} if noise is None else {"noise": noise}
    env = make_racetrack(benchmark_id, **params)
    base = BENCHMARK_CONFIGS.get(benchmark_id, DQNConfig())
    config = base if steps is None else replace(base, steps=int(steps))
    mlp, facts = train_dqn(env, seed=seed, config=config, progress=progress)
    facts["benchmark"] = benchmark_id
    facts["evaluation"] = evaluate_greedy(env, mlp, runs=config.eval_runs)
    log.info("trained %s: %s", benchmark_id, facts["evaluation"])
    save_mlp_onnx(out, mlp, features=FEATURES, actions=ACTIONS, output="q-values", training=facts, force=force)
    return Path(out)
