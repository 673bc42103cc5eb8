"""UMB valuation records written for chains built here (``encode_valuations``) against the reader's decoder (bit by
bit with ``np.unpackbits``: no code shared) and a record worked out by hand."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlverify.models.explicit import _decode_valuations, encode_valuations


def test_a_record_worked_out_by_hand() -> None:
    # x: uint 3 bits = 5 (bits 1,0,1), 2 bits padding, y: int 4 bits = -3 (two's complement 1101: bits 1,0,1,1),
    # b: bool = 1; the bit string 1010010111 little-endian: byte 0 = 1 + 4 + 32 + 128, byte 1 = 1 + 2
    spec = [
        {"name": "x", "type": {"type": "uint", "size": 3}},
        {"padding": 2},
        {"name": "y", "type": {"type": "int", "size": 4}},
        {"name": "b", "type": {"type": "bool", "size": 1}},
    ]
    record = encode_valuations(np.array([[5, -3, 1]]), spec)
    assert record.tolist() == [[165, 3]]


@st.composite
def _fields(draw: st.DrawFn) -> tuple[list[dict], np.ndarray]:
    spec: list[dict] = []
    columns = []
    n = draw(st.integers(1, 6))
    for i in range(draw(st.integers(1, 9))):
        if draw(st.booleans()) and draw(st.booleans()):
            spec.append({"padding": draw(st.integers(1, 13))})
            continue
        kind = draw(st.sampled_from(["int", "uint", "bool"]))
        size = 1 if kind == "bool" else draw(st.integers(1, 64))
        offset = draw(st.integers(-7, 7)) if kind != "bool" and size < 60 else 0
        lo, hi = {"int": (-(1 << (size - 1)), (1 << (size - 1)) - 1), "uint": (0, (1 << size) - 1), "bool": (0, 1)}[kind]
        lo, hi = max(lo, -(2**63)), min(hi, 2**63 - 1 - 7)
        field = {"name": f"v{i}", "type": {"type": kind, "size": size}}
        if offset:
            field["offset"] = offset
        spec.append(field)
        columns.append([draw(st.integers(lo, hi)) + offset for _ in range(n)])
    values = np.array(columns, dtype=np.int64).T if columns else np.zeros((n, 0), dtype=np.int64)
    return spec, values


@settings(max_examples=300, deadline=None)
@given(_fields())
def test_records_decode_to_the_values(fields: tuple[list[dict], np.ndarray]) -> None:
    spec, values = fields
    records = encode_valuations(values, spec)
    width = sum(v["padding"] if "padding" in v else v["type"]["size"] for v in spec)
    assert records.shape == (len(values), (width + 7) // 8)
    names, decoded = _decode_valuations(records, spec)
    assert names == tuple(v["name"] for v in spec if "padding" not in v)
    np.testing.assert_array_equal(decoded, values)
    # padding and the bits past the last field are zero
    bits = np.unpackbits(records, axis=1, bitorder="little")
    assert not bits[:, width:].any()
    pos = 0
    for v in spec:
        size = v["padding"] if "padding" in v else v["type"]["size"]
        if "padding" in v:
            assert not bits[:, pos : pos + size].any()
        pos += size
