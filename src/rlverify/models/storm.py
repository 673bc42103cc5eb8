"""Storm's untyped objects named by alias, and the small calls on them every Storm user here makes: its log off for a
call whose failure rlverify reports, its messages on one line, an expression's constant value, truth values and bit
vectors as numpy arrays."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from rlverify.models.numerics import storm_log_verbose

#: a Storm PRISM program or JANI model (``stormpy.PrismProgram`` / ``stormpy.JaniModel``): stormpy has no types
StormProgram = Any
#: a model Storm built (``stormpy.SparseDtmc`` / ``SparseMdp``)
StormModel = Any
#: a Storm expression (``stormpy.Expression``)
StormExpression = Any
#: a Storm property (``stormpy.Property``)
StormProperty = Any
#: a Storm formula (``stormpy.logic.Formula``)
StormFormula = Any
#: a Storm bit vector (``stormpy.BitVector``)
StormBits = Any
#: a variable of a Storm program (``stormpy.IntegerVariable``, ``stormpy.JaniVariable``, ...)
StormVariable = Any
#: Storm's description of a program for its builders (``stormpy.developer.SymbolicModelDescription``)
StormDescription = Any
#: Storm's mask restricting the choices its builder explores (``stormpy.developer.StateValuationFunctionMask``)
StormMask = Any

_STORM_MSG = re.compile(r"^\s*\w+Exception:\s*", re.DOTALL)


@contextlib.contextmanager
def storm_log_off() -> Iterator[None]:
    """Storm's own log off for a call whose failure rlverify reports (Storm's exception carries the message): a parse
    error is then rlverify's one error, not also Storm's ``ERROR (SpiritErrorHandler.h:27): ...`` lines on stdout in
    a Python session, where the CLI's setting (:func:`rlverify.models.numerics.set_storm_logging`) does not apply;
    kept on where the CLI's ``-v`` asked for it."""
    import stormpy.developer as dev  # lazy: stormpy, start-up

    if storm_log_verbose():
        yield
        return

    level = dev.get_log_level()
    dev.set_log_level(dev.LogLevel.OFF)
    try:
        yield
    finally:
        dev.set_log_level(level)


def storm_message(exc: BaseException, *, limit: int | None = None) -> str:
    """Storm's exception text without the C++ exception class prefix, on one line where possible; beyond ``limit``
    characters its start and end around ``...`` (Storm quotes a whole expression, which may be megabytes)."""
    text = re.sub(r"\s*\n\s*", " | ", _STORM_MSG.sub("", str(exc)).strip())
    if limit is not None and len(text) > limit:
        text = f"{text[: limit // 2]} ... {text[-(limit // 2) :]}"
    return text


def constant_value(expr: StormExpression, *, as_bool: bool = False) -> int | None:
    """The value of a Storm expression without variables (booleans as 0/1), else None.

    Storm crashes (not raises) evaluating an expression over undefined identifiers; substitute the
    program's constants first (``program.substitute_constants()``).
    """
    if not is_initialized(expr) or expr.contains_variables():
        return None
    try:
        return int(expr.evaluate_as_bool()) if as_bool else int(expr.evaluate_as_int())
    except (RuntimeError, ValueError):
        return None


def is_initialized(expr: StormExpression | None) -> bool:
    """Whether a Storm expression is set: an unbounded PRISM ``int`` has no bound expressions, and Storm crashes the
    process (SIGSEGV) on any use of one but printing it."""
    return expr is not None and str(expr) != "__storm::notinitialized__"


def truth_values(storm_model: StormModel, state_formula: StormFormula) -> np.ndarray:
    """``(S,)`` bool: the states of a built Storm model satisfying a propositional ``state_formula``
    (a Storm formula, e.g. a subformula of a parsed property)."""
    import stormpy  # lazy: stormpy, start-up

    result = stormpy.model_checking(storm_model, state_formula)
    return bit_mask(result.get_truth_values_vector(), storm_model.nr_states)


def bit_mask(bits: StormBits, size: int) -> np.ndarray:
    """``(size,)`` bool: Storm's ``BitVector`` ``bits`` as an array.

    Read from its stored form (its size, then its 64-bit buckets in decimal, bit i the bit ``63 - i % 64``
    of bucket ``i // 64``): ~0.2 ms for 37k states where iterating its set bits takes ~5 ms. Where that form is not
    as expected (its size, bucket count or count of set bits disagree), its set bits are iterated."""
    parts = bits.store_as_string().split()
    if len(parts) == 1 + (size + 63) // 64 and int(parts[0]) == size:
        buckets = np.array(parts[1:], dtype=np.uint64).astype(">u8")
        mask = np.unpackbits(buckets.view(np.uint8), count=size).astype(bool)
        if int(np.count_nonzero(mask)) == bits.get_number_of_set_bits():
            return mask
    out = np.zeros(size, dtype=bool)
    out[np.fromiter(iter(bits), dtype=np.int64)] = True
    return out
