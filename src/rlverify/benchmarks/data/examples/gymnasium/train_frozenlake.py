"""Train a small Stable-Baselines3 PPO on Gymnasium's FrozenLake (seconds on a CPU) and save it.

    .venv/bin/python examples/gymnasium/train_frozenlake.py --out ppo_frozenlake.zip
    .venv/bin/rlverify verify gym:FrozenLake-v1 --policy ppo_frozenlake.zip -p 'P=? [F "goal"]'

The policy is trained on the Gymnasium environment itself; rlverify reads the same environment's
transition table (``env.unwrapped.P``) as an exact MDP, so no sidecar file is needed: the model
knows that the agent observed the state index ``s`` and acted with left/down/right/up.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="ppo_frozenlake.zip", help="where to save the model (default ppo_frozenlake.zip)")
    parser.add_argument("--env-kwargs", default="{}", help="JSON arguments of gymnasium.make, e.g. '{\"is_slippery\": false}'")
    parser.add_argument("--steps", type=int, default=8192, help="training steps (default 8192)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--force", action="store_true", help="overwrite --out")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"{out}: file exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    import gymnasium as gym
    from stable_baselines3 import PPO

    env = gym.make("FrozenLake-v1", **json.loads(args.env_kwargs))
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=512,
        batch_size=64,
        n_epochs=4,
        learning_rate=3e-3,
        ent_coef=0.01,
        seed=args.seed,
        device="cpu",
        policy_kwargs={"net_arch": [32]},
    )
    model.learn(total_timesteps=args.steps)
    model.save(str(out))
    print(f"saved {out} (PPO, {args.steps} steps, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
