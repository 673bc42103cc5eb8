"""Simulation speed with a torch policy on a loaded machine, for a tree before a change and after it, side by side.

``rlverify simulate gym:FrozenLake-v1 --policy examples/gymnasium/ppo_frozenlake.zip`` (the shipped Stable-Baselines3
PPO, evaluated by torch) runs in its own process per tree (``PYTHONPATH`` = the tree's ``src``), the trees
alternating, ``--repeat`` times; the decisions per second the result records (``timings.decisions_per_second``) are
printed as the median (fastest and slowest in brackets) with the ratio after/before. With ``--burners N`` (default:
one per core) as many ``while True: pass`` processes keep every core busy meanwhile, as other work on a shared
machine does: torch's default of a thread per core then competes for cores that are not free. The estimate is the
same in every run (same seed): it is checked, so a faster tree cannot be a different computation.

    .venv/bin/python benchmarks/policy_threads.py --before /work/main/src [--burners 0] [--repeat 3] [--runs 100000]

Without ``--before`` only this tree (``--after``) is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from entry import ENTRY  # benchmarks/entry.py (this script's folder is on the path)

HERE = Path(__file__).resolve().parents[1]
POLICY = HERE / "examples" / "gymnasium" / "ppo_frozenlake.zip"


def simulate(python: str, src: Path, runs: int, extra: list[str]) -> tuple[float, float]:
    """(decisions per second, estimate) of one ``rlverify simulate`` run of ``src``."""
    args = ["simulate", "gym:FrozenLake-v1", "--policy", str(POLICY), "-p", 'P=? [F<=100 "goal"]', "--runs", str(runs)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([python, "-c", ENTRY, *args, *extra, "--json"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{src}: simulate failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    result = json.loads(done.stdout)
    result = result.get("result", result)  # the envelope's result (a tree before it: the result itself)
    return float(result["timings"]["decisions_per_second"]), float(result["estimate"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="the src directory of the tree before the change, e.g. /work/main/src")
    ap.add_argument("--after", type=Path, default=HERE / "src", help="the src directory after it (default: this tree's)")
    ap.add_argument("--burners", type=int, default=os.cpu_count() or 1, help="busy-loop processes (default: one per core)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tree (default 3)")
    ap.add_argument("--runs", type=int, default=100_000, help="simulated runs per measurement (default 100000)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter (default: this one)")
    args = ap.parse_args()
    trees = [("before", args.before.resolve())] if args.before else []
    trees.append(("after", args.after.resolve()))
    burners = [subprocess.Popen([args.python, "-c", "while True: pass"]) for _ in range(args.burners)]
    try:
        speeds: dict[str, list[float]] = {label: [] for label, _ in trees}
        estimates = set()
        for _ in range(args.repeat):
            for label, src in trees:
                speed, estimate = simulate(args.python, src, args.runs, [])
                speeds[label].append(speed)
                estimates.add(estimate)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    if len(estimates) != 1:
        raise SystemExit(f"the trees estimate differently: {sorted(estimates)}")
    print(
        f"{args.runs} runs of FrozenLake with the SB3 PPO policy, {args.burners} busy-loop processes on "
        f"{os.cpu_count()} cores; estimate {estimates.pop()} in every run"
    )
    print("decisions/s: median [fastest, slowest]")
    for label, src in trees:
        s = speeds[label]
        print(f"  {label:<7} {statistics.median(s):>12,.0f} [{max(s):,.0f}, {min(s):,.0f}]  {src}")
    if args.before:
        ratio = statistics.median(speeds["after"]) / statistics.median(speeds["before"])
        print(f"  after/before: {ratio:.1f}x")


if __name__ == "__main__":
    main()
