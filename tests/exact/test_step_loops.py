"""Every per-step loop stops at a fixed point or at the work budget (issue 40): shield's expected interventions, the
expected visits of explain's tree and critical states, the failure paths' listing, and the features' range plan.

Before these fixes each CLI case below ran for minutes to hours on the 4-state running example (``F<=100000000``: one
Python step per bound step; ``--explain 3000``: ~70,000 table rows; ``y:[0..1e9]``: a billion-value list before the
200-check limit). Numbers are checked against closed forms of the running example and numpy's dense solves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import rlverify
from rlverify.errors import PropertyError
from rlverify.exact.chain import policy_chain
from rlverify.exact.explain import MAX_LISTED_STEPS
from rlverify.exact.interventions import expected_total
from rlverify.exact.options import ExactOptions
from rlverify.exact.tree import expected_visits
from rlverify.resolve import resolve

SRC = str(Path(rlverify.__file__).resolve().parents[1])
HUGE = 'F<=100000000 "goal"'
# the running example's chain under its policy (x=1: DOWN 0.7 stays, UP 0.3 -> x=2 0.2 / x=3 0.8; x=2: NOP 0.5 stays,
# UP 0.5 -> x=3 0.2 / x=4 0.8; x=3: UP -> x=4): expected visits before the goal, by hand
VISITS = {1: 1 / 0.3, 2: (0.06 / 0.3) / 0.5, 3: 0.24 / 0.3 + 0.1 * (0.06 / 0.3) / 0.5}


def run_cli(*args: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlverify", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": SRC},
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


# -- shield -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", [["--threshold", "0.1"], ["--meet"]], ids=["threshold", "meet"])
def test_a_shield_of_a_huge_step_bound_answers_within_seconds(how) -> None:
    done = run_cli("shield", "running-example-v1", "-p", f"P>=0.5 [{HUGE}]", *how, "--json")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)["result"]
    # P(F<=1e8 goal) = 1 - 0.7^1e8 (x=1 left w.p. 0.3 a step, then the goal surely): 1 in float64
    assert r["lower"] <= 1.0 <= r["upper"] and r["value"] == pytest.approx(1.0, abs=1e-12)
    assert r["expected_interventions"] == 0.0 and r["restricted_states"] == 0


def test_expected_interventions_without_a_fixed_point_stop_at_the_budget_naming_it() -> None:
    # a bad event x=3: the shield removes UP at x=1 and the run stays there, one intervention a step for 1e8 steps
    done = run_cli(
        "shield", "running-example-v1", "-p", "P<=0.5 [F<=100000000 x=3]", "--threshold", "0.1", "--max-work", "1e7"
    )
    err = one_line_error(done)
    assert "expected interventions" in err and "--max-work" in err and "no fixed point" in err


def _absorbing_chain(seed: int, n: int = 6) -> tuple[sp.csr_matrix, np.ndarray]:
    """A random chain on ``n`` transient states and an absorbing last one (each transient row leaks >= 0.1 to it), and
    ``(n + 1, 2)`` non-negative rewards, zero on the absorbing state."""
    rng = np.random.default_rng(seed)
    P = np.zeros((n + 1, n + 1))
    P[:n, :n] = rng.dirichlet(np.ones(n), size=n) * rng.uniform(0.1, 0.9, size=(n, 1))
    P[:n, n] = 1 - P[:n, :n].sum(axis=1)
    P[n, n] = 1.0
    rewards = np.zeros((n + 1, 2))
    rewards[:n] = rng.uniform(0, 1, size=(n, 2)) * (rng.uniform(size=(n, 1)) < 0.6)
    return sp.csr_matrix(P), rewards


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8))
def test_expected_total_of_a_huge_bound_is_the_converged_one_and_the_closed_form(seed, n) -> None:
    P, r = _absorbing_chain(seed, n)
    n = P.shape[0] - 1
    closed = np.linalg.solve(np.eye(n) - P.toarray()[:n, :n], r[:n])[0]  # the fundamental matrix's row times r
    # the step at which a plain loop's values stop changing bit for bit
    total, j = np.zeros_like(r), 0
    while True:
        nxt = r + P @ total
        j += 1
        if np.array_equal(nxt, total):
            break
        total = nxt
    converged = expected_total(P, r, 0, j, None)
    assert expected_total(P, r, 0, 10**12, None) == converged == (total[0, 0], total[0, 1])
    assert converged == pytest.approx(tuple(closed), rel=1e-12)
    assert expected_total(P, r, 0, None, None) == pytest.approx(tuple(closed), rel=1e-12)


def test_expected_total_that_grows_forever_is_refused_at_the_budget() -> None:
    P = sp.csr_matrix(np.array([[0.5, 0.5], [0.5, 0.5]]))  # never absorbed: the total grows by 1 a step
    with pytest.raises(PropertyError, match=r"--max-work 30,000.*no fixed point in the 10 steps"):
        expected_total(P, np.ones((2, 2)), 0, 10**12, 30_000)


# -- expected visits (explain --parts tree / critical) ---------------------------------------------------------------


def test_expected_visits_of_a_huge_bound_are_the_converged_ones_and_the_closed_form() -> None:
    t = resolve("running-example-v1", property=f"P=? [{HUGE}]")
    built = policy_chain(t.model, t.property, t.policy, ExactOptions())
    visits = expected_visits(built, t.property).visits
    x = {int(v[0]): i for i, v in enumerate(built.chain.valuations) if built.origin[i] >= 0}
    for s, v in VISITS.items():
        assert visits[x[s]] == pytest.approx(v, rel=1e-12), s
    # a plain loop over (visits, mass) until both stop changing bit for bit: that bound gives the same values
    T = sp.csr_matrix(built.chain.transitions).T.tocsr()
    undecided = np.zeros(len(visits), dtype=bool)
    undecided[[x[1], x[2], x[3]]] = True
    mass = np.zeros(len(visits))
    mass[x[1]] = 1.0
    total, j = np.zeros(len(visits)), 0
    while True:
        nxt_total, nxt_mass = total + mass, (T @ mass) * undecided
        j += 1
        if np.array_equal(nxt_total, total) and np.array_equal(nxt_mass, mass):
            break
        total, mass = nxt_total, nxt_mass
    at_j = resolve("running-example-v1", property=f'P=? [F<={j} "goal"]')
    assert np.array_equal(
        expected_visits(policy_chain(t.model, at_j.property, t.policy, ExactOptions()), at_j.property).visits, visits
    )
    assert np.array_equal(visits, total)


@pytest.mark.parametrize("part", ["tree", "critical"])
def test_explain_of_a_huge_step_bound_answers_within_seconds(part) -> None:
    done = run_cli("explain", "running-example-v1", "-p", f"P>=0.5 [{HUGE}]", "--parts", part, "--json")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)["result"][part]
    if part == "critical":
        got = {row["state"]["x"]: row["visits"] for row in r["states"]}
        assert got == pytest.approx(VISITS, rel=1e-12)
    else:
        # the tree takes the most likely action, DOWN at x=1 (0.7): it never leaves x=1, so its value is exactly 0
        assert r["policy_value"] == pytest.approx(1.0, abs=1e-12) and r["tree_value"] == 0.0


@pytest.mark.parametrize("part", ["tree", "critical"])
def test_expected_visits_that_grow_forever_stop_at_the_budget_naming_it(part) -> None:
    # deterministic: DOWN at x=1 forever, the run never decided: one visit a step for 1e8 steps
    args = ["explain", "running-example-v1", "-p", f"P>=0.5 [{HUGE}]", "--parts", part, "--mode", "deterministic"]
    err = one_line_error(run_cli(*args, "--max-work", "1e7"))
    assert "expected visits" in err and "--max-work" in err and "no fixed point" in err


# -- failure paths (verify --explain K) -------------------------------------------------------------------------------


def test_failure_paths_are_listed_up_to_a_step_limit_that_the_result_states() -> None:
    done = run_cli("verify", "running-example-v1", "-p", 'P=? [F "goal"]', "--explain", "3000", "--json")
    assert done.returncode == 0, done.stderr
    e = json.loads(done.stdout)["result"]["explanation"]
    steps = sum(len(p["steps"]) - 1 for p in e["paths"])
    assert e["k"] == 3000 and 0 < len(e["paths"]) < 3000 and not e["exhausted"]
    assert MAX_LISTED_STEPS <= steps < MAX_LISTED_STEPS + 100
    assert f"{len(e['paths'])} of the 3000 paths" in e["note"] and f"{MAX_LISTED_STEPS:,} steps" in e["note"]
    # the most probable path: UP at x=1 (0.3) to x=3 (0.8), then UP (1); then one DOWN loop (0.7) before it
    assert e["paths"][0]["probability"] == pytest.approx(0.24, rel=1e-12)
    assert e["paths"][1]["probability"] == pytest.approx(0.7 * 0.24, rel=1e-12)
    probs = [p["probability"] for p in e["paths"]]
    assert probs == sorted(probs, reverse=True) and sum(probs) <= e["value"] + 1e-12


def test_the_report_states_the_listing_limit_of_its_failure_paths(tmp_path) -> None:
    out = tmp_path / "r.html"
    done = run_cli("report", "running-example-v1", "-p", 'P=? [F "goal"]', "--explain", "3000", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "of the 3000 paths asked for are listed" in out.read_text() and f"{MAX_LISTED_STEPS:,} steps" in out.read_text()


# -- features --reference range ---------------------------------------------------------------------------------------

WIDE = """mdp
module m
  x : [0..3] init 0;
  y : [0..1000000000] init 0;
  [go] x<3 -> 0.5 : (x'=x+1) + 0.5 : (x'=x);
  [stay] true -> (x'=x) & (y'=0);
