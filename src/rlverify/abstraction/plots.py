"""Figures of an abstraction result (two-dimensional systems): initial parts coloured by their
upper bound, and by action probability (as in Figs. 1-3 of Bacci & Parker 2022)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlverify.abstraction.domains import DomainError
from rlverify.abstraction.verify import AbstractionResult, part_polytopes
from rlverify.files import plain_figure_text, save_figure


@plain_figure_text()  # the texts are created (and laid out) as plain text
def plot_result(result: AbstractionResult, path: str | Path, *, force: bool = False) -> Path:
    """Write a PNG with two panels: parts coloured by bound, and by action probability (atomically; an
    existing file is replaced only with ``force``; names are drawn as written, see :func:`rlverify.files.save_figure`).

    The probability panel shows the midpoint of each part's interval; with three actions the
    colour is RGB (action 0 red, 1 blue, 2 green), with two actions a colour map of action 1.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    if len(result.variables) != 2:
        raise DomainError("plots are drawn for two-dimensional systems only")
    polys = part_polytopes(result)
    verts = [p.vertices() for p in polys]
    bounds = np.array([p.bound for p in result.parts])
    mid = np.array([(np.array(p.probability_lower) + np.array(p.probability_upper)) / 2 for p in result.parts])
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    ax = axes[0]
    coll = PolyCollection(verts, array=bounds, cmap="Reds", edgecolors="k", linewidths=0.2)
    top = float(bounds.max(initial=0.0))
    coll.set_clim(0.0, top if top > 0 else 1.0)  # scaled to the largest bound; 0..1 when all are 0
    ax.add_collection(coll)
    fig.colorbar(coll, ax=ax, label="upper bound on P(fail within k)")
    ax.set_title(f"{result.model}: bound per initial part (overall {result.upper_bound:.4g})")
    ax = axes[1]
    if mid.shape[1] == 3:
        colours = np.clip(mid[:, [0, 2, 1]], 0, 1)
        coll2 = PolyCollection(verts, facecolors=colours, edgecolors="k", linewidths=0.2)
        ax.set_title(f"action probability (R={result.actions[0]}, G={result.actions[2]}, B={result.actions[1]})")
    else:
        coll2 = PolyCollection(verts, array=mid[:, -1], cmap="coolwarm", edgecolors="k", linewidths=0.2)
        coll2.set_clim(0.0, 1.0)
        fig.colorbar(coll2, ax=ax, label=f"P({result.actions[-1]}) (interval midpoint)")
        ax.set_title("refined partition by action probability")
    ax.add_collection(coll2)
    for a in axes:
        a.set_xlim(result.initial_lo[0], result.initial_hi[0])
        a.set_ylim(result.initial_lo[1], result.initial_hi[1])
        a.set_xlabel(result.variables[0])
        a.set_ylabel(result.variables[1])
    fig.tight_layout()
    return save_figure(fig, path, force=force, what="--out", dpi=120)
