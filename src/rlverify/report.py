"""One report: every engine that applies to a target, side by side, checked against each other.

:func:`make_report` resolves a target, policy and property once (:func:`rlverify.resolve.resolve`)
and runs what applies:

* a PRISM/JANI model: the exact value, the deterministic estimate, Pmin/Pmax over all schedulers
  (when the MDP fits), a simulation estimate, the failure paths, a risk map and the robustness to
  observation perturbations (epsilon = 1);
* a native environment (Racetrack): a simulation estimate and the per-start-cell heat map, with
  Storm's optimum per cell;
* a continuous system: the abstraction's sound bound and a simulation estimate from random starts.

It then asserts that the answers are consistent — the exact value inside the statistical interval,
``Pmin <= value <= Pmax``, ``worst >= nominal >= best``, each heat-map cell's goal probability no
higher than its optimum, the abstraction bound at least the statistical interval's lower end — and
:meth:`Report.to_html` writes one self-contained page (inline images and styles; no network needed).
A check fails with probability at most the statistical ``delta`` when every engine is right.
"""

from __future__ import annotations

import math

import base64
import html
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import ModelTooLargeError, RlverifyError
from rlverify.policies.base import DEFAULT_POLICY_TIMEOUT
from rlverify.results import versions

Progress = Callable[[str], None]
#: the heat map's optimum comes from Storm's value iteration (a convergence heuristic): compared with this slack
OPTIMUM_SLACK = 1e-3


@dataclass
class Section:
    """One engine's part of a report: key/value rows, tables ``(caption, header, rows)`` and PNG images."""

    title: str
    rows: list[tuple[str, str]] = field(default_factory=list)
    tables: list[tuple[str, list[str], list[list[str]]]] = field(default_factory=list)
    images: list[tuple[str, bytes]] = field(default_factory=list)
    note: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Check:
    """A cross-method consistency check: its name, whether it holds, and both numbers in words."""

    name: str
    ok: bool
    detail: str


