"""Refinement of an abstract state into parts with narrow action-probability intervals.

Each step (as in Bacci & Parker 2022, Sect. 4.3, reordered to save work): compute cheap sound
bounds (interval + linear relaxation) and accept the part if their spread is at most ``phi``;
otherwise sample the polytope by hit-and-run and evaluate the network on the whole batch: if the
sampled spread (an under-estimate of the true spread) exceeds ``phi``, split; else tighten by MILP
where needed and split only if the bounds are still wider than ``phi``. The decisions are those of
sampling first (sound bounds always contain the sampled values), without sampling the parts that
are accepted. The split axis and point minimise the weighted binary cross-entropy between the
sampled probabilities of the widest action and the two sides of the split; a minimum split size
keeps parts from becoming slivers.

Many polytopes are refined side by side (:func:`refine_many`): their cheap bounds, samples and splits are
computed in batches, with the same parts as refining one polytope at a time.

Soundness never depends on the samples: every accepted part carries sound bounds.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from rlverify.abstraction.domains import Polytope, sample_many, split_many
from rlverify.abstraction.kinds import Milp
from rlverify.abstraction.network_bounds import NetworkBounder, ProbabilityBounds

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RefinementOptions:
    """Settings of :func:`refine`.

    Attributes:
        phi: maximum probability spread of an accepted part, in (0, 1].
        samples: hit-and-run samples per part (the paper uses 1000).
        min_width: smallest width (state units, along a normalised axis) that may still be split.
        min_split_fraction: each side of a split keeps at least this fraction of the axis width.
        max_parts: at most this many parts per abstract state (then parts are accepted as they are).
        milp: ``"auto"`` (the cheapest sound bounds within ``phi``: interval propagation, else the
            linear relaxation, MILP only for parts whose linear bounds are wider than ``phi`` and that
            cannot be split further; measured: on 2x64 networks one MILP pair costs ~0.5-1.5 s while
            a split costs ~5 ms, so splitting first is 5-10x faster overall), ``"always"`` (MILP for
            every accepted part: the tightest intervals, as the paper) or ``"never"``.
        bins: number of probability bins for sample weighting.
        interval_spread: interval-propagation bounds are kept (without the tighter, ~5x dearer
            linear relaxation) when their spread is at most ``min(phi, interval_spread)``; a larger
            value is faster but looser where probabilities are small (the bound multiplies them).
    """

    phi: float = 0.1
    samples: int = 400
    min_width: float = 1e-3
    min_split_fraction: float = 0.1
    max_parts: int = 512
    milp: Milp | str = Milp.AUTO
    bins: int = 10
    interval_spread: float = 1e-2


@dataclass
class RefinementStats:
    """Time (s) and counts accumulated over refinements."""

    bounds_time: float = 0.0
    refine_time: float = 0.0
    splits: int = 0
    milp_parts: int = 0
    parts: int = 0
    unresolved: int = 0  # parts accepted with spread > phi (minimum size or budget reached)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Part:
    """A refined part: its polytope and sound action-probability bounds."""

    polytope: Polytope
    bounds: ProbabilityBounds


def refine(
    poly: Polytope,
    bounder: NetworkBounder,
    options: RefinementOptions,
    rng: np.random.Generator,
    stats: RefinementStats | None = None,
) -> list[Part]:
    """Partition ``poly`` into parts whose probability spread is at most ``phi`` where possible
    (:func:`refine_many` of the one polytope).

    Returns:
        Parts covering ``poly`` (their union contains it), each with sound bounds.
    """
    return refine_many([poly], bounder, options, [rng], stats)[0]


@dataclass(frozen=True)
class _NeedBounds:
    """A refinement waits for the cheap bounds of ``poly``; every polytope in ``later`` (its stack) needs them too."""

    poly: Polytope
    later: list[Polytope]


@dataclass(frozen=True)
class _NeedSamples:
    """A refinement waits for samples of ``poly`` (drawn with ``rng``) and the network's probabilities at them."""

    poly: Polytope
    rng: np.random.Generator


@dataclass(frozen=True)
class _NeedSplit:
    """A refinement waits for ``poly`` split where :func:`choose_split` puts the cut (samples ``x``, probabilities
    ``y`` of the action split on, the ``splittable`` axes): the two sides (None: empty)."""

    poly: Polytope
    x: np.ndarray
    y: np.ndarray
    splittable: np.ndarray


