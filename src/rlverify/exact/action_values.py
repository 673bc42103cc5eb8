"""Per-action values on the full MDP: the best value still achievable after taking one action, ``Q(s, a)``.

For a reachability property ``P [phi U psi]`` (``F psi`` is ``true U psi``) on the property-directed MDP
(:func:`~rlverify.exact.chain.full_mdp`; every reachable state, every choice)::

    Q(s, a) = psi(s) + (phi(s) & !psi(s)) * sum_s' T(s, a, s') * V*(s')

with ``V*`` the optimum the property's direction asks for: ``Pmin`` for a bad event (``P<=b``, ``P<b``, ``Pmin=?``:
the probability to keep low) and ``Pmax`` for a goal (``P>=b``, ``P>b``, ``Pmax=?``). ``Q(s, a)`` is the value of
taking ``a`` in ``s`` once and acting optimally afterwards; in a state that already decides the property every
choice has its value (1 in ``psi``, 0 outside ``phi``).

Step-bounded forms (``F<=k``, ``U<=k``) use the remaining bound: with ``r`` steps left (default ``k``, the bound
at the initial state)::

    Q_r(s, a) = psi(s) + (phi(s) & !psi(s)) * sum_s' T(s, a, s') * V*_{r-1}(s'),     Q_0(s, a) = psi(s)

where ``V*_{r-1}`` is the optimum of ``phi U<=r-1 psi``. A memoryless shield built from ``Q_k`` is exact at the
first step and a heuristic after it (the remaining bound shrinks along a run); the shielded policy's value is
certified separately on the chain it induces, never read off these values.

Guarantee (``ActionValues.lower``/``upper``, per choice):

* step-bounded, numerics ``sound``/``direct``: ``V*_{r-1}`` by
  :func:`~rlverify.exact.bounded.bounded_until` on the MDP's arrays (a certified bracket per state), and ``Q``'s
  bracket is one more matrix-vector product of those bounds, rounded outwards (sums of non-negative terms);
* unbounded, numerics ``sound``: ``V*`` by Storm's sound solver on the full MDP (every state solved); its guarantee,
  ``|value - true| <= precision x |true|`` per state, widened one ulp out, and the product rounded outwards;
* ``direct`` (unbounded) and ``fast``: values only (no bracket: ``lower``/``upper`` None).

The transition probabilities are the model's (as Storm builds them, in float64): "true" is the value on that MDP.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlverify.choices import Guarantee, Numerics
from rlverify.errors import PropertyError
from rlverify.exact.bounded import bounded_until
from rlverify.exact.chain import SHRINK, FullMDP, mdp_for
from rlverify.exact.checking import check, step_bounded_sets, until_sets
from rlverify.exact.formulas import StormFormula, quantitative
from rlverify.exact.options import ExactOptions, Progress, check_resolved, guarantee
from rlverify.exact.rounding import rounded_down, rounded_up, sum_margin
from rlverify.exact.storm_check import StormModel
from rlverify.models.dynamics import action_columns
from rlverify.models.explicit import ExplicitModel, out_of_memory
from rlverify.models.numerics import environment
from rlverify.models.properties import Property, worst_case
from rlverify.models.symbolic import SymbolicModel

log = logging.getLogger(__name__)

_GREATER = ("GREATER", "GREATER_EQUAL", "GEQ", ">", ">=")


@dataclass(frozen=True)
class ActionValues:
    """``Q(s, a)`` for every choice of the full MDP (:func:`action_values`).

    Attributes:
        mdp: the property-directed MDP the values are for (its states, choices, valuations, action names).
        storm: Storm's model of it.
        optimum: ``"min"`` (a bad event: ``V* = Pmin``) or ``"max"`` (a goal: ``V* = Pmax``).
        values: ``(C,)`` float64, ``Q`` per choice of ``mdp`` (probabilities in [0, 1]).
        lower, upper: ``(C,)`` float64 certified bounds of ``Q`` per choice (see the module docstring), or None.
        state_values: ``(S,)`` float64, ``V*(s) = opt_a Q(s, a)`` (with ``remaining`` steps left).
        next_values: ``(S,)`` float64, the ``V*`` the products read (``V*_{remaining-1}`` for a step bound).
        remaining: the step bound the values are for (None: unbounded).
        guarantee: ``sound`` (a certified bracket), ``direct`` or ``unsound`` (values only).
        method: how ``V*`` was computed; precision: the relative precision asked of iterative solvers.
        property: the property's text; seconds: the computation's time (the MDP's build excluded).
    """

    mdp: ExplicitModel
    storm: Any
    optimum: str
    values: np.ndarray
    lower: np.ndarray | None
    upper: np.ndarray | None
    state_values: np.ndarray
    next_values: np.ndarray
    remaining: int | None
    guarantee: Guarantee
    method: str
    precision: float
    property: str
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    def choice_states(self) -> np.ndarray:
        """``(C,)`` int64: the state each choice belongs to."""
        return self.mdp.choice_states()

    def for_actions(self, actions: Sequence[str]) -> np.ndarray:
        """``(S, A)`` float64: ``Q(s, a)`` for the agent's ``actions`` (labels or command names, matched as the
        engines match them: :func:`~rlverify.models.dynamics.action_columns`); NaN where ``a`` is unavailable."""
        cols = action_columns(self.mdp, list(actions))
        out = np.full((self.mdp.num_states, len(actions)), np.nan)
        known = np.flatnonzero(cols >= 0)
        out[self.choice_states()[known], cols[known]] = self.values[known]
        return out

    def brackets_for_actions(self, actions: Sequence[str]) -> tuple[np.ndarray, np.ndarray, bool]:
        """``(S, A)`` lower and upper bounds of ``Q(s, a)`` for the agent's ``actions`` (NaN where unavailable) and
        whether they are certified: the certified brackets where computed, otherwise (``fast``, or ``direct`` on an
        unbounded property) the values widened by the relative precision asked of the solver, ``|Q| x precision``
        plus one ulp each side (a tolerance, not a guarantee)."""
        cols = action_columns(self.mdp, list(actions))
        known = np.flatnonzero(cols >= 0)
        states = self.choice_states()[known]
        certified = self.lower is not None and self.upper is not None
        if certified:
            assert self.lower is not None and self.upper is not None
            lo, hi = self.lower, self.upper
        else:
            delta = np.abs(self.values) * self.precision
            lo = np.clip(np.nextafter(self.values - delta, -np.inf), 0.0, 1.0)
            hi = np.clip(np.nextafter(self.values + delta, np.inf), 0.0, 1.0)
        out_lo = np.full((self.mdp.num_states, len(actions)), np.nan)
        out_hi = np.full((self.mdp.num_states, len(actions)), np.nan)
        out_lo[states, cols[known]] = lo[known]
        out_hi[states, cols[known]] = hi[known]
        return out_lo, out_hi, certified

    def gaps(self) -> np.ndarray:
        """``(C,)`` float64: how much worse each choice is than the state's best, ``|Q(s, a) - V*(s)|`` (>= 0)."""
        return np.abs(self.values - self.state_values[self.choice_states()])


