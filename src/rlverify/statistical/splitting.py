"""Rare-event estimation by importance splitting (fixed effort, and RESTART), with the policy as oracle.

The probability ``p`` of ``P=? [left U<=k right]`` (or ``F``, unbounded) is written as a product of
conditional level-crossing probabilities. With an *importance function* ``imp`` over the state and
thresholds ``l_1 < ... < l_m``, a state's *level value* is ``+inf`` where ``right`` holds, and ``imp(s)``
elsewhere; ``A_j`` is the event that a run reaches a state of level value ``>= l_j`` before it is
decided (``A_{m+1}``: it reaches ``right``, i.e. satisfies the property). The events are nested, so
``p = P(A_1) P(A_2 | A_1) ... P(A_{m+1} | A_m)``.

**Fixed effort** (Garvels 2000; Budde, D'Argenio, Hartmanns): stage ``j`` simulates exactly ``effort``
runs, in lockstep (one batched policy call per step for the live runs of all repetitions), from
entrance states of stage ``j - 1`` until each run crosses ``l_{j+1}`` (its entrance state is kept) or is
decided otherwise (violated, stalled, or still open after ``max_steps`` steps in total). The fraction
that crossed estimates the conditional probability. The next stage's ``effort`` start states are drawn
from the entrance states by *residual resampling* (each gets ``effort // hits`` copies, the remaining
``effort % hits`` copies go to distinct entrance states chosen uniformly at random): every entrance
state has ``effort / hits`` expected copies, which keeps the product of the fractions an *unbiased*
estimator of ``p`` for any importance function and any thresholds (a good one only lowers the
variance). A run carries its step count, so step bounds are decided exactly; the level value does
not include the step count (a state reached late counts like one reached early).

**RESTART** (Villen-Altamirano; ``method="restart"``): ``effort`` main trials per repetition; a run that
up-crosses ``l_j`` is split into ``k_j`` copies, the ``k_j - 1`` new ones die when they fall below ``l_j``; the
estimate ``hits / (effort * k_1 ... k_m)`` is unbiased too (see :func:`_restart`).

The interval comes from ``R`` independent repetitions of the (product) estimator: the mean plus/minus
Student's ``t_{R-1, 1-delta/2}`` times the standard error (a CLT interval: approximate; skewed products
of few repetitions may under-cover). Randomness is counter-based (:mod:`rlverify.statistical.rng`):
run ``i`` of stage ``j`` of repetition ``r`` has its own key, so results depend only on the seed.
"""

from __future__ import annotations

import itertools
import logging
import math
import numbers
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rlverify.errors import OptionError, PropertyError
from rlverify.models.dynamics import choice_table, untaken_message
from rlverify.models.properties import Property
from rlverify.policies.base import Policy
from rlverify.results import Provenance, SplittingResult, versions
from rlverify.statistical.choices import RARE_METHODS, RareMethod
from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.envs import ExplicitEnv, VectorEnv
from rlverify.statistical.importance import Importance, Level, importance_of
from rlverify.statistical.properties import PathProperty
from rlverify.statistical.restart import restart, restart_levels
from rlverify.statistical.rng import seed_key
from rlverify.statistical.simulated import SimulatedModel, check_one_start, prepare, with_start_note
from rlverify.statistical.stages import Initial, Runner, fixed_effort, pilot, stage_keys
from rlverify.statistical.stats import check_unit
from rlverify.statistical.step import bind_policy, check_labels, draw_starts

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------------
# options and result


