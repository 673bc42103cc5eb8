"""Rare-event estimation: fixed-effort importance splitting against crude Monte Carlo (prints figures measured in one run).

Models with exact values between 1e-6 and 1e-9:

1. ``birth-death``: a birth-death chain on 0..25 started in 1 (an MDP with actions ``slow`` up 1/5 and ``fast`` up
   2/5; the policy picks each with probability 1/2: up 3/10). ``P=? [F "top"]`` (reach 25 before 0) has the
   gambler's-ruin closed form (r - 1) / (r^25 - 1), r = 7/3: 8.4e-10 (computed with fractions; the exact engine's
   value is printed beside it). Importance ``i``.
2. ``avoid-1``: Avoid on a 12x12 grid with one obstacle, slickness 0.1, ``P=? [F<=30 COLLISION=true]`` under a
   fleeing policy (logits 3 x the Manhattan distance to the obstacle after the move); exact value from the exact
   engine (Storm on the induced chain): 1.4e-6. Importance ``-abs(x-obstacle1_x)-abs(y-obstacle1_y)``.

For each, fixed-effort splitting and RESTART (levels from a pilot; estimate, t-interval, relative error, decisions);
crude MC with the same number of decisions (estimate, Clopper-Pearson interval, relative error); and the crude-MC
decisions the same relative error would need, ``(1 - p) / (p re^2) x mean run length`` with the exact ``p``, and
the ratio to the splitting's decisions. Then cases where splitting does not help (see docs/rare-events.md): a misleading
importance function (``i % 4`` on the birth-death chain); a failure that is one improbable jump (probability 1e-4
per step for 20 steps, 2e-3 in all, not rare, so that crude MC sees it; importance ``c``); and other importance
functions on the Avoid variant, all at the same effort.

Timings are wall clock on a shared machine. Usage: python benchmarks/rare.py [--effort 1000] [--repetitions 20]
[--seed 0]
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from rlverify import verify_exact
from rlverify.models import load_model
from rlverify.policies import CallablePolicy
from rlverify.statistical import SimulationOptions, clopper_pearson, simulate
from rlverify.statistical.engine import SATISFIED
from rlverify.statistical.splitting import SplittingOptions, verify_splitting
from rlverify.statistical.verify import prepare

BIRTH_DEATH = """mdp
const int N = {n};
module bd
  i : [0..N] init 1;
  [slow] i>0 & i<N -> 0.2:(i'=i+1) + 0.8:(i'=i-1);
  [fast] i>0 & i<N -> 0.4:(i'=i+1) + 0.6:(i'=i-1);
  [slow] i=0 | i=N -> true;
endmodule
label "top" = i=N;
"""
ONE_JUMP = """mdp
// every step fails with probability 1e-4, for 20 steps: the failure is one improbable jump from any state
module m
  c : [0..20] init 0;
  f : bool init false;
  [go] c<20 & !f -> 1e-4:(f'=true) + (1-1e-4):(c'=c+1);
  [go] c=20 | f -> true;
