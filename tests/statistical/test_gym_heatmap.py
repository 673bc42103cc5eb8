"""Heat maps over start states of Gymnasium environments, checked against plain scalar gymnasium loops (gym.make,
reset(seed), env.unwrapped.state = the cell's state, a deterministic heuristic policy, step): per-cell outcome counts
equal; observations after a set state against the environments' closed forms; the figure and its orientation."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest

from rlverify.errors import ModelError, OptionError
from rlverify.policies import CallablePolicy

PROPERTY = 'P=? [F<=200 "terminated"]'
AXES = "theta=0:0.1:3,theta_dot=0.5:1:3"
RUNS = 40
SEED = 7


def lean(obs: np.ndarray) -> np.ndarray:
    """CartPole heuristic: push right when the pole leans (or turns) right; weak enough to fail from some starts."""
    right = (obs[:, 2] + 0.1 * obs[:, 3]) > 0
    return np.stack([~right, right], axis=1).astype(np.float64)


def cartpole(vectorization: str = "auto"):
    from rlverify.models.gym_simulator import simulator_of

    return simulator_of(gym.make("CartPole-v1"), env_id="CartPole-v1", vectorization=vectorization)


def options(runs: int = RUNS, seed: int = SEED):
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.verify import StatisticalOptions

    return StatisticalOptions(
        method="clopper-pearson", runs=runs, simulation=SimulationOptions(seed=seed, mode="deterministic", max_steps=1000)
    )


def heat(vectorization: str = "auto", axes: str = AXES, runs: int = RUNS):
    from rlverify.statistical.gym_heatmap import gym_heatmap

    sim = cartpole(vectorization)
    policy = CallablePolicy(lean, sim.features, sim.actions, name="lean")
    return gym_heatmap(sim, policy, PROPERTY, axes, options(runs))


def scalar_failures(theta: float, theta_dot: float, seeds: list[int]) -> int:
    """Episodes of a plain CartPole loop that terminate within 200 steps from (x, x_dot drawn by reset(seed), theta,
    theta_dot)."""
    env = gym.make("CartPole-v1")
    failed = 0
    for seed in seeds:
        env.reset(seed=seed)
        x, x_dot, _, _ = env.unwrapped.state
        env.unwrapped.state = np.array([x, x_dot, theta, theta_dot])
        obs = np.array(env.unwrapped.state, dtype=np.float32)
        for _ in range(200):
            action = 1 if obs[2] + 0.1 * obs[3] > 0 else 0
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated:
                failed += 1
                break
            assert not truncated  # (CartPole-v1 truncates at 500)
    return failed


def cell_seeds(c: int, runs: int, seed: int) -> list[int]:
    """The environment seeds of cell c's episodes: run index c * 2**32 + i, seeded from the seed and that index (the
    documented mapping; the seed formula is the episode simulator's)."""
    from rlverify.statistical.episodes import episode_seeds

    return episode_seeds(seed, np.arange(runs, dtype=np.int64) + c * 2**32)


@pytest.fixture(scope="module")
def native_map():
    return heat("auto")


@pytest.mark.parametrize("vectorization", ["auto", "sync"])
def test_counts_per_cell_equal_a_scalar_gymnasium_loop(vectorization, native_map):
    r = native_map if vectorization == "auto" else heat("sync")
    cells = list(itertools.product(np.linspace(0, 0.1, 3), np.linspace(0.5, 1, 3)))
    assert len(r.estimate) == 9
    expected = [scalar_failures(th, thd, cell_seeds(c, RUNS, SEED)) for c, (th, thd) in enumerate(cells)]
    np.testing.assert_array_equal(r.satisfied, expected)
    np.testing.assert_array_equal(r.runs, RUNS)
    np.testing.assert_array_equal(r.undecided, 0)
    assert any(0 < k < RUNS for k in expected), expected  # the drawn x, x_dot matter: not all-or-nothing cells


def test_same_seed_same_map_and_cells_independent_of_the_grid(native_map):
    again = heat("auto", axes="theta=0:0.1:3,theta_dot=0.5:1:3")
    np.testing.assert_array_equal(again.satisfied, native_map.satisfied)
    np.testing.assert_array_equal(again.interval, native_map.interval)


def test_interval_is_clopper_pearson_of_the_counts(native_map):
    from scipy.stats import beta

    r = native_map
    for k, (lo, hi) in zip(r.satisfied.tolist(), r.interval.tolist(), strict=True):
        want_lo = 0.0 if k == 0 else beta.ppf(0.025, k, RUNS - k + 1)
        want_hi = 1.0 if k == RUNS else beta.ppf(0.975, k + 1, RUNS - k)
        assert lo == pytest.approx(want_lo, abs=1e-12) and hi == pytest.approx(want_hi, abs=1e-12)


def test_figure_orientation_labels_and_png_size(native_map, tmp_path):
    from PIL import Image

    from rlverify.statistical.gym_heatmap import gym_heatmap_figure

    r = native_map
    fig = gym_heatmap_figure(r)
    assert fig.x_label == "theta (rad)" and fig.y_label == "theta_dot (rad/s)"
    assert fig.panels[0].label == PROPERTY
    assert f"{RUNS} runs per cell" in fig.title and "width" in fig.title
    img = fig.panels[0].values
    for c, (th, thd) in enumerate(r.starts.tolist()):  # row: theta_dot, column: theta
        i, j = int(np.flatnonzero(fig.y_values == thd)[0]), int(np.flatnonzero(fig.x_values == th)[0])
        assert img[i, j] == r.satisfied[c] / RUNS
    out = fig.draw(tmp_path / "map.png", dpi=50)
    _, _, (w, h) = fig.layout()
    with Image.open(out) as png:
        assert png.size == (round(w * 50), round(h * 50))


