"""rlverify: how safe is this trained policy, really?

Exact (Storm on the policy-induced Markov chain), sound (interval-MDP abstraction) and
statistical (simulation with the policy as oracle) verification of RL policies.
"""

from __future__ import annotations

from rlverify.errors import RlverifyError
from rlverify.exact import ExactOptions, verify_exact
from rlverify.models import load_model
from rlverify.policies import check_policy, load_policy
from rlverify.results import ExactResult

__version__ = "0.1.0"

__all__ = ["ExactOptions", "ExactResult", "RlverifyError", "check_policy", "load_model", "load_policy", "verify_exact"]
