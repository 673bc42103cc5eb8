"""Property-based: random small PRISM programs and JANI models, random policies, rlverify against the reference.

The generated models have several modules/automata, synchronisation, unlabelled commands and repeated labels,
silent and labelled edges in one location, up to 20 edges in one location (Storm reorders beyond 16),
deadlocks, updates leaving their variable's range (which must be refused, naming the variable) and JANI
files starting with a UTF-8 byte order mark. Every strategy that applies must give the reference's value
(merged = full = onthefly), stalled probability and chain size, or refuse where the reference refuses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rlverify import ExactOptions, verify_exact
from rlverify.errors import PolicyError, RlverifyError
from tests.reference import oracle as O
from tests.reference.harness import Combo, assert_value, rl_policy

LABELS = ["", "", "a", "b", "c"]  # unlabelled commands twice as likely


@dataclass(frozen=True)
class Var:
    name: str
    high: int
    init: int


@dataclass(frozen=True)
class Generated:
    """A generated model file's text, its kind, its variables and a target ``var = value``."""

    kind: str  # prism | jani
    text: str
    variables: tuple[Var, ...]
    target: tuple[str, int]
    bom: bool = False
    wrapping: tuple[str, ...] = ()  # variables with an unclamped increment/decrement (may leave their range)


def _variables(draw, prefix: str, n_min: int = 1, n_max: int = 2) -> list[Var]:
    out = []
    for j in range(draw(st.integers(n_min, n_max))):
        high = draw(st.integers(1, 3))
        out.append(Var(f"{prefix}{j}", high, draw(st.integers(0, high))))
    return out


def _atom(draw, variables: list[Var]) -> tuple[str, str, int]:
    v = draw(st.sampled_from(variables))
    return v.name, draw(st.sampled_from(["=", "<=", ">="])), draw(st.integers(0, v.high))


def _update(draw, own: list[Var], wrap: bool) -> list[tuple[str, str, int]]:
    """Assignments ``(var, kind, c)``: kind ``const`` (c), ``inc``/``dec`` (clamped unless ``wrap``)."""
    out = []
    for v in draw(st.lists(st.sampled_from(own), max_size=len(own), unique=True)):
        kind = draw(st.sampled_from(["const", "inc", "dec"]))
        out.append((v.name, kind + ("!" if wrap else ""), draw(st.integers(0, v.high)) if kind == "const" else 0))
    return out


PROBS = [(1.0,), (0.5, 0.5), (0.25, 0.75), (0.125, 0.875)]  # exact in binary: Storm checks the sums


@st.composite
def prism_programs(draw) -> Generated:
    wrap = draw(st.integers(0, 9)) == 0  # some updates may leave their range
    n_modules = draw(st.integers(1, 3))
    own = [_variables(draw, f"x{i}") for i in range(n_modules)]
    everything = [v for vs in own for v in vs]
    wrapping: set[str] = set()
    lines = ["mdp", ""]
    for i in range(n_modules):
        lines.append(f"module m{i}")
        lines += [f"  {v.name} : [0..{v.high}] init {v.init};" for v in own[i]]
        for _ in range(draw(st.integers(1, 5))):
            label = draw(st.sampled_from(LABELS))
            atoms = [_atom(draw, everything) for _ in range(draw(st.integers(0, 2)))]
            guard = " & ".join(f"{n}{op}{c}" for n, op, c in atoms) or "true"
            branches = []
            for p in draw(st.sampled_from(PROBS)):
                upd = _update(draw, own[i], wrap)
                wrapping |= {n for n, k, _ in upd if k in ("inc!", "dec!")}
                highs = {v.name: v.high for v in own[i]}
                parts = [f"({n}'={_prism_value(n, k, c, highs[n])})" for n, k, c in upd]
                branches.append(f"{p} : " + (" & ".join(parts) if parts else "true"))
            lines.append(f"  [{label}] {guard} -> " + " + ".join(branches) + ";")
        lines += ["endmodule", ""]
    v = draw(st.sampled_from(everything))
    return Generated(
        "prism", "\n".join(lines), tuple(everything), (v.name, draw(st.integers(0, v.high))), wrapping=tuple(sorted(wrapping))
    )


def _prism_value(name: str, kind: str, c: int, high: int) -> str:
    return {
        "const": str(c),
        "inc": f"min({name}+1,{high})",
        "dec": f"max({name}-1,0)",
        "const!": str(c),
        "inc!": f"{name}+1",
        "dec!": f"{name}-1",
    }[kind]


def _jani_value(name: str, kind: str, c: int, high: int):
    if kind.startswith("const"):
        return c
    step = {"op": "+" if kind.startswith("inc") else "-", "left": name, "right": 1}
    if kind.endswith("!"):
        return step
    return {"op": "min", "left": step, "right": high} if kind == "inc" else {"op": "max", "left": step, "right": 0}


