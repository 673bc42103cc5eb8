"""``rlverify report``: every engine that applies, the consistency checks, and one self-contained page."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rlverify.cli.main import main
from rlverify.report import ReportOptions, make_report

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_discrete_report_puts_the_engines_side_by_side(tmp_path, capsys):
    out = tmp_path / "report.html"
    code, stdout, err = run(capsys, "report", "running-example-v1", "-p", "reach-goal-2", "--out", str(out), "--json")
    assert code == 0, err
    r = json.loads(stdout)["result"]
    exact = r["sections"][0]["exact"]
    assert exact["value"] == pytest.approx(0.264, abs=1e-9)  # worked out by hand (tests/test_running_example.py)
    names = [c["name"] for c in r["checks"]]
    assert "Pmin <= value <= Pmax" in names and "exact value inside the statistical interval" in names
    assert r["ok"] and all(c["ok"] for c in r["checks"])
    page = out.read_text()
    assert "all engines agree" in page and "0.264" in page and "Pmin / Pmax" in page
    # self-contained: no scripts, no external resources
    assert not re.search(r"(src|href)=['\"](https?:)?//", page) and "<script" not in page
    # the user's file is not overwritten without --force
    code, _, err = run(capsys, "report", "running-example-v1", "-p", "reach-goal-2", "--out", str(out))
    assert code == 2 and "pass --force" in err


def test_a_disagreement_is_an_error_with_both_numbers(tmp_path, capsys):
    # 20 runs at 5 % confidence: with seed 1 the interval [0.175, 0.236] misses the exact 0.264 (a real
    # statistical disagreement, which a 99.9 % interval makes rare)
    out = tmp_path / "r.html"
    code, _, err = run(
        capsys,
        "report",
        "running-example-v1",
        "-p",
        "reach-goal-2",
        "--runs",
        "20",
        "--delta",
        "0.95",
        "--seed",
        "1",
        "--out",
        str(out),
    )
    err = " ".join(err.split())
    assert code == 1 and "engines disagree" in err and "value 0.264 in [0.175286, 0.235513]" in err
    assert "ENGINES DISAGREE" in out.read_text()


def test_a_racetrack_report_draws_the_heat_map_and_checks_it_against_the_optimum(tmp_path):
    r = make_report("racetrack-barto-small-v1", options=ReportOptions(runs=2000))
    assert r.kind == "native" and r.ok
    heat = next(s for s in r.sections if s.images)
    assert heat.images[0][1][:8] == b"\x89PNG\r\n\x1a\n"
    page = r.to_html()
    assert page.count("data:image/png;base64,") == 1 and "optimum" in page


def test_a_continuous_report_holds_the_bound_against_simulation(tmp_path):
    r = make_report(
        str(ROOT / "examples/double_integrator.py:SYSTEM"),
        policy=str(ROOT / "examples/double_integrator.onnx"),
        options=ReportOptions(runs=4000),
    )
    bound = next(s for s in r.sections if s.title.startswith("Sound abstraction"))
    stat = next(s for s in r.sections if s.title.startswith("Statistical"))
    assert r.kind == "continuous" and r.ok
    assert float(dict(bound.rows)["upper bound"]) >= float(dict(stat.rows)["estimate"]) - 0.05


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt install chromium)")
def test_the_page_renders_in_headless_chromium(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(make_report("racetrack-barto-small-v1", options=ReportOptions(runs=2000)).to_html())
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,1600",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)
    assert img.shape[:2] == (1600, 1200)
    # not blank: text and the heat map put dark and coloured pixels on the page
    assert img[..., :3].std() > 0.05 and (img[..., :3].min(axis=2) < 0.3).mean() > 0.005


def test_infinite_expected_rewards_agree_across_engines(tmp_path):
    """A policy that never reaches the target: every engine says R = infinity, which the checks must count as
    agreement (inf vs inf was reported as a disagreement, exit 1), and the optimum is named Rmax."""
    from tests.small_models import UP_STAY

    model = tmp_path / "m.prism"
    two = UP_STAY.replace("  x : [0..3] init 0;", "  x : [0..3] init 0;\n  y : [0..1] init 0;").replace(
        "[stay] true -> (x'=x);", "[stay] true -> (y'=1-y);"
    )
    model.write_text(two + 'rewards "steps"\n  true : 1;\nendrewards\n')
    pi = tmp_path / "stay.py"
    pi.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(x):\n    return np.tile([0.0, 1.0], (len(x), 1))\n"
    )
    report = make_report(
        str(model),
        property='R{"steps"}=? [F "top"]',
        policy=f"{pi}:pi",
        options=ReportOptions(runs=200, optimum="max", map_vars=("x", "y")),
    )
    assert report.ok, [c for c in report.checks if not c.ok]
    names = [c.name for c in report.checks]
    assert "risk map's initial optimum = Rmax" in names and "risk map's initial value = exact value" in names


def test_the_policy_chain_and_the_full_mdp_are_built_once(monkeypatch):
    """Every exact section reads one stochastic chain and one full MDP (before, the report built the chain three
    times and the MDP three times: exact, risk map, robustness; optimum, risk map, paths); the timing table says so."""
    import rlverify.exact.chain as chain_module
    import rlverify.exact.merged as merged_module  # the chain module imports merged_chain where it explores

    built: list[str] = []
    for module, name in ((merged_module, "merged_chain"), (chain_module, "build_explicit")):
        real = getattr(module, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            built.append(_name if _name == "build_explicit" else f"{_name} {kwargs['mode']}")
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    r = make_report("running-example-v1", property="reach-goal-2", options=ReportOptions(runs=200, explain=2))
    assert r.ok, r.disagreements()
    # one stochastic chain, one deterministic estimate, one full MDP; auto builds this small program's chains with
    # Storm's builder (issue 23: faster than the merged exploration here), each from its own build
    merged = sorted(b for b in built if b.startswith("merged_chain"))
    assert merged in ([], ["merged_chain deterministic", "merged_chain stochastic"])
    assert len(built) == 3 and built.count("build_explicit") == 3 - len(merged)
    assert list(r.timings) == [
        "chain (stochastic)",
        "exact",
        "full MDP",
        "monolithic",
        "deterministic",
        "paths",
        "robustness",
        "statistical",
    ]
    titles = [s.title.split(" (")[0] for s in r.sections]
    assert titles == [
        "Exact value",
        "Deterministic estimate",
        "Optimum over all schedulers",
        "Failure paths",
        "Robustness to perturbed observations",
        "Statistical estimate",
    ]


@pytest.mark.parametrize(
    "prop,optimum,best,worst",
    [
        ("reach-goal-2", "max", ("Pmax", 0.96), ("Pmin", 0.0)),  # a goal, said by the option
        ('P>=0.5 [F<=2 "goal"]', None, ("Pmax", 0.96), ("Pmin", 0.0)),  # said by the comparison
        ('P<=0.5 [F<=2 "goal"]', None, ("Pmin", 0.0), ("Pmax", 0.96)),  # the same event bounded from above: bad
    ],
)
def test_the_headline_reads_the_property_as_it_says_or_as_the_option_says(prop, optimum, best, worst):
    # Pmax 0.96 (UP twice: 0.2 * 0.8 + 0.8), Pmin 0 (stay in A), the policy 0.264: by hand in test_running_example
    r = make_report("running-example-v1", property=prop, options=ReportOptions(runs=200, explain=1, optimum=optimum))
    head = r.to_json()["headline"]
    assert float(head[f"best possible ({best[0]}, over all policies)"]) == pytest.approx(best[1], abs=1e-9)
    assert float(head[f"worst possible ({worst[0]})"]) == pytest.approx(worst[1], abs=1e-9)
    regret = 0.264 - best[1] if best[0] == "Pmin" else best[1] - 0.264
    assert float(head["regret (what the policy gives away)"]) == pytest.approx(regret, abs=1e-6)


def test_a_property_that_does_not_say_how_it_is_read_gets_no_best_or_regret_in_the_headline():
    """``P=? [F<=2 "goal"]`` without --optimum: calling Pmin = 0 the best possible (the former default) read reaching
    the goal as a failure. The headline shows both optima, names the option, and robustness says how it read it."""
    r = make_report("running-example-v1", property="reach-goal-2", options=ReportOptions(runs=200, explain=1))
    head = r.to_json()["headline"]
    assert head["Pmin / Pmax (over all policies)"] == "0 / 0.96"
    assert "--optimum min or max" in head["best possible and regret"]
    assert not any(k.startswith(("best possible (", "worst possible", "regret")) for k in head)
    robust = next(s for s in r.sections if s.title.startswith("Robustness"))
    assert "read as a bad event because the property does not say" in robust.note
    assert r.to_json()["settings"]["optimum"] == "unknown"
