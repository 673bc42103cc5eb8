"""Policy semantics at the edges: float32 rounding, models rounded by their authors, actions the policy lacks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks import make
from rlverify.models import load_model
from rlverify.policies import CallablePolicy

ROUNDED = """mdp
module m
  x : [0..3] init 0;
  [go] x<3 -> 0.3333333 : (x'=x+1) + 0.3333333 : (x'=x) + 0.3333333 : (x'=0);
  [go] x=3 -> true;
endmodule
label "top" = x=3;
"""

ONLY_UNKNOWN = """mdp
module m
  x : [0..3] init 0;
  [up]   x<3 & x!=1 -> 0.5 : (x'=x+1) + 0.5 : (x'=x);
  [stay] x=1 -> (x'=2);
  [stay] x=3 -> true;
endmodule
label "top" = x=3;
"""


def test_float32_probabilities_within_tolerance_are_accepted():
    bench = make("freeway-v1")
    model = bench.load_model()
    reference = bench.load_policy("reference")

    def float32_probs(states: np.ndarray) -> np.ndarray:
        return reference.action_probabilities(states).astype(np.float32)  # rows sum to 1 +- 1e-7

    p32 = CallablePolicy(float32_probs, reference.features, reference.actions, name="float32")
    a = verify_exact(model, bench.properties["goal"], reference, ExactOptions())
    b = verify_exact(model, bench.properties["goal"], p32, ExactOptions())
    assert (b.states, b.transitions) == (a.states, a.transitions)
    assert b.value == pytest.approx(a.value, abs=1e-6)


def test_model_rows_rounded_by_its_author(tmp_path: Path):
    path = tmp_path / "rounded.prism"
    path.write_text(ROUNDED)
    model = load_model(path)
    always = CallablePolicy(lambda s: np.ones((len(s), 1)), ["x"], ["go"], name="always go")
    r = verify_exact(model, 'P=? [F "top"]', always, ExactOptions())
    mono = verify_exact(model, 'P=? [F "top"]', None, ExactOptions(mode="monolithic"))
    assert r.value == pytest.approx(mono.upper, abs=1e-6)
    assert r.value == pytest.approx(1.0, abs=1e-5)


def test_a_state_offering_only_actions_the_policy_lacks_stalls(tmp_path: Path):
    # the policy knows only 'up'; x=1 offers only 'stay': its mass there is on an unavailable action
    path = tmp_path / "unknown.prism"
    path.write_text(ONLY_UNKNOWN)
    model = load_model(path)
    up_only = CallablePolicy(lambda s: np.ones((len(s), 1)), ["x"], ["up"], name="up only")
    r = verify_exact(model, 'P=? [F "top"]', up_only, ExactOptions())
    # from x=0 'up' moves to x=1 with probability 1 eventually; there it stalls: never "top"
    assert r.value == pytest.approx(0.0, abs=1e-9)
    assert r.stalled_probability == pytest.approx(1.0, abs=1e-6)


def test_rows_off_by_rounding_within_the_tolerance_are_accepted(tmp_path: Path):
    path = tmp_path / "rounded.prism"
    path.write_text(ROUNDED.replace("0.3333333", "0.3333334"))  # Storm keeps these rows as given
    model = load_model(path)
    policy = CallablePolicy(lambda s: np.full((len(s), 1), 1.0 + 5e-7), ["x"], ["go"], name="1+5e-7")
    r = verify_exact(model, 'P=? [F "top"]', policy, ExactOptions())
    assert r.value == pytest.approx(1.0, abs=1e-5)


def test_check_policy_reports_every_problem_at_once():
    from rlverify.errors import PolicyError
    from rlverify.policies import check_policy

    model = make("avoid-v1", xMax=2, yMax=2).load_model()
    bad = CallablePolicy(lambda s: np.full((len(s), 2), 0.5), ["x", "why", "obstacle1_x"], ["north", "jump"])
    with pytest.raises(PolicyError) as info:
        check_policy(bad, model)
    text = str(info.value)
    assert "feature 'why'" in text and "action 'jump'" in text  # both problems, one error


@pytest.mark.parametrize(
    "bench_id,params,prop",
    [
        ("freeway-v1", {}, "goal"),  # boolean variables (done, won)
        ("avoid-v1", {"xMax": 2, "yMax": 2, "slickness": 0.1}, "collision-100"),
    ],
)
@pytest.mark.parametrize("mode", ["stochastic", "deterministic"])
def test_full_and_onthefly_give_the_same_chain_on_benchmarks(bench_id, params, prop, mode):
    bench = make(bench_id, **params)
    model = bench.load_model()
    rng = np.random.default_rng(0)
    actions = [a for a in model.action_names if a]
    weights = {}

    def softmaxish(states: np.ndarray) -> np.ndarray:  # a fixed random function of the state
        out = np.empty((len(states), len(actions)))
        for i, row in enumerate(states):
            key = tuple(row)
            if key not in weights:
                weights[key] = rng.dirichlet(np.ones(len(actions)))
            out[i] = weights[key]
        return out

    policy = CallablePolicy(softmaxish, model.variables, actions)
    text = bench.properties[prop]
    full = verify_exact(model, text, policy, ExactOptions(mode=mode, strategy="full"))
    fly = verify_exact(model, text, policy, ExactOptions(mode=mode, strategy="onthefly"))
    assert (full.states, full.transitions) == (fly.states, fly.transitions)
    assert full.value == pytest.approx(fly.value, rel=2e-6, abs=1e-12)  # both within the sound 1e-6


def test_greedy_policy_whose_choice_is_unavailable_is_not_renormalised_to_the_first_action(tmp_path: Path):
    from rlverify.errors import PolicyError

    path = tmp_path / "unknown.prism"
    path.write_text(ONLY_UNKNOWN.replace("[stay] x=1", "[down] x=1"))  # x=1 offers 'down' only
    model = load_model(path)
    # q-values: 'up' is greedy everywhere; one-hot rows carry no order among the other actions
    greedy = CallablePolicy(lambda s: np.tile([2.0, 1.0, 0.0], (len(s), 1)), ["x"], ["up", "down", "stay"], output="q-values")
    with pytest.raises(PolicyError, match="all its mass on unavailable actions"):
        verify_exact(model, 'P=? [F "top"]', greedy, ExactOptions(mode="deterministic", unavailable="renormalize"))
    stall = verify_exact(model, 'P=? [F "top"]', greedy, ExactOptions(mode="deterministic"))
    assert stall.stalled_probability == pytest.approx(1.0, abs=1e-6)


def test_renormalize_refuses_only_states_the_policy_reaches(tmp_path):
    """A decision state with no available mass that the policy never reaches (only 'a' is taken from s=0, which
    leads to s=1; s=2 offers only 'b', which the policy never names) must not fail the verification: the full
    strategy queries every decision state of the MDP, merged only the reached ones; both agree (value 1)."""
    import numpy as np

    from rlverify import ExactOptions, verify_exact
    from rlverify.errors import PolicyError
    from rlverify.policies import CallablePolicy

    path = tmp_path / "m.prism"
    path.write_text(
        "mdp\nmodule m\n  s : [0..3] init 0;\n  [a] s=0 -> (s'=1);\n  [b] s=0 -> (s'=2);\n"
        "  [a] s=1 -> (s'=3);\n  [b] s=2 -> (s'=3);\nendmodule\n"
    )
    only_a = CallablePolicy(lambda x: np.tile([1.0], (len(x), 1)), ["s"], ["a"])
    for strategy in ("full", "onthefly", "merged"):
        result = verify_exact(path, "P=? [F s=3]", only_a, ExactOptions(strategy=strategy, unavailable="renormalize"))
        assert result.value == 1.0, strategy
    # reached: from s=0 the policy now plays b half the time, and s=2 offers b only... which it names: fine; but a
    # policy naming only 'a' that is forced to s=2 by the model is refused
    forced = tmp_path / "f.prism"
    forced.write_text(
        "mdp\nmodule m\n  s : [0..3] init 0;\n  [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);\n"
        "  [a] s=1 -> (s'=3);\n  [b] s=2 -> (s'=3);\nendmodule\n"
    )
    for strategy in ("full", "onthefly", "merged"):
        with pytest.raises(PolicyError, match=r"all its mass on unavailable actions in state \{'s': 2\}"):
            verify_exact(forced, "P=? [F s=3]", only_a, ExactOptions(strategy=strategy, unavailable="renormalize"))
