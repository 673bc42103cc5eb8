"""``verify`` with several properties (``-p`` repeated, PRISM properties files) and constant sweeps (``-c N=4:8``):
every run's value against a closed form written here, the envelope's runs, the verdict over all runs, the plot, and
what one run at a time means."""

from __future__ import annotations

import json

import pytest

from rlverify.cli.main import main

# "done" after two successes of coin flips with success probability q:
# P(F<=T done) = 1 - (1-q)^T - T q (1-q)^(T-1)  (at most one success in T flips)
MODEL = """mdp
const double q;
module m
  x : [0..2] init 0;
  [go] x<2 -> q : (x'=x+1) + 1-q : (x'=x);
  [go] x=2 -> true;
endmodule
label "done" = x=2;
"""

POLICY = {"features": ["x"], "actions": ["go"], "table": [], "default": {"go": 1.0}}

PROPS = """// the coin race
const int T;
"within": P=? [ F<=T "done" ];
P>=0.2 [ F<=T "done" ]
"""


def closed_form(q: float, T: int) -> float:
    return 1 - (1 - q) ** T - T * q * (1 - q) ** (T - 1)


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "coin.prism").write_text(MODEL)
    (tmp_path / "coin.json").write_text(json.dumps(POLICY))
    (tmp_path / "coin.props").write_text(PROPS)
    (tmp_path / "bad.props").write_text('P=? [F "done"\n')
    return tmp_path


def verify(capsys, *args: str) -> tuple[int, dict | None, str]:
    code = main(["verify", "coin.prism", "--policy", "coin.json", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in args else None), err


def test_a_properties_file_over_a_sweep_of_its_constant(files, capsys):
    code, env, _ = verify(capsys, "-p", "coin.props", "-c", "q=0.5,T=1:4", "--json")
    assert code == 0 and env["command"] == "verify" and env["exit_code"] == 0
    runs = env["result"]["runs"]
    assert [(r["constants"], r["name"], r["index"]) for r in runs[:2]] == [("q=0.5,T=1", "within", 0), ("q=0.5,T=1", None, 1)]
    assert env["result"]["swept"] == ["T"] and len(runs) == 8
    for r in runs:
        T = int(r["constants"].split("T=")[1])
        assert r["value"] == pytest.approx(closed_form(0.5, T), rel=1e-12, abs=1e-15)
        assert r["lower"] <= closed_form(0.5, T) + 1e-15 and closed_form(0.5, T) <= r["upper"] + 1e-15
        assert r["written"] in ('P=? [ F<=T "done" ]', 'P>=0.2 [ F<=T "done" ]')
    # the threshold 0.2: 0 at T=1 (violated), 0.25 at T=2 and more after (hold: the bracket lies above the bound)
    verdicts = [r["satisfied"] for r in runs if r["index"] == 1]
    assert verdicts == [False, True, True, True]
    assert env["holds"] is False and env["result"]["holds"] is False


def test_fail_on_violation_fails_when_one_run_violates_its_threshold(files, capsys):
    code, env, err = verify(capsys, "-p", "coin.props", "-c", "q=0.5,T=1:3", "--fail-on-violation", "--json")
    assert code == 1 and env["exit_code"] == 1 and "does not hold" in err
    code, env, _ = verify(capsys, "-p", "coin.props", "-c", "q=0.5,T=2:3", "--fail-on-violation", "--json")
    assert code == 0 and env["holds"] is True
    # exactly on the bound (1 - 1/4 - 2/4 = 1/4 at T=2): the certified bracket contains it, so undecided (exit 3)
    code, env, _ = verify(
        capsys, "-p", 'P>=0.25 [F<=2 "done"]', "-p", 'P=? [F "done"]', "-c", "q=0.5", "--fail-on-violation", "--json"
    )
    assert code == 3 and env["holds"] is None and env["result"]["runs"][0]["satisfied"] is None


def test_a_model_constant_swept_with_a_step_and_two_properties_given_with_p(files, capsys):
    code, env, _ = verify(
        capsys, "-p", 'P=? [F<=2 "done"]', "-p", 'P=? [F<=3 "done"]', "-c", "q=0.2:0.2:0.8", "--json", "--out", "s.png"
    )
    assert code == 0
    runs = env["result"]["runs"]
    assert [r["constants"] for r in runs[::2]] == ["q=0.2", "q=0.4", "q=0.6", "q=0.8"]
    for r in runs:
        q, T = float(r["constants"][2:]), 2 + r["index"]
        assert r["value"] == pytest.approx(closed_form(q, T), rel=1e-12)
    png = (files / "s.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000  # a drawn figure, not an empty canvas


@pytest.mark.parametrize(
    "args, words",
    [
        (["-p", "coin.props", "-c", "q=0.5,T=1:2", "--explain", "2"], "--explain: one run at a time"),
        (["-p", "coin.props", "-c", "q=0.5,T=1:2", "--export", "c.drn"], "--export: one run at a time"),
        (["-p", 'P=? [F "done"]', "-p", 'P=? [F<=2 "done"]', "-c", "q=0.5", "--out", "s.png"], "plots a sweep"),
        (["-p", 'P=? [F "done"]', "-p", 'P=? [F<=2 "done"]', "-c", "q=0.5", "--fail-on-violation"], "needs a threshold"),
        (["-p", "coin.props", "-c", "q=0.5"], "constant T has no value: give it with -c T=VALUE"),
        (["-p", "nothere.props", "-c", "q=0.5"], "nothere.props: properties file not found"),
        (["-p", "coin.props", "-c", "q=0.5,T=1:100000"], "more than 1,000"),
        (["-p", "coin.props", "-c", "q=0.1:0.1:0.9,T=1:100"], "900 points x 2 properties = 1,800 verifications"),
        (["-p", 'P=? [F "done"]', "-c", "q=0.5:0.5:1.5"], "at -c q=1.5: "),  # 1-q < 0: the point that fails, named
        (["-p", 'P=? [F "done"]', "-c", "q=0:1e400"], "sweeps about 1.000E+400 values, more than 1,000"),
        (["-p", "bad.props", "-c", "q=0.5"], "bad.props: property 'P=? [F \"done\"' does not parse"),
    ],
)
def test_what_several_runs_cannot_do_is_refused_with_one_line(files, capsys, args, words):
    code, _, err = verify(capsys, *args)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not (files / "s.png").exists() and not (files / "c.drn").exists()


def test_one_property_at_one_point_is_the_single_result_as_before(files, capsys):
    code, env, _ = verify(capsys, "-p", 'P=? [F<=2 "done"]', "-c", "q=0.5", "--json")
    assert code == 0 and "runs" not in env["result"]
    assert env["result"]["value"] == pytest.approx(closed_form(0.5, 2), rel=1e-12)