endmodule
label "fail" = f;
"""
MOVES = np.array([(0, 1), (1, 0), (0, -1), (-1, 0)])


def birth_death(tmp: Path, n: int = 25):
    path = tmp / "birth_death.prism"
    path.write_text(BIRTH_DEATH.format(n=n))
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["i"], ["slow", "fast"], name="1/2-1/2")
    r = Fraction(7, 3)
    return load_model(path), 'P=? [F "top"]', policy, float((r - 1) / (r**n - 1))


def avoid_one(tmp: Path, size: int = 11, slickness: float = 0.1, horizon: int = 30):
    from rlverify.benchmarks.avoid import prism_source

    path = tmp / "avoid1.prism"
    path.write_text(prism_source(size, size, slickness, obstacles=1))

    def flee(obs):
        x, y, ox, oy = obs[:, 0], obs[:, 1], obs[:, 2], obs[:, 3]
        nx = np.clip(x[:, None] + MOVES[None, :, 0], 0, size)
        ny = np.clip(y[:, None] + MOVES[None, :, 1], 0, size)
        return 3.0 * (np.abs(nx - ox[:, None]) + np.abs(ny - oy[:, None]))

    policy = CallablePolicy(
        flee, ["x", "y", "obstacle1_x", "obstacle1_y"], ["north", "east", "south", "west"], output="logits", name="flee"
    )
    return load_model(path), f"P=? [F<={horizon} COLLISION=true]", policy, None


def one_jump(tmp: Path):
    path = tmp / "one_jump.prism"
    path.write_text(ONE_JUMP)
    policy = CallablePolicy(lambda x: np.ones((len(x), 1)), ["c"], ["go"], name="go")
    return load_model(path), 'P=? [F "fail"]', policy, float(1 - (1 - Fraction(1, 10**4)) ** 20)


def crude(model, prop_text, policy, decisions: int, seed: int) -> dict:
    """Crude MC with (about) ``decisions`` decisions: runs in rounds until the budget is spent."""
    env, prop, _ = prepare(model, prop_text)
    opts = SimulationOptions(seed=seed + 10_000, batch_size=50_000)
    t0 = time.perf_counter()
    used = runs = hits = 0
    while used < decisions:
        mean = used / runs if runs else 3.0
        n = max(1000, min(1_000_000, int((decisions - used) / max(mean, 1.0))))
        res = simulate(env, policy, prop, np.arange(runs, runs + n), options=opts)
        steps = np.cumsum(res.steps)
        take = int(np.searchsorted(steps, decisions - used, side="right")) or n  # stop at the budget
        take = min(take + 1, n)
        used += int(steps[take - 1])
        hits += int((res.outcome[:take] == SATISFIED).sum())
        runs += take
    p = hits / runs
    lo, hi = clopper_pearson(hits, runs, 0.05)
    rel = math.sqrt(p * (1 - p) / runs) / p if hits else math.inf
    return {
        "estimate": p,
        "interval": (lo, hi),
        "relative_error": rel,
        "runs": runs,
        "decisions": used,
        "hits": hits,
        "mean_length": used / runs,
        "seconds": time.perf_counter() - t0,
    }


def row(name: str, model, prop_text: str, policy, closed: float | None, importance: str, args) -> None:
    t0 = time.perf_counter()
    exact = verify_exact(model, prop_text, policy).value
    t_exact = time.perf_counter() - t0
    p = closed if closed is not None else exact
    print(f"\n== {name}: {prop_text}")
    if closed is not None:
        print(f"exact value            {closed:.4g} (closed form); exact engine {exact:.4g} ({t_exact:.1f} s)")
    else:
        print(f"exact value            {exact:.4g} (exact engine, {t_exact:.1f} s)")
    for method in ("splitting", "restart"):
        res = verify_splitting(
            model,
            prop_text,
            policy,
            SplittingOptions(
                method=method,
                importance=importance,
                effort=args.effort,
                repetitions=args.repetitions,
                simulation=SimulationOptions(seed=args.seed),
            ),
        )
        total = res.decisions + res.pilot_decisions
        mc = crude(model, prop_text, policy, total, args.seed)
        label = f"{res.method:22}"
        if not math.isfinite(res.relative_error):
            print(
                f"{label} estimated 0 in every repetition ({total:,} decisions); crude MC with as many: "
                f"{mc['estimate']:.4g} ({mc['hits']} hits)"
            )
            continue
        need_runs = (1 - p) / (p * res.relative_error**2)
        need = need_runs * mc["mean_length"]
        covers = res.interval[0] <= p <= res.interval[1]
        print(
            f"{label} {res.estimate:.4g}  95% t-interval [{res.interval[0]:.4g}, {res.interval[1]:.4g}] "
            f"({'covers' if covers else 'MISSES'} the exact value)  relative error {res.relative_error:.3f}"
        )
        how = f"{res.effort} runs per level" if res.splits is None else f"{res.effort} main trials, splits {list(res.splits)}"
        print(
            f"  importance {importance!r}, {len(res.levels)} levels from the pilot, {res.repetitions} x {how}; "
            f"decisions {res.decisions:,} + pilot {res.pilot_decisions:,} = {total:,} ({res.timings['total']:.1f} s)"
        )
        mc_rel = "inf (no hit)" if not math.isfinite(mc["relative_error"]) else f"{mc['relative_error']:.3f}"
        print(
            f"  crude MC, same budget {mc['estimate']:.4g}  95% Clopper-Pearson [{mc['interval'][0]:.4g}, "
            f"{mc['interval'][1]:.4g}]  relative error {mc_rel}  ({mc['runs']:,} runs, {mc['hits']} hits, "
            f"{mc['decisions']:,} decisions, {mc['seconds']:.1f} s)"
        )
        print(
            f"  crude MC for relative error {res.relative_error:.3f}: (1-p)/(p re^2) = {need_runs:.3g} runs x "
            f"{mc['mean_length']:.2f} decisions = {need:.3g} decisions; ratio to {res.method} "
            f"{need / total:,.{2 if need < 10 * total else 0}f}x"
        )


def no_help(name: str, model, prop_text: str, policy, p: float, importances: list[str], args) -> None:
    print(f"\n== when splitting does not help: {name}, same effort ({args.repetitions} x {args.effort})")
    for imp in importances:
        res = verify_splitting(
            model,
            prop_text,
            policy,
            SplittingOptions(
                importance=imp, effort=args.effort, repetitions=args.repetitions, simulation=SimulationOptions(seed=args.seed)
            ),
        )
        total = res.decisions + res.pilot_decisions
        rel = f"{res.relative_error:.3f}" if math.isfinite(res.relative_error) else "inf"
        print(
            f"  importance {imp!r:42} estimate {res.estimate:.4g} [{res.interval[0]:.3g}, {res.interval[1]:.3g}] "
            f"relative error {rel}, {len(res.levels)} levels, zero repetitions {res.zero_repetitions}, "
            f"decisions {total:,}, work-normalised variance (re^2 x decisions / 1e6) "
            f"{res.relative_error**2 * total / 1e6 if math.isfinite(res.relative_error) else math.inf:.3g}"
        )
    print(f"  (exact {p:.4g})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--effort", type=int, default=1000)
    ap.add_argument("--repetitions", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.getLogger("rlverify").setLevel(logging.ERROR)  # zero repetitions etc. are printed in the rows
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (timings are wall clock under that load)")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        bd = birth_death(tmp)
        row("birth-death N=25", *bd, "i", args)
        av = avoid_one(tmp)
        row("avoid-1 12x12", *av, "-abs(x-obstacle1_x)-abs(y-obstacle1_y)", args)
        no_help("birth-death N=25", bd[0], bd[1], bd[2], bd[3], ["i", "i % 4"], args)
        row("one improbable jump (no intermediate level exists)", *one_jump(tmp), "c", args)
        av_exact = verify_exact(av[0], av[1], av[2]).value
        no_help(
            "avoid-1 12x12",
            av[0],
            av[1],
            av[2],
            av_exact,
            ["-abs(x-obstacle1_x)-abs(y-obstacle1_y)", "auto", "-max(abs(x-obstacle1_x), abs(y-obstacle1_y))"],
            args,
        )


if __name__ == "__main__":
    main()
