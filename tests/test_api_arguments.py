"""The Python API refuses arguments of a type no engine takes (None among them) at entry, with the project's error
naming the argument, not a TypeError or AssertionError from inside (issue 40)."""

from __future__ import annotations

from pathlib import Path

import pytest

import rlverify
from rlverify.errors import OptionError, PolicyError
from rlverify.resolve import resolve

MODEL = 'mdp\nmodule m\n  x : [0..1] init 0;\n  [a] true -> (x\'=1);\nendmodule\nlabel "goal" = x=1;\n'
GOAL = 'P=? [F "goal"]'


@pytest.fixture
def model(tmp_path: Path) -> str:
    path = tmp_path / "m.prism"
    path.write_text(MODEL)
    return str(path)


@pytest.mark.parametrize("target", [None, 5, True, b"m.prism", ["m.prism"]])
def test_a_target_that_is_no_path_id_or_benchmark_is_refused_naming_it(target):
    with pytest.raises(OptionError, match=r"^target: expected a PRISM/JANI file"):
        resolve(target)
    with pytest.raises(OptionError, match=r"^target: expected"):
        rlverify.verify_exact(target, GOAL, policy="p.py:pi")
    with pytest.raises(OptionError, match=r"^target: expected"):
        rlverify.cross_check(target, GOAL)


def test_no_model_is_refused_by_the_statistical_engine():
    with pytest.raises(OptionError, match=r"^model: verify_statistical takes a target .* got None"):
        rlverify.verify_statistical(None, GOAL, policy="p.py:pi")


def test_no_property_is_refused_where_one_is_checked(model):
    with pytest.raises(OptionError, match=r"^property: verify_exact checks a property"):
        rlverify.verify_exact("running-example-v1", None)
    with pytest.raises(OptionError, match=r"^property: verify_exact checks a property"):
        rlverify.verify_exact(rlverify.load_model(model), None, options=rlverify.ExactOptions(mode="monolithic"))
    with pytest.raises(OptionError, match=r"^property: cross_check checks a property"):
        rlverify.cross_check("running-example-v1", None)
    with pytest.raises(OptionError, match=r"^property: expected a formula or a property name \(text\) or a Property, got int"):
        resolve(model, property=3, needs_policy=False)
    assert resolve(model, needs_policy=False).property is None  # resolve alone takes no property


def test_a_string_is_no_list_of_feature_names():
    with pytest.raises(PolicyError, match=r"--features: expected a list of names, got 'row'"):
        rlverify.load_policy(lambda s: s, features="row", actions=["a"])
