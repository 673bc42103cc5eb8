"""The decision tree standing in for the policy (rlverify.exact.tree): its exact value equals a separate `rlverify
verify` of the tree written as a policy file; expected visits, fidelity and the tree's value against brute force
from Gymnasium's own transition table (FrozenLake) and the running example written out by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.errors import DependencyNotInstalled, PolicyError
from rlverify.exact.chain import policy_chain
from rlverify.exact.tree import TreeOptions, expected_visits, fit_tree
from rlverify.policies import load_policy
from rlverify.resolve import resolve

REPO = Path(__file__).resolve().parents[2]
FROZEN_PPO = REPO / "examples" / "gymnasium" / "ppo_frozenlake.zip"


def verify_value(capsys, *argv: str) -> float:
    capsys.readouterr()
    assert main(["verify", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["result"]["value"]


def walk(tree: dict, state: dict[str, float]) -> str:
    """The tree file's action for ``state``, by reading its JSON nodes (independent of TreePolicy)."""
    node = tree["nodes"][0]
    while "action" not in node:
        node = tree["nodes"][node["left"] if state[node["feature"]] <= node["threshold"] else node["right"]]
    return node["action"]


def test_avoid_tree_value_equals_a_separate_verify_of_its_file(tmp_path, capsys):
    prop = "P=? [F<=100 COLLISION=true]"
    t = resolve("avoid-v1", property=prop)
    r = fit_tree(t.model, t.property, t.policy)
    assert r.fidelity >= 0.95 and r.fidelities[r.depth] == r.fidelity
    assert all(f < 0.95 for d, f in r.fidelities.items() if d < r.depth)  # the smallest depth reaching the target
    path = tmp_path / "tree.json"
    r.tree_policy.save(path)
    assert json.loads(path.read_text())["nodes"] == r.tree["nodes"]
    separate = verify_value(capsys, "avoid-v1", "-p", prop, "--policy", str(path))
    assert abs(r.tree_value - separate) < 1e-12
    assert abs(r.policy_value - 0.8461287531597388) < 1e-9
    assert len(r.rules) == r.leaves


def frozen_p():
    import gymnasium as gym

    env = gym.make("FrozenLake-v1")
    return env.unwrapped.P, env.unwrapped.desc.astype(str).reshape(-1)


def test_frozenlake_visits_fidelity_and_tree_value_against_gymnasiums_table(tmp_path, capsys):
    prop = 'P=? [F "goal"]'
    t = resolve("gym:FrozenLake-v1", policy=str(FROZEN_PPO), property=prop)
    r = fit_tree(t.model, t.property, t.policy, TreeOptions(depth=2))
    P, desc = frozen_p()
    n, acts = 16, list(t.policy.actions)
    probs = t.policy.action_probabilities(np.arange(n, dtype=float)[:, None])

    def matrix(pi: np.ndarray) -> np.ndarray:
        m = np.zeros((n, n))
        for s in range(n):
            for a in range(4):
                for p, s2, _, _ in P[s][a]:
                    m[s, s2] += pi[s, a] * p
        return m

    # expected visits before the goal, a hole, or a state that cannot reach the goal: (I - Q)^-1 from s=0
    m = matrix(probs)
    reach = desc == "G"
    for _ in range(n):
        reach = reach | ((m > 0) @ reach > 0)
    transient = reach & (desc != "G") & (desc != "H")
    idx = np.flatnonzero(transient)
    visits = np.linalg.solve((np.eye(len(idx)) - m[np.ix_(idx, idx)]).T, (idx == 0).astype(float))
    argmax = np.argmax(probs[idx], axis=1)
    tree_action = np.array([acts.index(walk(r.tree, {"s": s})) for s in idx])
    assert r.fitted_states == len(idx)
    # (the SB3 network computes in float32: its probabilities on a batch of 16 and of 11 states differ by ~1e-8)
    assert abs(r.fidelity - visits[tree_action == argmax].sum() / visits.sum()) < 1e-6
    assert r.fidelity < 0.99 and r.fidelities == {2: r.fidelity}  # not the trivial 1: the tree disagrees somewhere
    # the tree's exact value: reachability of the goal under the tree's deterministic choice
    pi_tree = np.zeros((n, 4))
    pi_tree[np.arange(n), [acts.index(walk(r.tree, {"s": s})) for s in range(n)]] = 1.0
    mt = matrix(pi_tree)
    value = np.zeros(n)
    value[desc == "G"] = 1.0
    for _ in range(20000):
        value = np.where(desc == "G", 1.0, np.where(desc == "H", 0.0, mt @ value))
    assert abs(r.tree_value - value[0]) < 1e-6
    # and a separate verify of the tree file, and of a table written from the JSON walk
    path = tmp_path / "tree.json"
    r.tree_policy.save(path)
    assert abs(verify_value(capsys, "gym:FrozenLake-v1", "-p", prop, "--policy", str(path)) - r.tree_value) < 1e-12
    rows = [{"state": {"s": s}, "probabilities": {walk(r.tree, {"s": s}): 1.0}} for s in range(n)]
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"features": ["s"], "actions": acts, "table": rows}))
    assert abs(verify_value(capsys, "gym:FrozenLake-v1", "-p", prop, "--policy", str(table)) - r.tree_value) < 1e-12


