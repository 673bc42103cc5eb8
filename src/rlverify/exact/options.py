"""The exact engine's settings (:class:`ExactOptions`), the choices of every exact analysis' options, and the
checks every exact analysis makes of its input.

Imports neither numpy nor Storm at module level: the CLI's parser reads the choices here (``rlverify --help``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from rlverify.backends import BackendOptions
from rlverify.choices import Aggregate, BackendKind, Guarantee, Mode, Numerics, Optimum, Strategy, Unavailable, choose, values
from rlverify.errors import OptionError, PropertyError
from rlverify.models.numerics import NUMERICS

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from rlverify.models.properties import Property
    from rlverify.models.symbolic import SymbolicModel
    from rlverify.policies.base import Policy
    from rlverify.results import Provenance

__all__ = ["AGGREGATES", "MAX_WORK", "MODES", "NUMERICS", "OPTIMA", "STEP_WORK", "STRATEGIES", "ExactOptions", "Progress"]

MODES = values(Mode)
STRATEGIES = values(Strategy)
#: default budget of a step-bounded computation, in multiply-adds (steps x transitions): about 10-30 s
MAX_WORK = 5_000_000_000
#: the least work a step of a per-step loop counts, in multiply-adds: a matrix-vector step costs ~10 us however few
#: transitions it has (a 4-state chain's 1e8 steps are ~20 minutes, not 1e8 x 12 multiply-adds)
STEP_WORK = 3_000
#: how a risk map aggregates the states of one cell, and which optimum it compares with (:mod:`rlverify.exact.maps`)
AGGREGATES = values(Aggregate)
OPTIMA = values(Optimum)

#: a progress callback: one line of text per call (the CLI shows it; the library only calls it)
Progress = Callable[[str], None]

E = TypeVar("E", bound=StrEnum)


class Choice(Generic[E]):
    """A dataclass field holding a member of ``kind``: set from a member or its text (:func:`~rlverify.choices.choose`:
    an OptionError naming ``--<field>`` otherwise), read as the member."""

    def __init__(self, kind: type[E], default: E) -> None:
        self.kind, self.default = kind, default
        self.name = self.option = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.option = f"_{name}", f"--{name}"

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> E: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> E: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> E:
        if obj is None:  # the class's: the dataclass's default
            return self.default
        value: E = getattr(obj, self.name)
        return value

    def __set__(self, obj: object, value: E | str) -> None:
        object.__setattr__(obj, self.name, choose(self.kind, value, self.option))


@dataclass(frozen=True)
class ExactOptions:
    """Settings of one exact verification.

    Attributes:
        mode: ``stochastic`` (every action with pi > 0), ``deterministic`` (argmax action only;
            ties go to the first action in the policy's order) or ``monolithic`` (no policy;
            Pmin and Pmax over all schedulers).
        strategy: ``merged`` (the policy's chain explored in numpy batches, never the MDP:
            :mod:`rlverify.exact.merged`), ``full`` (Storm builds the whole property-directed MDP; the policy is
            evaluated on all its decision states in one batch), ``onthefly`` (Storm's explicit
            builder with an action mask explores only policy-reachable states; the policy is
            called per newly explored state, cached) or ``auto`` (for PRISM programs ``merged`` where their choices
            branch widely or their variables span a large domain, else ``full``, and ``full`` where ``merged`` does
            not apply: :func:`~rlverify.exact.chain.strategy_and_reason`; ``full`` for JANI).
        unavailable: ``stall`` (mass on unavailable actions goes to an absorbing ``stalled``
            state) or ``renormalize`` (rescale the available actions' probabilities).
        numerics: ``sound``, ``direct`` or ``fast`` (see :mod:`rlverify.exact.checking`).
        precision: relative precision of iterative solvers.
        max_states: refuse models with more states (None: no limit). The default, 2M, keeps dense
            models within this class of machine (24 GB) with either strategy: peak memory grows with
            transitions, ~15-21 bytes per chain transition on stochastic Avoid with ``merged`` and ~56 with
            ``full`` (Storm's build and its UMB export of the MDP; docs/scaling.md): its chain at n = 10
            (1.8M states, 127M transitions) took 2.0 GB (merged) and 6.8 GB (full).
        all_states: also return the value of every state of the chain.
        max_memory: refuse (``MemoryBudgetError``) before a phase whose estimated resident memory
            (bytes: current RSS + counts x measured bytes per transition, see
            :func:`~rlverify.models.explicit.memory_guard`) exceeds this; None: the default guard, 80% of the
            machine's memory (:func:`~rlverify.models.explicit.memory_limit`). Storm's own build is bounded by
            ``max_states`` only (its counts are not known before it runs); a ``MemoryError`` anywhere becomes a
            ``MemoryBudgetError`` saying what to change.
        max_work: the budget of a step-bounded computation (``F<=k``, ``U<=k``, ``C<=k``, ``I=k``), in
            multiply-adds (steps x transitions, a step at least ``STEP_WORK``); None: no limit. Step-bounded
            reachability stops early, soundly, at a fixed point or once within ``precision`` of the unbounded value
            (:func:`~rlverify.exact.bounded.bounded_until`); if neither happens within the budget it is refused
            with the figures; forms Storm computes are refused up front when k x transitions exceeds it.
        chain_dir: a new or empty directory to hold the policy's chain on disk (strategy ``merged`` on PRISM
            programs, step-bounded reachability ``P=? [F<=k ...]``/``[... U<=k ...]``): its rows are written there
            as they are explored and read back in row blocks (:mod:`rlverify.exact.ondisk`), so memory grows per
            state, not per transition; the value is bit-identical to the in-memory run. Read by
            :func:`~rlverify.exact.verify_exact` only. None: the chain is held in memory.
        chain_dir_force: ``chain_dir`` may hold an earlier chain's files (replaced; nothing else is).
        backend: with ``chain_dir``: ``BackendOptions(kind="ray", ...)`` partitions the chain's rows across Ray actors
            (:mod:`rlverify.exact.partition`; bit-identical values); None: this process.
        partitions: with a Ray backend: the number of actors (None: one per CPU of the cluster).
        export: a file to write the policy's chain to, as checked (``.drn``: Storm's explicit format; ``.dot``:
            Graphviz, at most 1,000 states; :func:`~rlverify.exact.export.export_chain`); None: none.
        export_force: ``export`` may replace an existing file.
    """

    mode: Choice[Mode] = Choice(Mode, Mode.STOCHASTIC)
    strategy: Choice[Strategy] = Choice(Strategy, Strategy.AUTO)
    unavailable: Choice[Unavailable] = Choice(Unavailable, Unavailable.STALL)
    numerics: Choice[Numerics] = Choice(Numerics, Numerics.SOUND)
    precision: float = 1e-6
    max_states: int | None = 2_000_000
    all_states: bool = False
    max_memory: int | None = None
    max_work: int | None = MAX_WORK
    chain_dir: str | None = None
    chain_dir_force: bool = False
    backend: BackendOptions | None = None
    partitions: int | None = None
    export: str | None = None
    export_force: bool = False

    def validate(self) -> None:
        """Raise :class:`~rlverify.errors.OptionError` naming the first setting out of its range."""
        if not (0 < self.precision < 1):
            raise OptionError(f"--precision: expected a number in (0, 1), got {self.precision}")
        for flag, value in (("--max-states", self.max_states), ("--max-memory", self.max_memory)):
            if value is not None and value <= 0:
                what = "size" if flag == "--max-memory" else "number"
                raise OptionError(f"{flag}: expected a positive {what}, got {value}")
        if self.max_work is not None and (isinstance(self.max_work, bool) or self.max_work <= 0):
            raise OptionError(f"--max-work: expected a positive number, got {self.max_work}")
        self._validate_backend()
        if self.export is not None:
            self._validate_export(self.export)

    def _validate_backend(self) -> None:
        """Refuse a Ray backend without a chain on disk to partition, and a partition count that is no count."""
        if self.backend is not None:
            self.backend.validate()
            if BackendKind(self.backend.kind) is BackendKind.RAY and self.chain_dir is None:
                raise OptionError("--backend ray partitions a chain on disk across Ray actors: add --chain-dir DIR")
        if self.partitions is not None and (isinstance(self.partitions, bool) or int(self.partitions) <= 0):
            raise OptionError(f"partitions: expected a positive number of Ray actors, got {self.partitions!r}")

    def _validate_export(self, export: str) -> None:
        """Refuse ``export`` before any work: a format other than ``.drn``/``.dot``, no chain to write, or a file that
        exists (without ``export_force``); checked again when the file is written."""
        from pathlib import PurePath

        from rlverify.files import check_target  # lazy: the CLI's parser reads this module

        if PurePath(export).suffix.lower() not in (".drn", ".dot"):
            raise OptionError(
                f"--export {export}: the format is read from the suffix: .drn (Storm's explicit format) or .dot (Graphviz)"
            )
        if self.mode is Mode.MONOLITHIC:
            raise OptionError(f"--export {export}: writes the policy's chain; --mode monolithic has none")
        if self.chain_dir is not None:
            raise OptionError(f"--export {export}: the chain is on disk (--chain-dir), not exported")
        check_target(export, force=self.export_force, what="--export")


def check_resolved(model: object, prop: object) -> None:
    """Refuse what the engines take from the front door only: a path or benchmark for a loaded model, property text
    for a parsed :class:`Property` (a :class:`PropertyError` naming the way in, never an ``AttributeError``)."""
    from rlverify.models.properties import Property
    from rlverify.models.symbolic import SymbolicModel

    if not isinstance(model, SymbolicModel):
        raise PropertyError(
            f"the exact engine takes a loaded model (rlverify.load_model(path, constants), or resolve), not a "
            f"{type(model).__name__}; rlverify.verify_exact (the package's) also takes a path or a benchmark id"
        )
    if not isinstance(prop, Property):
        raise PropertyError(
            f"the exact engine takes a parsed property (rlverify.models.parse_property(model, text)), not a "
            f"{type(prop).__name__}; rlverify.verify_exact (the package's) also takes the text"
        )


def check_operator(prop: Property, mode: Mode) -> None:
    """Refuse what the exact engine does not check: no P/R operator, ``R=? [F<=k ...]``, and ``Pmin``/``Pmax``
    (``Rmin``/``Rmax``) on a policy's chain (``mode`` other than ``monolithic``)."""
    text = prop.text
    formula = prop.storm_formula()
    if not (formula.is_probability_operator_formula or formula.is_reward_operator_formula):
        raise PropertyError(f"property '{text}': expected a P or R operator (P=? [...], R{{\"r\"}}=? [...])")
    if prop.operator == "R" and prop.path == "F" and prop.bound is not None:
        raise PropertyError(
            f"property '{text}': a step-bounded reachability reward (R=? [F<=k ...]) is not supported "
            "(Storm does not check it); use the cumulative reward R=? [C<=k] for the first k steps"
        )
    if mode != Mode.MONOLITHIC and formula.has_optimality_type:
        raise PropertyError(
            f"property '{text}': Pmin/Pmax/Rmin/Rmax need --mode monolithic; on the policy's chain use P=? or R=?"
        )


