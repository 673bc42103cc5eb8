"""Safety-relevant features: what each of the policy's features does to the property's exact value.

For each feature ``f`` of the policy (:func:`feature_effects`):

* **ablation**: the exact value when the policy cannot use ``f``: the policy is wrapped
  (:class:`~rlverify.policies.ablated.FixedFeaturePolicy`) so that it is shown a reference value of ``f`` in every
  state, and that wrapper is verified by :func:`~rlverify.exact.verify_exact` on the same model. The reference is
  ``f``'s value in the initial state; with ``reference="range"`` also every value of ``f``'s declared range, the
  worst one reported. The real state is unchanged: only what the policy sees is.
* **perturbation**: the exact worst and best case when an adversary shifts ``f`` alone by at most 1 in each state
  (:func:`~rlverify.exact.robust.robustness` with ``epsilon=1`` and ``perturb=(f,)``).

Every policy evaluation is one batched call over the MDP's decision states (the full MDP is built once and every
wrapped policy's chain is induced on it). Features are ranked by ``effect``: the largest distance of any of these
values from the nominal value.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

import numpy as np

from rlverify.choices import Mode, Strategy
from rlverify.errors import OptionError, PolicyError, PropertyError, did_you_mean
from rlverify.exact.adversarial import feature_ranges
from rlverify.exact.chain import FullMDP, PolicyChain, full_mdp, policy_chain
from rlverify.exact.options import ExactOptions, Progress, guarantee, provenance, settings
from rlverify.exact.robust import robustness
from rlverify.exact.robust_options import PATHS, RobustnessOptions
from rlverify.exact.verify import verify_exact
from rlverify.models.properties import ASSUMED_BAD_EVENT, Property, worst_case
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.ablated import FixedFeaturePolicy
from rlverify.policies.base import Policy
from rlverify.results import FeatureEffect, FeatureEffects, RobustnessResult

log = logging.getLogger(__name__)

#: reference values a feature is fixed to
REFERENCES = ("initial", "range")
#: the most exact checks :func:`feature_effects` makes by default (``max_runs``)
MAX_RUNS = 200


@dataclass(frozen=True)
class FeatureOptions:
    """Settings of :func:`feature_effects`.

    Attributes:
        features: the features to explain (None: all of the policy's).
        reference: ``initial`` (fix each feature to its initial value) or ``range`` (also every value of its
            declared range; the worst is reported).
        perturb: also compute the exact worst/best under a ±1 perturbation of each feature alone (probability
            properties with F, U, G, X or W only; otherwise skipped with a note).
        worst: which optimum is the worst case, ``max`` or ``min``; None: ``min`` for ``P>=b``, else ``max``.
        exact: the exact engine's settings (mode, unavailable, numerics, precision, max_states, max_memory).
        max_runs: refuse when more exact checks than this would be made (``range`` on wide ranges).
    """

    features: tuple[str, ...] | None = None
    reference: str = "initial"
    perturb: bool = True
    worst: str | None = None
    exact: ExactOptions = dataclasses.field(default_factory=ExactOptions)
    max_runs: int = MAX_RUNS

    def validate(self) -> None:
        if self.reference not in REFERENCES:
            raise OptionError(f"--reference: expected one of {', '.join(REFERENCES)}, got '{self.reference}'")
        if self.worst is not None and self.worst not in ("max", "min"):
            raise OptionError(f"--worst: expected max or min, got '{self.worst}'")
        if isinstance(self.max_runs, bool) or not isinstance(self.max_runs, int) or self.max_runs < 1:
            raise OptionError(f"max_runs: expected a positive integer, got {self.max_runs!r}")
        if self.exact.mode is Mode.MONOLITHIC:
            raise OptionError("explaining features needs a policy's chain: --mode stochastic or deterministic")
        self.exact.validate()


def chosen_features(policy: Policy, features: tuple[str, ...] | None) -> tuple[str, ...]:
    """``features`` (None: all of the policy's), each checked to be one of the policy's features."""
    if features is None:
        return tuple(policy.features)
    for f in features:
        if f not in policy.features:
            raise OptionError(
                f"--ablate: '{f}' is not a feature of the policy{did_you_mean(f, policy.features)} "
                f"(its features: {', '.join(policy.features)})"
            )
    if not features:
        raise OptionError("--ablate: name at least one feature")
    return tuple(dict.fromkeys(features))


def feature_effects(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: FeatureOptions | None = None,
    *,
    progress: Progress | None = None,
) -> FeatureEffects:
    """The exact effect of each policy feature on the property's value (see the module's docstring).

    Args:
        model: a loaded PRISM/JANI model; prop: its parsed property (any form the exact engine checks);
        policy: any :class:`~rlverify.policies.Policy`; options: :class:`FeatureOptions` (None: the defaults).

    Returns a :class:`~rlverify.results.FeatureEffects`, ranked by effect (largest first).

    Raises:
        OptionError: an unknown feature, or more than ``options.max_runs`` exact checks; what
        :func:`~rlverify.exact.verify_exact` raises.
    """
    options = FeatureOptions() if options is None else options
    options.validate()
    say = progress or (lambda msg: None)
    features = chosen_features(policy, options.features)
    exact = dataclasses.replace(options.exact, strategy=Strategy.FULL, all_states=False, export=None)
    t0 = time.perf_counter()
    low, high = feature_ranges(model, tuple(policy.features))
    columns = {f: list(policy.features).index(f) for f in features}
    perturb = options.perturb and prop.operator == "P" and prop.path in PATHS
    runs, plan = _plan(features, columns, low, high, options, perturb)
    full = full_mdp(model, prop, exact, policy=policy, progress=say)
    chain = policy_chain(model, prop, policy, exact, mdp=full, keep_mdp=True, progress=say)
    nominal = verify_exact(model, prop, policy, exact, chain=chain)
    if len(chain.chain.initial_states) != 1:
        raise PropertyError(f"the model has {len(chain.chain.initial_states)} initial states; explain reads a single one")
    init = chain.chain.feature_matrix(policy.features, chain.chain.initial_states[:1])[0]
    worst_is, assumed = worst_case(prop, options.worst)
    notes = list(nominal.warnings) + _notes(prop, options, perturb, assumed)
    study = _Study(model, prop, policy, exact, full, chain, worst_is, perturb, options.reference == "range", say)
    effects = []
    for f in features:
        row = study.row(f, float(init[columns[f]]), plan[f])
        notes += _infinite(f, row)
        candidates = [row.fixed, row.worst_fixed, row.perturbed_worst, row.perturbed_best]
        effect = max(abs(c - nominal.value) for c in candidates if c is not None)
        effects.append(dataclasses.replace(row, effect=float(effect)))
    effects.sort(key=lambda e: -e.effect)
    timings = {"total": time.perf_counter() - t0}
    return FeatureEffects(
        nominal=nominal.value,
        worst_is=worst_is,
        reference=options.reference,
        effects=tuple(effects),
        runs=runs,
        guarantee=guarantee(exact.numerics),
        precision=exact.precision,
        provenance=provenance(
            model,
            prop,
            policy,
            settings={
                **settings(exact, Strategy.FULL, model),
                "features": list(features),
                "reference": options.reference,
                "perturb": perturb,
                "worst": worst_is,
            },
            timings=timings,
            warnings=notes,
        ),
    )


def _notes(prop: Property, options: FeatureOptions, perturb: bool, assumed: bool) -> list[str]:
    """What the result must say of how it was computed: an assumed worst case, perturbations not computed."""
    notes = [ASSUMED_BAD_EVENT] if assumed and (perturb or options.reference == "range") else []
    if options.perturb and not perturb:
        notes.append(
            f"the ±1 perturbations are not computed: the robustness engine takes probability properties with "
            f"{', '.join(PATHS)}, not '{prop.text}'"
        )
    return notes


def _plan(
    features: tuple[str, ...],
    columns: dict[str, int],
    low: np.ndarray,
    high: np.ndarray,
    options: FeatureOptions,
    perturb: bool,
) -> tuple[int, dict[str, list[float]]]:
    """``(runs, values)``: the exact checks :func:`feature_effects` makes (refused above ``options.max_runs``, counted
    from the ranges' ends before any value is listed or model built) and each feature's range values to fix."""
    ranged = options.reference == "range"
    sizes = {f: _range_size(low[columns[f]], high[columns[f]]) if ranged else 0 for f in features}
    runs = len(features) * (1 + int(perturb)) + sum(sizes.values())
    if runs > options.max_runs:
        raise OptionError(
            f"explaining {len(features)} features takes {runs:,} exact checks (limit {options.max_runs}): name fewer "
            "features (--ablate), or use --reference initial"
        )
    return runs, {f: _range_values(low[columns[f]], high[columns[f]]) if sizes[f] else [] for f in features}


@dataclass(frozen=True)
class _Study:
    """What every feature's row is computed on: the full MDP built once, the policy's chain on it, the settings."""

    model: SymbolicModel
    prop: Property
    policy: Policy
    exact: ExactOptions
    full: FullMDP
    chain: PolicyChain
    worst_is: str
    perturb: bool
    ranged: bool
    say: Progress

    def value(self, f: str, v: float) -> float:
        """The exact value with the policy shown ``v`` for feature ``f`` in every state."""
        wrapped = FixedFeaturePolicy(self.policy, {f: v})
        try:
            built = policy_chain(self.model, self.prop, wrapped, self.exact, mdp=self.full)
            return verify_exact(self.model, self.prop, wrapped, self.exact, chain=built).value
        except PolicyError as exc:
            raise unanswerable(exc, f"with {f} fixed to {v:g}") from None

    def row(self, f: str, ref: float, plan: list[float]) -> FeatureEffect:
        """Feature ``f``'s ablation at ``ref`` (its initial value), over ``plan`` (its range) and perturbed by ±1."""
        self.say(f"feature {f}: fixed to its initial value {ref:g}")
        fixed = self.value(f, ref)
        row = FeatureEffect(feature=f, reference=ref, fixed=fixed)
        if self.ranged and not plan:
            row = dataclasses.replace(row, note=f"{f} has no declared range: only its initial value is used")
        elif self.ranged:
            vals = {_key(v): (fixed if v == ref else self.value(f, v)) for v in plan}
            worse = max if self.worst_is == "max" else min
            at = worse(vals, key=lambda k: vals[k])
            row = dataclasses.replace(row, range_values=vals, worst_fixed=vals[at], worst_at=float(at))
        if self.perturb:
            r = self.perturbed(f)
            row = dataclasses.replace(row, perturbed_worst=r.worst, perturbed_best=r.best)
        return row

    def perturbed(self, f: str) -> RobustnessResult:
        """The exact worst and best case under a ±1 perturbation of ``f`` alone."""
        self.say(f"feature {f}: perturbed by ±1")
        exact = self.exact
        options = RobustnessOptions(
            epsilon=1,
            perturb=(f,),
            worst=self.worst_is,
            mode=exact.mode,
            unavailable=exact.unavailable,
            attack=False,
            numerics=exact.numerics,
            precision=exact.precision,
            max_states=exact.max_states,
            max_memory=exact.max_memory,
        )
        try:
            return robustness(self.model, self.prop, self.policy, options, chain=self.chain, mdp=self.full)
        except PolicyError as exc:
            raise unanswerable(exc, f"with {f} perturbed by ±1") from None


def _infinite(f: str, row: FeatureEffect) -> list[str]:
    """The note on the values of ``row`` that are infinite (none: empty)."""
    shown_values = dict(row.range_values or {}) | {_key(row.reference): row.fixed}
    infinite = sorted((k for k, x in shown_values.items() if np.isinf(x)), key=float)
    if not infinite:
        return []
    return [
        f"{f} fixed to {', '.join(infinite)}: the value is infinite (an expected reward whose target is "
        "missed with positive probability)"
    ]


def _range_size(lo: float, hi: float) -> int:
    """How many integer values :func:`_range_values` lists for ``[lo, hi]``, without listing them."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return 0
    return max(int(hi) - int(lo) + 1, 0)


def _range_values(lo: float, hi: float) -> list[float]:
    """Every integer value in ``[lo, hi]`` (none when the range is unknown: NaN)."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return []
    return [float(v) for v in range(int(lo), int(hi) + 1)]


def _key(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def unanswerable(exc: PolicyError, what: str) -> PolicyError:
    """The error of a policy asked about an observation it has no answer for (the feature's part cannot be computed):
    what was asked, the policy's own first line, and the way out."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return PolicyError(
        f"features: {what}, the policy is asked about observations it has no answer for ({first}); a table policy "
        "answers only the states it lists: explain a network, or the tree and critical states (--parts tree,critical)"
    )
