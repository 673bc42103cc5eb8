"""Figures: rlverify's drawings — maps (:class:`MapFigure`, described as data by the results: exact risk maps and
Racetrack heat maps) and failure paths (:func:`paths_figure`) — as :class:`matplotlib.figure.Figure` objects that
pyplot does not manage (matplotlib is imported when a figure is made; no backend is chosen or forced, so a notebook
displays them), written atomically by the CLI, every text as written (:func:`rlverify.files.save_figure`).
The abstraction's part plots stay with its polytope geometry (:mod:`rlverify.abstraction.plots`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlverify.errors import OptionError, did_you_mean

if TYPE_CHECKING:
    from rlverify.results import FailurePaths


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

    def draw(self, out: Any, *, dpi: int = 110, force: bool = False, what: str = "") -> Any:
        """Write the figure (:meth:`render`) as a PNG to ``out`` (:meth:`layout` times ``dpi`` pixels); returns its
        :class:`~pathlib.Path`. Written atomically, an existing file replaced only with ``force``
        (:func:`rlverify.files.save_figure`; ``what``: the option naming the file in its errors)."""
        from rlverify.files import save_figure

        return save_figure(self.render(), out, force=force, dpi=dpi, what=what)

    def _repr_png_(self) -> bytes:
        """The PNG a notebook shows for a map (:meth:`render` at 80 dpi)."""
        return figure_png(self.render(), dpi=80)

    def render(self) -> Any:
        """The drawing as a :class:`matplotlib.figure.Figure` (not registered with pyplot, no backend chosen: a
        notebook displays it, :func:`rlverify.files.save_figure` writes it); every text (names, titles) is drawn as
        written, never as TeX math. Cells of small maps (at most 64) show their values as numbers."""
        from rlverify.files import plain_figure_text

        with plain_figure_text():  # every text is created as plain text (names may contain '$')
            return self._render()

    def _render(self) -> Any:
        from matplotlib.collections import PatchCollection
        from matplotlib.colors import to_rgba
        from matplotlib.patches import Patch, Rectangle

        H, W = len(self.y_values), len(self.x_values)
        nrows, ncols, size = self.layout()
        fig = new_figure(size)
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for ax in axes.ravel()[len(self.panels) :]:
            ax.set_axis_off()
        for ax, p in zip(axes.ravel()[: len(self.panels)], self.panels, strict=True):
            v = np.asarray(p.values, dtype=np.float64)
            finite = v[np.isfinite(v)]
            lo = p.vmin if p.vmin is not None else (float(finite.min()) if finite.size else 0.0)
            hi = p.vmax if p.vmax is not None else (float(finite.max()) if finite.size else 1.0)
            if p.vmin is not None and finite.size:
                lo = min(lo, float(finite.min()))  # never hide values below the intended floor (e.g. tiny negatives)
            hi = max(hi, lo + 1e-9)
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
            for s in self.shades:
                ys, xs = np.nonzero(s.mask)
                if len(ys):
                    rects = [Rectangle((j - 0.5, i - 0.5), 1, 1) for i, j in zip(ys, xs, strict=True)]
                    ax.add_collection(
                        PatchCollection(
                            rects, facecolor=s.color, hatch=s.hatch, linewidth=0, edgecolor="#707070" if s.hatch else s.color
                        )
                    )
            if H * W <= 64:  # small maps: the numbers themselves, readable on any colour
                for i, j in zip(*np.nonzero(np.isfinite(v)), strict=True):
                    r, g, b, _ = to_rgba(cmap(im.norm(v[i, j])))
                    ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                    ax.text(j, i, f"{v[i, j]:.2g}", ha="center", va="center", fontsize=7, color=ink)
            ax.set_xlim(-0.5, W - 0.5)
            ax.set_ylim(*((-0.5, H - 0.5) if self.origin == "lower" else (H - 0.5, -0.5)))
            for axis, values, set_ticks, set_labels in (
                (W, self.x_values, ax.set_xticks, ax.set_xticklabels),
                (H, self.y_values, ax.set_yticks, ax.set_yticklabels),
            ):
                step = max(1, int(np.ceil(axis / 16)))
                set_ticks(np.arange(0, axis, step))
                set_labels([str(int(t)) if float(t).is_integer() else f"{t:g}" for t in values[::step]], fontsize=7)
            ax.set_xlabel(self.x_label)
            ax.set_ylabel(self.y_label)
            ax.set_title(p.title, fontsize=9)
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04).set_label(p.label, fontsize=8)
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
        if self.title:
            fig.suptitle(self.title, fontsize=9)
        return fig


def new_figure(size: tuple[float, float], *, layout: Any = "constrained") -> Any:
    """A :class:`matplotlib.figure.Figure` of ``size`` inches that pyplot does not manage: no backend is chosen or
    forced (a notebook shows it, :func:`rlverify.files.save_figure` writes it, nothing needs closing)."""
    from matplotlib.figure import Figure

    return Figure(figsize=size, layout=layout)


def figure_png(fig: Any, *, dpi: int = 80) -> bytes:
    """``fig`` as PNG bytes (for a notebook's ``_repr_png_`` or an HTML page), every text drawn as written."""
    import io

    from matplotlib.text import Text

    from rlverify.files import plain_figure_text

    for text in fig.findobj(Text):
        text.set_parse_math(False)
    buf = io.BytesIO()
    with plain_figure_text():
        fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _cmap(name: str) -> Any:
    import matplotlib

    return matplotlib.colormaps[name]


def map_variables(variables: tuple[str, ...] | list[str], spec: str | None) -> tuple[tuple[str, str], ...] | None:
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
    for n in names:
        if n not in variables:
            raise OptionError(
                f"--explain-map: '{n}' is not a model variable{did_you_mean(n, variables)} (variables: {', '.join(variables)})"
            )
    pairs = tuple((names[i], names[i + 1]) for i in range(0, len(names), 2))
    if any(a == b for a, b in pairs):
        raise OptionError(f"--explain-map: a pair needs two different variables, got '{spec}'")
    return pairs


def _partner(name: str) -> str | None:
    """The y coordinate named like the x coordinate ``name`` (its last ``x`` made ``y``: ``x1`` -> ``y1``,
    ``obstacle1_x`` -> ``obstacle1_y``), None without an ``x``."""
    for i in range(len(name) - 1, -1, -1):
        if name[i] in "xX":
            return name[:i] + ("y" if name[i] == "x" else "Y") + name[i + 1 :]
    return None


def path_pairs(explanation: FailurePaths) -> tuple[tuple[str, str], ...]:
    """The default pairs to draw the paths on: ``(x, y)`` when the model has them, then every coordinate pair named
    alike (``obstacle1_x``, ``obstacle1_y``) of which a variable changes along a path, then the other variables that
    change, two by two in the model's order. Nothing changes and no ``x, y``: the first two variables.

    Raises:
        OptionError: the model has fewer than two variables.
    """
    variables = tuple(explanation.variables)
    if len(variables) < 2:
        map_variables(variables, None)  # raises, naming the variables
    moving = {v for v in variables for p in explanation.paths if len({s.state.get(v) for s in p.steps}) > 1}
    named = [(v, p) for v in variables if (p := _partner(v)) is not None and p in variables and p != v]
    pairs: list[tuple[str, str]] = []
    if ("x", "y") in named:
        pairs.append(("x", "y"))
    pairs += [(a, b) for a, b in named if (a, b) not in pairs and (a in moving or b in moving)]
    paired = {v for pair in pairs for v in pair}
    rest = [v for v in variables if v in moving and v not in paired]
    pairs += [(rest[i], rest[i + 1]) for i in range(0, len(rest) - 1, 2)]
    return tuple(pairs) or ((variables[0], variables[1]),)


#: start and end markers of the paths
_START, _END = "o", "X"
#: at most this many paths are drawn, one panel each (the others are listed in the result)
MAX_PATH_PANELS = 9


def paths_figure(
    explanation: FailurePaths,
    pairs: tuple[tuple[str, str], ...] | list[tuple[str, str]] | None = None,
    *,
    title: str | None = None,
) -> Any:
    """The paths as a :class:`matplotlib.figure.Figure` (see :func:`new_figure`): one panel per path (the first
    :data:`MAX_PATH_PANELS`), each drawing every variable pair of ``pairs`` (None: :func:`path_pairs`, the pairs that
    move) in its own colour on the grid of the variables' ranges, a circle at the start and a cross at the end (the
    target state), the step number at each turn. A shared legend names the pairs; each panel's title gives the
    path's rank, probability and number of steps. Pairs at the same cell are drawn slightly apart."""
    from rlverify.files import plain_figure_text

    with plain_figure_text():
        return _paths_figure(explanation, pairs, title=title)


def _paths_figure(explanation: FailurePaths, pairs: Any, *, title: str | None) -> Any:
    from matplotlib.lines import Line2D

    pairs = path_pairs(explanation) if pairs is None else tuple((str(a), str(b)) for a, b in pairs)
    map_variables(explanation.variables, ",".join(n for p in pairs for n in p))  # the same checks as the CLI
    xs_names, ys_names = [p[0] for p in pairs], [p[1] for p in pairs]
    x0 = min(explanation.ranges[n][0] for n in xs_names)
    x1 = max(explanation.ranges[n][1] for n in xs_names)
    y0 = min(explanation.ranges[n][0] for n in ys_names)
    y1 = max(explanation.ranges[n][1] for n in ys_names)
    width, height = x1 - x0 + 1, y1 - y0 + 1
    shown = explanation.paths[:MAX_PATH_PANELS]
    n = max(len(shown), 1)
    ncols = min(n, 3)
    nrows = -(-n // ncols)
    cell = min(0.5, 4.0 / max(width, height))
    pw, ph = max(2.4, cell * width + 0.8), max(2.2, cell * height + 0.9)
    fig = new_figure((ncols * pw + 0.4, nrows * ph + 1.6))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    colors = _cmap("tab10")
    spread = min(0.3, 0.6 / max(len(pairs), 1))
    for ax in axes.ravel()[len(shown) :]:
        ax.set_axis_off()
    for i, (ax, path) in enumerate(zip(axes.ravel(), shown, strict=False)):
        ax.set_xlim(x0 - 0.5, x1 + 0.5)
        ax.set_ylim(y0 - 0.5, y1 + 0.5)
        ax.set_xticks(range(x0, x1 + 1, max(1, width // 10)))
        ax.set_yticks(range(y0, y1 + 1, max(1, height // 10)))
        ax.set_xticks(np.arange(x0 - 0.5, x1 + 1), minor=True)
        ax.set_yticks(np.arange(y0 - 0.5, y1 + 1), minor=True)
        ax.grid(which="minor", color="#dddddd", linewidth=0.8)
        ax.tick_params(which="both", length=0, labelsize=7)
        ax.set_aspect("equal")
        ax.set_title(f"#{i + 1}  p = {path.probability:.3g}  ({path.length} steps)", fontsize=8)
        for j, (x, y) in enumerate(pairs):
            off = (j - (len(pairs) - 1) / 2) * spread
            c = colors(j % 10)
            xs = np.array([s.state[x] for s in path.steps], dtype=float) + off
            ys = np.array([s.state[y] for s in path.steps], dtype=float) + off
            ax.plot(xs, ys, "-", color=c, linewidth=1.8, alpha=0.85, marker=".", markersize=5)
            ax.plot(xs[0], ys[0], _START, color=c, markersize=9, markerfacecolor="none", markeredgewidth=2)
            ax.plot(xs[-1], ys[-1], _END, color=c, markersize=10)
    handles = [Line2D([], [], color=colors(j % 10), linewidth=2, label=f"({x}, {y})") for j, (x, y) in enumerate(pairs)]
    handles += [
        Line2D([], [], linestyle="", color="grey", marker=_START, markerfacecolor="none", markeredgewidth=2, label="start"),
        Line2D([], [], linestyle="", color="grey", marker=_END, label="end (target)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), fontsize=8, frameon=False)
    share = (
        f"{100 * explanation.share:.3g}% of the value {explanation.value:.4g}"
        if explanation.share is not None
        else "the value is 0"
    )
    more = f" (the first {len(shown)} drawn)" if len(explanation.paths) > len(shown) else ""
    what = f"{explanation.model}: {explanation.property}" if explanation.model else explanation.property
    whose = f"policy {explanation.policy}: the" if explanation.policy else "The"
    fig.suptitle(
        title or f"{what}\n{whose} {len(explanation.paths)} most probable paths to the target{more}, {share}",
        fontsize=9,
    )
    return fig


def plot_paths(
    explanation: FailurePaths,
    out: str | Path,
    pairs: tuple[tuple[str, str], ...] | list[tuple[str, str]] | None = None,
    *,
    title: str | None = None,
    force: bool = False,
) -> Path:
    """Write :func:`paths_figure` as a PNG to ``out`` (atomically; an existing file replaced only with ``force``)."""
    from rlverify.files import save_figure

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


def feature_effects_figure(effects: Any, *, title: str | None = None) -> Any:
    """A horizontal bar chart of :class:`~rlverify.results.FeatureEffects` (ranked, the largest effect on top): per
    feature, a bar from the nominal value to the value with the feature fixed (and to the worst over its range, when
    computed), and a line over the ±1 perturbation's [best, worst]; the nominal value as a vertical line. Returns a
    :class:`matplotlib.figure.Figure` that pyplot does not manage."""
    rows = list(effects.effects)
    fig = new_figure((7.0, 1.2 + 0.45 * max(len(rows), 1)))
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(rows))[::-1].astype(float)
    nominal = effects.nominal
    fixed = np.array([e.fixed for e in rows], dtype=float)
    bars = [(y + 0.15, fixed, "#4c72b0", "feature fixed to its initial value")]
    if any(e.worst_fixed is not None for e in rows):
        worst = np.array([np.nan if e.worst_fixed is None else e.worst_fixed for e in rows], dtype=float)
        bars.append((y - 0.15, worst, "#dd8452", "worst over its range"))
    for at, values, color, label in bars:
        finite = np.where(np.isfinite(values), values, np.nan)
        ax.barh(at, finite - nominal, left=nominal, height=0.3, color=color, label=label)
        for yi, v in zip(at, values, strict=True):  # an infinite value (an expected reward): written, not drawn
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
    for yi, e in zip(y, rows, strict=True):
        if e.perturbed_worst is not None and e.perturbed_best is not None:
            lo, hi = sorted((e.perturbed_best, e.perturbed_worst))
            ax.plot([lo, hi], [yi, yi], color="#c44e52", linewidth=2.5, marker="|", markersize=12)
    if any(e.perturbed_worst is not None for e in rows):
        ax.plot([], [], color="#c44e52", linewidth=2.5, marker="|", label="±1 perturbation: best..worst")
    ax.axvline(nominal, color="black", linewidth=1, linestyle="--", label=f"nominal {nominal:.4g}")
    ax.set_yticks(y, [e.feature for e in rows])
    ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    ax.set_xlabel("exact value of the property")
    ax.legend(fontsize=7, loc="best")
    ax.set_title(title or f"features by effect on {effects.property}", fontsize=9)
    return fig
