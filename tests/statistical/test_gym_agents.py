"""Trained Stable-Baselines3 agents simulated on Gymnasium environments, episode by episode, against SB3 itself.

Agents are trained here (a few hundred steps, seeds fixed) and saved to a temporary folder; rlverify reads each zip
without running code from it and with ``trust_code`` (SB3's own loader). The reference shares no code with rlverify's
simulator or policy readers: one ``gymnasium.make`` per episode reset with the documented seed
(``episode_seeds(seed, ids)[i]``), SB3's own ``model.predict`` (or, for the stochastic mode, SB3's own torch
distribution parameters given rlverify's documented noise ``ndtri(uniforms(run_keys(seed_key(seed), [i]), t,
NOISE_STREAM + j))``), ``env.step`` until the property is decided. Outcomes and step counts must be equal, returns
equal to float32 rounding.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from rlverify.policies.continuous import ContinuousKind, ContinuousPolicy
from rlverify.resolve import resolve
from rlverify.statistical.engine import SimulationOptions, simulate
from rlverify.statistical.episodes import NOISE_STREAM, episode_seeds
from rlverify.statistical.outcomes import EpisodeReturn, RunOutcomes
from rlverify.statistical.rng import run_keys, seed_key, uniforms
from rlverify.statistical.simulated import prepare
from rlverify.statistical.step import POLICY_STREAM
from tests.incli import cli

sb3 = pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")

PENDULUM = "gym:Pendulum-v1"
CARTPOLE = "gym:CartPole-v1"
#: a Pendulum label reached by some episodes at various steps (the pole swinging fast)
FAST = "fast=abs(obs[2]) > 3"
FAST_PROPERTY = 'P=? [F<=60 "fast"]'
SMALL = {"net_arch": [32, 32]}

#: an action for an observation ``(F,)`` of episode ``i`` at its step ``t`` (0-based: the first action is at t = 0)
Act = Callable[[np.ndarray, int, int], np.ndarray | int]


# --------------------------------------------------------------------------------------------------
# agents trained here


def _off_policy(algo: str, steps: int):
    cls = getattr(sb3, algo)
    model = cls(
        "MlpPolicy",
        "Pendulum-v1",
        learning_starts=50,
        batch_size=32,
        buffer_size=1_000,
        seed=0,
        device="cpu",
        policy_kwargs=dict(SMALL),
    )
    return model.learn(steps)


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Train with one torch thread (two xdist workers on two cores would otherwise oversubscribe them), restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


TRAIN: dict[str, Callable[[], object]] = {
    "TD3": lambda: _off_policy("TD3", 200),
    "SAC": lambda: _off_policy("SAC", 250),
    "PPO-gaussian": lambda: sb3.PPO(
        "MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu", policy_kwargs=dict(SMALL)
    ).learn(128),
    "PPO-discrete": lambda: sb3.PPO(
        "MlpPolicy", "CartPole-v1", n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu", policy_kwargs=dict(SMALL)
    ).learn(512),
}


class Agents:
    """The agents of :data:`TRAIN` (TD3 200 steps and SAC 250 steps on Pendulum, PPO Gaussian on Pendulum, PPO discrete
    on CartPole), each trained on first use (an xdist worker trains only those its tests need) and saved."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.held: dict[str, tuple[object, Path]] = {}

    def __getitem__(self, name: str) -> tuple[object, Path]:
        if name not in self.held:
            with one_torch_thread():
                model = TRAIN[name]()
            path = self.root / f"{name}.zip"
            model.save(path)  # type: ignore[attr-defined]
            self.held[name] = (model, path)
        return self.held[name]


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Agents:
    return Agents(tmp_path_factory.mktemp("agents"))


# --------------------------------------------------------------------------------------------------
# rlverify's episodes and the plain loop


def ours(
    target: str,
    policy: str | ContinuousPolicy,
    prop: str,
    runs: int,
    *,
    seed: int,
    labels: Sequence[str] | None = None,
    mode: str = "deterministic",
    trust: bool = False,
    returns: bool = False,
    vec_normalize: Path | None = None,
    max_steps: int = 10_000,
) -> RunOutcomes:
    t = resolve(
        target,
        policy=policy,
        property=prop,
        labels=labels,
        command="test",
        trust_code=trust,
        vec_normalize=vec_normalize,
    )
    env, path, _ = prepare(t.model, t.property, actions=t.policy.actions)
    options = SimulationOptions(seed=seed, mode=mode, max_steps=max_steps, episode_return=EpisodeReturn() if returns else None)
    return simulate(env, t.policy, path, np.arange(runs), options=options)


