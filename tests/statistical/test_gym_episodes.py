"""The Gymnasium episode simulator against a plain scalar loop, episode by episode.

The reference (:func:`reference`) shares no code with rlverify's simulator: one ``gymnasium.make(id)`` per episode,
``reset(seed=episode_seeds(seed, [i])[0])`` (the documented seed of episode ``i``), the policy written again as a
scalar rule, ``step`` until the property is decided in the documented order: satisfied when ``right`` holds;
violated when ``left`` fails, the episode terminated, or the bound is reached; undecided when it was truncated or
ran ``max_steps`` steps. Each test compares every episode's outcome and step count exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlverify.resolve import resolve
from rlverify.statistical.engine import RunOutcomes, SimulationOptions, simulate
from rlverify.statistical.episodes import episode_seeds
from rlverify.statistical.simulated import prepare
from rlverify.statistical.verify import StatisticalOptions, verify_statistical
from tests.gym_fixtures import CARTPOLE_POLICIES


@dataclass(frozen=True)
class Row:
    """One step of an episode as the documentation describes it (after ``t`` steps)."""

    obs: np.ndarray
    reward: float
    terminated: bool
    truncated: bool
    t: int


Condition = Callable[[Row], bool]


def always(_: Row) -> bool:
    return True


def reference(
    env_id: str,
    act: Callable[[np.ndarray], int],
    seeds: list[int],
    *,
    right: Condition,
    left: Condition = always,
    bound: int | None = None,
    max_steps: int = 10_000,
) -> tuple[list[int], list[int]]:
    """Per episode (one per seed): outcome (1 satisfied, 0 violated, -1 undecided) and steps taken."""
    outcomes, steps = [], []
    for seed in seeds:
        env = gym.make(env_id)
        obs, _ = env.reset(seed=seed)
        row = Row(np.asarray(obs, dtype=np.float64), 0.0, False, False, 0)
        while True:
            if right(row):
                outcome = 1
            elif not left(row) or row.terminated or (bound is not None and row.t >= bound):
                outcome = 0
            elif row.truncated or row.t >= max_steps:
                outcome = -1
            else:
                obs, reward, terminated, truncated, _ = env.step(act(row.obs))
                row = Row(np.asarray(obs, dtype=np.float64), float(reward), bool(terminated), bool(truncated), row.t + 1)
                continue
            break
        env.close()
        outcomes.append(outcome)
        steps.append(row.t)
    return outcomes, steps


# the policies of tests.gym_fixtures.CARTPOLE_POLICIES, written again as scalar rules
def balance(o: np.ndarray) -> int:
    return int(o[2] + 0.3 * o[3] + 0.01 * o[0] + 0.1 * o[1] > 0)


def lean(o: np.ndarray) -> int:
    return int(o[2] > 0)


ACROBOT = """
import numpy as np
FEATURES = [f"obs[{i}]" for i in range(6)]
ACTIONS = ["0", "1", "2"]
def swing(obs):
    out = np.zeros((len(obs), 3))
    out[np.arange(len(obs)), np.where(obs[:, 5] > 0, 2, 0)] = 1.0
    return out
"""

MOUNTAIN_CAR = """
import numpy as np
FEATURES = ["obs[0]", "obs[1]"]
ACTIONS = ["0", "1", "2"]
def pump(obs):
    out = np.zeros((len(obs), 3))
    out[np.arange(len(obs)), np.where(obs[:, 1] >= 0, 2, 0)] = 1.0
    return out
def right(obs):
    out = np.zeros((len(obs), 3))
    out[:, 2] = 1.0
    return out