_Need = _NeedBounds | _NeedSamples | _NeedSplit
#: what a refinement is sent back: bounds, ``(samples, probabilities)``, or the two sides of a split
_Answer = ProbabilityBounds | tuple[np.ndarray, np.ndarray] | tuple[Polytope | None, Polytope | None] | None


def _refinement(
    poly: Polytope,
    bounder: NetworkBounder,
    options: RefinementOptions,
    rng: np.random.Generator | Callable[[], np.random.Generator],
    stats: RefinementStats,
) -> Generator[_Need, Any, list[Part]]:
    """:func:`refine` of one polytope as a coroutine: it yields what it needs (the cheap bounds of a polytope,
    samples and the network's probabilities at them, or a split) and is sent the answer, so that
    :func:`refine_many` serves many refinements with one batched pass; returns the parts. ``rng``: the generator,
    or a function making it (called when the first sample is needed: most polytopes need none)."""
    q = poly.template.axes
    qnorm = np.linalg.norm(q, axis=1)
    generator = _LazyGenerator(rng)
    todo = [poly]
    done: list[Part] = []
    while todo:
        p = todo.pop()
        splittable = p.widths() / qnorm > 2 * options.min_width
        can_split = bool(splittable.any()) and len(done) + len(todo) + 2 <= options.max_parts  # within the budget
        b = yield _NeedBounds(p, todo)  # bounder.bounds(p, milp=False, enough=min(phi, interval_spread))
        sampled: tuple[np.ndarray, np.ndarray] | None = None
        if b.spread > options.phi and can_split:
            sampled = yield _NeedSamples(p, generator.get())
            x, probs = sampled
            spread = probs.max(axis=0) - probs.min(axis=0)
            if spread.max() > options.phi:  # the true spread exceeds phi: no bound can help, split
                todo.extend(_children((yield _NeedSplit(p, x, probs[:, int(np.argmax(spread))], splittable)), stats))
                continue
        if _use_milp(options, b.spread, can_split):
            b = _milp_bounds(bounder, p, stats)
        if b.spread > options.phi and can_split:
            if sampled is None:  # accepted on interval bounds, then MILP came out (rounding) wider
                sampled = yield _NeedSamples(p, generator.get())
            x, probs = sampled
            todo.extend(_children((yield _NeedSplit(p, x, probs[:, int(np.argmax(b.upper - b.lower))], splittable)), stats))
            continue
        done.append(_accept(p, b, options, stats))
    stats.parts += len(done)
    return done


def _accept(p: Polytope, b: ProbabilityBounds, options: RefinementOptions, stats: RefinementStats) -> Part:
    """``p`` as a part with bounds ``b`` (counted unresolved when their spread is above ``phi``)."""
    if b.spread > options.phi:
        stats.unresolved += 1
    return Part(p, b)


class _LazyGenerator:
    """A refinement's random generator, made by its function when the first sample is needed (most need none)."""

    def __init__(self, rng: np.random.Generator | Callable[[], np.random.Generator]) -> None:
        self.rng = rng

    def get(self) -> np.random.Generator:
        if not isinstance(self.rng, np.random.Generator):
            self.rng = self.rng()
        return self.rng


def _use_milp(options: RefinementOptions, spread: float, can_split: bool) -> bool:
    """Whether a part's bounds are tightened by MILP: always, or (``"auto"``) when splitting cannot help any more
    (minimum size or budget) and the interval bounds are wider than ``phi``."""
    if options.milp == Milp.ALWAYS:
        return True
    return options.milp == Milp.AUTO and spread > options.phi and not can_split


def _milp_bounds(bounder: NetworkBounder, p: Polytope, stats: RefinementStats) -> ProbabilityBounds:
    """The MILP bounds of ``p`` (timed and counted in ``stats``)."""
    t0 = time.perf_counter()
    b = bounder.bounds(p, milp=True)
    stats.bounds_time += time.perf_counter() - t0
    stats.milp_parts += 1
    return b


