"""The README and the documentation site run as written: every command block from an empty directory, every Python
block, and the figures they quote.

The pages: README.md and every ``docs/**/*.md`` page of the site, read from this checkout (``make test-wheel`` runs
this module from the checkout with the wheel's venv, so the pages are found here as the README is). The convention
for their fenced command blocks (the words after the language in the info string):

    ```bash                  run: each block in its own empty directory, after ``rlverify examples`` (which
                             writes ./examples), line by line with ``bash -e -o pipefail``
    ```bash slow             run only with the slow tests (``make test-all``), not in the default suite
    ```bash needs=torch      run only where the module is importable (``needs=a,b``: all of them); skipped,
                             saying so, in the wheel step, which installs the base package only
    ```bash skip             never run: about the repository (``make demo``), a cluster, or illustrative only
    ```python                each page's Python blocks in order, in one namespace, from an empty directory with
                             ``examples`` (``python skip``: never; ``python needs=torch`` as for bash)

Words combine (```` ```bash slow needs=torch ````). GitHub and MkDocs read the first word as the language, so the
pages render as before. A command starts with ``.venv/bin/rlverify`` (the README: the CLI ``make`` installs) or
``rlverify`` (the site's pages: as a user of ``pip install rlverify`` types it); both are the environment under
test: the scratch directory's ``.venv`` links to the Python running the tests (the editable install), or to the
environment named by ``RLVERIFY_README_VENV`` (``make test-wheel``: a fresh venv with only the built wheel and its
base dependencies, run without ``PYTHONPATH``, so that nothing of the repository is used), and its ``bin`` is first
on the ``PATH``.

Figures: :data:`FIGURES` names each number a page quotes next to a command, the page, the command (which must be on
that page) and where its JSON holds the number; the test runs the command and compares the value, rounded as the page
prints it, with the page's text. A stale number fails.
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

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: page (relative to the checkout) -> its text: the README, then the site's pages
PAGES = {p.relative_to(ROOT).as_posix(): p.read_text() for p in [README, *sorted((ROOT / "docs").rglob("*.md"))]}
TEXT = PAGES["README.md"]
VENV = os.environ.get("RLVERIFY_README_VENV")  # set by `make test-wheel`
CLI = re.compile(r"^(?:\.venv/bin/)?rlverify ")  # how a runnable command starts


@dataclass(frozen=True)
class Block:
    page: str  # relative to the checkout
    line: int  # of the opening fence
    words: tuple[str, ...]  # after the language
    body: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def needs(self) -> list[str]:
        return [m for w in self.words if w.startswith("needs=") for m in w[6:].split(",") if m]

    @property
    def commands(self) -> list[str]:
        """The block's commands, continuation lines joined."""
        return [c for c in self.body.replace("\\\n", " ").splitlines() if c.strip() and not c.lstrip().startswith("#")]


FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", flags=re.S | re.M)


def blocks(language: str = "bash", page: str | None = None) -> list[Block]:
    out = []
    for name, text in PAGES.items():
        if page is not None and name != page:
            continue
        for m in FENCE.finditer(text):
            info = m.group(1).split()
            if info and info[0] == language:
                out.append(Block(name, text[: m.start()].count("\n") + 1, tuple(info[1:]), m.group(2)))
    return out


def normal(command: str) -> str:
    """A command as the site writes it, ``rlverify ...`` (the README's ``.venv/bin/rlverify`` is the same CLI), as the
    shell reads it: words requoted, a trailing comment dropped."""
    return shlex.join(shlex.split(CLI.sub("rlverify ", command.strip()), comments=True))


KNOWN_WORDS = {"skip", "slow"}


def test_every_block_follows_the_convention():
    """Every fenced block names a language, and every command block's words are known: a typo never skips a block."""
    for name, text in PAGES.items():
        for m in FENCE.finditer(text):
            assert m.group(1).split(), f"{name}:{text[: m.start()].count(chr(10)) + 1}: a fence without a language"
    assert len(blocks()) >= 40 and len(blocks(page="README.md")) >= 4
    for b in blocks() + blocks("python"):
        unknown = [w for w in b.words if w not in KNOWN_WORDS and not w.startswith("needs=")]
        assert not unknown, f"{b.where}: unknown words {unknown} (see this module's docstring)"
    for b in blocks():
        if "skip" not in b.words:
            assert all(CLI.match(c) for c in b.commands), f"{b.where}: {b.commands}"


