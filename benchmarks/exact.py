"""Speed of the exact engine: time breakdown, Storm's monolithic build+check, per-state baseline; files we did not write.

Prints, for Avoid 4x4 (the shipped PPO policy, 2x64; stochastic and deterministic) and Crazy
Climber (the shipped PPO policy, 2x1024): rlverify's phases, Storm's own monolithic build+check of
the same model in the same run, and a per-state baseline in which Storm's builder calls the network
(onnxruntime, batch of one) once per (state, command), as prior tools do. Ratios: ours / Storm
monolithic, baseline / ours, and the policy phase alone (the baseline's network time / ours).
For Avoid 4x4 stochastic it also prints Storm's in-process floor, measured in the same run: Storm
building the property-directed MDP plus Storm checking a DTMC of the chain's size (the chain
itself), and the ratio rlverify / floor (target <= 1.0).

    .venv/bin/python benchmarks/exact.py [--quick] [--json out.json]

``--files`` measures instead, on files nobody here wrote (the paper's three reference PRISM files in
``../shared/benchmarks/prism-reference``, QVBS models: tests/data/qvbs and the QVBS-family models stormpy ships),
each in a fresh process per source tree: the chain's build with ``merged`` and with ``full`` side by side (the
faster of each's repetitions), what ``auto`` picks and its ratio to the faster, rlverify's own ``total``
(``verify_exact``, auto) and the whole process (``rlverify verify ... --json`` in a subprocess, wall time), each
against Storm's in-process parse + build + check of the same property (:func:`storm_monolithic`). ``--before SRC`` runs
the same measurements with another source tree (e.g. a checkout of main: ``/work/main/src``) in the same run, side
by side, so that ratios compare like with like on a shared machine.

    .venv/bin/python benchmarks/exact.py --files [--before /work/main/src] [--reps 3] [--only avoid,csma]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from entry import ENTRY, source_tree  # benchmarks/entry.py (this script's folder is on the path)

from rlverify.benchmarks import make
from rlverify.exact import ExactOptions, verify_exact
from rlverify.models import SymbolicModel, build_explicit, parse_property
from rlverify.policies import OnnxPolicy, Policy


def storm_monolithic(model: SymbolicModel, prop_text: str) -> float:
    """Seconds of Storm's in-process parse of the model file, build and check of ``prop_text`` as Pmax (the sound
    environment). The parse is timed because rlverify's ``total`` includes its own (``timings["parse"]``)."""
    import stormpy

    t = time.perf_counter()
    if model.kind == "prism":
        stormpy.parse_prism_program(str(model.path), prism_compatibility=True)
    else:
        stormpy.parse_jani_model(str(model.path))
    prop = parse_property(model, prop_text.replace("P=?", "Pmax=?", 1))
    m = stormpy.build_model(model.program, [prop.storm])
    stormpy.model_checking(m, prop.storm, environment=stormpy.environments.sound())
    return time.perf_counter() - t


def storm_floor(model: SymbolicModel, prop_text: str, policy: OnnxPolicy, mode: str) -> dict:
    """Storm's in-process floor for the same verification: Storm building the property-directed MDP
    (its default builder options) plus Storm checking a DTMC of the chain's size (the induced chain
    itself, handed to Storm untimed), with the sound environment rlverify uses by default."""
    import stormpy

    from rlverify.exact import induce
    from rlverify.models import to_storm
    from rlverify.models.numerics import environment

    prop = parse_property(model, prop_text)
    t = time.perf_counter()
    storm_mdp = stormpy.build_model(model.program, [prop.storm])
    build = time.perf_counter() - t
    mdp_transitions = storm_mdp.nr_transitions
    del storm_mdp
    chain, _ = induce(build_explicit(model, [prop])[0], policy, mode=mode)  # untimed: rlverify's chain
    storm_chain = to_storm(chain)
    formula = stormpy.parse_properties(prop.text, model.program)[0].get_raw_formula()
    t = time.perf_counter()
    result = stormpy.model_checking(storm_chain, formula, environment=environment("sound", 1e-6))
    check = time.perf_counter() - t
    value = result.get_value_vector()[storm_chain.initial_states[0]]
    t = time.perf_counter()  # Storm's default environment (no soundness guarantee) for comparison
    stormpy.model_checking(storm_chain, formula)
    check_default = time.perf_counter() - t
    return {
        "build_s": build,
        "check_s": check,
        "total_s": build + check,
        "value": float(value),
        "check_default_s": check_default,
        "total_default_s": build + check_default,
        "mdp_transitions": mdp_transitions,
        "chain_transitions": chain.num_transitions,
    }


