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
    ``"direct"`` (Storm's Eigen solver: no convergence heuristic, but not exact; measured relative
    error 1.6e-7 on Freeway; ``lower``/``upper`` None) or ``"unsound"`` (plain value
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
        untaken_choices: choices the policy names no action for (it never takes them), as name ->
            number of policy-reachable states offering them; a label, or ``label (command)``, or a
            command name for unlabelled commands (see :mod:`rlverify.models.commands`).
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
    #: what the user should know before trusting the number (a policy verified outside the parameters
    #: it was trained for, a MaskablePPO policy with unavailable='stall', ...); the CLI prints them
    warnings: list[str] = field(default_factory=list)
    untaken_choices: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (per-state arrays left out)."""
        d = asdict(self)
        d.pop("state_values")
        d.pop("state_valuations")
        d.pop("state_values_min")
        d["variables"] = list(self.variables)
        return d


@dataclass(frozen=True)
class StatisticalResult:
    """An estimate of ``P(path property)`` from simulated runs (a *statistical* guarantee, not a bound).

    The guarantee: with probability at least ``confidence`` the true value lies in ``interval``
    (methods ``okamoto``/``adaptive``/``clopper-pearson``; ``wilson`` is approximate). Undecided
    runs (still open after ``max_steps``) widen the interval: its lower end counts them as
    violated, its upper end as satisfied; ``estimate`` counts them as violated. Stalled runs
    count as violated.

    Attributes:
        property: as given.
        method: ``okamoto``, ``adaptive``, ``clopper-pearson``, ``wilson`` or ``sprt``.
        estimate: fraction of runs that satisfied the property.
        interval: ``(low, high)``.
        confidence: ``1 - delta``; for the SPRT ``1 - max(alpha, beta)`` (its error bounds; its
            interval is then informative only: a Clopper–Pearson interval after a sequential stop).
        runs: simulated runs; successes: runs satisfying the property.
        undecided: runs undecided after ``max_steps``; stalled: runs whose policy chose an unavailable action.
        seed: the seed (same seed, same result, whatever the batch size).
        epsilon, delta: the requested precision (``epsilon`` None for interval methods with fixed runs).
        decision: SPRT only: ``"H0"`` (``p >= theta + indifference``), ``"H1"`` (``p <= theta - indifference``) or None
            (no decision within ``max_runs``).
        threshold, comparison: of a threshold property (``P>=0.9 [...]``) or the SPRT's ``theta``.
        satisfied, verdict: whether the threshold property holds — by the SPRT, or else from the
            interval at ``confidence``: ``"yes"`` (the whole interval satisfies it), ``"no"`` (none of
            it does) or ``"undecided"`` (it straddles the threshold; ``satisfied`` None).
        decisions: policy decisions made (steps over all runs); timings: seconds per phase.
        versions: package versions.
        untaken_choices: choices of the model's decision states the policy names no action for (it
            never takes them): name -> number of states of the built model offering them.
    """

    property: str
    method: str
    estimate: float
    interval: tuple[float, float]
    confidence: float
    runs: int
    successes: int
    undecided: int
    stalled: int
    seed: int
    epsilon: float | None
    delta: float
    max_steps: int
    mode: str
    decisions: int
    decision: str | None = None
    satisfied: bool | None = None
    threshold: float | None = None
    comparison: str | None = None
    verdict: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    policy: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    #: as ExactResult.warnings
    warnings: list[str] = field(default_factory=list)
    untaken_choices: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (keys estimate, interval, confidence, method, runs, undecided, stalled, seed, timings, ...)."""
        d = asdict(self)
        d["interval"] = list(self.interval)
        return d


