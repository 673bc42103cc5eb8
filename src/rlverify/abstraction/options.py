"""The settings of the abstraction engine (:class:`AbstractionOptions`), their checks, and what they choose: the
template, the initial box and the time budget."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace

import numpy as np

from rlverify.abstraction.domains import Template
from rlverify.abstraction.kinds import Domain, Milp, WitnessMethod
from rlverify.abstraction.settings import DEFAULT_TIME_BUDGET
from rlverify.backends import BackendOptions
from rlverify.choices import values
from rlverify.errors import AbstractionError, DomainError
from rlverify.models.continuous.base import ContinuousSystem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AbstractionOptions:
    """Settings of :func:`verify_abstraction` (keyword-only, immutable).

    Attributes:
        horizon: number of steps ``k >= 1``.
        domain: ``"box"``, ``"octagon"``, ``"template"`` or ``"auto"`` (directions chosen from the dynamics, the
            unsafe set and sampled successors: :mod:`~rlverify.abstraction.templates`; the result's options then
            say ``"template"`` with the directions chosen).
        template: directions ``(k, n)`` for ``domain="template"``, used as given (each in both signs;
            they must bound the state space). None: the system's default template
            (``system.default_template()``: the box axes plus the directions its docstring names), or
            an :class:`AbstractionError` if it declares none. The result's ``template_axes`` are the
            directions used.
        phi: maximum probability spread per part, in (0, 1].
        containment: merge successors contained in a visited abstract state (smaller IMDP, coarser).
        initial: name of the system's initial region, or an explicit box ``((lo...), (hi...))``.
        samples: hit-and-run samples per part during refinement.
        min_width: smallest splittable width (state units); default: the system's.
        min_split_fraction: minimum relative size of each side of a split.
        max_parts: parts per abstract state at most.
        milp: ``"auto"``, ``"always"`` or ``"never"`` (see :class:`RefinementOptions`).
        milp_time_limit: seconds per MILP (the dual bound keeps the result sound when it stops).
        max_states: at this many abstract states no new one is made: successors that would need one count as
            failing in the upper bound and as safe in the lower (both stay sound; a warning says so).
        seed: seed of the sampling used by refinement (the bound is sound for every seed); abstract
            state ``s`` is refined with its own generator seeded by ``(seed, s)``.
        refine_everywhere: refine every abstract state by the policy (the paper's method). False:
            refine only where the action matters; a state where every action leads to the same
            successor (or, at the last step, to the same outcome) is mapped as a whole. Much faster
            where the dynamics often ignore the action (the bouncing ball in flight), still sound,
            but coarser: the parts of a refined state have smaller successors than the whole.
        chunk: abstract states of a frontier refined (and their parts mapped to successors) per task;
            the frontier is cut into chunks of this size on every backend. The states of a chunk are refined
            side by side, their network bounds, samples and splits computed in batches (bigger chunks, bigger
            batches: on the bouncing ball, k = 12, 256 takes ~30% less CPU than 64, which takes ~20% less than
            16; memory grows with it, ~0.3 GB at 256 there); the result does not depend on it.
        backend: where the chunks run (:class:`~rlverify.backends.BackendOptions`: this process or
            Ray tasks); the same abstraction and bound on every backend for the same seed (as long
            as no MILP stops at ``milp_time_limit``: a stopped MILP's bound depends on its speed).
        gap: refine by the gap (see :func:`verify_abstraction`) until ``upper - (best lower bound on the worst
            case) <= gap``; None: no such target.
        threshold: the property ``Pr(F<=k fail) <= threshold`` from every initial state: the verdict is "safe"
            (upper <= threshold), "unsafe (witness, sound|statistical)" (a lower bound on the worst case above it)
            or "undecided at budget"; with refinement by the gap, refinement stops as soon as it is decided.
        time_budget: seconds for the whole run; refinement by the gap (it runs when ``gap`` or ``time_budget`` is
            given) stops when it is spent and returns the best bounds so far; an abstraction in progress stops
            expanding new states (they count as failing in the upper bound, safe in the lower; a warning says so).
            None: :data:`DEFAULT_TIME_BUDGET` (600 s), without refinement unless ``gap`` asks for it.
        max_cells: refinement by the gap stops at this many initial cells.
        phi_decay: a cell bisected along ``m`` sides is abstracted in pieces with ``phi * phi_decay^m`` (at
            least 0.01; its own ``phi`` when its refinement hit its limits).
        witness: how the worst-case witness is found: ``"auto"`` (enumeration when ``|A|^k`` is small, else
            simulation), ``"enumeration"``, ``"simulation"`` or ``"none"``.
        witness_runs, witness_confidence: simulation witnesses: fresh runs and the confidence of the one-sided
            lower bound.
    """

    horizon: int
    domain: Domain | str = Domain.BOX
    template: tuple[tuple[float, ...], ...] | None = None
    phi: float = 0.1
    containment: bool = False
    initial: str | tuple[tuple[float, ...], tuple[float, ...]] | None = None
    samples: int = 400
    min_width: float | None = None
    min_split_fraction: float = 0.1
    max_parts: int = 512
    milp: Milp | str = Milp.AUTO
    milp_time_limit: float = 5.0
    max_states: int = 200_000
    seed: int = 0
    refine_everywhere: bool = True
    chunk: int = 256
    backend: BackendOptions = field(default_factory=BackendOptions)
    gap: float | None = None
    threshold: float | None = None
    time_budget: float | None = None
    max_cells: int = 512
    phi_decay: float = 0.7
    witness: WitnessMethod | str = WitnessMethod.AUTO
    witness_runs: int = 10_000
    witness_confidence: float = 0.99


#: the most hit-and-run samples per refinement step accepted (memory grows with them)
MAX_SAMPLES = 1_000_000
#: the longest horizon accepted (steps)
MAX_HORIZON = 10_000


def budget_seconds(options: AbstractionOptions) -> float:
    """The seconds the run may take: ``time_budget``, or :data:`DEFAULT_TIME_BUDGET`."""
    return DEFAULT_TIME_BUDGET if options.time_budget is None else float(options.time_budget)


def time_budget_text(options: AbstractionOptions) -> str:
    """How warnings name the time budget; the default one says which option raises it."""
    if options.time_budget is None:
        return f"the time budget of {DEFAULT_TIME_BUDGET:g} s (the default; --time-budget S / time_budget= raises it)"
    return f"the time budget of {float(options.time_budget):g} s"


#: how a worst-case witness may be found (:class:`AbstractionOptions`)
WITNESS_METHODS = values(WitnessMethod)


def _whole(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _probability(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0


def _positive_finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 < value < math.inf


def validate_options(system: ContinuousSystem, options: AbstractionOptions) -> AbstractionOptions:
    """``options`` with their named choices as members (:mod:`~rlverify.abstraction.kinds`); an
    :class:`AbstractionError` naming the first bad setting."""
    _validate_method(options)
    _validate_budgets(options)
    if options.template is not None:
        _validate_template(system, options.template)
    if options.initial is not None and not isinstance(options.initial, str):
        initial_box(system, options)  # refuses bad bounds naming them
    if not _whole(options.chunk) or options.chunk <= 0:
        raise AbstractionError(f"chunk must be a positive integer number of abstract states, got {options.chunk!r}")
    options.backend.validate()
    _validate_two_sided(options)
    return replace(options, domain=Domain(options.domain), milp=Milp(options.milp), witness=WitnessMethod(options.witness))


def _validate_template(system: ContinuousSystem, template: tuple[tuple[float, ...], ...]) -> None:
    try:
        t = np.asarray(template, dtype=np.float64)
    except (TypeError, ValueError):
        raise AbstractionError("template: expected rows of numbers, one direction per row") from None
    if t.ndim != 2 or t.shape[1] != system.n or not np.isfinite(t).all():
        raise AbstractionError(
            f"template: expected rows of {system.n} finite numbers (one direction over "
            f"{list(system.variables)} per row), got {template!r}"
        )


def _validate_two_sided(options: AbstractionOptions) -> None:
    """The gap, threshold, time budget, cells, phi decay and witness settings."""
    for name in ("gap", "threshold"):
        value = getattr(options, name)
        if value is not None and not _probability(value):
            raise AbstractionError(f"{name} must be a probability in [0, 1], got {value!r}")
    tb = options.time_budget
    if tb is not None and not _positive_finite(tb):
        raise AbstractionError(f"time_budget must be a positive finite number of seconds, got {tb!r}")
    if not _whole(options.max_cells) or options.max_cells <= 0:
        raise AbstractionError(f"max_cells must be a positive integer, got {options.max_cells!r}")
    if not (isinstance(options.phi_decay, (int, float)) and 0.0 < options.phi_decay <= 1.0):
        raise AbstractionError(f"phi_decay must be in (0, 1], got {options.phi_decay!r}")
    _validate_witness(options)


def _validate_witness(options: AbstractionOptions) -> None:
    """The witness method, runs and confidence."""
    if options.witness not in WITNESS_METHODS:
        raise AbstractionError(f"witness must be one of {', '.join(WITNESS_METHODS)}, got {options.witness!r}")
    if not _whole(options.witness_runs) or not 1 <= options.witness_runs <= MAX_SAMPLES * 10:
        raise AbstractionError(f"witness_runs must be an integer in [1, {MAX_SAMPLES * 10:,}], got {options.witness_runs!r}")
    c = options.witness_confidence
    if not (isinstance(c, (int, float)) and 0.0 < c < 1.0):
        raise AbstractionError(f"witness_confidence must be in (0, 1), got {c!r}")


def _validate_method(options: AbstractionOptions) -> None:
    """The horizon, phi, domain, MILP use, samples and split settings."""
    h = options.horizon
    if not _whole(h) or h <= 0:
        raise AbstractionError(f"horizon must be a positive integer number of steps, got {h!r}")
    if h > MAX_HORIZON:
        raise AbstractionError(
            f"horizon {h:,}: more than {MAX_HORIZON:,} steps, refused (the abstraction and its "
            "robust value iteration take time in every step)"
        )
    if not (isinstance(options.phi, (int, float)) and 0.0 < float(options.phi) <= 1.0):
        raise AbstractionError(f"phi (maximum probability spread) must be in (0, 1], got {options.phi!r}")
    if options.domain not in values(Domain):
        raise AbstractionError(f"domain must be 'box', 'octagon', 'template' or 'auto', got {options.domain!r}")
    if options.milp not in values(Milp):
        raise AbstractionError(f"milp must be 'auto', 'always' or 'never', got {options.milp!r}")
    _validate_split(options)


def _validate_split(options: AbstractionOptions) -> None:
    """The samples, split fraction and minimum width."""
    if not _whole(options.samples) or not 2 <= options.samples <= MAX_SAMPLES:
        raise AbstractionError(
            f"samples (hit-and-run samples per refinement step) must be an integer in "
            f"[2, {MAX_SAMPLES:,}], got {options.samples!r}"
        )
    if not (isinstance(options.min_split_fraction, (int, float)) and 0.0 <= options.min_split_fraction < 0.5):
        raise AbstractionError(f"min_split_fraction must be in [0, 0.5), got {options.min_split_fraction!r}")
    if options.min_width is not None and not (
        isinstance(options.min_width, (int, float)) and 0.0 < options.min_width < math.inf
    ):
        raise AbstractionError(f"min_width must be a positive finite number (state units), got {options.min_width!r}")


def _validate_budgets(options: AbstractionOptions) -> None:
    """The MILP time limit, the part and state budgets and the seed."""
    if not (isinstance(options.milp_time_limit, (int, float)) and 0.0 < options.milp_time_limit < math.inf):
        raise AbstractionError(f"milp_time_limit must be a positive finite number of seconds, got {options.milp_time_limit!r}")
    for name in ("max_parts", "max_states"):
        value = getattr(options, name)
        if not _whole(value) or value <= 0:
            raise AbstractionError(f"{name} must be a positive integer, got {value!r}")
    if not _whole(options.seed) or not 0 <= options.seed < 2**63:
        raise AbstractionError(
            f"seed must be a whole number in [0, 2**63-1] (numpy's generators take no negative seed), got {options.seed!r}"
        )


def make_template(system: ContinuousSystem, options: AbstractionOptions) -> Template:
    """The template of ``options.domain`` over the system's variables.

    ``domain="template"`` takes ``options.template``, else the system's documented default template.

    Raises:
        AbstractionError: ``domain="template"`` without directions for a system that declares no default.
    """
    directions = None
    if options.domain == Domain.TEMPLATE:
        if options.template is not None:
            directions = np.asarray(options.template, dtype=np.float64)
        else:
            directions = system.default_template()
            if directions is None:
                raise AbstractionError(
                    f"domain 'template' needs template= directions: a (k, {system.n}) matrix over "
                    f"{list(system.variables)}, one direction per row (CLI: --template FILE); {system.name} "
                    "declares no default template"
                )
            log.info("domain 'template': %s's default template %s", system.name, directions.tolist())
    return Template.named(options.domain, system.variables, directions)


def initial_box(system: ContinuousSystem, options: AbstractionOptions) -> tuple[np.ndarray, np.ndarray]:
    """The initial box, validated against the system's state domain."""
    if options.initial is None or isinstance(options.initial, str):
        lo, hi = system.initial_region(options.initial)
    else:
        try:
            lo, hi = (np.asarray(v, dtype=np.float64) for v in options.initial)
        except (TypeError, ValueError):
            raise DomainError(f"initial region must be a name or a pair of bound vectors, got {options.initial!r}") from None
        if lo.shape != (system.n,) or hi.shape != (system.n,):
            raise DomainError(
                f"initial region bounds must have {system.n} values ({list(system.variables)}), got {lo.shape} and {hi.shape}"
            )
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            i = int(np.argmax(~(np.isfinite(lo) & np.isfinite(hi))))
            raise DomainError(
                f"initial region: the bounds of {system.variables[i]} must be finite numbers, got [{lo[i]}, {hi[i]}]"
            )
        if (lo > hi).any():
            i = int(np.argmax(lo > hi))
            raise DomainError(f"initial region: lower bound {lo[i]} of {system.variables[i]} exceeds upper bound {hi[i]}")
    return lo, hi
