"""``rlverify examples [DIR]``: the README's example files, shipped in the package, copied out safely.

Before, ``examples/`` was not in the wheel: after ``pip install``, 13 of the README's command lines failed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rlverify.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
#: files the README's and the documentation's commands use (they may name more; all must be shipped)
README_FILES = {
    "robots.nm",
    "robots_pi.json",
    "running_example.props",
    "acc_directions.json",
    "double_integrator.py",
    "double_integrator.onnx",
    "gymnasium/ppo_frozenlake.zip",
    "gymnasium/train_frozenlake.py",
}


def _tracked() -> dict[str, bytes]:
    """The repository's examples/ as git tracks them (path -> content)."""
    out = subprocess.run(
        ["git", "ls-files", "src/rlverify/benchmarks/data/examples"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    prefix = "src/rlverify/benchmarks/data/examples/"
    return {p.removeprefix(prefix): (ROOT / p).read_bytes() for p in out.stdout.split()}


def test_the_readme_names_only_shipped_files():
    """Every examples/... file the README and the documentation's pages name is shipped (so `rlverify examples`
    provides it), and these at least."""
    import re

    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])
    named = set(re.findall(r"examples/([\w/.-]+\.(?:nm|prism|jani|json|py|onnx|zip|ipynb|props))", text))
    tracked = set(_tracked())
    assert named <= tracked, named - tracked
    assert README_FILES <= named, README_FILES - named


def test_copies_every_example_byte_for_byte(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["examples"]) == 0  # default DIR: ./examples, the README's paths
    tracked = _tracked()
    copied = {
        p.relative_to(tmp_path / "examples").as_posix(): p.read_bytes()
        for p in (tmp_path / "examples").rglob("*")
        if p.is_file()
    }
    assert copied == tracked
    assert f"{len(tracked)} example files written to examples" in capsys.readouterr().out


def test_list_prints_the_shipped_files(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["examples", "--list"]) == 0
    assert capsys.readouterr().out.split() == sorted(_tracked())
    assert not any(tmp_path.iterdir())  # --list writes nothing


def test_refuses_to_overwrite_without_force(tmp_path, capsys):
    target = tmp_path / "ex"
    (target / "gymnasium").mkdir(parents=True)
    (target / "robots.nm").write_text("mine")
    (target / "notes.txt").write_text("not an example")
    assert main(["examples", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "robots.nm: file exists" in err and "--force" in err
    assert (target / "robots.nm").read_text() == "mine"  # nothing written: checked before any file
    assert not (target / "double_integrator.onnx").exists()
    assert main(["examples", str(target), "--force"]) == 0
    assert (target / "robots.nm").read_bytes() == _tracked()["robots.nm"]
    assert (target / "notes.txt").read_text() == "not an example"  # other files are left alone


@pytest.mark.parametrize("bad", ["file", "/proc/rlverify-examples"])
def test_bad_directory_exit_2_one_line(tmp_path, capsys, bad):
    if bad == "file":
        (tmp_path / "file").write_text("x")
        bad = str(tmp_path / "file")
    assert main(["examples", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and bad in err


def test_refuses_the_package_directory_itself(capsys):
    assert main(["examples", str(ROOT / "examples"), "--force"]) == 2
    assert "is where rlverify's examples are kept" in capsys.readouterr().err


def test_repository_examples_is_the_package_copy():
    """One copy: the repository's examples/ is a link to the package data, not a second set of files."""
    link = ROOT / "examples"
    assert link.is_symlink() and link.resolve() == (ROOT / "src/rlverify/benchmarks/data/examples").resolve()


def test_json_lists_and_reports_the_files_in_the_envelope(tmp_path, capsys, monkeypatch):
    import json

    monkeypatch.chdir(tmp_path)
    assert main(["examples", "--list", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["command"] == "examples" and set(env["result"]["files"]) == set(_tracked())
    assert main(["examples", "out", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["result"]["directory"] == "out" and len(env["result"]["written"]) == len(_tracked())
    assert (tmp_path / "out" / "robots.nm").is_file()
