"""Figures of an abstraction result (two-dimensional systems): initial parts coloured by their
upper bound, and by action probability (as in Figs. 1-3 of Bacci & Parker 2022)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlverify.abstraction.domains import DomainError
from rlverify.abstraction.gap import part_polytopes
from rlverify.figures import new_figure
from rlverify.files import plain_figure_text, save_figure
from rlverify.results import AbstractionResult

#: a matplotlib Figure (matplotlib is imported lazily)
Figure = Any


def plot_result(result: AbstractionResult, path: str | Path, *, force: bool = False) -> Path:
    """Write :func:`result_figure` as a PNG (atomically; an existing file is replaced only with ``force``; names are
    drawn as written, see :func:`rlverify.files.save_figure`)."""
    return save_figure(result_figure(result), path, force=force, what="--out", dpi=120)


@plain_figure_text()  # the texts are created (and laid out) as plain text
def result_figure(result: AbstractionResult) -> Figure:
    """Two panels as a :class:`matplotlib.figure.Figure` (:func:`rlverify.figures.new_figure`: no backend forced):
    parts coloured by their upper bound, and by the action the policy most likely takes there.

    The action panel is categorical: each part has its most likely action's colour (midpoint of its
    probability interval), named in a legend, the paler the less sure the policy is (opacity = that
    action's probability); with two actions as well as with more.
    """
    from matplotlib.collections import PolyCollection  # lazy: matplotlib, start-up
    from matplotlib.patches import Patch  # lazy: matplotlib, start-up

    if len(result.variables) != 2:
        raise DomainError("plots are drawn for two-dimensional systems only")
    polys = part_polytopes(result)
    verts = [p.vertices() for p in polys]
    bounds = np.array([p.bound for p in result.parts])
    mid = np.array([(np.array(p.probability_lower) + np.array(p.probability_upper)) / 2 for p in result.parts])
    fig = new_figure((12.5, 5), layout="tight")
    axes = fig.subplots(1, 2)
    ax = axes[0]
    coll = PolyCollection(verts, array=bounds, cmap="Reds", edgecolors="k", linewidths=0.2)
    top = float(bounds.max(initial=0.0))
    coll.set_clim(0.0, top if top > 0 else 1.0)  # scaled to the largest bound; 0..1 when all are 0
    ax.add_collection(coll)
    fig.colorbar(coll, ax=ax, label="upper bound on P(fail within k)")
    ax.set_title(f"{result.model}: bound per initial part (overall {result.upper_bound:.4g})", fontsize=10)
    ax = axes[1]
    palette = _action_colours(len(result.actions))
    best = mid.argmax(axis=1)
    colours = palette[best].copy()
    colours[:, 3] = np.clip(mid[np.arange(len(mid)), best], 0.15, 1.0)
    ax.add_collection(PolyCollection(verts, facecolors=colours, edgecolors="k", linewidths=0.2))
    ax.set_title("most likely action per part (paler: less sure)", fontsize=10)
    shown = sorted(set(best.tolist()))
    ax.legend(
        handles=[Patch(facecolor=palette[a], edgecolor="k", label=str(result.actions[a])) for a in shown],
        title="action",
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=8,
        frameon=False,
    )
    for a in axes:
        a.set_xlim(result.initial_lo[0], result.initial_hi[0])
        a.set_ylim(result.initial_lo[1], result.initial_hi[1])
        a.set_xlabel(result.variables[0])
        a.set_ylabel(result.variables[1])
    return fig


def _action_colours(n: int) -> np.ndarray:
    """``(n, 4)`` RGBA: distinct colours for ``n`` actions (tab10, tab20 beyond ten)."""
    import matplotlib  # lazy: matplotlib, start-up

    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return np.array([cmap(i % cmap.N) for i in range(n)])


__all__ = ["plot_result", "result_figure"]
