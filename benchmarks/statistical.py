"""Speed of the statistical engine (prints figures; not a unit test).

1. Policy decisions per second on Racetrack Barto-small with a 2x64 network: lockstep (one batched
   network call per step for all runs) vs one network call per decision, in the same run.
   Targets: >= 1,000,000 decisions/s and >= 100x the per-call baseline.
2. The full Barto-small heat map at epsilon = 0.01, delta = 0.05 (Okamoto: 18,445 runs per cell),
   timed; target <= 5 minutes.

Usage: python benchmarks/statistical.py [--skip-heatmap] [--policy FILE.onnx] [--out heatmap.png]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rlverify.benchmarks.racetrack import make_racetrack, policy_path
from rlverify.models.racetrack import ACTIONS, FEATURES
from rlverify.policies import CallablePolicy, load_policy, mlp_from_onnx
from rlverify.statistical import SimulationOptions, StatisticalOptions, heatmap, plot_heatmap, simulate
from rlverify.statistical.properties import parse_path_property


def decisions_per_second(env, policy, *, runs: int, batch: int, max_steps: int = 200) -> tuple[float, int, float]:
    prop = parse_path_property('P=? [!"crashed" U "goal"]', env.labels)
    starts = env.start_states()  # the start line: the DSMC query, runs of ~10-20 decisions
    t = time.perf_counter()
    res = simulate(env, policy, prop, np.arange(runs), starts=starts,
                   options=SimulationOptions(mode="deterministic", max_steps=max_steps, seed=1, batch_size=batch))
    dt = time.perf_counter() - t
    n = int(res.steps.sum())
    return n / dt, n, dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-heatmap", action="store_true")
    ap.add_argument("--policy", default=None, help="ONNX policy for the heat map (default: the shipped DQN policy)")
    ap.add_argument("--out", default="barto_small_heatmap.png")
    ap.add_argument("--max-steps", type=int, default=10_000, help="maximal run length of the heat map runs")
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args()
    env = make_racetrack("racetrack-barto-small-v1")
    spec = args.policy or str(policy_path("racetrack-barto-small-v1"))
    onnx_policy = load_policy(spec)
    net = mlp_from_onnx(spec)  # the same 2x64 network, evaluated in numpy
    numpy_policy = CallablePolicy(net, FEATURES, ACTIONS, output="q-values", name="numpy 2x64")
    print("== decisions per second, Barto-small, shipped 2x64 DQN network, deterministic mode, from the start line")
    for name, pol in (() if args.skip_speed else (("onnxruntime", onnx_policy), ("numpy", numpy_policy))):
        lock, n1, t1 = decisions_per_second(env, pol, runs=200_000, batch=50_000)
        single, n2, t2 = decisions_per_second(env, pol, runs=100, batch=1)
        print(f"{name:12s} lockstep (50,000 runs/batch): {lock:>12,.0f} decisions/s ({n1:,} in {t1:.2f} s)")
        print(f"{name:12s} one call per decision       : {single:>12,.0f} decisions/s ({n2:,} in {t2:.2f} s)")
        print(f"{name:12s} speed-up                    : {lock / single:>12,.0f}x")
        # the network alone, one state per call (no simulator around it): the floor of any per-call tool
        obs = env.observe(env.start_states(env.track.free_cells()))
        t = time.perf_counter()
        for i in range(2000):
            pol.action_probabilities(obs[i % len(obs): i % len(obs) + 1])
        calls = 2000 / (time.perf_counter() - t)
        print(f"{name:12s} network alone, 1 state/call: {calls:>12,.0f} calls/s -> lockstep is {lock / calls:,.0f}x")
    if args.skip_heatmap:
        return
    print("== full Barto-small heat map, epsilon=0.01, delta=0.05 (Okamoto, 18,445 runs per cell), shipped DQN policy")
    t = time.perf_counter()
    res = heatmap(env, onnx_policy, StatisticalOptions(epsilon=0.01, delta=0.05, simulation=SimulationOptions(
        mode="deterministic", max_steps=args.max_steps, seed=0, batch_size=100_000)), optimal=True,
        benchmark="racetrack-barto-small-v1")
    dt = time.perf_counter() - t
    plot_heatmap(res, args.out)
    print(f"{len(res.cells)} cells x {int(res.runs[0]):,} runs = {int(res.runs.sum()):,} runs, "
          f"{res.decisions:,} decisions in {dt:.1f} s ({res.timings['decisions_per_second']:,.0f} decisions/s); "
          f"Storm Pmax {res.timings.get('optimal', 0):.2f} s")
    print(f"mean goal {res.goal.mean():.4f}, mean crash {res.crash.mean():.4f}, mean optimal {res.optimal.mean():.4f}, "
          f"max gap {res.gap.max():.4f}; undecided {int(res.undecided.sum())}, stalled {int(res.stalled.sum())}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
