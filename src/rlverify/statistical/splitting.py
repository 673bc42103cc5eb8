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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rlverify.errors import OptionError, PropertyError
from rlverify.models.dynamics import choice_table, untaken_message
from rlverify.models.expressions import compile_expression
from rlverify.models.properties import Property
from rlverify.policies.base import Policy
from rlverify.results import Provenance, SplittingResult, versions
from rlverify.statistical.choices import RARE_METHODS
from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.envs import ExplicitEnv
from rlverify.statistical.properties import PathProperty
from rlverify.statistical.rng import run_keys, seed_key, uniforms
from rlverify.statistical.stats import check_unit
from rlverify.statistical.step import Moves, Stepper, bind_policy, check_labels, decide, draw_starts
from rlverify.statistical.verify import SimulatedModel, prepare, with_start_note

log = logging.getLogger(__name__)

_RESTART_STAGE = 1 << 30  # key index of RESTART's main trials (fixed-effort stages are 0 .. m)
_RESAMPLE_STREAM = 3  # (the step's streams: rlverify.statistical.step)
_PILOT_REPETITION = 1 << 40  # key index of the pilot (estimation repetitions are 0 .. R-1)
#: outcomes of a stage run
CROSSED, FAILED, STALLED, UNDECIDED = 1, 0, 2, -1
#: RESTART: the largest product of splitting factors (a target hit's weight; exact in int64 and float64)
MAX_SPLIT_PRODUCT = 2**53

Importance = Callable[[np.ndarray], np.ndarray]


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
    method: str = "splitting"
    splits: tuple[int, ...] | None = None
    max_live: int = 2_000_000
    simulation: SimulationOptions = field(default_factory=SimulationOptions)

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
            if self.method != "restart":
                raise OptionError("splits (splitting factors per level) apply to --rare restart only")
            if self.levels is None or len(self.splits) != len(self.levels):
                raise OptionError(
                    f"splits: one splitting factor per level needed ({len(self.levels or ())} levels given, "
                    f"{len(self.splits)} factors)"
                )
            if any(not _whole(k) or k < 1 for k in self.splits):
                raise OptionError(f"splits: splitting factors must be positive integers, got {list(self.splits)}")

    def _check_sizes(self) -> None:
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
        check_unit("delta", self.delta)
        if self.pilot_effort is not None and (not _whole(self.pilot_effort) or not 1 <= self.pilot_effort <= self.max_live):
            raise OptionError(
                f"pilot_effort must be a positive integer up to max_live={self.max_live:,}, got {self.pilot_effort!r}"
            )
        if not _whole(self.max_levels) or self.max_levels < 0:
            raise OptionError(f"max_levels: expected a non-negative integer, got {self.max_levels!r}")
        if not 0.0 < self.pilot_fraction < 1.0:
            raise OptionError(f"pilot_fraction must be in (0, 1), got {self.pilot_fraction}")

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


# ------------------------------------------------------------------------------------------------
# importance functions


def compile_importance(text: str, features: Sequence[str]) -> Importance:
    """A numeric expression over ``features`` as ``f(observations (N, len(features)) float64) -> (N,) float64``
    (the one expression language, :func:`rlverify.models.expressions.compile_expression`; true counts 1).

    Raises:
        OptionError: a syntax error, an unknown variable (naming the known ones), another construct.
    """
    return compile_expression(text, features, option="--importance", kind="number")


def graph_distance_importance(env: ExplicitEnv, prop: PathProperty) -> np.ndarray:
    """``(S,)`` float64: minus the least number of steps from each state to a ``right`` state through ``left``
    states (over every choice of the explicit MDP, whatever the policy); ``-inf`` where none is reachable."""
    return -env.steps_to(prop.left, prop.right)


# ------------------------------------------------------------------------------------------------
# the lockstep stage simulator


