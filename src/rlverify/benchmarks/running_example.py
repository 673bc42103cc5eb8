"""The running example of Gross & Spieker (2024): four positions, UP/NOP/DOWN."""

from __future__ import annotations

from rlverify.benchmarks.discrete import prism_built
from rlverify.benchmarks.registry import BenchmarkSpec, Built, EnvDefaults, data_path, register

PROPERTIES = {
    "reach-goal": 'P=? [F "goal"]',
    "reach-goal-2": 'P=? [F<=2 "goal"]',
    "steps-to-goal": 'R{"steps"}=? [F "goal"]',
}

DOC = """The running example of Gross & Spieker, *Probabilistic Model Checking of Stochastic RL Policies* (2024).

Description: an agent moves among four positions A-D of a column.
State: x in 1..4 (A=1, B=2, C=3, D=4).
Actions: UP (A: to B 0.2, to C 0.8; B: to C 0.2, to D 0.8; C: to D; not available in D),
    NOP (stay), DOWN (one position down; stays in A). Reward model "steps": 1 per action.
Labels: "goal" = x=4.
Initial states: x=1.
Reference results (reference policy pi(UP|A)=0.3, pi(DOWN|A)=0.7, B: UP/NOP 0.5/0.5, C: UP, D: NOP;
    worked out by hand in tests/test_running_example.py): P(F goal) = 1,
    P(F<=2 goal) = 0.3*(0.2*0.5*0.8 + 0.8) = 0.264, expected steps to goal = 343/75 = 4.5733.
"""


def make() -> Built:
    """The running example with its table policy."""
    return prism_built(
        "running-example-v1",
        data_path("models/running_example.prism").read_text(),
        {"reference": "policies/running_example.json"},
    )


register(
    BenchmarkSpec(
        id="running-example-v1",
        kind="prism",
        entry_point=make,
        properties=PROPERTIES,
        policies={"reference": "policies/running_example.json"},
        doc=DOC,
        env=EnvDefaults(reward="steps", terminal='"goal"', max_episode_steps=100),
    )
)
