"""The ``merged`` strategy (the chain explored without building the MDP) against Storm's build of the MDP.

Every case runs ``full`` (Storm builds the property-directed MDP, the chain is induced from its arrays) and
``merged`` (rlverify's numpy semantics of the PRISM program, :mod:`rlverify.models.program`) on the same
model, property and policy and requires the same value, the same numbers of states and transitions and
the same warnings; the hand-written programs are also checked against values derived by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.cli.main import main
from rlverify.errors import ModelError, PolicyError, PropertyError
from rlverify.exact import strategy as strategy_module
from rlverify.models.summary import summarize
from rlverify.models.symbolic import load_model
from rlverify.policies import CallablePolicy
from tests.models.test_command_names import INTERLEAVED


def _storm_examples() -> Path:
    from stormpy.examples import files

    return Path(files.prism_mdp_slipgrid).parent


def _mixing_policy(features, actions, seed=0) -> CallablePolicy:
    """Logits 2 sin(x W + b), W, b fixed at random: every feature matters, every action has mass."""
    rng = np.random.default_rng(seed)
    W, b = rng.normal(size=(len(features), len(actions))), rng.normal(size=len(actions))
    return CallablePolicy(lambda x: 2 * np.sin(x @ W + b), list(features), list(actions), output="logits", name="mix")


def _both(model, text, policy, **options):
    """(full, merged) results, or the exception type each raised."""
    out = []
    for strategy in ("full", "merged"):
        try:
            out.append(verify_exact(model, text, policy, ExactOptions(strategy=strategy, **options)))
        except (ModelError, PolicyError, PropertyError) as exc:
            out.append(type(exc))
    return out


def _same(full, merged, label=""):
    if isinstance(full, type) or isinstance(merged, type):
        assert full == merged, label
        return
    assert merged.strategy == "merged"
    assert merged.value == pytest.approx(full.value, rel=1e-9, abs=1e-13), label
    assert (merged.states, merged.transitions) == (full.states, full.transitions), label
    assert merged.untaken_choices == full.untaken_choices, label
    assert merged.stalled_probability == pytest.approx(full.stalled_probability, rel=1e-9, abs=1e-13), label
    assert sorted(merged.warnings) == sorted(full.warnings), label


#: (file, constants, properties): Storm's example MDPs, properties over their own labels
STORM_EXAMPLES = [
    ("slipgrid.nm", None, ['P=? [F "goal"]', 'P=? [F<=6 "goal"]', 'P=? [!"pickup" U "target"]']),
    ("maze_2.nm", None, ['P=? [F<=12 "goal"]', 'P=? [F "goal"]']),
    ("coin2-2.nm", None, ['P=? [F "finished" & "agree"]', 'P=? [F<=40 "finished"]']),
    ("leader3.nm", None, ['P=? [F "elected"]', 'P=? [F<=8 "elected"]']),
    ("csma2-2.nm", None, ['P=? [F "all_delivered"]', 'P=? [!"collision_max_backoff" U "all_delivered"]']),
    ("firewire3-0.5.nm", None, ['P=? [F<=40 "elected"]']),
    ("die_selection.nm", None, ['P=? [F "six"]', 'P=? [F<=3 "done"]']),
    ("two_dice.nm", None, ['P=? [F "seven"]', 'P=? [F "done" & "twelve"]']),
    ("tiny_rewards.nm", None, ['P=? [F "target"]']),
    ("scheduler_generation.nm", None, ['P=? [F "target"]']),
]


@pytest.mark.parametrize(
    "mode,unavailable", [("stochastic", "stall"), ("deterministic", "stall"), ("stochastic", "renormalize")]
)
@pytest.mark.parametrize("name,constants,props", STORM_EXAMPLES, ids=[e[0] for e in STORM_EXAMPLES])
def test_storm_examples_merged_equals_full(name, constants, props, mode, unavailable):
    path = _storm_examples() / name
    try:
        model = load_model(path, constants)
    except Exception as exc:
        pytest.fail(f"{name}: {exc}")
    summary, _ = summarize(model)
    # a policy over every choice name, and one that lacks the last action (its mass stalls or renormalises)
    for actions in (list(summary.actions), list(summary.actions)[:-1] or list(summary.actions)):
        policy = _mixing_policy(model.variables, actions)
        for text in props:
            full, merged = _both(model, text, policy, mode=mode, unavailable=unavailable, precision=1e-10)
            _same(full, merged, f"{name} {text} {actions}")


def test_avoid_merged_equals_full_and_is_what_auto_picks():
    import rlverify.benchmarks.avoid as avoid
    from rlverify.benchmarks import make

    model = make("avoid-v1", xMax=3, yMax=3, slickness=0.1).model()
    policy = _mixing_policy(model.variables, list(avoid.MOVES))
    for mode in ("stochastic", "deterministic"):
        full, merged = _both(model, "P=? [F<=20 COLLISION=true]", policy, mode=mode)
        _same(full, merged, mode)
        auto = verify_exact(model, "P=? [F<=20 COLLISION=true]", policy, ExactOptions(mode=mode))
        assert auto.strategy == "merged" and auto.value == merged.value


# three modules synchronising on `a` (one with two `a` commands), a global variable, negative ranges,
# ITE/floor/ceil/mod/pow/min/max, an unlabelled command beside labelled ones, a deadlock
PROGRAM = """mdp
const int K = 3;
global g : [-3..4] init 0;
module m
  x : [-2..K] init 0;
  b : bool init false;
  [a] x<K & !b -> 0.5 : (x'=x+1) + 0.5 : (x'=max(x-1,-2)) & (b'=true);
  [a] x>=0 -> 1/3 : (x'=mod(x+2, 3)) + 2/3 : (b'=!b);
  [c] b & x>0 -> (x'= x>1 ? floor(x/2) : ceil(-x/2));
  [] x=-2 -> (x'=pow(2, 0) - 1) & (b'=false);
endmodule
module n
  y : [0..2] init 0;
  [a] y<2 -> 0.25 : (y'=y+1) + 0.75 : true;
  [c] true -> (y'=min(y+1, 2));
  [d] y=2 & g<4 -> (g'=g+1);
endmodule
module o
  z : [0..1] init 0;
  [a] true -> 0.1 : (z'=1-z) + 0.9 : true;
  [d] z=1 -> (y'=0);
endmodule
label "top" = x=K & y=2;
label "far" = g>=2;
"""


def test_hand_written_program_with_synchronisation_and_every_operator(tmp_path):
    path = tmp_path / "prog.prism"
    # module o writes y (module n's): PRISM allows writes to another module's variable only for globals
    path.write_text(
        PROGRAM.replace("[d] z=1 -> (y'=0);", "[d] z=1 -> (g'=max(g-1, -3));").replace(
            "[d] y=2 & g<4 -> (g'=g+1);", "[d] y=2 & g<4 -> true;"
        )
    )
    model = load_model(path)
    summary, _ = summarize(model)
    for seed in range(3):
        policy = _mixing_policy(model.variables, list(summary.actions), seed=seed)
        for text in (
            'P=? [F "top"]',
            'P=? [F<=7 "far" | "top"]',
            'P=? [!"far" U<=9 x=-2]',
            'P=? [F "deadlock"]',
            "P=? [X y=1]",
            'P=? [G !"far"]',
        ):
            for mode in ("stochastic", "deterministic"):
                full, merged = _both(model, text, policy, mode=mode, precision=1e-10)
                _same(full, merged, f"{text} {mode} seed {seed}")


TWO_STEP = """mdp
module m
  s : [0..3] init 0;
  [go] s=0 -> 0.5 : (s'=1) + 0.5 : (s'=2);
  [stay] s=0 -> true;
  [go] s=1 -> (s'=3);
  [go] s=2 -> 0.2 : (s'=3) + 0.8 : (s'=2);
endmodule
label "done" = s=3;
"""


def test_two_step_chain_against_a_hand_derived_value(tmp_path):
    """pi(go | s=0) = q: P(F<=2 done) = q * (0.5 * 1 + 0.5 * 0.2) after two steps; s=0 stays with 1 - q."""
    path = tmp_path / "two.prism"
    path.write_text(TWO_STEP)
    q = 0.7

    def pi(x):
        return np.where((x[:, :1] == 0), [q, 1 - q], [1.0, 0.0])

    policy = CallablePolicy(pi, ["s"], ["go", "stay"])
    r = verify_exact(path, 'P=? [F<=2 "done"]', policy, ExactOptions(strategy="merged", precision=1e-12))
    # step 1: s=1 (q/2), s=2 (q/2), s=0 (1-q); step 2: from s=1 done, s=2 0.2, s=0 reaches s in {1,2} only
    assert r.value == pytest.approx(q / 2 + q / 2 * 0.2, abs=1e-12)
    # states: 0, 1, 2, 3 (s=3 is terminal: Storm's property-directed build does not expand it)
    assert (r.states, r.transitions) == (4, 7)


def test_mass_on_an_unavailable_action_stalls_as_with_full(tmp_path):
    path = tmp_path / "two.prism"
    path.write_text(TWO_STEP)
    policy = CallablePolicy(lambda x: np.tile([0.6, 0.4], (len(x), 1)), ["s"], ["go", "stay"])
    full, merged = _both(path, 'P=? [F "done"]', policy)
    _same(full, merged)
    # in s=1, s=2 only `go` is available: 0.4 stalls there; P(F done) = 0.6 * (0.5*0.6 + 0.5*0.6*0.2/(1-0.6*0.8))
    # from s=0: stay (0.4) loops back to s=0, so the value is the go-branch renormalised over the loop
    via_1 = 0.5 * 0.6
    via_2 = 0.5 * (0.6 * 0.2) / (1 - 0.6 * 0.8)
    assert merged.value == pytest.approx(0.6 * (via_1 + via_2) / (1 - 0.4), rel=1e-9)
    assert merged.stalled_probability > 0


def test_init_block_is_evaluated_over_the_domain(tmp_path):
    path = tmp_path / "init.prism"
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["s"], ["go", "stay"])
    path.write_text(TWO_STEP.replace("s : [0..3] init 0;", "s : [0..3];") + "init s=2 endinit\n")
    full, merged = _both(path, 'P=? [F<=3 "done"]', policy)
    _same(full, merged)
    # from s=2 only `go` is available (stay's 0.5 stalls): each step reaches done with 0.5 * 0.2, stays with 0.5 * 0.8
    assert merged.value == pytest.approx(0.1 * (1 + 0.4 + 0.4**2), abs=1e-12)
    path.write_text(TWO_STEP.replace("s : [0..3] init 0;", "s : [0..3];") + "init s=0 | s=1 endinit\n")
    full, merged = _both(path, 'P=? [F "done"]', policy)
    assert full is merged is PropertyError  # rlverify reports the value of one initial state


def test_reward_properties_are_built_by_storm(tmp_path):
    path = tmp_path / "two.prism"
    path.write_text(TWO_STEP + 'rewards "steps"\n  true : 1;\nendrewards\n')
    policy = CallablePolicy(lambda x: np.tile([0.9, 0.1], (len(x), 1)), ["s"], ["go", "stay"])
    r = verify_exact(path, 'R{"steps"}=? [F "done"]', policy)
    assert r.strategy == "full" and "reward" in r.settings["merged_declined"]


def test_out_of_range_assignment_and_bad_probabilities_are_refused_like_storm(tmp_path, capsys):
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["s"], ["go", "stay"])
    bad_range = tmp_path / "range.prism"
    bad_range.write_text(TWO_STEP.replace("[stay] s=0 -> true;", "[stay] s=0 -> (s'=s-1);"))
    # Storm's builder does not check ranges unless its exploration checks are on (they also reject 1/3 + 2/3),
    # and builds s=-1; merged refuses, as PRISM does
    with pytest.raises(ModelError, match=r"command m:2 assigns s=-1 outside its range \[0..3\] in state \{'s': 0\}"):
        verify_exact(bad_range, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))
    bad_sum = tmp_path / "sum.prism"
    bad_sum.write_text(TWO_STEP.replace("0.2 : (s'=3) + 0.8 : (s'=2)", "0.2 : (s'=3) + 0.7 : (s'=2)"))
    with pytest.raises(ModelError, match=r"probabilities of command m:4 sum to 0.9"):
        verify_exact(bad_sum, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))
    # Storm builds it without a word; the full strategy checks every choice after the build (it ended in an
    # internal assertion about the chain's rows before)
    with pytest.raises(ModelError, match=r"probabilities of a 'go' command sum to 0.9, not 1, in state \{'s': 2\}"):
        verify_exact(bad_sum, 'P=? [F "done"]', policy, ExactOptions(strategy="full"))
    pol = tmp_path / "pol.py"
    pol.write_text(
        "import numpy as np\nFEATURES = ['s']\nACTIONS = ['go', 'stay']\n"
        "def policy(x):\n    return np.tile([0.5, 0.5], (len(x), 1))\n"
    )
    code = main(
        ["verify", str(bad_range), "--property", 'P=? [F "done"]', "--policy", f"{pol}:policy", "--strategy", "merged"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "outside its range" in err


def test_command_names_policy_on_unlabelled_choices(tmp_path):
    """An unlabelled choice between two modules, addressed by command names (consensus' pattern)."""
    path = tmp_path / "inter.prism"
    path.write_text(INTERLEAVED)
    p = 0.3
    policy = CallablePolicy(lambda s: np.where((s == 0).all(axis=1)[:, None], [p, 1 - p], 0.5), ["x", "y"], ["m:1", "n:1"])
    full, merged = _both(path, 'P=? [F "goal"]', policy)
    _same(full, merged)
    assert merged.value == pytest.approx(p * 0.5 + (1 - p), abs=1e-12)


POW = """mdp
module m
  x : [0..4] init 0;
  [a] x<4 -> 0.5:(x'=x+1) + 0.5:(x'=x>0 ? pow(2, x-1) : 0);
  [b] x<4 -> (x'=min(4,x+2));
  [c] x=0 -> 0.5 : (x'=x+1) + 0.5 : (x'= 1/(x-0) > 0 ? 1 : 0) ;
endmodule
label "g" = x=4;
"""


def test_pow_with_negative_exponents_and_division_by_zero_in_the_branch_not_taken(tmp_path):
    """Storm evaluates both; numpy evaluates both ITE branches for every state and must not fail there."""
    path = tmp_path / "pow.prism"
    path.write_text(POW)
    summary, _ = summarize(load_model(path))
    policy = _mixing_policy(["x"], list(summary.actions))
    for text in ('P=? [F "g"]', 'P=? [F<=2 "g"]'):
        full, merged = _both(path, text, policy)
        _same(full, merged, text)


def test_lower_step_bound_zero_counts_as_none_for_terminal_states(tmp_path):
    # F[0,k] is F<=k: Storm makes the target terminal; F[1,k] must explore past it (the value differs)
    path = tmp_path / "two.prism"
    path.write_text(TWO_STEP)
    policy = CallablePolicy(lambda x: np.tile([0.6, 0.4], (len(x), 1)), ["s"], ["go", "stay"])
    for text in ('P=? [F[0,4] "done"]', 'P=? [F[2,4] "done"]', 'P=? [F>=0 "done"]'):
        full, merged = _both(path, text, policy)
        _same(full, merged, text)
    zero = verify_exact(path, 'P=? [F[0,4] "done"]', policy, ExactOptions(strategy="merged"))
    upto = verify_exact(path, 'P=? [F<=4 "done"]', policy, ExactOptions(strategy="merged"))
    assert (zero.value, zero.states, zero.transitions) == (upto.value, upto.states, upto.transitions)


def test_negative_probabilities_are_refused_and_zero_probability_updates_are_not_checked(tmp_path):
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["s"], ["go", "stay"])
    negative = tmp_path / "neg.prism"
    negative.write_text(TWO_STEP.replace("0.5 : (s'=1) + 0.5 : (s'=2)", "(s-1)/2 : (s'=1) + (3-s)/2 : (s'=2)"))
    with pytest.raises(ModelError, match=r"command m:1 has a negative probability -0.5 \(update 1\) in state \{'s': 0\}"):
        verify_exact(negative, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))
    zero = tmp_path / "zero.prism"  # an update of probability 0 leaving the range is never taken (Storm skips it)
    zero.write_text(TWO_STEP.replace("[stay] s=0 -> true;", "[stay] s=0 -> 0 : (s'=s+10) + 1 : true;"))
    full, merged = _both(zero, 'P=? [F "done"]', policy)
    _same(full, merged)


def test_a_lone_unlabelled_command_looping_at_the_start_is_a_dead_end_not_a_forced_step(tmp_path):
    path = tmp_path / "loop.prism"
    path.write_text("""mdp
module m
  x : [0..1] init 0;
  [] x=0 -> 0.5 : true + 0.5 : true;
  [go] x=1 -> (x'=0);
endmodule
label "g" = x=1;
""")
    policy = CallablePolicy(lambda x: np.ones((len(x), 1)), ["x"], ["go"])
    full, merged = _both(path, 'P=? [F<=3 "g"]', policy)
    _same(full, merged)
    assert not any("forced step" in w for w in merged.warnings)


def test_a_label_synchronising_many_command_combinations_forms_only_the_enabled_ones(tmp_path):
    # 7 modules x 5 commands of one label: 78,125 combinations, one enabled per state (merged declined them before)
    path = tmp_path / "combo.prism"
    path.write_text(
        "mdp\nmodule m1\n  a1 : [0..4] init 0;\n"
        + "".join(f"  [s] a1={i} -> (a1'={(i + 1) % 5});\n" for i in range(5))
        + "endmodule\n"
        + "".join(f"module m{k} = m1 [a1=a{k}] endmodule\n" for k in range(2, 8))
        + 'label "g" = a1=3 & a7=3;\n'
    )
    policy = CallablePolicy(lambda x: np.ones((len(x), 1)), ["a1"], ["s"])
    full, merged = _both(path, 'P=? [F "g"]', policy)
    _same(full, merged)
    auto = verify_exact(path, 'P=? [F "g"]', policy, ExactOptions(strategy="merged"))
    assert auto.strategy == "merged"
    assert merged.value == 1.0 and merged.states == 4  # every module steps together: (0..0), (1..1), (2..2), (3..3)


def test_a_label_with_too_many_enabled_combinations_in_a_state_is_left_to_storm(tmp_path, monkeypatch):
    """Three modules with five enabled commands of one label each: 125 choices in the initial state."""
    import rlverify.models.program_choices as program_choices

    path = tmp_path / "combo.prism"
    path.write_text(
        "mdp\nmodule m1\n  a1 : [0..5] init 0;\n"
        + "".join(f"  [s] a1=0 -> (a1'={k});\n" for k in range(1, 6))
        + "  [s] a1>0 -> true;\nendmodule\n"
        + "".join(f"module m{k} = m1 [a1=a{k}] endmodule\n" for k in (2, 3))
        + 'label "g" = a1=5 & a2=5 & a3=5;\n'
    )
    # the choices are told apart by command name; then every module loops (m1:6+m2:6+m3:6)
    names = [f"m1:{a}+m2:{b}+m3:{c}" for a in range(1, 6) for b in range(1, 6) for c in range(1, 6)]
    start, then = np.r_[np.full(125, 1 / 125), 0.0], np.r_[np.zeros(125), 1.0]
    policy = CallablePolicy(lambda x: np.where(x[:, :1] == 0, start, then), ["a1"], [*names, "m1:6+m2:6+m3:6"], name="uniform")
    want = verify_exact(path, 'P=? [F "g"]', policy, ExactOptions(strategy="merged"))
    assert want.states == 1 + 125 and want.value == pytest.approx(1 / 125, rel=1e-12)  # the uniform policy: 1/125
    monkeypatch.setattr(program_choices, "MAX_ENABLED", 100)
    monkeypatch.setattr(strategy_module, "AUTO_BRANCHING", 0.0)  # auto tries merged, whatever the program's shape
    r = verify_exact(path, 'P=? [F "g"]', policy)
    assert r.strategy == "full" and r.value == pytest.approx(1 / 125, rel=1e-12)
    assert (
        "label 's' has 125 enabled command combinations in state {'a1': 0, 'a2': 0, 'a3': 0}"
        in (r.settings["merged_declined"])
    )
    with pytest.raises(ModelError, match=r"--strategy merged cannot build this model \(label 's' has 125 enabled"):
        verify_exact(path, 'P=? [F "g"]', policy, ExactOptions(strategy="merged"))


def test_every_states_value_and_valuation_as_with_full(tmp_path):
    """--all-states: the same (valuation -> value) map; valuations survive Storm's encoding (offsets, booleans)."""
    import tempfile

    from rlverify.exact.merged import merged_chain
    from rlverify.models.explicit import read_umb, write_umb
    from rlverify.models.property_parser import parse_property

    path = tmp_path / "neg.prism"
    path.write_text(
        "mdp\nglobal g : [-3..4] init -3;\nmodule m\n  b : bool init true;\n"
        "  [a] g<4 -> 0.5:(g'=g+1) + 0.5:(b'=!b);\n  [c] b -> 0.3:(g'=max(g-2,-3)) + 0.7:true;\nendmodule\n"
        'label "t" = g=4;\n'
    )
    policy = _mixing_policy(["g", "b"], ["a", "c"])
    maps = []
    for strategy in ("full", "merged"):
        r = verify_exact(path, 'P=? [F<=6 "t"]', policy, ExactOptions(strategy=strategy, all_states=True))
        maps.append({tuple(v): x for v, x in zip(r.state_valuations.tolist(), r.state_values, strict=True)})
    assert maps[0].keys() == maps[1].keys() and len(maps[0]) == 16
    assert all(maps[1][k] == pytest.approx(maps[0][k], rel=1e-12, abs=1e-15) for k in maps[0])
    model = load_model(path)
    chain = merged_chain(model, parse_property(model, 'P=? [F<=6 "t"]'), policy, mode="stochastic", unavailable="stall").chain
    with tempfile.TemporaryDirectory() as d:
        write_umb(Path(d) / "c.umb", chain)
        back = read_umb(Path(d) / "c.umb")
    assert back.variables == chain.variables == ("b", "g")
    assert np.array_equal(back.valuations, chain.valuations) and chain.valuations[:, 1].min() == -3


@pytest.mark.parametrize("dense,batch", [(0, 1), (1 << 27, 1), (0, 1 << 19)], ids=["runs-tiny", "dense-tiny", "runs"])
def test_state_index_and_batch_size_do_not_change_the_chain(tmp_path, monkeypatch, dense, batch):
    """The sorted-runs index (domains above DENSE_DOMAIN) and one-state batches build the same chain."""
    import rlverify.exact.exploration_index as exploration_index
    import rlverify.exact.merged as merged_module

    path = tmp_path / "prog.prism"
    path.write_text(
        PROGRAM.replace("[d] z=1 -> (y'=0);", "[d] z=1 -> (g'=max(g-1, -3));").replace(
            "[d] y=2 & g<4 -> (g'=g+1);", "[d] y=2 & g<4 -> true;"
        )
    )
    model = load_model(path)
    summary, _ = summarize(model)
    policy = _mixing_policy(model.variables, list(summary.actions), seed=1)
    want = verify_exact(model, 'P=? [F<=7 "far" | "top"]', policy, ExactOptions(strategy="merged"))
    monkeypatch.setattr(exploration_index, "DENSE_DOMAIN", dense)
    monkeypatch.setattr(merged_module, "BATCH_BRANCHES", batch)
    got = verify_exact(model, 'P=? [F<=7 "far" | "top"]', policy, ExactOptions(strategy="merged"))
    full = verify_exact(model, 'P=? [F<=7 "far" | "top"]', policy, ExactOptions(strategy="full"))
    assert (got.states, got.transitions) == (want.states, want.transitions) == (full.states, full.transitions)
    assert got.value == pytest.approx(full.value, rel=1e-12) and want.value == pytest.approx(full.value, rel=1e-12)


def test_a_nan_probability_is_refused_naming_the_command_and_the_state(tmp_path):
    """0/0 as a probability: refused as a sum that is not 1 (the exploration ended in an internal assertion)."""
    path = tmp_path / "nan.prism"
    path.write_text(TWO_STEP.replace("[go] s=1 -> (s'=3);", "[go] s=1 -> (s-1)/(s-1) : (s'=3) + 1-(s-1)/(s-1) : (s'=2);"))
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["s"], ["go", "stay"])
    with pytest.raises(ModelError, match=r"the probabilities of command m:3 sum to nan, not 1, in state \{'s': 1\}"):
        verify_exact(path, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))


@pytest.mark.parametrize("batch", [1, 1 << 19], ids=["one-state-batches", "one-batch"])
def test_of_several_bad_updates_the_first_explored_states_is_reported(tmp_path, monkeypatch, batch):
    """s=1 and s=2 (explored in that order) each have a command leaving the range: s=1's (m:3) is reported whatever
    the batches, although m:2 (s=2's) comes first in the program."""
    import rlverify.exact.merged as merged_module

    path = tmp_path / "bad.prism"
    path.write_text(
        "mdp\nmodule m\n  s : [0..3] init 0;\n  [go] s=0 -> 0.5 : (s'=1) + 0.5 : (s'=2);\n"
        "  [go] s=2 -> (s'=s+5);\n  [go] s=1 -> (s'=s-5);\nendmodule\nlabel \"done\" = s=3;\n"
    )
    policy = CallablePolicy(lambda x: np.ones((len(x), 1)), ["s"], ["go"])
    monkeypatch.setattr(merged_module, "BATCH_BRANCHES", batch)
    with pytest.raises(ModelError, match=r"command m:3 assigns s=-4 outside its range \[0..3\] in state \{'s': 1\}"):
        verify_exact(path, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))


def _chain_arrays(built):
    chain = built.chain
    M = chain.transitions
    return (
        [M.indptr, M.indices, M.data, chain.valuations, *(chain.labels[k] for k in sorted(chain.labels))],
        (sorted(chain.labels), built.untaken, built.decision_states, built.mdp_branches, built.start_note),
    )


@pytest.mark.parametrize(
    "name,prop",
    [
        ("PROGRAM", 'P=? [F<=7 "far" | "top"]'),
        ("csma2-2.nm", 'P=? [!"collision_max_backoff" U "all_delivered"]'),
        ("leader3.nm", 'P=? [F "elected"]'),
        ("coin2-2.nm", 'P=? [F "finished" & "agree"]'),
        ("firewire3-0.5.nm", 'P=? [F<=40 "elected"]'),  # 120 commands: signatures of two words
        ("collide", 'P=? [!"collision_max_backoff" U "all_delivered"]'),  # csma2-2, every signature one hash
    ],
)
@pytest.mark.parametrize("lacking", [False, True], ids=["all-actions", "lacking-the-last"])
def test_the_choice_structure_gathered_by_guard_signature_builds_the_same_chain_bit_for_bit(
    tmp_path, monkeypatch, name, prop, lacking
):
    """Batches that gather their states' choices and choice table by guard signature (SHAPE_COMMANDS) build the chain
    every batch forming its own builds: the same arrays bit for bit, the same untaken choices (a policy lacking an
    action: named and counted per state), decision states and branches; also when two signatures share a hash (the
    batches from then on form their own)."""
    import rlverify.exact.exploration_index as exploration_index
    import rlverify.exact.merged as merged_module
    from rlverify.exact.merged import merged_chain
    from rlverify.models.property_parser import parse_property

    if name == "collide":
        monkeypatch.setattr(exploration_index.Shapes, "hash", staticmethod(lambda words: np.zeros(len(words), np.uint64)))
        path = _storm_examples() / "csma2-2.nm"
    elif name == "PROGRAM":
        path = tmp_path / "prog.prism"
        path.write_text(
            PROGRAM.replace("[d] z=1 -> (y'=0);", "[d] z=1 -> (g'=max(g-1, -3));").replace(
                "[d] y=2 & g<4 -> (g'=g+1);", "[d] y=2 & g<4 -> true;"
            )
        )
    else:
        path = _storm_examples() / name
    model = load_model(path)
    actions = list(summarize(model)[0].actions)
    policy = _mixing_policy(model.variables, actions[:-1] if lacking else actions, seed=2)
    prop_ = parse_property(model, prop)
    monkeypatch.setattr(merged_module, "BATCH_BRANCHES", 64)  # many batches after the initial states'
    built = []
    for commands in (0, merged_module.SHAPE_COMMANDS):
        monkeypatch.setattr(merged_module, "SHAPE_COMMANDS", commands)
        exploration = merged_module._Exploration(
            model, prop_, policy, mode="stochastic", unavailable="stall", say=lambda msg: None
        )
        assert (exploration.shapes is None) == (commands == 0)
        built.append(merged_chain(model, prop_, policy, mode="stochastic", unavailable="stall"))
    (arrays, facts), (arrays2, facts2) = (_chain_arrays(b) for b in built)
    assert facts == facts2
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(arrays, arrays2, strict=True))
    if lacking and name != "firewire3-0.5.nm":  # (firewire's last action is never offered where the policy decides)
        assert built[0].untaken  # the lacking action's choices are named


def test_a_state_the_policy_cannot_address_is_refused_naming_it_when_the_structure_is_gathered(tmp_path, monkeypatch):
    """Two `go` choices first offered in a state explored after the initial batch (s=2): refused naming s=2, whether
    the batch forms its own choice table or gathers it by guard signature (made on the first state showing it)."""
    import rlverify.exact.merged as merged_module

    path = tmp_path / "dup.prism"
    path.write_text(
        "mdp\nmodule m\n  s : [0..3] init 0;\n  [go] s<2 -> (s'=s+1);\n  [go] s=2 -> (s'=3);\n"
        '  [go] s>=2 -> (s\'=0);\nendmodule\nlabel "done" = s=3;\n'
    )
    policy = CallablePolicy(lambda x: np.ones((len(x), 1)), ["s"], ["go"])
    monkeypatch.setattr(merged_module, "BATCH_BRANCHES", 1)
    for commands in (0, 63):
        monkeypatch.setattr(merged_module, "SHAPE_COMMANDS", commands)
        with pytest.raises(PolicyError, match=r"state \{'s': 2\} has 2 choices labelled 'go' \(commands m:2, m:3\)"):
            verify_exact(path, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))


def _refusing_probe(monkeypatch):
    """Storm's build of the initial state made to refuse, as Storm refuses programs rlverify's compiler accepts."""
    from rlverify.exact import merged, storm_probe

    def refuse(model, prop):
        raise merged.Unsupported("Storm's build of the initial state failed: a refusal of Storm's")

    monkeypatch.setattr(storm_probe, "probe", refuse)


def test_storms_one_state_build_runs_in_its_own_thread_beside_the_policys_check(tmp_path, monkeypatch):
    """merged: Storm's one-state build runs in a thread of its own, started before the policy's check (which compiles
    the program) and joined before the exploration; full never starts it. The value is the hand-derived one."""
    import threading

    from rlverify.exact import chain as chain_module
    from rlverify.exact import storm_probe

    path = tmp_path / "two.prism"
    path.write_text(TWO_STEP)
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["s"], ["go", "stay"])
    events: list[tuple[str, str]] = []
    probe, checked = storm_probe.probe, chain_module.check_policy

    def recorded_probe(model, prop):
        events.append(("probe", threading.current_thread().name))
        return probe(model, prop)

    def recorded_check(*args, **kwargs):
        events.append(("check", threading.current_thread().name))
        return checked(*args, **kwargs)

    monkeypatch.setattr(storm_probe, "probe", recorded_probe)
    monkeypatch.setattr(chain_module, "check_policy", recorded_check)
    r = verify_exact(path, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))
    assert sorted(events) == [("check", threading.main_thread().name), ("probe", "rlverify-storm-probe")]
    assert r.strategy == "merged" and r.value == pytest.approx(1 / 3, rel=1e-12)  # as derived below
    events.clear()
    full = verify_exact(path, 'P=? [F "done"]', policy, ExactOptions(strategy="full"))
    assert full.value == pytest.approx(1 / 3, rel=1e-12)
    assert events == [("check", threading.main_thread().name)]


