"""Failure paths: the most probable ways a policy reaches a bad event (exact)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlverify.results import Result, Summary, jsonable, shown


@dataclass(frozen=True)
class StepAction:
    """One action of a path's step that leads to the step's next state.

    Attributes:
        action: the policy's action name (None for a forced step: a lone unlabelled choice the policy
            is not asked about).
        choice: the model's choice it takes: its label, with its command name where the model has one.
        weight: the probability the chain follows it in this state: pi(a|s) (one-hot argmax in the
            deterministic mode; rescaled with ``unavailable='renormalize'``; 1 for a forced step).
        transition: T(s, a, s'), the model's probability of the next state under this choice.
        probability: ``weight * transition``; a step's actions sum to its ``probability``.
    """

    action: str | None
    choice: str
    weight: float
    transition: float
    probability: float


@dataclass(frozen=True)
class PathStep:
    """One state of a path and the transition out of it.

    Attributes:
        state: the state's valuation (variable -> value, booleans as 0/1).
        policy: the policy's distribution over its actions at this state (as the policy gives it,
            normalised); None at the last state and at forced steps.
        actions: the actions leading to the next state (several when they share a successor); empty at
            the last state.
        probability: the chain's transition probability to the next state (None at the last state).
    """

    state: dict[str, Any]
    policy: dict[str, float] | None
    actions: tuple[StepAction, ...]
    probability: float | None


@dataclass(frozen=True)
class FailurePath:
    """A path of a policy-induced chain from the initial state to its first target state.

    Attributes:
        probability: the product of its transition probabilities (exact up to float rounding).
        steps: its states in order, ``length + 1`` of them.
    """

    probability: float
    steps: tuple[PathStep, ...]

    @property
    def length(self) -> int:
        """Number of transitions."""
        return len(self.steps) - 1


@dataclass(frozen=True)
class FailurePaths(Result):
    """The K most probable paths to a property's target on a policy-induced chain (exact, not sampled).

    Paths may revisit states; the property's value is the sum over all its paths, so ``covered <= value``.

    Attributes:
        k: the number of paths asked for (the property explained: ``provenance.property``).
        paths: most probable first (ties in any order).
        value: the property's value (Storm, as in :class:`ExactResult`).
        covered: the sum of the listed paths' probabilities; share: ``covered / value`` (None when
            the value is 0).
        exhausted: fewer than ``k`` paths exist, and all are listed.
        bound: the step bound (None: unbounded); mode: the policy mode of the chain.
        variables: the model's variables; ranges: each variable's (min, max) over the chain's states.
        provenance: timings (seconds per phase: build, check, search, policy, describe, total), ...
        note: why fewer than ``k`` paths are listed although more exist (the search's memory cap, or the listed
            paths' step limit), else None.
    """

    k: int
    paths: tuple[FailurePath, ...]
    value: float
    covered: float
    share: float | None
    exhausted: bool
    bound: int | None
    mode: str
    variables: tuple[str, ...] = ()
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    note: str | None = None

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """Each path as ``{"probability", "steps": [...], "length"}``."""
        return {**own, "paths": [{**jsonable(path), "length": path.length} for path in self.paths]}

    def _summary(self) -> Summary:
        """How much of the value the listed paths cover, and the first few paths."""
        share = f" = {100 * self.share:.3g}% of the value {shown(self.value)}" if self.share is not None else ""
        rows = [("paths", f"{len(self.paths)} of {self.k} asked" + (" (all that exist)" if self.exhausted else ""))]
        if self.bound is not None:
            rows.append(("step bound", str(self.bound)))
        for rank, path in enumerate(self.paths[:5], 1):
            rows.append((f"path {rank}", f"probability {shown(path.probability)}, {path.length} steps"))
        if len(self.paths) > 5:
            rows.append(("", f"... {len(self.paths) - 5} more"))
        if self.note:
            rows.append(("note", self.note))
        return Summary(
            f"the {self.k} most probable paths to the target ({self.mode} policy)",
            f"{shown(self.covered)} covered{share}",
            "exact: paths of the policy's Markov chain with their probabilities (enumerated, not sampled)",
            tuple(rows),
        )
