"""The abstraction engine reads exactly the network a policy file computes, for the system it was made for."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rlverify.abstraction import AbstractionOptions, verify_abstraction
from rlverify.abstraction.imdp import IMDP, IntervalError
from rlverify.benchmarks import make
from rlverify.errors import PolicyError
from rlverify.policies import MLP, mlp_from_onnx, save_mlp_onnx


def _graph(tmp_path, nodes, inits, name="net.onnx"):
    """A 2-input, 2-output ONNX graph from ``nodes`` with ACC's names in its metadata."""
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    acc = make("acc-v1")
    for key, value in (
        ("rlverify.features", json.dumps(list(acc.model().features))),
        ("rlverify.actions", json.dumps(list(acc.model().actions))),
        ("rlverify.output", "logits"),
    ):
        m.metadata_props.add(key=key, value=value)
    path = tmp_path / name
    onnx.save(m, str(path))
    return path


RNG = np.random.default_rng(0)
W1, B1, W2, B2 = RNG.normal(size=(8, 2)), RNG.normal(size=8), RNG.normal(size=(2, 8)), RNG.normal(size=2)


def test_a_relu_on_the_logits_is_refused(tmp_path):
    path = _graph(
        tmp_path,
        [
            helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("Gemm", ["r", "w2", "b2"], ["o"], transB=1),
            helper.make_node("Relu", ["o"], ["out"]),
        ],
        {"w1": W1, "b1": B1, "w2": W2, "b2": B2},
    )
    with pytest.raises(PolicyError, match="ends in a Relu"):
        mlp_from_onnx(path)


def test_two_affine_layers_without_relu_are_refused(tmp_path):
    path = _graph(
        tmp_path,
        [
            helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
            helper.make_node("Gemm", ["h", "w2", "b2"], ["out"], transB=1),
        ],
        {"w1": W1, "b1": B1, "w2": W2, "b2": B2},
    )
    with pytest.raises(PolicyError, match="without a Relu between"):
        mlp_from_onnx(path)


def test_matmul_add_chain_is_read_exactly(tmp_path):
    path = _graph(
        tmp_path,
        [
            helper.make_node("MatMul", ["x", "w1t"], ["h"]),
            helper.make_node("Add", ["h", "b1"], ["hb"]),
            helper.make_node("Relu", ["hb"], ["r"]),
            helper.make_node("MatMul", ["r", "w2t"], ["o"]),
            helper.make_node("Add", ["o", "b2"], ["out"]),
        ],
        {"w1t": W1.T.copy(), "b1": B1, "w2t": W2.T.copy(), "b2": B2},
    )
    mlp = mlp_from_onnx(path)
    x = RNG.normal(size=(20, 2))
    np.testing.assert_allclose(mlp(x), np.maximum(x @ W1.T + B1, 0) @ W2.T + B2, rtol=1e-5, atol=1e-5)


def test_torchscript_with_a_trailing_relu_or_stacked_linears_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    from rlverify.policies.mlp import load_network

    for name, layers, needle in (
        ("trail.pt", [torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2), torch.nn.ReLU()], "ends in a ReLU"),
        (
            "linlin.pt",
            [torch.nn.Linear(2, 8), torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)],
            "after a Linear without a ReLU",
        ),
    ):
        path = tmp_path / name
        torch.jit.save(torch.jit.script(torch.nn.Sequential(*layers)), str(path))
        with pytest.raises(PolicyError, match=needle):
            load_network(str(path), n_actions=2)


def test_a_policy_for_another_system_is_refused(tmp_path):
    acc = make("acc-v1")
    system = acc.model()
    net = MLP.random([2, 8, 2], seed=0)
    features, actions = list(system.features), list(reversed(system.actions))
    path = save_mlp_onnx(tmp_path / "swapped.onnx", net, features=features, actions=actions)
    with pytest.raises(PolicyError, match="made for another system") as info:
        verify_abstraction(acc.model(), path, AbstractionOptions(horizon=1))
    assert "actions" in str(info.value) and "features" not in str(info.value).split("system")[-1]


def test_tightening_refuses_an_infeasible_choice():
    # one choice whose only interval [0, 0.5] admits no distribution: tightening alone would make it [1, 1]
    imdp = IMDP(2, np.array([False, True]), np.array([0]), np.array([0]), np.array([1]), np.array([0.0]), np.array([0.5]))
    with pytest.raises(IntervalError, match="upper bounds sum below 1"):
        imdp.tightened()
