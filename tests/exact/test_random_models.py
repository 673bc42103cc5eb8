"""The exact engine against independent brute force on random MDPs and random softmax policies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.errors import PolicyError
from rlverify.models import load_model
from rlverify.policies import CallablePolicy
from tests.exact.randmdp import ACTIONS, bounded_reach, induced_matrix, policy_matrix, random_mdp, reach_probability

SEEDS = list(range(8))


def _setup(tmp_path: Path, seed: int, *, drop_action: bool = False):
    rng = np.random.default_rng(seed)
    mdp = random_mdp(rng, n=int(rng.integers(5, 11)))
    path = tmp_path / f"random{seed}.prism"
    path.write_text(mdp.prism())
    pi = policy_matrix(rng, mdp.n)
    table = pi.copy()

    def fn(states: np.ndarray) -> np.ndarray:
        return table[states[:, 0].astype(int)]

    return mdp, load_model(path), CallablePolicy(fn, ["s"], list(ACTIONS), name=f"random softmax {seed}"), pi


@pytest.mark.parametrize("seed", SEEDS)
def test_unbounded_bounded_until_and_reward_match_brute_force(tmp_path: Path, seed: int) -> None:
    mdp, model, policy, pi = _setup(tmp_path, seed)
    P, r = induced_matrix(mdp, pi)
    goal = np.r_[mdp.goal, False]
    allowed = np.r_[~mdp.avoid, True]
    stall = np.zeros(mdp.n + 1, dtype=bool)
    stall[-1] = True
    cases = {
        'P=? [F "goal"]': reach_probability(P, goal)[0],
        'P=? [F<=4 "goal"]': bounded_reach(P, goal, 4)[0],
        'P=? [!"avoid" U "goal"]': reach_probability(P, goal, allowed=allowed)[0],
        'P=? [!"avoid" U<=3 "goal"]': bounded_reach(P, goal, 3, allowed=allowed)[0],
    }
    for prop, expected in cases.items():
        res = verify_exact(model, prop, policy, ExactOptions(mode="stochastic"))
        assert res.value == pytest.approx(expected, abs=1e-6), prop
        assert res.lower is None or res.lower <= expected + 1e-6
        assert res.upper is None or res.upper >= expected - 1e-6
    # stalled before the property is decided: goal states absorbing
    P_goal = P.copy()
    P_goal[goal] = 0
    P_goal[goal, np.flatnonzero(goal)] = 1.0
    res = verify_exact(model, 'P=? [F "goal"]', policy)
    assert res.stalled_probability == pytest.approx(reach_probability(P_goal, stall)[0], abs=1e-6)
    # cumulative reward over 5 steps (state-action rewards weighted by pi), brute force
    x = np.zeros(mdp.n + 1)
    rr = np.r_[r, 0.0]
    for _ in range(5):
        x = rr + P @ x
    res = verify_exact(model, 'R{"r"}=? [C<=5]', policy)
    assert res.value == pytest.approx(x[0], rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_renormalize_matches_brute_force(tmp_path: Path, seed: int) -> None:
    mdp, model, policy, pi = _setup(tmp_path, seed)
    P, _ = induced_matrix(mdp, pi, unavailable="renormalize")
    goal = np.r_[mdp.goal, False]
    allowed = np.r_[~mdp.avoid, True]
    cases = {
        'P=? [F "goal"]': reach_probability(P, goal)[0],
        'P=? [!"avoid" U "goal"]': reach_probability(P, goal, allowed=allowed)[0],
        'P=? [F<=3 "goal"]': bounded_reach(P, goal, 3)[0],
    }
    for prop, expected in cases.items():
        res = verify_exact(model, prop, policy, ExactOptions(unavailable="renormalize"))
        assert res.value == pytest.approx(expected, abs=1e-6), prop
        assert res.stalled_probability == 0.0


@pytest.mark.parametrize("seed", SEEDS)
def test_value_between_pmin_and_pmax_and_strategies_agree(tmp_path: Path, seed: int) -> None:
    mdp, model, policy, _ = _setup(tmp_path, seed)
    if not mdp.available().all():
        # Pmin/Pmax range over schedulers that only use available actions: compare with renormalised policies
        opts = dict(unavailable="renormalize")
    else:
        opts = {}
    mono = verify_exact(model, 'P=? [!"avoid" U "goal"]', None, ExactOptions(mode="monolithic"))
    full = verify_exact(model, 'P=? [!"avoid" U "goal"]', policy, ExactOptions(strategy="full", **opts))
    fly = verify_exact(model, 'P=? [!"avoid" U "goal"]', policy, ExactOptions(strategy="onthefly", **opts))
    assert mono.pmin - 1e-6 <= full.value <= mono.pmax + 1e-6
    assert fly.value == pytest.approx(full.value, abs=1e-9)
    assert (fly.states, fly.transitions) == (full.states, full.transitions)
    for mode in ("deterministic",):
        a = verify_exact(model, 'P=? [F<=6 "goal"]', policy, ExactOptions(mode=mode, strategy="full", **opts))
        b = verify_exact(model, 'P=? [F<=6 "goal"]', policy, ExactOptions(mode=mode, strategy="onthefly", **opts))
        assert a.value == pytest.approx(b.value, abs=1e-12) and a.states == b.states


@pytest.mark.parametrize("seed", SEEDS[:5])
def test_storm_optimal_scheduler_as_policy_reproduces_pmax(tmp_path: Path, seed: int) -> None:
    import stormpy

    from rlverify.models import build_explicit, parse_property

    mdp, model, _, _ = _setup(tmp_path, seed)
    prop = parse_property(model, 'Pmax=? [F "goal"]')
    explicit, storm_mdp = build_explicit(model, [prop])
    result = stormpy.model_checking(storm_mdp, prop.storm, extract_scheduler=True)  # Storm's own parse of the property
    scheduler = result.get_scheduler()
    # the scheduler's choice per state, as a deterministic table policy over the valuation s
    table = np.zeros((mdp.n, len(ACTIONS)))
    table[:, 0] = 1.0  # states the scheduler does not cover (never reached/terminal): any action
    for state in range(explicit.num_states):
        local = scheduler.get_choice(state).get_deterministic_choice()
        c = explicit.row_groups[state] + local
        name = explicit.action_names[explicit.choice_actions[c]]
        if name:
            s = int(explicit.valuations[state, explicit.variables.index("s")])
            table[s] = 0.0
            table[s, ACTIONS.index(name)] = 1.0
    policy = CallablePolicy(lambda x: table[x[:, 0].astype(int)], ["s"], list(ACTIONS))
    res = verify_exact(model, 'P=? [F "goal"]', policy, ExactOptions(mode="deterministic", unavailable="renormalize"))
    assert res.value == pytest.approx(result.get_value(storm_mdp.initial_states[0]), abs=1e-6)


def test_same_inputs_same_output(tmp_path: Path) -> None:
    _, model, policy, _ = _setup(tmp_path, 3)
    a = verify_exact(model, 'P=? [F "goal"]', policy)
    b = verify_exact(model, 'P=? [F "goal"]', policy)
    assert (a.value, a.states, a.transitions, a.stalled_probability) == (
        b.value,
        b.states,
        b.transitions,
        b.stalled_probability,
    )


def test_two_choices_with_one_label_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.prism"
    path.write_text(
        "mdp\nmodule m\n s : [0..2] init 0;\n [a] s=0 -> (s'=1);\n [a] s=0 -> (s'=2);\n [b] s>0 -> true;\nendmodule\n"
    )
    policy = CallablePolicy(lambda x: np.full((len(x), 2), 0.5), ["s"], ["a", "b"])
    with pytest.raises(PolicyError, match="2 choices labelled 'a'"):
        verify_exact(load_model(path), "P=? [F s=2]", policy)


@pytest.mark.parametrize("seed", SEEDS)
def test_sparse_policies_full_and_onthefly_agree_with_brute_force(tmp_path: Path, seed: int) -> None:
    """Policies with exact zeros: on-the-fly masking must stall the same mass as the full build."""
    mdp, model, _, pi = _setup(tmp_path, seed)
    rng = np.random.default_rng(100 + seed)
    sparse = pi * (rng.random(pi.shape) < 0.6)
    sparse[sparse.sum(axis=1) == 0, 0] = 1.0
    sparse /= sparse.sum(axis=1, keepdims=True)
    policy = CallablePolicy(lambda x: sparse[x[:, 0].astype(int)], ["s"], list(ACTIONS))
    P, _ = induced_matrix(mdp, sparse)
    goal = np.r_[mdp.goal, False]
    expected = bounded_reach(P, goal, 5)[0]
    P_goal = P.copy()
    P_goal[goal] = 0
    P_goal[goal, np.flatnonzero(goal)] = 1.0
    stall = np.zeros(mdp.n + 1, dtype=bool)
    stall[-1] = True
    # stalled before the property is decided: within its 5 steps, before the goal (README)
    expected_stall = bounded_reach(P_goal, stall, 5)[0]
    for strategy in ("full", "onthefly"):
        res = verify_exact(model, 'P=? [F<=5 "goal"]', policy, ExactOptions(strategy=strategy))
        assert res.value == pytest.approx(expected, abs=1e-9), strategy
        assert res.stalled_probability == pytest.approx(expected_stall, abs=1e-6), strategy


def test_onthefly_stalls_where_every_available_action_has_probability_zero(tmp_path: Path) -> None:
    path = tmp_path / "st.prism"
    path.write_text(
        "mdp\nmodule m\n s : [0..3] init 0;\n [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);\n"
        " [b] s=1 -> (s'=3);\n [a] s=2 -> (s'=3);\n [a] s=3 -> true;\nendmodule\n"
    )
    policy = CallablePolicy(lambda x: np.tile([1.0, 0.0], (len(x), 1)), ["s"], ["a", "b"])
    for strategy in ("full", "onthefly"):
        res = verify_exact(load_model(path), "P=? [F s=3]", policy, ExactOptions(strategy=strategy))
        # s=1 offers only b, which the policy never takes: half the mass stalls there
        assert (res.value, res.stalled_probability) == (pytest.approx(0.5), pytest.approx(0.5)), strategy
        with pytest.raises(PolicyError, match="all its mass on unavailable actions"):
            verify_exact(load_model(path), "P=? [F s=3]", policy, ExactOptions(strategy=strategy, unavailable="renormalize"))
