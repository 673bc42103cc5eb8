"""``choose_columns`` (the simulator's sampling of one action per row) against a scalar loop written from its
definition: the first column whose cumulative sum exceeds ``u`` times the row's total, never one of probability 0;
the argmax (first on ties) without uniforms; and whether the chosen column has probability 1."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlverify.policies.base import choose_columns


def _reference(probs: np.ndarray, u: np.ndarray | None) -> tuple[list[int], list[bool]]:
    cols, sure = [], []
    for i, row in enumerate(probs.tolist()):
        if u is None:
            c = max(range(len(row)), key=lambda j: (row[j], -j))
        else:
            total, acc, c = sum(row), 0.0, None
            positive = [j for j, p in enumerate(row) if p > 0]
            for j, p in enumerate(row):
                acc += p
                if acc > u[i] * total:
                    c = j
                    break
            last = positive[-1] if positive else len(row) - 1
            c = last if c is None else min(c, last)
        cols.append(c)
        sure.append(row[c] >= 1.0)
    return cols, sure


@st.composite
def _rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray | None]:
    n = draw(st.integers(1, 20))
    a = draw(st.integers(1, 12))  # both sides of the narrow-row path (8 columns)
    weights = st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0))
    raw = np.array(draw(st.lists(st.lists(weights, min_size=a, max_size=a), min_size=n, max_size=n)))
    raw[raw.sum(axis=1) == 0, draw(st.integers(0, a - 1))] = 1.0
    probs = raw / raw.sum(axis=1, keepdims=True)
    uniforms = st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=n, max_size=n)
    u = None if draw(st.booleans()) else np.array(draw(uniforms))
    return probs, u


@settings(max_examples=400, deadline=None)
@given(_rows())
def test_choose_columns_is_the_definition(case: tuple[np.ndarray, np.ndarray | None]) -> None:
    probs, u = case
    cols, sure = choose_columns(probs, u)
    want_cols, want_sure = _reference(probs, u)
    assert cols.tolist() == want_cols
    assert sure.tolist() == want_sure
