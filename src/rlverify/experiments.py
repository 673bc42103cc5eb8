"""Several exact verifications in one run, as PRISM's experiments: the properties of a properties file (or several
``-p``), over a sweep of constants (``-c N=4:8``).

Each point of the sweep resolves the target once through the one front door (:func:`rlverify.resolve.resolve`: the
model built with the point's constants, the policy loaded) and checks every property on it with
:func:`rlverify.exact.verify_exact`; every run keeps its full :class:`~rlverify.results.ExactResult`. A constant a
properties file declares goes to its properties, every other one to the model.
"""

from __future__ import annotations

import builtins
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlverify.choices import Mode
from rlverify.errors import OptionError, PropertyError, RlverifyError
from rlverify.exact.options import ExactOptions
from rlverify.models.assignments import expand_sweep, parse_assignments, swept_names
from rlverify.models.properties import Property, parse_structure
from rlverify.models.property_files import (
    PROPERTY_FILE_SUFFIXES,
    declared_constants,
    read_properties_file,
    split_properties,
    written_properties,
)
from rlverify.resolve import ModelTarget, resolve_model
from rlverify.results import ExactResult, Provenance, Result, versions

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MAX_RUNS", "ExperimentResult", "ExperimentRun", "experiment_figure", "verify_experiments"]

#: most verifications one experiment may run (points of the sweep x properties): refused before the first
MAX_RUNS = 1000


@dataclass(frozen=True)
class ExperimentRun:
    """One verification of an experiment: the constants of its point (``"N=4"``; ``""`` without a sweep), the
    property's position at every point (0, 1, ...), its name in its file (None: unnamed), its text as written (before
    the point's constants are substituted) and the result."""

    constants: str
    index: int
    name: str | None
    written: str
    result: ExactResult


@dataclass(frozen=True, kw_only=True)
class ExperimentResult(Result):
    """Every run of an experiment, in order (the sweep's points, the first swept constant varying slowest; at each
    point the properties in the order given). ``swept``: the constants that vary. Each run's result carries its own
    guarantee (the exact engine's certified bracket)."""

    runs: tuple[ExperimentRun, ...] = ()
    swept: tuple[str, ...] = ()

    @builtins.property
    def holds(self) -> bool | None:
        """The threshold properties' verdict over every run: False if one is violated, None if one is undecided
        (or none has a threshold), else True."""
        verdicts = [r.result.satisfied for r in self.runs if _has_threshold(r.result)]
        if not verdicts or any(v is False for v in verdicts):
            return None if not verdicts else False
        return None if any(v is None for v in verdicts) else True

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """``swept``, ``holds`` and one entry per run: its constants, property, name, value, bracket, verdict and the
        whole result."""
        return {
            "swept": list(self.swept),
            "holds": self.holds,
            "runs": [
                {
                    "constants": r.constants,
                    "index": r.index,
                    "property": r.result.property,
                    "written": r.written,
                    "name": r.name,
                    "value": r.result.value,
                    "lower": r.result.lower,
                    "upper": r.result.upper,
                    "satisfied": r.result.satisfied,
                    "result": r.result.to_json(),
                }
                for r in self.runs
            ],
        }


def _has_threshold(result: ExactResult) -> bool:
    return parse_structure(result.property).comparison is not None


def _property_items(given: Sequence[str]) -> tuple[list[tuple[str, str | None]], set[str]]:
    """Each ``-p`` value as ``(text, file)``: a properties file's text with its path, else the value itself (a
    property or a benchmark's property name); and the constants the files declare."""
    items: list[tuple[str, str | None]] = []
    declared: set[str] = set()
    for value in given:
        if not str(value).lower().endswith(PROPERTY_FILE_SUFFIXES):
            items.append((str(value), None))
            continue
        text = read_properties_file(value)
        items.append((text, str(value)))
        declared |= set(declared_constants(text))
    return items, declared


def verify_experiments(
    target: str | Path,
    properties: Sequence[str],
    *,
    constants: str | None = None,
    options: ExactOptions | None = None,
    progress: Callable[[str], None] | None = None,
    **resolve_kwargs: Any,
) -> ExperimentResult:
    """Verify every property of ``properties`` (texts, a benchmark's property names, or PRISM properties files) at
    every point of the sweep ``constants`` (``"N=4:8,p=0.1"``, see :func:`~rlverify.models.assignments.expand_sweep`).

    ``resolve_kwargs`` go to :func:`rlverify.resolve.resolve` (``policy=``, ``features=``, ``env_kwargs=``, ...).

    Raises:
        ConstantsError, PropertyError, PolicyError, ...: as :func:`~rlverify.resolve.resolve` and
            :func:`~rlverify.exact.verify_exact`, for the first run that fails (naming its constants).
    """
    options = options or ExactOptions()
    if options.export is not None or options.chain_dir is not None:
        raise OptionError("--export and --chain-dir write one chain: verify one property at one point at a time")
    started = time.perf_counter()
    items, declared = _property_items(properties)
    points = expand_sweep(constants)
    _check_size(points, items)
    runs: list[ExperimentRun] = []
    for n, point in enumerate(points, 1):
        with _naming(point, len(points)):
            runs += _runs_at(point, n, points, items, declared, target, options, progress, resolve_kwargs)
    first = runs[0].result
    warnings = list(dict.fromkeys(f"[{_label(r)}] {w}" for r in runs for w in r.result.warnings))
    return ExperimentResult(
        runs=tuple(runs),
        swept=tuple(swept_names(constants)),
        provenance=Provenance(
            model=first.model if len(points) == 1 else str(target),
            property="; ".join(dict.fromkeys(r.result.property for r in runs)),
            policy=first.policy,
            settings={**first.settings, "constants": constants or "", "points": len(points)},
            timings={"total": time.perf_counter() - started},
            versions=versions(),
            warnings=warnings,
        ),
    )


