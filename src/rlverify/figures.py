"""Figures: rlverify's drawings — maps (:class:`MapFigure`, described as data by the results: exact risk maps and
Racetrack heat maps) and failure paths (:func:`plot_paths`) — drawn with matplotlib (imported when a figure is drawn,
with the Agg backend unless one is chosen), written atomically, every text as written (:func:`rlverify.files.save_figure`).
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

    def draw(self, out: Any, *, dpi: int = 110, force: bool = False) -> Any:
        """Write the figure as a PNG to ``out`` (:meth:`layout` times ``dpi`` pixels); returns its :class:`~pathlib.Path`.

        Written atomically, an existing file replaced only with ``force``; every text (names, titles) is
        drawn as written, never as TeX math (:func:`rlverify.files.save_figure`).
        """
        from rlverify.files import plain_figure_text

        with plain_figure_text():  # every text is created as plain text (names may contain '$')
            return self._draw(out, dpi=dpi, force=force)

    def _draw(self, out: Any, *, dpi: int, force: bool) -> Any:
        import matplotlib

        from rlverify.files import save_figure

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        from matplotlib.collections import PatchCollection
        from matplotlib.patches import Patch, Rectangle

        H, W = len(self.y_values), len(self.x_values)
        nrows, ncols, size = self.layout()
        fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=False, layout="constrained")
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
            cmap = plt.get_cmap(p.cmap).with_extremes(bad=(0, 0, 0, 0))  # NaN: transparent (a shade explains it)
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
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4), fontsize=8, frameon=False)
        if self.title:
            fig.suptitle(self.title, fontsize=9)
        if self.note:
            fig.text(0.01, 0.005, self.note, fontsize=7, ha="left", va="bottom")
        return save_figure(fig, out, force=force, dpi=dpi)


def map_variables(variables: tuple[str, ...] | list[str], spec: str | None) -> tuple[tuple[str, str], ...]:
    """The variable pairs to draw paths on: ``spec`` ``"X,Y"`` (or ``"X,Y,X2,Y2,..."``: further pairs, e.g. the
    obstacles of a grid world) checked against ``variables``; None: ``(("x", "y"),)`` when both exist.

    Raises :class:`OptionError` naming the problem and the close names.
    """
    variables = tuple(variables)
    if spec is None:
        if "x" in variables and "y" in variables:
            return (("x", "y"),)
        raise OptionError(
            "--explain-map: the model has no variables named x and y; name two integer variables "
            f"to draw the paths on, e.g. --explain-map {','.join(variables[:2]) or 'X,Y'} "
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


#: line style (matplotlib accepts these strings), start and end markers of each variable pair
_STYLES: tuple[tuple[Any, str, str], ...] = (("-", "o", "X"), ("--", "s", "P"), (":", "^", "*"), ("-.", "D", "v"))


def plot_paths(
    explanation: FailurePaths,
    out: str | Path,
    pairs: tuple[tuple[str, str], ...] | list[tuple[str, str]] = (("x", "y"),),
    *,
    title: str | None = None,
    force: bool = False,
) -> Path:
    """Draw the paths projected on variable pairs as a PNG (grid cells, legend, axes).

    ``pairs[0]`` (e.g. the agent's ``("x", "y")``) is drawn as a solid line per path, further pairs
    (e.g. an obstacle's coordinates) dashed/dotted in the same colour. Each path is slightly offset so
    that shared cells stay visible; a circle marks its start and a cross its end (the target state).
    The legend gives each path's rank, probability and number of steps.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    pairs = tuple((str(a), str(b)) for a, b in pairs)
    map_variables(explanation.variables, ",".join(n for p in pairs for n in p))  # the same checks as the CLI
    xs_names, ys_names = [p[0] for p in pairs], [p[1] for p in pairs]
    x0 = min(explanation.ranges[n][0] for n in xs_names)
    x1 = max(explanation.ranges[n][1] for n in xs_names)
    y0 = min(explanation.ranges[n][0] for n in ys_names)
    y1 = max(explanation.ranges[n][1] for n in ys_names)
    width, height = x1 - x0 + 1, y1 - y0 + 1
    fig, ax = plt.subplots(figsize=(min(12.0, 2.0 + 0.6 * width) + 3.0, min(12.0, 2.0 + 0.6 * height)))
    ax.set_xlim(x0 - 0.5, x1 + 0.5)
    ax.set_ylim(y0 - 0.5, y1 + 0.5)
    ax.set_xticks(range(x0, x1 + 1))
    ax.set_yticks(range(y0, y1 + 1))
    ax.set_xticks(np.arange(x0 - 0.5, x1 + 1), minor=True)
    ax.set_yticks(np.arange(y0 - 0.5, y1 + 1), minor=True)
    ax.grid(which="minor", color="#cccccc", linewidth=0.8)
    ax.tick_params(which="minor", length=0)
    ax.set_aspect("equal")
    ax.set_xlabel(" / ".join(dict.fromkeys(xs_names)))
    ax.set_ylabel(" / ".join(dict.fromkeys(ys_names)))
    colors = plt.get_cmap("tab10")
    n = max(len(explanation.paths), 1)
    handles, labels = [], []
    for i, path in enumerate(explanation.paths):
        off = (i - (n - 1) / 2) * min(0.3 / n, 0.08)
        c = colors(i % 10)
        for j, (x, y) in enumerate(pairs):
            line, start, end = _STYLES[j % len(_STYLES)]
            xs = np.array([s.state[x] for s in path.steps], dtype=float) + off
            ys = np.array([s.state[y] for s in path.steps], dtype=float) + off
            h = ax.plot(xs, ys, line, color=c, linewidth=2 if j == 0 else 1.3, alpha=0.8, marker=".", markersize=5)[0]
            ax.plot(xs[0], ys[0], start, color=c, markersize=10 if j == 0 else 7, markerfacecolor="none", markeredgewidth=2)
            ax.plot(xs[-1], ys[-1], end, color=c, markersize=11 if j == 0 else 8)
            if j == 0:
                handles.append(h)
                labels.append(f"#{i + 1}  p = {path.probability:.3g}  ({path.length} steps)")
    for j, (x, y) in enumerate(pairs):
        line, start, end = _STYLES[j % len(_STYLES)]
        handles += [
            Line2D([], [], linestyle=line, color="grey"),
            Line2D([], [], linestyle="", color="grey", marker=start, markerfacecolor="none", markeredgewidth=2),
            Line2D([], [], linestyle="", color="grey", marker=end),
        ]
        labels += [f"({x}, {y})", "  start", "  end (target)"]
    share = (
        f"{100 * explanation.share:.3g}% of the value {explanation.value:.4g}"
        if explanation.share is not None
        else "the value is 0"
    )
    ax.set_title(title or f"{explanation.property}\n{len(explanation.paths)} most probable paths: {share}", fontsize=9)
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    from rlverify.files import save_figure

    return save_figure(fig, out, force=force, what="--out", dpi=120, bbox_inches="tight")


__all__ = ["MapFigure", "MapPanel", "MapShade", "map_variables", "plot_paths"]
