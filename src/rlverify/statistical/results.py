"""Results of the statistical engine (defined in :mod:`rlverify.results`)."""

from rlverify.results import HeatmapResult, SplittingResult, StatisticalResult

__all__ = ["HeatmapResult", "SplittingResult", "StatisticalResult"]
