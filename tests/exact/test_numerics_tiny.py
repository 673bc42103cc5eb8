"""Tiny probabilities and slowly mixing chains: every ``--numerics`` setting answers within seconds, and
what it claims (a certified bracket, a relative error, or only an absolute bound) is checked against an
exact rational computation (``fractions.Fraction`` elimination on the same float-valued chain)."""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.models import load_model
from rlverify.policies import CallablePolicy

UNIFORM = CallablePolicy(lambda s: np.ones((len(s), 1)), ["x"], ["go"])
#: the model's float entries are the model; Fraction(float) makes the rational computation use exactly them,
#: but the induced chain multiplies by pi in float: allow this much relative slack when comparing brackets
SLACK = 1e-12


def _write(
    tmp_path: Path,
    name: str,
    rows: dict[int, dict[int, float]],
    n: int,
    init: int,
    actions: tuple[str, ...] = ("go",),
    rewards: bool = False,
) -> Path:
    """An MDP with one command per state and action (rows[a_index][s] = {s': p} when actions > 1)."""
    lines = ["mdp", "module c", f"  x : [0..{n - 1}] init {init};"]
    per_action = rows if len(actions) > 1 else {0: rows}
    for ai, act in enumerate(actions):
        for s in range(n):
            succ = per_action[ai].get(s) if len(actions) > 1 else rows.get(s)
            if not succ:
                if ai == 0:
                    lines.append(f"  [{act}] x={s} -> true;")
                continue
            upd = " + ".join(f"{p!r} : (x'={t})" for t, p in succ.items())
            lines.append(f"  [{act}] x={s} -> {upd};")
    lines.append("endmodule")
    if rewards:
        lines += ['rewards "steps"', "  true : 1;", "endrewards"]
    path = tmp_path / f"{name}.prism"
    path.write_text("\n".join(lines) + "\n")
    return path


def _exact_reach(rows: dict[int, dict[int, float]], n: int, target: set[int], init: int) -> Fraction:
    """P(F target) from ``init`` by Gaussian elimination in rationals on the states that can reach the target."""
    can = set(target)
    changed = True
    while changed:
        changed = False
        for s, succ in rows.items():
            if s not in can and any(t in can and p > 0 for t, p in succ.items()):
                can.add(s)
                changed = True
    if init not in can:
        return Fraction(0)
    unknown = sorted(can - set(target))
    index = {s: i for i, s in enumerate(unknown)}
    # (I - A) x = b, sparse rows as dicts; elimination in order (banded chains keep their band)
    eq: list[dict[int, Fraction]] = []
    rhs: list[Fraction] = []
    for s in unknown:
        row: dict[int, Fraction] = {index[s]: Fraction(1)}
        b = Fraction(0)
        for t, p in rows.get(s, {}).items():
            if t in target:
                b += Fraction(p)
            elif t in index:
                row[index[t]] = row.get(index[t], Fraction(0)) - Fraction(p)
        eq.append(row)
        rhs.append(b)
    m = len(unknown)
    for i in range(m):
        piv = eq[i][i]
        for j in range(i + 1, m):
            f = eq[j].get(i)
            if not f:
                continue
            f = f / piv
            for c, v in eq[i].items():
                eq[j][c] = eq[j].get(c, Fraction(0)) - f * v
            rhs[j] -= f * rhs[i]
            del eq[j][i]
    x = [Fraction(0)] * m
    for i in reversed(range(m)):
        acc = rhs[i] - sum(v * x[c] for c, v in eq[i].items() if c > i)
        x[i] = acc / eq[i][i]
    return x[index[init]] if init in index else Fraction(1)


def _geometric(length: int, forward: float, back: float) -> tuple[dict[int, dict[int, float]], int]:
    """x=0..length-1 move forward w.p. ``forward``, back to 0 w.p. ``back``, else fail (x=length+1); goal x=length."""
    fail = length + 1
    rows = {s: {s + 1: forward, 0: back, fail: 1.0 - forward - back} for s in range(length)}
    return rows, length + 2


def _drift(n: int, up: float, down: float) -> dict[int, dict[int, float]]:
    """A birth-death chain 0..n-1 drifting away from the goal n-1 (0 absorbing), mostly staying put."""
    stay = 1.0 - up - down
    return {s: {s + 1: up, s - 1: down, s: stay} for s in range(1, n - 1)}


def _check_claims(result, exact: Fraction, precision: float = 1e-6) -> None:
    """Whatever the result claims is true of ``exact``; tiny values never come with lower 0 / upper 1."""
    assert not (result.lower == 0 and result.upper == 1)
    if result.lower is not None:  # a bracket is claimed: it holds (up to the float-vs-rational model slack)
        assert Fraction(result.lower) * (1 - Fraction(SLACK)) <= exact <= Fraction(result.upper) * (1 + Fraction(SLACK))
    if result.guarantee == "sound" and result.lower and result.lower > 0 and not result.warnings:
        assert (
            abs(Fraction(result.value) - exact)
            <= Fraction(precision) * exact * (1 + Fraction(SLACK)) + Fraction(SLACK) * exact
        )
    if result.value < 1e-10 and result.lower in (None, 0.0):  # no relative error: said plainly
        assert any("relative error" in w or "absolute" in w for w in result.warnings)


