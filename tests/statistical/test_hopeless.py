"""Runs that reach a state from which no policy can satisfy the property are decided false at once (graph analysis
of the explicit model), instead of wandering undecided until ``max_steps`` (issue 21)."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.policies import CallablePolicy
from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

# s0 -a-> goal (0.3) or the trap cycle s1 <-> s2 (0.7); in the trap both actions stay in it: no policy ever
# reaches the goal from s1 or s2, but no single state loops back to itself either. "bad" (s4) is reached from s0
# by b: it violates !"bad" and, from there, only the goal is reachable.
TRAP_MODEL = """mdp
module m
  s : [0..4] init 0;
  [a] s=0 -> 0.3:(s'=3) + 0.7:(s'=1);
  [b] s=0 -> (s'=4);
  [a] s=1 -> (s'=2);
  [b] s=1 -> 0.5:(s'=1) + 0.5:(s'=2);
  [a] s=2 -> (s'=1);
  [b] s=2 -> (s'=2);
  [a] s=3 -> (s'=3);
  [a] s=4 -> (s'=3);
  [b] s=4 -> (s'=3);
endmodule
label "goal" = s=3;
label "bad" = s=4;
"""


@pytest.fixture(scope="module")
def trap(tmp_path_factory):
    from rlverify.models import load_model

    path = tmp_path_factory.mktemp("trap") / "trap.prism"
    path.write_text(TRAP_MODEL)
    return load_model(path)


def _policy(p_a: float) -> CallablePolicy:
    return CallablePolicy(lambda x: np.tile([p_a, 1.0 - p_a], (len(x), 1)), ["s"], ["a", "b"], name="fixed")


@pytest.mark.parametrize(
    "prop", ['P=? [F "goal"]', 'P=? [F<=1000 "goal"]', 'P=? [!"bad" U "goal"]', 'P=? [!"bad" U<=1000 "goal"]']
)
def test_trapped_runs_are_decided_false_at_once(trap, prop):
    # always a: P(F goal) = 0.3 exactly; the 70% of runs in the trap cycle are decided by graph analysis
    r = verify_statistical(
        trap,
        prop,
        _policy(1.0),
        StatisticalOptions(method="clopper-pearson", runs=4000, delta=0.001, simulation=SimulationOptions(max_steps=50)),
    )
    assert r.undecided == 0
    assert r.interval[0] <= 0.3 <= r.interval[1]
    assert r.interval[1] - r.interval[0] < 0.06  # not [0.3, 1]: the trapped runs are known to fail
    assert r.hopeless == r.runs - r.successes
    assert r.decisions == r.runs  # one step each: into the goal or into the trap (decided there)


def test_until_counts_the_states_that_violate_the_left_side(trap):
    # a with 1/2, b with 1/2 at s0: goal with 0.5 * 0.3 = 0.15 directly; b leads to "bad", which violates
    # !"bad" (decided false by the left side, not counted as hopeless) although the goal is reachable from it
    r = verify_statistical(
        trap,
        'P=? [!"bad" U "goal"]',
        _policy(0.5),
        StatisticalOptions(method="clopper-pearson", runs=4000, delta=0.001, simulation=SimulationOptions(max_steps=50)),
    )
    assert r.undecided == 0 and r.interval[0] <= 0.15 <= r.interval[1]
    f = verify_statistical(
        trap,
        'P=? [F "goal"]',
        _policy(0.5),
        StatisticalOptions(method="clopper-pearson", runs=4000, delta=0.001, simulation=SimulationOptions(max_steps=50)),
    )
    assert f.undecided == 0 and f.interval[0] <= 0.65 <= f.interval[1]  # 0.15 + 0.5 (through "bad")
    assert 0 < r.hopeless < r.runs - r.successes  # the runs into "bad" are violated by the left side instead
    assert f.hopeless == f.runs - f.successes


@pytest.mark.parametrize("method", ["okamoto", "adaptive", "wilson"])
def test_every_method_counts_hopeless_runs(trap, method):
    r = verify_statistical(
        trap,
        'P=? [F "goal"]',
        _policy(1.0),
        StatisticalOptions(
            method=method, epsilon=0.05, runs=1000 if method == "wilson" else None, simulation=SimulationOptions(max_steps=50)
        ),
    )
    assert r.undecided == 0 and r.hopeless == r.runs - r.successes
    assert r.interval[0] <= 0.3 <= r.interval[1] and r.interval[1] - r.interval[0] < 0.15


def test_sprt_decides_with_hopeless_runs(trap):
    r = verify_statistical(
        trap,
        'P>=0.5 [F "goal"]',
        _policy(1.0),
        StatisticalOptions(method="sprt", threshold=None, indifference=0.05, simulation=SimulationOptions(max_steps=50)),
    )
    assert r.decision == "H1" and r.satisfied is False and r.undecided == 0


@pytest.mark.parametrize("method", ["splitting", "restart"])
def test_importance_splitting_decides_trapped_runs(trap, method):
    from rlverify.statistical.splitting import SplittingOptions, verify_splitting

    r = verify_splitting(
        trap,
        'P=? [F "goal"]',
        _policy(1.0),
        SplittingOptions(effort=400, repetitions=10, method=method, simulation=SimulationOptions(max_steps=50)),
    )
    assert r.undecided == 0 and r.hopeless > 0
    assert r.interval[0] <= 0.3 <= r.interval[1]
