"""The reference itself (closed forms, independence from rlverify) and small repros of what it found in rlverify."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.policies import CallablePolicy
from tests.reference import oracle as O

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("module", ["oracle.py", "corpus.py"])
def test_reference_imports_nothing_from_rlverify(module: str) -> None:
    tree = ast.parse((HERE / module).read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    assert not [m for m in imported if m.split(".")[0] == "rlverify"]


MIXED = {
    "jani-version": 1,
    "name": "t",
    "type": "mdp",
    "features": [],
    "actions": [{"name": "go"}, {"name": "b"}],
    "variables": [
        {"name": "x", "type": {"kind": "bounded", "base": "int", "lower-bound": 0, "upper-bound": 3}, "initial-value": 0}
    ],
    "automata": [
        {
            "name": "a",
            "locations": [{"name": "l0"}],
            "initial-locations": ["l0"],
            "edges": [
                {
                    "location": "l0",
                    "action": "go",
                    "guard": {"exp": {"op": "=", "left": "x", "right": 0}},
                    "destinations": [{"location": "l0", "assignments": [{"ref": "x", "value": 1}]}],
                },
                {
                    "location": "l0",
                    "guard": {"exp": {"op": "=", "left": "x", "right": 0}},
                    "destinations": [{"location": "l0", "assignments": [{"ref": "x", "value": 2}]}],
                },
                {
                    "location": "l0",
                    "action": "b",
                    "guard": {"exp": {"op": "=", "left": "x", "right": 0}},
                    "destinations": [{"location": "l0", "assignments": [{"ref": "x", "value": 3}]}],
                },
                {
                    "location": "l0",
                    "action": "go",
                    "guard": {"exp": {"op": "=", "left": "x", "right": 0}},
                    "destinations": [
                        {"location": "l0", "probability": {"exp": 0.5}, "assignments": [{"ref": "x", "value": 3}]},
                        {"location": "l0", "probability": {"exp": 0.5}, "assignments": []},
                    ],
                },
            ],
        }
    ],
    "system": {"elements": [{"automaton": "a"}]},
    "properties": [],
}


def test_jani_choices_are_named_by_file_position(tmp_path: Path) -> None:
    """Storm puts the silent edge first and sorts by action; the markers still give file positions (by the
    edges' own effects: edge 2 sets x=2, edge 3 sets x=3, edge 4 is the only one with two branches)."""
    path = tmp_path / "mixed.jani"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(MIXED).encode())  # a BOM, as some files have
    m = O.build_jani(path)
    s = m.initial
    by_name = {m.choice_name[c]: c for c in range(m.row_start[s], m.row_start[s + 1])}
    assert set(by_name) == {"a:1", "a:2", "a:3", "a:4"}
    x = m.var("x")
    assert x[m.T[by_name["a:1"]].indices].tolist() == [1]
    assert x[m.T[by_name["a:2"]].indices].tolist() == [2]
    assert x[m.T[by_name["a:3"]].indices].tolist() == [3]
    assert m.T[by_name["a:4"]].nnz == 2
    assert [m.choice_label[by_name[n]] for n in ("a:1", "a:2", "a:3", "a:4")] == ["go", "", "b", "go"]
    assert O.natural_actions(m) == ["b", "a:1", "a:2", "a:4"]  # 'go' is repeated in the state: by command


def test_closed_form_values(tmp_path: Path) -> None:
    """A policy 0.2/0.8 on the file's edges of MIXED: F x=3 = 0.2*1 + ... computed by hand."""
    path = tmp_path / "mixed.jani"
    path.write_text(json.dumps(MIXED))
    m = O.build_jani(path)
    # actions a:4 (prob 0.5 to x=3, else stay) and b (to x=3): P(F x=3) from x=0 with pi = (a:4: 0.6, a:1: 0.4):
    # p = 0.6*(0.5 + 0.5 p) + 0.4*0  -> p = 0.3 / 0.7
    pol = O.RefPolicy(["x"], ["a:4", "a:1"], lambda s: np.tile([0.6, 0.4], (len(s), 1)))
    ans = O.evaluate(m, pol, O.Query("U", lambda m: m.var("x") == 3))
    assert ans.value == pytest.approx(0.3 / 0.7, abs=1e-12)
    assert ans.stalled == 0.0
    # a:1 leads to x=1, where nothing is enabled (Storm's deadlock loop): 3 states reached, none stalls
    assert ans.states == 3