def test_no_placeholder_is_left_in_a_runnable_block():
    """What a user cannot type as written (``model.prism``, ``[--json]``) is not in a block that claims to run."""
    for b in blocks():
        if "skip" not in b.words:
            assert not re.search(r"\[--|\bmodel\.prism\b|\bpolicy\.onnx\b|\bpi\.onnx\b|\bdirs\.json\b", b.body), b.where


def _venv_python() -> Path:
    return Path(VENV) / "bin" / "python" if VENV else Path(sys.executable)


def _env(cwd: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "100"}
    if VENV:  # the wheel alone: nothing of the repository on the path
        env.pop("PYTHONPATH", None)
    if cwd is not None:  # `rlverify` is the environment under test, as `.venv/bin/rlverify` is
        env["PATH"] = f"{cwd / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
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
    return pytest.param(b, marks=marks, id=b.where)


RUNNABLE = [b for b in blocks() if "skip" not in b.words]
#: the command sequences that already ran and succeeded in this process, each from an empty directory: a block whose
#: commands are the start of another's (a getting-started page repeats the guide's) does not run them again
_RAN: set[tuple[str, ...]] = set()


@pytest.mark.parametrize("block", [_param(b) for b in RUNNABLE])
def test_block_runs_from_an_empty_directory(tmp_path, block):
    missing = _missing(block.needs) if block.needs else []
    if missing:
        pytest.skip(f"{block.where} needs {', '.join(missing)} (an extra), not installed here")
    commands = tuple(normal(c) for c in block.commands)
    if commands in _RAN:
        return  # these commands ran, in this order, from an empty directory: same state, same result
    cwd = scratch(tmp_path)
    for i, command in enumerate(block.commands):
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", command],
            cwd=cwd,
            capture_output=True,
            text=True,
            env=_env(cwd),
            timeout=1800,
        )
        assert done.returncode == 0, (block.where, command, done.stdout[-2000:], done.stderr[-2000:])
        _RAN.add(commands[: i + 1])


# -- the figures the pages quote ---------------------------------------------------------------------------------


def find(data: Any, key: str) -> Any:
    """The first value of ``key`` in nested JSON (depth first), so a figure survives a change of envelope.

    A dotted key (``initial.optimum``) finds its first part, then the rest inside it; a number indexes a list
    (``interval.0``)."""
    if "." in key:
        head, rest = key.split(".", 1)
        return find(find(data, head), rest)
    if isinstance(data, list) and key.isdigit():
        return data[int(key)] if int(key) < len(data) else None
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
    page: str  # where the number is quoted, relative to the checkout
    quoted: str  # the page's text around the number, with {} where the number is
    command: str  # a command on that page (without --json, which the test adds), written ``rlverify ...``
    key: str  # where the JSON holds it
    fmt: str  # as the page rounds it: ".5f", ".1e"
    needs: tuple[str, ...] = ()
    slow: bool = False
    outward: str = ""  # "down"/"up": an interval's end, rounded outward as the CLI prints it (fmt ".Nf")

    def formatted(self, value: float) -> str:
        """``value`` as the page writes it (``2.8e-7``, not ``2.8e-07``)."""
        if self.outward:
            import math

            scale = 10 ** int(self.fmt[1:-1])
            value = (math.floor if self.outward == "down" else math.ceil)(value * scale) / scale
        return re.sub(r"e([-+])0*(\d)", lambda m: "e" + m.group(1).replace("+", "") + m.group(2), format(value, self.fmt))