@dataclass(frozen=True)
class SplittingOptions:
    """Settings of fixed-effort importance splitting.

    Attributes:
        importance: ``imp(state)``: an expression over the environment's features (its observation
            columns; PRISM/JANI: the model's variables), e.g. ``"x + y"`` or ``"-abs(x - ox)"``;
            ``"auto"`` (explicit models only): minus the graph distance (in steps, over every choice)
            to a state where ``right`` holds, through states where ``left`` holds; or a callable
            ``(N, len(features)) float64 -> (N,)``. Higher means closer to satisfying the property.
        levels: importance thresholds ``l_1 < ... < l_m`` (the last stage always ends at ``right``);
            None: chosen by a pilot run of adaptive multilevel splitting (see :attr:`pilot_fraction`).
        effort: runs per stage and repetition.
        repetitions: independent repetitions ``R`` (>= 2) of the product estimator.
        delta: the interval is a two-sided Student-t interval at confidence ``1 - delta``.
        pilot_effort: runs per pilot stage (default: ``effort``).
        pilot_fraction: the pilot puts each threshold at the ``1 - pilot_fraction`` quantile of the highest
            level value the pilot's runs reach (a conditional crossing probability near it per stage).
        max_levels: at most this many thresholds (pilot or given).
        method: ``splitting`` (fixed effort) or ``restart`` (RESTART: ``effort`` main trials per repetition; a run
            that up-crosses ``l_j`` is split into ``k_j`` copies, the ``k_j - 1`` new ones die when they fall below
            ``l_j``; estimate = hits / (effort * prod k_j)).
        splits: RESTART's splitting factors ``k_1..k_m`` (None: ``round(1 / p_j)`` with ``p_j`` the conditional
            crossing probabilities measured by a fixed-effort pilot pass over the levels).
        max_live: RESTART refuses to go on with more live runs than this (factors too large).
        simulation: mode, maximal run length (steps in total, over all stages), seed, batch size,
            unavailable actions, as for plain simulation.
    """

    importance: str | Importance = "auto"
    levels: tuple[float, ...] | None = None
    effort: int = 1000
    repetitions: int = 20
    delta: float = 0.05
    pilot_effort: int | None = None
    pilot_fraction: float = 0.2
    max_levels: int = 200
    method: RareMethod | str = RareMethod.SPLITTING  # text accepted at the door, a member after it
    splits: tuple[int, ...] | None = None
    max_live: int = 2_000_000
    simulation: SimulationOptions = field(default_factory=SimulationOptions)

    def __post_init__(self) -> None:
        """A method given as text becomes the member (an unknown one is refused by :meth:`validate`)."""
        if self.method in RARE_METHODS:
            object.__setattr__(self, "method", RareMethod(self.method))

    def validate(self) -> None:
        """Refuse (:class:`OptionError`, naming the option) a setting that is out of range."""
        self._check_method()
        self._check_sizes()
        self._check_levels()
        if not (isinstance(self.importance, str) or callable(self.importance)):
            raise OptionError(f"--importance: expected an expression, 'auto' or a callable, got {self.importance!r}")
        self.simulation.validate()

    def _check_method(self) -> None:
        if self.method not in RARE_METHODS:
            raise OptionError(f"--rare: expected one of {', '.join(RARE_METHODS)}, got '{self.method}'")
        if self.splits is not None:
            if self.method != RareMethod.RESTART:
                raise OptionError("splits (splitting factors per level) apply to --rare restart only")
            if self.levels is None or len(self.splits) != len(self.levels):
                raise OptionError(
                    f"splits: one splitting factor per level needed ({len(self.levels or ())} levels given, "
                    f"{len(self.splits)} factors)"
                )
            if any(not _whole(k) or k < 1 for k in self.splits):
                raise OptionError(f"splits: splitting factors must be positive integers, got {list(self.splits)}")

    def _check_sizes(self) -> None:
        self._check_runs()
        check_unit("delta", self.delta)
        if self.pilot_effort is not None and (not _whole(self.pilot_effort) or not 1 <= self.pilot_effort <= self.max_live):
            raise OptionError(
                f"pilot_effort must be a positive integer up to max_live={self.max_live:,}, got {self.pilot_effort!r}"
            )
        if not _whole(self.max_levels) or self.max_levels < 0:
            raise OptionError(f"max_levels: expected a non-negative integer, got {self.max_levels!r}")
        if not 0.0 < self.pilot_fraction < 1.0:
            raise OptionError(f"pilot_fraction must be in (0, 1), got {self.pilot_fraction}")

    def _check_runs(self) -> None:
        """Effort, repetitions and the live runs they make: positive (at least 2 repetitions), within ``max_live``."""
        if not _whole(self.effort) or self.effort < 1:
            raise OptionError(f"--effort: runs per level must be a positive integer, got {self.effort!r}")
        if not _whole(self.repetitions) or self.repetitions < 2:
            raise OptionError(
                f"--repetitions: the interval needs at least 2 independent repetitions, got {self.repetitions!r}"
            )
        if not _whole(self.max_live) or self.max_live < 1:
            raise OptionError(f"max_live: expected a positive integer, got {self.max_live!r}")
        if self.effort * self.repetitions > self.max_live:
            raise OptionError(
                f"--effort {self.effort:,} x --repetitions {self.repetitions:,} = "
                f"{self.effort * self.repetitions:,} runs per stage, more than max_live={self.max_live:,} "
                "(every stage keeps all its runs in memory, about 100 bytes each); lower --effort or "
                "--repetitions"
            )

    def _check_levels(self) -> None:
        if self.levels is not None:
            try:
                lv = [float(x) for x in self.levels]
            except (TypeError, ValueError):
                raise OptionError(f"--levels: expected numbers, got {list(self.levels)}") from None
            if any(not math.isfinite(x) for x in lv) or any(b <= a for a, b in itertools.pairwise(lv)):
                raise OptionError(f"--levels: expected finite, strictly increasing thresholds, got {list(self.levels)}")
            if len(lv) > self.max_levels:
                raise OptionError(f"--levels: {len(lv)} thresholds, more than max_levels={self.max_levels}")


