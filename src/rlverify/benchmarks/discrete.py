"""Discrete (PRISM) benchmarks: the PRISM text, built into a :class:`~rlverify.benchmarks.registry.Built`."""

from __future__ import annotations

from collections.abc import Mapping

from rlverify.benchmarks.registry import Built, data_path, prism_file

__all__ = ["data_path", "prism_built"]


def prism_built(benchmark_id: str, source: str, policies: Mapping[str, str]) -> Built:
    """A PRISM benchmark from its text (constants defined in it) and its reference policies
    (package-relative paths under ``benchmarks/data``)."""

    def model():
        from rlverify.models.symbolic import load_model

        return load_model(prism_file(benchmark_id, source))

    return Built(model=model, policies=dict(policies), source=source)
