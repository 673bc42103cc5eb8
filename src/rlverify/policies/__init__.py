"""Policies: one contract (:class:`Policy`) and its adapters; the one place that reads networks."""

from rlverify.policies.adapters import CallablePolicy, OnnxPolicy, SB3Policy, TablePolicy, TorchPolicy, softmax
from rlverify.policies.base import ROW_SUM_TOLERANCE, BasePolicy, Policy, validate_probabilities
from rlverify.policies.check import check_policy
from rlverify.policies.loading import load_network_policy, load_policy
from rlverify.policies.mlp import MLP, load_network, mlp_from_onnx, mlp_from_torch, save_mlp_onnx

__all__ = [
    "BasePolicy", "CallablePolicy", "MLP", "OnnxPolicy", "Policy", "ROW_SUM_TOLERANCE", "SB3Policy", "TablePolicy",
    "TorchPolicy", "check_policy", "load_network", "load_network_policy", "load_policy", "mlp_from_onnx",
    "mlp_from_torch", "save_mlp_onnx", "softmax", "validate_probabilities",
]
