"""Interval-MDP abstraction engine: sound upper bounds for stochastic neural policies on continuous systems."""

from rlverify.abstraction.domains import DomainError, Polytope, Template
from rlverify.abstraction.imdp import IMDP, IntervalError
from rlverify.abstraction.robust_vi import bounded_reachability
from rlverify.abstraction.verify import (GUARANTEE, AbstractionBudgetError, AbstractionError, AbstractionOptions,
                                         AbstractionResult, PartBound, Timings, verify_abstraction)

__all__ = ["AbstractionBudgetError", "AbstractionError", "AbstractionOptions", "AbstractionResult", "DomainError", "GUARANTEE",
           "IMDP", "IntervalError", "PartBound", "Polytope", "Template", "Timings", "bounded_reachability",
           "verify_abstraction"]
