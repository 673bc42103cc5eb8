"""``--export chain.drn|chain.dot``: the policy's chain written out, against the chain computed by hand from the model
text, read back by Storm's own DRN parser, and refused where it cannot be written."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.cli.main import main
from rlverify.exact.chain import policy_chain
from rlverify.exact.export import MAX_DOT_STATES, dot_text, export_chain
from rlverify.models import load_model, parse_property
from rlverify.policies import CallablePolicy

MODEL = """mdp
module m
  x : [0..3] init 0;
  [a] x=0 -> 1/3 : (x'=1) + 2/3 : (x'=2);
  [b] x=0 -> (x'=1);
  [a] x=2 -> 0.5 : (x'=0) + 0.5 : (x'=3);
  [a] x=1 | x=3 -> true;
endmodule
label "one" = x=1;
"""

# pi(a) = 1/4, pi(b) = 3/4 everywhere; by hand: x=0 -> x=1 w.p. 1/4 * 1/3 + 3/4, x=2 w.p. 1/4 * 2/3; x=1 (the
# target) absorbing; x=2 and x=3 offer only a, so b's 3/4 stalls ("S", the default --unavailable stall): x=2 -> x=0,
# x=3 w.p. 1/8 each; x=3 loops w.p. 1/4.
EXPECTED = {
    (0, 1): 0.25 / 3 + 0.75,
    (0, 2): 0.25 * 2 / 3,
    (1, 1): 1.0,
    (2, 0): 0.125,
    (2, 3): 0.125,
    (2, "S"): 0.75,
    (3, 3): 0.25,
    (3, "S"): 0.75,
    ("S", "S"): 1.0,
}


def _chain(tmp_path):
    path = tmp_path / "m.prism"
    path.write_text(MODEL)
    model = load_model(path)
    prop = parse_property(model, 'P=? [F "one"]')
    policy = CallablePolicy(lambda s: np.tile([0.25, 0.75], (len(s), 1)), ["x"], ["a", "b"], name="quarter")
    return model, prop, policy, policy_chain(model, prop, policy, ExactOptions()).chain


def _parse_drn(text: str) -> tuple[dict[tuple, float], dict, set]:
    """An independent reading of the DRN text: (state's x or "S" for stalled, successor's) -> probability, labels."""
    states: dict[int, int | str] = {}
    edges: dict[tuple[int, int], float] = {}
    labels: dict[int, str] = {}
    init: set[int] = set()
    current = -1
    for line in text.splitlines():
        if m := re.match(r"state (\d+)(?: \[[^\]]*\])?\s*(.*)$", line):
            current = int(m.group(1))
            words = m.group(2).split()
            labels[current] = " ".join(w for w in words if w != "init")
            if "init" in words:
                init.add(current)
        elif m := re.match(r"//\[x=(\d+)\]", line):
            states[current] = "S" if "stalled" in labels[current].split() else int(m.group(1))
        elif m := re.match(r"\s+(\d+) : (\S+)$", line):
            edges[(current, int(m.group(1)))] = float(m.group(2))
    by_x = {(states[s], states[t]): p for (s, t), p in edges.items()}
    return by_x, {states[s]: lab for s, lab in labels.items()}, {states[s] for s in init}


def test_the_drn_file_holds_the_chain_computed_by_hand_and_storm_reads_it_back(tmp_path):
    import stormpy

    model, prop, policy, chain = _chain(tmp_path)
    out = export_chain(chain, tmp_path / "chain.drn")
    edges, labels, init = _parse_drn(out.read_text())
    assert edges.keys() == EXPECTED.keys()
    for key, p in EXPECTED.items():
        assert edges[key] == pytest.approx(p, rel=1e-15, abs=0)
    # 17 digits: the doubles written are the chain's own, bit for bit
    M = chain.transitions.tocsr()
    x = [("S" if chain.labels["stalled"][s] else int(v)) for s, v in enumerate(chain.valuations[:, 0])]
    for s in range(chain.num_states):
        for k in range(M.indptr[s], M.indptr[s + 1]):
            assert edges[(x[s], x[M.indices[k]])] == M.data[k]
    assert init == {0} and labels[1] == "one"
    # Storm's own parser, and its own check of the property on the file against the closed form: from x=0 the
    # target directly (5/6), or x=2 (1/6) and back to x=0 (1/8): v0 = 5/6 + (1/6)(1/8) v0
    storm_chain = stormpy.build_model_from_drn(str(out))
    formula = stormpy.parse_properties('P=? [F "one"]')[0]
    storm_value = stormpy.model_checking(storm_chain, formula).get_value(storm_chain.initial_states[0])
    closed_form = (5 / 6) / (1 - (1 / 6) * (1 / 8))
    assert storm_value == pytest.approx(closed_form, rel=1e-9)
    assert verify_exact(model, prop, policy).value == pytest.approx(closed_form, rel=1e-12)


def test_a_short_drn_file_is_never_published(tmp_path, capsys, monkeypatch):
    """Storm's C++ writer does not report a failed write: a full disk left an empty or cut file, published with exit 0.
    Every cut of a real DRN file, at every byte and read in chunks of every size, counts fewer lines than the chain
    has; and a writer that stops early is refused in one line, leaving nothing behind."""
    import rlverify.exact.export as export
    from rlverify.exact.export import _drn_counts

    _, _, _, chain = _chain(tmp_path)
    data = export_chain(chain, tmp_path / "chain.drn").read_bytes()
    full = (chain.num_states, chain.num_transitions)
    assert full == (data.count(b"\nstate "), data.count(b"\n\t\t"))  # the file as written: its own lines
    cut = tmp_path / "cut.drn"
    for chunk in (1, 2, 3, 7, 64, 1 << 20):
        assert _drn_counts(tmp_path / "chain.drn", chunk) == full
    for end in range(len(data)):
        cut.write_bytes(data[:end])
        assert _drn_counts(cut, 5) != full, end
    write = export._write_drn
    monkeypatch.setattr(export, "_write_drn", lambda c, path: (write(c, path), path.write_bytes(path.read_bytes()[:200])))
    monkeypatch.chdir(tmp_path)
    code = main(["verify", "running-example-v1", "-p", "reach-goal-2", "--export", "short.drn"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--export short.drn: cannot write the file" in err, err
    assert "nothing was written" in err and not any(p.name.endswith(".drn") and "short" in p.name for p in tmp_path.iterdir())


def test_the_dot_picture_has_a_node_per_state_and_an_edge_per_transition(tmp_path):
    _, _, _, chain = _chain(tmp_path)
    text = export_chain(chain, tmp_path / "chain.dot").read_text()
    assert text.startswith("digraph chain {") and text.rstrip().endswith("}")
    nodes = re.findall(r'^  (\d+) \[label="(\d+): (?:x=(\d+)|(the policy chose an unavailable action))', text, flags=re.M)
    assert len(nodes) == chain.num_states
    edges = re.findall(r'^  (\d+) -> (\d+) \[label="([^"]+)"\]', text, flags=re.M)
    x = {int(n): (int(v) if v else "S") for n, _, v, _ in nodes}
    assert {(x[int(s)], x[int(t)]): float(p) for s, t, p in edges} == pytest.approx(EXPECTED, rel=1e-15)
    assert re.search(r'label="\d+: x=0", style=bold', text)  # the initial state


def test_dot_names_are_quoted_never_read_as_syntax(tmp_path):
    from rlverify.exact.export import _quoted

    assert _quoted('a"] -> 9 [label="x\\') == '"a\\"] -> 9 [label=\\"x\\\\"'


def test_refusals_exit_2_with_one_line_and_leave_files_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.dot").write_text("mine")
    cases = [
        (["--export", "mine.dot"], "file exists; pass --force"),
        (["--export", "chain.txt"], ".drn (Storm's explicit format) or .dot"),
        (["--export", "m.drn", "--mode", "monolithic"], "--mode monolithic has none"),
        (["--export", "c.drn", "--chain-dir", "d"], "not exported"),
    ]
    for extra, words in cases:
        code = main(["verify", "running-example-v1", "-p", "reach-goal-2", *extra])
        err = capsys.readouterr().err
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (extra, err)
    assert (tmp_path / "mine.dot").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.dot"]
    # --force replaces it with the chain (4 states of the running example)
    assert main(["verify", "running-example-v1", "-p", "reach-goal-2", "--export", "mine.dot", "--force"]) == 0
    assert len(re.findall(r"^  \d+ \[label=", (tmp_path / "mine.dot").read_text(), flags=re.M)) == 4


def test_a_dot_picture_of_a_large_chain_is_refused_naming_drn(tmp_path):
    from rlverify.errors import OptionError
    from rlverify.models.explicit import ExplicitModel

    _, _, _, chain = _chain(tmp_path)
    assert chain.num_states <= MAX_DOT_STATES
    big = _big_chain(MAX_DOT_STATES + 1)
    assert isinstance(big, ExplicitModel)
    with pytest.raises(OptionError, match=r"1,001 states, more than a DOT picture can show .*export it as \.drn"):
        export_chain(big, tmp_path / "big.dot")
    assert not (tmp_path / "big.dot").exists()
    assert len(dot_text(chain).splitlines()) == 2 + chain.num_states + chain.num_transitions + 1


def _big_chain(n: int):
    import scipy.sparse as sp

    from rlverify.models.explicit import ExplicitModel

    return ExplicitModel(
        model_type="dtmc",
        row_groups=np.arange(n + 1),
        transitions=sp.identity(n, format="csr"),
        choice_actions=np.zeros(n, dtype=np.int32),
        action_names=("",),
        variables=("x",),
        valuations=np.arange(n)[:, None],
        initial_states=np.array([0]),
    )


# ---------------------------------------------------------------------------------------------
# a label named by expression text (the property's target) gets a name Storm's property parser can reference

TARGET = "x=3 | x>=4 & x!=5"
#: one action per state: the policy's chain is the MDP itself, so Storm's check of the PRISM program is the oracle
ONE_ACTION = """mdp
module m
  x : [0..5] init 0;
  [a] x<4 -> 0.3:(x'=x+1) + 0.2:(x'=min(4,x+2)) + 0.1:(x'=5) + 0.4:(x'=x);
  [a] x>=4 -> true;
endmodule
label "goal" = x=4;
"""
ONE_ACTION_POLICY = "import numpy as np\nFEATURES = ['x']\nACTIONS = ['a']\ndef pi(s):\n    return np.ones((len(s), 1))\n"


def test_a_drn_export_names_an_expression_label_so_that_storm_can_parse_a_property_over_it(tmp_path) -> None:
    """The target ``x=3 | x>=4 & x!=5`` is a label of the exported chain; a property over the DRN file naming that
    label gives Storm's value on the PRISM program (one action per state: the chain is the MDP)."""
    import stormpy

    (tmp_path / "m.pm").write_text(ONE_ACTION)
    (tmp_path / "pol.py").write_text(ONE_ACTION_POLICY)
    drn = tmp_path / "c.drn"
    prop = f"P=? [F {TARGET}]"
    assert main(["verify", str(tmp_path / "m.pm"), "--policy", f"{tmp_path}/pol.py:pi", "-p", prop, "--export", str(drn)]) == 0
    chain = stormpy.build_model_from_drn(str(drn))
    names = set(chain.labeling.get_labels()) - {"init", "goal"}
    assert names == {"x_eq_3_or_x_ge_4_and_x_ne_5"}
    (label,) = names
    exported = stormpy.model_checking(chain, stormpy.parse_properties(f'P=? [F "{label}"]')[0])
    program = stormpy.parse_prism_program(str(tmp_path / "m.pm"))
    original_prop = stormpy.parse_properties(f"Pmax=? [F {TARGET}]", program)[0]
    model = stormpy.build_model(program, [original_prop])
    original = stormpy.model_checking(model, original_prop)
    value = exported.get_value(chain.initial_states[0])
    assert value == pytest.approx(original.get_value(model.initial_states[0]), rel=1e-12)
    assert 0.6 < value < 0.7  # a value that says something: not 0 or 1


def test_drn_label_names_are_identifiers_and_distinct() -> None:
    import numpy as np

    from rlverify.exact.export import drn_label_names
    from rlverify.models.explicit import ExplicitModel

    masks = {k: np.zeros(1, dtype=bool) for k in ["goal", "(x = 3)", "(x == 3)", "3 > x", "init", "!"]}
    chain = ExplicitModel(
        model_type="dtmc",
        row_groups=np.arange(2),
        transitions=None,
        choice_actions=np.zeros(1, dtype=np.int32),
        action_names=("",),
        variables=("x",),
        valuations=np.zeros((1, 1), dtype=np.int64),
        initial_states=np.zeros(1, dtype=np.int64),
        labels=masks,
    )
    names = drn_label_names(chain)
    assert names["goal"] == "goal" and names["(x = 3)"] == "x_eq_3" and names["(x == 3)"] == "x_eq_eq_3"
    assert names["3 > x"] == "label_3_gt_x" and names["!"] == "not"
    assert len(set(names.values())) == len(names)
