"""Exact engine: policy-induced Markov chains checked by Storm; deterministic and monolithic baselines;
failure paths, risk maps and robustness built on the same chains."""

from rlverify.exact.explain import EXPLAINED_FORMS, explain_paths, most_probable_paths, plot_paths
from rlverify.exact.induced import STALLED_LABEL, induced_chain
from rlverify.exact.maps import MapOptions, risk_map
from rlverify.exact.robust import ModelErrorOptions, RobustnessOptions, model_error_bounds, robustness
from rlverify.exact.verify import ExactOptions, induce, verify_exact

__all__ = ["EXPLAINED_FORMS", "STALLED_LABEL", "ExactOptions", "MapOptions", "ModelErrorOptions", "RobustnessOptions",
           "explain_paths", "induce", "induced_chain", "model_error_bounds", "most_probable_paths", "plot_paths",
           "risk_map", "robustness", "verify_exact"]
