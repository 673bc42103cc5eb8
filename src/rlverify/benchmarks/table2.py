"""Table 2 of Gross & Spieker (2024), recomputed for rlverify's own models and reference policies.

Each row is a benchmark property checked three ways with the exact engine: the deterministic
safety estimate (argmax action only), the stochastic policy (every action with pi > 0) and naive
monolithic model checking (no policy: Pmin/Pmax over all schedulers). Each cell has the size of
the checked model, the result and the time (parse + build + policy + induce + check, seconds; the
paper's time is build + check). The paper's numbers are kept beside ours in :data:`PAPER_TABLE2`.

Sizes of the stochastic and monolithic columns depend only on the model and the property (every
action of a softmax policy has pi > 0), so they must equal the paper's; results and the
deterministic column depend on the trained policy.

    from rlverify.benchmarks.table2 import compute_table2
    table = compute_table2()            # all four rows, shipped reference policies
    table.write("out/")                 # table2.json, table2.md
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlverify.benchmarks.registry import Benchmark, make
from rlverify.choices import Mode
from rlverify.errors import Table2Error, did_you_mean
from rlverify.exact import ExactOptions, verify_exact
from rlverify.files import check_target, write_text
from rlverify.models.property_parser import parse_property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.loading import load_policy
from rlverify.results import versions

log = logging.getLogger(__name__)

METHODS = ("deterministic", "stochastic", "monolithic")


@dataclass(frozen=True)
class Row:
    """A row of Table 2: which benchmark, parameters and named property.

    Attributes:
        id: row id, e.g. ``"avoid-coll-100"``.
        environment, measurement: the paper's row labels.
        benchmark: registry id; params: its parameters; prop: property name in the benchmark.
    """

    id: str
    environment: str
    measurement: str
    benchmark: str
    params: Mapping[str, Any]
    prop: str


ROWS: tuple[Row, ...] = (
    Row("freeway-goal", "Freeway", "P(◇goal)", "freeway-v1", {}, "goal"),
    # the paper's P(mid U mid_-1); `F px17=0` is the encoding giving its 272 states (see freeway.DOC)
    Row("freeway-mid", "Freeway", "P(mid U mid₋₁)", "freeway-v1", {}, "mid-until-mid-1"),
    Row("crazy-climber-coll", "Crazy Climber", "P(◇coll)", "crazy-climber-v1", {}, "collision"),
    Row("avoid-coll-100", "Avoidance", "P(◇≤100 coll)", "avoid-v1", {"xMax": 4, "yMax": 4, "slickness": 0.1}, "collision-100"),
)

#: The paper's Table 2, copied from Gross & Spieker, "Probabilistic Model Checking of Stochastic
#: Reinforcement Learning Policies" (2024), Table 2 (../shared/papers/001_5559184055215ac5.txt):
#: per row and method (states, transitions, result, time in seconds; Storm 1.7.1, Ryzen 7 7735HS).
#: The Freeway goal row's stochastic transitions are printed as 2,000 there; Storm builds 2,080
#: both for our model and for the authors' reference PRISM file (see freeway.DOC).
PAPER_TABLE2: dict[str, dict[str, tuple[int, int, float, float]]] = {
    "freeway-goal": {
        "deterministic": (123, 340, 0.7, 2.5),
        "stochastic": (496, 2_000, 0.7, 11.0),
        "monolithic": (496, 2_800, 1.0, 0.06),
    },
    "freeway-mid": {
        "deterministic": (21, 36, 1.0, 0.5),
        "stochastic": (272, 1_120, 1.0, 6.0),
        "monolithic": (272, 1_552, 1.0, 0.07),
    },
    "crazy-climber-coll": {
        "deterministic": (8_192, 32_768, 0.0, 146.0),
        "stochastic": (40_960, 270_336, 1.0, 1_313.0),
        "monolithic": (40_960, 385_024, 1.0, 0.4),
    },
    "avoid-coll-100": {
        "deterministic": (625, 8_698, 0.84, 1.5),
        "stochastic": (15_625, 892_165, 0.84, 1_325.0),
        "monolithic": (15_625, 1_529_185, 1.0, 2.0),
    },
}


@dataclass(frozen=True)
class Cell:
    """One method on one row.

    Attributes:
        states, transitions: size of the checked chain (monolithic: of the MDP).
        value: the result at the initial state (monolithic: Pmax); exact up to the solver's
            precision (``guarantee``).
        pmin: monolithic only, Pmin.
        seconds: total time of the verification (parse, build, policy, induce, check).
        strategy: the exact engine's build strategy used.
        guarantee: ``sound`` / ``direct`` / ``unsound`` as in :class:`~rlverify.results.ExactResult`.
    """

    states: int
    transitions: int
    value: float
    seconds: float
    strategy: str
    guarantee: str
    pmin: float | None = None


@dataclass(frozen=True)
class Table2:
    """Our Table 2 beside the paper's.

    Attributes:
        rows: the rows computed, in order.
        cells: row id -> method -> :class:`Cell`.
        policies: row id -> policy file used.
        properties: row id -> PCTL text checked.
        seconds: wall time of the whole computation.
        versions: package versions (rlverify, stormpy, ...).
    """

    rows: tuple[Row, ...]
    cells: Mapping[str, Mapping[str, Cell]]
    policies: Mapping[str, str]
    properties: Mapping[str, str]
    seconds: float
    versions: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict with ours and the paper's numbers per row and method."""
        out = []
        for r in self.rows:
            paper = PAPER_TABLE2.get(r.id, {})
            methods = {}
            for m, c in self.cells[r.id].items():
                p = paper.get(m)
                methods[m] = {
                    "ours": {
                        "states": c.states,
                        "transitions": c.transitions,
                        "result": c.value,
                        "pmin": c.pmin,
                        "seconds": round(c.seconds, 3),
                        "strategy": c.strategy,
                        "guarantee": c.guarantee,
                    },
                    "paper": None if p is None else {"states": p[0], "transitions": p[1], "result": p[2], "seconds": p[3]},
                }
            out.append(
                {
                    "id": r.id,
                    "environment": r.environment,
                    "measurement": r.measurement,
                    "benchmark": r.benchmark,
                    "params": dict(r.params),
                    "property": self.properties[r.id],
                    "policy": self.policies[r.id],
                    "methods": methods,
                }
            )
        return {
            "table": "Gross & Spieker 2024, Table 2",
            "rows": out,
            "seconds": round(self.seconds, 2),
            "versions": dict(self.versions),
        }

    def to_markdown(self) -> str:
        """A Markdown table: per row, our figures and the paper's (``ours / paper``)."""
        head = ["Environment", "Measurement"]
        for m in METHODS:
            head += [f"{m} states", f"{m} transitions", f"{m} result", f"{m} time (s)"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.rows:
            cells = [r.environment, r.measurement]
            for m in METHODS:
                cells += _method_cells(self.cells[r.id].get(m), PAPER_TABLE2.get(r.id, {}).get(m))
            lines.append("| " + " | ".join(cells) + " |")
        notes = [
            "",
            "Each cell: ours / paper (Gross & Spieker 2024, Table 2). Times in seconds: ours = parse + build + policy "
            "+ induce + check on this machine; the paper's = build + check (Storm 1.7.1).",
            "Monolithic result: Pmin–Pmax over all schedulers (the paper prints Pmax).",
            "",
            "Policies: " + "; ".join(f"{r.id}: `{self.policies[r.id]}`" for r in self.rows),
            "",
            "Properties: " + "; ".join(f"{r.id}: `{self.properties[r.id]}`" for r in self.rows),
            "",
            NOTES,
        ]
        return "\n".join(lines + notes) + "\n"

    def write(self, out_dir: str | Path, *, force: bool = False) -> tuple[Path, Path]:
        """Write ``table2.json`` and ``table2.md`` into ``out_dir`` (created), atomically; existing files are
        replaced only with ``force`` (else :class:`~rlverify.files.FileWriteError`). Returns both paths."""
        out = Path(out_dir)
        js, md = out / "table2.json", out / "table2.md"
        for path in (js, md):  # both refused before either is written
            check_target(path, force=force, what="--out")
        write_text(js, json.dumps(self.to_json(), indent=2) + "\n", force=force, what="--out")
        write_text(
            md,
            "# Table 2 of Gross & Spieker (2024), reproduced\n\n"
            f"Regenerate with `rlverify reproduce table2 --out DIR`; this run took {self.seconds:.1f} s.\n\n"
            + self.to_markdown(),
            force=force,
            what="--out",
        )
        return js, md


NOTES = """Notes
- Stochastic and monolithic sizes equal the paper's, except Freeway P(◇goal)'s stochastic transitions: the paper
  prints 2,000; Storm 2.0 builds 2,080 both for our generated model and for the authors' reference PRISM file.
- Freeway P(mid U mid₋₁) is checked as `P=? [F px17=0]`, the encoding that gives the paper's 272 states (see the
  freeway-v1 docstring): the scripts' nested until has the same value but Storm 2.0 builds 608 states for it. Neither
  says what the paper's text describes (returning to the start after entering the street).
- Deterministic sizes and all results depend on the policy: ours are rlverify's own PPO networks (the
  benchmarks' docstrings give their training), not the paper's. Every full-support policy eventually collides in
  Crazy Climber, so its stochastic value is 1.
- Times: ours = parse + build + policy evaluation + inducing the chain + check; the paper's = build + check with
  Storm 1.7.1 building the chain incrementally with per-state policy calls."""


def format_result(cell: Cell) -> str:
    """The result as printed: 4 decimals, ``Pmin–Pmax`` for the monolithic column."""
    if cell.pmin is not None:
        return f"{cell.pmin:.4g}–{cell.value:.4g}"
    return f"{cell.value:.4f}"


def _method_cells(c: Cell | None, p: Any) -> list[str]:
    """One method's four cells of a row (states, transitions, result, time), ours / the paper's (``p``)."""
    if c is None:
        return ["—"] * 4
    res = format_result(c)
    return [
        _pair(f"{c.states:,}", p and f"{p[0]:,}"),
        _pair(f"{c.transitions:,}", p and f"{p[1]:,}"),
        _pair(res, p and f"{p[2]:g}"),
        _pair(f"{c.seconds:.2f}", p and f"{p[3]:g}"),
    ]


def _pair(ours: str, paper: str | None) -> str:
    return ours if paper is None else f"{ours} / {paper}"


def select_rows(ids: Sequence[str] | None) -> tuple[Row, ...]:
    """The rows with the given ids (all rows for None), in the table's order.

    Raises:
        Table2Error: an unknown id (with a suggestion).
    """
    if ids is None:
        return ROWS
    known = {r.id: r for r in ROWS}
    for i in ids:
        if i not in known:
            raise Table2Error(f"unknown Table 2 row '{i}'{did_you_mean(i, known)}; rows: {', '.join(known)}")
    return tuple(r for r in ROWS if r.id in set(ids))


def compute_table2(
    rows: Sequence[str] | None = None,
    *,
    methods: Sequence[str] = METHODS,
    policies: Mapping[str, Any] | None = None,
    strategy: str = "full",
    numerics: str = "sound",
    progress: Callable[[str], None] | None = None,
) -> Table2:
    """Compute Table 2 with the exact engine.

    Args:
        rows: row ids (see :data:`ROWS`); None for all.
        methods: a subset of :data:`METHODS`.
        policies: row id -> policy (a :class:`~rlverify.policies.Policy` or a file path) replacing the
            benchmark's shipped ``reference`` policy.
        strategy: build strategy of the policy columns. ``full`` (default) builds the
            property-directed MDP once and evaluates the policy on all its states in one batch; on
            these models (at most 41k states) it is faster than ``onthefly`` (per-state policy calls,
            the paper's incremental building), and it induces the same chain, so sizes and results
            are the same.
        numerics: ``sound`` (default), ``direct`` or ``fast`` (see :mod:`rlverify.exact.checking`).
        progress: called with a short message before each verification.

    Returns:
        A :class:`Table2`.

    Raises:
        Table2Error: unknown row or method; RlverifyError subclasses from loading and verifying.
    """
    _check_methods(methods)
    chosen = select_rows(rows)
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    cells: dict[str, dict[str, Cell]] = {}
    used: dict[str, str] = {}
    props: dict[str, str] = {}
    for row in chosen:
        bench = make(row.benchmark, **dict(row.params))
        model = bench.load_model()
        prop = bench.properties[row.prop]
        props[row.id] = prop
        policy = None
        if any(m != Mode.MONOLITHIC for m in methods):
            policy, used[row.id] = _row_policy(bench, (policies or {}).get(row.id))
        else:
            used[row.id] = "—"
        cells[row.id] = {}
        for m in METHODS:
            if m not in methods:
                continue
            say(f"{row.environment} {row.measurement}: {m}")
            cells[row.id][m] = _cell(model, prop, m, policy, strategy, numerics)
            log.info(
                "table2 %s %s: %d states, %d transitions, %.6g, %.2f s",
                row.id,
                m,
                cells[row.id][m].states,
                cells[row.id][m].transitions,
                cells[row.id][m].value,
                cells[row.id][m].seconds,
            )
    return Table2(
        rows=chosen, cells=cells, policies=used, properties=props, seconds=time.perf_counter() - t0, versions=versions()
    )


def _check_methods(methods: Sequence[str]) -> None:
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise Table2Error(f"unknown method '{bad[0]}'{did_you_mean(bad[0], METHODS)}; methods: {', '.join(METHODS)}")


def _row_policy(bench: Benchmark, override: Any) -> tuple[Any, str]:
    """A row's policy and how the table names it: the benchmark's ``reference`` one, else ``override`` (a file path,
    loaded, or a policy)."""
    if override is None:
        return bench.load_policy("reference"), str(bench.policies["reference"].name)
    if isinstance(override, (str, Path)):
        return load_policy(str(override)), str(override)
    return override, getattr(override, "name", type(override).__name__)


def _cell(model: SymbolicModel, prop: str, m: str, policy: Any, strategy: str, numerics: str) -> Cell:
    """One cell: ``prop`` checked on ``model`` by method ``m`` (monolithic: no policy, the full build)."""
    monolithic = m == Mode.MONOLITHIC
    opts = ExactOptions(mode=m, strategy="full" if monolithic else strategy, numerics=numerics)
    parsed = parse_property(model, prop, fixed_policy=not monolithic)
    r = verify_exact(model, parsed, None if monolithic else policy, opts)
    return Cell(
        states=r.states,
        transitions=r.transitions,
        value=float(r.value),
        seconds=float(r.timings["total"]),
        strategy=r.strategy,
        guarantee=r.guarantee,
        pmin=r.pmin if monolithic else None,
    )
