"""Model-error brackets are certified: they contain the nominal value's certified bracket, and an independent oracle.

The oracle shares no code with the engine: the interval chain is written out from the random MDP's own arrays
(:mod:`tests.exact.randmdp`) and the policy's table, every vertex of each row's interval polytope becomes a choice,
and plain numpy value iteration (or closed forms, on the running example) gives its min and max.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rlverify import benchmarks, verify_exact
from rlverify.cli.main import main
from rlverify.exact import ExactOptions, ModelErrorOptions, model_error_bounds
from rlverify.models import load_model
from rlverify.policies import CallablePolicy
from tests.exact.randmdp import ACTIONS, RandomMdp, policy_matrix, random_mdp
from tests.exact.resolved import parsed

PROPERTIES = ('P=? [F "goal"]', 'P=? [F<=4 "goal"]', 'P=? [!"avoid" U "goal"]', 'P=? [G !"avoid"]', 'P=? [X "goal"]')
DELTAS = (1e-15, 3e-14, 1e-12, 1e-9, 1e-6, 1e-3, 0.02)


def _setup(tmp: Path, seed: int, n: int) -> tuple[RandomMdp, CallablePolicy, np.ndarray, Path]:
    rng = np.random.default_rng(seed)
    mdp = random_mdp(rng, n=n)
    path = tmp / f"random{seed}-{n}.prism"
    path.write_text(mdp.prism())
    pi = policy_matrix(rng, n)
    table = pi.copy()
    return mdp, CallablePolicy(lambda s: table[s[:, 0].astype(int)], ["s"], list(ACTIONS), name=f"softmax {seed}"), pi, path


def interval_rows(mdp: RandomMdp, pi: np.ndarray, delta: float, relative: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(n+1, n+1)`` lows and highs of the induced interval chain, a stall sink at index n (unavailable actions)."""
    n = mdp.n
    lo, hi = np.zeros((n + 1, n + 1)), np.zeros((n + 1, n + 1))
    for s in range(n):
        for a in range(len(ACTIONS)):
            dist = mdp.T.get((s, a))
            if dist is None:
                lo[s, n] += pi[s, a]
                hi[s, n] += pi[s, a]
                continue
            support = dist > 0
            if support.sum() == 1:  # one successor: probability 1 whatever delta
                lo[s, :n] += pi[s, a] * dist
                hi[s, :n] += pi[s, a] * dist
                continue
            d = dist * delta if relative else np.where(support, delta, 0.0)
            lo[s, :n] += pi[s, a] * np.clip(dist - d, 0.0, 1.0) * support
            hi[s, :n] += pi[s, a] * np.clip(dist + d, 0.0, 1.0) * support
    lo[n, n] = hi[n, n] = 1.0
    return lo, hi


