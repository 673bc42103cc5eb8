"""Fixed-effort importance splitting, checked against independent values: the gambler's-ruin closed form (exact
rationals), the exact engine (Storm on the policy-induced chain), and coverage/unbiasedness over many seeds."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binomtest

from rlverify.errors import OptionError, PropertyError
from rlverify.policies import CallablePolicy
from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.importance import compile_importance
from rlverify.statistical.splitting import SplittingOptions, verify_splitting
from rlverify.statistical.verify import prepare
from tests.statistical.test_simulation import STALL_MODEL  # s0 -a-> s1 | s2; s1 only a (loop); s2 only b (goal)

# A birth-death chain on 0..N started in 1, as an MDP: action "slow" moves up w.p. 1/5, "fast" w.p. 2/5 (else
# down); the policy picks each with probability 1/2, so the chain moves up w.p. 3/10. 0 and N are absorbing.
BIRTH_DEATH = """mdp
const int N;
module bd
  i : [0..N] init 1;
  [slow] i>0 & i<N -> 0.2:(i'=i+1) + 0.8:(i'=i-1);
  [fast] i>0 & i<N -> 0.4:(i'=i+1) + 0.6:(i'=i-1);
  [slow] i=0 | i=N -> true;
endmodule
label "top" = i=N;
"""


def ruin(n: int, up: Fraction = Fraction(3, 10)) -> Fraction:
    """P(reach N before 0 | start 1) of the walk moving up w.p. ``up``: (r - 1) / (r^N - 1), r = (1-up)/up."""
    r = (1 - up) / up
    return (r - 1) / (r**n - 1)


@pytest.fixture(scope="module")
def half_half():
    return CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["i"], ["slow", "fast"], name="1/2-1/2")


@pytest.fixture(scope="module")
def birth_death(tmp_path_factory):
    from rlverify.models import load_model

    path = tmp_path_factory.mktemp("bd") / "bd.prism"
    path.write_text(BIRTH_DEATH)
    return lambda n: load_model(path, f"N={n}")


def test_closed_form_itself():
    # the formula on a case small enough to check by hand: N=2, up 3/10 -> 3/10 (one step up)
    assert ruin(2) == Fraction(3, 10)
    assert float(ruin(17)) == pytest.approx(7.4017e-7, rel=1e-4)


@pytest.mark.parametrize("levels", [tuple(range(2, 17)), None], ids=["levels-given", "levels-from-pilot"])
def test_birth_death_matches_gamblers_ruin(birth_death, half_half, levels):
    exact = float(ruin(17))  # 7.4e-7
    r = verify_splitting(
        birth_death(17),
        'P=? [F "top"]',
        half_half,
        SplittingOptions(importance="i", levels=levels, effort=200, repetitions=10, simulation=SimulationOptions(seed=5)),
    )
    assert r.interval[0] <= exact <= r.interval[1]
    assert abs(r.estimate - exact) <= 4 * r.std_error and r.relative_error < 0.25
    assert r.repetitions == 10 and r.effort == 200 and r.zero_repetitions == 0 and r.undecided == 0
    assert len(r.level_probabilities) == len(r.levels) + 1 and r.levels_from == ("given" if levels else "pilot")
    if levels is not None:
        # stage j goes from level j+1 to j+2 before 0: P = (r^(j+1) - 1) / (r^(j+2) - 1) (gambler's ruin again)
        q = Fraction(7, 3)
        for j, p in enumerate(r.level_probabilities[1:-1], start=1):
            want = float((q ** (j + 1) - 1) / (q ** (j + 2) - 1))
            assert abs(p - want) < 5 * math.sqrt(want * (1 - want) / (200 * 10))
    # crude MC needs (1-p)/(p re^2) runs (each of >= 1 decision) for the same relative error re: far more
    assert 10 * r.decisions < (1 - exact) / (exact * r.relative_error**2)


def test_restart_matches_gamblers_ruin(birth_death, half_half):
    """RESTART on N=17 with given factors: the same closed form; every main trial and copy is accounted for."""
    exact = float(ruin(17))
    levels = tuple(range(2, 17))
    r = verify_splitting(
        birth_death(17),
        'P=? [F "top"]',
        half_half,
        SplittingOptions(
            method="restart",
            importance="i",
            levels=levels,
            splits=(2,) * 15,
            effort=300,
            repetitions=20,
            simulation=SimulationOptions(seed=5),
        ),
    )
    assert r.method == "RESTART" and r.splits == (2,) * 15 and r.pilot_decisions == 0
    assert r.interval[0] <= exact <= r.interval[1] and abs(r.estimate - exact) <= 4 * r.std_error
    # the estimate is (target hits counted with their copies) / (main trials * 2^15)
    assert r.estimate == pytest.approx(r.level_hits[-1] / (300 * 20 * 2**15))
    with pytest.raises(OptionError, match=r"live runs .* the splitting factors .* are too large"):
        verify_splitting(
            birth_death(17),
            'P=? [F "top"]',
            half_half,
            SplittingOptions(
                method="restart", importance="i", levels=levels, splits=(9,) * 15, effort=300, repetitions=2, max_live=100_000
            ),
        )
    with pytest.raises(OptionError, match="one splitting factor per level"):
        SplittingOptions(method="restart", levels=(1, 2), splits=(2,)).validate()


@pytest.mark.parametrize("method", ["splitting", "restart"])
def test_several_start_states_at_different_levels(birth_death, half_half, method):
    """Starts i=1 and i=5 (picked uniformly per run) with levels 2..9: the mean of the two gambler's-ruin values.
    RESTART must start every main trial below its first level (review finding: levels dropped for one sampled
    start only under-counted the hits of runs from the higher one: 0.043 for a true 0.102)."""
    model = birth_death(10)
    env, _, _ = prepare(model, 'P=? [F "top"]', actions=half_half.actions)
    col = env.model.variables.index("i")
    starts = np.array([int(np.flatnonzero(env.model.valuations[:, col] == i)[0]) for i in (1, 5)])
    r_ = Fraction(7, 3)  # (1 - up) / up with up = 3/10
    exact = float(sum((r_**i - 1) / (r_**10 - 1) for i in (1, 5)) / 2)
    for seed in (0, 2):
        r = verify_splitting(
            model,
            'P=? [F "top"]',
            half_half,
            SplittingOptions(
                method=method,
                importance="i",
                levels=tuple(range(2, 10)),
                effort=400,
                splits=(2,) * 8 if method == "restart" else None,
                repetitions=20,
                simulation=SimulationOptions(seed=seed),
            ),
            starts=starts,
        )
        assert abs(r.estimate - exact) <= 4 * r.std_error, (seed, r.estimate, exact, r.std_error)
        if method == "restart":
            assert r.levels == tuple(float(x) for x in range(6, 10))  # those below the higher start are dropped
            assert any("dropped levels" in w for w in r.warnings)


def test_an_infinite_importance_outside_the_target_is_refused(birth_death, half_half):
    """+inf is the target's level value: an importance that overflows to +inf elsewhere would count as reaching it
    (review finding: 0.24 for a true 0.03)."""
    blow_up = lambda obs: np.where(obs[:, 0] >= 5, np.inf, obs[:, 0])  # noqa: E731
    for method in ("splitting", "restart"):
        with pytest.raises(OptionError, match=r"is \+inf in some states"):
            verify_splitting(
                birth_death(10),
                'P=? [F "top"]',
                half_half,
                SplittingOptions(
                    method=method,
                    importance=blow_up,
                    levels=(2, 4),
                    effort=50,
                    repetitions=2,
                    splits=(2, 2) if method == "restart" else None,
                ),
            )
    # an expression that overflows is refused by the expression language itself (naming the subexpression)
    for text, match in (
        ("i**600", "overflows a float"),
        ("1e300 * i * 1e300", "overflows a float"),
        ("*".join(["i"] * 600), "more than 200"),
    ):
        with pytest.raises(OptionError, match=match):
            verify_splitting(
                birth_death(10),
                'P=? [F "top"]',
                half_half,
                SplittingOptions(importance=text, levels=(1e10,), effort=50, repetitions=2),
            )


def test_same_seed_same_result_whatever_the_batch(birth_death, half_half):
    opts = SplittingOptions(importance="i", levels=(3, 6, 9), effort=100, repetitions=4, simulation=SimulationOptions(seed=11))
    a = verify_splitting(birth_death(12), 'P=? [F "top"]', half_half, opts)
    b = verify_splitting(
        birth_death(12),
        'P=? [F "top"]',
        half_half,
        SplittingOptions(
            importance="i", levels=(3, 6, 9), effort=100, repetitions=4, simulation=SimulationOptions(seed=11, batch_size=37)
        ),
    )
    c = verify_splitting(
        birth_death(12),
        'P=? [F "top"]',
        half_half,
        SplittingOptions(importance="i", levels=(3, 6, 9), effort=100, repetitions=4, simulation=SimulationOptions(seed=12)),
    )
    assert a.repetition_estimates == b.repetition_estimates and a.decisions == b.decisions
    assert a.repetition_estimates != c.repetition_estimates


def t_interval(estimates: np.ndarray, delta: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Student-t intervals of the rows of ``estimates`` (groups of independent repetitions), computed here."""
    from scipy.stats import t

    k = estimates.shape[1]
    half = t.ppf(1 - delta / 2, k - 1) * estimates.std(axis=1, ddof=1) / math.sqrt(k)
    return estimates.mean(axis=1) - half, estimates.mean(axis=1) + half


