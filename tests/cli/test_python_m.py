"""``python -m rlverify`` is the ``rlverify`` command: same output, same exit codes (0 result, 2 bad input)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def python_m(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "rlverify", *args], env=env, capture_output=True, text=True, timeout=120)


def test_python_m_verifies_with_the_value_by_hand():
    done = python_m("verify", "running-example-v1", "-p", 'P=? [F<=2 "goal"]', "--json")
    assert done.returncode == 0, done.stderr
    # two steps from A: 0.3 * (0.2 * 0.5 * 0.8 + 0.8) = 0.264 (tests/test_running_example.py)
    assert abs(json.loads(done.stdout)["result"]["value"] - 0.264) < 1e-9


def test_python_m_bad_input_exits_2_with_one_line_naming_it():
    done = python_m("verify", "no-such-benchmark-v1", "-p", 'P=? [F "goal"]')
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown benchmark 'no-such-benchmark-v1'" in lines[0]


def test_python_m_version_and_usage():
    assert python_m("--version").stdout.strip() == "rlverify 0.1.0"
    done = python_m()
    assert done.returncode == 2 and "the following arguments are required: COMMAND" in done.stderr