@pytest.mark.parametrize(
    ("env_id", "columns", "values", "closed_form"),
    [
        ("Pendulum-v1", [0, 1], [0.7, -1.5], lambda s: [np.cos(s[0]), np.sin(s[0]), s[1]]),
        (
            "Acrobot-v1",
            [0, 3],
            [0.4, 2.0],
            lambda s: [np.cos(s[0]), np.sin(s[0]), np.cos(s[1]), np.sin(s[1]), s[2], s[3]],
        ),
        ("MountainCar-v0", [0], [-0.9], lambda s: list(s)),
        ("CartPole-v1", [2, 3], [0.1, -0.4], lambda s: list(s)),
    ],
)
def test_set_state_observation_and_next_step_against_a_scalar_env(env_id, columns, values, closed_form):
    from rlverify.models.gym_simulator import simulator_of
    from rlverify.models.gym_vector import open_vector, set_start_states

    sim = simulator_of(gym.make(env_id), env_id=env_id, vectorization="sync")
    vec = open_vector(sim, 3)
    try:
        seeds = [11, 12, 13]
        before = vec.reset(np.ones(3, dtype=bool), seeds).copy()
        obs = set_start_states(vec, np.array([0, 2]), columns, np.array([values, values]))
        np.testing.assert_array_equal(obs[1], before[1])  # a slot not set keeps its reset observation
        for slot in (0, 2):
            ref = gym.make(env_id)
            ref.reset(seed=seeds[slot])
            state = np.array(ref.unwrapped.state, dtype=np.float64)
            state[columns] = values
            np.testing.assert_allclose(obs[slot], np.float32(closed_form(state)), rtol=0, atol=1e-7)
            ref.unwrapped.state = state
            action = np.array([0.5]) if sim.continuous else 0
            want = ref.step(action)[0]
            actions = np.full((3, 1), 0.5, np.float32) if sim.continuous else np.zeros(3, dtype=np.int64)
            got = vec.step(actions, np.arange(3)).obs
            np.testing.assert_array_equal(got[slot], np.asarray(want, dtype=np.float64).ravel())
            vec.reset(np.ones(3, dtype=bool), seeds)
            set_start_states(vec, np.array([0, 2]), columns, np.array([values, values]))
    finally:
        vec.close()


def test_layout_names_and_units():
    from rlverify.models.gym_vector import state_layout

    layout = state_layout(gym.make("CartPole-v1"))
    assert [c.shown for c in layout.coordinates] == ["x (m)", "x_dot (m/s)", "theta (rad)", "theta_dot (rad/s)"]
    with pytest.raises(OptionError, match="did you mean 'theta'"):
        layout.index("thetaa")


class NoState(gym.Env):
    """An environment with no state rlverify knows how to set."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 0.0, True, False, {}


def test_env_without_settable_state_is_refused_in_one_line():
    from rlverify.models.gym_simulator import simulator_of
    from rlverify.statistical.gym_heatmap import gym_heatmap

    sim = simulator_of(NoState(), factory=NoState, shown="nostate")
    policy = CallablePolicy(lean, sim.features, sim.actions)
    with pytest.raises(ModelError, match=r"nostate: its state cannot be set \(NoState is neither") as err:
        gym_heatmap(sim, policy, PROPERTY, "x=0:1:2", options(2))
    assert "\n" not in str(err.value)


def doubled() -> gym.Env:
    env = gym.make("CartPole-v1")
    return gym.wrappers.TransformObservation(env, lambda o: o * 2, env.observation_space)


def test_a_wrapper_that_changes_the_observation_is_refused():
    from rlverify.models.gym_simulator import simulator_of
    from rlverify.statistical.gym_heatmap import gym_heatmap

    sim = simulator_of(doubled(), factory=doubled, shown="doubled")
    policy = CallablePolicy(lean, sim.features, sim.actions)
    with pytest.raises(ModelError, match="a wrapper"):
        gym_heatmap(sim, policy, PROPERTY, "theta=0:0.1:2", options(2))


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ("thetaa=0:1:3", "not a state coordinate of CartPoleEnv"),
        ("theta=0:1:0", "0 cells"),
        ("theta=-1:1:1000,theta_dot=-1:1:1000", "more than the guard"),
        ("theta=1:0:3", "above HIGH"),
        ("theta=0:inf:3", "finite"),
        ("", "one or two axes"),
        ("theta=0:1:2,theta=0:1:2", "twice"),
    ],
)
def test_bad_axes(axes, message):
    from rlverify.models.gym_vector import state_layout
    from rlverify.statistical.gym_heatmap import parse_axes

    with pytest.raises(OptionError, match=message):
        parse_axes(axes, state_layout(gym.make("CartPole-v1")))


def test_axis_values_in_order_ends_included():
    from rlverify.models.gym_vector import state_layout
    from rlverify.statistical.gym_heatmap import parse_axes

    (a,) = parse_axes("theta_dot=-1:1:5", state_layout(gym.make("CartPole-v1")))
    assert a.values == (-1.0, -0.5, 0.0, 0.5, 1.0) and a.index == 3 and a.unit == "rad/s"