"""


def swing(o: np.ndarray) -> int:
    return 2 if o[5] > 0 else 0


def pump(o: np.ndarray) -> int:
    return 2 if o[1] >= 0 else 0


def push_right(o: np.ndarray) -> int:
    return 2


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gym_policies")
    files = {"cartpole": CARTPOLE_POLICIES, "acrobot": ACROBOT, "mountaincar": MOUNTAIN_CAR}
    for name, text in files.items():
        (d / f"{name}.py").write_text(text)
    return {name: d / f"{name}.py" for name in files}


def rlverify_outcomes(
    target: str,
    policy: str,
    prop: str,
    runs: int,
    *,
    seed: int,
    labels: list[str] | None = None,
    vectorization: str | None = None,
    mode: str = "deterministic",
    max_steps: int = 10_000,
    batch_size: int = 20_000,
    run_ids: np.ndarray | None = None,
) -> RunOutcomes:
    t = resolve(target, policy=policy, property=prop, labels=labels, vectorization=vectorization, command="test")
    env, path, _ = prepare(t.model, t.property, actions=t.policy.actions)
    ids = np.arange(runs) if run_ids is None else run_ids
    options = SimulationOptions(seed=seed, mode=mode, max_steps=max_steps, batch_size=batch_size)
    return simulate(env, t.policy, path, ids, options=options)


TILTED = "tilted=abs(obs[2]) > 0.1"
CENTERED = "centered=abs(obs[0]) < 0.05"


def tilted(r: Row) -> bool:
    return abs(r.obs[2]) > 0.1


def centered(r: Row) -> bool:
    return abs(r.obs[0]) < 0.05


def terminated(r: Row) -> bool:
    return r.terminated


CARTPOLE_CASES = {
    # id: (policy, its scalar rule, property, labels, reference conditions, max_steps)
    "F<=40 terminated": ("lean", lean, 'P=? [F<=40 "terminated"]', None, {"right": terminated, "bound": 40}, 10_000),
    "F<=30 tilted": ("lean", lean, 'P=? [F<=30 "tilted"]', [TILTED], {"right": tilted, "bound": 30}, 10_000),
    "centered U<=60 tilted": (
        "lean",
        lean,
        'P=? ["centered" U<=60 "tilted"]',
        [TILTED, CENTERED],
        {"right": tilted, "left": centered, "bound": 60},
        10_000,
    ),
    "!tilted U terminated": (
        "lean",
        lean,
        'P=? [!"tilted" U "terminated"]',
        [TILTED],
        {"right": terminated, "left": lambda r: not tilted(r)},
        10_000,
    ),
    "truncated at 500: undecided": ("balance", balance, 'P=? [F "terminated"]', None, {"right": terminated}, 10_000),
    "max-steps 120: undecided": ("balance", balance, 'P=? [F "terminated"]', None, {"right": terminated}, 120),
    "late reward label": (
        "lean",
        lean,
        'P=? [F "late"]',
        ["late=step >= 35 & reward > 0.5 & !truncated"],
        {"right": lambda r: r.t >= 35 and r.reward > 0.5 and not r.truncated},
        10_000,
    ),
}


@pytest.mark.parametrize("vectorization", ["auto", "sync"])
@pytest.mark.parametrize("case", list(CARTPOLE_CASES), ids=list(CARTPOLE_CASES))
def test_cartpole_matches_the_scalar_loop(policies, case, vectorization):
    name, rule, prop, labels, conditions, max_steps = CARTPOLE_CASES[case]
    runs, seed = 40, 11
    got = rlverify_outcomes(
        "gym:CartPole-v1",
        f"{policies['cartpole']}:{name}",
        prop,
        runs,
        seed=seed,
        labels=labels,
        vectorization=vectorization,
        max_steps=max_steps,
        batch_size=16,
    )
    want, steps = reference("CartPole-v1", rule, episode_seeds(seed, np.arange(runs)), max_steps=max_steps, **conditions)
    assert got.outcome.tolist() == want
    assert got.steps.tolist() == steps


def test_cartpole_cases_are_not_trivial():
    """The reference outcomes of the cases above are mixed where they should be (else a case checks little)."""
    seeds = episode_seeds(11, np.arange(40))
    mixed, _ = reference("CartPole-v1", lean, seeds, right=terminated, bound=40)
    assert 0 < sum(mixed) < 40
    until, _ = reference("CartPole-v1", lean, seeds, right=tilted, left=centered, bound=60)
    assert 0 < sum(until) < 40
    cut, steps = reference("CartPole-v1", balance, seeds, right=terminated)
    assert cut == [-1] * 40 and steps == [500] * 40


def test_g_bounded_is_the_complement_of_f_bounded(policies):
    """G<=k is not a supported form (refused, see test_gym_cli); its value is 1 - P(F<=k !phi): the counts of
    F<=k "tilted" are the reference's, so the complement is too."""
    runs, seed = 40, 5
    got = rlverify_outcomes(
        "gym:CartPole-v1", f"{policies['cartpole']}:lean", 'P=? [F<=25 "tilted"]', runs, seed=seed, labels=[TILTED]
    )
    want, _ = reference("CartPole-v1", lean, episode_seeds(seed, np.arange(runs)), right=tilted, bound=25)
    stays_upright = [1 - w for w in want]  # G<=25 !tilted, per episode
    assert int((got.outcome == 0).sum()) == sum(stays_upright) and 0 < sum(stays_upright) < runs


def test_acrobot_matches_the_scalar_loop(policies):
    runs, seed = 12, 2
    got = rlverify_outcomes(
        "gym:Acrobot-v1",
        f"{policies['acrobot']}:swing",
        'P=? [F<=80 "terminated"]',
        runs,
        seed=seed,
        vectorization="sync",
        batch_size=5,
    )
    want, steps = reference("Acrobot-v1", swing, episode_seeds(seed, np.arange(runs)), right=terminated, bound=80)
    assert got.outcome.tolist() == want and got.steps.tolist() == steps
    assert 0 < sum(want) < runs