def per_state_baseline(model: SymbolicModel, prop_text: str, policy: OnnxPolicy, limit: int | None) -> tuple[float, int]:
    """Storm's builder with a mask that calls the network for every (state, command), no cache."""
    import stormpy.developer as dev

    manager = model.program.expression_manager
    variables = [manager.get_variable(f) for f in policy.features]
    is_bool = [f in model.boolean_variables for f in policy.features]
    col = {a: i for i, a in enumerate(policy.actions)}
    calls = [0]

    def allowed(valuation, action_index):
        calls[0] += 1
        x = np.asarray(
            [
                [
                    int(valuation.get_boolean_value(v)) if b else valuation.get_integer_value(v)
                    for v, b in zip(variables, is_bool, strict=True)
                ]
            ],
            dtype=np.float64,
        )
        p = policy.action_probabilities(x)[0]
        c = col.get(model.program.get_action_name(action_index))
        return c is not None and p[c] > 0

    prop = parse_property(model, prop_text)
    t = time.perf_counter()
    build_explicit(model, [prop], mask=dev.StateValuationFunctionMask[float](allowed), max_states=limit)
    return time.perf_counter() - t, calls[0]


def masked_build_without_network(model: SymbolicModel, prop_text: str, policy: OnnxPolicy) -> float:
    """The baseline's builder with the same valuation read-out but no network call (its non-network cost).

    The mask keeps every choice, so it explores at least the baseline's states: an upper bound on the
    baseline's builder cost, hence a lower bound on its network cost.
    """
    import stormpy.developer as dev

    manager = model.program.expression_manager
    variables = [manager.get_variable(f) for f in policy.features]
    is_bool = [f in model.boolean_variables for f in policy.features]

    def allowed(valuation, action_index):
        np.asarray(
            [
                [
                    int(valuation.get_boolean_value(v)) if b else valuation.get_integer_value(v)
                    for v, b in zip(variables, is_bool, strict=True)
                ]
            ],
            dtype=np.float64,
        )
        model.program.get_action_name(action_index)
        return True

    prop = parse_property(model, prop_text)
    t = time.perf_counter()
    build_explicit(model, [prop], mask=dev.StateValuationFunctionMask[float](allowed))
    return time.perf_counter() - t


def run_case(
    name: str,
    model: SymbolicModel,
    prop: str,
    policy: OnnxPolicy,
    mode: str,
    baseline: bool,
    limit: int | None,
    floor: bool = False,
) -> dict:
    storm = storm_monolithic(model, prop)
    res = verify_exact(model, parse_property(model, prop, fixed_policy=True), policy, ExactOptions(mode=mode))
    row = {
        "case": name,
        "mode": mode,
        "states": res.states,
        "transitions": res.transitions,
        "value": res.value,
        "timings": res.timings,
        "storm_monolithic_s": storm,
        "ratio_vs_storm": res.timings["total"] / storm,
    }
    if floor:
        f = storm_floor(model, prop, policy, mode)
        row.update(floor=f, ratio_vs_floor=res.timings["total"] / f["total_s"])
    if baseline:
        try:
            secs, calls = per_state_baseline(model, prop, policy, limit)
            row.update(baseline_s=secs, baseline_calls=calls, speedup_vs_baseline=secs / res.timings["total"])
            network = max(secs - masked_build_without_network(model, prop, policy), 0.0)
            # the policy phase alone: the baseline's network calls vs our batched evaluation
            row.update(baseline_network_s=network, policy_speedup=network / max(res.timings["policy"], 1e-9))
        except Exception as exc:  # report, do not hide, a failed baseline
            row.update(baseline_note=str(exc).splitlines()[0])
    return row


# ---------------------------------------------------------------------------------------------
# files we did not write (--files)

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RLVERIFY_SHARED") or REPO.parent / "shared")
AVOID_ONNX = REPO / "src" / "rlverify" / "benchmarks" / "data" / "policies" / "avoid_4x4_ppo.onnx"