def loop(
    env_id: str,
    act: Act,
    seed: int,
    runs: int,
    *,
    right: Callable[[np.ndarray], bool],
    bound: int | None = None,
    gamma: float = 1.0,
) -> tuple[list[int], list[int], list[float]]:
    """Per episode of ``env_id`` under ``act``, for ``P=? [F<=bound right]``: outcome (1 / 0 / -1 undecided), steps
    taken, and the return summed over those steps (discounted by ``gamma``)."""
    outcomes, steps, totals = [], [], []
    for i, s in enumerate(episode_seeds(seed, np.arange(runs))):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=s)
        t, total, weight, term, trunc = 0, 0.0, 1.0, False, False
        while True:
            if right(obs):
                outcome = 1
            elif term or (bound is not None and t >= bound):
                outcome = 0
            elif trunc:
                outcome = -1
            else:
                obs, reward, term, trunc, _ = env.step(act(obs, i, t))
                total += weight * float(reward)
                weight *= gamma
                t += 1
                continue
            break
        env.close()
        outcomes.append(outcome)
        steps.append(t)
        totals.append(total)
    return outcomes, steps, totals


#: reference loops already run in this process, by what they computed (the trust-code variants share them)
_REFERENCES: dict[tuple[object, ...], object] = {}
T = TypeVar("T")


def once(key: tuple[object, ...], compute: Callable[[], T]) -> T:
    """``compute()``, run once per ``key`` (a plain loop is the slow part of a test; its result does not depend on
    how rlverify reads the zip)."""
    if key not in _REFERENCES:
        _REFERENCES[key] = compute()
    return _REFERENCES[key]  # type: ignore[return-value]


def never(_: np.ndarray) -> bool:
    return False


def fast(obs: np.ndarray) -> bool:
    return bool(abs(obs[2]) > 3)


def predicted(model: object) -> Act:
    """SB3's own deterministic action."""

    def act(obs: np.ndarray, i: int, t: int) -> np.ndarray | int:
        a, _ = model.predict(obs, deterministic=True)  # type: ignore[attr-defined]
        return a if a.shape else int(a)

    return act


def noise(seed: int, i: int, t: int, d: int) -> np.ndarray:
    """rlverify's documented standard normal noise of episode ``i`` at step ``t`` (``d`` action dimensions)."""
    from scipy.special import ndtri

    keys = run_keys(seed_key(seed), np.array([i]))
    return np.array([ndtri(uniforms(keys, np.array([t]), NOISE_STREAM + j))[0] for j in range(d)])


def sampled(model: object, seed: int) -> Act:
    """SB3's stochastic action computed from its own torch distribution parameters with rlverify's noise: SAC
    ``unscale_action(tanh(mean + exp(log_std) * eps))``, PPO ``clip(mean + std * eps, low, high)`` (as ``predict``)."""
    policy = model.policy  # type: ignore[attr-defined]
    space = model.action_space  # type: ignore[attr-defined]

    def act(obs: np.ndarray, i: int, t: int) -> np.ndarray:
        eps = torch.as_tensor(noise(seed, i, t, space.shape[0]), dtype=torch.float64)
        x = torch.as_tensor(obs[None], dtype=torch.float32)
        with torch.no_grad():
            if isinstance(model, sb3.SAC):
                mean, log_std, _ = policy.actor.get_action_dist_params(x)
                pre = mean[0].double() + torch.exp(log_std[0].double()) * eps
                return policy.unscale_action(torch.tanh(pre).numpy())
            dist = policy.get_distribution(x).distribution
            pre = dist.mean[0].double() + dist.stddev[0].double() * eps
            return np.clip(pre.numpy(), space.low, space.high)

    return act


def assert_varied(outcomes: list[int], steps: list[int]) -> None:
    """The reference is informative: both outcomes occur, at several step counts (so equal arrays mean something)."""
    assert 0 < sum(o == 1 for o in outcomes) < len(outcomes), outcomes
    assert len(set(steps)) >= 3, steps


# --------------------------------------------------------------------------------------------------
# 1. deterministic mode: TD3 and SAC on Pendulum


