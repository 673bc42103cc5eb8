"""Explanations of a policy, in one call: safety-relevant features, a decision tree standing in for the policy, and
the critical states (:func:`explain_policy`; the parts are :mod:`rlverify.exact.features`,
:mod:`rlverify.exact.tree` and :mod:`rlverify.exact.critical`). The policy's chain is built once and shared."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rlverify.errors import OptionError, PolicyError, PropertyError
from rlverify.exact.chain import PolicyChain, policy_chain
from rlverify.exact.critical import CriticalOptions, critical_states
from rlverify.exact.explain import check_explainable
from rlverify.exact.features import FeatureOptions, feature_effects
from rlverify.exact.options import ExactOptions, Progress, provenance, settings
from rlverify.exact.tree import TreeOptions, fit_tree
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.results import CriticalStates, FeatureEffects, PolicyExplanation, Result, TreeExplanation

#: the parts of an explanation, in order
PARTS = ("features", "tree", "critical")


@dataclass(frozen=True)
class ExplainOptions:
    """Settings of :func:`explain_policy`.

    Attributes:
        parts: which parts to compute (None: every part that applies to the property; a part named here that does
            not apply is refused).
        exact: the exact engine's settings, shared by every part (each part's own ``exact`` is replaced by it).
        features, tree, critical: each part's own settings.
    """

    parts: tuple[str, ...] | None = None
    exact: ExactOptions = dataclasses.field(default_factory=ExactOptions)
    features: FeatureOptions = dataclasses.field(default_factory=FeatureOptions)
    tree: TreeOptions = dataclasses.field(default_factory=TreeOptions)
    critical: CriticalOptions = dataclasses.field(default_factory=CriticalOptions)

    def validate(self) -> None:
        for p in self.parts or ():
            if p not in PARTS:
                raise OptionError(f"--parts: '{p}' is not a part (parts: {', '.join(PARTS)})")
        if self.parts is not None and not self.parts:
            raise OptionError(f"--parts: name at least one of {', '.join(PARTS)}")


def explain_policy(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExplainOptions | None = None,
    *,
    progress: Progress | None = None,
) -> PolicyExplanation:
    """The parts of ``options.parts`` for ``policy`` on ``model`` and ``prop`` (see the module's docstring).

    Raises:
        OptionError, PropertyError: a bad option, or a part asked for that does not apply to the property.
    """
    options = ExplainOptions() if options is None else options
    options.validate()
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    wanted = options.parts or PARTS
    skipped = _path_parts_skipped(prop, wanted, options.parts is not None)
    exact = options.exact
    todo = [part for part in ("tree", "critical") if part in wanted and part not in skipped]
    chain = policy_chain(model, prop, policy, exact, progress=say) if todo else None
    features = _features(model, prop, policy, options, skipped, say) if "features" in wanted else None
    tree, critical = _on_paths(model, prop, policy, options, todo, chain, say)
    return PolicyExplanation(
        features=features,
        tree=tree,
        critical=critical,
        skipped=skipped,
        provenance=provenance(
            model,
            prop,
            policy,
            settings={**settings(exact, chain.strategy if chain else exact.strategy, model), "parts": list(wanted)},
            timings={"total": time.perf_counter() - t0},
            warnings=_warnings({"features": features, "tree": tree, "critical": critical}, skipped),
        ),
    )


def _path_parts_skipped(prop: Property, wanted: tuple[str, ...], asked: bool) -> dict[str, str]:
    """The parts read from the chain's paths (tree, critical) that ``prop`` does not allow, with why (refused when
    ``asked`` for by name)."""
    try:
        check_explainable(prop)
    except PropertyError as exc:
        why = str(exc).replace("--explain: ", "")
    else:
        return {}
    skipped: dict[str, str] = {}
    for part in ("tree", "critical"):
        if part in wanted:
            if asked:
                raise PropertyError(f"--parts {part}: {why}")
            skipped[part] = why
    return skipped


def _on_paths(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExplainOptions,
    todo: Sequence[str],
    chain: PolicyChain | None,
    say: Progress,
) -> tuple[TreeExplanation | None, CriticalStates | None]:
    """The parts read from the policy's ``chain`` (built once for both): those of ``todo`` (tree, critical)."""
    exact = options.exact
    tree = critical = None
    if "tree" in todo:
        tree = fit_tree(model, prop, policy, dataclasses.replace(options.tree, exact=exact), chain=chain, progress=say)
    if "critical" in todo:
        critical = critical_states(
            model, prop, policy, dataclasses.replace(options.critical, exact=exact), chain=chain, progress=say
        )
    return tree, critical


def _features(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExplainOptions,
    skipped: dict[str, str],
    say: Progress,
) -> FeatureEffects | None:
    """The features part; None (and why in ``skipped``) when the policy cannot answer it and it was not asked for."""
    try:
        return feature_effects(model, prop, policy, dataclasses.replace(options.features, exact=options.exact), progress=say)
    except PolicyError as exc:
        if options.parts is not None or not str(exc).startswith("features: "):
            raise
        skipped["features"] = str(exc).removeprefix("features: ")
    return None


def _warnings(parts: Mapping[str, Result | None], skipped: dict[str, str]) -> list[str]:
    """Each part's warnings, named by the part, then the parts skipped."""
    return [f"{k}: {w}" for k, p in parts.items() if p for w in p.warnings] + [f"{k} skipped: {v}" for k, v in skipped.items()]
