"""How far a policy's value moves under model error: each MDP transition probability ``p`` known only within
``p ± delta`` (or ``p (1 ± delta)``), clipped to [0, 1], on the transitions that exist (the support is known).

The induced chain's row ``sum_a pi(a|s) T(s, a, .)`` then lies in the interval row ``[sum_a pi lo, sum_a pi hi]`` (a
sound relaxation of independent per-action uncertainty), rounded outwards;
:func:`~rlverify.exact.interval_iteration.robust_reachability` gives a certified lower bound of the min and upper
bound of the max of the property over every chain in it, widened to the nominal value's certified bracket.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlverify.errors import IntervalError, OptionError, PropertyError, did_you_mean
from rlverify.exact.chain import FullMDP, PolicyChain, chain_for, policy_chain
from rlverify.exact.cut import STALLED_LABEL
from rlverify.exact.induced import ChoiceWeights
from rlverify.exact.interval_iteration import robust_reachability
from rlverify.exact.options import ExactOptions, Progress, provenance
from rlverify.exact.outcome import verdict
from rlverify.exact.robust_options import ModelErrorOptions, check_input
from rlverify.exact.rounding import rounded_down, rounded_up, sum_margin
from rlverify.exact.verify import verify_exact
from rlverify.models.explicit import ExplicitModel, out_of_memory, to_storm
from rlverify.models.properties import Property
from rlverify.models.property_parser import parse_property
from rlverify.models.storm import truth_values
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.results import IntervalResult

__all__ = ["model_error_bounds"]


def model_error_bounds(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ModelErrorOptions | None = None,
    *,
    chain: PolicyChain | None = None,
    mdp: FullMDP | None = None,
    progress: Progress | None = None,
) -> IntervalResult:
    """The property's range over every MDP whose transition probabilities are within ``delta`` of the model's.

    The induced chain becomes an interval chain (see the module docstring); its rows are checked
    for feasibility (each row: sum of lows <= 1 <= sum of highs) and :func:`robust_reachability` bounds the min from
    below and the max from above, rounded outwards; both are widened to the nominal value's certified bracket, so
    ``lower <= nominal <= upper`` by construction. A threshold's verdict (``satisfied``) follows from them alone.
    Returns an :class:`~rlverify.results.IntervalResult`.

    Args:
        model, prop, policy: a loaded model, its parsed probability property and the policy.
        options: :class:`ModelErrorOptions` (None: the defaults).
        chain: the policy's chain when already built with its MDP kept (``policy_chain(..., keep_mdp=True)``, or
            induced on a :class:`~rlverify.exact.chain.FullMDP`): the intervals are read from the MDP's choices it
            weighs; a chain without them is induced again. mdp: the property-directed MDP when already built.
    """
    options = ModelErrorOptions() if options is None else options
    try:
        return _model_error_bounds(model, prop, policy, options, chain, mdp, progress or (lambda msg: None))
    except MemoryError:
        raise out_of_memory(
            "the model-error analysis", "verify a smaller model (constants), restrict --uncertain, or use --mode deterministic"
        ) from None


def _model_error_bounds(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    options: ModelErrorOptions,
    given: PolicyChain | None,
    mdp: FullMDP | None,
    say: Progress,
) -> IntervalResult:
    """Parse (done by the caller) -> the chain on the MDP -> its interval rows -> their min and max."""
    options.validate()
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    check_input(prop, policy)
    exact = ExactOptions(
        mode=options.mode, unavailable=options.unavailable, precision=options.precision, max_states=options.max_states
    )
    built = _chain_on_mdp(model, prop, policy, exact, given, mdp, say)
    timings["build"] = time.perf_counter() - t0
    t = time.perf_counter()
    lo, hi, n_clipped = _intervals(model, built, options)
    _check_feasible(lo, hi, built.chain)
    timings["policy_and_induce"] = time.perf_counter() - t
    t = time.perf_counter()
    bounds, converged = _interval_bounds(model, prop, built.chain, lo, hi, options)
    nominal = verify_exact(model, prop, policy, exact, chain=built)
    # the nominal chain is one of the interval chain's: widening to its certified bracket keeps both bounds sound
    # and puts the nominal inside by construction (each bound alone is already certified); by 16 ulps more, so the
    # bracket of another build of the same chain (verify's strategy; its sums rounded in another order) is inside too
    lower = min(bounds[0], max(_NOMINAL_MARGIN[0] * (nominal.value if nominal.lower is None else nominal.lower), 0.0))
    upper = max(bounds[1], min(_NOMINAL_MARGIN[1] * (nominal.value if nominal.upper is None else nominal.upper), 1.0))
    satisfied = None
    if prop.threshold is not None and prop.comparison is not None:
        satisfied, _ = verdict(prop.threshold, prop.comparison, lower, upper)
    timings["check"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    notes, says = _interval_notes(prop, options, n_clipped, converged)
    chain, d = built.chain, options.delta
    recorded = {
        "mode": options.mode,
        "unavailable": options.unavailable,
        "max_states": options.max_states,
        "constants": model.constants,
    }
    return IntervalResult(
        delta=float(d),
        relative=options.relative,
        uncertain_actions=None if options.actions is None else tuple(options.actions),
        nominal=nominal.value,
        lower=lower,
        upper=upper,
        states=chain.num_states,
        transitions=chain.num_transitions,
        clipped=n_clipped,
        guarantee=says,
        precision=options.precision,
        provenance=provenance(model, prop, policy, timings=timings, settings=recorded, warnings=notes),
        satisfied=satisfied,
    )


def _interval_notes(prop: Property, options: ModelErrorOptions, n_clipped: int, converged: bool) -> tuple[list[str], str]:
    """The model-error result's notes, and what its bounds guarantee."""
    notes = list(prop.notes)
    if n_clipped:
        notes.append(
            f"{n_clipped} transition probabilities of the MDP choices the policy takes left [0, 1] at "
            f"delta={options.delta}{' (relative)' if options.relative else ''} and were clipped to it"
        )
    if not converged:
        notes.append(
            "the robust value iteration stopped at its iteration or work limit before converging: the bounds "
            "are sound but may be loose"
        )
    how = f"{prop.bound:,} steps" if prop.bound is not None else f"until no value moves by more than {options.precision:g}"
    return notes, (
        f"sound: rlverify's robust value iteration ({how}), every step rounded outwards (the lower bound iterated from "
        "below, the upper from above), widened to the nominal value's certified bracket"
    )


