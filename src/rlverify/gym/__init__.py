"""Gymnasium bridge: any PRISM/JANI MDP (or registered benchmark) as a ``gymnasium.Env``, single or vectorised.

Train on the very model you verify: observations are the model's variables in a policy's feature
order, actions its PRISM action labels, rewards a named reward model, and unavailable actions are
handled as the verifier handles them (``stall`` or ``renormalize``)::

    from rlverify.gym import MDPEnv, VectorMDPEnv
    env = MDPEnv.from_benchmark("avoid-v1", {"xMax": 4, "yMax": 4})
    envs = VectorMDPEnv.from_model("model.prism", 256, reward="r", terminal='"goal"')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.gym.build import EnvDefaults, benchmark_dynamics, benchmark_envs, load_dynamics, reward_spec
    from rlverify.gym.dynamics import EnvError, MDPDynamics, UnavailableActionError, dynamics_from_explicit
    from rlverify.gym.env import MDPEnv, RewardWarning, VectorMDPEnv, entry_rewards, save_policy_metadata

__all__ = [
    "EnvDefaults",
    "EnvError",
    "MDPDynamics",
    "MDPEnv",
    "RewardWarning",
    "UnavailableActionError",
    "VectorMDPEnv",
    "benchmark_dynamics",
    "benchmark_envs",
    "dynamics_from_explicit",
    "entry_rewards",
    "load_dynamics",
    "reward_spec",
    "save_policy_metadata",
]

lazy_exports(
    __name__,
    {
        "rlverify.gym.build": "EnvDefaults benchmark_dynamics benchmark_envs load_dynamics reward_spec",
        "rlverify.gym.dynamics": "EnvError MDPDynamics UnavailableActionError dynamics_from_explicit",
        "rlverify.gym.env": "MDPEnv RewardWarning VectorMDPEnv entry_rewards save_policy_metadata",
    },
)