@contextlib.contextmanager
def _naming(point: str, points: int) -> Iterator[None]:
    """An error of a sweep's run names its point, in the one line (same error type: same exit code)."""
    try:
        yield
    except RlverifyError as exc:
        if points > 1 and exc.args and isinstance(exc.args[0], str):
            exc.args = (f"at -c {point}: {exc.args[0]}", *exc.args[1:])
        raise


def _check_size(points: list[str], items: list[tuple[str, str | None]]) -> None:
    """Refuse more than :data:`MAX_RUNS` verifications before the first."""
    per_point = sum(len(written_properties(text)) if file is not None else 1 for text, file in items)
    if len(points) * per_point > MAX_RUNS:
        raise OptionError(
            f"{_count(len(points), 'point')} x {_count(per_point, 'property')} = {len(points) * per_point:,} "
            f"verifications, more than "
            f"{MAX_RUNS:,} in one run: sweep fewer values or split the properties file"
        )


def _runs_at(
    point: str,
    n: int,
    points: list[str],
    items: list[tuple[str, str | None]],
    declared: set[str],
    target: str | Path,
    options: ExactOptions,
    progress: Callable[[str], None] | None,
    resolve_kwargs: dict[str, Any],
) -> list[ExperimentRun]:
    """Every property checked at one point of the sweep (the model resolved once with the point's constants)."""
    values = parse_assignments(point)
    model_constants = ",".join(f"{k}={v}" for k, v in values.items() if k not in declared)
    property_constants = {k: v for k, v in values.items() if k in declared}
    if progress is not None and len(points) > 1:
        progress(f"point {n} of {len(points)}: {point}")
    t = resolve_model(
        target,
        constants=model_constants or None,
        needs_policy=options.mode != Mode.MONOLITHIC,
        command="rlverify verify",
        **resolve_kwargs,
    )
    runs: list[ExperimentRun] = []
    for text, file in items:
        for name, prop, as_written in _properties_of(t, text, file, property_constants, options):
            result = t.stamp(_verify_exact(t.model, prop, t.policy, options), unavailable=options.unavailable)
            runs.append(ExperimentRun(constants=point, index=len(runs), name=name, written=as_written, result=result))
    return runs


def _properties_of(
    t: ModelTarget, text: str, file: str | None, constants: dict[str, str], options: ExactOptions
) -> list[tuple[str | None, Property, str]]:
    """``(name, parsed property, text as written)`` of each property of a ``-p`` value (one, or a file's)."""
    found = split_properties(text, constants, source=file) if file is not None else [(None, text)]
    written = written_properties(text) if file is not None else [text]
    out = []
    for (name, body), as_written in zip(found, written, strict=True):
        prop = _in_file(file, t.parse_property, body, fixed_policy=options.mode != Mode.MONOLITHIC)
        if name is not None:
            prop = replace(prop, name=name)
        out.append((prop.name, prop, as_written))
    return out


def _verify_exact(model: Any, prop: Property, policy: Any, options: ExactOptions) -> ExactResult:
    from rlverify.exact.verify import verify_exact  # lazy: stormpy, start-up

    return verify_exact(model, prop, policy, options)


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {'properties' if word == 'property' else word + 's'}"


def _in_file(file: str | None, parse: Callable[..., Property], *args: Any, **kwargs: Any) -> Property:
    """``parse(*args, **kwargs)``, a property error naming the properties file it comes from."""
    try:
        return parse(*args, **kwargs)
    except PropertyError as exc:
        if file is None or str(exc).startswith(f"{file}: "):
            raise
        raise PropertyError(f"{file}: {exc}") from None


def _label(run: ExperimentRun) -> str:
    what = run.name or run.result.property
    return f"{run.constants}: {what}" if run.constants else what


def experiment_figure(result: ExperimentResult) -> Figure:
    """A matplotlib figure of a sweep: each property's value (its certified bracket as error bars, invisible where
    tighter than the line) against the first swept constant, one line per property and value of the other swept
    constants. Raises :class:`~rlverify.errors.OptionError` without a numeric sweep."""
    if not result.swept:
        raise OptionError("a plot of an experiment needs a sweep: -c NAME=START:END (or START:STEP:END)")
    from rlverify.figures import new_figure  # lazy: matplotlib

    fig = new_figure((7, 4.2))
    ax = fig.add_subplot()
    for key, points in _series(result).items():
        xs = [x for x, _ in points]
        ys = [r.value for _, r in points]
        low = [max(0.0, r.value - r.lower) if r.lower is not None else 0.0 for _, r in points]
        high = [max(0.0, r.upper - r.value) if r.upper is not None else 0.0 for _, r in points]
        ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=key)
    ax.set_xlabel(result.swept[0])
    ax.set_ylabel("value")
    ax.set_title(f"{result.model}: {len(result.runs)} runs", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _series(result: ExperimentResult) -> dict[str, list[tuple[float, ExactResult]]]:
    """One line per property (by position) and value of the other swept constants: ``(x, result)`` points."""
    x_name, others = result.swept[0], result.swept[1:]
    series: dict[str, list[tuple[float, ExactResult]]] = {}
    for run in result.runs:
        values = parse_assignments(run.constants)
        key = (run.name or run.written) + "".join(f", {k}={values[k]}" for k in others)
        series.setdefault(key, []).append((float(values[x_name]), run.result))
    return series
