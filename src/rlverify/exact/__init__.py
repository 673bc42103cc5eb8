"""Exact engine: policy-induced Markov chains checked by Storm; deterministic and monolithic baselines."""

from rlverify.exact.induced import STALLED_LABEL, induced_chain
from rlverify.exact.verify import ExactOptions, induce, verify_exact

__all__ = ["ExactOptions", "STALLED_LABEL", "induce", "induced_chain", "verify_exact"]
