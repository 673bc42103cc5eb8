"""The lockstep simulator on PRISM MDPs, cross-checked with the exact engine; reproducibility; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from rlverify.errors import OptionError, PolicyError, PropertyError
from rlverify.policies import CallablePolicy
from rlverify.statistical import (
    SimulationOptions,
    StatisticalOptions,
    StatisticsError,
    parse_path_property,
    verify_statistical,
)
from rlverify.statistical.envs import ExplicitEnv
from rlverify.statistical.verify import prepare

AVOID_PROP = "P=? [F<=100 COLLISION=true]"

# s0 -a-> s1 or s2 (1/2 each), s0 -b-> goal; s1 has only a (self-loop); s2 has only b (to goal); goal has only a.
STALL_MODEL = """mdp
module m
  s : [0..3] init 0;
  [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
  [b] s=0 -> (s'=3);
  [a] s=1 -> (s'=1);
  [b] s=2 -> (s'=3);
  [a] s=3 -> (s'=3);
endmodule
label "goal" = s=3;
"""


@pytest.fixture(scope="module")
def avoid_exact(avoid_model, avoid_policy):
    from rlverify import verify_exact

    return verify_exact(avoid_model, AVOID_PROP, avoid_policy).value


@pytest.fixture(scope="module")
def avoid_prepared(avoid_model):
    return prepare(avoid_model, AVOID_PROP)


def test_okamoto_interval_covers_exact_value(avoid_model, avoid_policy, avoid_exact):
    r = verify_statistical(avoid_model, AVOID_PROP, avoid_policy, StatisticalOptions(epsilon=0.02, delta=0.05))
    assert r.runs == 4612 and r.method == "okamoto" and r.confidence == pytest.approx(0.95)
    assert r.undecided == 0 and r.stalled == 0
    assert r.interval == pytest.approx((r.estimate - 0.02, r.estimate + 0.02))
    assert r.interval[0] <= avoid_exact <= r.interval[1]


@pytest.mark.parametrize("method", ["adaptive", "clopper-pearson", "wilson"])
def test_other_methods_cover_exact_value(avoid_model, avoid_policy, avoid_exact, method):
    runs = None if method == "adaptive" else 2000  # the adaptive method chooses its own number of runs
    r = verify_statistical(
        avoid_model, AVOID_PROP, avoid_policy, StatisticalOptions(method=method, epsilon=0.03, delta=0.01, runs=runs)
    )
    assert r.interval[0] <= avoid_exact <= r.interval[1]
    if method == "adaptive":
        assert r.runs < 2944  # fewer than Okamoto's ceil(ln(200)/(2*0.03^2)) = 2944 when p is far from 1/2


def test_deterministic_mode_matches_exact(avoid_model, avoid_policy):
    from rlverify import ExactOptions, verify_exact

    exact = verify_exact(avoid_model, AVOID_PROP, avoid_policy, ExactOptions(mode="deterministic")).value
    r = verify_statistical(
        avoid_model,
        AVOID_PROP,
        avoid_policy,
        StatisticalOptions(
            method="clopper-pearson", runs=2000, delta=0.001, simulation=SimulationOptions(mode="deterministic")
        ),
    )
    assert r.interval[0] <= exact <= r.interval[1]


def test_same_seed_same_result_independent_of_batch_size(avoid_model, avoid_policy):
    def run(seed, batch):
        return verify_statistical(
            avoid_model,
            AVOID_PROP,
            avoid_policy,
            StatisticalOptions(method="clopper-pearson", runs=600, simulation=SimulationOptions(seed=seed, batch_size=batch)),
        )

    a, b, c = run(5, 600), run(5, 277), run(6, 600)
    assert (a.successes, a.decisions, a.interval) == (b.successes, b.decisions, b.interval)
    assert a.seed == 5
    assert (a.successes, a.decisions) != (c.successes, c.decisions)


def test_per_run_outcomes_independent_of_batch_size(avoid_prepared, avoid_policy):
    from rlverify.statistical import simulate

    env, prop, _ = avoid_prepared
    ids = np.arange(1000, 1300)
    x = simulate(env, avoid_policy, prop, ids, options=SimulationOptions(seed=3, batch_size=300))
    y = simulate(env, avoid_policy, prop, ids[::-1], options=SimulationOptions(seed=3, batch_size=37))
    assert np.array_equal(x.outcome, y.outcome[::-1]) and np.array_equal(x.steps, y.steps[::-1])


def test_sequential_methods_independent_of_batch_size(avoid_model, avoid_policy):
    for method in ("adaptive", "sprt"):
        rs = [
            verify_statistical(
                avoid_model,
                "P>=0.8 [F<=100 COLLISION=true]",
                avoid_policy,
                StatisticalOptions(
                    method=method, epsilon=0.05, indifference=0.03, simulation=SimulationOptions(seed=1, batch_size=b)
                ),
            )
            for b in (20_000, 123)
        ]
        assert (rs[0].runs, rs[0].successes, rs[0].decision) == (rs[1].runs, rs[1].successes, rs[1].decision)


def test_sprt_decides_correct_side(avoid_model, avoid_policy, avoid_exact):
    low = verify_statistical(
        avoid_model,
        AVOID_PROP,
        avoid_policy,
        StatisticalOptions(method="sprt", threshold=avoid_exact - 0.05, indifference=0.03),
    )
    high = verify_statistical(
        avoid_model,
        AVOID_PROP,
        avoid_policy,
        StatisticalOptions(method="sprt", threshold=avoid_exact + 0.05, indifference=0.03),
    )
    assert (low.decision, low.satisfied) == ("H0", True)
    assert (high.decision, high.satisfied) == ("H1", False)


@pytest.fixture(scope="module")
def stall_model(tmp_path_factory):
    from rlverify.models import load_model

    path = tmp_path_factory.mktemp("m") / "stall.prism"
    path.write_text(STALL_MODEL)
    return load_model(path)


def test_stall_counted_and_never_repaired(stall_model):
    """pi = (1/2, 1/2) everywhere. By hand: goal with 1/2 (b) + 1/4 * 1/2 (a, s2, b) = 0.625; stall in s2
    with 1/4 * 1/2 = 0.125 (a is unavailable there, and is not replaced by b); s1 (probability 1/4) is
    absorbing without the goal, so the run is decided (violated) on arrival."""
    from rlverify import verify_exact
    from rlverify.statistical import clopper_pearson

    policy = CallablePolicy(lambda x: np.full((len(x), 2), 0.5), ["s"], ["a", "b"])
    r = verify_statistical(
        stall_model, 'P=? [F "goal"]', policy, StatisticalOptions(method="clopper-pearson", runs=20_000, delta=0.001)
    )
    assert r.undecided == 0
    assert r.interval[0] <= 0.625 <= r.interval[1]
    slo, shi = clopper_pearson(r.stalled, r.runs, 0.001)
    assert slo <= 0.125 <= shi
    vlo, vhi = clopper_pearson(r.runs - r.successes - r.stalled, r.runs, 0.001)
    assert vlo <= 0.25 <= vhi
    assert verify_exact(stall_model, 'P=? [F "goal"]', policy).value == pytest.approx(0.625)


def test_coverage_rate_is_consistent_with_confidence(stall_model):
    """200 seeds: the number of Clopper-Pearson intervals (confidence 0.9) covering the exact value
    (exact engine; by hand 0.3 + 0.7 * 0.5 * 0.3 = 0.405) is not significantly below 0.9 * 200
    (one-sided binomial test)."""
    from rlverify import verify_exact

    policy = CallablePolicy(lambda x: np.tile([0.7, 0.3], (len(x), 1)), ["s"], ["a", "b"])
    exact = verify_exact(stall_model, 'P=? [F "goal"]', policy).value
    assert exact == pytest.approx(0.405)
    env, prop, _ = prepare(stall_model, 'P=? [F "goal"]')
    seeds, delta, covered, widths = 200, 0.1, 0, []
    for seed in range(seeds):
        r = verify_statistical(
            env,
            prop.text,
            policy,
            StatisticalOptions(
                method="clopper-pearson", runs=200, delta=delta, simulation=SimulationOptions(seed=10_000 + seed)
            ),
        )
        covered += r.interval[0] <= exact <= r.interval[1]
        widths.append(r.interval[1] - r.interval[0])
    assert binomtest(covered, seeds, 1 - delta, alternative="less").pvalue > 1e-3, covered
    assert covered < seeds  # intervals are not trivially wide: some miss (P(all 200 cover) is tiny)
    assert max(widths) < 0.2


LOOP_MODEL = """mdp
module m
  s : [0..2] init 0;
  [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=0);
  [a] s=1 -> (s'=0);
  [b] s=0 -> (s'=2);
  [a] s=2 -> (s'=2);
endmodule
label "goal" = s=2;
"""


def test_undecided_runs_reported(tmp_path):
    """Always action a: the run cycles between s0 and s1 forever; after max_steps it is undecided, not false."""
    from rlverify.models import load_model

    path = tmp_path / "loop.prism"
    path.write_text(LOOP_MODEL)
    model = load_model(path)
    policy = CallablePolicy(lambda x: np.tile([1.0, 0.0], (len(x), 1)), ["s"], ["a", "b"])
    r = verify_statistical(
        model,
        'P=? [F "goal"]',
        policy,
        StatisticalOptions(method="clopper-pearson", runs=500, simulation=SimulationOptions(max_steps=50)),
    )
    assert (r.successes, r.stalled, r.undecided) == (0, 0, 500)
    assert r.interval == (0.0, 1.0)  # undecided runs may be either: the interval says so
    bounded = verify_statistical(
        model,
        'P=? [F<=10 "goal"]',
        policy,
        StatisticalOptions(method="wilson", runs=500, simulation=SimulationOptions(max_steps=50)),
    )
    assert (bounded.undecided, bounded.successes) == (0, 0)  # the step bound decides every run


@pytest.mark.parametrize(
    "text,match",
    [
        ('P=? [G "goal"]', "supported"),
        ('P=? [X "goal"]', "supported"),
        ('Pmax=? [F "goal"]', "Pmin/Pmax"),
        ('R=? [F "goal"]', "supported"),
        ('P=? [F>=3 "goal"]', "lower step bounds"),
        ("P=? [F goal]", "write labels in quotes"),
        ('P=? [F "goal"', "expected"),
    ],
)
def test_unsupported_property_forms_list_supported_ones(text, match):
    with pytest.raises(PropertyError, match=match) as exc:
        parse_path_property(text, ("goal", "crashed"))
    if match in ("supported", "lower step bounds"):
        assert "F<=k" in str(exc.value) and "U" in str(exc.value)


def test_parser_accepts_supported_forms():
    p = parse_path_property('P=? [!"crashed" U<5 ("goal" | false)]', ("goal", "crashed"))
    assert p.bound == 4 and p.threshold is None
    q = parse_path_property('P>=0.9 [F "goal"]', ("goal",))
    assert (q.threshold, q.comparison, q.bound) == (0.9, ">=", None)


def test_unsupported_prism_properties(avoid_model, avoid_policy):
    for text in ("P=? [G COLLISION=false]", "Pmax=? [F COLLISION=true]", 'R=? [F "collide"]'):
        with pytest.raises(PropertyError, match=r"supported|Pmin/Pmax|does not"):
            verify_statistical(avoid_model, text, avoid_policy)


@pytest.mark.parametrize("kw", [{"epsilon": 0.0}, {"epsilon": 1.0}, {"delta": 0.0}, {"delta": 2.0}])
def test_bad_epsilon_delta(avoid_model, avoid_policy, kw):
    with pytest.raises(StatisticsError, match=r"epsilon|delta"):
        verify_statistical(avoid_model, AVOID_PROP, avoid_policy, StatisticalOptions(**kw))


@pytest.mark.parametrize("steps", [0, -5])
def test_max_steps_must_be_positive(avoid_model, avoid_policy, steps):
    with pytest.raises(OptionError, match="max-steps"):
        verify_statistical(
            avoid_model, AVOID_PROP, avoid_policy, StatisticalOptions(simulation=SimulationOptions(max_steps=steps))
        )


def test_policy_features_must_match():
    from rlverify.benchmarks.racetrack import make_racetrack
    from rlverify.models.racetrack import ACTIONS

    env = make_racetrack("racetrack-barto-small-v1")
    bad = CallablePolicy(lambda x: np.full((len(x), 9), 1 / 9), ["x", "y", "goal_distance"], ACTIONS)
    with pytest.raises(PolicyError, match=r"goal_distance.*not observed") as exc:
        verify_statistical(env, 'P=? [F "goal"]', bad)
    assert "did you mean" in str(exc.value)
    wrong_action = CallablePolicy(lambda x: np.full((len(x), 2), 0.5), ["x", "y"], ["left", "right"])
    with pytest.raises(PolicyError, match="'left' is not an action"):
        verify_statistical(env, 'P=? [F "goal"]', wrong_action)


def test_decisions_per_second_reported(avoid_model, avoid_policy):
    r = verify_statistical(avoid_model, AVOID_PROP, avoid_policy, StatisticalOptions(method="wilson", runs=500))
    d = r.to_json()
    for key in ("estimate", "interval", "confidence", "method", "runs", "undecided", "stalled", "seed", "timings"):
        assert key in d
    assert r.decisions > 500 and d["timings"]["simulate"] > 0


def test_runs_with_a_method_that_chooses_its_own_is_refused():
    from rlverify.statistical.stats import StatisticsError

    with pytest.raises(StatisticsError, match="--runs"):
        StatisticalOptions(method="okamoto", runs=100).validate()


def test_sprt_does_not_decide_on_undecided_runs(avoid_model, avoid_policy, avoid_exact):
    # with max_steps 1 every run is undecided: no evidence either way, so no decision may be taken
    r = verify_statistical(
        avoid_model,
        AVOID_PROP,
        avoid_policy,
        StatisticalOptions(
            method="sprt", threshold=0.5, indifference=0.05, max_runs=3000, simulation=SimulationOptions(max_steps=1, seed=3)
        ),
    )
    assert r.undecided == r.runs == 3000
    assert r.decision is None and r.satisfied is None
    assert r.confidence == pytest.approx(0.95)  # 1 - max(alpha, beta)


@pytest.mark.parametrize("method", ["okamoto", "wilson"])
def test_coverage_of_the_other_intervals(stall_model, method):
    """As above for Okamoto (epsilon 0.05, delta 0.1: 600 runs) and Wilson (200 runs): coverage not
    significantly below 1 - delta over 200 seeds."""
    from rlverify import verify_exact

    policy = CallablePolicy(lambda x: np.tile([0.7, 0.3], (len(x), 1)), ["s"], ["a", "b"])
    exact = verify_exact(stall_model, 'P=? [F "goal"]', policy).value
    env, prop, _ = prepare(stall_model, 'P=? [F "goal"]')
    seeds, delta, covered = 200, 0.1, 0
    for seed in range(seeds):
        opts = (
            StatisticalOptions(method="okamoto", epsilon=0.05, delta=delta, simulation=SimulationOptions(seed=seed))
            if method == "okamoto"
            else StatisticalOptions(method="wilson", runs=200, delta=delta, simulation=SimulationOptions(seed=seed))
        )
        r = verify_statistical(env, prop.text, policy, opts)
        covered += r.interval[0] <= exact <= r.interval[1]
    assert binomtest(covered, seeds, 1 - delta, alternative="less").pvalue > 1e-3, covered


def test_duplicate_action_labels_are_refused(tmp_path):
    from rlverify.errors import PolicyError
    from rlverify.models import build_explicit, load_model

    path = tmp_path / "dup.prism"
    path.write_text(
        "mdp\nmodule m\n  x : [0..2] init 0;\n  [a] x=0 -> (x'=1);\n  [a] x=0 -> (x'=2);\n"
        '  [a] x>0 -> true;\nendmodule\nlabel "goal" = x=2;\n'
    )
    mdp, _ = build_explicit(load_model(path), None)
    # by default the two 'a' commands are addressed by their command names
    env, _, _ = prepare(mdp, 'P=? [F "goal"]')
    assert env.actions == ("m:1", "m:2", "m:3")  # m:3 is the only choice of x>0, but still one of label a
    # a policy over the label cannot pick one: refused, naming the commands to use
    with pytest.raises(PolicyError, match=r"choices labelled 'a' \(commands m:1, m:2\)"):
        ExplicitEnv(mdp, actions=("a",))


def test_sprt_decides_correctly_with_a_few_undecided_runs(avoid_model, avoid_policy, avoid_exact):
    # max_steps 80 < 100 leaves some runs of F<=100 open (about 1 in 8); P = 0.895 >= 0.795 + 0.02
    # is still accepted, because it holds whichever way the open runs end
    r = verify_statistical(
        avoid_model,
        AVOID_PROP,
        avoid_policy,
        StatisticalOptions(
            method="sprt",
            threshold=avoid_exact - 0.1,
            indifference=0.02,
            max_runs=20_000,
            simulation=SimulationOptions(max_steps=80, seed=5),
        ),
    )
    assert 0 < r.undecided < r.runs
    assert r.decision == "H0" and r.satisfied is True
