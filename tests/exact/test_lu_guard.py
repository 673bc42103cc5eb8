"""The sparse LU of unbounded reachability is not tried where its fill would take minutes (issue 23: Avoid n = 4's
``P=? [!COLLISION U x=4]`` hung in ``splu``); the solve is left to Storm's sound solver."""

from __future__ import annotations

import itertools
import signal

import numpy as np
import scipy.sparse as sp

from rlverify.exact import linear


def _grid_walk(side: int, dims: int) -> sp.csr_matrix:
    """A lazy random walk on a ``side**dims`` grid (reflecting walls): a chain with a grid's fill-in."""
    shape = (side,) * dims
    n = side**dims
    rows, cols = [], []
    for cell in itertools.product(range(side), repeat=dims):
        i = np.ravel_multi_index(cell, shape)
        for d in range(dims):
            for step in (-1, 1):
                nxt = list(cell)
                nxt[d] = min(max(nxt[d] + step, 0), side - 1)
                rows.append(i)
                cols.append(np.ravel_multi_index(tuple(nxt), shape))
    data = np.full(len(rows), 1.0 / (2 * dims))
    return sp.csr_matrix((data, (rows, cols)), shape=(n, n))


def test_lu_work_is_m_times_the_squared_bandwidth() -> None:
    tri = sp.diags([np.ones(99), np.ones(100), np.ones(99)], [-1, 0, 1], format="csr")
    assert linear.lu_work(tri) == 100.0  # half-bandwidth 1
    grid = _grid_walk(10, 2)  # 100 states; RCM orders a k x k grid by anti-diagonals: half-bandwidth k = 10
    assert 100 * 9**2 <= linear.lu_work(grid) <= 100 * 11**2


def test_six_dimensional_grid_is_left_to_storm_without_factorising() -> None:
    matrix = _grid_walk(5, 6)  # 15,625 states, as Avoid 4x4
    n = matrix.shape[0]
    psi = np.zeros(n, dtype=bool)
    psi[-1] = True
    phi = np.ones(n, dtype=bool)
    phi[n // 2] = False  # a state that blocks: some states are neither 0 nor 1
    assert linear.lu_work(sp.identity(n) - matrix) > linear.MAX_LU_WORK

    def fail(*_: object) -> None:
        raise TimeoutError("splu was tried on a 6-D grid")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(30)
    try:
        out = linear.reachability(matrix, phi, psi, 0, "sound", 1e-6, 10.0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert out is None  # the caller checks the property with Storm's sound solver instead
