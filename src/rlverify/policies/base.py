"""The one policy contract of rlverify.

A policy maps a batch of states, given as an ``(N, d)`` float array of features in the
order :attr:`Policy.features` declares (model variable names; booleans as 0/1), to an
``(N, |A|)`` float array of action probabilities over :attr:`Policy.actions` (PRISM/JANI
action labels). Rows must be distributions: entries in [0, 1], finite, summing to 1 within
:data:`ROW_SUM_TOLERANCE`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from rlverify.errors import PolicyError

#: Absolute tolerance on ``|sum(row) - 1|`` for a policy output row.
ROW_SUM_TOLERANCE = 1e-6


@runtime_checkable
class Policy(Protocol):
    """Anything with named features, named actions and batched action probabilities.

    A policy is memoryless: the same features always give the same distribution, whatever was
    asked before (every engine relies on it: the exact engine queries each state once, the
    simulator decides a run that surely stands still at once).
    """

    @property
    def features(self) -> tuple[str, ...]: ...

    @property
    def actions(self) -> tuple[str, ...]: ...

    def action_probabilities(self, states: np.ndarray) -> np.ndarray:
        """Map ``(N, d)`` features to ``(N, |A|)`` probabilities (float64)."""
        ...


class BasePolicy:
    """Base for adapters: validates input/output around the private hook :meth:`_probabilities`."""

    def __init__(self, features: list[str] | tuple[str, ...], actions: list[str] | tuple[str, ...], *, name: str = "policy") -> None:
        self._features = tuple(str(f) for f in features)
        self._actions = tuple(str(a) for a in actions)
        self.name = name
        problems = []
        if not self._features:
            problems.append("no features declared")
        if not self._actions:
            problems.append("no actions declared")
        for kind, names in (("feature", self._features), ("action", self._actions)):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                problems.append(f"duplicate {kind} names: {', '.join(dup)}")
        if problems:
            raise PolicyError(f"{name}: invalid declaration", problems)

    @property
    def features(self) -> tuple[str, ...]:
        return self._features

    @property
    def actions(self) -> tuple[str, ...]:
        return self._actions

    def _probabilities(self, states: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def action_probabilities(self, states: np.ndarray) -> np.ndarray:
        """Validated ``(N, |A|)`` float64 probabilities for ``(N, d)`` states."""
        states = np.asarray(states, dtype=np.float64)
        if states.ndim != 2 or states.shape[1] != len(self._features):
            raise PolicyError(
                f"{self.name}: expected states of shape (N, {len(self._features)}) for features "
                f"{list(self._features)}, got {states.shape}"
            )
        probs = np.asarray(self._probabilities(states), dtype=np.float64)
        validate_probabilities(probs, len(states), len(self._actions), source=self.name)
        return probs


def validate_probabilities(probs: np.ndarray, n_states: int, n_actions: int, *, source: str) -> None:
    """Raise :class:`PolicyError` listing every way ``probs`` is not an ``(n_states, n_actions)`` distribution batch."""
    if probs.shape != (n_states, n_actions):
        raise PolicyError(f"{source}: output has shape {probs.shape}, expected ({n_states}, {n_actions}) = (states, actions)")
    if n_states == 0:
        return
    problems = []
    bad = ~np.isfinite(probs).all(axis=1)
    if bad.any():
        problems.append(f"{int(bad.sum())} rows contain NaN or inf (first row {int(np.argmax(bad))})")
    neg = (probs < 0).any(axis=1)
    if neg.any():
        problems.append(f"{int(neg.sum())} rows have negative entries (first row {int(np.argmax(neg))}, min {np.nanmin(probs):.3g})")
    with np.errstate(invalid="ignore"):
        off = np.abs(probs.sum(axis=1) - 1.0) > ROW_SUM_TOLERANCE
    off &= ~bad
    if off.any():
        i = int(np.argmax(off))
        problems.append(
            f"{int(off.sum())} rows do not sum to 1 within {ROW_SUM_TOLERANCE:g} "
            f"(first row {i} sums to {probs[i].sum():.9g})"
        )
    if problems:
        raise PolicyError(f"{source}: output is not a probability distribution per state", problems)
