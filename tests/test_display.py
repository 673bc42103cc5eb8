"""Results in a notebook: every result type renders as HTML (``_repr_html_``) and as plain text (``str``) with its
value, the kind of guarantee it carries and its key figures; user text (model paths, property text, policy names,
warnings) is escaped, never markup.

Each result is a real one on a tiny model; where the value is known independently (the running example by hand,
brute force over adversaries in ``tests/exact/test_robust.py``, the risk map's grid solved by hand in
``tests/exact/test_risk_map.py``), the shown number is that value.
"""

from __future__ import annotations

import functools
import html.parser
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import rlverify
from rlverify.results import Result, shown, shown_pair

#: P(F<=2 "goal") of the running example's policy, by hand: 0.3 * (0.2 * 0.5 * 0.8 + 0.8)
RUNNING_264 = 0.264
BOUNDED = 'P=? [F<=2 "goal"]'


@functools.cache
def running():
    b = rlverify.benchmarks.make("running-example-v1")
    model = b.load_model()
    return model, rlverify.parse_property(model, BOUNDED), b.load_policy()


def exact():
    return rlverify.verify_exact("running-example-v1", BOUNDED)


def optimum():
    model, prop, _ = running()
    return rlverify.exact.optimum(model, prop, rlverify.ExactOptions())


def paths():
    model, prop, policy = running()
    return rlverify.exact.explain_paths(model, prop, policy, 2)


def statistical():
    from rlverify.statistical import SimulationOptions, StatisticalOptions

    model, _, policy = running()
    options = StatisticalOptions(method="clopper-pearson", runs=1000, simulation=SimulationOptions(seed=0))
    return rlverify.verify_statistical(model, BOUNDED, policy, options)


def splitting():
    from rlverify.statistical import SplittingOptions, verify_splitting

    model, _, policy = running()
    return verify_splitting(model, BOUNDED, policy, SplittingOptions(effort=200, repetitions=5))


def heatmap():
    from rlverify.models.racetrack import ACTIONS, FEATURES
    from rlverify.policies import CallablePolicy
    from rlverify.resolve import EnvironmentTarget, resolve
    from rlverify.statistical import SimulationOptions, StatisticalOptions
    from rlverify.statistical import heatmap as run

    env = resolve("racetrack-barto-small-v1", kinds=(EnvironmentTarget,), needs_policy=False).model
    uniform = CallablePolicy(lambda x: np.full((len(x), 9), 1 / 9), FEATURES, ACTIONS, name="uniform")
    options = StatisticalOptions(method="clopper-pearson", runs=20, simulation=SimulationOptions(max_steps=6, seed=3))
    return run(env, uniform, options, cells=env.track.free_cells()[::6][:3], benchmark="racetrack-barto-small-v1")


def returns(tmp: Path):
    """CartPole's ``R=? [C<=1]``: every episode's first reward is 1, so the mean return is 1 (closed form)."""
    from rlverify.resolve import resolve_simulated
    from rlverify.statistical import SimulationOptions, StatisticalOptions
    from rlverify.statistical.returns import estimate_return

    path = tmp / "push.py"
    path.write_text(
        'FEATURES = ["x", "x_dot", "theta", "theta_dot"]\nACTIONS = ["0", "1"]\n'
        "def push(obs):\n    import numpy as np\n    r = np.asarray(obs)[:, 2] > 0\n"
        "    return np.stack([~r, r], axis=1).astype(float)\n"
    )
    t = resolve_simulated("gym:CartPole-v1", "R=? [C<=1]", policy=f"{path}:push")
    options = StatisticalOptions(method="clopper-pearson", runs=200, simulation=SimulationOptions(seed=0))
    return estimate_return(t.model, t.property, t.policy, options, reward_range=(0.0, 1.0))


def abstraction():
    from rlverify.abstraction import AbstractionOptions

    system = rlverify.benchmarks.make("acc-v1")
    return rlverify.verify_abstraction(
        system.model(), system.load_policy("ppo"), AbstractionOptions(horizon=2, domain="box", phi=0.5)
    )


def risk_map(tmp: Path):
    from tests.exact import test_risk_map as grid

    path = tmp / "grid.prism"
    path.write_text(grid.GRID)
    model = rlverify.load_model(path)
    options = rlverify.exact.MapOptions(optimum="min")
    return rlverify.exact.risk_map(model, rlverify.parse_property(model, grid.CRASH), grid.POLICY, "x,y", options)


