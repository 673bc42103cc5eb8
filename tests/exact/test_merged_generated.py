"""Property-based: generated PRISM programs whose modules synchronise with several commands per label, against a
brute-force enumeration of their semantics written here (no rlverify or Storm code) and against Storm's build.

Every module has commands of the labels ``a`` and ``b`` (often several, with overlapping guards, so a state may enable
several combinations of one label, or none: a module of the label enabling no command disables them all) and
unlabelled ones. The policy names every choice by its commands (``m0:2+m1:1``) and puts a different weight on each in
each state, so a choice formed with the wrong commands, missing or duplicated moves mass: the merged exploration's
value, state and transition counts must be the enumeration's, and Storm's (``full``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rlverify import ExactOptions, verify_exact
from rlverify.models.symbolic import load_model
from rlverify.policies import CallablePolicy

PROBS = [(1.0,), (0.5, 0.5), (0.25, 0.75), (0.125, 0.375, 0.5)]  # exact in binary
OPS = {"=": lambda x, c: x == c, "<=": lambda x, c: x <= c, ">=": lambda x, c: x >= c}


@dataclass(frozen=True)
class Command:
    label: str  # "" unlabelled
    guard: tuple[tuple[int, str, int], ...]  # (module whose variable, op, constant), conjoined
    branches: tuple[tuple[float, str, int], ...]  # (probability, own variable's update: const/inc/dec/keep, constant)


@dataclass(frozen=True)
class Module:
    high: int
    init: int
    commands: tuple[Command, ...]


@st.composite
def programs(draw) -> tuple[Module, ...]:
    n = draw(st.integers(2, 3))
    highs = [draw(st.integers(1, 3)) for _ in range(n)]
    modules = []
    for i in range(n):
        commands = []
        for _ in range(draw(st.integers(1, 5))):
            label = draw(st.sampled_from(["", "a", "a", "b", "b"]))
            guard = tuple(
                (j, draw(st.sampled_from(sorted(OPS))), draw(st.integers(0, highs[j])))
                for j in draw(st.lists(st.integers(0, n - 1), max_size=2))
            )
            branches = tuple(
                (p, draw(st.sampled_from(["const", "inc", "dec", "keep"])), draw(st.integers(0, highs[i])))
                for p in draw(st.sampled_from(PROBS))
            )
            if not commands:  # every variable is assigned somewhere (Storm drops one no command changes)
                branches = ((branches[0][0], "inc", 0), *branches[1:])
            commands.append(Command(label, guard, branches))
        modules.append(Module(highs[i], draw(st.integers(0, highs[i])), tuple(commands)))
    return tuple(modules)


def prism_text(modules: tuple[Module, ...]) -> str:
    lines = ["mdp", ""]
    for i, m in enumerate(modules):
        v = f"v{i}"
        lines += [f"module m{i}", f"  {v} : [0..{m.high}] init {m.init};"]
        for c in m.commands:
            guard = " & ".join(f"v{j}{op}{k}" for j, op, k in c.guard) or "true"
            new = {"const": "{k}", "inc": f"min({v}+1,{m.high})", "dec": f"max({v}-1,0)", "keep": v}
            branches = " + ".join(f"{p} : ({v}'={new[kind].format(k=k)})" for p, kind, k in c.branches)
            lines.append(f"  [{c.label}] {guard} -> {branches};")
        lines += ["endmodule", ""]
    return "\n".join(lines)


# -- the brute-force enumeration (PRISM's semantics, written from the language's definition) -------------------


def _holds(c: Command, state: tuple[int, ...]) -> bool:
    return all(OPS[op](state[j], k) for j, op, k in c.guard)


def _moves(m: Module, c: Command, x: int) -> list[tuple[float, int]]:
    new = {"const": lambda k: k, "inc": lambda k: min(x + 1, m.high), "dec": lambda k: max(x - 1, 0), "keep": lambda k: x}
    return [(p, new[kind](k)) for p, kind, k in c.branches]


def choices(modules: tuple[Module, ...], state: tuple[int, ...]) -> dict[str, dict[tuple[int, ...], float]]:
    """Choice name -> successor -> probability: each unlabelled command alone; for each label, one enabled command
    of every module having the label, their updates' probabilities multiplied."""
    out: dict[str, dict[tuple[int, ...], float]] = {}
    for i, m in enumerate(modules):
        for k, c in enumerate(m.commands):
            if not c.label and _holds(c, state):
                row: dict[tuple[int, ...], float] = {}
                for p, x in _moves(m, c, state[i]):
                    succ = (*state[:i], x, *state[i + 1 :])
                    row[succ] = row.get(succ, 0.0) + p
                out[f"m{i}:{k + 1}"] = row
    for label in ("a", "b"):
        members = [i for i, m in enumerate(modules) if any(c.label == label for c in m.commands)]
        if not members:
            continue
        per_module = [[k for k, c in enumerate(modules[i].commands) if c.label == label and _holds(c, state)] for i in members]
        for combo in itertools.product(*per_module):
            row = {}
            parts = [_moves(modules[i], modules[i].commands[k], state[i]) for i, k in zip(members, combo, strict=True)]
            for outcome in itertools.product(*parts):
                succ = list(state)
                p = 1.0
                for i, (q, x) in zip(members, outcome, strict=True):
                    succ[i], p = x, p * q
                row[tuple(succ)] = row.get(tuple(succ), 0.0) + p
            out["+".join(f"m{i}:{k + 1}" for i, k in zip(members, combo, strict=True))] = row
    return out


