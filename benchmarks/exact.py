"""Speed of the exact engine: time breakdown, Storm's monolithic build+check, per-state baseline.

Prints, for Avoid 4x4 (the shipped PPO policy, 2x64; stochastic and deterministic) and Crazy
Climber (the shipped PPO policy, 2x1024): rlverify's phases, Storm's own monolithic build+check of
the same model in the same run, and a per-state baseline in which Storm's builder calls the network
(onnxruntime, batch of one) once per (state, command), as prior tools do. Ratios: ours / Storm
monolithic, baseline / ours, and the policy phase alone (the baseline's network time / ours).
For Avoid 4x4 stochastic it also prints Storm's in-process floor, measured in the same run: Storm
building the property-directed MDP plus Storm checking a DTMC of the chain's size (the chain
itself), and the ratio rlverify / floor (target <= 1.0).

    .venv/bin/python benchmarks/exact.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from rlverify.benchmarks import make
from rlverify.exact import ExactOptions, verify_exact
from rlverify.models import SymbolicModel, build_explicit, parse_property
from rlverify.policies import OnnxPolicy


def storm_monolithic(model: SymbolicModel, prop_text: str) -> float:
    import stormpy

    t = time.perf_counter()
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
    from rlverify.exact.checking import environment
    from rlverify.models import to_storm

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip Crazy Climber's per-state baseline")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = ap.parse_args()
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