def refine_many(
    polys: Sequence[Polytope],
    bounder: NetworkBounder,
    options: RefinementOptions,
    rng: np.random.Generator | Sequence[np.random.Generator] | Callable[[int], np.random.Generator],
    stats: RefinementStats | None = None,
) -> list[list[Part]]:
    """:func:`refine` for each polytope, the refinements side by side: whenever every running refinement waits,
    the bounds they ask for (and those of the polytopes on their stacks, which they will ask for later) are
    computed in one batched pass (:meth:`NetworkBounder.bounds_many`), their samples in one
    (:func:`~rlverify.abstraction.domains.sample_many`), and their splits in one (:func:`choose_split_many`,
    :func:`~rlverify.abstraction.domains.split_many`). The parts are exactly those of refining one polytope
    at a time (the bounds of a polytope do not depend on the batch; each generator draws in the same order).

    ``rng``: one generator shared by all polytopes in order (their refinements then run one after another), or
    one per polytope (then each polytope's parts depend only on its own generator, whatever else is refined
    with it), or a function ``i -> `` polytope ``i``'s own generator (called only for the polytopes that need
    samples, once each).
    """
    stats = stats if stats is not None else RefinementStats()
    rngs = _generators(rng, len(polys))
    results: list[list[Part]] = [[] for _ in polys]
    queues: dict[int, deque[int]] = {}  # refinements sharing a generator, in order: one runs at a time
    for i, r in enumerate(rngs):
        queues.setdefault(id(r), deque()).append(i)
    running: dict[int, tuple[Generator[_Need, Any, list[Part]], deque[int]]] = {}
    ready: dict[int, _Answer] = {}  # refinement -> the answer to send it
    waiting: dict[int, _Need] = {}
    known: dict[int, tuple[Polytope, ProbabilityBounds]] = {}  # id -> (polytope, kept alive so ids stay unique)

    def start(queue: deque[int]) -> None:
        if queue:
            i = queue.popleft()
            running[i] = (_refinement(polys[i], bounder, options, rngs[i], stats), queue)
            ready[i] = None

    for queue in queues.values():
        start(queue)
    while ready:
        while ready:  # run each refinement until it needs something not at hand
            i, answer = ready.popitem()
            gen, queue = running[i]
            try:
                need = gen.send(answer)
            except StopIteration as stop:
                results[i] = stop.value
                del running[i]
                start(queue)
                continue
            if isinstance(need, _NeedBounds) and id(need.poly) in known:
                ready[i] = known[id(need.poly)][1]
            else:
                waiting[i] = need
        ready.update(_serve(waiting, known, bounder, options, stats))
        waiting.clear()
    return results


def _generators(
    rng: np.random.Generator | Sequence[np.random.Generator] | Callable[[int], np.random.Generator], n: int
) -> list[np.random.Generator | Callable[[], np.random.Generator]]:
    """The generator (or the function making it) of each of ``n`` refinements (see :func:`refine_many`)."""
    rngs: list[np.random.Generator | Callable[[], np.random.Generator]]
    if isinstance(rng, np.random.Generator):
        rngs = [rng] * n
    elif callable(rng):
        rngs = [partial(rng, i) for i in range(n)]  # one each: distinct, made when needed
    else:
        rngs = list(rng)
    if len(rngs) != n:
        raise ValueError(f"refine_many: {len(rngs)} generators for {n} polytopes")
    return rngs


def _serve(
    waiting: dict[int, _Need],
    known: dict[int, tuple[Polytope, ProbabilityBounds]],
    bounder: NetworkBounder,
    options: RefinementOptions,
    stats: RefinementStats,
) -> dict[int, _Answer]:
    """One batched pass for the waiting refinements: every bounds asked for (with those of the polytopes on the
    askers' stacks, which they will ask for later; all kept in ``known``) and every sample; returns the answers."""
    bounds = {i: n for i, n in waiting.items() if isinstance(n, _NeedBounds)}
    _serve_bounds(list(bounds.values()), known, bounder, options, stats)
    answers: dict[int, _Answer] = {i: known[id(n.poly)][1] for i, n in bounds.items()}
    sampled = {i: n for i, n in waiting.items() if isinstance(n, _NeedSamples)}
    if sampled:
        answers.update(_serve_samples(sampled, bounder, options, stats))
    splits = {i: n for i, n in waiting.items() if isinstance(n, _NeedSplit)}
    if splits:
        answers.update(_serve_splits(splits, options, stats))
    return answers


def _serve_bounds(
    needs: Sequence[_NeedBounds],
    known: dict[int, tuple[Polytope, ProbabilityBounds]],
    bounder: NetworkBounder,
    options: RefinementOptions,
    stats: RefinementStats,
) -> None:
    """The cheap bounds of every polytope asked for and of those on the askers' stacks, in one batch, into ``known``."""
    batch = {id(p): p for need in needs for p in (need.poly, *need.later)}
    todo = [p for key, p in batch.items() if key not in known]
    if not todo:
        return
    t0 = time.perf_counter()
    for p, b in zip(todo, bounder.bounds_many(todo, enough=min(options.phi, options.interval_spread)), strict=True):
        known[id(p)] = (p, b)
    stats.bounds_time += time.perf_counter() - t0


