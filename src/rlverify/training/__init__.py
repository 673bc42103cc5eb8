"""Policy training (optional extra ``torch``): a small PPO and the continuous benchmarks' setups."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.training.ppo import PPOConfig, VecEnv, train_ppo

__all__ = ["PPOConfig", "VecEnv", "train_ppo"]

lazy_exports(
    __name__,
    {
        "rlverify.training.ppo": "PPOConfig VecEnv train_ppo",
    },
)
