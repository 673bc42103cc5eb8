"""Step-bounded reachability on a chain: its exact zero/one facts, and the memory it takes (issue 23)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from rlverify.exact.bounded import bounded_until, qualitative


def _random_chain(n: int, per_row: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, n, size=(n, per_row))
    w = rng.random((n, per_row)) + 0.01
    w /= w.sum(axis=1, keepdims=True)
    return sp.csr_matrix((w.ravel(), cols.ravel(), np.arange(0, n * per_row + 1, per_row)), shape=(n, n))


@pytest.mark.parametrize("seed", range(12))
def test_zero_one_equal_the_graph_analysis(seed):
    rng = np.random.default_rng(seed)
    n = 40
    P = _random_chain(n, int(rng.integers(1, 4)), seed)
    P.sum_duplicates()
    psi = rng.random(n) < 0.15
    phi = rng.random(n) < 0.8
    k = int(rng.integers(0, 8))
    for init in range(n):
        out = bounded_until(P, phi, psi, k, init)
        assert (out.zero, out.one) == qualitative(P, None, phi, psi, k, init)


def test_no_reversed_graph_when_the_values_decide():
    """The graph analysis reversed the chain (~6 bytes per transition, at the check's peak) even when the computed
    values already showed the value is neither 0 nor 1."""
    n = 50_000
    P = _random_chain(n, 40, 0)
    psi = np.zeros(n, dtype=bool)
    psi[:50] = True
    phi = np.ones(n, dtype=bool)
    tracemalloc.start()
    try:
        out = bounded_until(P, phi, psi, 5, n - 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 < out.value < 1 and (out.zero, out.one) == (False, False)
    assert peak / P.nnz < 3, f"{peak / P.nnz:.1f} bytes per transition"