def objective(prop: Property) -> str:
    """``"min"`` when ``prop`` is about a bad event (``P<=b``, ``P<b``, ``Pmin=?``), ``"max"`` for a goal (``P>=b``,
    ``P>b``, ``Pmax=?``): :func:`~rlverify.models.properties.worst_case`'s reading; a ``P=?`` without either is
    refused (its direction is unknown)."""
    worst, assumed = worst_case(prop, None)
    if assumed:
        raise PropertyError(
            f"property '{prop.text}': per-action values need a direction: a bound (P<=b for a bad event, P>=b for a "
            "goal) or Pmin=?/Pmax=?"
        )
    return "min" if worst == "max" else "max"


def action_values(
    model: SymbolicModel,
    prop: Property,
    options: ExactOptions | None = None,
    *,
    mdp: FullMDP | None = None,
    remaining: int | None = None,
    progress: Progress | None = None,
) -> ActionValues:
    """``Q(s, a)`` of every choice of ``model``'s property-directed MDP for ``prop`` (see the module docstring).

    Args:
        model: a loaded PRISM/JANI model; prop: its parsed property, a probability of ``F psi``/``phi U psi``,
            optionally step-bounded, with a bound or ``Pmin``/``Pmax`` naming its direction (:func:`objective`).
        options: numerics, precision, max_states, max_memory, max_work (None: the defaults).
        mdp: the :class:`~rlverify.exact.chain.FullMDP` when already built (built here otherwise).
        remaining: step-bounded properties: the steps left (``0 <= remaining``; None: the property's bound).

    Raises:
        PropertyError: another form of property, no direction, ``remaining`` for an unbounded property or negative;
        ModelTooLargeError, MemoryBudgetError (the guards of :func:`~rlverify.exact.chain.full_mdp`).
    """
    options = ExactOptions() if options is None else options
    try:
        return _action_values(model, prop, options, mdp, remaining, progress or (lambda msg: None))
    except MemoryError:
        raise out_of_memory("per-action values", SHRINK) from None