FL = "rlverify verify gym:FrozenLake-v1 --policy examples/gymnasium/ppo_frozenlake.zip"
FL_GOAL = f"{FL} -p 'P=? [F \"goal\"]'"
FL_MAX = "rlverify verify gym:FrozenLake-v1 -p 'Pmax=? [F \"goal\"]' --mode monolithic"
DI = "rlverify abstract examples/double_integrator.py:SYSTEM --policy examples/double_integrator.onnx -k 4"
SIM = "rlverify simulate running-example-v1 -p reach-goal-2 --runs 2000 --seed 0"
ROBOTS = "rlverify verify examples/robots.nm --property 'P=? [F<=10 \"crash\"]' --policy examples/robots_pi.json"
AVOID = "rlverify verify avoid-v1 -p collision-100"
AVOID_OPT = f"{AVOID} --mode monolithic"
EXPLAIN = f"{AVOID} --explain 5"
MAP = (
    "rlverify map avoid-v1 -p collision-100 --optimum min --map x,y --agg mean "
    "--where 'obstacle1_x=4 & obstacle1_y=4' --out risk.png --force"
)
ROBUST = "rlverify robust avoid-v1 -p collision-100"
LINF, DELTA = f"{ROBUST} --perturb x,y --epsilon 1", f"{ROBUST} --delta 0.001"
L1 = f"{LINF} --norm l1"
FL_100 = f"{FL} -p 'P=? [F<=100 \"goal\"]'"
DI_07 = f"{DI} --phi 0.2 --containment -c limit=0.7"
SHIELD = "rlverify shield avoid-v1 -p 'P<=0.2 [F<=100 COLLISION=true]' --meet --out shield.json"
TREE = "rlverify explain avoid-v1 -p 'P<=0.2 [F<=100 COLLISION=true]' --parts tree,critical --top 3 --save-tree tree.json"
G, RM, IX = "docs/guide/", "README.md", "docs/index.md"
SE, RL = "docs/start/safety-engineers.md", "docs/start/rl-researchers.md"
CP = "rlverify simulate gym:CartPole-v1 --policy examples/gymnasium/cartpole/ppo_cartpole.zip"
CP_FALL = f"{CP} -p 'P=? [F<=500 \"terminated\"]' --runs 1000 --seed 1"
CP_DET = f"{CP_FALL} --mode deterministic"
CP_RETURN = f"{CP} -p 'R=? [C<=500]' --reward-range 0:1 --runs 1000 --seed 1"
WALK = (
    "rlverify simulate gym:examples.gymnasium.slippery_walk:SlipperyWalk-v0 --trust-code --policy "
    "examples/gymnasium/walk_right.py:right -p 'P=? [F \"fallen\"]' --label 'fallen=x <= 0' --runs 10000 --seed 0"
)
OWN = G + "own-gymnasium.md"
PEND = "rlverify simulate gym:Pendulum-v1 --policy examples/gymnasium/pendulum/td3_pendulum.zip --mode deterministic"
PEND_UP = f"{PEND} -p 'P=? [F<=200 \"down_late\"]' --label 'down_late=obs[0] < 0.9 & step >= 100' --runs 200 --seed 0"
PEND_RETURN = f"{PEND} -p 'R=? [C<=200]' --reward-range -16.2736044:0 --runs 200 --seed 0"
FIGURES = [
    # docs/guide/own-gymnasium.md
    Figure(OWN, "lets the pole fall in {} of its episodes", CP_FALL, "estimate", ".3f"),
    Figure(OWN, "lies in [{}, 0.066514] (Clopper", CP_FALL, "interval.0", ".6f", outward="down"),
    Figure(OWN, "lies in [0.038205, {}] (Clopper", CP_FALL, "interval.1", ".6f", outward="up"),
    Figure(OWN, "probability is at most {} at 95", CP_DET, "interval.1", ".6f", outward="up"),
    Figure(OWN, "The mean return is {}.", CP_RETURN, "estimate", ".3f"),
    Figure(OWN, "distribution: [{}, 500] at 95", CP_RETURN, "interval.0", ".3f", outward="down"),
    Figure(OWN, "distribution: [473.362, {}] at 95", CP_RETURN, "interval.1", ".0f"),
    Figure(OWN, "so the probability is at most {} at 95", PEND_UP, "interval.1", ".6f", outward="up"),
    Figure(OWN, "The mean return is\n{}. The Hoeffding", PEND_RETURN, "estimate", ".3f"),
    Figure(OWN, "The Hoeffding interval, [{}, 0]", PEND_RETURN, "interval.0", ".2f", outward="down"),
    Figure(OWN, "falls with probability {}, in", WALK, "estimate", ".4f"),
    Figure(OWN, "in [{}, 0.084976] at 95", WALK, "interval.0", ".6f", outward="down"),
    Figure(OWN, "in [0.074270, {}] at 95", WALK, "interval.1", ".6f", outward="up"),
    # README.md
    Figure(RM, "lets the pole fall in {} of its episodes (in", CP_FALL, "estimate", ".3f"),
    Figure(RM, "episodes (in [{}, 0.066514] at 95", CP_FALL, "interval.0", ".6f", outward="down"),
    Figure(RM, "episodes (in [0.038205, {}] at 95", CP_FALL, "interval.1", ".6f", outward="up"),
    Figure(RM, "collides within 100 steps with probability {} (certified", AVOID, "value", ".6f"),
    Figure(RM, "would collide with probability {} (Pmin;", AVOID_OPT, "pmin", ".3f"),
    Figure(RM, "(seed 0) estimate {} with the\ninterval", SIM, "estimate", ".4f"),
    Figure(RM, "interval [{}, 0.295650] at 95", SIM, "interval.0", ".6f", outward="down"),
    Figure(RM, "interval [0.256010, {}] at 95", SIM, "interval.1", ".6f", outward="up"),
    Figure(RM, "It crashes within 10 steps with probability {}.", ROBOTS, "value", ".6f"),
    Figure(RM, "reaches the goal with probability {}, against", FL_GOAL, "value", ".5f"),
    Figure(RM, "against {} (= 14/17)", FL_MAX, "value", ".5f"),
    Figure(RM, "from every start state: bound {}.", f"{DI} --phi 0.3 --containment", "upper_bound", ".0f"),
    # the site's front page and getting-started pages
    Figure(IX, "collides within 100 steps with probability {}, where", AVOID, "value", ".6f"),
    Figure(IX, "would collide with\nprobability {} (the second", AVOID_OPT, "pmin", ".3f"),
    Figure(SE, "The policy collides with probability {} (", AVOID, "value", ".3f"),
    Figure(SE, "could do is {}. The rest", AVOID_OPT, "pmin", ".3f"),
    Figure(SE, "carry only {} of the 0.846", EXPLAIN, "explanation.covered", ".1e"),
    Figure(SE, "collision probability from 0.846129 to at most\n{};", LINF, "worst", ".6f", slow=True),
    Figure(SE, "to anywhere in [{}, ", DELTA, "lower", ".6f", slow=True),
    Figure(SE, "to anywhere in [0.821837, {}]", DELTA, "upper", ".6f", slow=True),
    Figure(RL, "reaches the goal with probability {}, against", FL_GOAL, "value", ".5f"),
    Figure(RL, "14/17 = {} for the best", FL_MAX, "value", ".5f"),
    # the user guide
    Figure(G + "gymnasium.md", "reaches the\ngoal with probability {} (", FL_GOAL, "value", ".5f"),
    Figure(G + "gymnasium.md", "({} within the environment's 100-step", FL_100, "value", ".5f"),
    Figure(G + "gymnasium.md", "against\n{} (= 14/17)", FL_MAX, "value", ".5f"),
    Figure(G + "abstraction.md", "start\nstate (bound {}).", f"{DI} --phi 0.3 --containment", "upper_bound", ".0f"),
    Figure(G + "abstraction.md", "The bound is then {}, above", DI_07, "upper_bound", ".5f"),
    Figure(G + "abstraction.md", "whose probability {} is computed exactly", DI_07, "worst_witness.probability", ".4f"),
    Figure(G + "abstraction.md", "the witness is {}: the abstraction", DI_07, "gap", ".2f"),
    Figure(G + "abstraction.md", "the upper bound falls to {} over", f"{DI_07} --gap 0.05", "upper_bound", ".4f", slow=True),
    Figure(G + "abstraction.md", "0.0875, a gap of\n{}.", f"{DI_07} --gap 0.05", "gap", ".3f", slow=True),
    Figure(G + "exact.md", "crashes within 10 steps with probability {}.", ROBOTS, "value", ".6f"),
    Figure(G + "maps.md", "collides within 100 steps with probability {}, while", MAP, "initial.value", ".3f"),
    Figure(G + "maps.md", "the best policy\ncollides with probability {}.", MAP, "initial.optimum", ".3f"),
    Figure(G + "maps.md", "The regret is {}, and", MAP, "initial.regret", ".2f"),
    Figure(G + "failure-paths.md", "obstacle walks to it, 8 steps) carry {} of", EXPLAIN, "explanation.covered", ".1e"),
    Figure(G + "robustness.md", "| L∞ | {} |", LINF, "nominal", ".6f", slow=True),
    Figure(G + "robustness.md", "| L∞ | 0.846129 | {} |", LINF, "worst", ".6f", slow=True),
    Figure(G + "robustness.md", "| L∞ | 0.846129 | 0.846529 | {} |", LINF, "best", ".6f", slow=True),
    Figure(G + "robustness.md", "| L∞ | 0.846129 | 0.846529 | 0.845891 | {} |", LINF, "attack", ".6f", slow=True),
    Figure(G + "robustness.md", "0.846332 | {} of 14,400 states", LINF, "changed_states", ",", slow=True),
    Figure(G + "robustness.md", "648 of 14,400 states | 15,625 states, {} choices", LINF, "choices", ",", slow=True),
    Figure(G + "robustness.md", "0.846355 | {} of 14,400 states", L1, "changed_states", ",", slow=True),
    Figure(G + "robustness.md", "| L1 | 0.846129 | {} |", L1, "worst", ".6f", slow=True),
    Figure(G + "robustness.md", "| L1 | 0.846129 | 0.846492 | {} |", L1, "best", ".6f", slow=True),
    Figure(G + "robustness.md", "anywhere in [{}, ", DELTA, "lower", ".6f", slow=True),
    Figure(G + "robustness.md", "anywhere in [0.821837, {}]", DELTA, "upper", ".6f", slow=True),
    Figure(
        G + "shields.md", "collides within 100 steps with probability {}; the best", SHIELD, "unshielded", ".6f", slow=True
    ),
    Figure(G + "shields.md", "can do is\n{} (Pmin)", SHIELD, "optimum", ".4f", slow=True),
    Figure(G + "shields.md", "collides with\nprobability {} (a relative", SHIELD, "value", ".6f", slow=True),
    Figure(G + "shields.md", "(a relative threshold of {}),", SHIELD, "threshold", ".3g", slow=True),
    Figure(G + "shields.md", "it intervenes in\n{} of the 14,400", SHIELD, "intervened_states", ",", slow=True),
    Figure(G + "shields.md", "reaches, {} times per run", SHIELD, "expected_interventions", ".2f", slow=True),
    Figure(G + "explanations.md", "(16 leaves,\n  fidelity {})", TREE, "tree.fidelity", ".4f", ("sklearn",)),
    Figure(G + "explanations.md", "collides with probability {} where", TREE, "tree.tree_value", ".6f", ("sklearn",)),
    Figure(G + "explanations.md", "the network does with {}.", TREE, "tree.policy_value", ".6f", ("sklearn",)),
]


