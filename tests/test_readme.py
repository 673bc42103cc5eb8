"""The README's Python examples run as written, and their numbers agree across the engines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run_and_agree(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as a user's working directory: the examples' files are written here
    (tmp_path / "examples").symlink_to(README.parent / "examples")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # our own documentation
    result, est, bound = namespace["result"], namespace["est"], namespace["bound"]
    assert (result.states, result.transitions) == (15_625, 892_165)  # the paper's Table 2 and its reference file
    assert est.interval[0] - 1e-9 <= result.value <= est.interval[1] + 1e-9  # fails with probability <= 0.05
    assert 0.0 <= bound.upper_bound <= 1.0 and bound.guarantee == "sound upper bound"
    assert capsys.readouterr().out.count("\n") >= 3


def test_readme_front_door_commands_run():
    """The commands of the block marked 'run by tests/test_readme.py' exit 0, and verify and simulate agree."""
    import json
    import shlex

    from rlverify.cli.main import main

    text = README.read_text()
    marker = "<!-- the commands of the next block are run by tests/test_readme.py -->"
    assert marker in text
    block = re.search(r"```bash\n(.*?)```", text.split(marker, 1)[1], flags=re.S).group(1)
    commands = [shlex.split(line)[1:] for line in block.splitlines() if line.startswith(".venv/bin/rlverify ")]
    assert len(commands) >= 5
    outputs = {}
    import contextlib
    import io

    for argv in commands:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = main(argv)
        assert code == 0, argv
        outputs.setdefault(" ".join(argv[:3]), buf.getvalue())
    exact = json.loads(outputs["verify running-example-v1 -p"])["result"]["value"]
    est = json.loads(outputs["simulate running-example-v1 -p"])["result"]
    assert exact == pytest.approx(0.264, abs=1e-9)  # worked out by hand (tests/test_running_example.py)
    assert est["interval"][0] <= exact <= est["interval"][1]


def test_readme_front_door_example_values(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    block = next(b for b in blocks if "cross_check" in b)
    namespace: dict = {}
    exec(compile(block, str(README), "exec"), namespace)  # our own documentation
    target, agreement = namespace["target"], namespace["agreement"]
    assert target.property.bound == 100 and target.policy is None and target.name.startswith("avoid-v1 (xMax=2")
    assert agreement.ok and agreement.exact.value == pytest.approx(0.264, abs=1e-9)


SCRATCH = "<!-- this block is run by tests/test_readme.py (from a scratch directory) -->"


def scratch_blocks() -> list[str]:
    text = README.read_text()
    return [re.search(r"```bash\n(.*?)```", part, flags=re.S).group(1) for part in text.split(SCRATCH)[1:]]


def test_readme_has_a_runnable_section_per_audience():
    blocks = scratch_blocks()
    joined = "\n".join(blocks)
    # PRISM/JANI modeller, Gymnasium user, continuous-control user
    assert len(blocks) >= 3 and "inspect" in joined and "gym:FrozenLake-v1" in joined and "abstract examples/" in joined


@pytest.mark.parametrize("index", range(len(scratch_blocks())))
def test_readme_audience_blocks_run_as_written(tmp_path, index):
    """Each block runs with bash -e from a scratch directory that sees the repository's .venv and examples/."""
    import os
    import subprocess
    import sys

    root = README.parent
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the environment running the tests
    (tmp_path / "examples").symlink_to(root / "examples")
    block = scratch_blocks()[index]
    done = subprocess.run(
        ["bash", "-e", "-c", block],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert done.returncode == 0, (block, done.stdout[-2000:], done.stderr[-2000:])
