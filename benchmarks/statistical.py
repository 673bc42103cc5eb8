"""Speed of the statistical engine (prints figures and ratios measured in one run; not a unit test).

1. Simulation at the network's speed, on Racetrack Barto-small from the start line (deterministic mode,
   runs of ~10-26 decisions), for the shipped 2x64 DQN network and a random 2x1024 network with the same
   15 inputs and 9 Q-value outputs (the shipped network widened: its 64 units per layer plus random units
   whose outputs are not used, so runs are as long as with the shipped policy; a fully random network
   crashes within a step or two, and its lockstep batches would be nearly empty):
   * the bare network: onnxruntime on a preallocated float32 ``(B, 15)`` batch, rows/s, with the same
     session options as :class:`~rlverify.policies.OnnxPolicy` (one thread);
   * lockstep simulation with batch size ``B``: decisions/s, and its ratio to the bare network, with one
     thread (``SimulationOptions(threads=1)``) and with the default two (each batch cut in two halves
     advanced by their own threads, at most one network call at a time: the numpy work of one half runs
     while the network evaluates the other's rows; the network is still the one resource, as for the bare
     figure). Target: >= 0.9. Runs finish at different steps, so most network calls have fewer than ``B``
     rows; the bare network at the mean rows of those calls, and on exactly the same sequence of calls
     (the share of the simulation's time spent in the network), are printed too, for either path;
   * the policy wrapper against the network it wraps at ``B`` rows: ``OnnxPolicy.action_probabilities``
     and its fused ``choose`` (what the simulator calls) against the bare session; the numpy wrapper
     (``CallablePolicy``) against the numpy ``MLP`` it wraps. Target: overhead < 10 %.
   Each figure is the best of ``--repeats`` interleaved repetitions, by wall clock and by this process's
   CPU time (in brackets: less sensitive to other processes on the machine; the load average is printed;
   not given for the two-thread path, whose CPU time adds up both threads').
2. Lockstep against one network call per decision (targets: >= 1,000,000 decisions/s, >= 100x).
3. The full Barto-small heat map at epsilon = 0.01, delta = 0.05 (Okamoto: 18,445 runs per cell),
   timed; target <= 5 minutes.

Usage: python benchmarks/statistical.py [--skip-heatmap] [--skip-percall] [--batch 50000]
       [--batch-large 5000] [--repeats 5] [--policy FILE.onnx] [--out heatmap.png]
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from rlverify.benchmarks.racetrack import make_racetrack, policy_path
from rlverify.models.racetrack import ACTIONS, FEATURES
from rlverify.policies import MLP, CallablePolicy, OnnxPolicy, load_policy, mlp_from_onnx, save_mlp_onnx
from rlverify.statistical import SimulationOptions, StatisticalOptions, heatmap, plot_heatmap, simulate
from rlverify.statistical.properties import parse_path_property


def decisions_per_second(
    env,
    policy,
    *,
    runs: int,
    batch: int,
    max_steps: int = 200,
    threads: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, int, float, float]:
    """Lockstep decisions/s from the start line (by ``clock``; ``threads``: None for the default); also the
    decisions, the seconds and the mean rows per policy call."""
    prop = parse_path_property('P=? [!"crashed" U "goal"]', env.labels)
    starts = env.start_states()  # the start line: the DSMC query, runs of ~10-20 decisions
    opts = SimulationOptions(mode="deterministic", max_steps=max_steps, seed=1, batch_size=batch)
    opts = opts if threads is None else replace(opts, threads=threads)
    t = clock()
    res = simulate(env, policy, prop, np.arange(runs), starts=starts, options=opts)
    dt = clock() - t
    n = int(res.steps.sum())
    calls = sum(int(res.steps[b : b + batch].max()) for b in range(0, runs, batch))  # one call per step of a batch
    return n / dt, n, dt, n / max(calls, 1)


def seconds_per_call(
    fn: Callable[[], object], *, min_time: float = 0.3, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Mean seconds of ``fn()`` (by ``clock``) over at least ``min_time`` seconds (after one warm-up call)."""
    fn()
    k, t = 0, clock()
    while True:
        fn()
        k += 1
        dt = clock() - t
        if dt >= min_time:
            return dt / k


