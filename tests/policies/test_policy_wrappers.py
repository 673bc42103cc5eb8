"""Policy wrappers (a shield, fixed features) forward what they do not change: a shielded policy still says how
its network was trained, so verifying it on other parameters warns as verifying the network does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlverify.choices import OutputKind
from rlverify.cli.main import main
from rlverify.policies import CallablePolicy, FixedFeaturePolicy
from rlverify.policies.base import BasePolicy, PolicyWrapper
from rlverify.policies.loading import load_policy, policy_warnings
from rlverify.policies.shielded import Shield, ShieldedPolicy, read_shield
from tests.incli import cli

AVOID_PPO = (
    Path(__file__).resolve().parents[2] / "src" / "rlverify" / "benchmarks" / "data" / "policies" / "avoid_4x4_ppo.onnx"
)
PROP = 'P<=0.9 [F<=10 "collide"]'
TRAINED = "was trained with xMax=4; it is verified with xMax=3"


@pytest.fixture(scope="module")
def shield_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wrappers") / "avoid3.json"
    args = ["shield", "avoid-v1", "-c", "xMax=3", "-p", PROP, "--policy", str(AVOID_PPO), "--threshold", "0.05"]
    assert main([*args, "--out", str(path), "-q"]) == 0
    return path


def _warnings(capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    code, out, _ = cli(capsys, "verify", "avoid-v1", "-c", "xMax=3", "-p", PROP, "--policy", str(AVOID_PPO), *extra, "--json")
    assert code in (0, 1), out
    return [w for w in json.loads(out)["result"]["warnings"] if TRAINED in w]


def test_a_shielded_policy_warns_it_was_trained_elsewhere_as_the_policy_does_cli(capsys, shield_file):
    plain = _warnings(capsys)
    assert len(plain) == 1 and plain[0].startswith(f"{AVOID_PPO} was trained with xMax=4")
    assert _warnings(capsys, "--shield", str(shield_file)) == plain


def test_a_shielded_policy_warns_it_was_trained_elsewhere_as_the_policy_does_api(shield_file):
    import rlverify

    loaded = load_policy(str(AVOID_PPO))
    shielded = ShieldedPolicy(loaded, read_shield(shield_file))
    plain = rlverify.verify_exact("avoid-v1", PROP, loaded, constants="xMax=3").warnings
    wrapped = rlverify.verify_exact("avoid-v1", PROP, shielded, constants="xMax=3").warnings
    assert [w for w in wrapped if TRAINED in w] == [w for w in plain if TRAINED in w] != []
    assert policy_warnings(shielded, None, unavailable="stall") == policy_warnings(loaded, None, unavailable="stall")


# -- every wrapper forwards every member it does not change ------------------------------------------------------


def _inner(output: str = "logits") -> CallablePolicy:
    inner = CallablePolicy(lambda s: np.zeros((len(s), 2)), ["x", "y"], ["a", "b"], output=output, name="net.onnx")
    inner.training = {"benchmark": "avoid-v1", "params": {"xMax": 4}}
    inner.maskable = True
    inner.timeout = 7.5
    inner.from_file = True
    inner.threads = 3
    inner.metadata = {"seed": "0"}
    return inner


def _shield() -> Shield:
    return Shield(
        variables=("x", "y", "z"),
        valuations=np.array([[0, 0, 0]]),
        actions=("a", "b"),
        kept=np.array([[True, False]]),
        best=np.array([[True, False]]),
        model="m",
        constants="",
        fingerprint="f",
        property="p",
        optimum="min",
        threshold={"kind": "relative", "value": 0.1},
    )


WRAPPERS = {
    "fixed-features": lambda inner: FixedFeaturePolicy(inner, {"x": 1}),
    "shield": lambda inner: ShieldedPolicy(inner, _shield()),
}
#: what each wrapper changes (so does not forward): its name, and the shield its features and greediness
CHANGED = {"fixed-features": {"name"}, "shield": {"name", "features", "greedy"}}
FORWARDED = PolicyWrapper.FORWARDED


@pytest.mark.parametrize("member", FORWARDED)
@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_a_wrapper_forwards_what_it_does_not_change(wrapper, member):
    for output in ("logits", "q-values"):  # q-values: the inner policy is greedy
        inner = _inner(output)
        policy = WRAPPERS[wrapper](inner)
        assert isinstance(policy, PolicyWrapper) and policy.policy is inner and policy.unwrapped is inner
        if member in CHANGED[wrapper]:
            continue
        assert getattr(policy, member) == getattr(inner, member), member


@pytest.mark.parametrize("member", ["training", "maskable", "timeout", "from_file", "threads", "metadata"])
@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_a_wrapper_reads_the_wrapped_policy_at_each_access_and_writes_through(wrapper, member):
    inner = _inner()
    policy = WRAPPERS[wrapper](inner)
    value = {"training": {"benchmark": "other"}, "maskable": False, "timeout": 1.0, "from_file": False}.get(member, 9)
    setattr(inner, member, value)
    assert getattr(policy, member) == value
    setattr(policy, member, {"metadata": {"k": "v"}}.get(member, value))
    assert getattr(inner, member) == getattr(policy, member)


def test_what_wrappers_change():
    inner = _inner("q-values")
    fixed, shielded = FixedFeaturePolicy(inner, {"x": 1}), ShieldedPolicy(inner, _shield())
    assert fixed.name == "net.onnx with x=1 fixed" and shielded.name == "net.onnx + shield"
    assert fixed.greedy and not shielded.greedy  # a shield's fallback may spread a row: never sampled as one-hot
    assert shielded.features == ("x", "y", "z") and fixed.features == inner.features
    assert shielded.output == OutputKind.Q_VALUES and shielded.inner is inner
    nested = ShieldedPolicy(fixed, _shield())
    assert nested.unwrapped is inner and nested.training == inner.training


def test_base_policy_without_its_hook_cannot_be_made():
    class Forgot(BasePolicy):
        pass

    with pytest.raises(TypeError, match="_probabilities"):
        Forgot(["x"], ["a"])


def test_base_policy_declares_what_engines_read():
    table = CallablePolicy(lambda s: np.ones((len(s), 1)), ["x"], ["a"])
    assert table.output == OutputKind.PROBABILITIES and table.training is None and not table.maskable
    assert BasePolicy.output is None and BasePolicy.threads is None and BasePolicy.metadata is None


# -- the one fit check -----------------------------------------------------------------------------------------------


def test_the_fit_check_in_order_names_each_difference():
    from rlverify.policies.check import fit_problems

    def ordered(features, actions):
        return fit_problems(
            features, actions, variables=("x", "v"), model_actions=("left", "right"), ordered=True, system="cart"
        )

    assert ordered(("x", "v"), ("left", "right")) == []
    assert ordered(("v", "x"), ("left", "right")) == [
        "features ['v', 'x'] != cart's ['x', 'v'] (the same names in another order)"
    ]
    assert ordered(("x",), ("left", "right")) == [
        "the policy takes 1 features but cart gives 2: features ['x'] != cart's ['x', 'v']"
    ]
    (actions,) = ordered(("x", "v"), ("left", "rigth"))
    assert actions.startswith("actions ['left', 'rigth'] != cart's ['left', 'right'] (not cart's: 'rigth'")
    # unordered (a PRISM model's names): any order fits, a missing name is named
    assert fit_problems(("v", "x"), ("right",), variables=("x", "v"), model_actions=("left", "right")) == []
    (missing,) = fit_problems(("w",), ("left",), variables=("x", "v"), model_actions=("left", "right"))
    assert missing.startswith("feature 'w' is not a model variable")
