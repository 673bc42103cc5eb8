"""Write ``examples/double_integrator.onnx``: a hand-made ReLU policy for ``double_integrator.py``.

The network computes the saturated feedback ``s = clip(x + 0.5 v, -1, 1)`` with four ReLUs and outputs
the logits ``(3 s, 0, -3 s)`` over ``(left, coast, right)``: push against the predicted position,
stochastically (softmax). Run from the repository root: ``.venv/bin/python examples/make_double_integrator_policy.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlverify.policies import MLP, save_mlp_onnx


def saturated_controller(gain: float = 3.0) -> MLP:
    """The ReLU network ``(x, v) -> gain * (s, 0, -s)`` with ``s = clip(x + 0.5 v, -1, 1)``."""
    w0 = np.array([[1.0, 0.5], [-1.0, -0.5], [1.0, 0.5], [-1.0, -0.5]])
    b0 = np.array([0.0, 0.0, -1.0, -1.0])  # relu(s), relu(-s), relu(s - 1), relu(-s - 1)
    sat = np.array([1.0, -1.0, -1.0, 1.0])  # clip(s, -1, 1) = relu(s) - relu(-s) - relu(s - 1) + relu(-s - 1)
    w1 = np.stack([gain * sat, np.zeros(4), -gain * sat])
    return MLP((w0, w1), (b0, np.zeros(3)))


if __name__ == "__main__":
    out = Path(__file__).with_name("double_integrator.onnx")
    save_mlp_onnx(
        out,
        saturated_controller(),
        features=["x", "v"],
        actions=["left", "coast", "right"],
        training={
            "algorithm": "hand-made saturated linear feedback",
            "seed": 0,
            "benchmark": "examples/double_integrator.py:SYSTEM",
        },
        force=True,  # regenerates the shipped file
    )
    print(f"wrote {out} ({out.stat().st_size} bytes)")
