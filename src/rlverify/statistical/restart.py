"""RESTART (Villen-Altamirano) for importance splitting: its levels and splitting factors, and the estimator over
all repetitions in lockstep (see :mod:`rlverify.statistical.splitting`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlverify.errors import OptionError
from rlverify.statistical.rng import run_keys
from rlverify.statistical.stages import PILOT_REPETITION, Initial, Runner, fixed_effort, stage_keys
from rlverify.statistical.step import Moves

__all__ = ["MAX_SPLIT_PRODUCT", "RESTART_STAGE", "Restart", "restart", "restart_levels"]

RESTART_STAGE = 1 << 30  # key index of RESTART's main trials (fixed-effort stages are 0 .. m)
#: RESTART: the largest product of splitting factors (a target hit's weight; exact in int64 and float64)
MAX_SPLIT_PRODUCT = 2**53


def restart_levels(
    runner: Runner,
    levels: tuple[float, ...],
    splits: tuple[int, ...] | None,
    n: int,
    base: np.uint64,
    initial: Initial,
    starts: np.ndarray,
    warnings: list[str],
) -> tuple[tuple[float, ...], tuple[int, ...], int]:
    """RESTART's levels (those any start state already reaches are dropped: every main trial starts below ``l_1``, which
    the estimator hits / (n prod k_j) assumes) and splitting factors (``splits``, or ``round(1 / p_j)`` from a
    one-repetition fixed-effort pass of ``n`` runs); returns them and the pass's steps."""
    keep = _below_start(runner, levels, starts, warnings)
    new = tuple(levels[i] for i in keep)
    if splits is not None:
        return new, tuple(int(splits[i]) for i in keep), 0
    fe = fixed_effort(runner, new, np.array([PILOT_REPETITION + 1]), n, base, initial)
    p = fe.fractions[0, 1:]  # P(cross l_{j+1} | l_j) for j = 1..m (the last: the target from l_m)
    return new, tuple(int(min(100, max(1, round(1.0 / x)))) if x > 0 else 100 for x in p), fe.steps


def _below_start(runner: Runner, levels: tuple[float, ...], starts: np.ndarray, warnings: list[str]) -> list[int]:
    """The positions of the levels above every start state's level value (the others dropped, with a warning)."""
    start_value = float(runner.level_value(starts).max())
    keep = [i for i, x in enumerate(levels) if x > start_value]
    if len(keep) < len(levels):
        dropped = [levels[i] for i in range(len(levels)) if i not in keep]
        warnings.append(
            f"RESTART starts below its first level: dropped levels {dropped} "
            f"that a start state (level value {start_value:g}) already reaches"
        )
    return keep


@dataclass
class Restart:
    """What RESTART estimated, and what its runs did."""

    products: np.ndarray  # (R,) per-repetition estimates
    hits: list[int]  # up-crossings per level, then target hits (weighted)
    steps: int
    undecided: int
    stalled: int
    hopeless: int


@dataclass
class _Live:
    """RESTART's live runs, in lockstep: states, global steps, keys, repetition, the level a copy was born at (0: a
    main trial), and the region (the number of thresholds at or below the level value) before and after this step."""

    states: np.ndarray
    t: np.ndarray
    keys: np.ndarray
    rep: np.ndarray
    birth: np.ndarray
    region: np.ndarray
    next_region: np.ndarray

    def take(self, keep: np.ndarray) -> None:
        """Only the runs at positions ``keep``."""
        self.states, self.t, self.keys, self.rep, self.birth = (
            self.states[keep],
            self.t[keep],
            self.keys[keep],
            self.rep[keep],
            self.birth[keep],
        )
        self.region, self.next_region = self.region[keep], self.next_region[keep]

    def split(self, j: int, factor: int, crossings: np.ndarray, local: int) -> None:
        """Every run that up-crosses level ``j`` in this step gets ``factor - 1`` copies born at ``j`` (counted in
        ``crossings[j - 1]``); their keys derive from the run's key, the step ``local`` and the copy."""
        up = np.flatnonzero((self.region < j) & (self.next_region >= j))
        if not len(up) or factor == 1:
            return
        crossings[j - 1] += len(up)
        c = factor - 1
        src = np.repeat(up, c)
        idx = np.tile(np.arange(1, c + 1, dtype=np.int64), len(up))
        child = run_keys(run_keys(self.keys[src], np.full(len(src), local, dtype=np.int64)), idx * 1024 + j)
        self.states = np.concatenate([self.states, self.states[src]])
        self.t, self.keys = np.concatenate([self.t, self.t[src]]), np.concatenate([self.keys, child])
        self.rep, self.region = np.concatenate([self.rep, self.rep[src]]), np.concatenate([self.region, self.region[src]])
        self.next_region, self.birth = (
            np.concatenate([self.next_region, self.next_region[src]]),
            np.concatenate([self.birth, np.full(len(src), j)]),
        )

    def moved(self, moves: Moves) -> None:
        """Only the runs that moved, in their successor states one step later."""
        self.t, self.keys, self.rep, self.birth, self.region = (
            moves.select(self.t) + 1,
            moves.select(self.keys),
            moves.select(self.rep),
            moves.select(self.birth),
            moves.select(self.region),
        )
        self.states = moves.successors


