"""Table 1 of Bacci & Parker (NFM 2022) with rlverify's abstraction engine and our PPO policies.

Runs each configuration in a fresh subprocess with a time limit and prints our bound and time next
to the paper's (paper: 4-core 4.2 GHz, Gurobi, PRISM; here: whatever machine runs this, HiGHS and
numpy, one thread). The policies differ (ours are trained by rlverify's PPO), so bounds are
comparable in kind, not in value.

Usage::

    python benchmarks/abstraction.py            # all 20 rows, 600 s limit each, 1.5M abstract states at most
    python benchmarks/abstraction.py --quick    # 5 representative rows
    python benchmarks/abstraction.py --only acc --timeout 300 --json results.json
    python benchmarks/abstraction.py --tightness --budget 600   # two-sided answers on the risky suite (issue 26)

``--tightness`` runs the risky suite (double integrator limit 0.7 from the user-file path, the bouncing ball's
large box at k = 25, ACC and the pendulum with hand-made risky networks, the same as tests/abstraction/test_verify.py's
``risky_policy``) with refinement by the gap (``--gap 0.05``, ``--budget`` seconds each) and prints, side by side:
the single abstraction's upper bound (today's answer: the first round of the refinement is exactly that run), then
the refined upper bound, the sound lower bound, the worst witness (exact or statistical, as labelled), the gap and
the time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

#: (benchmark, initial, k, domain, phi, containment, paper bound, paper minutes)
ROWS = [
    ("bouncing-ball-v1", "small", 20, "box", 0.1, True, 0.0, 1),
    ("bouncing-ball-v1", "small", 20, "octagon", 0.1, True, 0.0, 2),
    ("bouncing-ball-v1", "large", 20, "box", 0.1, True, 0.63, 30),
    ("bouncing-ball-v1", "large", 20, "octagon", 0.1, True, 0.0, 33),
    ("bouncing-ball-v1", "large", 20, "box", 0.1, False, 0.006, 91),
    ("bouncing-ball-v1", "large", 20, "octagon", 0.1, False, 0.0, 111),
    ("acc-v1", None, 7, "box", 0.33, True, 0.084, 85),
    ("acc-v1", None, 7, "octagon", 0.33, True, 0.078, 60),
    ("acc-v1", None, 7, "template", 0.33, True, 0.47, 70),
    ("acc-v1", None, 7, "box", 0.5, True, 0.62, 29),
    ("acc-v1", None, 7, "octagon", 0.5, True, 0.12, 30),
    ("acc-v1", None, 7, "template", 0.5, True, 0.53, 34),
    ("acc-v1", None, 7, "box", 0.33, False, 0.040, 176),
    ("acc-v1", None, 7, "octagon", 0.33, False, 0.031, 152),
    ("acc-v1", None, 7, "template", 0.33, False, 0.038, 113),
    ("acc-v1", None, 7, "box", 0.5, False, 0.17, 64),
    ("acc-v1", None, 7, "octagon", 0.5, False, 0.12, 52),
    ("acc-v1", None, 7, "template", 0.5, False, 0.16, 48),
    ("pendulum-v1", None, 6, "box", 0.5, True, 0.057, 71),
    ("pendulum-v1", None, 6, "box", 0.5, False, 0.057, 69),
]
QUICK = [1, 3, 10, 18, 0]

CHILD = r"""
import json, sys
import rlverify.benchmarks.continuous
from rlverify.benchmarks.registry import make
from rlverify.abstraction import AbstractionOptions, verify_abstraction
bid, initial, k, domain, phi, containment, max_states = json.loads(sys.argv[1])
system = make(bid)
r = verify_abstraction(system.model(), system.policies["ppo"], AbstractionOptions(
    horizon=k, domain=domain, phi=phi, containment=containment, initial=initial, max_states=max_states))
print(json.dumps({"bound": r.upper_bound, "states": r.n_abstract_states, "polyhedra": r.n_polyhedra,
                  "merges": r.n_containment_merges, "shared": r.n_shared_successors,
                  "unrefined": r.n_unrefined_states, "seconds": r.timings["total"], "unresolved": r.n_unresolved_parts,
                  "milp": r.n_milp_parts, "timings": r.timings}))
