"""Train a small Stable-Baselines3 PPO on Gymnasium's CartPole-v1 (seconds on a CPU) and save it.

    python examples/gymnasium/cartpole/train_cartpole.py --steps 48000 --seed 0 --out ppo_cartpole.zip
    rlverify simulate gym:CartPole-v1 --policy ppo_cartpole.zip -p 'P=? [F<=500 "terminated"]' --runs 1000

The network is small (two hidden layers of 32 units) so that the zip stays under 100 kB. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def train(steps: int, seed: int):  # -> stable_baselines3.PPO
    """A PPO agent trained ``steps`` environment steps on CartPole-v1 (8 copies), with ``seed``."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=64,
        batch_size=256,
        n_epochs=10,
        gae_lambda=0.8,
        gamma=0.98,
        learning_rate=1e-3,
        ent_coef=0.0,
        seed=seed,
        device="cpu",
        policy_kwargs={"net_arch": [32, 32]},
    )
    model.learn(total_timesteps=steps)
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="ppo_cartpole.zip", help="where to save the model (default ppo_cartpole.zip)")
    parser.add_argument("--steps", type=int, default=48_000, help="training steps (default 48000)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--force", action="store_true", help="overwrite --out")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"{out}: file exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    model = train(args.steps, args.seed)
    model.save(str(out))
    print(f"saved {out} (PPO, {args.steps} steps, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
