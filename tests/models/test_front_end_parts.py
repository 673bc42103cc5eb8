"""The PRISM/JANI front end's small parts, each against values worked out by hand: the divisor tokenizer, constant
values as given, a properties file's statements, a model file's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlverify.models.constants import given_value
from rlverify.models.divisions import _divisors, constant_zero_divisor
from rlverify.models.property_files import _statements
from rlverify.models.symbolic import ModelFormat


def test_each_divisor_is_the_operand_after_the_slash_or_mods_second_argument():
    code = "x/2 + y/(N-1) + mod(x, K) + z/f(a,b) + w/-3 + v/(u"
    found = list(_divisors(code))
    assert [text for _, text in found] == ["2", "(N-1)", " K", "f(a,b)", "-3", ""]  # (an unclosed bracket: unknown)
    assert [at for at, _ in found] == [code.index("/2"), code.index("/("), code.index("mod"), code.index("/f"),
                                       code.index("/-"), code.rindex("/")]  # fmt: skip


def test_a_constant_zero_divisor_is_found_on_its_line_and_a_variable_one_is_not_judged():
    text = "mdp\nconst int K = 2 - 2;\nmodule m x : [0..1] init 0; [] x/K > 0 -> (x'=0); endmodule\n"
    assert constant_zero_divisor(text, {}) == ("line 3 (module m x : [0..1] init 0; [] x/K > 0 -> (x'=0); endmodule)", False)
    assert constant_zero_divisor(text, {"K": "3"}) == (None, True)
    assert constant_zero_divisor("mdp\nmodule m x : [0..1] init 0; [] 1/x > 0 -> true; endmodule", {}) == (None, False)


@pytest.mark.parametrize(
    "text, value",
    [("true", True), ("FALSE", False), ("3", 3), ("-7", -7), ("2.5", 2.5), ("1/10", 0.1), ("1/0", "1/0"), ("N+1", "N+1")],
)
def test_a_given_constant_is_a_bool_an_integer_a_double_or_its_text(text, value):
    out = given_value(text)
    assert out == value and type(out) is type(value)


@pytest.mark.parametrize("text", [str(2**63), "nan", "1e999", "1e-400"])
def test_a_given_constant_double_precision_would_change_is_refused(text):
    with pytest.raises(ValueError, match=text.replace("+", r"\+")):
        given_value(text)


def test_a_properties_file_splits_at_semicolons_and_line_ends_outside_brackets_quotes_and_comments():
    text = 'P=? [F "a;b"] // c; d\nconst int T=3; R=? [F (x\n> 1)]\n\n'
    assert _statements(text) == ['P=? [F "a;b"]', "const int T=3", "R=? [F (x\n> 1)]"]


def test_a_model_file_s_format_is_its_extension_s_and_compares_as_a_string():
    assert ModelFormat.of(Path("m.JANI")) is ModelFormat.JANI
    assert ModelFormat.of(Path("m.nm")) is ModelFormat.PRISM
    assert ModelFormat.JANI == "jani" and f"{ModelFormat.PRISM}" == "prism"
    assert ModelFormat.PRISM.language == "PRISM"