def _chain_on_mdp(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    exact: ExactOptions,
    given: PolicyChain | None,
    mdp: FullMDP | None,
    say: Progress,
) -> PolicyChain:
    """The policy's chain with the MDP it was induced on and its choices' weights: ``given`` when it kept them,
    else induced here on the full MDP (``mdp`` when given)."""
    if given is not None:
        given = chain_for(model, prop, policy, exact, given)
        if given.source is not None and given.weights is not None:
            return given
    return policy_chain(model, prop, policy, dataclasses.replace(exact, strategy="full"), mdp=mdp, keep_mdp=True, progress=say)


def _uncertain(model: SymbolicModel, mdp: ExplicitModel, actions: tuple[str, ...] | None) -> np.ndarray:
    """``(C,)`` bool: the choices whose probabilities are uncertain (``actions``: by label or command name)."""
    if actions is None:
        return np.ones(mdp.num_choices, dtype=bool)
    label = np.asarray(mdp.action_names, dtype=object)[mdp.choice_actions]
    names = set(label.tolist())
    if mdp.choice_commands is not None:
        command = np.asarray(mdp.command_names, dtype=object)[mdp.choice_commands]
        names |= set(command.tolist())
    else:
        command = np.full(mdp.num_choices, "", dtype=object)
    known = {n for n in names if n} | {c.name for c in model.commands} | {a for a in model.action_names if a}
    for a in actions:
        if a not in known:
            raise OptionError(
                f"--uncertain: '{a}' is neither an action label nor a command name of the model"
                f"{did_you_mean(a, sorted(known))}"
            )
    return np.isin(label, list(actions)) | np.isin(command, list(actions))


