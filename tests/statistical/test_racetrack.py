"""Racetrack: parser errors, the move semantics by hand, features, explicit MDP vs native simulation vs Storm."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.models.racetrack import (
    ACTIONS,
    FEATURES,
    RacetrackEnv,
    TrackError,
    build_racetrack_mdp,
    load_track,
    move,
    parse_track,
)
from rlverify.models.racetrack.env import AT_GOAL, CRASHED, DRIVING

# x = column, y = row (0 at the top)
CORRIDOR = """dim: 3 7
xxxxxxx
s..x.gx
xxxxxxx
"""
OPEN = """dim: 5 6
......
.s....
......
...x..
.....g
"""


def state(x, y, vx=0, vy=0):
    return np.array([[x, y, vx, vy, DRIVING]], dtype=np.int64)


def moved(track, x, y, vx, vy):
    return move(track, state(x, y), np.array([[vx, vy]]))[0].tolist()


@pytest.mark.parametrize(
    "text,line,col,what",
    [
        ("", 1, 1, "dim"),
        ("size: 2 2\n..\n.g\n", 1, 1, "dim"),
        ("dim: 2 z\n..\n.g\n", 1, 8, "COLS"),
        ("dim: 2 3\n...\n.g\n", 3, 3, "2 cells"),
        ("dim: 2 3\n...\n.gq\n", 3, 3, "unknown cell 'q'"),
        ("dim: 3 2\n..\n.g\n", 4, 1, "expected 3 map rows"),
        ("dim: 1 2\n..\n.g\n", 3, 1, "more map rows"),
        ("dim: 2 2\n..\n..\n", 2, 1, "no goal"),
    ],
)
def test_malformed_tracks_name_line_and_column(text, line, col, what):
    with pytest.raises(TrackError) as exc:
        parse_track(text, source="t.track")
    msg = str(exc.value)
    assert f"t.track: line {line}, column {col}" in msg
    assert what in msg


def test_shipped_maps_parse():
    for name, shape in (("barto-small", (12, 35)), ("barto-big", (33, 30)), ("ring", (45, 50))):
        from rlverify.benchmarks.racetrack import data_path

        t = load_track(data_path("tracks", f"{name}.track"))
        assert t.grid.shape == shape
        assert len(t.starts) and len(t.goals)


def test_move_cell_by_cell():
    t = parse_track(CORRIDOR)
    assert moved(t, 0, 1, 2, 0) == [2, 1, 2, 0, DRIVING]
    # ends on a free cell (x=4) but passes the wall at x=3: crash there
    assert moved(t, 1, 1, 3, 0)[4] == CRASHED
    assert moved(t, 1, 1, 3, 0)[:2] == [3, 1]
    # from x=4, speed 3 passes the goal (x=5) before the wall (x=6): goal
    assert moved(t, 4, 1, 3, 0)[4] == AT_GOAL
    assert moved(t, 4, 1, 3, 0)[:2] == [5, 1]
    # leaving the map is a crash
    assert moved(t, 0, 1, -1, 0)[4] == CRASHED
    # velocity 0: stays, no check
    assert moved(t, 2, 1, 0, 0) == [2, 1, 0, 0, DRIVING]


def test_move_diagonal_discretisation():
    t = parse_track(OPEN)  # wall at (3, 3)
    # d = (2, 1), n = 2: tick 1 visits (x+1, y+floor(1/2+1/2)) = (x+1, y+1), tick 2 (x+2, y+1)
    assert moved(t, 2, 2, 2, 1)[4] == CRASHED  # (3, 3) is tick 1
    # halves round up: d = (2, -1) from (2, 3): tick 1 is (3, 3 + floor(-1/2 + 1/2)) = (3, 3), the wall
    assert moved(t, 2, 3, 2, -1)[4] == CRASHED
    assert moved(t, 2, 4, 2, -1) == [4, 3, 2, -1, DRIVING]  # ticks (3, 4) and (4, 3)
    # d = (-1, -2), n = 2: tick 1 visits (x + floor(-1/2 + 1/2), y - 1) = (x, y - 1)
    assert moved(t, 4, 4, -1, -2)[4] == DRIVING
    assert moved(t, 3, 5 - 1, 0, -1)[4] == CRASHED  # straight up into the wall at (3, 3)
    assert moved(t, 4, 5 - 1, -1, -2) == [3, 2, -1, -2, DRIVING]  # (4, 3) then (3, 2): misses the wall


def test_noise_and_actions():
    t = parse_track(OPEN)
    env = RacetrackEnv(t, noise=0.3)
    a = ACTIONS.index("ax+1_ay+0")
    s = env.start_states(np.array([[1, 1]]))
    ok = env.step(s, np.array([a]), np.array([0.3]))  # u >= noise: the action takes effect
    fail = env.step(s, np.array([a]), np.array([0.29]))  # u < noise: velocity unchanged
    assert ok[0].tolist() == [2, 1, 1, 0, DRIVING]
    assert fail[0].tolist() == [1, 1, 0, 0, DRIVING]
    assert len(ACTIONS) == 9 and len(set(ACTIONS)) == 9


def test_features_by_hand():
    env = RacetrackEnv(parse_track(OPEN))
    obs = env.observe(np.array([[1, 1, 1, -1, 0]]))[0]
    f = dict(zip(FEATURES, obs, strict=True))
    assert (f["x"], f["y"], f["vx"], f["vy"]) == (1, 1, 1, -1)
    # steps to the first blocked cell (edge or wall) from (1, 1) on a 6x5 map with a wall at (3, 3)
    assert (f["wall_n"], f["wall_e"], f["wall_s"], f["wall_w"]) == (2, 5, 4, 2)
    assert (f["wall_ne"], f["wall_se"], f["wall_sw"], f["wall_nw"]) == (2, 2, 2, 2)
    assert (f["goal_dx"], f["goal_dy"], f["goal_dist"]) == (4, 3, 7)


def test_explicit_mdp_transitions_by_hand():
    env = RacetrackEnv(parse_track(CORRIDOR), noise=0.2)
    r = build_racetrack_mdp(env, np.array([[0, 1]]))
    m = r.model
    s0 = int(r.start_index[0])
    assert r.states[s0].tolist() == [0, 1, 0, 0]
    choices = range(m.row_groups[s0], m.row_groups[s0 + 1])
    names = [m.action_names[m.choice_actions[c]] for c in choices]
    assert names == list(ACTIONS)
    c = m.row_groups[s0] + ACTIONS.index("ax+1_ay+0")
    row = m.transitions[c]
    succ = {tuple(r.states[j]) if j < len(r.states) else j: p for j, p in zip(row.indices, row.data, strict=True)}
    assert succ == pytest.approx({(1, 1, 1, 0): 0.8, (0, 1, 0, 0): 0.2})
    up = m.row_groups[s0] + ACTIONS.index("ax+0_ay-1")  # into the wall above: crash with 0.8
    row = m.transitions[up]
    crash_sink = len(r.states) + 1
    assert dict(zip(row.indices.tolist(), row.data.tolist(), strict=True)) == pytest.approx({s0: 0.2, crash_sink: 0.8})
    assert np.allclose(np.asarray(m.transitions.sum(axis=1)).ravel(), 1.0)


def test_pmax_by_hand():
    """Corridor: from x=4 accelerate right: success (0.8) reaches the goal; failure keeps speed 0 and retries."""
    from rlverify.models.racetrack import pmax_goal

    env = RacetrackEnv(parse_track(CORRIDOR), noise=0.2)
    # left of the wall every path to the goal crosses the wall: Pmax = 0; right of it: retry forever -> 1
    v = pmax_goal(env, np.array([[1, 1], [4, 1]]))
    assert v == pytest.approx([0.0, 1.0], abs=1e-6)


def test_native_env_agrees_with_storm_on_explicit_mdp():
    """Simulated goal frequency (native env) vs Storm on the chain the same policy induces on the explicit MDP."""
    import stormpy

    from rlverify.benchmarks.racetrack import make_racetrack
    from rlverify.exact import induce
    from rlverify.models import to_storm
    from rlverify.policies import MLP, CallablePolicy
    from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

    env = make_racetrack("racetrack-barto-small-v1")
    cell = np.array([[33, 3]])
    net = MLP.random([15, 64, 64, 9], seed=3)
    policy = CallablePolicy(lambda x: net(x / 10.0), FEATURES, ACTIONS, output="logits", name="random net")
    mdp = build_racetrack_mdp(env, cell)
    chain, _ = induce(mdp.model, policy)
    sm = to_storm(chain)
    # step-bounded: Storm computes these by matrix-vector steps (no solver convergence question)
    for prop, label in (
        ('P=? [F<=40 "goal"]', "goal"),
        ('P=? [!"crashed" U<=40 "goal"]', "goal"),
        ('P=? [F<=40 "crashed"]', "crashed"),
    ):
        res = stormpy.model_checking(sm, stormpy.parse_properties(prop)[0])
        exact = res.get_value(sm.initial_states[0])
        stat = verify_statistical(
            env,
            prop,
            policy,
            StatisticalOptions(method="clopper-pearson", runs=20_000, delta=0.001, simulation=SimulationOptions(seed=7)),
            starts=env.start_states(cell),
        )
        assert stat.undecided == 0
        assert stat.interval[0] <= exact <= stat.interval[1], (label, exact, stat.interval)
        assert 0.02 < exact < 0.98  # a non-trivial value


def test_unknown_label_and_noise_range():
    from rlverify.errors import PropertyError
    from rlverify.statistical import parse_path_property

    with pytest.raises(PropertyError, match=r'unknown label "crash".*did you mean'):
        parse_path_property('P=? [F "crash"]', ("goal", "crashed", "driving"))
    with pytest.raises(PropertyError, match="noise"):
        RacetrackEnv(parse_track(OPEN), noise=1.0)


def test_standing_still_is_decided_not_left_undecided():
    # a policy that never accelerates stays on the start cell forever: decided at once (never the
    # goal), not simulated to max_steps and reported undecided
    from rlverify.policies import CallablePolicy
    from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

    env = RacetrackEnv(parse_track(OPEN), noise=0.2)
    still = ACTIONS.index("ax+0_ay+0")

    def never_accelerate(x):
        p = np.zeros((len(x), 9))
        p[:, still] = 1.0
        return p

    policy = CallablePolicy(never_accelerate, FEATURES, ACTIONS, name="still")
    r = verify_statistical(
        env,
        'P=? [!"crashed" U "goal"]',
        policy,
        StatisticalOptions(method="clopper-pearson", runs=500, simulation=SimulationOptions(max_steps=100_000)),
    )
    assert r.estimate == 0.0 and r.undecided == 0 and r.decisions == 0

    # with any mass on moving, the run is not stuck: it moves eventually (and here always crashes or arrives)
    def mostly_still(x):
        p = np.full((len(x), 9), 0.01 / 8)
        p[:, still] = 0.99
        return p

    r2 = verify_statistical(
        env,
        'P=? [F "crashed" | "goal"]',
        CallablePolicy(mostly_still, FEATURES, ACTIONS),
        StatisticalOptions(method="clopper-pearson", runs=200, simulation=SimulationOptions(max_steps=100_000)),
    )
    assert r2.estimate == 1.0 and r2.decisions > 200


@pytest.mark.parametrize("bench_id", ["racetrack-barto-small-v1", "racetrack-barto-big-v1", "racetrack-ring-v1"])
def test_shipped_dqn_policies_reach_the_goal(bench_id):
    """The reference policies are greedy (q-values) and reach the goal from the start line in most
    runs at the training noise; the estimate agrees with the rate recorded in their metadata."""
    from rlverify.benchmarks.racetrack import make_racetrack, policy_path
    from rlverify.policies import load_policy
    from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

    env = make_racetrack(bench_id)
    policy = load_policy(str(policy_path(bench_id)))
    assert policy.output == "q-values"
    r = verify_statistical(
        env,
        'P=? [!"crashed" U "goal"]',
        policy,
        StatisticalOptions(
            method="clopper-pearson", runs=1000, delta=1e-3, simulation=SimulationOptions(seed=7, max_steps=2000)
        ),
    )
    recorded = policy.training["evaluation"]["goal_rate_start_line"]
    assert r.interval[0] > 0.5
    assert r.interval[0] - 0.02 <= recorded <= r.interval[1] + 0.02
