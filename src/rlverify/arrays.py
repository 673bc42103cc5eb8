"""Array operations numpy does slowly for rlverify's arrays.

This module imports only numpy: every layer may use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["distinct", "row_cumsum", "row_log_softmax", "row_max", "row_positions", "row_softmax", "row_sum"]


def distinct(values: Any) -> np.ndarray:
    """``np.unique(values)``: the sorted distinct values of ``values`` (flattened), the same array, found by sorting.

    numpy >= 2.3 answers a plain ``np.unique`` of integers through a hash table that is 10-35x slower than sorting
    (1M distinct int64: 1.26 s vs 0.05 s; 10M: 16 s vs 0.45 s on this project's machines) and imports ``numpy.ma``
    on first use (10 ms of every command's start). Asking for the counts takes numpy's sorting path.
    """
    return np.unique(values, return_counts=True)[0]


def row_positions(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``(n,)`` int64: the positions in a CSR matrix's ``indices``/``data`` of every stored entry of ``rows``, row by
    row in the order given (what ``matrix[rows]`` gathers, without scipy's fancy indexing: ~0.3 ms a call, which
    breadth-first searches over hundreds of narrow levels paid at every level)."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = indptr[rows].astype(np.int64)
    counts = indptr[rows + 1].astype(np.int64) - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total, dtype=np.int64)


#: Rows narrower than this are reduced column by column: numpy's reductions along a short last axis cost ~30-70 us per
#: call for 1,000 rows of 2 columns (the row loop's set-up per row), 10-20x a loop over the columns. Below 8 columns a
#: float sum is sequential in numpy too (its pairwise summation starts at 8), so the loop's sums are bit-identical.
NARROW = 8


def _narrow(x: np.ndarray) -> bool:
    return x.ndim == 2 and 0 < x.shape[1] < NARROW and np.issubdtype(x.dtype, np.floating)


def row_max(x: np.ndarray) -> np.ndarray:
    """``(N,)`` ``x.max(axis=1)`` of an ``(N, A)`` array, the same values (NaN propagates), fast for narrow rows."""
    if not _narrow(x):
        return np.asarray(x.max(axis=1))
    m = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        np.maximum(m, x[:, j], out=m)
    return m


def row_sum(x: np.ndarray) -> np.ndarray:
    """``(N,)`` ``x.sum(axis=1)`` of an ``(N, A)`` array, bit-identical (sequential below :data:`NARROW` columns, as
    numpy's own), fast for narrow rows."""
    if not _narrow(x):
        return np.asarray(x.sum(axis=1))
    s = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        s += x[:, j]
    return s


def row_cumsum(x: np.ndarray) -> np.ndarray:
    """``(N, A)`` ``np.cumsum(x, axis=1)``, bit-identical (both sequential), fast for narrow rows."""
    if not _narrow(x):
        return np.cumsum(x, axis=1)
    out = np.empty_like(x)
    out[:, 0] = x[:, 0]
    for j in range(1, x.shape[1]):
        np.add(out[:, j - 1], x[:, j], out=out[:, j])
    return out


def _by_columns(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` ``(N, A)`` as a C-contiguous ``(A, N)`` copy (numpy's float32 ufuncs are ~10x slower into strided
    columns than into contiguous rows), and its rows' maximum ``(N,)``."""
    xt = x.T.copy()
    m = xt[0].copy()
    for j in range(1, len(xt)):
        np.maximum(m, xt[j], out=m)
    return xt, m


def row_softmax(x: np.ndarray) -> np.ndarray:
    """``(N, A)`` softmax of each row of float ``x`` (``exp(x - max)`` over its sum), in ``x``'s dtype: the same
    numbers as the axis-1 expression, fast for narrow rows."""
    if not _narrow(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return np.asarray(e / e.sum(axis=1, keepdims=True))
    et, m = _by_columns(x)
    et -= m
    np.exp(et, out=et)
    total = et[0].copy()
    for j in range(1, len(et)):
        total += et[j]
    et /= total
    return et.T.copy()


def row_log_softmax(x: np.ndarray) -> np.ndarray:
    """``(N, A)`` log-softmax of each row of float ``x`` (``x - (max + log(sum(exp(x - max))))``), in ``x``'s
    dtype: the same numbers as the axis-1 expression, fast for narrow rows."""
    if not _narrow(x):
        m = x.max(axis=1, keepdims=True)
        return np.asarray(x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True))))
    xt, m = _by_columns(x)
    e = np.exp(xt - m)
    total = e[0].copy()
    for j in range(1, len(e)):
        total += e[j]
    xt -= m + np.log(total)
    return xt.T.copy()