@pytest.mark.parametrize("length, forward, back", [(12, 0.1, 0.3), (20, 0.1, 0.5), (30, 0.1, 0.2), (25, 0.06, 0.9)])
@pytest.mark.parametrize("numerics", ["sound", "direct", "fast"])
def test_tiny_reachability_every_setting(tmp_path: Path, length: int, forward: float, back: float, numerics: str) -> None:
    rows, n = _geometric(length, forward, back)
    exact = _exact_reach(rows, n, {length}, 0)
    assert Fraction(1, 10**40) < exact < Fraction(1, 10**11)
    model = load_model(_write(tmp_path, "geo", rows, n, 0))
    t = time.perf_counter()
    result = verify_exact(model, f"P=? [F x={length}]", UNIFORM, ExactOptions(numerics=numerics))
    assert time.perf_counter() - t < 20
    _check_claims(result, exact)
    assert result.method and result.precision_note
    if numerics == "sound":  # a certified bracket within the requested precision (1e-6 relative)
        assert result.lower > 0
        assert (Fraction(result.upper) - Fraction(result.lower)) <= Fraction(2, 10**6) * exact
    elif numerics == "direct":  # the sparse LU value; a bracket when its certificate holds, else a plain warning
        assert abs(Fraction(result.value) - exact) <= Fraction(1, 10**9) * exact
        assert result.lower is not None or any("absolute" in w for w in result.warnings)
    else:
        assert (result.lower, result.upper) == (None, None)
        assert any("below 1e-10" in w for w in result.warnings)


@pytest.mark.parametrize("numerics", ["sound", "direct"])
def test_slowly_mixing_drift_away_from_target(tmp_path: Path, numerics: str) -> None:
    n = 80
    rows = _drift(n, 0.04, 0.06)
    exact = _exact_reach(rows, n, {n - 1}, 1)
    assert exact < Fraction(1, 10**12)
    model = load_model(_write(tmp_path, "drift", rows, n, 1))
    t = time.perf_counter()
    result = verify_exact(model, f"P=? [F x={n - 1}]", UNIFORM, ExactOptions(numerics=numerics))
    assert time.perf_counter() - t < 20
    _check_claims(result, exact)
    assert result.lower is not None and result.lower > 0
    assert abs(Fraction(result.value) - exact) <= Fraction(1, 10**6) * exact


@pytest.mark.parametrize("numerics", ["sound", "direct"])
def test_very_tiny_slow_chain_answers_and_claims_only_what_holds(tmp_path: Path, numerics: str) -> None:
    """~1.4e-53 behind 400 slowly drifting states: the LU value is not relatively accurate here (known
    limitation); the result must still answer in seconds, and its bracket (if any) must hold, with a warning."""
    n = 400
    rows = _drift(n, 0.0049, 0.0051 * 1.3)
    exact = _exact_reach(rows, n, {n - 1}, 1)
    model = load_model(_write(tmp_path, "drift400", rows, n, 1))
    t = time.perf_counter()
    result = verify_exact(model, f"P=? [F x={n - 1}]", UNIFORM, ExactOptions(numerics=numerics))
    assert time.perf_counter() - t < 30
    _check_claims(result, exact)
    if result.lower is None or result.upper > 2 * result.lower:
        assert result.warnings


def test_slowly_mixing_moderate_value_sound_is_tight(tmp_path: Path) -> None:
    """Target near the start, far side absorbing: a value ~0.02 behind ~100,000 expected steps."""
    n, goal = 600, 30
    rows = _drift(n, 0.0049, 0.0051)
    exact = _exact_reach(rows, n, {goal}, 1)
    model = load_model(_write(tmp_path, "near", rows, n, 1))
    result = verify_exact(model, f"P=? [F x={goal}]", UNIFORM)
    _check_claims(result, exact)
    assert result.guarantee == "sound" and result.lower > 0
    assert abs(Fraction(result.value) - exact) <= Fraction(1, 10**6) * exact


def test_value_below_the_float_range_gets_an_absolute_bound(tmp_path: Path) -> None:
    """~1e-400 is not a float: the sound setting answers at once with 'only an absolute bound'."""
    length = 400
    rows, n = _geometric(length, 0.1, 0.0)
    model = load_model(_write(tmp_path, "under", rows, n, 0))
    t = time.perf_counter()
    result = verify_exact(model, f"P=? [F x={length}]", UNIFORM)
    assert time.perf_counter() - t < 20
    assert result.lower == 0.0 and result.upper is not None and result.upper < 1e-250
    assert any("absolute" in w for w in result.warnings)


