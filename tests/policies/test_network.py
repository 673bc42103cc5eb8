"""Policies give their ReLU network (``policy.network()``): exactly what the file computes, or a reason why not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rlverify.errors import PolicyError
from rlverify.policies import MLP, OnnxPolicy, TorchPolicy, load_network, load_policy, save_mlp_onnx
from rlverify.policies.mlp import cross_check_network

RNG = np.random.default_rng(0)
X = np.vstack([RNG.normal(size=(200, 3)), 20.0 * RNG.normal(size=(200, 3))])


def onnxruntime_outputs(path: Path, x: np.ndarray) -> np.ndarray:
    """The file's own outputs, by a fresh onnxruntime session (independent of the policy object)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.astype(np.float32)})[0].astype(np.float64)


def matmul_add_file(tmp_path: Path) -> Path:
    """A 3-16-16-4 network as a torch-style export: MatMul + Add, Identity and a float Cast in between."""
    ws = [RNG.normal(0, 0.6, (16, 3)), RNG.normal(0, 0.3, (16, 16)), RNG.normal(0, 0.3, (4, 16))]
    bs = [RNG.normal(size=16), RNG.normal(size=16), RNG.normal(size=4)]
    nodes = [
        helper.make_node("Identity", ["x"], ["x0"]),
        helper.make_node("MatMul", ["x0", "w0"], ["m0"]),
        helper.make_node("Add", ["m0", "b0"], ["a0"]),
        helper.make_node("Relu", ["a0"], ["r0"]),
        helper.make_node("Cast", ["r0"], ["c0"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["c0", "w1"], ["m1"]),
        helper.make_node("Add", ["b1", "m1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["out"]),
    ]
    inits = [numpy_helper.from_array(w.T.astype(np.float32).copy(), f"w{i}") for i, w in enumerate(ws)]
    inits += [numpy_helper.from_array(b.astype(np.float32), f"b{i}") for i, b in enumerate(bs)]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 4])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for key, value in (
        ("rlverify.features", '["a", "b", "c"]'),
        ("rlverify.actions", '["n", "e", "s", "w"]'),
        ("rlverify.output", "logits"),
    ):
        model.metadata_props.add(key=key, value=value)
    path = tmp_path / "export.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("kind", ["gemm", "matmul-add"])
def test_onnx_network_equals_onnxruntime(tmp_path, kind):
    if kind == "gemm":
        path = save_mlp_onnx(
            tmp_path / "p.onnx", MLP.random([3, 32, 32, 4], seed=3), features=["a", "b", "c"], actions=["n", "e", "s", "w"]
        )
    else:
        path = matmul_add_file(tmp_path)
    policy = load_policy(str(path))
    mlp = policy.network()
    assert mlp.sizes[0] == 3 and mlp.sizes[-1] == 4
    theirs = onnxruntime_outputs(path, X)
    np.testing.assert_allclose(mlp(X), theirs, rtol=1e-5, atol=1e-4 * (1 + np.abs(theirs).max()))


def test_onnx_network_is_read_from_the_one_load_of_the_file(tmp_path):
    path = save_mlp_onnx(tmp_path / "p.onnx", MLP.random([3, 8, 2], seed=4), features=["a", "b", "c"], actions=["l", "r"])
    policy = load_policy(str(path))
    path.unlink()  # network() must not read the file again
    np.testing.assert_allclose(policy.network()(X), MLP.random([3, 8, 2], seed=4)(X), rtol=1e-5, atol=1e-4)


def test_torchscript_network_equals_torch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    nn = torch.nn
    # nested Sequential blocks are read in order
    net = nn.Sequential(nn.Sequential(nn.Linear(3, 16), nn.ReLU()), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))
    path = tmp_path / "p.pt"
    torch.jit.save(torch.jit.script(net), str(path))
    (tmp_path / "p.pt.json").write_text(json.dumps({"features": ["a", "b", "c"], "actions": ["l", "r"], "output": "logits"}))
    policy = load_policy(str(path))
    assert isinstance(policy, TorchPolicy)
    with torch.no_grad():
        theirs = net(torch.as_tensor(X, dtype=torch.float32)).double().numpy()
    np.testing.assert_allclose(policy.network()(X), theirs, rtol=1e-5, atol=1e-4 * (1 + np.abs(theirs).max()))
    # a plain (not scripted) module reads the same
    plain = TorchPolicy(net, ["a", "b", "c"], ["l", "r"], output="logits")
    assert all(np.array_equal(u, v) for u, v in zip(plain.network().weights, policy.network().weights, strict=True))


def test_torch_module_that_is_no_sequential_is_refused():
    torch = pytest.importorskip("torch")

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))

        def forward(self, x):
            return self.body(2.0 * x)  # pre-processing the children do not show

    with pytest.raises(PolicyError, match="the module is a Scaled, not a Sequential"):
        TorchPolicy(Scaled(), ["a", "b", "c"], ["l", "r"]).network()


