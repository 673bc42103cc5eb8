"""Explanations on random small MDPs (tests/exact/randmdp.py) against dense brute force: expected visits (bounded and
unbounded, with stalling), the ablation of the state feature, and the tree's exact value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlverify.errors import PropertyError
from rlverify.exact.chain import policy_chain
from rlverify.exact.features import FeatureOptions, feature_effects
from rlverify.exact.tree import TreeOptions, expected_visits, fit_tree
from rlverify.models import load_model
from rlverify.models.property_parser import parse_property
from rlverify.policies.adapters import CallablePolicy
from tests.exact.randmdp import ACTIONS, bounded_reach, induced_matrix, policy_matrix, random_mdp, reach_probability

SEEDS = list(range(6))
PROPS = {"unbounded": 'P=? [!"avoid" U "goal"]', "bounded": 'P=? [F<=5 "goal"]'}


def setup(tmp_path: Path, seed: int):
    rng = np.random.default_rng(seed)
    mdp = random_mdp(rng, n=int(rng.integers(5, 11)))
    path = tmp_path / f"random{seed}.prism"
    path.write_text(mdp.prism())
    pi = policy_matrix(rng, mdp.n)

    def fn(states: np.ndarray) -> np.ndarray:
        return pi[states[:, 0].astype(int)]

    return mdp, load_model(path), CallablePolicy(fn, ["s"], list(ACTIONS), name=f"random {seed}"), pi


def brute_visits(P: np.ndarray, goal: np.ndarray, allowed: np.ndarray, bound: int | None) -> np.ndarray:
    """Expected visits from state 0 while undecided (allowed, not goal, not the stall sink at the end)."""
    m = len(P)
    undecided = allowed & ~goal
    undecided[-1] = False
    if bound is not None:
        dist, out = np.eye(m)[0], np.zeros(m)
        for _ in range(bound):
            dist = dist * undecided
            out += dist
            dist = dist @ P
        return out
    can = goal.copy()
    while True:
        new = can | (undecided & ((P[:, can] > 0).any(axis=1)))
        if (new == can).all():
            break
        can = new
    idx = np.flatnonzero(undecided & can)
    out = np.zeros(m)
    if 0 in idx:
        out[idx] = np.linalg.solve((np.eye(len(idx)) - P[np.ix_(idx, idx)]).T, (idx == 0).astype(float))
    return out


@pytest.mark.parametrize("kind", sorted(PROPS))
@pytest.mark.parametrize("seed", SEEDS)
def test_expected_visits_match_brute_force(tmp_path: Path, seed: int, kind: str) -> None:
    mdp, model, policy, pi = setup(tmp_path, seed)
    prop = parse_property(model, PROPS[kind], fixed_policy=True)
    P, _ = induced_matrix(mdp, pi)
    allowed = np.r_[~mdp.avoid, True] if kind == "unbounded" else np.ones(mdp.n + 1, dtype=bool)
    expected = brute_visits(P, np.r_[mdp.goal, False], allowed, prop.bound)
    built = policy_chain(model, prop, policy)
    occ = expected_visits(built, prop)
    got = np.zeros(mdp.n + 1)
    s = built.chain.variables.index("s")
    for u in range(built.chain.num_states):
        got[mdp.n if built.origin[u] < 0 else int(built.chain.valuations[u, s])] += occ.visits[u]
    assert np.allclose(got, expected, atol=1e-9), (got, expected)


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_ablation_and_tree_value_match_brute_force(tmp_path: Path, seed: int) -> None:
    mdp, model, policy, pi = setup(tmp_path, seed)
    prop = parse_property(model, PROPS["bounded"], fixed_policy=True)
    goal = np.r_[mdp.goal, False]
    r = feature_effects(model, prop, policy, FeatureOptions(perturb=False, reference="range"))
    (e,) = r.effects
    for v in range(mdp.n):  # the policy shown s=v everywhere: pi[v] in every state
        P, _ = induced_matrix(mdp, np.tile(pi[v], (mdp.n, 1)))
        assert abs(e.range_values[str(v)] - bounded_reach(P, goal, 5)[0]) < 1e-9, v
    try:
        tree = fit_tree(model, prop, policy, TreeOptions(depth=2))
    except PropertyError as exc:  # a start that decides nothing is refused; nothing else is
        assert "no policy-reachable state" in str(exc)
        return
    acts = np.array([int(tree.tree_policy.action_probabilities(np.array([[s]]))[0].argmax()) for s in range(mdp.n)])
    P, _ = induced_matrix(mdp, np.eye(len(ACTIONS))[acts])
    assert abs(tree.tree_value - bounded_reach(P, goal, 5)[0]) < 1e-9
    assert abs(tree.policy_value - bounded_reach(induced_matrix(mdp, pi)[0], goal, 5)[0]) < 1e-9
    assert abs(tree.tree_stalled - bounded_reach(P, np.r_[np.zeros(mdp.n, bool), True], 5, allowed=~goal)[0]) < 1e-9


def test_unbounded_reach_brute_force_is_consistent():  # the brute force's own sanity: visits x exit = reach
    rng = np.random.default_rng(0)
    mdp = random_mdp(rng, n=6)
    P, _ = induced_matrix(mdp, policy_matrix(rng, mdp.n))
    goal = np.r_[mdp.goal, False]
    visits = brute_visits(P, goal, np.ones(mdp.n + 1, dtype=bool), None)
    assert abs(visits @ P[:, goal].sum(axis=1) - reach_probability(P, goal)[0]) < 1e-9
