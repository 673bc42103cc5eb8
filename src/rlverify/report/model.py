"""The report's sections on a PRISM/JANI (or Gymnasium) model: one chain and one MDP, built once, that the exact value,
Pmin/Pmax, the risk map, the failure paths, the robustness, the explanations and the simulation all read."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from rlverify.crosscheck import inside, ordered, same, slack, within_optimum
from rlverify.errors import ModelTooLargeError, OptionError, PropertyError, RlverifyError, did_you_mean
from rlverify.exact import (
    ExactOptions,
    MapOptions,
    RobustnessOptions,
    explain_paths,
    full_mdp,
    optimum,
    plot_paths,
    policy_chain,
    risk_map,
    robustness,
    verify_exact,
)
from rlverify.exact.explain import check_explainable
from rlverify.exact.maps import reading
from rlverify.exact.optimum import as_exact_result
from rlverify.figures import figure_png, path_pairs
from rlverify.report.common import (
    ASSUMED_FAILURE,
    ReportOptions,
    SectionFn,
    Shared,
    run_plan,
    runs_text,
    shown,
    simulation,
    timed,
)
from rlverify.report.page import Check, Section, fmt, to_png
from rlverify.targets import ModelTarget


def model_shared(t: ModelTarget, options: ReportOptions, shared: Shared) -> Shared:
    """The stochastic chain and its value, the full MDP and its optimum: each built once for every section."""
    prop, say, timings = t.property, shared.say, shared.timings
    assert prop is not None and t.policy is not None
    policy = t.policy
    chosen = _map_variables(t, options)
    say("exact: the policy's chain")
    chain = timed(timings, "chain (stochastic)", lambda: policy_chain(t.model, prop, policy, ExactOptions(), progress=say))
    exact = timed(timings, "exact", lambda: t.stamp(verify_exact(t.model, prop, policy, ExactOptions(), chain=chain)))
    mdp, skipped, best = None, None, None
    try:
        mdp = timed(timings, "full MDP", lambda: full_mdp(t.model, prop, ExactOptions(), policy=policy, progress=say))
    except ModelTooLargeError as exc:
        skipped = str(exc)
    if mdp is not None:
        say("exact: Pmin/Pmax over all schedulers")
        best = timed(timings, "monolithic", lambda: optimum(t.model, prop, ExactOptions(), mdp=mdp))
    read = _reading(prop, options)
    return replace(
        shared,
        chain=chain,
        exact=exact,
        mdp=mdp,
        mdp_skipped=skipped,
        optimum=best,
        slack=slack(exact),
        map_vars=chosen,
        reading=read,
    )


def _reading(prop: Any, options: ReportOptions) -> str | None:
    """The property's reading (:func:`~rlverify.exact.maps.reading`); None where it does not say or is no P/R."""
    try:
        return reading(prop, options.optimum)[0]
    except PropertyError:
        return None


def _map_variables(t: ModelTarget, options: ReportOptions) -> tuple[str, str] | None:
    """The risk map's variables: as asked (checked against the model), else the policy's first two integer features."""
    assert t.policy is not None
    integer_features = [f for f in t.policy.features if f not in getattr(t.model, "boolean_variables", ())]
    known = tuple(getattr(t.model, "variables", ())) or tuple(t.policy.features)
    for name in options.map_vars or ():
        if name not in known:
            raise OptionError(
                f"--map: '{name}' is not a model variable{did_you_mean(name, known)} (variables: {', '.join(known)})"
            )
    if options.map_vars:
        return options.map_vars
    return (integer_features[0], integer_features[1]) if len(integer_features) >= 2 else None


