"""Shields for a policy, with an exact certificate, and the least intrusive shield that meets a bound.

:func:`compute_shield` keeps, in each decision state of the full MDP, the agent's actions whose per-action value
``Q(s, a)`` (:func:`~rlverify.exact.action_values.action_values`) is close enough to the best the agent can do there,
``V(s) = opt_a Q(s, a)`` over the actions the state offers the agent:

* ``relative`` ``t >= 0``: ``Q <= V + t`` for a bad event (the optimum is Pmin), ``Q >= V - t`` for a goal (Pmax);
* ``absolute`` ``t`` in [0, 1]: ``Q <= t`` / ``Q >= t``;
* ``factor`` ``t`` in (0, 1]: ``t Q <= V`` / ``Q >= t V`` (1: the best actions only; towards 0: every action).

The best actions (``Q == V``) are always kept, so no state is left without an action; an action the state does not
offer is never kept. The shielded policy (:class:`~rlverify.policies.shielded.ShieldedPolicy`) renormalises the
policy's distribution over the kept actions and falls back to the best kept actions where the policy puts no mass
on a kept one.

:func:`shield_policy` computes the shield and its **certificate**: the shielded policy verified exactly by
:func:`~rlverify.exact.verify_exact` (strategy ``full`` on the MDP the values were computed on), beside the
unshielded policy's value and the optimum, with the intervention figures computed on the shielded policy's chain
(:class:`~rlverify.results.ShieldResult`). With ``meet`` it searches the ``relative`` threshold for the loosest
shield whose shielded value meets the property's bound, decided from the certified bracket: bisection over the
distinct gaps ``|Q - V|``, assuming the shielded value is monotone in the threshold (the returned shield is
verified whatever happens; the probes are listed). A bound that no scheduler meets (the optimum at the initial
state on the wrong side of it) is refused with the optimum named.

For step-bounded properties the shield is memoryless and computed with the whole bound left (see
:mod:`~rlverify.exact.action_values`); the certificate is the shielded policy's exact value, never the values'.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg
from scipy.sparse.csgraph import connected_components

from rlverify.arrays import distinct
from rlverify.errors import OptionError, PolicyError, PropertyError, safe_repr
from rlverify.exact.action_values import ActionValues, action_values
from rlverify.exact.bounded import iterate, step_budget, step_work
from rlverify.exact.chain import full_mdp, policy_chain
from rlverify.exact.checking import step_bounded_sets
from rlverify.exact.formulas import quantitative
from rlverify.exact.options import ExactOptions, Progress, check_resolved, provenance, settings
from rlverify.exact.outcome import verdict
from rlverify.exact.verify import verify_exact
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.policies.check import check_policy
from rlverify.policies.shielded import KINDS, MAX_SHIELD_BYTES, Shield, ShieldedPolicy, read_shield
from rlverify.results import ExactResult, ShieldResult

log = logging.getLogger(__name__)

#: most exact verifications one ``meet`` search may run (a bisection over up to 2**MAX_PROBES distinct gaps)
MAX_PROBES = 40


@dataclass(frozen=True)
class ShieldOptions:
    """How a shield is chosen.

    Attributes:
        kind: ``relative``, ``absolute`` or ``factor`` (see the module docstring).
        threshold: the threshold (None with ``meet``).
        meet: search the loosest ``relative`` threshold whose shielded policy meets the property's bound.
        remaining: step-bounded properties: the steps left the values are computed for (None: the bound).
    """

    kind: str = "relative"
    threshold: float | None = None
    meet: bool = False
    remaining: int | None = None

    def validate(self) -> None:
        """Raise :class:`OptionError` naming the first bad setting."""
        if self.kind not in KINDS:
            raise OptionError(f"shield kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.meet:
            if self.threshold is not None:
                raise OptionError("give either a threshold or --meet (which searches it), not both")
            if self.kind != "relative":
                raise OptionError("--meet searches a relative threshold (the gap to the state's best): use --kind relative")
            return
        t = self.threshold
        if t is None:
            raise OptionError("a shield needs a threshold (--threshold T) or --meet")
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise OptionError(f"threshold must be a finite number, not {t!r}")
        if self.kind == "relative" and not 0 <= t:
            raise OptionError(f"a relative threshold is a probability gap >= 0, not {t:g}")
        if self.kind == "absolute" and not 0 <= t <= 1:
            raise OptionError(f"an absolute threshold is a probability in [0, 1], not {t:g}")
        if self.kind == "factor" and not 0 < t <= 1:
            raise OptionError(f"a factor threshold is in (0, 1], not {t:g}")
        if self.remaining is not None and (
            isinstance(self.remaining, bool) or int(self.remaining) != self.remaining or self.remaining < 0
        ):
            raise OptionError(f"remaining steps must be an integer >= 0, not {self.remaining!r}")


def model_fingerprint(model: SymbolicModel) -> str:
    """A hash of the model's program text and constants: a shield is refused on a model with another."""
    text = f"{model.kind}\n{model.constants}\n{model.program}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def compute_shield(
    values: ActionValues,
    actions: Sequence[str],
    kind: str,
    threshold: float,
    *,
    model: SymbolicModel,
) -> Shield:
    """The :class:`~rlverify.policies.shielded.Shield` of ``values`` for an agent with ``actions`` (see the module
    docstring): every state where some choice is one of ``actions``."""
    q, covered = _agent_values(values, actions)
    best_v = _best(q, values.optimum)
    gap = _gaps(q, best_v, values.optimum)
    avail = ~np.isnan(q)
    best = avail & (gap <= 0.0)
    if kind == "relative":
        keep = gap <= threshold
    elif kind == "absolute":
        keep = q <= threshold if values.optimum == "min" else q >= threshold
    else:
        keep = threshold * q <= best_v[:, None] if values.optimum == "min" else q >= threshold * best_v[:, None]
    kept = avail & (np.where(avail, keep, False) | best)
    mdp = values.mdp
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
        info={"values_guarantee": values.guarantee, "remaining_steps": values.remaining, "method": values.method},
    )


