"""``rlverify.arrays``: each function is numpy's own (the same array for every input), without numpy's slow paths."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlverify.arrays import distinct, row_cumsum, row_log_softmax, row_max, row_softmax, row_sum

DTYPES = st.sampled_from([np.int64, np.int32, np.int8, np.uint16, np.float64, np.bool_])


@given(hnp.arrays(DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, max_side=40)))
def test_distinct_is_np_unique(values):
    expected = np.unique(values)
    got = distinct(values)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got, expected, equal_nan=values.dtype.kind == "f")


def test_distinct_keeps_one_nan_as_np_unique_does():
    values = np.array([np.nan, 1.0, np.nan, -0.0, 0.0, 1.0])
    assert np.array_equal(distinct(values), np.unique(values), equal_nan=True)
    assert len(distinct(values)) == 3


def test_distinct_does_not_import_numpy_ma():
    """np.unique's hashing path imports numpy.ma on first use; distinct's does not (start-up of every command)."""
    code = (
        "import sys, json, numpy as np; from rlverify.arrays import distinct; "
        "d = distinct(np.array([3, 1, 3, 2])); print(json.dumps([d.tolist(), 'numpy.ma' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [[1, 2, 3], False]


@given(
    st.integers(1, 30),
    st.integers(1, 30),
    st.floats(0.0, 0.6),
    st.lists(st.integers(0, 10**6), max_size=40),
    st.integers(0, 2**32 - 1),
)
def test_row_positions_gather_what_scipy_row_indexing_gathers(n_rows, n_cols, density, picks, seed):
    """The entries of the rows asked for (repeats, empty rows and no rows included), in scipy's own order."""
    import scipy.sparse as sp

    from rlverify.arrays import row_positions

    M = sp.random(n_rows, n_cols, density=density, format="csr", random_state=np.random.default_rng(seed))
    rows = np.asarray([p % n_rows for p in picks], dtype=np.int64)
    pos = row_positions(M.indptr, rows)
    expected = M[rows] if len(rows) else M[:0]
    assert np.array_equal(M.indices[pos], expected.indices)
    assert np.array_equal(M.data[pos], expected.data)


# --- row reductions: bit-identical to numpy's own along axis 1, for every width (the narrow path and the other) -----

_FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=32)


@st.composite
def _tables(draw: st.DrawFn) -> np.ndarray:
    rows = draw(st.integers(0, 12))
    cols = draw(st.integers(1, 11))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    scale = draw(st.sampled_from([1e-30, 1.0, 1e30]))
    values = draw(st.lists(_FLOATS, min_size=rows * cols, max_size=rows * cols))
    with np.errstate(all="ignore"):  # overflow to inf in float32: one more hostile value
        return (np.asarray(values, dtype=np.float64).reshape(rows, cols) * scale).astype(dtype)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@settings(max_examples=300, deadline=None)
@given(_tables())
def test_row_reductions_are_numpys_bit_for_bit(x: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        assert _same(row_max(x), x.max(axis=1)) if len(x) else True
        assert _same(row_sum(x), x.sum(axis=1))
        assert _same(row_cumsum(x), np.cumsum(x, axis=1))


def test_row_sum_of_narrow_rows_keeps_numpys_order() -> None:
    # 1 + 1e-16 + 1e-16 ... sums differently in other orders: the narrow path adds left to right, as numpy does below 8
    x = np.array([[1.0, 1e-16, 1e-16, -1.0, 1e-16, 1e-16, 1e-16]])
    assert row_sum(x)[0] == x.sum(axis=1)[0] == (((((1.0 + 1e-16) + 1e-16) - 1.0) + 1e-16) + 1e-16) + 1e-16


@settings(max_examples=300, deadline=None)
@given(_tables())
def test_row_softmaxes_are_the_axis_expressions_bit_for_bit(x: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        if not len(x):
            return
        m = x.max(axis=1, keepdims=True)
        e = np.exp(x - m)
        assert _same(row_softmax(x), e / e.sum(axis=1, keepdims=True))
        assert _same(row_log_softmax(x), x - (m + np.log(e.sum(axis=1, keepdims=True))))
