"""How every engine reads a property's structure: a reward bound is not a step bound, and the state formula
after it is the target (a wrong ``right`` would make the stalled sink's exclusion, the simulator's target and the
forced-start note read garbage)."""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest

from rlverify import verify_exact
from rlverify.errors import PropertyError
from rlverify.models.properties import parse_structure
from rlverify.models.property_parser import parse_property
from rlverify.models.symbolic import load_model
from rlverify.policies import CallablePolicy
from rlverify.statistical import verify_statistical


@pytest.mark.parametrize(
    "text, path, left, right, bound_text, lower",
    [
        ('P=? [F{"r"}<=5 "goal"]', "F", None, '"goal"', '{"r"}<=5', False),
        ('Pmin=? [true Urew{"r"}>=5 "goal"]', "U", "true", '"goal"', '{"r"}>=5', True),
        ('P=? [!"bad" U{"r"}<3 x=1]', "U", '!"bad"', "x=1", '{"r"}<3', False),
        ('P=? [F{"r"}[1,5] "goal"]', "F", None, '"goal"', '{"r"}[1,5]', True),
    ],
)
def test_a_reward_bound_is_read_as_one(text, path, left, right, bound_text, lower):
    p = parse_structure(text)
    assert (p.path, p.left, p.right, p.bound_text, p.lower_bounded) == (path, left, right, bound_text, lower)
    assert p.reward_bound == "r" and p.bound is None  # it bounds reward, not steps


def test_a_step_bound_is_unchanged():
    p = parse_structure('P=? [a U<=3 "b"]')
    assert (p.path, p.left, p.right, p.bound, p.reward_bound) == ("U", "a", '"b"', 3, None)


RB = """mdp
module m
  x : [0..3] init 0;
  [a] x<3 -> 0.5:(x'=x+1) + 0.5:(x'=x);
  [b] x<3 -> (x'=x+1);
endmodule
rewards "r"
  [a] true : 1;
  [b] true : 2;
endrewards
label "goal" = x=3;
"""


def _by_hand(limit: int) -> float:
    """P(reach x=3 having earned at most ``limit``) under a = b = 1/2: a earns 1 and moves w.p. 1/2, b earns 2 and moves."""

    @lru_cache(None)
    def f(x: int, r: int) -> float:
        if r > limit:
            return 0.0
        if x == 3:
            return 1.0
        return 0.5 * (0.5 * f(x + 1, r + 1) + 0.5 * f(x, r + 1)) + 0.5 * f(x + 1, r + 2)

    return f(0, 0)


def test_a_reward_bound_is_checked_exactly_and_refused_by_the_simulator(tmp_path):
    path = tmp_path / "rb.nm"
    path.write_text(RB)
    model = load_model(path)
    policy = CallablePolicy(lambda x: np.full((len(x), 2), 0.5), ["x"], ["a", "b"])
    prop = parse_property(model, 'P=? [F{"r"}<=4 "goal"]', fixed_policy=True)
    assert prop.bound is None  # Storm's bounded-until formula carries the reward bound: no step bound
    assert verify_exact(model, prop, policy).value == pytest.approx(_by_hand(4), abs=1e-9)  # 31/256
    with pytest.raises(PropertyError, match="reward bounds"):
        verify_statistical(model, 'P=? [F{"r"}<=4 "goal"]', policy)


@pytest.mark.parametrize(
    "text,given,expected",
    [
        ('P>=0.7 [F "goal"]', None, ("min", False)),  # a goal: its worst case is the least value
        ('P>0.7 [F "goal"]', None, ("min", False)),
        ("P<=0.1 [F<=100 crash]", None, ("max", False)),  # a bad event
        ('Pmax=? [F "goal"]', None, ("min", False)),
        ("Pmin=? [F crash]", None, ("max", False)),
        ('P=? [F "goal"]', None, ("max", True)),  # it does not say: assumed, and the caller must say so
        ('P=? [F "goal"]', "min", ("min", False)),
        ('P>=0.7 [F "goal"]', "max", ("max", False)),  # the option wins
    ],
)
def test_the_worst_case_comes_from_the_option_then_the_property_else_it_is_assumed(text, given, expected):
    from rlverify.models.properties import worst_case

    assert worst_case(parse_structure(text), given) == expected


def test_explain_and_robust_say_when_they_read_a_property_as_a_bad_event(capsys):
    # P=? [F "goal"]: the ±1 worst case and the critical states' Q were read as for a crash, silently
    from rlverify.cli.main import main
    from rlverify.models.properties import ASSUMED_BAD_EVENT

    code = main(["robust", "running-example-v1", "-p", "reach-goal-2", "--json"])
    out = capsys.readouterr()
    assert code == 0 and ASSUMED_BAD_EVENT in json.loads(out.out)["warnings"], out.err
    code = main(["robust", "running-example-v1", "-p", 'P>=0.2 [F<=2 "goal"]', "--json"])
    out = capsys.readouterr()
    assert code == 0 and ASSUMED_BAD_EVENT not in json.loads(out.out)["warnings"]
    assert json.loads(out.out)["result"]["worst_is"] == "min"
