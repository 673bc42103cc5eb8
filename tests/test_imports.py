"""Imports follow the work (issue 45): per command on a small model, which heavy modules the process does NOT import.

Each command runs in a fresh interpreter (this tree's src first) through the CLI's ``main``; ``sys.modules`` after it
shows what it loaded. The values the commands print are held elsewhere; here only that they succeed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
POLICIES = SRC / "rlverify" / "benchmarks" / "data" / "policies"

#: what no command below needs unless it says so
NEVER = ("torch", "ray", "matplotlib", "onnx", "ml_dtypes", "scipy.stats")


def loaded_by(args: list[str], watch: tuple[str, ...]) -> list[str]:
    """The modules of ``watch`` in ``sys.modules`` after ``rlverify ARGS`` ran (exit 0) in a fresh interpreter."""
    code = f"""
import contextlib, io, json, sys
from rlverify.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main({args!r})
    except SystemExit as exc:
        code = exc.code
print(json.dumps([code or 0, sorted(m for m in {watch!r} if m in sys.modules)]))
"""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    status, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert status == 0, done.stderr[-2000:]
    return loaded


def test_a_small_step_bounded_check_loads_no_network_runtime_stats_graph_or_linear_algebra_module():
    watch = (*NEVER, "onnxruntime", "gymnasium", "scipy.sparse.linalg", "scipy.sparse.csgraph", "scipy.special")
    assert loaded_by(["verify", "running-example-v1", "-p", "reach-goal-2"], watch) == []


def test_a_small_unbounded_check_loads_no_graph_module():
    assert loaded_by(["verify", "running-example-v1", "-p", "reach-goal"], ("scipy.sparse.csgraph",)) == []


def test_an_onnx_policy_is_run_by_onnxruntime_without_the_onnx_package():
    watch = (*NEVER, "gymnasium")
    args = ["verify", "freeway-v1", "-p", "goal", "--policy", str(POLICIES / "freeway_ppo.onnx")]
    assert loaded_by(args, watch) == []


def test_a_greedy_onnx_policy_gets_its_argmax_without_the_onnx_package():
    # racetrack's DQN (q-values): the argmax node is appended to the file's bytes, not by onnx's helper
    args = ["simulate", "racetrack-barto-small-v1", "-p", "goal", "--runs", "200", "--seed", "0"]
    assert loaded_by(args, (*NEVER, "gymnasium")) == []


def test_simulating_frozenlake_with_a_python_policy_loads_no_torch_nor_scipy_stats(tmp_path):
    policy = tmp_path / "uniform.py"
    policy.write_text(
        "import numpy as np\nFEATURES = ['s']\nACTIONS = ['left', 'down', 'right', 'up']\n"
        "def pi(obs):\n    return np.full((len(obs), 4), 0.25)\n"
    )
    args = ["simulate", "gym:FrozenLake-v1", "-p", 'P=? [F "goal"]', "--policy", f"{policy}:pi", "--seed", "0"]
    for method in (["okamoto"], ["clopper-pearson", "--runs", "500"], ["wilson", "--runs", "500"]):
        assert loaded_by([*args, "--method", *method], NEVER) == [], method


def test_help_loads_no_numpy():
    assert loaded_by(["--help"], ("numpy", "scipy", "stormpy", "onnxruntime")) == []
