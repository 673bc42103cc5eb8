"""A continuous system as the simulator's vectorised environment (:class:`~rlverify.statistical.VectorEnv`).

Runs start uniformly at random in one of the system's initial regions (a box), follow its exact dynamics
(:meth:`~rlverify.models.continuous.base.ContinuousSystem.step`: deterministic, so the only randomness is the
start state and the policy's choices) and carry one label, ``unsafe``: the state lies in the system's unsafe set.
The property of the benchmarks, "an unsafe state within the horizon", is :func:`unsafe_property`.
"""

from __future__ import annotations

import numpy as np

from rlverify.errors import PropertyError, did_you_mean
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.models.environment import VectorEnv
from rlverify.models.properties import Property, parse_structure

#: the label of the unsafe set
UNSAFE = "unsafe"


class ContinuousEnv(VectorEnv):
    """:class:`ContinuousSystem` ``system`` as a vectorised environment.

    Run states are ``(N, n)`` float64 rows over ``system.variables``; observations are the policy features
    (:meth:`~ContinuousSystem.observe`); every action is available everywhere; no state is absorbing. Runs start
    uniformly in :attr:`initial_box` (the simulator draws the start states; :meth:`initial_states` gives only the
    box's two corners).

    Args:
        system: the dynamics.
        region: the initial region (a name of ``system.initial_regions``; default: the system's default).

    Raises:
        DomainError: an unknown region (naming the known ones).
    """

    def __init__(self, system: ContinuousSystem, region: str | None = None) -> None:
        self.system = system
        self.name = system.name
        self.features = tuple(system.features)
        self.actions = tuple(system.actions)
        self.labels = (UNSAFE,)
        self.region = region or system.default_initial
        #: ``(lo, hi)``, each ``(n,)``: runs start uniformly in this box
        self.initial_box: tuple[np.ndarray, np.ndarray] = system.initial_region(self.region)

    def initial_states(self) -> np.ndarray:
        """``(2, n)``: the corners ``lo`` and ``hi`` of :attr:`initial_box` (runs start anywhere in the box)."""
        return np.stack(self.initial_box)

    def observe(self, states: np.ndarray) -> np.ndarray:
        """``(N, len(features))`` float64 policy features of ``(N, n)`` states."""
        return self.system.observe(states)

    def available(self, states: np.ndarray) -> None:
        """Every action is available in every state."""
        return None

    def step(self, states: np.ndarray, actions: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``(N, n)`` successors under action indices ``(N,)`` (the dynamics are deterministic: ``u`` is unused)."""
        return self.system.step(np.asarray(states, dtype=np.float64), np.asarray(actions, dtype=np.int64))

    def label(self, name: str, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: ``unsafe`` holds in the states of the system's unsafe set."""
        if name != UNSAFE:
            raise PropertyError(
                f'unknown label "{name}"{did_you_mean(name, self.labels)}; a continuous system '
                f'has one label, "{UNSAFE}" (its unsafe set)'
            )
        return self.system.is_unsafe(states)

    def terminal(self, states: np.ndarray) -> np.ndarray:
        """No state is absorbing."""
        return np.zeros(len(states), dtype=bool)

    def describe_start(self) -> str:
        """The initial region in words, for notes (``p in [5, 9], v in [-1, 1]``)."""
        lo, hi = self.initial_box
        return ", ".join(f"{v} in [{a:g}, {b:g}]" for v, a, b in zip(self.system.variables, lo, hi, strict=True))


def unsafe_property(system: ContinuousSystem, horizon: int | None = None) -> Property:
    """``P=? [F<=k "unsafe"]``, named ``unsafe``: the probability of an unsafe state within ``k`` steps (the
    system's :attr:`~ContinuousSystem.horizon` by default; steps ``0..k``, the start state included)."""
    k = system.horizon if horizon is None else horizon
    return parse_structure(f'P=? [F<={int(k)} "{UNSAFE}"]', name=UNSAFE)