def call_sizes(env, policy, *, runs: int, batch: int, threads: int | None = None) -> list[int]:
    """Rows of each policy call of the simulation :func:`decisions_per_second` times (recorded in a separate run;
    with two threads, the calls of both, in the order they were made)."""
    sizes: list[int] = []
    choose = policy.choose

    def recording(states, u=None):
        sizes.append(len(states))
        return choose(states, u)

    policy.choose = recording  # on this instance only, for this run
    try:
        decisions_per_second(env, policy, runs=runs, batch=batch, threads=threads)
    finally:
        del policy.choose
    return sizes


def sample_observations(env, n: int) -> np.ndarray:
    """``(n, 15)`` float32 observations of random driving states (free cells, velocities in [-3, 3])."""
    rng = np.random.default_rng(0)
    cells = env.track.free_cells()
    states = env.start_states(cells[rng.integers(0, len(cells), n)])
    states[:, 2:4] = rng.integers(-3, 4, size=(n, 2))
    return env.observe(states, out=np.empty((n, len(FEATURES)), dtype=np.float32))


def widened(mlp: MLP, width: int, *, seed: int) -> MLP:
    """A ``2 x width`` network computing what the two-hidden-layer ``mlp`` computes: its units first, then
    He-initialised random units whose outgoing weights are 0. It drives like the shipped policy (runs of the
    same length, so lockstep batches shrink alike) at the cost of a dense ``2 x width`` network."""
    (w1, w2, w3), (b1, b2, b3) = mlp.weights, mlp.biases
    h1, h2 = w1.shape[0], w2.shape[0]
    r = MLP.random([w1.shape[1], width, width, w3.shape[0]], seed=seed)
    W1, W2, B1, B2 = r.weights[0].copy(), r.weights[1].copy(), r.biases[0].copy(), r.biases[1].copy()
    W1[:h1], B1[:h1] = w1, b1
    W2[:h2], B2[:h2] = 0.0, b2
    W2[:h2, :h1] = w2
    W3 = np.zeros((w3.shape[0], width))
    W3[:, :h2] = w3
    return MLP((W1, W2, W3), (B1, B2, b3.copy()))


