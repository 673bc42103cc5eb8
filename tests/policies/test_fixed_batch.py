"""An ONNX file exported without a dynamic batch axis (torch.onnx.export's default) still evaluates any batch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")


def test_a_fixed_batch_onnx_policy_evaluates_any_batch_like_the_network(tmp_path, caplog):
    from rlverify.policies import load_policy

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    path = tmp_path / "fixed.onnx"
    torch.onnx.export(net, torch.zeros(1, 2), str(path), dynamo=False)  # batch dimension fixed at 1
    model = onnx.load(str(path))
    for key, value in (
        ("rlverify.features", '["x", "y"]'),
        ("rlverify.actions", '["a", "b", "c"]'),
        ("rlverify.output", "logits"),
    ):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(path))
    policy = load_policy(str(path))
    x = np.random.default_rng(0).normal(size=(7, 2))
    expected = torch.softmax(net(torch.tensor(x, dtype=torch.float32)), dim=1).detach().numpy()
    assert np.allclose(policy.action_probabilities(x), expected, atol=1e-6)
    assert "batch dimension is fixed at 1" in caplog.text
