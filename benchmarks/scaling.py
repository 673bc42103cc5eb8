"""Scaling of the exact engine on Avoid: grid size vs time and peak memory, deterministic and stochastic.

For xMax = yMax = 4, 5, ... (grid (n+1) x (n+1), at most (n+1)^6 states) it verifies
``P=? [F<=100 COLLISION=true]`` for a random 2x64 ReLU network policy (``MLP.random``, seed 0) in
each mode: the shipped reference policy is trained for the 4x4 grid only, and a fixed random network
of the same size costs the same per state on every grid (what is measured here is the engine). Every (size, mode)
runs in its own subprocess, so its peak resident memory (``ru_maxrss``) is measured alone; an address-space limit
and a timeout stop a run before it takes the machine down. A mode stops growing at its first failure (timeout, memory).
Prints a table and saves a PNG plot (and JSON with ``--json``).

    .venv/bin/python benchmarks/scaling.py [--sizes 4-20] [--modes deterministic,stochastic]
        [--strategy auto] [--timeout 600] [--mem-gb 16] [--out out/scaling.png] [--json out/scaling.json]
    .venv/bin/python benchmarks/scaling.py --from-json out/scaling.json --out out/scaling.png   # re-plot
    .venv/bin/python benchmarks/scaling.py --sizes 12-13 --modes deterministic --timeout 900 \
        --merge out/scaling.json --json out/scaling.json    # extend a saved study (same size+mode replaced)

The prior tool (the 2024 paper's) ran out of 16 GB at 13x13.

On disk (``--chain-dir``: the chain's rows in files, read back in row blocks; memory per state):

    .venv/bin/python benchmarks/scaling.py --sizes 8,12 --modes stochastic --storage memory,disk \
        --chain-dir /tmp/chains --mem-gb 22 --timeout 1800 --json out/disk.json

Partitioned across Ray actors (a Ray runtime on this machine; each actor holds its rows; per-actor peak memory):

    .venv/bin/python benchmarks/scaling.py --sizes 8 --modes stochastic --ray-actors 1,2,4 --chain-dir /tmp/chains

Each disk run writes ``DIR/avoid-N-MODE`` and removes it afterwards (``--keep-chains`` keeps it). Both storages
run with ``max_work=None`` (all 100 steps, no budget). Extra columns: ``B/state`` (peak growth per chain state) and
``ns/step-tr`` (check seconds per step x transition, 100 steps).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

PROPERTY = "P=? [F<=100 COLLISION=true]"
ROOT = Path(__file__).resolve().parents[1]


def worker(size: int, mode: str, slickness: float, strategy: str = "auto", chain_dir: str | None = None) -> dict:
    """Verify Avoid ``size`` x ``size`` in ``mode`` in this process (``chain_dir``: the chain on disk there); return
    the figures."""
    import numpy as np

    import rlverify.benchmarks.avoid as avoid
    from rlverify import ExactOptions, verify_exact
    from rlverify.policies import MLP, CallablePolicy

    t0 = time.perf_counter()
    from rlverify.benchmarks import make

    model = make("avoid-v1", xMax=size, yMax=size, slickness=slickness).model()
    actions = list(avoid.MOVES)
    net = MLP.random((len(model.variables), 64, 64, len(actions)), seed=0)
    scale = np.array([1.0 if v == "done" else 1.0 / size for v in model.variables])
    policy = CallablePolicy(lambda x: net(x * scale), model.variables, actions, output="logits", name="random 2x64")
    for module in ("scipy.sparse", "stormpy"):  # loaded before the baseline, as verify_exact loads them
        importlib.import_module(module)

    base = _rss_mb()  # the process before the model is built: imports, parsed program, policy
    options = ExactOptions(mode=mode, strategy=strategy, max_states=None, max_work=None, chain_dir=chain_dir)
    result = verify_exact(model, PROPERTY, policy, options)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {
        "size": size,
        "mode": mode,
        "states": result.states,
        "transitions": result.transitions,
        "value": result.value,
        "strategy": result.strategy,
        "storage": "memory" if chain_dir is None else "disk",
        "value_repr": repr(result.value),
        "method_note": result.precision_note,
        "timings": result.timings,
        "seconds": time.perf_counter() - t0,
        "base_rss_mb": base,
        "peak_rss_mb": peak,
        # peak growth over the process before the build, per transition of the chain
        "bytes_per_transition": (peak - base) * 2**20 / max(result.transitions, 1),
        "bytes_per_state": (peak - base) * 2**20 / max(result.states, 1),
        "memory_estimates_mb": {k: v / 2**20 for k, v in result.settings.get("memory_estimates", {}).items()},
    }


def ray_study(size: int, mode: str, slickness: float, chain_root: Path, actors: list[int]) -> list[dict]:
    """The chain of ``size`` on disk, then its rows held by 1, 2, 4... Ray actors (a runtime on this machine):
    per actor its peak resident memory and transitions, the time of a product, and that it equals the local one."""
    import numpy as np
    import ray

    import rlverify.benchmarks.avoid as avoid
    from rlverify import ExactOptions, verify_exact
    from rlverify.backends import BackendOptions
    from rlverify.benchmarks import make
    from rlverify.exact.ondisk import RowBlocks
    from rlverify.exact.partition import RayRows
    from rlverify.policies import MLP, CallablePolicy

    where = chain_root / f"avoid-{size}-{mode}-ray"
    shutil.rmtree(where, ignore_errors=True)
    model = make("avoid-v1", xMax=size, yMax=size, slickness=slickness).model()
    net = MLP.random((len(model.variables), 64, 64, len(avoid.MOVES)), seed=0)
    scale = np.array([1.0 if v == "done" else 1.0 / size for v in model.variables])
    policy = CallablePolicy(lambda x: net(x * scale), model.variables, list(avoid.MOVES), output="logits")
    options = ExactOptions(mode=mode, max_states=None, max_work=None, chain_dir=str(where))
    result = verify_exact(model, PROPERTY, policy, options)
    indptr = np.fromfile(where / "indptr.i64", dtype=np.int64)
    blocks = RowBlocks(where, indptr, np.fromfile(where / "vptr.i64", dtype=np.int64))
    x = np.random.default_rng(0).random(blocks.shape[0])
    local = blocks @ x
    rows = []
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for k in actors:
            parts = RayRows(blocks, BackendOptions(kind="ray"), k)
            parts @ x  # the actors have loaded their rows
            t0 = time.perf_counter()
            y = parts @ x
            seconds = time.perf_counter() - t0
            memory = parts.memory()
            parts.close()
            rows.append(
                {
                    "size": size,
                    "states": result.states,
                    "transitions": result.transitions,
                    "actors": k,
                    "identical": bool(np.array_equal(y, local)),
                    "product_s": seconds,
                    "nodes": len({m["node"] for m in memory}),
                    "actor_peak_mb": [m["peak_rss"] / 2**20 for m in memory],
                    "actor_transitions": [m["transitions"] for m in memory],
                }
            )
    finally:
        ray.shutdown()
        shutil.rmtree(where, ignore_errors=True)
    return rows


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def run_one(
    size: int,
    mode: str,
    slickness: float,
    timeout: float,
    mem_gb: float,
    strategy: str = "auto",
    chain_dir: Path | None = None,
    keep: bool = False,
) -> dict:
    """One (size, mode) in a subprocess with a memory cap (``chain_dir``: the chain on disk in a new subdirectory
    of it, removed afterwards unless ``keep``); failures are reported, not raised."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        str(size),
        mode,
        "--slickness",
        str(slickness),
        "--strategy",
        strategy,
    ]
    where = None
    if chain_dir is not None:
        where = chain_dir / f"avoid-{size}-{mode}"
        shutil.rmtree(where, ignore_errors=True)
        cmd += ["--chain-dir", str(where)]
    try:
        return _run(cmd, size, mode, timeout, mem_gb, limit_storage="memory" if chain_dir is None else "disk")
    finally:
        if where is not None and not keep:
            shutil.rmtree(where, ignore_errors=True)