@pytest.mark.parametrize(
    ("name", "rule", "prop", "labels", "conditions"),
    [
        ("pump", pump, 'P=? [F<=110 "terminated"]', None, {"right": terminated, "bound": 110}),
        (
            "pump",
            pump,
            'P=? [!"far" U "terminated"]',
            ["far=obs[0] < -1.0"],
            {"right": terminated, "left": lambda r: not r.obs[0] < -1.0},
        ),
        ("right", push_right, 'P=? [F "terminated"]', None, {"right": terminated}),  # truncated at 200: undecided
    ],
    ids=["F<=110", "!far U terminated", "never arrives"],
)
def test_mountain_car_matches_the_scalar_loop(policies, name, rule, prop, labels, conditions):
    runs, seed = 12, 4
    got = rlverify_outcomes(
        "gym:MountainCar-v0",
        f"{policies['mountaincar']}:{name}",
        prop,
        runs,
        seed=seed,
        labels=labels,
        vectorization="sync",
        batch_size=5,
    )
    want, steps = reference("MountainCar-v0", rule, episode_seeds(seed, np.arange(runs)), **conditions)
    assert got.outcome.tolist() == want and got.steps.tolist() == steps


def test_an_episode_does_not_depend_on_the_others(policies):
    """Episodes 3, 17 and 31 alone (in one batch of three) are what they are among 40 (batch 16)."""
    spec = (f"{policies['cartpole']}:soft", 'P=? [F<=60 "terminated"]')
    every = rlverify_outcomes("gym:CartPole-v1", *spec, 40, seed=9, mode="stochastic", batch_size=16)
    ids = np.array([31, 3, 17])
    few = rlverify_outcomes("gym:CartPole-v1", *spec, 3, seed=9, mode="stochastic", run_ids=ids)
    assert few.outcome.tolist() == every.outcome[ids].tolist() and few.steps.tolist() == every.steps[ids].tolist()


# ------------------------------------------------------------------------------------------------ invariance


def estimate(policies, *, vectorization: str, batch_size: int, seed: int = 21, runs: int = 60):
    t = resolve(
        "gym:CartPole-v1",
        policy=f"{policies['cartpole']}:soft",
        property='P=? [F<=80 "terminated"]',
        vectorization=vectorization,
        command="test",
    )
    sim = SimulationOptions(seed=seed, mode="stochastic", batch_size=batch_size)
    options = StatisticalOptions(method="clopper-pearson", runs=runs, simulation=sim)
    return verify_statistical(t.model, t.property, t.policy, options)


def test_stochastic_policy_depends_on_its_random_numbers(policies):
    """The stochastic policy's episodes differ from its argmax's (else the invariance below checks the seeds only)."""
    spec = (f"{policies['cartpole']}:soft", 'P=? [F<=80 "terminated"]')
    stochastic = rlverify_outcomes("gym:CartPole-v1", *spec, 60, seed=21, mode="stochastic")
    greedy = rlverify_outcomes("gym:CartPole-v1", *spec, 60, seed=21, mode="deterministic")
    assert stochastic.steps.tolist() != greedy.steps.tolist()
    other_seed = rlverify_outcomes("gym:CartPole-v1", *spec, 60, seed=22, mode="stochastic")
    assert stochastic.steps.tolist() != other_seed.steps.tolist()


@pytest.mark.parametrize(
    ("vectorization", "batch_size"),
    [("native", 1), ("native", 7), ("sync", 1), ("sync", 7), ("sync", 300), ("async", 7)],
)
def test_estimate_and_counts_do_not_depend_on_batching(policies, vectorization, batch_size):
    base = estimate(policies, vectorization="native", batch_size=300)
    other = estimate(policies, vectorization=vectorization, batch_size=batch_size)
    for field in ("estimate", "interval", "runs", "successes", "undecided", "stalled", "decisions"):
        assert getattr(other, field) == getattr(base, field), field
    assert 0 < base.successes < base.runs


def test_per_episode_outcomes_do_not_depend_on_vectorization(policies):
    spec = (f"{policies['cartpole']}:soft", 'P=? [F<=80 "terminated"]')
    native = rlverify_outcomes("gym:CartPole-v1", *spec, 50, seed=8, mode="stochastic", vectorization="native")
    for vec, batch in (("sync", 7), ("async", 3)):
        other = rlverify_outcomes("gym:CartPole-v1", *spec, 50, seed=8, mode="stochastic", vectorization=vec, batch_size=batch)
        assert other.outcome.tolist() == native.outcome.tolist(), vec
        assert other.steps.tolist() == native.steps.tolist(), vec


