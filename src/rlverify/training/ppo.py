"""A small, clear PPO (clipped surrogate, GAE) in PyTorch for vectorised numpy environments.

The environment protocol (:class:`VecEnv`): ``n_envs``, ``obs_dim``, ``n_actions``,
``reset(rng) -> (n_envs, obs_dim)`` and ``step(actions) -> (obs, rewards, dones, info)`` with automatic
reset of finished environments (``obs`` is then the first observation of the next episode). Episode
ends by time limit are treated like terminations (no value bootstrap), a small documented bias.

The trained actor is returned as a numpy :class:`~rlverify.policies.mlp.MLP` producing logits over
the raw (unscaled) observation: the input scaling used for training is folded into the first layer.
Torch is imported lazily; without it :class:`~rlverify.errors.DependencyNotInstalled` is raised.
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rlverify.errors import TrainingError, require
from rlverify.policies.mlp import MLP

log = logging.getLogger(__name__)


class VecEnv(Protocol):
    """Vectorised environment over numpy arrays (see the module docstring)."""

    n_envs: int
    obs_dim: int
    n_actions: int

    def reset(self, rng: np.random.Generator) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]: ...


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters (defaults close to RLlib's, learning rate 5e-4 as in the 2022 paper)."""

    lr: float = 5e-4
    n_steps: int = 128
    epochs: int = 6
    minibatch: int = 1024
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5


#: Seeds the trainers take (numpy's generators refuse negative ones; torch's take 64 bits).
MAX_SEED = 2**63 - 1
#: Bytes per network parameter while training: float32 weights, gradients and Adam's two moments (16), the
#: float64 copy and the ONNX file written at the end (12), and slack for temporaries (clipping, the optimizer step).
BYTES_PER_PARAMETER = 32
#: Bytes per hidden unit per batch row: float32 activations, ReLU outputs and their gradients in the forward and
#: backward passes.
BYTES_PER_ACTIVATION = 16
#: Hidden layers at most (a deeper network trains for ever and bounds badly; it is a typo in --hidden).
MAX_HIDDEN_LAYERS = 64


