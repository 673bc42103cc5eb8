"""Registry of named, versioned benchmarks (``"avoid-v1"``) with lazy entry points.

An entry (:class:`BenchmarkSpec`) says what a benchmark is (kind, parameters with defaults and
ranges, properties by name, reference policies) without building anything; :func:`make` builds
it and always returns a :class:`Benchmark`, whatever its kind.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from rlverify.errors import BenchmarkError, BenchmarkPolicyError, did_you_mean
from rlverify.files import FileWriteError, private_temp_dir, write_text
from rlverify.models.assignments import parse_assignments


@dataclass(frozen=True)
class Parameter:
    """A benchmark parameter: default and inclusive range (``None`` = unbounded)."""

    default: Any
    low: float | None = None
    high: float | None = None
    doc: str = ""


class BenchmarkKind(StrEnum):
    """What a benchmark builds: a PRISM MDP (``prism``), a vectorised numpy environment (``native``) or a
    continuous system (``continuous``)."""

    PRISM = "prism"
    NATIVE = "native"
    CONTINUOUS = "continuous"
    #: no benchmark builds one: a Gymnasium environment without a transition table (``gym:ID``), simulated
    GYMNASIUM = "gymnasium"


KINDS = tuple(k.value for k in BenchmarkKind)


@dataclass(frozen=True)
class EnvDefaults:
    """How a benchmark is played as an RL environment (the Gymnasium bridge and training).

    Attributes:
        reward: reward model name.
        terminal: label (``'"goal"'``) or expression over variables (``'COLLISION=true'``) ending episodes.
        max_episode_steps: truncation length for training (None: none).
    """

    reward: str | None
    terminal: str | None
    max_episode_steps: int | None = None


@dataclass(frozen=True)
class Built:
    """What a benchmark's entry point returns: the model or system, and facts known only once built.

    Attributes:
        model: a zero-argument callable building the model: a
            :class:`~rlverify.models.SymbolicModel` (kind ``prism``), a vectorised environment
            (``native``) or a :class:`~rlverify.models.continuous.ContinuousSystem` (``continuous``).
        policies: reference policy name -> package-relative file under ``benchmarks/data`` that
            applies to these parameters (e.g. Avoid's only on the grid it was trained on).
        source: the PRISM text (kind ``prism``).
    """

    model: Callable[[], Any]
    policies: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None


def data_path(*parts: str) -> Path:
    """Absolute path of a file shipped in ``rlverify/benchmarks/data`` (``"tracks/ring.track"`` or
    ``"tracks", "ring.track"``)."""
    return Path(__file__).resolve().parent.joinpath("data", *parts)  # as importlib.resources finds it, without zipfile


@dataclass(frozen=True)
class Benchmark:
    """A registered benchmark built with its parameters — one type for every kind.

    Attributes:
        id: registry id; kind: ``prism``, ``native`` or ``continuous``.
        parameters: every parameter's value (defaults filled in).
        properties: name -> property text.
        policies: reference policy name -> absolute path of the shipped file (only those trained
            for these parameters).
        doc: the registry docstring; env: how it is played as an RL environment (None: no default).
        source: the PRISM text (kind ``prism``), else None.
    """

    id: str
    kind: BenchmarkKind
    parameters: Mapping[str, Any]
    properties: Mapping[str, str]
    policies: Mapping[str, Path]
    doc: str
    env: EnvDefaults | None
    source: str | None
    _build: Callable[[], Any] = field(repr=False, compare=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The id with the parameters, for results and tables (``avoid-v1 (xMax=2, ...)``)."""
        if not self.parameters:
            return self.id
        return (
            self.id
            + " ("
            + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.parameters.items())
            + ")"
        )

    def model(self) -> Any:
        """The model: a fresh :class:`~rlverify.models.SymbolicModel` for ``prism`` benchmarks
        (parsed on each call), the environment or continuous system otherwise (built once)."""
        if self.kind is BenchmarkKind.PRISM:
            return replace(self._build(), name=self.name)  # messages name the benchmark, not its temporary file
        if "model" not in self._cache:
            self._cache["model"] = self._build()
        return self._cache["model"]

    def load_model(self) -> Any:
        """Same as :meth:`model` (the name the PRISM benchmarks had)."""
        return self.model()

    def model_file(self) -> Path:
        """The PRISM source as a file (in this process's private temporary directory; never a user's file)."""
        if self.source is None:
            raise BenchmarkError(f"{self.id} is a {self.kind} benchmark: it has no PRISM file")
        return prism_file(self.id, self.source)

    def property(self, name_or_text: str) -> tuple[str, str | None]:
        """``(text, name)`` of a property given by name, or ``(text, None)`` for a formula.

        A word that is no formula (no ``[``) and no property name of this benchmark is a
        :class:`BenchmarkError` listing the names (with the closest one).
        """
        if name_or_text in self.properties:
            return self.properties[name_or_text], name_or_text
        if looks_like_name(name_or_text):
            raise BenchmarkError(
                f"{self.id} has no property '{name_or_text}'{did_you_mean(name_or_text, self.properties)}; "
                f"its properties: {', '.join(self.properties) or 'none'} (or give a formula, "
                "e.g. 'P=? [F \"goal\"]')"
            )
        return name_or_text, None

    def policy_file(self, name: str = "reference") -> Path:
        """The shipped reference policy ``name`` (a :class:`BenchmarkPolicyError` listing the others)."""
        if name not in self.policies:
            raise BenchmarkPolicyError(
                f"{self.name}: no reference policy '{name}'{did_you_mean(name, self.policies)}; "
                f"shipped for these parameters: {', '.join(self.policies) or 'none'}"
            )
        return self.policies[name]

    def load_policy(self, name: str = "reference") -> Any:
        """A shipped reference policy by name, loaded."""
        from rlverify.policies.loading import load_policy  # lazy: numpy and the network runtimes, listing benchmarks

        return load_policy(str(self.policy_file(name)))


