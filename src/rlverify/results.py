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
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

if TYPE_CHECKING:
    from rlverify.figures import MapFigure


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


def solver_guarantee(guarantee: str, precision: float | None, lower: float | None = None, upper: float | None = None) -> str:
    """An exact engine's ``guarantee`` (``sound``/``direct``/``unsound``, or already words) in words, with the
    certified bracket ``[lower, upper]`` when one is known."""
    if guarantee == "sound":
        if lower is not None and upper is not None:
            bracket = shown_pair(lower, upper)
            return f"sound: the true value is in the certified bracket {bracket} (relative precision {shown(precision, 3)})"
        return f"sound: within relative precision {shown(precision, 3)}"
    if guarantee == "direct":
        return "direct solver: no convergence heuristic, but no certified bracket"
    if guarantee == "unsound":
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
    if isinstance(obj, Result):
        return obj.to_json()
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, Path):
        return str(obj)
    return obj


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
    guarantee: str
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

    def _summary(self) -> Summary:
        """The value with its bracket, the threshold's verdict, the chain's size and the stalled mass."""
        reward = self.property.lstrip().startswith("R")
        rows = []
        if self.mode == "monolithic":
            kind = "optimum over all schedulers of the MDP (no policy)"
            rows.append(("Rmin / Rmax" if reward else "Pmin / Pmax", f"{shown(self.pmin)} / {shown(self.pmax)}"))
        else:
            kind = f"exact value on the policy's Markov chain ({self.mode} policy)"
        if self.satisfied is not None:
            rows.append(("satisfied", "yes" if self.satisfied else "no"))
        if self.method:
            rows.append(("method", self.method))
        if self.precision_note:
            rows.append(("precision", self.precision_note))
        rows.append(
            ("MDP" if self.mode == "monolithic" else "chain", f"{self.states:,} states, {self.transitions:,} transitions")
        )
        if self.mode != "monolithic":
            stalled = shown(self.stalled_probability)
            rows.append(
                ("stalled", stalled + (" (the policy uses unavailable actions)" if self.stalled_probability > 0 else ""))
            )
        if self.untaken_choices:
            rows.append(("untaken choices", ", ".join(f"{k} ({v:,} states)" for k, v in self.untaken_choices.items())))
        rows.append(("time", total_time(self)))
        guarantee = solver_guarantee(self.guarantee, self.precision, self.lower, self.upper)
        return Summary(kind, shown(self.value), guarantee, tuple(rows))


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
    guarantee: str
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


@dataclass(frozen=True)
class StepAction:
    """One action of a path's step that leads to the step's next state.

    Attributes:
        action: the policy's action name (None for a forced step: a lone unlabelled choice the policy
            is not asked about).
        choice: the model's choice it takes: its label, with its command name where the model has one.
        weight: the probability the chain follows it in this state: pi(a|s) (one-hot argmax in the
            deterministic mode; rescaled with ``unavailable='renormalize'``; 1 for a forced step).
        transition: T(s, a, s'), the model's probability of the next state under this choice.
        probability: ``weight * transition``; a step's actions sum to its ``probability``.
    """

    action: str | None
    choice: str
    weight: float
    transition: float
    probability: float


@dataclass(frozen=True)
class PathStep:
    """One state of a path and the transition out of it.

    Attributes:
        state: the state's valuation (variable -> value, booleans as 0/1).
        policy: the policy's distribution over its actions at this state (as the policy gives it,
            normalised); None at the last state and at forced steps.
        actions: the actions leading to the next state (several when they share a successor); empty at
            the last state.
        probability: the chain's transition probability to the next state (None at the last state).
    """

    state: dict[str, Any]
    policy: dict[str, float] | None
    actions: tuple[StepAction, ...]
    probability: float | None


@dataclass(frozen=True)
class FailurePath:
    """A path of a policy-induced chain from the initial state to its first target state.

    Attributes:
        probability: the product of its transition probabilities (exact up to float rounding).
        steps: its states in order, ``length + 1`` of them.
    """

    probability: float
    steps: tuple[PathStep, ...]

    @property
    def length(self) -> int:
        """Number of transitions."""
        return len(self.steps) - 1


@dataclass(frozen=True)
class FailurePaths(Result):
    """The K most probable paths to a property's target on a policy-induced chain (exact, not sampled).

    Paths may revisit states; the property's value is the sum over all its paths, so ``covered <= value``.

    Attributes:
        k: the number of paths asked for (the property explained: ``provenance.property``).
        paths: most probable first (ties in any order).
        value: the property's value (Storm, as in :class:`ExactResult`).
        covered: the sum of the listed paths' probabilities; share: ``covered / value`` (None when
            the value is 0).
        exhausted: fewer than ``k`` paths exist, and all are listed.
        bound: the step bound (None: unbounded); mode: the policy mode of the chain.
        variables: the model's variables; ranges: each variable's (min, max) over the chain's states.
        provenance: timings (seconds per phase: build, check, search, policy, describe, total), ...
        note: why fewer than ``k`` paths are listed although more exist (the search's memory cap), else None.
    """

    k: int
    paths: tuple[FailurePath, ...]
    value: float
    covered: float
    share: float | None
    exhausted: bool
    bound: int | None
    mode: str
    variables: tuple[str, ...] = ()
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    note: str | None = None

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """Each path as ``{"probability", "steps": [...], "length"}``."""
        return {**own, "paths": [{**jsonable(path), "length": path.length} for path in self.paths]}

    def _summary(self) -> Summary:
        """How much of the value the listed paths cover, and the first few paths."""
        share = f" = {100 * self.share:.3g}% of the value {shown(self.value)}" if self.share is not None else ""
        rows = [("paths", f"{len(self.paths)} of {self.k} asked" + (" (all that exist)" if self.exhausted else ""))]
        if self.bound is not None:
            rows.append(("step bound", str(self.bound)))
        for rank, path in enumerate(self.paths[:5], 1):
            rows.append((f"path {rank}", f"probability {shown(path.probability)}, {path.length} steps"))
        if len(self.paths) > 5:
            rows.append(("", f"... {len(self.paths) - 5} more"))
        if self.note:
            rows.append(("note", self.note))
        return Summary(
            f"the {self.k} most probable paths to the target ({self.mode} policy)",
            f"{shown(self.covered)} covered{share}",
            "exact: paths of the policy's Markov chain with their probabilities (enumerated, not sampled)",
            tuple(rows),
        )


