"""Policies: one contract (:class:`Policy`) and its adapters; the one place that reads networks.

Modules, bottom first (each imports only those below it; ``tests/policies/test_module_order.py`` checks it):
``formats`` and ``sb3zip`` (what policy files declare; SB3 zips read without running code), ``settings``,
``torch_runtime``; ``mlp`` (the weights), ``outputs`` (raw outputs as probabilities); ``base`` (the contract, the
adapters' base and :class:`PolicyWrapper`); the adapters ``adapters`` (callables, tables, a user's object),
``onnx_policy``, ``torch_policy``, ``sb3_policy`` and the wrappers ``ablated``, ``shielded`` beside ``tree``;
``check`` (:func:`as_policy`, :func:`check_policy`, the one fit check); ``loading`` (:func:`load_policy` from a
spec).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.policies.ablated import FixedFeaturePolicy
    from rlverify.policies.adapters import CallablePolicy, ProtocolPolicy, TablePolicy
    from rlverify.policies.base import ROW_SUM_TOLERANCE, BasePolicy, Policy, PolicyWrapper, validate_probabilities
    from rlverify.policies.check import as_policy, check_policy
    from rlverify.policies.formats import softmax
    from rlverify.policies.loading import load_network_policy, load_policy
    from rlverify.policies.mlp import MLP, load_network, mlp_from_onnx, mlp_from_torch, save_mlp_onnx
    from rlverify.policies.onnx_policy import OnnxPolicy
    from rlverify.policies.sb3_policy import SB3Policy
    from rlverify.policies.torch_policy import TorchPolicy
    from rlverify.policies.tree import TreePolicy

__all__ = [
    "MLP",
    "ROW_SUM_TOLERANCE",
    "BasePolicy",
    "CallablePolicy",
    "FixedFeaturePolicy",
    "OnnxPolicy",
    "Policy",
    "PolicyWrapper",
    "ProtocolPolicy",
    "SB3Policy",
    "TablePolicy",
    "TorchPolicy",
    "TreePolicy",
    "as_policy",
    "check_policy",
    "load_network",
    "load_network_policy",
    "load_policy",
    "mlp_from_onnx",
    "mlp_from_torch",
    "save_mlp_onnx",
    "softmax",
    "validate_probabilities",
]

lazy_exports(
    __name__,
    {
        "rlverify.policies.ablated": "FixedFeaturePolicy",
        "rlverify.policies.adapters": "CallablePolicy ProtocolPolicy TablePolicy",
        "rlverify.policies.base": "ROW_SUM_TOLERANCE BasePolicy Policy PolicyWrapper validate_probabilities",
        "rlverify.policies.check": "as_policy check_policy",
        "rlverify.policies.formats": "softmax",
        "rlverify.policies.loading": "load_network_policy load_policy",
        "rlverify.policies.mlp": "MLP load_network mlp_from_onnx mlp_from_torch save_mlp_onnx",
        "rlverify.policies.onnx_policy": "OnnxPolicy",
        "rlverify.policies.sb3_policy": "SB3Policy",
        "rlverify.policies.torch_policy": "TorchPolicy",
        "rlverify.policies.tree": "TreePolicy",
    },
)
