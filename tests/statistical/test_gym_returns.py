"""Expected returns of Gymnasium episodes (``R=? [C<=k]``) against a plain scalar Gymnasium loop and closed forms."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from scipy import stats

from rlverify.cli.main import main
from rlverify.errors import ModelError, OptionError, PropertyError
from rlverify.resolve import resolve_simulated
from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.episodes import episode_seeds
from rlverify.statistical.returns import estimate_return, return_bounds
from rlverify.statistical.verify import StatisticalOptions

POLICY = """
import numpy as np
FEATURES = ["obs[0]", "obs[1]", "obs[2]", "obs[3]"]
ACTIONS = ["0", "1"]
def push(obs):
    right = np.asarray(obs)[:, 2] > 0
    return np.stack([~right, right], axis=1).astype(float)
"""


def _push(obs: np.ndarray) -> int:
    return int(obs[2] > 0)


class _CostlyWalk(gym.Env):
    """A 1-D walk: +1/-1 per step, cost |x| in info, terminated at |x| = 3, time limit 20 (a test environment)."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (1,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = float(self.np_random.integers(-1, 2))
        return np.array([self.x]), {}

    def step(self, action):
        self.x += 1.0 if action == 1 else -1.0
        if self.np_random.random() < 0.3:
            self.x -= 1.0
        return np.array([self.x]), -0.5, abs(self.x) >= 3, False, {"cost": abs(self.x)}


gym.register("RlverifyCostlyWalk-v0", entry_point=_CostlyWalk, max_episode_steps=20)

WALK_POLICY = """
FEATURES = ["obs[0]"]
ACTIONS = ["0", "1"]
def walk(obs):
    import numpy as np
    return np.tile([0.0, 1.0], (len(obs), 1))
"""


def _episodes(
    env_id: str, seed: int, n: int, k: int | None, gamma: float, act=_push, reward: str = ""
) -> list[tuple[float, int, bool]]:
    """Each episode's (discounted return, steps, ended by the environment) by a scalar loop over its first ``k``
    steps, with a deterministic policy ``act``."""
    out = []
    for s in episode_seeds(seed, np.arange(n)):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=s)
        total, weight, t, ended = 0.0, 1.0, 0, False
        while k is None or t < k:
            obs, r, term, trunc, info = env.step(act(obs))
            total += weight * (info.get(reward, 0.0) if reward else float(r))
            weight *= gamma
            t += 1
            if term or trunc:
                ended = True
                break
        out.append((total, t, ended))
    return out


def _reference(env_id: str, seed: int, n: int, k: int | None, gamma: float) -> list[float]:
    return [r for r, _, _ in _episodes(env_id, seed, n, k, gamma)]


@pytest.fixture
def push_target(tmp_path):
    path = tmp_path / "push.py"
    path.write_text(POLICY)
    return lambda prop: resolve_simulated("gym:CartPole-v1", prop, policy=f"{path}:push")


@pytest.mark.parametrize("k,gamma", [(40, 1.0), (200, 0.97), (None, 1.0)])
def test_mean_return_equals_a_scalar_loop(push_target, k, gamma):
    prop = f"R=? [C<={k}]" if k is not None else "R=? [C]"
    t = push_target(prop)
    options = StatisticalOptions(method="clopper-pearson", runs=40, simulation=SimulationOptions(seed=7, mode="deterministic"))
    res = estimate_return(t.model, t.property, t.policy, options, discount=gamma)
    ref = np.array(_reference("CartPole-v1", 7, 40, k, gamma))
    assert res.counted == 40 and res.cut == 0
    assert res.estimate == pytest.approx(ref.mean(), rel=1e-12)
    lo, hi = stats.t.interval(0.95, 39, loc=ref.mean(), scale=ref.std(ddof=1) / math.sqrt(40))
    assert res.method == "student-t"
    assert res.interval == pytest.approx((lo, hi), rel=1e-9)


def test_hoeffding_interval_is_the_closed_form(push_target):
    t = push_target("R=? [C<=100]")
    options = StatisticalOptions(method="clopper-pearson", runs=30, simulation=SimulationOptions(seed=3, mode="deterministic"))
    res = estimate_return(t.model, t.property, t.policy, options, reward_range=(1.0, 1.0))
    ref = np.array(_reference("CartPole-v1", 3, 30, 100, 1.0))
    half = 100.0 * math.sqrt(math.log(2 / 0.05) / 60)  # (H - L) = 100 - 0, n = 30
    assert res.method == "hoeffding"
    assert res.interval == pytest.approx((ref.mean() - half, ref.mean() + half), rel=1e-12)


def test_return_bounds_closed_form():
    assert return_bounds((-1.0, 2.0), 1.0, 10) == (-10.0, 20.0)
    lo, hi = return_bounds((0.5, 3.0), 0.9, 5)
    assert lo == 0.0 and hi == pytest.approx(3.0 * sum(0.9**t for t in range(5)))


