"""as_policy: what the user passes (an object of their own class, a function, an adapter) is wrapped once at the door,
its shape checked up front, and has a name the results use."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from rlverify.errors import PolicyError
from rlverify.exact import ExactOptions, verify_exact
from rlverify.policies import MLP, CallablePolicy, Policy, ProtocolPolicy, as_policy, check_policy
from rlverify.policies.loading import policy_warnings
from rlverify.resolve import resolve

# x=0: a reaches the goal (x=1) w.p. 0.5, else x=2; b goes to x=2. x=2: a reaches it w.p. 0.4, else x=3; b to x=3.
TINY = """mdp
module m
  x : [0..3] init 0;
  [a] x=0 -> 0.5:(x'=1) + 0.5:(x'=2);
  [b] x=0 -> 1:(x'=2);
  [a] x=2 -> 0.4:(x'=1) + 0.6:(x'=3);
  [b] x=2 -> 1:(x'=3);
  [c] x=1 | x=3 -> true;
endmodule
label "goal" = x=1;
"""
# the policy below: a w.p. 0.3 at x=0 and 0.5 at x=2. By hand: 0.3*0.5 + (0.3*0.5 + 0.7)*0.5*0.4 = 0.32
REACH = 0.3 * 0.5 + (0.3 * 0.5 + 0.7) * 0.5 * 0.4


def probabilities(states: np.ndarray) -> np.ndarray:
    x = np.asarray(states)[:, 0]
    out = np.zeros((len(x), 3))
    out[x == 0] = [0.3, 0.7, 0.0]
    out[x == 2] = [0.5, 0.5, 0.0]
    out[(x == 1) | (x == 3)] = [0.0, 0.0, 1.0]
    return out


class Nameless:
    """A user's policy class without a name (the Policy protocol before it had one)."""

    features = ("x",)
    actions = ("a", "b", "c")

    def action_probabilities(self, states: np.ndarray) -> np.ndarray:
        return probabilities(states)


class Named(Nameless):
    name = "mine"


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.prism"
    path.write_text(TINY)
    return path


def test_a_user_class_without_a_name_is_named_by_its_class_and_verified(tiny):
    t = resolve(str(tiny), policy=Nameless(), property='P=? [F "goal"]')
    assert isinstance(t.policy, ProtocolPolicy) and isinstance(t.policy, Policy)
    assert t.policy.name == "Nameless" and t.policy_source == "Nameless"
    assert t.policy.features == ("x",) and t.policy.actions == ("a", "b", "c")
    r = verify_exact(t.model, t.property, t.policy, ExactOptions())
    assert r.value == pytest.approx(REACH, abs=1e-9) and r.policy == "Nameless"


def test_a_user_class_with_a_name_keeps_it(tiny):
    t = resolve(str(tiny), policy=Named(), property='P=? [F "goal"]')
    assert t.policy.name == "mine" and t.policy_source == "mine"
    assert verify_exact(t.model, t.property, t.policy, ExactOptions()).value == pytest.approx(REACH, abs=1e-9)


def test_a_function_with_its_names_is_a_policy(tiny):
    def cautious(states):
        return probabilities(states)

    t = resolve(str(tiny), policy=cautious, features=["x"], actions=["a", "b", "c"], property='P=? [F "goal"]')
    assert isinstance(t.policy, CallablePolicy) and t.policy.name == "cautious"
    assert verify_exact(t.model, t.property, t.policy, ExactOptions()).value == pytest.approx(REACH, abs=1e-9)
    assert as_policy(lambda s: probabilities(s), features=["x"], actions=["a", "b", "c"]).name == "callable policy"
    with pytest.raises(PolicyError, match="cautious: a function is a policy only with its features and actions"):
        as_policy(cautious)
    with pytest.raises(PolicyError, match="only with its actions"):
        as_policy(cautious, features=["x"])


def test_wrapping_happens_once():
    wrapped = as_policy(Nameless())
    assert as_policy(wrapped) is wrapped
    adapter = CallablePolicy(probabilities, ["x"], ["a", "b", "c"], name="c")
    assert as_policy(adapter) is adapter


def test_the_wrapped_object_gives_its_own_probabilities_checked_on_every_call():
    states = np.array([[0.0], [2.0], [3.0]])
    np.testing.assert_array_equal(as_policy(Nameless()).action_probabilities(states), probabilities(states))

    class Leaky(Nameless):
        def action_probabilities(self, states):
            return np.full((len(states), 3), 0.3)  # rows sum to 0.9

    with pytest.raises(PolicyError, match=r"Leaky: output is not a probability distribution per state"):
        as_policy(Leaky()).action_probabilities(states)


@pytest.mark.parametrize(
    "attrs,message",
    [
        ({"features": ("x",), "actions": ("a",)}, "is not a policy: it has no 'action_probabilities'"),
        (
            {"features": "x", "actions": ("a",), "action_probabilities": probabilities},
            "its features is 'x', not a list of names",
        ),
        (
            {"features": ("x", 1), "actions": ("a",), "action_probabilities": probabilities},
            "its features must be non-empty strings, got 1",
        ),
        ({"features": ("x",), "actions": ("a", "a"), "action_probabilities": probabilities}, "duplicate action names: a"),
        ({"features": ("x",), "actions": (), "action_probabilities": probabilities}, "no actions declared"),
        (
            {"features": ("x",), "actions": ("a",), "action_probabilities": 0.5},
            "its action_probabilities is a float, not a method",
        ),
    ],
    ids=["no-method", "a-string", "not-strings", "duplicates", "no-actions", "not-callable"],
)
def test_the_shape_is_checked_up_front(attrs, message):
    cls = type("Odd", (), {k: (staticmethod(v) if callable(v) else v) for k, v in attrs.items()})
    with pytest.raises(PolicyError, match=message):
        as_policy(cls())


def test_a_class_instead_of_an_instance_is_refused():
    with pytest.raises(PolicyError, match=r"Nameless is a class, not a policy: pass an instance \(Nameless\(...\)\)"):
        as_policy(Nameless)


def test_a_file_is_loaded_not_wrapped(tiny):
    with pytest.raises(PolicyError, match=r"policy\.onnx: a policy file or spec is loaded by rlverify\.load_policy"):
        as_policy("policy.onnx")
    with pytest.raises(PolicyError, match=r"a policy file or spec is loaded by rlverify\.load_policy"):
        as_policy(tiny)


def test_options_may_repeat_a_policy_object_but_not_change_it(tiny):
    assert resolve(str(tiny), policy=Nameless(), features=["x"], actions=["a", "b", "c"]).policy.name == "Nameless"
    contradiction = r"Nameless: --features y contradicts its features x \(declared by the policy object\)"
    with pytest.raises(PolicyError, match=contradiction):
        resolve(str(tiny), policy=Nameless(), features=["y"])
    with pytest.raises(PolicyError, match="--output logits contradicts its output probabilities"):
        as_policy(Nameless(), output="logits")


def test_check_policy_names_a_nameless_policy_by_its_class(tiny):
    t = resolve(str(tiny), needs_policy=False)

    class Elsewhere(Nameless):
        features = ("y",)

    with pytest.raises(PolicyError, match="policy Elsewhere does not fit model"):
        check_policy(Elsewhere(), t.model)
    check_policy(Nameless(), t.model)  # fits: no error


def test_what_engines_read_besides_the_protocol_is_the_objects_own():
    net = MLP.random([1, 4, 3], seed=0)

    class WithNetwork(Nameless):
        output = "logits"
        training: ClassVar[dict[str, str]] = {"benchmark": "avoid-v1"}
        maskable = True

        def network(self, sample=None):
            return net

    wrapped = as_policy(WithNetwork())
    assert wrapped.no_network is None and wrapped.network() is net and wrapped.network(np.zeros((2, 1))) is net
    assert wrapped.output == "logits" and wrapped.training == {"benchmark": "avoid-v1"} and not wrapped.greedy
    assert any("MaskablePPO" in w for w in policy_warnings(wrapped, unavailable="stall"))
    plain = as_policy(Nameless())
    assert plain.no_network == "this policy exposes no network (method network() -> MLP)"
    with pytest.raises(PolicyError, match="Nameless: this policy exposes no network"):
        plain.network()


def test_the_abstraction_engine_still_takes_a_nameless_object_with_a_network():
    # Policy has a name now; an object without one, given to the engine directly, is still a policy there
    from rlverify.abstraction.policy_fit import policy_network
    from rlverify.benchmarks import make
    from rlverify.policies import load_policy

    acc = make("acc-v1")
    loaded = load_policy(str(acc.policies["ppo"]))

    class Own:
        features, actions, output = loaded.features, loaded.actions, "logits"

        def action_probabilities(self, states):
            return loaded.action_probabilities(states)

        def network(self, sample=None):
            return loaded.network(sample)

    system = acc.model()
    for policy in (Own(), as_policy(Own())):
        mlp, name = policy_network(system, policy)
        assert name == "Own" and all(np.array_equal(a, b) for a, b in zip(mlp.weights, loaded.network().weights, strict=True))
