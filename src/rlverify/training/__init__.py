"""Policy training (optional extra ``torch``): a small PPO and the continuous benchmarks' setups."""

from rlverify.training.ppo import PPOConfig, VecEnv, train_ppo

__all__ = ["PPOConfig", "VecEnv", "train_ppo"]
