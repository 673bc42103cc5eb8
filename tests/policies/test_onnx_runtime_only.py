"""ONNX policies read with onnxruntime alone: the argmax graph written as protobuf bytes is the one onnx's helper
builds, the greedy policy equals a plain numpy argmax of the file's outputs, external data beside the file is read,
and the weights are the file's (onnx imported only there)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from rlverify.errors import InputFileError, PolicyError
from rlverify.policies import MLP, load_policy, save_mlp_onnx
from rlverify.policies.onnx_policy import OnnxPolicy, with_argmax


def _reference_argmax(model: onnx.ModelProto, output: str) -> onnx.ModelProto:
    """The model with the argmax node and output as onnx's helper builds them (the code rlverify used before)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.node.append(helper.make_node("ArgMax", [output], ["rlverify_argmax"], axis=1, keepdims=0, select_last_index=0))
    out.graph.output.append(helper.make_tensor_value_info("rlverify_argmax", TensorProto.INT64, [None]))
    return out


@settings(max_examples=25, deadline=None)
@given(name=st.text(min_size=1, max_size=200), width=st.integers(1, 300))
def test_the_argmax_bytes_are_the_model_onnx_builds(name, width):
    """Any output name (unicode, long enough for two-byte lengths) and network width."""
    w = numpy_helper.from_array(np.arange(2 * width, dtype=np.float32).reshape(2, width), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], [name])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", width])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert onnx.load_from_string(with_argmax(model.SerializeToString(), name)) == _reference_argmax(model, name)


def _q_file(tmp_path, *, ties: bool):
    rng = np.random.default_rng(5)
    w1, w2 = rng.normal(size=(6, 2)), rng.normal(size=(4, 6))
    if ties:  # two equal output rows: every state ties actions 1 and 2 (the first must win)
        w2[2] = w2[1]
    net = MLP((w1, w2), (rng.normal(size=6), np.zeros(4)))
    return save_mlp_onnx(tmp_path / "q.onnx", net, features=["x", "y"], actions=["a", "b", "c", "d"], output="q-values")


@pytest.mark.parametrize("ties", [False, True])
def test_a_greedy_onnx_policy_is_numpys_argmax_of_the_runtimes_outputs(tmp_path, ties):
    path = _q_file(tmp_path, ties=ties)
    states = np.random.default_rng(1).normal(size=(500, 2)) * 3
    plain = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    q = plain.run(None, {plain.get_inputs()[0].name: states.astype(np.float32)})[0]
    expected = np.zeros(q.shape)
    expected[np.arange(len(q)), np.argmax(q, axis=1)] = 1.0  # numpy: the first maximum
    policy = load_policy(path)
    assert policy._outputs[1:] == ["rlverify_argmax"]  # the runtime's argmax is used
    np.testing.assert_array_equal(policy.action_probabilities(states), expected)
    np.testing.assert_array_equal(policy.choose(states)[0], np.argmax(q, axis=1))


def test_an_opset_11_greedy_file_falls_back_to_numpys_argmax(tmp_path):
    path = _q_file(tmp_path, ties=True)
    model = onnx.load(str(path))
    model.opset_import[0].version = 11  # ArgMax-11 has no select_last_index: onnxruntime refuses the rewrite
    onnx.save(model, str(path))
    policy = load_policy(path)
    assert policy._outputs[1:] == []
    states = np.random.default_rng(2).normal(size=(50, 2))
    q = onnx_reference_outputs(path, states)
    np.testing.assert_array_equal(policy.choose(states)[0], np.argmax(q, axis=1))


def onnx_reference_outputs(path, states):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: states.astype(np.float32)})[0]


def test_external_data_beside_the_file_is_read_and_not_from_the_working_directory(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    net = MLP((rng.normal(size=(5, 2)), rng.normal(size=(3, 5))), (rng.normal(size=5), rng.normal(size=3)))
    inline = save_mlp_onnx(tmp_path / "inline.onnx", net, features=["x", "y"], actions=["a", "b", "c"], output="logits")
    folder = tmp_path / "net"
    folder.mkdir()
    onnx.save(onnx.load(str(inline)), str(folder / "p.onnx"), save_as_external_data=True, location="p.data", size_threshold=0)
    monkeypatch.chdir(tmp_path)  # not the file's folder
    policy = load_policy(folder / "p.onnx")
    states = rng.normal(size=(20, 2))
    np.testing.assert_array_equal(policy.action_probabilities(states), load_policy(inline).action_probabilities(states))
    for mine, theirs in zip(policy.network().weights, net.weights, strict=True):
        np.testing.assert_array_equal(mine, theirs.astype(np.float32).astype(np.float64))


def test_bad_bytes_and_files_are_refused_in_one_line(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01garbage")
    with pytest.raises(InputFileError, match=r"bad\.onnx: not a readable ONNX model"):
        OnnxPolicy(bad)
    with pytest.raises(PolicyError, match="ONNX bytes: not an ONNX model"):
        OnnxPolicy(b"")
    with pytest.raises(PolicyError, match="not a list"):
        OnnxPolicy([1, 2])  # type: ignore[arg-type]
