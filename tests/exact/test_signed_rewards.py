"""Rewards with negative entries: Storm's solvers assume rewards >= 0 and answer wrongly otherwise
(measured: -7.87 instead of -14 below with the sound solver, 0.0 with the direct one); rlverify
checks the positive and the negative part separately. Expected values: a numpy linear solve."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.errors import PropertyError
from rlverify.policies import CallablePolicy

# from x<3: forward with 1/2, back to 0 with 1/2; reward per step 2 at x=0 and -1 elsewhere
MODEL = """mdp
module m
  x : [0..3] init 0;
  [go] x<3 -> 0.5 : (x'=x+1) + 0.5 : (x'=0);
  [stay] x<3 -> (x'=x);
endmodule
rewards "r"
  [go] x=0 : 2;
  [go] x>0 : -1;
endrewards
label "goal" = x=3;
"""
GO = CallablePolicy(lambda s: np.tile([1.0, 0.0], (len(s), 1)), ["x"], ["go", "stay"])


def expected_total() -> float:
    # E[x] = r(x) + 0.5 E[x+1] + 0.5 E[0], E[3] = 0
    A = np.array([[1 - 0.5, -0.5, 0], [-0.5, 1, -0.5], [-0.5, 0, 1]])
    return float(np.linalg.solve(A, np.array([2.0, -1.0, -1.0]))[0])


@pytest.mark.parametrize("numerics", ["sound", "direct", "fast"])
def test_signed_rewards_to_a_target_are_exact(tmp_path, numerics):
    path = tmp_path / "signed.prism"
    path.write_text(MODEL)
    r = verify_exact(path, 'R{"r"}=? [F "goal"]', GO, ExactOptions(numerics=numerics))
    assert expected_total() == pytest.approx(10.0)  # expected visits 8 (x=0), 4 (x=1), 2 (x=2): 16 - 6
    assert r.value == pytest.approx(expected_total(), abs=1e-4)
    assert any("negative rewards" in w for w in r.warnings)
    only_negative = MODEL.replace("x=0 : 2", "x=0 : -1")
    path.write_text(only_negative)
    r = verify_exact(path, 'R{"r"}=? [F "goal"]', GO, ExactOptions(numerics=numerics))
    assert r.value == pytest.approx(-14.0, rel=1e-4)  # minus the expected number of steps (14, by hand)


def test_step_bounded_signed_rewards_and_the_monolithic_refusal(tmp_path):
    path = tmp_path / "signed.prism"
    path.write_text(MODEL)
    # C<=2 under GO: step 1 at x=0 pays 2; step 2 at x=1 (1/2, pays -1) or x=0 (1/2, pays 2)
    assert verify_exact(path, 'R{"r"}=? [C<=2]', GO).value == pytest.approx(2 + 0.5 * -1 + 0.5 * 2)
    with pytest.raises(PropertyError, match="negative rewards; Storm's Rmin/Rmax"):
        verify_exact(path, 'Rmax=? [F "goal"]', None, ExactOptions(mode="monolithic"))
    # Rmax over C<=2: go at x=0 twice (2 + E) vs stay: stay pays nothing; best = 2 + 0.5*2 + 0.5*max(-1, 0)
    r = verify_exact(path, "Rmax=? [C<=2]", None, ExactOptions(mode="monolithic"))
    assert r.pmax == pytest.approx(2 + 0.5 * 2 + 0.5 * 0)


def test_a_step_bounded_reachability_reward_is_refused_with_the_form_to_use(tmp_path):
    path = tmp_path / "signed.prism"
    path.write_text(MODEL)
    for pol, options in ((GO, ExactOptions()), (None, ExactOptions(mode="monolithic"))):
        with pytest.raises(PropertyError, match=r"use the cumulative reward R=\? \[C<=k\]"):
            verify_exact(path, 'R{"r"}=? [F<=3 "goal"]' if pol else 'Rmax=? [F<=3 "goal"]', pol, options)
