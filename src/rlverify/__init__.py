"""rlverify: how safe is this trained policy, really?

Exact (Storm on the policy-induced Markov chain), sound (interval-MDP abstraction) and
statistical (simulation with the policy as oracle) verification of RL policies.

The exact engine is imported eagerly; the abstraction and statistical engines load on first use
(``rlverify.verify_abstraction``, ``rlverify.verify_statistical``).
"""

from __future__ import annotations

import importlib
from typing import Any

from rlverify.errors import RlverifyError
from rlverify.exact import ExactOptions, verify_exact
from rlverify.models import load_model
from rlverify.policies import check_policy, load_policy
from rlverify.results import ExactResult

__version__ = "0.1.0"

_LAZY = {
    "verify_abstraction": "rlverify.abstraction",
    "AbstractionOptions": "rlverify.abstraction",
    "AbstractionResult": "rlverify.abstraction",
    "verify_statistical": "rlverify.statistical",
    "StatisticalOptions": "rlverify.statistical",
    "StatisticalResult": "rlverify.statistical",
    "benchmarks": "rlverify.benchmarks",
    "Target": "rlverify.resolve",
    "cross_check": "rlverify.crosscheck",
    "Agreement": "rlverify.crosscheck",
    "Property": "rlverify.models",
    "parse_property": "rlverify.models",
}

__all__ = ["AbstractionOptions", "AbstractionResult", "Agreement", "ExactOptions", "ExactResult", "Property",
           "RlverifyError", "StatisticalOptions", "StatisticalResult", "Target", "benchmarks", "check_policy",
           "cross_check", "load_model", "load_policy", "parse_property", "verify_abstraction", "verify_exact",
           "verify_statistical"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rlverify' has no attribute '{name}'")
    mod = importlib.import_module(module)
    return mod if name == "benchmarks" else getattr(mod, name)