STALL = """mdp
module m
  x : [0..3] init 0;
  [a] x=0 -> (x'=1);
  [a] x=1 -> (x'=2);
  [b] x=2 -> (x'=3);
endmodule
label "bad" = x=1;
"""


@pytest.mark.parametrize("strategy", ["full", "merged"])
@pytest.mark.parametrize(
    ("prop", "stalled"),
    [
        ("P=? [F x=3]", 1.0),  # the run stalls at x=2 (the policy always asks for 'a')
        ("P=? [F<=1 x=3]", 0.0),  # ... at step 2: after the bound decided the property (false)
        ('P=? [!"bad" U x=3]', 0.0),  # ... after x=1 violated the left side: decided (false) before it stalls
    ],
    ids=["unbounded", "after-the-bound", "after-leaving-left"],
)
def test_stalled_probability_counts_only_before_the_property_is_decided(
    tmp_path: Path, prop: str, stalled: float, strategy: str
) -> None:
    """README: stalled_probability = P(reach `stalled` before the property is decided)."""
    path = tmp_path / "stall.prism"
    path.write_text(STALL)
    pi = CallablePolicy(lambda s: np.tile([1.0, 0.0], (len(s), 1)), ["x"], ["a", "b"])
    result = verify_exact(path, prop, pi, ExactOptions(strategy=strategy))
    assert result.value == 0.0
    assert result.stalled_probability == pytest.approx(stalled, abs=1e-12)
    ref = O.build_prism(path)
    bound = 1 if "<=1" in prop else None
    left = (lambda m: ~m.labels["bad"]) if "U" in prop else None
    ans = O.evaluate(
        ref,
        O.RefPolicy(["x"], ["a", "b"], lambda s: np.tile([1.0, 0.0], (len(s), 1))),
        O.Query("U", lambda m: m.var("x") == 3, left=left, bound=bound),
    )
    assert ans.stalled == pytest.approx(stalled, abs=1e-12)


TWINS = """mdp
module m
  x : [0..1] init 0;
  [] x=0 -> (x'=1);
  [] x=0 -> (x'=1);
  [] x=0 -> true;
endmodule
"""


@pytest.mark.parametrize("strategy", ["full", "merged", "onthefly"])
def test_identical_commands_have_their_own_names(tmp_path: Path, strategy: str) -> None:
    """Two commands with the same text are two choices, m:1 and m:2: a policy naming both (0.3, 0.3) and
    m:3 (0.4) reaches x=1 with probability 1 (m:3 loops), the reference agrees."""
    path = tmp_path / "twins.prism"
    path.write_text(TWINS)
    ref = O.build_prism(path)
    s = ref.initial
    assert sorted(ref.choice_name[ref.row_start[s] : ref.row_start[s + 1]]) == ["m:1", "m:2", "m:3"]

    def fn(st):
        return np.tile([0.3, 0.3, 0.4], (len(st), 1))

    ans = O.evaluate(ref, O.RefPolicy(["x"], ["m:1", "m:2", "m:3"], fn), O.Query("U", lambda m: m.var("x") == 1, bound=1))
    assert ans.value == pytest.approx(0.6)
    result = verify_exact(
        path, "P=? [F<=1 x=1]", CallablePolicy(fn, ["x"], ["m:1", "m:2", "m:3"]), ExactOptions(strategy=strategy)
    )
    assert result.value == pytest.approx(0.6, abs=1e-12)
