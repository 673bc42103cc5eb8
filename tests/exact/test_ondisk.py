"""The policy's chain on disk (``--chain-dir``, exact/ondisk.py): the same values, bit for bit, as in memory; refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks import make
from rlverify.cli.main import main
from rlverify.exact import ondisk
from rlverify.exact.checking import bounded_until, ranks
from rlverify.exact.ondisk import ChainWriter, block_ranks, prepare
from rlverify.policies import MLP, CallablePolicy

WEATHER = Path(__file__).resolve().parents[1] / "models" / "data" / "weather.jani"


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of ~500 transitions: many blocks even on small chains."""
    monkeypatch.setattr(ondisk, "BLOCK_ENTRIES", 500)


def _avoid(n: int):
    import rlverify.benchmarks.avoid as avoid

    model = make("avoid-v1", xMax=n, yMax=n, slickness=0.1).model()
    net = MLP.random((len(model.variables), 16, len(avoid.MOVES)), seed=1)
    scale = np.array([1.0 if v == "done" else 1.0 / n for v in model.variables])
    policy = CallablePolicy(lambda x: net(x * scale), model.variables, list(avoid.MOVES), output="logits")
    return model, policy


def _both(model, prop, policy, tmp_path: Path, **kw):
    from rlverify.models.symbolic import parse_property

    p = parse_property(model, prop, fixed_policy=True)
    mem = verify_exact(model, p, policy, ExactOptions(all_states=True, **kw))
    disk = verify_exact(model, p, policy, ExactOptions(all_states=True, chain_dir=str(tmp_path / "chain"), **kw))
    return mem, disk


@pytest.mark.parametrize(
    "prop",
    [
        "P=? [F<=40 COLLISION=true]",
        "P=? [F<=3 COLLISION=true]",
        "P=? [F<=0 COLLISION=true]",  # exactly 0: the graph facts by passes over the blocks
        "P=? [!COLLISION U<=6 x=0]",
        "P>=0.5 [F<=40 COLLISION=true]",
    ],
)
def test_avoid_on_disk_equals_in_memory_bit_for_bit(prop, tmp_path, small_blocks):
    model, policy = _avoid(3)
    mem, disk = _both(model, prop, policy, tmp_path)
    assert disk.value == mem.value and (disk.lower, disk.upper) == (mem.lower, mem.upper)
    assert np.array_equal(disk.state_values, mem.state_values)
    assert (disk.satisfied, disk.precision_note, disk.transitions, disk.states) == (
        mem.satisfied,
        mem.precision_note,
        mem.transitions,
        mem.states,
    )
    meta = json.loads((tmp_path / "chain" / "chain.json").read_text())
    assert meta["transitions"] == mem.transitions and sorted(p.name for p in (tmp_path / "chain").iterdir()) == sorted(
        ondisk.FILES
    )


def test_running_example_on_disk(tmp_path, small_blocks):
    built = make("running-example-v1")
    mem, disk = _both(built.model(), 'P=? [F<=4 "goal"]', built.load_policy(), tmp_path)
    assert disk.value == mem.value and np.array_equal(disk.state_values, mem.state_values)


def _write(tmp_path: Path, P: sp.csr_matrix, name: str = "c") -> ondisk.RowBlocks:
    """``P`` written as a chain directory (one batch per 3 rows), read back."""
    writer = ChainWriter(*prepare(tmp_path / name))
    for lo in range(0, P.shape[0], 3):
        part = P[lo : lo + 3].tocoo()
        order = np.argsort(part.row, kind="stable")
        writer.append(part.row[order], part.col[order].astype(np.int32), part.data[order], part.shape[0])
    return writer.finish(P.shape[0], stalled=False)


@st.composite
def chains(draw):
    n = draw(st.integers(2, 12))
    rows, cols, vals = [], [], []
    for s in range(n):
        succ = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4, unique=True))
        w = np.array(draw(st.lists(st.integers(1, 9), min_size=len(succ), max_size=len(succ))), dtype=float)
        rows += [s] * len(succ)
        cols += sorted(succ)
        vals += list((w / w.sum())[np.argsort(succ)])
    P = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    psi = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    phi = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return P, phi, psi, draw(st.integers(0, 6))


