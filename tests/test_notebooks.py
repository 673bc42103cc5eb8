"""The example notebooks (docs/notebooks/, one per audience) run in a Jupyter kernel and print the right numbers.

Each notebook is executed with nbclient + ipykernel (the ``test`` extra) in a scratch directory; the figures its
cells print are checked against values computed here without rlverify: FrozenLake's chain solved with numpy from
Gymnasium's own transition table, Avoid's chains, optimum and adversary by value iteration over its dynamics
written out in numpy with the shipped network run by onnxruntime, the running example by hand.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "docs" / "notebooks"
SRC = ROOT / "src"


def outputs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Execute ``name`` in a fresh kernel (this tree's src first); each code cell's printed text, text/plain and
    text/html, joined."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("PYTHONPATH", str(SRC))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        text = []
        for o in cell.outputs:
            assert o.output_type != "error", o
            if o.output_type == "stream":
                text.append(o.text)
            else:
                text += [o.get("data", {}).get("text/plain", ""), o.get("data", {}).get("text/html", "")]
        out.append("\n".join(text))
    return out


def number(pattern: str, text: str) -> list[float]:
    match = re.search(pattern, text)
    assert match, pattern
    return [float(g) for g in match.groups()]


# -- cheap checks of every notebook, in the default suite --


@pytest.mark.parametrize("name", ["rl_researcher.ipynb", "safety_engineer.ipynb", "certification_reviewer.ipynb"])
def test_notebooks_are_valid_clean_and_use_only_bundled_inputs(name):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None  # committed without outputs
            ast.parse(cell.source)
            assert not re.search(r"\.(onnx|zip|prism|jani|pt)\b|/work/|/tmp/|open\(", cell.source), cell.source


def _hook(name: str):
    """A hook module of the documentation site (docs/hooks/NAME.py), loaded as ``mkdocs build`` loads it."""
    import importlib.util

    pytest.importorskip("mkdocs")  # the docs extra
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", ROOT / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["rl_researcher.ipynb", "safety_engineer.ipynb", "certification_reviewer.ipynb"])
def test_notebook_renders_as_a_page_of_the_site(name):
    """docs/hooks/notebooks.py: the page is the notebook's title, a note linking the file, then every cell in order,
    code as Python blocks; nothing is executed."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    page = _hook("notebooks").notebook_markdown((NOTEBOOKS / name).read_text(), name)
    title = nb.cells[0].source.splitlines()[0]
    assert title.startswith("# ") and page.startswith(title + "\n\n!!! note") and f"]({name})" in page
    at = 0
    for cell in nb.cells:
        text = cell.source.strip("\n")
        if cell.cell_type == "markdown" and cell is nb.cells[0]:
            text = text.partition("\n")[2].strip("\n")
        elif cell.cell_type == "code":
            text = f"```python\n{text}\n```"
        found = page.find(text, at)
        assert found >= at, text[:80]  # present, and after the previous cell
        at = found + len(text)


def test_fence_words_are_dropped_for_the_site_only():
    """docs/hooks/fences.py: ```bash slow needs=torch renders as ```bash; other fences and inline spans are kept."""
    hook = _hook("fences")
    kept = "| ```` ```bash skip ```` |\n```text\nt\n```\n"  # a span in a table, a block without words
    page = "```bash slow needs=torch\nrlverify x\n```\n\n```python skip\nx = 1\n```\n\n" + kept
    assert hook.on_page_markdown(page) == "```bash\nrlverify x\n```\n\n```python\nx = 1\n```\n\n" + kept


# -- the RL researcher: FrozenLake --


def frozenlake_goal(greedy: list[int], steps: int | None) -> float:
    """P(reach the goal) from state 0 of slippery FrozenLake 4x4 under ``greedy`` (a linear solve), or within
    ``steps`` steps; from Gymnasium's transition table ``P[s][a] = [(p, s', r, terminated)]``."""
    import gymnasium as gym

    table = gym.make("FrozenLake-v1").unwrapped.P
    T = np.zeros((16, 16))
    for s in range(16):
        for p, s2, _, _ in table[s][greedy[s]]:
            T[s, s2] += p
    goal = np.zeros(16, dtype=bool)
    goal[15] = True
    T[15] = 0.0
    T[15, 15] = 1.0
    if steps is not None:
        v = goal.astype(float)
        for _ in range(steps):
            v = np.where(goal, 1.0, T @ v)
        return float(v[0])
    can = goal.copy()  # the states with a path to the goal; the others have value 0
    for _ in range(16):
        can |= (T[:, can] > 0).any(axis=1)
    idx = np.flatnonzero(can & ~goal)
    v = goal.astype(float)
    v[idx] = np.linalg.solve(np.eye(len(idx)) - T[np.ix_(idx, idx)], T[idx, 15])
    return float(v[0])


