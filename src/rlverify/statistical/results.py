"""Results of the statistical engine (defined in :mod:`rlverify.results`)."""

from rlverify.results import HeatmapResult, ReturnResult, SplittingResult, StatisticalResult

__all__ = ["HeatmapResult", "ReturnResult", "SplittingResult", "StatisticalResult"]
