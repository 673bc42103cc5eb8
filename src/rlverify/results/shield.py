"""A shield certified exactly: the shielded policy's value beside the unshielded one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlverify.results import Result, Summary, shown, shown_pair, solver_guarantee, total_time


@dataclass(frozen=True)
class ShieldResult(Result):
    """A shield for a policy and its certificate: the shielded policy verified exactly (``rlverify shield``;
    :func:`rlverify.exact.shield.shield_policy`).

    The shield keeps, in each decision state of the full MDP, the actions whose per-action value
    (:mod:`rlverify.exact.action_values`) is within ``threshold`` of the state's best (``kind`` ``relative``:
    ``Q <= V* + t`` for a bad event, ``Q >= V* - t`` for a goal; ``absolute``: ``Q <= t`` / ``Q >= t``; ``factor``:
    ``t Q <= V*`` / ``Q >= t V*``; the best actions always). ``value``/``lower``/``upper``/``satisfied`` are the
    shielded policy's exact value on its chain (``verify_exact``, strategy ``full``; the verdict from the certified
    bracket only), beside the unshielded policy's and the optimum over all schedulers.

    Attributes:
        optimum_is: ``min`` (a bad event: the optimum is Pmin) or ``max`` (a goal: Pmax).
        meet: whether the threshold was searched (``--meet``: every tie class of the gaps ``|Q - V*|`` probed from
            the loosest down, no monotonicity assumed, the first whose shielded value is certified to meet the bound;
            past ``--max-probes`` the rest bisected, and the result says the search was capped; every probe verified
            exactly, listed in ``probes``).
        covered_states: decision states of the MDP the shield covers; restricted_states: those where it removes
            an action the state offers.
        reachable_states: covered states the shielded policy reaches; intervened_states: those where the shield
            removes probability mass of the policy (share: ``intervened_share``); fallback_states: those where the
            policy puts no mass on a kept action (the best kept actions are used instead).
        expected_interventions: expected number of steps per run at which the shield removes mass (a step counts
            1), up to the property's step bound (all steps for an unbounded property; ``inf`` when the runs can
            be intervened on forever); expected_removed_mass: the same with each step weighted by the mass removed.
        shield_file: where the shield was written (None: not written).
    """

    optimum_is: str
    threshold_kind: str
    threshold: float
    meet: bool
    value: float
    lower: float | None
    upper: float | None
    satisfied: bool | None
    stalled_probability: float
    unshielded: float
    unshielded_lower: float | None
    unshielded_upper: float | None
    optimum: float
    optimum_lower: float | None
    optimum_upper: float | None
    covered_states: int
    restricted_states: int
    reachable_states: int
    intervened_states: int
    intervened_share: float
    fallback_states: int
    expected_interventions: float
    expected_removed_mass: float
    guarantee: str
    precision: float | None
    states: int
    choices: int
    transitions: int
    remaining_steps: int | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)
    shield_file: str | None = None
    shield: Any = field(default=None, repr=False, compare=False)

    NOT_IN_JSON: ClassVar[tuple[str, ...]] = ("shield",)

    def _summary(self) -> Summary:
        """The shielded value beside the unshielded one and the optimum, the threshold and the interventions."""
        op = "<=" if self.optimum_is == "min" else ">="
        rows = [
            ("shielded", shown(self.value) + (f" in {shown_pair(self.lower, self.upper)}" if self.lower is not None else "")),
            ("unshielded", shown(self.unshielded)),
            (f"optimum (P{self.optimum_is})", shown(self.optimum)),
        ]
        if self.satisfied is not None:
            rows.append(("satisfied", "yes" if self.satisfied else "no"))
        rows += [
            ("threshold", f"{self.threshold_kind} {shown(self.threshold, 10)}" + (" (searched: --meet)" if self.meet else "")),
            (
                "kept",
                f"Q {op} the state's best within the threshold; restricted in {self.restricted_states:,} of "
                f"{self.covered_states:,} decision states",
            ),
            (
                "interventions",
                f"{self.intervened_states:,} of {self.reachable_states:,} reached decision states "
                f"({shown(100 * self.intervened_share, 3)} %); expected per run {shown(self.expected_interventions)} "
                f"(mass removed {shown(self.expected_removed_mass)})",
            ),
            ("fallback", f"{self.fallback_states:,} reached states (no policy mass on a kept action)"),
            ("stalled", shown(self.stalled_probability)),
            ("MDP", f"{self.states:,} states, {self.choices:,} choices, {self.transitions:,} transitions"),
        ]
        if self.shield_file:
            rows.append(("shield file", self.shield_file))
        rows.append(("time", total_time(self)))
        return Summary(
            "shielded policy, verified exactly on its Markov chain",
            shown(self.value),
            solver_guarantee(self.guarantee, self.precision, self.lower, self.upper),
            tuple(rows),
        )