@pytest.mark.parametrize("method", ["splitting", "restart"])
def test_coverage_and_unbiasedness(birth_death, half_half, method):
    """N=10 (p = 2.8e-4, 8 levels, 100 runs per level or main trials): 3,000 independent repetitions in one call,
    read as 300 estimations of 10 repetitions each. Their 95 % t-intervals cover the closed form in at least 91 %
    of them (P < 1e-3 if the coverage were 0.95 by chance below; fails for a true coverage of 0.88), and the mean of
    all repetitions is within 4 standard errors of it (unbiased)."""
    exact = float(ruin(10))
    r = verify_splitting(
        birth_death(10),
        'P=? [F "top"]',
        half_half,
        SplittingOptions(
            method=method,
            importance="i",
            levels=tuple(range(2, 10)),
            effort=100,
            repetitions=3000,
            simulation=SimulationOptions(seed=1),
        ),
    )
    est = np.array(r.repetition_estimates)
    lo, hi = t_interval(est.reshape(300, 10))
    covered = int(((lo <= exact) & (exact <= hi)).sum())
    assert covered >= 273, f"covered {covered} of 300"
    assert binomtest(covered, 300, 0.95).pvalue > 1e-3 or covered > 285
    assert abs(est.mean() - exact) < 4 * est.std(ddof=1) / math.sqrt(len(est)), (est.mean(), exact)
    # the API's own interval is this t-interval over its repetitions
    assert r.estimate == pytest.approx(est.mean(), rel=1e-12)
    assert r.interval == pytest.approx(tuple(x[0] for x in t_interval(est[None, :])), rel=1e-9)