def all_names(modules: tuple[Module, ...]) -> list[str]:
    names = [f"m{i}:{k + 1}" for i, m in enumerate(modules) for k, c in enumerate(m.commands) if not c.label]
    for label in ("a", "b"):
        members = [i for i, m in enumerate(modules) if any(c.label == label for c in m.commands)]
        if not members:
            continue
        per_module = [[k for k, c in enumerate(modules[i].commands) if c.label == label] for i in members]
        names += [
            "+".join(f"m{i}:{k + 1}" for i, k in zip(members, combo, strict=True)) for combo in itertools.product(*per_module)
        ]
    return names


def weights(state: tuple[int, ...], n: int) -> np.ndarray:
    """The policy: weight 1 + ((h(s) + 3a) mod 4) on action ``a`` (``h`` a hash of the state), normalised."""
    h = sum((17 * i + 5) * x for i, x in enumerate(state))
    w = 1.0 + (h + 3 * np.arange(n)) % 4
    return w / w.sum()


def enumerate_chain(modules: tuple[Module, ...], target: tuple[int, int], steps: int) -> tuple[float, int, int]:
    """P(F<=steps v_j = c), states and transitions of the policy's chain (mass on absent choices renormalised; a
    target state or a state without choices loops; a state with one unlabelled choice takes it unasked)."""
    names = all_names(modules)
    start = tuple(m.init for m in modules)
    rows: dict[tuple[int, ...], dict[tuple[int, ...], float]] = {}
    todo = [start]
    while todo:
        s = todo.pop()
        if s in rows:
            continue
        offered = choices(modules, s) if s[target[0]] != target[1] else {}
        if not offered:
            rows[s] = {s: 1.0}
        else:
            pi = weights(s, len(names))
            mass = {name: pi[names.index(name)] for name in offered}
            total = sum(mass.values())
            row: dict[tuple[int, ...], float] = {}
            for name, succs in offered.items():
                for t, p in succs.items():
                    row[t] = row.get(t, 0.0) + mass[name] / total * p
            rows[s] = row
        todo += [t for t in rows[s] if t not in rows]
    value = {s: float(s[target[0]] == target[1]) for s in rows}
    for _ in range(steps):
        value = {s: 1.0 if s[target[0]] == target[1] else sum(p * value[t] for t, p in rows[s].items()) for s in rows}
    return value[start], len(rows), sum(len(r) for r in rows.values())


#: as tests/reference/test_generated.py: the same examples every run; the default suite does not shrink
SETTINGS = dict(derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = dict(phases=[Phase.explicit, Phase.reuse, Phase.generate])


@settings(max_examples=40, **SETTINGS, **FAST)
@given(modules=programs(), data=st.data())
def test_merged_chain_equals_a_brute_force_enumeration_and_storms_build(modules, data):
    check(modules, data)


@pytest.mark.slow
@settings(max_examples=600, **SETTINGS)
@given(modules=programs(), data=st.data())
def test_many_merged_chains_equal_a_brute_force_enumeration_and_storms_build(modules, data):
    check(modules, data)


def check(modules: tuple[Module, ...], data: st.DataObject) -> None:
    j = data.draw(st.integers(0, len(modules) - 1))
    target = (j, data.draw(st.integers(0, modules[j].high)))
    steps = data.draw(st.integers(1, 6))
    names = all_names(modules)
    want, n_states, n_transitions = enumerate_chain(modules, target, steps)
    prop = f"P=? [F<={steps} v{target[0]}={target[1]}]"
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "gen.prism"
        path.write_text(prism_text(modules))
        model = load_model(path)
        # Storm drops a variable no command changes: the policy sees the others (the dropped keeps its initial value)
        seen = [i for i in range(len(modules)) if f"v{i}" in model.variables]

        def pi(x: np.ndarray) -> np.ndarray:
            full = np.tile([m.init for m in modules], (len(x), 1))
            full[:, seen] = x
            return np.asarray([weights(tuple(int(v) for v in row), len(names)) for row in full])

        policy = CallablePolicy(pi, [f"v{i}" for i in seen], names, name="hashed")
        for strategy in ("merged", "full"):
            r = verify_exact(model, prop, policy, ExactOptions(strategy=strategy, unavailable="renormalize"))
            assert r.value == pytest.approx(want, rel=1e-12, abs=1e-15), (strategy, prism_text(modules))
            assert (r.states, r.transitions) == (n_states, n_transitions), (strategy, prism_text(modules))