"""


#: (label, target, constants, policy ("ppo" or "risky"), k, domain, phi, containment, initial)
TIGHT = [
    (
        "double integrator limit 0.7 (user file)",
        "examples/double_integrator.py:SYSTEM",
        "limit=0.7",
        "file",
        4,
        "box",
        0.2,
        True,
        None,
    ),
    ("bouncing ball, large box", "bouncing-ball-v1", None, "ppo", 25, "box", 0.1, True, "large"),
    ("ACC, risky network", "acc-v1", None, "risky", 7, "octagon", 0.3, True, None),
    ("pendulum, risky network", "pendulum-v1", None, "risky", 5, "box", 0.3, True, None),
    # --domain auto against box and octagon (issue 26, item 3)
    (
        "double integrator limit 0.7 (user file), auto",
        "examples/double_integrator.py:SYSTEM",
        "limit=0.7",
        "file",
        4,
        "auto",
        0.2,
        True,
        None,
    ),
    ("ACC, risky network, box", "acc-v1", None, "risky", 7, "box", 0.3, True, None),
    ("ACC, risky network, auto", "acc-v1", None, "risky", 7, "auto", 0.3, True, None),
    ("pendulum, risky network, octagon", "pendulum-v1", None, "risky", 5, "octagon", 0.3, True, None),
    ("pendulum, risky network, auto", "pendulum-v1", None, "risky", 5, "auto", 0.3, True, None),
]

TIGHT_CHILD = r"""
import json, sys
import numpy as np
from rlverify.abstraction import AbstractionOptions, verify_abstraction
from rlverify.policies.mlp import MLP, save_mlp_onnx
target, constants, kind, k, domain, phi, containment, initial, gap, budget, workdir = json.loads(sys.argv[1])
if target.endswith(":SYSTEM"):
    from rlverify.models.continuous import load_system
    system = load_system(target, constants=constants)
    policy = target.split(".py:")[0] + ".onnx"
else:
    from rlverify.benchmarks.registry import make
    bench = make(target)
    system = bench.model()
    policy = bench.policies["ppo"]
    if kind == "risky":  # the hand-made risky networks of tests/abstraction/test_verify.py (risky_policy)
        rng = np.random.default_rng(11)
        if target == "acc-v1":
            w0, b0 = rng.normal(0, 0.1, (8, 2)), np.ones(8)
            w1, b1 = rng.normal(0, 0.2, (2, 8)), np.array([0.0, 1.2])
        else:
            w0, b0 = rng.normal(0, 1.0, (8, 2)), np.ones(8)
            w1, b1 = rng.normal(0, 0.2, (3, 8)), np.array([0.0, -0.5, 0.8])
        policy = f"{workdir}/risky-{target}.onnx"
        save_mlp_onnx(policy, MLP((w0, w1), (b0, b1)), features=list(system.features), actions=list(system.actions),
                      training={"algorithm": "hand-made", "seed": 11, "benchmark": target})
r = verify_abstraction(system, policy, AbstractionOptions(
    horizon=k, domain=domain, phi=phi, containment=containment, initial=initial, gap=gap, time_budget=budget))
w = r.worst_witness
print(json.dumps({"single_upper": r.history[0][1], "single_seconds": r.history[0][0], "upper": r.upper_bound,
                  "lower_all": r.lower_all, "witness": w.lower if w else None, "witness_method": w.method if w else None,
                  "witness_state": w.state if w else None, "gap": r.gap, "seconds": r.timings["total"],
                  "cells": r.cells, "stopped": r.stopped, "history": r.history}))
