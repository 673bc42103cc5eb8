"""Frozen result types; each says what kind of guarantee it carries."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ExactResult:
    """The value of a PCTL property on a policy-induced Markov chain (or Pmin/Pmax of an MDP).

    ``guarantee`` says how far the number can be trusted: ``"sound"`` (Storm's sound solver;
    |value - true| <= ``precision`` relative, ``lower``/``upper`` bracket the true value),
    ``"direct"`` (sparse LU: exact up to floating-point rounding) or ``"unsound"`` (plain value
    iteration stopped on a convergence heuristic). Step-bounded properties are computed by a fixed
    number of matrix-vector steps and are exact up to rounding in every setting.

    Attributes:
        value: for the (unique) initial state; in monolithic mode the Pmax (or Rmax) value.
        lower, upper: bounds on the true value when known (monolithic: Pmin and Pmax).
        satisfied: for threshold properties (``P<=0.1 [...]``), whether the bound holds.
        states, transitions: size of the checked chain (mode monolithic: of the MDP).
        stalled_probability: probability that the run reaches the ``stalled`` sink (policy mass on
            unavailable actions) before the property is decided; 0 with ``unavailable='renormalize'``.
        timings: seconds per phase: parse, build, policy, induce, check, total.
        settings: the options used; versions: package versions.
        state_values: per-state values ``(states,)`` when requested, with ``state_valuations``
            (model states only: the ``stalled`` sink is left out); monolithic mode: Pmax, with
            ``state_values_min`` = Pmin.
    """

    property: str
    mode: str
    strategy: str
    value: float
    lower: float | None
    upper: float | None
    guarantee: str
    precision: float | None
    satisfied: bool | None
    states: int
    transitions: int
    choices: int | None
    stalled_probability: float
    pmin: float | None = None
    pmax: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    model: str = ""
    policy: str | None = None
    state_values: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_valuations: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_values_min: np.ndarray | None = field(default=None, repr=False, compare=False)
    variables: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (per-state arrays left out)."""
        d = asdict(self)
        d.pop("state_values")
        d.pop("state_valuations")
        d.pop("state_values_min")
        d["variables"] = list(self.variables)
        return d


def versions() -> dict[str, str]:
    """Versions of rlverify and the components that decide the numbers."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("rlverify", "stormpy", "numpy", "scipy", "onnxruntime"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out
