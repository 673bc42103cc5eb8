"""Big or odd numbers from the user are refused with exit 2 and one line naming the option, or computed within
bounded memory; never an out-of-memory kill, a hang or a traceback (issue 21)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.errors import OptionError, StatisticsError
from rlverify.policies import CallablePolicy
from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical
from tests.small_models import UP_STAY

MODEL = UP_STAY


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    model, policy = tmp_path / "m.prism", tmp_path / "p.py"
    model.write_text(MODEL)
    policy.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(s):\n    return np.tile([1.0, 0.0], (len(s), 1))\n"
    )
    return model, policy


def simulate(capsys, files, *args: str) -> tuple[int, str, str]:
    model, policy = files
    code = main(["simulate", str(model), "-p", 'P=? [F<=2 "top"]', "--policy", f"{policy}:pi", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("runs", ["1e13", "10000000000000"])
def test_runs_beyond_the_guard_are_refused_with_the_figures(capsys, files, runs):
    code, out, err = simulate(capsys, files, "--runs", runs)
    assert code == 2 and out == ""
    assert "10,000,000,000,000 runs" in err and "--run-limit" in err and "days" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("runs", ["1.5", "0", "-3", "nan", "inf", "many"])
def test_runs_must_be_a_positive_whole_number(capsys, files, runs):
    with pytest.raises(SystemExit) as exc:
        simulate(capsys, files, "--runs", runs)
    assert exc.value.code == 2
    assert f"--runs: expected a positive whole number, got '{runs}'" in capsys.readouterr().err


def test_epsilon_needing_too_many_runs_is_refused(capsys, files):
    code, _out, err = simulate(capsys, files, "--epsilon", "1e-6")
    assert code == 2 and "--epsilon 1e-06" in err and "--run-limit" in err


def test_runs_as_1e_notation_accepted_and_exact(capsys, files):
    # P(F<=2 top) = 0 from x=0 (three steps needed): all 2000 runs false
    code, out, _err = simulate(capsys, files, "--runs", "2e3", "--json")
    assert code == 0 and json.loads(out)["result"]["runs"] == 2000 and json.loads(out)["result"]["successes"] == 0


def test_memory_does_not_grow_with_the_runs(files):
    from rlverify.models import load_model

    model = load_model(files[0])
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["x"], ["up", "stay"])

    def peak(runs: int) -> int:
        tracemalloc.start()
        r = verify_statistical(
            model,
            'P=? [F<=1 "top"]',
            policy,
            StatisticalOptions(method="clopper-pearson", runs=runs, simulation=SimulationOptions(batch_size=2000)),
        )
        assert r.runs == runs and r.successes == 0
        size = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size

    peak(2000)  # first use: imports, caches
    small, large = peak(16_000), peak(400_000)
    assert large < small + 1_000_000, (small, large)  # per-run outcomes are not kept (400k runs: > 4 MB)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"max_steps": 10**12}, "--max-steps 1,000,000,000,000: more than 10,000,000"),
        ({"max_steps": float("inf")}, "--max-steps"),
        ({"max_steps": 2.5}, "--max-steps"),
        ({"batch_size": 10**12}, "--batch-size"),
    ],
)
def test_simulation_guards(kw, match):
    with pytest.raises(OptionError, match=match):
        SimulationOptions(**kw).validate()


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"runs": 10**13, "method": "wilson"}, "--run-limit"),
        ({"runs": 2.5, "method": "wilson"}, "--runs"),
        ({"runs": True, "method": "wilson"}, "--runs"),
        ({"max_runs": 10**12, "method": "sprt", "threshold": 0.5}, "max_runs"),
    ],
)
def test_statistical_guards(files, kw, match):
    from rlverify.models import load_model

    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["x"], ["up", "stay"])
    with pytest.raises(StatisticsError, match=match):
        verify_statistical(load_model(files[0]), 'P=? [F<=1 "top"]', policy, StatisticalOptions(**kw))


def test_okamoto_interval_is_rounded_outward_so_the_verdict_is_the_intervals():
    from fractions import Fraction

    from rlverify.statistical.verify import okamoto_interval, threshold_verdict

    # 507/966 - 0.015 in floats is 0.5098447204968944, one ulp above the exact value: read naively, P >= that
    # threshold would be "yes" although the exact interval's lower end is below it
    naive = 507 / 966 - 0.015
    assert Fraction(naive) > Fraction(507, 966) - Fraction(0.015)
    lo, hi = okamoto_interval(507, 0, 966, 0.015)
    assert Fraction(lo) <= Fraction(507, 966) - Fraction(0.015) < Fraction(naive)
    assert threshold_verdict(">=", naive, lo, hi) is None
    rng = np.random.default_rng(0)
    for _ in range(2000):
        n = int(rng.integers(1, 10_000))
        k = int(rng.integers(0, n + 1))
        u = int(rng.integers(0, n - k + 1))
        eps = float(rng.choice([0.001, 0.005, 0.01, 0.015, 0.02, 0.05, 0.1]))
        lo, hi = okamoto_interval(k, u, n, eps)
        assert Fraction(lo) <= max(Fraction(0), Fraction(k, n) - Fraction(eps))
        assert Fraction(hi) >= min(Fraction(1), Fraction(k + u, n) + Fraction(eps))
        assert hi - lo <= (k + u) / n - k / n + 2 * eps + 1e-15  # outward by at most an ulp at each end


def test_undecided_runs_are_in_the_results_warnings(tmp_path):
    from rlverify.models import load_model

    path = tmp_path / "loop.prism"  # from s0, b reaches the goal; the policy always takes a and cycles s0 <-> s1
    path.write_text(
        "mdp\nmodule m\n  s : [0..2] init 0;\n  [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=0);\n  [a] s=1 -> (s'=0);\n"
        "  [b] s=0 -> (s'=2);\n  [a] s=2 -> (s'=2);\nendmodule\nlabel \"goal\" = s=2;\n"
    )
    policy = CallablePolicy(lambda x: np.tile([1.0, 0.0], (len(x), 1)), ["s"], ["a", "b"])
    r = verify_statistical(
        load_model(path),
        'P=? [F "goal"]',
        policy,
        StatisticalOptions(method="clopper-pearson", runs=50, simulation=SimulationOptions(max_steps=20)),
    )
    assert r.undecided == 50 and r.hopeless == 0  # the goal stays reachable (by b): graph analysis cannot decide
    assert any("50 of 50 runs were still undecided after --max-steps 20" in w for w in r.warnings)


def test_restart_refuses_a_split_product_beyond_exact_weights(tmp_path):
    """100 ** 11 > 2 ** 53: a target hit's weight prod k_j would wrap in int64 (a wrong estimate)."""
    from rlverify.models import load_model
    from rlverify.statistical.splitting import SplittingOptions, verify_splitting

    path = tmp_path / "chain.prism"
    path.write_text(
        "mdp\nmodule m\n  x : [0..12] init 0;\n  [up] x<12 -> 0.5:(x'=x+1) + 0.5:(x'=0);\n"
        '  [up] x=12 -> (x\'=12);\nendmodule\nlabel "goal" = x=12;\n'
    )
    policy = CallablePolicy(lambda x: np.ones((len(x), 1)), ["x"], ["up"])
    options = SplittingOptions(
        method="restart",
        importance="x",
        levels=tuple(float(i) for i in range(1, 12)),
        splits=(100,) * 11,
        effort=10,
        repetitions=2,
    )
    with pytest.raises(OptionError, match=r"multiply to 1e\+22, more than 9\.01e\+15"):
        verify_splitting(load_model(path), 'P=? [F "goal"]', policy, options)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"effort": 10**7, "repetitions": 20}, "runs per stage, more than max_live"),
        ({"effort": 1.5}, "--effort"),
        ({"repetitions": float("nan")}, "--repetitions"),
        ({"levels": (1.0, float("nan"))}, "--levels"),
        ({"method": "restart", "levels": (1.0,), "splits": (float("inf"),)}, "splits"),
    ],
)
def test_splitting_guards(kw, match):
    from rlverify.statistical.splitting import SplittingOptions

    with pytest.raises(OptionError, match=match):
        SplittingOptions(**kw).validate()


