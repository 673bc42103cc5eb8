"""Shields for a policy, with an exact certificate, and the least intrusive shield that meets a bound.

:func:`compute_shield` keeps, in each decision state of the full MDP, the agent's actions whose per-action value
``Q(s, a)`` (:func:`~rlverify.exact.action_values.action_values`) is close enough to the best the agent can do there,
``V(s) = opt_a Q(s, a)`` over the actions the state offers the agent:

* ``relative`` ``t >= 0``: ``Q <= V + t`` for a bad event (the optimum is Pmin), ``Q >= V - t`` for a goal (Pmax);
* ``absolute`` ``t`` in [0, 1]: ``Q <= t`` / ``Q >= t``;
* ``factor`` ``t`` in (0, 1]: ``t Q <= V`` / ``Q >= t V`` (1: the best actions only; towards 0: every action).

Which actions are kept is decided from brackets of ``Q`` (:func:`tie_gaps`): certified where the values are
(``--numerics sound``), else the values widened by the solver's precision. Gaps whose brackets overlap form one tie
class and are kept or removed together (equal gaps treated equally); the actions whose bracket overlaps the state's
best are its best actions, always kept, so no state is left without an action; an action is removed only where its
bracket says it is outside the threshold; an action the state does not offer is never kept. The shielded policy
(:class:`~rlverify.policies.shielded.ShieldedPolicy`) renormalises the policy's distribution over the kept actions
and falls back to the best kept actions where the policy puts no mass on a kept one.

:func:`shield_policy` computes the shield and its **certificate**: the shielded policy verified exactly by
:func:`~rlverify.exact.verify_exact` (strategy ``full`` on the MDP the values were computed on), beside the
unshielded policy's value and the optimum, with the intervention figures computed on the shielded policy's chain
(:class:`~rlverify.results.ShieldResult`). With ``meet`` it returns the **loosest** ``relative`` threshold whose
shielded value is certified to meet the property's bound: the candidates are the tie classes' thresholds, probed from
the loosest down, each verified exactly, so no monotonicity in the threshold is assumed; past ``max_probes`` the rest
is bisected and the result says so (the probes are listed). The loosest is not the least intrusive:
:func:`least_intrusive_policy` computes that (step-bounded properties; :mod:`~rlverify.exact.least_intrusive`). A
bound that no scheduler meets (the optimum at the initial state on the wrong side of it) is refused with the
optimum named.

For step-bounded properties the shield is memoryless and computed with the whole bound left (see
:mod:`~rlverify.exact.action_values`); the certificate is the shielded policy's exact value, never the values'.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from rlverify.choices import Mode, ShieldKind
from rlverify.choices import values as texts
from rlverify.errors import OptionError, PropertyError
from rlverify.exact.action_values import ActionValues, action_values
from rlverify.exact.chain import FullMDP, PolicyChain, full_mdp, policy_chain
from rlverify.exact.checking import step_bounded_sets
from rlverify.exact.formulas import quantitative
from rlverify.exact.interventions import interventions
from rlverify.exact.options import ExactOptions, Progress, check_resolved, provenance, settings
from rlverify.exact.outcome import verdict
from rlverify.exact.shield_file import check_shield_fits, load_shield, model_fingerprint, shield_limits
from rlverify.exact.verify import verify_exact
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy, PolicyWrapper
from rlverify.policies.check import check_policy
from rlverify.policies.shielded import Shield, ShieldedPolicy
from rlverify.results import ExactResult, Result, ShieldResult

log = logging.getLogger(__name__)

#: most candidate thresholds one ``meet`` search verifies one by one before it says it was capped (and bisects)
MAX_PROBES = 64
#: batches of states whose network answers a ``meet`` search remembers
_MEMO_BATCHES = 64


@dataclass(frozen=True)
class ShieldOptions:
    """How a shield is chosen.

    Attributes:
        kind: ``relative``, ``absolute`` or ``factor`` (see the module docstring).
        threshold: the threshold (None with ``meet``).
        meet: search the loosest ``relative`` threshold whose shielded policy meets the property's bound.
        remaining: step-bounded properties: the steps left the values are computed for (None: the bound).
        max_probes: ``meet``: the most candidate thresholds verified one by one (the rest bisected, and said).
    """

    kind: ShieldKind | str = ShieldKind.RELATIVE
    threshold: float | None = None
    meet: bool = False
    remaining: int | None = None
    max_probes: int = MAX_PROBES

    def __post_init__(self) -> None:
        if self.kind in texts(ShieldKind):  # text given: the member (anything else is refused by validate)
            object.__setattr__(self, "kind", ShieldKind(self.kind))

    def validate(self) -> None:
        """Raise :class:`OptionError` naming the first bad setting."""
        if self.kind not in texts(ShieldKind):
            raise OptionError(f"shield kind {self.kind!r} is not one of {', '.join(texts(ShieldKind))}")
        if self.meet:
            self._validate_meet()
            return
        t = self.threshold
        if t is None:
            raise OptionError("a shield needs a threshold (--threshold T) or --meet")
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise OptionError(f"threshold must be a finite number, not {t!r}")
        inside, message = _THRESHOLD_RANGES[ShieldKind(self.kind)]
        if not inside(t):
            raise OptionError(message.format(t=t))
        self._validate_remaining()

    def _validate_remaining(self) -> None:
        if self.remaining is not None and (
            isinstance(self.remaining, bool) or int(self.remaining) != self.remaining or self.remaining < 0
        ):
            raise OptionError(f"remaining steps must be an integer >= 0, not {self.remaining!r}")

    def _validate_meet(self) -> None:
        m = self.max_probes
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise OptionError(f"--max-probes must be an integer >= 1, not {m!r}")
        if self.threshold is not None:
            raise OptionError("give either a threshold or --meet (which searches it), not both")
        if self.kind is not ShieldKind.RELATIVE:
            raise OptionError("--meet searches a relative threshold (the gap to the state's best): use --kind relative")


#: per kind, whether a threshold is allowed and the message refusing it
_THRESHOLD_RANGES: dict[ShieldKind, tuple[Callable[[float], bool], str]] = {
    ShieldKind.RELATIVE: (lambda t: 0 <= t, "a relative threshold is a probability gap >= 0, not {t:g}"),
    ShieldKind.ABSOLUTE: (lambda t: 0 <= t <= 1, "an absolute threshold is a probability in [0, 1], not {t:g}"),
    ShieldKind.FACTOR: (lambda t: 0 < t <= 1, "a factor threshold is in (0, 1], not {t:g}"),
}


@dataclass(frozen=True)
class TieGaps:
    """The agent actions' gaps to the state's best, bracketed and tie-merged (:func:`tie_gaps`).

    Every offered action's gap ``|Q(s, a) - V*(s)|`` lies in ``[gap_lo, gap_hi]`` (from the brackets of ``Q``, rounded
    outwards; certified when ``certified``). Gaps whose brackets overlap, directly or through a chain of overlapping
    brackets across all states, form one *tie class*: equal within the brackets' tolerance, so they are kept or
    removed together. Class 0 holds every action whose bracket overlaps the state's best (``gap_lo == 0``): those
    actions are the state's best (possibly optimal) and never removed.

    Attributes:
        q, q_lo, q_hi: ``(S, A)`` float64 ``Q`` and its bracket per agent action (NaN: not offered).
        v_lo, v_hi: ``(S,)`` the bracket of ``V*(s) = opt_a Q(s, a)`` (NaN: no agent action).
        gap_lo, gap_hi: ``(S, A)`` the gap's bracket (>= 0; NaN: not offered).
        tie: ``(S, A)`` int64 the tie class (-1: not offered); class ``j``'s gaps lie in ``[low[j], high[j]]``,
            ``high[j] < low[j + 1]``.
        low, high: ``(K,)`` float64 each class's range; covered: ``(S,)`` bool, states offering an agent action.
        certified: the brackets are certified (else a tolerance from the solver's precision).
        tolerance: the widest gap bracket ``max(gap_hi - gap_lo)`` (0 when exact).
    """

    q: np.ndarray
    q_lo: np.ndarray
    q_hi: np.ndarray
    v_lo: np.ndarray
    v_hi: np.ndarray
    gap_lo: np.ndarray
    gap_hi: np.ndarray
    tie: np.ndarray
    low: np.ndarray
    high: np.ndarray
    covered: np.ndarray
    certified: bool
    tolerance: float

    @property
    def best(self) -> np.ndarray:
        """``(S, A)`` bool: the actions tied with the state's best (class 0)."""
        return self.tie == 0

    def candidates(self) -> np.ndarray:
        """``(K,)`` the relative thresholds that give distinct shields: 0 (the best actions only), then each tie
        class's upper end (that class and every tighter one kept)."""
        return np.concatenate([[0.0], self.high[1:]])


def tie_gaps(values: ActionValues, actions: Sequence[str]) -> TieGaps:
    """The bracketed, tie-merged gaps of the agent's ``actions`` (see :class:`TieGaps`)."""
    q, covered = _agent_values(values, actions)
    lo, hi, certified = values.brackets_for_actions(actions)
    lo, hi = np.fmin(lo, q), np.fmax(hi, q)
    avail = ~np.isnan(q)
    if values.optimum == "min":
        v_lo, v_hi = _best(lo, "min"), _best(hi, "min")
        gap_lo = np.nextafter(lo - v_hi[:, None], -np.inf)
        gap_hi = np.nextafter(hi - v_lo[:, None], np.inf)
    else:
        v_lo, v_hi = _best(lo, "max"), _best(hi, "max")
        gap_lo = np.nextafter(v_lo[:, None] - hi, -np.inf)
        gap_hi = np.nextafter(v_hi[:, None] - lo, np.inf)
    gap_lo = np.where(avail, np.maximum(gap_lo, 0.0), np.nan)
    gap_hi = np.where(avail, np.maximum(gap_hi, 0.0), np.nan)
    # sweep the brackets in order of their low ends: a bracket starting above every earlier one's high end starts a
    # class (the state's best action has gap_lo = 0, so class 0 starts at 0 and holds every bracket reaching it)
    tie = np.full(q.shape, -1, dtype=np.int64)
    where = np.flatnonzero(avail.ravel())
    a_lo, a_hi = gap_lo.ravel()[where], gap_hi.ravel()[where]
    order = np.lexsort((a_hi, a_lo))
    s_lo, s_hi = a_lo[order], a_hi[order]
    reach = np.maximum.accumulate(s_hi) if len(s_hi) else s_hi
    starts = np.r_[True, s_lo[1:] > reach[:-1]] if len(s_lo) else np.zeros(0, dtype=bool)
    ids = np.cumsum(starts) - 1
    flat = np.full(len(where), -1, dtype=np.int64)
    flat[order] = ids
    tie.ravel()[where] = flat
    K = int(ids[-1]) + 1 if len(ids) else 0
    low = np.full(K, np.inf)
    high = np.full(K, -np.inf)
    np.minimum.at(low, ids, s_lo)
    np.maximum.at(high, ids, s_hi)
    if K:
        low[0] = 0.0
    width = gap_hi - gap_lo
    tolerance = float(np.nanmax(width)) if avail.any() else 0.0
    return TieGaps(q, lo, hi, v_lo, v_hi, gap_lo, gap_hi, tie, low, high, covered, certified, tolerance)


def compute_shield(
    values: ActionValues,
    actions: Sequence[str],
    kind: ShieldKind | str,
    threshold: float,
    *,
    model: SymbolicModel,
    gaps: TieGaps | None = None,
) -> Shield:
    """The :class:`~rlverify.policies.shielded.Shield` of ``values`` for an agent with ``actions`` (see the module
    docstring): every state where some choice is one of ``actions``. ``gaps``: :func:`tie_gaps` when already
    computed."""
    g = tie_gaps(values, actions) if gaps is None else gaps
    avail = ~np.isnan(g.q)
    best = g.best
    keep = _within(kind, threshold, g, values.optimum == "min")
    kept = avail & (np.where(avail, keep, False) | best)
    mdp = values.mdp
    covered = g.covered
    info = {
        "values_guarantee": values.guarantee,
        "remaining_steps": values.remaining,
        "method": values.method,
        "ties": "certified brackets" if g.certified else "solver precision (not certified)",
        "tie_tolerance": g.tolerance,
    }
    return Shield(
        variables=mdp.variables,
        valuations=np.asarray(mdp.valuations[covered], dtype=np.int64),
        actions=tuple(actions),
        kept=kept[covered],
        best=best[covered],
        model=model.shown,
        constants=str(model.constants or ""),
        fingerprint=model_fingerprint(model),
        property=values.property,
        optimum=values.optimum,
        threshold={"kind": kind, "value": float(threshold)},
        info=info,
    )


def _within(kind: ShieldKind | str, threshold: float, g: TieGaps, minimize: bool) -> np.ndarray:
    """``(S, A)`` bool: the agent actions *possibly* within ``threshold`` of the state's best by ``kind`` (see the
    module docstring), read from the brackets: an action is removed only where its bracket says it is certainly
    outside; ``relative``: by tie class (a class is kept when its lowest gap is within ``threshold``), so equal gaps
    are kept or removed together; ``minimize``: the optimum is Pmin (a bad event)."""
    with np.errstate(invalid="ignore"):
        match kind:
            case ShieldKind.RELATIVE:
                low = np.r_[g.low, np.inf]  # index -1 (not offered): never within
                return low[g.tie] <= threshold
            case ShieldKind.ABSOLUTE:
                return g.q_lo <= threshold if minimize else g.q_hi >= threshold
            case _:
                return threshold * g.q_lo <= g.v_hi[:, None] if minimize else g.q_hi >= threshold * g.v_lo[:, None]


def _agent_values(values: ActionValues, actions: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(S, A)`` Q per agent action (NaN: not offered) and the ``(S,)`` states offering at least one."""
    q = values.for_actions(actions)
    return q, ~np.isnan(q).all(axis=1)


def _best(q: np.ndarray, optimum: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmin(q, axis=1) if optimum == "min" else np.nanmax(q, axis=1)


def shielded(policy: Policy, shield: Shield, model: SymbolicModel, name: str | None = None) -> ShieldedPolicy:
    """``policy`` under ``shield`` (refused when the shield was computed for another model; ``name``: the model's
    name in that message)."""
    check_shield_fits(shield, model, name)
    return ShieldedPolicy(policy, shield)


def shield_policy(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    shield_options: ShieldOptions,
    options: ExactOptions | None = None,
    *,
    progress: Progress | None = None,
) -> ShieldResult:
    """A shield for ``policy`` on ``model`` for ``prop`` and its certificate (see the module docstring).

    Args:
        model: a loaded PRISM/JANI model; prop: its parsed property, a probability of reaching with a bound
            (``P<=b`` for a bad event, ``P>=b`` for a goal).
        policy: any :class:`~rlverify.policies.Policy` for the model.
        shield_options: the threshold (or ``meet``); options: the exact engine's (mode, numerics, precision, the
            guards; the strategy is ``full``: the MDP is built once, for the values and every certificate).

    Raises:
        OptionError: bad shield options; PropertyError: a form the values do not cover, or a bound no scheduler
        meets (the optimum named); PolicyError, ModelTooLargeError, MemoryBudgetError as the exact engine.
    """
    say = progress or (lambda msg: None)
    options = _exact_options(shield_options, options)
    check_resolved(model, prop)
    check_policy(policy, model)
    bound, comparison = _direction(prop)
    t0 = time.perf_counter()
    full = full_mdp(model, prop, options, policy=policy, progress=say)
    values = action_values(model, prop, options, mdp=full, remaining=shield_options.remaining, progress=say)
    t_values = time.perf_counter() - t0
    mdp = values.mdp
    best = _Best.of(values)
    bounded = step_bounded_sets(values.storm, quantitative(prop)[0]) is not None
    whole_bound = values.remaining is None or not bounded or values.remaining == _bound_of(values, prop)
    unreachable = _unreachable(prop, values, best, bound, comparison) if whole_bound else None
    if unreachable is not None and shield_options.meet:
        raise PropertyError(unreachable)
    gaps = tie_gaps(values, policy.actions)
    t1 = time.perf_counter()
    probes: list[dict[str, Any]] = []
    capped: str | None = None
    if shield_options.meet:
        search = _Certify(model, prop, _Memo(policy), values, options, full, say, gaps)
        t, capped = _search(gaps, search, probes, say, shield_options.max_probes)
        kind = ShieldKind.RELATIVE
    else:
        kind, t = ShieldKind(shield_options.kind), float(shield_options.threshold)  # type: ignore[arg-type]
    shield, wrapped, result, chain = _Certify(model, prop, policy, values, options, full, say, gaps)(kind, t)
    t_certify = time.perf_counter() - t1
    t2 = time.perf_counter()
    unshielded = verify_exact(
        model, prop, policy, options, chain=policy_chain(model, prop, policy, options, mdp=full, progress=say), progress=say
    )
    t_unshielded = time.perf_counter() - t2
    t3 = time.perf_counter()
    figures = interventions(wrapped, chain, mdp, options.mode == Mode.DETERMINISTIC, _bound_of(values, prop), options.max_work)
    t_interventions = time.perf_counter() - t3
    notes = _notes(result, unreachable, shield_options.meet, bounded, values.remaining, figures["fallback"])
    if capped is not None:
        notes.append(capped)
    if not gaps.certified:
        notes.append(
            "the per-action values have no certified bracket (--numerics fast, or direct on an unbounded property): "
            f"gaps within the solver's relative precision {values.precision:g} are treated as ties, not certified ones"
        )
    timings = {
        "parse": model.parse_seconds,
        "build": full.seconds,
        "values": t_values - full.seconds,
        "certify": t_certify,
        "unshielded": t_unshielded,
        "interventions": t_interventions,
    }
    timings["total"] = sum(timings.values())
    extra: dict[str, Any] = {"shield_kind": kind, "threshold": t, "meet": shield_options.meet, "remaining": values.remaining}
    extra["tie_tolerance"] = gaps.tolerance
    if shield_options.meet:
        extra["candidates"] = len(gaps.candidates())
        extra["search"] = "capped" if capped is not None else "exhaustive"
    return ShieldResult(
        optimum_is=values.optimum,
        threshold_kind=kind,
        threshold=t,
        meet=shield_options.meet,
        value=result.value,
        lower=result.lower,
        upper=result.upper,
        satisfied=result.satisfied,
        stalled_probability=result.stalled_probability,
        unshielded=unshielded.value,
        unshielded_lower=unshielded.lower,
        unshielded_upper=unshielded.upper,
        optimum=best.value,
        optimum_lower=best.lower,
        optimum_upper=best.upper,
        covered_states=len(shield.valuations),
        restricted_states=_restricted(values, policy, shield),
        reachable_states=figures["reachable"],
        intervened_states=figures["intervened"],
        intervened_share=figures["share"],
        fallback_states=figures["fallback"],
        expected_interventions=figures["expected"],
        expected_removed_mass=figures["mass"],
        guarantee=result.guarantee,
        precision=result.precision,
        states=mdp.num_states,
        choices=mdp.num_choices,
        transitions=mdp.num_transitions,
        remaining_steps=values.remaining,
        probes=probes,
        shield=shield,
        provenance=provenance(
            model,
            prop,
            policy,
            timings=timings,
            settings={**settings(options, "full", model), **extra},
            warnings=notes,
        ),
    )


def _exact_options(shield_options: ShieldOptions, options: ExactOptions | None) -> ExactOptions:
    """The exact engine's options for a shield (strategy ``full``), both checked."""
    shield_options.validate()
    options = dataclasses.replace(ExactOptions() if options is None else options, strategy="full")
    options.validate()
    if options.mode == Mode.MONOLITHIC:
        raise OptionError("a shield restricts a policy: use --mode stochastic or deterministic")
    return options


def _direction(prop: Property) -> tuple[float, str]:
    """The property's bound and comparison (refused without: a shield needs them)."""
    _, bound, comparison = quantitative(prop)
    if bound is None:
        raise PropertyError(
            f"property '{prop.text}': a shield needs the property's direction and bound: P<=b for a bad event, "
            "P>=b for a goal (the shielded policy's chain is checked against it)"
        )
    return bound, str(comparison)


@dataclass(frozen=True)
class _Best:
    """The optimum over all schedulers at the initial state, and its certified bracket (None: not certified)."""

    value: float
    lower: float | None
    upper: float | None

    @classmethod
    def of(cls, values: ActionValues) -> _Best:
        mdp = values.mdp
        init = int(mdp.initial_states[0])
        lo, hi = mdp.row_groups[init], mdp.row_groups[init + 1]
        pick = min if values.optimum == "min" else max
        return cls(
            float(values.state_values[init]),
            None if values.lower is None else float(pick(values.lower[lo:hi])),
            None if values.upper is None else float(pick(values.upper[lo:hi])),
        )


def _unreachable(prop: Property, values: ActionValues, best: _Best, bound: float, comparison: str) -> str | None:
    """Why no policy meets the bound (the optimum is certified on the wrong side of it), or None."""
    reachable_bound, _ = verdict(bound, comparison, best.lower, best.upper, probability=True)
    if reachable_bound is not False:
        return None
    certified = "" if best.lower is None or best.upper is None else f" (certified in [{best.lower:.6g}, {best.upper:.6g}])"
    return (
        f"property '{prop.text}': no policy meets the bound: the optimum over all schedulers at the initial "
        f"state is P{values.optimum} = {best.value:.6g}" + certified + ", so no shield can"
    )


class _Certify:
    """A shield of the values at a threshold, the shielded policy and its exact certificate on the full MDP."""

    def __init__(
        self,
        model: SymbolicModel,
        prop: Property,
        policy: Policy,
        values: ActionValues,
        options: ExactOptions,
        full: FullMDP,
        say: Progress,
        gaps: TieGaps,
    ) -> None:
        self.model, self.prop, self.policy, self.values, self.options, self.full, self.say = (
            model,
            prop,
            policy,
            values,
            options,
            full,
            say,
        )
        self.gaps = gaps

    def __call__(self, kind: ShieldKind, t: float) -> tuple[Shield, ShieldedPolicy, ExactResult, PolicyChain]:
        model, prop, options, say = self.model, self.prop, self.options, self.say
        shield = compute_shield(self.values, self.policy.actions, kind, t, model=model, gaps=self.gaps)
        wrapped = ShieldedPolicy(self.policy, shield)
        chain = policy_chain(model, prop, wrapped, options, mdp=self.full, progress=say)
        return shield, wrapped, verify_exact(model, prop, wrapped, options, chain=chain, progress=say), chain


def _notes(
    result: ExactResult, unreachable: str | None, meet: bool, bounded: bool, remaining: int | None, fallback: int
) -> list[str]:
    """The shield result's notes: the certificate's, then what the search, the step bound and fallbacks mean."""
    notes = list(result.warnings)
    if unreachable is not None:
        notes.append(unreachable)
    if meet and result.satisfied is not True:
        notes.append(
            "no threshold is certified to meet the bound: even the tightest shield (the best actions only) does not "
            "(a memoryless shield of a step-bounded property may miss an optimum that needs the step count)"
        )
    if bounded:
        notes.append(
            f"step-bounded property: the shield is memoryless, computed with {remaining} steps left (the "
            "values of later steps differ); the shielded value above is exact for the shield as it is"
        )
    if fallback:
        notes.append(
            f"in {fallback:,} reached states the policy puts no mass on a kept action: the shielded policy "
            "takes the best kept action(s) there"
        )
    return notes


def _restricted(values: ActionValues, policy: Policy, shield: Shield) -> int:
    """How many covered states have an offered action the shield does not keep."""
    q, covered = _agent_values(values, policy.actions)
    offered = (~np.isnan(q[covered])).sum(axis=1)
    return int((shield.kept.sum(axis=1) < offered).sum())


def _bound_of(values: ActionValues, prop: Property) -> int | None:
    sets = step_bounded_sets(values.storm, quantitative(prop)[0])
    return None if sets is None else sets[2]


def _search(
    gaps: TieGaps, certify: _Certify, probes: list[dict[str, Any]], say: Progress, limit: int
) -> tuple[float, str | None]:
    """The loosest relative threshold among the tie classes' (:meth:`TieGaps.candidates`) whose shielded policy is
    certified to meet the bound, and a note when the search was capped (None when exhaustive).

    The candidates are probed from the loosest down, each an exact verification of its shield; the first that meets
    the bound is the loosest (no monotonicity of the value in the threshold is assumed: every looser one was probed
    and failed). After ``limit`` probes without one, the rest is bisected (which assumes monotonicity) and the note
    says so. The tightest (0) when none meets (the caller reports it)."""
    candidates = gaps.candidates()

    def meets(t: float) -> bool:
        say(f"probing threshold {t:.6g} ({len(probes) + 1} of at most {min(limit, len(candidates))})")
        _, _, r, _ = certify(ShieldKind.RELATIVE, t)
        probes.append({"threshold": t, "value": r.value, "lower": r.lower, "upper": r.upper, "satisfied": r.satisfied})
        return r.satisfied is True

    for t in candidates[::-1][:limit]:
        if meets(float(t)):
            return float(t), None
    rest = candidates[: max(len(candidates) - limit, 0)]
    if not len(rest):
        return 0.0, None
    note = (
        f"--meet: the search was capped at {limit:,} of {len(candidates):,} candidate thresholds (--max-probes): the "
        f"{limit:,} loosest (down to {float(candidates[len(rest)]):.6g}) do not meet the bound; the rest was bisected, "
        "which assumes the shielded value is monotone in the threshold, so a looser shield that meets it may exist"
    )
    if not meets(0.0):
        return 0.0, note
    lo, hi = 0, len(rest)  # rest[lo] meets (0 is rest[0]); rest[hi] is the first unsearched-above, known to fail
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(float(rest[mid])):
            lo = mid
        else:
            hi = mid
    return float(rest[lo]), note


class _Memo(PolicyWrapper):
    """``inner`` with its last answer remembered: the search asks the network for the same states at every probe."""

    def __init__(self, inner: Policy) -> None:
        super().__init__(inner)
        self._answers: dict[bytes, np.ndarray] = {}

    def action_probabilities(self, states: np.ndarray) -> np.ndarray:
        states = np.asarray(states)
        key = states.dtype.str.encode() + str(states.shape).encode() + hashlib.sha256(states.tobytes()).digest()
        answer = self._answers.get(key)
        if answer is None:
            if len(self._answers) >= _MEMO_BATCHES:
                self._answers.pop(next(iter(self._answers)))
            answer = self._answers[key] = self.policy.action_probabilities(states)
        return answer.copy()

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return self.action_probabilities(states)


@dataclass(frozen=True, kw_only=True)
class CorrectionResult(Result):
    """The least intrusive correction of a policy for a step-bounded bound and its exact check
    (:func:`least_intrusive_policy`; ``rlverify shield --meet least-intrusive``).

    ``measure`` is what was minimised (:data:`~rlverify.exact.least_intrusive.MEASURE`); ``lp_optimum`` its least value
    over every correction meeting the bound (the LP's, HiGHS float); ``measure_value`` the corrected policy's,
    recomputed on its chain; ``value``/``lower``/``upper``/``satisfied`` the corrected (step-dependent, possibly
    randomised) policy's probability, a certified bracket on the product (state x step) chain.
    """

    measure: str
    lp_optimum: float
    measure_value: float
    tightened: float
    value: float
    lower: float | None
    upper: float | None
    satisfied: bool | None
    unshielded: float
    unshielded_lower: float | None
    unshielded_upper: float | None
    steps: int
    corrected_states: int
    corrected_product_states: int
    randomised_product_states: int
    expected_interventions: float
    lp_variables: int
    lp_constraints: int
    product_states: int
    guarantee: str
    correction: Any = field(default=None, repr=False, compare=False)

    NOT_IN_JSON: ClassVar[tuple[str, ...]] = ("correction",)


def least_intrusive_policy(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ExactOptions | None = None,
    *,
    progress: Progress | None = None,
) -> CorrectionResult:
    """The least intrusive correction of ``policy`` meeting ``prop``'s step-bounded bound
    (:func:`~rlverify.exact.least_intrusive.least_intrusive` on the property-directed MDP with the policy's weights as
    the chain uses them), beside the policy's own exact value.

    Raises:
        PropertyError: an unbounded property (refused: the step counter's product does not apply), no bound, or a
            bound no correction meets; PolicyError: mass on unavailable actions (``--unavailable renormalize``);
            OptionError: an LP above :data:`~rlverify.exact.least_intrusive.MAX_LP_VARIABLES`.
    """
    from rlverify.exact.induced import weigh
    from rlverify.exact.least_intrusive import MEASURE, least_intrusive

    say = progress or (lambda msg: None)
    options = _exact_options(ShieldOptions(meet=True), options)
    check_resolved(model, prop)
    check_policy(policy, model)
    bound, comparison = _direction(prop)
    t0 = time.perf_counter()
    full = full_mdp(model, prop, options, policy=policy, progress=say)
    sets = step_bounded_sets(full.storm, quantitative(prop)[0])
    if sets is None:
        raise PropertyError(
            f"property '{prop.text}': --meet least-intrusive needs a step-bounded property (P<=b [F<=k ...]): the LP "
            "runs on the product with the step counter; use --meet loosest for unbounded ones"
        )
    phi, psi, k = sets
    mdp = full.mdp
    cw, _, _ = weigh(mdp, policy, mode=options.mode, unavailable=options.unavailable, defer=True)
    say(f"solving the least-intrusive LP over {k} steps")
    t1 = time.perf_counter()
    c = least_intrusive(
        mdp.transitions.tocsr(),
        np.asarray(mdp.row_groups),
        cw.weights,
        np.asarray(phi, dtype=bool),
        np.asarray(psi, dtype=bool),
        int(mdp.initial_states[0]),
        int(k),
        bound,
        comparison,
        precision=options.precision,
    )
    t2 = time.perf_counter()
    unshielded = verify_exact(
        model, prop, policy, options, chain=policy_chain(model, prop, policy, options, mdp=full, progress=say), progress=say
    )
    notes = []
    if c.tightened:
        notes.append(
            f"HiGHS's tolerance left the corrected value beyond the bound: the LP was solved again with the bound "
            f"tightened by {c.tightened:.3g}; the corrected policy's intrusion is optimal for that bound, the LP optimum "
            "at the bound itself is the least any correction can do"
        )
    if c.satisfied is not True:
        notes.append("the corrected policy is not certified to meet the bound (see its bracket)")
    timings = {"parse": model.parse_seconds, "build": full.seconds, "lp": t2 - t1, "unshielded": time.perf_counter() - t2}
    timings["total"] = sum(timings.values()) + (t1 - t0 - full.seconds)
    return CorrectionResult(
        measure=MEASURE,
        lp_optimum=c.lp_optimum,
        measure_value=c.measure_value,
        tightened=c.tightened,
        value=c.value,
        lower=c.lower,
        upper=c.upper,
        satisfied=c.satisfied,
        unshielded=unshielded.value,
        unshielded_lower=unshielded.lower,
        unshielded_upper=unshielded.upper,
        steps=int(k),
        corrected_states=c.corrected_states,
        corrected_product_states=c.corrected_product_states,
        randomised_product_states=c.randomised_product_states,
        expected_interventions=c.expected_interventions,
        lp_variables=c.lp_variables,
        lp_constraints=c.lp_constraints,
        product_states=c.product_states,
        guarantee="sound",
        correction=c,
        provenance=provenance(
            model,
            prop,
            policy,
            timings=timings,
            settings={**settings(options, "full", model), "meet": "least-intrusive"},
            warnings=notes,
        ),
    )


__all__ = [
    "CorrectionResult",
    "ShieldOptions",
    "TieGaps",
    "check_shield_fits",
    "compute_shield",
    "least_intrusive_policy",
    "load_shield",
    "model_fingerprint",
    "shield_limits",
    "shield_policy",
    "shielded",
    "tie_gaps",
]
