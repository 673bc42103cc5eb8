"""Train a small Stable-Baselines3 TD3 agent on Gymnasium's Pendulum-v1 (a few minutes on a CPU) and save it.

    python examples/gymnasium/pendulum/train_td3.py --steps 12000 --seed 0 --out td3_pendulum.zip
    rlverify simulate gym:Pendulum-v1 --policy td3_pendulum.zip --mode deterministic -p 'R=? [C<=200]' \
        --reward-range -16.2736044:0 --runs 1000

The networks are small (two hidden layers of 32 units) so that the zip stays near 100 kB. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def train(steps: int, seed: int):  # -> stable_baselines3.TD3
    """A TD3 agent trained ``steps`` environment steps on Pendulum-v1, with ``seed``."""
    import numpy as np
    from stable_baselines3 import TD3
    from stable_baselines3.common.noise import NormalActionNoise

    model = TD3(
        "MlpPolicy",
        "Pendulum-v1",
        learning_starts=1000,
        learning_rate=1e-3,
        action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
        policy_kwargs={"net_arch": [32, 32]},
        seed=seed,
        device="cpu",
    )
    model.learn(total_timesteps=steps)
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="td3_pendulum.zip", help="where to save the model (default td3_pendulum.zip)")
    parser.add_argument("--steps", type=int, default=12_000, help="training steps (default 12000)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--force", action="store_true", help="overwrite --out")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"{out}: file exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    model = train(args.steps, args.seed)
    model.save(str(out))
    print(f"saved {out} (TD3, {args.steps} steps, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
