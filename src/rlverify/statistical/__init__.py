"""Statistical engine: deep statistical model checking (simulation with the policy as oracle).

Runs advance in lockstep and the policy is evaluated once per step on all of them; estimates come
with Okamoto / adaptive / Clopper–Pearson / Wilson intervals or Wald's SPRT; rare events by importance
splitting (fixed effort, RESTART); Racetrack heat maps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.statistical.choices import METHODS, RARE_METHODS, SUPPORTED_FORMS
    from rlverify.statistical.engine import RunOutcomes, SimulationOptions, simulate
    from rlverify.statistical.envs import ExplicitEnv, VectorEnv
    from rlverify.statistical.heatmap import heatmap, plot_heatmap
    from rlverify.statistical.properties import PathProperty, parse_path_property
    from rlverify.statistical.results import HeatmapResult, ReturnResult, SplittingResult, StatisticalResult
    from rlverify.statistical.splitting import SplittingOptions, verify_splitting
    from rlverify.statistical.stats import (
        SprtBounds,
        StatisticsError,
        adaptive_runs,
        clopper_pearson,
        clopper_pearson_lower,
        okamoto_runs,
        sprt,
        wilson,
    )
    from rlverify.statistical.verify import StatisticalOptions, verify_statistical

__all__ = [
    "METHODS",
    "RARE_METHODS",
    "SUPPORTED_FORMS",
    "ExplicitEnv",
    "HeatmapResult",
    "PathProperty",
    "ReturnResult",
    "RunOutcomes",
    "SimulationOptions",
    "SplittingOptions",
    "SplittingResult",
    "SprtBounds",
    "StatisticalOptions",
    "StatisticalResult",
    "StatisticsError",
    "VectorEnv",
    "adaptive_runs",
    "clopper_pearson",
    "clopper_pearson_lower",
    "heatmap",
    "okamoto_runs",
    "parse_path_property",
    "plot_heatmap",
    "simulate",
    "sprt",
    "verify_splitting",
    "verify_statistical",
    "wilson",
]

lazy_exports(
    __name__,
    {
        "rlverify.statistical.choices": "METHODS RARE_METHODS SUPPORTED_FORMS",
        "rlverify.statistical.engine": "RunOutcomes SimulationOptions simulate",
        "rlverify.statistical.envs": "ExplicitEnv VectorEnv",
        "rlverify.statistical.heatmap": "heatmap plot_heatmap",
        "rlverify.statistical.properties": "PathProperty parse_path_property",
        "rlverify.statistical.results": "HeatmapResult ReturnResult SplittingResult StatisticalResult",
        "rlverify.statistical.splitting": "SplittingOptions verify_splitting",
        "rlverify.statistical.stats": (
            "SprtBounds StatisticsError adaptive_runs clopper_pearson clopper_pearson_lower okamoto_runs sprt wilson"
        ),
        "rlverify.statistical.verify": "StatisticalOptions verify_statistical",
    },
)