# the running example by hand (as in test_explain_features): pi and T
PI = np.array([[0.3, 0.0, 0.7], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
T = np.zeros((4, 3, 4))  # T[x-1, action, x'-1]
T[0, 0, [1, 2]] = [0.2, 0.8]
T[1, 0, [2, 3]] = [0.2, 0.8]
T[2, 0, 3] = 1.0
for x in range(4):
    T[x, 1, x] = 1.0
    T[x, 2, max(x - 1, 0)] = 1.0


def test_running_example_expected_visits_bounded_and_unbounded():
    t = resolve("running-example-v1", property='P=? [F<=3 "goal"]')
    m = np.einsum("xa,xay->xy", PI, T)
    built = policy_chain(t.model, t.property, t.policy)
    x_of = {int(u): int(built.chain.valuations[u, built.chain.variables.index("x")]) for u in range(built.chain.num_states)}
    occ = expected_visits(built, t.property)
    dist, brute = np.eye(4)[0], np.zeros(4)
    for _ in range(3):  # steps 0, 1, 2 at undecided states (x < 4)
        dist = dist * (np.arange(4) < 3)
        brute += dist
        dist = dist @ m
    got = np.zeros(4)
    for u, x in x_of.items():
        got[x - 1] += occ.visits[u]
    assert np.allclose(got, brute, atol=1e-12)
    # unbounded: (I - Q)^-1 over x = 1..3 (all reach the goal)
    t2 = resolve("running-example-v1", property='P=? [F "goal"]')
    built2 = policy_chain(t2.model, t2.property, t2.policy)
    occ2 = expected_visits(built2, t2.property)
    q = m[:3, :3]
    brute2 = np.linalg.solve((np.eye(3) - q).T, np.eye(3)[0])
    got2 = np.zeros(4)
    for u in range(built2.chain.num_states):
        got2[int(built2.chain.valuations[u, built2.chain.variables.index("x")]) - 1] += occ2.visits[u]
    assert np.allclose(got2[:3], brute2, atol=1e-9) and got2[3] == 0.0


def test_running_example_tree_is_the_argmax_policy_and_its_value_is_exact():
    t = resolve("running-example-v1", property='P=? [F<=3 "goal"]')
    r = fit_tree(t.model, t.property, t.policy)
    # the most likely actions at x = 1, 2, 3: DOWN, UP (first of the tie UP/NOP), UP; DOWN at x=1 stays at x=1
    assert [walk(r.tree, {"x": x}) for x in (1, 2, 3)] == ["DOWN", "UP", "UP"]
    assert r.fidelity == 1.0 and r.tree_value == 0.0
    assert r.rules == ("if x = 1 then DOWN", "if x >= 2 then UP")


def test_without_scikit_learn_the_error_names_the_extra(monkeypatch):
    t = resolve("running-example-v1", property='P=? [F<=3 "goal"]')
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.tree", None)
    with pytest.raises(DependencyNotInstalled, match=r"pip install 'rlverify\[explain\]'"):
        fit_tree(t.model, t.property, t.policy)


LEAVES = [{"action": "UP"}, {"action": "UP"}]


@pytest.mark.parametrize(
    "nodes,expected",
    [
        ([{"feature": "x", "threshold": 1.5, "left": 0, "right": 2}, {"action": "UP"}], "'left' must be the index of a later"),
        (
            [{"feature": "z", "threshold": 1.5, "left": 1, "right": 2}, {"action": "UP"}, {"action": "UP"}],
            "unknown feature 'z'",
        ),
        ([{"action": "JUMP"}], "unknown action 'JUMP'"),
        ([{"feature": "x", "threshold": "1", "left": 1, "right": 2}, *LEAVES], "threshold must be"),
        ([{"feature": "x", "threshold": 1, "left": 1, "right": 1}, {"action": "UP"}], "reached from 2 parents"),
    ],
    ids=["cycle", "feature", "action", "threshold", "shared-child"],
)
def test_a_bad_tree_file_is_refused_naming_the_problem(tmp_path, nodes, expected):
    path = tmp_path / "tree.json"
    tree = {"format": "rlverify-tree", "version": 1, "features": ["x"], "actions": ["UP", "NOP", "DOWN"], "nodes": nodes}
    path.write_text(json.dumps(tree))
    with pytest.raises(PolicyError) as info:
        load_policy(str(path))
    assert expected in str(info.value) + " ".join(getattr(info.value, "problems", []) or [])
