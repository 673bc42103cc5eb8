"""The exact engine's numbers and verdicts (issue 21): the value is the optimum asked for, a probability lies in
[0, 1] and in its own bracket, a threshold verdict follows from the certified bracket and exact graph analysis
(never from a rounded float), huge step bounds answer fast or are refused, reward-bounded until is checked, and
long or large computations are bounded. Known answers are derived by hand or by the small dynamic programs below,
which share no code with the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import rlverify
from rlverify.cli.main import main

#: the source tree of the rlverify under test (subprocesses run the same code)
SRC = str(Path(rlverify.__file__).resolve().parents[1])

#: x=0 reaches the goal (x=3) through x=1 with probability 1e-300 * 1e-300 = 1e-600 (below the float range); x=2 is
#: a sink. Reachable, so P>0 holds and P<=0 does not, although every float computation of the value gives 0.
UNDERFLOW = """mdp
module m
  x : [0..3] init 0;
  [go] x=0 -> 1e-300 : (x'=1) + (1-1e-300) : (x'=2);
  [go] x=1 -> 1e-300 : (x'=3) + (1-1e-300) : (x'=2);
  [go] x=2 -> (x'=2);
  [go] x=3 -> (x'=3);
endmodule
label "goal" = x=3;
"""

#: two actions at x=0; action rewards differ (a: 2, b: 1), state rewards at x=1 (1) and x=2 (3)
REWARDS = """mdp
module m
  x : [0..3] init 0;
  [a] x=0 -> 0.5 : (x'=1) + 0.5 : (x'=2);
  [b] x=0 -> 0.9 : (x'=2) + 0.1 : (x'=3);
  [a] x=1 -> 0.5 : (x'=3) + 0.5 : (x'=0);
  [a] x=2 -> 0.7 : (x'=3) + 0.3 : (x'=0);
  [a] x=3 -> true;
endmodule
label "goal" = x=3;
rewards "r"
  [a] x=0 : 2;
  [b] x=0 : 1;
  x=1 : 1;
  x=2 : 3;
endrewards
"""
T = {(0, "a"): {1: 0.5, 2: 0.5}, (0, "b"): {2: 0.9, 3: 0.1}, (1, "a"): {3: 0.5, 0: 0.5}, (2, "a"): {3: 0.7, 0: 0.3}}
STATE_R = {1: 1, 2: 3}
ACTION_R = {(0, "a"): 2, (0, "b"): 1}
PI = {0: {"a": 0.3, "b": 0.7}, 1: {"a": 1.0}, 2: {"a": 1.0}}

#: from x=0: goal with 0.5, fail (x=2) with 0.25, stay with 0.25: P(F goal) = 0.5 / 0.75 = 2/3
GEOMETRIC = """mdp
module m
  x : [0..2] init 0;
  [go] x=0 -> 0.5 : (x'=1) + 0.25 : (x'=2) + 0.25 : (x'=0);
  [go] x=1 -> true;
  [go] x=2 -> true;
endmodule
label "goal" = x=1;
rewards "steps"
  x=0 : 1;
endrewards
"""

ONE_ACTION = "import numpy as np\nFEATURES = ['x']\nACTIONS = ['go']\ndef pi(s):\n    return np.ones((len(s), 1))\n"
TWO_ACTIONS = (
    "import numpy as np\nFEATURES = ['x']\nACTIONS = ['a', 'b']\ndef pi(s):\n"
    "    out = np.tile([1.0, 0.0], (len(s), 1))\n    out[s[:, 0] == 0] = [0.3, 0.7]\n    return out\n"
)


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in (
        ("underflow.prism", UNDERFLOW),
        ("rewards.prism", REWARDS),
        ("geometric.prism", GEOMETRIC),
        ("one.py", ONE_ACTION),
        ("two.py", TWO_ACTIONS),
    ):
        out[name] = tmp_path / name
        out[name].write_text(text)
    return out


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict | None, str]:
    code = main(["verify", *args, "--json"])
    cap = capsys.readouterr()
    return code, (json.loads(cap.out)["result"] if code == 0 else None), cap.err


# -- 1. the value is the optimum asked for ---------------------------------------------------------------------------


def pmin_pmax_within(steps: int) -> tuple[float, float]:
    """Pmin/Pmax of F<=steps goal on REWARDS by backward induction (hand-checkable: 0.6 and 0.757 for 3 steps)."""
    lo = hi = {s: float(s == 3) for s in range(4)}
    for _ in range(steps):

        def q(v: dict[int, float], s: int, a: str) -> float:
            return sum(p * v[t] for t, p in T[(s, a)].items())

        lo = {
            s: 1.0 if s == 3 else min(q(lo, s, a) for a in PI[s]) if s else min(q(lo, 0, "a"), q(lo, 0, "b")) for s in range(4)
        }
        hi = {
            s: 1.0 if s == 3 else max(q(hi, s, a) for a in PI[s]) if s else max(q(hi, 0, "a"), q(hi, 0, "b")) for s in range(4)
        }
    return lo[0], hi[0]


@pytest.mark.parametrize(
    "text,asked",
    [
        ('Pmin=? [F<=3 "goal"]', "min"),
        ('Pmax=? [F<=3 "goal"]', "max"),
        ('P>=0.5 [F<=3 "goal"]', "min"),
        ('P<=0.7 [F<=3 "goal"]', "max"),
    ],
)
def test_monolithic_json_value_is_the_optimum_asked_for(capsys, files, text, asked) -> None:
    pmin, pmax = pmin_pmax_within(3)
    assert (pmin, pmax) == pytest.approx((0.6, 0.757))
    code, data, err = verify(capsys, str(files["rewards.prism"]), "-p", text, "--mode", "monolithic")
    assert code == 0, err
    assert data["pmin"] == pytest.approx(pmin, rel=1e-12) and data["pmax"] == pytest.approx(pmax, rel=1e-12)
    assert data["value"] == pytest.approx(pmin if asked == "min" else pmax, rel=1e-12)
    assert data["lower"] <= data["value"] <= data["upper"]
    if text.startswith("P>="):
        assert data["satisfied"] is True  # Pmin 0.6 >= 0.5
    if text.startswith("P<="):
        assert data["satisfied"] is False  # Pmax 0.757 > 0.7


def test_monolithic_api_value_is_pmin_for_pmin(files) -> None:
    from rlverify import ExactOptions, verify_exact

    r = verify_exact(files["rewards.prism"], 'Pmin=? [F<=3 "goal"]', None, ExactOptions(mode="monolithic"))
    assert r.value == pytest.approx(0.6, rel=1e-12) and r.pmin == r.value and r.pmax == pytest.approx(0.757)


# -- 2. verdicts from the certified bracket and graph analysis ------------------------------------------------------


@pytest.mark.parametrize("strategy", ["merged", "full", "onthefly"])
@pytest.mark.parametrize(
    "text,expected",
    [
        ('P>0 [F<=8 "goal"]', True),
        ('P<=0 [F<=8 "goal"]', False),
        ('P>0 [F "goal"]', True),
        ('P<=0 [F "goal"]', False),
        ('P<1 [F "goal"]', True),
        ('P>=1 [F "goal"]', False),
        ('P>=0.5 [F<=8 "goal"]', False),
        ('P<=1 [F<=8 "goal"]', True),
        ('P>0 [F<=1 "goal"]', False),
    ],
)  # the goal is 2 steps away
def test_qualitative_verdicts_on_the_policy_chain_follow_graph_analysis(capsys, files, strategy, text, expected) -> None:
    code, data, err = verify(
        capsys, str(files["underflow.prism"]), "-p", text, "--policy", f"{files['one.py']}:pi", "--strategy", strategy
    )
    assert code == 0, err
    assert data["satisfied"] is expected
    assert 0.0 <= data["value"] <= 1.0
    if data["lower"] is not None:
        assert data["lower"] <= data["value"] <= data["upper"]
        assert data["upper"] < 1e-250  # the value is 1e-600: only an absolute bound exists


@pytest.mark.parametrize(
    "text,expected",
    [
        ('P>0 [F<=8 "goal"]', True),
        ('P<=0 [F<=8 "goal"]', False),
        ('Pmax>0 [F "goal"]', True),
        ('Pmin>0 [F "goal"]', True),
        ('P<=0 [F "goal"]', False),
        ('Pmax>=1 [F "goal"]', False),
        ('P>0 [F<=1000000000 "goal"]', True),
    ],
)
def test_qualitative_verdicts_in_monolithic_mode_follow_graph_analysis(capsys, files, text, expected) -> None:
    code, data, err = verify(capsys, str(files["underflow.prism"]), "-p", text, "--mode", "monolithic")
    assert code == 0, err
    assert data["satisfied"] is expected
    # Storm's own bounds collapse onto 0 here; a bracket [0, 0] would claim the value is exactly 0
    assert data["upper"] is None or data["upper"] > 0


def test_verdict_is_undecided_when_the_bracket_contains_the_threshold(capsys, files) -> None:
    # P(F{"r"}<=5 goal) = 0.70948 exactly (dynamic program below); Storm's sound bracket contains it
    code, data, err = verify(
        capsys, str(files["rewards.prism"]), "-p", 'P>=0.70948 [F{"r"}<=5 "goal"]', "--policy", f"{files['two.py']}:pi"
    )
    assert code == 0, err
    assert data["satisfied"] is None
    assert any("undecided" in w and "0.70948" in w and "--precision" in w for w in data["warnings"])
    assert data["lower"] <= 0.70948 <= data["upper"]


def test_verdict_and_clip_never_use_a_rounded_float() -> None:
    from rlverify.exact.outcome import CheckOutcome, clipped, verdict

    # a Pmax computed as 1.0000000000000002: P<=1 holds for every probability
    assert verdict(1.0, "LESS_EQUAL", 1.0000000000000002, 1.0000000000000002) == (True, None)
    assert verdict(0.0, "GREATER_EQUAL", -1e-17, 0.0)[0] is True
    # a value above its own upper bound (and above 1) is reported inside both
    out = clipped(CheckOutcome(value=1.0000000000000107, lower=0.999, upper=1.0, values=np.zeros(1)), probability=True)
    assert (out.value, out.lower, out.upper) == (1.0, 0.999, 1.0)
    # graph facts decide the qualitative thresholds whatever the bracket
    assert verdict(0.0, "GREATER", 0.0, 1.6e-322, zero=False)[0] is True
    assert verdict(0.0, "LESS_EQUAL", 0.0, 1.6e-322, zero=False)[0] is False
    assert verdict(1.0, "LESS", 1.0, 1.0, one=False)[0] is True
    # no graph facts: a bracket touching 0 decides nothing
    assert verdict(0.0, "GREATER", 0.0, 1.6e-322)[0] is None
    assert verdict(0.5, "GREATER_EQUAL", 0.4, 0.6)[0] is None
    assert verdict(0.5, "GREATER_EQUAL", 0.5, 0.6)[0] is True and verdict(0.5, "GREATER", 0.5, 0.6)[0] is None


def test_ranks_are_exact_step_counts() -> None:
    import scipy.sparse as sp

    from rlverify.exact.bounded import ranks

    # 0 -> {1, 2}, 1 -> 3, 2 -> 2 (sink), 3 target
    m = sp.csr_matrix(np.array([[0, 0.5, 0.5, 0], [0, 0, 0, 1.0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]]))
    allowed, target = np.ones(4, bool), np.array([0, 0, 0, 1], bool)
    assert ranks(m, None, allowed, target, all_choices=False, all_successors=False, limit=10).tolist() == [2, 1, -1, 0]
    assert ranks(m, None, allowed, target, all_choices=False, all_successors=True, limit=10).tolist() == [-1, 1, -1, 0]
    assert ranks(m, None, allowed, target, all_choices=False, all_successors=False, limit=1).tolist() == [-1, 1, -1, 0]


def _brute_ranks(dense, groups, allowed, target, all_choices, all_successors, limit):
    """The definition of :func:`ranks`, level by level over a dense matrix (independent of the sparse code)."""
    S = dense.shape[1]
    within = target.copy()  # rank <= level
    rank = np.where(target, 0, -1)
    for level in range(1, limit + 1):
        nxt = within.copy()
        for s in range(S):
            if within[s] or not allowed[s]:
                continue
            per_choice = []
            for c in range(groups[s], groups[s + 1]):
                succ = np.flatnonzero(dense[c] > 0)
                hit = within[succ]
                per_choice.append(bool(len(succ)) and (hit.all() if all_successors else hit.any()))
            if per_choice and (all(per_choice) if all_choices else any(per_choice)):
                nxt[s] = True
                rank[s] = level
        within = nxt
    return rank


@pytest.mark.parametrize("seed", range(8))
def test_ranks_match_the_definition_and_leave_a_matrix_with_zeros_and_duplicates_alone(seed) -> None:
    import scipy.sparse as sp

    from rlverify.exact.bounded import ranks

    rng = np.random.default_rng(seed)
    S = 9
    groups = np.r_[0, np.cumsum(rng.integers(1, 4, size=S))]
    C = int(groups[-1])
    dense = (rng.random((C, S)) < 0.25) * rng.random((C, S))
    rows, cols = np.nonzero(np.ones((C, S)))
    keep = rng.random(len(rows)) < 0.4  # explicit zeros and duplicates in a non-canonical CSR
    data = dense[rows[keep], cols[keep]]
    dup = rng.random(keep.sum()) < 0.3
    coo = sp.coo_matrix(
        (np.r_[data, np.zeros(dup.sum())], (np.r_[rows[keep], rows[keep][dup]], np.r_[cols[keep], cols[keep][dup]])),
        shape=(C, S),
    )
    m = sp.csr_matrix((coo.data, coo.col, np.r_[0, np.cumsum(np.bincount(coo.row, minlength=C))]), shape=(C, S))
    m = sp.csr_matrix((m.data, m.indices, m.indptr), shape=(C, S))
    dense = m.toarray()  # what the matrix means (duplicates summed)
    before = (m.data.copy(), m.indices.copy(), m.indptr.copy())
    allowed, target = rng.random(S) < 0.8, rng.random(S) < 0.2
    for all_choices in (False, True):
        for all_successors in (False, True):
            got = ranks(m, groups, allowed, target, all_choices=all_choices, all_successors=all_successors, limit=6)
            want = _brute_ranks(dense, groups, allowed, target, all_choices, all_successors, 6)
            assert got.tolist() == want.tolist(), (all_choices, all_successors)
    for a, b in zip(before, (m.data, m.indices, m.indptr), strict=True):
        assert np.array_equal(a, b)  # the caller's matrix is never compacted in place


# -- 3. huge step bounds ---------------------------------------------------------------------------------------------


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlverify.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": SRC},
    )


@pytest.mark.parametrize("mode", ["stochastic", "monolithic"])
def test_a_huge_step_bound_answers_fast(files, mode) -> None:
    args = ["--policy", f"{files['one.py']}:pi"] if mode == "stochastic" else ["--mode", "monolithic"]
    t = time.perf_counter()
    done = run_cli("verify", str(files["geometric.prism"]), "-p", 'P=? [F<=1000000000 "goal"]', *args, "--json")
    assert done.returncode == 0, done.stderr
    assert time.perf_counter() - t < 30
    data = json.loads(done.stdout)["result"]
    # within 1e9 steps the value is 2/3 (up to (3/4)^1e9): the iteration stops once within --precision (1e-6,
    # relative) of the unbounded value, or at a fixed point
    assert data["value"] == pytest.approx(2 / 3, rel=1e-6)
    assert data["lower"] <= 2 / 3 <= data["upper"] and data["upper"] - data["lower"] <= 1e-6 * data["lower"]


def test_a_huge_cumulative_reward_bound_is_refused_up_front(files) -> None:
    done = run_cli(
        "verify", str(files["geometric.prism"]), "-p", 'R{"steps"}=? [C<=1000000000000]', "--policy", f"{files['one.py']}:pi"
    )
    assert done.returncode == 2, done.stderr
    assert "--max-work" in done.stderr and "1,000,000,000,000" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_step_budget_refuses_with_the_bracket_reached(capsys, files) -> None:
    # a budget of 20 multiply-adds (4 steps): no fixed point and not within the precision yet
    code, _, err = verify(
        capsys,
        str(files["geometric.prism"]),
        "-p",
        'P=? [F<=100000 "goal"]',
        "--policy",
        f"{files['one.py']}:pi",
        "--max-work",
        "20",
    )
    assert code == 2
    assert "--max-work" in err and "100,000" in err


def test_explain_count_is_bounded(files) -> None:
    # the chain has infinitely many paths to the goal (a self-loop): a search for 1e9 of them never ended
    done = run_cli(
        "verify",
        str(files["geometric.prism"]),
        "-p",
        'P=? [F "goal"]',
        "--policy",
        f"{files['one.py']}:pi",
        "--explain",
        "1000000000",
    )
    assert done.returncode == 2
    assert "--explain" in done.stderr and "10,000" in done.stderr


# -- 5. reward-bounded until ------------------------------------------------------------------------------------------


@cache
def within(s: int, budget: int, optimum: str | None) -> float:
    """P(reach the goal having earned at most ``budget``) from ``s``: the policy PI, or Pmin/Pmax over actions."""
    if budget < 0:
        return 0.0
    if s == 3:
        return 1.0

    def q(a: str) -> float:
        cost = STATE_R.get(s, 0) + ACTION_R.get((s, a), 0)
        return sum(p * within(t, budget - cost, optimum) for t, p in T[(s, a)].items())

    actions = ["a", "b"] if s == 0 else ["a"]
    if optimum is None:
        return sum(w * q(a) for a, w in PI[s].items())
    return (min if optimum == "min" else max)(q(a) for a in actions)


def at_least(s: int, need: int, optimum: str | None, depth: int = 0) -> float:
    """P(reach the goal having earned at least ``need``) (truncated at depth 400: the remainder is < 0.5^200)."""
    if s == 3:
        return 1.0 if need <= 0 else 0.0
    if depth > 400:
        return 0.0

    def q(a: str) -> float:
        cost = STATE_R.get(s, 0) + ACTION_R.get((s, a), 0)
        return sum(p * at_least(t, max(need - cost, 0), optimum, depth + 1) for t, p in T[(s, a)].items())

    if need == 0:  # every run reaches the goal (no state can avoid it forever): probability 1
        return 1.0
    actions = ["a", "b"] if s == 0 else ["a"]
    if optimum is None:
        return sum(w * q(a) for a, w in PI[s].items())
    return (min if optimum == "min" else max)(q(a) for a in actions)


@pytest.mark.parametrize(
    "text,expected",
    [('P=? [F{"r"}<=5 "goal"]', lambda: within(0, 5, None)), ('P=? [true Urew{"r"}>=5 "goal"]', lambda: at_least(0, 5, None))],
)
def test_reward_bounded_until_on_the_policy_chain(capsys, files, text, expected) -> None:
    value = expected()
    assert value == pytest.approx(0.70948 if "<=" in text else 0.40875, rel=1e-9)  # by hand, too
    code, data, err = verify(capsys, str(files["rewards.prism"]), "-p", text, "--policy", f"{files['two.py']}:pi")
    assert code == 0, err
    # the policy mixes actions of different rewards at x=0: folding them into pi-weighted state rewards would
    # give another number; the chain keeps a state per taken choice
    assert data["value"] == pytest.approx(value, rel=1e-6)
    assert data["lower"] <= value <= data["upper"]


@pytest.mark.parametrize(
    "text,expected",
    [
        ('Pmax=? [F{"r"}<=5 "goal"]', lambda: within(0, 5, "max")),
        ('Pmin=? [F{"r"}<=5 "goal"]', lambda: within(0, 5, "min")),
        ('Pmin=? [true Urew{"r"}>=5 "goal"]', lambda: at_least(0, 5, "min")),
    ],
)
def test_reward_bounded_until_in_monolithic_mode(capsys, files, text, expected) -> None:
    value = expected()
    code, data, err = verify(capsys, str(files["rewards.prism"]), "-p", text, "--mode", "monolithic")
    assert code == 0, err
    assert data["value"] == pytest.approx(value, rel=1e-6)


# -- 6. memory -------------------------------------------------------------------------------------------------------


def test_robust_default_memory_guard_refuses_from_its_estimate(capsys, monkeypatch) -> None:
    # a machine with 2 GiB: the default guard (80%) refuses the 2,187 perturbations x 14,400 states of avoid-v1 with
    # every feature perturbed before enumerating them (it used to run 5 minutes and die with a MemoryError)
    import rlverify.models.explicit as explicit

    monkeypatch.setattr(explicit, "machine_memory", lambda: 2 << 30)
    t = time.perf_counter()
    code = main(["robust", "avoid-v1", "-p", "collision-100", "--epsilon", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert time.perf_counter() - t < 60
    assert "default memory guard" in err and "--perturb" in err and "2,187 perturbations per state" in err
    assert "--max-memory" in err


def test_a_memory_error_in_the_exact_engine_is_exit_2(capsys, files, monkeypatch) -> None:
    import rlverify.exact.verify as engine

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(engine, "check", exhausted)
    code = main(["verify", str(files["geometric.prism"]), "-p", 'P=? [F "goal"]', "--policy", f"{files['one.py']}:pi"])
    err = capsys.readouterr().err
    assert code == 2
    assert "out of memory during exact verification" in err and "--max-memory" in err and "--max-states" in err
    assert "Traceback" not in err


def test_default_memory_limit_is_a_fraction_of_the_machine() -> None:
    from rlverify.models.explicit import DEFAULT_MEMORY_FRACTION, machine_memory, memory_limit

    total = machine_memory()
    limit, how = memory_limit(None)
    assert total > 0 and limit == int(DEFAULT_MEMORY_FRACTION * total) and "--max-memory" in how
    assert memory_limit(123456)[0] == 123456