@dataclass(frozen=True)
class SplittingResult(Result):
    """A rare-event estimate of ``P(path property)`` by importance splitting: fixed effort or RESTART (a *statistical*
    estimate).

    The guarantee is approximate: ``interval`` is a Student-t interval over ``repetitions`` independent
    repetitions of the unbiased product estimator (``interval_kind``); it covers the true value with
    probability about ``confidence`` when the repetitions' mean is close to normal. Runs still open
    after ``max_steps`` steps (``undecided``) and stalled runs count as not crossing: the estimate is
    then of the probability within ``max_steps`` (a lower bound of the property's value).

    Attributes:
        importance: how levels were measured (what was estimated: the provenance's property, model and policy).
        estimate: mean of the repetitions' products; interval: ``(low, high)`` (low clipped at 0).
        confidence: ``1 - delta``; interval_kind: how the interval was made.
        std_error: standard deviation of the repetitions' products over ``sqrt(R)``;
        relative_error: ``std_error / estimate`` (inf when the estimate is 0).
        repetitions, effort: ``R`` and runs per stage and repetition (RESTART: main trials per repetition).
        levels: the thresholds (the last stage ends at ``right``); levels_from: ``given`` or ``pilot``.
        level_probabilities: fixed effort: per stage ``(m + 1)``, the mean over repetitions of the crossing
            fraction (RESTART: empty); level_hits: fixed effort: per stage, runs that crossed (summed over
            repetitions); RESTART: per level ``j = 1..m`` the up-crossings (splits), then the target hits.
        splits: RESTART's splitting factor per level (None for fixed effort).
        repetition_estimates: each repetition's product.
        zero_repetitions: repetitions in which no run crossed some stage (their product is 0).
        decisions: steps over all estimation runs (policy rows evaluated, plus forced steps);
        pilot_decisions: the pilot's steps (not in ``decisions``).
        undecided, stalled: stage runs open after ``max_steps`` / whose policy chose an unavailable action.
        hopeless: stage runs decided false at once by graph analysis of the explicit model (they reached a
            state from which no policy can satisfy the property any more).
        seed, mode, max_steps: as for :class:`StatisticalResult`.
    """

    method: str
    estimate: float
    interval: tuple[float, float]
    confidence: float
    interval_kind: str
    std_error: float
    relative_error: float
    repetitions: int
    effort: int
    levels: tuple[float, ...]
    levels_from: str
    level_probabilities: tuple[float, ...]
    level_hits: tuple[int, ...]
    repetition_estimates: tuple[float, ...]
    zero_repetitions: int
    decisions: int
    pilot_decisions: int
    undecided: int
    stalled: int
    seed: int
    mode: str
    max_steps: int
    importance: str
    untaken_choices: dict[str, int] = field(default_factory=dict)
    splits: tuple[int, ...] | None = None
    hopeless: int = 0

    def _summary(self) -> Summary:
        """The estimate, its interval and what it rests on (repetitions, levels, open runs)."""
        rows = [
            ("relative error", shown(self.relative_error, 3)),
            ("levels", f"{len(self.levels)} ({self.levels_from})"),
            ("effort", f"{self.repetitions} repetitions x {self.effort:,} runs, {self.decisions:,} decisions"),
        ]
        if self.undecided or self.stalled:
            rows.append(
                ("not crossing", f"{self.undecided:,} undecided after {self.max_steps:,} steps, {self.stalled:,} stalled")
            )
        rows += [("seed", str(self.seed)), ("time", total_time(self))]
        guarantee = (
            f"statistical (approximate): the true value is in {shown_pair(*self.interval)} with probability about "
            f"{self.confidence:.4g} ({self.interval_kind})"
        )
        return Summary(
            f"rare-event estimate by importance splitting ({self.method})", shown(self.estimate), guarantee, tuple(rows)
        )