def _action_values(
    model: SymbolicModel,
    prop: Property,
    options: ExactOptions,
    given: FullMDP | None,
    remaining: int | None,
    say: Progress,
) -> ActionValues:
    check_resolved(model, prop)
    options.validate()
    if prop.operator != "P":
        raise PropertyError(
            f"property '{prop.text}': per-action values are computed for probabilities of reaching (P [F psi], "
            "P [phi U psi], step-bounded or not), not rewards"
        )
    opt = objective(prop)
    built = mdp_for(model, prop, options, given, progress=say)
    mdp, storm = built.mdp, built.storm
    formula, _, _ = quantitative(prop, optimality=opt)
    t = time.perf_counter()
    bounded = step_bounded_sets(storm, formula)
    if bounded is not None:
        phi, psi, k = bounded
        steps = k if remaining is None else int(remaining)
        if steps < 0:
            raise PropertyError(f"remaining steps must be >= 0, not {remaining}")
        next_values, next_lo, next_hi, method = _bounded_next(mdp, storm, phi, psi, steps, opt, options, say)
        sound = options.numerics in (Numerics.SOUND, Numerics.DIRECT)
    else:
        if remaining is not None:
            raise PropertyError(f"property '{prop.text}' has no step bound: remaining steps do not apply")
        phi, psi = _until(storm, formula, prop)
        steps = None
        next_values, next_lo, next_hi, method = _unbounded_next(storm, formula, opt, options, say)
        sound = options.numerics is Numerics.SOUND
    values, lower, upper = _products(mdp, phi, psi, next_values, next_lo, next_hi)
    reduce = np.minimum if opt == "min" else np.maximum
    state_values = reduce.reduceat(values, mdp.row_groups[:-1])
    return ActionValues(
        mdp=mdp,
        storm=storm,
        optimum=opt,
        values=values,
        lower=lower if sound else None,
        upper=upper if sound else None,
        state_values=state_values,
        next_values=next_values,
        remaining=steps,
        guarantee=guarantee(options.numerics),
        method=method,
        precision=options.precision,
        property=prop.text,
        seconds=time.perf_counter() - t,
        notes=tuple(mdp.notes),
    )


def _until(storm: StormModel, formula: StormFormula, prop: Property) -> tuple[np.ndarray, np.ndarray]:
    """``(phi, psi)`` of ``P [phi U psi]`` / ``P [F psi]`` over state formulas (PropertyError for another form)."""
    sets = until_sets(storm, formula)
    if sets is None:
        raise PropertyError(
            f"property '{prop.text}': per-action values are computed for P [F psi] and P [phi U psi] over state "
            "formulas (step-bounded or not) only"
        )
    return sets


def _unbounded_next(
    storm: StormModel, formula: StormFormula, opt: str, options: ExactOptions, say: Progress
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, str]:
    """``(values, lower, upper, method)``: P{opt} of every state by :func:`~rlverify.exact.checking.check` (its
    certified brackets with ``--numerics sound`` only)."""
    say(f"checking P{opt} on every state")
    out = check(
        storm,
        formula,
        environment(options.numerics, options.precision),
        numerics=options.numerics,
        precision=options.precision,
        max_work=options.max_work,
    )
    next_values = np.clip(out.values, 0.0, 1.0)
    method = out.method or "Storm"
    if options.numerics is not Numerics.SOUND:
        return next_values, None, None, method
    next_lo, next_hi = _storm_brackets(out.values, options.precision)
    return next_values, next_lo, next_hi, method


def _bounded_next(
    mdp: ExplicitModel,
    storm: Any,
    phi: np.ndarray,
    psi: np.ndarray,
    steps: int,
    opt: str,
    options: ExactOptions,
    say: Progress,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, str]:
    """``V*_{steps-1}`` per state with its certified bracket (``steps = 0``: nothing follows; zeros)."""
    S = mdp.num_states
    if steps == 0:
        zero = np.zeros(S)
        return zero, zero, zero, "no step left: Q = 1 in the target, else 0"
    say(f"computing P{opt} within {steps - 1} steps on every state")
    out = bounded_until(
        mdp.transitions,
        phi,
        psi,
        steps - 1,
        int(storm.initial_states[0]),
        row_groups=mdp.row_groups,
        optimum=opt,
        precision=options.precision,
        max_work=options.max_work,
        progress=say,
    )
    return np.clip(out.values, 0.0, 1.0), out.lowers, out.uppers, out.method or "step-bounded matrix-vector steps"


def _storm_brackets(values: np.ndarray, precision: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-state brackets from Storm's sound guarantee, ``|value - true| <= precision x |true|`` (as
    :func:`~rlverify.exact.storm_check.storm_bracket` widens it), one ulp out, inside [0, 1]."""
    delta = np.abs(values) * precision / (1.0 - precision)
    lo = np.clip(np.nextafter(values - delta, -np.inf), 0.0, 1.0)
    hi = np.clip(np.nextafter(values + delta, np.inf), 0.0, 1.0)
    return lo, hi


def _products(
    mdp: ExplicitModel,
    phi: np.ndarray,
    psi: np.ndarray,
    v: np.ndarray,
    lo: np.ndarray | None,
    hi: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``Q = psi + go * (T @ v)`` per choice, and its bracket from ``lo``/``hi`` rounded outwards."""
    cs = mdp.choice_states()
    T = mdp.transitions.tocsr()
    target = psi[cs].astype(np.float64)
    go = (phi & ~psi)[cs]
    q = np.where(go, T @ v, target)
    q = np.clip(q, 0.0, 1.0)
    if lo is None or hi is None:
        return q, None, None
    gamma, k = sum_margin(int(np.diff(T.indptr).max(initial=0)))
    q_lo = np.where(go, rounded_down(T @ np.asarray(lo, dtype=np.float64), gamma, k), target)
    q_hi = np.where(go, np.minimum(rounded_up(T @ np.asarray(hi, dtype=np.float64), gamma, k), 1.0), target)
    return q, np.minimum(q_lo, q), np.maximum(q_hi, q)


__all__ = ["ActionValues", "action_values", "objective"]
