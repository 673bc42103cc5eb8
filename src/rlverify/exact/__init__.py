"""Exact engine: policy-induced Markov chains checked by Storm; deterministic and monolithic baselines;
failure paths, risk maps and robustness built on the same chains.

Every analysis of a policy reads its chain (:class:`PolicyChain`, built once by :func:`policy_chain`); those that
range over the whole MDP read it as a :class:`FullMDP` (built once by :func:`full_mdp`). Engines take resolved
input: a loaded model and a parsed property (:func:`rlverify.resolve.resolve`, or :func:`rlverify.load_model` and
:func:`rlverify.parse_property`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.exact.chain import FullMDP, PolicyChain, full_mdp, induce, policy_chain
    from rlverify.exact.critical import CriticalOptions, critical_states
    from rlverify.exact.explain import EXPLAINED_FORMS, explain_paths, most_probable_paths, plot_paths
    from rlverify.exact.explanations import ExplainOptions, explain_policy
    from rlverify.exact.features import FeatureOptions, feature_effects
    from rlverify.exact.induced import STALLED_LABEL, induced_chain
    from rlverify.exact.maps import MapOptions, risk_map
    from rlverify.exact.model_error import model_error_bounds
    from rlverify.exact.optimum import optimum
    from rlverify.exact.options import ExactOptions
    from rlverify.exact.robust import robustness
    from rlverify.exact.robust_options import ModelErrorOptions, RobustnessOptions
    from rlverify.exact.tree import TreeOptions, fit_tree
    from rlverify.exact.verify import verify_exact

__all__ = [
    "EXPLAINED_FORMS",
    "STALLED_LABEL",
    "CriticalOptions",
    "ExactOptions",
    "ExplainOptions",
    "FeatureOptions",
    "FullMDP",
    "MapOptions",
    "ModelErrorOptions",
    "PolicyChain",
    "RobustnessOptions",
    "TreeOptions",
    "critical_states",
    "explain_paths",
    "explain_policy",
    "feature_effects",
    "fit_tree",
    "full_mdp",
    "induce",
    "induced_chain",
    "model_error_bounds",
    "most_probable_paths",
    "optimum",
    "plot_paths",
    "policy_chain",
    "risk_map",
    "robustness",
    "verify_exact",
]

lazy_exports(
    __name__,
    {
        "rlverify.exact.chain": "FullMDP PolicyChain full_mdp induce policy_chain",
        "rlverify.exact.critical": "CriticalOptions critical_states",
        "rlverify.exact.explanations": "ExplainOptions explain_policy",
        "rlverify.exact.features": "FeatureOptions feature_effects",
        "rlverify.exact.tree": "TreeOptions fit_tree",
        "rlverify.exact.explain": "EXPLAINED_FORMS explain_paths most_probable_paths plot_paths",
        "rlverify.exact.induced": "STALLED_LABEL induced_chain",
        "rlverify.exact.maps": "MapOptions risk_map",
        "rlverify.exact.optimum": "optimum",
        "rlverify.exact.options": "ExactOptions",
        "rlverify.exact.model_error": "model_error_bounds",
        "rlverify.exact.robust": "robustness",
        "rlverify.exact.robust_options": "ModelErrorOptions RobustnessOptions",
        "rlverify.exact.verify": "verify_exact",
    },
)