def _whole(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _student_t(delta: float, dof: int) -> float:
    """The ``1 - delta/2`` quantile of Student's t with ``dof`` degrees of freedom."""
    from scipy.special import stdtrit  # lazy: scipy.special (not scipy.stats), start-up

    return float(stdtrit(dof, 1.0 - delta / 2.0))


def _student_interval(products: np.ndarray, delta: float) -> tuple[float, float, tuple[float, float]]:
    """The mean of the repetitions' estimates ``(R,)``, its standard error and the Student-t interval at confidence
    ``1 - delta`` (clipped to [0, 1])."""
    R = len(products)
    estimate = float(products.mean())
    se = float(products.std(ddof=1)) / math.sqrt(R)
    half = _student_t(delta, R - 1) * se
    return estimate, se, (max(0.0, estimate - half), min(1.0, estimate + half))


def _settings(options: SplittingOptions) -> dict[str, Any]:
    """The options a result records (the importance is its own field), with the simulation's."""
    settings = {k: v for k, v in asdict(options).items() if k not in ("simulation", "importance")}
    settings.update(asdict(options.simulation))
    return settings


def verify_splitting(
    model: SimulatedModel,
    prop: str | Property | PathProperty,
    policy: Policy,
    options: SplittingOptions | None = None,
    *,
    starts: np.ndarray | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SplittingResult:
    """Estimate a (rare) path-property probability under ``policy`` by fixed-effort importance splitting.

    Args:
        model: a resolved model, as for :func:`~rlverify.statistical.verify.verify_statistical` (a SymbolicModel, an
            ExplicitModel, a ContinuousSystem, a vectorised environment such as Racetrack).
        prop: ``P=? [F phi]``, ``[F<=k phi]``, ``[phi1 U phi2]`` or ``[phi1 U<=k phi2]`` (a Property, its text, or a
            PathProperty over an environment).
        policy: the oracle; called once per step on all live runs of a stage (all repetitions together).
        options: importance function, levels, effort, repetitions, confidence, simulation settings (default
            :class:`SplittingOptions`).
        starts: start states (default: the environment's initial states, or its initial region; several: uniform
            at random).
        progress: ``progress(stages_done, stages)`` after each stage.

    Returns:
        A :class:`SplittingResult`: the unbiased product estimate, a Student-t interval over the
        repetitions, relative error, levels, per-level crossing fractions, decisions used.

    Raises:
        PropertyError: a property that is not a reachability/until form, or has a threshold.
        OptionError: a bad importance expression (unknown variable...), levels, effort or repetitions.
    """
    options = SplittingOptions() if options is None else options
    options.validate()
    t0 = time.perf_counter()
    setup = _setup(model, prop, policy, options, starts)
    base = seed_key(options.simulation.seed)
    t_prep = time.perf_counter() - t0
    warnings: list[str] = list(setup.prop.notes)

    def initial(reps: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        keys = stage_keys(base, reps, 0, n)
        return draw_starts(setup.runner.env, setup.starts, keys), np.zeros(len(keys), dtype=np.int64)

    # ---- levels: given, or from a pilot (adaptive multilevel splitting on independent runs)
    t1 = time.perf_counter()
    levels, levels_from, pilot_decisions = _levels(setup, initial, base, options)
    t_pilot = time.perf_counter() - t1
    # ---- estimation: R independent repetitions, all in lockstep
    t2 = time.perf_counter()
    est = _estimate(setup, levels, initial, base, options, warnings, progress)
    timings = {"prepare": t_prep, "pilot": t_pilot, "simulate": time.perf_counter() - t2}
    return _splitting_result(
        setup, est, levels_from, pilot_decisions + est.pilot_steps, options, policy, warnings, timings, t0
    )


@dataclass(frozen=True)
class _Setup:
    """What a splitting estimate simulates: the runner (environment, policy, property, importance), the start
    states (None: the environment's initial box), the model's name and the choices the policy never takes."""

    runner: Runner
    prop: PathProperty
    starts: np.ndarray | None
    name: str
    level: Level
    untaken: dict[str, int]

    @property
    def importance(self) -> str:
        """How the importance was given."""
        return self.level.text


def _setup(
    model: SimulatedModel,
    prop: str | Property | PathProperty,
    policy: Policy,
    options: SplittingOptions,
    starts: np.ndarray | None,
) -> _Setup:
    env, path, name = prepare(model, prop, actions=policy.actions)
    path = with_start_note(env, path, starts)
    if path.threshold is not None:
        raise PropertyError(
            f"property '{path.text}': splitting estimates a probability; write it as P=? [...] "
            f"(a threshold {path.comparison} {path.threshold:g} is not tested by --rare)"
        )
    check_one_start(env, name, starts)
    binding = bind_policy(env, policy)
    check_labels(env, path.left.labels() | path.right.labels())
    untaken = choice_table(env.model, policy.actions).untaken() if isinstance(env, ExplicitEnv) else {}
    level = importance_of(env, path, options.importance)
    sim = options.simulation
    runner = Runner(sim.stepper(env, policy, binding), path, level.of, sim)
    return _Setup(runner, path, _start_states(env, name, starts, options), name, level, untaken)


def _start_states(env: VectorEnv, name: str, starts: np.ndarray | None, options: SplittingOptions) -> np.ndarray | None:
    """The start states: ``starts``, else the env's initial states; None: drawn in its initial box (fixed effort only).

    Raises:
        OptionError: RESTART on an initial box.
        PropertyError: no start state.
    """
    if starts is None and env.initial_box is not None:
        if options.method == RareMethod.RESTART:
            raise OptionError(
                f"--rare restart: {name} starts anywhere in its initial region, and RESTART needs "
                "finitely many start states (it drops the levels a start state already reaches); use "
                "--rare splitting (fixed effort)"
            )
        return None
    starts = env.initial_states() if starts is None else np.asarray(starts)
    if len(starts) == 0:
        raise PropertyError(f"{name}: no initial state")
    return starts


def _levels(setup: _Setup, initial: Initial, base: np.uint64, options: SplittingOptions) -> tuple[tuple[float, ...], str, int]:
    """The thresholds (given, checked against the highest importance of an explicit model's states; or chosen by a
    pilot), where they come from, and the pilot's decisions."""
    if options.levels is None:
        n = options.pilot_effort or options.effort
        levels, steps = pilot(setup.runner, initial, base, n, options.max_levels, options.pilot_fraction)
        return levels, "pilot", steps
    levels = tuple(float(x) for x in options.levels)
    top = setup.level.highest
    if top is not None and levels and levels[-1] > top:
        raise OptionError(
            f"--levels: threshold {levels[-1]:g} is above the highest importance of any state "
            f"({top:g} for {setup.importance!r}): only reaching the target itself would cross it"
        )
    return levels, "given", 0


@dataclass
class _Estimate:
    """Per-repetition estimates of fixed effort or RESTART, and what their runs did."""

    products: np.ndarray  # (R,) per-repetition estimates
    fractions: np.ndarray  # (R, m + 1) crossing fraction per repetition and stage (RESTART: (R, 0))
    hits: list[int]
    steps: int
    undecided: int
    stalled: int
    hopeless: int
    levels: tuple[float, ...]
    splits: tuple[int, ...] | None = None
    pilot_steps: int = 0  # RESTART: the fixed-effort pass that chose the splitting factors


def _estimate(
    setup: _Setup,
    levels: tuple[float, ...],
    initial: Initial,
    base: np.uint64,
    options: SplittingOptions,
    warnings: list[str],
    progress: Callable[[int, int], None] | None,
) -> _Estimate:
    """``R`` independent repetitions, all in lockstep: fixed effort, or RESTART."""
    R, n = options.repetitions, options.effort
    reps = np.arange(R, dtype=np.int64)
    if options.method == RareMethod.SPLITTING:
        fe = fixed_effort(setup.runner, levels, reps, n, base, initial, progress)
        return _Estimate(
            np.prod(fe.fractions, axis=1), fe.fractions, fe.hits, fe.steps, fe.undecided, fe.stalled, fe.hopeless, levels
        )
    assert setup.starts is not None  # (a RESTART setup has its start states)
    levels, splits, steps_k = restart_levels(
        setup.runner, levels, options.splits, options.pilot_effort or options.effort, base, initial, setup.starts, warnings
    )
    rs = restart(setup.runner, levels, splits, reps, n, base, initial, options.max_live, progress)
    return _Estimate(
        rs.products, np.zeros((R, 0)), rs.hits, rs.steps, rs.undecided, rs.stalled, rs.hopeless, levels, splits, steps_k
    )


def _splitting_warnings(est: _Estimate, options: SplittingOptions, untaken: dict[str, int], warnings: list[str]) -> list[str]:
    """``warnings`` and what the result must say about the repetitions and the runs."""
    R, sim = options.repetitions, options.simulation
    zero = int((est.products == 0).sum())
    what = "no run crossing some level" if est.splits is None else "no run reaching the target"
    warnings = list(warnings)
    if zero == R:
        warnings.append(
            f"every repetition estimated 0: the interval [0, 0] says nothing about the probability "
            f"(only that each repetition had {what}); raise --effort or add levels"
        )
    elif zero:
        warnings.append(
            f"{zero} of {R} repetitions had {what} (their estimate is 0): the "
            "estimator stays unbiased, but so many zeros mean the rare paths are barely sampled, and in "
            "practice the estimate is then likely too low and the interval too narrow; raise --effort "
            "or add levels"
        )
    if est.undecided:
        warnings.append(
            f"{est.undecided} stage runs were still undecided after {sim.max_steps} steps and count as not "
            "crossing: the estimate is of the probability within max_steps (raise --max-steps)"
        )
    if est.stalled:
        warnings.append(f"{est.stalled} stage runs stalled (the policy chose an unavailable action) and count as violated")
    if untaken:
        warnings.append(untaken_message(untaken, "states of the model"))
    for w in warnings:
        log.warning("%s", w)
    return warnings


def _splitting_result(
    setup: _Setup,
    est: _Estimate,
    levels_from: str,
    pilot_decisions: int,
    options: SplittingOptions,
    policy: Policy,
    warnings: list[str],
    timings: dict[str, float],
    t0: float,
) -> SplittingResult:
    R, sim, products = options.repetitions, options.simulation, est.products
    estimate, se, interval = _student_interval(products, options.delta)
    t_sim = timings["simulate"]
    fixed = est.splits is None
    return SplittingResult(
        method="fixed-effort splitting" if fixed else "RESTART",
        estimate=estimate,
        interval=interval,
        splits=None if est.splits is None else tuple(int(k) for k in est.splits),
        confidence=1.0 - options.delta,
        interval_kind=f"Student t over {R} independent repetitions of the "
        f"{'product' if fixed else 'RESTART'} estimator (CLT, approximate)",
        std_error=se,
        relative_error=se / estimate if estimate > 0 else math.inf,
        repetitions=R,
        effort=options.effort,
        levels=tuple(est.levels),
        levels_from=levels_from,
        level_probabilities=tuple(float(x) for x in est.fractions.mean(axis=0)),
        level_hits=tuple(int(h) for h in est.hits),
        repetition_estimates=tuple(float(x) for x in products),
        zero_repetitions=int((products == 0).sum()),
        decisions=int(est.steps),
        pilot_decisions=int(pilot_decisions),
        undecided=est.undecided,
        stalled=est.stalled,
        hopeless=est.hopeless,
        seed=sim.seed,
        mode=sim.mode,
        max_steps=sim.max_steps,
        importance=setup.importance,
        untaken_choices=setup.untaken,
        provenance=Provenance(
            property=setup.prop.text,
            model=setup.name,
            policy=getattr(policy, "name", type(policy).__name__),
            timings={
                **timings,
                "total": time.perf_counter() - t0,
                "decisions_per_second": est.steps / t_sim if t_sim > 0 else math.inf,
            },
            settings=_settings(options),
            versions=versions(),
            warnings=_splitting_warnings(est, options, setup.untaken, warnings),
        ),
    )