def model_sections(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[list[Section], list[Check]]:
    """The sections of a PRISM/JANI model, in the page's order."""
    assert t.property is not None
    plan: list[SectionFn[ModelTarget]] = [_exact, _deterministic, _optimum]
    if shared.map_vars:
        plan.append(_risk_map)
    if t.property.operator == "P":
        plan += [_paths, _robustness]
    if options.explain_policy:
        plan += _explain_sections()
    plan.append(_statistical)
    return run_plan(plan, t, options, shared)


def _exact(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    exact = shared.exact
    assert exact is not None
    return Section(
        "Exact value (Storm, the induced chain)",
        rows=[
            ("value", fmt(exact.value)),
            ("bounds", f"[{fmt(exact.lower)}, {fmt(exact.upper)}]"),
            ("numerics", exact.guarantee),
            ("chain", f"{exact.states:,} states, {exact.transitions:,} transitions"),
            ("stalled probability", fmt(exact.stalled_probability)),
            ("warnings", "; ".join(exact.warnings) or "—"),
        ],
        data={"exact": exact.to_json()},
    ), []


def _deterministic(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    assert t.property is not None
    prop, policy = t.property, t.policy
    shared.say("exact: deterministic estimate")
    det = timed(
        shared.timings, "deterministic", lambda: verify_exact(t.model, prop, policy, ExactOptions(mode="deterministic"))
    )
    return Section(
        "Deterministic estimate (argmax action)",
        rows=[
            ("value", fmt(det.value)),
            ("chain", f"{det.states:,} states"),
            ("note", "the policy's argmax action only: an estimate, not the stochastic policy's value"),
        ],
        data={"deterministic": det.to_json()},
    ), []


def _optimum(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    exact, best = shared.exact, shared.optimum
    assert exact is not None
    if best is None:
        return Section("Optimum over all schedulers", note=f"skipped: {shared.mdp_skipped}"), []
    stalled = exact.stalled_probability > 0
    return Section(
        "Optimum over all schedulers (Pmin / Pmax of the MDP)",
        rows=[("Pmin / Pmax", f"{fmt(best.pmin)} / {fmt(best.pmax)}"), ("MDP", f"{best.states:,} states")],
        data={"monolithic": as_exact_result(best).to_json()},
    ), [
        Check(
            "Pmin <= value <= Pmax",
            within_optimum(exact.value, best.pmin, best.pmax, shared.slack, stalled=stalled),
            f"Pmin {fmt(best.pmin)} <= value {fmt(exact.value)} <= Pmax {fmt(best.pmax)}"
            + (" (stalled mass: only the upper bound applies)" if stalled else ""),
        )
    ]


def _risk_map(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """Value, optimum and regret per cell of the two map variables (worst case over the other variables)."""
    exact, chosen, prop, policy = shared.exact, shared.map_vars, t.property, t.policy
    assert exact is not None and chosen is not None and prop is not None and policy is not None
    optimum = shared.reading or "min"
    if shared.optimum is None:
        return Section("Risk and regret map", note=f"skipped: {shared.mdp_skipped}"), []
    shared.say(f"risk map on {chosen[0]}, {chosen[1]}")
    try:
        m = timed(
            shared.timings,
            "risk map",
            lambda: risk_map(
                t.model,
                prop,
                policy,
                chosen,
                MapOptions(agg=options.map_agg, where=options.map_where, optimum=optimum),
                chain=shared.chain,
                optimum=shared.optimum,
            ),
        )
    except RlverifyError as exc:
        return Section("Risk and regret map", note=f"skipped: {exc}"), []
    m = t.stamp(m).with_provenance(policy=shown(t.policy_source))  # named as the user wrote them
    png = to_png(lambda path: m.figure().draw(path))
    expected = shared.optimum.pmin if optimum == "min" else shared.optimum.pmax
    name = ("R" if str(exact.property).lstrip().startswith("R") else "P") + optimum
    return Section(
        f"Risk and regret map on {chosen[0]}, {chosen[1]} ({_map_view(m, options)})",
        rows=[
            ("regret at the initial state", fmt(m.initial_regret)),
            ("largest regret in a cell", fmt(float(np.nanmax(m.regret)) if not np.isnan(m.regret).all() else None)),
        ],
        note=_map_reading(optimum, shared.reading),
        images=[("policy value, optimum and regret per cell", png)],
        data={"risk_map": m.to_json()},
    ), [
        Check(
            "risk map's initial value = exact value",
            same(m.initial_value, exact.value, shared.slack),
            f"{fmt(m.initial_value)} vs {fmt(exact.value)}",
        ),
        Check(
            f"risk map's initial optimum = {name}",
            same(m.initial_optimum, expected, shared.slack),
            f"{fmt(m.initial_optimum)} vs {fmt(expected)}",
        ),
    ]


def _map_view(m: Any, options: ReportOptions) -> str:
    """Which states each cell shows: the other variables at their initial values, or aggregated over them."""
    if options.map_where == "initial" and m.where:
        return f"the other variables at their initial values: {m.where}"
    return f"{m.agg} over the other variables" + (f", where {m.where}" if m.where else "")


def _map_reading(optimum: str, reading: str | None) -> str:
    """How the map reads the property (a failure or a goal), and whether the property said so."""
    text = (
        "the property read as a failure: regret = value - Pmin"
        if optimum == "min"
        else "the property read as a goal: regret = Pmax - value"
    )
    if reading is None:
        return f"{text}: {ASSUMED_FAILURE}"
    return f"{text} (--optimum {'max' if optimum == 'min' else 'min'} for the other reading)"


def _paths(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """The most probable paths to the target, drawn on the variable pairs that move (:func:`~rlverify.figures.path_pairs`)."""
    exact, prop, policy = shared.exact, t.property, t.policy
    assert exact is not None and prop is not None and policy is not None
    try:
        check_explainable(prop)
    except RlverifyError as exc:
        return Section("Failure paths", note=f"skipped: {exc}"), []
    if shared.mdp is None:  # the steps are described with the MDP's choices
        return Section("Failure paths", note=f"skipped: {shared.mdp_skipped}"), []
    k = options.explain
    shared.say(f"failure paths: the {k} most probable")
    fp = timed(
        shared.timings,
        "paths",
        lambda: explain_paths(t.model, prop, policy, k, chain=shared.chain, mdp=shared.mdp, value=exact.value),
    )
    rows = [
        [str(i + 1), f"{p.probability:.4g}", str(p.length), ", ".join(f"{k_}={v}" for k_, v in p.steps[-1].state.items())]
        for i, p in enumerate(fp.paths)
    ]
    fp = t.stamp(fp).with_provenance(policy=shown(t.policy_source))
    images = _path_images(fp)
    share = "—" if fp.share is None else f"{fp.share:.3g}"
    return Section(
        f"Failure paths (the {k} most probable paths to the target)",
        rows=[
            ("paths listed", f"{len(fp.paths)}" + (" (all there are)" if fp.exhausted else "")),
            ("their probability / share of the value", f"{fp.covered:.4g} / {share}"),
        ],
        tables=[
            (
                "paths (each step, with the policy's distribution: in the JSON)",
                ["#", "probability", "steps", "target state reached"],
                rows,
            )
        ],
        images=images,
        note=fp.note or "",
        data={"paths": fp.to_json()},
    ), [
        Check(
            "the listed paths' probability <= the value",
            inside(fp.covered, 0.0, exact.value, shared.slack),
            f"{fp.covered:.6g} <= {fmt(exact.value)}",
        )
    ]


def _path_images(fp: Any) -> list[tuple[str, bytes]]:
    """Each path drawn on the variable pairs that move (none with fewer than two variables)."""
    if len(fp.variables) < 2:
        return []
    pairs = path_pairs(fp)
    drawn = "; ".join(f"{a}, {b}" for a, b in pairs)
    return [(f"each path on the variable pairs that move ({drawn})", to_png(lambda path: plot_paths(fp, path, pairs)))]


def _robustness(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """Observation perturbations at ``options.epsilon`` (L-infinity) on the map variables (or all features)."""
    exact, prop, policy, eps, tolerance = shared.exact, t.property, t.policy, options.epsilon, shared.slack
    assert exact is not None and prop is not None and policy is not None
    if shared.mdp is None:
        return Section("Robustness to perturbed observations", note=f"skipped: {shared.mdp_skipped}"), []
    shared.say(f"robustness: perturbed observations (epsilon {eps})")
    worst = "min" if shared.reading == "max" else "max"  # a failure's worst case is its max
    try:
        r = timed(
            shared.timings,
            "robustness",
            lambda: robustness(
                t.model,
                prop,
                policy,
                RobustnessOptions(epsilon=eps, perturb=shared.map_vars, worst=worst),
                chain=shared.chain,
                mdp=shared.mdp,
            ),
        )
    except RlverifyError as exc:
        return Section("Robustness to perturbed observations", note=f"skipped: {exc}"), []
    rows = [
        ("features perturbed", ", ".join(r.perturbed)),
        ("budget", f"epsilon {r.epsilon} ({r.norm})"),
        ("nominal / worst / best", f"{fmt(r.nominal)} / {fmt(r.worst)} / {fmt(r.best)}"),
        ("FGSM attack (one gradient-sign perturbation per state)", fmt(r.attack)),
        ("states where a perturbation changes the action", f"{r.changed_states:,} of {r.decision_states:,}"),
        ("adversarial MDP", f"{r.states:,} states, {r.choices:,} choices, {r.transitions:,} transitions"),
    ]
    header, table = _worst_perturbations(r)
    checks = _robustness_checks(r, exact.value, tolerance)
    return Section(
        "Robustness to perturbed observations (exact: Pmax/Pmin of the adversarial MDP)",
        rows=rows,
        note=f"worst = the largest value: {ASSUMED_FAILURE}" if shared.reading is None else "",
        tables=[
            (
                "worst perturbations (largest gain first): the state, the observation shown to the policy, the gain",
                header,
                table,
            )
        ]
        if table
        else [],
        data={"robustness": r.to_json()},
    ), checks


def _worst_perturbations(r: Any) -> tuple[list[str], list[list[str]]]:
    """The ten worst perturbations as a table: the state, the observation shown to the policy, the gain."""
    top = r.worst_perturbations[:10]
    states = [w.get("state") or {} for w in top]
    observed = [w.get("observed") or {} for w in top]
    state_vars, shown_vars = _names_in(states), _names_in(observed)
    header = [*state_vars, *(f"{k} shown" for k in shown_vars), "gain"]
    table = [
        [str(state.get(k, "")) for k in state_vars] + [str(obs.get(k, "")) for k in shown_vars] + [f"{w.get('gain', 0.0):.3g}"]
        for w, state, obs in zip(top, states, observed, strict=True)
    ]
    return header, table


def _names_in(records: list[dict[str, Any]]) -> list[str]:
    """Every name in ``records``, in the order first seen."""
    return list(dict.fromkeys(k for record in records for k in record))


def _robustness_checks(r: Any, value: float, tolerance: float) -> list[Check]:
    """worst >= nominal >= best, the nominal value = the exact value, the attack within the adversarial MDP's range."""
    checks = [
        Check(
            "worst >= nominal >= best (perturbed observations)",
            ordered(r.worst, r.nominal, r.best, worst_is=r.worst_is, slack=tolerance),
            f"worst {fmt(r.worst)}, nominal {fmt(r.nominal)}, best {fmt(r.best)}",
        ),
        Check(
            "robustness nominal = exact value",
            same(r.nominal, value, tolerance),
            f"{fmt(r.nominal)} vs {fmt(value)}",
        ),
    ]
    if r.attack is not None:
        checks.append(
            Check(
                "FGSM attack within [Pmin, Pmax] of the adversarial MDP",
                inside(r.attack, r.pmin, r.pmax, tolerance),
                f"{fmt(r.pmin)} <= {fmt(r.attack)} <= {fmt(r.pmax)}",
            )
        )
    return checks


def _statistical(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    exact, prop, policy = shared.exact, t.property, t.policy
    assert exact is not None and prop is not None and policy is not None
    if prop.operator != "P":
        return Section(
            "Statistical estimate", note="skipped: the simulator estimates probabilities (P=?), not expected rewards"
        ), []
    try:
        stat = simulation(t.model, prop, policy, options, shared, "simulation")
    except RlverifyError as exc:
        return Section("Statistical estimate", note=f"skipped: {exc}"), []
    a, b = stat.interval
    return Section(
        "Statistical estimate (simulation, Clopper–Pearson)",
        rows=[
            ("estimate", fmt(stat.estimate)),
            ("interval", f"[{fmt(a)}, {fmt(b)}] at {stat.confidence:.1%}"),
            ("runs", runs_text(stat)),
            ("seed", str(stat.seed)),
        ],
        data={"statistical": stat.to_json()},
    ), [
        Check(
            "exact value inside the statistical interval",
            inside(exact.value, a, b, shared.slack),
            f"value {fmt(exact.value)} in [{fmt(a)}, {fmt(b)}] ({stat.confidence:.1%} confidence)",
        )
    ]


def _explain_sections() -> list[SectionFn[ModelTarget]]:
    """The sections of ``report --explain-policy`` (:mod:`rlverify.exact.explanations`): features, tree, critical."""
    return [_explain_features, _explain_tree, _explain_critical]


def _explain_features(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """Safety-relevant features: each fixed to its initial value, and perturbed by 1 alone; ranked, with the chart."""
    from rlverify.exact.features import feature_effects  # lazy: scipy.sparse.linalg, only with --explain-policy

    title = "Safety-relevant features (exact: the value without each feature, and under ±1 perturbations)"
    exact, prop, policy = shared.exact, t.property, t.policy
    assert exact is not None and prop is not None and policy is not None
    shared.say("explain: features")
    try:
        r = timed(shared.timings, "explain: features", lambda: feature_effects(t.model, prop, policy, progress=shared.say))
    except RlverifyError as exc:
        return Section(title, note=f"skipped: {exc}"), []
    header = ["feature", "effect", "fixed to", "value fixed", "±1 worst", "±1 best"]
    table = [
        [e.feature, fmt(e.effect), f"{e.reference:g}", fmt(e.fixed), fmt(e.perturbed_worst), fmt(e.perturbed_best)]
        for e in r.effects
    ]
    checks = [
        Check(
            "features: nominal = exact value",
            same(r.nominal, exact.value, shared.slack),
            f"{fmt(r.nominal)} vs {fmt(exact.value)}",
        )
    ]
    return Section(
        title,
        rows=[("nominal", fmt(r.nominal)), ("exact checks", f"{r.runs}")],
        tables=[("features ranked by effect (largest distance from the nominal value)", header, table)],
        images=[("features by effect", figure_png(r.figure()))],
        data={"features": r.to_json()},
    ), checks


def _explain_tree(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """A decision tree standing in for the policy, verified exactly as a policy."""
    from rlverify.exact.tree import fit_tree  # lazy: scipy.sparse.linalg, only with --explain-policy

    title = "A decision tree standing in for the policy (verified exactly as a policy)"
    exact, prop, policy = shared.exact, t.property, t.policy
    assert exact is not None and prop is not None and policy is not None
    shared.say("explain: decision tree")
    try:
        r = timed(
            shared.timings, "explain: tree", lambda: fit_tree(t.model, prop, policy, chain=shared.chain, progress=shared.say)
        )
    except RlverifyError as exc:
        return Section(title, note=f"skipped: {exc}"), []
    rows = [
        ("policy's value / tree's value", f"{fmt(r.policy_value)} / {fmt(r.tree_value)}"),
        ("tree", f"depth {r.depth}, {r.leaves} leaves"),
        ("weighted fidelity", f"{r.fidelity:.4g} ({r.weighting}; {r.fitted_states:,} states)"),
        ("tree stalls", fmt(r.tree_stalled)),
    ]
    checks = [
        Check(
            "tree: the policy's value = exact value",
            same(r.policy_value, exact.value, shared.slack),
            f"{fmt(r.policy_value)} vs {fmt(exact.value)}",
        )
    ]
    return Section(
        title,
        rows=rows,
        tables=[("the tree as rules (one per leaf)", ["rule"], [[rule] for rule in r.rules])],
        data={"tree": r.to_json()},
    ), checks


def _explain_critical(t: ModelTarget, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """Critical states: expected visits x the spread of Q(s, a); the top ones with the policy's choice and the best."""
    from rlverify.exact.critical import (  # lazy: scipy.sparse.linalg, only with --explain-policy
        CriticalOptions,
        critical_states,
    )

    title = "Critical states (expected visits x the spread of Q(s, a) over the offered actions)"
    prop, policy = t.property, t.policy
    assert prop is not None and policy is not None
    shared.say("explain: critical states")
    worst = "max" if options.optimum == "min" else "min"  # the report's reading of the property
    try:
        r = timed(
            shared.timings,
            "explain: critical",
            lambda: critical_states(
                t.model, prop, policy, CriticalOptions(top=10, worst=worst), chain=shared.chain, progress=shared.say
            ),
        )
    except RlverifyError as exc:
        return Section(title, note=f"skipped: {exc}"), []
    header = ["state", "score", "visits", "spread", "policy", "best action"]
    table = [
        [
            ", ".join(f"{k}={v}" for k, v in c.state.items()),
            f"{c.score:.4g}",
            f"{c.visits:.4g}",
            f"{c.spread:.4g}",
            ", ".join(f"{a} {p:.2f}" for a, p in c.policy.items()),
            c.best,
        ]
        for c in r.states
    ]
    return Section(
        title,
        rows=[("Q reads", f"P{r.optimum} afterwards"), ("states scored", f"{r.considered:,}")],
        tables=[("the top states", header, table)],
        note="; ".join(r.warnings),
        data={"critical": r.to_json()},
    ), []
