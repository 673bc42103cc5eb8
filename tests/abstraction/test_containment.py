"""The visited-state index finds exactly what a linear scan finds."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.abstraction.containment import PendingLookups, VisitedIndex
from tests.abstraction.reference_batching import ReferenceIndex


def linear_scan(lo, hi, depth, ids, qlo, qhi, max_depth):
    m = (depth <= max_depth) & (lo <= qlo).all(axis=1) & (qhi <= hi).all(axis=1)
    if not m.any():
        return None
    idx = np.flatnonzero(m)
    return int(ids[idx[int(np.argmin((hi[idx] - lo[idx]).sum(axis=1)))]])


def test_index_matches_linear_scan():
    rng = np.random.default_rng(0)
    k, n = 4, 3000
    centre = rng.normal(size=(n, k)) * 5
    width = rng.exponential(1.0, size=(n, k)) * rng.choice([0.1, 1.0, 30.0], size=(n, 1))
    lo, hi = centre - width, centre + width
    depth = rng.integers(0, 10, n)
    ids = np.arange(n) + 100
    index = VisitedIndex(k, np.full(k, 0.7), max_cells=64)
    for i in range(n):
        index.add(int(ids[i]), lo[i], hi[i], int(depth[i]))
    found = 0
    for _ in range(2000):
        j = int(rng.integers(n))
        shrink = rng.uniform(0, 1.2, size=k)
        qlo, qhi = centre[j] - width[j] * shrink, centre[j] + width[j] * shrink
        d = int(rng.integers(0, 10))
        expected = linear_scan(lo, hi, depth, ids, qlo, qhi, d)
        assert index.find(qlo, qhi, d) == expected
        found += expected is not None
    assert found > 200


def _boxes(rng, n, k, integral):
    """Random template bounds; with ``integral``, on a coarse lattice so that sizes tie and sets repeat often."""
    if integral:
        lo = rng.integers(-6, 6, size=(n, k)).astype(float)
        hi = lo + rng.integers(0, 5, size=(n, k))
        huge = rng.random(n) < 0.02  # a few far larger than max_cells cells: the separate list
        lo[huge] -= 40.0
        hi[huge] += 40.0
        return lo, hi
    centre = rng.normal(size=(n, k)) * 3
    width = rng.exponential(1.0, size=(n, k)) * rng.choice([0.1, 1.0, 30.0], size=(n, 1))
    return centre - width, centre + width


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("integral", [True, False])
def test_batched_lookups_answer_as_the_one_at_a_time_index_ties_and_repeats_included(k, integral):
    """A frontier's successors resolved in order (each either found in the index or, when not, added to it unless a
    budget refuses it) get exactly the answers of the old one-at-a-time index, the ties between equal sizes broken
    the same way, and the index afterwards answers like the old one."""
    rng = np.random.default_rng(k * 10 + integral)
    cell = np.full(k, 1.3)
    new, ref = VisitedIndex(k, cell, max_cells=16), ReferenceIndex(k, cell, max_cells=16)
    next_state, answered = 100, 0
    for depth in range(1, 6):
        if depth == 1:  # an initial population
            lo, hi = _boxes(rng, 150, k, integral)
            for i in range(len(lo)):
                new.add(next_state, lo[i], hi[i], 0)
                ref.add(next_state, lo[i], hi[i], 0)
                next_state += 1
        lo, hi = _boxes(rng, 400, k, integral)
        pick = rng.integers(0, len(lo), size=150)  # repeats of earlier queries, and shrunken copies
        lo = np.vstack([lo, lo[pick], lo[pick] + 0.25 * (hi[pick] - lo[pick])])
        hi = np.vstack([hi, hi[pick], hi[pick] - 0.25 * (hi[pick] - lo[pick])])
        order = rng.permutation(len(lo))
        lo, hi = lo[order], hi[order]
        qdepth = np.full(len(lo), depth)
        qdepth[rng.random(len(lo)) < 0.1] = depth - 1  # a few looked up at a smaller depth
        lookups = PendingLookups(new, lo, hi, qdepth)
        budget = int(rng.integers(len(lo) // 2, len(lo) + 1))  # from this query on, no state is made (it never comes back)
        for q in range(len(lo)):
            expected = ref.find(lo[q], hi[q], int(qdepth[q]))
            assert lookups.find(q) == expected, (depth, q)
            answered += expected is not None
            if expected is None and q < budget:
                lookups.add(q, next_state)
                ref.add(next_state, lo[q], hi[q], int(qdepth[q]))
                next_state += 1
        lookups.commit()
        assert new.n == len(ref.ids)
        qlo, qhi = _boxes(rng, 200, k, integral)
        got = new.find_many(qlo, qhi, depth)
        for q in range(len(qlo)):
            expected = ref.find(qlo[q], qhi[q], depth)
            assert (None if got[q] < 0 else int(new.ids[got[q]])) == expected
    assert answered > 200


def test_a_query_inside_a_visited_state_or_repeating_an_earlier_one_cannot_join_the_index():
    index = VisitedIndex(2, np.ones(2))
    index.add(7, np.array([0.0, 0.0]), np.array([4.0, 4.0]), 0)
    lo = np.array([[1.0, 1.0], [5.0, 5.0], [5.0, 5.0]])
    hi = np.array([[2.0, 2.0], [6.0, 6.0], [6.0, 6.0]])
    lookups = PendingLookups(index, lo, hi, np.array([1, 1, 1]))
    assert lookups.find(0) == 7
    with pytest.raises(RuntimeError, match="query 0"):
        lookups.add(0, 8)
    assert lookups.find(1) is None
    lookups.add(1, 8)
    assert lookups.find(2) == 8
    with pytest.raises(RuntimeError, match="query 2"):
        lookups.add(2, 9)
