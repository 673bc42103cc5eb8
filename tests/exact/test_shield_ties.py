"""Which actions a shield keeps, decided from bracketed Q-values with ties merged (issue 44): held against exact
rational Q (FrozenLake, from Gymnasium's own table in fractions) and the Avoid model's obstacle symmetry."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from rlverify.exact.action_values import action_values
from rlverify.exact.chain import full_mdp
from rlverify.exact.options import ExactOptions
from rlverify.exact.shield import ShieldOptions, compute_shield, shield_policy, tie_gaps
from rlverify.resolve import resolve

REPO = Path(__file__).resolve().parents[2]
FROZEN_PPO = REPO / "examples" / "gymnasium" / "ppo_frozenlake.zip"


def _solve(a: list[list[Fraction]], b: list[Fraction]) -> list[Fraction]:
    """Gauss-Jordan elimination in fractions (a non-singular system)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = next(r for r in range(c, n) if m[r][c] != 0)
        m[c], m[p] = m[p], m[c]
        piv = m[c][c]
        m[c] = [x / piv for x in m[c]]
        for r in range(n):
            if r != c and m[r][c] != 0:
                f = m[r][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c], strict=True)]
    return [m[i][n] for i in range(n)]


def _frozenlake_exact_q() -> tuple[list[list[Fraction]], list[bool]]:
    """Exact Q(s, a) = sum T(s, a, s') Pmax(s') of slippery FrozenLake 4x4 in fractions, from Gymnasium's table:
    policy iteration in fractions from a float value iteration's greedy policy, ended by an exact Bellman check."""
    import gymnasium as gym

    env = gym.make("FrozenLake-v1")
    P, desc = env.unwrapped.P, env.unwrapped.desc.astype(str).reshape(-1)
    n, A = 16, 4
    T = [[{} for _ in range(A)] for _ in range(n)]
    for s in range(n):
        for a in range(A):
            for p, s2, _, _ in P[s][a]:
                T[s][a][s2] = T[s][a].get(s2, Fraction(0)) + Fraction(p).limit_denominator(1000)
    goal = [d == "G" for d in desc]
    end = [d in "GH" for d in desc]
    v = np.array(goal, dtype=float)

    def q_float(s: int) -> list[float]:
        return [sum(float(p) * v[t] for t, p in T[s][a].items()) for a in range(A)]

    for _ in range(3000):
        v = np.array([float(goal[s]) if end[s] else max(q_float(s)) for s in range(n)])
    pol = [int(np.argmax(q_float(s))) for s in range(n)]
    for _ in range(20):
        # states reaching the goal under pol (others 0), then the linear system on them
        can = list(goal)
        for _ in range(n):
            can = [can[s] or (not end[s] and any(can[t] for t in T[s][pol[s]])) for s in range(n)]
        idx = [s for s in range(n) if can[s] and not end[s]]
        a = [[Fraction(int(i == j)) - T[i][pol[i]].get(j, Fraction(0)) for j in idx] for i in idx]
        b = [sum((p for t, p in T[i][pol[i]].items() if goal[t]), Fraction(0)) for i in idx]
        x = dict(zip(idx, _solve(a, b), strict=True))
        V = [Fraction(int(goal[s])) if end[s] else x.get(s, Fraction(0)) for s in range(n)]
        Q = [[sum((p * V[t] for t, p in T[s][a].items()), Fraction(0)) for a in range(A)] for s in range(n)]
        better = [s for s in range(n) if not end[s] and max(Q[s]) > V[s]]
        if not better:  # V is a policy's value and a fixed point of the Bellman operator: Pmax
            return Q, end
        for s in better:
            pol[s] = int(np.argmax(Q[s]))
    raise AssertionError("policy iteration did not end")


def test_frozenlake_shield_keeps_every_exactly_optimal_action() -> None:
    Q, end = _frozenlake_exact_q()
    assert Q[0][3] == Fraction(14, 17) == max(Q[0])  # the case: `up` in state 0 is exactly optimal
    t = resolve("gym:FrozenLake-v1", policy=str(FROZEN_PPO), property='P>=0.7 [F "goal"]')
    r = shield_policy(t.model, t.property, t.policy, ShieldOptions(threshold=0.0))
    shield = r.shield
    assert shield.actions == ("left", "down", "right", "up")
    col = shield.variables.index("s")
    checked = 0
    for row, state in enumerate(shield.valuations):
        s = int(state[col])
        if end[s]:
            continue
        exact_best = {a for a in range(4) if Q[s][a] == max(Q[s])}
        assert set(np.flatnonzero(shield.best[row])) == exact_best, (s, [float(q) for q in Q[s]])
        # threshold 0: the best actions only, and every exactly optimal one among them
        assert set(np.flatnonzero(shield.kept[row])) == exact_best
        checked += 1
    assert checked >= 11
    assert shield.kept[[i for i, v in enumerate(shield.valuations) if v[col] == 0]][:, 3].all()


def _swap(valuations: np.ndarray, variables: tuple[str, ...]) -> np.ndarray:
    names = ["obstacle1_x", "obstacle1_y", "obstacle2_x", "obstacle2_y"]
    cols = [variables.index(v) for v in names]
    out = valuations.copy()
    out[:, cols] = valuations[:, [cols[2], cols[3], cols[0], cols[1]]]
    return out


@pytest.mark.slow
def test_avoid_obstacle_swapped_twins_get_the_same_kept_sets_at_every_threshold() -> None:
    t = resolve("avoid-v1", property="P<=0.2 [F<=100 COLLISION=true]")
    options = ExactOptions(strategy="full")
    full = full_mdp(t.model, t.property, options, policy=t.policy)
    values = action_values(t.model, t.property, options, mdp=full)
    gaps = tie_gaps(values, t.policy.actions)
    assert gaps.certified and gaps.tolerance < 1e-9
    base = compute_shield(values, t.policy.actions, "relative", 0.0, model=t.model, gaps=gaps)
    vals = base.valuations
    twin = base.rows(_swap(vals, base.variables))
    assert (twin >= 0).all()
    # the raw float gaps of twins differ (by rounding) somewhere: a float threshold there would split them
    q = values.for_actions(t.policy.actions)[gaps.covered]
    raw = q - np.nanmin(q, axis=1)[:, None]
    differ = ~np.isclose(raw, raw[twin], rtol=0, atol=0, equal_nan=True)
    assert differ.any()
    # the pair: x=3, y=0, obstacles (3,3) / (3,2)
    names = base.variables
    row = [dict(zip(names, v.tolist(), strict=True)) for v in vals]
    pair = [
        i
        for i, v in enumerate(row)
        if (v["x"], v["y"]) == (3, 0)
        and {(v["obstacle1_x"], v["obstacle1_y"]), (v["obstacle2_x"], v["obstacle2_y"])} == {(3, 3), (3, 2)}
    ]
    assert len(pair) >= 2
    thresholds = np.r_[gaps.candidates(), np.unique(raw[differ])]
    for th in thresholds[:: max(len(thresholds) // 400, 1)]:
        s = compute_shield(values, t.policy.actions, "relative", float(th), model=t.model, gaps=gaps)
        assert (s.kept == s.kept[twin]).all(), th
        assert (s.best == s.best[twin]).all()
        assert (s.kept[pair[0]] == s.kept[pair[1]]).all()
