"""The one expression language (``--importance``, ``map --where``): integer powers, 64-bit overflow, float overflow
and deep nesting give the right value or one clear error, never a wrapped number or a RecursionError (issue 21)."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.errors import OptionError
from rlverify.models.expressions import MAX_DEPTH, compile_expression

X = np.array([[3], [2], [-4]])


def number(text: str) -> np.ndarray:
    return compile_expression(text, ["x"], option="--importance", kind="number")(X)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("x**-1", [1 / 3, 1 / 2, -1 / 4]),  # a negative integer power is a fraction, as in Python
        ("x**-2 + 1", [1 + 1 / 9, 1 + 1 / 4, 1 + 1 / 16]),
        ("2**62 + x", [2**62 + 3, 2**62 + 2, 2**62 - 4]),
        ("2.0**64", [2.0**64] * 3),
        ("x**2 // 3", [3, 1, 5]),
        ("True + x", [4, 3, -3]),
        ("+".join(["x"] * (MAX_DEPTH - 5)), [3 * (MAX_DEPTH - 5), 2 * (MAX_DEPTH - 5), -4 * (MAX_DEPTH - 5)]),
    ],
)
def test_values(text, expected):
    assert number(text) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    "text,match",
    [
        ("2**64", "beyond 64-bit integers"),
        ("x**64", "beyond 64-bit integers"),
        ("x * 2**62 * 4", "beyond 64-bit integers"),
        ("9223372036854775808 + x", "does not fit in 64 bits"),
        ("10.0**400", "overflows a float"),
        ("1e999 + x", "too large for a float"),
        ("(x - 3)**-1", "divides by zero"),
        ("(-8.0)**0.5 + x", "not a real number"),
        ("1+" * 5000 + "x", "nested too deeply|nested .* levels deep"),
        ("-" * 5000 + "x", "nested too deeply|nested .* levels deep"),
        ("abs(x)" + "-1" * (MAX_DEPTH + 10), f"more than {MAX_DEPTH}"),
    ],
)
def test_refused_with_one_line(text, match):
    with pytest.raises(OptionError, match=match) as exc:
        number(text)
    message = str(exc.value)
    assert message.startswith("--importance ") and "\n" not in message and len(message) < 600


def test_deep_condition_refused():
    with pytest.raises(OptionError, match="nested"):
        compile_expression("not " * 5000 + "x > 1", ["x"], option="--where")


def test_cli_importance_overflow_exit_2(tmp_path, capsys):
    from rlverify.cli.main import main

    model, policy = tmp_path / "m.prism", tmp_path / "p.py"
    model.write_text(
        "mdp\nmodule m\n  x : [0..3] init 0;\n  [up] x<3 -> 0.5 : (x'=x+1) + 0.5 : (x'=x);\n"
        '  [stay] true -> (x\'=x);\nendmodule\nlabel "top" = x=3;\n'
    )
    policy.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(s):\n    return np.tile([1.0, 0.0], (len(s), 1))\n"
    )
    code = main(
        [
            "simulate",
            str(model),
            "-p",
            'P=? [F "top"]',
            "--policy",
            f"{policy}:pi",
            "--rare",
            "splitting",
            "--importance",
            "x * 2**63",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "beyond 64-bit integers" in err and "Traceback" not in err