endmodule
label "goal" = x=3;
"""
POLICY = (
    "import numpy as np\nFEATURES = ['x', 'y']\nACTIONS = ['go', 'stay']\n"
    "def pi(s):\n    return np.tile([0.9, 0.1], (len(s), 1))\n"
)


def test_a_billion_value_range_is_refused_by_its_count_before_listing_it(tmp_path) -> None:
    (tmp_path / "wide.prism").write_text(WIDE)
    (tmp_path / "pi.py").write_text(POLICY)
    args = ["explain", str(tmp_path / "wide.prism"), "-p", 'P=? [F "goal"]', "--policy", f"{tmp_path / 'pi.py'}:pi"]
    err = one_line_error(run_cli(*args, "--parts", "features", "--reference", "range"))
    # 2 features x (fixed + perturbed) + 4 values of x + 1,000,000,001 of y
    assert "1,000,000,009 exact checks (limit 200)" in err and "--ablate" in err and "memory" not in err


# -- verify: the precision stop wherever the budget cannot take every step ---------------------------------------------

SLOW = """mdp
module m
  x : [0..1] init 0;
  [go] x=0 -> 0.002:(x'=1) + 0.998:(x'=0);
  [go] x=1 -> true;
endmodule
label "goal" = x=1;
"""


def test_a_bound_the_budget_cannot_reach_in_steps_stops_at_precision_not_refused(tmp_path) -> None:
    """A step counts at least STEP_WORK, so a 3-transition chain's budget ends before k * nnz reaches it: the precision
    stop (the unbounded value as the upper end) must be there then. It was not: F<=3,000,000 with --max-work 3e7 was
    refused "after 10,000 steps the value is at least 1" (a lower bound 0.99999... printed rounded up) while a larger
    bound answered. Closed form: 1 - 0.998**k."""
    (tmp_path / "slow.prism").write_text(SLOW)
    policy = {
        "features": ["x"],
        "actions": ["go"],
        "table": [{"state": {"x": v}, "probabilities": {"go": 1.0}} for v in (0, 1)],
    }
    (tmp_path / "pol.json").write_text(json.dumps(policy))
    for k in (3_000, 3_000_000):
        done = run_cli(
            "verify", str(tmp_path / "slow.prism"), "--policy", str(tmp_path / "pol.json"),
            "-p", f'P=? [F<={k} "goal"]', "--max-work", "3e7", "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)["result"]
        exact = 1 - 0.998**k
        assert result["lower"] <= exact <= result["upper"]
        assert result["upper"] - result["lower"] <= 1e-6 * result["lower"]
