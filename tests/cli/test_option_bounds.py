"""``--max-memory`` and ``--max-work`` refuse integers beyond 64 bits, as every integer option does (issue 40)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlverify.cli.main import main

MODEL = 'mdp\nmodule m\n  x : [0..1] init 0;\n  [a] true -> (x\'=1);\nendmodule\nlabel "goal" = x=1;\n'
PROPERTY = ["-p", 'Pmax=? [F<=3 "goal"]']


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["verify", "--max-memory", "99999999999999999999"], "--max-memory: 99999999999999999999 is out of range"),
        (["verify", "--max-memory", "1" + "0" * 400 + "K"], "--max-memory: 1000"),
        (["verify", "--max-memory", "8388608T"], "--max-memory: 8388608T is out of range"),  # 2**63 bytes
        (["verify", "--max-work", "99999999999999999999"], "--max-work: 1e+20 is out of range"),
        (["shield", "--meet", "--max-work", "1e30"], "--max-work: 1e+30 is out of range"),
    ],
)
def test_sizes_and_work_beyond_64_bits_are_refused(capsys, tmp_path: Path, monkeypatch, args, expected):
    monkeypatch.chdir(tmp_path)
    Path("m.prism").write_text(MODEL)
    command, *rest = args
    mode = ["--mode", "monolithic"] if command == "verify" else []
    try:
        code = main([command, "m.prism", *PROPERTY, *mode, *rest])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and expected in lines[0] and "64-bit" in lines[0], err


def test_the_largest_64_bit_size_is_taken(capsys, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.prism").write_text(MODEL)
    code = main(["verify", "m.prism", *PROPERTY, "--mode", "monolithic", "--max-memory", str(2**63 - 1), "--json"])
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["simulate", "--runs", "1e30"], "--runs: 1e30 is out of range (a 64-bit integer)"),
        (["simulate", "--runs", str(2**63)], f"--runs: {2**63} is out of range"),
        (["simulate", "--run-limit", "99999999999999999999"], "--run-limit: 99999999999999999999 is out of range"),
        (["heatmap", "--runs", "1e30"], "--runs: 1e30 is out of range"),
    ],
)
def test_run_counts_beyond_64_bits_are_refused_as_typed(capsys, args, expected):
    """``--runs 1e30`` was taken as the double's integer and printed as 1,000,000,000,000,000,019,884,624,838,656
    (not what was typed); run counts now refuse 64 bits and beyond as every integer option, naming the text."""
    command, *rest = args
    prop = ["-p", "reach-goal-2"] if command == "simulate" else []
    with pytest.raises(SystemExit) as exit_:
        main([command, "running-example-v1", *prop, *rest])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert exit_.value.code == 2 and len(lines) == 1 and expected in lines[0] and "19,884" not in err, err
