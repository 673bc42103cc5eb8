"""Start-up time of the ``rlverify`` command and package, for a tree before a change and after it, side by side.

Each command runs in its own process (``PYTHONPATH`` = the tree's ``src``, the same interpreter), ``--repeat`` times
per tree with the trees alternating (so both see the same machine state); the median wall time is printed (the
fastest in brackets, then the median CPU time, user + system, less sensitive to other processes on a shared machine)
with the ratio after/before and the targets of issue 23:

* ``rlverify --help``: < 0.25 s;
* ``rlverify verify running-example-v1 -p reach-goal-2`` (a 4-state chain: nearly all start-up): < 0.6 s;
* ``python -c "import rlverify"`` (no target; what a script pays for the package).

A reference row times what the verify command cannot avoid whatever rlverify does: the interpreter importing numpy,
scipy.sparse (the chain's matrices), stormpy and Rich's console and table, with scipy's copy of numpy's namespace made
without numpy's test and build tools as rlverify makes it (:mod:`rlverify.imports`, inlined here so that the row is the
same for every tree), exiting without the interpreter's teardown of those modules as the ``rlverify`` process does
(:func:`rlverify.cli.main.run`); what each tree's verify takes above it is printed too. Then, for each command and
tree, one run under ``python -X importtime``: the heavy libraries it imported, and the modules with the largest
cumulative import time. Bytecode is cached as after an install (a fresh ``PYTHONPYCACHEPREFIX`` directory, filled by
one warm-up run per command and tree, so neither tree compiles its sources while timed, whatever ``__pycache__`` it
has).

    .venv/bin/python benchmarks/startup.py --before /work/main/src [--repeat 9] [--top 12]

Without ``--before`` only this tree (``--after``, default this checkout's ``src``) is timed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from entry import ENTRY, source_tree  # benchmarks/entry.py (this script's folder is on the path)

HERE = Path(__file__).resolve().parents[1]
#: (name, arguments after the interpreter, target in seconds or None)
COMMANDS: list[tuple[str, list[str], float | None]] = [
    ("rlverify --help", ["--help"], 0.25),
    ("rlverify verify running-example-v1 -p reach-goal-2", ["verify", "running-example-v1", "-p", "reach-goal-2"], 0.6),
    ('python -c "import rlverify"', [], None),
]
FLOOR = (
    "import numpy; x = ('f2py', 'testing', 'ma', 'polynomial', 'matlib', 'ctypeslib'); a, d = numpy.__all__, numpy.__dir__; "
    "numpy.__all__ = [n for n in a if n not in x]; numpy.__dir__ = lambda: [n for n in d() if n not in x]; "
    "import scipy.sparse, stormpy, rich.console, rich.table, os; os._exit(0)"
)
#: libraries a command should import only when it needs them
HEAVY = ("numpy", "scipy", "stormpy", "rich", "onnxruntime", "onnx", "torch", "matplotlib", "ray", "highspy", "gymnasium")


def argv(python: str, name: str, args: list[str]) -> list[str]:
    """The process running command ``name`` (its ``args``) with ``python``."""
    if name.startswith("python"):
        return [python, "-c", "import rlverify"]
    return [python, "-c", ENTRY, *args]


def environment(src: Path | None, cache: Path) -> dict[str, str]:
    """The environment of a timed process: ``src`` first on the path, bytecode cached under ``cache``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return env