def vertices(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``(V, m)`` vertices of ``{p : lo <= p <= hi, sum p = 1}`` on the support ``hi > 0`` (all but one at a bound)."""
    support = np.flatnonzero(hi > 0)
    out = []
    for free in support:
        others = [i for i in support if i != free]
        for bits in itertools.product((0, 1), repeat=len(others)):
            p = np.zeros(len(lo))
            for i, b in zip(others, bits, strict=True):
                p[i] = hi[i] if b else lo[i]
            p[free] = 1.0 - p.sum()
            if lo[free] - 1e-13 <= p[free] <= hi[free] + 1e-13:
                out.append(p)
    return np.array(out)


def oracle(lo: np.ndarray, hi: np.ndarray, stay: np.ndarray, target: np.ndarray, steps: int | None) -> tuple[float, float]:
    """Min and max of ``P(stay U<=steps target)`` at state 0 over the vertex MDP, by value iteration from 0."""
    verts = [vertices(lo[s], hi[s]) for s in range(len(lo))]
    out = []
    for best in (np.min, np.max):
        v = target.astype(float)
        for _ in range(steps if steps is not None else 200_000):
            new = np.array([1.0 if target[s] else (best(verts[s] @ v) if stay[s] else 0.0) for s in range(len(lo))])
            if steps is None and np.abs(new - v).max() < 1e-16:
                break
            v = new
        out.append(float(v[0]))
    return out[0], out[1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(4, 6),
    delta=st.sampled_from(DELTAS),
    relative=st.booleans(),
    text=st.sampled_from(PROPERTIES),
)
def test_the_nominal_bracket_lies_inside_every_model_error_bracket(tmp_path, seed, n, delta, relative, text):
    mdp, policy, _, path = _setup(tmp_path, seed, n)
    assume({a for _, a in mdp.T} == set(range(len(ACTIONS))))  # the policy names every action: the model must have it
    model = load_model(path)
    prop = parsed(model, text)
    r = model_error_bounds(model, prop, policy, ModelErrorOptions(delta=delta, relative=relative))
    nominal = verify_exact(model, prop, policy, ExactOptions(precision=1e-10))
    assert nominal.lower is not None and nominal.upper is not None
    assert r.lower <= nominal.lower <= nominal.value <= nominal.upper <= r.upper


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("text", PROPERTIES)
def test_model_error_bounds_equal_the_vertex_oracle(tmp_path, seed, text):
    mdp, policy, pi, path = _setup(tmp_path, seed, 4)
    model = load_model(path)
    delta = 0.01 * (1 + seed % 3)
    r = model_error_bounds(model, parsed(model, text), policy, ModelErrorOptions(delta=delta))
    lo, hi = interval_rows(mdp, pi, delta, False)
    goal, avoid = np.r_[mdp.goal, False], np.r_[mdp.avoid, False]
    every = np.r_[np.ones(mdp.n, dtype=bool), False]  # a stalled run satisfies no state formula
    if text.startswith("P=? [X"):  # one step from state 0
        low, high = (float(f(vertices(lo[0], hi[0]) @ goal)) for f in (np.min, np.max))
    elif text.startswith("P=? [G"):  # P(G !avoid) = 1 - P(F (avoid or stalled))
        high, low = oracle(lo, hi, every, avoid | ~every, None)
        low, high = 1.0 - low, 1.0 - high
    else:
        stay = every & ~avoid if "U" in text else every
        low, high = oracle(lo, hi, stay, goal, 4 if "<=" in text else None)
    # sound (never inside the oracle's range), and tight (the nominal's bracket, precision 1e-10, aside)
    assert low - 1e-9 <= r.lower <= low + 1e-12
    assert high - 1e-12 <= r.upper <= high + 1e-9


def _running_example_closed_form(delta: Fraction) -> tuple[Fraction, Fraction]:
    """``P(F<=2 goal)`` of the running example's interval chain: from A, 0.3 q_C + q_B r_D with q_B + q_C = 0.3 and
    r_D <= 1 (C before B is best for the max; B before C for the min)."""
    lo = Fraction(3, 10) * (Fraction(1, 5) + delta) * Fraction(1, 2) * (Fraction(4, 5) - delta)
    lo += Fraction(3, 10) * (Fraction(4, 5) - delta)
    hi = Fraction(3, 10) * (Fraction(1, 5) - delta) * Fraction(1, 2) * (Fraction(4, 5) + delta)
    hi += Fraction(3, 10) * (Fraction(4, 5) + delta)
    return lo, hi


@pytest.mark.parametrize("delta", [0.0, 1e-15, 1e-12, 1e-3])
def test_running_example_bracket_contains_its_closed_form_and_the_nominal(delta):
    bench = benchmarks.make("running-example-v1")
    model, policy = bench.model(), bench.load_policy("reference")
    for text in ('P=? [F<=2 "goal"]', 'P=? [F<=1000 "goal"]', 'P=? [F "goal"]', 'P=? [!"goal" U x=3]'):
        prop = parsed(model, text)
        r = model_error_bounds(model, prop, policy, ModelErrorOptions(delta=delta))
        nominal = verify_exact(model, prop, policy, ExactOptions(precision=1e-10))
        # F<=1000 at delta 1e-15 gave lower = upper = 0.9999999999999999 above the nominal 0.9999999999999996
        assert r.lower <= nominal.lower <= nominal.upper <= r.upper, text
        if text == 'P=? [F<=2 "goal"]':
            low, high = _running_example_closed_form(Fraction(delta))
            assert Fraction(r.lower) <= low and high <= Fraction(r.upper)
            assert float(low) - r.lower < 1e-13 and r.upper - float(high) < 1e-13


def test_cli_threshold_verdict_follows_the_certified_bracket(capsys):
    args = ["robust", "running-example-v1", "--delta", "0.001", "--json", "-p"]
    low, _ = _running_example_closed_form(Fraction(1, 1000))
    assert main([*args, f'P>={float(low) - 1e-6!r} [F<=2 "goal"]']) == 0
    assert json.loads(capsys.readouterr().out)["holds"] is True
    assert main([*args, 'P>=0.264 [F<=2 "goal"]']) == 0  # the nominal value: inside the range, undecided
    assert json.loads(capsys.readouterr().out)["holds"] is None
    assert main([*args, f'P<{float(low) - 1e-6!r} [F<=2 "goal"]']) == 0
    assert json.loads(capsys.readouterr().out)["holds"] is False


def test_a_lower_step_bound_is_refused_in_one_line(capsys):
    assert main(["robust", "running-example-v1", "--delta", "0.001", "-p", 'P=? [F>=2 "goal"]']) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "lower step bound" in err


def test_a_slowly_converging_iteration_stops_at_its_work_budget_with_sound_bounds():
    """From x=0: goal and a sink with probability 1e-6 +- 1e-7 each, else stay: P(F goal) is in [0.45, 0.55] (closed
    form: the goal's share of the leaving mass); the iteration would need ~1e7 steps."""
    import scipy.sparse as sp

    from rlverify.exact.interval_iteration import robust_reachability

    p, d = 1e-6, 1e-7
    lo = sp.csr_matrix(np.array([[1 - 2 * p - d, p - d, p - d], [0, 1, 0], [0, 0, 1]]))
    hi = sp.csr_matrix(np.array([[1 - 2 * p + d, p + d, p + d], [0, 1, 0], [0, 0, 1]]))
    target, stay = np.array([False, True, False]), np.ones(3, dtype=bool)
    low, low_done = robust_reachability(lo, hi, target, stay, maximize=False, max_work=10**7)
    high, high_done = robust_reachability(lo, hi, target, stay, maximize=True, max_work=10**7)
    assert not low_done and not high_done  # stopped by the budget (1,000 steps), and says so
    assert low[0] <= (p - d) / (2 * p) and high[0] >= (p + d) / (2 * p)
