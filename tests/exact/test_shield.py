"""Shields and their certificates against brute force: the shield, the shielded policy's value, the interventions
and the --meet search recomputed in numpy from the generated MDP's own description (tests/exact/randmdp.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlverify.errors import OptionError, PolicyError, PropertyError
from rlverify.exact.shield import ShieldOptions, shield_policy
from rlverify.models import load_model, parse_property
from rlverify.policies import CallablePolicy
from rlverify.policies.shielded import Shield, ShieldedPolicy
from tests.exact.randmdp import ACTIONS, bounded_reach, policy_matrix, random_mdp, reach_probability
from tests.exact.test_shield_action_values import _brute


def _setup(tmp_path: Path, seed: int):
    rng = np.random.default_rng(seed)
    mdp = random_mdp(rng, n=int(rng.integers(5, 10)))
    path = tmp_path / f"r{seed}.prism"
    path.write_text(mdp.prism())
    pi = policy_matrix(rng, mdp.n, temperature=0.7)
    policy = CallablePolicy(lambda s: pi[s[:, 0].astype(int)], ["s"], list(ACTIONS), name=f"softmax {seed}")
    return mdp, load_model(path), policy, pi


def _shielded_pi(mdp, pi, q, opt: str, t: float, decided: np.ndarray, kind: str = "relative"):
    """The shielded distribution per state, the mass removed and the fallback flags, by the definition."""
    avail = mdp.available()
    v = np.where(avail, q, np.inf if opt == "min" else -np.inf)
    best_v = v.min(axis=1) if opt == "min" else v.max(axis=1)
    gap = (q - best_v[:, None]) if opt == "min" else (best_v[:, None] - q)
    best = avail & (gap <= 0)
    with np.errstate(invalid="ignore"):
        keep = {
            "relative": gap <= t,
            "absolute": (q <= t) if opt == "min" else (q >= t),
            "factor": (t * q <= best_v[:, None]) if opt == "min" else (q >= t * best_v[:, None]),
        }[kind]
    kept = avail & (keep | best)
    out = pi.copy()
    removed = np.zeros(mdp.n)
    fallback = np.zeros(mdp.n, dtype=bool)
    for s in range(mdp.n):
        if decided[s]:
            continue
        m = np.where(kept[s], pi[s], 0.0)
        removed[s] = pi[s][~kept[s]].sum()
        if m.sum() > 0:
            out[s] = m / m.sum()
        else:
            out[s] = best[s] / best[s].sum()
            fallback[s] = True
    return out, removed, fallback


def _chain(mdp, pi, absorbing: np.ndarray) -> np.ndarray:
    P = np.zeros((mdp.n, mdp.n))
    for (s, a), dist in mdp.T.items():
        P[s] += pi[s, a] * dist
    P[absorbing] = 0.0
    P[absorbing, np.flatnonzero(absorbing)] = 1.0
    return P


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("opt", ["min", "max"])
def test_shielded_value_and_interventions_match_brute_force(tmp_path: Path, seed: int, opt: str) -> None:
    mdp, model, policy, pi = _setup(tmp_path, seed)
    k = 4
    label = "avoid" if opt == "min" else "goal"
    target = mdp.avoid if opt == "min" else mdp.goal
    text = f'P{"<=" if opt == "min" else ">="}0.5 [F<={k} "{label}"]'
    q = _brute(mdp, target, np.ones(mdp.n, dtype=bool), opt, k)
    gaps = np.unique(np.abs(q[~np.isnan(q)] - 0))  # any threshold will do; take one between the gaps
    t = float(np.median(gaps)) / 3
    r = shield_policy(model, parse_property(model, text, fixed_policy=True), policy, ShieldOptions(threshold=t))
    spi, removed, fallback = _shielded_pi(mdp, pi, q, opt, t, target)
    P = _chain(mdp, spi, target)
    expected = bounded_reach(P, target, k)[0]
    assert r.value == pytest.approx(expected, abs=1e-9)
    assert r.lower <= expected + 1e-12 and expected - 1e-12 <= r.upper
    # unshielded value: the policy as it is (mass on unavailable actions stalls)
    assert r.unshielded == pytest.approx(bounded_reach(_chain(mdp, pi, target), target, k)[0], abs=1e-9)
    assert r.stalled_probability == 0.0
    # expected intervening steps within the bound, on the shielded chain (decided states absorbing, earning nothing)
    ind = ((removed > 1e-15) & ~target).astype(float)
    total = np.zeros(mdp.n)
    for _ in range(k):
        total = ind + P @ total
    assert r.expected_interventions == pytest.approx(total[0], abs=1e-9)
    mass = np.where(target, 0.0, removed)
    total = np.zeros(mdp.n)
    for _ in range(k):
        total = mass + P @ total
    assert r.expected_removed_mass == pytest.approx(total[0], abs=1e-9)
    # reached decision states and fallbacks
    reach = np.zeros(mdp.n, dtype=bool)
    reach[0] = True
    for _ in range(mdp.n):
        reach |= (P[reach] > 0).any(axis=0)
    decision = reach & ~target
    assert r.reachable_states == int(decision.sum())
    assert r.intervened_states == int((decision & (removed > 0)).sum())
    assert r.fallback_states == int((decision & fallback).sum())
    # the optimum at the initial state: Pmin / Pmax of the brute force
    best0 = np.nanmin(q[0]) if opt == "min" else np.nanmax(q[0])
    assert r.optimum == pytest.approx(0.0 if target[0] else best0, abs=1e-9) or target[0]


@pytest.mark.parametrize("seed", [1, 4, 5, 7, 8])  # seeds where the policy is not already optimal
def test_meet_finds_the_loosest_threshold_brute_force_finds(tmp_path: Path, seed: int) -> None:
    mdp, model, policy, pi = _setup(tmp_path, seed)
    target = mdp.avoid
    q = _brute(mdp, target, np.ones(mdp.n, dtype=bool), "min", None)
    opt0 = np.nanmin(q[0])
    unshielded = reach_probability(_chain(mdp, pi, target), target)[0]
    assert unshielded - opt0 >= 1e-3  # room for a shield
    bound = round(float((opt0 + unshielded) / 2), 4)
    prop = parse_property(model, f'P<={bound} [F "avoid"]', fixed_policy=True)
    r = shield_policy(model, prop, policy, ShieldOptions(meet=True))
    avail = mdp.available()
    gap = np.where(avail, q - np.nanmin(np.where(avail, q, np.nan), axis=1)[:, None], np.nan)
    candidates = np.unique(np.r_[0.0, gap[~np.isnan(gap) & ~target[:, None].repeat(3, 1)]])
    brute = [
        reach_probability(_chain(mdp, _shielded_pi(mdp, pi, q, "min", c, target)[0], target), target)[0] for c in candidates
    ]
    meets = [b <= bound for b in brute]
    assert r.satisfied is True and r.value <= bound
    # every candidate is searched (no monotonicity assumed): the threshold is brute force's loosest that meets, up to
    # the tie tolerance (the returned threshold is its tie class's upper end, so at most one tolerance above)
    loosest = max(c for c, m in zip(candidates, meets, strict=True) if m)
    tol = r.settings["tie_tolerance"]
    assert tol < 1e-5
    assert loosest - 1e-12 <= r.threshold <= loosest + 2 * tol + 1e-12
    assert r.settings["search"] == "exhaustive"
    assert r.value == pytest.approx(brute[list(candidates).index(loosest)], abs=1e-9)
    # probed from the loosest down: every probe before the last failed
    assert [p["satisfied"] for p in r.probes] == [False] * (len(r.probes) - 1) + [True]


def test_a_bound_below_the_optimum_is_refused_naming_it(tmp_path: Path) -> None:
    mdp, model, policy, _ = _setup(tmp_path, 3)
    q = _brute(mdp, mdp.avoid, np.ones(mdp.n, dtype=bool), "min", 3)
    opt0 = float(np.nanmin(q[0]))
    assert opt0 > 0.01
    prop = parse_property(model, f'P<={opt0 / 2:.6f} [F<=3 "avoid"]', fixed_policy=True)
    with pytest.raises(PropertyError, match=rf"optimum .* Pmin = {opt0:.6g}"):
        shield_policy(model, prop, policy, ShieldOptions(meet=True))


@pytest.mark.parametrize(
    ("options", "cause"),
    [
        (ShieldOptions(), "needs a threshold"),
        (ShieldOptions(threshold=-0.1), "gap >= 0"),
        (ShieldOptions(kind="absolute", threshold=1.5), r"\[0, 1\]"),
        (ShieldOptions(kind="factor", threshold=0.0), r"\(0, 1\]"),
        (ShieldOptions(kind="nope", threshold=0.1), "not one of"),
        (ShieldOptions(threshold=float("nan")), "finite"),
        (ShieldOptions(meet=True, threshold=0.1), "not both"),
        (ShieldOptions(meet=True, kind="factor"), "relative"),
    ],
)
def test_bad_shield_options_name_the_cause(options: ShieldOptions, cause: str) -> None:
    with pytest.raises(OptionError, match=cause):
        options.validate()


def _toy_shield() -> Shield:
    return Shield(
        variables=("x", "y"),
        valuations=np.array([[0, 0], [1, 0], [0, 1]]),
        actions=("a", "b", "c"),
        kept=np.array([[True, True, False], [False, True, False], [True, False, True]]),
        best=np.array([[True, False, False], [False, True, False], [False, False, True]]),
        model="toy",
        constants="",
        fingerprint="f",
        property="P<=0.1 [F x=2]",
        optimum="min",
        threshold={"kind": "relative", "value": 0.1},
    )


def test_shielded_policy_renormalises_falls_back_and_leaves_uncovered_states_alone() -> None:
    table = {(0, 0): [0.2, 0.3, 0.5], (1, 0): [0.5, 0.0, 0.5], (0, 1): [0.0, 1.0, 0.0], (2, 2): [0.1, 0.1, 0.8]}
    inner = CallablePolicy(
        lambda s: np.array([table[(int(a), int(b))] for a, b in s]), ["x", "y"], ["a", "b", "c"], name="toy"
    )
    sp = ShieldedPolicy(inner, _toy_shield())
    states = np.array([[0, 0], [1, 0], [0, 1], [2, 2]], dtype=float)
    np.testing.assert_allclose(
        sp.action_probabilities(states),
        [[0.4, 0.6, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.1, 0.1, 0.8]],
    )
    rows, removed, fallback = sp.interventions(states)
    assert rows.tolist() == [0, 1, 2, -1]
    np.testing.assert_allclose(removed, [0.5, 1.0, 1.0, 0.0])
    assert fallback.tolist() == [False, True, True, False]


def test_shielded_policy_reads_every_shield_variable_and_refuses_unknown_actions() -> None:
    only_x = CallablePolicy(lambda s: np.full((len(s), 3), 1 / 3), ["x"], ["a", "b", "c"])
    sp = ShieldedPolicy(only_x, _toy_shield())
    assert sp.features == ("x", "y") and sp.actions == ("a", "b", "c")
    with pytest.raises(PolicyError, match=r"\['z'\]"):
        ShieldedPolicy(CallablePolicy(lambda s: np.ones((len(s), 1)), ["x"], ["z"]), _toy_shield())
    with pytest.raises(PolicyError, match=r"\['w'\]"):
        ShieldedPolicy(CallablePolicy(lambda s: np.ones((len(s), 1)), ["w"], ["a"]), _toy_shield())


@pytest.mark.parametrize("seed", [1, 4, 5])
def test_deterministic_mode_interventions_count_removed_argmax_actions(tmp_path: Path, seed: int) -> None:
    from rlverify.exact import ExactOptions

    mdp, model, policy, pi = _setup(tmp_path, seed)
    k, target = 5, mdp.avoid
    q = _brute(mdp, target, np.ones(mdp.n, dtype=bool), "min", k)
    avail = mdp.available()
    t = float(np.nanmedian(q - np.nanmin(np.where(avail, q, np.nan), axis=1)[:, None]))
    r = shield_policy(
        model,
        parse_property(model, f'P<=0.5 [F<={k} "avoid"]', fixed_policy=True),
        policy,
        ShieldOptions(threshold=t),
        ExactOptions(mode="deterministic"),
    )
    spi, _, _ = _shielded_pi(mdp, pi, q, "min", t, target)
    det = np.zeros_like(spi)
    det[np.arange(mdp.n), np.argmax(spi, axis=1)] = 1.0  # the argmax of the shielded distribution, first on ties
    P = _chain(mdp, det, target)
    assert r.value == pytest.approx(bounded_reach(P, target, k)[0], abs=1e-9)
    best_v = np.nanmin(np.where(avail, q, np.nan), axis=1)
    gap = q - best_v[:, None]
    kept = avail & ((gap <= t) | (gap <= 0))
    removed = ~kept[np.arange(mdp.n), np.argmax(pi, axis=1)] & ~target  # the policy's own argmax is not kept
    total = np.zeros(mdp.n)
    for _ in range(k):
        total = removed.astype(float) + P @ total
    assert r.expected_interventions == pytest.approx(total[0], abs=1e-9)
    assert r.expected_removed_mass == pytest.approx(total[0], abs=1e-9)


@pytest.mark.parametrize("seed", [4, 7])
@pytest.mark.parametrize(
    ("kind", "t", "opt"),
    [("absolute", 0.31, "min"), ("absolute", 0.61, "max"), ("factor", 0.53, "min"), ("factor", 0.83, "max")],
)
def test_absolute_and_factor_thresholds_match_brute_force(tmp_path: Path, seed: int, kind: str, t: float, opt: str) -> None:
    mdp, model, policy, pi = _setup(tmp_path, seed)
    k = 4
    label, target = ("avoid", mdp.avoid) if opt == "min" else ("goal", mdp.goal)
    text = f'P{"<=" if opt == "min" else ">="}0.5 [F<={k} "{label}"]'
    q = _brute(mdp, target, np.ones(mdp.n, dtype=bool), opt, k)
    r = shield_policy(model, parse_property(model, text, fixed_policy=True), policy, ShieldOptions(kind=kind, threshold=t))
    spi, removed, _ = _shielded_pi(mdp, pi, q, opt, t, target, kind)
    P = _chain(mdp, spi, target)
    assert r.value == pytest.approx(bounded_reach(P, target, k)[0], abs=1e-9)
    total = np.zeros(mdp.n)
    for _ in range(k):
        total = np.where(target, 0.0, removed) + P @ total
    assert r.expected_removed_mass == pytest.approx(total[0], abs=1e-9)
