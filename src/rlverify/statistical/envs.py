"""Environments the simulator runs in lockstep: their base (:class:`VectorEnv`, from
:mod:`rlverify.models.environment`), and explicit MDPs as one.

An environment advances many runs at once. Its run states are a numpy array whose first axis
is the run (``(N,)`` state indices for explicit MDPs, ``(N, 5)`` rows for Racetrack).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlverify.errors import PolicyError, PropertyError, did_you_mean
from rlverify.models.dynamics import choice_table
from rlverify.models.environment import RunState, VectorEnv
from rlverify.models.explicit import ExplicitModel
from rlverify.models.graph import steps_to
from rlverify.statistical.properties import StateFormula

__all__ = ["ExplicitEnv", "VectorEnv", "hopeless_states"]


class ExplicitEnv(VectorEnv):
    """An explicit MDP (:class:`~rlverify.models.ExplicitModel`) as a vectorised environment.

    A thin adapter over :class:`~rlverify.models.dynamics.ChoiceTable` (the exact engine's view of
    the model): run states are ``(N,)`` int64 state indices, observations the state valuations,
    and action ``i`` is ``actions[i]``. In a state where the chosen action has no choice the run
    stalls (see the simulator). A state whose choices are all unlabelled takes its single choice
    without asking the policy (``forced``), as in the exact engine.

    Args:
        model: the explicit MDP.
        name: for messages and results.
        actions: the agent-visible action names (default: the model's labelled actions, in the
            model's order). Pass the symbolic model's actions when ``model`` is a property-directed
            build of it: an action the build lacks is then never available, not unknown.

    Raises:
        PolicyError: a choice no policy over action labels can pick (see :func:`~rlverify.models.dynamics.choice_table`).
    """

    def __init__(self, model: ExplicitModel, *, name: str = "", actions: Sequence[str] | None = None) -> None:
        self.model = model
        self.name = name or "explicit model"
        self.features = tuple(model.variables)
        self.table = choice_table(model, actions)
        self.actions = self.table.actions
        self._labels = {}
        for key, mask in model.labels.items():
            self._labels[model.label_aliases.get(key, key)] = mask
            self._labels.setdefault(key, mask)
        self.labels = tuple(self._labels)

    def initial_states(self) -> np.ndarray:
        return np.asarray(self.model.initial_states, dtype=np.int64)

    def observe(self, states: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``(N, d)`` valuations of the ``(N,)`` states: float64, or written into ``out`` (``(N, d)`` float array)."""
        if out is None:
            return self.model.valuations[states].astype(np.float64)
        out[...] = self.model.valuations[states].astype(np.float64)  # through float64, as a policy would convert
        return out

    def available(self, states: np.ndarray) -> np.ndarray:
        return self.table.available(states)

    def step(self, states: np.ndarray, actions: np.ndarray, u: np.ndarray) -> np.ndarray:
        choice = self.table.taken(states, actions)
        if (choice < 0).any():
            raise PolicyError("internal: stepping with an unavailable action")  # the simulator stalls these first
        return self.table.sample(choice, u)

    def self_loops(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: the (available or forced) choice returns to the same state with probability 1."""
        choice = self.table.taken(states, actions)
        return (choice >= 0) & self.table.self_loop(np.maximum(choice, 0))

    def forced(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: the state's choices are all unlabelled (its single choice is taken; the policy is not asked)."""
        return self.table.forced[states] >= 0

    def describe(self, state: RunState) -> dict[str, int]:
        """The valuation of ``state`` (for messages)."""
        return self.model.valuation_dict(int(state))

    def label(self, name: str, states: np.ndarray) -> np.ndarray:
        mask = self._labels.get(name)
        if mask is None:
            raise PropertyError(
                f'unknown label "{name}"{did_you_mean(name, self.labels)}; labels: ' + ", ".join(f'"{x}"' for x in self.labels)
            )
        return mask[states]

    def terminal(self, states: np.ndarray) -> np.ndarray:
        return self.table.absorbing[states]

    def steps_to(self, left: StateFormula, right: StateFormula) -> np.ndarray:
        """``(S,)`` float64: the least number of steps from each state to a ``right`` state along states where
        ``left`` holds and ``right`` does not (absorbing ones excepted), over every choice of the MDP whatever the
        policy (graph analysis: positive transitions only); ``inf`` where no ``right`` state can be reached at all
        (``Pmax(left U right) = 0``: no policy, no chance reaches it from there)."""
        states = np.arange(self.model.num_states)
        target = right.evaluate(self, states)
        through = left.evaluate(self, states) & ~target & ~self.terminal(states)
        return steps_to(self.model.transitions, self.model.row_groups, target, through)


def hopeless_states(env: ExplicitEnv, left: StateFormula, right: StateFormula) -> StateFormula:
    """The states from which ``left U right`` cannot hold under any policy (``Pmax = 0``, :meth:`ExplicitEnv.steps_to`)
    as a state formula: a run there is decided false at once (it could only wander until ``max_steps``)."""
    return StateFormula("mask", (np.isinf(env.steps_to(left, right)),))