def restart(
    runner: Runner,
    levels: tuple[float, ...],
    splits: tuple[int, ...],
    reps: np.ndarray,
    n: int,
    base: np.uint64,
    initial: Initial,
    max_live: int,
    progress: Callable[[int, int], None] | None = None,
) -> Restart:
    """RESTART (Villen-Altamirano): ``n`` main trials per repetition, all runs of all repetitions in lockstep. A run
    that up-crosses ``l_j`` is split into ``k_j`` copies; the ``k_j - 1`` new ones (born at ``j``) die when their level
    value falls below ``l_j``. A run reaching the target from region ``c`` counts ``prod_{j > c} k_j`` hits (the copies it
    would split into). Estimate per repetition: hits / (n prod k_j) (unbiased; the start is below ``l_1``)."""
    m = len(levels)
    thr = np.asarray(levels, dtype=np.float64)
    k = np.asarray(splits, dtype=np.int64)
    tail = _tails(splits, k)
    R = len(reps)
    states, t = initial(reps, n)
    keys = stage_keys(base, reps, RESTART_STAGE, n)
    _, value, _ = runner.classify(states, t)
    region = np.searchsorted(thr, value, side="right")  # thresholds at or below the level value
    live = _Live(states, t, keys, np.repeat(np.arange(R), n), np.zeros(len(keys), dtype=np.int64), region, region)
    hits = np.zeros(R, dtype=np.float64)
    crossings = np.zeros(m + 1, dtype=np.int64)
    steps = undecided = stalled = hopeless = 0
    local = 0
    while len(live.keys):
        violated, value, doomed = runner.classify(live.states, live.t)
        hopeless += int(doomed.sum())
        live.next_region = np.searchsorted(thr, value, side="right")
        target = np.isposinf(value)
        if target.any():
            np.add.at(hits, live.rep[target], tail[live.region[target]])
            crossings[m] += int(tail[live.region[target]].sum())
        died = _died(live.birth, value, thr)  # a copy below the level it was born at
        open_ = ~target & ~violated & (live.t >= runner.sim.max_steps)
        undecided += int(open_.sum())
        live.take(np.flatnonzero(~(target | violated | died | open_)))
        # up-crossings: level by level, every copy present splits again at each higher level crossed
        for j in range(1, m + 1):
            live.split(j, int(k[j - 1]), crossings, local)
        live.region = live.next_region
        _check_live(len(live.keys), max_live, splits)
        if not len(live.keys):
            break
        moves = runner.step(live.states, live.keys, local)
        stalled += 0 if moves.stalled is None else len(moves.stalled)
        live.moved(moves)
        steps += len(live.keys)
        local += 1
    if progress:
        progress(1, 1)
    return Restart(hits / (n * tail[0]), [int(x) for x in crossings], steps, undecided, stalled, hopeless)


def _tails(splits: tuple[int, ...], k: np.ndarray) -> np.ndarray:
    """``(m + 1,)`` int64: ``tail[c] = prod_{j > c} k_j`` (levels numbered 1..m), a hit's weight from region ``c``.

    Raises:
        OptionError: the factors multiply to more than :data:`MAX_SPLIT_PRODUCT`.
    """
    product = math.prod(int(x) for x in splits)
    if product > MAX_SPLIT_PRODUCT:
        raise OptionError(
            f"RESTART: the splitting factors {list(splits)} multiply to {product:.3g}, more than "
            f"{MAX_SPLIT_PRODUCT:.3g} (a hit's weight would not be exact): give smaller factors or fewer "
            "levels"
        )
    m = len(splits)
    tail = np.ones(m + 1, dtype=np.int64)
    for c in range(m - 1, -1, -1):
        tail[c] = tail[c + 1] * k[c]
    return tail


def _died(birth: np.ndarray, value: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """``(N,)`` bool: a copy whose level value fell below the level it was born at (no level: none)."""
    if not len(thr):
        return np.zeros(len(birth), dtype=bool)
    return (birth > 0) & (value < thr[np.maximum(birth - 1, 0)])


def _check_live(live: int, max_live: int, splits: tuple[int, ...]) -> None:
    """Refuse more than ``max_live`` live runs (:class:`OptionError`: the factors are too large)."""
    if live > max_live:
        raise OptionError(
            f"RESTART: {live:,} live runs (more than max_live={max_live:,}): the splitting "
            f"factors {list(splits)} are too large for these levels; give smaller ones or fewer levels"
        )
