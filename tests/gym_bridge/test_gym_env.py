"""The Gymnasium bridge: Gymnasium's own checker, semantics by hand, agreement with the exact engine, bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks import all_ids, make, spec
from rlverify.benchmarks.discrete import data_path
from rlverify.errors import PropertyError, RlverifyError
from rlverify.gym import EnvError, MDPEnv, UnavailableActionError, VectorMDPEnv, load_dynamics
from rlverify.models import load_model
from rlverify.policies import CallablePolicy

RUNNING = data_path("models/running_example.prism")
PRISM_IDS = [i for i in all_ids() if spec(i).kind == "prism"]


@pytest.fixture(scope="module")
def avoid_small():
    return make("avoid-v1", xMax=2, yMax=2, slickness=0.1).load_model()


@pytest.mark.parametrize("bench_id", PRISM_IDS)
def test_check_env_on_every_prism_benchmark(bench_id):
    env = MDPEnv.from_benchmark(bench_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker's warnings are failures too
        check_env(env, skip_render_check=True)


def test_check_env_with_unavailable_actions():
    # no terminal condition: D (x=4), where UP is unavailable, is part of the episode
    env = MDPEnv.from_model(RUNNING, reward="steps", unavailable="stall", max_episode_steps=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


def test_check_env_renormalize_mode(avoid_small):
    env = MDPEnv.from_model(avoid_small, reward="reward", terminal="COLLISION=true", unavailable="renormalize")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


def test_observations_follow_the_requested_feature_order(avoid_small):
    features = ("y", "x", "obstacle2_y", "done")
    env = MDPEnv.from_model(avoid_small, features=features, terminal="COLLISION=true", reward="reward")
    obs, info = env.reset(seed=3)
    assert obs.shape == (4,) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs, [0, 0, 2, 0])  # agent at (0,0), obstacles at (xMax, yMax)
    for _ in range(30):
        obs, _, term, trunc, info = env.step(env.action_space.sample())
        vals = env.dynamics.model.valuation_dict(info["state"])
        np.testing.assert_array_equal(obs, [vals[f] for f in features])
        assert env.observation_space.contains(obs)
        if term or trunc:
            obs, info = env.reset()


def test_actions_are_named_and_ordered_as_asked(avoid_small):
    env = MDPEnv.from_model(avoid_small, actions=("west", "east", "north", "south"), terminal="COLLISION=true")
    assert env.action_names == ("west", "east", "north", "south")
    env.reset(seed=0)
    model = env.dynamics.model
    x = model.variables.index("x")
    # "east" (index 1) from x=0 moves right with probability 0.9; "west" (index 0) never does
    moved_east = moved_west = 0
    for seed in range(300):
        env.reset(seed=seed)
        _, _, _, _, info = env.step(1)
        moved_east += model.valuations[info["state"], x] == 1
        env.reset(seed=seed)
        _, _, _, _, info = env.step(0)
        moved_west += model.valuations[info["state"], x] != 0
    assert moved_west == 0
    assert 0.8 < moved_east / 300 < 0.97


def test_running_example_by_hand():
    """UP from A goes to B with 0.2 and to C with 0.8; the "steps" reward is 1 per action."""
    venv = VectorMDPEnv.from_model(RUNNING, 20_000, reward="steps", terminal='"goal"')
    obs, _ = venv.reset(seed=7)
    assert (obs[:, 0] == 1).all()
    up = venv.action_names.index("UP")
    obs, rewards, term, trunc, _ = venv.step(np.full(20_000, up))
    np.testing.assert_array_equal(rewards, 1.0)
    frac_b = np.mean(obs[:, 0] == 2)
    assert set(np.unique(obs[:, 0])) == {2.0, 3.0}
    assert abs(frac_b - 0.2) < 4 * np.sqrt(0.2 * 0.8 / 20_000)
    assert not term.any() and not trunc.any()


def test_same_seed_same_episode_and_different_seeds_differ(avoid_small):
    def episode(seed):
        env = MDPEnv.from_model(avoid_small, terminal="COLLISION=true", reward="reward", max_episode_steps=50)
        env.reset(seed=seed)
        states = []
        for t in range(50):
            _, _, term, trunc, info = env.step(t % 4)
            states.append(info["state"])
            if term or trunc:
                break
        return states

    assert episode(11) == episode(11)
    assert len({tuple(episode(s)) for s in range(5)}) > 1


def test_stall_ends_the_episode_and_is_reported():
    env = MDPEnv.from_model(RUNNING, reward="steps", unavailable="stall")
    env.reset(seed=0)
    names = env.action_names
    # walk to D: UP twice from A reaches D (A->B/C, then B/C -> C/D ...); use the state's valuation
    x_col = env.dynamics.model.variables.index("x")
    for _ in range(200):
        if env.dynamics.model.valuations[env.state, x_col] == 4:
            break
        env.step(names.index("UP"))
    assert env.dynamics.model.valuations[env.state, x_col] == 4
    assert not env.action_masks()[names.index("UP")]
    obs, reward, term, trunc, info = env.step(names.index("UP"))
    assert term and not trunc and info["stalled"] and reward == 0.0
    assert obs[0] == 4  # the stalled state keeps its observation
    with pytest.raises(EnvError, match="call reset"):
        env.step(names.index("NOP"))


def test_renormalize_refuses_unavailable_actions_and_offers_a_mask():
    env = MDPEnv.from_model(RUNNING, reward="steps", unavailable="renormalize")
    env.reset(seed=0)
    names = env.action_names
    x_col = env.dynamics.model.variables.index("x")
    while env.dynamics.model.valuations[env.state, x_col] != 4:
        env.step(names.index("UP"))
    mask = env.action_masks()
    assert mask.tolist() == [a != "UP" for a in names]
    with pytest.raises(UnavailableActionError, match=r"action 'UP' is not available in state \{'x': 4\}"):
        env.step(names.index("UP"))


def test_terminal_expression_and_label_give_the_same_states(avoid_small):
    by_expr = load_dynamics(avoid_small, terminal="COLLISION=true")
    by_label = load_dynamics(avoid_small, terminal='"collide"')
    for dyn in (by_expr, by_label):
        m = dyn.model
        v = {name: m.valuations[:, i] for i, name in enumerate(m.variables)}
        collision = ((v["obstacle1_x"] == v["x"]) & (v["obstacle1_y"] == v["y"])) | (
            (v["obstacle2_x"] == v["x"]) & (v["obstacle2_y"] == v["y"])
        )
        np.testing.assert_array_equal(dyn.terminal & ~dyn.dead_end, collision & ~dyn.dead_end)
        assert collision[dyn.terminal].all()
    assert by_expr.num_states == by_label.num_states


def test_monte_carlo_agrees_with_the_exact_engine(avoid_small):
    """P(collision within 10 steps) under uniform random actions: simulation vs Storm on the induced chain."""
    actions = ("east", "north", "south", "west")
    policy = CallablePolicy(lambda x: np.full((len(x), 4), 0.25), avoid_small.variables, actions)
    exact = verify_exact(avoid_small, "P=? [F<=10 COLLISION=true]", policy, ExactOptions(mode="stochastic")).value
    n = 40_000
    venv = VectorMDPEnv.from_model(avoid_small, n, terminal="COLLISION=true", reward="reward", max_episode_steps=10)
    venv.reset(seed=2024)
    rng = np.random.default_rng(5)
    collided = np.zeros(n, dtype=bool)
    finished = np.zeros(n, dtype=bool)
    for _ in range(10):
        _, _, term, trunc, _ = venv.step(rng.integers(4, size=n))
        collided |= term & ~finished
        finished |= term | trunc
    assert finished.all()
    estimate = collided.mean()
    assert abs(estimate - exact) < 4.5 * np.sqrt(exact * (1 - exact) / n), (estimate, exact)


def test_vector_env_autoresets_in_the_same_step(avoid_small):
    venv = VectorMDPEnv.from_model(avoid_small, 64, terminal="COLLISION=true", reward="reward", max_episode_steps=5)
    obs, info = venv.reset(seed=1)
    assert obs.shape == (64, len(venv.dynamics.features)) and venv.observation_space.contains(obs)
    init = int(avoid_small_init(venv))
    saw_done = False
    for _ in range(6):
        obs, rew, term, trunc, info = venv.step(venv.action_space.sample())
        assert rew.shape == term.shape == trunc.shape == (64,)
        done = term | trunc
        if done.any():
            saw_done = True
            assert (info["_final_obs"] == done).all()
            np.testing.assert_array_equal(info["state"][done], init)  # reset in the same step
            np.testing.assert_array_equal(info["final_obs"][done], venv.dynamics.observations[info["final_state"][done]])
            assert venv.dynamics.terminal[info["final_state"][term]].all()
    assert saw_done  # max_episode_steps=5 forces truncations


def avoid_small_init(venv):
    return venv.dynamics.model.initial_states[0]


def test_vector_env_same_seed_same_trajectories(avoid_small):
    def run(seed):
        venv = VectorMDPEnv.from_model(avoid_small, 32, terminal="COLLISION=true", max_episode_steps=20)
        venv.reset(seed=seed)
        out = []
        for t in range(20):
            obs, *_ = venv.step(np.full(32, t % 4))
            out.append(obs)
        return np.stack(out)

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"reward": "rewards"}, "unknown reward model 'rewards' (did you mean 'reward'?)"),
        ({"terminal": '"colide"'}, 'unknown label "colide"'),
        ({"features": ("x", "z")}, "features ['z'] are not model variables"),
        ({"actions": ("north", "up")}, "action 'up' is not an action of the model"),
        ({"unavailable": "skip"}, "unavailable: expected one of stall, renormalize"),
        ({"terminal": '"collide" | x=1'}, "expected one label or one expression"),
    ],
)
def test_bad_input(avoid_small, kwargs, needle):
    with pytest.raises(RlverifyError) as err:  # EnvError, or PropertyError for an unknown label
        load_dynamics(avoid_small, **kwargs)
    assert needle in str(err.value)


def test_bad_terminal_expression_names_the_problem(avoid_small):
    with pytest.raises(PropertyError, match="unknown name 'colision'"):
        load_dynamics(avoid_small, terminal="colision=true")


def test_bad_actions_and_lengths(avoid_small):
    env = MDPEnv.from_model(avoid_small, terminal="COLLISION=true")
    env.reset(seed=0)
    with pytest.raises(EnvError, match=r"action 4 is not in 0..3"):
        env.step(4)
    venv = VectorMDPEnv.from_model(avoid_small, 3, terminal="COLLISION=true")
    venv.reset(seed=0)
    with pytest.raises(EnvError, match="expected 3 actions"):
        venv.step([0, 1])
    with pytest.raises(EnvError, match="num_envs must be positive"):
        VectorMDPEnv(venv.dynamics, 0)


def test_benchmark_overrides_and_non_prism_refusal():
    env = MDPEnv.from_benchmark("avoid-v1", {"xMax": 2, "yMax": 2}, max_episode_steps=7)
    assert env.max_episode_steps == 7
    assert env.dynamics.observations.shape[0] == 9**3
    with pytest.raises(RlverifyError, match="out of range"):
        MDPEnv.from_benchmark("avoid-v1", {"xMax": 0})


FORCED = """mdp
module m
  x : [0..3] init 0;
  [go]   x=0 -> (x'=1);
  [stay] x=0 -> true;
  []     x=1 -> (x'=2);
  [go]   x=2 -> (x'=3);
  [stay] x=2 -> true;
  []     x=3 -> true;
endmodule
label "goal" = x=3;
"""


def test_forced_unlabelled_step_is_taken_as_in_the_verifier(tmp_path):
    # x=1 offers a single unlabelled command: the verifier follows it, so the env must too
    path = tmp_path / "forced.prism"
    path.write_text(FORCED)
    env = MDPEnv.from_model(path, max_episode_steps=10)
    go = env.action_names.index("go")
    env.reset(seed=0)
    xs = []
    for _ in range(3):
        obs, _, term, trunc, info = env.step(go)
        xs.append(int(obs[0]))
        if term or trunc:
            break
    assert xs == [1, 2, 3]
    assert term and not info.get("stalled", False)  # x=3 is absorbing: a dead end
    always_go = CallablePolicy(lambda s: np.tile([1.0, 0.0], (len(s), 1)), features=["x"], actions=["go", "stay"])
    exact = verify_exact(load_model(path), 'P=? [F "goal"]', always_go, ExactOptions())
    assert exact.value == pytest.approx(1.0)


def test_several_unlabelled_choices_become_command_named_actions(tmp_path):
    path = tmp_path / "nondet.prism"
    path.write_text(FORCED.replace("[]     x=1 -> (x'=2);", "[]     x=1 -> (x'=2);\n  [] x=1 -> (x'=0);"))
    env = MDPEnv.from_model(path, max_episode_steps=10)
    assert env.action_names == ("go", "stay", "m:3", "m:4")  # x=1's two unlabelled commands, by name
    env.reset(seed=0)
    obs, _, _, _, info = env.step(env.action_names.index("go"))
    assert int(obs[0]) == 1 and info["action_mask"].tolist() == [False, False, True, True]
    obs, _, _, _, _ = env.step(env.action_names.index("m:4"))
    assert int(obs[0]) == 0  # the command back to 0
    # an agent without the command names is asked at x=1 and has nothing available there: it stalls
    env = MDPEnv.from_model(path, actions=("go", "stay"), max_episode_steps=10)
    env.reset(seed=0)
    env.step(0)
    _, _, term, _, info = env.step(0)
    assert term and info["stalled"]


def test_a_single_labelled_choice_the_agent_lacks_stalls_as_in_the_verifier(tmp_path):
    path = tmp_path / "lacks.prism"
    path.write_text(FORCED.replace("[]     x=1 -> (x'=2);", "[jump] x=1 -> (x'=2);"))
    env = MDPEnv.from_model(path, actions=("go", "stay"), max_episode_steps=10)
    env.reset(seed=0)
    obs, _, term, _, info = env.step(env.action_names.index("go"))
    assert int(obs[0]) == 1 and not term
    obs, _, term, _, info = env.step(env.action_names.index("go"))
    assert term and info["stalled"]  # 'jump' is x=1's only action, and not the agent's