"""


def run_tight(row: tuple, gap: float, budget: float, workdir: str) -> dict:
    _, target, constants, kind, k, domain, phi, containment, initial = row
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    args = json.dumps([target, constants, kind, k, domain, phi, containment, initial, gap, budget, workdir])
    t0 = time.perf_counter()
    try:  # the budget bounds the refinement; the first (single) abstraction and the last round may run over it
        out = subprocess.run(
            [sys.executable, "-c", TIGHT_CHILD, args], capture_output=True, text=True, timeout=3 * budget + 600, env=env
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": time.perf_counter() - t0}
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"status": f"error: {last[:120]}", "seconds": time.perf_counter() - t0}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["status"] = "ok"
    return res


def tightness(args: argparse.Namespace) -> None:
    """The tightness table (issue 26): two-sided answers on the risky suite."""
    import tempfile

    from rich.console import Console
    from rich.table import Table

    rows = [r for r in TIGHT if not args.only or args.only in r[0] or args.only in r[1]]
    table = Table(
        title="Two-sided answers on the risky suite: P(F<=k unsafe), refinement by the gap "
        f"(target {args.gap:g}, budget {args.budget:g} s)"
    )
    for col in (
        "system",
        "k",
        "domain / phi",
        "single upper (today)",
        "time (s)",
        "upper (sound)",
        "lower_all (sound)",
        "worst witness",
        "gap",
        "time (s) ",
        "cells",
        "stopped",
    ):
        table.add_column(col, justify="left" if col in ("system", "stopped", "domain / phi", "worst witness") else "right")
    console = Console(width=max(200, Console().width))
    results = []
    with tempfile.TemporaryDirectory() as workdir:
        for row in rows:
            res = run_tight(row, args.gap, args.budget, workdir)
            results.append({"row": row, **res})
            console.print(f"{row[0]}: {res}", highlight=False)
            ok = res["status"] == "ok"
            w = f"{res['witness']:.4g} ({res['witness_method']})" if ok and res["witness"] is not None else "-"
            table.add_row(
                row[0],
                str(row[4]),
                f"{row[5]} / {row[6]:g}",
                f"{res['single_upper']:.4g}" if ok else "-",
                f"{res['single_seconds']:.0f}" if ok else "-",
                f"{res['upper']:.4g}" if ok else "-",
                f"{res['lower_all']:.4g}" if ok else "-",
                w,
                f"{res['gap']:.4g}" if ok else "-",
                f"{res['seconds']:.0f}",
                str(res.get("cells", "-")),
                res.get("stopped") or res["status"],
            )
    console.print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


def run_row(row: tuple, timeout: float, max_states: int) -> dict:
    bid, initial, k, domain, phi, containment, _, _ = row
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    t0 = time.perf_counter()
    try:
        args = json.dumps([bid, initial, k, domain, phi, containment, max_states])
        out = subprocess.run([sys.executable, "-c", CHILD, args], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout ({timeout:.0f} s)", "seconds": time.perf_counter() - t0}
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"status": f"error: {last[:120]}", "seconds": time.perf_counter() - t0}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["status"] = "ok"
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="only 5 representative rows")
    ap.add_argument("--only", help="only rows whose benchmark id contains this text")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per configuration (default 600)")
    ap.add_argument("--max-states", type=int, default=1_500_000, help="abstract-state budget per configuration")
    ap.add_argument("--rows", help="comma-separated row numbers (0-based, in the order of ROWS) to run")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--tightness", action="store_true", help="the two-sided tightness table on the risky suite instead")
    ap.add_argument("--gap", type=float, default=0.05, help="--tightness: target gap (default 0.05)")
    ap.add_argument("--budget", type=float, default=600.0, help="--tightness: seconds of refinement per system (default 600)")
    args = ap.parse_args()
    if args.tightness:
        tightness(args)
        return
    from rich.console import Console
    from rich.table import Table

    rows = [ROWS[i] for i in QUICK] if args.quick else ROWS
    if args.rows:
        rows = [ROWS[int(i)] for i in args.rows.split(",")]
    if args.only:
        rows = [r for r in rows if args.only in r[0]]
    table = Table(title="Table 1 (Bacci & Parker 2022) with rlverify: sound upper bounds on P(F<=k unsafe)")
    for col in (
        "benchmark",
        "S0",
        "k",
        "domain",
        "phi",
        "contain",
        "paper bound",
        "paper min",
        "our bound",
        "our time (s)",
        "IMDP states",
        "polyhedra",
        "merges",
        "status",
    ):
        table.add_column(col, justify="right" if col not in ("benchmark", "domain", "status") else "left")
    console = Console(width=max(170, Console().width))  # the table has 14 columns: never fold them
    results = []
    for row in rows:
        res = run_row(row, args.timeout, args.max_states)
        bid, initial, k, domain, phi, containment, pbound, pmin = row
        results.append({"row": row, **res})
        console.print(f"{bid} {initial or ''} k={k} {domain} phi={phi} containment={containment}: {res}", highlight=False)
        ok = res["status"] == "ok"
        table.add_row(
            bid,
            initial or "-",
            str(k),
            domain,
            f"{phi:g}",
            "yes" if containment else "no",
            f"{pbound:g}",
            str(pmin),
            f"{res['bound']:.3g}" if ok else "-",
            f"{res['seconds']:.0f}",
            str(res.get("states", "-")),
            str(res.get("polyhedra", "-")),
            str(res.get("merges", "-")),
            res["status"],
        )
    console.print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
