"""Train MaskablePPO on Avoid 4x4 with and without a shield, and verify both exactly.

    .venv/bin/python examples/train_avoid_shielded.py --steps 20000 --out avoid_shielded   # a few minutes on a CPU

The shield keeps, in each state, the actions whose best achievable collision probability within the remaining
100 steps (Q = sum T x Pmin) is within ``--threshold`` of the state's best (:mod:`rlverify.exact.shield`). The Gym
bridge exposes it as ``action_masks()`` (:meth:`rlverify.gym.env.MDPEnv.use_shield`), so sb3-contrib's MaskablePPO
samples only kept actions while it trains. Both agents are then verified exactly on the same model for
``P<=0.2 [F<=100 COLLISION=true]``: the plain one as MaskablePPO acts (its distribution renormalised over the
available actions), the shielded one as it is deployed (the same network under the shield,
:class:`rlverify.policies.shielded.ShieldedPolicy`). Needs the ``sb3`` extra (stable-baselines3, sb3-contrib).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

PROPERTY = "P<=0.2 [F<=100 COLLISION=true]"


def run(steps: int = 20_000, seed: int = 0, threshold: float = 0.01, out: Path = Path("avoid_shielded")) -> dict[str, Any]:
    """Train both agents for ``steps`` steps each, write the shield to ``out/shield.json`` and return the exact values:
    ``{"bound", "optimum", "plain": {"value", "network", ...}, "shielded": {"value", "shielded_value", ...}}``."""
    from sb3_contrib import MaskablePPO

    from rlverify import ExactOptions, verify_exact
    from rlverify.benchmarks import make
    from rlverify.exact.action_values import action_values
    from rlverify.exact.shield import compute_shield
    from rlverify.gym.env import MDPEnv
    from rlverify.models import parse_property
    from rlverify.policies import load_policy
    from rlverify.policies.shielded import ShieldedPolicy

    model = make("avoid-v1").load_model()
    prop = parse_property(model, PROPERTY)
    values = action_values(model, prop)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"bound": 0.2, "optimum": float(values.state_values[values.mdp.initial_states[0]])}
    shield = None
    for name in ("plain", "shielded"):
        env = MDPEnv.from_benchmark("avoid-v1")
        if name == "shielded":
            shield = compute_shield(values, env.action_names, "relative", threshold, model=model)
            shield.save(out / "shield.json", force=True)
            env.use_shield(shield)
        agent = MaskablePPO("MlpPolicy", env, n_steps=512, batch_size=64, seed=seed, device="cpu", verbose=0)
        agent.learn(total_timesteps=steps)
        network = load_policy(agent, features=env.dynamics.features, actions=env.action_names)
        # as MaskablePPO acts without a shield: its distribution over the available actions
        plain = verify_exact(model, prop, network, ExactOptions(unavailable="renormalize"))
        entry = {"value": plain.value, "upper": plain.upper, "satisfied": plain.satisfied, "network": network}
        if shield is not None:  # as deployed: the network under the shield it was trained with
            shielded = verify_exact(model, prop, ShieldedPolicy(network, shield))
            entry.update(shielded_value=shielded.value, shielded_upper=shielded.upper, shielded_satisfied=shielded.satisfied)
        results[name] = entry
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="training steps per agent (default 20000)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--threshold", type=float, default=0.01, help="the shield's relative threshold (default 0.01)")
    parser.add_argument("--out", default="avoid_shielded", help="directory for shield.json (default avoid_shielded)")
    args = parser.parse_args(argv)
    r = run(args.steps, args.seed, args.threshold, Path(args.out))
    print(f"{PROPERTY}: optimum over all policies (Pmin) {r['optimum']:.4f}")
    print(f"  MaskablePPO, no shield:           {r['plain']['value']:.4f}")
    print(
        f"  MaskablePPO trained under shield: {r['shielded']['value']:.4f} without it, "
        f"{r['shielded']['shielded_value']:.4f} under it (shield: {Path(args.out) / 'shield.json'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
