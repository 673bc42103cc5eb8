"""A policy refused while Storm's one-state build still runs in its thread (``--strategy merged``) exits 2 with its
one line: the thread is joined first (a thread inside Storm's C++ at interpreter exit aborts the process with
``terminate called without an active exception``, exit 134). Run as processes: the exit is the interpreter's."""

from __future__ import annotations

from tests.cli.test_stdout import rlverify
from tests.exact.test_merged import TWO_STEP


def test_a_refused_policy_exits_2_while_storms_build_runs_in_its_thread(tmp_path):
    (tmp_path / "two.prism").write_text(TWO_STEP)
    (tmp_path / "wrong.py").write_text(
        "import numpy as np\nFEATURES = ['t']\nACTIONS = ['go', 'stay']\n"
        "def pi(x):\n    return np.tile([0.5, 0.5], (len(x), 1))\n"
    )
    args = ["verify", str(tmp_path / "two.prism"), "-p", 'P=? [F "done"]', "--policy", f"{tmp_path / 'wrong.py'}:pi"]
    for strategy in ("merged", "merged", "merged", "auto"):
        run = rlverify(*args, "--strategy", strategy)
        assert run.returncode == 2, (strategy, run.returncode, run.stderr[-500:])
        assert "does not fit model" in run.stderr and "terminate called" not in run.stderr
        assert "Traceback" not in run.stderr
