"""CompiledProgram.structured_branches (the merged exploration's branches from each choice's static structure) against
CompiledProgram.branches, array for array and bit for bit, on public models and a program written to need every
fallback (a command without a table, one whose table is not read from the key, an update that leaves its bounds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rlverify.models.program as program_module
from rlverify.errors import ModelError
from rlverify.models.program import compiled
from rlverify.models.symbolic import load_model

QVBS = Path(__file__).resolve().parents[1] / "data" / "qvbs"
MODELS = {
    "csma": (QVBS / "csma" / "csma.3-2.prism", None),
    "consensus": (QVBS / "consensus" / "consensus.2.prism", "K=4"),
    "ij": (QVBS / "ij" / "ij.3.prism", None),
}
# synchronised commands of several updates, a command reading variables far apart (x and mid: a table, not read from
# the key), one over a domain too large for a table (big), and (in the last test) an update that leaves x's bounds
PROGRAM = """mdp
global g : [0..3] init 0;
module m
  x : [0..5] init 0;
  [a] x<5 -> 0.25:(x'=x+1) + 0.75:(x'=max(0, x-1));
  [b] x=5 -> (x'=0) & (g'=min(3, g+1));
  [] g=3 & x<5 -> 0.5:(x'=x+1) + 0.5:true;
endmodule
module n
  y : [0..2] init 0;
  w : [0..99] init 0;
  mid : [0..9] init 0;
  big : [0..100000] init 0;
  [c] x<3 -> 0.5:(mid'=mod(mid + x, 10)) + 0.5:true;
  [d] w<99 & y=0 -> (w'=w+1);
  [a] y<2 -> 0.5:(y'=y+1) + 0.5:(y'=0);
  [a] y=2 -> 0.1:(y'=0) + 0.9:true;
  [b] true -> (big'=mod(big + 7 * x + g, 100001));
endmodule
"""


def _choices(program, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random states of ``program`` and a random subset of the choices enabled there: ``(parts, rows, values, keys)``."""
    values = np.stack([rng.integers(v.lo, v.hi + 1, n) for v in program.variables], axis=1)
    found = program.enabled(values)
    pick = np.sort(rng.choice(len(found.state), size=rng.integers(0, len(found.state) + 1), replace=False))
    return found.parts[pick], found.state[pick], values, program.keys(values)


def _same(program, parts, rows, values, keys) -> None:
    expected = program.branches(parts, rows, values, keys)  # also builds the tables the choices need
    number, update = program.branch_structure(parts)
    got = program.structured_branches(parts, rows, values, keys, number, update)
    np.testing.assert_array_equal(got.number, expected.number)
    np.testing.assert_array_equal(got.keys, expected.keys)
    assert got.probs.tobytes() == expected.probs.tobytes()  # bit for bit: multiplied in the same order


@pytest.mark.parametrize("chunk", [program_module.BRANCH_CHUNK, 3], ids=["one-chunk", "chunks-of-3"])
@pytest.mark.parametrize("name", sorted(MODELS))
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60))
def test_structured_branches_are_branches_on_public_models(name, chunk, seed, n) -> None:
    path, constants = MODELS[name]
    program = compiled(load_model(path, constants).program)
    saved, program_module.BRANCH_CHUNK = program_module.BRANCH_CHUNK, chunk  # branches computed chunk by chunk
    try:
        _same(program, *_choices(program, np.random.default_rng(seed), n))
    finally:
        program_module.BRANCH_CHUNK = saved


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40))
def test_structured_branches_are_branches_with_every_fallback(tmp_path_factory, seed, n) -> None:
    path = tmp_path_factory.mktemp("p") / "p.prism"
    path.write_text(PROGRAM)
    program = compiled(load_model(path).program)
    _same(program, *_choices(program, np.random.default_rng(seed), n))


def test_a_failing_update_is_refused_as_branches_refuses_it(tmp_path) -> None:
    path = tmp_path / "p.prism"
    path.write_text(PROGRAM.replace("max(0, x-1)", "x-1"))
    program = compiled(load_model(path).program)
    values = np.zeros((1, len(program.variables)), dtype=np.int64)
    values[0, [v.name for v in program.variables].index("x")] = 0
    found = program.enabled(values)
    keys = program.keys(values)
    with pytest.raises(ModelError) as expected:
        program.branches(found.parts, found.state, values, keys)
    with pytest.raises(ModelError) as got:
        program.structured_branches(found.parts, found.state, values, keys, *program.branch_structure(found.parts))
    assert str(got.value) == str(expected.value)
    assert "x" in str(got.value)