def looks_like_name(text: str) -> bool:
    """Whether ``text`` reads as a property *name* (one word such as ``collision-100``), not a formula."""
    return re.fullmatch(r"[A-Za-z_][\w.-]*", text.strip()) is not None


def prism_file(benchmark_id: str, source: str) -> Path:
    """``source`` as a file that Storm can parse, named by the benchmark and its content.

    The file lives in this process's private temporary directory (:func:`rlverify.files.private_temp_dir`:
    mode 0700, an unpredictable name created atomically, removed at exit), never under a predictable
    name in the shared temp dir, where another local user could plant a symlink or a different model.
    """

    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = private_temp_dir("models") / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', benchmark_id)}-{digest}.prism"
    if not path.is_file():
        try:
            write_text(path, source, private=True)
        except FileWriteError:
            if not path.is_file():  # not another thread of this process writing the same text first
                raise
    return path


@dataclass(frozen=True)
class BenchmarkSpec:
    """What the registry knows about a benchmark before it is built.

    Attributes:
        id: versioned id, e.g. ``"avoid-v1"``.
        kind: ``"prism"`` (discrete MDP), ``"continuous"`` or ``"native"`` (vectorised numpy env); a
            :class:`BenchmarkKind` once made.
        entry_point: ``callable(**params) -> Built`` (the model builder and what depends on the
            parameters), called by :func:`make`.
        parameters: name -> :class:`Parameter`.
        properties: property name -> property text (PCTL for PRISM models).
        policies: reference policy name -> package-relative file path.
        doc: docstring with the sections description, state, actions, labels, initial states,
            reference results.
        env: how the benchmark is played as an RL environment (reward, terminal, episode length).
    """

    id: str
    kind: str
    entry_point: Callable[..., Any]
    parameters: Mapping[str, Parameter] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    policies: Mapping[str, str] = field(default_factory=dict)
    doc: str = ""
    env: EnvDefaults | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", BenchmarkKind(self.kind))  # the entries name it as text

    def resolve(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults filled in, unknown names and out-of-range values rejected."""
        unknown = [k for k in params if k not in self.parameters]
        if unknown:
            k = unknown[0]
            raise BenchmarkError(
                f"{self.id}: unknown parameter '{k}'{did_you_mean(k, self.parameters)}; "
                f"parameters: {', '.join(self.parameters) or 'none'}"
            )
        out = {k: p.default for k, p in self.parameters.items()}
        for k, v in params.items():
            out[k] = self._value(k, v)
        return out

    def _value(self, k: str, v: Any) -> Any:
        """Parameter ``k`` given as ``v``: checked against its type and range, cast to its default's type."""
        p = self.parameters[k]
        cast = type(p.default)
        if cast in (int, float):
            self._check_number(k, v, whole=cast is int)
        if isinstance(v, float) and not math.isfinite(v):
            raise BenchmarkError(f"{self.id}: parameter {k}={v} must be a finite number")
        if (p.low is not None and v < p.low) or (p.high is not None and v > p.high):
            raise BenchmarkError(f"{self.id}: parameter {k}={v} out of range [{p.low}, {p.high}]")
        return cast(v) if p.default is not None else v

    def _check_number(self, k: str, v: Any, *, whole: bool) -> None:
        """Refuse a value of a numeric parameter that is no number (or, ``whole``, no whole number)."""
        integral = isinstance(v, int) or (isinstance(v, float) and v.is_integer())
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (whole and not integral):
            raise BenchmarkError(f"{self.id}: parameter {k}={v!r} must be {'a whole number' if whole else 'a number'}")


def parse_parameters(text: str | None) -> dict[str, Any]:
    """``"xMax=4,slickness=0.1"`` (the CLI's ``--constants``) as benchmark parameters: numbers where
    the value reads as one, else the text (which :meth:`BenchmarkSpec.resolve` then refuses by name)."""

    def number(text: str) -> Any:
        for cast in (int, float):
            try:
                return cast(text)
            except ValueError:
                pass
        return text

    return {k: number(v) for k, v in parse_assignments(text).items()}


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
        raise BenchmarkError(
            f"unknown benchmark '{benchmark_id}'{did_you_mean(benchmark_id, _REGISTRY)}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None


def make(benchmark_id: str, **params: Any) -> Benchmark:
    """Build benchmark ``benchmark_id`` with ``params`` (defaults for the rest)."""
    s = spec(benchmark_id)
    values = s.resolve(params)
    built = s.entry_point(**values)
    return Benchmark(
        id=s.id,
        kind=BenchmarkKind(s.kind),
        parameters=values,
        properties=dict(s.properties),
        policies={k: data_path(v) for k, v in built.policies.items()},
        doc=s.doc,
        env=s.env,
        source=built.source,
        _build=built.model,
    )


def all_ids() -> list[str]:
    """Every registered id, sorted."""
    _load_all()
    return sorted(_REGISTRY)


def _load_all() -> None:
    # Each module registers its benchmarks on import; new benchmark modules are added here.
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