def _intervals(
    model: SymbolicModel, built: PolicyChain, options: ModelErrorOptions
) -> tuple[sp.csr_matrix, sp.csr_matrix, int]:
    """The interval rows ``(lo, hi)`` of the induced chain, and how many probabilities of taken choices were
    clipped to [0, 1]."""
    mdp, cw, origin = built.source, built.weights, built.origin
    assert mdp is not None and cw is not None
    T = mdp.transitions.tocsr()
    uncertain = _uncertain(model, mdp, options.actions)
    uncertain &= np.diff(T.indptr) > 1  # a choice with one successor goes there with probability 1 whatever delta
    branch_uncertain = np.repeat(uncertain, np.diff(T.indptr))
    d = options.delta
    raw_lo = np.where(branch_uncertain, T.data * (1 - d) if options.relative else T.data - d, T.data)
    raw_hi = np.where(branch_uncertain, T.data * (1 + d) if options.relative else T.data + d, T.data)
    lo_data, hi_data = np.clip(raw_lo, 0.0, 1.0), np.clip(raw_hi, 0.0, 1.0)
    clipped = (raw_lo < 0) | (raw_hi > 1)
    reached_choice = np.zeros(mdp.num_states, dtype=bool)
    reached_choice[origin[origin >= 0]] = True
    taken = np.repeat(reached_choice[mdp.choice_states()] & (cw.weights > 0), np.diff(T.indptr))
    T_lo = sp.csr_matrix((lo_data, T.indices, T.indptr), shape=T.shape)
    T_hi = sp.csr_matrix((hi_data, T.indices, T.indptr), shape=T.shape)
    lo, hi = _interval_rows(mdp, cw, T_lo, T_hi, origin)
    return lo, hi, int((clipped & taken).sum())


def _stay_and_target(model: SymbolicModel, prop: Property, chain: ExplicitModel) -> tuple[np.ndarray, np.ndarray]:
    """``(stay, target)`` ``(n,)`` bool of the reachability the property is (or is the complement of, for ``G`` and
    ``W``) on the chain: its state formulas, which a stalled run satisfies none of."""
    plain = to_storm(chain)
    sink = chain.labels.get(STALLED_LABEL, np.zeros(chain.num_states, dtype=bool))

    def states(formula: Any) -> np.ndarray:
        return np.asarray(truth_values(plain, formula), dtype=bool) & ~sink  # a stalled run satisfies no state formula

    path = prop.storm_formula().subformula
    if prop.path == "X":  # stormpy gives a next formula no subformula: its operand read as an eventually formula's
        path = parse_property(model, f"P=? [F ({prop.right})]", fixed_policy=True).storm_formula().subformula
    if prop.path in ("U", "W") or path.is_bounded_until_formula:  # F<=k is Storm's true U<=k
        left, right = states(path.left_subformula), states(path.right_subformula)
    else:
        left, right = ~sink, states(path.subformula)
    if prop.path == "G":
        return ~sink, ~right | sink
    if prop.path == "W":
        return ~right & ~sink, (~left & ~right) | sink
    return left, right


def _interval_bounds(
    model: SymbolicModel,
    prop: Property,
    chain: ExplicitModel,
    lo: sp.csr_matrix,
    hi: sp.csr_matrix,
    options: ModelErrorOptions,
) -> tuple[list[float], bool]:
    """A certified lower bound of the min and upper bound of the max of the property over the interval chain (inside
    [0, 1]) by :func:`robust_reachability`, and whether both iterations converged.

    ``G`` and ``W`` are complements of reachability (``P(G a) = 1 - P(F !a)``, ``P(a W b) = 1 - P(!b U (!a & !b))``),
    ``X`` one step; the state formulas are those :func:`~rlverify.exact.chain.on_chain` gives (a stalled run
    satisfies none).
    """
    if prop.lower_bounded:
        raise PropertyError(
            f"property '{prop.text}': a lower step bound (F>=k, F[a,b]) is not computed under model error; "
            "use an upper step bound (F<=k) or none"
        )
    stay, target = _stay_and_target(model, prop, chain)
    complement = prop.path in ("G", "W")
    steps = 1 if prop.path == "X" else prop.bound
    init = int(chain.initial_states[0])
    bounds, converged = [], True
    for maximize in (complement, not complement):  # a complement's min is 1 - the max of its reachability
        values, done = robust_reachability(
            lo, hi, target, stay, maximize=maximize, precision=options.precision, steps=steps, next_step=prop.path == "X"
        )
        bounds.append(float(values[init]))
        converged &= done
    if complement:  # 1 - b rounded outwards: exact for b = 0 or b >= 1/2 (Sterbenz), else within half an ulp
        bounds = [_one_minus(bounds[0], 0.0), _one_minus(bounds[1], 2.0)]
    return [min(max(b, 0.0), 1.0) for b in bounds], converged


