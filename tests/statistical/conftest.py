from __future__ import annotations

import pytest

AVOID_CONSTANTS = "xMax=4,yMax=4,slickness=0.1"
AVOID_FEATURES = ["x", "y", "obstacle1_x", "obstacle1_y", "obstacle2_x", "obstacle2_y"]
AVOID_ACTIONS = ["north", "east", "south", "west"]


@pytest.fixture(scope="session")
def avoid_model(prism_reference):
    """Avoid 4x4, slickness 0.1: the reference avoid.prism of ../shared, or without it the
    repository's generated avoid-v1 with the same constants (baked into its file, so its
    ``constants`` is empty). Both are the same MDP state by state: the same variables, 15,625
    property-directed / 20,053 full reachable states, 1,529,185 / 1,653,548 transitions
    (tests/benchmarks/test_prism_equivalence.py checks this against the file or its recorded facts);
    only the reward model's name differs ("reward" vs unnamed), which no statistical test uses.
    """
    from rlverify.models import load_model

    path = prism_reference("avoid.prism")
    if path is None:
        from rlverify.benchmarks import make

        return make("avoid-v1", xMax=4, yMax=4, slickness=0.1).load_model()
    return load_model(path, AVOID_CONSTANTS)


@pytest.fixture(scope="session")
def avoid_policy():
    from rlverify.policies import MLP, CallablePolicy

    net = MLP.random([6, 64, 64, 4], seed=1)
    return CallablePolicy(net, AVOID_FEATURES, AVOID_ACTIONS, output="logits", name="random 2x64 net")