def _agent_values(values: ActionValues, actions: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(S, A)`` Q per agent action (NaN: not offered) and the ``(S,)`` states offering at least one."""
    q = values.for_actions(actions)
    return q, ~np.isnan(q).all(axis=1)


def _best(q: np.ndarray, optimum: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmin(q, axis=1) if optimum == "min" else np.nanmax(q, axis=1)


def _gaps(q: np.ndarray, best: np.ndarray, optimum: str) -> np.ndarray:
    """``(S, A)`` how much worse than the state's best each agent action is (>= 0; NaN where not offered)."""
    return q - best[:, None] if optimum == "min" else best[:, None] - q


def check_shield_fits(shield: Shield, model: SymbolicModel, name: str | None = None) -> None:
    """Refuse (:class:`PolicyError`) a shield computed for another model (another program text or constants), whose
    ``model`` field names another model than ``name`` (how messages name ``model``, default :attr:`shown`; a model
    file may have moved: the same file name is enough), or that lists a state outside the model's declared ranges."""
    shown = name or model.shown
    named_here = shield.model == shown or (Path(shield.model).name == Path(shown).name and bool(Path(shown).suffix))
    if shield.fingerprint != model_fingerprint(model):
        if not named_here:
            raise PolicyError(
                f"the shield was computed for model '{shield.model}'"
                + (f" with constants '{shield.constants}'" if shield.constants else "")
                + f", not for {shown}"
                + (f" with constants '{model.constants}'" if model.constants and not name else "")
                + ": compute a shield for this model (rlverify shield)"
            )
        constants = str(model.constants or "")
        other = (
            f"with constants '{shield.constants or 'none'}', not '{constants or 'none'}'"
            if shield.constants != constants
            else "for another version of the model (another program text, constants or parameters), or the file was edited"
        )
        raise PolicyError(
            f"the shield's fingerprint is not {shown}'s: it was computed {other}; compute a shield for this model "
            "(rlverify shield)"
        )
    if not named_here:
        raise PolicyError(
            f"the shield's 'model' field names {safe_repr(shield.model)}, not {shown} (its fingerprint is this "
            "model's: an edited or mislabelled file); compute a shield for this model (rlverify shield)"
        )
    ranges = _declared_ranges(model)
    for column, variable in enumerate(shield.variables):
        low, high = ranges.get(variable, (None, None))
        values = shield.valuations[:, column]
        below = values < low if low is not None else np.zeros(len(values), dtype=bool)
        outside = np.flatnonzero(below | (values > high if high is not None else False))
        if outside.size:
            raise PolicyError(
                f"the shield lists state {shield.valuation_text(int(outside[0]))}, outside the model's range of {variable} "
                f"[{low}..{high}] (an edited file, or a shield for another model); compute a shield for this model "
                "(rlverify shield)"
            )


def _declared_ranges(model: SymbolicModel) -> dict[str, tuple[int | None, int | None]]:
    """Each state variable's declared ``(low, high)`` (a JANI location: its codes; None where not a constant)."""
    from rlverify.models.summary import summarize

    declared = {v["name"]: v for v in summarize(model, build=False)[0].variables}
    out: dict[str, tuple[int | None, int | None]] = {}
    for v in model.variables:
        if v in model.locations:
            out[v] = (0, len(model.locations[v]) - 1)
        else:
            low, high = declared.get(v, {}).get("low"), declared.get(v, {}).get("high")
            out[v] = (None if low is None else int(low), None if high is None else int(high))
    return out


def shield_limits(model: SymbolicModel) -> tuple[int | None, int]:
    """The most states a shield of ``model`` can list (the product of its variables' declared ranges; None when
    some range is unknown) and the most bytes such a file takes (generously: any JSON layout of its numbers)."""
    states: int | None = 1
    widest = 1
    for low, high in _declared_ranges(model).values():
        if low is None or high is None:
            return None, MAX_SHIELD_BYTES
        size, widest = max(high - low + 1, 0), max(widest, len(str(low)), len(str(high)))
        states = None if states is None or states * size > MAX_SHIELD_BYTES else states * size
        if states is None:
            return None, MAX_SHIELD_BYTES
    assert states is not None
    actions = len(model.action_names) + len(model.commands) + 1
    per_state = len(model.variables) * (widest + 32) + 2 * actions * (len(str(actions)) + 32) + 64
    return states, min(MAX_SHIELD_BYTES, (1 << 20) + states * per_state)


def load_shield(path: str | Path, model: SymbolicModel, name: str | None = None) -> Shield:
    """The shield file ``path`` for ``model``: refused before it is read when larger than a shield of the model's
    states takes, before its states are checked when it lists more than the model can have, and when it was
    computed for another model (:func:`check_shield_fits`)."""
    max_states, max_bytes = shield_limits(model)
    shield = read_shield(path, max_states=max_states, max_bytes=max_bytes)
    check_shield_fits(shield, model, name)
    return shield


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
    shield_options.validate()
    options = dataclasses.replace(ExactOptions() if options is None else options, strategy="full")
    options.validate()
    if options.mode == "monolithic":
        raise OptionError("a shield restricts a policy: use --mode stochastic or deterministic")
    check_resolved(model, prop)
    check_policy(policy, model)
    _, bound, comparison = quantitative(prop)
    if bound is None:
        raise PropertyError(
            f"property '{prop.text}': a shield needs the property's direction and bound: P<=b for a bad event, "
            "P>=b for a goal (the shielded policy's chain is checked against it)"
        )
    t0 = time.perf_counter()
    full = full_mdp(model, prop, options, policy=policy, progress=say)
    values = action_values(model, prop, options, mdp=full, remaining=shield_options.remaining, progress=say)
    t_values = time.perf_counter() - t0
    mdp = values.mdp
    init = int(mdp.initial_states[0])
    lo, hi = mdp.row_groups[init], mdp.row_groups[init + 1]
    pick = min if values.optimum == "min" else max
    opt = float(values.state_values[init])
    opt_lo = None if values.lower is None else float(pick(values.lower[lo:hi]))
    opt_hi = None if values.upper is None else float(pick(values.upper[lo:hi]))
    bounded = step_bounded_sets(values.storm, quantitative(prop)[0]) is not None
    whole_bound = values.remaining is None or not bounded or values.remaining == _bound_of(values, prop)
    unreachable = None
    if bound is not None and whole_bound:
        reachable, _ = verdict(bound, str(comparison), opt_lo, opt_hi, probability=True)
        if reachable is False:
            unreachable = (
                f"property '{prop.text}': no policy meets the bound: the optimum over all schedulers at the initial "
                f"state is P{values.optimum} = {opt:.6g}"
                + (f" (certified in [{opt_lo:.6g}, {opt_hi:.6g}])" if opt_lo is not None and opt_hi is not None else "")
                + ", so no shield can"
            )
            if shield_options.meet:
                raise PropertyError(unreachable)

    def certify(kind: str, t: float) -> tuple[Shield, ShieldedPolicy, ExactResult, Any]:
        shield = compute_shield(values, policy.actions, kind, t, model=model)
        wrapped = ShieldedPolicy(policy, shield)
        chain = policy_chain(model, prop, wrapped, options, mdp=full, progress=say)
        return shield, wrapped, verify_exact(model, prop, wrapped, options, chain=chain, progress=say), chain

    t1 = time.perf_counter()
    probes: list[dict[str, Any]] = []
    if shield_options.meet:
        kind, t = "relative", _search(values, policy, certify, probes, say)
    else:
        kind, t = shield_options.kind, float(shield_options.threshold)  # type: ignore[arg-type]
    shield, wrapped, result, chain = certify(kind, t)
    t_certify = time.perf_counter() - t1
    t2 = time.perf_counter()
    unshielded = verify_exact(
        model, prop, policy, options, chain=policy_chain(model, prop, policy, options, mdp=full, progress=say), progress=say
    )
    t_unshielded = time.perf_counter() - t2
    t3 = time.perf_counter()
    figures = _interventions(wrapped, chain, mdp, prop, values, shield, options)
    t_interventions = time.perf_counter() - t3
    notes = list(result.warnings)
    if unreachable is not None:
        notes.append(unreachable)
    if shield_options.meet and result.satisfied is not True:
        notes.append(
            "no threshold is certified to meet the bound: even the tightest shield (the best actions only) does not "
            "(a memoryless shield of a step-bounded property may miss an optimum that needs the step count)"
        )
    if bounded:
        notes.append(
            f"step-bounded property: the shield is memoryless, computed with {values.remaining} steps left (the "
            "values of later steps differ); the shielded value above is exact for the shield as it is"
        )
    if figures["fallback"]:
        notes.append(
            f"in {figures['fallback']:,} reached states the policy puts no mass on a kept action: the shielded policy "
            "takes the best kept action(s) there"
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
    extra = {"shield_kind": kind, "threshold": t, "meet": shield_options.meet, "remaining": values.remaining}
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
        optimum=opt,
        optimum_lower=opt_lo,
        optimum_upper=opt_hi,
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


def _restricted(values: ActionValues, policy: Policy, shield: Shield) -> int:
    """How many covered states have an offered action the shield does not keep."""
    q, covered = _agent_values(values, policy.actions)
    offered = (~np.isnan(q[covered])).sum(axis=1)
    return int((shield.kept.sum(axis=1) < offered).sum())


def _bound_of(values: ActionValues, prop: Property) -> int | None:
    sets = step_bounded_sets(values.storm, quantitative(prop)[0])
    return None if sets is None else sets[2]


def _search(values: ActionValues, policy: Policy, certify: Any, probes: list[dict[str, Any]], say: Progress) -> float:
    """The loosest relative threshold among the distinct gaps whose shielded policy meets the bound (bisection);
    the tightest (0) when none does (the caller reports it)."""
    q, covered = _agent_values(values, policy.actions)
    gaps = _gaps(q, _best(q, values.optimum), values.optimum)[covered]
    candidates = distinct(np.concatenate([[0.0], gaps[~np.isnan(gaps)]]))
    candidates = candidates[candidates >= 0.0]

    def meets(i: int) -> bool:
        t = float(candidates[i])
        say(f"probing threshold {t:.6g} ({len(probes) + 1})")
        _, _, r, _ = certify("relative", t)
        probes.append({"threshold": t, "value": r.value, "lower": r.lower, "upper": r.upper, "satisfied": r.satisfied})
        if len(probes) > MAX_PROBES:
            raise OptionError(f"--meet: more than {MAX_PROBES} verifications; give a --threshold")
        return r.satisfied is True

    if meets(len(candidates) - 1):  # every offered action kept: the policy meets the bound unshielded
        return float(candidates[-1])
    if len(candidates) == 1 or not meets(0):
        return 0.0
    lo, hi = 0, len(candidates) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return float(candidates[lo])


def _interventions(
    wrapped: ShieldedPolicy,
    chain: Any,
    mdp: Any,
    prop: Property,
    values: ActionValues,
    shield: Shield,
    options: ExactOptions,
) -> dict[str, Any]:
    """The shield's interventions on the shielded policy's chain: reached covered states, those where mass is
    removed (mode ``deterministic``: where the policy's argmax action is removed), fallbacks, and the expected number
    of intervening steps per run (and of mass removed)."""
    origin = chain.origin
    model_states = np.flatnonzero(origin >= 0)
    vals = mdp.valuations[origin[model_states]]
    rows, removed, fallback = wrapped.interventions(vals, deterministic=options.mode == "deterministic")
    known = rows >= 0
    n = chain.chain.num_states
    indicator = np.zeros(n)
    mass = np.zeros(n)
    indicator[model_states] = (removed > 0).astype(np.float64)
    mass[model_states] = removed
    reached = int(known.sum())
    intervened = int((removed > 0).sum())
    k = _bound_of(values, prop)
    P = chain.chain.transitions.tocsr()
    init = int(chain.chain.initial_states[0])
    expected, expected_mass = _expected_total(P, np.c_[indicator, mass], init, k, options.max_work)
    return {
        "reachable": reached,
        "intervened": intervened,
        "share": intervened / reached if reached else 0.0,
        "fallback": int((fallback & known).sum()),
        "expected": expected,
        "mass": expected_mass,
    }


def _expected_total(
    P: sp.csr_matrix, rewards: np.ndarray, init: int, steps: int | None, max_work: int | None
) -> tuple[float, float]:
    """Expected reward summed over the first ``steps`` steps of the chain ``P`` from ``init`` (``steps`` None: over
    the whole run; ``inf`` when a bottom component with positive reward is reachable), for each column of
    ``rewards`` ``(n, 2)``. The chain's absorbing states (the property decided) earn nothing."""
    if steps is not None:
        # v_{j+1} = r + P v_j: the reward of the first j+1 steps, until a fixed point (then v_k = v_j) or the budget
        flat = np.zeros(rewards.size)
        shape = rewards.shape

        def step(v: np.ndarray) -> np.ndarray:
            return (rewards + P @ v.reshape(shape)).ravel()

        total, j, stop = iterate(step, flat, steps, step_budget(steps, P.nnz, max_work), what="expected interventions")
        if stop is None and j < steps:
            raise PropertyError(
                f"the expected interventions within the step bound {steps:,} take {step_work(steps, P.nnz)}, "
                f"above --max-work {max_work:,}, and reached no fixed point in the {j:,} steps within it: "
                "raise --max-work or lower the step bound"
            )
        total = total.reshape(shape)
        return float(total[init, 0]), float(total[init, 1])
    n = P.shape[0]
    _, comp = connected_components(P, directed=True, connection="strong")
    # a component is bottom when no edge leaves it
    coo = P.tocoo()
    leaving = np.zeros(comp.max() + 1, dtype=bool)
    leaving[comp[coo.row[comp[coo.row] != comp[coo.col]]]] = True
    bottom = ~leaving[comp]
    reach = _reachable(P, init)
    out = []
    for col in range(rewards.shape[1]):
        r = rewards[:, col]
        if (bottom & reach & (r > 0)).any():
            out.append(math.inf)
            continue
        transient = np.flatnonzero(~bottom)
        if not len(transient) or not r[transient].any():
            out.append(0.0)
            continue
        A = sp.identity(len(transient), format="csc") - P[transient][:, transient].tocsc()
        x = scipy.sparse.linalg.spsolve(A, r[transient])
        v = np.zeros(n)
        v[transient] = x
        out.append(float(v[init]))
    return out[0], out[1]


def _reachable(P: sp.csr_matrix, init: int) -> np.ndarray:
    seen = np.zeros(P.shape[0], dtype=bool)
    seen[init] = True
    frontier = np.array([init])
    while len(frontier):
        nxt = distinct(P[frontier].indices)
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        frontier = nxt
    return seen


__all__ = [
    "ShieldOptions",
    "check_shield_fits",
    "compute_shield",
    "load_shield",
    "model_fingerprint",
    "shield_limits",
    "shield_policy",
    "shielded",
]