def test_storms_one_state_build_ends_before_auto_falls_back_to_storms_full_build(tmp_path, monkeypatch):
    """auto tries merged, whose exploration declines the program after the one-state build started: that build
    has ended before Storm builds the MDP (never two of Storm's builds at once), and the fallback's value is 1/3."""
    import time

    from rlverify.exact import chain as chain_module
    from rlverify.exact import merged, storm_probe

    path = tmp_path / "two.prism"
    path.write_text(TWO_STEP)
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["s"], ["go", "stay"])
    times: dict[str, float] = {}
    probe, build = storm_probe.probe, chain_module.build_explicit

    def slow_probe(model, prop):
        time.sleep(0.3)
        out = probe(model, prop)
        times["probe ended"] = time.perf_counter()
        return out

    def declined(*args, **kwargs):
        raise merged.Unsupported("declined by the test")

    def timed_build(*args, **kwargs):
        times["build started"] = time.perf_counter()
        return build(*args, **kwargs)

    monkeypatch.setattr(storm_probe, "probe", slow_probe)
    monkeypatch.setattr(merged, "compiled", declined)
    monkeypatch.setattr(chain_module, "build_explicit", timed_build)
    monkeypatch.setattr(strategy_module, "AUTO_BRANCHING", 0.0)
    r = verify_exact(path, 'P=? [F "done"]', policy, ExactOptions(strategy="auto"))
    assert r.strategy == "full" and r.settings["merged_declined"] == "declined by the test"
    assert times["probe ended"] < times["build started"]
    assert r.value == pytest.approx(1 / 3, rel=1e-12)


