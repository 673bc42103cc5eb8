"""Unbounded reachability on chains whose undecided part is acyclic: the system is triangular in a topological order
and solved by substitution (no LU). Checked against exact rationals (``fractions.Fraction`` on the chain's own float
entries) and against the LU route on the same chains. These chains are small: the sparse routes are tested with
:data:`~rlverify.exact.linear.DENSE_STATES` at 0 (``sparse``), the dense LU they would take by default against the
same rationals (``test_small_chains_are_solved_densely_with_the_same_certificate``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any
from unittest import mock

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from rlverify.exact import linear
from rlverify.exact.rounding import relative


@st.composite
def _dags(draw: st.DrawFn) -> sp.csr_matrix:
    """A random ``(n, n)`` pattern with no cycle (no self-loop), its states in a random order."""
    n = draw(st.integers(1, 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    upper = sp.triu(sp.random(n, n, density=draw(st.floats(0.0, 0.6)), random_state=rng), k=1)
    perm = rng.permutation(n)
    return sp.csr_matrix(upper)[perm][:, perm]


def _successors_first(a: sp.csr_matrix, order: np.ndarray) -> bool:
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    off = rows != a.indices
    return bool(np.all(place[rows[off]] > place[a.indices[off]]))  # successors first: I - A lower triangular


@given(_dags(), st.integers(0, 2**32 - 1))
@settings(max_examples=300, deadline=None)
def test_triangular_order_is_topological_and_refuses_every_cycle(a, seed):
    """A (reversed) topological order of an acyclic pattern (self-loops allowed: they stay on the diagonal); None once an edge
    back along a stored one closes a cycle of two states."""
    rng = np.random.default_rng(seed)
    loops = a.tolil()
    for s in rng.permutation(a.shape[0])[: int(rng.integers(a.shape[0] + 1))]:
        loops[s, s] = 0.5
    for pattern in (a, loops.tocsr()):
        order = linear.triangular_order(pattern)
        assert order is not None and sorted(order.tolist()) == list(range(a.shape[0]))
        assert _successors_first(pattern, order)
    if a.nnz:
        coo = a.tocoo()
        k = int(rng.integers(a.nnz))
        back = loops.copy()
        back[coo.col[k], coo.row[k]] = 0.25
        assert linear.triangular_order(back.tocsr()) is None


@given(_dags(), st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_triangular_order_trusts_no_numbering_of_the_components(a, seed):
    """Whatever numbering scipy's components come in (its own, reversed, shuffled): a valid order or None."""
    import scipy.sparse.csgraph as csgraph

    real = csgraph.connected_components
    count, labels = real(a, directed=True, connection="strong")
    shuffled = np.random.default_rng(seed).permutation(len(labels))
    for numbering, always in ((len(labels) - 1 - labels, True), (shuffled, False)):
        with mock.patch.object(csgraph, "connected_components", lambda *_, n=numbering, **__: (count, n)):
            order = linear.triangular_order(a)
        assert (order is not None) if always else True
        assert order is None or _successors_first(a, order)


@st.composite
def _acyclic_chains(draw: st.DrawFn) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, int]:
    """A chain of ``n`` transient states in a random order, each moving to later ones, to the goal (state n), to a
    failure (state n+1), both absorbing, or staying (self-loops); phi excludes a few transient states. Probabilities
    are multiples of 2**-10 summing to exactly 1 (the rationals' chain is the float one). Returns (P, phi, psi, init)."""
    n = draw(st.integers(1, 25))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.floats(0.05, 0.8))
    loops = draw(st.floats(0.0, 0.5))
    rows, cols, vals = [], [], []
    for i in range(n):
        succ = [j for j in range(i + 1, n) if rng.random() < density]
        succ += [n] * (rng.random() < 0.5) + [n + 1] * (rng.random() < 0.5)
        if not succ:
            succ = [n + 1]
        succ += [i] * (rng.random() < loops)
        k = len(succ)
        weights = rng.multinomial(1024 - k, np.full(k, 1.0 / k)) + 1
        rows += [i] * k
        cols += succ
        vals += (weights / 1024).tolist()
    rows += [n, n + 1]
    cols += [n, n + 1]
    vals += [1.0, 1.0]
    perm = np.r_[rng.permutation(n), n, n + 1]  # transient states shuffled: the input is not triangular as given
    P = sp.csr_matrix((vals, (rows, cols)), shape=(n + 2, n + 2))[perm][:, perm]
    phi = np.ones(n + 2, dtype=bool)
    phi[rng.permutation(n)[: draw(st.integers(0, 2))]] = False  # blocking states (value 0) shuffled among them
    psi = np.zeros(n + 2, dtype=bool)
    psi[n] = True
    return sp.csr_matrix(P), phi, psi, int(draw(st.integers(0, n - 1)))