@dataclass(frozen=True)
class StatisticalResult(Result):
    """An estimate of ``P(path property)`` from simulated runs (a *statistical* guarantee, not a bound).

    The guarantee: with probability at least ``confidence`` the true value lies in ``interval``
    (methods ``okamoto``/``adaptive``/``clopper-pearson``; ``wilson`` is approximate). Undecided
    runs (still open after ``max_steps``) widen the interval: its lower end counts them as
    violated, its upper end as satisfied; ``estimate`` counts them as violated. Stalled runs
    count as violated.

    Attributes:
        method: ``okamoto``, ``adaptive``, ``clopper-pearson``, ``wilson`` or ``sprt``.
        estimate: fraction of runs that satisfied the property.
        interval: ``(low, high)``.
        confidence: ``1 - delta``; for the SPRT ``1 - max(alpha, beta)`` (its error bounds; its
            interval is then informative only: a Clopper–Pearson interval after a sequential stop).
        runs: simulated runs; successes: runs satisfying the property.
        undecided: runs undecided after ``max_steps``; stalled: runs whose policy chose an unavailable action.
        hopeless: runs decided false at once by graph analysis of the explicit model: they reached a state
            from which no policy can satisfy the property any more (``Pmax = 0``).
        stuck: runs decided false because they would stay in their state forever (the policy surely takes an
            action that surely leads back to it): they never decide on their own; counted as violated.
        seed: the seed (same seed, same result, whatever the batch size).
        epsilon, delta: the requested precision (``epsilon`` None for interval methods with fixed runs).
        decision: SPRT only: ``"H0"`` (``p >= theta + indifference``), ``"H1"`` (``p <= theta - indifference``) or None
            (no decision within ``max_runs``).
        threshold, comparison: of a threshold property (``P>=0.9 [...]``) or the SPRT's ``theta``.
        satisfied, verdict: whether the threshold property holds — by the SPRT, or else from the
            interval at ``confidence``: ``"yes"`` (the whole interval satisfies it), ``"no"`` (none of
            it does) or ``"undecided"`` (it straddles the threshold; ``satisfied`` None).
        decisions: policy decisions made (steps over all runs).
        untaken_choices: choices of the model's decision states the policy names no action for (it
            never takes them): name -> number of states of the built model offering them.
    """

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
    untaken_choices: dict[str, int] = field(default_factory=dict)
    hopeless: int = 0
    stuck: int = 0

    def _summary(self) -> Summary:
        """The estimate, its interval at its confidence, the verdict and the runs it rests on."""
        rows = []
        if self.verdict is not None:
            rows.append(("satisfied", self.verdict))
        if self.decision is not None:
            rows.append(("SPRT decision", self.decision))
        rows.append(("runs", f"{self.runs:,} ({self.successes:,} satisfied, {self.decisions:,} decisions)"))
        if self.undecided or self.stalled:
            rows.append(
                ("open / stalled", f"{self.undecided:,} undecided after {self.max_steps:,} steps, {self.stalled:,} stalled")
            )
        rows += [("seed", str(self.seed)), ("time", total_time(self))]
        approximate = self.method == "wilson" or self.method == "sprt"
        guarantee = (
            f"statistical: the true value is in {shown_pair(*self.interval)} with probability "
            f"{'about' if approximate else 'at least'} {self.confidence:.4g} ({self.method})"
        )
        return Summary(
            f"statistical estimate from simulated runs ({self.mode} policy)", shown(self.estimate), guarantee, tuple(rows)
        )


