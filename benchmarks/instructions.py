"""Instructions the exact engine executes per verification, for a tree before a change and after it, side by side.

Wall and CPU times on a shared machine drift by more than the changes worth measuring: identical code in alternating
processes gave per-pair ratios from 0.73 to 1.41 on this project's machines (issue 23's notes). Instructions retired are
not timings, but with the hash seed fixed they repeat to ~0.5 % (identical trees: 1.002 in one run), so a change's
effect on the work done shows. Each figure is valgrind's cachegrind ``I refs`` of a process running ``verify_exact``
(``auto``, as :func:`benchmarks.exact.file_worker`'s ``total``) N1 and N2 times on one of ``benchmarks/exact.py``'s
files (every module compiled in every run); per verification = (I(N2) - I(N1)) / (N2 - N1), so start-up,
imports and first uses cancel. Storm's in-process parse + build + check of the same property
(:func:`benchmarks.exact.storm_monolithic`) is counted the same way, for reference: ours / Storm is a ratio of work, not
of time (numpy's gathers retire fewer instructions per cycle than Storm's C++ loop: on csma 0.91x Storm's instructions
took 1.03-1.2x its wall time).

    .venv/bin/python benchmarks/instructions.py --before /path/to/old/src [--only csma,ij] [--n 1,3]

Needs valgrind (``apt install valgrind``); ~50x slower than native: csma takes ~1 min per process, two at a time.
Instructions of every thread are counted (the Storm probe's included), although it runs beside the main thread.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from entry import source_tree  # benchmarks/entry.py (this script's folder is on the path)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def worker(case_id: str, n: int, storm: bool) -> None:
    """Run the case's verification (or Storm's monolithic check) ``n`` times in this process, then exit at once."""
    from exact import FILE_CASES, _case_policy, _forget_compiled, storm_monolithic

    from rlverify.exact import ExactOptions, verify_exact
    from rlverify.models import load_model, parse_property

    case = next(c for c in FILE_CASES if c.id == case_id)
    model = load_model(case.path(), case.constants or None)
    policy, _, _ = _case_policy(case, model)
    prop = parse_property(model, case.prop)
    for _ in range(n):
        if storm:
            storm_monolithic(model, case.prop)
        else:
            _forget_compiled()
            verify_exact(model, prop, policy, ExactOptions(unavailable=case.unavailable))
    sys.stdout.flush()
    os._exit(0)  # the interpreter's teardown is the same in every run: not counted


def count(src: str, case_id: str, n: int, storm: bool) -> int:
    """cachegrind's ``I refs`` of one worker process with ``src`` on PYTHONPATH."""
    with tempfile.TemporaryDirectory(prefix="rlverify-instructions-") as tmp:
        command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={Path(tmp) / 'out'}"]
        command += [sys.executable, __file__, "--worker", case_id, "--n", str(n)] + (["--storm"] if storm else [])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([src, str(HERE)]),
            "PYTHONHASHSEED": "0",  # the same paths through dicts and sets in every run
            # every tree compiles its modules in every run, whatever __pycache__ it has: 'start' compares like with like
            "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=7200, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise RuntimeError(f"{case_id} ({src}, n={n}): {out.stderr.strip()[-400:]}")
    return int(found.group(1).replace(",", ""))


def per_run(src: str, case_id: str, n1: int, n2: int, storm: bool, pool: ThreadPoolExecutor) -> tuple[float, float]:
    """Instructions per verification (millions) and per process start (the N1 run less N1 verifications)."""
    i1, i2 = pool.map(lambda n: count(src, case_id, n, storm), (n1, n2))
    each = (i2 - i1) / (n2 - n1)
    return each / 1e6, (i1 - n1 * each) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", metavar="SRC", help="also count this source tree (e.g. a checkout of main's src)")
    ap.add_argument("--after", metavar="SRC", default=str(REPO / "src"), help="the tree counted as 'after' (this one)")
    ap.add_argument("--only", default="csma", help="comma-separated case ids of benchmarks/exact.py --files")
    ap.add_argument("--n", default="1,3", help="the two repetition counts N1,N2 (default 1,3)")
    ap.add_argument("--no-storm", action="store_true", help="skip Storm's monolithic reference")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--storm", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:  # --n is this process's one count
        worker(args.worker, int(args.n), args.storm)
    try:
        n1, n2 = (int(x) for x in args.n.split(","))
        if not 0 <= n1 < n2:
            raise ValueError
    except ValueError:
        ap.error(f"--n {args.n}: two counts N1,N2 with 0 <= N1 < N2")
    if shutil.which("valgrind") is None:
        sys.exit("instructions.py needs valgrind on the PATH (apt install valgrind)")
    sys.path.insert(0, str(HERE))
    from exact import FILE_CASES

    known = {c.id: c for c in FILE_CASES}
    cases = args.only.split(",")
    unknown = [c for c in cases if c not in known]
    if unknown:
        ap.error(f"unknown case ids {unknown}; known: {', '.join(known)}")
    trees = {"after": source_tree(args.after), **({"before": source_tree(args.before)} if args.before else {})}
    print(f"million instructions per verification (cachegrind I refs: ({n2} runs - {n1} runs) / {n2 - n1})")
    print(f"{'case':14} {'tree':8} {'per run':>9} {'start':>9} {'after/before':>13} {'/ storm':>8}")
    with ThreadPoolExecutor(max_workers=2) as pool:
        for case_id in cases:
            if not known[case_id].path().is_file():
                print(f"{case_id}: {known[case_id].path()} not found, skipped", flush=True)
                continue
            storm = None if args.no_storm else per_run(trees["after"], case_id, n1, n2, True, pool)[0]
            got = {label: per_run(src, case_id, n1, n2, False, pool) for label, src in trees.items()}
            for label, (each, start) in got.items():
                ratio = f"{each / got['before'][0]:13.3f}" if "before" in got and label == "after" else " " * 13
                vs_storm = f"{each / storm:8.2f}" if storm else ""
                print(f"{case_id:14} {label:8} {each:9.1f} {start:9.1f} {ratio} {vs_storm}", flush=True)
            if storm:
                print(f"{case_id:14} {'storm':8} {storm:9.1f}", flush=True)


if __name__ == "__main__":
    main()
