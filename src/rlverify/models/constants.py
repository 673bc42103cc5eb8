"""Constant values as a user gives them (``-c N=3,p=1/10``), for Storm: read, typed (a bool, a 64-bit integer, a
finite double) and refused where double precision would change them; the same refusal for numbers written in a
model."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from rlverify.errors import ModelError
from rlverify.models.assignments import parse_assignments
from rlverify.models.storm import StormProgram

#: a constant's value as Storm takes it (the text where it is none of these: Storm then refuses it)
ConstantValue = bool | int | float | str


def parse_constants(text: str | Mapping[str, object] | None) -> dict[str, str]:
    """``"K=V,K2=V2"`` (or a mapping) as a dict of strings.

    Raises:
        ConstantsError: an entry that is not ``NAME=VALUE`` (or has an empty name), or a name given twice
            (``N=3,N=4`` would otherwise silently mean ``N=4``).
    """
    if isinstance(text, Mapping):
        return {str(k): str(v) for k, v in text.items()}
    return parse_assignments(text)


def constant_values(program: StormProgram, given: Mapping[str, str]) -> dict[str, ConstantValue]:
    """The values of ``given`` constants for Storm; an integer given for a ``double`` constant becomes a float (PRISM
    allows ``-c p=1``; Storm refuses an integer expression there)."""
    types = {c.name: str(c.type) for c in program.constants}
    out = {}
    for k, v in given.items():
        value = given_value(v)
        if isinstance(value, int) and not isinstance(value, bool) and types.get(k) in ("rational", "double", "real"):
            value = float(value)
        out[k] = value
    return out


def _integer(text: str) -> int | None:
    """``text`` as a 64-bit integer, None where it is no integer."""
    try:
        value = int(text)
    except ValueError:
        return None
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"{text} does not fit a 64-bit integer")
    return value


def _number(text: str) -> float | None:
    """``text`` as a finite double, None where it is no number."""
    try:
        number = float(text)
    except ValueError:
        return None
    if not np.isfinite(number):
        raise ValueError(f"{text} is not a finite number")
    return _normal(number, text)


def _rational(text: str) -> float | None:
    """``text`` as a rational, as PRISM writes them (``1/10``), None where it is none."""
    num, slash, den = text.partition("/")
    if not slash:
        return None
    from fractions import Fraction  # lazy: start-up (and decimal: 4 ms of every start-up otherwise)

    try:
        number = float(Fraction(int(num.strip()), int(den.strip())))
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return _normal(number, text)


def given_value(text: str) -> ConstantValue:
    """A constant's value for Storm: a bool, a 64-bit integer, a finite float (also from a rational ``1/10``),
    else the text (which Storm then refuses).

    Raises:
        ValueError: an integer beyond 64 bits or a number that is not finite (``nan``, ``inf``, ``1e999``),
            with a message naming the value (the caller reports it with the file).
    """
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for read in (_integer, _number, _rational):
        value = read(text)
        if value is not None:
            return value
    return text


#: the smallest positive normal double: below it a probability loses precision or becomes 0
SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)


def _normal(number: float, text: str) -> float:
    """``number`` (read from ``text``), refused where double precision would change it beyond rounding: a non-zero
    value that became 0 or lies below the smallest normal double (rlverify and Storm compute in doubles: a transition
    of probability 1e-400 would silently vanish, and ``P>0`` flip)."""
    if number == 0.0 and re.search(r"[1-9]", text.split("e")[0].split("E")[0]):
        raise ValueError(
            f"{text} is below the smallest double and would become 0 (rlverify computes in double "
            f"precision; the smallest normal double is {SMALLEST_NORMAL:.3g})"
        )
    if 0.0 < abs(number) < SMALLEST_NORMAL:
        raise ValueError(f"{text} is below the smallest normal double {SMALLEST_NORMAL:.3g} (its precision is lost)")
    return number


_NUMBER = re.compile(r"(?<![\w.])(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def check_literals(text: str, where: str) -> None:
    """Refuse a number written in a model (``text``, ``//`` comments left out) that double precision turns into 0 or
    a subnormal (:func:`_normal`), naming ``where``."""
    code = re.sub(r"//[^\n]*", "", text)
    for literal in _NUMBER.findall(code):
        try:
            _normal(float(literal), literal)
        except ValueError as exc:
            raise ModelError(f"{where}: the number {exc}") from None
