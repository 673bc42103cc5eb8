"""``rlverify train-continuous``: retrain a continuous benchmark's reference PPO policy.

The lead may instead wire :func:`train_continuous` into ``rlverify train``.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from rlverify.training.continuous import train_continuous

console = Console()

__all__ = ["register", "run", "train_continuous"]


def register(sub: Any) -> None:
    """Add the ``train-continuous`` subcommand."""
    p = sub.add_parser("train-continuous", help="train a continuous benchmark's reference policy with PPO (needs torch)")
    p.add_argument("benchmark", help="bouncing-ball-v1, acc-v1 or pendulum-v1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, help="environment steps (default: the benchmark's setup)")
    p.add_argument("--hidden", help="hidden widths, e.g. 64,64 (default: the benchmark's setup)")
    p.add_argument("--out", required=True, help="output ONNX file")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    hidden = tuple(int(h) for h in args.hidden.split(",")) if args.hidden else None
    path, mlp, stats = train_continuous(args.benchmark, seed=args.seed, total_steps=args.steps, out=args.out, hidden=hidden)
    console.print(f"saved {path}: network {mlp.sizes}, {stats['steps']} steps, final mean return "
                  f"{stats['final_mean_return']:.3f} ({stats['seconds']} s)")
    return 0
