"""Figures: rlverify's drawings — maps (:class:`MapFigure`, described as data by the results: exact risk maps and
Racetrack heat maps) and failure paths (:func:`paths_figure`) — as :class:`matplotlib.figure.Figure` objects that
pyplot does not manage (matplotlib is imported when a figure is made; no backend is chosen or forced, so a notebook
displays them), written atomically by the CLI, every text as written (:func:`rlverify.files.save_figure`).
The abstraction's part plots stay with its polytope geometry (:mod:`rlverify.abstraction.plots`)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np

from rlverify.errors import OptionError, did_you_mean
from rlverify.files import plain_figure_text, save_figure

#: a :class:`matplotlib.figure.Figure` (matplotlib is imported only when a figure is made)
Figure: TypeAlias = Any
#: matplotlib objects drawn on (an ``Axes``, a colormap, an image)
Artist: TypeAlias = Any
#: a matplotlib layout engine by name (or None: none)
Layout: TypeAlias = 'Literal["constrained", "compressed", "tight"] | None'


# What the drawings read of the results they draw (:class:`~rlverify.results.FailurePaths`,
# :class:`~rlverify.results.FeatureEffects`): figures takes data of that shape and imports no result type, so the
# results may import this module (their ``figure()`` methods) and the dependency goes one way.


class PathStepData(Protocol):
    """One state of a path: its valuation."""

    @property
    def state(self) -> Mapping[str, Any]: ...


class PathData(Protocol):
    """A path: its probability, its number of transitions, its states."""

    @property
    def probability(self) -> float: ...

    @property
    def length(self) -> int: ...

    @property
    def steps(self) -> Sequence[PathStepData]: ...


class PathsData(Protocol):
    """Paths to a target (:class:`~rlverify.results.FailurePaths`)."""

    @property
    def variables(self) -> Sequence[str]: ...

    @property
    def ranges(self) -> Mapping[str, tuple[int, int]]: ...

    @property
    def paths(self) -> Sequence[PathData]: ...

    @property
    def share(self) -> float | None: ...

    @property
    def value(self) -> float: ...

    @property
    def model(self) -> str: ...

    @property
    def policy(self) -> str | None: ...

    @property
    def property(self) -> str: ...


class EffectData(Protocol):
    """One feature's effect (:class:`~rlverify.results.FeatureEffect`)."""

    @property
    def feature(self) -> str: ...

    @property
    def fixed(self) -> float: ...

    @property
    def worst_fixed(self) -> float | None: ...

    @property
    def perturbed_worst(self) -> float | None: ...

    @property
    def perturbed_best(self) -> float | None: ...


class EffectsData(Protocol):
    """Features ranked by effect (:class:`~rlverify.results.FeatureEffects`)."""

    @property
    def effects(self) -> Sequence[EffectData]: ...

    @property
    def nominal(self) -> float: ...

    @property
    def property(self) -> str: ...


@dataclass(frozen=True)
class MapPanel:
    """One panel of a :class:`MapFigure`: ``values`` ``(H, W)`` float64 (NaN: no value; a shade may explain
    it), drawn with ``cmap`` between ``vmin`` and ``vmax`` (None: the finite data's range), and a colour
    bar labelled ``label``."""

    title: str
    values: np.ndarray
    cmap: str
    vmin: float | None
    vmax: float | None
    label: str


@dataclass(frozen=True)
class MapShade:
    """Cells drawn in a fixed style in every panel (walls, cells with no state...), explained in the legend.

    ``mask`` ``(H, W)`` bool; ``color`` the fill, ``hatch`` a matplotlib hatch pattern or None."""

    mask: np.ndarray
    label: str
    color: str
    hatch: str | None = None


