"""Interval-MDP abstraction engine: sound upper bounds for stochastic neural policies on continuous systems."""

from rlverify.abstraction.domains import Polytope, Template
from rlverify.abstraction.imdp import IMDP
from rlverify.abstraction.policy_fit import policy_network
from rlverify.abstraction.robust_vi import bounded_reachability
from rlverify.abstraction.verify import (
    GUARANTEE,
    AbstractionBudgetError,
    AbstractionError,
    AbstractionOptions,
    AbstractionProgress,
    AbstractionResult,
    PartBound,
    verify_abstraction,
)
from rlverify.errors import DomainError, IntervalError

__all__ = [
    "GUARANTEE",
    "IMDP",
    "AbstractionBudgetError",
    "AbstractionError",
    "AbstractionOptions",
    "AbstractionProgress",
    "AbstractionResult",
    "DomainError",
    "IntervalError",
    "PartBound",
    "Polytope",
    "Template",
    "bounded_reachability",
    "policy_network",
    "verify_abstraction",
]
