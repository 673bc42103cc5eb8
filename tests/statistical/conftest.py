from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared"
AVOID = SHARED / "benchmarks" / "prism-reference" / "avoid.prism"
AVOID_CONSTANTS = "xMax=4,yMax=4,slickness=0.1"
AVOID_FEATURES = ["x", "y", "obstacle1_x", "obstacle1_y", "obstacle2_x", "obstacle2_y"]
AVOID_ACTIONS = ["north", "east", "south", "west"]


@pytest.fixture(scope="session")
def avoid_model():
    if not AVOID.is_file():  # as in tests/benchmarks/test_prism_equivalence.py: never pass silently
        if os.environ.get("RLVERIFY_ALLOW_MISSING_REFERENCE") == "1":
            pytest.skip(f"reference model {AVOID} not available")
        pytest.fail(f"reference model {AVOID} not found (set RLVERIFY_ALLOW_MISSING_REFERENCE=1 to skip)")
    from rlverify.models import load_model

    return load_model(AVOID, AVOID_CONSTANTS)


@pytest.fixture(scope="session")
def avoid_policy():
    from rlverify.policies import MLP, CallablePolicy

    net = MLP.random([6, 64, 64, 4], seed=1)
    return CallablePolicy(net, AVOID_FEATURES, AVOID_ACTIONS, output="logits", name="random 2x64 net")