JANI_OPS = {"=": "=", "<=": "≤", ">=": "≥"}


@st.composite
def jani_models(draw) -> Generated:
    wrap = draw(st.integers(0, 9)) == 0
    n_automata = draw(st.integers(1, 3))
    own = [_variables(draw, f"x{i}") for i in range(n_automata)]
    everything = [v for vs in own for v in vs]
    automata, used = [], [set() for _ in range(n_automata)]
    wrapping: set[str] = set()
    for i in range(n_automata):
        locations = [f"l{k}" for k in range(draw(st.integers(1, 2)))]
        many = draw(st.integers(0, 3)) == 0  # more than 16 edges in one location
        edges = []
        for _ in range(draw(st.integers(17, 20)) if many else draw(st.integers(1, 6))):
            action = draw(st.sampled_from(LABELS))
            atoms = [_atom(draw, everything) for _ in range(draw(st.integers(0, 2)))]
            guard = True
            for n, op, c in atoms:
                atom = {"op": JANI_OPS[op], "left": n, "right": c}
                guard = atom if guard is True else {"op": "∧", "left": guard, "right": atom}
            highs = {v.name: v.high for v in own[i]}
            dests = []
            for p in draw(st.sampled_from(PROBS)):
                upd = _update(draw, own[i], wrap)
                wrapping |= {n for n, k, _ in upd if k in ("inc!", "dec!")}
                dests.append(
                    {
                        "location": draw(st.sampled_from(locations)),
                        "probability": {"exp": p},
                        "assignments": [{"ref": n, "value": _jani_value(n, k, c, highs[n])} for n, k, c in upd],
                    }
                )
            edge = {"location": draw(st.sampled_from(locations)), "guard": {"exp": guard}, "destinations": dests}
            if action:
                edge["action"] = action
                used[i].add(action)
            edges.append(edge)
        automata.append(
            {"name": f"A{i}", "locations": [{"name": n} for n in locations], "initial-locations": ["l0"], "edges": edges}
        )
    actions = sorted(set().union(*used))
    syncs = [{"synchronise": [a if a in used[i] else None for i in range(n_automata)], "result": a} for a in actions]
    data = {
        "jani-version": 1,
        "name": "generated",
        "type": "mdp",
        "features": [],
        "actions": [{"name": a} for a in actions],
        "variables": [
            {
                "name": v.name,
                "type": {"kind": "bounded", "base": "int", "lower-bound": 0, "upper-bound": v.high},
                "initial-value": v.init,
            }
            for v in everything
        ],
        "automata": automata,
        "system": {"elements": [{"automaton": a["name"]} for a in automata], "syncs": syncs},
        "properties": [],
    }
    v = draw(st.sampled_from(everything))
    return Generated(
        "jani",
        json.dumps(data, ensure_ascii=False, indent=1),
        tuple(everything),
        (v.name, draw(st.integers(0, v.high))),
        bom=draw(st.integers(0, 4)) == 0,
        wrapping=tuple(sorted(wrapping)),
    )


@st.composite
def combos(draw) -> tuple[Combo, int, int | None]:
    combo = Combo(
        draw(st.sampled_from(["natural", "commands", "partial"])),
        draw(st.sampled_from(O.POLICY_KINDS)),
        draw(st.sampled_from(["stochastic", "deterministic"])),
        draw(st.sampled_from(["stall", "renormalize"])),
    )
    return combo, draw(st.integers(0, 2**16)), draw(st.sampled_from([None, None, 1, 3, 6]))


def _policy(model: O.RefModel, combo: Combo, seed: int) -> O.RefPolicy:
    natural = O.natural_actions(model)
    actions = {"natural": natural, "commands": O.all_command_names(model), "partial": natural[::2]}[combo.actions]
    if not actions:  # a model without any choice to name (every state forced): any one name of the model
        actions = O.all_command_names(model)[:1]
    return O.random_policy(model.features, actions, combo.kind, seed)


def _write(tmp: Path, gen: Generated) -> Path:
    path = tmp / ("model.prism" if gen.kind == "prism" else "model.jani")
    path.write_bytes((b"\xef\xbb\xbf" if gen.bom else b"") + gen.text.encode("utf-8"))
    return path


