"""Hostile Gymnasium environments and policies through ``rlverify simulate``: exit 2 and one line naming the cause
(the episode and step where there is one), never a traceback; an environment that never ends stops at
``--max-steps`` as undecided.

The environments are :mod:`tests.gym_fixtures`' (``gym:tests.gym_fixtures:ID --trust-code``); each fails at the
``FAIL_AT``-th call of ``step`` (a step count of ``FAIL_AT`` in the row semantics: the ``step`` column is the number
of steps taken, 0 after the reset).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gym_fixtures import CARTPOLE_EXTRA_ACTION, CARTPOLE_POLICIES, FAIL_AT, FIXTURE_POLICIES, target
from tests.incli import cli, one_line

ROOT = Path(__file__).resolve().parents[2]
PROP = 'P=? [F<=20 "terminated"]'


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile_policies")
    out = {}
    for name, text in (("fixture", FIXTURE_POLICIES), ("cartpole", CARTPOLE_POLICIES), ("extra", CARTPOLE_EXTRA_ACTION)):
        out[name] = d / f"{name}.py"
        out[name].write_text(text)
    return out


def simulate(capsys, env: str, policy: str, *extra: str) -> tuple[int, str, str]:
    return cli(capsys, "simulate", env, "--policy", policy, "-p", PROP, "--runs", "6", "--seed", "1", *extra)


def refused(capsys, env: str, policy: str, *extra: str) -> str:
    code, _, err = simulate(capsys, env, policy, *extra)
    line = one_line(err)
    assert code == 2, err
    return line


VEC = ["sync", "async"]


@pytest.mark.parametrize("vectorization", VEC)
@pytest.mark.parametrize("batch", ["1", "4"])
def test_step_raises(capsys, files, vectorization, batch):
    line = refused(
        capsys, target("RaiseStep-v0"), f"{files['fixture']}:one", "--trust-code", "--vectorization", vectorization,
        "--batch-size", batch,
    )  # fmt: skip
    assert "RuntimeError" in line and f"boom at step {FAIL_AT}" in line and "stepping" in line
    assert "episode 0" in line or "episodes 0..3" in line


def test_step_raises_names_the_step(capsys, files):
    line = refused(
        capsys, target("RaiseStep-v0"), f"{files['fixture']}:one", "--trust-code", "--vectorization", "sync",
        "--batch-size", "1",
    )  # fmt: skip
    where = line.split(": boom")[0]  # rlverify's words, not the exception's message
    assert f"step {FAIL_AT - 1}" in where or f"step {FAIL_AT}" in where, line


@pytest.mark.parametrize("vectorization", VEC)
def test_reset_raises(capsys, files, vectorization):
    line = refused(
        capsys, target("RaiseReset-v0"), f"{files['fixture']}:one", "--trust-code", "--vectorization", vectorization,
        "--batch-size", "1",
    )  # fmt: skip
    assert "RuntimeError" in line and "reset refused" in line and "resetting episode 0" in line


def test_reset_of_an_idle_copy_is_not_an_episode(capsys, files):
    """Every episode's seed is a 63-bit hash (none is 0 here): the environment refusing seed 0 fails no episode."""
    code, out, err = simulate(
        capsys, target("RaiseResetSeedZero-v0"), f"{files['fixture']}:one", "--trust-code", "--vectorization", "sync",
        "--batch-size", "4", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["result"]["runs"] == 6


def test_reset_of_an_idle_copy_fails_in_one_line(capsys, files):
    """Whatever the reset of an idle copy does, a failure is one line, exit 2 (not a traceback)."""
    code, _, err = simulate(
        capsys, target("RaiseResetSeedZero-v0"), f"{files['fixture']}:one", "--trust-code", "--vectorization", "sync",
        "--batch-size", "4",
    )  # fmt: skip
    if code != 0:
        assert code == 2 and "Traceback" not in err and len([x for x in err.splitlines() if x.strip()]) == 1, err


@pytest.mark.parametrize("vectorization", VEC)
@pytest.mark.parametrize(
    ("env", "cause"),
    [("NanObs-v0", "obs[1] = "), ("NanReward-v0", "reward")],
)
def test_nan_from_step(capsys, files, vectorization, env, cause):
    line = refused(capsys, target(env), f"{files['fixture']}:one", "--trust-code", "--vectorization", vectorization)
    assert "nan" in line.lower() and cause in line and "episode 0" in line


@pytest.mark.parametrize("env", ["NanObs-v0", "NanReward-v0"])
def test_nan_from_step_names_its_step(capsys, files, env):
    line = refused(capsys, target(env), f"{files['fixture']}:one", "--trust-code", "--vectorization", "sync")
    assert f"step {FAIL_AT}" in line, line


def test_nan_from_reset(capsys, files):
    line = refused(capsys, target("NanReset-v0"), f"{files['fixture']}:one", "--trust-code", "--vectorization", "sync")
    assert "nan" in line.lower() and "obs[1]" in line and "episode 0, step 0" in line


@pytest.mark.parametrize("vectorization", VEC)
def test_observation_changes_shape(capsys, files, vectorization):
    line = refused(
        capsys, target("ShapeChange-v0"), f"{files['fixture']}:one", "--trust-code", "--vectorization", vectorization,
        "--batch-size", "1",
    )  # fmt: skip
    assert "shape" in line and "episode 0" in line


def test_module_target_with_default_vectorization(capsys, files):
    code, out, err = cli(
        capsys, "simulate", target("Counter-v0"), "--trust-code", "--policy", f"{files['fixture']}:one",
        "-p", 'P=? [F "terminated"]', "--runs", "3", "--json",
    )  # fmt: skip
    assert code == 0, err[-2000:]
    assert json.loads(out)["result"]["successes"] == 3


def run_subprocess(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlverify", *args],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin", "HOME": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("max_steps", ["50", None], ids=["max-steps 50", "default max-steps"])
def test_never_terminating_environment_ends_undecided(files, max_steps):
    """No time limit and no terminal state: every episode is cut at --max-steps (default 10000) and undecided;
    the process ends (a subprocess, with a timeout: a hang fails the test)."""
    steps = ["--max-steps", max_steps] if max_steps else []
    proc = run_subprocess(
        "simulate", target("Forever-v0"), "--trust-code", "--vectorization", "sync", "--policy",
        f"{files['fixture']}:uniform", "-p", 'P=? [F "terminated"]', "--runs", "3", "--seed", "2", "--json", *steps,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)["result"]
    n = int(max_steps or 10_000)
    assert (result["runs"], result["successes"], result["undecided"], result["decisions"]) == (3, 0, 3, 3 * n)


def test_info_label_reads_the_info(capsys, files):
    """Counter-v0's ``info["cost"]`` is the step count: ``info["cost"] >= 7`` first holds at step 7."""
    code, out, err = cli(
        capsys, "simulate", target("Counter-v0"), "--trust-code", "--vectorization", "sync", "--policy",
        f"{files['fixture']}:one", "-p", 'P=? [F<=7 "costly"]', "--label", 'costly=info["cost"] >= 7',
        "--runs", "5", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)["result"]
    assert (result["successes"], result["decisions"]) == (5, 35)
    code, out, err = cli(
        capsys, "simulate", target("Counter-v0"), "--trust-code", "--vectorization", "sync", "--policy",
        f"{files['fixture']}:one", "-p", 'P=? [F<=6 "costly"]', "--label", 'costly=info["cost"] >= 7',
        "--runs", "5", "--json",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["result"]["successes"] == 0


# ------------------------------------------------------------------------------------------------ policies

CARTPOLE = "gym:CartPole-v1"


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("three_columns", "shape (6, 3), expected (6, 2)"),
        ("nan_probabilities", "NaN"),
        ("not_summing", "sum to 1"),
    ],
)
@pytest.mark.parametrize("vectorization", ["native", "sync"])
def test_policy_output_refused(capsys, files, name, cause, vectorization):
    line = refused(capsys, CARTPOLE, f"{files['cartpole']}:{name}", "--vectorization", vectorization)
    assert cause in line and name in line


def test_policy_action_the_environment_lacks(capsys, files):
    line = refused(capsys, CARTPOLE, f"{files['extra']}:policy")
    assert "'7'" in line and "not an action" in line


def test_discrete_policy_on_a_box_action_space(capsys, files):
    line = refused(capsys, "gym:MountainCarContinuous-v0", f"{files['fixture']}:one")
    assert "a[0]" in line


def test_policy_features_the_environment_lacks(capsys, files):
    line = refused(capsys, target("Counter-v0"), f"{files['cartpole']}:lean", "--trust-code", "--vectorization", "sync")
    assert "obs[2]" in line