def guarantee(numerics: Numerics | str) -> Guarantee:
    """What a result computed with ``numerics`` guarantees: ``sound``, ``direct`` or ``unsound``."""
    return _GUARANTEE[Numerics(numerics)]


_GUARANTEE = {Numerics.SOUND: Guarantee.SOUND, Numerics.DIRECT: Guarantee.DIRECT, Numerics.FAST: Guarantee.UNSOUND}


def settings(options: DataclassInstance, strategy: str, model: SymbolicModel) -> dict[str, Any]:
    """The settings a result records: the options (a dataclass), the strategy used and the model's constants."""
    d = asdict(options)
    d["strategy"] = strategy
    d["constants"] = model.constants
    return d


def provenance(
    model: SymbolicModel,
    prop: Property,
    policy: Policy | None,
    *,
    settings: dict[str, Any],
    timings: dict[str, float],
    warnings: list[str] | None = None,
) -> Provenance:
    """What an exact analysis records of what it verified: the model's path, the property's text, the policy's name
    (None: no policy), the settings and timings given, the package versions and ``warnings``."""
    from rlverify.results import Provenance, versions  # lazy: the CLI's parser reads this module

    return Provenance(
        model=model.shown,
        property=prop.text,
        policy=None if policy is None else policy.name,
        settings=settings,
        timings=timings,
        versions=versions(),
        warnings=list(warnings or []),
    )
