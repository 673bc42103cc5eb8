"""rlverify held to an independent reference on public QVBS models (tests/data/qvbs, CC-BY 4.0).

The reference (:mod:`tests.reference.oracle`) builds each MDP with Storm, names its choices from Storm's own
data and solves the policy's chain with numpy/scipy; rlverify's exact engine (every strategy that applies,
both modes, stall and renormalize, uniform and random policies), its monolithic mode (against Storm's
published results and the reference's value iteration), its simulator and its CLI must agree with it.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.cli.main import main
from tests.reference import corpus as C
from tests.reference import oracle as O
from tests.reference.harness import ALL_COMBOS, COMBOS, Combo, assert_value, check_exact, policy_for, reference, rl_policy

PRISM_STRATEGIES = ("auto", "full", "merged", "onthefly")
JANI_STRATEGIES = ("auto", "full")
#: restricted PPDDL models: edges enabled in the first k steps only (tests/reference/corpus.py)
RESTRICT = {"zenotravel": ("zenotravel.4-2-2.jani", 5), "boxworld": ("boxworld.10-5.jani", 3)}


def label(name: str):
    return lambda m: m.labels[name]


def both(a: str, b: str, negate_b: bool = False):
    return lambda m: m.labels[a] & (~m.labels[b] if negate_b else m.labels[b])


def var_eq(name: str, value: int):
    return lambda m: m.var(name) == value


def tokens_one(m: O.RefModel) -> np.ndarray:
    return m.var("q1") + m.var("q2") + m.var("q3") == 1


def eating(m: O.RefModel) -> np.ndarray:
    return np.any([(m.var(p) >= 8) & (m.var(p) <= 9) for p in ("p1", "p2", "p3")], axis=0)


@dataclass(frozen=True)
class Case:
    """One model file and property: rlverify's text and the reference's query."""

    id: str
    family: str
    file: str
    text: str
    query: O.Query
    constants: str | None = None
    compare_states: bool = True
    slow: bool = False
    strategies: tuple[str, ...] = field(default=())

    @property
    def jani(self) -> bool:
        return self.file.endswith(".jani") or self.file == "restricted"

    def applicable(self) -> tuple[str, ...]:
        if self.strategies:
            return self.strategies
        if self.jani:
            return JANI_STRATEGIES
        if self.query.path in ("R", "C"):  # merged does not check reward properties (auto falls back to full)
            return ("auto", "full", "onthefly")
        return PRISM_STRATEGIES


FINISHED_1 = 'P=? [F "finished" & "all_coins_equal_1"]'
CASES = [
    Case(
        "consensus-prism-reach",
        "consensus",
        "consensus.2.prism",
        FINISHED_1,
        O.Query("U", both("finished", "all_coins_equal_1")),
        "K=2",
    ),
    Case(
        "consensus-prism-bounded",
        "consensus",
        "consensus.2.prism",
        'P=? [F<=12 "finished"]',
        O.Query("U", label("finished"), bound=12),
        "K=2",
    ),
    Case(
        "consensus-prism-steps",
        "consensus",
        "consensus.2.prism",
        'R{"steps"}=? [F "finished"]',
        O.Query("R", label("finished"), reward="steps"),
        "K=2",
    ),
    Case(
        "consensus-prism-cumulative",
        "consensus",
        "consensus.2.prism",
        'R{"steps"}=? [C<=6]',
        O.Query("C", bound=6, reward="steps"),
        "K=2",
    ),
    Case(
        "consensus-jani-reach",
        "consensus",
        "consensus.2.jani",
        FINISHED_1,
        O.Query("U", both("finished", "all_coins_equal_1")),
        "K=2",
    ),
    Case(
        "consensus-jani-disagree",
        "consensus",
        "consensus.2.jani",
        'P=? [F<=14 "finished" & !"agree"]',
        O.Query("U", both("finished", "agree", negate_b=True), bound=14),
        "K=2",
    ),
    Case(
        "consensus-jani-steps",
        "consensus",
        "consensus.2.jani",
        'R{"steps"}=? [F "finished"]',
        O.Query("R", label("finished"), reward="steps"),
        "K=2",
    ),
    Case("ij-prism-reach", "ij", "ij.3.prism", "P=? [F q1+q2+q3=1]", O.Query("U", tokens_one)),
    Case("ij-prism-bounded", "ij", "ij.3.prism", "P=? [F<=2 q1+q2+q3=1]", O.Query("U", tokens_one, bound=2)),
    Case("ij-jani-reach", "ij", "ij.3.jani", "P=? [F q1+q2+q3=1]", O.Query("U", tokens_one)),
    Case("ij-jani-bounded", "ij", "ij.3.jani", "P=? [F<=2 q1+q2+q3=1]", O.Query("U", tokens_one, bound=2)),
    Case(
        "philosophers-jani-eat",
        "philosophers-mdp",
        "philosophers-mdp.3.jani",
        "P=? [F (p1>=8 & p1<=9) | (p2>=8 & p2<=9) | (p3>=8 & p3<=9)]",
        O.Query("U", eating),
    ),
    Case(
        "philosophers-jani-eat-bounded",
        "philosophers-mdp",
        "philosophers-mdp.3.jani",
        "P=? [F<=6 (p1>=8 & p1<=9) | (p2>=8 & p2<=9) | (p3>=8 & p3<=9)]",
        O.Query("U", eating, bound=6),
    ),
    Case(
        "csma-prism-until",
        "csma",
        "csma.3-2.prism",
        'P=? [!"collision_max_backoff" U "all_delivered"]',
        O.Query("U", label("all_delivered"), left=lambda m: ~m.labels["collision_max_backoff"]),
        compare_states=False,
        strategies=("auto", "full"),
    ),
    Case(
        "csma-prism-time",
        "csma",
        "csma.3-2.prism",
        'R{"time"}=? [F "all_delivered"]',
        O.Query("R", label("all_delivered"), reward="time"),
        strategies=("full",),
    ),
    Case(
        "csma-prism-onthefly",
        "csma",
        "csma.3-2.prism",
        'P=? [F<=40 "one_delivered"]',
        O.Query("U", label("one_delivered"), bound=40),
        slow=True,
        strategies=("onthefly",),
    ),
    Case(
        "csma-jani-until",
        "csma",
        "csma.3-2.jani",
        'P=? [!"collision_max_backoff" U "all_delivered"]',
        O.Query("U", label("all_delivered"), left=lambda m: ~m.labels["collision_max_backoff"]),
        compare_states=False,
        strategies=("full",),
    ),
    Case("zenotravel-k5-reach", "zenotravel", "restricted", "P=? [F var0=2]", O.Query("U", var_eq("var0", 2))),
    Case("zenotravel-k5-bounded", "zenotravel", "restricted", "P=? [F<=4 var6=4]", O.Query("U", var_eq("var6", 4), bound=4)),
    Case("boxworld-k3-reach", "boxworld", "restricted", "P=? [F var12=2]", O.Query("U", var_eq("var12", 2))),
]
CSMA = {"csma-prism-until", "csma-prism-time", "csma-jani-until"}


@pytest.fixture(scope="session")
def restricted_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("qvbs-restricted")
    for family, (name, k) in RESTRICT.items():
        C.restrict_steps(C.path(family, name), out / f"{family}.k{k}.jani", k)
    return out


def model_path(case: Case, restricted: Path) -> Path:
    if case.file == "restricted":
        _, k = RESTRICT[case.family]
        return restricted / f"{case.family}.k{k}.jani"
    return C.path(case.family, case.file)


@functools.cache
def ref_model(path: str, constants: str | None) -> O.RefModel:
    return O.build_jani(path, constants or "") if path.endswith(".jani") else O.build_prism(path, constants or "")


def exact_params(combos: list[Combo], *, slow: bool) -> list:
    out = []
    for case in CASES:
        for combo in combos:
            for strategy in case.applicable():
                # csma's chain has ~37k states: the default suite checks it with two combinations
                heavy = case.slow or (case.id in CSMA and combo not in COMBOS[:2])
                marks = [pytest.mark.slow] if (slow or heavy) else []
                out.append(pytest.param(case, combo, strategy, id=f"{case.id}-{combo.id}-{strategy}", marks=marks))
    return out


@pytest.mark.parametrize(("case", "combo", "strategy"), exact_params(COMBOS, slow=False))
def test_exact_matches_reference(case: Case, combo: Combo, strategy: str, restricted_dir: Path) -> None:
    path = model_path(case, restricted_dir)
    model = ref_model(str(path), case.constants)
    check_exact(
        path, case.text, model, case.query, combo, strategy, constants=case.constants, compare_states=case.compare_states
    )


@pytest.mark.parametrize(("case", "combo", "strategy"), exact_params([c for c in ALL_COMBOS if c not in COMBOS], slow=True))
def test_exact_matches_reference_all_combinations(case: Case, combo: Combo, strategy: str, restricted_dir: Path) -> None:
    test_exact_matches_reference(case, combo, strategy, restricted_dir)


def test_jani_edge_markers_leave_the_mdp_unchanged(restricted_dir: Path) -> None:
    """The reference's JANI rewrite (a transient marker per automaton) builds the same MDP, and the markers
    name every choice of a location with hundreds of edges by its file position."""
    path = model_path(CASES[-3], restricted_dir)  # zenotravel, 424 silent edges in one location
    model = O.build_jani(path, check_same=True)
    data = O.read_jani(path)
    edges = data["automata"][0]["edges"]
    assert len(edges) == 424
    named = {n for n in model.choice_name if n}
    assert named and all(n.startswith("main:") and 1 <= int(n[5:]) <= 424 for n in named)
    # each named choice's branches are the file edge's destinations: compare one choice's successor count
    for c in np.flatnonzero([bool(n) for n in model.choice_name])[:50]:
        k = int(model.choice_name[c][5:])
        assert model.T[c].nnz <= len(edges[k - 1]["destinations"])


# ---------------------------------------------------------------------------------------------------------------
# monolithic mode: Pmin/Pmax over all schedulers, against Storm's published results and the reference's own VI


@dataclass(frozen=True)
class Published:
    id: str
    family: str
    file: str
    prop: str  # a JANI property name, or a PRISM property text
    published: tuple[str, str]  # (results file, property name)
    query: O.Query
    optimum: str  # "min" or "max": which one QVBS publishes
    constants: str | None = None
    slow: bool = False


PUBLISHED = [
    Published(
        "consensus-prism-c2",
        "consensus",
        "consensus.2.prism",
        'Pmin=? [F "finished" & "all_coins_equal_1"]',
        ("Storm.2-2.2018-10-12.json", "c2"),
        O.Query("U", both("finished", "all_coins_equal_1")),
        "min",
        "K=2",
    ),
    Published(
        "consensus-prism-disagree",
        "consensus",
        "consensus.2.prism",
        'Pmax=? [F "finished" & !"agree"]',
        ("Storm.2-2.2018-10-12.json", "disagree"),
        O.Query("U", both("finished", "agree", True)),
        "max",
        "K=2",
    ),
    Published(
        "consensus-prism-steps-max",
        "consensus",
        "consensus.2.prism",
        'R{"steps"}max=? [F "finished"]',
        ("Storm.2-2.2018-10-12.json", "steps_max"),
        O.Query("R", label("finished"), reward="steps"),
        "max",
        "K=2",
    ),
    Published(
        "consensus-jani-c2",
        "consensus",
        "consensus.2.jani",
        "c2",
        ("Storm.2-2.2018-10-12.json", "c2"),
        O.Query("U", both("finished", "all_coins_equal_1")),
        "min",
        "K=2",
    ),
    Published(
        "consensus-jani-disagree",
        "consensus",
        "consensus.2.jani",
        "disagree",
        ("Storm.2-2.2018-10-12.json", "disagree"),
        O.Query("U", both("finished", "agree", True)),
        "max",
        "K=2",
    ),
    Published(
        "consensus-jani-steps-min",
        "consensus",
        "consensus.2.jani",
        "steps_min",
        ("Storm.2-2.2018-10-12.json", "steps_min"),
        O.Query("R", label("finished"), reward="steps"),
        "min",
        "K=2",
    ),
    Published(
        "ij-prism-stable",
        "ij",
        "ij.3.prism",
        "Pmax=? [F q1+q2+q3=1]",
        ("Storm.exact.3.2018-11-22.json", "stable"),
        O.Query("U", tokens_one),
        "max",
    ),
    Published(
        "ij-jani-stable",
        "ij",
        "ij.3.jani",
        "stable",
        ("Storm.exact.3.2018-11-22.json", "stable"),
        O.Query("U", tokens_one),
        "max",
    ),
    Published(
        "philosophers-jani-eat",
        "philosophers-mdp",
        "philosophers-mdp.3.jani",
        "eat",
        ("Storm.exact.3.2018-11-22.json", "eat"),
        O.Query("U", eating),
        "max",
    ),
    Published(
        "csma-prism-all-before-min",
        "csma",
        "csma.3-2.prism",
        'Pmin=? [!"collision_max_backoff" U "all_delivered"]',
        ("Storm.exact.3-2.2018-10-17.json", "all_before_min"),
        O.Query("U", label("all_delivered"), left=lambda m: ~m.labels["collision_max_backoff"]),
        "min",
    ),
    Published(
        "csma-jani-all-before-max",
        "csma",
        "csma.3-2.jani",
        "all_before_max",
        ("Storm.exact.3-2.2018-10-17.json", "all_before_max"),
        O.Query("U", label("all_delivered"), left=lambda m: ~m.labels["collision_max_backoff"]),
        "max",
    ),
    Published(
        "csma-jani-time-max",
        "csma",
        "csma.3-2.jani",
        "time_max",
        ("Storm.exact.3-2.2018-10-17.json", "time_max"),
        O.Query("R", label("all_delivered"), reward="time"),
        "max",
        slow=True,
    ),
    Published(
        "zenotravel-goal",
        "zenotravel",
        "zenotravel.4-2-2.jani",
        "goal",
        ("Storm.exact.4-2-2.2018-10-03.json", "goal"),
        O.Query("U", lambda m: (m.var("var7") == 1) & (m.var("var6") == 2)),
        "max",
        slow=True,
    ),
]


def reference_optimum(model: O.RefModel, query: O.Query, optimum: str) -> float:
    maximize = optimum == "max"
    if query.path == "U":
        left = query.left(model) if query.left is not None else None
        return float(O.optimal_until(model, query.target(model), left, maximize=maximize)[model.initial])
    return float(O.optimal_reach_reward(model, query.reward, query.target(model), maximize=maximize)[model.initial])


@pytest.mark.parametrize("case", [pytest.param(p, id=p.id, marks=[pytest.mark.slow] if p.slow else []) for p in PUBLISHED])
def test_monolithic_matches_published_results(case: Published) -> None:
    path = C.path(case.family, case.file)
    jani = case.file.replace(".prism", ".jani")
    constants = dict((k, int(v)) for k, v in (kv.split("=") for kv in case.constants.split(","))) if case.constants else None
    exact = C.exact_result(case.family, jani, case.published[1], constants)
    # the published run (Storm's default, not exact) agrees with the exact result to its own precision
    published = C.published(case.family, case.published[0])[case.published[1]]
    assert float(published) == pytest.approx(exact, rel=1e-5)
    result = verify_exact(path, case.prop, None, ExactOptions(mode="monolithic"), constants=case.constants)
    value = result.pmin if case.optimum == "min" else result.pmax
    # rlverify's default: Storm's sound solver at relative precision 1e-6
    assert value == pytest.approx(exact, rel=1e-6, abs=1e-9), f"{case.optimum} vs Storm's exact published result"
    # the reference's own value iteration
    expected = reference_optimum(ref_model(str(path), case.constants), case.query, case.optimum)
    assert expected == pytest.approx(exact, rel=1e-9, abs=1e-9), "reference vs published (oracle check)"


# ---------------------------------------------------------------------------------------------------------------
# the simulator: its interval covers the reference's value


STATISTICAL = [  # bounded properties: every run is decided
    ("consensus-prism-bounded", Combo("natural", "stochastic", "stochastic", "stall")),
    ("consensus-jani-disagree", Combo("commands", "stochastic", "stochastic", "renormalize")),
    ("ij-jani-bounded", Combo("natural", "uniform", "deterministic", "stall")),
    ("philosophers-jani-eat-bounded", Combo("natural", "stochastic", "stochastic", "renormalize")),
    ("zenotravel-k5-bounded", Combo("natural", "stochastic", "stochastic", "renormalize")),
    ("zenotravel-k5-bounded", Combo("partial", "deterministic", "stochastic", "stall")),
]


@pytest.mark.parametrize(("case_id", "combo"), [pytest.param(c, k, id=f"{c}-{k.id}") for c, k in STATISTICAL])
def test_simulation_interval_covers_reference(case_id: str, combo: Combo, restricted_dir: Path) -> None:
    from rlverify.statistical import StatisticalOptions, verify_statistical
    from rlverify.statistical.engine import SimulationOptions

    case = next(c for c in CASES if c.id == case_id)
    path = model_path(case, restricted_dir)
    model = ref_model(str(path), case.constants)
    policy = policy_for(model, combo)
    expected = reference(model, policy, case.query, combo)
    assert isinstance(expected, O.Answer)
    options = StatisticalOptions(
        method="clopper-pearson",
        runs=3000,
        delta=0.001,
        simulation=SimulationOptions(mode=combo.mode, unavailable=combo.unavailable, seed=7, max_steps=100),
    )
    from rlverify.models import load_model

    result = verify_statistical(load_model(path, case.constants), case.text, rl_policy(policy), options)
    low, high = result.interval
    assert low <= expected.value <= high, f"interval [{low}, {high}] misses the reference {expected.value}"
    assert result.undecided == 0


# ---------------------------------------------------------------------------------------------------------------
# the CLI, once per family: a table policy file from the same random table


CLI_CASES = [
    "consensus-prism-reach",
    "consensus-jani-steps",
    "ij-prism-bounded",
    "philosophers-jani-eat",
    "csma-prism-until",
    "zenotravel-k5-reach",
    "boxworld-k3-reach",
]


@pytest.mark.parametrize("case_id", CLI_CASES)
def test_cli_verify_json_matches_reference(
    case_id: str, restricted_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = next(c for c in CASES if c.id == case_id)
    path = model_path(case, restricted_dir)
    model = ref_model(str(path), case.constants)
    combo = Combo("natural", "stochastic", "stochastic", "renormalize")
    policy = policy_for(model, combo, seed=11)
    expected = reference(model, policy, case.query, combo)
    assert isinstance(expected, O.Answer)
    probs = policy.fn(model.values[:, [model.features.index(f) for f in policy.features]].astype(float))
    table = {
        "features": list(policy.features),
        "actions": list(policy.actions),
        "table": [
            {
                "state": [int(v) for v in model.values[s]],
                "probabilities": {a: float(p) for a, p in zip(policy.actions, probs[s], strict=True) if p > 0},
            }
            for s in range(model.num_states)
        ],
    }
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps(table))
    argv = ["verify", str(path), "-p", case.text, "--policy", str(policy_file), "--unavailable", "renormalize", "--json"] + (
        ["-c", case.constants] if case.constants else []
    )
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)["result"]
    value = out["value"]
    assert_value(
        math.inf if value in ("inf", "Infinity", None) else float(value), expected.value, out.get("lower"), out.get("upper")
    )