@dataclass(frozen=True)
class MapFigure:
    """Panels over one grid of cells, drawn side by side with axes, colour bars and a legend.

    The one drawing of maps in rlverify: exact risk maps (:meth:`RiskMap.figure`) and the
    Racetrack heat maps (:func:`rlverify.statistical.heatmap.plot_heatmap`) both use it.

    Attributes:
        panels: the panels; x_label, y_label: axis names; x_values ``(W,)``, y_values ``(H,)``: tick
            labels of the columns and rows; title; shades: special cells, with a legend entry each
            (when present); origin: ``"lower"`` (row 0 at the bottom) or ``"upper"`` (row 0 at the top).
        note: a line of text under the legend.
    """

    panels: tuple[MapPanel, ...]
    x_label: str
    y_label: str
    x_values: np.ndarray
    y_values: np.ndarray
    title: str = ""
    shades: tuple[MapShade, ...] = ()
    origin: str = "lower"
    note: str = ""

    def layout(self) -> tuple[int, int, tuple[float, float]]:
        """``(rows, columns, (width, height) inches)`` of the drawing (the PNG is that size times ``dpi``)."""
        H, W = len(self.y_values), len(self.x_values)
        scale = min(1.0, 7.0 / max(W * 0.32, H * 0.32, 1e-9))  # at most 7 inches a side, square cells
        pw, ph = max(W * 0.32 * scale, 2.6), max(H * 0.32 * scale, 2.4)
        ncols = min(len(self.panels), 3 if W <= 1.5 * H else 2 if W <= 3 * H else 1)  # wide maps: fewer columns
        nrows = -(-len(self.panels) // ncols)
        return nrows, ncols, (ncols * (pw + 1.8), nrows * (ph + 1.4) + 1.0)

    def draw(self, out: str | Path, *, dpi: int = 110, force: bool = False, what: str = "") -> Path:
        """Write the figure (:meth:`render`) as a PNG to ``out`` (:meth:`layout` times ``dpi`` pixels); returns its
        :class:`~pathlib.Path`. Written atomically, an existing file replaced only with ``force``
        (:func:`rlverify.files.save_figure`; ``what``: the option naming the file in its errors)."""
        return save_figure(self.render(), out, force=force, dpi=dpi, what=what)

    def _repr_png_(self) -> bytes:
        """The PNG a notebook shows for a map (:meth:`render` at 80 dpi)."""
        return figure_png(self.render(), dpi=80)

    def render(self) -> Figure:
        """The drawing as a :class:`matplotlib.figure.Figure` (not registered with pyplot, no backend chosen: a
        notebook displays it, :func:`rlverify.files.save_figure` writes it); every text (names, titles) is drawn as
        written, never as TeX math. Cells of small maps (at most 64) show their values as numbers."""
        with plain_figure_text():  # every text is created as plain text (names may contain '$')
            return self._render()

    def _render(self) -> Figure:
        nrows, ncols, size = self.layout()
        fig = new_figure(size)
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for ax in axes.ravel()[len(self.panels) :]:
            ax.set_axis_off()
        for ax, p in zip(axes.ravel()[: len(self.panels)], self.panels, strict=True):
            self._draw_panel(fig, ax, p)
        self._legend(fig)
        if self.title:
            fig.suptitle(self.title, fontsize=9)
        return fig

    def _draw_panel(self, fig: Figure, ax: Artist, p: MapPanel) -> None:
        """One panel: the values, the shades over them, the numbers on small maps, the axes and the colour bar."""
        H, W = len(self.y_values), len(self.x_values)
        v = np.asarray(p.values, dtype=np.float64)
        lo, hi = _colour_range(p, v)
        cmap = _cmap(p.cmap).with_extremes(bad=(0, 0, 0, 0))  # NaN: transparent (a shade explains it)
        im = ax.imshow(
            np.ma.masked_invalid(v),
            cmap=cmap,
            vmin=lo,
            vmax=hi,
            origin=self.origin,
            interpolation="nearest",
            aspect="equal",
        )
        for shade in self.shades:
            _draw_shade(ax, shade)
        if H * W <= 64:  # small maps: the numbers themselves, readable on any colour
            _draw_numbers(ax, v, cmap, im)
        ax.set_xlim(-0.5, W - 0.5)
        ax.set_ylim(*((-0.5, H - 0.5) if self.origin == "lower" else (H - 0.5, -0.5)))
        _ticks(W, self.x_values, ax.set_xticks, ax.set_xticklabels)
        _ticks(H, self.y_values, ax.set_yticks, ax.set_yticklabels)
        ax.set_xlabel(self.x_label)
        ax.set_ylabel(self.y_label)
        ax.set_title(p.title, fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04).set_label(p.label, fontsize=8)

    def _legend(self, fig: Figure) -> None:
        """The shades present, named in a legend headed by the note (or the note alone)."""
        from matplotlib.patches import Patch  # lazy: matplotlib, start-up

        handles = [
            Patch(facecolor=s.color, hatch=s.hatch, edgecolor="#707070", label=s.label)
            for s in self.shades
            if np.asarray(s.mask).any()
        ]
        if handles:  # the note heads the legend: constrained layout keeps room for both
            fig.legend(
                handles=handles,
                loc="outside lower center",
                ncol=min(len(handles), 4),
                fontsize=8,
                frameon=False,
                title=self.note or None,
                title_fontsize=7,
            )
        elif self.note:
            fig.supxlabel(self.note, fontsize=7)


def _colour_range(p: MapPanel, v: np.ndarray) -> tuple[float, float]:
    """The colour scale of a panel: its ``vmin``/``vmax``, else the finite data's range (never hiding a value below
    the intended floor; never empty)."""
    finite = v[np.isfinite(v)]
    lo = p.vmin if p.vmin is not None else (float(finite.min()) if finite.size else 0.0)
    hi = p.vmax if p.vmax is not None else (float(finite.max()) if finite.size else 1.0)
    if p.vmin is not None and finite.size:
        lo = min(lo, float(finite.min()))  # never hide values below the intended floor (e.g. tiny negatives)
    return lo, max(hi, lo + 1e-9)


def _draw_shade(ax: Artist, s: MapShade) -> None:
    """The cells of ``s`` filled in its style."""
    from matplotlib.collections import PatchCollection  # lazy: matplotlib, start-up
    from matplotlib.patches import Rectangle  # lazy: matplotlib, start-up

    ys, xs = np.nonzero(s.mask)
    if not len(ys):
        return
    rects = [Rectangle((j - 0.5, i - 0.5), 1, 1) for i, j in zip(ys, xs, strict=True)]
    ax.add_collection(
        PatchCollection(rects, facecolor=s.color, hatch=s.hatch, linewidth=0, edgecolor="#707070" if s.hatch else s.color)
    )


def _draw_numbers(ax: Artist, v: np.ndarray, cmap: Artist, im: Artist) -> None:
    """Each finite value written in its cell, in black or white for contrast with the cell's colour."""
    from matplotlib.colors import to_rgba  # lazy: matplotlib, start-up

    for i, j in zip(*np.nonzero(np.isfinite(v)), strict=True):
        r, g, b, _ = to_rgba(cmap(im.norm(v[i, j])))
        ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
        ax.text(j, i, f"{v[i, j]:.2g}", ha="center", va="center", fontsize=7, color=ink)


def _ticks(axis: int, values: np.ndarray, set_ticks: Artist, set_labels: Artist) -> None:
    """At most 16 ticks along an axis of ``axis`` cells, labelled with ``values`` (integers without a fraction)."""
    step = max(1, int(np.ceil(axis / 16)))
    set_ticks(np.arange(0, axis, step))
    set_labels([str(int(t)) if float(t).is_integer() else f"{t:g}" for t in values[::step]], fontsize=7)


def new_figure(size: tuple[float, float], *, layout: Layout = "constrained") -> Figure:
    """A :class:`matplotlib.figure.Figure` of ``size`` inches that pyplot does not manage: no backend is chosen or
    forced (a notebook shows it, :func:`rlverify.files.save_figure` writes it, nothing needs closing)."""
    from matplotlib.figure import Figure as MatplotlibFigure  # lazy: matplotlib, start-up

    return MatplotlibFigure(figsize=size, layout=layout)


def figure_png(fig: Figure, *, dpi: int = 80) -> bytes:
    """``fig`` as PNG bytes (for a notebook's ``_repr_png_`` or an HTML page), every text drawn as written."""
    from matplotlib.text import Text  # lazy: matplotlib, start-up

    for text in fig.findobj(Text):
        text.set_parse_math(False)
    buf = io.BytesIO()
    with plain_figure_text():
        fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _cmap(name: str) -> Artist:
    import matplotlib  # lazy: matplotlib, start-up

    return matplotlib.colormaps[name]


def map_variables(variables: Sequence[str], spec: str | None) -> tuple[tuple[str, str], ...] | None:
    """The variable pairs to draw paths on: ``spec`` ``"X,Y"`` (or ``"X,Y,X2,Y2,..."``: further pairs, e.g. the
    obstacles of a grid world) checked against ``variables``; None: the default, chosen from the paths
    (:func:`path_pairs`), when the model has two variables to draw.

    Raises :class:`OptionError` naming the problem and the close names.
    """
    variables = tuple(variables)
    if spec is None:
        if len(variables) >= 2:
            return None
        raise OptionError(
            "--explain-map: the model has no variables named x and y, nor two variables to draw the paths on "
            f"(variables: {', '.join(variables)})"
        )
    names = [n.strip() for n in spec.split(",")]
    if len(names) < 2 or len(names) % 2 or not all(names):
        raise OptionError(f"--explain-map: expected variable names in pairs X,Y (or X,Y,X2,Y2,...), got '{spec}'")
    _check_variables(names, variables)
    pairs = tuple((names[i], names[i + 1]) for i in range(0, len(names), 2))
    if any(a == b for a, b in pairs):
        raise OptionError(f"--explain-map: a pair needs two different variables, got '{spec}'")
    return pairs


def _check_variables(names: list[str], variables: tuple[str, ...]) -> None:
    """Refuse a name that is not a model variable (naming the close ones and the variables)."""
    for n in names:
        if n not in variables:
            raise OptionError(
                f"--explain-map: '{n}' is not a model variable{did_you_mean(n, variables)} (variables: {', '.join(variables)})"
            )


def _partner(name: str) -> str | None:
    """The y coordinate named like the x coordinate ``name`` (its last ``x`` made ``y``: ``x1`` -> ``y1``,
    ``obstacle1_x`` -> ``obstacle1_y``), None without an ``x``."""
    for i in range(len(name) - 1, -1, -1):
        if name[i] in "xX":
            return name[:i] + ("y" if name[i] == "x" else "Y") + name[i + 1 :]
    return None


def path_pairs(explanation: PathsData) -> tuple[tuple[str, str], ...]:
    """The default pairs to draw the paths on: ``(x, y)`` when the model has them, then every coordinate pair named
    alike (``obstacle1_x``, ``obstacle1_y``) of which a variable changes along a path, then the other variables that
    change, two by two in the model's order. Nothing changes and no ``x, y``: the first two variables.

    Raises:
        OptionError: the model has fewer than two variables.
    """
    variables = tuple(explanation.variables)
    if len(variables) < 2:
        map_variables(variables, None)  # raises, naming the variables
    moving = _moving(explanation)
    pairs = _moving_named_pairs(variables, moving)
    paired = {v for pair in pairs for v in pair}
    rest = [v for v in variables if v in moving and v not in paired]
    pairs += [(rest[i], rest[i + 1]) for i in range(0, len(rest) - 1, 2)]
    return tuple(pairs) or ((variables[0], variables[1]),)


def _moving_named_pairs(variables: tuple[str, ...], moving: set[str]) -> list[tuple[str, str]]:
    """``(x, y)`` when the model has them, then the pairs named alike (:func:`_partner`) of which a variable moves."""
    named = [(v, p) for v in variables if (p := _partner(v)) is not None and p in variables and p != v]
    pairs: list[tuple[str, str]] = []
    if ("x", "y") in named:
        pairs.append(("x", "y"))
    return pairs + [(a, b) for a, b in named if (a, b) not in pairs and (a in moving or b in moving)]


def _moving(explanation: PathsData) -> set[str]:
    """The variables whose value changes along some path."""
    return {v for v in explanation.variables for p in explanation.paths if len({s.state.get(v) for s in p.steps}) > 1}


#: start and end markers of the paths
_START, _END = "o", "X"
#: at most this many paths are drawn, one panel each (the others are listed in the result)
MAX_PATH_PANELS = 9

Pairs: TypeAlias = "tuple[tuple[str, str], ...] | list[tuple[str, str]]"


def paths_figure(explanation: PathsData, pairs: Pairs | None = None, *, title: str | None = None) -> Figure:
    """The paths as a :class:`matplotlib.figure.Figure` (see :func:`new_figure`): one panel per path (the first
    :data:`MAX_PATH_PANELS`), each drawing every variable pair of ``pairs`` (None: :func:`path_pairs`, the pairs that
    move) in its own colour on the grid of the variables' ranges, a circle at the start and a cross at the end (the
    target state), the step number at each turn. A shared legend names the pairs; each panel's title gives the
    path's rank, probability and number of steps. Pairs at the same cell are drawn slightly apart."""
    with plain_figure_text():
        return _paths_figure(explanation, pairs, title=title)


@dataclass(frozen=True)
class _Grid:
    """The cells the paths' pairs range over: ``x0..x1`` by ``y0..y1``."""

    x0: int
    x1: int
    y0: int
    y1: int

    @classmethod
    def of(cls, explanation: PathsData, pairs: tuple[tuple[str, str], ...]) -> _Grid:
        """The union of the ranges of the pairs' x and y variables."""
        ranges = explanation.ranges
        xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
        return cls(
            min(ranges[n][0] for n in xs),
            max(ranges[n][1] for n in xs),
            min(ranges[n][0] for n in ys),
            max(ranges[n][1] for n in ys),
        )

    @property
    def width(self) -> int:
        return self.x1 - self.x0 + 1

    @property
    def height(self) -> int:
        return self.y1 - self.y0 + 1

    def draw(self, ax: Artist) -> None:
        """Limits, ticks and the cell grid of one panel."""
        ax.set_xlim(self.x0 - 0.5, self.x1 + 0.5)
        ax.set_ylim(self.y0 - 0.5, self.y1 + 0.5)
        ax.set_xticks(range(self.x0, self.x1 + 1, max(1, self.width // 10)))
        ax.set_yticks(range(self.y0, self.y1 + 1, max(1, self.height // 10)))
        ax.set_xticks(np.arange(self.x0 - 0.5, self.x1 + 1), minor=True)
        ax.set_yticks(np.arange(self.y0 - 0.5, self.y1 + 1), minor=True)
        ax.grid(which="minor", color="#dddddd", linewidth=0.8)
        ax.tick_params(which="both", length=0, labelsize=7)
        ax.set_aspect("equal")


def _paths_figure(explanation: PathsData, given: Pairs | None, *, title: str | None) -> Figure:
    pairs = path_pairs(explanation) if given is None else tuple((str(a), str(b)) for a, b in given)
    map_variables(explanation.variables, ",".join(n for p in pairs for n in p))  # the same checks as the CLI
    grid = _Grid.of(explanation, pairs)
    shown = explanation.paths[:MAX_PATH_PANELS]
    n = max(len(shown), 1)
    ncols = min(n, 3)
    nrows = -(-n // ncols)
    cell = min(0.5, 4.0 / max(grid.width, grid.height))
    pw, ph = max(2.4, cell * grid.width + 0.8), max(2.2, cell * grid.height + 0.9)
    fig = new_figure((ncols * pw + 0.4, nrows * ph + 1.6))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    colors = _cmap("tab10")
    spread = min(0.3, 0.6 / max(len(pairs), 1))
    for ax in axes.ravel()[len(shown) :]:
        ax.set_axis_off()
    for i, (ax, path) in enumerate(zip(axes.ravel(), shown, strict=False)):
        grid.draw(ax)
        ax.set_title(f"#{i + 1}  p = {path.probability:.3g}  ({path.length} steps)", fontsize=8)
        _draw_path(ax, path, pairs, colors, spread)
    _paths_legend(fig, pairs, colors)
    fig.suptitle(title or _paths_title(explanation, len(shown)), fontsize=9)
    return fig


def _draw_path(ax: Artist, path: PathData, pairs: tuple[tuple[str, str], ...], colors: Artist, spread: float) -> None:
    """Each pair's course along ``path`` in its colour (offset by ``spread`` per pair), marking its start and end."""
    for j, (x, y) in enumerate(pairs):
        off = (j - (len(pairs) - 1) / 2) * spread
        c = colors(j % 10)
        xs = np.array([s.state[x] for s in path.steps], dtype=float) + off
        ys = np.array([s.state[y] for s in path.steps], dtype=float) + off
        ax.plot(xs, ys, "-", color=c, linewidth=1.8, alpha=0.85, marker=".", markersize=5)
        ax.plot(xs[0], ys[0], _START, color=c, markersize=9, markerfacecolor="none", markeredgewidth=2)
        ax.plot(xs[-1], ys[-1], _END, color=c, markersize=10)


def _paths_legend(fig: Figure, pairs: tuple[tuple[str, str], ...], colors: Artist) -> None:
    """The pairs' colours and the start and end markers."""
    from matplotlib.lines import Line2D  # lazy: matplotlib, start-up

    handles = [Line2D([], [], color=colors(j % 10), linewidth=2, label=f"({x}, {y})") for j, (x, y) in enumerate(pairs)]
    handles += [
        Line2D([], [], linestyle="", color="grey", marker=_START, markerfacecolor="none", markeredgewidth=2, label="start"),
        Line2D([], [], linestyle="", color="grey", marker=_END, label="end (target)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), fontsize=8, frameon=False)


def _paths_title(explanation: PathsData, drawn: int) -> str:
    """What was explained, whose paths, how many (drawn), and the share of the value they cover."""
    share = (
        f"{100 * explanation.share:.3g}% of the value {explanation.value:.4g}"
        if explanation.share is not None
        else "the value is 0"
    )
    more = f" (the first {drawn} drawn)" if len(explanation.paths) > drawn else ""
    what = f"{explanation.model}: {explanation.property}" if explanation.model else explanation.property
    whose = f"policy {explanation.policy}: the" if explanation.policy else "The"
    return f"{what}\n{whose} {len(explanation.paths)} most probable paths to the target{more}, {share}"


def plot_paths(
    explanation: PathsData,
    out: str | Path,
    pairs: Pairs | None = None,
    *,
    title: str | None = None,
    force: bool = False,
) -> Path:
    """Write :func:`paths_figure` as a PNG to ``out`` (atomically; an existing file replaced only with ``force``)."""
    return save_figure(paths_figure(explanation, pairs, title=title), out, force=force, what="--out", dpi=120)


__all__ = [
    "MapFigure",
    "MapPanel",
    "MapShade",
    "figure_png",
    "map_variables",
    "new_figure",
    "path_pairs",
    "paths_figure",
    "plot_paths",
]


def feature_effects_figure(effects: EffectsData, *, title: str | None = None) -> Figure:
    """A horizontal bar chart of :class:`~rlverify.results.FeatureEffects` (ranked, the largest effect on top): per
    feature, a bar from the nominal value to the value with the feature fixed (and to the worst over its range, when
    computed), and a line over the ±1 perturbation's [best, worst]; the nominal value as a vertical line. Returns a
    :class:`matplotlib.figure.Figure` that pyplot does not manage."""
    rows = list(effects.effects)
    fig = new_figure((7.0, 1.2 + 0.45 * max(len(rows), 1)))
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(rows))[::-1].astype(float)
    nominal = effects.nominal
    for at, values, color, label in _effect_bars(rows, y):
        finite = np.where(np.isfinite(values), values, np.nan)
        ax.barh(at, finite - nominal, left=nominal, height=0.3, color=color, label=label)
        _mark_infinite(ax, at, values, color, label)
    _perturbation_lines(ax, rows, y)
    ax.axvline(nominal, color="black", linewidth=1, linestyle="--", label=f"nominal {nominal:.4g}")
    ax.set_yticks(y, [e.feature for e in rows])
    ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    ax.set_xlabel("exact value of the property")
    ax.legend(fontsize=7, loc="best")
    ax.set_title(title or f"features by effect on {effects.property}", fontsize=9)
    return fig


def _effect_bars(rows: list[EffectData], y: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, str, str]]:
    """``(y positions, values, colour, label)`` of the bars: the value with the feature fixed, and the worst over its
    range when computed."""
    fixed = np.array([e.fixed for e in rows], dtype=float)
    bars = [(y + 0.15, fixed, "#4c72b0", "feature fixed to its initial value")]
    if any(e.worst_fixed is not None for e in rows):
        worst = np.array([np.nan if e.worst_fixed is None else e.worst_fixed for e in rows], dtype=float)
        bars.append((y - 0.15, worst, "#dd8452", "worst over its range"))
    return bars


def _mark_infinite(ax: Artist, at: np.ndarray, values: np.ndarray, color: str, label: str) -> None:
    """An infinite value (an expected reward): written at the edge, not drawn."""
    for yi, v in zip(at, values, strict=True):
        if np.isinf(v):
            ax.annotate(
                f"{'+' if v > 0 else '-'}infinite ({label})",
                xy=(1.0 if v > 0 else 0.0, yi),
                xycoords=("axes fraction", "data"),
                ha="right" if v > 0 else "left",
                va="center",
                fontsize=7,
                color=color,
            )


def _perturbation_lines(ax: Artist, rows: list[EffectData], y: np.ndarray) -> None:
    """Per feature, a line over the ±1 perturbation's [best, worst] (with its legend entry when any is known)."""
    for yi, e in zip(y, rows, strict=True):
        if e.perturbed_worst is not None and e.perturbed_best is not None:
            lo, hi = sorted((e.perturbed_best, e.perturbed_worst))
            ax.plot([lo, hi], [yi, yi], color="#c44e52", linewidth=2.5, marker="|", markersize=12)
    if any(e.perturbed_worst is not None for e in rows):
        ax.plot([], [], color="#c44e52", linewidth=2.5, marker="|", label="±1 perturbation: best..worst")