AVOID_PROP = "P=? [F<=15 COLLISION=true]"
MOVES = np.array([(0, 1), (1, 0), (0, -1), (-1, 0)])


@pytest.fixture(scope="module")
def avoid_one_obstacle(tmp_path_factory):
    """Avoid 6x6 with one obstacle, slickness 0.1; the policy flees (logits 3 x the Manhattan distance after the move)."""
    from rlverify.benchmarks.avoid import prism_source
    from rlverify.models import load_model

    path = tmp_path_factory.mktemp("avoid") / "avoid1.prism"
    path.write_text(prism_source(5, 5, 0.1, obstacles=1))

    def flee(obs):
        x, y, ox, oy = obs[:, 0], obs[:, 1], obs[:, 2], obs[:, 3]
        nx = np.clip(x[:, None] + MOVES[None, :, 0], 0, 5)
        ny = np.clip(y[:, None] + MOVES[None, :, 1], 0, 5)
        return 3.0 * (np.abs(nx - ox[:, None]) + np.abs(ny - oy[:, None]))

    policy = CallablePolicy(
        flee, ["x", "y", "obstacle1_x", "obstacle1_y"], ["north", "east", "south", "west"], output="logits", name="flee"
    )
    return load_model(path), policy


@pytest.mark.parametrize(
    "importance,method",
    [("-abs(x-obstacle1_x)-abs(y-obstacle1_y)", "splitting"), ("auto", "splitting"), ("auto", "restart")],
    ids=["expression", "auto", "auto-restart"],
)
def test_avoid_matches_exact_engine(avoid_one_obstacle, importance, method):
    from rlverify import verify_exact

    model, policy = avoid_one_obstacle
    exact = verify_exact(model, AVOID_PROP, policy).value
    assert 1e-4 < exact < 1e-3  # 6.6e-4: rare enough for splitting to matter
    r = verify_splitting(
        model,
        AVOID_PROP,
        policy,
        SplittingOptions(
            method=method, importance=importance, effort=200, repetitions=100, simulation=SimulationOptions(seed=3)
        ),
    )
    # unbiased: within 4 standard errors of Storm's value (P > 0.9999 for a normal mean); the 95 % interval covers
    # it in 95 of 100 seeds (measured over 1,000 repetitions: 0.96 expression, 0.95 auto), here at seed 3
    assert abs(r.estimate - exact) <= 4 * r.std_error and r.relative_error < 0.1
    assert r.interval[0] <= exact <= r.interval[1]
    assert len(r.levels) >= 2 and r.pilot_decisions > 0
    assert (r.splits is None) == (method == "splitting")


