"""``inspect --policy-template`` is uniform over the available choices whatever the model's size (issue 21): beyond
the listed-states limit the ``.py`` evaluates the PRISM guards, which are checked against Storm's built MDP."""

from __future__ import annotations

import importlib.util
import json
from fractions import Fraction

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.models import load_model
from rlverify.models.dynamics import choice_table
from rlverify.models.summary import policy_template, summarize

# 24,000 decision states (more than the 20,000 a template lists). `stop` is offered only at the two milestones
# x = 0 and x = H: uniform over the available choices, each milestone is passed with probability
# (1/4) / (1 - 1/4) = 1/3 (inc advances with 1/2, stays with 1/2; stop ends the run), every other state surely:
# P(F x=N) = 1/9. A template uniform over ALL actions puts 1/2 on the unavailable `stop` everywhere else.
LONG = """mdp
const int N = 24000;
const int H = 12000;
formula milestone = x = 0 | x = H;
module m
  x : [0..N] init 0;
  stopped : bool init false;
  [inc] x < N & !stopped -> 0.5 : (x'=x+1) + 0.5 : (x'=x);
  [stop] milestone & !stopped -> (stopped'=true);
  [] x = N | stopped -> true;
endmodule
module n
  y : [0..1] init 0;
  [inc] y = 0 -> true;
endmodule
label "end" = x = N;
"""

# synchronised labels, unlabelled commands named by command (MODULE:K), booleans, formulas, min/max/mod, ITE
SMALL = """mdp
const int K = 3;
formula near = max(a, b) >= K - 1;
module p
  a : [0..K] init 0;
  f : bool init false;
  [go] a < K & !f -> (a'=a+1);
  [] mod(a + b, 2) = 0 & a < K -> (f'=!f);
  [] a > 0 & (f ? b < K : b > 0) -> (a'=a-1);
endmodule
module q
  b : [0..K] init 0;
  [go] b < K | near -> (b'=min(b + 1, K));
  [] b > 0 & !near -> (b'=b-1);
endmodule
label "top" = a = K & b = K;
"""


def _load(path, name="pi"):
    spec = importlib.util.spec_from_file_location(f"tmpl_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def test_a_large_models_template_is_uniform_over_the_available_choices(capsys, tmp_path):
    model = tmp_path / "long.prism"
    model.write_text(LONG)
    template = tmp_path / "pi.py"
    assert main(["inspect", str(model), "--policy-template", str(template), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["result"]
    assert summary["decision_states"] == 24000 and summary["actions"] == ["inc", "stop"]
    assert "AVAILABLE = {" not in template.read_text()  # the guards, not a list of states
    code = main(["verify", str(model), "-p", 'P=? [F "end"]', "--policy", f"{template}:pi", "--strategy", "full", "--json"])
    result = json.loads(capsys.readouterr().out)["result"]
    assert code == 0 and result["stalled_probability"] == 0.0
    assert result["value"] == pytest.approx(float(Fraction(1, 9)), rel=1e-6)


def test_the_guard_template_equals_the_listed_one_on_every_decision_state(tmp_path):
    path = tmp_path / "small.prism"
    path.write_text(SMALL)
    model = load_model(path)
    summary, mdp = summarize(model, max_states=10_000)
    assert summary.ambiguous and any(":" in a for a in summary.actions)  # command names are among the actions
    listed = policy_template(tmp_path / "listed.py", summary, mdp)
    guarded = policy_template(tmp_path / "guarded.py", summary, mdp, max_rows=0, model=model)
    assert "AVAILABLE = {" in listed.read_text() and "def available" in guarded.read_text()
    table = choice_table(mdp, summary.actions)
    states = np.flatnonzero(table.decision)
    features = mdp.feature_matrix(summary.features, states)
    # Storm's built MDP says which choices each decision state offers: both templates are uniform over exactly those
    avail = table.available(states)
    expected = avail / avail.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(_load(listed)(features), expected)
    np.testing.assert_array_equal(_load(guarded)(features), expected)


def test_a_json_template_of_a_large_model_is_refused_with_the_way_out(capsys, tmp_path):
    model = tmp_path / "long.prism"
    model.write_text(LONG)
    code = main(["inspect", str(model), "--policy-template", str(tmp_path / "pi.json")])
    err = capsys.readouterr().err
    assert code == 2 and "24,000 decision states are too many for a table; write a .py template" in err
    assert not (tmp_path / "pi.json").exists()
