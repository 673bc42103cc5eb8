"""The stages of importance splitting: runs advanced in lockstep until they cross a level or are decided
(:class:`Runner`), their counter-based keys, residual resampling, fixed effort over given levels and the pilot that
chooses levels (see :mod:`rlverify.statistical.splitting`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.properties import PathProperty
from rlverify.statistical.rng import run_keys, uniforms
from rlverify.statistical.step import Moves, Stepper, decide

__all__ = [
    "CROSSED",
    "FAILED",
    "PILOT_REPETITION",
    "STALLED",
    "UNDECIDED",
    "FixedEffort",
    "Initial",
    "Runner",
    "Stage",
    "fixed_effort",
    "pilot",
    "resample",
    "stage_key",
    "stage_keys",
]

RESAMPLE_STREAM = 3  # (the step's streams: rlverify.statistical.step)
PILOT_REPETITION = 1 << 40  # key index of the pilot (estimation repetitions are 0 .. R-1)
#: outcomes of a stage run
CROSSED, FAILED, STALLED, UNDECIDED = 1, 0, 2, -1

#: ``initial(repetitions, n)``: the start states ``(R * n, ...)`` and steps ``(R * n,)`` of ``n`` runs per repetition
Initial = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


@dataclass
class Stage:
    """The outcome of simulating stage runs: per run ``outcome`` (CROSSED/FAILED/STALLED/UNDECIDED),
    the entrance ``states``/``t`` of crossing runs (in run order), ``peak`` level value (pilot), and steps."""

    outcome: np.ndarray
    states: np.ndarray
    t: np.ndarray
    peak: np.ndarray
    steps: int
    hopeless: int = 0  # runs failed because they reached a state from which no policy reaches `right`


class Runner:
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

    def run(self, states: np.ndarray, t: np.ndarray, keys: np.ndarray, threshold: float, *, track_peak: bool = False) -> Stage:
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
        return Stage(outcome, ent_s[hit], ent_t[hit], peak, steps, hopeless)

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


def stage_key(base: np.uint64, reps: np.ndarray, stage: int) -> np.ndarray:
    """``(len(reps),)`` keys of ``stage`` in each repetition of ``reps`` (run ``i``'s key: ``run_keys(stage_key, i)``;
    the resampling after the stage uses the stage key itself, on its own stream)."""
    rep_keys = run_keys(base, np.asarray(reps, dtype=np.int64))
    return run_keys(rep_keys, np.full(len(rep_keys), stage, dtype=np.int64))


def stage_keys(base: np.uint64, reps: np.ndarray, stage: int, n: int) -> np.ndarray:
    """``(len(reps) * n,)`` keys of runs ``0..n-1`` of ``stage`` in each repetition of ``reps``."""
    keys = stage_key(base, reps, stage)
    return run_keys(np.repeat(keys, n), np.tile(np.arange(n, dtype=np.int64), len(keys)))


def resample(hits: int, n: int, key: np.uint64) -> np.ndarray:
    """``(n,)`` indices into ``hits`` entrance states: each ``n // hits`` times, the remaining ``n % hits`` copies
    to distinct entrance states drawn uniformly (residual resampling: ``n / hits`` copies expected each)."""
    q, rem = divmod(n, hits)
    out = np.repeat(np.arange(hits, dtype=np.int64), q)
    if rem:
        u = uniforms(run_keys(key, np.arange(hits, dtype=np.int64)), 0, RESAMPLE_STREAM)
        order = np.argsort(u, kind="stable")
        out = np.concatenate([out, np.sort(order[:rem])])
    return out


@dataclass
class FixedEffort:
    """What fixed-effort splitting measured, and what its runs did."""

    fractions: np.ndarray  # (R, m + 1) crossing fraction per repetition and stage
    hits: list[int]
    steps: int
    undecided: int
    stalled: int
    hopeless: int


def fixed_effort(
    runner: Runner,
    levels: Sequence[float],
    reps: np.ndarray,
    n: int,
    base: np.uint64,
    initial: Initial,
    progress: Callable[[int, int], None] | None = None,
) -> FixedEffort:
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
        keys = stage_keys(base, reps[alive], j, n)
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
            pick = resample(int(hi - lo), n, stage_key(base, reps[r : r + 1], j)[0])
            nxt_s.append(res.states[lo:hi][pick])
            nxt_t.append(res.t[lo:hi][pick])
        alive = new_alive
        if not alive.any():
            break
        states, t = np.concatenate(nxt_s), np.concatenate(nxt_t)
    return FixedEffort(fractions, hits_total, decisions, undecided, stalled, hopeless)


def pilot(
    runner: Runner,
    initial: Initial,
    base: np.uint64,
    n: int,
    max_levels: int,
    fraction: float,
) -> tuple[tuple[float, ...], int]:
    """Thresholds by adaptive multilevel splitting on runs independent of the estimation's: each threshold is the
    ``1 - fraction`` quantile of the highest level value the stage's ``n`` runs reach (at most ``max_levels``); the
    same runs (same keys) are then replayed to the threshold for their entrance states. Returns the thresholds and the
    pilot's steps."""
    reps = np.array([PILOT_REPETITION], dtype=np.int64)
    states, t = initial(reps, n)
    levels: list[float] = []
    steps = 0
    current = float(runner.level_value(states).max())  # a threshold the start states already reach is no level
    for j in range(max_levels + 1):
        keys = stage_keys(base, reps, j, n)
        full = runner.run(states, t, keys, math.inf, track_peak=True)
        steps += full.steps
        peaks = np.sort(full.peak)
        if (peaks == math.inf).mean() >= fraction or j == max_levels:
            break
        q = peaks[min(n - 1, math.floor((1.0 - fraction) * n))]
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
        pick = resample(hits, n, stage_key(base, reps, j)[0])
        states, t = crossed.states[pick], crossed.t[pick]
    return tuple(levels), steps
