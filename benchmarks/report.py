"""Time of ``rlverify report`` in this tree against a baseline tree, measured side by side in one run.

Each tree's report runs in its own subprocess (``PYTHONPATH`` = the tree's ``src``, the same interpreter and
machine), the trees alternating, ``--repeat`` times each; the best wall time of each is kept (a shared machine
only ever adds time) and the ratio printed, with each tree's timing table (seconds per engine run, from the
report's JSON) for its best run. The default target is the issue's: Avoid 4x4 with ``collision-100`` (exact,
deterministic, Pmin/Pmax, risk map, failure paths, robustness at epsilon 1, simulation).

    .venv/bin/python benchmarks/report.py --baseline /tmp/base [--repeat 3] [--target avoid-v1 --property collision-100]

A baseline tree is a checkout of another commit, e.g. ``git worktree add /tmp/base ec4510b`` (not committed).
Without ``--baseline`` only this tree is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from entry import ENTRY  # benchmarks/entry.py (this script's folder is on the path)

HERE = Path(__file__).resolve().parents[1]


def run_report(tree: Path, target: str, prop: str, out: Path) -> tuple[float, dict[str, float]]:
    """Wall seconds of one ``rlverify report`` in ``tree`` (a subprocess), and the report's timing table."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    argv = [sys.executable, "-c", ENTRY, "report", target, "--property", prop, "--out", str(out), "--force", "--json"]
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=out.parent, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1: the engines disagree (still a full report)
        raise SystemExit(f"{tree}: rlverify report failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    data = json.loads(proc.stdout)
    return seconds, data.get("result", data)["timings"]  # the envelope's result (a tree before it: the report itself)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout of the tree to compare with (its src/ is used)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tree, alternating (best kept; default 3)")
    parser.add_argument("--target", default="avoid-v1")
    parser.add_argument("--property", default="collision-100")
    args = parser.parse_args()
    trees = {"this tree": HERE}
    if args.baseline is not None:
        if not (args.baseline / "src" / "rlverify").is_dir():
            raise SystemExit(f"--baseline {args.baseline}: no src/rlverify in it (a checkout of rlverify?)")
        trees["baseline"] = args.baseline.resolve()
    best: dict[str, tuple[float, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="rlverify-bench-") as tmp:
        for i in range(args.repeat):
            for name, tree in trees.items():
                seconds, timings = run_report(tree, args.target, args.property, Path(tmp) / f"{name[:4]}.html")
                print(f"run {i + 1}: {name:10s} {seconds:6.1f} s", flush=True)
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, timings)
    print(f"\nrlverify report {args.target} --property {args.property}: best of {args.repeat} (wall seconds, whole command)")
    for name, (seconds, timings) in best.items():
        table = ", ".join(f"{k} {v:.1f}" for k, v in timings.items())
        print(f"  {name:10s} {seconds:6.1f} s  [{table}]  ({trees[name]})")
    if "baseline" in best:
        print(f"  speed-up: {best['baseline'][0] / best['this tree'][0]:.2f}x")


if __name__ == "__main__":
    main()
