"""A policy for ``slippery_walk.py``: always right (a Python policy file: rlverify runs it, by design)."""

import numpy as np

FEATURES = ["x"]  # the observation's one entry, named (labels may read it as x)
ACTIONS = ["0", "1"]  # Discrete(2) actions by index: 0 = left, 1 = right


def right(obs: np.ndarray) -> np.ndarray:
    """Probabilities (N, 2) for observations (N, 1): right with probability 1."""
    return np.tile([0.0, 1.0], (len(obs), 1))