def test_shown_interval_is_rounded_outward():
    from rlverify.cli.simulate import shown_interval

    # 0.4999996 shown as 0.500000 would contradict an "undecided" verdict for P >= 0.5
    assert shown_interval((0.4999996, 0.7000004)) == "[0.499999, 0.700001]"
    assert shown_interval((0.0, 1.0)) == "[0.000000, 1.000000]"


def test_heatmap_runs_beyond_the_guard_refused(capsys, tmp_path):
    code = main(["heatmap", "racetrack-barto-small-v1", "--runs", "1e9", "--out", str(tmp_path / "h.json")])
    err = capsys.readouterr().err
    assert code == 2 and "start cells x 1,000,000,000 runs" in err and "--run-limit" in err
    assert not (tmp_path / "h.json").exists()


@pytest.mark.parametrize("epsilon", ["1e-300", "1e-160", "1e-10"])
def test_a_tiny_epsilon_is_refused_not_a_crash(capsys, files, epsilon):
    code, out, err = simulate(capsys, files, "--epsilon", epsilon)
    assert code == 2 and out == "" and f"epsilon {float(epsilon):g} is too small" in err


def test_intervals_stay_finite_for_a_tiny_delta():
    from scipy.stats import beta

    from rlverify.statistical.stats import clopper_pearson, wilson

    lo, hi = wilson(5, 10, 1e-300)
    assert 0.0 < lo < 0.5 < hi < 1.0  # z = 37.0: a wide but finite interval (ppf(1 - delta/2) would be inf)
    lo, hi = clopper_pearson(5, 10, 1e-300)
    assert 0.0 < lo < 0.5 < hi <= 1.0 and lo == pytest.approx(float(beta.ppf(5e-301, 5, 6)))


def test_run_limit_with_rare_is_refused_not_ignored(capsys, files):
    code, _out, err = simulate(capsys, files, "--rare", "splitting", "--run-limit", "5")
    assert code == 2 and "--run-limit" in err
