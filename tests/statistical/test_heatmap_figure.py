"""Racetrack heat maps drawn as a MapFigure: the never-decided share against the result's counts,
axes, colour bars and legend shades (walls, goal cells, cells not simulated)."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.errors import PropertyError
from rlverify.policies import CallablePolicy


@pytest.fixture(scope="module")
def short_runs():
    """A uniform policy on barto-small from 40 start cells, runs cut at 6 steps: many stay undecided."""
    from rlverify.models.racetrack import ACTIONS, FEATURES
    from rlverify.resolve import EnvironmentTarget, resolve
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.heatmap import heatmap
    from rlverify.statistical.verify import StatisticalOptions

    env = resolve("racetrack-barto-small-v1", kinds=(EnvironmentTarget,), needs_policy=False).model
    uniform = CallablePolicy(lambda x: np.full((len(x), 9), 1 / 9), FEATURES, ACTIONS, name="uniform")
    cells = env.track.free_cells()[::6][:40]
    return heatmap(
        env,
        uniform,
        StatisticalOptions(method="clopper-pearson", runs=30, simulation=SimulationOptions(max_steps=6, seed=3)),
        cells=cells,
        benchmark="racetrack-barto-small-v1",
    )


def test_never_decided_share_is_the_undecided_and_stuck_counts(short_runs):
    from rlverify.statistical.heatmap import heatmap_figure, never_decided_share

    r = short_runs
    share = never_decided_share(r)
    assert share.shape == (len(r.cells),)
    np.testing.assert_array_equal(share, (r.undecided + r.stuck) / r.runs)
    assert r.undecided.sum() > 0 and share.max() <= 1.0  # the 6-step cut leaves runs open
    # every run is counted once: goal + crash + never decided + stalled are all the runs
    np.testing.assert_array_equal(
        (r.goal * r.runs).round() + (r.crash * r.runs).round() + r.undecided + r.stuck + r.stalled, r.runs
    )
    fig = heatmap_figure(r)
    titles = [p.title for p in fig.panels]
    assert len(fig.panels) == 3 and "never decided" in titles[2]
    never = fig.panels[2].values
    np.testing.assert_array_equal(never[r.cells[:, 1], r.cells[:, 0]], share)
    assert np.isnan(never).sum() == never.size - len(r.cells)  # nothing else is drawn as a value


def test_figure_axes_shades_and_png(short_runs, tmp_path):
    from PIL import Image

    from rlverify.models.racetrack.track import GOAL, WALL
    from rlverify.statistical.heatmap import heatmap_figure, plot_heatmap

    r = short_runs
    fig = heatmap_figure(r)
    H, W = r.grid.shape
    assert (fig.x_label, fig.y_label, fig.origin) == ("x", "y", "upper")
    assert list(fig.x_values) == list(range(W)) and list(fig.y_values) == list(range(H))
    shades = {s.label: s.mask for s in fig.shades}
    np.testing.assert_array_equal(shades["wall"], r.grid == WALL)
    np.testing.assert_array_equal(shades["goal cell (not a start)"], r.grid == GOAL)
    free = (r.grid != WALL) & (r.grid != GOAL)
    assert shades["not simulated"].sum() == free.sum() - len(r.cells)  # 40 cells were simulated
    assert all(p.label for p in fig.panels)  # every colour bar is labelled
    out = plot_heatmap(r, tmp_path / "map.png")
    image = np.asarray(Image.open(out).convert("RGB"), dtype=np.float64)
    _, _, (w, h) = fig.layout()
    assert image.shape[:2] == (round(h * 110), round(w * 110))
    assert image.std() > 20 and len(np.unique(image.reshape(-1, 3), axis=0)) > 200  # colour-bar gradients
    with pytest.raises(PropertyError, match="--optimal"):
        heatmap_figure(r, panels=("gap",))
    with pytest.raises(PropertyError, match="never"):
        heatmap_figure(r, panels=("nope",))


def test_the_heat_map_records_its_provenance(short_runs):
    r = short_runs
    assert r.model == "racetrack-barto-small-v1" and r.versions["stormpy"] and r.timings
    out = r.to_json()
    assert {"model", "property", "policy", "settings", "timings", "versions", "warnings"} <= set(out)
    assert out["versions"] == r.versions and len(out["cells"]) == len(r.cells)
