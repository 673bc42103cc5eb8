"""Output people can script and read: one JSON envelope on every command, errors in it too, --fail-on-violation's
exit codes from the verdict, -v/-q on either side of the subcommand, plain progress lines where stderr is a pipe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlverify
from rlverify.cli.main import COMMANDS, _parsers, build_parser, main
from rlverify.policies import MLP, save_mlp_onnx

ROOT = Path(__file__).resolve().parents[2]
ENVELOPE = {"command", "rlverify", "exit_code", "error", "holds", "result", "warnings"}
#: the running example's P(F<=2 "goal") under its reference policy, worked out by hand (tests/test_running_example.py)
RUNNING_EXAMPLE = 0.264


def rlverify_process(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The CLI as a process (stdout and stderr are pipes: not terminals)."""
    return subprocess.run(
        [sys.executable, "-m", "rlverify.cli.main", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=timeout,
        check=False,
    )


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def envelope(text: str) -> dict:
    """stdout parsed as the one envelope (it must be the whole of stdout)."""
    data = json.loads(text)
    assert set(data) == ENVELOPE, sorted(data)
    assert data["rlverify"] == rlverify.__version__
    return data


# ------------------------------------------------------------------ --json everywhere, one envelope


def test_every_command_takes_json_and_v_and_q():
    leaves = [p for p in _parsers(build_parser()) if not any(a.__class__.__name__ == "_SubParsersAction" for a in p._actions)]
    assert len(leaves) >= len(COMMANDS) + 1  # benchmarks list/show, reproduce table2
    missing = [(p.prog, o) for p in leaves for o in ("--json", "-v", "-q") if o not in p._option_string_actions]
    assert missing == []


@pytest.mark.parametrize(
    ("argv", "command", "check"),
    [
        (["benchmarks", "list"], "benchmarks list", lambda r: "avoid-v1" in [b["id"] for b in r["benchmarks"]]),
        (["benchmarks", "show", "avoid-v1"], "benchmarks show", lambda r: r["id"] == "avoid-v1" and r["kind"] == "prism"),
        (
            ["verify", "running-example-v1", "-p", "reach-goal-2"],
            "verify",
            lambda r: r["value"] == pytest.approx(RUNNING_EXAMPLE, abs=1e-9),
        ),
        (["inspect", "running-example-v1", "--no-build"], "inspect", lambda r: r["target"] == "running-example-v1"),
    ],
    ids=["benchmarks-list", "benchmarks-show", "verify", "inspect"],
)
def test_the_envelope_is_the_same_for_every_command(capsys, argv, command, check):
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    data = envelope(out)
    assert data["command"] == command and data["exit_code"] == 0 and data["error"] is None
    assert check(data["result"])


def test_the_result_inside_is_the_results_own_json(capsys, tmp_path):
    """``result`` is what ``--out FILE.json`` writes (Result.to_json), and ``warnings`` are the result's."""
    saved = tmp_path / "r.json"
    code, out, _ = cli(capsys, "verify", "running-example-v1", "-p", "reach-goal-2", "--json", "--out", str(saved))
    assert code == 0
    data = envelope(out)
    own = json.loads(saved.read_text())
    assert data["result"] == {**own, "timings": data["result"]["timings"]} and data["warnings"] == own["warnings"]


def test_an_error_with_json_is_the_envelope_on_stdout_and_one_line_on_stderr(capsys):
    code, out, err = cli(capsys, "verify", "no-such-benchmark-v1", "-p", "x", "--json")
    assert code == 2
    data = envelope(out)
    assert data["exit_code"] == 2 and data["result"] is None and data["command"] == "verify"
    assert "unknown benchmark 'no-such-benchmark-v1'" in data["error"]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0] == f"error: {data['error']}"


def test_a_usage_error_with_json_is_the_envelope_too(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "running-example-v1", "-p", "reach-goal-2", "--runs", "many", "--json"])
    assert exc.value.code == 2
    out = capsys.readouterr()
    data = envelope(out.out)
    assert data["exit_code"] == 2 and data["command"] == "simulate"
    assert "--runs" in data["error"] and "'many'" in data["error"]
    assert out.err.strip().splitlines()[-1].endswith("expected a positive whole number, got 'many'")


def test_train_and_reproduce_take_json_and_report_a_refusal_in_the_envelope(capsys, tmp_path):
    code, out, _ = cli(capsys, "train", "running-example-v1", "--out", str(tmp_path / "p.zip"), "--json")
    assert code == 2
    data = envelope(out)
    assert data["command"] == "train" and "give a FILE.onnx name" in data["error"]
    (tmp_path / "table2.json").write_text("{}")
    code, out, _ = cli(capsys, "reproduce", "table2", "--out", str(tmp_path), "--json")
    assert code == 2
    data = envelope(out)
    assert data["command"] == "reproduce table2" and "table2.json" in data["error"]


