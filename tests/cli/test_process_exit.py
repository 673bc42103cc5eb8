"""The ``rlverify`` process exits without the interpreter's teardown of its modules (:func:`rlverify.cli.main.run`),
but does first what that exit did which a command may rely on: non-daemon threads joined, then ``atexit`` handlers,
Python's and the C library's buffered output written, the exit status kept. Where a user's Python file ran, the exit
is Python's own (a file the user's code left open is flushed). Run as processes: the exit is what is tested."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
VERIFY = ["verify", "running-example-v1", "-p", 'P=? [F<=2 "goal"]', "--json"]


def process(code: str, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -c code argv...`` with this tree's ``src`` first on the path, the C library's output buffered as a
    user's shell has it (``PYTHONUNBUFFERED`` makes Python unbuffer C's streams too)."""
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True, timeout=300, check=False, cwd=cwd
    )


def test_threads_are_joined_then_atexit_handlers_run_then_buffers_are_written(tmp_path):
    thread_file, handler_file = tmp_path / "thread.txt", tmp_path / "handler.txt"
    code = f"""
import atexit, ctypes, os, threading, time
def late():
    time.sleep(0.5)
    open({str(thread_file)!r}, "w").write("done")
threading.Thread(target=late).start()  # not a daemon: Python's exit waits for it
atexit.register(lambda: open({str(handler_file)!r}, "w").write(
    "after the thread" if os.path.exists({str(thread_file)!r}) else "before the thread"))
ctypes.CDLL(None).printf(b"left in the C library's buffer")  # stdout is a pipe: fully buffered, no newline
from rlverify.cli.main import run
run()
"""
    done = process(code, *VERIFY)
    assert done.returncode == 0, done.stderr
    assert thread_file.read_text() == "done"
    assert handler_file.read_text() == "after the thread"  # Python's order: threads joined, then atexit
    assert "left in the C library's buffer" in done.stdout + done.stderr
    # the result itself: two steps from A, 0.3 * (0.2 * 0.5 * 0.8 + 0.8) = 0.264 (tests/test_running_example.py)
    document = done.stdout.replace("left in the C library's buffer", "")
    assert abs(json.loads(document)["result"]["value"] - 0.264) < 1e-12


def test_exit_statuses_are_the_commands():
    entry = "from rlverify.cli.main import run; run()"
    assert process(entry, *VERIFY).returncode == 0
    bad = process(entry, "verify", "no-such-benchmark-v1", "-p", 'P=? [F "goal"]')
    assert bad.returncode == 2 and "unknown benchmark 'no-such-benchmark-v1'" in bad.stderr
    usage = process(entry, "verify")  # argparse's usage error (SystemExit 2)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    helped = process(entry, "--help")  # argparse's SystemExit(0), its text on stdout
    assert helped.returncode == 0 and "How safe is this trained policy" in helped.stdout
    # a threshold not met: the verdict's exit status (1), through the same exit
    failed = process(entry, "verify", "running-example-v1", "-p", 'P>=0.5 [F<=2 "goal"]', "--fail-on-violation")
    assert failed.returncode == 1, failed.stderr


def test_a_reader_that_went_away_is_not_an_error(tmp_path):
    entry = "from rlverify.cli.main import run; run()"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    shell = f"{sys.executable} -c {entry!r} benchmarks list | head -c 10 >/dev/null; echo ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.strip() == "0", done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_a_python_policys_open_file_is_flushed_at_exit(tmp_path):
    """The user's code is finalised as Python does: a log file held by a module of theirs and never closed keeps what
    it wrote (lost in the short exit, which skips finalisation: checked by forcing it below)."""
    log = tmp_path / "calls.log"
    (tmp_path / "m.prism").write_text(
        "mdp\nmodule m\n  x : [0..1] init 0;\n  [up] x=0 -> 0.5 : (x'=1) + 0.5 : (x'=0);\n  [stay] true -> true;\n"
        'endmodule\nlabel "top" = x=1;\n'
    )
    (tmp_path / "logged.py").write_text(
        "import sys, types\nimport numpy as np\n"
        "helper = types.ModuleType('policy_log')  # a module of the user's, as an import of theirs makes\n"
        f"helper.LOG = open({str(log)!r}, 'w')  # never closed: Python's exit flushes it\n"
        "sys.modules['policy_log'] = helper\n"
        "FEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(x):\n    helper.LOG.write(f'asked about {len(x)} states\\n')\n"
        "    return np.tile([0.5, 0.5], (len(x), 1))\n"
    )
    argv = ["verify", str(tmp_path / "m.prism"), "-p", 'P=? [F<=1 "top"]', "--policy", f"{tmp_path / 'logged.py'}:pi"]
    done = process("from rlverify.cli.main import run; run()", *argv, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["value"] == 0.25  # up with 1/2, then to x=1 with 1/2
    assert log.read_text().startswith("asked about 1 states")
    # the short exit, forced, loses it: what the test above would not see without Python's exit
    forced = "import rlverify.models.userfile as u; u.ran_user_code = lambda: False\n"
    done = process(forced + "from rlverify.cli.main import run; run()", *argv, "--json")
    assert done.returncode == 0, done.stderr
    assert log.read_text() == ""


def test_a_trusted_gym_module_is_user_code_too(tmp_path):
    """``gym:MODULE:ID --trust-code`` imports the user's module: Python's exit, which flushes the file it left open."""
    log = tmp_path / "env.log"
    (tmp_path / "mylogenv.py").write_text(f"LOG = open({str(log)!r}, 'w')\nLOG.write('imported')\n")
    argv = ["verify", "gym:mylogenv:NotRegistered-v0", "--trust-code", "-p", 'Pmax=? [F "goal"]', "--mode", "monolithic"]
    done = process("from rlverify.cli.main import run; run()", *argv, cwd=tmp_path)
    assert done.returncode == 2 and "NotRegistered-v0" in done.stderr, done.stderr
    assert log.read_text() == "imported"


def test_without_stdout_or_stderr_the_status_is_the_commands():
    entry = "from rlverify.cli.main import run; run()"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for redirect in (">&-", "2>&-"):
        shell = f"{sys.executable} -c {entry!r} --version {redirect}; echo status $?"
        done = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, text=True, timeout=300, check=False)
        assert "status 0" in done.stdout, (redirect, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr


def test_a_profiler_running_the_command_carries_on_after_it():
    """``python -m cProfile -m rlverify``: run() raises SystemExit (Python's exit), so the profiler prints its table."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    argv = [sys.executable, "-m", "cProfile", "-s", "cumtime", "-m", "rlverify", "--version"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and "rlverify 0.1.0" in done.stdout
    assert "function calls" in done.stdout, done.stdout[-500:]