@pytest.mark.parametrize("trust", [False, True], ids=["no-code", "trust-code"])
@pytest.mark.parametrize("algo", ["TD3", "SAC"])
def test_deterministic_episodes_are_sb3_predict(agents, algo, trust):
    model, path = agents[algo]
    seed, runs = 11, 24
    got = ours(PENDULUM, str(path), FAST_PROPERTY, runs, seed=seed, labels=[FAST], trust=trust)
    outcomes, steps, _ = once(
        ("fast", algo, seed, runs), lambda: loop("Pendulum-v1", predicted(model), seed, runs, right=fast, bound=60)
    )
    assert_varied(outcomes, steps)
    assert got.outcome.tolist() == outcomes
    assert got.steps.tolist() == steps


@pytest.mark.parametrize("trust", [False, True], ids=["no-code", "trust-code"])
@pytest.mark.parametrize("algo", ["TD3", "SAC"])
def test_deterministic_returns_are_sb3_predict(agents, algo, trust):
    model, path = agents[algo]
    seed, runs = 5, 16
    got = ours(PENDULUM, str(path), "P=? [F<=60 false]", runs, seed=seed, trust=trust, returns=True)
    _, steps, totals = once(
        ("returns", algo, seed, runs), lambda: loop("Pendulum-v1", predicted(model), seed, runs, right=never, bound=60)
    )
    assert steps == [60] * runs and got.steps.tolist() == steps
    assert got.returns is not None
    np.testing.assert_allclose(got.returns, totals, rtol=1e-4)
    assert np.ptp(totals) > 10  # the episodes differ: equal returns are not a constant


# --------------------------------------------------------------------------------------------------
# 2. stochastic mode: SAC and PPO (Gaussian) with rlverify's noise given to SB3's distribution


@pytest.mark.parametrize("trust", [False, True], ids=["no-code", "trust-code"])
@pytest.mark.parametrize("algo", ["SAC", "PPO-gaussian"])
def test_stochastic_episodes_are_sb3s_distribution_with_the_same_noise(agents, algo, trust):
    model, path = agents[algo]
    seed, runs = 3, 24
    got = ours(PENDULUM, str(path), FAST_PROPERTY, runs, seed=seed, labels=[FAST], mode="stochastic", trust=trust)
    outcomes, steps, _ = once(
        ("sampled", algo, seed, runs), lambda: loop("Pendulum-v1", sampled(model, seed), seed, runs, right=fast, bound=60)
    )
    assert_varied(outcomes, steps)
    assert got.outcome.tolist() == outcomes
    assert got.steps.tolist() == steps
    # and the noise matters: the deterministic episodes are others
    det = ours(PENDULUM, str(path), FAST_PROPERTY, runs, seed=seed, labels=[FAST], trust=trust)
    assert det.steps.tolist() != steps


def test_td3_has_no_stochastic_policy_the_stochastic_mode_is_predict(agents):
    """TD3's trained policy is its actor (SB3's exploration noise is not part of it; its predict ignores
    ``deterministic``): the stochastic mode's episodes are SB3's predict ones."""
    model, path = agents["TD3"]
    seed, runs = 11, 24
    got = ours(PENDULUM, str(path), FAST_PROPERTY, runs, seed=seed, labels=[FAST], mode="stochastic")

    def sampled_predict(obs: np.ndarray, i: int, t: int) -> np.ndarray:
        a, _ = model.predict(obs, deterministic=False)  # type: ignore[attr-defined]
        return a

    outcomes, steps, _ = loop("Pendulum-v1", sampled_predict, seed, runs, right=fast, bound=60)
    assert_varied(outcomes, steps)
    assert got.outcome.tolist() == outcomes and got.steps.tolist() == steps


@pytest.mark.parametrize("algo", ["SAC", "PPO-gaussian"])
def test_stochastic_returns_are_sb3s_distribution_with_the_same_noise(agents, algo):
    model, path = agents[algo]
    seed, runs = 8, 12
    got = ours(PENDULUM, str(path), "P=? [F<=60 false]", runs, seed=seed, mode="stochastic", returns=True)
    _, _, totals = loop("Pendulum-v1", sampled(model, seed), seed, runs, right=never, bound=60)
    assert got.returns is not None
    np.testing.assert_allclose(got.returns, totals, rtol=1e-4)


# --------------------------------------------------------------------------------------------------
# the command line: R=? [C<=60] of a trained agent, the mean of the loop's returns


