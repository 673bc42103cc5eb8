"""CompiledProgram.guard_signature: each state's guards as one integer, against each guard evaluated on its own."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.models.program import compiled
from rlverify.models.symbolic import load_model

# guards reading no variable, one, a span with a variable in between it does not read, globals and locals
PROGRAM = """mdp
global g : [-2..3] init 0;
module m
  x : [0..4] init 0;
  b : bool init false;
  [a] x<4 & !b -> (x'=x+1);
  [a] g>0 & x>1 -> (b'=true);
  [] true -> (b'=false);
  [c] b | x=2 -> (x'=0);
endmodule
module n
  y : [-1..2] init 0;
  [a] y<2 & g<3 -> (y'=y+1) & (g'=g+1);
  [c] y>=0 & x>=1 & b -> (y'=-1);
  [] false -> true;
endmodule
"""


@pytest.mark.parametrize("span_domain", [1 << 16, 0], ids=["tables-over-spans", "guards-each"])
def test_guard_signature_has_each_commands_guard_in_its_bit_on_every_valuation(tmp_path, monkeypatch, span_domain):
    """Whether a guard's bits come from a table over the span of variables it reads or from CompiledProgram.guards."""
    import rlverify.models.program_tables as tables_module

    monkeypatch.setattr(tables_module, "SPAN_DOMAIN", span_domain)
    path = tmp_path / "p.prism"
    path.write_text(PROGRAM)
    program = compiled(load_model(path).program)
    keys = np.arange(program.domain, dtype=np.int64)
    values = program.values(keys)
    env = program.env(values)
    signature = program.guard_signature(values, env, keys)
    assert signature.dtype == np.uint64 and signature.shape == (program.domain, 1)
    for c, command in enumerate(program.commands):  # each guard on its own (compiled, evaluated directly)
        want = program.evaluate(command.guard, env, len(values))
        assert np.array_equal((signature[:, 0] >> np.uint64(c)) & np.uint64(1), want.astype(np.uint64)), command.name
    assert not (signature >> np.uint64(len(program.commands))).any()
    assert len(np.unique(signature)) > 8  # the guards do tell the valuations apart


def test_guard_signature_of_more_than_63_commands_has_a_word_per_63(tmp_path):
    """Command i in bit i % 63 of word i // 63 (bit 63 of every word clear: a caller's flag)."""
    path = tmp_path / "many.prism"
    path.write_text(
        "mdp\nmodule m\n  x : [0..199] init 0;\n"
        + "".join(f"  [] x>={i} -> (x'=min(x+1, 199));\n" for i in range(130))
        + "endmodule\n"
    )
    program = compiled(load_model(path).program)
    keys = np.arange(program.domain, dtype=np.int64)
    values = program.values(keys)
    signature = program.guard_signature(values, program.env(values), keys)
    assert signature.shape == (200, 3)
    x = values[:, 0]
    for c in range(130):
        got = (signature[:, c // 63] >> np.uint64(c % 63)) & np.uint64(1)
        assert np.array_equal(got, (x >= c).astype(np.uint64)), c
    assert not (signature >> np.uint64(63)).any()
    assert not (signature[:, 2] >> np.uint64(130 - 126)).any()


@pytest.mark.parametrize("span_domain", [1 << 16, 0], ids=["read-from-the-signature", "per-command-tables"])
@pytest.mark.parametrize("which", ["small", "130-commands"])
def test_guards_matrix_is_each_commands_guard_whichever_tables_serve_it(tmp_path, monkeypatch, span_domain, which):
    """CompiledProgram.guards (what enabled() reads) is read from the signature's tables when they hold every guard, and
    from per-command tables otherwise (SPAN_DOMAIN 0: every guard is direct): either way, row r is the guard of command
    order[r] on every valuation, evaluated here on its own."""
    import rlverify.models.program_tables as tables_module

    monkeypatch.setattr(tables_module, "SPAN_DOMAIN", span_domain)
    path = tmp_path / "p.prism"
    many = "mdp\nmodule m\n  x : [0..199] init 0;\n" + "".join(
        f"  [{'ab'[i % 2]}] x>={i} -> (x'=min(x+1, 199));\n" for i in range(130)
    )
    path.write_text(PROGRAM if which == "small" else many + "endmodule\n")
    program = compiled(load_model(path).program)
    assert bool(program.guard_signature(program.initial, program.env(program.initial), program.keys(program.initial)).size)
    assert (not program._signature.direct) == (span_domain > 0)  # the path this case is for
    keys = np.arange(program.domain, dtype=np.int64)
    values = program.values(keys)
    env = program.env(values)
    got = program.guards(values, env)
    order = program._structure.order
    assert got.dtype == bool and got.shape == (len(program.commands), len(values))
    for r, c in enumerate(order):
        assert np.array_equal(got[r], program.evaluate(program.commands[c].guard, env, len(values))), (r, c)
    assert got.any(axis=1).sum() >= len(program.commands) - 1  # only 'false' never holds
