"""Critical states: the policy-reachable states where the choice of action matters most.

For a property ``P [F phi]``, ``F<=k phi``, ``psi U phi`` or ``psi U<=k phi`` (:func:`critical_states`):

* ``Q(s, a)`` is the best value still achievable after taking ``a`` in ``s``
  (:func:`~rlverify.exact.action_values.action_values` on the full MDP: ``Pmin`` afterwards when the property names a
  bad event, ``Pmax`` for a goal). Step-bounded properties use the full bound ``k`` as the remaining steps (the
  values at the initial step; a memoryless reading at later steps);
* a state's **spread** is ``max_a Q(s, a) - min_a Q(s, a)`` over the actions it offers (how much the choice there can
  change the value), and its **score** is the spread times the state's exact expected visits under the policy
  (:func:`~rlverify.exact.tree.expected_visits`);
* the top ``K`` by score are listed with the policy's distribution there, every action's ``Q`` and the best action.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlverify.choices import Mode
from rlverify.errors import OptionError, PropertyError
from rlverify.exact.action_values import action_values
from rlverify.exact.chain import PolicyChain, chain_for, full_mdp, states_of
from rlverify.exact.explain import check_explainable
from rlverify.exact.induced import ask_policy
from rlverify.exact.options import ExactOptions, Progress, provenance, settings
from rlverify.exact.tree import expected_visits
from rlverify.models.properties import ASSUMED_BAD_EVENT, Property, worst_case
from rlverify.models.property_parser import parse_property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.results import CriticalState, CriticalStates

#: the most critical states listed (``--top``)
MAX_TOP = 10_000


@dataclass(frozen=True)
class CriticalOptions:
    """Settings of :func:`critical_states`.

    Attributes:
        top: how many states to list (largest score first).
        worst: ``max`` when the property names a failure (then ``Q`` reads ``Pmin`` afterwards and the best action
            has the least ``Q``), ``min`` for a goal; None: from the property (``P>=b``/``Pmax``: a goal; else a failure).
        exact: the exact engine's settings (mode, unavailable, numerics, precision, max_states, ...).
    """

    top: int = 10
    worst: str | None = None
    exact: ExactOptions = dataclasses.field(default_factory=ExactOptions)

    def validate(self) -> None:
        if isinstance(self.top, bool) or not isinstance(self.top, int) or not 1 <= self.top <= MAX_TOP:
            raise OptionError(f"--top: expected an integer from 1 to {MAX_TOP:,}, got {self.top!r}")
        if self.worst is not None and self.worst not in ("max", "min"):
            raise OptionError(f"--worst: expected max or min, got '{self.worst}'")
        if self.exact.mode is Mode.MONOLITHIC:
            raise OptionError("critical states are read on a policy's chain: --mode stochastic or deterministic")
        self.exact.validate()


def directed(model: SymbolicModel, prop: Property, worst: str | None) -> tuple[Property, str]:
    """``prop`` as ``Pmin=? [...]`` (a failure: ``worst`` max) or ``Pmax=? [...]`` (a goal), for the per-action
    values, and that direction (``min``/``max``). Without ``worst``: :func:`~rlverify.models.properties.worst_case`
    (the caller notes an assumed reading)."""
    worst = worst_case(prop, worst)[0]
    opt = "min" if worst == "max" else "max"
    if prop.right is None or prop.path not in ("F", "U") or (prop.path == "U" and prop.left is None):
        raise PropertyError(f"'{prop.text}': critical states are read for P [F phi] and P [psi U phi] only")
    bound = "" if prop.bound is None else f"<={prop.bound}"
    path = f"F{bound} ({prop.right})" if prop.path == "F" else f"({prop.left}) U{bound} ({prop.right})"
    return parse_property(model, f"P{opt}=? [{path}]"), opt


def _critical(
    policy: Policy,
    qs: np.ndarray,
    offered: np.ndarray,
    probs: np.ndarray,
    opt: str,
    state: dict[str, int],
    measures: tuple[float, float, float],
) -> CriticalState:
    """One state's row: its ``(visits, spread, score)``, the policy's distribution, ``Q`` of its offered actions, the
    best and the likeliest action."""
    avail = [a for a, ok in enumerate(offered) if ok]
    best = min(avail, key=lambda a: qs[a]) if opt == "min" else max(avail, key=lambda a: qs[a])
    likely = int(np.argmax(probs))
    return CriticalState(
        state=state,
        visits=measures[0],
        spread=measures[1],
        score=measures[2],
        policy={policy.actions[a]: float(probs[a]) for a in range(len(policy.actions)) if probs[a] > 0},
        q={policy.actions[a]: float(qs[a]) for a in avail},
        best=policy.actions[best],
        likely=policy.actions[likely],
        likely_is_best=bool(likely in avail and qs[likely] == qs[best]),
    )


def _notes(prop: Property, options: CriticalOptions, value_notes: Sequence[str]) -> list[str]:
    """The notes of the property and the action values, the worst case assumed, and how a step bound is read."""
    notes = list(dict.fromkeys([*prop.notes, *value_notes]))
    if worst_case(prop, options.worst)[1]:
        notes.append(ASSUMED_BAD_EVENT)
    if prop.bound is not None:
        notes.append(
            f"Q(s, a) is read with the full step bound {prop.bound} remaining (the values at the initial step; at "
            "later steps fewer remain)"
        )
    return notes


def critical_states(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: CriticalOptions | None = None,
    *,
    chain: PolicyChain | None = None,
    progress: Progress | None = None,
) -> CriticalStates:
    """The policy-reachable states where the choice matters most (see the module's docstring).

    Returns a :class:`~rlverify.results.CriticalStates` with the top ``options.top`` states by score.

    Raises:
        PropertyError: another property form; OptionError: bad options; what the exact engine raises.
    """
    options = CriticalOptions() if options is None else options
    options.validate()
    check_explainable(prop)
    say = progress or (lambda msg: None)
    exact = dataclasses.replace(options.exact, all_states=False, export=None)
    t0 = time.perf_counter()
    built = chain_for(model, prop, policy, exact, chain, progress=say)
    occ = expected_visits(built, prop, max_work=exact.max_work)
    visited = np.flatnonzero((occ.visits > 0) & (built.origin >= 0))
    target, opt = directed(model, prop, options.worst)
    say(f"per-action values (P{opt} afterwards) on the full MDP")
    full = full_mdp(model, target, exact, policy=policy, progress=say)
    av = action_values(model, target, exact, mdp=full)
    q_all = av.for_actions(policy.actions)  # (S, A), NaN: not offered
    at = states_of(full.mdp.valuations, full.mdp.variables, built.chain.valuations[visited], built.chain.variables)
    q = q_all[at]
    offered = ~np.isnan(q)
    some = offered.any(axis=1)
    high = np.max(np.where(offered, q, -np.inf), axis=1)
    low = np.min(np.where(offered, q, np.inf), axis=1)
    spread = np.where(some, high - np.where(some, low, 0.0), 0.0)
    score = occ.visits[visited] * spread
    order = np.lexsort((np.arange(len(visited)), -score))[: options.top]
    probs, _ = ask_policy(built.chain, policy, visited[order])
    variables = built.chain.variables
    rows = []
    for i, j in enumerate(order):
        state = {v: int(x) for v, x in zip(variables, built.chain.valuations[visited[j]], strict=True)}
        measures = (float(occ.visits[visited[j]]), float(spread[j]), float(score[j]))
        rows.append(_critical(policy, q[j], offered[j], probs[i], opt, state, measures))
    notes = _notes(prop, options, av.notes)
    return CriticalStates(
        optimum=opt,
        remaining=av.remaining,
        weighting=occ.horizon,
        states=tuple(rows),
        considered=len(visited),
        total_score=float(score.sum()),
        guarantee=av.guarantee,
        precision=av.precision,
        provenance=provenance(
            model,
            prop,
            policy,
            settings={**settings(exact, built.strategy, model), "top": options.top, "worst": options.worst},
            timings={"total": time.perf_counter() - t0},
            warnings=notes,
        ),
    )
