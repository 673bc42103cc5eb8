"""Named, versioned benchmarks: ``rlverify.benchmarks.make("avoid-v1", xMax=4)`` returns a :class:`Benchmark`."""

from rlverify.benchmarks.registry import (
    Benchmark,
    BenchmarkError,
    BenchmarkSpec,
    Built,
    EnvDefaults,
    Parameter,
    all_ids,
    make,
    register,
    spec,
)

__all__ = [
    "Benchmark",
    "BenchmarkError",
    "BenchmarkSpec",
    "Built",
    "EnvDefaults",
    "Parameter",
    "all_ids",
    "make",
    "register",
    "spec",
]
