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

import base64
import builtins
import html
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rlverify.crosscheck import inside, ordered, same, slack, within_optimum
from rlverify.errors import ModelTooLargeError, OptionError, PropertyError, RlverifyError, did_you_mean
from rlverify.exact import (
    ExactOptions,
    FullMDP,
    MapOptions,
    PolicyChain,
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
from rlverify.figures import path_pairs
from rlverify.models.userfile import DEFAULT_SYSTEM_TIMEOUT
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, DEFAULT_POLICY_TIMEOUT
from rlverify.resolve import Target
from rlverify.results import ExactResult, OptimumResult, Provenance, Result, Summary, versions

T = TypeVar("T")

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


@dataclass(frozen=True)
class Report(Result):
    """What every applicable engine said about one target, and whether they agree.

    Attributes:
        kind: the target's kind (model, property, policy: the provenance's, as resolved).
        headline: the verdict in a few rows (the policy's value, the best and worst possible, the estimate),
            shown first on the page.
        sections: one per engine run (or skipped, with the reason).
        checks: the cross-method consistency checks.
        provenance: settings (runs, seed, delta, epsilon, ...); timings (seconds per section); versions.
    """

    kind: str
    sections: list[Section]
    checks: list[Check]
    headline: list[tuple[str, str]] = field(default_factory=list)

    @builtins.property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(c.ok for c in self.checks)

    def disagreements(self) -> list[str]:
        """One line per failed check, with both numbers."""
        return [f"{self.model}: {c.name}: {c.detail}" for c in self.checks if not c.ok]

    def _summary(self) -> Summary:
        """The verdict, each consistency check and each section's headline rows (:meth:`to_html` is the full page)."""
        rows = [(c.name, ("holds: " if c.ok else "FAILS: ") + c.detail) for c in self.checks]
        rows += [(s.title, "; ".join(f"{k} {v}" for k, v in s.rows[:3]) or s.note) for s in self.sections]
        return Summary(
            f"report: every applicable engine on one {self.kind} target (to_html() for the page)",
            "all engines agree" if self.ok else "ENGINES DISAGREE",
            "each section states its own guarantee (exact, sound bound or statistical interval)",
            tuple(rows),
        )

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """``ok``, the checks, and each section's rows, note and data."""
        return {
            "kind": self.kind,
            "ok": self.ok,
            "headline": dict(self.headline),
            "checks": [vars(c) for c in self.checks],
            "sections": [{"title": s.title, "rows": dict(s.rows), "note": s.note, **s.data} for s in self.sections],
        }

    def to_html(self) -> str:
        """The page: one self-contained HTML document (inline CSS, images as data URIs)."""
        e = html.escape
        parts = [
            f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>rlverify report — {e(self.model)}"
            f"</title><style>{_CSS}</style></head><body>",
            f"<h1>rlverify report</h1><p class='sub'>{e(self.model)} · {e(self.property)} · policy "
            f"{e(self.policy or '—')}</p>",
        ]
        verdict = "all engines agree" if self.ok else "ENGINES DISAGREE"
        if self.headline:
            parts.append(
                f"<section id='verdict' class='verdict {'' if self.ok else 'disagree'}'><h2>Verdict</h2><table>"
                + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in self.headline)
                + f"<tr><th>engines</th><td class='{'ok' if self.ok else 'bad'}'>{verdict}</td></tr></table></section>"
            )
        parts.append(
            f"<h2 id='checks'>Consistency <span class='{'ok' if self.ok else 'bad'}'>{verdict}</span></h2>"
            "<table><tr><th>check</th><th>holds</th><th>numbers</th></tr>"
        )
        for c in self.checks:
            parts.append(
                f"<tr><td>{e(c.name)}</td><td class='{'ok' if c.ok else 'bad'}'>{'yes' if c.ok else 'NO'}"
                f"</td><td>{e(c.detail)}</td></tr>"
            )
        parts.append("</table>")
        for s in self.sections:
            parts.append(f"<h2>{e(s.title)}</h2>")
            if s.note:
                parts.append(f"<p class='note'>{e(s.note)}</p>")
            if s.rows:
                parts.append("<table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in s.rows) + "</table>")
            for caption, header, rows in s.tables:
                parts.append(
                    f"<table><caption>{e(caption)}</caption><tr>"
                    + "".join(f"<th>{e(h)}</th>" for h in header)
                    + "</tr>"
                    + "".join("<tr>" + "".join(f"<td>{e(str(x))}</td>" for x in r) + "</tr>" for r in rows)
                    + "</table>"
                )
            for caption, png in s.images:
                data = base64.b64encode(png).decode("ascii")
                parts.append(
                    f"<figure><img alt='{e(caption)}' src='data:image/png;base64,{data}'>"
                    f"<figcaption>{e(caption)}</figcaption></figure>"
                )
        parts.append(
            "<h2>Settings, timings, versions</h2><table>"
            + "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in self.settings.items())
            + "".join(f"<tr><th>time: {e(k)}</th><td>{v:.2f} s</td></tr>" for k, v in self.timings.items())
            + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in self.versions.items())
            + "</table></body></html>"
        )
        return "\n".join(parts)


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:0}.sub{color:#555;margin-top:.2em}table{border-collapse:collapse;margin:.6em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top;font-size:14px}
th{background:#f3f3f3}caption{text-align:left;font-weight:bold;padding:.3em 0}.ok{color:#16723a;font-weight:bold}
.bad{color:#b00020;font-weight:bold}.note{color:#555;font-style:italic}figure{margin:1em 0}img{max-width:100%}
.verdict{border:2px solid #16723a;border-radius:6px;padding:.2em 1em .6em;margin:1em 0;background:#f4faf6}
.verdict.disagree{border-color:#b00020;background:#fdf3f4}.verdict h2{margin:.4em 0}.verdict td{font-size:16px}"""


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.6g}"


def _png(draw: Callable[[Path], Any]) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rlverify-report-") as tmp:
        path = Path(tmp) / "figure.png"
        draw(path)
        return path.read_bytes()


@dataclass(frozen=True)
class ReportOptions:
    """Settings of one report.

    Attributes:
        runs, delta, seed: the simulation (a Clopper–Pearson interval at confidence ``1 - delta``).
        epsilon: the observation-perturbation budget of the robustness section (L-infinity, integer).
        explain: how many failure paths to list.
        map_vars: the two variables of the risk map (None: the first two integer features of the policy, if any).
        map_where, map_agg: the states each cell of the risk map shows (:class:`~rlverify.exact.maps.MapOptions`):
            ``"initial"`` (default: the other variables at their initial values, so that the panels differ from
            cell to cell), None (every state, aggregated with ``map_agg``: ``max``, ``min`` or ``mean``), or a filter.
        optimum: how the property is read: ``min`` (a bad event: the best policy gets Pmin, regret = value - Pmin)
            or ``max`` (a goal: Pmax, regret = Pmax - value); None (default): from the property's comparison
            (``P<=b``: min, ``P>=b``: max), else unknown: the headline then shows Pmin and Pmax without calling
            either the best, and the risk map and robustness sections read it as a bad event and say so.
        heatmap_runs_per_cell: a native environment's heat map: runs per start cell.
        horizon, domain, phi: a continuous system's abstraction (horizon None: the system's, else 3).
    """

    runs: int = 10_000
    delta: float = 0.001
    seed: int = 0
    epsilon: int = 1
    explain: int = 5
    map_vars: tuple[str, str] | None = None
    map_where: str | None = "initial"
    map_agg: str = "max"
    optimum: str | None = None
    heatmap_runs_per_cell: int = 200
    horizon: int | None = None
    domain: str = "box"
    phi: float = 0.5
    #: add the explanations of the policy (features, decision tree, critical states); off by default (slower)
    explain_policy: bool = False

    def validate(self) -> None:
        """Raise :class:`~rlverify.errors.OptionError` naming the first setting out of its range."""
        for name in ("runs", "explain"):
            if getattr(self, name) <= 0:
                raise OptionError(f"--{name} must be positive, got {getattr(self, name)}")
        if self.epsilon < 0:
            raise OptionError(f"--epsilon must be a non-negative integer, got {self.epsilon}")
        if not 0 < self.delta < 1:
            raise OptionError(f"--delta must be in (0, 1), got {self.delta}")
        if self.optimum not in (None, "min", "max"):
            raise OptionError(f"--optimum: expected min or max, got '{self.optimum}'")
        MapOptions(agg=self.map_agg).validate()


@dataclass(frozen=True)
class Shared:
    """What more than one section reads, built once before the sections run.

    Attributes:
        say: the progress callback; timings: the report's timing table (seconds per engine run), filled as they run.
        chain: the policy's stochastic chain (PRISM/JANI); exact: its value (:func:`~rlverify.exact.verify_exact`).
        mdp: the property-directed MDP (None when it is too large: ``mdp_skipped`` says why); optimum: Pmin/Pmax on it.
        slack: the exact value's numerical slack in the consistency checks (:func:`~rlverify.crosscheck.slack`).
        map_vars: the risk map's variables (None: no map); horizon: a continuous system's abstraction horizon.
    """

    say: Progress
    timings: dict[str, float]
    chain: PolicyChain | None = None
    exact: ExactResult | None = None
    mdp: FullMDP | None = None
    mdp_skipped: str | None = None
    optimum: OptimumResult | None = None
    slack: float = 0.0
    map_vars: tuple[str, str] | None = None
    horizon: int | None = None
    #: how the property is read (:func:`~rlverify.exact.maps.reading`): min, max or None (it does not say)
    reading: str | None = None


#: a section of a report: the target, the options and what is shared -> its section and its consistency checks
SectionFn = Callable[[Target, ReportOptions, Shared], tuple[Section, list[Check]]]


def make_report(
    target: str | Path | Any,
    *,
    options: ReportOptions | None = None,
    property: str | None = None,
    policy: str | Any | None = None,
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

    Returns:
        A :class:`Report`; ``report.ok`` is False when the engines disagree (nothing is raised for that).
    """
    from rlverify.resolve import resolve

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
        env_kwargs=env_kwargs,
        trust_code=trust_code,
        policy_timeout=policy_timeout,
        policy_threads=policy_threads,
        system_timeout=system_timeout,
    )
    t, prop_name = _with_property(t, property)
    shared = _SHARED[t.kind](t, options, Shared(say=say, timings={}))
    sections, checks = _KINDS[t.kind](t, options, shared)
    return Report(
        kind=t.kind,
        sections=sections,
        checks=checks,
        headline=_headline(t, options, shared, sections),
        provenance=Provenance(
            model=t.name,
            property=prop_name,
            policy=_shown(t.policy_source),
            settings=_settings(t, options, shared),
            timings=shared.timings,
            versions=versions(),
        ),
    )


def _headline(t: Target, options: ReportOptions, shared: Shared, sections: list[Section]) -> list[tuple[str, str]]:
    """The verdict: the policy's value (exact, the sound bound or the estimate), the best and worst any policy
    achieves, the statistical estimate; each as the sections computed it."""
    data = {k: v for sec in sections for k, v in sec.data.items()}
    rows: list[tuple[str, str]] = []
    exact, best = shared.exact, shared.optimum
    if exact is not None:
        rows.append(("the policy's value (exact)", _fmt(exact.value)))
        if best is not None and shared.reading is None:
            name = "R" if str(exact.property).lstrip().startswith("R") else "P"
            rows.append((f"{name}min / {name}max (over all policies)", f"{_fmt(best.pmin)} / {_fmt(best.pmax)}"))
            rows.append(
                (
                    "best possible and regret",
                    "not shown: the property does not say whether it is a bad event or a goal "
                    "(--optimum min or max, or a threshold P<=b / P>=b)",
                )
            )
        elif best is not None:
            bad = shared.reading == "min"
            opt = ("R" if str(exact.property).lstrip().startswith("R") else "P") + ("min" if bad else "max")
            other = ("R" if opt[0] == "R" else "P") + ("max" if bad else "min")
            best_value, worst_value = (best.pmin, best.pmax) if bad else (best.pmax, best.pmin)
            rows.append((f"best possible ({opt}, over all policies)", _fmt(best_value)))
            rows.append((f"worst possible ({other})", _fmt(worst_value)))
            regret = exact.value - best_value if bad else best_value - exact.value
            rows.append(("regret (what the policy gives away)", _fmt(regret)))
    bound = next((v for sec in sections for k, v in sec.rows if k == "upper bound"), None)
    if bound is not None:
        rows.append(("upper bound on failure (sound abstraction)", bound))
    stat = data.get("statistical")
    if stat is not None:
        lo, hi = stat["interval"]
        rows.append(
            (
                "statistical estimate" + (" (from the start line)" if t.kind == "native" else ""),
                f"{_fmt(stat['estimate'])} in [{_fmt(lo)}, {_fmt(hi)}] at {stat['confidence']:.1%} ({stat['runs']:,} runs)",
            )
        )
    never = data.get("never_decided")
    if never is not None:
        rows.append(("start cells where no run decides (never decided = 1)", never))
    return rows


def _with_property(t: Target, property: str | None) -> tuple[Target, str]:
    """The target with its property parsed (default: the benchmark's first), and the property's name for the page;
    a continuous system is checked for its unsafe set."""
    from rlverify.resolve import resolve_property

    if t.kind == "continuous":  # the system's unsafe set within its horizon: nothing to parse
        if property not in (None, "unsafe"):
            raise RlverifyError(f"{t.name}: a continuous system is checked for its unsafe set ('unsafe'); drop --property")
        return t, "unsafe"
    bench = t.benchmark
    if property is None:
        if bench is None or not bench.properties:
            raise RlverifyError(f"{t.name}: give --property (a model file has no default property)")
        property = next(iter(bench.properties))
    t = replace(t, property=resolve_property(bench, t.model, t.kind, property))  # the model is built once
    assert t.property is not None
    return t, t.property.name or t.property.text


def _settings(t: Target, options: ReportOptions, shared: Shared) -> dict[str, Any]:
    """The settings the page and the JSON show."""
    settings: dict[str, Any] = {
        "runs": options.runs,
        "delta": options.delta,
        "seed": options.seed,
        "constants": t.constants or "",
    }
    if t.kind == "prism":
        settings.update(
            epsilon=options.epsilon,
            explain=options.explain,
            optimum=shared.reading or "unknown",
            map_variables=",".join(shared.map_vars) if shared.map_vars else "",
            map_where=options.map_where if options.map_where is not None else "all",
            map_agg=options.map_agg,
        )
    elif t.kind == "native":
        settings["heatmap_runs_per_cell"] = options.heatmap_runs_per_cell
    else:
        settings.update(horizon=shared.horizon, domain=options.domain, phi=options.phi)
    return settings


def _shown(source: str | None) -> str | None:
    """A policy's source for the page: a shipped file by its name, a user's file as given."""
    if source and "rlverify/benchmarks/data/" in source.replace("\\", "/"):
        return f"{Path(source).name} (shipped with rlverify)"
    return source


def _timed(timings: dict[str, float], name: str, fn: Callable[[], T]) -> T:
    start = time.perf_counter()
    try:
        return fn()
    finally:
        timings[name] = time.perf_counter() - start


# ---------------------------------------------------------------------------------------------
# PRISM/JANI: one chain, one MDP, every analysis reads them


def _prism_shared(t: Target, options: ReportOptions, shared: Shared) -> Shared:
    """The stochastic chain and its value, the full MDP and its optimum: each built once for every section."""
    prop, say, timings = t.property, shared.say, shared.timings
    assert prop is not None and t.policy is not None
    policy = t.policy
    chosen = _map_variables(t, options)
    say("exact: the policy's chain")
    chain = _timed(timings, "chain (stochastic)", lambda: policy_chain(t.model, prop, policy, ExactOptions(), progress=say))
    exact = _timed(timings, "exact", lambda: t.stamp(verify_exact(t.model, prop, policy, ExactOptions(), chain=chain)))
    mdp, skipped, best = None, None, None
    try:
        mdp = _timed(timings, "full MDP", lambda: full_mdp(t.model, prop, ExactOptions(), policy=policy, progress=say))
    except ModelTooLargeError as exc:
        skipped = str(exc)
    if mdp is not None:
        say("exact: Pmin/Pmax over all schedulers")
        best = _timed(timings, "monolithic", lambda: optimum(t.model, prop, ExactOptions(), mdp=mdp))
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


#: what the risk map and robustness sections say when they read a property that does not say how it is read
ASSUMED_FAILURE = "read as a bad event because the property does not say (--optimum max for a goal)"


def _map_variables(t: Target, options: ReportOptions) -> tuple[str, str] | None:
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


def _prism(t: Target, options: ReportOptions, shared: Shared) -> tuple[list[Section], list[Check]]:
    """The sections of a PRISM/JANI model, in the page's order."""
    assert t.property is not None
    plan: list[SectionFn] = [_exact, _deterministic, _optimum]
    if shared.map_vars:
        plan.append(_risk_map)
    if t.property.operator == "P":
        plan += [_paths, _robustness]
    if options.explain_policy:
        plan += _explain_sections()
    plan.append(_statistical)
    return _run(plan, t, options, shared)


def _run(plan: list[SectionFn], t: Target, options: ReportOptions, shared: Shared) -> tuple[list[Section], list[Check]]:
    sections, checks = [], []
    for section in plan:
        s, c = section(t, options, shared)
        sections.append(s)
        checks += c
    return sections, checks


def _exact(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    exact = shared.exact
    assert exact is not None
    return Section(
        "Exact value (Storm, the induced chain)",
        rows=[
            ("value", _fmt(exact.value)),
            ("bounds", f"[{_fmt(exact.lower)}, {_fmt(exact.upper)}]"),
            ("numerics", exact.guarantee),
            ("chain", f"{exact.states:,} states, {exact.transitions:,} transitions"),
            ("stalled probability", _fmt(exact.stalled_probability)),
            ("warnings", "; ".join(exact.warnings) or "—"),
        ],
        data={"exact": exact.to_json()},
    ), []


def _deterministic(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    assert t.property is not None
    prop, policy = t.property, t.policy
    shared.say("exact: deterministic estimate")
    det = _timed(
        shared.timings, "deterministic", lambda: verify_exact(t.model, prop, policy, ExactOptions(mode="deterministic"))
    )
    return Section(
        "Deterministic estimate (argmax action)",
        rows=[
            ("value", _fmt(det.value)),
            ("chain", f"{det.states:,} states"),
            ("note", "the policy's argmax action only: an estimate, not the stochastic policy's value"),
        ],
        data={"deterministic": det.to_json()},
    ), []


def _optimum(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    exact, best = shared.exact, shared.optimum
    assert exact is not None
    if best is None:
        return Section("Optimum over all schedulers", note=f"skipped: {shared.mdp_skipped}"), []
    stalled = exact.stalled_probability > 0
    return Section(
        "Optimum over all schedulers (Pmin / Pmax of the MDP)",
        rows=[("Pmin / Pmax", f"{_fmt(best.pmin)} / {_fmt(best.pmax)}"), ("MDP", f"{best.states:,} states")],
        data={"monolithic": as_exact_result(best).to_json()},
    ), [
        Check(
            "Pmin <= value <= Pmax",
            within_optimum(exact.value, best.pmin, best.pmax, shared.slack, stalled=stalled),
            f"Pmin {_fmt(best.pmin)} <= value {_fmt(exact.value)} <= Pmax {_fmt(best.pmax)}"
            + (" (stalled mass: only the upper bound applies)" if stalled else ""),
        )
    ]


def _risk_map(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """Value, optimum and regret per cell of the two map variables (worst case over the other variables)."""
    exact, chosen, prop, policy = shared.exact, shared.map_vars, t.property, t.policy
    assert exact is not None and chosen is not None and prop is not None and policy is not None
    optimum = shared.reading or "min"
    if shared.optimum is None:
        return Section("Risk and regret map", note=f"skipped: {shared.mdp_skipped}"), []
    shared.say(f"risk map on {chosen[0]}, {chosen[1]}")
    try:
        m = _timed(
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
    m = t.stamp(m).with_provenance(policy=_shown(t.policy_source))  # named as the user wrote them
    png = _png(lambda path: m.figure().draw(path))
    view = (
        f"the other variables at their initial values: {m.where}"
        if options.map_where == "initial" and m.where
        else f"{m.agg} over the other variables" + (f", where {m.where}" if m.where else "")
    )
    reading_text = (
        "the property read as a failure: regret = value - Pmin"
        if optimum == "min"
        else "the property read as a goal: regret = Pmax - value"
    )
    expected = shared.optimum.pmin if optimum == "min" else shared.optimum.pmax
    name = ("R" if str(exact.property).lstrip().startswith("R") else "P") + optimum
    return Section(
        f"Risk and regret map on {chosen[0]}, {chosen[1]} ({view})",
        rows=[
            ("regret at the initial state", _fmt(m.initial_regret)),
            ("largest regret in a cell", _fmt(float(np.nanmax(m.regret)) if not np.isnan(m.regret).all() else None)),
        ],
        note=f"{reading_text}: {ASSUMED_FAILURE}"
        if shared.reading is None
        else f"{reading_text} (--optimum {'max' if optimum == 'min' else 'min'} for the other reading)",
        images=[("policy value, optimum and regret per cell", png)],
        data={"risk_map": m.to_json()},
    ), [
        Check(
            "risk map's initial value = exact value",
            same(m.initial_value, exact.value, shared.slack),
            f"{_fmt(m.initial_value)} vs {_fmt(exact.value)}",
        ),
        Check(
            f"risk map's initial optimum = {name}",
            same(m.initial_optimum, expected, shared.slack),
            f"{_fmt(m.initial_optimum)} vs {_fmt(expected)}",
        ),
    ]


def _paths(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
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
    fp = _timed(
        shared.timings,
        "paths",
        lambda: explain_paths(t.model, prop, policy, k, chain=shared.chain, mdp=shared.mdp, value=exact.value),
    )
    rows = [
        [str(i + 1), f"{p.probability:.4g}", str(p.length), ", ".join(f"{k_}={v}" for k_, v in p.steps[-1].state.items())]
        for i, p in enumerate(fp.paths)
    ]
    fp = t.stamp(fp).with_provenance(policy=_shown(t.policy_source))
    images = []
    if len(fp.variables) >= 2:  # a pair to draw on
        pairs = path_pairs(fp)
        drawn = "; ".join(f"{a}, {b}" for a, b in pairs)
        images.append((f"each path on the variable pairs that move ({drawn})", _png(lambda path: plot_paths(fp, path, pairs))))
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
            f"{fp.covered:.6g} <= {_fmt(exact.value)}",
        )
    ]


def _robustness(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """Observation perturbations at ``options.epsilon`` (L-infinity) on the map variables (or all features)."""
    exact, prop, policy, eps, tolerance = shared.exact, t.property, t.policy, options.epsilon, shared.slack
    assert exact is not None and prop is not None and policy is not None
    if shared.mdp is None:
        return Section("Robustness to perturbed observations", note=f"skipped: {shared.mdp_skipped}"), []
    shared.say(f"robustness: perturbed observations (epsilon {eps})")
    worst = "min" if shared.reading == "max" else "max"  # a failure's worst case is its max
    try:
        r = _timed(
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
        ("nominal / worst / best", f"{_fmt(r.nominal)} / {_fmt(r.worst)} / {_fmt(r.best)}"),
        ("FGSM attack (one gradient-sign perturbation per state)", _fmt(r.attack)),
        ("states where a perturbation changes the action", f"{r.changed_states:,} of {r.decision_states:,}"),
        ("adversarial MDP", f"{r.states:,} states, {r.choices:,} choices, {r.transitions:,} transitions"),
    ]
    top = r.worst_perturbations[:10]
    state_vars = list(dict.fromkeys(k for w in top for k in (w.get("state") or {})))
    shown_vars = list(dict.fromkeys(k for w in top for k in (w.get("observed") or {})))
    header = [*state_vars, *(f"{k} shown" for k in shown_vars), "gain"]
    table = [
        [str((w.get("state") or {}).get(k, "")) for k in state_vars]
        + [str((w.get("observed") or {}).get(k, "")) for k in shown_vars]
        + [f"{w.get('gain', 0.0):.3g}"]
        for w in top
    ]
    checks = [
        Check(
            "worst >= nominal >= best (perturbed observations)",
            ordered(r.worst, r.nominal, r.best, worst_is=r.worst_is, slack=tolerance),
            f"worst {_fmt(r.worst)}, nominal {_fmt(r.nominal)}, best {_fmt(r.best)}",
        ),
        Check(
            "robustness nominal = exact value",
            same(r.nominal, exact.value, tolerance),
            f"{_fmt(r.nominal)} vs {_fmt(exact.value)}",
        ),
    ]
    if r.attack is not None:
        checks.append(
            Check(
                "FGSM attack within [Pmin, Pmax] of the adversarial MDP",
                inside(r.attack, r.pmin, r.pmax, tolerance),
                f"{_fmt(r.pmin)} <= {_fmt(r.attack)} <= {_fmt(r.pmax)}",
            )
        )
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


def _simulation(model: Any, prop: Any, policy: Any, options: ReportOptions, shared: Shared, what: str) -> Any:
    """The report's one simulation: ``options.runs`` runs, Clopper–Pearson at ``1 - options.delta``, its seed."""
    from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

    shared.say(what)
    settings = StatisticalOptions(
        method="clopper-pearson", runs=options.runs, delta=options.delta, simulation=SimulationOptions(seed=options.seed)
    )
    return _timed(shared.timings, "statistical", lambda: verify_statistical(model, prop, policy, settings))


def _runs(stat: Any) -> str:
    """The runs of a simulation and how they ended when not by the property's own verdict."""
    return (
        f"{stat.runs:,} (stood still forever {stat.stuck:,}, still open after {stat.max_steps:,} steps "
        f"{stat.undecided:,}, stalled {stat.stalled:,})"
    )


def _statistical(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    exact, prop, policy = shared.exact, t.property, t.policy
    assert exact is not None and prop is not None and policy is not None
    if prop.operator != "P":
        return Section(
            "Statistical estimate", note="skipped: the simulator estimates probabilities (P=?), not expected rewards"
        ), []
    try:
        stat = _simulation(t.model, prop, policy, options, shared, "simulation")
    except RlverifyError as exc:
        return Section("Statistical estimate", note=f"skipped: {exc}"), []
    a, b = stat.interval
    return Section(
        "Statistical estimate (simulation, Clopper–Pearson)",
        rows=[
            ("estimate", _fmt(stat.estimate)),
            ("interval", f"[{_fmt(a)}, {_fmt(b)}] at {stat.confidence:.1%}"),
            ("runs", _runs(stat)),
            ("seed", str(stat.seed)),
        ],
        data={"statistical": stat.to_json()},
    ), [
        Check(
            "exact value inside the statistical interval",
            inside(exact.value, a, b, shared.slack),
            f"value {_fmt(exact.value)} in [{_fmt(a)}, {_fmt(b)}] ({stat.confidence:.1%} confidence)",
        )
    ]


# ---------------------------------------------------------------------------------------------
# native environments (Racetrack): simulation and the per-start-cell heat map


def _native(t: Target, options: ReportOptions, shared: Shared) -> tuple[list[Section], list[Check]]:
    return _run([_native_statistical, _heatmap], t, options, shared)


def _native_statistical(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    prop, policy = t.property, t.policy
    assert prop is not None and policy is not None
    stat = _simulation(t.model, prop, policy, options, shared, "simulation")
    a, b = stat.interval
    return Section(
        "Statistical estimate (simulation from the start line)",
        rows=[
            ("estimate", _fmt(stat.estimate)),
            ("interval", f"[{_fmt(a)}, {_fmt(b)}] at {stat.confidence:.1%}"),
            ("runs", _runs(stat)),
        ],
        data={"statistical": stat.to_json()},
    ), []


def _heatmap(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    from rlverify.statistical import clopper_pearson_lower
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.heatmap import heatmap, plot_heatmap
    from rlverify.statistical.verify import StatisticalOptions

    assert t.benchmark is not None and t.policy is not None
    policy, bench = t.policy, t.benchmark
    shared.say("heat map: every start cell, with Storm's optimum")
    hm = _timed(
        shared.timings,
        "heatmap",
        lambda: heatmap(
            t.model,
            policy,
            StatisticalOptions(
                method="clopper-pearson",
                runs=options.heatmap_runs_per_cell,
                delta=options.delta,
                simulation=SimulationOptions(seed=options.seed),
            ),
            optimal=True,
            benchmark=bench.id,
        ),
    )
    hm = t.stamp(hm).with_provenance(policy=_shown(t.policy_source))
    png = _png(lambda p: plot_heatmap(hm, p))
    optimal, gap = hm.optimal, hm.gap
    never = hm.never_decided
    assert optimal is not None and gap is not None  # asked for (optimal=True)
    # one check over M cells: each cell's lower end at delta / M (Bonferroni), so that a false alarm has
    # probability <= delta overall
    low = clopper_pearson_lower(np.rint(hm.goal * hm.runs), hm.runs, options.delta / max(1, len(hm.cells)))
    over = low - OPTIMUM_SLACK > optimal
    first = int(np.argmax(over))
    return Section(
        "Per start cell: goal and crash probability, Storm's optimum, the gap",
        rows=[
            ("cells", f"{len(hm.cells):,} x {int(hm.runs[0]):,} runs"),
            ("mean goal / crash / never decided", f"{hm.goal.mean():.4f} / {hm.crash.mean():.4f} / {never.mean():.4f}"),
            (
                "never decided",
                f"{int((never == 1).sum())} of {len(hm.cells)} start cells never decide a single run (the car stands "
                f"still forever or is still driving after {hm.max_steps:,} steps); goal + crash + never decided = 1 "
                "per cell",
            ),
            ("mean optimum / max gap", f"{optimal.mean():.4f} / {gap.max():.4f}"),
        ],
        images=[("goal, crash, never decided, optimum and gap per start cell", png)],
        data={"never_decided": f"{int((never == 1).sum())} of {len(hm.cells)}", "heatmap": hm.to_json()},
    ), [
        Check(
            f"each cell's goal estimate (lower end at delta/{len(hm.cells)} per cell) at or below Storm's "
            f"optimum (+{OPTIMUM_SLACK:g})",
            not over.any(),
            f"{int(over.sum())} of {len(hm.cells)} cells above the optimum"
            + (
                f" (first: cell {hm.cells[first].tolist()}, lower end {low[first]:.4f} > optimum {optimal[first]:.4f})"
                if over.any()
                else ""
            ),
        )
    ]


# ---------------------------------------------------------------------------------------------
# continuous systems: the abstraction's bound and a simulation estimate


def _continuous_shared(t: Target, options: ReportOptions, shared: Shared) -> Shared:
    horizon = options.horizon or int(getattr(t.model, "horizon", 0) or 3)
    return replace(shared, horizon=horizon)


def _continuous(t: Target, report: ReportOptions, shared: Shared) -> tuple[list[Section], list[Check]]:
    """The abstraction's sound bound and a simulation from uniform random starts (two sections)."""
    from rlverify.abstraction import AbstractionOptions, verify_abstraction
    from rlverify.abstraction.plots import plot_result
    from rlverify.models.continuous import unsafe_property

    policy, system = t.policy, t.model
    assert policy is not None
    timings, say = shared.timings, shared.say
    horizon = shared.horizon or 3
    options = AbstractionOptions(horizon=horizon, domain=report.domain, phi=report.phi, seed=report.seed)
    say("abstraction: sound upper bound")
    bound = _timed(timings, "abstraction", lambda: verify_abstraction(system, policy, options))
    images = []
    if len(bound.variables) == 2:
        images.append(("initial region: parts by bound and by action probability", _png(lambda p: plot_result(bound, p))))
    sections = [
        Section(
            "Sound abstraction (upper bound on failure within k steps)",
            rows=[
                ("upper bound", _fmt(bound.upper_bound)),
                ("guarantee", bound.guarantee),
                ("horizon", str(horizon)),
                ("abstract states", f"{bound.n_abstract_states:,}"),
                ("domain", options.domain),
            ],
            images=images,
        )
    ]
    stat = _simulation(system, unsafe_property(system, horizon), policy, report, shared, "simulation from random start states")
    a, b = stat.interval
    sections.append(
        Section(
            "Statistical estimate (uniform random starts in the initial region)",
            rows=[
                ("estimate", _fmt(stat.estimate)),
                ("interval", f"[{_fmt(a)}, {_fmt(b)}] at {stat.confidence:.1%}"),
                ("runs", f"{stat.runs:,}"),
            ],
            data={"statistical": stat.to_json()},
        )
    )
    checks = [
        Check(
            "abstraction bound >= the statistical interval's lower end",
            bound.upper_bound >= a - 1e-12,
            f"bound {_fmt(bound.upper_bound)} >= {_fmt(a)} (the bound holds for every start state, "
            "the estimate averages over random ones)",
        )
    ]
    return sections, checks


_SHARED: dict[str, Callable[[Target, ReportOptions, Shared], Shared]] = {
    "prism": _prism_shared,
    "native": lambda t, options, shared: shared,
    "continuous": _continuous_shared,
}
_KINDS: dict[str, Callable[[Target, ReportOptions, Shared], tuple[list[Section], list[Check]]]] = {
    "prism": _prism,
    "native": _native,
    "continuous": _continuous,
}


def write_report(report: Report, path: str | Path, *, force: bool = False) -> Path:
    """Write ``report.to_html()`` to ``path`` atomically (never over an existing file without ``force``).

    Raises:
        FileWriteError: the file exists without ``force``, or cannot be written.
    """
    from rlverify.files import write_text

    return write_text(path, report.to_html(), force=force, what="--out")


__all__ = ["Check", "Report", "ReportOptions", "Section", "Shared", "make_report", "write_report"]


# ------------------------------------------------------------------------------------------------ explanations


def _explain_sections() -> list[SectionFn]:
    """The sections of ``report --explain-policy`` (:mod:`rlverify.exact.explanations`): features, tree, critical."""
    return [_explain_features, _explain_tree, _explain_critical]


def _explain_features(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """Safety-relevant features: each fixed to its initial value, and perturbed by 1 alone; ranked, with the chart."""
    from rlverify.exact.features import feature_effects
    from rlverify.figures import figure_png

    title = "Safety-relevant features (exact: the value without each feature, and under ±1 perturbations)"
    exact, prop, policy = shared.exact, t.property, t.policy
    assert exact is not None and prop is not None and policy is not None
    shared.say("explain: features")
    try:
        r = _timed(shared.timings, "explain: features", lambda: feature_effects(t.model, prop, policy, progress=shared.say))
    except RlverifyError as exc:
        return Section(title, note=f"skipped: {exc}"), []
    header = ["feature", "effect", "fixed to", "value fixed", "±1 worst", "±1 best"]
    table = [
        [e.feature, _fmt(e.effect), f"{e.reference:g}", _fmt(e.fixed), _fmt(e.perturbed_worst), _fmt(e.perturbed_best)]
        for e in r.effects
    ]
    checks = [
        Check(
            "features: nominal = exact value",
            same(r.nominal, exact.value, shared.slack),
            f"{_fmt(r.nominal)} vs {_fmt(exact.value)}",
        )
    ]
    return Section(
        title,
        rows=[("nominal", _fmt(r.nominal)), ("exact checks", f"{r.runs}")],
        tables=[("features ranked by effect (largest distance from the nominal value)", header, table)],
        images=[("features by effect", figure_png(r.figure()))],
        data={"features": r.to_json()},
    ), checks


def _explain_tree(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """A decision tree standing in for the policy, verified exactly as a policy."""
    from rlverify.exact.tree import fit_tree

    title = "A decision tree standing in for the policy (verified exactly as a policy)"
    exact, prop, policy = shared.exact, t.property, t.policy
    assert exact is not None and prop is not None and policy is not None
    shared.say("explain: decision tree")
    try:
        r = _timed(
            shared.timings, "explain: tree", lambda: fit_tree(t.model, prop, policy, chain=shared.chain, progress=shared.say)
        )
    except RlverifyError as exc:
        return Section(title, note=f"skipped: {exc}"), []
    rows = [
        ("policy's value / tree's value", f"{_fmt(r.policy_value)} / {_fmt(r.tree_value)}"),
        ("tree", f"depth {r.depth}, {r.leaves} leaves"),
        ("weighted fidelity", f"{r.fidelity:.4g} ({r.weighting}; {r.fitted_states:,} states)"),
        ("tree stalls", _fmt(r.tree_stalled)),
    ]
    checks = [
        Check(
            "tree: the policy's value = exact value",
            same(r.policy_value, exact.value, shared.slack),
            f"{_fmt(r.policy_value)} vs {_fmt(exact.value)}",
        )
    ]
    return Section(
        title,
        rows=rows,
        tables=[("the tree as rules (one per leaf)", ["rule"], [[rule] for rule in r.rules])],
        data={"tree": r.to_json()},
    ), checks


def _explain_critical(t: Target, options: ReportOptions, shared: Shared) -> tuple[Section, list[Check]]:
    """Critical states: expected visits x the spread of Q(s, a); the top ones with the policy's choice and the best."""
    from rlverify.exact.critical import CriticalOptions, critical_states

    title = "Critical states (expected visits x the spread of Q(s, a) over the offered actions)"
    prop, policy = t.property, t.policy
    assert prop is not None and policy is not None
    shared.say("explain: critical states")
    worst = "max" if options.optimum == "min" else "min"  # the report's reading of the property
    try:
        r = _timed(
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