def bare_session(path: str | Path):
    """The network alone: an onnxruntime session with OnnxPolicy's options (one thread), no argmax added."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return session, session.get_inputs()[0].name


def network_speed(env, label: str, path: str | Path, *, batch: int, runs: int, repeats: int) -> None:
    """Section 1 for the ONNX network at ``path`` (and its numpy MLP): bare vs lockstep (one and two threads) vs
    wrapper."""
    policy = OnnxPolicy(path)
    session, name = bare_session(path)
    net = mlp_from_onnx(path)
    numpy_policy = CallablePolicy(net, FEATURES, ACTIONS, output=policy.output, name=f"numpy {label}")
    x32 = sample_observations(env, batch)
    x64 = x32.astype(np.float64)
    threads = SimulationOptions().threads  # the default path
    paths = {1: "1 thread", threads: f"{threads} threads"}
    sizes = {k: call_sizes(env, policy, runs=runs, batch=batch, threads=k) for k in paths}

    def same_calls(k: int) -> Callable[[], None]:
        def run() -> None:
            for rows in sizes[k]:
                session.run(None, {name: x32[:rows]})

        return run

    best: dict[tuple[str, str], float] = {}
    clocks = {"wall": time.perf_counter, "cpu": time.process_time}

    def keep(cname: str, key: str, value: float, *, high: bool) -> None:
        old = best.get((cname, key), value)
        best[(cname, key)] = max(old, value) if high else min(old, value)

    for _ in range(repeats):  # interleaved, so a burst of load hits every figure alike
        for cname, clock in clocks.items():
            per_call = functools.partial(seconds_per_call, clock=clock)
            keep(cname, "bare", batch / per_call(lambda: session.run(None, {name: x32})), high=True)
            for k in paths:
                rate, n, _, _ = decisions_per_second(env, policy, runs=runs, batch=batch, threads=k, clock=clock)
                keep(cname, f"lockstep {k}", rate, high=True)
                mean = max(1, round(np.mean(sizes[k])))
                keep(
                    cname,
                    f"bare at mean {k}",
                    mean / per_call(functools.partial(session.run, None, {name: x32[:mean]})),
                    high=True,
                )
                keep(cname, f"bare same calls {k}", sum(sizes[k]) / per_call(same_calls(k)), high=True)
            keep(cname, "onnx network", per_call(lambda: session.run(None, {name: x32})), high=False)
            keep(cname, "onnx wrapper", per_call(lambda: policy.action_probabilities(x32)), high=False)
            keep(cname, "onnx choose", per_call(lambda: policy.choose(x32)), high=False)
            keep(cname, "numpy network", per_call(lambda: net(x64)), high=False)
            keep(cname, "numpy wrapper", per_call(lambda: numpy_policy.action_probabilities(x64)), high=False)
            keep(cname, "numpy choose", per_call(lambda: numpy_policy.choose(x64)), high=False)
    print(
        f"-- {label} network {net.sizes}, batch B = {batch:,}, {runs:,} runs ({n:,} decisions), best of {repeats}, "
        "wall clock [CPU time of this process]"
    )

    def both(key: str, fmt: str, k: int = 1) -> str:
        cpu = f"{best[('cpu', key)]:{fmt}}" if k == 1 else "n/a"
        return f"{best[('wall', key)]:{fmt}} [{cpu}]"

    def ratio(a: str, b: str, k: int = 1) -> str:
        cpu = f"{best[('cpu', a)] / best[('cpu', b)]:.2f}" if k == 1 else "n/a"
        return f"{best[('wall', a)] / best[('wall', b)]:.2f} [{cpu}]"

    print(f"   bare onnxruntime forward, B rows/call (one onnxruntime thread): {both('bare', ',.0f')} rows/s")
    for k in paths:
        how = (
            "one thread"
            if k == 1
            else (f"default: {k} threads, each batch cut in {k} parts, at most one network call at a time")
        )
        print(f"   lockstep simulation, batch B, {how}:")
        print(
            f"      {both(f'lockstep {k}', ',.0f', k)} decisions/s -> ratio to the bare forward at B rows "
            f"{ratio(f'lockstep {k}', 'bare', k)} (target >= 0.9)"
        )
        print(
            f"      bare forward at this path's mean rows per call ({np.mean(sizes[k]):,.0f}): "
            f"{both(f'bare at mean {k}', ',.0f')} rows/s -> ratio {ratio(f'lockstep {k}', f'bare at mean {k}', k)}"
        )
        print(
            f"      bare forward on exactly this path's {len(sizes[k])} calls ({sum(sizes[k]):,} rows): "
            f"{both(f'bare same calls {k}', ',.0f')} rows/s -> ratio {ratio(f'lockstep {k}', f'bare same calls {k}', k)} "
            "(with one thread: the share of the simulation's time spent in the network)"
        )
    for kind in ("onnx", "numpy"):
        for what in ("wrapper", "choose"):
            call = "action_probabilities" if what == "wrapper" else "choose (fused)"
            over = [100 * (best[(c, f"{kind} {what}")] / best[(c, f"{kind} network")] - 1) for c in clocks]
            print(
                f"   {kind:5s} {call:21s} vs bare network : {best[('wall', f'{kind} {what}')] * 1e3:8.2f} ms vs "
                f"{best[('wall', f'{kind} network')] * 1e3:8.2f} ms per {batch:,} rows -> overhead {over[0]:+6.1f} % "
                f"[{over[1]:+6.1f} %] (target < 10 %)"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-heatmap", action="store_true")
    ap.add_argument("--skip-percall", action="store_true", help="skip the one-call-per-decision comparison")
    ap.add_argument("--skip-speed", action="store_true", help="skip section 1 (network speed)")
    ap.add_argument("--batch", type=int, default=50_000, help="batch size B for the 2x64 network")
    ap.add_argument("--batch-large", type=int, default=5_000, help="batch size B for the 2x1024 network")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--policy", default=None, help="ONNX policy for the heat map (default: the shipped DQN policy)")
    ap.add_argument("--out", default="barto_small_heatmap.png")
    ap.add_argument("--max-steps", type=int, default=10_000, help="maximal run length of the heat map runs")
    args = ap.parse_args()
    env = make_racetrack("racetrack-barto-small-v1")
    spec = args.policy or str(policy_path("racetrack-barto-small-v1"))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    if not args.skip_speed:
        print("== 1. simulation at the network's speed: Barto-small, deterministic mode, from the start line")
        network_speed(env, "shipped 2x64 DQN", spec, batch=args.batch, runs=4 * args.batch, repeats=args.repeats)
        with tempfile.TemporaryDirectory() as tmp:
            large = save_mlp_onnx(
                Path(tmp) / "widened_2x1024.onnx",
                widened(mlp_from_onnx(spec), 1024, seed=0),
                features=FEATURES,
                actions=ACTIONS,
                output="q-values",
            )
            network_speed(
                env,
                "2x1024 (shipped + random units)",
                large,
                batch=args.batch_large,
                runs=2 * args.batch_large,
                repeats=max(1, args.repeats // 2),
            )
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.skip_percall:
        onnx_policy = load_policy(spec)
        net = mlp_from_onnx(spec)  # the same 2x64 network, evaluated in numpy
        numpy_policy = CallablePolicy(net, FEATURES, ACTIONS, output="q-values", name="numpy 2x64")
        print("== 2. decisions per second, Barto-small, shipped 2x64 DQN network, deterministic mode, from the start line")
        for name, pol in (("onnxruntime", onnx_policy), ("numpy", numpy_policy)):
            lock, n1, t1, _ = decisions_per_second(env, pol, runs=200_000, batch=50_000)
            single, n2, t2, _ = decisions_per_second(env, pol, runs=100, batch=1)
            print(f"{name:12s} lockstep (50,000 runs/batch): {lock:>12,.0f} decisions/s ({n1:,} in {t1:.2f} s)")
            print(f"{name:12s} one call per decision       : {single:>12,.0f} decisions/s ({n2:,} in {t2:.2f} s)")
            print(f"{name:12s} speed-up                    : {lock / single:>12,.0f}x")
            # the network alone, one state per call (no simulator around it): the floor of any per-call tool
            obs = env.observe(env.start_states(env.track.free_cells()))
            t = time.perf_counter()
            for i in range(2000):
                pol.action_probabilities(obs[i % len(obs) : i % len(obs) + 1])
            calls = 2000 / (time.perf_counter() - t)
            print(f"{name:12s} network alone, 1 state/call: {calls:>12,.0f} calls/s -> lockstep is {lock / calls:,.0f}x")
    if args.skip_heatmap:
        return
    onnx_policy = load_policy(spec)
    print("== 3. full Barto-small heat map, epsilon=0.01, delta=0.05 (Okamoto, 18,445 runs per cell), shipped DQN policy")
    t = time.perf_counter()
    res = heatmap(
        env,
        onnx_policy,
        StatisticalOptions(
            epsilon=0.01,
            delta=0.05,
            simulation=SimulationOptions(mode="deterministic", max_steps=args.max_steps, seed=0, batch_size=100_000),
        ),
        optimal=True,
        benchmark="racetrack-barto-small-v1",
    )
    dt = time.perf_counter() - t
    plot_heatmap(res, args.out)
    print(
        f"{len(res.cells)} cells x {int(res.runs[0]):,} runs = {int(res.runs.sum()):,} runs, "
        f"{res.decisions:,} decisions in {dt:.1f} s ({res.timings['decisions_per_second']:,.0f} decisions/s); "
        f"Storm Pmax {res.timings.get('optimal', 0):.2f} s"
    )
    print(
        f"mean goal {res.goal.mean():.4f}, mean crash {res.crash.mean():.4f}, mean optimal {res.optimal.mean():.4f}, "
        f"max gap {res.gap.max():.4f}; undecided {int(res.undecided.sum())}, stalled {int(res.stalled.sum())}"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
