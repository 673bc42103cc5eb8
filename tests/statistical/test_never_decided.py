"""Runs that never decide (the car stands still forever, or is cut at --max-steps) are their own outcome in heat maps
and simulation results: goal + crash + never decided = 1 in every cell, counted in the JSON and drawn."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.models.racetrack import ACTIONS, FEATURES, RacetrackEnv, parse_track
from rlverify.policies import CallablePolicy
from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.verify import StatisticalOptions

# a corridor: free cells x = 1, 2, 3 on row y = 1, the goal at x = 4, walls around
CORRIDOR = """dim: 3 6
xxxxxx
x...gx
xxxxxx
"""
STILL, LEFT, RIGHT = ACTIONS.index("ax+0_ay+0"), ACTIONS.index("ax-1_ay+0"), ACTIONS.index("ax+1_ay+0")


def _by_cell(obs: np.ndarray) -> np.ndarray:
    """x = 1: never accelerate (at velocity 0 the car stands there forever); x = 2: accelerate left (to x = 1 at
    velocity -1, then on into the wall at x = 0: a crash after 2 steps); x = 3: accelerate right (into the goal)."""
    x = obs[:, FEATURES.index("x")]
    p = np.zeros((len(obs), 9))
    p[x == 1, STILL] = 1.0
    p[x == 2, LEFT] = 1.0
    p[x == 3, RIGHT] = 1.0
    return p


POLICY = CallablePolicy(_by_cell, FEATURES, ACTIONS, name="by-cell")
RUNS = 40


def _heatmap(max_steps: int):
    from rlverify.statistical.heatmap import heatmap

    env = RacetrackEnv(parse_track(CORRIDOR), noise=0.0)  # no noise: every run of a cell goes the same way
    options = StatisticalOptions(method="clopper-pearson", runs=RUNS, simulation=SimulationOptions(max_steps=max_steps))
    return heatmap(env, POLICY, options, cells=np.array([[1, 1], [2, 1], [3, 1]]), benchmark="corridor")


@pytest.mark.parametrize(
    ("max_steps", "goal", "crash", "stuck", "undecided"),
    [
        (10, [0, 0, 1], [0, 1, 0], [RUNS, 0, 0], [0, 0, 0]),  # x = 1 stands still forever: never decided
        (1, [0, 0, 1], [0, 0, 0], [RUNS, 0, 0], [0, RUNS, 0]),  # x = 2 needs 2 steps: cut at 1, never decided too
    ],
)
def test_corridor_counts_every_run_once(max_steps, goal, crash, stuck, undecided) -> None:
    r = _heatmap(max_steps)
    np.testing.assert_array_equal(r.goal, goal)
    np.testing.assert_array_equal(r.crash, crash)
    np.testing.assert_array_equal(r.stuck, stuck)
    np.testing.assert_array_equal(r.undecided, undecided)
    np.testing.assert_array_equal(r.never_decided, (np.array(stuck) + np.array(undecided)) / RUNS)
    np.testing.assert_array_equal(r.goal + r.crash + r.never_decided, [1.0, 1.0, 1.0])
    cells = r.to_json()["cells"]
    assert [c["never_decided"] for c in cells] == [1.0, 0.0 if max_steps == 10 else 1.0, 0.0]
    assert [c["stuck"] for c in cells] == stuck
    assert all(c["goal"] + c["crash"] + c["never_decided"] == 1.0 for c in cells)


def test_the_never_decided_share_is_drawn_with_its_counts() -> None:
    from rlverify.statistical.heatmap import PANELS, heatmap_figure

    r = _heatmap(1)
    fig = heatmap_figure(r)
    assert [p.title for p in fig.panels] == [PANELS["goal"], PANELS["crash"], PANELS["never"]]
    never = fig.panels[2]
    assert "never decided" in never.title and "goal + crash + this = 1" in never.label
    np.testing.assert_array_equal(never.values[1, 1:4], [1.0, 1.0, 0.0])  # row y = 1, cells x = 1, 2, 3
    assert f"{RUNS} stood still forever, {RUNS} were still driving after 1 steps" in fig.note
    assert f"{RUNS} reached the goal, 0 crashed" in fig.note
    assert fig.title.startswith("corridor (noise 0) — policy by-cell:")


def test_simulation_results_count_the_runs_that_stand_still() -> None:
    from rlverify.statistical import verify_statistical

    env = RacetrackEnv(parse_track(CORRIDOR.replace("x...g", "xs..g")), noise=0.0)  # the start line: x = 1
    r = verify_statistical(env, 'P=? [!"crashed" U "goal"]', POLICY, StatisticalOptions(method="clopper-pearson", runs=50))
    assert (r.estimate, r.stuck, r.undecided, r.decisions) == (0.0, 50, 0, 0)
    assert any("50 of 50 runs stood still forever" in w for w in r.warnings)
    assert r.to_json()["stuck"] == 50


def test_barto_small_every_cell_adds_up_to_one() -> None:
    """The shipped DQN policy on barto-small: the car stands still forever from many start cells (52 of 233 at
    these settings). Before, those runs were neither goal, crash nor undecided: the cells added up to ~0."""
    from rlverify.resolve import EnvironmentTarget, resolve
    from rlverify.statistical.heatmap import heatmap

    t = resolve("racetrack-barto-small-v1", kinds=(EnvironmentTarget,))
    r = heatmap(
        t.model,
        t.policy,
        StatisticalOptions(method="clopper-pearson", runs=10, simulation=SimulationOptions(max_steps=200, seed=1)),
        benchmark="racetrack-barto-small-v1",
    )
    goal, crash = np.rint(r.goal * r.runs), np.rint(r.crash * r.runs)
    np.testing.assert_array_equal(goal + crash + r.stuck + r.undecided + r.stalled, r.runs)  # counts, exactly
    np.testing.assert_allclose(r.goal + r.crash + r.never_decided, 1.0, rtol=0, atol=1e-12)
    assert r.stalled.sum() == 0 and len(r.cells) == 233
    assert (r.never_decided == 1.0).sum() >= 40  # whole cells where the car never leaves its start