def check_seed(seed: Any) -> int:
    """``seed`` as an int if it is a whole number in [0, :data:`MAX_SEED`], else a :class:`TrainingError`."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) <= MAX_SEED:
        raise TrainingError(f"seed: expected a whole number in [0, 2**63-1], got {seed!r}")
    return int(seed)


def parse_hidden(hidden: Any) -> tuple[int, ...]:
    """Hidden layer widths from ``"64,64"`` or a sequence of positive integers, or a :class:`TrainingError` naming
    what is wrong (an empty width as in ``64,,64``, a zero, a non-integer, too many layers)."""
    widths = _text_widths(hidden) if isinstance(hidden, str) else _sequence_widths(hidden)
    if not widths or any(isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h <= 0 for h in widths):
        raise TrainingError(f"hidden: expected one or more positive whole layer widths, got {hidden!r}")
    if len(widths) > MAX_HIDDEN_LAYERS:
        raise TrainingError(f"hidden: {len(widths)} layers; at most {MAX_HIDDEN_LAYERS} hidden layers")
    return tuple(int(h) for h in widths)


def _text_widths(hidden: str) -> list[Any]:
    """The widths of ``"64,64"`` (digits only; no empty width)."""
    parts = [h.strip() for h in hidden.split(",")]
    if not hidden.strip() or any(not h for h in parts):
        raise TrainingError(
            f"hidden: expected comma-separated positive integers like 64,64, got '{hidden}' (an empty layer width)"
        )
    if not all(h.isdigit() for h in parts):
        raise TrainingError(f"hidden: expected comma-separated positive integers like 64,64, got '{hidden}'")
    return [int(h) for h in parts]


def _sequence_widths(hidden: Any) -> list[Any]:
    try:
        return list(hidden)
    except TypeError:
        raise TrainingError(f"hidden: expected layer widths like (64, 64), got {hidden!r}") from None


def layer_parameters(sizes: Sequence[int]) -> int:
    """Weights and biases of a fully connected network with layer sizes ``sizes`` (inputs, hidden..., outputs)."""
    return sum(int(a) * int(b) + int(b) for a, b in itertools.pairwise(sizes))


def check_training_memory(networks: Sequence[Sequence[int]], batch: int, *, option: str = "--hidden") -> int:
    """Refuse (:class:`TrainingError`) before any allocation a training whose networks (each given by its layer
    sizes) would not fit the memory guard: :data:`~rlverify.models.explicit.DEFAULT_MEMORY_FRACTION` of this
    machine's memory, less what the process uses. Returns the estimate in bytes.

    The estimate: :data:`BYTES_PER_PARAMETER` per parameter plus :data:`BYTES_PER_ACTIVATION` per hidden unit and
    row of the largest ``batch`` (minibatch or rollout step), over all networks."""
    from rlverify.models.explicit import DEFAULT_MEMORY_FRACTION, format_bytes, machine_memory, resident_bytes

    params = sum(layer_parameters(sizes) for sizes in networks)
    units = sum(sum(int(h) for h in sizes[1:]) for sizes in networks)
    estimate = BYTES_PER_PARAMETER * params + BYTES_PER_ACTIVATION * units * int(batch)
    total = machine_memory()
    if total:
        now = resident_bytes()
        bound = int(DEFAULT_MEMORY_FRACTION * total)
        if now + estimate > bound:
            shape = " and ".join("-".join(str(n) for n in sizes) for sizes in networks)
            raise TrainingError(
                f"{option}: training the network {shape} ({params:,} parameters) needs an estimated "
                f"{format_bytes(estimate)} (weights, gradients, Adam's state, batches of {batch:,} rows), beyond the "
                f"memory guard of {format_bytes(bound - now)} ({DEFAULT_MEMORY_FRACTION:.0%} of this machine's "
                f"{format_bytes(total)}, less {format_bytes(now)} in use); give smaller layer widths"
            )
    return estimate


def import_torch() -> Any:
    """The ``torch`` module, or :class:`DependencyNotInstalled` naming the extra (:func:`rlverify.errors.require`)."""
    return require("torch", "torch", purpose="training")


@contextmanager
def torch_settings_restored() -> Iterator[None]:
    """Restore torch's global thread count and determinism flag after training changes them."""
    torch = import_torch()
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def restores_torch_settings(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: run ``fn`` inside :func:`torch_settings_restored`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with torch_settings_restored():
            return fn(*args, **kwargs)

    return wrapper


@restores_torch_settings
def train_ppo(
    env: VecEnv,
    *,
    hidden: tuple[int, ...] = (64, 64),
    total_steps: int = 200_000,
    seed: int = 0,
    obs_scale: np.ndarray | None = None,
    config: PPOConfig = PPOConfig(),
    on_update: Callable[[int, MLP], bool] | None = None,
) -> tuple[MLP, dict[str, Any]]:
    """Train a softmax policy with PPO.

    Args:
        env: vectorised environment.
        hidden: hidden layer widths of the actor (ReLU); the critic has the same shape.
        total_steps: environment steps (summed over the parallel environments).
        seed: seeds numpy and torch; the same seed gives the same network (single-threaded CPU).
        obs_scale: per-feature factors ``(obs_dim,)`` applied before the network during training
            and folded into the returned first layer.
        config: :class:`PPOConfig`.
        on_update: called after each update with the environment steps so far and the actor as it is then (an
            :class:`MLP` over raw observations, as returned at the end); training stops early when it returns
            False (``stats['stopped']`` is then True). None: no call.

    Returns:
        ``(actor, stats)``: the actor as an :class:`MLP` giving logits over raw observations, and
        ``stats`` with ``steps``, ``updates``, ``final_mean_return`` (mean undiscounted return of the
        episodes finished in the last 10% of training), ``episodes``, ``seconds``.
    """
    seed = check_seed(seed)
    hidden = parse_hidden(hidden)
    check_training_memory(
        [[env.obs_dim, *hidden, env.n_actions], [env.obs_dim, *hidden, 1]], max(config.minibatch, env.n_envs)
    )
    torch = import_torch()
    nn = torch.nn
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    scale = np.ones(env.obs_dim) if obs_scale is None else np.asarray(obs_scale, dtype=np.float64)

    actor, critic = _network(nn, env.obs_dim, hidden, env.n_actions), _network(nn, env.obs_dim, hidden, 1)
    with torch.no_grad():  # small initial logits: start close to uniform
        actor[-1].weight.mul_(0.01)
        actor[-1].bias.zero_()
    opt = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=config.lr, eps=1e-5)
    n, t_len = env.n_envs, config.n_steps
    obs = env.reset(rng)
    ep_ret = np.zeros(n)
    finished: list[tuple[int, float]] = []
    steps = 0
    updates = 0
    stopped = False
    t0 = time.perf_counter()
    while steps < total_steps:
        b_obs, b_act, b_logp, b_rew, b_done, b_val, obs = _rollout(
            torch, env, actor, critic, obs, scale, rng, t_len, ep_ret, finished, steps
        )
        adv = _advantages(b_rew, b_done, b_val, config)
        ret = adv + b_val[:t_len]
        batch = [torch.as_tensor(x) for x in (b_obs.reshape(-1, env.obs_dim), b_act.reshape(-1), b_logp.reshape(-1))]
        batch += [torch.as_tensor(adv.reshape(-1)), torch.as_tensor(ret.reshape(-1))]
        _optimise(torch, actor, critic, opt, batch, rng, config)
        steps += t_len * n
        updates += 1
        if on_update is not None and on_update(steps, _actor_mlp(actor, nn, scale)) is False:
            stopped = True
            break
        if updates % 10 == 0:
            _log_progress(finished, steps)
    tail = _tail(finished, steps)
    return _actor_mlp(actor, nn, scale), {
        "steps": int(steps),
        "updates": updates,
        "episodes": len(finished),
        "final_mean_return": float(np.mean(tail)) if tail else float("nan"),
        "seconds": round(time.perf_counter() - t0, 1),
        "stopped": stopped,
    }


