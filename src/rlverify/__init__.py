"""rlverify: how safe is this trained policy, really?

Exact (Storm on the policy-induced Markov chain), sound (interval-MDP abstraction) and
statistical (simulation with the policy as oracle) verification of RL policies.

``import rlverify`` loads no engine: each name below is imported from its module on first use
(:mod:`rlverify.lazy`), so the CLI and scripts pay only for what they call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rlverify.choices import Mode
from rlverify.errors import ConstantsError, OptionError, PolicyError
from rlverify.imports import lighten_scipy_import
from rlverify.lazy import lazy_exports

lighten_scipy_import()  # scipy.sparse (the exact engine's matrices) without numpy's test and build tools

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from numpy import ndarray

    from rlverify import abstraction, benchmarks, exact, models, policies, statistical
    from rlverify.abstraction.verify import AbstractionOptions, AbstractionResult, verify_abstraction
    from rlverify.crosscheck import Agreement, cross_check
    from rlverify.errors import RlverifyError
    from rlverify.exact.options import ExactOptions, Progress
    from rlverify.models.properties import Property
    from rlverify.models.property_parser import parse_property
    from rlverify.models.symbolic import SymbolicModel, load_model
    from rlverify.policies.check import check_policy
    from rlverify.policies.loading import load_policy
    from rlverify.report import Report
    from rlverify.resolve import Target, TargetSpec
    from rlverify.results import (
        CriticalStates,
        ExactResult,
        FailurePaths,
        FeatureEffects,
        HeatmapResult,
        IntervalResult,
        OptimumResult,
        PolicyExplanation,
        Provenance,
        Result,
        ReturnResult,
        RiskMap,
        RobustnessResult,
        ShieldResult,
        SplittingResult,
        TreeExplanation,
    )
    from rlverify.statistical.gym_heatmap import GymHeatmapResult
    from rlverify.statistical.properties import PathProperty
    from rlverify.statistical.results import StatisticalResult
    from rlverify.statistical.verify import SimulatedModel, StatisticalOptions
    from rlverify.targets import PolicySpec

__version__ = "0.1.0"

__all__ = [
    "AbstractionOptions",
    "AbstractionResult",
    "Agreement",
    "CriticalStates",
    "ExactOptions",
    "ExactResult",
    "FailurePaths",
    "FeatureEffects",
    "GymHeatmapResult",
    "HeatmapResult",
    "IntervalResult",
    "OptimumResult",
    "PolicyExplanation",
    "Property",
    "Provenance",
    "Report",
    "Result",
    "ReturnResult",
    "RiskMap",
    "RlverifyError",
    "RobustnessResult",
    "ShieldResult",
    "SplittingResult",
    "StatisticalOptions",
    "StatisticalResult",
    "Target",
    "TreeExplanation",
    "abstraction",
    "benchmarks",
    "check_policy",
    "cross_check",
    "exact",
    "load_model",
    "load_policy",
    "models",
    "parse_property",
    "policies",
    "statistical",
    "verify_abstraction",
    "verify_exact",
    "verify_statistical",
]

lazy_exports(
    __name__,
    {
        "rlverify.abstraction.verify": "AbstractionOptions AbstractionResult verify_abstraction",
        "rlverify.crosscheck": "Agreement cross_check",
        "rlverify.errors": "RlverifyError",
        "rlverify.exact.options": "ExactOptions",
        "rlverify.models.properties": "Property",
        "rlverify.models.property_parser": "parse_property",
        "rlverify.models.symbolic": "load_model",
        "rlverify.policies.check": "check_policy",
        "rlverify.policies.loading": "load_policy",
        "rlverify.resolve": "Target",
        "rlverify.report": "Report",
        "rlverify.results": (
            "ExactResult FailurePaths HeatmapResult IntervalResult OptimumResult Provenance Result ReturnResult RiskMap "
            "RobustnessResult ShieldResult SplittingResult"
            " CriticalStates FeatureEffects PolicyExplanation TreeExplanation"
        ),
        "rlverify.statistical.gym_heatmap": "GymHeatmapResult",
        "rlverify.statistical.results": "StatisticalResult",
        "rlverify.statistical.verify": "StatisticalOptions",
    },
    submodules="abstraction benchmarks exact models policies statistical",
)


def verify_exact(
    model: SymbolicModel | TargetSpec,
    property: str | Property,
    policy: PolicySpec | None = None,
    options: ExactOptions | None = None,
    *,
    constants: str | None = None,
    progress: Progress | None = None,
) -> ExactResult:
    """The exact engine on a model given any way the front door takes it (:func:`rlverify.resolve.resolve`: a
    PRISM/JANI file with ``constants``, a benchmark id or object), or a loaded model; the property as text, a
    benchmark's or JANI file's property name, or parsed. Resolved once, then
    :func:`rlverify.exact.verify_exact` (``options``: :class:`~rlverify.exact.ExactOptions`, None: the defaults).
    """
    from rlverify.exact.options import ExactOptions  # lazy: import rlverify loads no engine
    from rlverify.exact.verify import verify_exact as exact_verify  # lazy: import rlverify loads no engine
    from rlverify.models.property_parser import parse_property  # lazy: import rlverify loads no engine
    from rlverify.models.symbolic import SymbolicModel  # lazy: import rlverify loads no engine
    from rlverify.policies.loading import load_policy  # lazy: import rlverify loads no engine
    from rlverify.resolve import check_property, resolve_model  # lazy: import rlverify loads no engine

    options = ExactOptions() if options is None else options
    with_policy = options.mode != Mode.MONOLITHIC
    if isinstance(model, SymbolicModel):
        check_property(property, "verify_exact")
        if constants:
            raise ConstantsError(f"{model.shown}: constants are fixed when a model is loaded; pass them to load_model")
        prop = parse_property(model, property, fixed_policy=with_policy)  # a parsed one as it is
        if isinstance(policy, str):
            policy = load_policy(policy)
        return exact_verify(model, prop, policy, options, progress=progress)
    target = resolve_model(
        model,
        constants=constants,
        policy=policy,
        property=property,
        needs_policy=with_policy,
        command="verify_exact",
        needs_property=True,
    )
    assert target.property is not None
    result = exact_verify(target.model, target.property, target.policy, options, progress=progress)
    return target.stamp(result, unavailable=options.unavailable)


def verify_statistical(
    model: SimulatedModel | TargetSpec,
    property: str | Property | PathProperty | None,
    policy: PolicySpec | None = None,
    options: StatisticalOptions | None = None,
    *,
    constants: str | None = None,
    starts: ndarray | None = None,
    progress: Callable[[int, int], None] | None = None,
    labels: Sequence[str] | None = None,
    vectorization: str | None = None,
    vec_normalize: str | Path | None = None,
    env_kwargs: str | dict[str, object] | None = None,
    trust_code: bool = False,
) -> StatisticalResult:
    """The statistical engine on a model given any way the front door takes it (:func:`rlverify.resolve.resolve`: a
    PRISM/JANI file with ``constants``, a benchmark id or object, ``gym:ID``), or an already resolved model (a loaded
    PRISM model, a continuous system, a vectorised environment); the property as text, a benchmark's property name,
    or parsed (a continuous system's default: reaching its unsafe set within its horizon); ``policy`` a policy spec,
    a network in memory or a :class:`~rlverify.policies.Policy` (None: the benchmark's reference policy). Then
    :func:`rlverify.statistical.verify_statistical` (``options``: :class:`~rlverify.statistical.StatisticalOptions`).
    A statistical guarantee: an interval at the options' confidence, or a test's decision at its error bounds.
    ``labels`` (``["fell=terminated & !truncated"]``), ``vectorization``, ``vec_normalize``, ``env_kwargs`` and
    ``trust_code``: as for :func:`rlverify.resolve.resolve`, for a Gymnasium target (``--label`` and so on)."""
    from pathlib import Path

    from rlverify.benchmarks.registry import Benchmark  # lazy: import rlverify loads no engine
    from rlverify.models.gym_simulator import is_gym_source  # lazy: import rlverify loads no engine
    from rlverify.resolve import resolve_simulated  # lazy: import rlverify loads no engine
    from rlverify.statistical.verify import verify_statistical as simulate  # lazy: import rlverify loads no engine

    if isinstance(model, (str, Path, Benchmark)) or is_gym_source(model):
        given = cast("str | Property | None", property)  # a PathProperty is for a model already resolved
        spec = cast("TargetSpec", model)
        target = resolve_simulated(
            spec,
            given,
            constants=constants,
            policy=policy,
            command="verify_statistical",
            labels=labels,
            vectorization=vectorization,
            vec_normalize=vec_normalize,
            env_kwargs=env_kwargs,
            trust_code=trust_code,
        )
        assert target.property is not None and target.policy is not None  # resolve_simulated refuses otherwise
        result = simulate(target.model, target.property, target.policy, options, starts=starts, progress=progress)
        unavailable = options.simulation.unavailable if options is not None else None
        return target.stamp(result, unavailable=unavailable)
    gym_options: dict[str, object] = {"labels": labels, "vectorization": vectorization, "vec_normalize": vec_normalize}
    gym_options |= {"env_kwargs": env_kwargs, "trust_code": trust_code or None}
    if given_gym := [k for k, v in gym_options.items() if v is not None]:
        raise OptionError(
            f"verify_statistical: {', '.join(given_gym)} are for a Gymnasium target (gym:ID, an Env, a VectorEnv or a "
            "factory) resolved here; a model already resolved has its own"
        )
    if model is None:
        raise OptionError("model: verify_statistical takes a target (a file, a benchmark id, gym:ID) or a model, got None")
    if constants:
        raise ConstantsError("constants are fixed when a model is loaded or a system built; pass them there")
    if property is None:
        raise OptionError("verify_statistical: give the property to estimate (text, or a parsed Property)")
    if policy is None or isinstance(policy, str):
        from rlverify.policies.loading import load_policy  # lazy: import rlverify loads no engine

        if policy is None:
            raise PolicyError("verify_statistical: give a policy (a Policy, a network in memory or a policy file)")
        policy = load_policy(policy)
    return simulate(cast("SimulatedModel", model), property, policy, options, starts=starts, progress=progress)