def test_a_policy_that_does_not_fit_is_said_before_storms_refusal(tmp_path, monkeypatch):
    """Storm's one-state build starts before the policy's check, but what the check finds is said first (as when
    the build ran after it): the policy's error, not Storm's."""
    path = tmp_path / "two.prism"
    path.write_text(TWO_STEP)
    _refusing_probe(monkeypatch)
    wrong = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["t"], ["go", "stay"])
    with pytest.raises(PolicyError, match=r"does not fit model"):
        verify_exact(path, 'P=? [F "done"]', wrong, ExactOptions(strategy="merged"))


def test_storms_refusal_of_the_initial_state_is_said_before_what_the_exploration_raises(tmp_path, monkeypatch):
    """Storm's one-state build (Storm's names and layout) runs before the exploration: what it refuses is said first."""
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5], (len(x), 1)), ["s"], ["go", "stay"])
    bad_range = tmp_path / "range.prism"
    bad_range.write_text(TWO_STEP.replace("[go] s=1 -> (s'=3);", "[go] s=1 -> (s'=4);"))
    with pytest.raises(ModelError, match=r"assigns s=4 outside its range"):  # the exploration's own error
        verify_exact(bad_range, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))
    _refusing_probe(monkeypatch)
    with pytest.raises(ModelError, match=r"--strategy merged cannot build this model \(Storm's build of the initial state "):
        verify_exact(bad_range, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))
    good = tmp_path / "good.prism"
    good.write_text(TWO_STEP)
    refused = r"cannot build this model \(Storm's build of the initial state failed: .*a refusal of Storm's\)"
    with pytest.raises(ModelError, match=refused):
        verify_exact(good, 'P=? [F "done"]', policy, ExactOptions(strategy="merged"))
    # auto (made to try merged whatever the program's shape) falls back to the full strategy, and says why
    monkeypatch.setattr(strategy_module, "AUTO_BRANCHING", 0.0)
    r = verify_exact(good, 'P=? [F "done"]', policy, ExactOptions(strategy="auto"))
    assert "Storm's build of the initial state failed" in r.settings["merged_declined"]
    # by hand: 'stay' is unavailable at s=1, 2 (its mass stalls): v1 = 1/2, v2 = 1/2 (0.2 + 0.8 v2) = 1/6,
    # v0 = 1/2 (v1 / 2 + v2 / 2) + v0 / 2 = 1/3
    assert r.strategy == "full" and r.value == pytest.approx(1 / 3, rel=1e-12)


