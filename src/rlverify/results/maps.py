"""Per-state risk maps, robustness to perturbed dynamics and interval results (exact)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from rlverify.choices import Guarantee, Optimum
from rlverify.figures import MapFigure, MapPanel, MapShade
from rlverify.results import Result, Summary, grid_svg, shown, shown_pair, solver_guarantee, total_time


@dataclass(frozen=True)
class RiskMap(Result):
    """Per-state values of a property under a policy and the optimum over all policies, on two variables.

    Exact per state (Storm; ``guarantee`` as in :class:`ExactResult`), then aggregated per cell
    ``(x, y)`` with ``agg`` over the states whose other variables differ. ``value`` is over the
    states of the policy's chain (reachable under the policy); ``optimum`` is Storm's Pmin/Pmax
    (Rmin/Rmax) per state of the full MDP (over all policies), read at the same states, so the panels
    compare state by state; ``optimum_all`` aggregates the optimum over every MDP state of the cell,
    including those the policy never reaches. ``regret`` is per state ``value - optimum`` for
    ``optimum="min"`` (a bad event) and ``optimum - value`` for ``"max"`` (a goal): >= 0 up to the
    solver's precision, never clipped. Both builds are property-directed: target states may be
    absorbing, and a step-bounded property's state value counts its bound from that state.

    Attributes:
        mode: as verified (model, policy, property: the provenance's); optimum: ``"min"`` or ``"max"``;
            optimum_source: where that choice came from (``"option"`` or the property's comparison).
        agg: ``max``, ``min`` or ``mean`` (unweighted over states); where: the filter, or None.
        x, y: the map's variables; x_values ``(W,)``, y_values ``(H,)`` int64: the axes.
        value, optimum_value, regret, optimum_all: ``(H, W)`` float64, row ``i`` is ``y = y_values[i]``;
            NaN where the cell has no state of that set (after the filter).
        policy_states, mdp_states: ``(H, W)`` int64 states per cell (after the filter).
        initial_value, initial_optimum, initial_regret: at the initial state (no filter).
        states: counts: ``mdp`` (full MDP), ``policy`` (the policy's chain, without the ``stalled`` sink),
            ``mdp_only`` (in the MDP, never reached by the policy), ``mdp_filtered``, ``policy_filtered``.
        stalled_probability: of the policy's chain (see :class:`ExactResult`).
        variables: all state variables; state_valuations ``(P, V)`` int64, state_value, state_optimum
            ``(P,)`` float64: per state of the policy's chain (before the filter).
    """

    mode: str
    optimum: str
    optimum_source: str
    agg: str
    where: str | None
    x: str
    y: str
    x_values: np.ndarray
    y_values: np.ndarray
    value: np.ndarray
    optimum_value: np.ndarray
    regret: np.ndarray
    optimum_all: np.ndarray
    policy_states: np.ndarray
    mdp_states: np.ndarray
    initial_value: float
    initial_optimum: float
    initial_regret: float
    states: dict[str, int]
    guarantee: Guarantee
    GUARANTEED: ClassVar[bool] = True
    precision: float | None
    stalled_probability: float
    variables: tuple[str, ...] = ()
    state_valuations: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_value: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_optimum: np.ndarray | None = field(default=None, repr=False, compare=False)

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """Settings, counts and the grid: ``grid[name][i][j]`` is the cell ``x = x_values[j]``,
        ``y = y_values[i]`` (None where the cell has no state of that set; infinite rewards as "Infinity")."""
        grids = {
            "value": self.value,
            "optimum": self.optimum_value,
            "regret": self.regret,
            "optimum_all_states": self.optimum_all,
            "policy_states": self.policy_states,
            "mdp_states": self.mdp_states,
        }
        return {
            "mode": self.mode,
            "optimum": self.optimum,
            "optimum_source": self.optimum_source,
            "agg": self.agg,
            "where": self.where,
            "x": self.x,
            "y": self.y,
            "x_values": self.x_values,
            "y_values": self.y_values,
            "initial": {"value": self.initial_value, "optimum": self.initial_optimum, "regret": self.initial_regret},
            "states": dict(self.states),
            "guarantee": self.guarantee,
            "precision": self.precision,
            "stalled_probability": self.stalled_probability,
            "variables": list(self.variables),
            "grid": grids,
        }

    def figure(self, *, origin: str = "lower") -> MapFigure:
        """The three panels (policy value, optimum, regret) as a :class:`MapFigure` (``origin="upper"``:
        the first y value at the top, as grid worlds are printed)."""
        probability = self.property.lstrip().startswith("P")
        opt = {("min", True): "Pmin", ("max", True): "Pmax", ("min", False): "Rmin", ("max", False): "Rmax"}[
            (self.optimum, probability)
        ]
        single = bool((self.policy_states <= 1).all() and (self.mdp_states <= 1).all())  # one state per cell: no aggregate
        view = ("each cell: one state" if single else f"{self.agg} over the other variables") + (
            f", where {self.where}" if self.where else ""
        )
        title = (
            f"{self.model}: {self.property}\npolicy {self.policy} ({self.mode}); initial state: value "
            f"{self.initial_value:.4g}, {opt} {self.initial_optimum:.4g}\n{view}"
        )
        return MapFigure(
            panels=self._panels(probability, opt, "" if single else f"{self.agg} "),
            x_label=self.x,
            y_label=self.y,
            x_values=self.x_values,
            y_values=self.y_values,
            title=title,
            shades=self._shades(),
            origin=origin,
            note=self._figure_note(single),
        )

    def _panels(self, probability: bool, opt: str, agg: str) -> tuple[MapPanel, ...]:
        """The policy's value, the optimum and the regret (``agg``: the aggregate's name and a space, or "")."""
        bad = self.optimum == Optimum.MIN
        cmap = ("RdYlGn_r" if bad else "RdYlGn") if probability else "viridis"
        vmin, vmax = (0.0, 1.0) if probability else (None, None)
        what = "probability" if probability else "expected reward"
        return (
            MapPanel(f"policy: {agg}{what}", self.value, cmap, vmin, vmax, f"{what} under the policy"),
            MapPanel(f"optimum: {agg}{opt} (all policies)", self.optimum_value, cmap, vmin, vmax, f"{opt} per state"),
            MapPanel(
                f"regret: {agg + 'of ' if agg else ''}" + ("value - " + opt if bad else opt + " - value"),
                self.regret,
                "magma_r",
                0.0,
                None,
                f"value - {opt}: what the policy gives away" if bad else f"{opt} - value: what the policy leaves",
            ),
        )

    def _shades(self) -> tuple[MapShade, ...]:
        """Cells with no state (after the filter), and cells whose states the policy never reaches."""
        no_state = self.mdp_states == 0
        unreached = (self.mdp_states > 0) & (self.policy_states == 0)
        return (
            MapShade(no_state, "no state" + (f" with {self.where}" if self.where else ""), "#ffffff", "////"),
            MapShade(unreached, "states the policy never reaches", "#b0b0b0"),
        )

    def _figure_note(self, single: bool) -> str:
        """The states the map covers, and what a cell shows."""
        s = self.states
        return (
            f"states: {s['policy']:,} in the policy's chain, {s['mdp']:,} in the full MDP ({s['mdp_only']:,} never "
            f"reached by the policy); after the filter {s['policy_filtered']:,} / {s['mdp_filtered']:,}. "
            + (
                "Each cell: its one state."
                if single
                else f"Each cell: the {self.agg} over its states of the per-state values (regret per state, then the "
                f"{self.agg})."
            )
        )

    def _summary(self) -> Summary:
        """The initial state's value, optimum and regret, the map's axes and the states it covers."""
        opt = ("P" if self.property.lstrip().startswith("P") else "R") + self.optimum
        s = self.states
        rows = [
            (f"{opt} (all policies)", shown(self.initial_optimum)),
            ("regret", shown(self.initial_regret)),
            (
                "map",
                f"x = {self.x}, y = {self.y}, {self.agg} over the other variables"
                + (f", where {self.where}" if self.where else ""),
            ),
            ("states", f"{s.get('policy', 0):,} in the policy's chain, {s.get('mdp', 0):,} in the MDP"),
            ("stalled", shown(self.stalled_probability)),
            ("time", total_time(self)),
        ]
        picture = ""
        if self.property.lstrip().startswith("P"):  # probabilities: a colour scale over [0, 1]
            picture = grid_svg(
                self.value,
                self.x_values,
                self.y_values,
                x=self.x,
                y=self.y,
                label=f"policy: {self.agg} probability per ({self.x}, {self.y}) cell",
                high_is_bad=self.optimum == "min",
            )
        return Summary(
            f"risk map: per-state values under the policy and the optimum ({self.mode} policy)",
            shown(self.initial_value),
            solver_guarantee(self.guarantee, self.precision),
            tuple(rows),
            picture,
        )


@dataclass(frozen=True)
class RobustnessResult(Result):
    """The property's exact range when an adversary perturbs the policy's observations (``rlverify robust``).

    ``pmax``/``pmin`` are Storm's Pmax/Pmin of the adversarial MDP (one choice per distinct policy
    distribution over the admissible observations of a state): the exact worst and best case over
    every adversary (for step-bounded properties the adversary may depend on the step), up to the solver's ``guarantee``
    (as :class:`ExactResult`). ``worst`` is ``pmax`` when ``worst_is == "max"`` (the property names
    a failure), else ``pmin``; ``nominal`` is the unperturbed chain's value (as ``verify_exact``).

    Attributes:
        epsilon, norm, perturbed: the budget, ``linf``/``l1``, and the features the adversary may change.
        attack, attack_method: the value of the chain of one FGSM perturbation per state (None when the
            policy has no network); it always lies in ``[pmin, pmax]``.
        states, choices, transitions: size of the adversarial MDP (reachable part).
        decision_states, perturbations_per_state: (state, perturbation) pairs considered;
            observations: distinct perturbed observations the policy was evaluated on (one batch).
        changed_states: reachable decision states where some perturbation changes the argmax action
            (their valuations in ``changed_valuations`` ``(n, V)`` int64, ``variables`` order).
        worst_perturbations: per reachable decision state where a perturbation helps the adversary,
            ``{"state", "observed", "offset", "gain"}`` (the shown values of the perturbed features;
            gain: the one-step lookahead on the worst-case values over the nominal observation),
            largest gain first.
    """

    epsilon: int
    norm: str
    perturbed: tuple[str, ...]
    worst_is: str
    nominal: float
    pmax: float
    pmin: float
    worst: float
    best: float
    attack: float | None
    attack_method: str | None
    states: int
    choices: int
    transitions: int
    decision_states: int
    perturbations_per_state: int
    observations: int
    changed_states: int
    guarantee: Guarantee
    GUARANTEED: ClassVar[bool] = True
    precision: float
    changed_valuations: np.ndarray | None = field(default=None, repr=False, compare=False)
    worst_perturbations: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)
    variables: tuple[str, ...] = ()

    #: worst perturbations and changed states listed in JSON (largest gain first; the total is given)
    LISTED: ClassVar[int] = 20

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """The :attr:`LISTED` largest-gain worst perturbations and changed states (valuations by variable)."""
        vals = self.changed_valuations if self.changed_valuations is not None else np.zeros((0, len(self.variables)))
        return {
            **own,
            "worst_perturbations": self.worst_perturbations[: self.LISTED],
            "worst_perturbations_total": len(self.worst_perturbations),
            "changed_valuations": [dict(zip(self.variables, map(int, v), strict=True)) for v in vals[: self.LISTED]],
        }

    def _summary(self) -> Summary:
        """The worst and best case over the adversaries, the nominal value, the FGSM attack and the changes."""
        rows = [
            ("nominal", shown(self.nominal)),
            (f"worst (P{self.worst_is})", shown(self.worst)),
            (f"best (P{'min' if self.worst_is == 'max' else 'max'})", shown(self.best)),
            ("FGSM attack", shown(self.attack)),
            ("argmax changes", f"{self.changed_states:,} of {self.decision_states:,} decision states"),
            ("adversarial MDP", f"{self.states:,} states, {self.choices:,} choices, {self.transitions:,} transitions"),
            ("time", total_time(self)),
        ]
        return Summary(
            f"exact range over every observation perturbation ({self.norm} epsilon {self.epsilon} "
            f"on {', '.join(self.perturbed)})",
            f"{shown(self.worst)} worst case",
            "exact over every adversary; " + solver_guarantee(self.guarantee, self.precision),
            tuple(rows),
        )


@dataclass(frozen=True)
class IntervalResult(Result):
    """The property's range over every model whose transition probabilities are within ``delta`` of the model's.

    ``lower``/``upper``: certified bounds of the min and max over the interval chain, which contains every chain the
    policy induces on such a model (a sound relaxation: per-action uncertainty is joined into interval rows).
    ``guarantee`` says how they were computed (rlverify's robust value iteration, rounded outwards).

    Attributes:
        delta, relative: the error (absolute ``p ± delta``, or ``p (1 ± delta)``).
        uncertain_actions: the labels/command names whose choices are uncertain (None: all).
        nominal: the value on the model as given.
        states, transitions: size of the interval chain.
        clipped: transition probabilities of the chain's choices whose interval left [0, 1] and was clipped.
        lower, upper: certified (rounded outwards), and containing the nominal value's certified bracket.
        satisfied: for threshold properties, whether the bound holds on every model within ``delta`` (True),
            on none (False), or is undecided (None; also for ``P=?``), from ``lower``/``upper`` alone.
    """

    delta: float
    relative: bool
    uncertain_actions: tuple[str, ...] | None
    nominal: float
    lower: float
    upper: float
    states: int
    transitions: int
    clipped: int
    guarantee: str
    precision: float
    satisfied: bool | None = None

    def _summary(self) -> Summary:
        """The range over the models within ``delta``, the nominal value and the interval chain's size."""
        rows = [
            ("nominal", shown(self.nominal)),
            (
                "model error",
                f"{'relative' if self.relative else 'absolute'} delta {shown(self.delta)}"
                + (f" on {', '.join(self.uncertain_actions)}" if self.uncertain_actions else ""),
            ),
            (
                "interval chain",
                f"{self.states:,} states, {self.transitions:,} transitions; {self.clipped:,} intervals clipped",
            ),
            ("time", total_time(self)),
        ]
        return Summary(
            "range over every model within the transition error",
            shown_pair(self.lower, self.upper),
            "range over a sound relaxation (the interval chain contains every such model's chain); numerics: "
            + self.guarantee,
            tuple(rows),
        )


# ------------------------------------------------------------------------------------------------ explanations
