"""exact/formulas.py: the path kind, bound and nesting of Storm's formulas, read from stormpy's objects (expected
values written from each formula's text by hand)."""

from __future__ import annotations

import pytest

stormpy = pytest.importorskip("stormpy")

from rlverify.exact.formulas import PathKind, bound, has_operator, is_reward_bounded, path_kind, step_upper_bound  # noqa: E402

PRISM = """dtmc
const int K = 5;
module m
 x : [0..3] init 0;
 [] x<3 -> 0.5:(x'=x+1) + 0.5:(x'=x);
 [] x=3 -> true;
endmodule
label "goal" = x=3;
rewards "r" true : 1; endrewards
"""


@pytest.fixture(scope="module")
def parse(tmp_path_factory):
    path = tmp_path_factory.mktemp("formulas") / "m.prism"
    path.write_text(PRISM)
    program = stormpy.parse_prism_program(str(path))
    return lambda text: stormpy.parse_properties(text, program)[0].get_raw_formula()


@pytest.mark.parametrize(
    "text,kind,steps,reward",
    [
        ('P=? [F "goal"]', PathKind.EVENTUALLY, None, False),
        ('P=? [x<2 U "goal"]', PathKind.UNTIL, None, False),
        ("P=? [G x<3]", PathKind.GLOBALLY, None, False),
        ('P=? [X "goal"]', PathKind.OTHER, None, False),
        ('P=? [F<=5 "goal"]', PathKind.BOUNDED_UNTIL, 5, False),
        ('P=? [F<5 "goal"]', PathKind.BOUNDED_UNTIL, 4, False),
        ('P=? [x<2 U<=4 "goal"]', PathKind.BOUNDED_UNTIL, 4, False),
        ('P=? [F<=K "goal"]', PathKind.BOUNDED_UNTIL, 5, False),  # a constant Storm substitutes: a number
        ('P=? [F<=K+1 "goal"]', PathKind.BOUNDED_UNTIL, None, False),  # an expression: Storm's route
        ('P=? [F[2,5] "goal"]', PathKind.BOUNDED_UNTIL, None, False),
        ('P=? [F>=2 "goal"]', PathKind.BOUNDED_UNTIL, None, False),
        ('P=? [F{"r"}<=5 "goal"]', PathKind.BOUNDED_UNTIL, None, True),
        ('P=? [x<2 U{"r"}<5 "goal"]', PathKind.BOUNDED_UNTIL, None, True),
        ('R{"r"}=? [C<=5]', PathKind.CUMULATIVE, None, False),
        ('R{"r"}=? [I=5]', PathKind.INSTANTANEOUS, None, False),
    ],
)
def test_kind_step_bound_and_reward_bound(parse, text, kind, steps, reward):
    formula = parse(text)
    path = formula.subformula
    assert path_kind(path) is kind
    assert (step_upper_bound(path) if kind is PathKind.BOUNDED_UNTIL else None) == steps
    assert is_reward_bounded(formula) is reward


@pytest.mark.parametrize("text,steps", [('R{"r"}=? [C<=5]', 5), ('R{"r"}=? [C<5]', 4), ('R{"r"}=? [I=5]', 5)])
def test_cumulative_and_instantaneous_bounds(parse, text, steps):
    assert bound(parse(text).subformula).steps == steps


@pytest.mark.parametrize(
    "text,nested",
    [
        ('P=? [F "goal" & x>1]', False),
        ('P=? [(x<2 & x>0) U<=3 (x=1 | "goal")]', False),
        ('P=? [(true U x=1) U "goal"]', False),
        ('P=? [F (P>0.5 [F "goal"])]', True),
        ('P=? [F ("goal" & P>0.5 [F "goal"])]', True),
        ('P=? [F !(P>0.5 [X "goal"])]', True),
        ('P=? [F (x=1 & (x>0 | P>0.5 [X "goal"]))]', True),
    ],
)
def test_nested_operators_are_found(parse, text, nested):
    assert has_operator(parse(text).subformula) is nested
