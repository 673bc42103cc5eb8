"""Witnesses for the worst case: start states whose failure probability bounds the worst case from below.

The abstraction bounds the failure probability from above over a whole initial region; a start
state's own failure probability is a lower bound on the worst case over that region. Candidates are
sampled from the initial parts with the highest upper bounds (and their vertices, where the worst case
often is); each candidate's failure probability within ``k`` steps is then

* computed exactly (``"enumeration"``) by following every action sequence with the policy's own
  probabilities (the dynamics are deterministic: ``system.step``), when ``|A|^k`` branches per
  candidate fit the limit — exact up to floating-point rounding, which is subtracted (a few ulps per
  branch) so the reported lower end stays a lower bound;
* or estimated (``"simulation"``): every candidate is screened with a few runs, then the best one
  gets fresh runs (so that choosing it does not bias them) and a one-sided Clopper-Pearson lower
  bound at the confidence asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from rlverify.abstraction.kinds import WitnessMethod
from rlverify.confidence import clopper_pearson_lower
from rlverify.errors import AbstractionError
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.results import WorstWitness

#: branches of the probability tree enumerated at most per candidate (``|A|^k``) for an exact witness
ENUMERATION_LIMIT = 200_000
#: rows of states processed at once (bounds the memory of the enumeration)
_ROWS = 400_000

Probabilities = Callable[[np.ndarray], np.ndarray]


def exact_failure(system: ContinuousSystem, probabilities: Probabilities, starts: np.ndarray, horizon: int) -> np.ndarray:
    """``Pr(F<=horizon unsafe)`` ``(m,)`` of each start state ``(m, n)``: every action sequence, floating point.

    ``probabilities(states (N, n)) -> (N, |A|)`` is the policy on states. Branches of probability 0 are dropped
    (they add nothing); nothing else is. Rounding: each value is a sum of at most ``|A|^k`` products of ``k``
    factors, each within a relative ``2^-53`` of its exact value.
    """
    m = len(starts)
    failed = np.zeros(m)
    per = max(1, _ROWS // max(1, len(system.actions) ** max(horizon - 1, 0)))
    for a in range(0, m, per):
        failed[a : a + per] = _exact_chunk(system, probabilities, np.asarray(starts[a : a + per], dtype=np.float64), horizon)
    return failed


def _exact_chunk(system: ContinuousSystem, probabilities: Probabilities, x: np.ndarray, horizon: int) -> np.ndarray:
    n = len(x)
    owner = np.arange(n)
    mass = np.ones(n)
    failed = np.zeros(n)
    bad = system.is_unsafe(x)
    np.add.at(failed, owner[bad], mass[bad])
    x, owner, mass = x[~bad], owner[~bad], mass[~bad]
    na = len(system.actions)
    for _ in range(horizon):
        if len(x) == 0:
            break
        probs = probabilities(x)
        x = np.concatenate([system.step(x, np.full(len(x), a)) for a in range(na)])
        mass = np.concatenate([mass * probs[:, a] for a in range(na)])
        owner = np.tile(owner, na)
        bad = system.is_unsafe(x)
        np.add.at(failed, owner[bad], mass[bad])
        keep = ~bad & (mass > 0.0)
        x, owner, mass = x[keep], owner[keep], mass[keep]
    return failed


def simulate_failures(
    system: ContinuousSystem,
    probabilities: Probabilities,
    starts: np.ndarray,
    horizon: int,
    runs: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Failures ``(m,)`` (int) among ``runs`` runs from each start state ``(m, n)``, actions drawn from the policy."""
    m = len(starts)
    x = np.repeat(np.asarray(starts, dtype=np.float64), runs, axis=0)
    owner = np.repeat(np.arange(m), runs)
    failed = system.is_unsafe(x)
    for _ in range(horizon):
        live = np.flatnonzero(~failed)
        if len(live) == 0:
            break
        probs = probabilities(x[live])
        cum = np.cumsum(probs, axis=1)
        u = rng.random(len(live))[:, None] * cum[:, -1:]
        actions = np.minimum((u >= cum).sum(axis=1), probs.shape[1] - 1)
        x[live] = system.step(x[live], actions)
        failed[live] = system.is_unsafe(x[live])
    return np.bincount(owner[failed], minlength=m)


def candidates(
    boxes: Sequence[tuple[np.ndarray, np.ndarray, float]],
    initial_lo: np.ndarray,
    initial_hi: np.ndarray,
    count: int,
    rng: np.random.Generator,
    *,
    top: int = 8,
) -> np.ndarray:
    """Start states ``(c, n)`` inside the initial box: the corners and ``count`` uniform samples of each of the ``top``
    boxes ``(lo, hi, upper)`` with the highest upper bounds, plus the corners of the initial box."""
    n = len(initial_lo)
    corners = np.array(np.meshgrid(*[[0.0, 1.0]] * n, indexing="ij")).reshape(n, -1).T  # (2^n, n)
    pts = [initial_lo + corners * (initial_hi - initial_lo)]
    for lo, hi, _ in sorted(boxes, key=lambda b: -b[2])[:top]:
        pts.append(lo + corners * (hi - lo))
        pts.append(lo + rng.random((count, n)) * (hi - lo))
    out = np.clip(np.vstack(pts), initial_lo, initial_hi)
    return np.unique(out, axis=0)