@dataclass(frozen=True)
class FileCase:
    """A model file nobody here wrote, its constants, a property and the policy (``uniform`` or an ONNX file)."""

    id: str
    where: str  # reference | qvbs | stormpy
    file: str
    constants: str
    prop: str
    policy: str = "uniform"
    unavailable: str = "renormalize"  # the uniform policy over every action name: renormalised where absent

    def path(self) -> Path:
        if self.where == "reference":
            return SHARED / "benchmarks" / "prism-reference" / self.file
        if self.where == "qvbs":
            return REPO / "tests" / "data" / "qvbs" / self.file
        from stormpy.examples import files

        return Path(files.prism_mdp_slipgrid).parent / self.file


AVOID_4 = "xMax=4,yMax=4,slickness=0.1"
FILE_CASES = [
    FileCase("avoid", "reference", "avoid.prism", AVOID_4, "P=? [F<=100 COLLISION=true]", unavailable="stall"),
    FileCase("avoid-net", "reference", "avoid.prism", AVOID_4, "P=? [F<=100 COLLISION=true]", str(AVOID_ONNX), "stall"),
    FileCase("freeway", "reference", "freeway.prism", "", 'P=? [F "goal"]', unavailable="stall"),
    FileCase("crazy-climber", "reference", "crazy_climber.prism", "", "P=? [F COLLISION=true]", unavailable="stall"),
    FileCase("consensus", "qvbs", "consensus/consensus.2.prism", "K=128", 'P=? [F "finished" & "all_coins_equal_1"]'),
    FileCase("csma", "qvbs", "csma/csma.3-2.prism", "", 'P=? [ !"collision_max_backoff" U "all_delivered" ]'),
    FileCase("ij", "qvbs", "ij/ij.3.prism", "", "P=? [ F (q1 + q2 + q3) = 1 ]"),
    FileCase("firewire-3", "stormpy", "firewire.nm", "delay=3,fast=0.5", 'P=? [F "elected"]'),
    FileCase("firewire-36", "stormpy", "firewire.nm", "delay=36,fast=0.5", 'P=? [F "elected"]'),
    FileCase("leader-4", "stormpy", "leader4.nm", "", 'P=? [F "elected"]'),
]


def _case_policy(case: FileCase, model: SymbolicModel) -> tuple[Policy, list[str], list[str]]:
    """The case's policy, its features and its actions (uniform: over every name ``rlverify inspect`` lists)."""
    from rlverify.models.summary import summarize
    from rlverify.policies import CallablePolicy

    if case.policy != "uniform":
        network = OnnxPolicy(case.policy)
        return network, list(network.features), list(network.actions)
    actions = list(summarize(model)[0].actions)
    A = len(actions)
    policy = CallablePolicy(lambda x: np.full((len(x), A), 1.0 / A), list(model.variables), actions, name="uniform")
    return policy, list(model.variables), actions


def _forget_compiled() -> None:
    """Drop the compiled-program cache (where the source tree has one): each repetition compiles, as a process does."""
    try:
        import rlverify.models.program as program
    except ImportError:
        return
    getattr(program, "_COMPILED", {}).clear()


