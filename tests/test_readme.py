"""README.md runs as written: every command block from an empty directory, every Python block, and the figures it quotes.

The convention for the README's fenced command blocks (the words after the language in the info string):

    ```bash                  run: each block in its own empty directory, after ``rlverify examples`` (which
                             writes ./examples), line by line with ``bash -e -o pipefail``
    ```bash slow             run only with the slow tests (``make test-all``), not in the default suite
    ```bash needs=torch      run only where the module is importable (``needs=a,b``: all of them); skipped,
                             saying so, in the wheel step, which installs the base package only
    ```bash skip             never run: about the repository (``make demo``) or illustrative only

Words combine (```` ```bash slow needs=torch ````). GitHub reads the first word as the language, so the
page renders as before. ``.venv/bin/rlverify`` in the commands is the environment under test: the
scratch directory's ``.venv`` links to the Python running the tests (the editable install), or to the
environment named by ``RLVERIFY_README_VENV`` (``make test-wheel``: a fresh venv with only the built wheel
and its base dependencies, run without ``PYTHONPATH``, so that nothing of the repository is used).

Figures: :data:`FIGURES` names each number the README quotes next to a command, the command (which must
be on the page) and where its JSON holds the number; the test runs the command and compares the value,
rounded as the README prints it, with the README's text. A stale number fails.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text()
VENV = os.environ.get("RLVERIFY_README_VENV")  # set by `make test-wheel`


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence
    words: tuple[str, ...]  # after the language
    body: str

    @property
    def needs(self) -> list[str]:
        return [m for w in self.words if w.startswith("needs=") for m in w[6:].split(",") if m]

    @property
    def commands(self) -> list[str]:
        """The block's commands, continuation lines joined."""
        return [c for c in self.body.replace("\\\n", " ").splitlines() if c.strip() and not c.lstrip().startswith("#")]


def blocks(language: str = "bash") -> list[Block]:
    out = []
    for m in re.finditer(r"^```([^\n]*)\n(.*?)^```", TEXT, flags=re.S | re.M):
        info = m.group(1).split()
        if info and info[0] == language:
            out.append(Block(TEXT[: m.start()].count("\n") + 1, tuple(info[1:]), m.group(2)))
    return out


KNOWN_WORDS = {"skip", "slow"}


def test_every_block_follows_the_convention():
    """Every fenced block names a language, and every command block's words are known: a typo never skips a block."""
    fences = re.findall(r"^```([^\n]*)\n.*?^```", TEXT, flags=re.S | re.M)
    assert all(f.split() for f in fences[:-1] if f.strip() != "") and len(blocks()) >= 15
    for b in blocks():
        unknown = [w for w in b.words if w not in KNOWN_WORDS and not w.startswith("needs=")]
        assert not unknown, f"README.md:{b.line}: unknown words {unknown} (see this module's docstring)"
        if "skip" not in b.words:
            assert all(c.startswith(".venv/bin/rlverify ") for c in b.commands), f"README.md:{b.line}: {b.commands}"


def test_no_placeholder_is_left_in_a_runnable_block():
    """What a user cannot type as written (``model.prism``, ``[--json]``) is not in a block that claims to run."""
    for b in blocks():
        if "skip" not in b.words:
            assert not re.search(r"\[--|\bmodel\.prism\b|\bpolicy\.onnx\b|\bpi\.onnx\b|\bdirs\.json\b", b.body), b.line


def _venv_python() -> Path:
    return Path(VENV) / "bin" / "python" if VENV else Path(sys.executable)


def _env() -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "100"}
    if VENV:  # the wheel alone: nothing of the repository on the path
        env.pop("PYTHONPATH", None)
    return env


def _missing(modules: list[str]) -> list[str]:
    code = "import importlib.util, sys; print(','.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    done = subprocess.run([str(_venv_python()), "-c", code, *modules], capture_output=True, text=True, env=_env(), check=True)
    return [m for m in done.stdout.strip().split(",") if m]


def scratch(tmp_path: Path) -> Path:
    """An empty directory with ``.venv`` (the environment under test) and the examples written by ``rlverify examples``."""
    (tmp_path / ".venv").symlink_to(_venv_python().parent.parent)
    done = subprocess.run(
        [".venv/bin/rlverify", "examples"], cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=120
    )
    assert done.returncode == 0, done.stderr
    return tmp_path


def _param(b: Block) -> Any:
    marks = [pytest.mark.slow] if "slow" in b.words else []
    return pytest.param(b, marks=marks, id=f"line{b.line}")


