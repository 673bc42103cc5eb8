"""Constant sweeps (``-c N=4:8``, PRISM's experiment syntax): the points, in order, and what is refused."""

from __future__ import annotations

import pytest

from rlverify.errors import ConstantsError
from rlverify.models.assignments import MAX_SWEEP_POINTS, expand_sweep


def test_a_range_sweeps_every_integer_from_start_to_end_inclusive():
    assert expand_sweep("N=4:8") == ["N=4", "N=5", "N=6", "N=7", "N=8"]


def test_steps_are_decimal_and_the_first_constant_varies_slowest():
    assert expand_sweep("N=2:2:4,p=0.1:0.1:0.3,q=1") == [
        "N=2,p=0.1,q=1",
        "N=2,p=0.2,q=1",
        "N=2,p=0.3,q=1",  # not 0.30000000000000004
        "N=4,p=0.1,q=1",
        "N=4,p=0.2,q=1",
        "N=4,p=0.3,q=1",
    ]


def test_no_sweep_is_the_text_itself():
    assert expand_sweep("xMax=4,yMax=4") == ["xMax=4,yMax=4"] and expand_sweep(None) == [""]


@pytest.mark.parametrize(
    "text, words",
    [
        ("N=4:a", "N=4:a: a sweep is START:END or START:STEP:END, with numbers"),
        ("N=8:4", "N=8:4: a sweep needs START <= END and a positive STEP"),
        ("N=1:0:5", "a positive STEP"),
        ("N=1:100000", f"sweeps 100,000 values, more than {MAX_SWEEP_POINTS:,}"),
        ("N=1:100,M=1:100", f"the sweep has 10,000 points, more than {MAX_SWEEP_POINTS:,}"),
        ("N=inf:1", "with numbers"),
    ],
)
def test_what_no_sweep_can_mean_is_refused_naming_it(text, words):
    with pytest.raises(ConstantsError) as info:
        expand_sweep(text)
    assert words in str(info.value) and str(info.value).startswith("--constants: ")