def wall(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds the process ``cmd`` takes, start to exit, and its CPU seconds (user + system); refuses a failing
    command (a broken tree is no figure)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def importtime(cmd: list[str], env: dict[str, str]) -> list[tuple[int, int, str]]:
    """``(self us, cumulative us, module with its nesting)`` for every import of one run of ``cmd``."""
    done = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=env, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, cumulative, module = line[len("import time:") :].split("|")
            rows.append((int(own), int(cumulative), module.rstrip()))
    return rows


def show_imports(label: str, rows: list[tuple[int, int, str]], top: int) -> None:
    """The heavy libraries among ``rows`` and the ``top`` modules by cumulative import time."""
    names = {module.strip() for _, _, module in rows}
    heavy = [h for h in HEAVY if h in names]
    total = sum(own for own, _, _ in rows)
    print(f"  {label}: {len(names)} modules, {total / 1e6:.3f} s of imports; heavy: {', '.join(heavy) or 'none'}")
    for own, cumulative, module in sorted(rows, key=lambda r: -r[1])[:top]:
        print(f"    {cumulative / 1e6:7.3f} s  (self {own / 1e6:.3f})  {module}")


def _cell(runs: list[tuple[float, float]]) -> str:
    """``median wall [fastest] cpu median`` of ``runs`` (wall, cpu)."""
    walls = [w for w, _ in runs]
    return f"{statistics.median(walls):.3f} [{min(walls):.3f}] {statistics.median(c for _, c in runs):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="the src directory of the tree before the change, e.g. /work/main/src")
    ap.add_argument("--after", type=Path, default=HERE / "src", help="the src directory after it (default: this tree's)")
    ap.add_argument("--repeat", type=int, default=7, help="timed runs per command and tree (default 7)")
    ap.add_argument("--top", type=int, default=12, help="modules listed per -X importtime run (default 12)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter (default: this one)")
    args = ap.parse_args()
    trees = [("before", args.before.resolve()), ("after", args.after.resolve())] if args.before else []
    trees = trees or [("after", args.after.resolve())]
    for _, src in trees:
        source_tree(str(src))
    print(f"python {args.python}; load average {os.getloadavg()[0]:.2f}; {args.repeat} runs per command and tree")
    for label, src in trees:
        print(f"  {label}: {src}")
    with tempfile.TemporaryDirectory(prefix="rlverify-startup-") as cache_dir:
        cache = Path(cache_dir)
        envs = {label: environment(src, cache / label) for label, src in trees}
        floor_env = environment(None, cache / "floor")
        for name, cmd_args, _ in COMMANDS:  # warm-up: bytecode written to the cache, files in the OS cache
            for label, _ in trees:
                wall(argv(args.python, name, cmd_args), envs[label])
        wall([args.python, "-c", FLOOR], floor_env)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.repeat):
            for name, cmd_args, _ in COMMANDS:
                for label, _ in trees:
                    times.setdefault((name, label), []).append(wall(argv(args.python, name, cmd_args), envs[label]))
            times.setdefault(("floor", ""), []).append(wall([args.python, "-c", FLOOR], floor_env))
        print(f"\nseconds: median wall time [fastest] cpu median (load average now {os.getloadavg()[0]:.2f})")
        head = "".join(f"{label:>25}" for label, _ in trees)
        print(f"  {'command':<52}{head}{'  after/before' if len(trees) > 1 else ''}  target")
        medians: dict[tuple[str, str], float] = {}
        for name, _, target in COMMANDS:
            cells = ""
            for label, _ in trees:
                runs = times[(name, label)]
                medians[(name, label)] = statistics.median(w for w, _ in runs)
                cells += f"{_cell(runs):>25}"
            ratio = f"{medians[(name, 'after')] / medians[(name, 'before')]:>14.2f}" if len(trees) > 1 else ""
            passed = medians[(name, "after")] < target if target is not None else False
            verdict = "" if target is None else f"  < {target:g} s: {'PASS' if passed else 'FAIL'}"
            print(f"  {name:<52}{cells}{ratio}{verdict}")
        floor = statistics.median(w for w, _ in times[("floor", "")])
        print(f"  reference (the floor): python -c {FLOOR!r}\n  {'':<52}{_cell(times[('floor', '')]):>25}")
        verify = COMMANDS[1][0]
        above = ", ".join(f"{label} {medians[(verify, label)] - floor:.3f} s" for label, _ in trees)
        print(f"  verify above the floor (median): {above}")
        for name, cmd_args, _ in COMMANDS:
            print(f"\n-X importtime, {name} (top {args.top} by cumulative time)")
            for label, _ in trees:
                show_imports(label, importtime(argv(args.python, name, cmd_args), envs[label]), args.top)


if __name__ == "__main__":
    main()
