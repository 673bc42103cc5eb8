"""The visited-state index finds exactly what a linear scan finds."""

from __future__ import annotations

import numpy as np

from rlverify.abstraction.containment import VisitedIndex


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