@pytest.mark.parametrize("numerics", ["sound", "direct", "fast"])
def test_step_bounded_tiny_values_stay_exact(tmp_path: Path, numerics: str) -> None:
    length, k = 20, 60
    rows, n = _geometric(length, 0.1, 0.5)
    # exact k-step probability in rationals (goal absorbing)
    dist = {0: Fraction(1)}
    hit = Fraction(0)
    for _ in range(k):
        nxt: dict[int, Fraction] = {}
        for s, p in dist.items():
            for t, q in rows.get(s, {}).items():
                if t == length:
                    hit += p * Fraction(q)
                elif t in rows:
                    nxt[t] = nxt.get(t, Fraction(0)) + p * Fraction(q)
        dist = nxt
    model = load_model(_write(tmp_path, "bounded", rows, n, 0))
    result = verify_exact(model, f"P=? [F<={k} x={length}]", UNIFORM, ExactOptions(numerics=numerics))
    assert 0 < hit < Fraction(1, 10**15)
    assert abs(Fraction(result.value) - hit) <= Fraction(1, 10**12) * hit
    assert "step-bounded" in (result.precision_note or "")
    assert not (result.lower == 0 and result.upper == 1)


def test_rewards_still_checked_by_storm(tmp_path: Path) -> None:
    """R=? [F ...] (expected steps of a small drift chain) and C<=k keep working in every setting."""
    n = 12
    rows = _drift(n, 0.3, 0.2)
    model = load_model(_write(tmp_path, "rew", rows, n, 5, rewards=True))
    # expected steps to absorption in {0, n-1} by Fraction elimination: t_s = 1 + sum p t_s'
    unknown = list(range(1, n - 1))
    idx = {s: i for i, s in enumerate(unknown)}
    import sympy

    mat = sympy.zeros(len(unknown), len(unknown))
    vec = sympy.ones(len(unknown), 1)
    for s in unknown:
        mat[idx[s], idx[s]] += 1
        for t, p in rows[s].items():
            if t in idx:
                mat[idx[s], idx[t]] -= sympy.Rational(Fraction(p).numerator, Fraction(p).denominator)
    steps = mat.LUsolve(vec)[idx[5]]
    for numerics in ("sound", "direct", "fast"):
        result = verify_exact(model, f'R{{"steps"}}=? [F x=0 | x={n - 1}]', UNIFORM, ExactOptions(numerics=numerics))
        # fast: plain value iteration stops on a heuristic (measured 2e-5 relative here)
        assert result.value == pytest.approx(float(steps), rel=1e-6 if numerics != "fast" else 1e-3)
        if result.lower is not None:
            assert result.lower <= float(steps) * (1 + 1e-12) and float(steps) <= result.upper * (1 + 1e-12)
        bounded = verify_exact(model, 'R{"steps"}=? [C<=7]', UNIFORM, ExactOptions(numerics=numerics))
        assert bounded.value == pytest.approx(7.0, rel=1e-12)  # never absorbed within 7 steps from x=5


def test_random_softmax_policy_on_a_trap_corridor(tmp_path: Path) -> None:
    """A resource-gathering-like case: a seeded random softmax table policy on a corridor whose forward
    action risks a trap; P(F goal) is tiny. Compared with rational elimination on the induced chain."""
    length = 30
    trap, goal = length + 1, length
    n = length + 2
    right = {s: {s + 1: 0.35, trap: 0.25, s: 0.4} for s in range(length)}
    left = {s: {max(s - 1, 0): 0.9, trap: 0.1} for s in range(length)}
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(n, 2))
    table = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    policy = CallablePolicy(lambda s: table[np.asarray(s)[:, 0].astype(int)], ["x"], ["left", "right"])
    model = load_model(_write(tmp_path, "corridor", {0: left, 1: right}, n, 0, actions=("left", "right")))
    induced = {}
    for s in range(length):
        row: dict[int, float] = {}
        for a, succ in ((0, left[s]), (1, right[s])):
            for t, p in succ.items():
                row[t] = row.get(t, 0.0) + float(table[s, a]) * p
        induced[s] = row
    exact = _exact_reach(induced, n, {goal}, 0)
    assert exact < Fraction(1, 10**10)
    for numerics in ("sound", "direct", "fast"):
        t = time.perf_counter()
        result = verify_exact(model, f"P=? [F x={goal}]", policy, ExactOptions(numerics=numerics))
        assert time.perf_counter() - t < 20
        # the induced chain's entries are sums of float products: compare with a loose relative slack
        assert not (result.lower == 0 and result.upper == 1)
        if numerics != "fast":
            assert abs(Fraction(result.value) - exact) <= Fraction(1, 10**9) * exact
            assert Fraction(result.lower) <= exact * (1 + Fraction(1, 10**12))
            assert exact <= Fraction(result.upper) * (1 + Fraction(1, 10**12))
        else:
            assert any("below 1e-10" in w for w in result.warnings) or result.value >= 1e-10
