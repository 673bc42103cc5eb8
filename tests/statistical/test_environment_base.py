"""The environment base (rlverify.models.environment.VectorEnv): its defaults, its required methods, and the one
dispatch over the kinds of model the simulator takes."""

import numpy as np
import pytest

from rlverify.errors import PropertyError
from rlverify.models.environment import VectorEnv
from rlverify.statistical import SimulationOptions, parse_path_property, simulate
from rlverify.statistical.simulated import prepare


class Walk(VectorEnv):
    """A counter from 0 that action "up" raises by one surely; "goal" at 3 (absorbing)."""

    name = "walk"
    features = ("n",)
    actions = ("up",)
    labels = ("goal",)

    def initial_states(self):
        return np.zeros(1, dtype=np.int64)

    def observe(self, states):
        return states.astype(np.float64)[:, None]

    def available(self, states):
        return None

    def step(self, states, actions, u):
        return states + 1

    def label(self, name, states):
        return states >= 3

    def terminal(self, states):
        return states >= 3


class Up:
    name = "up"
    features = ("n",)
    actions = ("up",)

    def action_probabilities(self, states):
        return np.ones((len(states), 1))


def test_the_optional_members_default_to_nothing_special():
    env = Walk()
    states = np.arange(4, dtype=np.int64)
    assert env.initial_box is None
    assert env.forced(states) is None
    assert env.self_loops(states, np.zeros(4, dtype=np.int64)) is None
    assert env.describe(states[2]) == 2


def test_a_missing_required_method_fails_at_construction():
    class NoStep(VectorEnv):
        def initial_states(self):
            return np.zeros(1)

    with pytest.raises(TypeError, match="abstract"):
        NoStep()


def test_an_environment_on_the_defaults_is_simulated():
    env = Walk()
    prop = parse_path_property('P=? [F<=5 "goal"]', env.labels)
    out = simulate(env, Up(), prop, np.arange(10), options=SimulationOptions(max_steps=20))
    # every run reaches 3 in exactly 3 steps (the counter rises surely), within the bound 5
    assert (out.outcome == 1).all() and (out.steps == 3).all()


def test_a_model_of_no_registered_kind_is_refused():
    with pytest.raises(PropertyError, match="cannot simulate list: expected a SymbolicModel"):
        prepare([], 'P=? [F "goal"]')