@dataclass
class _Stage:
    """The outcome of simulating stage runs: per run ``outcome`` (CROSSED/FAILED/STALLED/UNDECIDED),
    the entrance ``states``/``t`` of crossing runs (in run order), ``peak`` level value (pilot), and steps."""

    outcome: np.ndarray
    states: np.ndarray
    t: np.ndarray
    peak: np.ndarray
    steps: int
    hopeless: int = 0  # runs failed because they reached a state from which no policy reaches `right`


class _Runner:
    """Advances runs of one environment and policy in lockstep until they cross a threshold or are decided (each step
    is the simulator's own, :meth:`~rlverify.statistical.step.Stepper.step`)."""

    def __init__(
        self, stepper: Stepper, prop: PathProperty, level: Callable[[np.ndarray], np.ndarray], sim: SimulationOptions
    ) -> None:
        self.stepper, self.env, self.prop, self.sim = stepper, stepper.env, prop, sim
        self.imp = level  # importance of non-right states (float64, may be -inf)

    def level_value(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` float64: +inf where ``right`` holds, else the importance."""
        right = self.prop.right.evaluate(self.env, states)
        out = self.imp(states)
        out[right] = np.inf
        return out

    def run(
        self, states: np.ndarray, t: np.ndarray, keys: np.ndarray, threshold: float, *, track_peak: bool = False
    ) -> _Stage:
        """Simulate runs from ``states`` (``(N, ...)``, at global steps ``t`` ``(N,)``, keys ``(N,)``) until each
        reaches level value ``>= threshold`` (crossed) or is decided; in batches of ``batch_size`` runs."""
        n, B = len(keys), self.sim.batch_size
        outcome = np.full(n, UNDECIDED, dtype=np.int8)
        peak = np.full(n, -np.inf)
        ent_s = np.empty_like(states)
        ent_t = np.zeros(n, dtype=np.int64)
        steps = hopeless = 0
        for b0 in range(0, n, B):
            sl = slice(b0, min(n, b0 + B))
            o, s_, t_, pk, st, h = self._batch(states[sl], t[sl].copy(), keys[sl], threshold, track_peak)
            outcome[sl], ent_s[sl], ent_t[sl], peak[sl] = o, s_, t_, pk
            steps += st
            hopeless += h
        hit = outcome == CROSSED
        return _Stage(outcome, ent_s[hit], ent_t[hit], peak, steps, hopeless)

    def classify(self, states: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(violated, value, hopeless)`` ``(N,)``: the run is decided as violated (:func:`~.step.decide`: ``left``
        false, an absorbing state, the step bound reached, a state from which no policy reaches ``right``), the
        level value (+inf where ``right`` holds, -inf where violated, else the importance), and whether it was
        violated only for being hopeless."""
        verdicts = decide(self.env, self.prop, states, t)
        value = np.where(verdicts.violated, -np.inf, self.imp(states))
        value[verdicts.right] = np.inf
        doomed = np.zeros(len(states), dtype=bool) if verdicts.hopeless is None else verdicts.hopeless
        return verdicts.violated, value, doomed

    def step(self, states: np.ndarray, keys: np.ndarray, local: int, buf: np.ndarray | None = None) -> Moves:
        """One step of undecided runs (the policy is called once on all of them); the random numbers are
        ``uniforms(keys, local, stream)``."""
        return self.stepper.step(states, keys, local, buf=buf)

    def _batch(
        self, states: np.ndarray, t: np.ndarray, keys: np.ndarray, threshold: float, track_peak: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
        n = len(keys)
        outcome = np.full(n, UNDECIDED, dtype=np.int8)
        peak = np.full(n, -np.inf)
        ent_s, ent_t = states.copy(), t.copy()
        active = np.arange(n)
        buf = self.stepper.buffer(n)
        local = 0  # steps taken in this stage (selects the random numbers together with the run key)
        steps = hopeless = 0
        while len(active):
            violated, value, doomed = self.classify(states, t)
            hopeless += int(doomed.sum())
            if track_peak:
                np.maximum.at(peak, active, value)
            crossed = value >= threshold
            failed = violated & ~crossed
            open_ = ~(crossed | failed) & (t >= self.sim.max_steps)
            done = crossed | failed | open_
            if done.any():
                idx = active[done]
                outcome[idx] = np.where(crossed[done], CROSSED, np.where(failed[done], FAILED, UNDECIDED))
                ent_s[idx], ent_t[idx] = states[done], t[done]
                keep = np.flatnonzero(~done)
                active, states, t, keys = active[keep], states[keep], t[keep], keys[keep]
                if not len(active):
                    break
            moves = self.step(states, keys, local, buf)
            if moves.stalled is not None:
                outcome[active[moves.stalled]] = STALLED
            if moves.stuck is not None:  # surely back to the same state forever: `right` never holds
                outcome[active[moves.stuck]] = FAILED
            active, t, keys, states = moves.select(active), moves.select(t) + 1, moves.select(keys), moves.successors
            steps += len(active)
            local += 1
        return outcome, ent_s, ent_t, peak, steps, hopeless


# ------------------------------------------------------------------------------------------------
# the estimator


def _stage_key(base: np.uint64, reps: np.ndarray, stage: int) -> np.ndarray:
    """``(len(reps),)`` keys of ``stage`` in each repetition of ``reps`` (run ``i``'s key: ``run_keys(stage_key, i)``;
    the resampling after the stage uses the stage key itself, on its own stream)."""
    rep_keys = run_keys(base, np.asarray(reps, dtype=np.int64))
    return run_keys(rep_keys, np.full(len(rep_keys), stage, dtype=np.int64))


def _stage_keys(base: np.uint64, reps: np.ndarray, stage: int, n: int) -> np.ndarray:
    """``(len(reps) * n,)`` keys of runs ``0..n-1`` of ``stage`` in each repetition of ``reps``."""
    keys = _stage_key(base, reps, stage)
    return run_keys(np.repeat(keys, n), np.tile(np.arange(n, dtype=np.int64), len(keys)))


def _resample(hits: int, n: int, key: np.uint64) -> np.ndarray:
    """``(n,)`` indices into ``hits`` entrance states: each ``n // hits`` times, the remaining ``n % hits`` copies
    to distinct entrance states drawn uniformly (residual resampling: ``n / hits`` copies expected each)."""
    q, rem = divmod(n, hits)
    out = np.repeat(np.arange(hits, dtype=np.int64), q)
    if rem:
        u = uniforms(run_keys(key, np.arange(hits, dtype=np.int64)), 0, _RESAMPLE_STREAM)
        order = np.argsort(u, kind="stable")
        out = np.concatenate([out, np.sort(order[:rem])])
    return out


def _student_t(delta: float, dof: int) -> float:
    from scipy.stats import t as student

    return float(student.ppf(1.0 - delta / 2.0, dof))


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
        keys = _stage_keys(base, reps, 0, n)
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

    runner: _Runner
    prop: PathProperty
    starts: np.ndarray | None
    name: str
    importance: str
    untaken: dict[str, Any]


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
    if isinstance(env, ExplicitEnv) and starts is None and len(env.initial_states()) != 1:
        raise PropertyError(
            f"{name}: the model has {len(env.initial_states())} initial states; "
            "pass starts= to choose (the simulator does not pick among them)"
        )
    binding = bind_policy(env, policy)
    check_labels(env, path.left.labels() | path.right.labels())
    untaken = choice_table(env.model, policy.actions).untaken() if isinstance(env, ExplicitEnv) else {}
    level, importance_text = _importance(env, path, options.importance)
    sim = options.simulation
    runner = _Runner(Stepper(env, policy, binding, mode=sim.mode, unavailable=sim.unavailable), path, level, sim)
    if starts is None and env.initial_box is not None:
        if options.method == "restart":
            raise OptionError(
                f"--rare restart: {name} starts anywhere in its initial region, and RESTART needs "
                "finitely many start states (it drops the levels a start state already reaches); use "
                "--rare splitting (fixed effort)"
            )
        return _Setup(runner, path, None, name, importance_text, untaken)
    starts = env.initial_states() if starts is None else np.asarray(starts)
    if len(starts) == 0:
        raise PropertyError(f"{name}: no initial state")
    return _Setup(runner, path, starts, name, importance_text, untaken)


Initial = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def _levels(setup: _Setup, initial: Initial, base: np.uint64, options: SplittingOptions) -> tuple[tuple[float, ...], str, int]:
    """The thresholds (given, checked against the highest importance of an explicit model's states; or chosen by a
    pilot), where they come from, and the pilot's decisions."""
    if options.levels is None:
        levels, steps = _pilot(setup.runner, initial, base, options)
        return levels, "pilot", steps
    levels = tuple(float(x) for x in options.levels)
    top = getattr(setup.runner.imp, "highest", None)
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
    if options.method == "splitting":
        fe = _fixed_effort(setup.runner, levels, reps, n, base, initial, progress)
        return _Estimate(
            np.prod(fe.fractions, axis=1), fe.fractions, fe.hits, fe.steps, fe.undecided, fe.stalled, fe.hopeless, levels
        )
    assert setup.starts is not None  # (a RESTART setup has its start states)
    levels, splits, steps_k = _restart_levels(setup.runner, levels, options, base, initial, setup.starts, warnings)
    rs = _restart(setup.runner, levels, splits, reps, n, base, initial, options.max_live, progress)
    return _Estimate(
        rs.products, np.zeros((R, 0)), rs.hits, rs.steps, rs.undecided, rs.stalled, rs.hopeless, levels, splits, steps_k
    )


def _splitting_warnings(est: _Estimate, options: SplittingOptions, untaken: dict[str, Any], warnings: list[str]) -> list[str]:
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
    estimate = float(products.mean())
    se = float(products.std(ddof=1)) / math.sqrt(R)
    half = _student_t(options.delta, R - 1) * se
    settings = {k: v for k, v in asdict(options).items() if k not in ("simulation", "importance")}
    settings.update(asdict(sim))
    t_sim = timings["simulate"]
    return SplittingResult(
        method="fixed-effort splitting" if est.splits is None else "RESTART",
        estimate=estimate,
        interval=(max(0.0, estimate - half), min(1.0, estimate + half)),
        splits=None if est.splits is None else tuple(int(k) for k in est.splits),
        confidence=1.0 - options.delta,
        interval_kind=f"Student t over {R} independent repetitions of the "
        f"{'product' if est.splits is None else 'RESTART'} estimator (CLT, approximate)",
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
            settings=settings,
            versions=versions(),
            warnings=_splitting_warnings(est, options, setup.untaken, warnings),
        ),
    )


@dataclass
class _FixedEffort:
    fractions: np.ndarray  # (R, m + 1) crossing fraction per repetition and stage
    hits: list[int]
    steps: int
    undecided: int
    stalled: int
    hopeless: int


def _fixed_effort(
    runner: _Runner,
    levels: Sequence[float],
    reps: np.ndarray,
    n: int,
    base: np.uint64,
    initial: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]],
    progress: Callable[[int, int], None] | None = None,
) -> _FixedEffort:
    """Fixed-effort splitting over ``levels`` for repetitions ``reps``, stage by stage, all repetitions in lockstep."""
    R = len(reps)
    thresholds = [*levels, math.inf]
    states, t = initial(reps, n)
    fractions = np.zeros((R, len(thresholds)))
    hits_total = [0] * len(thresholds)
    alive = np.ones(R, dtype=bool)  # repetitions with a hit at every stage so far
    decisions = undecided = stalled = hopeless = 0
    for j, thr in enumerate(thresholds):
        rep_of = np.repeat(np.arange(R)[alive], n)
        keys = _stage_keys(base, reps[alive], j, n)
        res = runner.run(states, t, keys, thr)
        decisions += res.steps
        hopeless += res.hopeless
        undecided += int((res.outcome == UNDECIDED).sum())
        stalled += int((res.outcome == STALLED).sum())
        crossed = res.outcome == CROSSED
        counts = np.bincount(rep_of[crossed], minlength=R)
        fractions[alive, j] = counts[alive] / n
        hits_total[j] = int(crossed.sum())
        if progress:
            progress(j + 1, len(thresholds))
        if j == len(thresholds) - 1:
            break
        # next stage's start states: residual resampling of each repetition's entrance states
        nxt_s, nxt_t = [], []
        new_alive = alive & (counts > 0)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        for r in np.flatnonzero(new_alive):
            lo, hi = offsets[r], offsets[r + 1]
            pick = _resample(int(hi - lo), n, _stage_key(base, reps[r : r + 1], j)[0])
            nxt_s.append(res.states[lo:hi][pick])
            nxt_t.append(res.t[lo:hi][pick])
        alive = new_alive
        if not alive.any():
            break
        states, t = np.concatenate(nxt_s), np.concatenate(nxt_t)
    return _FixedEffort(fractions, hits_total, decisions, undecided, stalled, hopeless)


def _restart_levels(
    runner: _Runner,
    levels: tuple[float, ...],
    options: SplittingOptions,
    base: np.uint64,
    initial: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]],
    starts: np.ndarray,
    warnings: list[str],
) -> tuple[tuple[float, ...], tuple[int, ...], int]:
    """RESTART's levels (those any start state already reaches are dropped: every main trial starts below ``l_1``, which
    the estimator hits / (n prod k_j) assumes) and splitting factors (given, or ``round(1 / p_j)`` from a
    one-repetition fixed-effort pass); returns them and the pass's steps."""
    start_value = float(runner.level_value(starts).max())
    keep = [i for i, x in enumerate(levels) if x > start_value]
    if len(keep) < len(levels):
        dropped = [levels[i] for i in range(len(levels)) if i not in keep]
        warnings.append(
            f"RESTART starts below its first level: dropped levels {dropped} "
            f"that a start state (level value {start_value:g}) already reaches"
        )
    new = tuple(levels[i] for i in keep)
    if options.splits is not None:
        return new, tuple(int(options.splits[i]) for i in keep), 0
    fe = _fixed_effort(runner, new, np.array([_PILOT_REPETITION + 1]), options.pilot_effort or options.effort, base, initial)
    p = fe.fractions[0, 1:]  # P(cross l_{j+1} | l_j) for j = 1..m (the last: the target from l_m)
    return new, tuple(int(min(100, max(1, round(1.0 / x)))) if x > 0 else 100 for x in p), fe.steps


@dataclass
class _Restart:
    products: np.ndarray  # (R,) per-repetition estimates
    hits: list[int]  # up-crossings per level, then target hits (weighted)
    steps: int
    undecided: int
    stalled: int
    hopeless: int


def _restart(
    runner: _Runner,
    levels: tuple[float, ...],
    splits: tuple[int, ...],
    reps: np.ndarray,
    n: int,
    base: np.uint64,
    initial: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]],
    max_live: int,
    progress: Callable[[int, int], None] | None = None,
) -> _Restart:
    """RESTART (Villen-Altamirano): ``n`` main trials per repetition, all runs of all repetitions in lockstep. A run
    that up-crosses ``l_j`` is split into ``k_j`` copies; the ``k_j - 1`` new ones (born at ``j``) die when their level
    value falls below ``l_j``. A run reaching the target from region ``c`` counts ``prod_{j > c} k_j`` hits (the copies it
    would split into). Estimate per repetition: hits / (n prod k_j) (unbiased; the start is below ``l_1``)."""
    sim = runner.sim
    m = len(levels)
    thr = np.asarray(levels, dtype=np.float64)
    k = np.asarray(splits, dtype=np.int64)
    product = math.prod(int(x) for x in splits)
    if product > MAX_SPLIT_PRODUCT:
        raise OptionError(
            f"RESTART: the splitting factors {list(splits)} multiply to {product:.3g}, more than "
            f"{MAX_SPLIT_PRODUCT:.3g} (a hit's weight would not be exact): give smaller factors or fewer "
            "levels"
        )
    tail = np.ones(m + 1, dtype=np.int64)  # tail[c] = prod_{j > c} k_j (levels numbered 1..m)
    for c in range(m - 1, -1, -1):
        tail[c] = tail[c + 1] * k[c]
    R = len(reps)
    states, t = initial(reps, n)
    keys = _stage_keys(base, reps, _RESTART_STAGE, n)
    rep = np.repeat(np.arange(R), n)
    birth = np.zeros(len(keys), dtype=np.int64)
    _, value, _ = runner.classify(states, t)
    region = np.searchsorted(thr, value, side="right")  # thresholds at or below the level value
    hits = np.zeros(R, dtype=np.float64)
    crossings = np.zeros(m + 1, dtype=np.int64)
    steps = undecided = stalled = hopeless = 0
    local = 0
    while len(keys):
        violated, value, doomed = runner.classify(states, t)
        hopeless += int(doomed.sum())
        new_region = np.searchsorted(thr, value, side="right")
        target = np.isposinf(value)
        if target.any():
            np.add.at(hits, rep[target], tail[region[target]])
            crossings[m] += int(tail[region[target]].sum())
        died = np.zeros(len(keys), dtype=bool)  # a copy below the level it was born at
        if m:
            died = (birth > 0) & (value < thr[np.maximum(birth - 1, 0)])
        open_ = ~target & ~violated & (t >= sim.max_steps)
        undecided += int(open_.sum())
        done = target | violated | died | open_
        keep = np.flatnonzero(~done)
        states, t, keys, rep, birth = states[keep], t[keep], keys[keep], rep[keep], birth[keep]
        region, new_region = region[keep], new_region[keep]
        # up-crossings: level by level, every copy present splits again at each higher level crossed
        for j in range(1, m + 1):
            up = np.flatnonzero((region < j) & (new_region >= j))
            if not len(up) or k[j - 1] == 1:
                continue
            crossings[j - 1] += len(up)
            c = k[j - 1] - 1
            src = np.repeat(up, c)
            idx = np.tile(np.arange(1, c + 1, dtype=np.int64), len(up))
            child = run_keys(run_keys(keys[src], np.full(len(src), local, dtype=np.int64)), idx * 1024 + j)
            states = np.concatenate([states, states[src]])
            t, keys = np.concatenate([t, t[src]]), np.concatenate([keys, child])
            rep, region = np.concatenate([rep, rep[src]]), np.concatenate([region, region[src]])
            new_region, birth = np.concatenate([new_region, new_region[src]]), np.concatenate([birth, np.full(len(src), j)])
        region = new_region
        if len(keys) > max_live:
            raise OptionError(
                f"RESTART: {len(keys):,} live runs (more than max_live={max_live:,}): the splitting "
                f"factors {list(splits)} are too large for these levels; give smaller ones or fewer levels"
            )
        if not len(keys):
            break
        moves = runner.step(states, keys, local)
        stalled += 0 if moves.stalled is None else len(moves.stalled)
        t, keys, rep, birth, region = (
            moves.select(t) + 1,
            moves.select(keys),
            moves.select(rep),
            moves.select(birth),
            moves.select(region),
        )
        states = moves.successors
        steps += len(keys)
        local += 1
    if progress:
        progress(1, 1)
    return _Restart(hits / (n * tail[0]), [int(x) for x in crossings], steps, undecided, stalled, hopeless)


def _importance(env: Any, prop: PathProperty, spec: str | Importance) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
    """The importance of run states (``(N, ...)`` -> ``(N,)`` float64) and its description."""
    features = tuple(env.features)
    if isinstance(spec, str) and spec.strip() == "auto":
        if not isinstance(env, ExplicitEnv):
            raise OptionError(
                f"--importance auto needs an explicit model (a PRISM/JANI file or benchmark); "
                f"{env.name} is simulated natively: give an expression over its features "
                f"({', '.join(features)})"
            )
        return _Table(graph_distance_importance(env, prop)), "auto: minus the graph distance (steps) to the target"
    if isinstance(spec, str):
        if not spec.strip():
            raise OptionError(
                f"--importance: empty expression; give an expression over the variables ({', '.join(features)}) or 'auto'"
            )
        f = compile_importance(spec, features)
        text = spec
    else:
        f, text = spec, getattr(spec, "__name__", "callable")
    if isinstance(env, ExplicitEnv):  # the importance of every state, once
        return _Table(_checked(f(env.observe(np.arange(env.model.num_states))), env.model.num_states, text)), text
    return (lambda states: _checked(f(env.observe(states)), len(states), text)), text


class _Table:
    """The importance of explicit states, looked up by state index; ``highest``: the largest finite value."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table
        finite = table[np.isfinite(table)]
        self.highest = float(finite.max()) if len(finite) else None

    def __call__(self, states: np.ndarray) -> np.ndarray:
        return self.table[states]


def _checked(values: Any, n: int, text: str) -> np.ndarray:
    out = np.asarray(values, dtype=np.float64)
    if out.shape != (n,):
        raise OptionError(f"--importance {text!r}: expected one value per state, got shape {out.shape}")
    if np.isnan(out).any():
        raise OptionError(f"--importance {text!r}: is NaN in some states (e.g. 0/0)")
    if np.isposinf(out).any():  # +inf is the target's level value: a state outside the target must not have it
        raise OptionError(
            f"--importance {text!r}: is +inf in some states (an overflow?); give finite values "
            "(the target's own level is above every value)"
        )
    return out.copy()


def _pilot(
    runner: _Runner,
    initial: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]],
    base: np.uint64,
    options: SplittingOptions,
) -> tuple[tuple[float, ...], int]:
    """Thresholds by adaptive multilevel splitting on runs independent of the estimation's: each threshold is the
    ``1 - pilot_fraction`` quantile of the highest level value the stage's runs reach; the same runs (same keys)
    are then replayed to the threshold for their entrance states. Returns the thresholds and the pilot's steps."""
    n = options.pilot_effort or options.effort
    reps = np.array([_PILOT_REPETITION], dtype=np.int64)
    states, t = initial(reps, n)
    levels: list[float] = []
    steps = 0
    current = float(runner.level_value(states).max())  # a threshold the start states already reach is no level
    for j in range(options.max_levels + 1):
        keys = _stage_keys(base, reps, j, n)
        full = runner.run(states, t, keys, math.inf, track_peak=True)
        steps += full.steps
        peaks = np.sort(full.peak)
        if (peaks == math.inf).mean() >= options.pilot_fraction or j == options.max_levels:
            break
        q = peaks[min(n - 1, math.floor((1.0 - options.pilot_fraction) * n))]
        above = peaks[(peaks > current) & np.isfinite(peaks)]
        if not len(above):
            break  # no run rises above the current level: the last stage goes to `right` directly
        thr = float(q) if (math.isfinite(q) and q > current) else float(above[0])
        crossed = runner.run(states, t, keys, thr)  # replay the same runs up to the threshold
        steps += crossed.steps
        hits = len(crossed.t)
        if hits == 0:  # cannot happen (the same runs reached thr above); stop defensively
            break
        levels.append(thr)
        current = thr
        pick = _resample(hits, n, _stage_key(base, reps, j)[0])
        states, t = crossed.states[pick], crossed.t[pick]
    return tuple(levels), steps
