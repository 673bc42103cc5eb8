"""Continuous systems simulated by the statistical engine (the same step as every other model), against a closed form.

The system: ``x' = x + 0.1 u`` with ``u = 1`` for ``right`` and 0 for ``stay``, ``x0`` uniform in ``[0.6, 1.1]``,
unsafe ``x >= 1``. The policy takes ``right`` with probability 0.3 whatever the state, so after ``r`` of ``k`` steps
to the right ``x = x0 + 0.1 r`` (non-decreasing: "unsafe within k steps" is "unsafe after k steps"), and
``P(unsafe within k) = E[P(x0 >= 1 - 0.1 R)] = E[min(1, (0.1 + 0.1 R) / 0.5)]`` with ``R ~ Binomial(k, 0.3)``:
``0.2 + 0.2 E[R] = 0.2 + 0.06 k`` for ``k <= 4``.
"""

from __future__ import annotations

import json
from fractions import Fraction
from math import comb

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.models.continuous import ContinuousEnv, declare, unsafe_property
from rlverify.policies import CallablePolicy
from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

DECLARATION = {
    "name": "drift",
    "variables": ["x"],
    "domain": {"x": [0.0, 2.0]},
    "actions": ["stay", "right"],
    "action_values": {"u": {"stay": 0, "right": 1}},
    "initial": {"default": {"x": [0.6, 1.1]}, "low": {"x": [0.0, 0.5]}},
    "unsafe": ["x >= 1"],
    "horizon": 4,
    "pieces": [{"next": {"x": "x + 0.1*u"}}],
}

SYSTEM_FILE = f"SYSTEM = {DECLARATION!r}\n"
POLICY_FILE = """import numpy as np
FEATURES = ["x"]
ACTIONS = ["stay", "right"]
def pi(x):
    return np.tile([0.7, 0.3], (len(x), 1))
"""


def closed_form(
    k: int, right: Fraction = Fraction(3, 10), lo: Fraction = Fraction(6, 10), hi: Fraction = Fraction(11, 10)
) -> Fraction:
    """P(x0 + R/10 >= 1) for x0 uniform in [lo, hi], R ~ Binomial(k, right), by summing over R (exact rationals)."""
    total = Fraction(0)
    for r in range(k + 1):
        threshold = 1 - Fraction(r, 10)
        p_start = min(Fraction(1), max(Fraction(0), (hi - threshold) / (hi - lo)))
        total += comb(k, r) * right**r * (1 - right) ** (k - r) * p_start
    return total


def test_the_closed_form_itself():
    assert closed_form(4) == Fraction(44, 100)  # 0.2 + 0.06 k
    assert closed_form(0) == Fraction(1, 5)  # the start state counts: x0 >= 1 with probability 0.1 / 0.5
    assert closed_form(4, lo=Fraction(0), hi=Fraction(1, 2)) == 0  # from [0, 0.5], 4 steps of 0.1 never reach 1


@pytest.fixture(scope="module")
def system():
    return declare(DECLARATION)


@pytest.fixture(scope="module")
def policy():
    return CallablePolicy(lambda x: np.tile([0.7, 0.3], (len(x), 1)), ["x"], ["stay", "right"], name="0.3 right")


@pytest.mark.parametrize("k", [0, 2, 4])
def test_failure_probability_within_the_horizon_is_the_closed_form(system, policy, k):
    r = verify_statistical(
        system,
        unsafe_property(system, k),
        policy,
        StatisticalOptions(method="clopper-pearson", runs=40_000, delta=1e-6, simulation=SimulationOptions(seed=1)),
    )
    exact = float(closed_form(k))
    assert r.property == f'P=? [F<={k} "unsafe"]' and r.runs == 40_000 and r.undecided == 0 and r.stalled == 0
    assert r.interval[0] <= exact <= r.interval[1]
    assert r.interval[1] - r.interval[0] < 0.03  # informative: the closed form is pinned down
    assert r.decisions <= k * (r.runs - r.successes) + max(k - 1, 0) * r.successes  # a run stops once unsafe
    assert any("start uniformly at random in the initial region 'default' (x in [0.6, 1.1])" in w for w in r.warnings)


def test_the_start_states_are_drawn_from_the_chosen_region(system, policy):
    # from [0, 0.5] the unsafe set is out of reach within 4 steps; a run that started on a corner of 'default'
    # (the env's initial_states) or outside 'low' would show up as a failure
    env = ContinuousEnv(system, region="low")
    r = verify_statistical(
        env,
        unsafe_property(system).text,
        policy,
        StatisticalOptions(method="clopper-pearson", runs=5_000, simulation=SimulationOptions(seed=2)),
    )
    assert r.successes == 0 and r.runs == 5_000
    assert np.array_equal(env.initial_states(), [[0.0], [0.5]])


def test_unbounded_reachability_is_decided_by_the_dynamics(system, policy):
    # F "unsafe" without a bound: every run drifts right eventually (p = 0.3 per step), so all become unsafe
    r = verify_statistical(
        system,
        'P=? [F "unsafe"]',
        policy,
        StatisticalOptions(method="clopper-pearson", runs=2_000, simulation=SimulationOptions(seed=3)),
    )
    assert r.successes == r.runs == 2_000 and r.undecided == 0