@pytest.mark.parametrize("discount", [1.0, 0.9])
@pytest.mark.parametrize("trust", [False, True], ids=["no-code", "trust-code"])
def test_cli_expected_return_is_the_loops_mean(capsys, agents, trust, discount):
    model, path = agents["TD3"]
    seed, runs = 4, 20
    code, out, err = cli(
        capsys, "simulate", PENDULUM, "--policy", str(path), "-p", "R=? [C<=60]", "--runs", str(runs), "--seed",
        str(seed), "--mode", "deterministic", "--discount", str(discount), "--json", *(["--trust-code"] if trust else []),
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)["result"]
    _, _, totals = once(
        ("cli returns", discount),
        lambda: loop("Pendulum-v1", predicted(model), seed, runs, right=never, bound=60, gamma=discount),
    )
    assert result["estimate"] == pytest.approx(float(np.mean(totals)), rel=1e-4)
    assert result["std"] == pytest.approx(float(np.std(totals, ddof=1)), rel=1e-3)
    assert result["counted"] == runs and result["cut"] == 0


@pytest.mark.parametrize("trust", [False, True], ids=["no-code", "trust-code"])
def test_cli_label_property_counts_are_the_loops(capsys, agents, trust):
    """``--label`` over a trained SAC's episodes: successes and decisions (steps) of the --json result are the loop's."""
    model, path = agents["SAC"]
    seed, runs = 12, 30
    code, out, err = cli(
        capsys, "simulate", PENDULUM, "--policy", str(path), "-p", FAST_PROPERTY, "--label", FAST, "--runs", str(runs),
        "--seed", str(seed), "--mode", "deterministic", "--json", *(["--trust-code"] if trust else []),
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)["result"]
    outcomes, steps, _ = once(
        ("cli fast", seed, runs), lambda: loop("Pendulum-v1", predicted(model), seed, runs, right=fast, bound=60)
    )
    assert_varied(outcomes, steps)
    assert (result["runs"], result["successes"], result["decisions"]) == (runs, sum(outcomes), sum(steps))


# --------------------------------------------------------------------------------------------------
# 3. VecNormalize: the policy sees the observations as in training


@pytest.fixture(scope="module")
def normalized_agent(tmp_path_factory: pytest.TempPathFactory):
    """PPO trained 2,048 steps on CartPole under VecNormalize; its zip, statistics file and the (frozen) VecNormalize."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    root = tmp_path_factory.mktemp("vecnormalize")
    venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0), norm_reward=True)
    with one_torch_thread():
        model = sb3.PPO(
            "MlpPolicy", venv, n_steps=256, batch_size=64, n_epochs=4, seed=0, device="cpu", policy_kwargs=dict(SMALL)
        ).learn(2_048)
    model.save(root / "model.zip")
    venv.save(str(root / "stats.pkl"))
    venv.training = False
    return model, root / "model.zip", root / "stats.pkl", venv


def terminated_lengths(act: Act, seed: int, runs: int) -> tuple[list[int], list[int]]:
    outcomes, steps = [], []
    for i, s in enumerate(episode_seeds(seed, np.arange(runs))):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=s)
        t, term, trunc = 0, False, False
        while not (term or trunc):
            obs, _, term, trunc, _ = env.step(act(obs, i, t))
            t += 1
        outcomes.append(1 if term else -1)  # P=? [F "terminated"]: a time limit first is undecided
        steps.append(t)
    return outcomes, steps


VEC_SEED, VEC_RUNS = 2, 16


@pytest.fixture(scope="module")
def normalized_reference(normalized_agent) -> tuple[tuple[list[int], list[int]], tuple[list[int], list[int]]]:
    """The plain loop's (outcomes, steps) with observations normalised by ``venv.normalize_obs``, and on raw ones."""
    model, _, _, venv = normalized_agent

    def act(obs: np.ndarray, i: int, t: int) -> int:
        a, _ = model.predict(venv.normalize_obs(obs[None].astype(np.float32)), deterministic=True)
        return int(a[0])

    return terminated_lengths(act, VEC_SEED, VEC_RUNS), terminated_lengths(predicted(model), VEC_SEED, VEC_RUNS)