def file_worker(case_id: str, reps: int) -> dict:
    """The in-process measurements of one case (run in a fresh process with the source tree on PYTHONPATH)."""
    from rlverify.exact.chain import policy_chain
    from rlverify.models import load_model

    case = next(c for c in FILE_CASES if c.id == case_id)
    model = load_model(case.path(), case.constants or None)
    policy, _, _ = _case_policy(case, model)
    prop = parse_property(model, case.prop)
    best: dict[str, float] = {}
    cpu: dict[str, float] = {}  # the least CPU seconds of the process over the repetitions (load inflates wall time)
    picks: dict[str, str] = {}
    paired: list[float] = []  # total / storm of each repetition (measured one after the other: the same machine speed)
    builds: list[dict[str, float]] = []  # each repetition's build seconds by strategy
    first = float("inf")
    for strategy in ("merged", "full"):  # untimed: the process's first build of each kind loads what it needs
        t = time.perf_counter()
        policy_chain(model, prop, policy, ExactOptions(strategy=strategy, unavailable=case.unavailable))
        first = min(first, time.perf_counter() - t)
    # builds of a few milliseconds vary by more than the 10 % auto is held to: repeated until ~0.5 s (at most 25 times)
    for rep in range(max(reps, min(25, math.ceil(0.5 / max(first, 1e-3))))):
        strategies = ("merged", "full", "auto")
        this_rep: dict[str, float] = {}
        for strategy in strategies[rep % 3 :] + strategies[: rep % 3]:  # each first in turn (what ran before matters)
            _forget_compiled()
            t, c = time.perf_counter(), time.process_time()
            chain = policy_chain(model, prop, policy, ExactOptions(strategy=strategy, unavailable=case.unavailable))
            c = time.process_time() - c
            cpu[strategy] = min(cpu.get(strategy, float("inf")), c)
            best[strategy] = min(best.get(strategy, float("inf")), time.perf_counter() - t)
            this_rep[strategy] = time.perf_counter() - t
            picks[strategy] = chain.strategy
            states, transitions = chain.chain.num_states, chain.chain.num_transitions
        _forget_compiled()
        c = time.process_time()
        r = verify_exact(model, prop, policy, ExactOptions(unavailable=case.unavailable))
        cpu["total"] = min(cpu.get("total", float("inf")), time.process_time() - c)
        best["total"] = min(best.get("total", float("inf")), r.timings["total"])
        c = time.process_time()
        storm_s = storm_monolithic(model, case.prop)
        best["storm"] = min(best.get("storm", float("inf")), storm_s)
        cpu["storm"] = min(cpu.get("storm", float("inf")), time.process_time() - c)
        paired.append(r.timings["total"] / storm_s)
        builds.append(this_rep)
    return {
        "case": case.id,
        "states": states,
        "transitions": transitions,
        "value": r.value,
        "auto": picks["auto"],
        "merged_s": best["merged"],
        "full_s": best["full"],
        "auto_s": best["auto"],
        "total_s": best["total"],
        "storm_s": best["storm"],
        "paired": statistics.median(paired),
        "auto_paired": statistics.median(b["auto"] / min(b["merged"], b["full"]) for b in builds),
        "cpu": cpu,
    }


def _cli(case: FileCase, src: str, reps: int, policy_file: str) -> tuple[float, float, object]:
    """``rlverify verify`` on the case in a subprocess: (best wall time, its own total, value)."""
    command = [sys.executable, "-c", ENTRY, "verify", str(case.path()), "-p", case.prop]
    command += ["--policy", policy_file, "--unavailable", case.unavailable, "--json"]
    if case.constants:
        command += ["-c", case.constants]
    env = {**os.environ, "PYTHONPATH": src}
    best, total, value = float("inf"), float("nan"), None
    for _ in range(reps):
        t = time.perf_counter()
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, check=False)
        wall = time.perf_counter() - t
        if out.returncode != 0:
            raise RuntimeError(f"{case.id}: rlverify verify exited {out.returncode}: {out.stderr.strip()[-300:]}")
        data = json.loads(out.stdout[out.stdout.index("{") :])
        data = data.get("result", data)  # the envelope's result (a tree before it: the result itself)
        if wall < best:
            best, total, value = wall, data["timings"]["total"], data["value"]
    return best, total, value


def _policy_file(case: FileCase, directory: Path) -> str:
    """A policy argument for the CLI: the ONNX file, or a module written here holding the uniform policy."""
    if case.policy != "uniform":
        return case.policy
    from rlverify.models import load_model

    _, features, actions = _case_policy(case, load_model(case.path(), case.constants or None))
    path = directory / f"uniform_{case.id.replace('-', '_')}.py"
    path.write_text(
        "import numpy as np\n"
        f"FEATURES = {features!r}\nACTIONS = {actions!r}\n\n\n"
        "def policy(x):\n    return np.full((len(x), len(ACTIONS)), 1.0 / len(ACTIONS))\n"
    )
    return f"{path}:policy"


