"""Choices the action labels do not identify, addressed by command names, against brute force.

Each model reproduces one pattern of the classic PRISM benchmarks: an unlabelled choice between two
modules' commands (consensus), two commands of one module sharing a label (firewire's ``[round]``,
zeroconf's ``[rec]``), and a label synchronising modules that both offer it twice. The expected
values come from a numpy solve of the chain written out by hand from the model text.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.errors import PolicyError
from rlverify.models import build_explicit, load_model
from rlverify.models.dynamics import agent_actions, choice_table
from rlverify.policies import CallablePolicy
from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

# two modules, each with an unlabelled command enabled at the start: the scheduler picks which moves
INTERLEAVED = """mdp
module m
  x : [0..2] init 0;
  [] x=0 -> 0.5 : (x'=1) + 0.5 : (x'=2);
  [] x>0 -> true;
endmodule
module n
  y : [0..1] init 0;
  [] y=0 & x=0 -> (y'=1);
endmodule
label "goal" = x=2 | y=1;
"""

# one module, two commands with one label in the same state
SAME_LABEL = """mdp
module m
  x : [0..3] init 0;
  [go] x=0 -> 0.5 : (x'=1) + 0.5 : (x'=2);
  [go] x=0 -> 0.25 : (x'=2) + 0.75 : (x'=3);
  [go] x>0 -> true;
endmodule
label "goal" = x=2;
"""

# a label both modules offer twice: four synchronised choices m:k+n:j
SYNC = """mdp
module m
  x : [0..2] init 0;
  [b] x=0 -> 0.9 : (x'=1) + 0.1 : (x'=2);
  [b] x=0 -> (x'=2);
  [done] x>0 -> true;
endmodule
module n
  y : [0..1] init 0;
  [b] y=0 -> (y'=1);
  [b] y=0 -> 0.5 : (y'=1) + 0.5 : (y'=0);
  [done] true -> true;
endmodule
label "goal" = x=2 & y=1;
"""


def reach(P: np.ndarray, goal: np.ndarray, start: int) -> float:
    """P(F goal) from ``start`` in the chain ``P`` (rows sum to 1) by a linear solve over the states that can reach goal."""
    n = len(P)
    can = goal.copy()
    for _ in range(n):
        can = can | (P[:, can].sum(axis=1) > 0)
    free = can & ~goal
    A = np.eye(free.sum()) - P[np.ix_(free, free)]
    b = P[np.ix_(free, goal)].sum(axis=1)
    v = np.zeros(n)
    v[goal] = 1.0
    v[free] = np.linalg.solve(A, b)
    return float(v[start])


def same_label_expected(q: float) -> float:
    """SAME_LABEL: P(F x=2) when the policy takes the first `go` command with ``q``, the second with ``1 - q``."""
    P = np.zeros((4, 4))
    P[0, 1], P[0, 2] = q * 0.5, q * 0.5 + (1 - q) * 0.25
    P[0, 3] = (1 - q) * 0.75
    P[1, 1] = P[2, 2] = P[3, 3] = 1.0
    return reach(P, np.array([False, False, True, False]), 0)


def policy(actions: list[str], start: list[float], features: list[str]) -> CallablePolicy:
    """``start`` in the initial state (all features 0), uniform over the actions elsewhere."""

    def pi(s: np.ndarray) -> np.ndarray:
        at_start = (s == 0).all(axis=1)
        return np.where(at_start[:, None], np.asarray(start), 1.0 / len(actions))

    return CallablePolicy(pi, features, actions)


def check_both_engines(path, pol: CallablePolicy, expected: float) -> None:
    r = verify_exact(path, 'P=? [F "goal"]', pol)
    assert r.value == pytest.approx(expected, abs=1e-12)
    assert r.untaken_choices == {}
    s = verify_statistical(
        load_model(path),
        'P=? [F "goal"]',
        pol,
        StatisticalOptions(method="clopper-pearson", runs=4000, delta=0.001, simulation=SimulationOptions(seed=3)),
    )
    assert s.interval[0] <= expected <= s.interval[1] and s.stalled == 0


def test_unlabelled_choice_between_two_modules(tmp_path):
    path = tmp_path / "interleaved.prism"
    path.write_text(INTERLEAVED)
    mdp, _ = build_explicit(load_model(path), None)
    assert agent_actions(mdp) == ("m:1", "n:1")  # m:2 is the only choice where it is enabled: not a decision
    # states (x, y): 0=(0,0) 1=(1,0) 2=(2,0) 3=(0,1); m:1 at (0,0) with p, n:1 with 1-p; (0,1) then only m:1
    p = 0.3
    P = np.zeros((6, 6))
    idx = {(0, 0): 0, (1, 0): 1, (2, 0): 2, (0, 1): 3, (1, 1): 4, (2, 1): 5}
    P[0, idx[1, 0]] += p * 0.5
    P[0, idx[2, 0]] += p * 0.5
    P[0, idx[0, 1]] += 1 - p
    P[3, idx[1, 1]] += 0.5
    P[3, idx[2, 1]] += 0.5
    for s in (1, 2, 4, 5):
        P[s, s] = 1.0
    goal = np.array([False, False, True, True, True, True])
    expected = reach(P, goal, 0)
    assert expected == pytest.approx(0.3 * 0.5 + 0.7)
    check_both_engines(path, policy(["m:1", "n:1"], [p, 1 - p], ["x", "y"]), expected)


def test_two_commands_of_one_module_with_one_label(tmp_path):
    path = tmp_path / "same.prism"
    path.write_text(SAME_LABEL)
    # by label: refused, naming the commands to use
    with pytest.raises(PolicyError, match=r"2 choices labelled 'go' \(commands m:1, m:2\)"):
        verify_exact(path, 'P=? [F "goal"]', policy(["go"], [1.0], ["x"]))
    q = 0.6
    expected = same_label_expected(q)
    # m:3 is x>0's only choice of label go; the policy names it by command too
    check_both_engines(path, policy(["m:1", "m:2", "m:3"], [q, 1 - q, 0.0], ["x"]), expected)
    # the label may still name the choice where it identifies it (x>0: m:3 alone)
    check_both_engines(path, policy(["m:1", "m:2", "go"], [q, 1 - q, 0.0], ["x"]), expected)


def test_a_label_synchronising_modules_that_offer_it_twice(tmp_path):
    path = tmp_path / "sync.prism"
    path.write_text(SYNC)
    mdp, _ = build_explicit(load_model(path), None)
    names = ["m:1+n:1", "m:1+n:2", "m:2+n:1", "m:2+n:2"]
    assert agent_actions(mdp) == ("done", *names)
    w = np.array([0.1, 0.2, 0.3, 0.4])

    # states (x, y) in row-major order over x in 0..2, y in 0..1
    def s(x, y):
        return 2 * x + y

    P = np.zeros((6, 6))
    mx = {1: [(1, 0.9), (2, 0.1)], 2: [(2, 1.0)]}
    ny = {1: [(1, 1.0)], 2: [(1, 0.5), (0, 0.5)]}
    for wi, (i, j) in zip(w, [(1, 1), (1, 2), (2, 1), (2, 2)], strict=True):
        for x2, px in mx[i]:
            for y2, py in ny[j]:
                P[s(0, 0), s(x2, y2)] += wi * px * py
    # (0, 1): y=1 disables n's [b]: no b choice; only... nothing (x=0: done disabled): deadlock self-loop
    P[s(0, 1), s(0, 1)] = 1.0
    for x in (1, 2):
        for y in (0, 1):
            P[s(x, y), s(x, y)] = 1.0  # done loops (the only choice)
    goal = np.zeros(6, dtype=bool)
    goal[s(2, 1)] = True
    expected = reach(P, goal, s(0, 0))
    check_both_engines(path, policy(["done", *names], [0.0, *w], ["x", "y"]), expected)
    # a command name with the modules out of order, or mixing labels, is refused with the fix
    with pytest.raises(PolicyError, match="write the commands in module order: 'm:1\\+n:1'"):
        verify_exact(path, 'P=? [F "goal"]', policy(["n:1+m:1"], [1.0], ["x", "y"]))
    with pytest.raises(PolicyError, match="'m:9' is not a command of the model \\(did you mean 'm:"):
        verify_exact(path, 'P=? [F "goal"]', policy(["m:9"], [1.0], ["x", "y"]))


def test_jani_edges_are_named_by_their_position_in_the_file(tmp_path):
    import stormpy
    import stormpy.io

    prism = tmp_path / "same.prism"
    prism.write_text(SAME_LABEL)
    jani = tmp_path / "same.jani"
    stormpy.io.export_jani_to_file(str(jani), stormpy.parse_prism_program(str(prism)).to_jani(False))
    edges = json.loads(jani.read_text())["automata"][0]["edges"]

    # find, from the file alone, which edge is the 0.5/0.5 command and which the 0.25/0.75 one
    def probs(e):
        exps = [d.get("probability", {}).get("exp", 1) for d in e["destinations"]]
        return sorted(float(x) if isinstance(x, (int, float)) else 0.0 for x in exps)

    first = next(i for i, e in enumerate(edges) if len(e["destinations"]) == 2 and 0.5 in probs(e)) + 1
    second = next(i for i, e in enumerate(edges) if len(e["destinations"]) == 2 and 0.75 in probs(e)) + 1
    third = next(i for i, e in enumerate(edges) if len(e["destinations"]) == 1) + 1
    q = 0.6
    expected = same_label_expected(q)
    pol = policy([f"m:{first}", f"m:{second}", f"m:{third}"], [q, 1 - q, 0.0], ["x"])
    assert verify_exact(jani, 'P=? [F "goal"]', pol).value == pytest.approx(expected, abs=1e-12)


def test_choices_named_by_command_are_never_pruned_by_the_onthefly_mask(tmp_path):
    path = tmp_path / "same.prism"
    path.write_text(SAME_LABEL)
    pol = policy(["m:1", "m:2", "go"], [0.6, 0.4, 0.0], ["x"])
    full = verify_exact(path, 'P=? [F "goal"]', pol, ExactOptions(strategy="full")).value
    onthefly = verify_exact(path, 'P=? [F "goal"]', pol, ExactOptions(strategy="onthefly")).value
    assert onthefly == pytest.approx(full, abs=1e-12) and full == pytest.approx(0.6 * 0.5 + 0.4 * 0.25)


def test_untaken_choices_count_the_states_offering_them(tmp_path):
    path = tmp_path / "same.prism"
    path.write_text(SAME_LABEL)
    mdp, _ = build_explicit(load_model(path), None, command_names=True)
    table = choice_table(mdp, ["m:1"])
    # x=0 offers m:1 and m:2; x=1..3 offer go (m:3) alone: 3 states
    assert table.untaken() == {"go (m:2)": 1, "go (m:3)": 3}


def test_a_forced_first_step_is_said_when_a_step_bound_counts_it(tmp_path):
    # the first (unlabelled, lone) command draws the start; then `go` reaches the goal with 1/2 per step
    path = tmp_path / "reset.prism"
    path.write_text(
        "mdp\nmodule m\n  x : [-1..2] init -1;\n  [] x=-1 -> 0.5 : (x'=0) + 0.5 : (x'=1);\n"
        "  [go] x>=0 & x<2 -> 0.5 : (x'=2) + 0.5 : (x'=x);\nendmodule\nlabel \"goal\" = x=2;\n"
    )
    pol = policy(["go"], [1.0], ["x"])
    r = verify_exact(path, 'P=? [F<=3 "goal"]', pol)
    assert r.value == pytest.approx(1 - 0.5**2)  # the reset is one of the 3 steps: 2 tries of 1/2
    assert any("at most 2 steps are the policy's" in w for w in r.warnings)
    s = verify_statistical(
        load_model(path),
        'P=? [F<=3 "goal"]',
        pol,
        StatisticalOptions(method="clopper-pearson", runs=200, simulation=SimulationOptions(seed=0)),
    )
    assert any("at most 2 steps are the policy's" in w for w in s.warnings)
    assert not any("forced step" in w for w in verify_exact(path, 'P=? [F "goal"]', pol).warnings)


MIXED2 = """mdp
module m
  x : [0..3] init 0;
  [a] x=0 -> (x'=1);
  [] x=0 -> (x'=2);
  [done] x>0 -> true;
endmodule
label "two" = x=2;
"""


@pytest.mark.parametrize("mode", ["stochastic", "deterministic"])
def test_the_onthefly_mask_never_leaves_an_unlabelled_command_to_be_taken_unasked(tmp_path, mode):
    # the policy gives `a` probability 0 at x=0: pruning `a` there would leave m:2 alone, taken as forced
    path = tmp_path / "mixed2.prism"
    path.write_text(MIXED2)
    pol = CallablePolicy(lambda s: np.tile([0.0, 1.0], (len(s), 1)), ["x"], ["a", "done"])
    for strategy in ("full", "onthefly"):
        r = verify_exact(path, 'P=? [F "two"]', pol, ExactOptions(mode=mode, strategy=strategy))
        assert (r.value, r.stalled_probability, r.untaken_choices) == (0.0, 1.0, {"m:2": 1}), strategy


def test_a_label_does_not_address_a_choice_beside_another_of_its_label(tmp_path):
    path = tmp_path / "same.prism"
    path.write_text(SAME_LABEL)
    # `m:1` claims one `go` command at x=0; `go` would silently mean the other one there
    with pytest.raises(PolicyError, match=r"name each of them by command \(m:2\)"):
        verify_exact(path, 'P=? [F "goal"]', policy(["m:1", "go"], [0.5, 0.5], ["x"]))


def test_a_command_that_runs_synchronised_is_named_with_its_partners(tmp_path):
    path = tmp_path / "sync.prism"
    path.write_text(SYNC)
    with pytest.raises(
        PolicyError,
        match=r"label 'b' synchronises modules m, n: a choice takes one command of each, "
        r"e.g. 'm:1\+n:1'",
    ):
        verify_exact(path, 'P=? [F "goal"]', policy(["m:1"], [1.0], ["x", "y"]))


def test_instantaneous_rewards_read_state_rewards_only(tmp_path):
    # an action reward is not a state reward: I=k sees only state rewards (PRISM's semantics; Storm's)
    path = tmp_path / "ik.prism"
    path.write_text(
        "mdp\nmodule m\n  x : [0..2] init 0;\n  [go] x<2 -> (x'=x+1);\n  [end] x=2 -> true;\nendmodule\n"
        'rewards "r"\n  [go] true : 1;\n  x=1 : 5;\nendrewards\n'
    )
    pol = CallablePolicy(lambda s: np.where(s[:, :1] < 2, [[1.0, 0.0]], [[0.0, 1.0]]), ["x"], ["go", "end"])
    assert verify_exact(path, 'R{"r"}=? [I=1]', pol).value == pytest.approx(5.0)  # at x=1 after one step
    assert verify_exact(path, 'R{"r"}=? [I=2]', pol).value == pytest.approx(0.0)
    assert verify_exact(path, 'R{"r"}=? [C<=2]', pol).value == pytest.approx(1 + 1 + 5)  # C counts both kinds


def test_a_stalled_run_satisfies_no_state_formula_negated_or_over_variables(tmp_path):
    # the stalled sink has no labels and all-zero variables: `!"alive"` and `x=0` must not hold there
    path = tmp_path / "stall.prism"
    path.write_text(
        "mdp\nmodule m\n  x : [0..2] init 1;\n  [l] x=1 -> 0.5 : (x'=0) + 0.5 : (x'=2);\n"
        '  [r] x=1 -> (x\'=2);\n  [] x=0 -> true;\n  [j] x=2 -> true;\nendmodule\nlabel "alive" = x>0;\n'
    )
    # at x=1: pi(l) = 0.6, pi(j) = 0.4 (j is not offered there: it stalls); crash (x=0) = 0.6 * 0.5
    pol = CallablePolicy(lambda s: np.where(s[:, :1] == 2, [0.0, 0.0, 1.0], [0.6, 0.0, 0.4]), ["x"], ["l", "r", "j"])
    for text in ("P=? [F x=0]", 'P=? [F !"alive"]', "P=? [F !(x>0)]", "P=? [true U x=0]"):
        r = verify_exact(path, text, pol)
        assert r.value == pytest.approx(0.3, abs=1e-9) and r.stalled_probability == pytest.approx(0.4), text
    # G: a stalled run does not satisfy "always alive" either: 0.6 * 0.5 (to x=2) only
    assert verify_exact(path, 'P=? [G "alive"]', pol).value == pytest.approx(0.3, abs=1e-9)


# two unlabelled commands of one module with disjoint guards: never two choices in a state, labels tell them apart
DISJOINT_UNLABELLED = """mdp
module m
  x : [0..2] init 0;
  [] x=0 -> 0.5 : (x'=1) + 0.5 : (x'=2);
  [] x>0 -> true;
endmodule
"""


@pytest.mark.parametrize(
    "text, ambiguous", [(INTERLEAVED, True), (DISJOINT_UNLABELLED, False)], ids=["interleaved", "disjoint"]
)
def test_two_unlabelled_commands_cost_one_storm_build_not_two(tmp_path, monkeypatch, text, ambiguous):
    """With two unlabelled commands the first build takes Storm's choice origins (csma built twice: 2 x 0.27 s);
    the names are kept only where labels do not identify the choices, as the label-only build decides."""
    import rlverify.models.storm_build as storm_build

    path = tmp_path / "m.prism"
    path.write_text(text)
    calls: list[bool] = []
    real = storm_build._build

    def counted(model, properties, max_states, mask, origins, *rest):
        calls.append(origins)
        return real(model, properties, max_states, mask, origins, *rest)

    monkeypatch.setattr(storm_build, "_build", counted)
    mdp, _ = build_explicit(load_model(path), None)
    assert calls == [True]
    assert (mdp.choice_commands is not None) is ambiguous
    if ambiguous:  # the interleaved start state: m's and n's unlabelled commands, named by command
        assert agent_actions(mdp) == ("m:1", "n:1")
    else:
        assert mdp.command_names == () and agent_actions(mdp) == ()
