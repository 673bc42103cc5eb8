"""Graph analysis (models/graph.py) on small graphs whose answers are read off by hand."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from rlverify.models.graph import can_reach, steps_to


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