def test_auto_importance_is_the_graph_distance(birth_death):
    from rlverify.statistical.importance import graph_distance_importance

    env, prop, _ = prepare(birth_death(6), 'P=? [F "top"]')
    i = env.model.valuations[:, list(env.model.variables).index("i")]
    d = graph_distance_importance(env, prop)
    want = np.where(i == 0, -np.inf, -(6 - i))  # 0 is absorbing: the target is unreachable from it
    assert np.array_equal(d, want)


def test_expression_language():
    f = compile_importance("max(x, y) - (z = 1) + (3 if x > 1 else 0) + abs(-y) / 2", ["x", "y", "z"])
    obs = np.array([[0, 2, 1], [4, 1, 0]], dtype=float)
    assert f(obs).tolist() == [2 - 1 + 0 + 1, 4 - 0 + 3 + 0.5]
    with pytest.raises(OptionError, match=r"unknown variable 'xx' \(did you mean 'x'\?\); the variables: x, y, z"):
        compile_importance("xx + 1", ["x", "y", "z"])
    with pytest.raises(OptionError, match=r"'x\.real' is not allowed"):
        compile_importance("x.real", ["x"])
    with pytest.raises(OptionError, match="unknown function 'exp'; the functions: abs, min, max"):
        compile_importance("exp(x)", ["x"])
    with pytest.raises(OptionError, match="syntax error"):
        compile_importance("x +", ["x"])


