"""Checking PCTL properties with Storm, with the numerics made explicit.

Numerics (``--numerics``):

* ``sound`` (default): Storm's sound environment (optimistic value iteration, topological):
  the result is within ``precision`` (relative) of the true value.
* ``direct``: Storm's Eigen linear equation solver with its own default method: no convergence
  heuristic on ``precision`` (the value does not depend on it), but not exact either: measured
  1.6e-7 relative error on Freeway under a uniform policy (no bounds are reported).
* ``fast``: Storm's plain value iteration with a convergence heuristic (Jacobi/Gauss-Seidel
  style). It can stop far from the true value on ill-conditioned chains (see NOTES.md:
  0.99922 instead of 0.999998); offered for speed studies only.

Step-bounded properties (``F<=k``, ``U<=k``, ``C<=k``) are computed by k matrix-vector steps
in every setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlverify.errors import PropertyError
from rlverify.models.properties import Property
from rlverify.models.numerics import NUMERICS, environment  # noqa: F401 (re-exported)
from rlverify.models.symbolic import storm_message

@dataclass(frozen=True)
class CheckOutcome:
    """Storm's answer for the initial state, plus the per-state values."""

    value: float
    lower: float | None
    upper: float | None
    values: np.ndarray


def quantitative(prop: Any, *, optimality: str | None = None) -> tuple[Any, float | None, str | None]:
    """The formula with its threshold removed (and optimality set), the threshold and its comparison."""
    import stormpy

    formula = (prop.storm_formula() if isinstance(prop, Property) else prop.get_raw_formula()).clone()
    threshold, comparison = None, None
    if formula.has_bound:
        threshold = float(formula.threshold)
        comparison = str(formula.comparison_type).rsplit(".", 1)[-1]
        formula.remove_bound()
    if optimality is not None:
        direction = stormpy.logic.OptimizationDirection.MINIMIZE if optimality == "min" else stormpy.logic.OptimizationDirection.MAXIMIZE
        formula.set_optimality_type(direction)
    elif formula.has_optimality_type:
        formula.remove_optimality_type()
    return formula, threshold, comparison


def compare(value: float, threshold: float, comparison: str) -> bool:
    """``value <comparison> threshold`` for Storm's comparison type names."""
    table = {"LESS": value < threshold, "LESS_EQUAL": value <= threshold, "GREATER": value > threshold,
             "GREATER_EQUAL": value >= threshold}
    table.update(LESS=table["LESS"], LEQ=table["LESS_EQUAL"], GREATER=table["GREATER"], GEQ=table["GREATER_EQUAL"])
    return table[comparison]


def check(storm_model: Any, formula: Any, env: Any) -> CheckOutcome:
    """Check ``formula`` on ``storm_model``; value at the (single) initial state."""
    import stormpy

    try:
        result = stormpy.model_checking(storm_model, formula, environment=env)
    except RuntimeError as exc:
        raise PropertyError(f"Storm cannot check '{formula}' on this model: {storm_message(exc)}") from None
    init = storm_model.initial_states
    if len(init) != 1:
        raise PropertyError(f"the model has {len(init)} initial states; rlverify reports the value of a single one")
    values = np.asarray(result.get_value_vector(), dtype=np.float64)
    s = int(init[0])
    lower = float(result.get_lower_bound(s)) if result.has_lower_bounds() else None
    upper = float(result.get_upper_bound(s)) if result.has_upper_bounds() else None
    return CheckOutcome(value=float(values[s]), lower=lower, upper=upper, values=values)