@settings(max_examples=40, deadline=None)
@given(chains())
def test_generated_chains(tmp_path_factory, case):
    P, phi, psi, k = case
    blocks = _write(tmp_path_factory.mktemp("g"), P)
    blocks = ondisk.RowBlocks(blocks.where, blocks.indptr, blocks.vptr, block=3)  # a few rows per block
    x = np.random.default_rng(0).random(P.shape[0])
    assert np.array_equal(blocks @ x, P @ x)
    pos, sure = block_ranks(blocks, phi, psi, k)
    assert np.array_equal(pos, ranks(P, None, phi, psi, all_choices=False, all_successors=False, limit=k))
    assert np.array_equal(sure, ranks(P, None, phi, psi, all_choices=False, all_successors=True, limit=k))
    for init in range(P.shape[0]):
        a, b = bounded_until(P, phi, psi, k, init), bounded_until(blocks, phi, psi, k, init)
        assert (a.value, a.lower, a.upper, a.zero, a.one) == (b.value, b.lower, b.upper, b.zero, b.one)
        assert np.array_equal(a.values, b.values)
    # an independent computation: k dense steps of x <- psi + (phi & ~psi) * P x
    v = psi.astype(float)
    for _ in range(k):
        v = psi + (phi & ~psi) * (P.toarray() @ v)
    assert np.allclose(b.values, v, rtol=1e-12, atol=0)


def _cli(capsys, *args: str) -> tuple[int, str]:
    code = main(["verify", *args])
    out = capsys.readouterr()
    return code, (out.out + out.err).strip()


@pytest.fixture
def policy_file(tmp_path: Path) -> str:
    path = tmp_path / "p.py"
    path.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(s):\n    return np.tile([0.9, 0.1], (len(s), 1))\n"
    )
    return f"{path}:pi"


@pytest.fixture
def model_file(tmp_path: Path) -> str:
    from tests.small_models import UP_STAY

    path = tmp_path / "m.prism"
    path.write_text(UP_STAY)
    return str(path)


def test_cli_on_disk_equals_in_memory(capsys, tmp_path, model_file, policy_file):
    prop = 'P=? [F<=3 "top"]'
    code, mem = _cli(capsys, model_file, "-p", prop, "--policy", policy_file, "--json")
    assert code == 0
    code, disk = _cli(capsys, model_file, "-p", prop, "--policy", policy_file, "--json", "--chain-dir", str(tmp_path / "d"))
    assert code == 0
    assert json.loads(disk)["value"] == json.loads(mem)["value"] == 0.9**3 * 0.5**3  # up 3 times, each moving w.p. 1/2
    # a second run into the same directory: refused without --force, replaces only the chain's files with it
    code, out = _cli(capsys, model_file, "-p", prop, "--policy", policy_file, "--chain-dir", str(tmp_path / "d"))
    assert code == 2 and "not empty" in out and "--force" in out and len(out.splitlines()) == 1
    code, out = _cli(capsys, model_file, "-p", prop, "--policy", policy_file, "--chain-dir", str(tmp_path / "d"), "--force")
    assert code == 0


@pytest.mark.parametrize(
    ("setup", "extra", "expected"),
    [
        (lambda d: (d.mkdir(), (d / "notes.txt").write_text("mine")), [], r"not empty \(notes\.txt\)"),
        (lambda d: d.write_text("a file"), [], "is not a directory"),
        (lambda d: (d.parent / "f").write_text("x"), ["--chain-dir-under-file"], "cannot write there"),
        (lambda d: None, ["--strategy", "full"], "needs the merged strategy.*--strategy full"),
        (lambda d: None, ["-p", 'P=? [F "top"]'], "step-bounded reachability only"),
        (lambda d: None, ["--numerics", "fast"], "step-bounded reachability only"),
        (lambda d: None, ["--mode", "monolithic"], "monolithic"),
        (lambda d: None, ["-p", "P=? [F<=5 x>3]"], "stalls.*--unavailable renormalize"),  # 'up' at x = 3
    ],
    ids=["not-empty", "a-file", "unwritable", "strategy-full", "unbounded", "numerics-fast", "monolithic", "stalled"],
)
def test_cli_refusals(capsys, tmp_path, model_file, policy_file, setup, extra, expected):
    import re

    d = tmp_path / "d"
    setup(d)
    if "--chain-dir-under-file" in extra:  # a directory below a file cannot be made
        extra, d = [], tmp_path / "f" / "sub"
    args = [model_file, "-p", 'P=? [F<=3 "top"]', "--policy", policy_file, "--chain-dir", str(d), *extra]
    if "monolithic" in extra:
        args.remove("--policy")
        args.remove(policy_file)
        args[2] = 'Pmax=? [F<=3 "top"]'
    code, out = _cli(capsys, *args)
    assert code == 2 and len(out.splitlines()) == 1 and re.search(expected, out), out
    if d.is_dir():
        assert [p.name for p in d.iterdir() if p.name.startswith(".rlverify")] == []  # no temporary left behind


