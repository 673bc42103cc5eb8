"""Expected (discounted) returns of Gymnasium episodes: ``R=? [C<=k]`` and ``R{"cost"}=? [C<=k]``.

Each episode's return ``sum_{t<k} discount**t * r_t`` is summed by the episode simulator (:mod:`.episodes`) over
the steps it takes until it terminates, is truncated by the environment's time limit (its return up to there, as
SB3's ``evaluate_policy`` counts it) or reaches ``k``. Two intervals:

- ``hoeffding``: the per-step reward declared to lie in ``[lo, hi]`` (``--reward-range``): every return lies in
  ``[L, H]`` (``L = sum_t discount**t * min(lo, 0)``, ``H`` likewise), and Hoeffding's inequality gives a
  distribution-free interval at ``1 - delta``, clipped to ``[L, H]``; the sums are over the fewest of ``k``,
  ``max_steps`` and the environment's time limit (``max_episode_steps``) steps. An episode cut by ``max_steps`` is
  counted at ``L`` for the lower end and at ``H`` for the upper (sound). A return outside ``[L, H]`` proves the
  declaration wrong: refused.
- ``student-t``: no range declared: the asymptotic (central-limit) interval, *not* a guarantee, over the episodes
  whose return is known; the result says so.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from rlverify.backends import open_backend
from rlverify.errors import ModelError, OptionError, PropertyError
from rlverify.models.gym_simulator import GymSimulator
from rlverify.models.properties import Property
from rlverify.policies.base import Policy
from rlverify.results import Provenance, versions
from rlverify.statistical.choices import Method
from rlverify.statistical.jobs import Progress, SimulationJob, concat_outcomes, simulate_runs, task_runs
from rlverify.statistical.outcomes import VIOLATED, EpisodeReturn, RunOutcomes
from rlverify.statistical.results import ReturnResult
from rlverify.statistical.simulated import prepare
from rlverify.statistical.step import bind_policy
from rlverify.statistical.verify import StatisticalOptions, check_run_limit, threshold_verdict

__all__ = ["DEFAULT_EPISODES", "estimate_return", "is_return_property", "return_bounds"]

#: episodes simulated when ``runs`` is not given
DEFAULT_EPISODES = 1000


def is_return_property(prop: Property) -> bool:
    """Whether ``prop`` asks for an expected reward (``R``), the one kind :func:`estimate_return` answers."""
    return prop.operator == "R"


@dataclass(frozen=True)
class _Asked:
    """What the property asks: the reward summed, the bound, a threshold."""

    reward: str
    bound: int | None
    comparison: str | None
    threshold: float | None


def _asked(prop: Property) -> _Asked:
    """``R=? [C<=k]``, ``R=? [C]``, ``R{"name"}=...``, ``R>=x [C<=k]``; anything else refused with the forms."""
    forms = 'R=? [C<=k] (the return of the first k steps), R=? [C] (until the episode ends), R{"cost"}=? [C<=k]'
    if prop.optimality is not None:
        raise PropertyError(
            f"property '{prop.text}': Rmin/Rmax range over all policies; the simulator estimates one policy's "
            f"expected return: {forms}"
        )
    if prop.path != "C" or prop.lower_bounded or prop.reward_bound is not None:
        raise PropertyError(f"property '{prop.text}': the simulator estimates cumulative returns over episodes: {forms}")
    if prop.bound is None and prop.bound_text is not None:
        raise PropertyError(f"property '{prop.text}': the step bound must be a whole number (got '{prop.bound_text}')")
    return _Asked(prop.reward_model or "", prop.bound, prop.comparison, prop.threshold)


def return_bounds(reward_range: tuple[float, float], discount: float, steps: int) -> tuple[float, float]:
    """``(L, H)``: the least and greatest return of an episode of at most ``steps`` steps whose per-step rewards lie
    in ``reward_range`` (an episode may end at any step: the sums of the negative and the positive parts)."""
    lo, hi = reward_range
    weight = float(steps) if discount == 1.0 else (1.0 - discount**steps) / (1.0 - discount)
    return min(lo, 0.0) * weight, max(hi, 0.0) * weight


def _check_range(reward_range: tuple[float, float] | None) -> tuple[float, float] | None:
    if reward_range is None:
        return None
    lo, hi = (float(x) for x in reward_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise OptionError(f"--reward-range: expected two finite numbers LO:HI with LO <= HI, got {lo!r}:{hi!r}")
    return lo, hi


def _check_discount(discount: float) -> float:
    if isinstance(discount, bool) or not isinstance(discount, (int, float)) or not (0.0 < float(discount) <= 1.0):
        raise OptionError(f"--discount: expected a number in (0, 1], got {discount!r}")
    return float(discount)


def estimate_return(
    model: GymSimulator,
    prop: Property,
    policy: Policy,
    options: StatisticalOptions | None = None,
    *,
    discount: float = 1.0,
    reward_range: tuple[float, float] | None = None,
    progress: Progress | None = None,
) -> ReturnResult:
    """Estimate the expected (discounted) return ``prop`` (``R=? [C<=k]``) of ``policy`` on ``model`` over
    ``options.runs`` episodes (default :data:`DEFAULT_EPISODES`), at confidence ``1 - options.delta``.

    Raises:
        PropertyError: another kind of property or model; OptionError: a bad discount or range, or a method that
            estimates probabilities (the SPRT, Okamoto's bound); ModelError: a return outside the declared range.
    """
    options = StatisticalOptions(method=Method.CLOPPER_PEARSON) if options is None else options
    if not isinstance(model, GymSimulator):
        raise PropertyError(
            f"property '{prop.text}': expected returns are estimated over the episodes of a Gymnasium environment "
            "(gym:ID); a PRISM/JANI model's rewards are checked exactly by rlverify verify"
        )
    asked = _asked(prop)
    gamma, bounds = _check_discount(discount), _check_range(reward_range)
    if options.method not in (Method.OKAMOTO, Method.CLOPPER_PEARSON, Method.WILSON) or options.threshold is not None:
        raise OptionError(
            f"--method {options.method}: an expected return is estimated from a fixed number of episodes (--runs); "
            "the SPRT and the adaptive method test probabilities"
        )
    t0 = time.perf_counter()
    sim = model
    if asked.reward and asked.reward not in sim.info_keys:
        sim = replace(sim, info_keys=(*sim.info_keys, asked.reward))
    k = f"<={asked.bound}" if asked.bound is not None else ""
    env, path, name = prepare(sim, f"P=? [F{k} false]", actions=policy.actions)
    simulation = replace(options.simulation, episode_return=EpisodeReturn(asked.reward, gamma))
    simulation.validate()
    horizon, by_limit = _horizon(asked.bound, simulation.max_steps, model.max_episode_steps)
    if bounds is not None and not all(map(math.isfinite, return_bounds(bounds, gamma, horizon))):
        raise OptionError(
            f"--reward-range {bounds[0]:g}:{bounds[1]:g}: over {horizon:,} steps the return's range is not a finite "
            "number (declare the range the rewards really lie in)"
        )
    runs = options.runs if options.runs is not None else DEFAULT_EPISODES
    backend = open_backend(options.backend)
    check_run_limit(runs, options, backend)
    shared = backend.share(SimulationJob(env, policy, path, bind_policy(env, policy), None, simulation, record=("truncated",)))
    size = task_runs(backend, runs, simulation.batch_size, options.backend.tasks_per_worker)
    parts: list[RunOutcomes] = []
    done = 0
    t1 = time.perf_counter()
    while done < runs:
        count = min(size * backend.workers * options.backend.tasks_per_worker, runs - done)
        parts.append(simulate_runs(backend, shared, done, done + count, size, record=("truncated",)))
        done += count
        if progress:
            progress(done, runs)
    t_sim = time.perf_counter() - t1
    out = concat_outcomes(parts, ("truncated",))
    assert out.returns is not None
    known = (out.outcome == VIOLATED) | out.recorded["truncated"]
    truncated = int((out.recorded["truncated"] & (asked.bound is None or out.steps < asked.bound)).sum())
    values = out.returns[known]
    result = _interval(values, int((~known).sum()), options.delta, bounds, gamma, horizon, name)
    lo, hi = result[1]
    satisfied = None
    if asked.threshold is not None:
        satisfied = threshold_verdict(asked.comparison or ">=", asked.threshold, lo, hi)
    decisions = int(out.steps.sum())
    warnings = [*path.notes, *_notes(result[0], int((~known).sum()), truncated, runs, simulation.max_steps, asked)]
    if result[0] == "hoeffding" and by_limit:
        warnings.append(
            f"the return's range is over at most {horizon:,} steps, the environment's time limit (its TimeLimit ends "
            "every episode there)"
        )
    return ReturnResult(
        method=result[0],
        estimate=float(values.mean()) if len(values) else math.nan,
        interval=(lo, hi),
        confidence=1.0 - options.delta,
        runs=runs,
        counted=int(known.sum()),
        cut=int((~known).sum()),
        truncated=truncated,
        reward=asked.reward,
        discount=gamma,
        bound=asked.bound,
        reward_range=bounds,
        std=float(values.std(ddof=1)) if len(values) > 1 else math.nan,
        seed=simulation.seed,
        max_steps=simulation.max_steps,
        mode=str(simulation.mode),
        decisions=decisions,
        threshold=asked.threshold,
        comparison=(asked.comparison or ">=") if asked.threshold is not None else None,
        satisfied=satisfied,
        verdict=None if asked.threshold is None else {True: "yes", False: "no", None: "undecided"}[satisfied],
        provenance=Provenance(
            property=prop.text,
            model=name,
            policy=getattr(policy, "name", type(policy).__name__),
            settings={
                "runs": runs,
                "delta": options.delta,
                "discount": gamma,
                "reward_range": bounds,
                "seed": simulation.seed,
                "mode": str(simulation.mode),
                "max_steps": simulation.max_steps,
                "batch_size": simulation.batch_size,
                "backend": {"kind": str(options.backend.kind), "workers": backend.workers},
            },
            timings={
                "simulate": t_sim,
                "total": time.perf_counter() - t0,
                "decisions_per_second": decisions / t_sim if t_sim > 0 else math.inf,
            },
            versions=versions(),
            warnings=warnings,
        ),
    )


def _horizon(bound: int | None, max_steps: int, limit: int | None) -> tuple[int, bool]:
    """The most steps an episode's return sums: the fewest of the bound ``k``, ``max_steps`` and the environment's own
    time limit (its TimeLimit ends every episode there), and whether the time limit is what sets it."""
    longest = min(bound or max_steps, max_steps)
    if limit is not None and limit < longest:
        return limit, True
    return longest, False


def _interval(
    values: np.ndarray,
    cut: int,
    delta: float,
    bounds: tuple[float, float] | None,
    discount: float,
    horizon: int,
    name: str,
) -> tuple[str, tuple[float, float]]:
    """The method and the interval of the mean return (see the module docstring)."""
    n = len(values) + cut
    if bounds is not None:
        low, high = return_bounds(bounds, discount, horizon)
        outside = (values < low - 1e-9 * max(1.0, abs(low))) | (values > high + 1e-9 * max(1.0, abs(high)))
        if outside.any():
            raise ModelError(
                f"{name}: an episode's return {float(values[outside][0])!r} lies outside [{low:g}, {high:g}], the range "
                f"rewards in {list(bounds)} allow over {horizon:,} steps (the fewest of the bound, --max-steps and the "
                "environment's time limit): --reward-range is wrong"
            )
        half = (high - low) * math.sqrt(math.log(2.0 / delta) / (2.0 * n))
        total = float(values.sum())
        # the mean lies in [low, high] whatever happens: the interval is clipped to it (still sound, never wider)
        return "hoeffding", (max(low, (total + cut * low) / n - half), min(high, (total + cut * high) / n + half))
    if len(values) < 2:
        raise ModelError(f"{name}: fewer than two episodes ended within --max-steps: no interval (raise --max-steps)")
    from scipy.special import stdtrit  # lazy: scipy.special

    t = float(stdtrit(len(values) - 1, 1.0 - delta / 2.0))
    half = t * float(values.std(ddof=1)) / math.sqrt(len(values))
    mean = float(values.mean())
    return "student-t", (mean - half, mean + half)


def _notes(method: str, cut: int, truncated: int, runs: int, max_steps: int, asked: _Asked) -> list[str]:
    notes = []
    if method == "student-t":
        notes.append(
            "no per-step reward range declared (--reward-range LO:HI): the interval is asymptotic (Student t, central "
            "limit theorem), not a guarantee"
        )
    if cut:
        how = "counted at both ends of the return's range" if method == "hoeffding" else "left out of the estimate"
        notes.append(f"{cut:,} of {runs:,} episodes were still open after --max-steps {max_steps:,}: {how}")
    if truncated:
        before = f" before {asked.bound:,} steps" if asked.bound is not None else ""
        notes.append(
            f"{truncated:,} of {runs:,} episodes were truncated by the environment's time limit{before}: their return "
            "is summed up to there (as SB3's evaluate_policy does)"
        )
    if asked.reward:
        notes.append(f'the return sums info["{asked.reward}"] (0 at a step whose info has no such entry)')
    return notes
