"""``rlverify simulate gym:ID`` for environments without a transition table: the ``--json`` counts against a plain
scalar Gymnasium loop, and bad ``--label`` / property / id / ``--vectorization`` input refused in one line (exit 2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlverify.statistical.episodes import episode_seeds
from tests.gym_fixtures import CARTPOLE_POLICIES
from tests.incli import cli, one_line

CARTPOLE = "gym:CartPole-v1"


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gym_cli") / "cartpole.py"
    path.write_text(CARTPOLE_POLICIES)
    return path


def lengths(seed: int, runs: int, max_steps: int) -> list[tuple[int, bool]]:
    """Per episode of CartPole-v1 under the ``lean`` rule (push toward the pole's lean), in a plain loop: (steps,
    terminated); cut at ``max_steps``."""
    out = []
    for s in episode_seeds(seed, np.arange(runs)):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=s)
        t, term, trunc = 0, False, False
        while not (term or trunc) and t < max_steps:
            obs, _, term, trunc, _ = env.step(int(obs[2] > 0))
            t += 1
        out.append((t, bool(term)))
    return out


@pytest.mark.parametrize("vectorization", ["native", "sync"])
def test_json_counts_match_the_scalar_loop(capsys, policy, vectorization):
    """F<=40 "terminated" with --max-steps 35: episodes that terminate by step 35 are satisfied, the others are cut
    undecided at step 35 (before the bound); successes, undecided and decisions (steps) are the loop's."""
    runs, seed, max_steps = 30, 7, 35
    code, out, err = cli(
        capsys, "simulate", CARTPOLE, "--policy", f"{policy}:lean", "-p", 'P=? [F<=40 "terminated"]', "--runs",
        str(runs), "--seed", str(seed), "--mode", "deterministic", "--max-steps", str(max_steps), "--batch-size", "8",
        "--vectorization", vectorization, "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)["result"]
    ref = lengths(seed, runs, max_steps)
    k = sum(term for _, term in ref)
    assert (result["runs"], result["successes"], result["undecided"]) == (runs, k, runs - k)
    assert result["decisions"] == sum(t for t, _ in ref)
    assert 0 < k < runs


def refused(capsys, *args: str) -> str:
    code, _, err = cli(capsys, "simulate", *args, "--runs", "5", "--seed", "1")
    line = one_line(err)
    assert code == 2, err
    return line


BAD_LABELS = [
    ("tilted=abs(obs[2]) >", "syntax error"),
    ("tilted", "NAME=CONDITION"),
    ("=obs[0] > 1", "NAME=CONDITION"),
    ("tilted=", "give its condition"),
    ("terminated=obs[0] > 1", "built-in name"),
    ("step=obs[0] > 1", "built-in name"),
    ("2bad=obs[0] > 1", "label name"),
    ("tilted=obs[0] + 1", "not a condition"),
    ("tilted=abs(obs[9]) > 1", "obs[9]"),
    ('tilted=__import__("os")', "not allowed"),
    ("tilted=nosuchname > 1", "nosuchname"),
]


@pytest.mark.parametrize(("label", "cause"), BAD_LABELS, ids=[b[0] for b in BAD_LABELS])
def test_bad_label_text(capsys, policy, label, cause):
    line = refused(capsys, CARTPOLE, "--policy", f"{policy}:lean", "-p", 'P=? [F "tilted"]', "--label", label)
    assert cause in line and "--label" in line


def test_bad_label_is_quoted_as_written(capsys, policy):
    line = refused(
        capsys, CARTPOLE, "--policy", f"{policy}:lean", "-p", 'P=? [F "tilted"]', "--label", "tilted=abs(obs[9]) > 1"
    )
    assert "obs[9]" in line and "obs_0_" not in line


def test_label_given_twice(capsys, policy):
    line = refused(
        capsys, CARTPOLE, "--policy", f"{policy}:lean", "-p", 'P=? [F "a"]', "--label", "a=obs[0] > 0", "--label",
        "a=obs[1] > 0",
    )  # fmt: skip
    assert "given twice" in line


def test_unknown_label_in_the_property(capsys, policy):
    line = refused(
        capsys, CARTPOLE, "--policy", f"{policy}:lean", "-p", 'P=? [F "tilte"]', "--label", "tilted=abs(obs[2]) > 0.1"
    )
    assert '"tilte"' in line and "tilted" in line


def test_g_is_refused_with_the_forms(capsys, policy):
    line = refused(capsys, CARTPOLE, "--policy", f"{policy}:lean", "-p", 'P=? [G<=5 !"terminated"]')
    assert "'G'" in line and "F<=k" in line


def test_property_is_required(capsys, policy):
    line = refused(capsys, CARTPOLE, "--policy", f"{policy}:lean")
    assert "--property" in line


@pytest.mark.parametrize(
    ("target", "cause"),
    [("gym:CartPol-v1", "CartPole-v1"), ("gym:NoSuchEnv-v0", "NoSuchEnv-v0"), ("gym:", "gym:ID")],
)
def test_unknown_environment(capsys, policy, target, cause):
    line = refused(capsys, target, "--policy", f"{policy}:lean", "-p", 'P=? [F "terminated"]')
    assert cause in line


def test_module_target_without_trust_code(capsys, policy):
    line = refused(capsys, "gym:tests.gym_fixtures:Counter-v0", "--policy", f"{policy}:lean", "-p", 'P=? [F "terminated"]')
    assert "--trust-code" in line


RUIN_ENV = """
import gymnasium as gym
import numpy as np


class Ruin(gym.Env):
    \"\"\"Gambler's ruin on 0..4 from 2: +1 with probability 0.6, else -1 (the action is ignored).\"\"\"

    observation_space = gym.spaces.Box(0.0, 4.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = 2
        return np.array([self.x], np.float32), {}

    def step(self, action):
        self.x += 1 if self.np_random.random() < 0.6 else -1
        return np.array([self.x], np.float32), 0.0, self.x in (0, 4), False, {}


gym.register("RlverifyRuin-v0", entry_point=Ruin, max_episode_steps=1000)
"""


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_module_beside_the_user_with_trust_code(capsys, tmp_path, monkeypatch, vectorization):
    # gym:MODULE:ID finds MODULE in the working directory, as ``python -m`` does; the ruin probability from 2 of 4
    # with up-probability 0.6 is ((q/p)^2 - (q/p)^4) / (1 - (q/p)^4), q/p = 2/3 (closed form)
    (tmp_path / "ruin_env_here.py").write_text(RUIN_ENV)
    policy = 'FEATURES = ["x"]\nACTIONS = ["0", "1"]\ndef one(obs):\n    return [[1.0, 0.0]] * len(obs)\n'
    (tmp_path / "any.py").write_text(policy)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(
        capsys, "simulate", "gym:ruin_env_here:RlverifyRuin-v0", "--trust-code", "--policy", "any.py:one",
        "-p", 'P=? [F "ruined"]', "--label", "ruined=x <= 0", "--runs", "4000", "--seed", "2",
        "--vectorization", vectorization, "--json",
    )  # fmt: skip
    assert code == 0, err
    r = 2 / 3
    exact = (r**2 - r**4) / (1 - r**4)
    res = json.loads(out)["result"]
    lo, hi = res["interval"]
    assert lo <= exact <= hi and abs(res["estimate"] - exact) < 0.03
    assert str(tmp_path) not in sys.path  # the working directory is not left on sys.path


@pytest.mark.parametrize(
    ("args", "cause"),
    [
        (["--vectorization", "native", "--env-kwargs", "bogus=1"], "bogus"),
        (["--vectorization", "bogus"], "--vectorization"),
        (["-c", "a=1"], "--env-kwargs"),
        (["--max-steps", "0"], "--max-steps"),
        (["--batch-size", "0"], "--batch-size"),
    ],
    ids=["native with a bad kwarg", "unknown vectorization", "constants", "max-steps 0", "batch-size 0"],
)
def test_bad_options(capsys, policy, args, cause):
    line = refused(capsys, CARTPOLE, "--policy", f"{policy}:lean", "-p", 'P=? [F "terminated"]', *args)
    assert cause in line


@pytest.mark.parametrize("env", ["gym:Acrobot-v1", "gym:MountainCar-v0"])
def test_native_where_there_is_none(capsys, policy, env):
    line = refused(capsys, env, "--policy", f"{policy}:lean", "-p", 'P=? [F "terminated"]', "--vectorization", "native")
    assert "native" in line and "sync" in line


def test_label_on_a_model_with_a_transition_table(capsys, policy):
    line = refused(
        capsys, "gym:FrozenLake-v1", "--policy", f"{policy}:lean", "-p", 'P=? [F "goal"]', "--label", "x=obs[0] > 1"
    )
    assert "--label" in line


@pytest.mark.parametrize(
    "argv,cause",
    [
        (["simulate", CARTPOLE, "-p", 'P=? [F<=100 "terminated"]', "--rare", "splitting"], "cannot be saved and restored"),
        (["verify", CARTPOLE, "-p", 'P=? [F<=100 "terminated"]'], "use rlverify simulate gym:CartPole-v1"),
        (["abstract", CARTPOLE], "use rlverify simulate gym:CartPole-v1"),
        (["report", CARTPOLE, "-p", 'P=? [F<=100 "terminated"]'], "rlverify report takes"),
        (["explain", CARTPOLE, "-p", 'P=? [F<=100 "terminated"]'], "use rlverify simulate gym:CartPole-v1"),
        (["shield", CARTPOLE, "-p", 'P<=0.1 [F<=100 "terminated"]', "--meet"], "use rlverify simulate gym:CartPole-v1"),
        (["map", CARTPOLE, "-p", 'P=? [F<=100 "terminated"]', "--map", "x,y"], "use rlverify simulate gym:CartPole-v1"),
        (["robust", CARTPOLE, "-p", 'P=? [F<=100 "terminated"]'], "use rlverify simulate gym:CartPole-v1"),
    ],
    ids=["rare", "verify", "abstract", "report", "explain", "shield", "map", "robust"],
)
def test_engines_that_need_a_model_refuse_in_one_line(capsys, policy, argv, cause):
    """Importance splitting needs saved states, the exact and abstraction engines a model: each says so up front."""
    code, _, err = cli(capsys, *argv, "--policy", f"{policy}:lean")
    assert code == 2 and cause in one_line(err)
