"""The slowest Table 1 row, before and after: today's code (``--before``) and this checkout, side by side in one run.

Row: bouncing ball, large initial box, octagons, k = 20, phi = 0.1, containment (``rlverify abstract
bouncing-ball-v1 --initial large --horizon 20 --domain octagon --phi 0.1 --containment``). Both runs are
fresh subprocesses with single-threaded BLAS, started together (``--sequential``: one after the other), so a
shared machine's load hits both alike; the table gives wall and CPU seconds, the bound, the abstraction's
size, and the ratios, plus the load average (``os.getloadavg``) before and after, and whether the two interval MDPs
(and initial parts) are identical, array for array (a digest of each).

Usage::

    git archive main src | tar -x -C /tmp/main-src          # today's code: /tmp/main-src/src
    python benchmarks/abstraction_speed.py --before /tmp/main-src/src
    python benchmarks/abstraction_speed.py --before /tmp/main-src/src --horizon 5   # a quicker look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE_SRC = Path(__file__).resolve().parents[1] / "src"

CHILD = r"""
import json, sys, time
import rlverify.benchmarks.continuous
from rlverify.benchmarks.registry import make
from rlverify.abstraction import AbstractionOptions, verify_abstraction
bid, initial, k, domain, phi, containment = json.loads(sys.argv[1])
system = make(bid)
w0, c0 = time.perf_counter(), time.process_time()
r = verify_abstraction(system.model(), system.policies["ppo"], AbstractionOptions(
    horizon=k, domain=domain, phi=phi, containment=containment, initial=initial))
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
import hashlib
import numpy as np
h = hashlib.sha256()  # the interval MDP, array for array, and the initial parts: equal digests, the same abstraction
for name in ("fail", "choice_state", "trans_choice", "trans_target", "trans_lo", "trans_hi", "sure_fail"):
    v = getattr(r.imdp, name, None)
    if v is not None:
        h.update(name.encode() + np.ascontiguousarray(v).tobytes())
h.update(repr([(p.lo, p.hi, p.probability_lower, p.probability_upper, p.bound) for p in r.parts]).encode())
print(json.dumps({"bound": r.upper_bound, "states": r.n_abstract_states, "polyhedra": r.n_polyhedra,
                  "wall": wall, "cpu": cpu, "timings": r.timings, "digest": h.hexdigest()[:16]}))
"""


def start(src: Path, row: list) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(src), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(row)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def finish(proc: subprocess.Popen, what: str) -> dict:
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed: {(err.strip().splitlines() or ['?'])[-1]}")
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, type=Path, help="the src/ directory of the code to compare against")
    ap.add_argument("--after", type=Path, default=HERE_SRC, help="the src/ directory of the new code (default: this checkout)")
    ap.add_argument("--horizon", type=int, default=20, help="k (default 20, the Table 1 row)")
    ap.add_argument("--sequential", action="store_true", help="run before, then after (default: both at once)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()
    if not (args.before / "rlverify" / "__init__.py").is_file():
        raise SystemExit(f"--before {args.before}: no rlverify package there (give the src/ directory)")
    row = ["bouncing-ball-v1", "large", args.horizon, "octagon", 0.1, True]
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    if args.sequential:
        before = finish(start(args.before, row), "before")
        after = finish(start(args.after, row), "after")
    else:
        pb, pa = start(args.before, row), start(args.after, row)
        after = finish(pa, "after")
        before = finish(pb, "before")
    load1 = os.getloadavg()
    print(
        f"bouncing-ball-v1, large, octagon, k={args.horizon}, phi=0.1, containment "
        f"({'one after the other' if args.sequential else 'both at once'}, {time.perf_counter() - t0:.0f} s in all)"
    )
    print(f"{'':8} {'wall s':>8} {'cpu s':>8} {'bounds s':>9} {'refine s':>9} {'bound':>12} {'states':>8} {'polyhedra':>9}")
    for name, r in (("before", before), ("after", after)):
        t = r["timings"]
        print(
            f"{name:8} {r['wall']:8.1f} {r['cpu']:8.1f} {t['bounds']:9.1f} {t['refinement']:9.1f} "
            f"{r['bound']:12.6g} {r['states']:8d} {r['polyhedra']:9d}"
        )
    print(
        f"ratio    {before['wall'] / after['wall']:8.2f} {before['cpu'] / after['cpu']:8.2f} "
        f"{before['timings']['bounds'] / after['timings']['bounds']:9.2f}"
    )
    same = (before["states"], before["polyhedra"]) == (after["states"], after["polyhedra"])
    identical = before["digest"] == after["digest"]
    print(
        f"bound after {'<=' if after['bound'] <= before['bound'] else '>'} before; "
        f"abstraction {'the same size' if same else 'of a different size'}; interval MDP and initial parts "
        f"{'identical' if identical else 'different'} (digest {before['digest']} before, {after['digest']} after)"
    )
    print(
        f"load average (1, 5, 15 min) before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; "
        f"after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; cores: {os.cpu_count()}"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"row": row, "before": before, "after": after, "load": [load0, load1]}, indent=2)
        )


if __name__ == "__main__":
    main()
