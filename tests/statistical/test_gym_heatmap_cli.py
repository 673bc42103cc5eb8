"""``rlverify heatmap gym:ID --axes ...``: the JSON and PNG against the Python API's result; hostile input exits 2
with one line naming the cause."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from tests.incli import cli, one_line
from tests.statistical.test_gym_heatmap import AXES, PROPERTY, RUNS, SEED, heat

POLICY = textwrap.dedent(
    """
    import numpy as np

    FEATURES = ["obs[0]", "obs[1]", "obs[2]", "obs[3]"]
    ACTIONS = ["0", "1"]


    def lean(obs):
        right = (obs[:, 2] + 0.1 * obs[:, 3]) > 0
        return np.stack([~right, right], axis=1).astype(np.float64)
    """
)

NO_STATE = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np


    class NoState(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(4, np.float32), {}

        def step(self, action):
            return np.zeros(4, np.float32), 0.0, True, False, {}


    gym.register("NoStateRlv-v0", entry_point=NoState, max_episode_steps=10)
    """
)


@pytest.fixture
def policy(tmp_path):
    path = tmp_path / "lean.py"
    path.write_text(POLICY)
    return f"{path}:lean"


def heatmap_args(policy: str, *more: str, axes: str = AXES, target: str = "gym:CartPole-v1") -> list[str]:
    return [
        "heatmap",
        target,
        "--policy",
        policy,
        "--trust-code",
        "-p",
        PROPERTY,
        "--axes",
        axes,
        "--runs",
        str(RUNS),
        "--seed",
        str(SEED),
        "--mode",
        "deterministic",
        "--max-steps",
        "1000",
        *more,
    ]


def test_json_and_png_match_the_python_result(capsys, tmp_path, policy):
    from PIL import Image

    from rlverify.statistical.gym_heatmap import gym_heatmap_figure

    out_json, out_png = tmp_path / "map.json", tmp_path / "map.png"
    code, _, err = cli(capsys, *heatmap_args(policy, "--out", str(out_json), "--out", str(out_png)))
    assert code == 0, err
    data = json.loads(out_json.read_text())
    r = heat("auto")
    assert data["property"] == PROPERTY and data["model"] == "gym:CartPole-v1"
    assert [a["name"] for a in data["axes"]] == ["theta", "theta_dot"]
    assert [a["values"] for a in data["axes"]] == [list(a.values) for a in r.axes]
    np.testing.assert_array_equal(data["starts"], r.starts)
    np.testing.assert_array_equal(data["estimate"], r.estimate)
    np.testing.assert_array_equal(data["interval"], r.interval)
    np.testing.assert_array_equal(data["runs"], r.runs)
    np.testing.assert_array_equal(data["satisfied"], r.satisfied)
    np.testing.assert_array_equal(data["undecided"], r.undecided)
    _, _, (w, h) = gym_heatmap_figure(r).layout()
    with Image.open(out_png) as png:
        assert png.size == (round(w * 110), round(h * 110))


def test_an_existing_file_is_not_overwritten_without_force(capsys, tmp_path, policy):
    out = tmp_path / "map.json"
    out.write_text("keep")
    code, _, err = cli(capsys, *heatmap_args(policy, "--out", str(out)))
    assert code == 2 and "--force" in one_line(err)
    assert out.read_text() == "keep"


@pytest.mark.parametrize(
    ("axes", "more", "message"),
    [
        ("thetaa=0:0.1:3", (), "not a state coordinate of CartPoleEnv (did you mean 'theta'?)"),
        ("theta=0:0.1:0", (), "0 cells"),
        ("theta=-1:1:1000,theta_dot=-1:1:1000", (), "1,000,000 cells, more than the guard"),
        ("theta=-1:1:500,theta_dot=-1:1:500", ("--runs", "1000"), "more than the guard --run-limit"),
        ("theta=0:0.1:3", ("--vectorization", "async"), "--vectorization async"),
        ("theta=0:0.1:3", ("--noise", "0.1"), "--noise: applies to Racetrack heat maps"),
        ("", (), "--axes"),
    ],
)
def test_hostile_options_exit_2_in_one_line(capsys, tmp_path, policy, axes, more, message):
    args = heatmap_args(policy, "--json", axes=axes)
    if more and more[0] == "--runs":
        args[args.index("--runs") + 1] = more[1]
        more = ()
    code, _, err = cli(capsys, *args, *more)
    assert code == 2
    assert message in one_line(err)


def test_an_environment_without_settable_state_exits_2(capsys, tmp_path, monkeypatch, policy):
    import importlib

    (tmp_path / "nostate_rlv.py").write_text(NO_STATE)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("nostate_rlv")  # registers NoStateRlv-v0 in this process
    code, _, err = cli(capsys, *heatmap_args(policy, "--json", axes="x=0:1:2", target="gym:NoStateRlv-v0"))
    assert code == 2
    assert "its state cannot be set (NoState is neither" in one_line(err)


def test_axes_on_a_racetrack_heat_map_exit_2(capsys):
    code, _, err = cli(capsys, "heatmap", "racetrack-barto-small-v1", "--axes", "x=0:1:2", "--json")
    assert code == 2 and "--axes: applies to gym:ID heat maps" in one_line(err)