@dataclass(frozen=True)
class HeatmapResult(Result):
    """Goal and crash probability per start cell (velocity 0) of a Racetrack map, estimated by simulation.

    Every per-cell interval holds with probability ``confidence`` (a per-cell guarantee, not a
    simultaneous one over all cells).

    Attributes:
        cells: ``(M, 2)`` int64 ``(x, y)`` start cells.
        goal, crash: ``(M,)`` estimated probabilities of ``!"crashed" U "goal"`` and of crashing.
        goal_interval, crash_interval: ``(M, 2)`` intervals.
        runs: ``(M,)`` runs per cell; undecided, stalled: ``(M,)`` counts.
        stuck: ``(M,)`` counts of the runs that stood still forever (the policy surely keeps velocity 0: neither goal
            nor crash, decided at once instead of simulated to ``max_steps``); with ``undecided`` they are the runs
            that *never decide* (:attr:`never_decided`): goal + crash + never decided + stalled = the runs.
        optimal: ``(M,)`` Storm's ``Pmax=? [F "goal"]`` per cell (when computed), gap = optimal - goal;
            optimal_numerics: how Storm computed it (plain value iteration: a convergence heuristic,
            not a guaranteed bound; Storm's sound methods do not finish on Racetrack MDPs in minutes).
        grid: ``(rows, cols)`` cell codes of the map (for plotting).
        provenance: model (the benchmark), policy, timings, warnings, ...
    """

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
    stuck: np.ndarray | None = None

    KEEPS_MODEL_NAME: ClassVar[bool] = True

    @builtins.property
    def gap(self) -> np.ndarray | None:
        """``(M,)`` optimal goal probability minus the policy's estimate (None without ``optimal``)."""
        return None if self.optimal is None else self.optimal - self.goal

    @builtins.property
    def never_decided(self) -> np.ndarray:
        """``(M,)`` float64 share of the runs per cell that never decide: stood still forever (``stuck``) or still
        driving after ``max_steps`` (``undecided``); goal + crash + never_decided + stalled share = 1."""
        stuck = np.zeros_like(self.undecided) if self.stuck is None else self.stuck
        return (self.undecided + stuck) / self.runs

    def _summary(self) -> Summary:
        """The start cells' goal and crash estimates: mean, best and worst cell, runs left open."""
        rows = []
        if len(self.cells):
            best, worst = int(np.argmax(self.goal)), int(np.argmin(self.goal))
            rows += [
                (
                    "best cell",
                    f"({int(self.cells[best][0])}, {int(self.cells[best][1])}): goal {shown(float(self.goal[best]))}",
                ),
                (
                    "worst cell",
                    f"({int(self.cells[worst][0])}, {int(self.cells[worst][1])}): goal {shown(float(self.goal[worst]))}",
                ),
            ]
        stuck = 0 if self.stuck is None else int(np.sum(self.stuck))
        rows.append(
            (
                "runs",
                f"{int(np.sum(self.runs)):,} ({int(np.sum(self.undecided)) + stuck:,} never decided: "
                f"{stuck:,} stuck, {int(np.sum(self.undecided)):,} cut at max_steps; {int(np.sum(self.stalled)):,} stalled)",
            )
        )
        rows += [("noise", shown(self.noise)), ("seed", str(self.seed)), ("time", total_time(self))]
        guarantee = (
            f"statistical: each cell's interval holds with probability {self.confidence:.4g} ({self.method}; "
            "per cell, not simultaneous)"
        )
        return Summary(
            "goal and crash probability per start cell, by simulation",
            f"goal {shown(float(np.mean(self.goal)))}, crash {shown(float(np.mean(self.crash)))} (means over "
            f"{len(self.cells):,} start cells)"
            if len(self.cells)
            else "no start cell",
            guarantee,
            tuple(rows),
            self._goal_picture(),
        )

    def _goal_picture(self) -> str:
        """The goal estimate per start cell on the track (:func:`grid_svg`; row ``y = 0`` at the top, as the map
        file reads; cells not simulated blank)."""
        rows, cols = np.asarray(self.grid).shape[:2]
        goal = np.full((rows, cols), np.nan)
        for (x, y), g in zip(self.cells, self.goal, strict=True):
            goal[int(y), int(x)] = g
        return grid_svg(
            goal,
            np.arange(cols),
            np.arange(rows),
            x="x",
            y="y",
            label="goal probability per start cell (estimate)",
            high_is_bad=False,
            origin="upper",
            cell=max(3, min(14, 600 // max(cols, 1))),
        )

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """The settings, then one record per cell (``cells``)."""
        keep = ("noise", "method", "confidence", "epsilon", "seed", "max_steps", "decisions", "optimal_numerics")
        out: dict[str, Any] = {
            **{k: own[k] for k in keep},
            "cells": [
                {
                    "x": int(x),
                    "y": int(y),
                    "goal": float(g),
                    "goal_interval": [float(a), float(b)],
                    "crash": float(c),
                    "crash_interval": [float(e), float(f)],
                    "runs": int(r),
                    "undecided": int(u),
                    "stalled": int(s),
                    "stuck": int(self.stuck[i]) if self.stuck is not None else 0,
                    "never_decided": float(self.never_decided[i]),
                    **({"optimal": float(self.optimal[i])} if self.optimal is not None else {}),
                }
                for i, ((x, y), g, (a, b), c, (e, f), r, u, s) in enumerate(
                    zip(
                        self.cells,
                        self.goal,
                        self.goal_interval,
                        self.crash,
                        self.crash_interval,
                        self.runs,
                        self.undecided,
                        self.stalled,
                        strict=True,
                    )
                )
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
        lower: sound lower bound on ``Pr(F<=k fail)`` from every state of the part (None: not computed).
    """

    lo: tuple[float, ...]
    hi: tuple[float, ...]
    probability_lower: tuple[float, ...]
    probability_upper: tuple[float, ...]
    bound: float
    lower: float | None = None


@dataclass(frozen=True)
class WorstWitness:
    """A start state whose failure probability bounds the worst case from below (:class:`AbstractionResult`).

    Attributes:
        state: the start state ``(n,)``, in the system's variables.
        probability: its failure probability under the policy as it runs (its own runtime, e.g. onnxruntime): exact
            (``method == "enumeration"``: every action sequence, in floating point) or the estimate (``"simulation"``:
            successes / runs).
        lower: what it proves about the worst case over the initial region: ``worst >= lower``. Exact: the
            probability; simulation: the one-sided Clopper-Pearson lower bound at ``confidence`` (runs fresh from
            those that chose the state, so the choice does not bias it).
        upper: the upper end of the state's interval (exact: the probability; simulation: None, one-sided).
        method: ``"enumeration"`` or ``"simulation"``; guarantee: the same in words.
        confidence: the confidence of ``lower`` (None when exact); runs: runs behind it (None when exact).
        candidates: start states examined; seed: the seed of the sampling of candidates and runs.
    """

    state: tuple[float, ...]
    probability: float
    lower: float
    upper: float | None
    method: str
    guarantee: str
    confidence: float | None
    runs: int | None
    candidates: int
    seed: int


@dataclass(frozen=True)
class AbstractionResult(Result):
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
        options: the :class:`AbstractionOptions` used; seed: their seed.
        variables, actions; template_axes: the axes of the domain.
        initial_lo, initial_hi: the initial box.
        provenance: model (the system's name), property (the failure event, ``F<=k fail``), policy; timings
            (seconds: bounds, refinement, successors, solving, total); versions; warnings.
        lower_all: sound lower bound: for every state ``s`` of the initial region, ``Pr_s(F<=k fail) >= lower_all``
            (min-min robust value iteration counting only successors inside the unsafe set as failed).
        worst_witness: a start state whose failure probability bounds the worst case from below
            (:class:`WorstWitness`; exact or statistical, as it says), or None when not searched.
        gap: ``upper_bound - worst_witness.lower``: how far the sound upper bound can be above the worst case.
        verdict: with a threshold ``B``: ``"safe"`` (upper <= B), ``"unsafe (witness)"`` (the witness's lower end
            > B) or ``"undecided at budget"``; None without one.
        stopped: why the refinement by the gap stopped (None: a single abstraction, no refinement loop).
        cells: initial cells the refinement by the gap ended with (each abstracted on its own).
        history: per round of the refinement by the gap ``(seconds, upper, lower_all, witness lower)``.
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
    options: Any  # rlverify.abstraction.AbstractionOptions
    seed: int
    variables: tuple[str, ...]
    actions: tuple[str, ...]
    template_axes: tuple[tuple[float, ...], ...]
    initial_lo: tuple[float, ...]
    initial_hi: tuple[float, ...]
    imdp: Any = field(default=None, repr=False, compare=False)  # rlverify.abstraction.imdp.IMDP
    lower_all: float | None = None
    worst_witness: WorstWitness | None = None
    gap: float | None = None
    verdict: str | None = None
    stopped: str | None = None
    cells: int | None = None
    history: tuple[tuple[float, float, float, float], ...] = ()

    NOT_IN_JSON: ClassVar[tuple[str, ...]] = ("imdp",)
    KEEPS_MODEL_NAME: ClassVar[bool] = True

    def _summary(self) -> Summary:
        """The sound bound, the refinement's size and what was left unresolved."""
        rows = [
            ("max-min value", f"{shown(self.maxmin_value)} (information only, not a bound)"),
            (
                "initial parts",
                f"{len(self.parts):,} (bounds {shown(min((p.bound for p in self.parts), default=None))} .. "
                f"{shown(max((p.bound for p in self.parts), default=None))})",
            ),
            (
                "abstraction",
                f"{self.n_abstract_states:,} abstract states, {self.n_polyhedra:,} polyhedra, "
                f"{self.n_transitions:,} transitions",
            ),
        ]
        if self.n_unresolved_parts:
            rows.append(("unresolved parts", f"{self.n_unresolved_parts:,} (accepted above the spread target)"))
        rows = _two_sided_rows(self) + rows
        rows += [("seed", str(self.seed)), ("time", total_time(self))]
        guarantee = f"sound upper bound: from every state of the initial region, Pr(failure) <= {shown(self.upper_bound)}"
        return Summary(
            "sound upper bound on the failure probability (interval-MDP abstraction)",
            shown(self.upper_bound),
            guarantee,
            tuple(rows),
        )


def _two_sided_rows(result: AbstractionResult) -> list[tuple[str, str]]:
    """The lower bound, the witness, the gap and the threshold's verdict of an abstraction, each with its guarantee."""
    rows = []
    if result.lower_all is not None:
        rows.append(("lower bound (sound)", f"{shown(result.lower_all)}: from every initial state, Pr(failure) >= it"))
    w = result.worst_witness
    if w is not None:
        at = "(" + ", ".join(f"{name}={x:.6g}" for name, x in zip(result.variables, w.state, strict=False)) + ")"
        rows.append(("worst witness", f"{shown(w.lower)} at {at}: {w.guarantee}"))
    if result.gap is not None:
        rows.append(("gap", f"{shown(result.gap)} (upper bound - worst witness: the worst case lies in between)"))
    if result.verdict is not None:
        rows.append(("verdict", result.verdict))
    if result.stopped is not None:
        rows.append(("refinement", f"{result.cells or 0:,} initial cells; stopped: {result.stopped}"))
    return rows


def versions() -> dict[str, str]:
    """Versions of rlverify and the components that decide the numbers (a fresh dict; read once per process)."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    """``(package, version)`` of the installed ones, read once per process (:func:`_version`)."""
    from importlib.metadata import PackageNotFoundError, distribution

    out = []
    for pkg in ("rlverify", "stormpy", "numpy", "scipy", "onnxruntime", "highspy"):
        try:
            out.append((pkg, _version(distribution(pkg))))
        except PackageNotFoundError:
            pass
    return tuple(out)


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


@dataclass(frozen=True)
class RiskMap(Result):
    """Per-state values of a property under a policy and the optimum over all policies, on two variables.

    Exact per state (Storm; ``guarantee`` as in :class:`ExactResult`), then aggregated per cell
    ``(x, y)`` with ``agg`` over the states whose other variables differ. ``value`` is over the
    states of the policy's chain (reachable under the policy); ``optimum`` is Storm's Pmin/Pmax
    (Rmin/Rmax) per state of the full MDP (over all policies), read at the same states, so the panels
    compare state by state; ``optimum_all`` aggregates the optimum over every MDP state of the cell,
    including those the policy never reaches. ``regret`` is per state ``value - optimum`` for
    ``optimum="min"`` (a bad event) and ``optimum - value`` for ``"max"`` (a goal): >= 0 up to the
    solver's precision, never clipped. Both builds are property-directed: target states may be
    absorbing, and a step-bounded property's state value counts its bound from that state.

    Attributes:
        mode: as verified (model, policy, property: the provenance's); optimum: ``"min"`` or ``"max"``;
            optimum_source: where that choice came from (``"option"`` or the property's comparison).
        agg: ``max``, ``min`` or ``mean`` (unweighted over states); where: the filter, or None.
        x, y: the map's variables; x_values ``(W,)``, y_values ``(H,)`` int64: the axes.
        value, optimum_value, regret, optimum_all: ``(H, W)`` float64, row ``i`` is ``y = y_values[i]``;
            NaN where the cell has no state of that set (after the filter).
        policy_states, mdp_states: ``(H, W)`` int64 states per cell (after the filter).
        initial_value, initial_optimum, initial_regret: at the initial state (no filter).
        states: counts: ``mdp`` (full MDP), ``policy`` (the policy's chain, without the ``stalled`` sink),
            ``mdp_only`` (in the MDP, never reached by the policy), ``mdp_filtered``, ``policy_filtered``.
        stalled_probability: of the policy's chain (see :class:`ExactResult`).
        variables: all state variables; state_valuations ``(P, V)`` int64, state_value, state_optimum
            ``(P,)`` float64: per state of the policy's chain (before the filter).
    """

    mode: str
    optimum: str
    optimum_source: str
    agg: str
    where: str | None
    x: str
    y: str
    x_values: np.ndarray
    y_values: np.ndarray
    value: np.ndarray
    optimum_value: np.ndarray
    regret: np.ndarray
    optimum_all: np.ndarray
    policy_states: np.ndarray
    mdp_states: np.ndarray
    initial_value: float
    initial_optimum: float
    initial_regret: float
    states: dict[str, int]
    guarantee: str
    precision: float | None
    stalled_probability: float
    variables: tuple[str, ...] = ()
    state_valuations: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_value: np.ndarray | None = field(default=None, repr=False, compare=False)
    state_optimum: np.ndarray | None = field(default=None, repr=False, compare=False)

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """Settings, counts and the grid: ``grid[name][i][j]`` is the cell ``x = x_values[j]``,
        ``y = y_values[i]`` (None where the cell has no state of that set; infinite rewards as "Infinity")."""
        grids = {
            "value": self.value,
            "optimum": self.optimum_value,
            "regret": self.regret,
            "optimum_all_states": self.optimum_all,
            "policy_states": self.policy_states,
            "mdp_states": self.mdp_states,
        }
        return {
            "mode": self.mode,
            "optimum": self.optimum,
            "optimum_source": self.optimum_source,
            "agg": self.agg,
            "where": self.where,
            "x": self.x,
            "y": self.y,
            "x_values": self.x_values,
            "y_values": self.y_values,
            "initial": {"value": self.initial_value, "optimum": self.initial_optimum, "regret": self.initial_regret},
            "states": dict(self.states),
            "guarantee": self.guarantee,
            "precision": self.precision,
            "stalled_probability": self.stalled_probability,
            "variables": list(self.variables),
            "grid": grids,
        }

    def figure(self, *, origin: str = "lower") -> MapFigure:
        """The three panels (policy value, optimum, regret) as a :class:`MapFigure` (``origin="upper"``:
        the first y value at the top, as grid worlds are printed)."""
        from rlverify.figures import MapFigure, MapPanel, MapShade

        probability = self.property.lstrip().startswith("P")
        bad = self.optimum == "min"
        cmap = "RdYlGn_r" if bad else "RdYlGn"
        if not probability:
            cmap = "viridis"
        vmin, vmax = (0.0, 1.0) if probability else (None, None)
        what = "probability" if probability else "expected reward"
        opt = {("min", True): "Pmin", ("max", True): "Pmax", ("min", False): "Rmin", ("max", False): "Rmax"}[
            (self.optimum, probability)
        ]
        single = bool((self.policy_states <= 1).all() and (self.mdp_states <= 1).all())  # one state per cell: no aggregate
        agg = "" if single else f"{self.agg} "
        panels = (
            MapPanel(f"policy: {agg}{what}", self.value, cmap, vmin, vmax, f"{what} under the policy"),
            MapPanel(f"optimum: {agg}{opt} (all policies)", self.optimum_value, cmap, vmin, vmax, f"{opt} per state"),
            MapPanel(
                f"regret: {agg + 'of ' if agg else ''}" + ("value - " + opt if bad else opt + " - value"),
                self.regret,
                "magma_r",
                0.0,
                None,
                f"value - {opt}: what the policy gives away" if bad else f"{opt} - value: what the policy leaves",
            ),
        )
        no_state = self.mdp_states == 0
        unreached = (self.mdp_states > 0) & (self.policy_states == 0)
        shades = (
            MapShade(no_state, "no state" + (f" with {self.where}" if self.where else ""), "#ffffff", "////"),
            MapShade(unreached, "states the policy never reaches", "#b0b0b0"),
        )
        view = ("each cell: one state" if single else f"{self.agg} over the other variables") + (
            f", where {self.where}" if self.where else ""
        )
        title = (
            f"{self.model}: {self.property}\npolicy {self.policy} ({self.mode}); initial state: value "
            f"{self.initial_value:.4g}, {opt} {self.initial_optimum:.4g}\n{view}"
        )
        s = self.states
        note = (
            f"states: {s['policy']:,} in the policy's chain, {s['mdp']:,} in the full MDP ({s['mdp_only']:,} never "
            f"reached by the policy); after the filter {s['policy_filtered']:,} / {s['mdp_filtered']:,}. "
            + (
                "Each cell: its one state."
                if single
                else f"Each cell: the {self.agg} over its states of the per-state values (regret per state, then the "
                f"{self.agg})."
            )
        )
        return MapFigure(
            panels=panels,
            x_label=self.x,
            y_label=self.y,
            x_values=self.x_values,
            y_values=self.y_values,
            title=title,
            shades=shades,
            origin=origin,
            note=note,
        )

    def _summary(self) -> Summary:
        """The initial state's value, optimum and regret, the map's axes and the states it covers."""
        opt = ("P" if self.property.lstrip().startswith("P") else "R") + self.optimum
        s = self.states
        rows = [
            (f"{opt} (all policies)", shown(self.initial_optimum)),
            ("regret", shown(self.initial_regret)),
            (
                "map",
                f"x = {self.x}, y = {self.y}, {self.agg} over the other variables"
                + (f", where {self.where}" if self.where else ""),
            ),
            ("states", f"{s.get('policy', 0):,} in the policy's chain, {s.get('mdp', 0):,} in the MDP"),
            ("stalled", shown(self.stalled_probability)),
            ("time", total_time(self)),
        ]
        picture = ""
        if self.property.lstrip().startswith("P"):  # probabilities: a colour scale over [0, 1]
            picture = grid_svg(
                self.value,
                self.x_values,
                self.y_values,
                x=self.x,
                y=self.y,
                label=f"policy: {self.agg} probability per ({self.x}, {self.y}) cell",
                high_is_bad=self.optimum == "min",
            )
        return Summary(
            f"risk map: per-state values under the policy and the optimum ({self.mode} policy)",
            shown(self.initial_value),
            solver_guarantee(self.guarantee, self.precision),
            tuple(rows),
            picture,
        )


@dataclass(frozen=True)
class RobustnessResult(Result):
    """The property's exact range when an adversary perturbs the policy's observations (``rlverify robust``).

    ``pmax``/``pmin`` are Storm's Pmax/Pmin of the adversarial MDP (one choice per distinct policy
    distribution over the admissible observations of a state): the exact worst and best case over
    every adversary (for step-bounded properties the adversary may depend on the step), up to the solver's ``guarantee``
    (as :class:`ExactResult`). ``worst`` is ``pmax`` when ``worst_is == "max"`` (the property names
    a failure), else ``pmin``; ``nominal`` is the unperturbed chain's value (as ``verify_exact``).

    Attributes:
        epsilon, norm, perturbed: the budget, ``linf``/``l1``, and the features the adversary may change.
        attack, attack_method: the value of the chain of one FGSM perturbation per state (None when the
            policy has no network); it always lies in ``[pmin, pmax]``.
        states, choices, transitions: size of the adversarial MDP (reachable part).
        decision_states, perturbations_per_state: (state, perturbation) pairs considered;
            observations: distinct perturbed observations the policy was evaluated on (one batch).
        changed_states: reachable decision states where some perturbation changes the argmax action
            (their valuations in ``changed_valuations`` ``(n, V)`` int64, ``variables`` order).
        worst_perturbations: per reachable decision state where a perturbation helps the adversary,
            ``{"state", "observed", "offset", "gain"}`` (the shown values of the perturbed features;
            gain: the one-step lookahead on the worst-case values over the nominal observation),
            largest gain first.
    """

    epsilon: int
    norm: str
    perturbed: tuple[str, ...]
    worst_is: str
    nominal: float
    pmax: float
    pmin: float
    worst: float
    best: float
    attack: float | None
    attack_method: str | None
    states: int
    choices: int
    transitions: int
    decision_states: int
    perturbations_per_state: int
    observations: int
    changed_states: int
    guarantee: str
    precision: float
    changed_valuations: np.ndarray | None = field(default=None, repr=False, compare=False)
    worst_perturbations: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)
    variables: tuple[str, ...] = ()

    #: worst perturbations and changed states listed in JSON (largest gain first; the total is given)
    LISTED: ClassVar[int] = 20

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """The :attr:`LISTED` largest-gain worst perturbations and changed states (valuations by variable)."""
        vals = self.changed_valuations if self.changed_valuations is not None else np.zeros((0, len(self.variables)))
        return {
            **own,
            "worst_perturbations": self.worst_perturbations[: self.LISTED],
            "worst_perturbations_total": len(self.worst_perturbations),
            "changed_valuations": [dict(zip(self.variables, map(int, v), strict=True)) for v in vals[: self.LISTED]],
        }

    def _summary(self) -> Summary:
        """The worst and best case over the adversaries, the nominal value, the FGSM attack and the changes."""
        rows = [
            ("nominal", shown(self.nominal)),
            (f"worst (P{self.worst_is})", shown(self.worst)),
            (f"best (P{'min' if self.worst_is == 'max' else 'max'})", shown(self.best)),
            ("FGSM attack", shown(self.attack)),
            ("argmax changes", f"{self.changed_states:,} of {self.decision_states:,} decision states"),
            ("adversarial MDP", f"{self.states:,} states, {self.choices:,} choices, {self.transitions:,} transitions"),
            ("time", total_time(self)),
        ]
        return Summary(
            f"exact range over every observation perturbation ({self.norm} epsilon {self.epsilon} "
            f"on {', '.join(self.perturbed)})",
            f"{shown(self.worst)} worst case",
            "exact over every adversary; " + solver_guarantee(self.guarantee, self.precision),
            tuple(rows),
        )


@dataclass(frozen=True)
class IntervalResult(Result):
    """The property's range over every model whose transition probabilities are within ``delta`` of the model's.

    ``lower``/``upper``: min and max over the interval chain (Storm's interval-model solver), which
    contains every chain the policy induces on such a model (a sound relaxation: per-action
    uncertainty is joined into interval rows). ``guarantee`` says how they were computed: exact up
    to rounding for step-bounded properties; Storm's robust value iteration otherwise.

    Attributes:
        delta, relative: the error (absolute ``p ± delta``, or ``p (1 ± delta)``).
        uncertain_actions: the labels/command names whose choices are uncertain (None: all).
        nominal: the value on the model as given.
        states, transitions: size of the interval chain.
        clipped: transition probabilities of the chain's choices whose interval left [0, 1] and was clipped.
    """

    delta: float
    relative: bool
    uncertain_actions: tuple[str, ...] | None
    nominal: float
    lower: float
    upper: float
    states: int
    transitions: int
    clipped: int
    guarantee: str
    precision: float

    def _summary(self) -> Summary:
        """The range over the models within ``delta``, the nominal value and the interval chain's size."""
        rows = [
            ("nominal", shown(self.nominal)),
            (
                "model error",
                f"{'relative' if self.relative else 'absolute'} delta {shown(self.delta)}"
                + (f" on {', '.join(self.uncertain_actions)}" if self.uncertain_actions else ""),
            ),
            (
                "interval chain",
                f"{self.states:,} states, {self.transitions:,} transitions; {self.clipped:,} intervals clipped",
            ),
            ("time", total_time(self)),
        ]
        return Summary(
            "range over every model within the transition error",
            shown_pair(self.lower, self.upper),
            "range over a sound relaxation (the interval chain contains every such model's chain); numerics: "
            + self.guarantee,
            tuple(rows),
        )


# ------------------------------------------------------------------------------------------------ explanations


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
    guarantee: str
    precision: float

    def figure(self, *, title: str | None = None) -> Any:
        """A horizontal bar chart (:class:`matplotlib.figure.Figure`, not managed by pyplot): per feature, ranked,
        the value with the feature fixed (and the worst over its range) and the ±1 perturbation's worst and best,
        against the nominal value (a vertical line)."""
        from rlverify.figures import feature_effects_figure

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
    guarantee: str
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
    guarantee: str
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


@dataclass(frozen=True)
class ShieldResult(Result):
    """A shield for a policy and its certificate: the shielded policy verified exactly (``rlverify shield``;
    :func:`rlverify.exact.shield.shield_policy`).

    The shield keeps, in each decision state of the full MDP, the actions whose per-action value
    (:mod:`rlverify.exact.action_values`) is within ``threshold`` of the state's best (``kind`` ``relative``:
    ``Q <= V* + t`` for a bad event, ``Q >= V* - t`` for a goal; ``absolute``: ``Q <= t`` / ``Q >= t``; ``factor``:
    ``t Q <= V*`` / ``Q >= t V*``; the best actions always). ``value``/``lower``/``upper``/``satisfied`` are the
    shielded policy's exact value on its chain (``verify_exact``, strategy ``full``; the verdict from the certified
    bracket only), beside the unshielded policy's and the optimum over all schedulers.

    Attributes:
        optimum_is: ``min`` (a bad event: the optimum is Pmin) or ``max`` (a goal: Pmax).
        meet: whether the threshold was searched (``--meet``: bisection over the distinct gaps ``|Q - V*|``, the
            loosest whose shielded value meets the bound, assuming the value is monotone in the threshold; every
            probe verified exactly, listed in ``probes``).
        covered_states: decision states of the MDP the shield covers; restricted_states: those where it removes
            an action the state offers.
        reachable_states: covered states the shielded policy reaches; intervened_states: those where the shield
            removes probability mass of the policy (share: ``intervened_share``); fallback_states: those where the
            policy puts no mass on a kept action (the best kept actions are used instead).
        expected_interventions: expected number of steps per run at which the shield removes mass (a step counts
            1), up to the property's step bound (all steps for an unbounded property; ``inf`` when the runs can
            be intervened on forever); expected_removed_mass: the same with each step weighted by the mass removed.
        shield_file: where the shield was written (None: not written).
    """

    optimum_is: str
    threshold_kind: str
    threshold: float
    meet: bool
    value: float
    lower: float | None
    upper: float | None
    satisfied: bool | None
    stalled_probability: float
    unshielded: float
    unshielded_lower: float | None
    unshielded_upper: float | None
    optimum: float
    optimum_lower: float | None
    optimum_upper: float | None
    covered_states: int
    restricted_states: int
    reachable_states: int
    intervened_states: int
    intervened_share: float
    fallback_states: int
    expected_interventions: float
    expected_removed_mass: float
    guarantee: str
    precision: float | None
    states: int
    choices: int
    transitions: int
    remaining_steps: int | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)
    shield_file: str | None = None
    shield: Any = field(default=None, repr=False, compare=False)

    NOT_IN_JSON: ClassVar[tuple[str, ...]] = ("shield",)

    def _summary(self) -> Summary:
        """The shielded value beside the unshielded one and the optimum, the threshold and the interventions."""
        op = "<=" if self.optimum_is == "min" else ">="
        rows = [
            ("shielded", shown(self.value) + (f" in {shown_pair(self.lower, self.upper)}" if self.lower is not None else "")),
            ("unshielded", shown(self.unshielded)),
            (f"optimum (P{self.optimum_is})", shown(self.optimum)),
        ]
        if self.satisfied is not None:
            rows.append(("satisfied", "yes" if self.satisfied else "no"))
        rows += [
            ("threshold", f"{self.threshold_kind} {shown(self.threshold, 10)}" + (" (searched: --meet)" if self.meet else "")),
            (
                "kept",
                f"Q {op} the state's best within the threshold; restricted in {self.restricted_states:,} of "
                f"{self.covered_states:,} decision states",
            ),
            (
                "interventions",
                f"{self.intervened_states:,} of {self.reachable_states:,} reached decision states "
                f"({shown(100 * self.intervened_share, 3)} %); expected per run {shown(self.expected_interventions)} "
                f"(mass removed {shown(self.expected_removed_mass)})",
            ),
            ("fallback", f"{self.fallback_states:,} reached states (no policy mass on a kept action)"),
            ("stalled", shown(self.stalled_probability)),
            ("MDP", f"{self.states:,} states, {self.choices:,} choices, {self.transitions:,} transitions"),
        ]
        if self.shield_file:
            rows.append(("shield file", self.shield_file))
        rows.append(("time", total_time(self)))
        return Summary(
            "shielded policy, verified exactly on its Markov chain",
            shown(self.value),
            solver_guarantee(self.guarantee, self.precision, self.lower, self.upper),
            tuple(rows),
        )
