"""A user's Python system ``FILE.py:NAME`` (issue 40): an exception or ``sys.exit`` in its function is exit 2 with one
line naming the file, the call and the exception; commands that take no continuous system refuse such a target
before its top-level code runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.incli import cli, one_line

SYSTEM_FILE = """
import pathlib, sys
pathlib.Path(__file__).with_name("marker").write_text("ran")
def RAISES():
    raise ValueError("boom in the factory")
def EXITS():
    sys.exit(3)
def PRINTS_AND_RAISES():
    print("hello")
    raise KeyError("k")
"""


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sys.py").write_text(SYSTEM_FILE)
    return tmp_path


# the commands that take a continuous system, with what else they need
TAKING = {
    "abstract": ["--policy", "c.onnx"],
    "simulate": ["--policy", "c.onnx"],
    "report": ["--policy", "c.onnx"],
}


@pytest.mark.parametrize("command", sorted(TAKING))
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("RAISES", "sys.py: calling RAISES() raised ValueError: boom in the factory (the file's code ran)"),
        ("EXITS", "sys.py: calling EXITS() called sys.exit(3) (the file's code ran)"),
        ("PRINTS_AND_RAISES", "sys.py: calling PRINTS_AND_RAISES() raised KeyError: 'k' (the file's code ran)"),
    ],
)
def test_an_exception_or_exit_in_the_system_function_is_exit_2_with_one_line(capsys, here, command, name, expected):
    code, out, err = cli(capsys, command, f"sys.py:{name}", *TAKING[command])
    assert (code, out) == (2, "")
    lines = [ln for ln in err.splitlines() if ln.strip() and ln != "hello"]  # what the function printed: stderr
    assert "Traceback" not in err and lines == [f"error: {expected}"], err


def test_the_python_api_raises_the_input_file_error(here):
    from rlverify.errors import InputFileError
    from rlverify.models.continuous import load_system

    with pytest.raises(InputFileError, match=r"calling EXITS\(\) called sys.exit\(3\)"):
        load_system("sys.py:EXITS")


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "-p", 'P=? [F "goal"]'],
        ["verify", "-p", 'P=? [F "goal"]', "--mode", "monolithic"],
        ["inspect"],
        ["explain", "-p", 'P=? [F "goal"]'],
        ["shield", "-p", 'P=? [F "goal"]', "--meet"],
        ["robust", "-p", 'P=? [F "goal"]'],
        ["map", "-p", 'P=? [F "goal"]', "--map", "x,y"],
        ["heatmap", "--json"],
    ],
)
def test_commands_taking_no_continuous_system_refuse_it_before_its_code_runs(capsys, here, args):
    code, _, err = cli(capsys, args[0], "sys.py:RAISES", *args[1:])
    assert code == 2
    assert "is a continuous system" in one_line(err) and "use rlverify abstract sys.py:RAISES" in err
    assert not (here / "marker").exists()  # the file's top-level code did not run


def test_train_refuses_a_system_file_before_its_code_runs(capsys, here):
    code, _, err = cli(capsys, "train", "sys.py:RAISES", "--out", "t.onnx")
    assert code == 2
    assert "'rlverify train' trains on a registered benchmark" in one_line(err)
    assert not (here / "marker").exists()  # the file's top-level code did not run