def _exact(P: sp.csr_matrix, phi: np.ndarray, psi: np.ndarray) -> list[Fraction]:
    """``P(phi U psi)`` of every state in rationals from the float entries: the chain is acyclic apart from self-loops,
    so values follow by recursion on the successors (memoised)."""
    n = P.shape[0]
    value: dict[int, Fraction] = {}

    def of(s: int) -> Fraction:
        if s not in value:
            if psi[s]:
                value[s] = Fraction(1)
            elif not phi[s] or P[s, s] == 1.0:
                value[s] = Fraction(0)
            else:  # x_s = sum over t != s of p_st x_t, divided by 1 - p_ss
                start, end = P.indptr[s], P.indptr[s + 1]
                succ = [(int(t), Fraction(float(p))) for t, p in zip(P.indices[start:end], P.data[start:end], strict=True)]
                value[s] = sum((p * of(t) for t, p in succ if t != s), Fraction(0)) / (1 - Fraction(float(P[s, s])))
        return value[s]

    return [of(s) for s in range(n)]


def _check(P: sp.csr_matrix, phi: np.ndarray, psi: np.ndarray, init: int, numerics: str, *, dense: bool = False) -> Any:
    """``linear.reachability`` by the sparse routes (substitution or sparse LU), or (``dense``) as small chains are
    solved by default."""
    with mock.patch.object(linear, "DENSE_STATES", linear.DENSE_STATES if dense else 0):
        return linear.reachability(P, phi, psi, init, numerics, 1e-6, 10.0)


@given(_acyclic_chains(), st.sampled_from(["sound", "direct"]))
@settings(max_examples=200, deadline=None)
def test_small_chains_are_solved_densely_with_the_same_certificate(chain, numerics):
    """The dense LU (the default up to DENSE_STATES states: no scipy.sparse.linalg) brackets the exact rationals as
    tightly as the sparse routes, and its values agree with theirs to 1e-12 (relative)."""
    P, phi, psi, init = chain
    exact = _exact(P, phi, psi)
    solvers: list[str] = []
    real = linear._solver

    def spy(system: Any, order: np.ndarray | None) -> Any:
        solvers.append("dense" if system.shape[0] <= linear.DENSE_STATES else "sparse")
        return real(system, order)

    with mock.patch.object(linear, "_solver", spy):
        out = _check(P, phi, psi, init, numerics, dense=True)
    assert set(solvers) <= {"dense"}
    sparse = _check(P, phi, psi, init, numerics)
    assert out.zero == sparse.zero and out.one == sparse.one
    assert out.method == sparse.method.replace("sparse LU", "dense LU")
    assert np.allclose(out.values, sparse.values, rtol=1e-12, atol=0.0)
    if out.lower is None:
        assert sparse.lower is None
        return
    assert Fraction(out.lower) <= exact[init] <= Fraction(out.upper)
    if exact[init] > 0:
        assert relative(out.value, out.lower, out.upper) <= 1e-12
    assert out.lowers is not None and out.uppers is not None
    for s in range(P.shape[0]):
        assert Fraction(float(out.lowers[s])) <= exact[s] <= Fraction(float(out.uppers[s]))