RUNNABLE = [b for b in blocks() if "skip" not in b.words]


@pytest.mark.parametrize("block", [_param(b) for b in RUNNABLE])
def test_readme_block_runs_from_an_empty_directory(tmp_path, block):
    missing = _missing(block.needs) if block.needs else []
    if missing:
        pytest.skip(f"README.md:{block.line} needs {', '.join(missing)} (an extra), not installed here")
    cwd = scratch(tmp_path)
    for command in block.commands:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", command], cwd=cwd, capture_output=True, text=True, env=_env(), timeout=1800
        )
        assert done.returncode == 0, (f"README.md:{block.line}", command, done.stdout[-2000:], done.stderr[-2000:])


# -- the figures the README quotes ------------------------------------------------------------------------------


def find(data: Any, key: str) -> Any:
    """The first value of ``key`` in nested JSON (depth first), so a figure survives a change of envelope.

    A dotted key (``initial.optimum``) finds its first part, then the rest inside it."""
    if "." in key:
        head, rest = key.split(".", 1)
        return find(find(data, head), rest)
    if isinstance(data, dict):
        if key in data:
            return data[key]
        items = list(data.values())
    elif isinstance(data, list):
        items = data
    else:
        return None
    for item in items:
        found = find(item, key)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class Figure:
    quoted: str  # the README's text around the number, with {} where the number is
    command: str  # a command on the page (without --json, which the test adds)
    key: str  # where the JSON holds it
    fmt: str  # as the README rounds it: ".5f", ".1e"
    needs: tuple[str, ...] = ()
    slow: bool = False

    def formatted(self, value: float) -> str:
        """``value`` as the README writes it (``2.8e-7``, not ``2.8e-07``)."""
        return re.sub(r"e([-+])0*(\d)", lambda m: "e" + m.group(1).replace("+", "") + m.group(2), format(value, self.fmt))


FL = ".venv/bin/rlverify verify gym:FrozenLake-v1 --policy examples/gymnasium/ppo_frozenlake.zip"
FL_MAX = ".venv/bin/rlverify verify gym:FrozenLake-v1"
DI = ".venv/bin/rlverify abstract examples/double_integrator.py:SYSTEM --policy examples/double_integrator.onnx -k 4"
MAP = (
    ".venv/bin/rlverify map avoid-v1 -p collision-100 --optimum min --map x,y --agg mean "
    "--where 'obstacle1_x=4 & obstacle1_y=4' --out risk.png --force"
)
ROBUST = ".venv/bin/rlverify robust avoid-v1 -p collision-100"
FIGURES = [
    Figure("reaches the\ngoal with probability {} (", f"{FL} -p 'P=? [F \"goal\"]'", "value", ".5f", ("torch",)),
    Figure("({} within the environment's 100-step", f"{FL} -p 'P=? [F<=100 \"goal\"]'", "value", ".5f", ("torch",)),
    Figure("against\n{} (= 14/17)", f"{FL_MAX} -p 'Pmax=? [F \"goal\"]' --mode monolithic", "value", ".5f"),
    Figure("start\nstate (bound {}).", f"{DI} --phi 0.3 --containment", "upper_bound", ".0f"),
    Figure("The bound is then {}, above", f"{DI} --phi 0.2 --containment -c limit=0.7", "upper_bound", ".5f"),
    Figure(
        "crashes within 10 steps with probability {}.",
        ".venv/bin/rlverify verify examples/robots.nm --property 'P=? [F<=10 \"crash\"]' --policy examples/robots_pi.json",
        "value",
        ".6f",
    ),
    Figure("collides within 100 steps with probability {}, while", MAP, "initial.value", ".3f"),
    Figure("the best policy\ncollides with probability {}.", MAP, "initial.optimum", ".3f"),
    Figure("The regret is {}, and", MAP, "initial.regret", ".2f"),
    Figure(
        "its corner while an obstacle walks to it, 8 steps) carry {} of",
        ".venv/bin/rlverify verify avoid-v1 -p collision-100 --explain 5",
        "explanation.covered",
        ".1e",
    ),
    Figure("| L∞ | {} |", f"{ROBUST} --perturb x,y --epsilon 1", "nominal", ".6f", slow=True),
    Figure("| L∞ | 0.846129 | {} |", f"{ROBUST} --perturb x,y --epsilon 1", "worst", ".6f", slow=True),
    Figure("| L∞ | 0.846129 | 0.846529 | {} |", f"{ROBUST} --perturb x,y --epsilon 1", "best", ".6f", slow=True),
    Figure("| L∞ | 0.846129 | 0.846529 | 0.845891 | {} |", f"{ROBUST} --perturb x,y --epsilon 1", "attack", ".6f", slow=True),
    Figure("0.846332 | {} of 14,400 states", f"{ROBUST} --perturb x,y --epsilon 1", "changed_states", ",", slow=True),
    Figure(
        "648 of 14,400 states | 15,625 states, {} choices", f"{ROBUST} --perturb x,y --epsilon 1", "choices", ",", slow=True
    ),
    Figure(
        "0.846355 | {} of 14,400 states", f"{ROBUST} --perturb x,y --epsilon 1 --norm l1", "changed_states", ",", slow=True
    ),
    Figure("| L1 | 0.846129 | {} |", f"{ROBUST} --perturb x,y --epsilon 1 --norm l1", "worst", ".6f", slow=True),
    Figure("| L1 | 0.846129 | 0.846492 | {} |", f"{ROBUST} --perturb x,y --epsilon 1 --norm l1", "best", ".6f", slow=True),
    Figure("anywhere in [{}, ", f"{ROBUST} --delta 0.001", "lower", ".6f", slow=True),
    Figure("anywhere in [0.821837, {}]", f"{ROBUST} --delta 0.001", "upper", ".6f", slow=True),
]


