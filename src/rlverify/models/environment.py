"""The base of every environment the simulator runs in lockstep, with the defaults of its optional members.

An environment advances many runs at once. Its run states are a numpy array whose first axis is the run (``(N,)``
state indices for explicit MDPs, ``(N, 5)`` rows for Racetrack, ``(N, n)`` floats for a continuous system).
Implementations (:class:`~rlverify.statistical.envs.ExplicitEnv`, :class:`~rlverify.models.racetrack.RacetrackEnv`,
:class:`~rlverify.models.continuous.ContinuousEnv`) inherit :class:`VectorEnv`; it lives in ``models`` so that every
one of them may import it (``models`` does not import the engines).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, TypeAlias

import numpy as np

__all__ = ["RunState", "VectorEnv"]

#: one run's state: a row of a ``(N, ...)`` state array, or an explicit state's index
RunState: TypeAlias = "np.ndarray | np.integer[Any] | int"


class VectorEnv(ABC):
    """What the simulator needs from an environment: the required methods are abstract, the optional ones have
    defaults meaning "nothing special" (no forced state, no sure self-loop, states described as they are, runs
    starting among :meth:`initial_states`).

    Attributes:
        name: for messages and results.
        features: names of the columns :meth:`observe` returns.
        actions: action names; :meth:`step` takes indices into this tuple.
        labels: atomic propositions :meth:`label` knows.
        initial_box: ``(lo, hi)`` of ``(n,)`` arrays: runs start uniformly in this box (the simulator draws the
            states), not among :meth:`initial_states`; None (the default): they start among them.
    """

    name: str
    features: tuple[str, ...]
    actions: tuple[str, ...]
    labels: tuple[str, ...]
    initial_box: tuple[np.ndarray, np.ndarray] | None = None

    @abstractmethod
    def initial_states(self) -> np.ndarray:
        """``(K, ...)`` possible initial run states (a run starts in one of them, uniformly at random)."""

    @abstractmethod
    def observe(self, states: np.ndarray) -> np.ndarray:
        """``(N, len(features))`` float64 observations.

        Optional: an ``out`` keyword, an ``(N, len(features))`` float32 or float64 array to write them into
        and return (the simulator then reuses one buffer, in the dtype the policy takes)."""

    @abstractmethod
    def available(self, states: np.ndarray) -> np.ndarray | None:
        """``(N, len(actions))`` bool availability, or None when every action is always available."""

    @abstractmethod
    def step(self, states: np.ndarray, actions: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Successor states for action indices ``(N,)`` and uniforms ``u`` ``(N,)`` in [0, 1)."""

    @abstractmethod
    def label(self, name: str, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool truth of label ``name``."""

    @abstractmethod
    def terminal(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: absorbing states (the run stays there and its labels never change)."""

    def forced(self, states: np.ndarray) -> np.ndarray | None:
        """``(N,)`` bool: states whose single choice is taken without asking the policy; None (the default): none."""
        return None

    def self_loops(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray | None:
        """``(N,)`` bool: the step surely returns to the same state; None (the default): never known to."""
        return None

    def describe(self, state: RunState) -> object:
        """A run state for messages (the default: the state itself)."""
        return state
