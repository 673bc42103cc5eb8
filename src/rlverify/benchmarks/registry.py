"""Registry of named, versioned benchmarks (``"avoid-v1"``) with lazy entry points.

An entry says what a benchmark is (kind, parameters with defaults and ranges, properties by name,
reference policies) without building anything; :func:`make` builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlverify.errors import RlverifyError, did_you_mean


class BenchmarkError(RlverifyError):
    """Unknown benchmark id or parameter out of range."""


@dataclass(frozen=True)
class Parameter:
    """A benchmark parameter: default and inclusive range (``None`` = unbounded)."""

    default: Any
    low: float | None = None
    high: float | None = None
    doc: str = ""


@dataclass(frozen=True)
class BenchmarkSpec:
    """What the registry knows about a benchmark before it is built.

    Attributes:
        id: versioned id, e.g. ``"avoid-v1"``.
        kind: ``"prism"`` (discrete MDP), ``"continuous"`` or ``"native"`` (vectorised numpy env).
        entry_point: ``callable(**params) -> benchmark object``, imported lazily by :func:`make`.
        parameters: name -> :class:`Parameter`.
        properties: property name -> property text (PCTL for PRISM models).
        policies: reference policy name -> package-relative file path.
        doc: docstring with the sections description, state, actions, labels, initial states,
            reference results.
    """

    id: str
    kind: str
    entry_point: Callable[..., Any]
    parameters: Mapping[str, Parameter] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    policies: Mapping[str, str] = field(default_factory=dict)
    doc: str = ""

    def resolve(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults filled in, unknown names and out-of-range values rejected."""
        unknown = [k for k in params if k not in self.parameters]
        if unknown:
            k = unknown[0]
            raise BenchmarkError(f"{self.id}: unknown parameter '{k}'{did_you_mean(k, self.parameters)}; "
                                 f"parameters: {', '.join(self.parameters) or 'none'}")
        out = {k: p.default for k, p in self.parameters.items()}
        for k, v in params.items():
            p = self.parameters[k]
            kind = type(p.default)
            if kind in (int, float):
                whole = isinstance(v, int) or (isinstance(v, float) and v.is_integer())
                if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not whole):
                    raise BenchmarkError(f"{self.id}: parameter {k}={v!r} must be {'a whole number' if kind is int else 'a number'}")
            if (p.low is not None and v < p.low) or (p.high is not None and v > p.high):
                raise BenchmarkError(f"{self.id}: parameter {k}={v} out of range [{p.low}, {p.high}]")
            out[k] = kind(v) if p.default is not None else v
        return out


def parse_parameters(text: str | None) -> dict[str, Any]:
    """``"xMax=4,slickness=0.1"`` (the CLI's ``--constants``) as benchmark parameters: numbers where
    the value reads as one, else the text (which :meth:`BenchmarkSpec.resolve` then refuses by name)."""
    from rlverify.models.symbolic import parse_constants

    def number(text: str) -> Any:
        for cast in (int, float):
            try:
                return cast(text)
            except ValueError:
                pass
        return text

    return {k: number(v) for k, v in parse_constants(text).items()}


_REGISTRY: dict[str, BenchmarkSpec] = {}


def register(spec: BenchmarkSpec) -> BenchmarkSpec:
    """Add ``spec`` to the registry (ids are unique)."""
    if spec.id in _REGISTRY:
        raise ValueError(f"benchmark {spec.id} registered twice")
    _REGISTRY[spec.id] = spec
    return spec


def spec(benchmark_id: str) -> BenchmarkSpec:
    """The registered spec for ``benchmark_id``, or a :class:`BenchmarkError` suggesting near names."""
    _load_all()
    try:
        return _REGISTRY[benchmark_id]
    except KeyError:
        raise BenchmarkError(f"unknown benchmark '{benchmark_id}'{did_you_mean(benchmark_id, _REGISTRY)}; "
                             f"known: {', '.join(sorted(_REGISTRY))}") from None


def make(benchmark_id: str, **params: Any) -> Any:
    """Build benchmark ``benchmark_id`` with ``params`` (defaults for the rest)."""
    s = spec(benchmark_id)
    return s.entry_point(**s.resolve(params))


def all_ids() -> list[str]:
    """Every registered id, sorted."""
    _load_all()
    return sorted(_REGISTRY)


def _load_all() -> None:
    # Each module registers its benchmarks on import; new benchmark modules are added here.
    import importlib

    for module in _BENCHMARK_MODULES:
        importlib.import_module(module)


_BENCHMARK_MODULES: list[str] = [
    "rlverify.benchmarks.running_example",
    "rlverify.benchmarks.freeway",
    "rlverify.benchmarks.crazy_climber",
    "rlverify.benchmarks.avoid",
    "rlverify.benchmarks.racetrack",
    "rlverify.benchmarks.continuous",
]
