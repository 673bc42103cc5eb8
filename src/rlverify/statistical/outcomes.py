"""Per-run outcomes of a simulation: the codes, the result arrays, and the arrays a batch fills as its runs are decided
(shared by the lockstep simulator, :mod:`.engine`, and the episode simulator of Gymnasium environments, :mod:`.episodes`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlverify.models.environment import VectorEnv
from rlverify.statistical.step import Moves, Verdicts

#: run outcome codes
SATISFIED, VIOLATED, UNDECIDED = 1, 0, -1


@dataclass(frozen=True)
class EpisodeReturn:
    """What an episode's return sums (Gymnasium episodes, :mod:`.episodes`): ``sum_t discount**t * r_t`` over the
    steps the episode takes before it is decided.

    Attributes:
        reward: ``""`` for the environment's reward, else the ``info`` entry summed (e.g. ``"cost"``).
        discount: in ``(0, 1]``.
    """

    reward: str = ""
    discount: float = 1.0


@dataclass(frozen=True)
class RunOutcomes:
    """Per-run results of a simulation.

    Attributes:
        outcome: ``(N,)`` int8, 1 satisfied / 0 violated / -1 undecided.
        stalled: ``(N,)`` bool, the run stalled (outcome 0).
        steps: ``(N,)`` int64, steps taken (policy decisions).
        recorded: label name -> ``(N,)`` bool value in the state where the run was decided/stopped.
        hopeless: ``(N,)`` bool, the run was decided violated because it reached a state from which
            ``right`` cannot be reached under any policy (outcome 0; the property's ``hopeless`` states).
        stuck: ``(N,)`` bool, the run was decided violated because it would stay in its state forever (its policy
            surely takes an action that surely leads back; outcome 0): it never decides the race, so a heat
            map counts it with the runs cut at ``max_steps`` as *never decided*.
    """

    outcome: np.ndarray
    stalled: np.ndarray
    steps: np.ndarray
    recorded: dict[str, np.ndarray]
    hopeless: np.ndarray
    stuck: np.ndarray
    #: ``(N,)`` float64 each run's return (:class:`EpisodeReturn`), None when none was asked for
    returns: np.ndarray | None = None


@dataclass
class OutcomeArrays:
    """Per-run outcomes of runs being simulated (see :class:`RunOutcomes`)."""

    outcome: np.ndarray
    stalled: np.ndarray
    steps: np.ndarray  # set when a run is decided: the step count t at that moment
    recorded: dict[str, np.ndarray]
    hopeless: np.ndarray
    stuck: np.ndarray
    returns: np.ndarray | None = None

    @classmethod
    def empty(cls, n: int, record: tuple[str, ...], *, returns: bool = False) -> OutcomeArrays:
        return cls(
            np.full(n, UNDECIDED, dtype=np.int8),
            np.zeros(n, dtype=bool),
            np.zeros(n, dtype=np.int64),
            {name: np.zeros(n, dtype=bool) for name in record},
            np.zeros(n, dtype=bool),
            np.zeros(n, dtype=bool),
            np.zeros(n) if returns else None,
        )

    def outcomes(self) -> RunOutcomes:
        """These arrays as the simulation's result."""
        return RunOutcomes(self.outcome, self.stalled, self.steps, self.recorded, self.hopeless, self.stuck, self.returns)

    def put(self, a: int, b: int, part: OutcomeArrays) -> None:
        """The outcomes of runs ``a .. b - 1``, simulated as ``part``."""
        self.outcome[a:b], self.stalled[a:b], self.steps[a:b], self.hopeless[a:b], self.stuck[a:b] = (
            part.outcome,
            part.stalled,
            part.steps,
            part.hopeless,
            part.stuck,
        )
        for name, values in part.recorded.items():
            self.recorded[name][a:b] = values

    def finish(
        self, env: VectorEnv, active: np.ndarray, states: np.ndarray, verdicts: Verdicts, t: int, *, everything: bool
    ) -> np.ndarray | None:
        """Record the runs ``active`` (in ``states``) that are decided at step ``t`` (``everything``: all of them,
        the undecided ones as undecided); returns which are (a mask over ``active``), None when none is."""
        right, violated = verdicts.right, verdicts.violated
        if verdicts.hopeless is not None and verdicts.hopeless.any():
            self.hopeless[active[verdicts.hopeless]] = True
        done = np.ones(len(active), dtype=bool) if everything else right | violated
        if not done.any():
            return None
        idx = active[done]
        self.outcome[idx] = np.where(right[done], SATISFIED, np.where(violated[done], VIOLATED, UNDECIDED))
        self.steps[idx] = t
        for name in self.recorded:
            self.recorded[name][idx] = env.label(name, states[done])
        return done

    def stop(self, env: VectorEnv, active: np.ndarray, states: np.ndarray, moves: Moves, t: int) -> None:
        """Record the runs ``active`` (in ``states``) that stalled or got stuck in step ``t`` (violated)."""
        if moves.stalled is not None:
            bad = active[moves.stalled]
            self.stalled[bad] = True
            self.outcome[bad] = VIOLATED
            self.steps[bad] = t
            for name in self.recorded:
                self.recorded[name][bad] = False
        if moves.stuck is not None:  # surely back to the same state forever: `right` (false now) never holds
            idx = active[moves.stuck]
            self.outcome[idx] = VIOLATED
            self.stuck[idx] = True
            self.steps[idx] = t
            for name in self.recorded:
                self.recorded[name][idx] = env.label(name, states.take(moves.stuck, axis=0))
