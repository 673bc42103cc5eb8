"""``merged`` = ``full`` on files nobody here wrote: the paper's three reference PRISM files and the QVBS PRISM models.

The reference files are ``../shared/benchmarks/prism-reference`` (tests/conftest.py; without them the repository's
generated models of the same MDPs stand in); the QVBS models are tests/data/qvbs (CC-BY 4.0, see its README). Each
case runs Storm's build (``full``) and the merged exploration on one model, property and policy: a uniform policy
and a hashed one (a different action in different states, by a hash of the state), and requires the same value
(1e-12 relative), the same numbers of states and transitions, the same untaken choices and stalled mass, and that
``auto`` picks the strategy its rule says (:func:`rlverify.exact.chain.strategy_and_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks import make
from rlverify.models.summary import summarize
from rlverify.models.symbolic import SymbolicModel, load_model
from rlverify.policies import CallablePolicy

QVBS = Path(__file__).resolve().parents[1] / "data" / "qvbs"


@dataclass(frozen=True)
class Case:
    """A model file (reference file name or QVBS path), its constants, a property and what ``auto`` picks."""

    id: str
    file: str
    constants: str | None
    prop: str
    auto: str
    benchmark: tuple[str, dict] | None = None  # the generated model of the same MDP (reference files absent)
    slow: bool = False


CASES = [
    Case(
        "avoid",
        "avoid.prism",
        "xMax=3,yMax=3,slickness=0.1",
        "P=? [F<=20 COLLISION=true]",
        "merged",
        ("avoid-v1", {"xMax": 3, "yMax": 3, "slickness": 0.1}),
    ),
    Case("freeway", "freeway.prism", None, 'P=? [F "goal"]', "merged", ("freeway-v1", {})),
    Case(
        "crazy-climber",
        "crazy_climber.prism",
        None,
        "P=? [F<=20 COLLISION=true]",
        "merged",
        ("crazy-climber-v1", {}),
        slow=True,
    ),
    Case("consensus", "consensus/consensus.2.prism", "K=2", 'P=? [F "finished" & "all_coins_equal_1"]', "full"),
    Case("consensus-disagree", "consensus/consensus.2.prism", "K=4", 'P=? [F "finished" & !"agree"]', "full"),
    Case("csma", "csma/csma.3-2.prism", None, 'P=? [ !"collision_max_backoff" U "all_delivered" ]', "merged", slow=True),
    # 2 branches per choice over 2**5 valuations: a few breadth-first steps (AUTO_TINY)
    Case("ij", "ij/ij.3.prism", None, "P=? [ F<=3 (q1 + q2 + q3) = 1 ]", "merged"),
]


_MODELS: dict[str, tuple[SymbolicModel, tuple[str, ...]]] = {}


def _model(case: Case, reference: Path | None) -> tuple[SymbolicModel, tuple[str, ...]]:
    """The case's model and the policy's actions (the fewest names addressing every choice, as ``inspect`` lists)."""
    if case.id not in _MODELS:
        _MODELS[case.id] = _load(case, reference)
    return _MODELS[case.id]


def _load(case: Case, reference: Path | None) -> tuple[SymbolicModel, tuple[str, ...]]:
    if case.file.endswith(".prism") and "/" not in case.file:  # a reference file of the paper
        if reference is None:
            assert case.benchmark is not None
            bench_id, params = case.benchmark
            model = make(bench_id, **params).load_model()
        else:
            model = load_model(reference, case.constants)
        return model, tuple(summarize(model, build=False)[0].actions)
    model = load_model(QVBS / case.file, case.constants)
    return model, tuple(summarize(model)[0].actions)


def uniform(features: list[str], actions: tuple[str, ...]) -> CallablePolicy:
    A = len(actions)
    return CallablePolicy(lambda x: np.full((len(x), A), 1.0 / A), features, list(actions), name="uniform")


def hashed(features: list[str], actions: tuple[str, ...]) -> CallablePolicy:
    """Ten times the mass on action ``h(s) mod |A|`` as on each other, ``h`` a fixed integer hash of the state's values
    (its argmax: a different action in different states)."""
    A = len(actions)
    weights = np.asarray([7919 * (i + 1) + 104729 for i in range(len(features))], dtype=np.int64)

    def pi(x: np.ndarray) -> np.ndarray:
        h = (np.asarray(x, dtype=np.int64) * weights).sum(axis=1) % 1000003
        out = np.ones((len(x), A))
        out[np.arange(len(x)), h % A] = 10.0
        return out / out.sum(axis=1, keepdims=True)

    return CallablePolicy(pi, features, list(actions), name="hashed")


#: (policy, mode, unavailable): mass on actions a state does not offer renormalised, or stalled
RUNS = [
    (uniform, "stochastic", "renormalize"),
    (hashed, "stochastic", "renormalize"),
    (hashed, "deterministic", "renormalize"),
]


def _run(model: SymbolicModel, prop: str, policy: CallablePolicy, strategy: str, mode: str, unavailable: str):
    options = ExactOptions(strategy=strategy, mode=mode, unavailable=unavailable, precision=1e-10)
    return verify_exact(model, prop, policy, options)


@pytest.mark.parametrize("make_policy,mode,unavailable", RUNS, ids=["uniform", "hashed", "hashed-deterministic"])
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in CASES])
def test_merged_equals_full_on_reference_and_qvbs_models(case, make_policy, mode, unavailable, prism_reference):
    reference = prism_reference(case.file) if "/" not in case.file else None
    model, actions = _model(case, reference)
    policy = make_policy(list(model.variables), actions)
    full = _run(model, case.prop, policy, "full", mode, unavailable)
    merged = _run(model, case.prop, policy, "merged", mode, unavailable)
    assert (full.strategy, merged.strategy) == ("full", "merged")
    assert merged.value == pytest.approx(full.value, rel=1e-12, abs=1e-300)
    assert (merged.states, merged.transitions) == (full.states, full.transitions)
    assert merged.untaken_choices == full.untaken_choices
    assert merged.stalled_probability == pytest.approx(full.stalled_probability, rel=1e-12, abs=1e-300)
    auto = _run(model, case.prop, policy, "auto", mode, unavailable)
    assert auto.strategy == case.auto and auto.value == pytest.approx(full.value, rel=1e-12, abs=1e-300)
    if case.auto == "full":  # the result says why
        assert "auto chose Storm's builder" in auto.settings["merged_declined"]
    else:
        assert auto.settings["merged_declined"] is None


def test_auto_says_which_facts_decided(prism_reference):
    """consensus (K=2): 12 unlabelled commands (two flip a coin: 2 updates) and the label ``done`` (one update per
    module): (2 * 2 + 10 + 1) / 13 = 1.15 branches per choice; 13 counter values x 4 x 2 x 4 x 2 = 832 valuations."""
    case = next(c for c in CASES if c.id == "consensus")
    model, actions = _model(case, None)
    r = verify_exact(model, case.prop, uniform(list(model.variables), actions))
    assert r.strategy == "full"
    assert r.settings["merged_declined"] == (
        "auto chose Storm's builder: the program's choices have 1.15 branches on average over 832 valuations of "
        "its variables, so the merged exploration would take many narrow steps"
    )
