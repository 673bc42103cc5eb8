"""Explanations of a policy: feature effects, a verified decision tree, critical states (exact)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlverify.choices import Guarantee
from rlverify.figures import Figure, feature_effects_figure
from rlverify.results import Result, Summary, shown, solver_guarantee, total_time


@dataclass(frozen=True)
class FeatureEffect:
    """What one policy feature does to the property's value (:class:`FeatureEffects`).

    Attributes:
        feature: its name; reference: the value it is fixed to (its value in the initial state).
        fixed: the exact value when the policy is shown ``reference`` instead of the feature's value in every state.
        range_values: with ``reference="range"``: the exact value for each value of the feature's declared range
            (value -> exact value); worst_fixed, worst_at: the worst of them and the value giving it.
        perturbed_worst, perturbed_best: the exact worst and best case when an adversary shifts this feature alone
            by at most 1 in each state (the robustness engine, epsilon 1); None when not computed (``note`` says why).
        effect: the largest distance from the nominal value of any of these values (the ranking key).
        note: why a part is missing (no declared range, a property the robustness engine does not take).
    """

    feature: str
    reference: float
    fixed: float
    range_values: dict[str, float] | None = None
    worst_fixed: float | None = None
    worst_at: float | None = None
    perturbed_worst: float | None = None
    perturbed_best: float | None = None
    effect: float = 0.0
    note: str | None = None


@dataclass(frozen=True)
class FeatureEffects(Result):
    """Safety-relevant features (``rlverify explain``): for each policy feature, the exact value when the policy
    cannot use it (fixed to a reference value), and the exact worst/best when it alone is perturbed by 1; ranked by
    ``effect``, largest first. Every value is exact (the exact engine on the chain of a wrapped policy, or Pmax/Pmin
    of the adversarial MDP), up to the solver's ``guarantee``.

    Attributes:
        nominal: the policy's own exact value; worst_is: ``max`` (the property names a failure: larger is worse) or
        ``min``; reference: ``initial`` or ``range``; effects: one per feature, ranked; runs: the exact checks made.
    """

    nominal: float
    worst_is: str
    reference: str
    effects: tuple[FeatureEffect, ...]
    runs: int
    guarantee: Guarantee
    GUARANTEED: ClassVar[bool] = True
    precision: float

    def figure(self, *, title: str | None = None) -> Figure:
        """A horizontal bar chart (:class:`matplotlib.figure.Figure`, not managed by pyplot): per feature, ranked,
        the value with the feature fixed (and the worst over its range) and the ±1 perturbation's worst and best,
        against the nominal value (a vertical line)."""
        return feature_effects_figure(self, title=title)

    def _summary(self) -> Summary:
        rows = [("nominal", shown(self.nominal))]
        for e in self.effects:
            parts = [f"fixed to {e.reference:g}: {shown(e.fixed)}"]
            if e.worst_fixed is not None:
                parts.append(f"worst over its range {shown(e.worst_fixed)} (at {e.worst_at:g})")
            if e.perturbed_worst is not None:
                parts.append(f"±1: worst {shown(e.perturbed_worst)}, best {shown(e.perturbed_best)}")
            rows.append((e.feature, f"effect {shown(e.effect)}; " + "; ".join(parts)))
        rows.append(("time", total_time(self)))
        top = self.effects[0].feature if self.effects else "-"
        return Summary(
            "exact value without each feature, and under ±1 perturbations of it",
            f"{top} matters most",
            "exact; " + solver_guarantee(self.guarantee, self.precision),
            tuple(rows),
        )


@dataclass(frozen=True)
class TreeExplanation(Result):
    """A decision tree standing in for the policy (``rlverify explain``), and its exact value as a policy.

    The tree is fitted to the policy's most likely action on the policy-reachable states, each weighted by its exact
    expected visits (``weighting`` says which); ``fidelity`` is the share of those visits where the tree picks that
    action. ``tree_value`` is the exact engine's value of the tree as a deterministic policy on the same model and
    property (``tree_lower``/``tree_upper``: its certified bracket, ``tree_stalled``: the probability that the tree
    names an action the state does not offer), beside the policy's ``policy_value``.

    Attributes:
        depth, leaves: the tree's size; fidelities: depth -> weighted fidelity, for each depth tried;
        fidelity_target: the depth search's target (None: the depth was given); fitted_states: states fitted;
        left_out_states: undecided states left out (unbounded: the run never gets decided from them);
        rules: one readable rule per leaf over the model's variables; tree: the tree file's JSON value;
        tree_policy: the tree as a :class:`~rlverify.policies.tree.TreePolicy` (not in JSON).
    """

    depth: int
    leaves: int
    fidelity: float
    fidelity_target: float | None
    fidelities: dict[int, float]
    weighting: str
    fitted_states: int
    left_out_states: int
    policy_value: float
    tree_value: float
    tree_lower: float | None
    tree_upper: float | None
    tree_stalled: float
    rules: tuple[str, ...]
    tree: dict[str, Any]
    guarantee: Guarantee
    GUARANTEED: ClassVar[bool] = True
    precision: float
    tree_policy: Any = field(default=None, repr=False, compare=False)

    NOT_IN_JSON: ClassVar[tuple[str, ...]] = ("tree_policy",)

    def _summary(self) -> Summary:
        rows = [
            ("policy's value", shown(self.policy_value)),
            ("tree's value", shown(self.tree_value) + (f" (stalls {shown(self.tree_stalled)})" if self.tree_stalled else "")),
            ("tree", f"depth {self.depth}, {self.leaves} leaves"),
            ("fidelity", f"{self.fidelity:.4g} of the {self.weighting} ({self.fitted_states:,} states)"),
            *((f"rule {i + 1}", r) for i, r in enumerate(self.rules[:12])),
            ("time", total_time(self)),
        ]
        if len(self.rules) > 12:
            rows.insert(-1, ("rules", f"... and {len(self.rules) - 12} more"))
        return Summary(
            "a decision tree standing in for the policy, verified exactly as a policy",
            f"{shown(self.tree_value)} (tree) vs {shown(self.policy_value)} (policy)",
            "exact values; " + solver_guarantee(self.guarantee, self.precision) + "; fidelity weighted by expected visits",
            tuple(rows),
        )


@dataclass(frozen=True)
class CriticalState:
    """One critical state (:class:`CriticalStates`).

    Attributes:
        state: its valuation (variable -> value); visits: its exact expected visits under the policy;
        spread: ``max_a Q(s, a) - min_a Q(s, a)`` over the actions it offers; score: ``visits x spread``;
        policy: the policy's distribution there (action -> probability, zeros left out); q: ``Q(s, a)`` per offered
        action; best: the action with the best ``Q``; likely: the policy's most likely action; likely_is_best: whether
        its ``Q`` equals the best.
    """

    state: dict[str, int]
    visits: float
    spread: float
    score: float
    policy: dict[str, float]
    q: dict[str, float]
    best: str
    likely: str
    likely_is_best: bool


@dataclass(frozen=True)
class CriticalStates(Result):
    """The policy-reachable states where the choice matters most (``rlverify explain``): ranked by ``score`` (exact
    expected visits x the spread of ``Q(s, a)`` over the offered actions), the top ones listed.

    Attributes:
        optimum: ``min`` (``Q`` reads ``Pmin`` afterwards: the property names a failure) or ``max`` (a goal);
        remaining: the step bound ``Q`` is read with (None: unbounded); weighting: how visits are counted;
        states: the listed states, largest score first; considered: the policy-reachable states scored;
        total_score: the sum of all their scores; guarantee, precision: of the per-action values.
    """

    optimum: str
    remaining: int | None
    weighting: str
    states: tuple[CriticalState, ...]
    considered: int
    total_score: float
    guarantee: Guarantee
    GUARANTEED: ClassVar[bool] = True
    precision: float

    def _summary(self) -> Summary:
        rows = []
        for i, c in enumerate(self.states[:10]):
            where = ", ".join(f"{k}={v}" for k, v in c.state.items())
            pi = ", ".join(f"{a} {p:.2f}" for a, p in c.policy.items())
            mark = "" if c.likely_is_best else f"; best {c.best}"
            rows.append(
                (f"#{i + 1}", f"{where}: score {c.score:.4g} (visits {c.visits:.3g} x spread {c.spread:.3g}); {pi}{mark}")
            )
        rows.append(("time", total_time(self)))
        return Summary(
            f"critical states (Q with P{self.optimum} afterwards, weighted by expected visits)",
            f"{len(self.states)} of {self.considered:,} states",
            "per-action values exact; " + solver_guarantee(self.guarantee, self.precision),
            tuple(rows),
        )


@dataclass(frozen=True)
class PolicyExplanation(Result):
    """What ``rlverify explain`` computed: the parts asked for (each None when not computed; ``skipped`` says why).

    Attributes:
        features: the safety-relevant features (:class:`FeatureEffects`); tree: the decision tree standing in for
        the policy (:class:`TreeExplanation`); critical: the critical states (:class:`CriticalStates`);
        skipped: part -> why it was not computed.
    """

    features: FeatureEffects | None = None
    tree: TreeExplanation | None = None
    critical: CriticalStates | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    def parts(self) -> list[Result]:
        """The parts computed, in order (features, tree, critical)."""
        return [p for p in (self.features, self.tree, self.critical) if p is not None]

    def _summary(self) -> Summary:
        rows: list[tuple[str, str]] = []
        for name, part in (("features", self.features), ("tree", self.tree), ("critical states", self.critical)):
            if part is not None:
                s = part._summary()
                rows.append((name, f"{s.value} — {s.kind}"))
        rows += [(f"{k} skipped", v) for k, v in self.skipped.items()]
        rows.append(("time", total_time(self)))
        return Summary("explanations of the policy", "", "exact (each part says its guarantee)", tuple(rows))