def check_generated(gen: Generated, combo: Combo, seed: int, bound: int | None) -> None:
    strategies = ("full", "merged", "onthefly") if gen.kind == "prism" else ("auto", "full")
    with TemporaryDirectory() as tmp:
        path = _write(Path(tmp), gen)
        try:
            model = O.build_prism(path) if gen.kind == "prism" else O.build_jani(path)
        except O.OutOfRange as exc:
            # the whole MDP is reached by a uniform policy over every command (a target that never holds):
            # every strategy must refuse, naming a variable that leaves its range (Storm found this one first;
            # rlverify may meet another one first)
            assert exc.variable in gen.wrapping
            names = "|".join(gen.wrapping)
            for strategy in strategies:
                with pytest.raises(RlverifyError, match=rf"\b({names})\b"):
                    verify_exact(
                        path,
                        f"P=? [F {gen.variables[0].name}>{gen.variables[0].high}]",
                        _all_names_policy(path, gen),
                        ExactOptions(strategy=strategy),
                    )
            return
        if not model.features or (not O.natural_actions(model) and not O.all_command_names(model)):
            return  # nothing for a policy to name (e.g. every variable constant): not this test's subject
        var, value = gen.target
        if var not in model.features:  # a variable Storm dropped (never updated): use one it keeps
            var = model.features[0]
        bound_text = f"<={bound}" if bound is not None else ""
        text = f"P=? [F{bound_text} {var}={value}]"
        query = O.Query("U", lambda m: m.var(var) == value, bound=bound)
        policy = _policy(model, combo, seed)
        try:
            expected = O.evaluate(model, policy, query, mode=combo.mode, unavailable=combo.unavailable)
        except O.Refused:
            expected = None
        for strategy in strategies:
            options = ExactOptions(mode=combo.mode, unavailable=combo.unavailable, strategy=strategy)
            if expected is None:
                with pytest.raises(PolicyError):
                    verify_exact(path, text, rl_policy(policy), options)
                continue
            result = verify_exact(path, text, rl_policy(policy), options)
            assert_value(result.value, expected.value, result.lower, result.upper, what=f"{strategy}: value")
            assert result.stalled_probability == pytest.approx(expected.stalled, abs=1e-9), f"{strategy}: stalled"
            assert result.states == expected.states, f"{strategy}: states"


def _all_names_policy(path: Path, gen: Generated):
    """A uniform policy over every command name the model can have, synchronised products included (found
    without building the model, which is out of range): every choice is named, none by its label."""
    import itertools

    import numpy as np

    from rlverify.policies import CallablePolicy

    per_module: list[tuple[str, list[tuple[str, str]]]] = []  # (module, [(label, name)])
    if gen.kind == "prism":
        import stormpy

        program = stormpy.parse_prism_program(str(path))
        for m in program.modules:
            per_module.append(
                (m.name, [(c.action_name if c.is_labeled else "", f"{m.name}:{k + 1}") for k, c in enumerate(m.commands)])
            )
    else:
        for a in O.read_jani(path)["automata"]:
            per_module.append((a["name"], [(e.get("action", ""), f"{a['name']}:{k + 1}") for k, e in enumerate(a["edges"])]))
    actions = [n for _, cs in per_module for label, n in cs if not label]
    for label in sorted({label for _, cs in per_module for label, _ in cs if label}):
        groups = [[n for l2, n in cs if l2 == label] for _, cs in per_module]
        groups = [g for g in groups if g]
        actions += ["+".join(combo) for combo in itertools.product(*groups)]
    # the variables some update assigns: Storm makes a never-assigned one a constant, no policy feature (a policy naming
    # it is refused for that, which would mask the out-of-range refusal this policy is for)
    if gen.kind == "prism":
        assigned = {v.name for v in gen.variables if f"({v.name}'=" in gen.text}
    else:
        assigned = {
            a["ref"]
            for automaton in O.read_jani(path)["automata"]
            for e in automaton["edges"]
            for d in e["destinations"]
            for a in d.get("assignments", [])
        }
    features = [v.name for v in gen.variables if v.name in assigned]
    return CallablePolicy(lambda s: np.full((len(s), len(actions)), 1.0 / len(actions)), features, actions)


# the default suite does not shrink a failing example (that can take minutes); the slow variant does
FAST = dict(phases=[Phase.explicit, Phase.reuse, Phase.generate])
SETTINGS = dict(
    derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@settings(max_examples=300, **SETTINGS, **FAST)
@given(gen=prism_programs(), choice=combos())
def test_generated_prism_matches_reference(gen: Generated, choice) -> None:
    check_generated(gen, *choice)


@settings(max_examples=200, **SETTINGS, **FAST)
@given(gen=jani_models(), choice=combos())
def test_generated_jani_matches_reference(gen: Generated, choice) -> None:
    check_generated(gen, *choice)


@pytest.mark.slow
@settings(max_examples=3000, **SETTINGS)
@given(gen=st.one_of(prism_programs(), jani_models()), choice=combos())
def test_generated_many_models_match_reference(gen: Generated, choice) -> None:
    check_generated(gen, *choice)
