"""Failure paths (``explain_paths``, ``rlverify verify --explain K``) against independent brute force.

The brute force enumerates every walk of the induced chain (built here in numpy from the model's
own description) whose probability is at least a threshold, lowering the threshold until K complete
walks are found: every walk left out is then less probable than the K-th listed one, so the K most
probable walks are among those enumerated.
"""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from rlverify import verify_exact
from rlverify.cli.main import main
from rlverify.errors import OptionError, PropertyError
from rlverify.exact import ExactOptions, explain_paths, most_probable_paths
from rlverify.exact import explain as explain_module
from rlverify.models import load_model
from rlverify.policies import CallablePolicy
from tests.exact.randmdp import ACTIONS, bounded_reach, induced_matrix, policy_matrix, random_mdp, reach_probability
from tests.exact.resolved import parsed

# ---------------------------------------------------------------------------------------------
# brute force


def can_reach(P: np.ndarray, target: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: states from which a target is reachable through allowed non-target states."""
    can = target.copy()
    while True:
        new = can | (allowed & ~target & (P[:, can] > 0).any(axis=1))
        if (new == can).all():
            return can
        can = new


def brute_force_walks(
    P: np.ndarray, start: int, target: np.ndarray, allowed: np.ndarray, k: int, bound: int | None
) -> tuple[list[tuple[tuple[int, ...], float]], bool]:
    """All walks to the first target with probability >= tau, tau lowered until k are found (or all exist).

    Returns the walks (states, probability) sorted by probability, and whether the list is complete
    (every walk with probability >= the k-th largest is in it).
    """
    useful = can_reach(P, target, allowed)
    tau = 1e-2
    while True:
        done: list[tuple[tuple[int, ...], float]] = []
        stack = [((start,), 1.0)]
        pruned = False
        while stack:
            walk, p = stack.pop()
            u = walk[-1]
            if target[u]:
                done.append((walk, p))
                continue
            if not allowed[u] or (bound is not None and len(walk) - 1 >= bound):
                continue
            for v in np.flatnonzero(P[u] > 0):
                q = p * P[u, v]
                if not useful[v]:
                    continue
                if q < tau:
                    pruned = True
                    continue
                stack.append(((*walk, int(v)), q))
        done.sort(key=lambda w: -w[1])
        if len(done) >= k or not pruned:
            return done, not pruned
        tau /= 10


def chain_index(step_state: dict) -> int:
    return int(step_state["s"])


def check_paths(fp, P: np.ndarray, target: np.ndarray, allowed: np.ndarray, k: int, bound: int | None, value: float) -> None:
    """The listed paths are valid, distinct, exact and the k most probable (by probability multiset)."""
    expected, complete = brute_force_walks(P, 0, target, allowed, k, bound)
    listed = [tuple(chain_index(s.state) for s in path.steps) for path in fp.paths]
    assert len(set(listed)) == len(listed), "paths are distinct"
    for walk, path in zip(listed, fp.paths, strict=False):
        assert walk[0] == 0 and target[walk[-1]]
        assert not target[list(walk[:-1])].any() and allowed[list(walk[:-1])].all()
        assert bound is None or len(walk) - 1 <= bound
        exact = float(np.prod([P[a, b] for a, b in pairwise(walk)]))
        assert path.probability == pytest.approx(exact, rel=1e-12)
        for step, (a, b) in zip(path.steps, pairwise(walk), strict=False):
            assert step.probability == pytest.approx(P[a, b], rel=1e-12)
    got = [p.probability for p in fp.paths]
    assert got == sorted(got, reverse=True)
    want = [p for _, p in expected[:k]]
    assert len(got) == len(want)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert fp.exhausted == (complete and len(expected) < k)
    assert fp.covered == pytest.approx(sum(got), rel=1e-12)
    assert fp.covered <= value * (1 + 1e-9) + 1e-12
    if fp.exhausted:  # all paths listed: they make up the whole value
        assert fp.covered == pytest.approx(value, rel=1e-9, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# random MDPs with random softmax policies


def _random_setup(tmp_path: Path, seed: int):
    rng = np.random.default_rng(100 + seed)
    mdp = random_mdp(rng, n=int(rng.integers(5, 9)))
    path = tmp_path / f"random{seed}.prism"
    path.write_text(mdp.prism())
    pi = policy_matrix(rng, mdp.n)

    def fn(states: np.ndarray) -> np.ndarray:
        return pi[states[:, 0].astype(int)]

    return mdp, load_model(path), CallablePolicy(fn, ["s"], list(ACTIONS), name=f"softmax {seed}"), pi


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("form", ["F", "F<=4", "U", "U<=3"])
def test_random_models_k_most_probable_paths(tmp_path: Path, seed: int, form: str) -> None:
    mdp, model, policy, pi = _random_setup(tmp_path, seed)
    P, _ = induced_matrix(mdp, pi)  # (n+1, n+1) with the stall sink at n
    n = mdp.n
    goal = np.r_[mdp.goal, False]
    allowed = np.ones(n + 1, dtype=bool) if form.startswith("F") else np.r_[~mdp.avoid, True]
    bound = int(form.split("<=")[1]) if "<=" in form else None
    left = "" if form.startswith("F") else '!"avoid" '
    op = "F" if form.startswith("F") else "U"
    text = f'P=? [{left}{op}{"<=" + str(bound) if bound is not None else ""} "goal"]'
    value = (
        bounded_reach(P, goal, bound, allowed=allowed) if bound is not None else reach_probability(P, goal, allowed=allowed)
    )[0]
    k = 6
    fp = explain_paths(model, parsed(model, text), policy, k)
    assert fp.value == pytest.approx(value, abs=1e-6)
    assert fp.bound == bound
    check_paths(fp, P, goal, allowed, k, bound, value)
    # per step: the policy's distribution, and the actions that lead to the next state
    for path in fp.paths:
        for step, nxt in zip(path.steps[:-1], path.steps[1:], strict=False):
            s, t = chain_index(step.state), chain_index(nxt.state)
            assert step.policy is not None
            np.testing.assert_allclose([step.policy[a] for a in ACTIONS], pi[s] / pi[s].sum(), rtol=1e-12)
            expected = {
                ACTIONS[a]: (pi[s, a], mdp.T[(s, a)][t])
                for a in range(len(ACTIONS))
                if (s, a) in mdp.T and mdp.T[(s, a)][t] > 0
            }
            got = {a.action: (a.weight, a.transition) for a in step.actions}
            assert sorted(got) == sorted(expected)
            for name, (w, tr) in expected.items():
                assert got[name] == pytest.approx((w, tr), rel=1e-12)
            assert sum(a.probability for a in step.actions) == pytest.approx(step.probability, rel=1e-12)
        assert path.steps[-1].policy is None and path.steps[-1].actions == ()


@pytest.mark.parametrize("seed", range(3))
def test_deterministic_mode_follows_the_argmax(tmp_path: Path, seed: int) -> None:
    mdp, model, policy, pi = _random_setup(tmp_path, seed)
    onehot = np.zeros_like(pi)
    onehot[np.arange(mdp.n), pi.argmax(axis=1)] = 1.0
    P, _ = induced_matrix(mdp, onehot)
    goal = np.r_[mdp.goal, False]
    allowed = np.ones(mdp.n + 1, dtype=bool)
    value = bounded_reach(P, goal, 5)[0]
    fp = explain_paths(model, parsed(model, 'P=? [F<=5 "goal"]'), policy, 4, ExactOptions(mode="deterministic"))
    check_paths(fp, P, goal, allowed, 4, 5, value)
    # the on-the-fly build explores the same chain
    otf = explain_paths(
        model, parsed(model, 'P=? [F<=5 "goal"]'), policy, 4, ExactOptions(mode="deterministic", strategy="onthefly")
    )
    assert [p.probability for p in otf.paths] == [p.probability for p in fp.paths]
    for path in fp.paths:
        for step in path.steps[:-1]:
            s = chain_index(step.state)
            # the policy's own distribution is reported; the chain follows its argmax with weight 1
            np.testing.assert_allclose([step.policy[a] for a in ACTIONS], pi[s], rtol=1e-12)
            assert [(a.action, a.weight) for a in step.actions] == [(ACTIONS[int(pi[s].argmax())], 1.0)]


# ---------------------------------------------------------------------------------------------
# known answers by hand: a loop, two actions sharing a successor, a forced (unlabelled) step

LOOP = """mdp
module m
  s : [0..3] init 0;
  [a] s=0 -> 0.5 : (s'=0) + 0.5 : (s'=1);
  [b] s=0 -> 1 : (s'=1);
  [] s=1 -> 1 : (s'=2);
  [a] s=2 -> 0.5 : (s'=3) + 0.5 : (s'=0);
  [b] s=2 -> 1 : (s'=2);
endmodule
label "goal" = s=3;
"""
# pi(a)=0.4, pi(b)=0.6 everywhere: 0->0 w.p. 0.2 (a), 0->1 w.p. 0.2 (a) + 0.6 (b) = 0.8, 1->2 forced,
# 2->3 w.p. 0.2, 2->0 w.p. 0.2, 2->2 w.p. 0.6


def _loop(tmp_path: Path):
    path = tmp_path / "loop.prism"
    path.write_text(LOOP)
    policy = CallablePolicy(lambda x: np.tile([0.4, 0.6], (len(x), 1)), ["s"], ["a", "b"], name="fixed")
    P = np.array([[0.2, 0.8, 0, 0], [0, 0, 1, 0], [0.2, 0, 0.6, 0.2], [0, 0, 0, 1.0]])
    return load_model(path), policy, P


def test_known_paths_with_a_loop_shared_successor_and_forced_step(tmp_path: Path) -> None:
    model, policy, P = _loop(tmp_path)
    fp = explain_paths(model, parsed(model, 'P=? [F "goal"]'), policy, 3)
    # 0 1 2 3: 0.8 * 1 * 0.2; then a stay at 2 (x0.6) or a stay at 0 (x0.2)
    assert [p.probability for p in fp.paths] == pytest.approx([0.16, 0.096, 0.0576], rel=1e-12)
    assert [tuple(chain_index(s.state) for s in p.steps) for p in fp.paths] == [
        (0, 1, 2, 3),
        (0, 1, 2, 2, 3),
        (0, 1, 2, 2, 2, 3),
    ]
    assert fp.value == pytest.approx(1.0, abs=1e-6) and not fp.exhausted
    assert fp.covered == pytest.approx(0.16 + 0.096 + 0.0576, rel=1e-12)
    first = fp.paths[0].steps
    assert first[0].policy == pytest.approx({"a": 0.4, "b": 0.6})
    assert [(a.action, a.choice) for a in first[0].actions] == [("a", "a"), ("b", "b")]
    assert [(a.weight, a.transition, a.probability) for a in first[0].actions] == [
        pytest.approx((0.4, 0.5, 0.2), rel=1e-12),
        pytest.approx((0.6, 1.0, 0.6), rel=1e-12),
    ]
    assert first[0].probability == pytest.approx(0.8, rel=1e-12)
    forced = first[1]  # the lone unlabelled command: the policy is not asked
    assert forced.policy is None
    assert [(a.action, a.weight, a.transition) for a in forced.actions] == [(None, 1.0, 1.0)]
    assert first[3].probability is None and first[3].state == {"s": 3}
    check_paths(fp, P, np.array([0, 0, 0, 1], dtype=bool), np.ones(4, dtype=bool), 3, None, 1.0)


def test_policy_is_evaluated_in_batches(tmp_path: Path) -> None:
    model, _, _ = _loop(tmp_path)
    calls: list[int] = []

    def fn(x: np.ndarray) -> np.ndarray:
        calls.append(len(x))
        return np.tile([0.4, 0.6], (len(x), 1))

    fp = explain_paths(model, parsed(model, 'P=? [F "goal"]'), CallablePolicy(fn, ["s"], ["a", "b"]), 20)
    assert len(fp.paths) == 20
    # the fit check (initial state), the chain (all decision states: 0 and 2), the paths' decision states (0 and 2)
    assert calls == [1, 2, 2]


def test_bounded_lists_all_paths_when_fewer_exist(tmp_path: Path) -> None:
    model, policy, _ = _loop(tmp_path)
    # within 4 steps: 0 1 2 3 (0.16), 0 0 1 2 3 (0.032), 0 1 2 2 3 (0.096)
    fp = explain_paths(model, parsed(model, 'P=? [F<=4 "goal"]'), policy, 10)
    assert sorted(p.probability for p in fp.paths) == pytest.approx([0.032, 0.096, 0.16], rel=1e-12)
    assert fp.exhausted and fp.k == 10
    assert fp.covered == pytest.approx(0.288, rel=1e-12) and fp.value == pytest.approx(0.288, rel=1e-12)
    assert fp.share == pytest.approx(1.0, rel=1e-12)
    # U: the left formula excludes s=2 from the middle of a path: no path reaches the goal
    fp = explain_paths(model, parsed(model, 'P=? [s<2 U "goal"]'), policy, 3)
    assert fp.paths == () and fp.exhausted and fp.value == pytest.approx(0.0) and fp.share is None


def test_verify_result_carries_the_explanation_as_json(tmp_path: Path) -> None:
    model, policy, _ = _loop(tmp_path)
    res = verify_exact(model, 'P=? [F<=5 "goal"]', policy)
    fp = explain_paths(model, parsed(model, 'P=? [F<=5 "goal"]'), policy, 2, value=res.value)
    assert fp.value == res.value
    import dataclasses

    d = json.loads(json.dumps(dataclasses.replace(res, explanation=fp).to_json()))
    assert d["value"] == pytest.approx(res.value)
    e = d["explanation"]
    assert [p["probability"] for p in e["paths"]] == pytest.approx([0.16, 0.096])
    assert [p["length"] for p in e["paths"]] == [3, 4]
    b = e["paths"][0]["steps"][0]["actions"][1]
    assert (b["action"], b["choice"]) == ("b", "b")
    assert (b["weight"], b["transition"], b["probability"]) == pytest.approx((0.6, 1.0, 0.6), rel=1e-12)
    assert json.loads(json.dumps(res.to_json()))["explanation"] is None


# ---------------------------------------------------------------------------------------------
# the search on explicit matrices: probability-1 edges (zero cost) on a cycle, the heuristic's memory cap


def test_search_with_probability_one_edges_and_memory_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0 -> 1 (p 1), 1 -> 0 (0.5), 1 -> 2 (0.3), 1 -> 3 (0.2); 3 -> 3 (1): a dead end; 2 the target
    P = np.zeros((4, 4))
    P[0, 1] = 1.0
    P[1, [0, 2, 3]] = [0.5, 0.3, 0.2]
    P[2, 2] = P[3, 3] = 1.0
    target = np.array([0, 0, 1, 0], dtype=bool)
    allowed = np.ones(4, dtype=bool)
    for bound in (None, 9):
        walks, exhausted = most_probable_paths(sp.csr_matrix(P), 0, target, allowed, 4, bound=bound)
        assert [w for w, _ in walks] == [[0, 1, 2], [0, 1, 0, 1, 2], [0, 1, 0, 1, 0, 1, 2], [0, 1, 0, 1, 0, 1, 0, 1, 2]]
        assert [p for _, p in walks] == pytest.approx([0.3, 0.15, 0.075, 0.0375], rel=1e-12) and not exhausted
    walks, exhausted = most_probable_paths(sp.csr_matrix(P), 0, target, allowed, 4, bound=4)
    assert [w for w, _ in walks] == [[0, 1, 2], [0, 1, 0, 1, 2]] and exhausted
    # with room for only two rows of the bounded heuristic, the unbounded one takes over: same answer
    rng = np.random.default_rng(7)
    M = rng.random((12, 12)) * (rng.random((12, 12)) < 0.4)
    M[M.sum(axis=1) == 0, 0] = 1.0
    M = M / M.sum(axis=1, keepdims=True)
    target = np.zeros(12, dtype=bool)
    target[[5, 9]] = True
    allowed = np.ones(12, dtype=bool)
    allowed[3] = False
    full, _ = most_probable_paths(sp.csr_matrix(M), 0, target, allowed, 8, bound=7)
    monkeypatch.setattr(explain_module, "_HEURISTIC_ENTRIES", 24)
    capped, _ = most_probable_paths(sp.csr_matrix(M), 0, target, allowed, 8, bound=7)
    np.testing.assert_allclose([p for _, p in capped], [p for _, p in full], rtol=1e-12)
    expected, _ = brute_force_walks(M, 0, target, allowed, 8, 7)
    np.testing.assert_allclose([p for _, p in full], [p for _, p in expected[:8]], rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    ("prop", "match"),
    [
        ('R{"r"}=? [F "goal"]', r"reward \(R\) property.*explained forms: P=\? \[F phi\]"),
        ("P=? [G s<3]", r"path formula is G \(for G phi, explain its complement: P=\? \[F !phi\]\)"),
        ('P=? [X "goal"]', r"path formula is X.*explained forms"),
        ('P=? [F>=2 "goal"]', r"lower end"),
    ],
)
def test_unexplainable_properties_are_refused(tmp_path: Path, prop: str, match: str) -> None:
    model, policy, _ = _loop(tmp_path)
    if prop.startswith("R"):
        path = tmp_path / "loop_r.prism"
        path.write_text(LOOP + 'rewards "r"\n  true : 1;\nendrewards\n')
        model = load_model(path)
    with pytest.raises(PropertyError, match=match):
        explain_paths(model, parsed(model, prop), policy, 3)


def test_bad_counts_and_monolithic_mode_are_refused(tmp_path: Path) -> None:
    model, policy, _ = _loop(tmp_path)
    for k in (0, -2):
        with pytest.raises(OptionError, match=rf"--explain: expected a positive number of paths, got {k}"):
            explain_paths(model, parsed(model, 'P=? [F "goal"]'), policy, k)
    with pytest.raises(OptionError, match="monolithic mode has no policy"):
        explain_paths(model, parsed(model, 'P=? [F "goal"]'), policy, 3, ExactOptions(mode="monolithic"))


# ---------------------------------------------------------------------------------------------
# CLI

GRID = """mdp
module grid
  x : [0..2] init 0;
  y : [0..1] init 0;
  [right] x<2 -> 0.8 : (x'=x+1) + 0.2 : (y'=1-y);
  [up] y<1 -> 0.9 : (y'=1) + 0.1 : (x'=x);
  [down] y>0 -> 1 : (y'=0);
endmodule
label "goal" = x=2 & y=1;
"""
# pi: right 0.5, up 0.3, down 0.2 (unavailable actions stall)


@pytest.fixture
def grid(tmp_path: Path) -> tuple[Path, Path]:
    model = tmp_path / "grid.prism"
    model.write_text(GRID)
    pol = tmp_path / "pi.py"
    pol.write_text(
        "import numpy as np\nFEATURES = ['x', 'y']\nACTIONS = ['right', 'up', 'down']\n"
        "def pi(s):\n    return np.tile([0.5, 0.3, 0.2], (len(s), 1))\n"
    )
    return model, pol


def _grid_brute_force() -> tuple[np.ndarray, np.ndarray]:
    """The induced chain of GRID over states (x, y) -> 2x + y, plus a stall sink 6."""
    pi = {"right": 0.5, "up": 0.3, "down": 0.2}
    P = np.zeros((7, 7))
    for x in range(3):
        for y in range(2):
            s = 2 * x + y
            if x == 2 and y == 1:
                P[s, s] = 1.0
                continue
            stalled = 0.0
            if x < 2:
                P[s, 2 * (x + 1) + y] += pi["right"] * 0.8
                P[s, 2 * x + (1 - y)] += pi["right"] * 0.2
            else:
                stalled += pi["right"]
            if y < 1:
                P[s, 2 * x + 1] += pi["up"] * 0.9
                P[s, s] += pi["up"] * 0.1
            else:
                stalled += pi["up"]
            if y > 0:
                P[s, 2 * x] += pi["down"]
            else:
                stalled += pi["down"]
            P[s, 6] += stalled
    P[6, 6] = 1.0
    target = np.zeros(7, dtype=bool)
    target[5] = True
    return P, target


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["verify", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_explain_json_table_and_map(capsys, grid, tmp_path: Path) -> None:
    model, pol = grid
    P, target = _grid_brute_force()
    allowed = np.ones(7, dtype=bool)
    value = bounded_reach(P, target, 6)[0]
    expected, _ = brute_force_walks(P, 0, target, allowed, 3, 6)
    code, out, err = run(capsys, str(model), "-p", 'P=? [F<=6 "goal"]', "--policy", f"{pol}:pi", "--explain", "3", "--json")
    assert code == 0, err
    d = json.loads(out)["result"]
    assert d["value"] == pytest.approx(value, rel=1e-9)
    e = d["explanation"]
    assert e["k"] == 3 and e["bound"] == 6 and e["exhausted"] is False
    assert [p["probability"] for p in e["paths"]] == pytest.approx([p for _, p in expected[:3]], rel=1e-12)
    assert e["covered"] == pytest.approx(sum(p for _, p in expected[:3]), rel=1e-12)
    assert e["share"] == pytest.approx(e["covered"] / value, rel=1e-9)
    best = e["paths"][0]
    walk = [2 * s["state"]["x"] + s["state"]["y"] for s in best["steps"]]
    assert tuple(walk) == expected[0][0]
    assert best["steps"][0]["policy"] == pytest.approx({"right": 0.5, "up": 0.3, "down": 0.2})
    assert e["ranges"] == {"x": [0, 2], "y": [0, 1]}

    png = tmp_path / "paths.png"
    code, out, err = run(
        capsys, str(model), "-p", 'P=? [F<=6 "goal"]', "--policy", f"{pol}:pi", "--explain", "3", "--out", str(png)
    )
    assert code == 0, err
    assert "3 most probable paths to the target within 6 steps" in out
    p1 = expected[0][1]
    assert f"path 1: probability {p1:.6g}, {len(expected[0][0]) - 1} steps" in out
    assert "right 0.5x0.8" in out and "target" in out
    import matplotlib.image

    img = matplotlib.image.imread(png)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--explain", "0"], "--explain: expected a positive number of paths, got 0"),
        (["--explain", "-1"], "--explain: expected a positive number of paths, got -1"),
        (["--explain", "2", "-p", "P=? [G x<2]"], r"has no target paths to list.*explained forms"),
        (["--explain", "2", "--mode", "monolithic", "-p", 'Pmax=? [F "goal"]'], "monolithic mode has no policy"),
        (
            ["--explain", "2", "--out", "{tmp}/m.png", "--explain-map", "x,yy"],
            r"'yy' is not a model variable \(did you mean 'y'\?\)",
        ),
        (["--explain", "2", "--out", "{tmp}/m.png", "--explain-map", "x"], "in pairs X,Y"),
        (["--explain-map", "x,y"], "add --explain K"),
        (["--out", "{tmp}/m.png"], r"m\.png: verify draws a \.png of the failure paths only: add --explain K"),
    ],
)
def test_cli_bad_explain_input_exits_2(capsys, grid, tmp_path: Path, extra: list[str], match: str) -> None:
    model, pol = grid
    extra = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    args = [str(model), "--policy", f"{pol}:pi"] + (["-p", 'P=? [F "goal"]'] if "-p" not in extra else []) + extra
    code, _, err = run(capsys, *args)
    assert code == 2
    assert re.search(match, " ".join(err.split())), err
    assert not (tmp_path / "m.png").exists()


def test_cli_map_needs_variables_without_x_y(capsys, tmp_path: Path) -> None:
    _loop(tmp_path)  # writes loop.prism
    pol = tmp_path / "loop_pi.py"
    pol.write_text(
        "import numpy as np\nFEATURES = ['s']\nACTIONS = ['a', 'b']\ndef pi(x):\n    return np.tile([0.4, 0.6], (len(x), 1))\n"
    )
    code, _, err = run(
        capsys,
        str(tmp_path / "loop.prism"),
        "-p",
        'P=? [F "goal"]',
        "--policy",
        f"{pol}:pi",
        "--explain",
        "2",
        "--out",
        str(tmp_path / "p.png"),
    )
    assert code == 2
    assert "no variables named x and y" in err and "variables: s" in err


def test_the_value_explained_is_verify_exacts_when_the_policy_stalls(tmp_path: Path) -> None:
    """Without ``value=``, explain_paths checks the value as verify_exact does: a stalled run satisfies no state
    formula. It used to ask Storm about the property as written, so the ``stalled`` sink (no labels) satisfied
    ``!"busy"``: value 1.0 (every run stalls) where the true value is 0 (no state of the model is not busy)."""
    path = tmp_path / "busy.prism"
    path.write_text(
        "mdp\nmodule m\n  x : [0..3] init 1;\n  [go] x=1 -> 0.5:(x'=2) + 0.5:(x'=1);\n"
        '  [stay] x=2 -> true;\nendmodule\nlabel "busy" = x=1 | x=2;\n'
    )
    model = load_model(path)
    half = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["x"], ["go", "stay"], name="half")
    prop = parsed(model, 'P=? [F !"busy"]')
    fp = explain_paths(model, prop, half, 3)
    result = verify_exact(model, prop, half)
    assert result.stalled_probability == pytest.approx(1.0) and result.value == 0.0
    assert fp.value == 0.0 and fp.paths == () and fp.share is None