def test_cli_refuses_jani(capsys, tmp_path):
    policy = Path(__file__).resolve().parents[1] / "models" / "data" / "weather_policy.py"
    code, out = _cli(
        capsys, str(WEATHER), "-p", "P=? [F<=3 true]", "--policy", f"{policy}:pi", "--chain-dir", str(tmp_path / "d")
    )
    assert code == 2 and len(out.splitlines()) == 1 and "JANI" in out, out


def test_stalled_sink_is_the_last_column_and_row(tmp_path):
    # row 0: 0.5 to state 1, 0.5 stalled (-1); row 1: itself. The sink is state 2, written last in row 0.
    writer = ChainWriter(*prepare(tmp_path / "c"))
    writer.append(np.array([0, 0, 1]), np.array([-1, 1, 1], dtype=np.int32), np.array([0.5, 0.5, 1.0]), 2)
    blocks = writer.finish(2, stalled=True)
    expected = sp.csr_matrix(np.array([[0, 0.5, 0.5], [0, 1, 0], [0, 0, 1]]))
    assert np.fromfile(tmp_path / "c" / "indices.i32", dtype=np.int32).tolist() == [1, -1, 1, 2]
    assert np.fromfile(tmp_path / "c" / "values.f64").tolist() == [0.5, 1.0, 1.0]  # row tables: {0.5}, {1}, {1}
    x = np.array([0.25, 0.5, 1.0])
    assert np.array_equal(blocks @ x, expected @ x)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 600), st.integers(1, 400)), min_size=1, max_size=6),
    st.integers(0, 2**32 - 1),
)
def test_compression_round_trip(rows, seed):
    """Rows of ``length`` transitions drawing from ``pool`` distinct values: rows above 256 distinct values are
    stored whole; every value comes back bit for bit."""
    rng = np.random.default_rng(seed)
    parts = [rng.choice(rng.random(pool) / length, size=length) for length, pool in rows]
    ptr = np.r_[0, np.cumsum([len(p) for p in parts])].astype(np.int32)
    data = np.concatenate(parts)
    codes, table, table_lengths = ondisk.encode(ptr, data)
    tptr = np.r_[0, np.cumsum(table_lengths)]
    out = ondisk.decode(ptr, codes, table, tptr, np.empty_like(data))
    assert np.array_equal(out.view(np.int64), data.view(np.int64))
    assert len(table) == sum(len(np.unique(p)) if len(np.unique(p)) <= 256 else len(p) for p in parts)


def test_a_full_disk_stops_the_exploration_and_cleans_up(tmp_path, monkeypatch):
    from collections import namedtuple

    from rlverify.errors import MemoryBudgetError

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(ondisk.shutil, "disk_usage", lambda path: usage(2**31, 2**31 - 2**29, 2**29))  # 0.5 GB free
    model, policy = _avoid(3)
    with pytest.raises(MemoryBudgetError, match=r"--chain-dir .*: the disk is nearly full after 0 transitions"):
        verify_exact(model, "P=? [F<=5 COLLISION=true]", policy, ExactOptions(chain_dir=str(tmp_path / "c")))
    assert list((tmp_path / "c").iterdir()) == []  # the temporary subdirectory is gone
