"""A user's ``FILE.py:NAME`` system that never returns (issue 40): importing the file and calling ``NAME()`` run under
``--system-timeout`` (the policies' one timer, :class:`rlverify.models.userfile.Alarm`); past it, exit 2 with one line
naming the file, what was running and the option. A ``raise KeyboardInterrupt`` in the user's code is bad input (exit 2);
a real Ctrl-C still exits 130 "interrupted". Each case runs in its own process, the limit set low."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "examples" / "double_integrator.onnx"

FILES = {
    "loop_imp.py": "while True:\n    pass\n",
    "sleep_imp.py": "import time\ntime.sleep(1000)\n",
    "loop_call.py": "import time\ndef SYSTEM():\n    time.sleep(1000)\n",
    "busy_call.py": "def SYSTEM(**kw):\n    while True:\n        pass\n",
    "swallow_call.py": "import time\ndef SYSTEM():\n    for _ in range(4):\n        try:\n            time.sleep(1000)\n"
    "        except BaseException:\n            pass\n    return {}\n",
    "kbd_call.py": "def SYSTEM():\n    raise KeyboardInterrupt\n",
    "kbd_imp.py": "raise KeyboardInterrupt\n",
}


def rlverify(cwd: Path, *args: str, timeout: float = 30) -> tuple[int, str, str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "rlverify", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - start


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


@pytest.fixture
def here(tmp_path: Path) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("command", "target", "running"),
    [
        ("abstract", "loop_imp.py:SYSTEM", "importing the system declaration file"),
        ("abstract", "sleep_imp.py:SYSTEM", "importing the system declaration file"),
        ("abstract", "loop_call.py:SYSTEM", "calling SYSTEM()"),
        ("abstract", "busy_call.py:SYSTEM", "calling SYSTEM()"),
        ("abstract", "swallow_call.py:SYSTEM", "calling SYSTEM()"),  # the code swallows the first timeouts
        ("simulate", "loop_call.py:SYSTEM", "calling SYSTEM()"),
        ("report", "loop_imp.py:SYSTEM", "importing the system declaration file"),
    ],
)
def test_a_system_file_that_never_returns_is_stopped_at_the_limit(here, command, target, running):
    extra = ["-k", "2", "--phi", "0.3"] if command == "abstract" else ["--policy-timeout", "2"]
    code, out, err, took = rlverify(here, command, target, "--policy", str(POLICY), *extra, "--system-timeout", "1")
    file = target.split(":")[0]
    assert (code, out) == (2, "")
    assert one_line(err) == (
        f"error: {file}: {running} did not finish within 1 s (the file's code ran); if it is just slow, raise the "
        "limit with --system-timeout SECONDS (0: no limit)"
    )
    assert took < 10


def test_the_limit_is_per_part_and_constants_named_like_its_arguments_reach_the_function(here):
    (here / "slow_ok.py").write_text(
        "import time\ntime.sleep(0.6)\nfrom double_integrator import SYSTEM as DI\n"
        "def SYSTEM(timeout=0.0, option=''):\n    time.sleep(0.6)\n    assert (timeout, option) == (3.0, 7.0)\n"
        "    return DI\n"
    )
    (here / "double_integrator.py").write_text((ROOT / "examples" / "double_integrator.py").read_text())
    code, out, err, _ = rlverify(
        here, "simulate", "slow_ok.py:SYSTEM", "--json", "-c", "timeout=3,option=7", "--policy", str(POLICY),
        "--runs", "50", "--system-timeout", "1",
    )  # fmt: skip
    assert code == 0, err  # 0.6 s + 0.6 s: each part within its 1 s limit
    assert '"runs": 50' in out


@pytest.mark.parametrize(
    ("target", "running"),
    [("kbd_call.py:SYSTEM", "calling SYSTEM()"), ("kbd_imp.py:SYSTEM", "importing the system declaration file")],
)
def test_keyboard_interrupt_raised_by_the_users_code_is_bad_input(here, target, running):
    code, out, err, _ = rlverify(here, "abstract", target, "--policy", str(POLICY))
    assert (code, out) == (2, "")
    line = one_line(err)
    assert line.startswith(f"error: {target.split(':')[0]}: {running} ") and "KeyboardInterrupt" in line
    assert "no Ctrl-C came" in line


@pytest.mark.parametrize("target", ["loop_call.py:SYSTEM", "loop_imp.py:SYSTEM"])
def test_a_real_ctrl_c_in_the_users_code_is_still_an_interruption(here, target):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlverify", "abstract", target, "--policy", str(POLICY), "--system-timeout", "30"],
        cwd=here,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # (a background shell may ignore it)
    )
    time.sleep(3)  # the user's code is running (the import alone takes ~1 s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert (proc.returncode, out, err.strip()) == (130, "", "interrupted")


@pytest.mark.parametrize("value", ["-1", "nan", "1e9", "x"])
def test_a_bad_system_timeout_is_refused_naming_the_option(here, value):
    code, out, err, _ = rlverify(here, "abstract", "loop_imp.py:SYSTEM", "--policy", str(POLICY), "--system-timeout", value)
    assert (code, out) == (2, "")
    assert "--system-timeout" in one_line(err)


def test_a_policy_module_that_never_finishes_importing_is_stopped_at_the_policy_timeout(here):
    (here / "pol_loop.py").write_text("while True:\n    pass\n")
    code, out, err, took = rlverify(
        here, "verify", "running-example-v1", "-p", 'P=? [F "goal"]', "--policy", "pol_loop.py:pi", "--policy-timeout", "1"
    )
    assert (code, out) == (2, "")
    assert one_line(err) == (
        "error: pol_loop.py: importing the policy module did not finish within 1 s (the file's code ran); if it is just "
        "slow, raise the limit with --policy-timeout SECONDS (0: no limit)"
    )
    assert took < 10