def robust_grid(tmp: Path):
    from tests.exact import test_robust as grid

    path = tmp / "grid.prism"
    path.write_text(grid.GRID)
    return grid, rlverify.load_model(path), grid.network_policy(tmp, 0)


def robustness(tmp: Path):
    _, model, policy = robust_grid(tmp)
    prop = rlverify.parse_property(model, 'P=? [F "crash"]')
    return rlverify.exact.robustness(model, prop, policy, rlverify.exact.RobustnessOptions(epsilon=1, norm="linf"))


def interval(tmp: Path):
    _, model, policy = robust_grid(tmp)
    prop = rlverify.parse_property(model, 'P=? [F "crash"]')
    return rlverify.exact.model_error_bounds(model, prop, policy, rlverify.exact.ModelErrorOptions(delta=0.05))


def agreement():
    return rlverify.cross_check("running-example-v1", BOUNDED, runs=500)


def report():
    from rlverify.report import ReportOptions, make_report

    return make_report("running-example-v1", property=BOUNDED, options=ReportOptions(runs=500))


def shield():
    from rlverify.exact.shield import ShieldOptions, shield_policy

    model, _, policy = running()
    prop = rlverify.parse_property(model, 'P>=0.9 [F<=3 "goal"]')
    return shield_policy(model, prop, policy, ShieldOptions(threshold=0.0))


def features():
    from rlverify.exact.features import feature_effects

    model, prop, policy = running()
    return feature_effects(model, prop, policy)


def tree():
    pytest.importorskip("sklearn")
    from rlverify.exact.tree import fit_tree

    model, prop, policy = running()
    return fit_tree(model, prop, policy)


def critical():
    from rlverify.exact.critical import critical_states

    model, _, policy = running()
    return critical_states(model, rlverify.parse_property(model, 'P>=0.5 [F<=2 "goal"]'), policy)


def explanation():
    pytest.importorskip("sklearn")
    from rlverify.exact.explanations import explain_policy

    model, _, policy = running()
    return explain_policy(model, rlverify.parse_property(model, 'P>=0.5 [F<=2 "goal"]'), policy)


