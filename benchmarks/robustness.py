"""Robustness of the shipped Avoid 4x4 policy: perturbed observations (exact) and model error (intervals).

Prints, for ``avoid-v1`` (xMax = yMax = 4, slickness 0.1), the shipped PPO policy and ``collision-100``
(``P=? [F<=100 COLLISION=true]``): the nominal collision probability, the exact worst and best case
when an adversary shifts the agent's observed coordinates ``x, y`` by at most epsilon (L∞ and L1),
the FGSM attack's value, the adversarial MDP's size, how many states' argmax action a perturbation
can change, and the time; then the range under an absolute model error ``delta``.

    .venv/bin/python benchmarks/robustness.py [--epsilon 1] [--delta 0.001] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

from rlverify.benchmarks import make
from rlverify.exact import ModelErrorOptions, RobustnessOptions, model_error_bounds, robustness
from rlverify.models import parse_property


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=int, default=1)
    parser.add_argument("--delta", type=float, default=0.001)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    bench = make("avoid-v1")
    model, policy = bench.model(), bench.load_policy("reference")
    prop = parse_property(model, bench.properties["collision-100"], fixed_policy=True)
    figures = {}
    print(f"avoid-v1 (4x4, slickness 0.1), shipped PPO policy, {prop.text}")
    for norm in ("linf", "l1"):
        t = time.perf_counter()
        r = robustness(model, prop, policy, RobustnessOptions(epsilon=args.epsilon, norm=norm, perturb=("x", "y")))
        wall = time.perf_counter() - t
        figures[norm] = {
            "nominal": r.nominal,
            "worst": r.worst,
            "best": r.best,
            "fgsm": r.attack,
            "states": r.states,
            "choices": r.choices,
            "transitions": r.transitions,
            "changed_states": r.changed_states,
            "decision_states": r.decision_states,
            "observations": r.observations,
            "seconds": wall,
            "timings": r.timings,
        }
        print(f"\nobservation perturbation of x, y: {norm} epsilon = {args.epsilon}")
        print(
            f"  collision probability  nominal {r.nominal:.6f}   worst (Pmax) {r.worst:.6f}   best (Pmin) "
            f"{r.best:.6f}   FGSM {r.attack:.6f}"
        )
        print(f"  worst - nominal        {r.worst - r.nominal:+.6f} ({(r.worst - r.nominal) / r.nominal:+.3%})")
        print(f"  adversarial MDP        {r.states:,} states, {r.choices:,} choices, {r.transitions:,} transitions")
        print(f"  argmax changes         {r.changed_states:,} of {r.decision_states:,} decision states")
        print(
            f"  policy queries         {r.observations:,} distinct observations "
            f"({r.decision_states:,} states x {r.perturbations_per_state} perturbations), one batch"
        )
        print(f"  time                   {wall:.1f} s (" + ", ".join(f"{k} {v:.2f}s" for k, v in r.timings.items()) + ")")
    t = time.perf_counter()
    e = model_error_bounds(model, prop, policy, ModelErrorOptions(delta=args.delta))
    wall = time.perf_counter() - t
    figures["model_error"] = {
        "delta": args.delta,
        "nominal": e.nominal,
        "lower": e.lower,
        "upper": e.upper,
        "states": e.states,
        "transitions": e.transitions,
        "clipped": e.clipped,
        "seconds": wall,
    }
    print(f"\nmodel error: every transition probability within +-{args.delta:g} (absolute)")
    print(f"  collision probability  nominal {e.nominal:.6f}   range [{e.lower:.6f}, {e.upper:.6f}]")
    print(f"  interval chain         {e.states:,} states, {e.transitions:,} transitions; {e.clipped:,} intervals clipped")
    print(f"  numerics               {e.guarantee}")
    print(f"  time                   {wall:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