def test_native_with_env_kwargs_is_the_environment_with_them(policies):
    """``sutton_barto_reward=True`` (reward -1 on the terminating step, else 0) through the native implementation
    and through copies of ``gymnasium.make(..., sutton_barto_reward=True)`` read the same rewards."""
    spec = (f"{policies['cartpole']}:lean", 'P=? [F "penalised"]')
    outs = []
    for vec in ("native", "sync"):
        t = resolve(
            "gym:CartPole-v1",
            policy=spec[0],
            property=spec[1],
            labels=["penalised=reward < -0.5"],
            vectorization=vec,
            env_kwargs="sutton_barto_reward=true",
            command="test",
        )
        env, path, _ = prepare(t.model, t.property, actions=t.policy.actions)
        outs.append(simulate(env, t.policy, path, np.arange(20), options=SimulationOptions(seed=1, mode="deterministic")))
    seeds = episode_seeds(1, np.arange(20))
    want, steps = [], []
    for s in seeds:  # the reference: the penalised step is the terminating one
        env = gym.make("CartPole-v1", sutton_barto_reward=True)
        obs, _ = env.reset(seed=s)
        t, r, term, trunc = 0, 0.0, False, False
        while r > -0.5 and not (term or trunc):
            obs, r, term, trunc, _ = env.step(lean(np.asarray(obs, dtype=np.float64)))
            t += 1
        want.append(1 if r < -0.5 else -1 if trunc else 0)
        steps.append(t)
    for out in outs:
        assert out.outcome.tolist() == want and out.steps.tolist() == steps


# ------------------------------------------------------------------------------------------------ SB3


@pytest.fixture(scope="module")
def ppo_cartpole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    sb3 = pytest.importorskip("stable_baselines3")
    torch.set_num_threads(1)
    model = sb3.PPO(
        "MlpPolicy",
        "CartPole-v1",
        seed=0,
        n_steps=512,
        batch_size=64,
        n_epochs=4,
        verbose=0,
        device="cpu",
        policy_kwargs={"net_arch": [32, 32]},
    )
    model.learn(6000)
    path = tmp_path_factory.mktemp("ppo") / "ppo_cartpole.zip"
    model.save(path)
    return path


@pytest.mark.slow
def test_sb3_ppo_episodes_match_its_own_predict(ppo_cartpole):
    """rlverify's deterministic mode on the zip, episode by episode, against SB3's ``predict(deterministic=True)``
    in the scalar loop (same seeds)."""
    from stable_baselines3 import PPO

    model = PPO.load(ppo_cartpole, device="cpu")
    runs, seed = 30, 6
    got = rlverify_outcomes("gym:CartPole-v1", str(ppo_cartpole), 'P=? [F<=200 "terminated"]', runs, seed=seed)

    def act(o: np.ndarray) -> int:
        return int(model.predict(o.astype(np.float32), deterministic=True)[0])

    want, steps = reference("CartPole-v1", act, episode_seeds(seed, np.arange(runs)), right=terminated, bound=200)
    assert got.outcome.tolist() == want and got.steps.tolist() == steps
    assert 0 < sum(want) < runs


@pytest.mark.slow
def test_sb3_ppo_estimate_agrees_with_evaluate_policy(ppo_cartpole):
    """The estimate of P=? [F<=200 "terminated"] (deterministic) and SB3's ``evaluate_policy`` episode lengths
    (< 200: terminated before the bound; other starts, so a statistical comparison): the intervals overlap."""
    from scipy.stats import beta
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    model = PPO.load(ppo_cartpole, device="cpu")
    env = Monitor(gym.make("CartPole-v1"))
    env.reset(seed=123)
    n = 100
    _, lengths = evaluate_policy(model, env, n_eval_episodes=n, deterministic=True, return_episode_rewards=True)
    k = sum(1 for x in lengths if x <= 200 and x < 500)  # terminated within 200 steps (length 200: the 200th step)
    sb3_lo = beta.ppf(0.005, k, n - k + 1) if k else 0.0
    sb3_hi = beta.ppf(0.995, k + 1, n - k) if k < n else 1.0
    t = resolve("gym:CartPole-v1", policy=str(ppo_cartpole), property='P=? [F<=200 "terminated"]', command="test")
    sim = SimulationOptions(seed=2, mode="deterministic")
    options = StatisticalOptions(method="clopper-pearson", runs=400, delta=0.01, simulation=sim)
    res = verify_statistical(t.model, t.property, t.policy, options)
    assert res.undecided == 0
    lo, hi = res.interval
    assert lo <= sb3_hi and sb3_lo <= hi, ((lo, hi), (sb3_lo, sb3_hi), k)