def test_callable_and_table_policies_say_why_they_have_no_network(tmp_path):
    module = tmp_path / "x.py"
    module.write_text("FEATURES = ['a']\nACTIONS = ['l', 'r']\ndef pi(s):\n    return [[0.5, 0.5]] * len(s)\n")
    with pytest.raises(
        PolicyError,
        match=r"x\.py:pi: a Python callable cannot be bounded; give an ONNX or TorchScript "
        "ReLU network",
    ):
        load_policy(f"{module}:pi").network()
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"features": ["a"], "actions": ["l", "r"], "default": {"l": 1.0}, "table": []}))
    with pytest.raises(PolicyError, match=r"t\.json: a table policy cannot be bounded"):
        load_policy(str(table)).network()


def test_network_that_does_not_fit_the_declaration_is_refused(tmp_path):
    import onnx

    path = save_mlp_onnx(tmp_path / "p.onnx", MLP.random([2, 4, 2], seed=0), features=["a", "b"], actions=["l", "r"])
    model = onnx.load(str(path))
    del model.metadata_props[:]  # names from the arguments (names contradicting the metadata are refused earlier)
    onnx.save(model, str(path))
    # refused when loaded (before any evaluation), both sizes named
    with pytest.raises(PolicyError, match="does not fit rlverify's policy contract") as info:
        OnnxPolicy(path, features=["a", "b", "c"], actions=["l", "m", "r"], output="logits")
    assert len(info.value.problems) == 2  # inputs and outputs, both named
    assert "takes 2 features" in info.value.problems[0] and "has 2 outputs" in info.value.problems[1]


def test_cross_check_refuses_weights_that_differ_from_the_runtime(tmp_path):
    net = MLP.random([3, 16, 2], seed=1)
    path = save_mlp_onnx(tmp_path / "p.onnx", net, features=["a", "b", "c"], actions=["l", "r"])
    theirs = onnxruntime_outputs(path, X)
    cross_check_network(net, X, theirs, output="logits", name="p")  # float32 rounding passes
    wrong = MLP(net.weights, (net.biases[0], net.biases[1] + np.array([0.0, 0.01])))
    with pytest.raises(PolicyError, match="do not reproduce the file's outputs"):
        cross_check_network(wrong, X, theirs, output="logits", name="p")
    # a constant shift of all logits is the same policy; of Q-values it is not
    shifted = MLP(net.weights, (net.biases[0], net.biases[1] + 0.5))
    cross_check_network(shifted, X, theirs, output="logits", name="p")
    with pytest.raises(PolicyError, match="relative output difference"):
        cross_check_network(shifted, X, theirs, output="q-values", name="p")


def test_onnx_cast_to_integers_is_refused(tmp_path):
    w = numpy_helper.from_array(np.ones((2, 2), dtype=np.float32), "W")
    nodes = [
        helper.make_node("Cast", ["s"], ["i"], to=TensorProto.INT32, name="trunc"),
        helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Gemm", ["f", "W"], ["out"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 2])],
        [w],
    )
    path = tmp_path / "cast.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    with pytest.raises(PolicyError, match="'trunc' uses operator Cast"):
        load_network(path)


def test_onnx_add_without_a_bias_is_refused_not_a_crash(tmp_path):
    # an Add taking only the MatMul's output (no initializer): was an IndexError from rlverify.policies.load_network
    # (a policy file gets onnxruntime's refusal first, an InputFileError)
    w = numpy_helper.from_array(np.ones((2, 2), dtype=np.float32), "W")
    nodes = [helper.make_node("MatMul", ["s", "W"], ["h"]), helper.make_node("Add", ["h"], ["out"], name="lonely")]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 2])],
        [w],
    )
    path = tmp_path / "add.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    with pytest.raises(PolicyError, match=r"node 'lonely' \(Add\) needs its bias as an initializer"):
        load_network(path)


def test_sb3_relu_ppo_network_gives_its_distribution_and_tanh_is_refused(tmp_path):
    sb3 = pytest.importorskip("stable_baselines3")
    torch = pytest.importorskip("torch")
    import gymnasium as gym

    class Env(gym.Env):
        observation_space = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            return np.zeros(3, np.float32), {}

        def step(self, action):
            return np.zeros(3, np.float32), 0.0, True, False, {}

    for name, kwargs in (("relu", {"net_arch": [8, 8], "activation_fn": torch.nn.ReLU}), ("tanh", {"net_arch": [8]})):
        sb3.PPO("MlpPolicy", Env(), seed=0, device="cpu", policy_kwargs=kwargs).save(str(tmp_path / f"{name}.zip"))
        (tmp_path / f"{name}.zip.json").write_text(json.dumps({"features": ["a", "b", "c"], "actions": ["l", "r"]}))
    policy = load_policy(str(tmp_path / "relu.zip"))
    assert policy.output == "logits"
    z = policy.network()(X)
    softmax = np.exp(z - z.max(axis=1, keepdims=True))
    softmax /= softmax.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(softmax, policy.action_probabilities(X), atol=1e-5)
    with pytest.raises(PolicyError, match=r"layer '1' is Tanh.*activation_fn"):
        load_policy(str(tmp_path / "tanh.zip")).network()
