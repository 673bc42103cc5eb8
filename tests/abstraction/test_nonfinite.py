"""Non-finite numbers and absurd nesting in a declared continuous system or in the abstraction's options are refused
(exit 2, naming the entry), never answered: ``-c limit=nan`` made every unsafe inequality false, and the abstraction
then "proved" the system safe with upper bound 0 (issue 21)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rlverify.abstraction import AbstractionOptions
from rlverify.abstraction.options import validate_options
from rlverify.cli.main import main
from rlverify.errors import AbstractionError, ConstantsError, DomainError, ModelError
from rlverify.models.continuous import declare

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "double_integrator.py"
EXAMPLE_POLICY = ROOT / "examples" / "double_integrator.onnx"


def system(**changes):
    decl = {
        "variables": ["x", "v"],
        "domain": {"x": [-2, 2], "v": [-1, 1]},
        "actions": ["left", "right"],
        "action_values": {"u": {"left": -1, "right": 1}},
        "constants": {"dt": 0.1, "limit": 1.0},
        "initial": {"default": {"x": [-0.5, 0.5], "v": [-0.2, 0.2]}},
        "unsafe": ["x >= limit", "x <= -limit"],
        "pieces": [{"next": {"x": "x + dt*v", "v": "clip(v + dt*u, -1, 1)"}}],
    }
    decl.update(changes)
    return decl


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999"])
def test_cli_constant_nan_is_refused_not_proved_safe(capsys, value):
    code = main(["abstract", f"{EXAMPLE}:SYSTEM", "-c", f"limit={value}", "--policy", str(EXAMPLE_POLICY), "-k", "1"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert "limit" in out.err and "finite" in out.err and "Traceback" not in out.err


@pytest.mark.parametrize(
    "changes,match",
    [
        ({"constants": {"dt": 0.1, "limit": math.nan}}, "constants.limit': expected a finite number"),
        ({"constants": {"dt": 0.1, "limit": math.inf}}, "constants.limit': expected a finite number"),
        ({"constants": {"dt": 0.1, "limit": 10**400}}, "constants.limit': expected a finite number"),
        ({"action_values": {"u": {"left": "-1e999", "right": 1}}}, "is not a finite real number"),
        ({"action_values": {"u": {"left": "10.0**400", "right": 1}}}, "is not a finite real number"),
        ({"action_values": {"u": {"left": "(-8)**0.5", "right": 1}}}, "is not a finite real number"),
        ({"unsafe": ["x >= 1e308 * 10"]}, "is not a finite real number"),
        ({"initial": {"default": {"x": [-0.5, math.nan], "v": [-0.2, 0.2]}}}, "initial.default"),
        ({"domain": {"x": [-math.inf, 2], "v": [-1, 1]}}, "domain"),
        ({"min_width": math.inf}, "min_width"),
        ({"pieces": [{"next": {"x": "x + " + "+".join(["dt*v"] * 5000), "v": "v"}}]}, "nested"),
        ({"pieces": [{"next": {"x": "-" * 5000 + "x", "v": "v"}}]}, "nested"),
        ({"unsafe": ["x >= " + "(" * 300 + "1" + ")" * 300]}, "nested|parse"),
    ],
)
def test_declaration_refused_naming_the_entry(changes, match):
    with pytest.raises(ModelError, match=match) as exc:
        declare(system(**changes))
    assert "\n" not in str(exc.value)


def test_constant_override_nan_refused():
    from rlverify.models.continuous.declared import parse_constants

    with pytest.raises(ConstantsError, match=r"limit=nan.*finite"):
        parse_constants("dt=0.1,limit=nan")


@pytest.mark.parametrize(
    "kw,error,match",
    [
        ({"min_width": math.nan}, AbstractionError, "min_width"),
        ({"min_width": math.inf}, AbstractionError, "min_width"),
        ({"milp_time_limit": math.inf}, AbstractionError, "milp_time_limit"),
        ({"samples": 10**12}, AbstractionError, "samples"),
        ({"horizon": 10**12}, AbstractionError, "horizon"),
        ({"template": ((1.0, math.inf), (0.0, 1.0))}, AbstractionError, "template"),
        ({"initial": ((math.nan, 0.0), (0.1, 0.1))}, DomainError, "initial region.*finite"),
        ({"initial": ((0.0, 0.0), (math.inf, 0.1))}, DomainError, "initial region.*finite"),
    ],
)
def test_abstraction_options_refused(kw, error, match):
    s = declare(system())
    options = AbstractionOptions(**{"horizon": 2, **kw})
    with pytest.raises(error, match=match):
        validate_options(s, options)
