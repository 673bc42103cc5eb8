"""``bit_mask``: Storm's bit vectors read from their stored form are the sets their iteration gives."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlverify.models.storm import bit_mask


@given(st.integers(0, 300).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, max(n - 1, 0)), max_size=n))))
@settings(max_examples=300, deadline=None)
def test_bit_mask_is_the_set_of_the_iterated_bits(case):
    from stormpy.developer.storage import BitVector

    n, members = case
    bits = BitVector(n, sorted(members))
    expected = np.zeros(n, dtype=bool)
    expected[list(members)] = True
    assert bit_mask(bits, n).tolist() == expected.tolist()
    full = BitVector(n, True)  # every bucket 2**64 - 1
    assert bit_mask(full, n).all() and len(bit_mask(full, n)) == n


class _Hostile:
    """A bit vector whose stored form is not the one expected (as if a Storm release changed it)."""

    def __init__(self, members: list[int], stored: str) -> None:
        self.members, self.stored = members, stored

    def store_as_string(self) -> str:
        return self.stored

    def get_number_of_set_bits(self) -> int:
        return len(self.members)

    def __iter__(self) -> Iterator[int]:
        return iter(self.members)


def test_an_unexpected_stored_form_falls_back_to_the_iterated_bits():
    members = [1, 64, 69]
    for stored in ("", "70", "70 1 2 3", "71 4 5", "70 9223372036854775808 0"):  # sizes, bucket counts, counts wrong
        assert np.flatnonzero(bit_mask(_Hostile(members, stored), 70)).tolist() == members