def _log_progress(finished: list[tuple[int, float]], steps: int) -> None:
    recent = [r for s, r in finished[-200:]]
    log.info("PPO: %d steps, mean return of recent episodes %.2f", steps, float(np.mean(recent)) if recent else float("nan"))


def _tail(finished: list[tuple[int, float]], steps: int) -> list[float]:
    """The returns of the episodes finished in the last 10 % of ``steps`` (else the last 100)."""
    return [r for s, r in finished if s >= 0.9 * steps] or [r for _, r in finished[-100:]]


def _network(nn: Any, obs_dim: int, hidden: tuple[int, ...], out: int) -> Any:
    """A float32 ReLU network ``obs_dim -> hidden... -> out``."""
    layers: list[Any] = []
    prev = obs_dim
    for h in hidden:
        layers += [nn.Linear(prev, h), nn.ReLU()]
        prev = h
    layers.append(nn.Linear(prev, out))
    return nn.Sequential(*layers)


def _rollout(
    torch: Any,
    env: VecEnv,
    actor: Any,
    critic: Any,
    obs: np.ndarray,
    scale: np.ndarray,
    rng: np.random.Generator,
    t_len: int,
    ep_ret: np.ndarray,
    finished: list[tuple[int, float]],
    steps: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``t_len`` steps of every copy from ``obs`` under the actor (one uniform per copy and step): observations,
    actions, their log-probabilities, rewards, done flags, values (``t_len + 1`` rows, the last bootstraps), and the
    observations after. Episodes that end are appended to ``finished`` (``ep_ret``: the running returns)."""
    n = env.n_envs
    b_obs = np.zeros((t_len, n, env.obs_dim), dtype=np.float32)
    b_act = np.zeros((t_len, n), dtype=np.int64)
    b_logp = np.zeros((t_len, n), dtype=np.float32)
    b_rew = np.zeros((t_len, n), dtype=np.float32)
    b_done = np.zeros((t_len, n), dtype=np.float32)
    b_val = np.zeros((t_len + 1, n), dtype=np.float32)
    for t in range(t_len):
        x = torch.as_tensor(obs * scale, dtype=torch.float32)
        with torch.no_grad():
            logits = actor(x)
            value = critic(x)[:, 0]
        probs = torch.softmax(logits, dim=1).numpy().astype(np.float64)
        cum = np.cumsum(probs, axis=1)
        act = (rng.random(n)[:, None] * cum[:, -1:] > cum).sum(axis=1).clip(0, env.n_actions - 1)
        logp = torch.log_softmax(logits, dim=1).numpy()[np.arange(n), act]
        nobs, rew, done, _ = env.step(act)
        b_obs[t], b_act[t], b_logp[t], b_rew[t], b_done[t], b_val[t] = x.numpy(), act, logp, rew, done, value.numpy()
        ep_ret += rew
        for i in np.flatnonzero(done):
            finished.append((steps + t * n, float(ep_ret[i])))
            ep_ret[i] = 0.0
        obs = nobs
    with torch.no_grad():
        b_val[t_len] = critic(torch.as_tensor(obs * scale, dtype=torch.float32))[:, 0].numpy()
    return b_obs, b_act, b_logp, b_rew, b_done, b_val, obs


def _advantages(b_rew: np.ndarray, b_done: np.ndarray, b_val: np.ndarray, config: PPOConfig) -> np.ndarray:
    """``(T, n)`` float32 generalised advantage estimates of a rollout (``b_val`` ``(T + 1, n)``: the last row
    bootstraps)."""
    t_len, n = b_rew.shape
    adv = np.zeros((t_len, n), dtype=np.float32)
    last = np.zeros(n, dtype=np.float32)
    for t in reversed(range(t_len)):
        nonterminal = 1.0 - b_done[t]
        delta = b_rew[t] + config.gamma * b_val[t + 1] * nonterminal - b_val[t]
        last = delta + config.gamma * config.gae_lambda * nonterminal * last
        adv[t] = last
    return adv


def _optimise(
    torch: Any, actor: Any, critic: Any, opt: Any, batch: list[Any], rng: np.random.Generator, config: PPOConfig
) -> None:
    """``config.epochs`` passes of clipped-surrogate PPO over the rollout ``batch`` (observations, actions, their
    log-probabilities, advantages, returns), in minibatches of a fresh permutation each pass."""
    f_obs, f_act, f_logp, f_adv, f_ret = batch
    size = len(f_act)
    for _ in range(config.epochs):
        perm = torch.as_tensor(rng.permutation(size))
        for start in range(0, size, config.minibatch):
            idx = perm[start : start + config.minibatch]
            logits = actor(f_obs[idx])
            logp_all = torch.log_softmax(logits, dim=1)
            logp = logp_all.gather(1, f_act[idx][:, None])[:, 0]
            ratio = torch.exp(logp - f_logp[idx])
            a = f_adv[idx]
            a = (a - a.mean()) / (a.std() + 1e-8)
            pg = -torch.min(ratio * a, torch.clamp(ratio, 1 - config.clip, 1 + config.clip) * a).mean()
            vf = ((critic(f_obs[idx])[:, 0] - f_ret[idx]) ** 2).mean()
            ent = -(torch.exp(logp_all) * logp_all).sum(dim=1).mean()
            loss = pg + config.vf_coef * vf - config.ent_coef * ent
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(actor.parameters()) + list(critic.parameters()), config.max_grad_norm)
            opt.step()


def _actor_mlp(actor: Any, nn: Any, scale: np.ndarray) -> MLP:
    """The torch ``actor`` (Linear and ReLU layers) as a float64 :class:`MLP` over raw observations: the input
    scaling used for training folded into its first layer."""
    weights, biases = [], []
    for layer in actor:
        if isinstance(layer, nn.Linear):
            weights.append(layer.weight.detach().double().numpy().copy())
            biases.append(layer.bias.detach().double().numpy().copy())
    weights[0] = weights[0] * scale[None, :]
    return MLP(tuple(weights), tuple(biases))
