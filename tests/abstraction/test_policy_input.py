"""The abstraction engine takes a Policy: the same bound as from its file or its MLP, and clear refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlverify.abstraction import AbstractionError, AbstractionOptions, verify_abstraction
from rlverify.benchmarks import make
from rlverify.errors import PolicyError
from rlverify.models.continuous import AdaptiveCruiseControl
from rlverify.policies import MLP, load_policy, mlp_from_onnx, save_mlp_onnx

OPTIONS = AbstractionOptions(horizon=2, domain="octagon", phi=0.5)


def same_result(a, b) -> None:
    assert a.upper_bound == b.upper_bound and a.maxmin_value == b.maxmin_value
    assert (a.n_abstract_states, a.n_polyhedra, a.n_transitions) == (b.n_abstract_states, b.n_polyhedra, b.n_transitions)
    assert [(p.lo, p.hi, p.probability_lower, p.probability_upper, p.bound) for p in a.parts] == [
        (p.lo, p.hi, p.probability_lower, p.probability_upper, p.bound) for p in b.parts
    ]


@pytest.fixture(scope="module")
def acc():
    return make("acc-v1")


@pytest.fixture(scope="module")
def from_path(acc):
    return verify_abstraction(acc.model(), acc.policies["ppo"], OPTIONS)


def test_loaded_policy_path_and_mlp_give_the_identical_bound(acc, from_path):
    policy = load_policy(str(acc.policies["ppo"]))
    from_policy = verify_abstraction(acc.model(), policy, OPTIONS)
    from_mlp = verify_abstraction(acc.model(), mlp_from_onnx(acc.policies["ppo"]), OPTIONS)
    same_result(from_policy, from_path)
    same_result(from_mlp, from_path)
    assert from_policy.policy == from_path.policy == str(acc.policies["ppo"]) and from_mlp.policy == "MLP"
    assert len(from_path.parts) > 1  # the policy was refined on: the comparison is not vacuous


def test_torchscript_twin_gives_the_identical_bound(acc, from_path, tmp_path):
    torch = pytest.importorskip("torch")
    net = mlp_from_onnx(acc.policies["ppo"])
    layers = []
    for i, (w, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.as_tensor(w))
            lin.bias.copy_(torch.as_tensor(b))
        layers += [lin] + ([torch.nn.ReLU()] if i < len(net.weights) - 1 else [])
    path = tmp_path / "acc.pt"
    torch.jit.save(torch.jit.script(torch.nn.Sequential(*layers)), str(path))
    (tmp_path / "acc.pt.json").write_text(
        json.dumps({"features": list(acc.model().features), "actions": list(acc.model().actions), "output": "logits"})
    )
    same_result(verify_abstraction(acc.model(), load_policy(str(path)), OPTIONS), from_path)
    same_result(verify_abstraction(acc.model(), str(path), OPTIONS), from_path)


def test_python_callable_is_refused_with_the_reason(acc, tmp_path):
    module = tmp_path / "x.py"
    module.write_text(
        f"FEATURES = {list(acc.model().features)}\nACTIONS = {list(acc.model().actions)}\nOUTPUT = 'logits'\n"
        "def pi(states):\n    return [[0.0, 0.0]] * len(states)\n"
    )
    spec = f"{module}:pi"
    message = rf"^{spec}: a Python callable cannot be bounded; give an ONNX or TorchScript ReLU network"
    for policy in (load_policy(spec), spec):
        with pytest.raises(PolicyError, match=message):
            verify_abstraction(acc.model(), policy, OPTIONS)


def test_table_policy_is_refused_with_the_reason(acc, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {
                "features": list(acc.model().features),
                "actions": list(acc.model().actions),
                "table": [],
                "default": {"decelerate": 1.0},
            }
        )
    )
    with pytest.raises(PolicyError, match=r"t\.json: a table policy cannot be bounded .* give an ONNX or TorchScript"):
        verify_abstraction(acc.model(), load_policy(str(path)), OPTIONS)


def test_policy_for_other_features_and_actions_is_refused_with_every_problem(acc, tmp_path):
    path = save_mlp_onnx(
        tmp_path / "p.onnx", MLP.random([3, 8, 2], seed=0), features=["v", "dx", "gap"], actions=["brake", "accelerate"]
    )
    with pytest.raises(PolicyError, match="made for another system") as info:
        verify_abstraction(acc.model(), load_policy(str(path)), OPTIONS)
    problems = info.value.problems
    assert len(problems) == 2
    assert problems[0].startswith("the policy takes 3 features but acc-v1 gives 2") and "'v_rel'" in problems[0]
    assert "'brake'" in problems[1] and "decelerate" in problems[1]
    # same count, other names: each unknown name is named, with the closest declared one
    path = save_mlp_onnx(
        tmp_path / "q.onnx", MLP.random([2, 8, 2], seed=0), features=["v_rel", "dxx"], actions=["decelerate", "accelerate"]
    )
    with pytest.raises(
        PolicyError,
        match=r"features \['v_rel', 'dxx'\] != acc-v1's \['v_rel', 'dx'\] .*'dxx' "
        r"\(did you mean 'dx'\?\)",
    ):
        verify_abstraction(acc.model(), str(path), OPTIONS)


def test_q_value_network_is_refused(acc, tmp_path):
    path = save_mlp_onnx(
        tmp_path / "dqn.onnx",
        MLP.random([2, 8, 2], seed=0),
        features=list(acc.model().features),
        actions=list(acc.model().actions),
        output="q-values",
    )
    with pytest.raises(PolicyError, match=r"outputs Q-values .* bounds a softmax over logits"):
        verify_abstraction(acc.model(), load_policy(str(path)), OPTIONS)


def test_bare_file_names_missing_declaration_and_network_problem_at_once(acc, tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "tanh.pt"  # no sidecar: names and output unknown; and a Tanh
    torch.jit.save(
        torch.jit.script(torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))), str(path)
    )
    with pytest.raises(PolicyError, match="cannot be bounded as given") as info:
        verify_abstraction(acc.model(), str(path), OPTIONS)
    assert "--features and --actions" in info.value.problems[0] and "layer '1' is Tanh" in info.value.problems[1]


def test_template_domain_uses_the_systems_documented_default_and_says_so(acc):
    default = verify_abstraction(acc.model(), acc.policies["ppo"], AbstractionOptions(horizon=2, domain="template", phi=0.5))
    expected = np.vstack([np.eye(2), [[-0.5, 1.0], [1.0, 0.5]]])  # as AdaptiveCruiseControl's docstring says
    np.testing.assert_array_equal(acc.model().default_template(), expected)
    assert default.template_axes == tuple(map(tuple, expected.tolist()))
    explicit = verify_abstraction(
        acc.model(),
        acc.policies["ppo"],
        AbstractionOptions(horizon=2, domain="template", phi=0.5, template=tuple(map(tuple, expected.tolist()))),
    )
    same_result(default, explicit)


def test_template_domain_without_template_or_default_is_refused(acc):
    class NoDefault(AdaptiveCruiseControl):
        def __init__(self) -> None:
            super().__init__()
            self.template_directions = None

    with pytest.raises(
        AbstractionError,
        match=r"domain 'template' needs template= directions: a \(k, 2\) matrix over "
        r"\['dx', 'v'\].*--template FILE.*acc-v1 declares no default template",
    ):
        verify_abstraction(NoDefault(), acc.policies["ppo"], AbstractionOptions(horizon=2, domain="template"))