# ------------------------------------------------------------------ --fail-on-violation


@pytest.mark.parametrize(
    ("prop", "extra", "code", "holds"),
    [
        ('P>=0.25 [F<=2 "goal"]', [], 0, True),  # 0.264 >= 0.25
        ('P>=0.3 [F<=2 "goal"]', [], 1, False),
        ('P<=0.3 [F<=2 "goal"]', [], 0, True),
        ('P<=0.25 [F<=2 "goal"]', [], 1, False),
        ('P>=0.3 [F<=2 "goal"]', ["--mode", "deterministic"], None, None),  # argmax: computed below
        ('P<=0.25 [F<=2 "goal"]', ["--mode", "monolithic"], 1, False),  # Pmax = 0.96 (tests/test_front_door.py)
    ],
    ids=["ge-holds", "ge-violated", "le-holds", "le-violated", "deterministic", "monolithic"],
)
def test_verify_fails_on_a_violated_threshold(capsys, prop, extra, code, holds):
    argv = ["verify", "running-example-v1", "-p", prop, *extra]
    if code is None:  # the deterministic value, from the same engine with P=?, decides which side 0.3 is on
        c, out, _ = cli(capsys, "verify", "running-example-v1", "-p", 'P=? [F<=2 "goal"]', *extra, "--json")
        value = envelope(out)["result"]["value"]
        assert c == 0 and abs(value - 0.3) > 1e-3
        code, holds = (0, True) if value >= 0.3 else (1, False)
    got, out, err = cli(capsys, *argv, "--json", "--fail-on-violation")
    data = envelope(out)
    assert (got, data["exit_code"], data["holds"], data["result"]["satisfied"]) == (code, code, holds, holds), err
    assert cli(capsys, *argv, "--json")[0] == 0  # without the option: exit 0, the verdict in the output only


def test_verify_fails_on_avoid_where_the_policy_collides_too_often(capsys):
    """Avoid 4x4 with its reference policy: P(collision within 100 steps) = 0.84 (the paper's Table 2)."""
    argv = ["verify", "avoid-v1", "--fail-on-violation", "-q"]
    assert main([*argv, "-p", "P<=0.9 [F<=100 COLLISION=true]"]) == 0
    assert main([*argv, "-p", "P<=0.8 [F<=100 COLLISION=true]"]) == 1
    out = capsys.readouterr().out
    assert out.count("satisfied") == 2 and "yes" in out and "no" in out


def test_fail_on_violation_needs_a_threshold(capsys):
    code, _, err = cli(capsys, "verify", "running-example-v1", "-p", "reach-goal-2", "--fail-on-violation")
    assert code == 2 and "--fail-on-violation needs a threshold property" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "code", "holds"),
    [
        (["-p", 'P>=0.2 [F<=2 "goal"]', "--runs", "3000"], 0, True),  # the interval (+-0.03 around 0.264) is above 0.2
        (["-p", 'P>=0.35 [F<=2 "goal"]', "--runs", "3000"], 1, False),
        (["-p", 'P>=0.264 [F<=2 "goal"]', "--runs", "3000"], 3, None),  # the interval contains 0.264: undecided
        (["-p", 'P=? [F<=2 "goal"]', "--sprt", "0.2"], 0, True),  # Wald's SPRT for P >= 0.2
        (["-p", 'P=? [F<=2 "goal"]', "--sprt", "0.35"], 1, False),
    ],
    ids=["holds", "violated", "undecided", "sprt-holds", "sprt-violated"],
)
def test_simulate_fails_on_a_violated_threshold(capsys, argv, code, holds):
    got, out, err = cli(capsys, "simulate", "running-example-v1", *argv, "--seed", "1", "--json", "--fail-on-violation")
    data = envelope(out)
    assert (got, data["exit_code"], data["holds"]) == (code, code, holds), err
    if "--sprt" not in argv:
        lo, hi = data["result"]["interval"]
        assert lo <= RUNNING_EXAMPLE <= hi  # the interval covers the exact value, so the verdicts above are right


LINE = """
SYSTEM = {
    "name": "line",
    "variables": ["x"],
    "domain": {"x": [-1, 3]},
    "actions": ["a", "b"],
    "constants": {"speed": 1.0},
    "initial": {"default": {"x": [0, 0.1]}},
    "unsafe": ["x >= 0.5"],
    "observation": {"x": "x"},
    "horizon": 1,
    "pieces": [{"next": {"x": "x + speed"}}],
}
"""


