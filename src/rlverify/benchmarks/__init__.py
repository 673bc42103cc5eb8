"""Named, versioned benchmarks: ``rlverify.benchmarks.make("avoid-v1", xMax=4)``."""

from rlverify.benchmarks.registry import BenchmarkError, BenchmarkSpec, Parameter, all_ids, make, register, spec

__all__ = ["BenchmarkError", "BenchmarkSpec", "Parameter", "all_ids", "make", "register", "spec"]
