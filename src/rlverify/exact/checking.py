"""Checking PCTL properties, with the numerics made explicit: which solver answers a formula (:func:`check`).

Numerics (``--numerics``):

* ``sound`` (default): Storm's sound environment (optimistic value iteration, topological):
  the result is within ``precision`` (relative) of the true value.
* ``direct``: Storm's Eigen linear equation solver with its own default method: no convergence
  heuristic on ``precision`` (the value does not depend on it), but not exact either: measured
  1.6e-7 relative error on Freeway under a uniform policy (no bounds are reported).
* ``fast``: Storm's plain value iteration with a convergence heuristic (Jacobi/Gauss-Seidel
  style). It can stop far from the true value on ill-conditioned chains (see NOTES.md:
  0.99922 instead of 0.999998); offered for speed studies only.

Step-bounded properties (``F<=k``, ``U<=k``, ``C<=k``) are computed by k matrix-vector steps
in every setting; step-bounded reachability (:func:`~rlverify.exact.bounded.bounded_until`, on a chain or an MDP)
stops early, soundly, at a fixed point or once within ``precision`` of the unbounded value, within a work budget
(``max_work``, steps x transitions, a step counting at least ``STEP_WORK``); forms Storm iterates are refused up
front above it (:mod:`rlverify.exact.storm_check`).

Threshold verdicts (:func:`~rlverify.exact.outcome.verdict`) come from a certified bracket and exact graph analysis
only (:func:`~rlverify.exact.bounded.ranks`, :func:`~rlverify.exact.bounded.qualitative`,
:func:`~rlverify.exact.storm_check.storm_qualitative`), never from a rounded value.

Unbounded reachability on a policy-induced chain (``P=? [F t]``, ``P=? [a U b]``; when
:func:`check` is given the chain's ``matrix`` and ``numerics``) is solved by :mod:`rlverify.exact.linear`, not by
Storm's iterative solvers, for ``sound`` and ``direct``:

1. graph analysis: states that cannot reach the target are 0, states that reach it with
   probability 1 are 1 (exactly); only the remaining "maybe" states are solved;
2. a sparse LU solve of ``(I - A) x = b`` on the maybe states (float64, with iterative refinement); where
   they have no cycle (self-loops aside; e.g. QVBS csma) ``I - A`` is triangular in a topological
   order, its own LU factor, and is solved by substitution (no fill-in);
3. an a-posteriori certificate: vectors ``l <= x_hat <= u`` with ``A l + b >= l`` and
   ``A u + b <= u`` checked with a rounding-error margin (all terms are non-negative, so the check
   itself is rigorous in floating point); then ``l <= x <= u`` for the true solution ``x``. The
   result's ``lower``/``upper`` are that bracket, so tiny values get a relative error that means
   something (e.g. 3e-20 within 1e-12 relative);
4. ``sound`` only: if the bracket is wider than ``precision`` (relative), interval iteration from
   it (rounded outwards, so still sound) within a time budget; if the budget runs out the result
   keeps the bracket reached and says so (it always answers).

``direct`` reports the LU value, with the bracket when the certificate holds (else no bounds and a
note that only an absolute error is known). ``fast`` stays Storm's plain value iteration (no bounds;
values below ``TINY`` are flagged: their relative error is unknown). Each outcome says which
``method`` answered and a ``note`` on its precision.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rlverify.choices import Numerics
from rlverify.errors import PropertyError
from rlverify.exact.bounded import Matrix, bounded_until
from rlverify.exact.formulas import PathKind, StormFormula, has_operator, path_kind, step_upper_bound
from rlverify.exact.linear import SOUND_BUDGET_SECONDS, reachability
from rlverify.exact.options import MAX_WORK
from rlverify.exact.outcome import CheckOutcome
from rlverify.exact.storm_check import StormEnvironment, StormModel, state_set, storm_check

__all__ = ["check", "solved_here", "step_bounded_sets", "until_sets"]

#: the numerics whose reachability is solved on the chain's matrix (``fast`` stays Storm's)
_SOLVED = (Numerics.SOUND, Numerics.DIRECT)


def check(
    storm_model: StormModel,
    formula: StormFormula,
    env: StormEnvironment,
    *,
    matrix: Matrix | None = None,
    numerics: str | None = None,
    precision: float | None = None,
    budget: float | None = None,
    full_model: Callable[[], StormModel] | None = None,
    max_work: int | None = MAX_WORK,
    progress: Callable[[str], None] | None = None,
) -> CheckOutcome:
    """Check ``formula`` on ``storm_model``; value at the (single) initial state.

    With ``matrix`` (the chain's ``(S, S)`` CSR transition matrix, same state order as the Storm
    DTMC) and ``numerics``, unbounded reachability is solved by graph analysis + sparse LU + a
    certified bracket and step-bounded reachability by :func:`~rlverify.exact.bounded.bounded_until` (see the module
    docstring); everything else is Storm's, annotated with its precision. Without them: Storm's answer as is
    (``method``/``note`` None). ``full_model``: when ``storm_model`` carries only the chain's states, labels
    and valuations (for its state formulas; the transitions are ``matrix``), a function returning the full
    Storm chain for when Storm must check ``formula`` itself. ``max_work``: the budget of step-bounded
    computations (steps x transitions, see :func:`~rlverify.exact.bounded.bounded_until`); a step-bounded formula Storm
    computes is refused up front above it. Reward-bounded formulas (``F{"r"}<=5``) are checked by Storm for the initial
    state only (``values`` is NaN elsewhere).
    """
    init = storm_model.initial_states
    if len(init) != 1:
        raise PropertyError(f"the model has {len(init)} initial states; rlverify reports the value of a single one")
    s = int(init[0])
    if matrix is not None and _on_matrix(storm_model, matrix, numerics):
        assert numerics is not None
        p = precision or 1e-6
        out = _solve_here(storm_model, formula, matrix, s, numerics, p, budget, max_work, progress)
        if out is not None:
            return out
    if full_model is not None:
        storm_model = full_model()
    return storm_check(storm_model, formula, env, s, numerics=numerics, precision=precision, max_work=max_work)


def _on_matrix(storm_model: StormModel, matrix: Matrix, numerics: str | None) -> bool:
    """Whether reachability may be solved on ``matrix``: a DTMC's, in Storm's state order, with sound/direct numerics."""
    return (
        numerics in _SOLVED and str(storm_model.model_type).endswith("DTMC") and matrix.shape == (storm_model.nr_states,) * 2
    )


def _solve_here(
    storm_model: StormModel,
    formula: StormFormula,
    matrix: Matrix,
    s: int,
    numerics: str,
    precision: float,
    budget: float | None,
    max_work: int | None,
    progress: Callable[[str], None] | None,
) -> CheckOutcome | None:
    """Reachability on the chain's ``matrix``: unbounded by the certified linear solve, step-bounded by
    :func:`~rlverify.exact.bounded.bounded_until`; None when ``formula`` is neither or the solve declines."""
    sets = until_sets(storm_model, formula)
    if sets is not None:
        out = reachability(
            matrix, sets[0], sets[1], s, numerics, precision, SOUND_BUDGET_SECONDS if budget is None else budget
        )
        if out is not None:
            return out
    bounded = step_bounded_sets(storm_model, formula)
    if bounded is None:
        return None
    phi, psi, k = bounded

    def cap(m: Matrix = matrix, a: np.ndarray = phi, b: np.ndarray = psi) -> np.ndarray | None:
        unbounded = reachability(m, a, b, s, Numerics.SOUND, precision, SOUND_BUDGET_SECONDS)
        return None if unbounded is None else unbounded.uppers

    return bounded_until(matrix, phi, psi, k, s, precision=precision, max_work=max_work, cap=cap, progress=progress)


def until_sets(storm_model: StormModel, formula: StormFormula) -> tuple[np.ndarray, np.ndarray] | None:
    """``(phi, psi)`` state masks when ``formula`` is ``P=? [phi U psi]`` or ``P=? [F psi]`` (unbounded)."""
    if not formula.is_probability_operator_formula:
        return None
    path = formula.subformula
    kind = path_kind(path)
    try:  # a nested path formula (PCTL* / LTL: ((true U a) U b)) is no state formula: Storm's route then
        if kind is PathKind.EVENTUALLY:
            return np.ones(storm_model.nr_states, dtype=bool), state_set(storm_model, path.subformula)
        if kind is PathKind.UNTIL:
            return state_set(storm_model, path.left_subformula), state_set(storm_model, path.right_subformula)
    except PropertyError:
        return None
    return None


def solved_here(formula: StormFormula, numerics: str) -> bool:
    """Whether :func:`check` solves ``formula`` on the chain's matrix (else Storm checks it alone)."""
    if numerics not in _SOLVED or not formula.is_probability_operator_formula:
        return False
    path = formula.subformula
    kind = path_kind(path)
    if kind not in (PathKind.EVENTUALLY, PathKind.UNTIL, PathKind.BOUNDED_UNTIL):
        return False
    if kind is PathKind.BOUNDED_UNTIL and step_upper_bound(path) is None:
        return False
    # propositional state formulas only: a nested P/R operator needs the chain's transitions in Storm
    return not has_operator(path)


def step_bounded_sets(storm_model: StormModel, formula: StormFormula) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``(phi, psi, k)`` when ``formula`` is ``P=? [phi U<=k psi]`` or ``P=? [F<=k psi]`` (step-bounded)."""
    if not formula.is_probability_operator_formula or path_kind(formula.subformula) is not PathKind.BOUNDED_UNTIL:
        return None
    path = formula.subformula
    k = step_upper_bound(path)
    if k is None:
        return None
    try:
        return state_set(storm_model, path.left_subformula), state_set(storm_model, path.right_subformula), k
    except PropertyError:
        return None