@dataclass
class Report:
    """What every applicable engine said about one target, and whether they agree.

    Attributes:
        target, kind, property, policy: as resolved.
        sections: one per engine run (or skipped, with the reason).
        checks: the cross-method consistency checks.
        settings: runs, seed, delta, epsilon, ...; timings: seconds per section; versions: packages.
    """

    target: str
    kind: str
    property: str
    policy: str | None
    sections: list[Section]
    checks: list[Check]
    settings: dict[str, Any]
    timings: dict[str, float]
    versions: dict[str, str]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def disagreements(self) -> list[str]:
        """One line per failed check, with both numbers."""
        return [f"{self.target}: {c.name}: {c.detail}" for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "kind": self.kind, "property": self.property, "policy": self.policy,
                "ok": self.ok, "checks": [vars(c) for c in self.checks],
                "sections": [{"title": s.title, "rows": dict(s.rows), "note": s.note, **s.data} for s in self.sections],
                "settings": self.settings, "timings": self.timings, "versions": self.versions}

    def to_html(self) -> str:
        """The page: one self-contained HTML document (inline CSS, images as data URIs)."""
        e = html.escape
        parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>rlverify report — {e(self.target)}"
                 f"</title><style>{_CSS}</style></head><body>",
                 f"<h1>rlverify report</h1><p class='sub'>{e(self.target)} · {e(self.property)} · policy "
                 f"{e(self.policy or '—')}</p>"]
        verdict = "all engines agree" if self.ok else "ENGINES DISAGREE"
        parts.append(f"<h2 id='checks'>Consistency <span class='{'ok' if self.ok else 'bad'}'>{verdict}</span></h2>"
                     "<table><tr><th>check</th><th>holds</th><th>numbers</th></tr>")
        for c in self.checks:
            parts.append(f"<tr><td>{e(c.name)}</td><td class='{'ok' if c.ok else 'bad'}'>{'yes' if c.ok else 'NO'}"
                         f"</td><td>{e(c.detail)}</td></tr>")
        parts.append("</table>")
        for s in self.sections:
            parts.append(f"<h2>{e(s.title)}</h2>")
            if s.note:
                parts.append(f"<p class='note'>{e(s.note)}</p>")
            if s.rows:
                parts.append("<table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in s.rows)
                             + "</table>")
            for caption, header, rows in s.tables:
                parts.append(f"<table><caption>{e(caption)}</caption><tr>"
                             + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>"
                             + "".join("<tr>" + "".join(f"<td>{e(str(x))}</td>" for x in r) + "</tr>" for r in rows)
                             + "</table>")
            for caption, png in s.images:
                data = base64.b64encode(png).decode("ascii")
                parts.append(f"<figure><img alt='{e(caption)}' src='data:image/png;base64,{data}'>"
                             f"<figcaption>{e(caption)}</figcaption></figure>")
        parts.append("<h2>Settings, timings, versions</h2><table>"
                     + "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in self.settings.items())
                     + "".join(f"<tr><th>time: {e(k)}</th><td>{v:.2f} s</td></tr>" for k, v in self.timings.items())
                     + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in self.versions.items())
                     + "</table></body></html>")
        return "\n".join(parts)


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:0}.sub{color:#555;margin-top:.2em}table{border-collapse:collapse;margin:.6em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top;font-size:14px}
th{background:#f3f3f3}caption{text-align:left;font-weight:bold;padding:.3em 0}.ok{color:#16723a;font-weight:bold}
.bad{color:#b00020;font-weight:bold}.note{color:#555;font-style:italic}figure{margin:1em 0}img{max-width:100%}"""


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.6g}"


def _same(a: float, b: float, slack: float) -> bool:
    """Whether two engines' values agree: equal (infinite expected rewards included) or within ``slack`` + 1e-9."""
    return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= slack + 1e-9)


def _png(draw: Callable[[Path], Any]) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rlverify-report-") as tmp:
        path = Path(tmp) / "figure.png"
        draw(path)
        return path.read_bytes()


def make_report(target: str | Path | Any, *, property: str | None = None, policy: str | Any | None = None,
                constants: str | None = None, runs: int = 10_000, delta: float = 0.001, seed: int = 0,
                epsilon: int = 1, explain: int = 5, map_vars: tuple[str, str] | None = None, optimum: str = "min",
                features: list[str] | None = None, actions: list[str] | None = None, output: str | None = None,
                env_kwargs: str | None = None, progress: Progress | None = None, trust_code: bool = False,
                policy_timeout: float | None = DEFAULT_POLICY_TIMEOUT) -> Report:
    """Run every engine that applies to ``target`` and check them against each other.

    Args:
        target, constants, policy, property: as for :func:`rlverify.resolve.resolve` (default property:
            the benchmark's first; default policy: its reference policy).
        runs, delta, seed: the simulation (Clopper–Pearson interval at confidence ``1 - delta``).
        epsilon: the observation-perturbation budget of the robustness section (L-infinity, integer).
        explain: how many failure paths to list; map_vars: the two variables of the risk map
            (default: the first two integer features of the policy, if any).
        optimum: the risk map's reading of the property: ``min`` (a failure: regret = value - Pmin,
            the default: a report asks how unsafe a policy is) or ``max`` (a goal: regret = Pmax - value).
        features, actions, output: overrides for policy files that do not declare them.
        env_kwargs: the arguments of a ``gym:ID`` target.
        trust_code, policy_timeout: as :func:`rlverify.resolve.resolve` takes them (``--trust-code``,
            ``--policy-timeout``).

    Returns:
        A :class:`Report`; ``report.ok`` is False when the engines disagree (nothing is raised for that).
    """
    from rlverify.resolve import resolve, resolve_property

    say = progress or (lambda msg: None)
    t = resolve(target, constants=constants, policy=policy, features=features, actions=actions, output=output,
                property=None, needs_policy=True, env_kwargs=env_kwargs, trust_code=trust_code,
                policy_timeout=policy_timeout)
    bench = t.benchmark
    if t.kind == "continuous":  # the system's unsafe set within its horizon: nothing to parse
        if property not in (None, "unsafe"):
            raise RlverifyError(f"{t.name}: a continuous system is checked for its unsafe set ('unsafe'); drop --property")
        prop_name = "unsafe"
    else:
        if property is None:
            if bench is None or not bench.properties:
                raise RlverifyError(f"{t.name}: give --property (a model file has no default property)")
            property = next(iter(bench.properties))
        t = replace(t, property=resolve_property(bench, t.model, t.kind, property))  # the model is built once
        prop_name = t.property.name or t.property.text
    settings = {"runs": runs, "delta": delta, "seed": seed, "constants": constants or ""}
    if t.kind == "prism":
        settings.update(epsilon=epsilon, explain=explain, optimum=optimum)
    sections: list[Section] = []
    checks: list[Check] = []
    timings: dict[str, float] = {}
    run = {"prism": _prism, "native": _native, "continuous": _continuous}[t.kind]
    run(t, sections, checks, timings, settings, say, map_vars)
    return Report(target=t.name, kind=t.kind, property=prop_name, policy=_shown(t.policy_source),
                  sections=sections, checks=checks, settings=settings, timings=timings, versions=versions())


def _shown(source: str | None) -> str | None:
    """A policy's source for the page: a shipped file by its name, a user's file as given."""
    if source and "rlverify/benchmarks/data/" in source.replace("\\", "/"):
        return f"{Path(source).name} (shipped with rlverify)"
    return source


def _timed(timings: dict[str, float], name: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        return fn()
    finally:
        timings[name] = time.perf_counter() - start


def _prism(t: Any, sections: list[Section], checks: list[Check], timings: dict[str, float], settings: dict[str, Any],
           say: Progress, map_vars: tuple[str, str] | None) -> None:
    from rlverify.exact import ExactOptions, verify_exact
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.verify import StatisticalOptions, verify_statistical

    prop = t.property
    say("exact: the policy's chain")
    exact = _timed(timings, "exact", lambda: verify_exact(t.model, prop, t.policy, ExactOptions()))
    slack = 2 * (exact.precision or 0.0) * max(1.0, abs(exact.value)) if math.isfinite(exact.value) else 0.0
    sections.append(Section("Exact value (Storm, the induced chain)", rows=[
        ("value", _fmt(exact.value)), ("bounds", f"[{_fmt(exact.lower)}, {_fmt(exact.upper)}]"),
        ("numerics", exact.guarantee), ("chain", f"{exact.states:,} states, {exact.transitions:,} transitions"),
        ("stalled probability", _fmt(exact.stalled_probability)),
        ("warnings", "; ".join(exact.warnings) or "—")], data={"exact": exact.to_json()}))
    say("exact: deterministic estimate")
    det = _timed(timings, "deterministic", lambda: verify_exact(t.model, prop, t.policy, ExactOptions(mode="deterministic")))
    sections.append(Section("Deterministic estimate (argmax action)", rows=[
        ("value", _fmt(det.value)), ("chain", f"{det.states:,} states"),
        ("note", "the policy's argmax action only: an estimate, not the stochastic policy's value")],
        data={"deterministic": det.to_json()}))
    say("exact: Pmin/Pmax over all schedulers")
    try:
        mono = _timed(timings, "monolithic", lambda: verify_exact(t.model, prop, None, ExactOptions(mode="monolithic")))
    except ModelTooLargeError as exc:
        sections.append(Section("Optimum over all schedulers", note=f"skipped: {exc}"))
        mono = None
    if mono is not None:
        sections.append(Section("Optimum over all schedulers (Pmin / Pmax of the MDP)", rows=[
            ("Pmin / Pmax", f"{_fmt(mono.pmin)} / {_fmt(mono.pmax)}"), ("MDP", f"{mono.states:,} states")],
            data={"monolithic": mono.to_json()}))
        lo_ok = mono.pmin - slack <= exact.value or exact.stalled_probability > 0
        checks.append(Check("Pmin <= value <= Pmax", lo_ok and exact.value <= mono.pmax + slack,
                            f"Pmin {_fmt(mono.pmin)} <= value {_fmt(exact.value)} <= Pmax {_fmt(mono.pmax)}"
                            + (" (stalled mass: only the upper bound applies)" if exact.stalled_probability > 0 else "")))
    integer_features = [f for f in t.policy.features if f not in getattr(t.model, "boolean_variables", ())]
    known = tuple(getattr(t.model, "variables", ())) or tuple(t.policy.features)
    for name in map_vars or ():
        if name not in known:
            from rlverify.errors import OptionError, did_you_mean

            raise OptionError(f"--map: '{name}' is not a model variable{did_you_mean(name, known)} "
                              f"(variables: {', '.join(known)})")
    chosen = map_vars or (tuple(integer_features[:2]) if len(integer_features) >= 2 else None)
    settings.setdefault("map_variables", ",".join(chosen) if chosen else "")
    if chosen:
        _risk_map(t, exact, mono, slack, chosen, sections, checks, timings, settings, say)
    if prop.operator == "P":
        _paths(t, exact, slack, chosen, sections, checks, timings, settings, say)
        _robustness(t, exact, slack, chosen, sections, checks, timings, settings, say)
    stat = None
    if prop.operator == "P":
        say("simulation")
        try:
            stat = _timed(timings, "statistical", lambda: verify_statistical(t.model, prop, t.policy, StatisticalOptions(
                method="clopper-pearson", runs=settings["runs"], delta=settings["delta"],
                simulation=SimulationOptions(seed=settings["seed"]))))
        except RlverifyError as exc:
            sections.append(Section("Statistical estimate", note=f"skipped: {exc}"))
    if stat is not None:
        a, b = stat.interval
        sections.append(Section("Statistical estimate (simulation, Clopper–Pearson)", rows=[
            ("estimate", _fmt(stat.estimate)), ("interval", f"[{_fmt(a)}, {_fmt(b)}] at {stat.confidence:.1%}"),
            ("runs", f"{stat.runs:,} (undecided {stat.undecided}, stalled {stat.stalled})"), ("seed", str(stat.seed))],
            data={"statistical": stat.to_json()}))
        checks.append(Check("exact value inside the statistical interval", a - slack <= exact.value <= b + slack,
                            f"value {_fmt(exact.value)} in [{_fmt(a)}, {_fmt(b)}] ({stat.confidence:.1%} confidence)"))
    elif prop.operator != "P":
        sections.append(Section("Statistical estimate", note="skipped: the simulator estimates probabilities "
                                                             "(P=?), not expected rewards"))


def _risk_map(t: Any, exact: Any, mono: Any, slack: float, chosen: tuple[str, ...], sections: list[Section],
              checks: list[Check], timings: dict[str, float], settings: dict[str, Any], say: Progress) -> None:
    """Value, optimum and regret per cell of the two map variables (worst case over the other variables)."""
    from rlverify.exact import MapOptions, risk_map

    optimum = settings.setdefault("optimum", "min")
    say(f"risk map on {chosen[0]}, {chosen[1]}")
    try:
        m = _timed(timings, "risk map", lambda: risk_map(t.model, t.property, t.policy, chosen,
                                                         MapOptions(agg="max", optimum=optimum)))
    except RlverifyError as exc:
        sections.append(Section("Risk and regret map", note=f"skipped: {exc}"))
        return
    png = _png(lambda path: m.figure().draw(path))
    reading = ("the property read as a failure: regret = value - Pmin" if optimum == "min" else
               "the property read as a goal: regret = Pmax - value")
    sections.append(Section(f"Risk and regret map on {chosen[0]}, {chosen[1]} (max over the other variables)", rows=[
        ("regret at the initial state", _fmt(m.initial_regret)), ("largest regret in a cell", _fmt(float(np.nanmax(m.regret))))],
        note=f"{reading} (--optimum {'max' if optimum == 'min' else 'min'} for the other reading)",
        images=[("policy value, optimum and regret per cell", png)], data={"risk_map": m.to_json()}))
    checks.append(Check("risk map's initial value = exact value", _same(m.initial_value, exact.value, slack),
                        f"{_fmt(m.initial_value)} vs {_fmt(exact.value)}"))
    if mono is not None:
        expected = mono.pmin if optimum == "min" else mono.pmax
        name = ("R" if str(exact.property).lstrip().startswith("R") else "P") + optimum
        checks.append(Check(f"risk map's initial optimum = {name}", _same(m.initial_optimum, expected, slack),
                            f"{_fmt(m.initial_optimum)} vs {_fmt(expected)}"))


def _paths(t: Any, exact: Any, slack: float, chosen: tuple[str, ...] | None, sections: list[Section],
           checks: list[Check], timings: dict[str, float], settings: dict[str, Any], say: Progress) -> None:
    """The most probable paths to the target, drawn on the map variables when there are two."""
    from rlverify.exact import explain_paths, plot_paths
    from rlverify.exact.explain import check_explainable

    try:
        check_explainable(t.property)
    except RlverifyError as exc:
        sections.append(Section("Failure paths", note=f"skipped: {exc}"))
        return
    k = settings["explain"]
    say(f"failure paths: the {k} most probable")
    fp = _timed(timings, "paths", lambda: explain_paths(t.model, t.property, t.policy, k, value=exact.value))
    rows = [[str(i + 1), f"{p.probability:.4g}", str(p.length),
             ", ".join(f"{k_}={v}" for k_, v in p.steps[-1].state.items())] for i, p in enumerate(fp.paths)]
    images = []
    if chosen:
        images.append((f"the paths on {chosen[0]}, {chosen[1]}", _png(lambda path: plot_paths(fp, path, [chosen]))))
    share = "—" if fp.share is None else f"{fp.share:.3g}"
    sections.append(Section(f"Failure paths (the {k} most probable paths to the target)", rows=[
        ("paths listed", f"{len(fp.paths)}" + (" (all there are)" if fp.exhausted else "")),
        ("their probability / share of the value", f"{fp.covered:.4g} / {share}")],
        tables=[("paths (each step, with the policy's distribution: in the JSON)", ["#", "probability", "steps",
                                                                                   "target state reached"], rows)],
        images=images, data={"paths": fp.to_json()}))
    checks.append(Check("the listed paths' probability <= the value", fp.covered <= exact.value + slack,
                        f"{fp.covered:.6g} <= {_fmt(exact.value)}"))


def _robustness(t: Any, exact: Any, slack: float, chosen: tuple[str, ...] | None, sections: list[Section],
                checks: list[Check], timings: dict[str, float], settings: dict[str, Any], say: Progress) -> None:
    """Observation perturbations at ``settings["epsilon"]`` (L-infinity) on the map variables (or all features)."""
    from rlverify.exact import RobustnessOptions, robustness

    eps = settings["epsilon"]
    say(f"robustness: perturbed observations (epsilon {eps})")
    try:
        worst = "max" if settings.get("optimum", "min") == "min" else "min"  # a failure's worst case is its max
        r = _timed(timings, "robustness", lambda: robustness(t.model, t.property, t.policy, RobustnessOptions(
            epsilon=eps, perturb=chosen, worst=worst)))
    except RlverifyError as exc:
        sections.append(Section("Robustness to perturbed observations", note=f"skipped: {exc}"))
        return
    rows = [("features perturbed", ", ".join(r.perturbed)), ("budget", f"epsilon {r.epsilon} ({r.norm})"),
            ("nominal / worst / best", f"{_fmt(r.nominal)} / {_fmt(r.worst)} / {_fmt(r.best)}"),
            ("FGSM attack (one gradient-sign perturbation per state)", _fmt(r.attack)),
            ("states where a perturbation changes the action", f"{r.changed_states:,} of {r.decision_states:,}"),
            ("adversarial MDP", f"{r.states:,} states, {r.choices:,} choices, {r.transitions:,} transitions")]
    top = r.worst_perturbations[:10]
    table = [[str(w.get("state")), str(w.get("observed")), f"{w.get('gain', 0.0):.3g}"] for w in top]
    sections.append(Section("Robustness to perturbed observations (exact: Pmax/Pmin of the adversarial MDP)",
                            rows=rows, tables=[("worst perturbations (largest gain first)",
                                                ["state", "observation shown", "gain"], table)] if table else [],
                            data={"robustness": r.to_json()}))
    ok = r.worst + slack >= r.nominal >= r.best - slack if r.worst_is == "max" else r.worst - slack <= r.nominal <= r.best + slack
    checks.append(Check("worst >= nominal >= best (perturbed observations)", ok,
                        f"worst {_fmt(r.worst)}, nominal {_fmt(r.nominal)}, best {_fmt(r.best)}"))
    checks.append(Check("robustness nominal = exact value", _same(r.nominal, exact.value, slack),
                        f"{_fmt(r.nominal)} vs {_fmt(exact.value)}"))
    if r.attack is not None:
        checks.append(Check("FGSM attack within [Pmin, Pmax] of the adversarial MDP",
                            r.pmin - slack <= r.attack <= r.pmax + slack,
                            f"{_fmt(r.pmin)} <= {_fmt(r.attack)} <= {_fmt(r.pmax)}"))


def _native(t: Any, sections: list[Section], checks: list[Check], timings: dict[str, float], settings: dict[str, Any],
            say: Progress, map_vars: tuple[str, str] | None) -> None:
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.heatmap import heatmap, plot_heatmap
    from rlverify.statistical.verify import StatisticalOptions, verify_statistical

    say("simulation")
    stat = _timed(timings, "statistical", lambda: verify_statistical(t.model, t.property, t.policy, StatisticalOptions(
        method="clopper-pearson", runs=settings["runs"], delta=settings["delta"],
        simulation=SimulationOptions(seed=settings["seed"]))))
    a, b = stat.interval
    sections.append(Section("Statistical estimate (simulation from the start line)", rows=[
        ("estimate", _fmt(stat.estimate)), ("interval", f"[{_fmt(a)}, {_fmt(b)}] at {stat.confidence:.1%}"),
        ("runs", f"{stat.runs:,} (undecided {stat.undecided}, stalled {stat.stalled})")],
        data={"statistical": stat.to_json()}))
    say("heat map: every start cell, with Storm's optimum")
    cell_runs = settings.setdefault("heatmap_runs_per_cell", 200)
    hm = _timed(timings, "heatmap", lambda: heatmap(t.model, t.policy, StatisticalOptions(
        method="clopper-pearson", runs=cell_runs, delta=settings["delta"],
        simulation=SimulationOptions(seed=settings["seed"])), optimal=True, benchmark=t.benchmark.id))
    png = _png(lambda p: plot_heatmap(hm, p))
    # one check over M cells: each cell's lower end at delta / M (Bonferroni), so that a false alarm has
    # probability <= delta overall
    from scipy.stats import beta

    k = np.rint(hm.goal * hm.runs)
    level = settings["delta"] / max(1, len(hm.cells))
    low = np.where(k > 0, beta.ppf(level, np.maximum(k, 1), hm.runs - k + 1), 0.0)
    over = low - OPTIMUM_SLACK > hm.optimal
    sections.append(Section("Per start cell: goal and crash probability, Storm's optimum, the gap", rows=[
        ("cells", f"{len(hm.cells):,} x {int(hm.runs[0]):,} runs"), ("mean goal / crash", f"{hm.goal.mean():.4f} / "
                                                                                    f"{hm.crash.mean():.4f}"),
        ("mean optimum / max gap", f"{hm.optimal.mean():.4f} / {hm.gap.max():.4f}")],
        images=[("goal, crash, optimum and gap per start cell", png)]))
    checks.append(Check(f"each cell's goal estimate (lower end at delta/{len(hm.cells)} per cell) at or below Storm's "
                        f"optimum (+{OPTIMUM_SLACK:g})", not over.any(),
                        f"{int(over.sum())} of {len(hm.cells)} cells above the optimum"
                        + (f" (first: cell {hm.cells[int(np.argmax(over))].tolist()}, lower end "
                           f"{low[int(np.argmax(over))]:.4f} > optimum {hm.optimal[int(np.argmax(over))]:.4f})"
                           if over.any() else "")))


def _continuous(t: Any, sections: list[Section], checks: list[Check], timings: dict[str, float],
                settings: dict[str, Any], say: Progress, map_vars: tuple[str, str] | None) -> None:
    from scipy.stats import beta

    from rlverify.abstraction import AbstractionOptions, verify_abstraction
    from rlverify.abstraction.plots import plot_result
    from rlverify.abstraction.verify import continuous_system, initial_box
    from rlverify.models.continuous.base import simulate

    system = continuous_system(t.model)
    horizon = settings.setdefault("horizon", int(getattr(system, "horizon", 0) or 3))
    options = AbstractionOptions(horizon=horizon, domain=settings.setdefault("domain", "box"),
                                 phi=settings.setdefault("phi", 0.5), seed=settings["seed"])
    say("abstraction: sound upper bound")
    bound = _timed(timings, "abstraction", lambda: verify_abstraction(system, t.policy, options))
    images = []
    if len(bound.variables) == 2:
        images.append(("initial region: parts by bound and by action probability", _png(lambda p: plot_result(bound, p))))
    sections.append(Section("Sound abstraction (upper bound on failure within k steps)", rows=[
        ("upper bound", _fmt(bound.upper_bound)), ("guarantee", bound.guarantee), ("horizon", str(horizon)),
        ("abstract states", f"{bound.n_abstract_states:,}"), ("domain", options.domain)], images=images))
    say("simulation from random start states")
    lo, hi = initial_box(system, options)
    rng = np.random.default_rng(settings["seed"])
    n = settings["runs"]
    starts = lo + (hi - lo) * rng.random((n, len(lo)))
    failed = _timed(timings, "statistical", lambda: simulate(system, t.policy, starts, horizon, rng))
    k = int(failed.sum())
    a = float(beta.ppf(settings["delta"] / 2, k, n - k + 1)) if k > 0 else 0.0
    b = float(beta.ppf(1 - settings["delta"] / 2, k + 1, n - k)) if k < n else 1.0
    sections.append(Section("Statistical estimate (uniform random starts in the initial region)", rows=[
        ("estimate", _fmt(k / n)), ("interval", f"[{_fmt(a)}, {_fmt(b)}] at {1 - settings['delta']:.1%}"),
        ("runs", f"{n:,}")]))
    checks.append(Check("abstraction bound >= the statistical interval's lower end", bound.upper_bound >= a - 1e-12,
                        f"bound {_fmt(bound.upper_bound)} >= {_fmt(a)} (the bound holds for every start state, "
                        "the estimate averages over random ones)"))


def write_report(report: Report, path: str | Path, *, force: bool = False) -> Path:
    """Write ``report.to_html()`` to ``path`` atomically (never over an existing file without ``force``).

    Raises:
        FileWriteError: the file exists without ``force``, or cannot be written.
    """
    from rlverify.files import write_text

    return write_text(path, report.to_html(), force=force, what="--out")


__all__ = ["Check", "Report", "Section", "make_report", "write_report"]
