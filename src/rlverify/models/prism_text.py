"""A PRISM file's text, read beside Storm's parse: refused before Storm parses it where Storm would crash or hang
(binary data, too deep a nesting, formulas too large written out, a constant zero divisor, numbers double precision
changes), parsed by Storm (a leading byte-order mark allowed), and what Storm's program does not keep (the variables
it declares, its model type keyword)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from rlverify.errors import ModelError, PropertyError
from rlverify.models.constants import check_literals
from rlverify.models.divisions import constant_zero_divisor
from rlverify.models.nesting import MAX_EVALUATED_CHAIN, MAX_NESTING, check_nesting, expression_depth
from rlverify.models.storm import StormProgram

#: the UTF-8 byte-order mark some editors write first
_BOM = b"\xef\xbb\xbf"
_COMMENT = re.compile(r"//[^\n]*")
_MODEL_TYPE = re.compile(r"^\s*([A-Za-z]+)\b")
_VARIABLE_DECLARATION = re.compile(r"(?m)^\s*(?:global\s+)?([A-Za-z_]\w*)\s*:\s*(?:\[|bool\b|int\b)")


def parse_prism_file(path: Path) -> StormProgram:
    """Storm's parse of a PRISM file. A leading UTF-8 byte-order mark is allowed, as in a JANI file: Storm's PRISM
    parser refuses it at 1:1 ("expecting <model type>"), so such a file is parsed from a copy without it (its lines
    and columns are the file's)."""
    import tempfile  # lazy: start-up (only a file with a byte-order mark)

    import stormpy  # lazy: stormpy, start-up

    with path.open("rb") as f:
        bom = f.read(len(_BOM)) == _BOM
    if not bom:
        return stormpy.parse_prism_program(str(path), prism_compatibility=True)
    with tempfile.TemporaryDirectory(prefix="rlverify-prism-") as tmp:
        copy = Path(tmp) / "model.prism"
        copy.write_bytes(path.read_bytes()[len(_BOM) :])
        return stormpy.parse_prism_program(str(copy), prism_compatibility=True)


def declared_variables(path: Path) -> set[str]:
    """The variable names a PRISM file declares (``x : [0..3] ...``, ``b : bool ...``, ``global g : ...``)."""
    return set(_VARIABLE_DECLARATION.findall(_COMMENT.sub("", path.read_text("utf-8-sig", errors="replace"))))


def declared_type(path: Path) -> str:
    """The model type keyword a PRISM file starts with (comments skipped), for a type stormpy cannot name."""
    text = _COMMENT.sub("", path.read_text(encoding="utf-8-sig", errors="replace"))
    found = _MODEL_TYPE.match(text)
    return found.group(1).lower() if found else "unknown"


def check_prism_text(path: Path, given: Mapping[str, str] | None = None) -> bool:
    """Refuse before Storm parses it a PRISM file that is binary, nests expressions deeper than Storm's recursive
    parser survives (it crashes the process at ~2,000 levels), or divides by a constant zero (``given``: the
    constants defined on the command line). Returns whether every divisor in the text was a constant (judged here)."""
    data = path.read_bytes()
    if b"\x00" in data:
        raise ModelError(f"{path}: not a PRISM file (it contains NUL bytes: binary data)")
    text = data.decode("utf-8-sig", errors="replace")
    formulas = formula_depths(path, text)
    try:
        check_nesting(text, str(path), lines=True, formulas=formulas)
    except PropertyError as exc:
        raise ModelError(str(exc)) from None
    check_literals(text, str(path))
    zero, judged = constant_zero_divisor(text, given or {})
    if zero is not None:
        raise ModelError(f"{path}: {zero} divides by zero (PRISM refuses this; Storm crashes or computes on with some number)")
    return judged


#: the most operands a PRISM file may have once its formulas are written out where they are used, as Storm's parser
#: does (its time grows with it: 1,000 formulas each using the one before, 500,000 operands, parse in 0.3 s; 2,000 in
#: 1.6 s; 5,000 in 10 s; 20,000 took over 120 s; 40 formulas each using the one before twice never finish)
MAX_WRITTEN_OUT = 2_000_000
_FORMULA = re.compile(r"\bformula\s+([A-Za-z_]\w*)\s*=\s*([^;]*);")
_OPERAND = re.compile(r"[A-Za-z_]\w*|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _formula_depth(body: str, operands: list[str], depths: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """A formula's nesting and chain depths written out (``depths``: the formulas before it): an upper bound from
    string counts where it is within the limits (a file of 20,000 short formulas is not scanned token by token), else
    the scan."""
    used = [depths[t] for t in operands if t in depths]
    nest = sum(body.count(c) for c in "([{!-XFG") + max((n for n, _ in used), default=0)
    chain = sum(body.count(c) for c in "+-*/^&|=<>?:,") + max((c for _, c in used), default=0)  # >= its operators
    # (bounded by the smallest chain limit, a label's, which the formula may be used in)
    if nest <= MAX_NESTING and chain <= MAX_EVALUATED_CHAIN:
        return nest, chain
    found = expression_depth(body, depths)
    return found[0], found[1]


def _refuse_written_out(path: Path, code: str, sizes: Mapping[str, int]) -> None:
    """Refuse ``code`` whose formulas (their ``sizes`` in operands written out) make more than
    :data:`MAX_WRITTEN_OUT` operands where they are used."""
    total = sum(sizes.values()) + sum(sizes.get(t, 1) for t in _OPERAND.findall(_FORMULA.sub(" ", code)))
    if total <= MAX_WRITTEN_OUT:
        return
    largest = max(sizes, key=sizes.__getitem__)
    alone = f"{sizes[largest]:,}" if sizes[largest] <= MAX_WRITTEN_OUT else f"more than {MAX_WRITTEN_OUT:,}"
    raise ModelError(
        f"{path}: {total:,} operands once its formulas are written out where they are used, more than "
        f"{MAX_WRITTEN_OUT:,} (formula {largest} alone has {alone}; Storm's parser writes each formula out and its "
        "time grows with that size: 20,000 formulas each using the one before took over 120 s); use formulas "
        "less often inside formulas and in commands"
    )


def formula_depths(path: Path, text: str) -> dict[str, tuple[int, int]]:
    """The nesting and chain depths (:func:`~rlverify.models.nesting.expression_depth`) of each formula of PRISM
    ``text`` written out, in file order; refusing a file whose formulas written out where they are used exceed
    :data:`MAX_WRITTEN_OUT` operands."""
    code = _COMMENT.sub("", text)
    depths: dict[str, tuple[int, int]] = {}
    sizes: dict[str, int] = {}
    for name, body in _FORMULA.findall(code):
        operands = _OPERAND.findall(body)
        depths[name] = _formula_depth(body, operands, depths)
        sizes[name] = min(sum(sizes.get(t, 1) for t in operands), MAX_WRITTEN_OUT + 1)
    if sizes:
        _refuse_written_out(path, code, sizes)
    return depths
