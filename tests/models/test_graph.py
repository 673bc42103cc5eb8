"""Graph analysis (models/graph.py) on small graphs whose answers are read off by hand."""

from __future__ import annotations

from unittest import mock

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from rlverify.models import graph as graph_module
from rlverify.models.graph import can_reach, prob01, steps_to


def test_chain_distances_and_blocked_states():
    # 0 -> 1 -> 2 -> 3 (target); 4 -> 4 (trap); 5 -> 3 but 5 is not passable; zero-probability entry 4 -> 3 ignored
    P = sp.lil_matrix(
        np.array(
            [
                [0, 1, 0, 0, 0, 0],
                [0, 0, 1, 0, 0, 0],
                [0, 0, 0, 1, 0, 0],
                [0, 0, 0, 1, 0, 0],
                [0, 0, 0, 0, 1, 0],
                [0, 0, 0, 1, 0, 0],
            ],
            dtype=float,
        )
    )
    P[4, 3] = 1.0
    P = P.tocsr()
    P.data[P.indptr[4]] = 0.0  # an explicit zero (4 -> 3): not an edge
    target = np.array([0, 0, 0, 1, 0, 0], dtype=bool)
    through = np.array([1, 1, 1, 1, 1, 0], dtype=bool)
    d = steps_to(P, None, target, through)
    assert d.tolist() == [3, 2, 1, 0, np.inf, np.inf]
    assert can_reach(P, None, target, through).tolist() == [True, True, True, True, False, False]


def test_mdp_any_choice_counts():
    # state 0 has two choices: to the trap 1, or to the target 2
    P = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 1], [0, 1, 0], [0, 0, 1]], dtype=float))
    groups = np.array([0, 2, 3, 4])  # state 0: rows 0-1; state 1: row 2 (loops); state 2: row 3
    d = steps_to(P, groups, np.array([0, 0, 1], dtype=bool), np.ones(3, dtype=bool))
    assert d.tolist() == [1, np.inf, 0]


def _bfs(P: sp.csr_matrix, target: np.ndarray, through: np.ndarray) -> list[float]:
    """Distances by a plain Python breadth-first search over reversed positive edges (the reference)."""
    n = P.shape[0]
    preds: list[list[int]] = [[] for _ in range(n)]
    for s in range(n):
        for t, p in zip(P.indices[P.indptr[s] : P.indptr[s + 1]], P.data[P.indptr[s] : P.indptr[s + 1]], strict=True):
            if p > 0:
                preds[t].append(s)
    dist = [0.0 if target[s] else np.inf for s in range(n)]
    frontier = [s for s in range(n) if target[s]]
    while frontier:
        nxt = []
        for t in frontier:
            for s in preds[t]:
                if through[s] and not target[s] and np.isinf(dist[s]):
                    dist[s] = dist[t] + 1
                    nxt.append(s)
        frontier = nxt
    return dist


def test_random_chain_matches_a_plain_search():
    rng = np.random.default_rng(3)
    n = 300
    P = sp.random(n, n, density=0.01, random_state=4, format="csr")
    P.data[rng.random(P.nnz) < 0.1] = 0.0  # explicit zeros are no edges
    target = rng.random(n) < 0.02
    through = rng.random(n) < 0.8
    assert steps_to(P, None, target, through).tolist() == _bfs(P, target, through)


def test_memory_is_a_few_bytes_per_transition():
    """Issue 23: the unbounded check's graph analysis took ~70 bytes per transition (COO and int64 copies): a
    stochastic Avoid n = 11 check peaked at 80 bytes per chain transition instead of 14."""
    import tracemalloc

    n, per_row = 100_000, 20
    indices = np.random.default_rng(0).integers(0, n, size=n * per_row).astype(np.int32)
    P = sp.csr_matrix((np.full(n * per_row, 0.05), indices, np.arange(0, n * per_row + 1, per_row)), shape=(n, n))
    target = np.zeros(n, dtype=bool)
    target[:10] = True
    tracemalloc.start()
    try:
        can_reach(P, None, target, np.ones(n, dtype=bool))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / P.nnz < 10, f"{peak / P.nnz:.1f} bytes per transition"


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[sp.csr_matrix, np.ndarray | None, np.ndarray, np.ndarray]:
    """A random (C, S) transition pattern (self-loops, empty rows, explicit zeros; an MDP's row groups or None), a
    target and a through mask (empty and full ones included)."""
    n = draw(st.integers(1, 25))
    groups = None
    C = n
    if draw(st.booleans()):
        per_state = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
        groups = np.r_[0, np.cumsum(per_state)]
        C = int(groups[-1])
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    P = sp.random(C, n, density=draw(st.floats(0.0, 0.5)), format="csr", random_state=rng)
    P.data[rng.random(P.nnz) < draw(st.sampled_from([0.0, 0.2]))] = 0.0  # explicit zeros: no edges
    masks = st.sampled_from(["random", "none", "all"])

    def mask(kind: str, p: float) -> np.ndarray:
        return {"random": rng.random(n) < p, "none": np.zeros(n, dtype=bool), "all": np.ones(n, dtype=bool)}[kind]

    return P, groups, mask(draw(masks), 0.15), mask(draw(masks), 0.7)


@given(_graphs(), st.sampled_from([0, 1, 2, 8]), st.booleans())
@settings(max_examples=400, deadline=None)
def test_one_call_search_finds_what_the_level_search_finds(graph, numpy_levels, one_call):
    """can_reach (its one call of scipy's search after ``numpy_levels`` levels, or level by level to the end) finds
    steps_to's finite set, on chains and MDPs; on chains, the plain Python search's too."""
    P, groups, target, through = graph
    with (
        mock.patch.object(graph_module, "NUMPY_LEVELS", numpy_levels),
        mock.patch.object(graph_module, "ONE_CALL_TRANSITIONS", 1 << 20 if one_call else -1),
    ):
        got = can_reach(P, groups, target, through)
    assert got.dtype == bool
    assert got.tolist() == np.isfinite(steps_to(P, groups, target, through)).tolist()
    if groups is None:
        assert got.tolist() == np.isfinite(_bfs(P, target, through)).tolist()
        # prob01 (phi = through, psi = target): the two searches over one reversed pattern, as two level searches
        with (
            mock.patch.object(graph_module, "NUMPY_LEVELS", numpy_levels),
            mock.patch.object(graph_module, "ONE_CALL_TRANSITIONS", 1 << 20 if one_call else -1),
        ):
            zero, one = prob01(P, through, target)
        go = through & ~target
        expected_zero = np.isinf(steps_to(P, None, target, go))
        assert zero.tolist() == expected_zero.tolist()
        assert one.tolist() == np.isinf(steps_to(P, None, expected_zero, go)).tolist()