def _quoted_number(figure: Figure) -> str:
    """The number the README prints where ``figure.quoted`` has ``{}``."""
    before, after = figure.quoted.split("{}")
    m = re.search(re.escape(before) + r"([-0-9.e,]*[0-9])" + re.escape(after), TEXT)
    assert m, f"the README no longer says {figure.quoted!r}: update FIGURES with the text"
    return m.group(1)


def test_every_figure_names_a_command_on_the_page():
    page = " ".join(" ".join(c.split()) for b in blocks() for c in b.commands)  # continuation lines joined
    for figure in FIGURES:
        assert " ".join(figure.command.split()) in page, figure.command
        _quoted_number(figure)


_OUTPUTS: dict[str, Any] = {}  # command -> its JSON: a command quoted for several figures runs once per session


@pytest.fixture(scope="session")
def figure_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scratch(tmp_path_factory.mktemp("readme-figures"))


@pytest.mark.parametrize(
    "figure",
    [pytest.param(f, marks=[pytest.mark.slow] if f.slow else [], id=f"{f.key}-{i}") for i, f in enumerate(FIGURES)],
)
def test_readme_figure_is_what_the_command_prints(figure_dir, figure):
    missing = _missing(list(figure.needs)) if figure.needs else []
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (an extra), not installed here")
    if figure.command not in _OUTPUTS:
        done = subprocess.run(
            ["bash", "-e", "-c", figure.command + " --json"],
            cwd=figure_dir,
            capture_output=True,
            text=True,
            env=_env(),
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        _OUTPUTS[figure.command] = json.loads(done.stdout)
    value = find(_OUTPUTS[figure.command], figure.key)
    assert isinstance(value, int | float), (figure.key, str(_OUTPUTS[figure.command])[:500])
    quoted = _quoted_number(figure)
    assert figure.formatted(value) == quoted, f"README.md quotes {quoted}, the command prints {value}"


def test_robots_table_policy_figure_by_hand():
    """examples/robots_pi.json on examples/robots.nm, P(F<=10 crash), by a dynamic programme over (a, b) written here."""
    slip = 0.1

    def moves(pos: int, shortcut: bool) -> list[tuple[float, int]]:
        return [(0.7, pos + 2), (0.3, 0)] if shortcut else [(1 - slip, pos + 1), (slip, pos)]

    def crash(a: int, b: int) -> bool:
        return a == b and 0 < a < 4

    value = np.array([[float(crash(a, b)) for b in range(5)] for a in range(5)])  # P(crash within 0 steps)
    for _ in range(10):
        new = np.zeros_like(value)
        for a in range(5):
            for b in range(5):
                if crash(a, b):
                    new[a, b] = 1.0
                    continue
                if a == 4 and b == 4:
                    continue
                if a < 4 and b < 4:  # robot1:1 or robot2:1, 1/2 each
                    one = sum(p * value[n, b] for p, n in moves(a, False))
                    two = sum(p * value[a, n] for p, n in moves(b, False))
                    new[a, b] = 0.5 * one + 0.5 * two
                elif a == 4:
                    new[a, b] = sum(p * value[a, n] for p, n in moves(b, False))
                else:
                    new[a, b] = sum(p * value[n, b] for p, n in moves(a, False))
        value = new
    figure = next(f for f in FIGURES if "robots" in f.command)
    assert f"{value[0, 0]:.6f}" == _quoted_number(figure)


def test_double_integrator_exact_worst_case_by_hand():
    """'the exact worst case of 0.087 (start at x = -0.5, v = -0.8)': every action sequence of 4 steps, enumerated here."""
    from rlverify.policies import load_policy

    examples = README.parent / "examples"
    policy = load_policy(str(examples / "double_integrator.onnx"))
    x, mass, failed = np.array([[-0.5, -0.8]]), np.ones(1), 0.0
    for _ in range(4):
        probs = policy.action_probabilities(x)
        u = np.array([-2.0, 0.0, 2.0])  # left, coast, right: accel 2
        # x' = x + dt v + dt^2 u, v' = clip(v + dt u, -vmax, vmax): examples/double_integrator.py, dt 0.1, vmax 1
        nx = np.concatenate([np.stack([x[:, 0] + 0.1 * x[:, 1] + 0.01 * c, np.clip(x[:, 1] + 0.1 * c, -1, 1)], 1) for c in u])
        nmass = np.concatenate([mass * probs[:, a] for a in range(3)])
        bad = np.abs(nx[:, 0]) >= 0.7
        failed += nmass[bad].sum()
        x, mass = nx[~bad], nmass[~bad]
    assert "exact worst\ncase of 0.087 (start at x = -0.5, v = -0.8" in TEXT
    assert f"{failed:.3f}" == "0.087"


# -- the Python blocks --------------------------------------------------------------------------------------------


def test_readme_python_examples_run_and_agree(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as a user's working directory: the examples' files are written here
    (tmp_path / "examples").symlink_to(README.parent / "examples")
    python = [b.body for b in blocks("python") if "skip" not in b.words]  # ```python skip: needs a training run
    assert len(python) >= 2
    namespace: dict = {}
    for block in python:
        exec(compile(block, str(README), "exec"), namespace)  # our own documentation
    result, est, bound = namespace["result"], namespace["est"], namespace["bound"]
    assert (result.states, result.transitions) == (15_625, 892_165)  # the paper's Table 2 and its reference file
    assert est.interval[0] - 1e-9 <= result.value <= est.interval[1] + 1e-9  # fails with probability <= 0.05
    assert 0.0 <= bound.upper_bound <= 1.0 and bound.guarantee == "sound upper bound"
    out = capsys.readouterr().out
    assert out.count("\n") >= 3
    quoted = re.search(r"\.value\)  # ([0-9.]+) \(see above\)", TEXT).group(1)  # the FrozenLake example's comment
    digits = len(quoted.split(".")[1])
    printed = [float(x) for x in out.split() if re.fullmatch(r"0\.\d+", x)]
    assert any(f"{x:.{digits}f}" == quoted for x in printed), (quoted, out)


def test_readme_front_door_commands_agree():
    """The first runnable block (the front door): verify and simulate give the hand-computed 0.264 and agree."""
    import contextlib
    import io

    from rlverify.cli.main import main

    block = next(b for b in RUNNABLE if "running-example-v1 -p reach-goal-2 --json" in b.body)
    outputs = {}
    for command in block.commands[:2]:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(shlex.split(command)[1:]) == 0, command
        outputs[command.split()[1]] = json.loads(buf.getvalue())
    exact = find(outputs["verify"], "value")
    assert exact == pytest.approx(0.264, abs=1e-9)  # worked out by hand (tests/test_running_example.py)
    interval = find(outputs["simulate"], "interval")
    assert interval[0] <= exact <= interval[1]


def test_readme_front_door_example_values(capsys):
    block = next(b.body for b in blocks("python") if "cross_check" in b.body)
    namespace: dict = {}
    exec(compile(block, str(README), "exec"), namespace)  # our own documentation
    target, agreement = namespace["target"], namespace["agreement"]
    assert target.property.bound == 100 and target.policy is None and target.name.startswith("avoid-v1 (xMax=2")
    assert agreement.ok and agreement.exact.value == pytest.approx(0.264, abs=1e-9)


def test_readme_has_a_runnable_section_per_audience():
    joined = "\n".join(b.body for b in RUNNABLE)
    # PRISM/JANI modeller, Gymnasium user, continuous-control user
    assert "inspect examples/robots.nm" in joined and "gym:FrozenLake-v1" in joined and "abstract examples/" in joined
