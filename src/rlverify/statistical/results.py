"""Results of the statistical engine (defined in :mod:`rlverify.results`)."""

from rlverify.results import HeatmapResult, StatisticalResult

__all__ = ["HeatmapResult", "StatisticalResult"]
