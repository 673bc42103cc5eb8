"""The one ``K=V`` parser behind ``-c`` (PRISM/JANI constants, benchmark parameters, a declared
system's constants) and ``--env-kwargs``: the same syntax, empty names and duplicates everywhere;
each caller converts the values to its own type."""

from __future__ import annotations

import pytest

from rlverify.benchmarks.registry import parse_parameters
from rlverify.errors import ConstantsError, OptionError
from rlverify.models.assignments import parse_assignments
from rlverify.models.constants import parse_constants as model_constants
from rlverify.models.continuous.declared import parse_constants as system_constants
from rlverify.models.gymnasium import parse_env_kwargs


def test_syntax_order_and_blank_entries() -> None:
    assert parse_assignments(None) == {} and parse_assignments("") == {} and parse_assignments(" , ,") == {}
    out = parse_assignments(" b = 2 ,, a=x=y,c= ")
    assert out == {"b": "2", "a": "x=y", "c": ""} and list(out) == ["b", "a", "c"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("N", "--constants: expected NAME=VALUE, got 'N'"),
        ("N=1, =3", "--constants: expected NAME=VALUE, got '=3'"),
        ("N=3,N = 4", "--constants: 'N' is given twice (N=3 and N=4); give each constant once"),
    ],
    ids=["no-equals", "empty-name", "duplicate"],
)
def test_errors_name_the_entry(text: str, message: str) -> None:
    with pytest.raises(ConstantsError) as err:
        parse_assignments(text)
    assert str(err.value) == message


def test_callers_convert_values_to_their_type() -> None:
    assert model_constants("N=3,q=0.5") == {"N": "3", "q": "0.5"}
    assert parse_parameters("xMax=4,slickness=0.1,mode=fast") == {"xMax": 4, "slickness": 0.1, "mode": "fast"}
    assert system_constants("dt=0.1,limit=2") == {"dt": 0.1, "limit": 2.0}
    assert parse_env_kwargs("map_name=8x8,is_slippery=false,n=3") == {"map_name": "8x8", "is_slippery": False, "n": 3}


@pytest.mark.parametrize("parse", [model_constants, parse_parameters, system_constants], ids=["model", "benchmark", "system"])
def test_every_minus_c_refuses_a_constant_given_twice(parse) -> None:
    with pytest.raises(ConstantsError, match=r"'limit' is given twice \(limit=1 and limit=2\)"):
        parse("limit=1,limit=2")


def test_a_declared_system_refuses_an_empty_name() -> None:
    # before: "=3" set a constant named "" (and "a=1,a=2" silently meant a=2)
    with pytest.raises(ConstantsError, match=r"malformed constant '=3'; expected NAME=NUMBER"):
        system_constants("dt=0.1,=3")
    with pytest.raises(ConstantsError, match=r"malformed constant 'dt=fast'; expected NAME=NUMBER"):
        system_constants("dt=fast")


def test_env_kwargs_names_are_identifiers() -> None:
    with pytest.raises(OptionError, match=r"--env-kwargs: expected NAME=VALUE, got 'map name=8x8' \(or a JSON object"):
        parse_env_kwargs("map name=8x8")
    with pytest.raises(OptionError, match=r"--env-kwargs: 'x' is given twice \(x=1 and x=2\); give each argument once"):
        parse_env_kwargs("x=1,x=2")
