"""Shields on Avoid: the time to compute the per-action values and the shield, and to certify the shielded policy.

For ``avoid-v1`` at n = 4 (the shipped PPO network's grid) and n = 8 (the same network on the larger grid, outside
the range it was trained on: a workload, not a claim about the policy), ``P<=0.2 [F<=100 COLLISION=true]``: the
full MDP's build, the per-action values (``Q = sum T x Pmin_99``), one certificate (the shielded policy verified
exactly, the unshielded value and the intervention figures) at a fixed relative threshold, and ``--meet``'s search
(n = 4 by default; ``--meet-all`` for every n). Prints the figures; ``--json`` writes them.

    .venv/bin/python benchmarks/shield.py [--sizes 4,8] [--threshold 0.01] [--meet-all] [--json out.json]

Measured on the shared 2-core machine of this session (±30 %)::

    n=4 --threshold 0.01: 15,625 states, 1,529,185 transitions; shielded 0.2130, unshielded 0.8461, optimum 0.0929;
        build 1.4 s, values 0.5 s, certificate 0.4 s, wall 3.2 s
    n=4 --meet: shielded 0.1995 (threshold 0.009331, 16 probes); build 1.9 s, values 0.6 s, certificate 6.5 s,
        wall 10.0 s
    n=8 --threshold 0.01: 531,441 states, 61,140,105 transitions; shielded 0.0230, unshielded 0.2027, optimum
        0.0009; build 189 s, values 46 s, certificate 43 s, wall 392 s (the rest: the unshielded verification and
        the interventions); --max-work raised to 5e10 (99 steps x 61M transitions exceed the default 5e9)
"""

from __future__ import annotations

import argparse
import json
import time

from rlverify.benchmarks import make
from rlverify.benchmarks.registry import data_path
from rlverify.exact import ExactOptions
from rlverify.exact.shield import ShieldOptions, shield_policy
from rlverify.models import parse_property
from rlverify.policies import load_policy

PROPERTY = "P<=0.2 [F<=100 COLLISION=true]"


def one(n: int, options: ShieldOptions) -> dict[str, float | int | bool | None]:
    bench = make("avoid-v1", xMax=n, yMax=n)
    model = bench.load_model()
    policy = load_policy(str(data_path("policies") / "avoid_4x4_ppo.onnx"))
    prop = parse_property(model, PROPERTY, fixed_policy=True)
    t = time.perf_counter()
    # n = 8: 99 steps x 61M transitions exceed the default --max-work (5e9): raised here, as a user would
    r = shield_policy(model, prop, policy, options, ExactOptions(max_work=int(5e10)))
    wall = time.perf_counter() - t
    return {
        "n": n,
        "meet": options.meet,
        "states": r.states,
        "transitions": r.transitions,
        "threshold": r.threshold,
        "shielded": r.value,
        "unshielded": r.unshielded,
        "optimum": r.optimum,
        "satisfied": r.satisfied,
        "intervened_share": r.intervened_share,
        "expected_interventions": r.expected_interventions,
        "probes": len(r.probes),
        "build_s": r.timings["build"],
        "values_s": r.timings["values"],
        "certify_s": r.timings["certify"],
        "unshielded_s": r.timings["unshielded"],
        "interventions_s": r.timings["interventions"],
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8", help="grid sizes n (xMax = yMax = n), default 4,8")
    parser.add_argument("--threshold", type=float, default=0.01, help="relative threshold of the fixed shield")
    parser.add_argument("--meet-all", action="store_true", help="also run --meet at every n (default: n = 4 only)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        runs = [ShieldOptions(threshold=args.threshold)]
        if n == 4 or args.meet_all:
            runs.append(ShieldOptions(meet=True))
        for options in runs:
            row = one(n, options)
            rows.append(row)
            print(
                f"n={n} {'--meet' if row['meet'] else f'--threshold {args.threshold:g}'}: {row['states']:,} states, "
                f"{row['transitions']:,} transitions; shielded {row['shielded']:.4f} (threshold {row['threshold']:.4g}, "
                f"{row['probes']} probes), unshielded {row['unshielded']:.4f}, optimum {row['optimum']:.4f}; "
                f"build {row['build_s']:.1f} s, values {row['values_s']:.1f} s, certificate {row['certify_s']:.1f} s, "
                f"unshielded {row['unshielded_s']:.1f} s, interventions {row['interventions_s']:.1f} s, "
                f"wall {row['wall_s']:.1f} s",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