def files_table(sources: dict[str, str], reps: int, only: list[str] | None) -> list[dict]:
    """Every case measured with every source tree (label -> src directory), one fresh process each, side by side."""
    rows = []
    cases = [c for c in FILE_CASES if only is None or c.id in only]
    with tempfile.TemporaryDirectory(prefix="rlverify-bench-") as tmp:
        for case in cases:
            if not case.path().is_file():
                print(f"{case.id}: {case.path()} not found, skipped", flush=True)
                continue
            policy_file = _policy_file(case, Path(tmp))
            first = len(rows)
            for label, src in sources.items():
                env = {**os.environ, "PYTHONPATH": src}
                command = [sys.executable, __file__, "--file-worker", case.id, "--reps", str(reps)]
                try:
                    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, check=True)
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                    row["wall_s"], row["cli_total_s"], row["cli_value"] = _cli(case, src, reps, policy_file)
                except (subprocess.SubprocessError, RuntimeError, ValueError) as exc:
                    print(f"{case.id} [{label}]: failed: {str(exc)[-300:]}", flush=True)
                    continue
                row["src"] = label
                rows.append(row)
                print(_file_line(row), flush=True)
            if len(sources) > 1 and len(rows) - first == len(sources):  # every tree's value, in-process and the CLI's
                print(_values_line(rows[first:]), flush=True)
    return rows


def _values_line(rows: list[dict]) -> str:
    """Whether every tree computed the same value (in-process and in the CLI, each by the strategy its ``auto`` took)."""
    values = [float(v) for r in rows for v in (r["value"], r["cli_value"])]
    picks = ", ".join(f"{r['src']}: {r['auto']}" for r in rows)
    if len(set(values)) == 1:
        return f"{'':14} value identical in every tree and the CLI: {values[0]!r} ({picks})"
    spread = (max(values) - min(values)) / max(abs(max(values)), 1e-300)
    return f"{'':14} values differ by {spread:.2g} (relative): {sorted(set(values))} ({picks})"


def _file_line(r: dict) -> str:
    faster = min(r["merged_s"], r["full_s"])
    c = r["cpu"]
    return (
        f"{r['case']:14} {r['src']:7} {r['states']:8d} {r['merged_s']:9.3f} {r['full_s']:9.3f} "
        f"{r['merged_s'] / r['full_s']:7.2f} {r['auto']:>7} {r['auto_s'] / faster:9.2f} {r['auto_paired']:6.2f} "
        f"{r['total_s']:8.3f} "
        f"{r['storm_s']:8.3f} {r['total_s'] / r['storm_s']:9.2f} {r['paired']:6.2f} "
        f"{r['wall_s']:7.2f} {r['wall_s'] / r['storm_s']:9.2f} | "
        f"{c['merged']:7.3f} {c['full']:7.3f} {c['merged'] / c['full']:7.2f} {c['auto'] / min(c['merged'], c['full']):9.2f} "
        f"{c['total']:7.3f} {c['storm']:7.3f} {c['total'] / c['storm']:9.2f}"
    )