@pytest.mark.parametrize("unavailable,value", [("stall", 0.1 + 0.9 * 0.5 * 0.1), ("renormalize", 0.1 + 0.9 * 0.5)])
def test_stalls_and_renormalisation_as_the_simulator(tmp_path, unavailable, value):
    """The policy picks a w.p. 0.9, b w.p. 0.1. Stall: s0 -b-> goal (0.1); s0 -a-> s2 (0.45) then b (0.1) -> goal,
    a stalls; s1 never reaches the goal: P = 0.145. Renormalize: s2 takes b, s1 surely loops: P = 0.1 + 0.45 = 0.55.
    One stage (no levels) is crude MC per repetition."""
    from rlverify.models import load_model

    path = tmp_path / "stall.prism"
    path.write_text(STALL_MODEL)
    pol = CallablePolicy(lambda x: np.tile([0.9, 0.1], (len(x), 1)), ["s"], ["a", "b"])
    r = verify_splitting(
        load_model(path),
        'P=? [F "goal"]',
        pol,
        SplittingOptions(
            importance="s",
            levels=(),
            effort=1000,
            repetitions=4,
            simulation=SimulationOptions(seed=2, unavailable=unavailable),
        ),
    )
    assert abs(r.estimate - value) < 4 * math.sqrt(value * (1 - value) / 4000)
    if unavailable == "stall":  # runs in s2 choosing a stall: 0.405 (s1 cannot reach the goal: the build makes it absorbing)
        assert abs(r.stalled / 4000 - 0.405) < 4 * math.sqrt(0.405 * 0.595 / 4000)
        assert any("stalled" in w for w in r.warnings)
    else:
        assert r.stalled == 0


LOOP_MODEL = """mdp
module m
  s : [0..2] init 0;
  [wait] s=0 -> (s'=0);
  [go] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
  [wait] s>0 -> true;
endmodule
label "goal" = s=1;
"""


@pytest.mark.parametrize("method", ["splitting", "restart"])
def test_a_run_that_surely_loops_forever_is_violated_at_once(tmp_path, method):
    """A policy that surely waits in s0 (a self-loop) never reaches the goal: each run is decided at once (as the
    simulator does), not after max_steps; a policy that goes reaches it w.p. 1/2."""
    from rlverify.models import load_model

    path = tmp_path / "loop.prism"
    path.write_text(LOOP_MODEL)
    for probs, value in (([1.0, 0.0], 0.0), ([0.0, 1.0], 0.5)):
        pol = CallablePolicy(lambda x, p=probs: np.tile(p, (len(x), 1)), ["s"], ["wait", "go"])
        r = verify_splitting(
            load_model(path),
            'P=? [F "goal"]',
            pol,
            SplittingOptions(
                method=method,
                importance="s",
                levels=(),
                effort=400,
                repetitions=4,
                simulation=SimulationOptions(seed=1, max_steps=50),
            ),
        )
        assert r.undecided == 0 and r.stalled == 0
        if value == 0.0:
            assert r.estimate == 0.0 and r.decisions == 0
        else:
            assert abs(r.estimate - 0.5) < 4 * math.sqrt(0.25 / 1600) and r.decisions == 1600


# --- bad input through the CLI: exit code 2 and a message naming the problem -------------------------------


POLICY = (
    "import numpy as np\nFEATURES = ['i']\nACTIONS = ['slow', 'fast']\n"
    "def pi(x):\n    return np.tile([0.5, 0.5], (len(x), 1))\n"
)


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "bd.prism").write_text(BIRTH_DEATH.replace("const int N;", "const int N = 8;"))
    (d / "pol.py").write_text(POLICY)
    return d


def _simulate(cli_files, *options: str) -> int:
    """``rlverify simulate`` on the birth-death file with its policy and ``P=? [F "top"]``, then ``options``."""
    from rlverify.cli.main import main

    policy = f"{cli_files / 'pol.py'}:pi"
    return main(["simulate", str(cli_files / "bd.prism"), "--policy", policy, "--property", 'P=? [F "top"]', *options])


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--importance", "j + 1"], "--importance 'j + 1': unknown variable 'j'; the variables: i"),
        (["--property", 'P=? [G !"top"]'], "the path operator 'G' is not supported"),
        (["--property", 'P>=0.1 [F "top"]'], "splitting estimates a probability; write it as P=? [...]"),
        (["--runs", "100"], "--runs do not apply"),
        (["--levels", "2,x"], "--levels: 'x' is not a number"),
        (["--levels", "4,2"], "--levels: expected finite, strictly increasing thresholds"),
        (["--levels", "3,9", "--importance", "i"], "threshold 9 is above the highest importance of any state (8"),
        (["--repetitions", "1"], "--repetitions: the interval needs at least 2"),
        (["--effort", "0"], "--effort: runs per level must be a positive integer"),
    ],
    ids=[
        "unknown-variable",
        "globally",
        "threshold",
        "runs",
        "levels-nan",
        "levels-order",
        "levels-too-high",
        "one-repetition",
        "no-effort",
    ],
)
def test_cli_bad_input(cli_files, capsys, extra, message):
    code = _simulate(cli_files, "--rare", "splitting", *extra)
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in " ".join(err.split()), err


