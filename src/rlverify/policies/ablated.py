"""A policy that cannot use some of its features: each is shown to it at a fixed value, whatever the state's value.

:class:`FixedFeaturePolicy` wraps any policy: it replaces the named columns of every batch of states by the fixed
values and asks the wrapped policy once for the whole batch. It is itself a policy (the exact engine verifies it as
any other), so "the value when the policy cannot use feature f" is the value of this wrapper
(:func:`rlverify.exact.features.feature_effects`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np

from rlverify.errors import PolicyError
from rlverify.policies.base import Policy, PolicyWrapper


class FixedFeaturePolicy(PolicyWrapper):
    """``policy`` with the features in ``fixed`` replaced by their given values in every state it is asked about.

    Args:
        policy: any :class:`~rlverify.policies.Policy`.
        fixed: feature name -> the value the policy is shown (a finite number; booleans as 0/1).

    ``action_probabilities(states)`` is ``policy.action_probabilities(states')`` with ``states'`` a copy of
    ``states`` ``(N, d)`` whose ``fixed`` columns hold the fixed values: one batched call of the wrapped policy.
    Everything else (output, training, timeout, greediness, ...) is the wrapped policy's (:class:`PolicyWrapper`).
    """

    no_network = "a policy with fixed features is verified through its wrapped policy's outputs, not bounded"

    def __init__(self, policy: Policy, fixed: Mapping[str, float]) -> None:
        features = tuple(policy.features)
        _check_fixed(policy.name, features, fixed)
        shown = ", ".join(f"{f}={_number(v)}" for f, v in fixed.items())
        super().__init__(policy, name=f"{policy.name} with {shown} fixed")
        self.fixed = {f: float(v) for f, v in fixed.items()}
        self._columns = np.array([features.index(f) for f in fixed], dtype=np.int64)
        self._values = np.array(list(self.fixed.values()), dtype=np.float64)

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        shown = np.array(states, dtype=np.float64, copy=True)
        shown[:, self._columns] = self._values
        return np.asarray(self.policy.action_probabilities(shown), dtype=np.float64)


def _check_fixed(name: str, features: tuple[str, ...], fixed: Mapping[str, float]) -> None:
    """Refuse fixing a feature the policy lacks, or at a value that is not a finite number."""
    unknown = [f for f in fixed if f not in features]
    if unknown:
        raise PolicyError(f"{name}: cannot fix {unknown}: its features are {list(features)}")
    bad = [f for f, v in fixed.items() if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(float(v))]
    if bad:
        raise PolicyError(f"{name}: the fixed values of {bad} are not finite numbers")


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{float(v):g}"