@pytest.mark.slow
def test_rl_researcher_notebook(tmp_path, monkeypatch):
    cells = outputs("rl_researcher.ipynb", tmp_path, monkeypatch)
    text = "\n".join(cells)
    greedy = json.loads(re.search(r"greedy action per state: (\[[0-9, ]+\])", text).group(1))  # type: ignore[union-attr]
    exact, by_hand = frozenlake_goal(greedy, None), frozenlake_goal(greedy, 100)
    value, lo, hi = number(r"goal probability: ([0-9.]+) in \[([0-9.]+), ([0-9.]+)\]", text)
    assert value == pytest.approx(exact, abs=1e-6) and lo - 1e-6 <= exact <= hi + 1e-6
    assert f"<b>{exact:.6g}</b>" in text and "certified bracket" in text  # the result's HTML
    (best,) = number(r"best possible: ([0-9.]+)", text)
    assert best == pytest.approx(14 / 17, abs=2e-6)  # the known optimum of slippery 4x4
    (episode,) = number(r"exact within 100 steps: ([0-9.]+)", text)
    assert episode == pytest.approx(by_hand, abs=1e-6)
    estimate, low, high = number(r"simulated: ([0-9.]+) in \[([0-9.]+), ([0-9.]+)\]", text)
    assert low <= by_hand <= high and low <= estimate <= high  # seeded: the 95 % interval covers the exact value
    assert "with probability at least 0.95" in text


# -- the safety engineer: Avoid --

SIDE = 5  # avoid-v1: xMax = yMax = 4
SLICKNESS = 0.1
MOVES = {"north": (0, 1), "east": (1, 0), "south": (0, -1), "west": (-1, 0)}


class Avoid:
    """avoid-v1 (4x4, slickness 0.1) written out in numpy from its description: states (x, y, o1x, o1y, o2x, o2y)
    before a collision; each step the agent moves as chosen (else stays, with probability ``SLICKNESS``) and each
    obstacle moves N/E/S/W with probability 1/4, every move clamped to the grid. The shipped network runs in
    onnxruntime, its feature order and action names read from its metadata."""

    def __init__(self) -> None:
        import onnxruntime as ort
        import scipy.sparse as sp

        from rlverify.benchmarks.registry import data_path

        self.session = ort.InferenceSession(str(data_path("policies", "avoid_4x4_ppo.onnx")))
        meta = self.session.get_modelmeta().custom_metadata_map
        self.features, self.actions = json.loads(meta["rlverify.features"]), json.loads(meta["rlverify.actions"])
        assert meta["rlverify.output"] == "logits"
        self.states = np.indices((SIDE,) * 6).reshape(6, -1).T
        x, y, ax, ay, bx, by = self.states.T
        self.collide = ((x == ax) & (y == ay)) | ((x == bx) & (y == by))
        self.start = self.index(np.array([[0, 0, 4, 4, 4, 4]]))[0]
        n = len(self.states)
        self.T = {}
        for a in self.actions:
            rows, cols, vals = [], [], []
            for p_agent, agent in ((1 - SLICKNESS, self.move(self.states[:, :2], MOVES[a])), (SLICKNESS, self.states[:, :2])):
                for d1 in MOVES.values():
                    for d2 in MOVES.values():
                        nxt = np.concatenate([agent, self.move(self.states[:, 2:4], d1), self.move(self.states[:, 4:], d2)], 1)
                        rows.append(np.arange(n))
                        cols.append(self.index(nxt))
                        vals.append(np.full(n, p_agent / 16))
            self.T[a] = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))

    @staticmethod
    def move(cells: np.ndarray, d: tuple[int, int]) -> np.ndarray:
        return np.clip(cells + np.array(d), 0, SIDE - 1)

    @staticmethod
    def index(states: np.ndarray) -> np.ndarray:
        return np.ravel_multi_index(tuple(states.T), (SIDE,) * 6)

    def probabilities(self, observed: np.ndarray) -> np.ndarray:
        """``(N, 4)`` softmax of the network's logits on observations ``(N, 6)`` (done = 0), in ``actions`` order."""
        names = ["x", "y", "obstacle1_x", "obstacle1_y", "obstacle2_x", "obstacle2_y"]
        column = {**{f: observed[:, i] for i, f in enumerate(names)}, "done": np.zeros(len(observed))}
        inputs = np.stack([column[f] for f in self.features], axis=1).astype(np.float32)
        logits = self.session.run(None, {self.session.get_inputs()[0].name: inputs})[0].astype(np.float64)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def collision_within(self, combine, steps: int = 100) -> float:
        """``P(F<=steps collision)`` from the start, each step combining the ``(S, A)`` action values."""
        v = self.collide.astype(float)
        for _ in range(steps):
            q = np.stack([self.T[a] @ v for a in self.actions], axis=1)
            v = np.where(self.collide, 1.0, combine(q))
        return float(v[self.start])


