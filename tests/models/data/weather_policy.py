"""A policy for weather.jani (tests/models/test_jani.py): go with probability 4/5 when calm, 3/10 when windy;
rest once done. Features: the two automata's locations (_loc_agent: 0 walk, 1 done; _loc_env: 0 calm,
1 windy, 2 wrecked)."""

import numpy as np

FEATURES = ["_loc_agent", "_loc_env"]
ACTIONS = ["go", "rest"]


def pi(states):
    agent, env = states[:, 0], states[:, 1]
    go = np.where(env == 0, 0.8, np.where(env == 1, 0.3, 0.5)) * (agent == 0)
    return np.stack([go, 1 - go], axis=1)