#: result type -> how to build one, and words its guarantee must say
BUILDERS: dict[str, tuple[Callable[..., Result], tuple[str, ...]]] = {
    "ExactResult": (exact, ("exact value", "sound", "certified bracket")),
    "OptimumResult": (optimum, ("over all schedulers", "sound")),
    "FailurePaths": (paths, ("exact", "not sampled")),
    "StatisticalResult": (statistical, ("statistical", "with probability at least 0.95")),
    "SplittingResult": (splitting, ("statistical (approximate)", "with probability about 0.95")),
    "ReturnResult": (returns, ("statistical", "with probability at least 0.95", "Hoeffding")),
    "HeatmapResult": (heatmap, ("statistical", "per cell, not simultaneous")),
    "AbstractionResult": (abstraction, ("sound upper bound",)),
    "RiskMap": (risk_map, ("risk map", "sound")),
    "RobustnessResult": (robustness, ("exact over every adversary", "sound")),
    "IntervalResult": (interval, ("sound relaxation", "numerics")),
    "Agreement": (agreement, ("the engines agree", "statistical interval")),
    "Report": (report, ("all engines agree", "exact, sound bound or statistical interval")),
    "ShieldResult": (shield, ("verified exactly", "sound", "certified bracket")),
    "FeatureEffects": (features, ("exact", "sound: within relative precision")),
    "TreeExplanation": (tree, ("exact values", "fidelity weighted by expected visits")),
    "CriticalStates": (critical, ("per-action values exact", "sound: within relative precision")),
    "PolicyExplanation": (explanation, ("exact",)),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache: dict[str, Result] = {}

    def get(name: str) -> Result:
        if name not in cache:
            fn = BUILDERS[name][0]
            cache[name] = fn(tmp_path_factory.mktemp(name)) if fn.__code__.co_argcount else fn()
        return cache[name]

    return get


def test_every_result_type_is_covered():
    from rlverify import crosscheck, report, results

    types = {
        n
        for mod in (results, crosscheck, report)
        for n in set(vars(mod)) | set(getattr(mod, "__all__", ()))  # results' engine types load on first use
        if isinstance(v := getattr(mod, n), type) and issubclass(v, Result) and v is not Result
    }
    assert types == set(BUILDERS)


class Tags(html.parser.HTMLParser):
    """The tags and the text of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(fragment: str) -> Tags:
    p = Tags()
    p.feed(fragment)
    p.close()
    return p


@pytest.mark.parametrize("name", list(BUILDERS))
def test_html_and_text_say_the_value_and_the_guarantee(built, name):
    r = built(name)
    assert type(r).__name__ == name
    page, text = r._repr_html_(), str(r)
    shown_text = " ".join(parsed(page).text)
    for words in BUILDERS[name][1]:
        assert words in shown_text, words
        assert words in text, words
    assert shown_text.startswith(f"{name}: ") and text.startswith(f"{name}: ")
    assert r.model in shown_text and r.model in text
    # IPython's plain display (a terminal, a notebook's text/plain) is the same text, not the dataclass repr
    pretty = pytest.importorskip("IPython.lib.pretty")
    assert pretty.pretty(r) == text


def test_exact_value_by_hand_with_its_bracket(built):
    r = built("ExactResult")
    page = r._repr_html_()
    assert abs(r.value - RUNNING_264) < 1e-12
    assert "<b>0.264</b>" in page and "certified bracket [0.264, 0.264]" in page
    assert "F&lt;=2 &quot;goal&quot;" in page  # the property's text, escaped
    assert "4 states, 8 transitions" in page  # the induced chain of the paper's Fig. 4


def test_optimum_and_paths_by_hand(built):
    # Pmax(F<=2 goal) = UP twice: 0.2 * 0.8 + 0.8 = 0.96, Pmin = 0 (stay in A); the two paths: A-C-D 0.3 * 0.8,
    # A-B-D 0.3 * 0.2 * 0.5 * 0.8
    best = str(built("OptimumResult"))
    assert "value      0.96\n" in best and "Pmin       0 in [0, 0]" in best and "Pmax       0.96 in [0.96, 0.96]" in best
    text = str(built("FailurePaths"))
    assert "0.264 covered = 100% of the value 0.264" in text
    assert "path 1      probability 0.24, 2 steps" in text and "path 2      probability 0.024, 2 steps" in text


@pytest.mark.parametrize("name", ["StatisticalResult", "SplittingResult"])
def test_estimates_show_their_interval(built, name):
    r = built(name)
    lo, hi = r.interval
    assert lo <= RUNNING_264 <= hi  # the hand value is inside (at 95 %, seeded)
    page = r._repr_html_()
    assert f"<b>{shown(r.estimate)}</b>" in page and shown_pair(lo, hi) in page


def test_return_by_closed_form_with_hoeffdings_width(built):
    # every CartPole episode's first reward is 1; Hoeffding at n = 200, range [0, 1], delta 0.05:
    # half-width sqrt(ln(2 / 0.05) / 400), the upper end clipped to the range
    r = built("ReturnResult")
    half = math.sqrt(math.log(40) / 400)
    assert r.estimate == 1.0 and r.interval == pytest.approx((1 - half, 1.0), abs=1e-12)
    text = str(r)
    assert 0.9039677 < 1 - half < 0.9039678  # shown rounded down (outward) to six digits: 0.903967
    assert "expected return" in text and "[0.903967, 1]" in text and "rewards in [0.0, 1.0]" in text
    assert "<b>1</b>" in r._repr_html_()


def test_heatmap_shows_the_mean_goal_and_crash(built):
    r = built("HeatmapResult")
    assert f"goal {shown(float(np.mean(r.goal)))}, crash {shown(float(np.mean(r.crash)))} (means over 3 start cells)" in str(r)
    never = int(r.undecided.sum()) + int(r.stuck.sum())
    runs = f"{int(r.runs.sum()):,} ({never:,} never decided: {int(r.stuck.sum()):,} stuck, {int(r.undecided.sum()):,} cut"
    assert int(r.runs.sum()) == 60 and runs in str(r)


def test_abstraction_shows_the_bound(built):
    r = built("AbstractionResult")
    assert f"Pr(failure) <= {shown(r.upper_bound)}" in str(r) and "not a bound" in str(r)


def test_risk_map_shows_the_initial_value_and_pmin_by_hand(built):
    from tests.exact import test_risk_map as grid

    r = built("RiskMap")
    value = grid.policy_values(grid.pit)[(0, 0, 0)]
    pmin = grid.optimum_values(grid.pit, "min")[(0, 0, 0)]
    text = str(r)
    assert f"value                {shown(value)}\n" in text and f"Pmin (all policies)  {shown(pmin)}\n" in text


def test_risk_map_and_heat_map_draw_their_cells(built):
    from tests.exact import test_risk_map as grid

    r = built("RiskMap")
    by_hand = grid.expected_grids(grid.policy_values(grid.pit), grid.optimum_values(grid.pit, "min"), "min", "max")
    page = r._repr_html_()
    assert page.count("<svg") == 1 and page.count("<rect") == len(r.x_values) * len(r.y_values) == 12
    for (x, y), (value, *_) in by_hand.items():  # every cell's tooltip: its value by hand, or none (a wall)
        assert f"<title>x={x}, y={y}: {shown(value) if value is not None else 'nan'}</title>" in page
    assert "fill='none' stroke='#ccc'><title>x=0, y=2: nan" in page  # the wall at (0, 2): not drawn
    assert "<svg" not in str(r)  # the text form has no picture
    h = built("HeatmapResult")
    page = h._repr_html_()
    for (x, y), g in zip(h.cells, h.goal, strict=True):
        assert f"<title>x={x}, y={y}: {shown(float(g))}</title>" in page
    assert page.count("<rect") == h.grid.shape[0] * h.grid.shape[1]


def test_robustness_shows_the_brute_force_worst_and_best(built, tmp_path):
    from tests.exact import test_robust as grid

    r = built("RobustnessResult")
    nominal, worst, best = grid.brute_force(grid.network_policy(tmp_path, 0), 1, "linf", ("x", "y"), "crash")
    text = str(r)
    assert f"{shown(worst)} worst case" in text and f"best (Pmin)      {shown(best)}\n" in text
    assert f"nominal          {shown(nominal)}\n" in text


def test_interval_shows_the_range_around_the_nominal_value(built, tmp_path):
    r = built("IntervalResult")
    assert r.lower <= r.nominal <= r.upper
    assert f"<b>{shown_pair(r.lower, r.upper)}</b>" in r._repr_html_() and "absolute delta 0.05" in str(r)


def test_agreement_and_report_show_the_hand_value(built):
    for name in ("Agreement", "Report"):
        assert "0.264" in str(built(name)) and "0.96" in str(built(name))


#: the tags of a result's picture (grid_svg)
SVG = ("svg", "rect", "title", "text")

HOSTILE = {
    "model": "<script>alert('model')</script>",
    "property": 'P=? [F "<img src=x onerror=alert(1)>"]',
    "policy": "</td></tr></table><iframe src=//evil>",
    "warnings": ["<b>bold</b> & <i>italic</i>"],
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_user_text_is_escaped_never_markup(built, name):
    r = built(name).with_provenance(**HOSTILE)
    page = r._repr_html_()
    p = parsed(page)
    assert set(p.tags) <= {"div", "table", "caption", "tr", "th", "td", "b", "p", "ul", "li", *SVG}, set(p.tags)
    shown_text = "".join(p.text)
    for value in (HOSTILE["model"], HOSTILE["property"], HOSTILE["policy"], *HOSTILE["warnings"]):
        assert value in shown_text  # read back as text, exactly
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;bold&lt;/b&gt; &amp;" in page
    assert "warning: <b>bold</b> & <i>italic</i>" in str(r)


def test_a_model_file_named_like_markup_is_shown_as_text(tmp_path):
    bench = rlverify.benchmarks.make("running-example-v1")
    folder = tmp_path / "<script>alert(1)"
    folder.mkdir()
    assert bench.source is not None
    (folder / "m.prism").write_text(bench.source)
    r = rlverify.verify_exact(str(folder / "m.prism"), BOUNDED, str(bench.policies["reference"]))
    page = r._repr_html_()
    assert "<script>" not in page and f"{tmp_path}/&lt;script&gt;alert(1)/m.prism" in page
    assert "<b>0.264</b>" in page
