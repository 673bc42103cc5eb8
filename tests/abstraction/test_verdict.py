"""The abstraction's typed verdict: each member is the text the result shows, ``unsafe`` is the API's decision (the
CLI's exit code follows it), and the verdict follows the threshold, the sound upper bound and the best lower bound."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlverify.abstraction.gap import _bisect, _verdict
from rlverify.results import WorstWitness
from rlverify.results.abstraction import Verdict


def witness(lower: float, method: str) -> WorstWitness:
    return WorstWitness((0.0,), lower, lower, None, method, method, None, None, 1, 0)


def test_members_are_the_texts_shown_and_kept_in_json():
    texts = {"safe", "unsafe (witness, sound)", "unsafe (witness, statistical)", "undecided at budget"}
    assert {str(v) for v in Verdict} == texts
    assert json.loads(json.dumps({"verdict": Verdict.UNSAFE_SOUND})) == {"verdict": "unsafe (witness, sound)"}
    assert {v for v in Verdict if v.unsafe} == {v for v in Verdict if str(v).startswith("unsafe")}


@pytest.mark.parametrize(
    "upper,lower,method,threshold,expected",
    [
        (0.1, 0.0, "enumeration", None, None),  # no threshold, no verdict
        (0.1, 0.0, "enumeration", 0.1, "safe"),  # upper <= B (at equality too)
        (0.5, 0.3, "enumeration", 0.2, "unsafe (witness, sound)"),  # the exact witness is above B
        (0.5, 0.3, "simulation", 0.2, "unsafe (witness, statistical)"),  # the statistical witness is
        (0.5, 0.2, "enumeration", 0.2, "undecided at budget"),  # lower == B decides nothing
    ],
)
def test_the_verdict_compares_both_bounds_with_the_threshold(upper, lower, method, threshold, expected):
    got = _verdict(upper, witness(lower, method), lower, threshold)
    assert got == expected
    assert (got is not None and got.unsafe) is (expected is not None and expected.startswith("unsafe"))


def test_a_sound_part_bound_above_a_statistical_witness_makes_the_verdict_sound():
    """The best lower bound is a part's sound lower bound, not the (smaller) statistical witness's."""
    assert _verdict(0.9, witness(0.3, "simulation"), 0.4, 0.35) == Verdict.UNSAFE_SOUND


def test_bisecting_along_axes_tiles_the_box():
    lo, hi = np.array([0.0, -1.0, 2.0]), np.array([1.0, 1.0, 4.0])
    boxes = _bisect(lo, hi, np.array([0, 2]))
    assert len(boxes) == 4
    volume = sum(float(np.prod(b - a)) for a, b in boxes)
    assert volume == pytest.approx(float(np.prod(hi - lo)))
    corners = sorted((tuple(a), tuple(b)) for a, b in boxes)
    assert corners[0] == ((0.0, -1.0, 2.0), (0.5, 1.0, 3.0)) and corners[-1] == ((0.5, -1.0, 3.0), (1.0, 1.0, 4.0))