#: the factors that widen the nominal's bracket by 16 ulps (relative)
_NOMINAL_MARGIN = (1.0 - 16 * 2.0**-53, 1.0 + 16 * 2.0**-53)


def _one_minus(b: float, toward: float) -> float:
    """``1 - b`` for ``b`` in [0, 1], moved one ulp ``toward`` where the subtraction may have rounded."""
    exact = b == 0.0 or b >= 0.5
    return 1.0 - b if exact else float(np.nextafter(1.0 - b, toward))


def _interval_rows(
    mdp: ExplicitModel, cw: ChoiceWeights, T_lo: sp.csr_matrix, T_hi: sp.csr_matrix, origin: np.ndarray
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Interval rows of the induced chain (states in ``origin``'s order): ``(n, n)`` CSR lows and highs, one pattern."""
    S = mdp.num_states
    cs = mdp.choice_states()
    keep = cw.weights > 0
    W = sp.csr_matrix((cw.weights[keep], (cs[keep], np.flatnonzero(keep))), shape=(S, mdp.num_choices))
    stall = sp.csr_matrix(cw.stalled.reshape(-1, 1))
    has_sink = bool((origin < 0).any())
    n = len(origin)
    cols = np.where(origin >= 0, origin, S)
    rows = origin[origin >= 0]
    out = []
    for T in (T_hi, T_lo):
        full = sp.hstack([W @ T, stall], format="csr")[rows][:, cols].tocsr()
        if has_sink:
            full = sp.vstack([full, sp.csr_matrix(([1.0], ([0], [n - 1])), shape=(1, n))], format="csr")
        out.append(full.tocoo())
    hi, lo = out
    hi.sum_duplicates()
    lo.sum_duplicates()
    # the lows on the highs' pattern (a low may be 0 where the high is not)
    hkey = hi.row.astype(np.int64) * n + hi.col
    lkey = lo.row.astype(np.int64) * n + lo.col
    order = np.argsort(hkey)
    hkey = hkey[order]
    lo_on = np.zeros(len(hkey))
    pos = np.searchsorted(hkey, lkey)
    lo_on[pos] = lo.data
    H = sp.csr_matrix((hi.data[order], (hi.row[order], hi.col[order])), shape=(n, n))
    L = sp.csr_matrix((lo_on, (hi.row[order], hi.col[order])), shape=(n, n))
    H.sort_indices()
    L.sort_indices()  # same pattern as H: both built from the same sorted (row, col) list
    # rounded outwards: each entry is a float sum of at most (choices per state + 1) products of a weight and a
    # computed bound (p -/+ delta, one more rounding), so the exact intervals lie inside [L, H]
    per_state = int(np.diff(mdp.row_groups).max(initial=1)) if mdp.row_groups is not None else 1
    gamma, k = sum_margin(per_state + 2)
    L.data = rounded_down(L.data, gamma, k)
    H.data = np.minimum(rounded_up(H.data, gamma, k), 1.0)
    return L, H


def _check_feasible(lo: sp.csr_matrix, hi: sp.csr_matrix, chain: ExplicitModel, tol: float = 1e-9) -> None:
    """Raise :class:`IntervalError` for rows whose intervals admit no distribution (sum lo <= 1 <= sum hi)."""
    slo = np.asarray(lo.sum(axis=1)).ravel()
    shi = np.asarray(hi.sum(axis=1)).ravel()
    crossed = sp.csr_matrix(((lo.data > hi.data + tol).astype(np.float64), hi.indices, hi.indptr), shape=hi.shape)
    bad = (slo > 1 + tol) | (shi < 1 - tol) | (np.asarray(crossed.sum(axis=1)).ravel() > 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise IntervalError(
            f"infeasible interval chain: {int(bad.sum())} rows admit no distribution (first: state "
            f"{chain.valuation_dict(i)}, lows sum to {slo[i]:.6g}, highs to {shi[i]:.6g})"
        )