def _quoted_number(figure: Figure) -> str:
    """The number the page prints where ``figure.quoted`` has ``{}``."""
    before, after = figure.quoted.split("{}")
    m = re.search(re.escape(before) + r"([-0-9.e,]*[0-9])" + re.escape(after), PAGES[figure.page])
    assert m, f"{figure.page} no longer says {figure.quoted!r}: update FIGURES with the text"
    return m.group(1)


def test_every_figure_names_a_command_on_its_page():
    for figure in FIGURES:
        page = {normal(c).replace(" --json", "") for b in blocks(page=figure.page) for c in b.commands}  # the test adds --json
        command = normal(figure.command)  # the page's command, or its start (the page may add --out FILE)
        assert any(c == command or c.startswith(command + " ") for c in page), (figure.page, figure.command)
        _quoted_number(figure)


_OUTPUTS: dict[str, Any] = {}  # command -> its JSON: a command quoted for several figures runs once per session


@pytest.fixture(scope="session")
def figure_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scratch(tmp_path_factory.mktemp("readme-figures"))


@pytest.mark.parametrize(
    "figure",
    [pytest.param(f, marks=[pytest.mark.slow] if f.slow else [], id=f"{f.page}-{f.key}-{i}") for i, f in enumerate(FIGURES)],
)
def test_figure_is_what_the_command_prints(figure_dir, figure):
    missing = _missing(list(figure.needs)) if figure.needs else []
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (an extra), not installed here")
    command = normal(figure.command)
    if command not in _OUTPUTS:
        done = subprocess.run(
            ["bash", "-e", "-c", command + " --json"],
            cwd=figure_dir,
            capture_output=True,
            text=True,
            env=_env(figure_dir),
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        _OUTPUTS[command] = json.loads(done.stdout)
    value = find(_OUTPUTS[command], figure.key)
    assert isinstance(value, int | float), (figure.key, str(_OUTPUTS[command])[:500])
    quoted = _quoted_number(figure)
    assert figure.formatted(value) == quoted, f"{figure.page} quotes {quoted}, the command prints {value}"


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
    for figure in [f for f in FIGURES if "robots" in f.command]:
        assert f"{value[0, 0]:.6f}" == _quoted_number(figure), figure.page


def test_double_integrator_exact_worst_case_by_hand():
    """'the exact worst case of 0.087 (start at x = -0.5, v = -0.8)': every action sequence of 4 steps, enumerated here."""
    from rlverify.policies import load_policy

    examples = ROOT / "examples"
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
    assert "exact worst\ncase of 0.087 (start at x = -0.5, v = -0.8" in PAGES["docs/guide/abstraction.md"]
    assert f"{failed:.3f}" == "0.087"


# -- the Python blocks --------------------------------------------------------------------------------------------

#: pages whose Python blocks a test below runs and then checks what they computed
CHECKED = {"docs/guide/python.md", "docs/guide/gymnasium.md"}
PYTHON_PAGES = sorted({b.page for b in blocks("python") if "skip" not in b.words} - CHECKED)


def run_python_page(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``page``'s Python blocks in order, in one namespace, from an empty directory with ``examples`` (as a user's)."""
    import importlib.util

    python = [b for b in blocks("python", page=page) if "skip" not in b.words]
    missing = [m for b in python for m in b.needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{page} needs {', '.join(missing)} (an extra), not installed here")
    monkeypatch.chdir(tmp_path)  # as a user's working directory: the examples' files are written here
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    namespace: dict[str, Any] = {}
    for block in python:
        exec(compile(block.body, block.where, "exec"), namespace)  # our own documentation
    return namespace


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    run_python_page(page, tmp_path, monkeypatch)


def test_python_pages_are_all_run():
    assert CHECKED < {b.page for b in blocks("python") if "skip" not in b.words} and len(PYTHON_PAGES) >= 5


def test_python_page_engines_agree(capsys, tmp_path, monkeypatch):
    namespace = run_python_page("docs/guide/python.md", tmp_path, monkeypatch)
    result, est, bound = namespace["result"], namespace["est"], namespace["bound"]
    assert (result.states, result.transitions) == (15_625, 892_165)  # the paper's Table 2 and its reference file
    assert est.interval[0] - 1e-9 <= result.value <= est.interval[1] + 1e-9  # fails with probability <= 0.05
    assert 0.0 <= bound.upper_bound <= 1.0 and bound.guarantee == "sound upper bound"
    assert capsys.readouterr().out.count("\n") >= 3
    target, agreement = namespace["target"], namespace["agreement"]
    assert target.property.bound == 100 and target.policy is None and target.name.startswith("avoid-v1 (xMax=2")
    assert agreement.ok and agreement.exact.value == pytest.approx(0.264, abs=1e-9)


def test_gymnasium_page_python_prints_its_comment(capsys, tmp_path, monkeypatch):
    run_python_page("docs/guide/gymnasium.md", tmp_path, monkeypatch)
    out = capsys.readouterr().out
    quoted = re.search(r"\.value\)  # ([0-9.]+) \(0\.63026 above\)", PAGES["docs/guide/gymnasium.md"]).group(1)
    digits = len(quoted.split(".")[1])
    printed = [float(x) for x in out.split() if re.fullmatch(r"0\.\d+", x)]
    assert any(f"{x:.{digits}f}" == quoted for x in printed), (quoted, out)


def test_front_door_commands_agree():
    """The front door's block (the command line page): verify and simulate give the hand-computed 0.264 and agree."""
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


def test_readme_has_a_runnable_section_per_audience():
    joined = "\n".join(b.body for b in RUNNABLE if b.page == "README.md")
    # PRISM/JANI modeller, Gymnasium user, continuous-control user
    assert "inspect examples/robots.nm" in joined and "gym:FrozenLake-v1" in joined and "abstract examples/" in joined
    assert "make demo" in TEXT and "make test" in TEXT  # the brief's two set-up commands


def test_readme_links_every_page_of_the_site():
    """The README is short and points to the documentation: every page of the site's navigation is linked from it."""
    nav = re.findall(r"^\s*- (?:[^\n]*: )?([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.M)
    assert "guide/exact.md" in nav and "index.md" in nav
    linked = set(re.findall(r"\]\(docs/([^)#]+\.md)\)", TEXT))
    missing = [p for p in nav if not p.startswith("notebooks/") and p not in linked]  # notebooks/*.md: made at build time
    assert not missing, missing
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", TEXT)  # relative links: the site's own are checked by make docs
    assert all((ROOT / t).exists() for t in targets), [t for t in targets if not (ROOT / t).exists()]
    assert TEXT.count("\n") <= 200
