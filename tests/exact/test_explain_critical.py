"""Critical states (rlverify.exact.critical): Q(s, a), spreads, expected visits and the ranking against brute force from
Gymnasium's own FrozenLake table and the running example written out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlverify.errors import OptionError, PropertyError
from rlverify.exact.critical import CriticalOptions, critical_states
from rlverify.resolve import resolve

REPO = Path(__file__).resolve().parents[2]
FROZEN_PPO = REPO / "examples" / "gymnasium" / "ppo_frozenlake.zip"

# the running example by hand: the shipped table policy and T[x-1, action, x'-1] (actions UP, NOP, DOWN)
PI = np.array([[0.3, 0.0, 0.7], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
T = np.zeros((4, 3, 4))
T[0, 0, [1, 2]] = [0.2, 0.8]
T[1, 0, [2, 3]] = [0.2, 0.8]
T[2, 0, 3] = 1.0
for _x in range(4):
    T[_x, 1, _x] = 1.0
    T[_x, 2, max(_x - 1, 0)] = 1.0
OFFERED = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 1, 1]], dtype=bool)  # UP is not offered at x=4


def test_running_example_goal_reading_against_brute_force():
    t = resolve("running-example-v1", property='P>=0.5 [F<=3 "goal"]')
    r = critical_states(t.model, t.property, t.policy, CriticalOptions(top=3))
    assert r.optimum == "max" and r.remaining == 3
    goal = np.array([0, 0, 0, 1.0])
    v = goal.copy()  # Pmax within 2 steps
    for _ in range(2):
        v = np.maximum(goal, np.max(np.where(OFFERED, T @ v, -np.inf), axis=1))
    q = np.where(OFFERED, np.where(goal[:, None] == 1, 1.0, T @ v), np.nan)
    m = np.einsum("xa,xay->xy", PI, T)
    visits, dist = np.zeros(4), np.eye(4)[0]
    for _ in range(3):
        dist = dist * (goal == 0)
        visits += dist
        dist = dist @ m
    spread = np.nanmax(q, axis=1) - np.nanmin(q, axis=1)
    score = visits * spread
    expected = [x for x in np.argsort(-score, kind="stable") if visits[x] > 0]
    assert [c.state["x"] - 1 for c in r.states] == expected
    for c in r.states:
        x = c.state["x"] - 1
        assert c.visits == pytest.approx(visits[x], abs=1e-12)
        assert c.spread == pytest.approx(spread[x], abs=1e-9)
        assert c.q == pytest.approx({a: q[x, i] for i, a in enumerate(["UP", "NOP", "DOWN"]) if OFFERED[x, i]}, abs=1e-9)
        assert c.policy == {a: p for a, p in zip(["UP", "NOP", "DOWN"], PI[x], strict=True) if p > 0}
        assert q[x, ["UP", "NOP", "DOWN"].index(c.best)] == np.nanmax(q[x])
    assert r.considered == 3


def test_frozenlake_unbounded_against_gymnasiums_table():
    import gymnasium as gym

    t = resolve("gym:FrozenLake-v1", policy=str(FROZEN_PPO), property='P>=0.7 [F "goal"]')
    r = critical_states(t.model, t.property, t.policy, CriticalOptions(top=5))
    env = gym.make("FrozenLake-v1")
    P, desc = env.unwrapped.P, env.unwrapped.desc.astype(str).reshape(-1)
    n = 16
    T = np.zeros((n, 4, n))
    for s in range(n):
        for a in range(4):
            for p, s2, _, _ in P[s][a]:
                T[s, a, s2] += p
    goal, hole = desc == "G", desc == "H"
    v = goal.astype(float)
    for _ in range(5000):  # Pmax of reaching the goal
        v = np.where(goal, 1.0, np.where(hole, 0.0, np.max(T @ v, axis=1)))
    q = T @ v
    probs = t.policy.action_probabilities(np.arange(n, dtype=float)[:, None])
    m = np.einsum("xa,xay->xy", probs, T)
    reach = goal.copy()
    for _ in range(n):
        reach = reach | ((m > 0) @ reach > 0)
    transient = np.flatnonzero(reach & ~goal & ~hole)
    visits = np.zeros(n)
    visits[transient] = np.linalg.solve((np.eye(len(transient)) - m[np.ix_(transient, transient)]).T, transient == 0)
    score = visits * (q.max(axis=1) - q.min(axis=1))
    expected = [s for s in np.argsort(-score, kind="stable") if s in transient][:5]
    assert [c.state["s"] for c in r.states] == expected
    acts = list(t.policy.actions)
    for c in r.states:
        s = c.state["s"]
        assert c.q == pytest.approx(dict(zip(acts, q[s], strict=True)), abs=1e-5)
        assert c.score == pytest.approx(score[s], rel=1e-4)
        assert c.best == acts[int(np.argmax(q[s]))]
    assert r.considered == len(transient)


def test_bad_options_and_forms_are_refused():
    t = resolve("running-example-v1", property='P=? [F<=3 "goal"]')
    with pytest.raises(OptionError, match="--top: expected an integer from 1"):
        critical_states(t.model, t.property, t.policy, CriticalOptions(top=0))
    g = resolve("running-example-v1", property="P=? [G x<4]")
    with pytest.raises(PropertyError, match="its path formula is G"):
        critical_states(g.model, g.property, g.policy)
