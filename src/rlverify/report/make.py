"""The report itself: the target resolved once, the sections of its kind run, the verdict drawn from them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rlverify.benchmarks.registry import Benchmark
from rlverify.errors import RlverifyError
from rlverify.models.userfile import DEFAULT_SYSTEM_TIMEOUT
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, DEFAULT_POLICY_TIMEOUT
from rlverify.report import model as on_model
from rlverify.report import simulated
from rlverify.report.common import Progress, ReportOptions, Shared, shown
from rlverify.report.page import Check, Report, Section, fmt
from rlverify.resolve import resolve
from rlverify.results import ExactResult, OptimumResult, Provenance, versions
from rlverify.targets import UNSAFE, EnvironmentTarget, ModelTarget, PolicySpec, SystemTarget, Target


@dataclass(frozen=True)
class KindPlan:
    """What a report does on one kind of target: what its sections share, the sections, the settings it shows."""

    shared: Callable[[Any, ReportOptions, Shared], Shared]
    sections: Callable[[Any, ReportOptions, Shared], tuple[list[Section], list[Check]]]
    settings: Callable[[ReportOptions, Shared], dict[str, Any]]
    #: the target with the report's property (and its name for the page)
    property: Callable[[Target[Any], str | None], tuple[Target[Any], str]]
    #: how the headline names the statistical estimate
    estimate: str = "statistical estimate"


def _model_settings(options: ReportOptions, shared: Shared) -> dict[str, Any]:
    return dict(
        epsilon=options.epsilon,
        explain=options.explain,
        optimum=shared.reading or "unknown",
        map_variables=",".join(shared.map_vars) if shared.map_vars else "",
        map_where=options.map_where if options.map_where is not None else "all",
        map_agg=options.map_agg,
    )


def make_report(
    target: str | Path | Benchmark,
    *,
    options: ReportOptions | None = None,
    property: str | None = None,
    policy: PolicySpec | None = None,
    constants: str | None = None,
    features: list[str] | None = None,
    actions: list[str] | None = None,
    output: str | None = None,
    env_kwargs: str | None = None,
    progress: Progress | None = None,
    trust_code: bool = False,
    policy_timeout: float | None = DEFAULT_POLICY_TIMEOUT,
    policy_threads: int = DEFAULT_POLICY_THREADS,
    system_timeout: float | None = DEFAULT_SYSTEM_TIMEOUT,
    shield: str | Path | None = None,
) -> Report:
    """Run every engine that applies to ``target`` and check them against each other.

    Args:
        target, constants, policy, property: as for :func:`rlverify.resolve.resolve` (default property:
            the benchmark's first; default policy: its reference policy).
        options: :class:`ReportOptions` (None: the defaults).
        features, actions, output: overrides for policy files that do not declare them.
        env_kwargs: the arguments of a ``gym:ID`` target.
        trust_code, policy_timeout, policy_threads, system_timeout: as :func:`rlverify.resolve.resolve` takes them
            (``--trust-code``, ``--policy-timeout``, ``--policy-threads``, ``--system-timeout``).
        shield: a shield file (``rlverify shield --out``): the policy restricted to the actions it keeps
            (:meth:`~rlverify.targets.ModelTarget.with_shield`; PRISM/JANI/Gymnasium models only).

    Returns:
        A :class:`Report`; ``report.ok`` is False when the engines disagree (nothing is raised for that).
    """
    options = ReportOptions() if options is None else options
    options.validate()
    say = progress or (lambda msg: None)
    t = resolve(
        target,
        constants=constants,
        policy=policy,
        features=features,
        actions=actions,
        output=output,
        property=None,
        needs_policy=True,
        kinds=(ModelTarget,) if shield else REPORTED_KINDS,  # a simulator only: refused, naming rlverify simulate
        command="rlverify report --shield" if shield else "rlverify report",
        env_kwargs=env_kwargs,
        trust_code=trust_code,
        policy_timeout=policy_timeout,
        policy_threads=policy_threads,
        system_timeout=system_timeout,
    )
    if shield:
        t = t.with_shield(shield)
        assert t.policy is not None
        t = replace(t, policy_source=t.policy.name)  # the page names the policy under its shield (``file + shield``)
    plan = PLANS[type(t)]
    checked, prop_name = plan.property(t, property)
    shared = plan.shared(checked, options, Shared(say=say, timings={}))
    sections, checks = plan.sections(checked, options, shared)
    return Report(
        kind=checked.KIND,
        sections=sections,
        checks=checks,
        headline=_headline(plan, shared, sections),
        provenance=Provenance(
            model=checked.name,
            property=prop_name,
            policy=shown(checked.policy_source),
            settings=_settings(checked, plan, options, shared),
            timings=shared.timings,
            versions=versions(),
        ),
    )


def _headline(plan: KindPlan, shared: Shared, sections: list[Section]) -> list[tuple[str, str]]:
    """The verdict: the policy's value (exact, the sound bound or the estimate), the best and worst any policy
    achieves, the statistical estimate; each as the sections computed it."""
    data = {k: v for sec in sections for k, v in sec.data.items()}
    rows = _exact_rows(shared)
    bound = next((v for sec in sections for k, v in sec.rows if k == "upper bound"), None)
    if bound is not None:
        rows.append(("upper bound on failure (sound abstraction)", bound))
    stat = data.get("statistical")
    if stat is not None:
        rows.append((plan.estimate, _estimate(stat)))
    if data.get("never_decided") is not None:
        rows.append(("start cells where no run decides (never decided = 1)", data["never_decided"]))
    return rows


def _exact_rows(shared: Shared) -> list[tuple[str, str]]:
    """The policy's exact value and (when the MDP was checked) the best and worst possible."""
    if shared.exact is None:
        return []
    rows = [("the policy's value (exact)", fmt(shared.exact.value))]
    if shared.optimum is not None:
        rows += _optimum_rows(shared.exact, shared.optimum, shared.reading)
    return rows


def _estimate(stat: dict[str, Any]) -> str:
    """The statistical estimate in its interval, at its confidence, with the number of runs."""
    lo, hi = stat["interval"]
    return f"{fmt(stat['estimate'])} in [{fmt(lo)}, {fmt(hi)}] at {stat['confidence']:.1%} ({stat['runs']:,} runs)"


def _optimum_rows(exact: ExactResult, best: OptimumResult, reading: str | None) -> list[tuple[str, str]]:
    """The headline's best and worst possible and the regret (or Pmin/Pmax only, when the property does not say
    whether it is a bad event or a goal)."""
    name = "R" if str(exact.property).lstrip().startswith("R") else "P"
    if reading is None:
        return [
            (f"{name}min / {name}max (over all policies)", f"{fmt(best.pmin)} / {fmt(best.pmax)}"),
            (
                "best possible and regret",
                "not shown: the property does not say whether it is a bad event or a goal "
                "(--optimum min or max, or a threshold P<=b / P>=b)",
            ),
        ]
    bad = reading == "min"
    opt, other = name + ("min" if bad else "max"), name + ("max" if bad else "min")
    best_value, worst_value = (best.pmin, best.pmax) if bad else (best.pmax, best.pmin)
    regret = exact.value - best_value if bad else best_value - exact.value
    return [
        (f"best possible ({opt}, over all policies)", fmt(best_value)),
        (f"worst possible ({other})", fmt(worst_value)),
        ("regret (what the policy gives away)", fmt(regret)),
    ]


def _parsed_property(t: Target[Any], property: str | None) -> tuple[Target[Any], str]:
    """The target with its property parsed (default: the benchmark's first), and the property's name for the page."""
    bench = t.benchmark
    if property is None:
        if bench is None or not bench.properties:
            raise RlverifyError(f"{t.name}: give --property (a model file has no default property)")
        property = next(iter(bench.properties))
    t = t.with_property(property)  # the model is built once
    assert t.property is not None
    return t, t.property.name or t.property.text


def _unsafe_set(t: Target[Any], property: str | None) -> tuple[Target[Any], str]:
    """A continuous system is checked for its unsafe set within its horizon: nothing to parse."""
    if property not in (None, UNSAFE):
        raise RlverifyError(f"{t.name}: a continuous system is checked for its unsafe set ('unsafe'); drop --property")
    return t, UNSAFE


def _settings(t: Target[Any], plan: KindPlan, options: ReportOptions, shared: Shared) -> dict[str, Any]:
    """The settings the page and the JSON show."""
    return {
        "runs": options.runs,
        "delta": options.delta,
        "seed": options.seed,
        "constants": t.constants or "",
        **plan.settings(options, shared),
    }


#: the kinds of target a report covers (a Gymnasium environment without a transition table has no plan yet: its
#: statistics are rlverify simulate's)
REPORTED_KINDS = (ModelTarget, EnvironmentTarget, SystemTarget)

PLANS: dict[type[Target[Any]], KindPlan] = {
    ModelTarget: KindPlan(on_model.model_shared, on_model.model_sections, _model_settings, _parsed_property),
    EnvironmentTarget: KindPlan(
        lambda t, options, shared: shared,
        simulated.environment_sections,
        lambda options, shared: {"heatmap_runs_per_cell": options.heatmap_runs_per_cell},
        _parsed_property,
        "statistical estimate (from the start line)",
    ),
    SystemTarget: KindPlan(
        simulated.system_shared,
        simulated.system_sections,
        lambda options, shared: dict(horizon=shared.horizon, domain=options.domain, phi=options.phi),
        _unsafe_set,
    ),
}
assert set(REPORTED_KINDS) == set(PLANS)  # every kind a report takes has its plan