def test_cli_splitting_options_need_rare(cli_files, capsys):
    code = _simulate(cli_files, "--effort", "10")
    assert code == 2
    assert "--effort only apply to rare-event estimation: add --rare splitting" in " ".join(capsys.readouterr().err.split())


def test_cli_json(cli_files, capsys):
    import json

    options = ["--importance", "i", "--levels", "2,3,4,5,6,7", "--effort", "200", "--repetitions", "5", "--seed", "4"]
    code = _simulate(cli_files, "--rare", "splitting", *options, "--json")
    assert code == 0
    out = json.loads(capsys.readouterr().out)["result"]
    exact = float(ruin(8))
    assert out["interval"][0] <= exact <= out["interval"][1]
    assert out["levels"] == [2, 3, 4, 5, 6, 7] and out["repetitions"] == 5 and out["seed"] == 4
    assert out["decisions"] > 0 and "Student t" in out["interval_kind"]


def test_cli_restart(cli_files, capsys):
    import json

    code = _simulate(cli_files, "--rare", "restart", "--importance", "i", "--effort", "300", "--repetitions", "10", "--json")
    assert code == 0
    out = json.loads(capsys.readouterr().out)["result"]
    exact = float(ruin(8))
    assert out["method"] == "RESTART" and len(out["splits"]) == len(out["levels"]) >= 2
    assert out["interval"][0] <= exact <= out["interval"][1]


def test_auto_importance_needs_an_explicit_model():
    from rlverify.benchmarks import make

    env = make("racetrack-barto-small-v1", noise=0.1).model()
    pol = CallablePolicy(lambda x: np.full((len(x), 9), 1 / 9), env.features, env.actions)
    with pytest.raises(OptionError, match="--importance auto needs an explicit model"):
        verify_splitting(env, 'P=? [F "crashed"]', pol, SplittingOptions(importance="auto", effort=10, repetitions=2))
    with pytest.raises(PropertyError, match="unknown label"):
        verify_splitting(env, 'P=? [F "crash"]', pol, SplittingOptions(importance="x", effort=10, repetitions=2))


def test_native_racetrack_agrees_with_plain_simulation():
    """Racetrack Barto-small (native environment), shipped DQN, noise 0.1, P(crash) ~ 0.012: splitting with an
    expression over the policy's features agrees with the plain simulator (another code path: engine.simulate)
    within 4 combined standard errors."""
    from rlverify.benchmarks import make
    from rlverify.benchmarks.racetrack import policy_path
    from rlverify.policies import load_policy
    from rlverify.statistical import StatisticalOptions, verify_statistical

    env = make("racetrack-barto-small-v1", noise=0.1).model()
    pol = load_policy(str(policy_path("racetrack-barto-small-v1")))
    r = verify_splitting(
        env,
        'P=? [F "crashed"]',
        pol,
        SplittingOptions(
            importance="abs(vx) + abs(vy) - min(wall_n, wall_e, wall_s, wall_w)",
            effort=300,
            repetitions=10,
            simulation=SimulationOptions(seed=1),
        ),
    )
    mc = verify_statistical(
        env,
        'P=? [F "crashed"]',
        pol,
        StatisticalOptions(method="clopper-pearson", runs=40_000, simulation=SimulationOptions(seed=1)),
    )
    se_mc = math.sqrt(mc.estimate * (1 - mc.estimate) / mc.runs)
    assert 0.005 < mc.estimate < 0.03 and len(r.levels) >= 1
    assert abs(r.estimate - mc.estimate) < 4 * math.hypot(r.std_error, se_mc), (r.estimate, mc.estimate)
