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


LINE = """SYSTEM = {"name": "line", "variables": ["x"], "domain": {"x": [-1, 3]}, "actions": ["a", "b"],
    "initial": {"default": {"x": [0, 0.1]}}, "unsafe": ["x >= 0.5"], "observation": {"x": "x"}, "horizon": 1,
    "pieces": [{"next": {"x": "x + 1"}}]}
"""


def test_abstract_with_the_milp_prints_json_and_no_highs_banner_at_all(tmp_path):
    """The MILP runs (--milp always): stdout is the JSON document, and HiGHS's banner is not printed at all (it was
    made before output_flag=False; the descriptor guard only moved it to stderr)."""
    import numpy as np

    from rlverify.policies import MLP, save_mlp_onnx

    (tmp_path / "line.py").write_text(LINE)
    net = MLP((np.array([[1.0]]), np.array([[1.0], [-1.0]])), (np.zeros(1), np.zeros(2)))
    save_mlp_onnx(tmp_path / "p.onnx", net, features=["x"], actions=["a", "b"], training={"algorithm": "hand-made"})
    run = rlverify(
        "abstract", f"{tmp_path / 'line.py'}:SYSTEM", "--policy", str(tmp_path / "p.onnx"), "--milp", "always", "--json"
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)["result"]
    assert result["n_milp_parts"] >= 1 and result["upper_bound"] == 1.0  # x + 1 >= 0.5 from [0, 0.1]: surely unsafe
    assert "HiGHS" not in run.stderr


def test_verbose_storm_log_goes_to_stderr():
    run = rlverify("-v", "verify", "freeway-v1", "-p", "goal", "--mode", "monolithic", "--json")
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["result"]["pmax"] == 1.0