def _serve_samples(
    sampled: dict[int, _NeedSamples], bounder: NetworkBounder, options: RefinementOptions, stats: RefinementStats
) -> dict[int, _Answer]:
    """The samples of every polytope asked for, in one batch, with the network's probabilities at them."""
    t0 = time.perf_counter()
    xs = sample_many([n.poly for n in sampled.values()], options.samples, [n.rng for n in sampled.values()])
    answers: dict[int, _Answer] = {i: (x, bounder(x)) for i, x in zip(sampled, xs, strict=True)}
    stats.refine_time += time.perf_counter() - t0
    return answers


def _serve_splits(splits: dict[int, _NeedSplit], options: RefinementOptions, stats: RefinementStats) -> dict[int, _Answer]:
    """Every split asked for, in one batch: where to cut (:func:`choose_split_many`), then both sides."""
    t0 = time.perf_counter()
    needs = list(splits.values())
    cuts = choose_split_many(
        [n.poly for n in needs], [n.x for n in needs], [n.y for n in needs], [n.splittable for n in needs], options
    )
    sides = split_many([n.poly for n in needs], [a for a, _ in cuts], [v for _, v in cuts])
    answers: dict[int, _Answer] = dict(zip(splits, sides, strict=True))
    stats.refine_time += time.perf_counter() - t0
    return answers


def merge_stats(into: RefinementStats, other: RefinementStats) -> RefinementStats:
    """Add the times (s, summed over workers: CPU time, not wall time) and counts of ``other`` to ``into``."""
    into.bounds_time += other.bounds_time
    into.refine_time += other.refine_time
    into.splits += other.splits
    into.milp_parts += other.milp_parts
    into.parts += other.parts
    into.unresolved += other.unresolved
    for k, v in other.extra.items():
        into.extra[k] = into.extra.get(k, 0) + v
    return into


def _children(sides: tuple[Polytope | None, Polytope | None], stats: RefinementStats) -> list[Polytope]:
    """The non-empty sides of a split, in order (counted in ``stats``)."""
    stats.splits += 1
    return [child for child in sides if child is not None]


def choose_split(
    p: Polytope, x: np.ndarray, y: np.ndarray, splittable: np.ndarray, options: RefinementOptions
) -> tuple[int, float]:
    """Axis index and split value minimising weighted binary cross-entropy (:func:`choose_split_many` of one).

    Args:
        p: the polytope; x: samples ``(m, n)``; y: sampled probability of one action ``(m,)``.
        splittable: boolean ``(k,)`` axes that may be split.

    Returns:
        ``(axis, value)``: split ``p`` at ``Q[axis] . x = value`` (within the minimum split fraction).
    """
    return choose_split_many([p], [x], [y], [splittable], options)[0]


def _widest(p: Polytope) -> tuple[int, float]:
    """No axis to choose: bisect the widest (relative to the axis norm)."""
    widest = int(np.argmax(p.widths() / np.linalg.norm(p.template.axes, axis=1)))
    return widest, float(0.5 * (p.lo[widest] + p.hi[widest]))


