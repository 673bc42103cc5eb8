"""stdout carries the result only: what native code writes to file descriptor 1 (HiGHS's banner, Storm's log with
-v, a policy's os.write) goes to stderr, so --json output is JSON (run as a process: the descriptors are real)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.small_models import UP_STAY

ROOT = Path(__file__).resolve().parents[2]


def rlverify(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "rlverify.cli.main", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
        check=False,
    )


def test_a_policy_writing_to_descriptor_1_does_not_break_json(tmp_path):
    (tmp_path / "m.prism").write_text(UP_STAY)
    (tmp_path / "noisy.py").write_text(
        "import os\nimport numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(x):\n    os.write(1, b'native noise\\n')\n"
        "    return np.tile([0.5, 0.5], (len(x), 1))\n"
    )
    run = rlverify(
        "verify", str(tmp_path / "m.prism"), "-p", 'P=? [F "top"]', "--policy", f"{tmp_path / 'noisy.py'}:pi", "--json"
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["result"]["value"] > 0  # stdout is exactly the JSON document
    assert "native noise" in run.stderr


def test_abstract_json_is_json_although_highs_prints_a_banner():
    run = rlverify("abstract", "acc-v1", "-k", "1", "--json")
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["result"]["guarantee"] == "sound upper bound"


def test_verbose_storm_log_goes_to_stderr():
    run = rlverify("-v", "verify", "freeway-v1", "-p", "goal", "--mode", "monolithic", "--json")
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["result"]["pmax"] == 1.0