@dataclass(frozen=True)
class HeatmapResult:
    """Goal and crash probability per start cell (velocity 0) of a Racetrack map, estimated by simulation.

    Every per-cell interval holds with probability ``confidence`` (a per-cell guarantee, not a
    simultaneous one over all cells).

    Attributes:
        cells: ``(M, 2)`` int64 ``(x, y)`` start cells.
        goal, crash: ``(M,)`` estimated probabilities of ``!"crashed" U "goal"`` and of crashing.
        goal_interval, crash_interval: ``(M, 2)`` intervals.
        runs: ``(M,)`` runs per cell; undecided, stalled: ``(M,)`` counts.
        optimal: ``(M,)`` Storm's ``Pmax=? [F "goal"]`` per cell (when computed), gap = optimal - goal;
            optimal_numerics: how Storm computed it (plain value iteration: a convergence heuristic,
            not a guaranteed bound; Storm's sound methods do not finish on Racetrack MDPs in minutes).
        grid: ``(rows, cols)`` cell codes of the map (for plotting).
    """

    benchmark: str
    policy: str | None
    noise: float
    cells: np.ndarray
    goal: np.ndarray
    crash: np.ndarray
    goal_interval: np.ndarray
    crash_interval: np.ndarray
    runs: np.ndarray
    undecided: np.ndarray
    stalled: np.ndarray
    grid: np.ndarray
    method: str
    confidence: float
    epsilon: float | None
    seed: int
    max_steps: int
    decisions: int
    optimal: np.ndarray | None = None
    optimal_numerics: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def gap(self) -> np.ndarray | None:
        """``(M,)`` optimal goal probability minus the policy's estimate (None without ``optimal``)."""
        return None if self.optimal is None else self.optimal - self.goal

    def to_json(self) -> dict[str, Any]:
        """Per-cell values as lists plus the settings."""
        out: dict[str, Any] = {
            "benchmark": self.benchmark, "policy": self.policy, "noise": self.noise, "method": self.method,
            "confidence": self.confidence, "epsilon": self.epsilon, "seed": self.seed, "max_steps": self.max_steps,
            "decisions": self.decisions, "timings": self.timings, "optimal_numerics": self.optimal_numerics,
            "cells": [
                {"x": int(x), "y": int(y), "goal": float(g), "goal_interval": [float(a), float(b)], "crash": float(c),
                 "crash_interval": [float(e), float(f)], "runs": int(r), "undecided": int(u), "stalled": int(s),
                 **({"optimal": float(self.optimal[i])} if self.optimal is not None else {})}
                for i, ((x, y), g, (a, b), c, (e, f), r, u, s) in enumerate(zip(
                    self.cells, self.goal, self.goal_interval, self.crash, self.crash_interval, self.runs,
                    self.undecided, self.stalled))
            ],
        }
        return out


@dataclass(frozen=True)
class PartBound:
    """One part of the refined initial region and the bound from it.

    Attributes:
        lo, hi: template bounds of the part (along ``AbstractionResult.template_axes``).
        probability_lower, probability_upper: sound action-probability bounds over the part.
        bound: sound upper bound on ``Pr(F<=k fail)`` from every state of the part.
    """

    lo: tuple[float, ...]
    hi: tuple[float, ...]
    probability_lower: tuple[float, ...]
    probability_upper: tuple[float, ...]
    bound: float


@dataclass(frozen=True)
class Timings:
    """Wall time (s) of each phase."""

    bounds: float
    refinement: float
    successors: float
    solving: float
    total: float


@dataclass(frozen=True)
class AbstractionResult:
    """Result of :func:`verify_abstraction`: a sound upper bound on the failure probability.

    Attributes:
        guarantee: always ``"sound upper bound"``: for every state ``s`` of the initial region,
            ``Pr_s(F<=k fail) <= upper_bound`` (and ``<=`` the bound of the part containing ``s``).
        upper_bound: the max-max value of the initial abstract state.
        maxmin_value: the max-min value (information only; not a bound).
        parts: the refined initial region with per-part bounds.
        n_abstract_states: IMDP states (including the fail sink).
        n_polyhedra: refined parts over all abstract states (the paper's "num. poly").
        n_containment_merges: successors merged into visited states (the paper's "num. visited").
        n_shared_successors: successors that were exactly an existing abstract state and share it
            (lossless, with or without containment; also actions of one part with the same successor).
        n_unrefined_states: abstract states not refined because the policy's choice cannot matter
            there: a last step that is safe whatever happens, and with ``refine_everywhere=False`` also
            states where every action leads to the same successor (or, at the last step, outcome).
        n_choices, n_transitions: IMDP size.
        n_unresolved_parts: parts accepted with spread above ``phi`` (minimum size or budget).
        n_milp_parts: parts bounded by MILP.
        timings: :class:`Timings`.
        options: the :class:`AbstractionOptions` used; seed: their seed.
        benchmark, policy: names; variables, actions; template_axes: the axes of the domain.
        initial_lo, initial_hi: the initial box.
        versions: package versions (name, version).
    """

    guarantee: str
    upper_bound: float
    maxmin_value: float
    parts: tuple[PartBound, ...]
    n_abstract_states: int
    n_polyhedra: int
    n_containment_merges: int
    n_shared_successors: int
    n_unrefined_states: int
    n_choices: int
    n_transitions: int
    n_unresolved_parts: int
    n_milp_parts: int
    timings: Timings
    options: Any  # rlverify.abstraction.AbstractionOptions
    seed: int
    benchmark: str
    policy: str
    variables: tuple[str, ...]
    actions: tuple[str, ...]
    template_axes: tuple[tuple[float, ...], ...]
    initial_lo: tuple[float, ...]
    initial_hi: tuple[float, ...]
    versions: tuple[tuple[str, str], ...]
    imdp: Any = field(default=None, repr=False, compare=False)  # rlverify.abstraction.imdp.IMDP

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (without the IMDP arrays)."""
        d = asdict(self)
        d.pop("imdp", None)
        d["versions"] = dict(self.versions)
        return _plain(d)

    to_dict = to_json


def versions() -> dict[str, str]:
    """Versions of rlverify and the components that decide the numbers."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("rlverify", "stormpy", "numpy", "scipy", "onnxruntime", "highspy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def _plain(obj: Any) -> Any:
    """``obj`` with numpy arrays and scalars turned into lists and Python numbers (for JSON)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
