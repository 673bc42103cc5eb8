"""Figures: the one drawing of maps in rlverify (:class:`MapFigure`), described as data by the results and drawn
with matplotlib (imported when a figure is drawn, with the Agg backend unless one is chosen)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


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


__all__ = ["MapFigure", "MapPanel", "MapShade"]