@pytest.mark.slow
def test_safety_engineer_notebook(tmp_path, monkeypatch):
    cells = outputs("safety_engineer.ipynb", tmp_path, monkeypatch)
    text = "\n".join(cells)
    avoid = Avoid()
    pi = avoid.probabilities(avoid.states)
    value = avoid.collision_within(lambda q: (pi * q).sum(axis=1))
    pmin, pmax = avoid.collision_within(lambda q: q.min(axis=1)), avoid.collision_within(lambda q: q.max(axis=1))
    # the adversary shows obstacle1_x shifted by at most one cell (clamped to the grid), anew at every step
    shown = [
        avoid.probabilities(
            np.concatenate([avoid.states[:, :2], avoid.move(avoid.states[:, 2:3], (k, 0))[:, :1], avoid.states[:, 3:]], 1)
        )
        for k in (-1, 0, 1)
    ]
    worst = avoid.collision_within(lambda q: np.max([(p * q).sum(axis=1) for p in shown], axis=0))
    best = avoid.collision_within(lambda q: np.min([(p * q).sum(axis=1) for p in shown], axis=0))
    assert pmin == pytest.approx(0.09288074792810107, abs=1e-9)  # tests/benchmarks/test_prism_equivalence.py (Storm)

    got = number(
        r"collision within 100 steps: policy ([0-9.]+); best policy \(Pmin\) ([0-9.]+); worst \(Pmax\) ([0-9.]+)", text
    )
    assert got == pytest.approx([value, pmin, pmax], abs=1e-6)
    assert f"<b>{value:.6g}</b>" in cells[1]  # the exact result's HTML
    got = number(r"initial state: value ([0-9.]+), Pmin ([0-9.]+), regret ([0-9.]+)", text)
    assert got == pytest.approx([value, pmin, value - pmin], abs=1e-6)
    got = number(r"nominal ([0-9.]+), worst ([0-9.]+), best ([0-9.]+)", text)
    assert got == pytest.approx([value, worst, best], abs=1e-6)

    # each listed failure path: its probability from the dynamics and the network, a collision only at its end
    paths = re.findall(
        r"path \d: probability ([0-9.e-]+), (\d+) steps\n  agent +(.*)\n  obstacle 1 (.*)\n  obstacle 2 (.*)\n", text
    )
    assert len(paths) == 3
    for probability, length, *walks in paths:
        cells_ = [[tuple(map(int, c.strip("()").split(","))) for c in w.split(" -> ")] for w in walks]
        states = np.array([[*a, *b, *c] for a, b, c in zip(*cells_, strict=True)])
        assert len(states) == int(length) + 1
        idx = avoid.index(states)
        assert avoid.collide[idx[-1]] and not avoid.collide[idx[:-1]].any()
        p = 1.0
        for i, j in itertools.pairwise(idx):
            p *= sum(pi[i, k] * avoid.T[a][i, j] for k, a in enumerate(avoid.actions))
        assert float(probability) == pytest.approx(p, rel=1e-3)  # printed with 4 significant digits


# -- the certification reviewer: the running example by hand --


@pytest.mark.slow
def test_certification_reviewer_notebook(tmp_path, monkeypatch):
    text = "\n".join(outputs("certification_reviewer.ipynb", tmp_path, monkeypatch))
    by_hand = 0.3 * (0.2 * 0.5 * 0.8 + 0.8)  # P(F<=2 "goal"), in the notebook's introduction
    value, lo, hi = number(r"value ([0-9.]+), certified bracket \[([0-9.]+), ([0-9.]+)\], guarantee sound", text)
    assert value == pytest.approx(by_hand, abs=1e-12) and lo <= by_hand <= hi and hi - lo < 1e-12
    assert "<b>0.264</b>" in text and "certified bracket [0.264, 0.264]" in text  # the HTML table
    (steps,) = number(r"expected steps ([0-9.]+) ", text)
    assert steps == pytest.approx(343 / 75, abs=1e-6)
    assert "agree: True" in text and "same seed, same estimate: True" in text
    cli, cli_lo, cli_hi = number(r"CLI value ([0-9.]+) bracket \[([0-9.]+), ([0-9.]+)\] exit code 0", text)
    assert cli == pytest.approx(by_hand, abs=1e-12) and cli_lo <= by_hand <= cli_hi
    assert re.search(r"versions: \[.*'rlverify'.*'stormpy'.*\]", text)