def test_cut_episodes_widen_a_hoeffding_interval(push_target):
    t = push_target("R=? [C<=300]")
    sim = SimulationOptions(seed=3, mode="deterministic", max_steps=35)
    res = estimate_return(
        t.model,
        t.property,
        t.policy,
        StatisticalOptions(method="clopper-pearson", runs=10, simulation=sim),
        reward_range=(1, 1),
    )
    ref = _episodes("CartPole-v1", 3, 10, 300, 1.0)
    # open after 35 steps: longer, or exactly 35 without the environment ending it
    cut = sum(1 for _, t, ended in ref if t > 35 or (t == 35 and not ended))
    assert 0 < res.cut == cut < 10
    known = [r for r, t, ended in ref if t < 35 or (t == 35 and ended)]
    half = 35 * math.sqrt(math.log(2 / 0.05) / 20)  # returns in [0, 35]: at most 35 steps of reward 1
    # clipped to the returns' range [0, 35], which holds the mean whatever happens
    assert res.interval[0] == pytest.approx(max(0.0, sum(known) / 10 - half))
    assert res.interval[1] == pytest.approx(min(35.0, (sum(known) + cut * 35) / 10 + half))
    assert res.interval[1] == 35.0  # here the upper end is the range's


def test_info_cost_is_summed(tmp_path):
    path = tmp_path / "walk.py"
    path.write_text(WALK_POLICY)
    t = resolve_simulated("gym:RlverifyCostlyWalk-v0", 'R{"cost"}=? [C<=15]', policy=f"{path}:walk")
    options = StatisticalOptions(method="wilson", runs=50, simulation=SimulationOptions(seed=5))
    res = estimate_return(t.model, t.property, t.policy, options, discount=0.9)
    ref = _episodes("RlverifyCostlyWalk-v0", 5, 50, 15, 0.9, act=lambda obs: 1, reward="cost")
    assert res.reward == "cost" and res.counted == 50
    assert res.estimate == pytest.approx(np.mean([r for r, _, _ in ref]), rel=1e-12)
    reward = resolve_simulated("gym:RlverifyCostlyWalk-v0", "R=? [C<=15]", policy=f"{path}:walk").property
    r = estimate_return(t.model, reward, t.policy, options)
    assert r.estimate == pytest.approx(-0.5 * np.mean([t for _, t, _ in ref]), rel=1e-12)  # -0.5 per step


def test_bad_inputs(push_target):
    t = push_target("R=? [C<=100]")
    with pytest.raises(OptionError, match="--discount"):
        estimate_return(t.model, t.property, t.policy, discount=0.0)
    with pytest.raises(OptionError, match="--discount"):
        estimate_return(t.model, t.property, t.policy, discount=1.5)
    with pytest.raises(ModelError, match="--reward-range is wrong"):
        estimate_return(t.model, t.property, t.policy, reward_range=(0.0, 0.5))
    with pytest.raises(OptionError, match="--reward-range"):
        estimate_return(t.model, t.property, t.policy, reward_range=(1.0, math.nan))
    with pytest.raises(PropertyError, match="Rmin/Rmax"):
        estimate_return(t.model, push_target("Rmax=? [C<=5]").property, t.policy)
    with pytest.raises(PropertyError, match="cumulative"):
        estimate_return(t.model, push_target('R=? [F "terminated"]').property, t.policy)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["-p", "R=? [C<=10]", "--reward-range", "2:1"], "LO <= HI"),
        (["-p", "R=? [C<=10]", "--reward-range", "0:0.01"], "--reward-range is wrong"),
        (["-p", "R=? [C<=10]", "--reward-range", "-1e308:1e308"], "the return's range is not a finite number"),
        (["-p", "R=? [C<=10]", "--sprt", "0.5"], "fixed number of episodes"),
        (["-p", 'P=? [F "terminated"]', "--discount", "0.9"], "apply to expected returns"),
    ],
)
def test_cli_refuses_in_one_line(tmp_path, capsys, extra, message):
    path = tmp_path / "push.py"
    path.write_text(POLICY)
    try:
        code = main(["simulate", "gym:CartPole-v1", "--policy", f"{path}:push", "--runs", "20", *extra])
    except SystemExit as exc:  # argparse's own refusal of a malformed value
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert message in err[-1] and not any("Traceback" in line for line in err)


def test_the_time_limit_bounds_a_hoeffding_range(tmp_path):
    # RlverifyCostlyWalk-v0's time limit is 20 steps: R=? [C] (no bound) sums at most 20 rewards of -0.5, so
    # Hoeffding's width is over [-10, 0], not over --max-steps (10,000) steps; the result says why
    path = tmp_path / "walk.py"
    path.write_text(WALK_POLICY)
    t = resolve_simulated("gym:RlverifyCostlyWalk-v0", "R=? [C]", policy=f"{path}:walk")
    options = StatisticalOptions(method="clopper-pearson", runs=50, simulation=SimulationOptions(seed=5))
    res = estimate_return(t.model, t.property, t.policy, options, reward_range=(-0.5, 0.0))
    ref = _episodes("RlverifyCostlyWalk-v0", 5, 50, None, 1.0, act=lambda obs: 1)
    mean = float(np.mean([r for r, _, _ in ref]))
    half = 10.0 * math.sqrt(math.log(2 / 0.05) / 100)
    assert res.estimate == pytest.approx(mean, rel=1e-12)
    assert res.interval == pytest.approx((max(-10.0, mean - half), min(0.0, mean + half)), rel=1e-12)
    assert any("time limit" in w for w in res.provenance.warnings)