def test_the_dense_limit_is_where_the_sparse_routes_start():
    """DENSE_STATES maybe-states are solved densely, one more by the sparse routes (a line of states to the goal)."""
    for m, method in ((linear.DENSE_STATES, "dense LU"), (linear.DENSE_STATES + 1, "sparse LU")):
        n = m + 2
        rows = [*range(m), *range(m), m, m + 1]
        cols = [*range(1, m + 1), *([m + 1] * m), m, m + 1]
        P = sp.csr_matrix(([0.5] * m + [0.5] * m + [1.0, 1.0], (rows, cols)), shape=(n, n))
        psi = np.zeros(n, dtype=bool)
        psi[m] = True
        out = linear.reachability(P, np.ones(n, dtype=bool), psi, 0, "sound", 1e-6, 10.0)
        assert method in out.method
        assert Fraction(out.lower) <= Fraction(1, 2**m) <= Fraction(out.upper)


@given(_acyclic_chains(), st.sampled_from(["sound", "direct"]))
@settings(max_examples=200, deadline=None)
def test_acyclic_chains_by_substitution_are_certified_and_agree_with_the_lu(chain, numerics):
    P, phi, psi, init = chain
    exact = _exact(P, phi, psi)
    orders = []
    real = linear.triangular_order

    def spy(a: Any) -> np.ndarray | None:
        orders.append(real(a))
        return orders[-1]

    with mock.patch.object(linear, "triangular_order", spy):
        out = _check(P, phi, psi, init, numerics)
    assert all(order is not None for order in orders)  # every undecided part here is acyclic: no LU
    with mock.patch.object(linear, "triangular_order", lambda a: None):
        lu = _check(P, phi, psi, init, numerics)
    assert out.method == lu.method and out.zero == lu.zero and out.one == lu.one
    assert np.allclose(out.values, lu.values, rtol=1e-12, atol=0.0)
    if out.lower is None:  # direct with no certified bracket: the LU found none either
        assert lu.lower is None
        return
    assert Fraction(out.lower) <= exact[init] <= Fraction(out.upper)
    assert out.lower <= out.value <= out.upper
    if exact[init] > 0:  # a tight bracket, not the always-valid [0, 1]
        assert relative(out.value, out.lower, out.upper) <= 1e-12
    assert out.lowers is not None and out.uppers is not None
    for s in range(P.shape[0]):
        assert Fraction(float(out.lowers[s])) <= exact[s] <= Fraction(float(out.uppers[s]))


def test_a_value_below_the_absolute_slack_tries_the_scaled_substitution():
    """A line of 62 states moving on with probability 2**-16 (else failing): the value 2**-992 (~2.4e-299) is below the
    certificate's absolute slack (~1e-280), so the solve is repeated with its columns scaled by the solution (a
    triangular system with the scales on its diagonal). As with the LU, only the absolute bracket [0, 1e-280] is
    certified; the value itself is right to rounding."""
    k = 62
    n = k + 2  # states 0..k-1, the goal k, the failure k+1
    p = 2.0**-16
    rows, cols, vals = [], [], []
    for i in range(k):
        rows += [i, i]
        cols += [i + 1, k + 1]
        vals += [p, 1 - p]
    rows += [k, k + 1]
    cols += [k, k + 1]
    vals += [1.0, 1.0]
    P = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    phi = np.ones(n, dtype=bool)
    psi = np.zeros(n, dtype=bool)
    psi[k] = True
    exact = Fraction(p) ** k
    calls = []
    real = linear._solver

    def spy(system: Any, order: np.ndarray | None) -> Any:
        calls.append((order is not None, bool(np.all(system.diagonal() == 1.0))))
        return real(system, order)

    with mock.patch.object(linear, "_solver", spy):
        out = _check(P, phi, psi, 0, "sound")
    assert calls[0] == (True, True) and (True, False) in calls[1:]  # substitution, then scaled substitution
    assert Fraction(out.lower) <= exact <= Fraction(out.upper) and out.upper <= 1e-279
    assert abs(Fraction(out.value) - exact) <= Fraction(1e-14) * exact
    with mock.patch.object(linear, "triangular_order", lambda a: None):
        lu = _check(P, phi, psi, 0, "sound")
    assert (out.value, out.lower, out.upper, out.note) == (lu.value, lu.lower, lu.upper, lu.note)
