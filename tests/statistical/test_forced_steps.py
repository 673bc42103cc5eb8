"""The simulator never calls the policy with zero rows: when every live run is in a forced state (a lone unlabelled
command, e.g. the reset step of a Gymnasium model that draws the start), the forced choices are taken without asking
the policy (issue 21: ``simulate gym:Taxi-v4`` crashed in the policy on an empty batch)."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.policies import CallablePolicy
from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

# s0 is a reset step (unlabelled, forced): s1 or s2 with 1/2 each. Always a: s1 -> goal, s2 loops on itself.
RESET_MODEL = """mdp
module m
  s : [0..3] init 0;
  [] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
  [a] s=1 -> (s'=3);
  [b] s=1 -> (s'=1);
  [a] s=2 -> (s'=2);
  [b] s=2 -> (s'=3);
  [a] s=3 -> (s'=3);
endmodule
label "goal" = s=3;
"""

CALLS: list[int] = []


def always_a(x: np.ndarray) -> np.ndarray:
    CALLS.append(len(x))
    if len(x) == 0:
        raise AssertionError("the policy was called with an empty batch")
    return np.tile([1.0, 0.0], (len(x), 1))


@pytest.fixture(scope="module")
def reset_model(tmp_path_factory):
    from rlverify.models import load_model

    path = tmp_path_factory.mktemp("reset") / "reset.prism"
    path.write_text(RESET_MODEL)
    return load_model(path)


def test_reset_step_is_taken_without_the_policy(reset_model):
    CALLS.clear()
    policy = CallablePolicy(always_a, ["s"], ["a", "b"], name="always a")
    r = verify_statistical(
        reset_model,
        'P=? [F "goal"]',
        policy,
        StatisticalOptions(method="clopper-pearson", runs=2000, delta=0.001, simulation=SimulationOptions(batch_size=500)),
    )
    assert r.interval[0] <= 0.5 <= r.interval[1] and r.undecided == 0 and r.stalled == 0
    assert CALLS and min(CALLS) > 0
    # the reset step is one step; in s1 the policy's step reaches the goal (2 steps), in s2 its action surely loops
    # back (decided at once after 1 step)
    assert r.decisions == r.runs + r.successes


@pytest.mark.parametrize("method", ["splitting", "restart"])
def test_splitting_takes_the_reset_step_without_the_policy(reset_model, method):
    from rlverify.statistical.splitting import SplittingOptions, verify_splitting

    CALLS.clear()
    policy = CallablePolicy(always_a, ["s"], ["a", "b"], name="always a")
    r = verify_splitting(reset_model, 'P=? [F "goal"]', policy, SplittingOptions(effort=200, repetitions=5, method=method))
    assert CALLS and min(CALLS) > 0
    assert r.interval[0] <= 0.5 <= r.interval[1]


@pytest.mark.slow
def test_taxi_simulates_and_covers_the_exact_value():
    """Taxi-v4's model begins with a reset step that draws the start: the simulator takes it, then asks the policy."""
    import gymnasium as gym

    from rlverify import verify_exact
    from rlverify.models import from_gymnasium

    model = from_gymnasium(gym.make("Taxi-v4"))

    def pi(x: np.ndarray) -> np.ndarray:
        if len(x) == 0:
            raise AssertionError("the policy was called with an empty batch")
        return np.tile([0.3, 0.3, 0.1, 0.1, 0.1, 0.1], (len(x), 1))

    policy = CallablePolicy(pi, ["s"], ["south", "north", "east", "west", "pickup", "dropoff"])
    exact = verify_exact(model, 'P=? [F<=200 "delivered"]', policy).value
    r = verify_statistical(
        model, 'P=? [F<=200 "delivered"]', policy, StatisticalOptions(method="clopper-pearson", runs=3000, delta=0.001)
    )
    assert r.interval[0] <= exact <= r.interval[1] and r.undecided == 0