def _entropy_cuts(
    proj: np.ndarray, ys: np.ndarray, lo: np.ndarray, hi: np.ndarray, m: int, options: RefinementOptions
) -> tuple[np.ndarray, np.ndarray]:
    """Per polytope of a group and splittable axis, the least weighted cross-entropy of a cut between sorted samples
    (within the minimum split fraction) and where it cuts: ``(costs (G, K), cuts (G, K))``.

    ``proj``: the samples projected on the axes ``(G, m, K)``; ``ys``: the action's probabilities ``(G, m)``;
    ``lo``, ``hi``: the polytopes' bounds along the axes ``(G, K)``."""
    eps = 1e-7
    g = len(ys)
    width = hi - lo
    cmin, cmax = lo + options.min_split_fraction * width, hi - options.min_split_fraction * width
    yc = np.clip(ys, eps, 1 - eps)  # (G, m)
    # sample weighting: inverse frequency of the probability bin
    bins = np.minimum((yc * options.bins).astype(int), options.bins - 1)
    counts = np.bincount((bins + options.bins * np.arange(g)[:, None]).ravel(), minlength=g * options.bins)
    w = 1.0 / counts.reshape(g, options.bins)[np.arange(g)[:, None], bins]
    w /= w.sum(axis=1, keepdims=True)
    order = np.argsort(proj, axis=1)
    ps = np.take_along_axis(proj, order, axis=1)
    rows = np.arange(g)[:, None, None]
    ws, ys_sorted = w[rows, order], yc[rows, order]
    l1 = -ws * np.log(ys_sorted)  # cost of labelling a point 1 (action likely)
    l0 = -ws * np.log(1 - ys_sorted)  # cost of labelling it 0
    zero = np.zeros((g, 1, proj.shape[2]))
    c1 = np.concatenate([zero, np.cumsum(l1, axis=1)], axis=1)
    c0 = np.concatenate([zero, np.cumsum(l0, axis=1)], axis=1)
    # first t points on one side (t = 1..m-1), labelled 1 (a) or 0 (b)
    cost_a = c1[:, 1:-1] + (c0[:, -1:] - c0[:, 1:-1])
    cost_b = c0[:, 1:-1] + (c1[:, -1:] - c1[:, 1:-1])
    costs = np.minimum(cost_a, cost_b)  # (G, m-1, K)
    cuts = 0.5 * (ps[:, :-1] + ps[:, 1:])
    ok = (cuts >= cmin[:, None, :]) & (cuts <= cmax[:, None, :])
    pick = np.argmin(np.where(ok, costs, np.inf), axis=1)  # (G, K)
    # all samples in a sliver near a face: cut at the allowed value nearest the best cut, and charge the
    # cost of the cut actually made
    free = np.argmin(costs, axis=1)
    gi, cols = np.arange(g)[:, None], np.arange(proj.shape[2])[None, :]
    inside = ok.any(axis=1)
    cuts_k = np.where(inside, cuts[gi, pick, cols], np.clip(cuts[gi, free, cols], cmin, cmax))
    sliver = free.copy()
    for r, col in zip(*np.nonzero(~inside), strict=True):
        sliver[r, col] = int(np.clip(np.searchsorted(ps[r, :, col], cuts_k[r, col]), 1, m - 1)) - 1
    costs_k = np.where(inside, costs[gi, pick, cols], costs[gi, np.where(inside, pick, sliver), cols])
    return costs_k, cuts_k


def _split_groups(
    polys: Sequence[Polytope], ys: Sequence[np.ndarray], splittables: Sequence[np.ndarray], out: list[tuple[int, float]]
) -> dict[tuple[int, int, bool, bytes], list[int]]:
    """The items by (template, sample count, flat probabilities, splittable axes); an item with no splittable axis
    gets its widest axis bisected in ``out`` instead."""
    groups: dict[tuple[int, int, bool, bytes], list[int]] = {}
    for i, (p, y, splittable) in enumerate(zip(polys, ys, splittables, strict=True)):
        ks = np.flatnonzero(splittable)
        if len(ks) == 0:
            out[i] = _widest(p)
            continue
        flat = float(y.max() - y.min()) < 1e-9
        groups.setdefault((id(p.template), len(y), flat, ks.tobytes()), []).append(i)
    return groups


def choose_split_many(
    polys: Sequence[Polytope],
    xs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    splittables: Sequence[np.ndarray],
    options: RefinementOptions,
) -> list[tuple[int, float]]:
    """:func:`choose_split` of each ``(polys[i], xs[i], ys[i], splittables[i])``: the polytopes with the same template,
    sample count and splittable axes are handled together, one array operation per step for all of them (each
    item's own slices: the costs and cuts are bit for bit those of one at a time)."""
    out: list[tuple[int, float]] = [(-1, 0.0)] * len(polys)
    groups = _split_groups(polys, ys, splittables, out)
    for (_, m, flat, _), idx in groups.items():
        q = polys[idx[0]].template.axes
        ks = np.flatnonzero(splittables[idx[0]])
        lo = np.array([polys[i].lo[ks] for i in idx])  # (G, K)
        hi = np.array([polys[i].hi[ks] for i in idx])
        if flat:
            costs_k = -(hi - lo) / np.linalg.norm(q[ks], axis=1)  # widest axis first
            cuts_k = 0.5 * (lo + hi)
        else:
            ys_group = np.array([ys[i] for i in idx])
            # the projections are each polytope's and axis's own matrix-vector product
            proj = np.stack([np.stack([xs[i] @ q[k] for k in ks], axis=1) for i in idx])  # (G, m, K)
            costs_k, cuts_k = _entropy_cuts(proj, ys_group, lo, hi, m, options)
        best = np.argmin(costs_k, axis=1)  # the first of equal costs, as the axes are tried in order
        for r, i in enumerate(idx):
            j = int(best[r])
            out[i] = (int(ks[j]), float(cuts_k[r, j])) if costs_k[r, j] < np.inf else _widest(polys[i])
    return out
