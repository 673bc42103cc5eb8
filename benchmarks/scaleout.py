"""Scale-out with the Ray backend (prints figures and ratios measured in one run; not a unit test).

1. The same job on three backends: ``rlverify simulate``'s statistical check of the shipped Racetrack
   Barto-small network (``P=? [!"crashed" U "goal"]``, Okamoto, stochastic, from the start line) in this
   process (local), as Ray tasks on a Ray runtime limited to 1 CPU, and on one limited to 2 CPUs.
   Printed: wall time of the job (the runtime's start-up is timed separately: it is paid once per
   process), decisions/s, the speed-up from 1 to 2 workers, and whether the three results are identical
   (they must be: the tasks are fixed before any runs and results are read in run order).
2. The overhead per task: ``--tasks`` tiny tasks (a range check, microseconds of work) through
   :meth:`~rlverify.backends.Backend.map`, on the 1- and 2-CPU runtimes: wall time per task. Also the
   time to ship the policy and environment once (``Backend.share``).

Wall-clock figures: other processes on the machine slow every figure (the load average is printed).

Usage: python benchmarks/scaleout.py [--epsilon 0.004] [--batch 20000] [--tasks 400]
"""

from __future__ import annotations

import argparse
import os
import time

from rlverify.backends import LOCAL, BackendOptions, open_backend
from rlverify.resolve import resolve
from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.stats import check_unit, okamoto_runs
from rlverify.statistical.verify import StatisticalOptions, verify_statistical

GOAL = 'P=? [!"crashed" U "goal"]'


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=0.004, help="Okamoto half-width (0.004: 115,278 runs)")
    ap.add_argument("--batch", type=int, default=20_000, help="runs simulated in lockstep per batch")
    ap.add_argument("--tasks", type=int, default=400, help="tiny tasks for the per-task overhead")
    args = ap.parse_args()
    import ray

    target = resolve("racetrack-barto-small-v1", kinds=("native",), property=GOAL, command="benchmarks/scaleout.py")
    n = okamoto_runs(args.epsilon, 0.05)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; ray {ray.__version__}")
    print(
        f"job: {target.benchmark.id}, shipped policy, {GOAL}, Okamoto epsilon={args.epsilon:g} delta=0.05 "
        f"({n:,} runs), stochastic, batch {args.batch:,}"
    )

    def job(backend: BackendOptions):
        opts = StatisticalOptions(
            epsilon=args.epsilon, simulation=SimulationOptions(seed=1, batch_size=args.batch), backend=backend
        )
        t = time.perf_counter()
        res = verify_statistical(target.model, target.property, target.policy, opts)
        return res, time.perf_counter() - t

    results, times, startup, overhead, ship = {}, {}, {}, {}, {}
    results["local"], times["local"] = job(BackendOptions())
    for cpus in (1, 2):
        t = time.perf_counter()
        backend = open_backend(BackendOptions(kind="ray", num_cpus=cpus))
        backend.map(check_unit, backend.share("warm-up"), [(0.5,)] * (2 * cpus))  # workers started
        startup[cpus] = time.perf_counter() - t
        name = f"ray, {cpus} CPU" + ("s" if cpus > 1 else "")
        results[name], times[name] = job(BackendOptions(kind="ray"))  # joins the runtime just started
        t = time.perf_counter()
        backend.share((target.model, target.policy))
        ship[cpus] = time.perf_counter() - t
        shared = backend.share("epsilon")
        t = time.perf_counter()
        backend.map(check_unit, shared, [(0.5,)] * args.tasks)
        overhead[cpus] = (time.perf_counter() - t) / args.tasks
        ray.shutdown()
    t = time.perf_counter()
    LOCAL.map(check_unit, "epsilon", [(0.5,)] * args.tasks)
    local_task = (time.perf_counter() - t) / args.tasks

    ref = results["local"]
    print(f"\n{'backend':<14}{'job (s)':>10}{'decisions/s':>14}{'estimate':>11}  identical to local")
    for name, res in results.items():
        same = all(
            getattr(res, f) == getattr(ref, f)
            for f in ("estimate", "interval", "runs", "successes", "undecided", "stalled", "decisions")
        )
        print(
            f"{name:<14}{times[name]:>10.2f}{res.decisions / times[name]:>14,.0f}{res.estimate:>11.6f}  "
            f"{'yes' if same else 'NO'}"
        )
    print(
        f"\nspeed-up from 1 to 2 workers: {times['ray, 1 CPU'] / times['ray, 2 CPUs']:.2f}x; "
        f"2 workers vs local: {times['local'] / times['ray, 2 CPUs']:.2f}x; "
        f"1 worker vs local: {times['local'] / times['ray, 1 CPU']:.2f}x"
    )
    print(f"Ray runtime start-up (once per process): {startup[1]:.1f} s (1 CPU), {startup[2]:.1f} s (2 CPUs)")
    print(f"shipping the environment and policy once (ray.put): {ship[1] * 1e3:.1f} ms / {ship[2] * 1e3:.1f} ms")
    print(
        f"overhead per task ({args.tasks} tiny tasks): {overhead[1] * 1e3:.2f} ms with 1 worker, "
        f"{overhead[2] * 1e3:.2f} ms with 2 workers (wall time / tasks); local: {local_task * 1e6:.1f} us"
    )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