@pytest.mark.parametrize("trust", [False, True], ids=["no-code", "trust-code"])
def test_vec_normalize_episodes_are_sb3_predict_on_normalized_observations(normalized_agent, normalized_reference, trust):
    _, zip_path, stats, _ = normalized_agent
    (outcomes, steps), (raw_outcomes, raw_steps) = normalized_reference
    assert len(set(steps)) >= 3, steps
    prop = 'P=? [F "terminated"]'
    got = ours(CARTPOLE, str(zip_path), prop, VEC_RUNS, seed=VEC_SEED, trust=trust, vec_normalize=stats)
    assert got.outcome.tolist() == outcomes and got.steps.tolist() == steps
    # without the statistics the policy sees raw observations: other episodes (the option matters), SB3's own
    raw = ours(CARTPOLE, str(zip_path), prop, VEC_RUNS, seed=VEC_SEED, trust=trust)
    assert raw.steps.tolist() != steps
    assert raw.steps.tolist() == raw_steps and raw.outcome.tolist() == raw_outcomes


@pytest.fixture(scope="module")
def normalized_td3(tmp_path_factory: pytest.TempPathFactory):
    """TD3 trained 200 steps on Pendulum under VecNormalize (a continuous policy normalised); zip, stats, VecNormalize."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    root = tmp_path_factory.mktemp("vecnormalize_td3")
    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0))
    with one_torch_thread():
        model = sb3.TD3(
            "MlpPolicy", venv, learning_starts=50, batch_size=32, buffer_size=1_000, seed=0, device="cpu",
            policy_kwargs=dict(SMALL),
        ).learn(200)  # fmt: skip
    model.save(root / "model.zip")
    venv.save(str(root / "stats.pkl"))
    venv.training = False
    return model, root / "model.zip", root / "stats.pkl", venv


@pytest.mark.parametrize("trust", [False, True], ids=["no-code", "trust-code"])
def test_vec_normalize_continuous_returns_are_sb3_predict_on_normalized_observations(normalized_td3, trust):
    model, zip_path, stats, venv = normalized_td3

    def act(obs: np.ndarray, i: int, t: int) -> np.ndarray:
        a, _ = model.predict(venv.normalize_obs(obs[None].astype(np.float32)), deterministic=True)
        return a[0]

    seed, runs = 10, 12
    _, _, totals = once(("normalized td3",), lambda: loop("Pendulum-v1", act, seed, runs, right=never, bound=60))
    prop = "P=? [F<=60 false]"
    got = ours(PENDULUM, str(zip_path), prop, runs, seed=seed, trust=trust, returns=True, vec_normalize=stats)
    assert got.returns is not None
    np.testing.assert_allclose(got.returns, totals, rtol=1e-4)
    raw = ours(PENDULUM, str(zip_path), prop, runs, seed=seed, trust=trust, returns=True)
    assert raw.returns is not None
    assert np.abs(raw.returns - np.array(totals)).max() > 1.0  # without the statistics: other actions, other returns


# --------------------------------------------------------------------------------------------------
# 4. a discrete PPO on CartPole: deterministic mode is predict(deterministic=True)


@pytest.mark.parametrize("trust", [False, True], ids=["no-code", "trust-code"])
def test_discrete_ppo_deterministic_episodes_are_sb3_predict(agents, trust):
    model, path = agents["PPO-discrete"]
    seed, runs = 9, 30
    outcomes, steps = once(("cartpole", seed, runs), lambda: terminated_lengths(predicted(model), seed, runs))
    assert len(set(steps)) >= 3, steps
    got = ours(CARTPOLE, str(path), 'P=? [F "terminated"]', runs, seed=seed, trust=trust)
    assert got.outcome.tolist() == outcomes and got.steps.tolist() == steps


@pytest.mark.parametrize("trust", [False, True], ids=["no-code", "trust-code"])
def test_discrete_ppo_stochastic_episodes_are_sb3s_probabilities_with_the_same_uniforms(agents, trust):
    """Stochastic mode, episode by episode: the action is the first whose cumulative probability (SB3's own torch
    Categorical ``probs``) exceeds rlverify's documented uniform ``uniforms(run_keys(seed_key(seed), [i]), t,
    POLICY_STREAM)`` of episode ``i`` at step ``t``."""
    model, path = agents["PPO-discrete"]
    seed, runs = 13, 24

    def act(obs: np.ndarray, i: int, t: int) -> int:
        with torch.no_grad():
            x = torch.as_tensor(obs[None], dtype=torch.float32)
            probs = model.policy.get_distribution(x).distribution.probs[0].double().numpy()  # type: ignore[attr-defined]
        u = uniforms(run_keys(seed_key(seed), np.array([i])), np.array([t]), POLICY_STREAM)[0]
        return int(np.flatnonzero(np.cumsum(probs) > u * probs.sum())[0])

    outcomes, steps = once(("cartpole sampled", seed, runs), lambda: terminated_lengths(act, seed, runs))
    assert len(set(steps)) >= 3, steps
    got = ours(CARTPOLE, str(path), 'P=? [F "terminated"]', runs, seed=seed, mode="stochastic", trust=trust)
    assert got.outcome.tolist() == outcomes and got.steps.tolist() == steps
    _, det = once(("cartpole", seed, runs), lambda: terminated_lengths(predicted(model), seed, runs))
    assert got.steps.tolist() != det  # the uniforms matter


@pytest.mark.slow  # ~4 s: 400 episodes; the episode-by-episode test above is the default one
def test_discrete_ppo_stochastic_mean_length_agrees_with_sb3_sampling(agents):
    """The stochastic mode's mean episode length against SB3's own predict(deterministic=False) (torch's sampler,
    seeded): two independent samples of the same law, so their 99.9% intervals overlap (and the deterministic
    mode's mean is not the same law, which the test checks can be told apart)."""
    from scipy import stats

    model, path = agents["PPO-discrete"]
    runs = 200
    got = ours(CARTPOLE, str(path), 'P=? [F "terminated"]', runs, seed=21, mode="stochastic")
    torch.manual_seed(0)

    def sample(obs: np.ndarray, i: int, t: int) -> int:
        a, _ = model.predict(obs, deterministic=False)
        return int(a)

    _, ref = terminated_lengths(sample, 77, runs)

    def interval(x: np.ndarray) -> tuple[float, float]:
        half = stats.t.ppf(0.9995, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
        return x.mean() - half, x.mean() + half

    a, b = interval(got.steps.astype(float)), interval(np.array(ref, dtype=float))
    assert a[0] <= b[1] and b[0] <= a[1], (a, b)


# --------------------------------------------------------------------------------------------------
# 6. a policy whose actions leave the Box: refused, naming the episode and step


class _Kick(ContinuousPolicy):
    """Torque 3 (outside Pendulum's [-2, 2]) once the pole turns faster than 1 rad/s, else 0; declared bounds
    ``[low, high]``."""

    def __init__(self, low: float, high: float) -> None:
        features = ["obs[0]", "obs[1]", "obs[2]"]
        super().__init__(features, np.array([low]), np.array([high]), ContinuousKind.DETERMINISTIC, name="kick")

    def _act(self, obs: np.ndarray, noise: np.ndarray | None) -> np.ndarray:
        return np.where(obs[:, 2:3] > 1.0, 3.0, 0.0)


def first_kick(seed: int, runs: int) -> tuple[int, int]:
    """(episode, steps taken) of the first out-of-Box action when the episodes run in lockstep: the earliest step,
    the lowest episode at it (a scalar loop with the same rule, torque 0 until then)."""
    found = []
    for i, s in enumerate(episode_seeds(seed, np.arange(runs))):
        env = gym.make("Pendulum-v1")
        obs, _ = env.reset(seed=s)
        for t in range(60):
            if obs[2] > 1.0:
                found.append((t, i))
                break
            obs, *_ = env.step(np.array([0.0], dtype=np.float32))
    t, i = min(found)
    return i, t


def kicked(low: float, high: float, seed: int, runs: int) -> str:
    from rlverify.errors import PolicyError

    with pytest.raises(PolicyError) as exc:
        ours(PENDULUM, _Kick(low, high), "P=? [F<=60 false]", runs, seed=seed)
    return str(exc.value)


def test_an_action_outside_the_box_is_refused_naming_episode_and_step():
    seed, runs = 6, 20
    i, t = first_kick(seed, runs)
    assert t > 0  # not at the reset: the step count is the loop's
    message = kicked(-5.0, 5.0, seed, runs)  # declared wider than the environment's Box
    assert message == (
        f"gym:Pendulum-v1: episode {i}, step {t}: the policy's action [3.0] is outside the action space [[-2.0], [2.0]]"
    )


def test_an_action_outside_the_policys_own_bounds_names_episode_and_step():
    seed, runs = 6, 20
    i, t = first_kick(seed, runs)
    message = kicked(-2.0, 2.0, seed, runs)
    assert f"episode {i}, step {t}" in message
