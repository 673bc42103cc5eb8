"""Policy adapters and output validation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rlverify.errors import DependencyNotInstalled, InputFileError, PolicyError
from rlverify.policies import MLP, CallablePolicy, OnnxPolicy, TablePolicy, load_policy, mlp_from_onnx, save_mlp_onnx, softmax


def test_onnx_round_trip_matches_numpy_network(tmp_path: Path) -> None:
    net = MLP.random([3, 16, 16, 4], seed=1)
    path = save_mlp_onnx(
        tmp_path / "p.onnx",
        net,
        features=["a", "b", "c"],
        actions=["n", "e", "s", "w"],
        training={"algorithm": "none", "seed": 1},
    )
    policy = load_policy(str(path))
    assert isinstance(policy, OnnxPolicy)
    assert policy.features == ("a", "b", "c") and policy.actions == ("n", "e", "s", "w")
    versions = policy.training.pop("versions")  # added on save: what produced the weights
    assert policy.training == {"algorithm": "none", "seed": 1}
    assert versions["rlverify"] and versions["numpy"]
    x = np.random.default_rng(0).normal(size=(50, 3))
    # independent softmax of the numpy forward pass (float32 weights in the file)
    z = net(x)
    expected = np.exp(z - z.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(policy.action_probabilities(x), expected, atol=1e-5)
    back = mlp_from_onnx(path)
    assert back.sizes == (3, 16, 16, 4)
    np.testing.assert_allclose(back(x), z, atol=1e-4)


def test_onnx_without_metadata_needs_features_and_actions(tmp_path: Path) -> None:
    import onnx

    path = save_mlp_onnx(tmp_path / "p.onnx", MLP.random([2, 4, 2], seed=0), features=["x", "y"], actions=["l", "r"])
    model = onnx.load(str(path))
    del model.metadata_props[:]
    onnx.save(model, str(path))
    with pytest.raises(PolicyError, match="--features and --actions"):
        load_policy(str(path))
    # what the outputs are must be said too: softmax over probabilities would be a wrong, valid-looking policy
    with pytest.raises(PolicyError, match=re.escape("--output logits|probabilities|q-values")):
        load_policy(str(path), features=["x", "y"], actions=["l", "r"])
    policy = load_policy(str(path), features=["x", "y"], actions=["l", "r"], output="logits")
    assert policy.action_probabilities(np.zeros((3, 2))).shape == (3, 2)


def test_table_policy(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {"features": ["x"], "actions": ["u", "d"], "table": [{"state": {"x": 1}, "probabilities": {"u": 0.25, "d": 0.75}}]}
        )
    )
    policy = load_policy(str(path))
    np.testing.assert_allclose(policy.action_probabilities(np.array([[1.0]])), [[0.25, 0.75]])
    with pytest.raises(PolicyError, match="no entry for state"):
        policy.action_probabilities(np.array([[2.0]]))
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"features": ["x"], "actions": ["u"], "table": [{"state": {"y": 1}, "probabilities": {"z": 1}}]})
    )
    with pytest.raises(PolicyError, match=r"missing features \['x'\]"):
        TablePolicy.from_json(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "features": [\n')
    with pytest.raises(InputFileError, match="line 3"):
        load_policy(str(broken))


def test_python_file_policy(tmp_path: Path) -> None:
    path = tmp_path / "pol.py"
    path.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['a', 'b']\n"
        "def act(s):\n    return np.tile([0.5, 0.5], (len(s), 1))\n"
    )
    policy = load_policy(f"{path}:act")
    assert policy.actions == ("a", "b")
    with pytest.raises(PolicyError, match="no callable 'nope'"):
        load_policy(f"{path}:nope")


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (np.ones((2, 3)) / 3, r"shape \(2, 3\), expected \(2, 2\)"),
        (np.array([[np.nan, 1.0], [0.5, 0.5]]), "NaN"),
        (np.array([[-0.5, 1.5], [0.5, 0.5]]), "negative"),
        (np.array([[0.5, 0.4], [0.5, 0.5]]), "do not sum to 1"),
    ],
    ids=["wrong-shape", "nan", "negative", "row-sum"],
)
def test_invalid_outputs_are_reported(output: np.ndarray, message: str) -> None:
    policy = CallablePolicy(lambda s: output, ["x"], ["a", "b"], name="bad")
    with pytest.raises(PolicyError, match=message):
        policy.action_probabilities(np.zeros((2, 1)))


def test_logits_output_gets_softmax() -> None:
    logits = np.array([[1.0, 2.0, 3.0]])
    policy = CallablePolicy(lambda s: logits, ["x"], ["a", "b", "c"], output="logits")
    np.testing.assert_allclose(policy.action_probabilities(np.zeros((1, 1))), softmax(logits))


def test_torch_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("no torch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    path = tmp_path / "m.pt"
    path.write_bytes(b"x")
    with pytest.raises(DependencyNotInstalled, match=r"rlverify\[torch\]"):
        load_policy(str(path), features=["x"], actions=["a"])


def test_q_values_are_read_greedily_with_ties_to_the_first_action(tmp_path):
    from rlverify.policies import MLP, OnnxPolicy, save_mlp_onnx

    q = np.array([[1.0, 3.0, 2.0], [5.0, 5.0, 0.0], [-1.0, -2.0, -1.0]])
    c = CallablePolicy(lambda s: q[s[:, 0].astype(int)], ["x"], ["a", "b", "c"], output="q-values")
    np.testing.assert_array_equal(c.action_probabilities(np.array([[0.0], [1.0], [2.0]])), [[0, 1, 0], [1, 0, 0], [1, 0, 0]])
    # an ONNX file that declares q-values: one-hot argmax of the network's outputs, not a softmax
    net = MLP.random([2, 8, 3], seed=1)
    path = save_mlp_onnx(tmp_path / "q.onnx", net, features=["x", "y"], actions=["a", "b", "c"], output="q-values")
    pol = OnnxPolicy(path)
    x = np.random.default_rng(0).normal(size=(50, 2))
    expected = np.eye(3)[np.argmax(net(x), axis=1)]
    np.testing.assert_array_equal(pol.action_probabilities(x), expected)


def test_unknown_output_kind_is_named():
    with pytest.raises(PolicyError, match="q-values"):
        CallablePolicy(lambda s: s, ["x"], ["a"], output="scores")


def test_torchscript_softmax_network_verifies_exactly_like_its_onnx_twin(tmp_path: Path) -> None:
    # a real TorchScript module whose graph ends in a float32 softmax (rows sum to 1 +- 1e-7)
    torch = pytest.importorskip("torch")
    from rlverify import ExactOptions, verify_exact
    from rlverify.benchmarks import make

    bench = make("freeway-v1")
    onnx_policy = bench.load_policy("reference")
    net = mlp_from_onnx(str(bench.policies["reference"]))
    layers = []
    for i, (w, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.as_tensor(w))
            lin.bias.copy_(torch.as_tensor(b))
        layers += [lin] + ([torch.nn.ReLU()] if i < len(net.weights) - 1 else [torch.nn.Softmax(dim=1)])
    path = tmp_path / "freeway.pt"
    torch.jit.save(torch.jit.script(torch.nn.Sequential(*layers)), str(path))
    path.with_name("freeway.pt.json").write_text(
        json.dumps({"features": list(onnx_policy.features), "actions": list(onnx_policy.actions), "output": "probabilities"})
    )
    pt = load_policy(str(path))
    model = bench.load_model()
    a = verify_exact(model, bench.properties["goal"], onnx_policy, ExactOptions())
    b = verify_exact(model, bench.properties["goal"], pt, ExactOptions())
    assert (a.states, a.transitions) == (b.states, b.transitions)
    assert b.value == pytest.approx(a.value, abs=1e-5)
