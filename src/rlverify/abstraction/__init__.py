"""Interval-MDP abstraction engine: sound upper bounds for stochastic neural policies on continuous systems."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
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

lazy_exports(
    __name__,
    {
        "rlverify.abstraction.domains": "Polytope Template",
        "rlverify.abstraction.imdp": "IMDP",
        "rlverify.abstraction.policy_fit": "policy_network",
        "rlverify.abstraction.robust_vi": "bounded_reachability",
        "rlverify.abstraction.verify": (
            "GUARANTEE AbstractionBudgetError AbstractionError AbstractionOptions "
            "AbstractionProgress AbstractionResult PartBound verify_abstraction"
        ),
        "rlverify.errors": "DomainError IntervalError",
    },
)