def search_witness(
    system: ContinuousSystem,
    probabilities: Probabilities,
    boxes: Sequence[tuple[np.ndarray, np.ndarray, float]],
    initial_lo: np.ndarray,
    initial_hi: np.ndarray,
    horizon: int,
    *,
    method: WitnessMethod | str = WitnessMethod.AUTO,
    runs: int = 10_000,
    confidence: float = 0.99,
    seed: int = 0,
    per_box: int = 8,
    previous: WorstWitness | None = None,
) -> WorstWitness:
    """The best witness among candidates from ``boxes`` ``(lo, hi, upper)`` of the initial region (or ``previous``
    if it stays the best).

    Args:
        method: ``"auto"`` (enumeration when ``|A|^k <= ENUMERATION_LIMIT``, else simulation), ``"enumeration"``
            or ``"simulation"``.
        runs: simulation: fresh runs from the chosen candidate (screening uses ``runs // 20`` per candidate).
        confidence: of the simulation's one-sided lower bound.
    """
    rng = np.random.default_rng([seed, 7411])
    starts = candidates(boxes, initial_lo, initial_hi, per_box, rng)
    branches = len(system.actions) ** horizon
    if method == WitnessMethod.AUTO:
        method = WitnessMethod.ENUMERATION if branches <= ENUMERATION_LIMIT else WitnessMethod.SIMULATION
    examined = len(starts) + (previous.candidates if previous else 0)
    if method == WitnessMethod.ENUMERATION:
        found = _by_enumeration(system, probabilities, starts, horizon, examined, seed)
    elif method == WitnessMethod.SIMULATION:
        found = _by_simulation(system, probabilities, starts, horizon, runs, confidence, rng, examined, seed)
    else:
        raise AbstractionError(f"witness must be 'auto', 'enumeration', 'simulation' or 'none', got {method!r}")
    if previous is not None and previous.lower >= found.lower:
        return previous if math.isfinite(previous.lower) else found
    return found


def _by_enumeration(
    system: ContinuousSystem, probabilities: Probabilities, starts: np.ndarray, horizon: int, examined: int, seed: int
) -> WorstWitness:
    """The start state with the highest exact failure probability (every action sequence followed)."""
    branches = len(system.actions) ** horizon
    if branches > 10 * ENUMERATION_LIMIT:
        raise AbstractionError(
            f"witness by enumeration: {len(system.actions)}^{horizon} = {branches:,} action sequences per start "
            f"state, more than {10 * ENUMERATION_LIMIT:,}; use witness='simulation'"
        )
    p = exact_failure(system, probabilities, starts, horizon)
    i = int(np.argmax(p))
    # rounding: a sum of at most |A|^k terms (masses summing to <= 1), each a product of k + 1 roundings
    slack = (branches + horizon + 2) * 2.0**-52
    return WorstWitness(
        state=tuple(map(float, starts[i])),
        probability=float(p[i]),
        lower=max(0.0, float(p[i]) - slack),
        upper=min(1.0, float(p[i]) + slack),
        method=WitnessMethod.ENUMERATION,
        guarantee=f"exact: every one of the {branches:,} action sequences from this start state (floating point)",
        confidence=None,
        runs=None,
        candidates=examined,
        seed=seed,
    )


def _by_simulation(
    system: ContinuousSystem,
    probabilities: Probabilities,
    starts: np.ndarray,
    horizon: int,
    runs: int,
    confidence: float,
    rng: np.random.Generator,
    examined: int,
    seed: int,
) -> WorstWitness:
    """The start state with the most failures in a screening, with the one-sided lower bound of fresh runs from it."""
    screen = max(50, runs // 20)
    hits = simulate_failures(system, probabilities, starts, horizon, screen, rng)
    i = int(np.argmax(hits))
    fresh = int(simulate_failures(system, probabilities, starts[i : i + 1], horizon, runs, rng)[0])
    lower = float(clopper_pearson_lower(fresh, runs, 1.0 - confidence))  # the statistical engine's bound
    return WorstWitness(
        state=tuple(map(float, starts[i])),
        probability=fresh / runs,
        lower=lower,
        upper=None,
        method=WitnessMethod.SIMULATION,
        guarantee=(
            f"statistical: {fresh:,} failures in {runs:,} fresh runs, one-sided Clopper-Pearson lower bound at "
            f"{100 * confidence:g}% confidence"
        ),
        confidence=confidence,
        runs=runs,
        candidates=examined,
        seed=seed,
    )
