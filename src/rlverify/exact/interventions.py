"""A shield's interventions on the shielded policy's chain: the reached states where it removes the policy's mass,
its fallbacks, and the expected number of intervening steps per run (and of mass removed), within the property's
step bound or over the whole run (a linear solve on the transient states)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg
from scipy.sparse.csgraph import connected_components

from rlverify.errors import PropertyError
from rlverify.exact.bounded import iterate, step_budget, step_work
from rlverify.exact.chain import PolicyChain
from rlverify.models.explicit import ExplicitModel
from rlverify.models.graph import reachable
from rlverify.policies.shielded import ShieldedPolicy

__all__ = ["expected_total", "interventions"]


def interventions(
    wrapped: ShieldedPolicy,
    chain: PolicyChain,
    mdp: ExplicitModel,
    deterministic: bool,
    steps: int | None,
    max_work: int | None,
) -> dict[str, Any]:
    """The shield's interventions on the shielded policy's chain: reached covered states, those where mass is
    removed (mode ``deterministic``: where the policy's argmax action is removed), fallbacks, and the expected number
    of intervening steps per run (and of mass removed) within ``steps`` (None: the whole run; ``max_work``: the
    step-bounded computation's budget)."""
    origin = chain.origin
    model_states = np.flatnonzero(origin >= 0)
    vals = mdp.valuations[origin[model_states]]
    rows, removed, fallback = wrapped.interventions(vals, deterministic=deterministic)
    known = rows >= 0
    n = chain.chain.num_states
    indicator = np.zeros(n)
    mass = np.zeros(n)
    indicator[model_states] = (removed > 0).astype(np.float64)
    mass[model_states] = removed
    reached = int(known.sum())
    intervened = int((removed > 0).sum())
    P = chain.chain.transitions.tocsr()
    init = int(chain.chain.initial_states[0])
    expected, expected_mass = expected_total(P, np.c_[indicator, mass], init, steps, max_work)
    return {
        "reachable": reached,
        "intervened": intervened,
        "share": intervened / reached if reached else 0.0,
        "fallback": int((fallback & known).sum()),
        "expected": expected,
        "mass": expected_mass,
    }


def expected_total(
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
    reach = reachable(P, None, np.array([init]))
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
