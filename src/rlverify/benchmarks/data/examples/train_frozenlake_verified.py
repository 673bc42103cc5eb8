"""Train PPO on Gymnasium's FrozenLake and verify it exactly while it trains; plot safety against training steps.

    .venv/bin/python examples/train_frozenlake_verified.py --out frozenlake_safety.png   # a few minutes on a CPU

Every ``--every`` steps, two :class:`rlverify.sb3.VerifyCallback` s verify the model being trained (no file is
saved: the callback reads the model in memory) on the exact MDP rlverify reads from the environment's own
transition table: the probability of ever reaching the goal, and of ever falling into a hole, under the
distribution PPO samples its actions from. Each check goes to SB3's logger (``--tensorboard DIR`` to see them in
TensorBoard as ``goal/value``, ``hole/value``, ...); the plot shows both against the training steps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="frozenlake_safety.png", help="the plot (default frozenlake_safety.png)")
    parser.add_argument("--steps", type=int, default=40_960, help="training steps (default 40960)")
    parser.add_argument("--every", type=int, default=2_048, help="steps between checks (default 2048)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--tensorboard", metavar="DIR", help="also write TensorBoard event files to DIR")
    parser.add_argument("--force", action="store_true", help="overwrite --out")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"{out}: file exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import CallbackList

    from rlverify.sb3 import VerifyCallback

    env = gym.make("FrozenLake-v1")
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
        tensorboard_log=args.tensorboard,
    )
    goal = VerifyCallback("gym:FrozenLake-v1", 'P=? [F "goal"]', every=args.every, prefix="goal", verbose=1)
    hole = VerifyCallback("gym:FrozenLake-v1", 'P=? [F "hole"]', every=args.every, prefix="hole")
    model.learn(total_timesteps=args.steps, callback=CallbackList([goal, hole]))
    figure = plot(goal.history, hole.history)
    figure.savefig(out, dpi=120)
    last = goal.history[-1]
    print(f"saved {out}: goal probability {goal.history[0].value:.3f} -> {last.value:.3f} over {last.steps:,} steps")
    return 0


def plot(goal: list[Any], hole: list[Any]) -> Any:
    """Goal and hole probabilities (with their certified brackets, thinner than the lines here) against steps."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4), layout="constrained")
    ax = figure.add_subplot()
    for checks, label, colour in ((goal, "reach the goal", "tab:green"), (hole, "fall into a hole", "tab:red")):
        steps = [c.steps for c in checks]
        ax.plot(steps, [c.value for c in checks], marker="o", color=colour, label=f"P(eventually {label})")
        ax.fill_between(steps, [c.lower for c in checks], [c.upper for c in checks], color=colour, alpha=0.2)
    ax.set_xlabel("training steps")
    ax.set_ylabel("probability (exact, from the start state)")
    ax.set_ylim(0, 1)
    ax.set_title("PPO on FrozenLake-v1 (slippery 4x4), verified while it trains")
    ax.grid(alpha=0.3)
    ax.legend(loc="center left")
    return figure


if __name__ == "__main__":
    sys.exit(main())
