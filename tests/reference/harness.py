"""Holding rlverify to the reference: run an rlverify engine and the oracle on the same model, policy and property.

This is the comparing side (it imports rlverify); the reference itself (:mod:`tests.reference.oracle`) does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.errors import PolicyError
from rlverify.policies import CallablePolicy
from tests.reference import oracle as O

#: agreement required between rlverify's value and the reference's (absolute, and relative for rewards)
TOL = 1e-9


@dataclass(frozen=True)
class Combo:
    """How a policy is made and followed: its action names (``natural``: labels where they identify the choice,
    else command names; ``commands``: every choice by command name; ``partial``: the natural names with every
    other one dropped, so mass stalls), its kind (:data:`oracle.POLICY_KINDS`), the mode and ``unavailable``."""

    actions: str
    kind: str
    mode: str
    unavailable: str

    @property
    def id(self) -> str:
        return f"{self.actions}-{self.kind}-{self.mode[:3]}-{self.unavailable[:5]}"


#: a pairwise cover of actions x kind x mode x unavailable (the default suite); :data:`ALL_COMBOS` is the product
COMBOS = [
    Combo("natural", "uniform", "stochastic", "stall"),
    Combo("natural", "stochastic", "deterministic", "renormalize"),
    Combo("commands", "sparse", "stochastic", "renormalize"),
    Combo("commands", "deterministic", "stochastic", "stall"),
    Combo("partial", "stochastic", "stochastic", "stall"),
    Combo("partial", "uniform", "deterministic", "stall"),
    Combo("natural", "sparse", "deterministic", "stall"),
    Combo("commands", "uniform", "deterministic", "renormalize"),
]
ALL_COMBOS = [
    Combo(a, k, m, u)
    for a in ("natural", "commands", "partial")
    for k in O.POLICY_KINDS
    for m in ("stochastic", "deterministic")
    for u in ("stall", "renormalize")
]


def policy_for(model: O.RefModel, combo: Combo, seed: int = 0) -> O.RefPolicy:
    """The reference policy of ``combo`` on ``model`` (features: all of Storm's state variables)."""
    if combo.actions == "natural":
        actions = O.natural_actions(model)
    elif combo.actions == "commands":
        actions = O.all_command_names(model)
    elif combo.actions == "partial":
        actions = O.natural_actions(model)[::2]
    else:
        raise ValueError(combo.actions)
    return O.random_policy(model.features, actions, combo.kind, seed)


def rl_policy(ref: O.RefPolicy, name: str = "reference policy") -> CallablePolicy:
    """The same policy as rlverify sees it (the same function of the same features)."""
    return CallablePolicy(ref.fn, list(ref.features), list(ref.actions), name=name)


def reference(model: O.RefModel, policy: O.RefPolicy, query: O.Query, combo: Combo) -> O.Answer | O.Refused:
    try:
        return O.evaluate(model, policy, query, mode=combo.mode, unavailable=combo.unavailable)
    except O.Refused as exc:
        return exc


def assert_value(
    value: float, expected: float, lower: float | None = None, upper: float | None = None, what: str = "value"
) -> None:
    """``value`` equals ``expected`` to :data:`TOL` (absolute and relative), or the bracket holds it."""
    if math.isinf(expected) or math.isinf(value):
        assert value == expected, f"{what}: rlverify {value}, reference {expected}"
        return
    if abs(value - expected) <= TOL * max(1.0, abs(expected)):
        return
    if lower is not None and upper is not None and lower - TOL <= expected <= upper + TOL:
        return
    pytest.fail(f"{what}: rlverify {value!r} (bracket [{lower}, {upper}]), reference {expected!r}")


def check_exact(
    path: Path,
    text: str,
    model: O.RefModel,
    query: O.Query,
    combo: Combo,
    strategy: str,
    *,
    constants: str | None = None,
    seed: int = 0,
    compare_states: bool = True,
) -> None:
    """rlverify's exact engine with ``strategy`` equals the reference: value, stalled mass, chain size; or both
    refuse the policy."""
    ref_policy = policy_for(model, combo, seed)
    expected = reference(model, ref_policy, query, combo)
    options = ExactOptions(mode=combo.mode, unavailable=combo.unavailable, strategy=strategy)
    if isinstance(expected, O.Refused):
        with pytest.raises(PolicyError):
            verify_exact(path, text, rl_policy(ref_policy), options, constants=constants)
        return
    result = verify_exact(path, text, rl_policy(ref_policy), options, constants=constants)
    assert_value(result.value, expected.value, result.lower, result.upper)
    assert result.stalled_probability == pytest.approx(expected.stalled, abs=TOL), "stalled probability"
    if combo.unavailable == "renormalize":
        assert expected.stalled == 0.0
    if compare_states:
        assert result.states == expected.states, "states of the policy's chain"


def finite(x: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(x)))
