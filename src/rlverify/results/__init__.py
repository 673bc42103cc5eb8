"""Frozen result types; each says what kind of guarantee it carries.

Every result is a :class:`Result`: its own numbers plus one :class:`Provenance` (what was verified, with what, how
long it took, what to know before trusting it), one JSON form (:meth:`Result.to_json`) and one sanitiser
(:func:`jsonable`).
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from rlverify.choices import Guarantee, Mode
from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.results.abstraction import AbstractionResult, PartBound, WorstWitness
    from rlverify.results.explanations import (
        CriticalState,
        CriticalStates,
        FeatureEffect,
        FeatureEffects,
        PolicyExplanation,
        TreeExplanation,
    )
    from rlverify.results.maps import IntervalResult, RiskMap, RobustnessResult
    from rlverify.results.paths import FailurePath, FailurePaths, PathStep, StepAction
    from rlverify.results.shield import ShieldResult
    from rlverify.results.statistical import HeatmapResult, ReturnResult, SplittingResult, StatisticalResult

__all__ = [
    "AbstractionResult",
    "CriticalState",
    "CriticalStates",
    "ExactResult",
    "FailurePath",
    "FailurePaths",
    "FeatureEffect",
    "FeatureEffects",
    "HeatmapResult",
    "IntervalResult",
    "OptimumResult",
    "PartBound",
    "PathStep",
    "PolicyExplanation",
    "Provenance",
    "Result",
    "ReturnResult",
    "RiskMap",
    "RobustnessResult",
    "ShieldResult",
    "SplittingResult",
    "StatisticalResult",
    "StepAction",
    "Summary",
    "TreeExplanation",
    "WorstWitness",
    "jsonable",
    "versions",
]
# The engine-specific results are made on first use: a dataclass costs ~1 ms to create on Python 3.11, and a
# command needs only its own (``rlverify verify`` makes the exact ones only).
lazy_exports(
    __name__,
    {
        "rlverify.results.abstraction": "AbstractionResult PartBound WorstWitness",
        "rlverify.results.explanations": "CriticalState CriticalStates FeatureEffect FeatureEffects PolicyExplanation "
        "TreeExplanation",
        "rlverify.results.maps": "IntervalResult RiskMap RobustnessResult",
        "rlverify.results.paths": "FailurePath FailurePaths PathStep StepAction",
        "rlverify.results.shield": "ShieldResult",
        "rlverify.results.statistical": "HeatmapResult ReturnResult SplittingResult StatisticalResult",
    },
)


R = TypeVar("R", bound="Result")


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """What a result is about and how it was made: the envelope every :class:`Result` carries.

    Attributes:
        model: the target's name (a file's path, a benchmark id with its parameters); property: what was checked, as
            text ("" where the command checks a fixed event, as a heat map's goal and crash); policy: the policy's
            name (None: no policy).
        settings: the options used (seeds among them); timings: wall-clock seconds per phase; versions: the packages
            that decide the numbers (:func:`versions`); warnings: what to know before trusting the number (the CLI
            prints them).
    """

    model: str = ""
    property: str = ""
    policy: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Result:
    """The base of every result: its :class:`Provenance` (read through ``model``, ``property``, ``policy``,
    ``settings``, ``timings``, ``versions``, ``warnings``) and its one JSON form."""

    provenance: Provenance = field(default_factory=Provenance)
    #: fields left out of :meth:`to_json` (per-state arrays, solver objects)
    NOT_IN_JSON: ClassVar[tuple[str, ...]] = ()
    #: :meth:`rlverify.resolve.Target.stamp` keeps the engine's ``model`` (a bare benchmark id its output adds the
    #: parameters to) instead of the target's name
    KEEPS_MODEL_NAME: ClassVar[bool] = False
    #: the type has a ``guarantee`` field that is one of :class:`~rlverify.choices.Guarantee` (sound, direct,
    #: unsound): text given for it becomes the member (the JSON keeps the text)
    GUARANTEED: ClassVar[bool] = False

    def __post_init__(self) -> None:
        """A guarantee given as text becomes its :class:`~rlverify.choices.Guarantee` member (:attr:`GUARANTEED`)."""
        if self.GUARANTEED:
            object.__setattr__(self, "guarantee", Guarantee(self.__dict__["guarantee"]))

    @builtins.property
    def model(self) -> str:
        """The target's name (:class:`Provenance`)."""
        return self.provenance.model

    @builtins.property
    def property(self) -> str:
        """What was checked, as text (:class:`Provenance`)."""
        return self.provenance.property

    @builtins.property
    def policy(self) -> str | None:
        """The policy's name, None without one (:class:`Provenance`)."""
        return self.provenance.policy

    @builtins.property
    def settings(self) -> dict[str, Any]:
        """The options used (:class:`Provenance`)."""
        return self.provenance.settings

    @builtins.property
    def timings(self) -> dict[str, float]:
        """Wall-clock seconds per phase (:class:`Provenance`)."""
        return self.provenance.timings

    @builtins.property
    def versions(self) -> dict[str, str]:
        """Package versions (:class:`Provenance`)."""
        return self.provenance.versions

    @builtins.property
    def warnings(self) -> list[str]:
        """What to know before trusting the number (:class:`Provenance`)."""
        return self.provenance.warnings

    def with_provenance(self: R, **changes: Any) -> R:
        """A copy whose provenance has ``changes`` (``model=``, ``warnings=``, ...)."""
        return replace(self, provenance=replace(self.provenance, **changes))

    def to_json(self) -> dict[str, Any]:
        """The result as JSON-ready data (:func:`jsonable`): ``model``, ``property``, ``policy``, the result's own
        fields (without :attr:`NOT_IN_JSON`), then ``settings``, ``timings``, ``versions``, ``warnings``."""
        p = self.provenance
        left_out = ("provenance", *self.NOT_IN_JSON)
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in left_out}
        head = {"model": p.model, "property": p.property, "policy": p.policy}
        tail = {"settings": p.settings, "timings": p.timings, "versions": p.versions, "warnings": p.warnings}
        return jsonable({**head, **self._json(own), **tail})

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """Hook: the result's own fields as they go into JSON (a type with a custom layout overrides it)."""
        return own

    # -- display: one summary per type (:meth:`_summary`), shown as HTML in notebooks and as text by str() --

    def _summary(self) -> Summary:
        """Hook: what the result says in a few lines (each result type overrides it; this default names the type)."""
        return Summary(type(self).__name__, "", "", ())

    def _repr_html_(self) -> str:
        """The result as an HTML table for Jupyter: the value, the kind of guarantee, the key figures, the warnings
        (:meth:`_summary`). Every text is escaped: model paths, property text and policy names are never markup."""
        return self._summary().html(self)

    def __str__(self) -> str:
        """The result in a few plain lines (the same as its HTML form; ``repr()`` keeps every field)."""
        return self._summary().text(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """IPython's plain-text display: :meth:`__str__`."""
        p.text(f"{type(self).__name__}(...)" if cycle else str(self))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each result type gets :meth:`_repr_pretty_` in its own class: IPython's printer takes the first class of the
        MRO that defines ``_repr_pretty_`` or ``__repr__``, and ``@dataclass`` gives every result type a ``__repr__``."""
        super().__init_subclass__(**kwargs)
        cls._repr_pretty_ = Result._repr_pretty_  # type: ignore[method-assign]


@dataclass(frozen=True)
class Summary:
    """A result in a few lines: the one source of its HTML (:meth:`Result._repr_html_`) and text (``str()``) forms.

    Attributes:
        kind: what the result is ("exact value", "statistical estimate", ...); value: the headline number as shown;
        guarantee: how far it can be trusted, in words; rows: the key figures, (label, text) in order.
        picture: an inline SVG drawn by :func:`grid_svg` (HTML only; "" for none).
    """

    kind: str
    value: str
    guarantee: str
    rows: tuple[tuple[str, str], ...]
    picture: str = ""

    def _head(self, r: Result) -> list[tuple[str, str]]:
        head = [("model", r.model), ("property", r.property)] if r.property else [("model", r.model)]
        if r.policy is not None:
            head.append(("policy", r.policy))
        if self.value:
            head.append(("value", self.value))
        if self.guarantee:
            head.append(("guarantee", self.guarantee))
        return head + list(self.rows)

    def text(self, r: Result) -> str:
        """Plain lines: ``Type: kind``, then ``label  text`` rows, then the warnings."""
        rows = [(k, v) for k, v in self._head(r) if v]
        width = min(max((len(k) for k, _ in rows), default=0), 24)  # a longer label gets a line of its own
        lines = [f"{type(r).__name__}: {self.kind}"]
        for k, v in rows:
            lines += [f"  {k:<{width}}  {v}"] if len(k) <= width else [f"  {k}", f"  {'':<{width}}  {v}"]
        lines += [f"  warning: {w}" for w in r.warnings]
        return "\n".join(lines)

    def html(self, r: Result) -> str:
        """A self-contained HTML fragment (inline styles; every text escaped with :func:`html.escape`)."""
        from html import escape

        cells = []
        for k, v in self._head(r):
            if not v:
                continue
            shown = f"<b>{escape(v)}</b>" if k == "value" else escape(v)
            cells.append(
                f"<tr><th style='text-align:left;padding-right:1em;vertical-align:top'>{escape(k)}</th>"
                f"<td style='text-align:left'>{shown}</td></tr>"
            )
        warnings = "".join(f"<li>{escape(w)}</li>" for w in r.warnings)
        return (
            "<div class='rlverify-result'>"
            f"<table><caption style='text-align:left;font-weight:bold'>{escape(type(r).__name__)}: "
            f"{escape(self.kind)}</caption>{''.join(cells)}</table>"
            + (
                f"<p style='color:#a15c00;margin:0.3em 0 0 0'>warnings:</p><ul style='color:#a15c00'>{warnings}</ul>"
                if warnings
                else ""
            )
            + (f"<div style='margin-top:0.4em'>{self.picture}</div>" if self.picture else "")
            + "</div>"
        )


def grid_svg(
    values: np.ndarray,
    x_values: np.ndarray,
    y_values: np.ndarray,
    *,
    x: str,
    y: str,
    label: str,
    high_is_bad: bool,
    origin: str = "lower",
    cell: int = 14,
) -> str:
    """A small inline SVG of a ``(H, W)`` grid of probabilities (row ``i`` is ``y = y_values[i]``): one square per
    cell, green (good) to red (bad) over [0, 1], NaN cells blank; each square's tooltip names the cell and its value.
    ``origin="lower"`` puts row 0 at the bottom, ``"upper"`` at the top. Every text is escaped. No matplotlib: cheap
    enough for every display of a result."""
    from html import escape

    v = np.asarray(values, dtype=np.float64)
    H, W = v.shape
    stops = ((26, 152, 80), (255, 255, 191), (215, 48, 39))  # green, yellow, red (RdYlGn reversed)
    rects = []
    for i in range(H):
        row = H - 1 - i if origin == "lower" else i
        for j in range(W):
            p = v[i, j]
            if not math.isfinite(p):
                fill = "none"
            else:
                t = min(max(p if high_is_bad else 1.0 - p, 0.0), 1.0) * 2
                a, b = (stops[0], stops[1]) if t <= 1 else (stops[1], stops[2])
                f = t if t <= 1 else t - 1
                fill = "#{:02x}{:02x}{:02x}".format(*(round(c0 + (c1 - c0) * f) for c0, c1 in zip(a, b, strict=True)))
            tip = escape(f"{x}={x_values[j]}, {y}={y_values[i]}: {shown(float(p))}")
            rects.append(
                f"<rect x='{j * cell}' y='{row * cell}' width='{cell}' height='{cell}' fill='{fill}' "
                f"stroke='#ccc'><title>{tip}</title></rect>"
            )
    w, h = W * cell, H * cell
    label += " (green 0, red 1)" if high_is_bad else " (red 0, green 1)"
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{max(w, 6 * len(label))}' height='{h + 16}' role='img'>"
        f"{''.join(rects)}<text x='0' y='{h + 12}' font-size='11'>{escape(label)}</text></svg>"
    )


def shown(x: float | None, digits: int = 6) -> str:
    """A number as results are shown: ``digits`` significant digits (``.6g``); None as an em dash."""
    return "—" if x is None else f"{x:.{digits}g}"


def shown_pair(lo: float | None, hi: float | None) -> str:
    """``[lo, hi]`` as :func:`shown` writes numbers."""
    return f"[{shown(lo)}, {shown(hi)}]"


def _outward(x: float, digits: int, down: bool) -> float:
    """``x`` rounded to ``digits`` significant digits, down (toward -inf) or up."""
    if x == 0.0 or not math.isfinite(x):
        return x
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(abs(x))))
    rounded = (math.floor if down else math.ceil)(x * scale) / scale
    return rounded if (rounded <= x if down else rounded >= x) else x  # float rounding: never inward


def outward_pair(lo: float, hi: float, digits: int = 6) -> str:
    """``[lo, hi]`` to ``digits`` significant digits, rounded outward: the shown interval contains the computed one."""
    return f"[{_outward(lo, digits, True):.{digits}g}, {_outward(hi, digits, False):.{digits}g}]"


def solver_guarantee(
    guarantee: Guarantee | str, precision: float | None, lower: float | None = None, upper: float | None = None
) -> str:
    """An exact engine's ``guarantee`` (``sound``/``direct``/``unsound``, or already words) in words, with the
    certified bracket ``[lower, upper]`` when one is known."""
    if guarantee == Guarantee.SOUND:
        if lower is not None and upper is not None:
            bracket = shown_pair(lower, upper)
            return f"sound: the true value is in the certified bracket {bracket} (relative precision {shown(precision, 3)})"
        return f"sound: within relative precision {shown(precision, 3)}"
    if guarantee == Guarantee.DIRECT:
        return "direct solver: no convergence heuristic, but no certified bracket"
    if guarantee == Guarantee.UNSOUND:
        return "UNSOUND: value iteration stopped on a convergence heuristic (no guarantee)"
    return guarantee


def total_time(r: Result) -> str:
    """The result's total wall-clock time (``timings['total']``, else the sum of its phases), as ``1.23 s``."""
    t = r.timings.get("total", sum(r.timings.values()))
    return f"{t:.3g} s" if t else ""


def jsonable(obj: Any) -> Any:
    """The one JSON sanitiser of every result: nested results and dataclasses as dicts, tuples as lists, numpy values
    as plain numbers and lists, paths as text; JSON has no infinity, so an infinite number (an expected reward whose
    target is missed with positive probability, the relative error of an estimate of 0) is written as the string
    ``"Infinity"`` / ``"-Infinity"`` (the proto3 JSON mapping's spelling, which Python's ``float()`` and
    JavaScript's ``Number()`` read back) and NaN (no value) as ``null``; every other number stays a JSON number.
    The result's warnings say why a value is infinite."""
    for types, convert in _JSON_RULES:
        if isinstance(obj, types):
            return convert(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in fields(obj)}
    return obj


def _json_float(x: float) -> Any:
    """A finite float as it is; JSON has no infinity ("Infinity" / "-Infinity") nor NaN (null)."""
    if math.isfinite(x):
        return x
    return None if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


#: :func:`jsonable`'s conversions, the first whose types match (in this order: a numpy float is a float too)
_JSON_RULES: tuple[tuple[type | tuple[type, ...], Callable[[Any], Any]], ...] = (
    (Result, lambda r: r.to_json()),
    (dict, lambda d: {k: jsonable(v) for k, v in d.items()}),
    ((list, tuple), lambda xs: [jsonable(v) for v in xs]),
    (np.ndarray, lambda a: jsonable(a.tolist())),
    (np.generic, lambda g: jsonable(g.item())),
    (float, _json_float),
    (Path, str),
)


@dataclass(frozen=True)
class ExactResult(Result):
    """The value of a PCTL property on a policy-induced Markov chain (or Pmin/Pmax of an MDP).

    ``guarantee`` says how far the number can be trusted: ``"sound"`` (Storm's sound solver;
    |value - true| <= ``precision`` relative, ``lower``/``upper`` bracket the true value),
    ``"direct"`` (Storm's Eigen solver: no convergence heuristic, but not exact; measured relative
    error 1.6e-7 on Freeway; ``lower``/``upper`` None) or ``"unsound"`` (plain value
    iteration stopped on a convergence heuristic). Step-bounded properties are computed by a fixed
    number of matrix-vector steps and are exact up to rounding in every setting.

    Attributes:
        value: for the (unique) initial state; a probability lies in [0, 1] and in ``[lower, upper]``. In
            monolithic mode the optimum the property asks for: Pmin for ``Pmin``, Pmax for ``Pmax``; for a
            bound without one, the optimum the bound is about (``P<=b``: Pmax, ``P>=b``: Pmin, as in
            PRISM/Storm); for ``P=?``/``R=?``: Pmax (Rmax). ``pmin``/``pmax`` hold both.
        lower, upper: a certified bracket of ``value`` when one is known (a certified computation, or
            Storm's sound solver's bounds), else None.
        satisfied: for threshold properties (``P<=0.1 [...]``), whether the bound holds — decided from
            the bracket and exact graph analysis only (``P>0``, ``P>=1``... by graph analysis); None when
            the bracket contains the threshold (a warning says so and what to change).
        states, transitions: size of the checked chain (mode monolithic: of the MDP).
        stalled_probability: probability that the run reaches the ``stalled`` sink (policy mass on
            unavailable actions) before the property is decided; 0 with ``unavailable='renormalize'``.
        provenance: model, property, policy; timings (seconds per phase: parse, build, policy, induce, check,
            total); settings (the options used); versions; warnings (a policy verified outside the parameters it
            was trained for, a MaskablePPO policy with unavailable='stall', ...).
        state_values: per-state values ``(states,)`` when requested, with ``state_valuations``
            (model states only: the ``stalled`` sink is left out; probabilities clipped to [0, 1]); monolithic mode: Pmax, with
            ``state_values_min`` = Pmin.
        untaken_choices: choices the policy names no action for (it never takes them), as name ->
            number of policy-reachable states offering them; a label, or ``label (command)``, or a
            command name for unlabelled commands (see :mod:`rlverify.models.commands`).
    """

    mode: str
    strategy: str
    value: float
    lower: float | None
    upper: float | None
    guarantee: Guarantee
    precision: float | None
    satisfied: bool | None
    states: int
    transitions: int
    choices: int | None
    stalled_probability: float
    pmin: float | None = None
    pmax: float | None = None
    state_values: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_valuations: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_values_min: np.ndarray | None = field(default=None, repr=False, compare=False)
    variables: tuple[str, ...] = ()
    untaken_choices: dict[str, int] = field(default_factory=dict)
    #: the most probable paths to the target when asked for (``rlverify.exact.explain_paths``, ``--explain K``)
    explanation: FailurePaths | None = field(default=None, compare=False)
    #: which method answered the check (e.g. ``"graph analysis + sparse LU + certified bracket"``), and what
    #: is known of the value's precision (a certified relative error, or that only an absolute bound is known)
    method: str | None = None
    precision_note: str | None = None

    NOT_IN_JSON: ClassVar[tuple[str, ...]] = ("state_values", "state_valuations", "state_values_min")
    GUARANTEED: ClassVar[bool] = True

    def _summary(self) -> Summary:
        """The value with its bracket, the threshold's verdict, the chain's size and the stalled mass."""
        monolithic = self.mode == Mode.MONOLITHIC
        rows = []
        if monolithic:
            kind = "optimum over all schedulers of the MDP (no policy)"
            reward = self.property.lstrip().startswith("R")
            rows.append(("Rmin / Rmax" if reward else "Pmin / Pmax", f"{shown(self.pmin)} / {shown(self.pmax)}"))
        else:
            kind = f"exact value on the policy's Markov chain ({self.mode} policy)"
        if self.satisfied is not None:
            rows.append(("satisfied", "yes" if self.satisfied else "no"))
        rows += [(label, text) for label, text in (("method", self.method), ("precision", self.precision_note)) if text]
        rows.append(("MDP" if monolithic else "chain", f"{self.states:,} states, {self.transitions:,} transitions"))
        rows += self._policy_rows(monolithic)
        rows.append(("time", total_time(self)))
        guarantee = solver_guarantee(self.guarantee, self.precision, self.lower, self.upper)
        return Summary(kind, shown(self.value), guarantee, tuple(rows))

    def _policy_rows(self, monolithic: bool) -> list[tuple[str, str]]:
        """The stalled mass (a policy's chain only) and the choices the policy never takes."""
        rows = []
        if not monolithic:
            stalled = shown(self.stalled_probability)
            rows.append(
                ("stalled", stalled + (" (the policy uses unavailable actions)" if self.stalled_probability > 0 else ""))
            )
        if self.untaken_choices:
            rows.append(("untaken choices", ", ".join(f"{k} ({v:,} states)" for k, v in self.untaken_choices.items())))
        return rows


@dataclass(frozen=True)
class OptimumResult(Result):
    """Pmin and Pmax (Rmin and Rmax) of a property over all schedulers of an MDP: no policy (``rlverify verify
    --mode monolithic``; :func:`rlverify.exact.optimum`).

    Attributes:
        property: as checked; asked: ``min`` or ``max``, the optimum the property asks for: ``Pmin``/``Pmax`` by
            name; ``P<=b`` holds for every scheduler iff Pmax <= b, ``P>=b`` iff Pmin >= b (as in PRISM/Storm); for
            ``P=?``/``R=?`` Pmax (Rmax). value: that optimum at the (unique) initial state.
        pmin, pmax: both optima at the initial state; pmin_bounds, pmax_bounds: each one's certified bracket
            ``(lower, upper)`` when one is known (``guarantee`` sound), else None.
        satisfied: for threshold properties, whether the bound holds for every scheduler (decided from the
            bracket, graph analysis, or Storm's exact arithmetic on a tie; None: undecided, a warning says why).
        guarantee, precision, method, precision_note: as in :class:`ExactResult` (method and note: of ``value``).
        states, transitions, choices: size of the MDP.
        state_pmin, state_pmax: ``(states,)`` per-state optima (probabilities clipped to [0, 1]), with
            ``state_valuations`` ``(states, V)`` in ``variables`` order.
    """

    asked: str
    value: float
    pmin: float
    pmax: float
    pmin_bounds: tuple[float, float] | None
    pmax_bounds: tuple[float, float] | None
    satisfied: bool | None
    guarantee: Guarantee
    precision: float | None
    states: int
    transitions: int
    choices: int
    method: str | None = None
    precision_note: str | None = None
    state_pmin: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_pmax: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_valuations: np.ndarray | None = field(default=None, repr=False, compare=False)
    variables: tuple[str, ...] = ()

    NOT_IN_JSON: ClassVar[tuple[str, ...]] = ("state_pmin", "state_pmax", "state_valuations")
    GUARANTEED: ClassVar[bool] = True

    def _summary(self) -> Summary:
        """The optimum asked for, both optima with their brackets, the verdict and the MDP's size."""
        r = "R" if self.property.lstrip().startswith("R") else "P"
        rows = [
            (f"{r}min", shown(self.pmin) + (f" in {shown_pair(*self.pmin_bounds)}" if self.pmin_bounds else "")),
            (f"{r}max", shown(self.pmax) + (f" in {shown_pair(*self.pmax_bounds)}" if self.pmax_bounds else "")),
        ]
        if self.satisfied is not None:
            rows.append(("satisfied (every scheduler)", "yes" if self.satisfied else "no"))
        if self.method:
            rows.append(("method", self.method))
        rows.append(("MDP", f"{self.states:,} states, {self.choices:,} choices, {self.transitions:,} transitions"))
        rows.append(("time", total_time(self)))
        return Summary(
            f"{r}{self.asked} over all schedulers of the MDP (no policy)",
            shown(self.value),
            solver_guarantee(self.guarantee, self.precision),
            tuple(rows),
        )


def versions() -> dict[str, str]:
    """Versions of rlverify and the components that decide the numbers (a fresh dict; read once per process)."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    """``(package, version)`` of the installed ones, read once per process (:func:`_version`).

    The metadata directories are found as ``importlib.metadata`` finds them (the first ``<name>-<version>.dist-info``
    or ``.egg-info`` along ``sys.path``, names compared normalised) by listing each path entry once: importing
    ``importlib.metadata`` pulls in the email, csv, zipfile and socket modules (~20 ms of every command's start).
    A package not found that way is looked up with ``importlib.metadata`` itself (zipped or unusual installs)."""
    packages = ("rlverify", "stormpy", "numpy", "scipy", "onnxruntime", "highspy")
    found = _metadata_directories(packages)
    out = []
    for pkg in packages:
        if pkg in found:
            out.append((pkg, _version(_MetadataDirectory(found[pkg]))))
            continue
        from importlib.metadata import PackageNotFoundError, distribution

        try:
            out.append((pkg, _version(distribution(pkg))))
        except PackageNotFoundError:
            pass
    return tuple(out)


def _normalised(name: str) -> str:
    """A distribution name as metadata directory names compare (PEP 503, with ``_``)."""
    out: list[str] = []
    dash = False
    for ch in name.lower():
        if ch in "-_.":
            dash = True
            continue
        if dash and out:
            out.append("_")
        dash = False
        out.append(ch)
    return "".join(out)


def _metadata_directories(packages: tuple[str, ...]) -> dict[str, Path]:
    """The first metadata directory of each of ``packages`` along ``sys.path`` (each entry listed once)."""
    wanted = {_normalised(p): p for p in packages}
    found: dict[str, Path] = {}
    for entry in sys.path:
        for package, name in _metadata_names(entry, wanted):
            if package not in found and os.path.isdir(os.path.join(entry or ".", name)):
                found[package] = Path(entry or ".", name)
        if len(found) == len(wanted):
            break
    return found


def _metadata_names(entry: str, wanted: dict[str, str]) -> list[tuple[str, str]]:
    """``(package, directory name)`` of the ``.dist-info`` / ``.egg-info`` names in the ``sys.path`` entry ``entry``
    that belong to ``wanted`` (normalised name -> package), in listing order; none for a zip or a missing directory."""
    try:
        names = os.listdir(entry or ".")
    except OSError:  # a zip, a missing directory
        return []
    out = []
    for name in names:
        stem, dot, suffix = name.rpartition(".")
        if not dot or suffix not in ("dist-info", "egg-info"):
            continue
        package = wanted.get(_normalised(stem.partition("-")[0]))
        if package is not None:
            out.append((package, name))
    return out


class _MetadataDirectory:
    """A ``.dist-info`` / ``.egg-info`` directory read as :func:`_version` reads a distribution."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read_text(self, name: str) -> str | None:
        try:
            return (self.path / name).read_text(encoding="utf-8")
        except OSError:
            return None

    @property
    def version(self) -> str:  # no Version line: the directory's name, as importlib.metadata's last resort
        return self.path.name.rpartition(".")[0].partition("-")[2]


def _version(dist: Any) -> str:
    """``importlib.metadata.version``'s answer for the distribution ``dist``, read from the ``Version`` line of its
    metadata's header: the email parser ``dist.version`` runs reads the whole file (numpy's README is in it; 14 ms
    for the six packages, 1 ms this way). Metadata without that line: ``dist.version``."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    for line in text.splitlines():
        if not line.strip():  # the end of the header
            break
        if line.lower().startswith("version:"):
            return line.split(":", 1)[1].strip()
    return str(dist.version)
