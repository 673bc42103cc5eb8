"""Issue 44's trap case, built here: a 26-state model where the shielded value as a function of the threshold rises,
falls and rises again (so a bisection assuming monotonicity returns the tightest shield), against values worked out
by hand; --meet returns the loosest that meets the bound; the least-intrusive correction intrudes at most as much.

The model: a corridor of 22 states leads to the decision state A with actions ``safe`` (bad 0.1, else goal),
``risky`` (bad 0.3) and ``trap`` (to the trap T); in T, ``fine`` reaches the goal and ``oops`` goes bad with 0.05
and stays with 0.95. Pmin: Q(A) = safe 0.1, risky 0.3, trap 0; Q(T) = fine 0, oops 0.05. The network: at A safe 0.4,
trap 0.2, risky 0.4; at T oops 0.9, fine 0.1, so from T it goes bad with 0.045 / 0.145 = 9/29. By threshold t:
  t >= 0.3: 0.4 x 0.1 + 0.2 x 9/29 + 0.4 x 0.3            = 0.222069  (nothing removed)
  0.1 <= t < 0.3: risky removed: 2/3 x 0.1 + 1/3 x 9/29    = 0.170115  (1 state intervened)
  0.05 <= t < 0.1: safe and risky removed: 9/29            = 0.310345
  t < 0.05: oops removed too: 0                             (2 states)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlverify.exact.shield import ShieldOptions, least_intrusive_policy, shield_policy
from rlverify.models import load_model, parse_property
from rlverify.policies import CallablePolicy

ACTIONS = ["go", "safe", "risky", "trap", "fine", "oops"]
A, T, GOAL, BAD = 22, 23, 24, 25


def _model(tmp_path: Path) -> Path:
    lines = ["mdp", "module m", "  s : [0..25] init 0;"]
    lines += [f"  [go] s={i} -> (s'={i + 1});" for i in range(A)]
    lines += [
        f"  [safe] s={A} -> 0.1 : (s'={BAD}) + 0.9 : (s'={GOAL});",
        f"  [risky] s={A} -> 0.3 : (s'={BAD}) + 0.7 : (s'={GOAL});",
        f"  [trap] s={A} -> (s'={T});",
        f"  [fine] s={T} -> (s'={GOAL});",
        f"  [oops] s={T} -> 0.05 : (s'={BAD}) + 0.95 : (s'={T});",
        f"  [go] s={GOAL} -> (s'={GOAL});",
        f"  [go] s={BAD} -> (s'={BAD});",
        "endmodule",
        f'label "bad" = s={BAD};',
    ]
    path = tmp_path / "trap.prism"
    path.write_text("\n".join(lines) + "\n")
    return path


def _table() -> np.ndarray:
    pi = np.zeros((26, len(ACTIONS)))
    pi[:, 0] = 1.0
    pi[A] = [0, 0.4, 0.4, 0.2, 0, 0]
    pi[T] = [0, 0, 0, 0, 0.1, 0.9]
    return pi


def _policy() -> CallablePolicy:
    pi = _table()
    return CallablePolicy(lambda s: pi[s[:, 0].astype(int)], ["s"], ACTIONS, name="trap table")


BY_HAND = {0.0: 0.0, 0.05: 9 / 29, 0.1: 2 / 3 * 0.1 + 9 / 87, 0.3: 0.04 + 0.2 * 9 / 29 + 0.12}


def test_the_shielded_value_by_threshold_is_not_monotone_and_meet_returns_the_loosest(tmp_path: Path) -> None:
    model = load_model(_model(tmp_path))
    policy = _policy()
    for t, expected in BY_HAND.items():  # the hand values, one threshold inside each tie class's range
        prop = parse_property(model, 'P<=0.2 [F "bad"]', fixed_policy=True)
        r = shield_policy(model, prop, policy, ShieldOptions(threshold=t + 1e-3 if t else 0.0))
        assert r.value == pytest.approx(expected, abs=1e-9), t
    prop = parse_property(model, 'P<=0.2 [F "bad"]', fixed_policy=True)
    r = shield_policy(model, prop, policy, ShieldOptions(meet=True))
    assert r.satisfied is True and r.value == pytest.approx(BY_HAND[0.1], abs=1e-9)
    assert 0.1 <= r.threshold < 0.3 and r.intervened_states <= 2 and r.intervened_states == 1
    assert r.settings["search"] == "exhaustive"
    # the loosest (0.3) was probed and failed, then 0.1 met: a bisection would have probed 0.05 (0.31) and returned 0
    assert [p["satisfied"] for p in r.probes] == [False, True]


def test_least_intrusive_intrudes_no_more_than_the_loosest_shield(tmp_path: Path) -> None:
    model = load_model(_model(tmp_path))
    policy = _policy()
    prop = parse_property(model, 'P<=0.2 [F<=40 "bad"]', fixed_policy=True)
    shield = shield_policy(model, prop, policy, ShieldOptions(meet=True))
    c = least_intrusive_policy(model, prop, policy)
    assert c.satisfied is True and c.upper <= 0.2
    assert c.measure_value == pytest.approx(c.lp_optimum, abs=1e-7)
    # a shield is one correction among all: the least intrusion is at most the shield's expected removed mass
    assert shield.satisfied is True and c.lp_optimum <= shield.expected_removed_mass + 1e-9
    assert c.lp_optimum < shield.expected_removed_mass - 1e-3  # randomising at A beats removing `risky` outright


def test_least_intrusive_refuses_unbounded_properties(tmp_path: Path) -> None:
    from rlverify.errors import PropertyError

    model = load_model(_model(tmp_path))
    prop = parse_property(model, 'P<=0.2 [F "bad"]', fixed_policy=True)
    with pytest.raises(PropertyError, match="step-bounded"):
        least_intrusive_policy(model, prop, _policy())


def test_cli_least_intrusive_and_its_refusals(capsys) -> None:
    import contextlib
    import json

    from rlverify.cli.main import main

    prop = 'P>=0.9 [F<=3 "goal"]'
    code = main(["shield", "running-example-v1", "-p", prop, "--meet", "least-intrusive", "--json"])
    r = json.loads(capsys.readouterr().out)["result"]
    assert code == 0 and r["satisfied"] is True and r["lower"] >= 0.9 - 1e-12
    assert r["measure"].startswith("expected probability mass moved") and r["measure_value"] == pytest.approx(
        r["lp_optimum"], abs=1e-7
    )
    for args, cause in (
        (["-p", 'P>=0.9 [F "goal"]', "--meet", "least-intrusive"], "step-bounded"),
        (["-p", prop, "--meet", "--max-probes", "0"], "--max-probes"),
        (["-p", prop, "--meet", "least-intrusive", "--out", "x.json"], "not a shield file"),
        (["-p", prop, "--meet", "cheapest"], "invalid choice"),
    ):
        with pytest.raises(SystemExit) if "cheapest" in args else contextlib.nullcontext():
            code = main(["shield", "running-example-v1", *args])
        err = capsys.readouterr().err.strip().splitlines()
        if "cheapest" not in args:
            assert code == 2 and len(err) == 1 and cause in err[0], err