FILE_HEADER = (
    f"{'case':14} {'src':7} {'states':>8} {'merged s':>9} {'full s':>9} {'m/full':>7} {'auto':>7} {'auto/best':>9} "
    f"{'paired':>6} {'total s':>8} {'storm s':>8} {'tot/storm':>9} {'paired':>6} {'wall s':>7} {'wall/storm':>9} | "
    f"{'merged':>7} {'full':>7} {'m/full':>7} {'auto/best':>9} {'total':>7} {'storm':>7} {'tot/storm':>9}"
)
FILE_LEGEND = (
    "merged s, full s: the policy's chain built (policy_chain, each strategy; the best of --reps, more for builds "
    "under 0.2 s: repeated until ~0.5 s, at most 25 times). auto/best: auto's "
    "build / the faster strategy's (paired: the median over the repetitions of auto's / that repetition's faster). "
    "total s: verify_exact's own total (auto; parse included). storm s: Storm's in-process parse + build + "
    "check of the same property (Pmax on the MDP, storm_monolithic). paired: the median over the repetitions of "
    "total / storm measured one after the other (robust to the machine's speed drifting between them). wall s: the "
    "whole rlverify verify process. After "
    "'|': the same in CPU seconds of the process (the least over the repetitions; load inflates wall time less)."
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip Crazy Climber's per-state baseline")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--files", action="store_true", help="measure the files nobody here wrote (see above)")
    ap.add_argument("--before", metavar="SRC", help="--files: also measure this source tree (e.g. /work/main/src)")
    ap.add_argument("--after", metavar="SRC", help="--files: the source tree measured as 'after' (default: this one)")
    ap.add_argument("--reps", type=int, default=3, help="--files: repetitions (the best is reported)")
    ap.add_argument("--only", help="--files: comma-separated case ids (" + ",".join(c.id for c in FILE_CASES) + ")")
    ap.add_argument("--file-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.file_worker:
        print(json.dumps(file_worker(args.file_worker, args.reps)))
        return
    if args.files:
        sources = {"after": source_tree(args.after or str(REPO / "src"))}
        if args.before:
            sources = {"before": source_tree(args.before), **sources}
        print(FILE_HEADER)
        file_rows = files_table(sources, args.reps, args.only.split(",") if args.only else None)
        print(FILE_LEGEND)
        if args.json:
            args.json.write_text(json.dumps(file_rows, indent=2))
        return
    rows = []
    avoid = make("avoid-v1", xMax=4, yMax=4, slickness=0.1)
    pol = avoid.load_policy("reference")
    for mode in ("stochastic", "deterministic"):
        rows.append(
            run_case(
                "Avoid 4x4, 2x64",
                avoid.load_model(),
                avoid.properties["collision-100"],
                pol,
                mode,
                True,
                None,
                floor=mode == "stochastic",
            )
        )
    climber = make("crazy-climber-v1")
    rows.append(
        run_case(
            "Crazy Climber, 2x1024",
            climber.load_model(),
            climber.properties["collision"],
            climber.load_policy("reference"),
            "stochastic",
            not args.quick,
            None,
        )
    )
    print(
        f"{'case':24} {'mode':13} {'states':>8} {'transitions':>11} {'total s':>8} {'build':>6} {'policy':>6} "
        f"{'check':>6} {'storm s':>8} {'/storm':>7} {'baseline s':>10} {'speed-up':>8} {'net s':>6} {'policy x':>9}"
    )
    for r in rows:
        t = r["timings"]
        print(
            f"{r['case']:24} {r['mode']:13} {r['states']:8d} {r['transitions']:11d} {t['total']:8.2f} {t['build']:6.2f} "
            f"{t['policy']:6.2f} {t['check']:6.2f} {r['storm_monolithic_s']:8.2f} {r['ratio_vs_storm']:7.2f} "
            f"{r.get('baseline_s', float('nan')):10.2f} {r.get('speedup_vs_baseline', float('nan')):8.1f}x "
            f"{r.get('baseline_network_s', float('nan')):6.2f} {r.get('policy_speedup', float('nan')):8.0f}x"
        )
    print(
        "speed-up = baseline build (one network call per state and command, no cache) / our end-to-end time; "
        "net s = the baseline's network-call time (its build minus the same build without network calls); "
        "policy x = net s / our batched policy phase. /storm = our end-to-end / Storm's monolithic build+check."
    )
    for r in rows:
        if "floor" in r:
            f, t = r["floor"], r["timings"]
            print(
                f"\n{r['case']} {r['mode']}: rlverify whole pipeline (verify_exact: parse, build (merged exploration, "
                f"or Storm + export), policy, induce, check) {t['total']:.2f} s  [build {t['build']:.2f}, "
                f"policy {t['policy']:.2f}, induce {t.get('induce', 0):.2f}, check {t['check']:.2f}]"
            )
            print(
                f"Storm's in-process floor: build the property-directed MDP {f['build_s']:.2f} s "
                f"({f['mdp_transitions']:,} transitions) + check a DTMC of the chain's size {f['check_s']:.2f} s "
                f"({f['chain_transitions']:,} transitions) = {f['total_s']:.2f} s (value {f['value']:.12g}, "
                f"rlverify {r['value']:.12g})"
            )
            print(
                f"ratio rlverify / Storm floor = {r['ratio_vs_floor']:.2f} (target <= 1.0); with Storm's default "
                f"(unsound) environment its check takes {f['check_default_s']:.2f} s: ratio "
                f"{t['total'] / f['total_default_s']:.2f}"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