@pytest.fixture
def line_system(tmp_path: Path) -> tuple[str, str]:
    """x' = x + speed from [0, 0.1], unsafe x >= 0.5: in one step P(unsafe) = 1 with speed 1, 0 with speed 0."""
    (tmp_path / "line.py").write_text(LINE)
    net = MLP((np.array([[1.0]]), np.array([[1.0], [-1.0]])), (np.zeros(1), np.zeros(2)))
    save_mlp_onnx(tmp_path / "p.onnx", net, features=["x"], actions=["a", "b"], training={"algorithm": "hand-made"})
    return f"{tmp_path / 'line.py'}:SYSTEM", str(tmp_path / "p.onnx")


@pytest.mark.parametrize(
    ("speed", "threshold", "code", "holds"),
    [("0", "0", 0, True), ("1", "0.5", 1, False), ("1", "1", 0, True)],
    ids=["safe", "violated", "at-one"],
)
def test_abstract_fails_on_a_threshold_its_sound_bound_does_not_show(capsys, line_system, speed, threshold, code, holds):
    target, policy = line_system
    argv = ["abstract", target, "--policy", policy, "-c", f"speed={speed}", "--threshold", threshold]
    got, out, err = cli(capsys, *argv, "--json", "--fail-on-violation")
    data = envelope(out)
    assert data["result"]["upper_bound"] == float(speed)  # P(F<=1 unsafe) is exactly 0 or 1 here
    assert (got, data["exit_code"], data["holds"]) == (code, code, holds), err
    if holds is None:
        assert any("is undecided" in w for w in data["warnings"])
    if holds is False:  # every start state fails in one step: the sound lower bound and the witness show it
        assert data["result"]["lower_all"] == 1.0 and data["result"]["worst_witness"]["lower"] == pytest.approx(1.0, abs=1e-12)
        assert data["result"]["verdict"] == "unsafe (witness, sound)"


def test_abstract_threshold_must_be_a_probability(capsys, line_system):
    target, policy = line_system
    code, _, err = cli(capsys, "abstract", target, "--policy", policy, "--threshold", "1.5")
    assert code == 2 and "--threshold: expected a probability in [0, 1], got 1.5" in err


# ------------------------------------------------------------------ -v / -q, progress lines


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_and_verbose_on_either_side_of_the_subcommand(capsys, where, tmp_path):
    verify = ["verify", "running-example-v1", "-p", "reach-goal-2", "--out", str(tmp_path / "v.json")]
    for flag in ("-q", "-v", "--quiet", "--verbose"):
        argv = [flag, *verify] if where == "before" else [*verify, flag]
        (tmp_path / "v.json").unlink(missing_ok=True)
        code, out, _ = cli(capsys, *argv)
        assert code == 0 and "0.264" in out, flag
    with pytest.raises(SystemExit) as exc:
        main(["-v", *verify, "-q"])
    assert exc.value.code == 2
    assert "give one of them" in capsys.readouterr().err


def test_quiet_leaves_out_notes_but_keeps_the_result(capsys, tmp_path):
    target = tmp_path / "x.py"
    argv = ["inspect", "running-example-v1", "--policy-template", str(target)]
    code, out, err = cli(capsys, *argv)
    assert code == 0 and f"wrote {target}" in err
    code, out, err = cli(capsys, *argv, "--force", "-q")
    assert code == 0 and err == "" and "variables" in out


def test_verbose_prints_plain_progress_lines_where_stderr_is_a_pipe(capsys):
    argv = ("simulate", "running-example-v1", "-p", "reach-goal-2", "--runs", "6000", "--batch-size", "2000", "--json")
    progress = re.compile(r"^\d\d:\d\d:\d\d simulating: [\d,]+/6,000$")
    code, out, err = cli(capsys, *argv)  # (capsys: stderr is not a terminal either) without -v: no progress at all
    assert code == 0 and envelope(out)["result"]["runs"] == 6000 and not any(progress.match(ln) for ln in err.splitlines())
    loud = rlverify_process(*argv, "-v")
    assert loud.returncode == 0, loud.stderr[-2000:]
    assert envelope(loud.stdout)["result"]["runs"] == 6000
    lines = [ln for ln in loud.stderr.splitlines() if progress.match(ln)]
    assert lines and lines[-1].endswith(" simulating: 6,000/6,000"), loud.stderr[-2000:]
    assert "\x1b" not in loud.stderr  # plain text: no ANSI codes, no live display


def test_verbose_progress_of_an_exact_run_where_stderr_is_a_pipe():
    done = rlverify_process("verify", "running-example-v1", "-p", "reach-goal-2", "-v")
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"^\d\d:\d\d:\d\d verifying$", done.stderr, flags=re.MULTILINE), done.stderr[-2000:]
    assert "\x1b" not in done.stderr