def _run(cmd: list[str], size: int, mode: str, timeout: float, mem_gb: float, limit_storage: str) -> dict:
    """``cmd`` (a worker) in a subprocess under an address-space cap of ``mem_gb`` and ``timeout``: its JSON row."""

    def limit() -> None:  # runs in the child before exec
        cap = int(mem_gb * 1024**3)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    t0 = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=limit, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {
            "size": size,
            "mode": mode,
            "storage": limit_storage,
            "error": f"timeout after {timeout:.0f} s",
            "wall": time.perf_counter() - t0,
        }
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        memory = "MemoryError" in proc.stderr or "bad_alloc" in proc.stderr or proc.returncode in (-9, 137)
        kind = "out of memory" if memory else "failed"
        return {
            "size": size,
            "mode": mode,
            "storage": limit_storage,
            "error": f"{kind} (exit {proc.returncode}): {tail[:160]}",
            "wall": wall,
        }
    out = json.loads(lines[-1])
    out["wall"] = wall
    return out


def parse_sizes(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def table(rows: list[dict]) -> str:
    """Rows as text. ``B/tr``: peak RSS growth over the process before the build, per chain transition;
    ``slope``: (peak - previous size's peak) / (transitions - previous size's transitions), same mode."""
    head = (
        f"{'size':>5} {'mode':<13} {'states':>11} {'transitions':>13} {'value':>8} {'strategy':<9} "
        f"{'build s':>8} {'policy s':>8} {'check s':>8} {'total s':>8} {'wall s':>7} {'peak MB':>8} "
        f"{'B/tr':>6} {'slope':>6} {'storage':<7} {'B/state':>8} {'ns/step-tr':>10}"
    )
    lines = [head, "-" * len(head)]
    previous: dict[str, dict] = {}
    for r in rows:
        if "error" in r:
            lines.append(f"{r['size']:>5} {r['mode']:<13} {r.get('storage', 'memory')}: {r['error']}")
            continue
        t = r["timings"]
        per = r.get("bytes_per_transition")
        storage = r.get("storage", "memory")
        prev = previous.get(r["mode"] + storage)
        slope = None
        if (
            prev is not None
            and r["transitions"] > prev["transitions"]
            and prev.get("size", 0) < r["size"]
            and prev.get("engine") == r.get("engine")
        ):  # rows saved by an older engine carry its name
            slope = (r["peak_rss_mb"] - prev["peak_rss_mb"]) * 2**20 / (r["transitions"] - prev["transitions"])
        previous[r["mode"] + storage] = r
        per_state = r.get("bytes_per_state")
        ns = t.get("check", 0) / (100 * max(r["transitions"], 1)) * 1e9
        mode = r["mode"] + ("*" if r.get("engine") else "")
        lines.append(
            f"{r['size']:>5} {mode:<13} {r['states']:>11,} {r['transitions']:>13,} {r['value']:>8.4f} "
            f"{r['strategy']:<9} {t.get('build', 0):>8.2f} {t.get('policy', 0):>8.2f} {t.get('check', 0):>8.2f} "
            f"{t.get('total', 0):>8.2f} {r['wall']:>7.1f} {r['peak_rss_mb']:>8.0f} "
            f"{'' if per is None else f'{per:.0f}':>6} {'' if slope is None else f'{slope:.0f}':>6} {storage:<7} "
            f"{'' if per_state is None else f'{per_state:.0f}':>8} {ns:>10.2f}"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, marker in (("deterministic", "o"), ("stochastic", "s")):
        ok = [r for r in rows if r["mode"] == mode and "error" not in r]
        if not ok:
            continue
        sizes = [r["size"] for r in ok]
        ax_t.plot(sizes, [r["timings"]["total"] for r in ok], marker=marker, label=f"{mode}")
        ax_m.plot(sizes, [r["peak_rss_mb"] for r in ok], marker=marker, label=f"{mode}")
        for r in ok[-1:]:
            ax_t.annotate(
                f"{r['states']:,} states",
                (r["size"], r["timings"]["total"]),
                fontsize=8,
                textcoords="offset points",
                xytext=(-40, 6),
            )
        color = ax_t.get_lines()[-1].get_color()
        for r in (r for r in rows if r["mode"] == mode and "error" in r):
            ax_t.axvline(r["size"], linestyle=":", color=color)
            what = r["error"].split(" (")[0].split(":")[0]
            ax_t.text(
                r["size"],
                0.03,
                f" {mode}: {what}",
                transform=ax_t.get_xaxis_transform(),
                rotation=90,
                fontsize=7,
                color=color,
                va="bottom",
                ha="right",
            )
    ax_t.set(
        xlabel="Avoid grid size n (xMax = yMax = n)",
        ylabel="verification time (s)",
        yscale="log",
        title=f"Exact engine, {PROPERTY}",
    )
    ax_m.set(
        xlabel="Avoid grid size n (xMax = yMax = n)",
        ylabel="peak resident memory (MB)",
        yscale="log",
        title="Peak memory per run (own process)",
    )
    from matplotlib.ticker import MaxNLocator

    for ax in (ax_t, ax_m):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4-20", help="grid sizes n (xMax = yMax = n): '4-20' or '4,5,12'")
    ap.add_argument("--modes", default="deterministic,stochastic")
    ap.add_argument("--slickness", type=float, default=0.1)
    ap.add_argument("--strategy", default="auto", help="exact engine build strategy: auto, merged, full or onthefly")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per (size, mode)")
    ap.add_argument("--mem-gb", type=float, default=16.0, help="address-space cap per run (GB)")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "scaling.png", help="PNG plot path")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    ap.add_argument("--from-json", type=Path, default=None, help="only print and plot rows saved by --json")
    ap.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="start from the rows saved by --json in this file; new (size, mode) rows replace old ones",
    )
    ap.add_argument("--storage", default="memory", help="memory, disk or memory,disk (disk needs --chain-dir)")
    ap.add_argument("--chain-dir", type=Path, default=None, help="directory for the chains on disk (--storage disk)")
    ap.add_argument("--keep-chains", action="store_true", help="keep the chain directories of disk runs")
    ap.add_argument("--ray-actors", default=None, help="e.g. 1,2,4: the chain's rows held by that many Ray actors")
    ap.add_argument("--worker", nargs=2, metavar=("SIZE", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        chain = None if args.chain_dir is None else str(args.chain_dir)
        print(json.dumps(worker(int(args.worker[0]), args.worker[1], args.slickness, args.strategy, chain)), flush=True)
        return 0

    if args.ray_actors:
        if args.chain_dir is None:
            ap.error("--ray-actors needs --chain-dir DIR")
        actors = [int(k) for k in args.ray_actors.split(",")]
        print(
            f"{'size':>5} {'transitions':>13} {'actors':>6} {'nodes':>5} {'product s':>9} {'identical':>9}  per-actor peak MB"
        )
        for mode in args.modes.split(","):
            for size in parse_sizes(args.sizes):
                for r in ray_study(size, mode, args.slickness, args.chain_dir, actors):
                    peaks = ", ".join(f"{m:.0f}" for m in r["actor_peak_mb"])
                    print(
                        f"{r['size']:>5} {r['transitions']:>13,} {r['actors']:>6} {r['nodes']:>5} "
                        f"{r['product_s']:>9.3f} {r['identical']!s:>9}  {peaks}",
                        flush=True,
                    )
        return 0
    rows: list[dict] = json.loads(args.from_json.read_text()) if args.from_json else []
    if args.merge and not args.from_json:
        rows = json.loads(args.merge.read_text())
    storages = args.storage.split(",")
    if "disk" in storages and args.chain_dir is None:
        ap.error("--storage disk needs --chain-dir DIR")
    failed: set[tuple[str, str]] = set()
    for mode in [] if args.from_json else args.modes.split(","):
        for size in parse_sizes(args.sizes):
            for storage in storages:  # side by side: each size in each storage before the next size
                if (mode, storage) in failed:
                    continue
                chain_dir = args.chain_dir if storage == "disk" else None
                row = run_one(
                    size, mode, args.slickness, args.timeout, args.mem_gb, args.strategy, chain_dir, args.keep_chains
                )
                row["limits"] = {"timeout_s": args.timeout, "mem_gb": args.mem_gb}
                key = (size, mode, storage)
                rows = [r for r in rows if (r["size"], r["mode"], r.get("storage", "memory")) != key] + [row]
                print(table([row]).splitlines()[-1], flush=True)
                if "error" in row:
                    failed.add((mode, storage))
    order = {"deterministic": 0, "stochastic": 1}
    rows.sort(key=lambda r: (order.get(r["mode"], 2), r.get("storage", "memory"), r["size"]))
    print()
    print(table(rows))
    plot(rows, args.out)
    print(f"\nplot: {args.out}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
