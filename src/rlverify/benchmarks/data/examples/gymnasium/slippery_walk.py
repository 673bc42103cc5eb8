"""An example of your own Gymnasium environment: a slippery walk on 0..10, registered as ``SlipperyWalk-v0``.

The agent starts at 3 and moves left (action 0) or right (action 1); with probability 0.3 it slips and moves the other
way. The episode ends at 0 (fallen, reward 0) or at 10 (home, reward 1), or after 200 steps (time limit). Always
moving right, the walk is a gambler's ruin: it falls with probability (r**3 - r**10) / (1 - r**10), r = 0.3 / 0.7,
that is 0.078525.

    rlverify simulate gym:slippery_walk:SlipperyWalk-v0 --trust-code --policy walk_right.py:right \
        -p 'P=? [F "fallen"]' --label 'fallen=x <= 0'

(run from this directory: ``gym:MODULE:ID`` imports ``MODULE``, which registers ``ID``; ``--trust-code`` allows it.)
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class SlipperyWalk(gym.Env):
    """Position ``x`` in 0..10 (observation shape (1,), float32); actions 0 = left, 1 = right; slips w.p. 0.3."""

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, object] | None = None):
        super().reset(seed=seed)
        self.x = 3
        return np.array([self.x], np.float32), {}

    def step(self, action):
        move = 1 if action == 1 else -1
        if self.np_random.random() < 0.3:
            move = -move
        self.x += move
        return np.array([self.x], np.float32), float(self.x == 10), self.x in (0, 10), False, {}


gym.register("SlipperyWalk-v0", entry_point=f"{__name__}:SlipperyWalk", max_episode_steps=200)
