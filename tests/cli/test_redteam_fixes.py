"""What a red team found on models and properties after issue 21's first fixes; each a one-line refusal (exit 2) or
the right answer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.cli.main import main
from rlverify.errors import ConstantsError, ModelError, ModelTooLargeError, PropertyError
from rlverify.models.properties import parse_structure
from rlverify.models.symbolic import load_model
from rlverify.policies import CallablePolicy
from rlverify.statistical import StatisticalOptions, verify_statistical

PC = """mdp
const double p;
module m
  s : [0..2] init 0;
  [go] s=0 -> p:(s'=1) + (1-p):(s'=2);
  [go] s>0 -> true;
endmodule
label "goal" = s=1;
"""
GO = CallablePolicy(lambda x: np.ones((len(x), 1)), ["s"], ["go"])


@pytest.mark.parametrize("value, expected", [("1e-400", "would become 0"), ("1e-320", "smallest normal double")])
def test_a_probability_below_the_double_range_is_refused_not_zero(tmp_path, value, expected):
    """1e-400 became 0 silently and P>0 [F "goal"] said false (the transition is positive)."""
    path = tmp_path / "pc.prism"
    path.write_text(PC)
    with pytest.raises(ConstantsError, match=expected):
        load_model(path, f"p={value}")
    path.write_text(PC.replace("const double p;", f"const double p = {value};"))
    with pytest.raises(ModelError, match=f"the number {value} is below"):
        load_model(path)
    path.write_text(PC.replace("const double p;", f"const double p = 1e-300; // not {value}"))  # comments are text
    assert verify_exact(load_model(path), 'P>0 [F "goal"]', GO).satisfied is True


def test_an_integer_for_a_double_constant_is_its_value(tmp_path):
    """-c p=1 was refused ("Illegal type of expression"), as PRISM accepts it."""
    path = tmp_path / "pc.prism"
    path.write_text(PC)
    assert verify_exact(load_model(path, "p=1"), 'P=? [F "goal"]', GO).value == 1.0
    assert verify_exact(load_model(path, "p=0"), 'P=? [F "goal"]', GO).value == 0.0


@pytest.mark.parametrize(
    "text, expected",
    [
        ('P=? [F<=-1 "goal"]', "the step bound -1 is negative"),
        ('P=? [F<=1.5 "goal"]', "1.5 is not a whole number"),
        ('P=? [!"goal" U<=1e3 "goal"]', "1e3 is not a whole number"),
    ],
)
def test_negative_or_fractional_step_bounds_are_refused(tmp_path, capsys, text, expected):
    """simulate answered F<=-1 with 1.0; verify ended in an internal error."""
    with pytest.raises(PropertyError, match=expected):
        parse_structure(text)
    path = tmp_path / "pc.prism"
    path.write_text(PC)
    pi = tmp_path / "go.py"
    pi.write_text("import numpy as np\nFEATURES = ['s']\nACTIONS = ['go']\ndef pi(x):\n    return np.ones((len(x), 1))\n")
    for argv in (
        ["verify", str(path), "-c", "p=0.5", "-p", text, "--mode", "monolithic"],
        ["simulate", str(path), "-c", "p=0.5", "-p", text, "--runs", "10", "--policy", f"{pi}:pi"],
    ):
        assert main(argv) == 2
        assert expected in capsys.readouterr().err


def test_a_constant_step_bound_that_is_negative_is_refused(tmp_path):
    path = tmp_path / "pc.prism"
    path.write_text(PC.replace("const double p;", "const double p = 0.5;\nconst int N = -2;"))
    with pytest.raises(PropertyError, match="evaluates to -2, which is negative"):
        verify_exact(load_model(path), 'Pmax=? [F<=N "goal"]', options=ExactOptions(mode="monolithic"))


UNBOUNDED = """mdp
module m
  x : int init 0;
  [go] x<3 -> (x'=x+1);
  [go] x>=3 -> true;
endmodule
label "goal" = x=3;
"""


def test_an_unbounded_int_does_not_crash_the_process(tmp_path, capsys):
    """Storm segfaults on an unbounded int's unset bounds (inspect and verify died with SIGSEGV)."""
    path = tmp_path / "unb.prism"
    path.write_text(UNBOUNDED)
    assert main(["inspect", str(path), "--no-build", "--json"]) == 0
    variables = json.loads(capsys.readouterr().out)["result"]["variables"]
    assert variables[0]["name"] == "x" and variables[0]["low"] is None and variables[0]["init"] == 0
    policy = CallablePolicy(lambda x: np.ones((len(x), 1)), ["x"], ["go"])
    result = verify_exact(load_model(path), 'P=? [F "goal"]', policy)  # merged declines: built by Storm
    assert result.value == 1.0 and result.settings["merged_declined"]


def test_simulate_refuses_a_model_beyond_max_states(tmp_path):
    """simulate built an infinite model for minutes (no state limit)."""
    path = tmp_path / "grow.prism"
    path.write_text(
        'mdp\nmodule m\n  x : int init 0;\n  [go] true -> 0.5:(x\'=x+1) + 0.5:true;\nendmodule\nlabel "goal" = x=-1;\n'
    )
    policy = CallablePolicy(lambda x: np.ones((len(x), 1)), ["x"], ["go"])
    with pytest.raises(ModelTooLargeError, match="--max-states=500"):
        verify_statistical(
            load_model(path), 'P=? [F "goal"]', policy, StatisticalOptions(method="clopper-pearson", runs=10, max_states=500)
        )


def test_messages_name_what_the_user_typed(tmp_path, capsys):
    """The SPRT's refusal showed the Property object's repr; report --map blamed --explain-map."""
    from tests.small_models import UP_STAY

    path = tmp_path / "m.prism"
    path.write_text(UP_STAY)
    pi = tmp_path / "pi.py"
    pi.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(x):\n    return np.tile([0.5, 0.5], (len(x), 1))\n"
    )
    assert main(["simulate", str(path), "-p", 'P=? [F "top"]', "--policy", f"{pi}:pi", "--method", "sprt"]) == 2
    err = capsys.readouterr().err
    assert "property 'P=? [F \"top\"]': the SPRT needs a threshold" in err and "Property(" not in err
    assert (
        main(
            [
                "report",
                str(path),
                "-p",
                'P=? [F "top"]',
                "--policy",
                f"{pi}:pi",
                "--map",
                "x,q",
                "--out",
                str(tmp_path / "r.html"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--map: 'q' is not a model variable" in err and "explain-map" not in err


def test_benchmarks_list_and_show_print_json(capsys):
    assert main(["benchmarks", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["result"]["benchmarks"]
    assert "avoid-v1" in [b["id"] for b in listed]
    assert main(["benchmarks", "show", "avoid-v1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["result"]
    assert shown["parameters"]["xMax"]["default"] == 4 and "collision-100" in shown["properties"]


@pytest.mark.parametrize("text", ["P=? [F x/0=1]", 'P=? [F "top" & x=1/ 0.0]', "P=? [F x/(0)=1]"])
def test_a_division_by_zero_in_a_property_is_refused(tmp_path, text):
    """Storm evaluated x/0 to some number: P=? [F x/0=1] answered 0."""
    from tests.small_models import UP_STAY

    path = tmp_path / "m.prism"
    path.write_text(UP_STAY)
    with pytest.raises(PropertyError, match="division by zero"):
        verify_exact(load_model(path), text, options=ExactOptions(mode="monolithic"))
    assert verify_exact(load_model(path), "Pmax=? [F x/2=1]", options=ExactOptions(mode="monolithic")).value == 1.0


def test_an_unprintable_exception_in_a_system_declaration_is_one_line(tmp_path, capsys):
    """A declaration file raising an exception whose __str__ raises ended in a traceback (its message was read)."""
    path = tmp_path / "bad.py"
    path.write_text("class E(Exception):\n    def __str__(self):\n        raise ValueError('str fails')\nraise E()\n")
    assert main(["abstract", f"{path}:SYSTEM", "-k", "1"]) == 2
    err = capsys.readouterr().err
    assert "importing the system declaration file failed: <unprintable E>" in err and "Traceback" not in err