def test_auto_takes_merged_for_a_tiny_program_that_branches_and_storm_for_a_tiny_chain(tmp_path):
    """At most AUTO_TINY valuations: two branches per choice or more spread in a few breadth-first steps (merged);
    fewer can make a chain of narrow steps, one per state (Storm's builder)."""
    from rlverify.exact.strategy import AUTO_TINY, strategy_and_reason

    def program(n, b_updates):
        return (
            f"mdp\nmodule m\n x : [0..{n - 1}] init 0;\n [a] x<{n - 1} -> (x'=x+1);\n"
            f" [b] x<{n - 1} -> {b_updates};\nendmodule\n"
        )

    cases = [  # (valuations, the b command's updates, branches per choice, auto's pick)
        (AUTO_TINY, "0.5:(x'=x+1) + 0.5:(x'=x)", 1.5, "full"),
        (AUTO_TINY, "1/3:(x'=x+1) + 1/3:(x'=x) + 1/3:(x'=0)", 2.0, "merged"),
        (AUTO_TINY + 1, "1/3:(x'=x+1) + 1/3:(x'=x) + 1/3:(x'=0)", 2.0, "full"),
    ]
    for n, updates, branching, expected in cases:
        path = tmp_path / f"p{n}_{expected}.prism"
        path.write_text(program(n, updates))
        strategy, why = strategy_and_reason(load_model(path), ExactOptions())
        assert strategy == expected, (n, updates)
        if expected == "full":
            assert why == (
                f"auto chose Storm's builder: the program's choices have {branching:.3g} branches on average over "
                f"{n} valuations of its variables, so the merged exploration would take many narrow steps"
            )