def test_same_seed_same_result_and_batching_does_not_matter(system, policy):
    def once(batch):
        return verify_statistical(
            system,
            unsafe_property(system),
            policy,
            StatisticalOptions(method="wilson", runs=3_000, simulation=SimulationOptions(seed=5, batch_size=batch)),
        )

    a, b = once(3_000), once(128)
    assert (a.successes, a.decisions) == (b.successes, b.decisions)


def test_pmax_on_a_continuous_system_is_refused_with_the_reading(system, policy):
    from rlverify.errors import PropertyError

    with pytest.raises(
        PropertyError,
        match=r"Pmax is the largest probability over the start states.*"
        r'P=\? \[F<=4 "unsafe"\]',
    ):
        verify_statistical(system, 'Pmax=? [F<=4 "unsafe"]', policy)
    with pytest.raises(PropertyError, match=r"unknown label \"crash\"; labels: 'unsafe'"):
        verify_statistical(system, 'P=? [F "crash"]', policy)


# ------------------------------------------------------------------------------------------------
# the command line: rlverify simulate FILE.py:NAME and a continuous benchmark id


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "drift.py").write_text(SYSTEM_FILE)
    (tmp_path / "pi.py").write_text(POLICY_FILE)
    return f"{tmp_path / 'drift.py'}:SYSTEM", f"{tmp_path / 'pi.py'}:pi"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("prop,k", [(None, 4), ("unsafe", 4), ('P=? [F<=2 "unsafe"]', 2)])
def test_simulate_a_declared_system(capsys, files, prop, k):
    system, pi = files
    args = ["simulate", system, "--policy", pi, "--runs", "40000", "--delta", "1e-6", "--json"]
    code, out, err = cli(capsys, *args, *(["-p", prop] if prop else []))
    assert code == 0, err
    r = json.loads(out)["result"]
    exact = float(closed_form(k))
    assert r["property"] == f'P=? [F<={k} "unsafe"]' and r["model"] == system
    assert r["interval"][0] <= exact <= r["interval"][1] and r["interval"][1] - r["interval"][0] < 0.03
    assert "start uniformly at random" in err  # the reading is said


def test_simulate_refuses_pmax_on_a_continuous_system(capsys, files):
    system, pi = files
    code, _, err = cli(capsys, "simulate", system, "--policy", pi, "-p", 'Pmax=? [F<=4 "unsafe"]', "--runs", "10")
    assert code == 2 and "rlverify abstract bounds the largest" in " ".join(err.split())


def test_simulate_a_continuous_benchmark(capsys):
    code, out, err = cli(capsys, "simulate", "acc-v1", "--runs", "300", "--json")
    assert code == 0, err
    r = json.loads(out)["result"]
    assert r["property"] == 'P=? [F<=7 "unsafe"]' and r["runs"] == 300 and r["model"].startswith("acc-v1")
    # a run that never gets unsafe takes exactly the 7 steps of the horizon, one that does fewer
    assert r["decisions"] <= 7 * r["runs"] and (r["successes"] > 0 or r["decisions"] == 7 * r["runs"])


def test_simulate_without_a_property_names_the_option(capsys):
    code, _, err = cli(capsys, "simulate", "running-example-v1", "--runs", "10")
    assert code == 2 and "--property" in err


def test_fixed_effort_splitting_runs_a_continuous_system(system, policy):
    from rlverify.statistical import SplittingOptions, verify_splitting

    r = verify_splitting(
        system,
        unsafe_property(system),
        policy,
        SplittingOptions(importance="x", levels=(0.8, 0.9), effort=4000, repetitions=10, simulation=SimulationOptions(seed=4)),
    )
    assert r.interval[0] <= float(closed_form(4)) <= r.interval[1] and r.interval[1] - r.interval[0] < 0.05


def test_restart_refuses_a_continuous_initial_region(system, policy):
    from rlverify.errors import OptionError
    from rlverify.statistical import SplittingOptions, verify_splitting

    with pytest.raises(OptionError, match=r"RESTART needs finitely many start states.*--rare splitting"):
        verify_splitting(
            system,
            unsafe_property(system),
            policy,
            SplittingOptions(method="restart", importance="x", levels=(0.8, 0.9), effort=100, repetitions=2),
        )


def test_given_start_states_replace_the_region_and_its_note(system, policy):
    # from x0 = 0.95 one step to the right is enough: P(unsafe within 4) = 1 - 0.7^4
    r = verify_statistical(
        system,
        unsafe_property(system),
        policy,
        StatisticalOptions(method="clopper-pearson", runs=20_000, delta=1e-6, simulation=SimulationOptions(seed=6)),
        starts=np.array([[0.95]]),
    )
    assert r.interval[0] <= 1 - 0.7**4 <= r.interval[1] and r.interval[1] - r.interval[0] < 0.03
    assert not any("start uniformly at random" in w for w in r.warnings)
