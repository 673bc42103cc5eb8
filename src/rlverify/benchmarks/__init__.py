"""Named, versioned benchmarks: ``rlverify.benchmarks.make("avoid-v1", xMax=4)`` returns a :class:`Benchmark`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.benchmarks.registry import (
        Benchmark,
        BenchmarkError,
        BenchmarkKind,
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
    "BenchmarkKind",
    "BenchmarkSpec",
    "Built",
    "EnvDefaults",
    "Parameter",
    "all_ids",
    "make",
    "register",
    "spec",
]

lazy_exports(
    __name__,
    {
        "rlverify.benchmarks.registry": (
            "Benchmark BenchmarkError BenchmarkKind BenchmarkSpec Built EnvDefaults Parameter all_ids make register spec"
        ),
    },
)
