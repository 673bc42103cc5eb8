"""The policy's chain on disk (``--chain-dir``, exact/ondisk.py): the same values, bit for bit, as in memory; refusals."""

from __future__ import annotations

import json
import re
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
from rlverify.exact.bounded import bounded_until, ranks
from rlverify.exact.ondisk import ChainWriter, block_ranks, prepare, unbounded_until
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
    from rlverify.models.property_parser import parse_property

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
    path.write_text(UP_STAY + 'rewards "steps"\n  true : 1;\nendrewards\n')  # R=? reaches --chain-dir's own refusal
    return str(path)


def test_cli_on_disk_equals_in_memory(capsys, tmp_path, model_file, policy_file):
    prop = 'P=? [F<=3 "top"]'
    code, mem = _cli(capsys, model_file, "-p", prop, "--policy", policy_file, "--json")
    assert code == 0
    code, disk = _cli(capsys, model_file, "-p", prop, "--policy", policy_file, "--json", "--chain-dir", str(tmp_path / "d"))
    assert code == 0
    assert (
        json.loads(disk)["result"]["value"] == json.loads(mem)["result"]["value"] == 0.9**3 * 0.5**3
    )  # up 3 times, each moving w.p. 1/2
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
        (lambda d: None, ["-p", 'P=? [G "top"]'], r"reachability only .*not 'P=\? \[G"),
        (lambda d: None, ["-p", 'R=? [F "top"]'], r"reachability only .*not 'R=\? \[F"),
        (lambda d: None, ["--numerics", "fast"], "reachability only.*--numerics fast"),
        (lambda d: None, ["--mode", "monolithic"], "monolithic"),
        (lambda d: None, ["-p", "P=? [F<=5 x>3]"], "stalls.*--unavailable renormalize"),  # 'up' at x = 3
    ],
    ids=["not-empty", "a-file", "unwritable", "strategy-full", "globally", "reward", "numerics-fast", "monolithic", "stalled"],
)
def test_cli_refusals(capsys, tmp_path, model_file, policy_file, setup, extra, expected):
    import re

    d = tmp_path / "d"
    setup(d)
    if "--chain-dir-under-file" in extra:  # a directory below a file cannot be made
        extra, d = [], tmp_path / "f" / "sub"
    if "-p" in extra:  # the case's property instead of the default one (-p twice would check both)
        i = extra.index("-p")
        prop, extra = extra[i + 1], extra[:i] + extra[i + 2 :]
    else:
        prop = 'P=? [F<=3 "top"]'
    args = [model_file, "-p", prop, "--policy", policy_file, "--chain-dir", str(d), *extra]
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
        verify_exact(model, "P=? [F<=5 COLLISION=true]", policy, ExactOptions(chain_dir=str(tmp_path / "c" / "d")))
    assert list(tmp_path.iterdir()) == []  # the temporary subdirectory and the directories made for it are gone
    (tmp_path / "mine").mkdir()  # a directory the user made stays
    with pytest.raises(MemoryBudgetError):
        verify_exact(model, "P=? [F<=5 COLLISION=true]", policy, ExactOptions(chain_dir=str(tmp_path / "mine")))
    assert [p.name for p in tmp_path.iterdir()] == ["mine"] and list((tmp_path / "mine").iterdir()) == []


# ---------------------------------------------------------------------------------------------
# unbounded reachability on disk (P=? [F phi], P=? [a U b], thresholds): graph analysis by passes + interval iteration
# The oracle: the chain read from its files by numpy here, a breadth-first graph analysis and np.linalg.solve of the
# maybe states' system (no rlverify code).


def _files_matrix(where: Path) -> np.ndarray:
    """The ``(n, n)`` dense matrix of a chain directory, decoded here from its files (module docstring's layout)."""
    indptr = np.fromfile(where / "indptr.i64", dtype=np.int64)
    vptr = np.fromfile(where / "vptr.i64", dtype=np.int64)
    indices = np.fromfile(where / "indices.i32", dtype=np.int32)
    codes = np.fromfile(where / "codes.u8", dtype=np.uint8)
    table = np.fromfile(where / "values.f64")
    n = len(indptr) - 1
    P = np.zeros((n, n))
    for r in range(n):
        a, b = indptr[r], indptr[r + 1]
        whole = vptr[r + 1] - vptr[r] > 256  # a row stored whole: its values in column order
        vals = table[vptr[r] : vptr[r + 1]] if whole else table[vptr[r] + codes[a:b].astype(np.int64)]
        P[r, indices[a:b]] = vals
    return P


def _brute(P: np.ndarray, phi: np.ndarray, psi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(no, yes, x)``: prob0 / prob1 states by breadth-first search backwards, ``x`` ``(n,)`` P(phi U psi) by
    np.linalg.solve on the other states."""

    before = np.ascontiguousarray(P.T > 0)  # before[t, s]: s -> t is a positive transition

    def backward(seeds: np.ndarray, through: np.ndarray) -> np.ndarray:
        found, frontier = seeds.copy(), list(np.flatnonzero(seeds))
        while frontier:
            t = frontier.pop()
            for s in np.flatnonzero(before[t]):
                if through[s] and not found[s]:
                    found[s] = True
                    frontier.append(s)
        return found

    go = phi & ~psi
    no = ~backward(psi, go)
    yes = ~backward(no, go)
    maybe = ~no & ~yes
    x = yes.astype(float)
    A = P[np.ix_(maybe, maybe)]
    b = P[np.ix_(maybe, yes)].sum(axis=1)
    x[maybe] = np.linalg.solve(np.eye(int(maybe.sum())) - A, b)
    return no, yes, x


@settings(max_examples=40, deadline=None)
@given(chains(), st.integers(0, 11))
def test_unbounded_on_generated_chains(tmp_path_factory, case, start):
    P, phi, psi, _ = case
    init = start % P.shape[0]
    blocks = _write(tmp_path_factory.mktemp("u"), P)
    blocks = ondisk.RowBlocks(blocks.where, blocks.indptr, blocks.vptr, block=3)
    dense = _files_matrix(blocks.where)
    assert np.array_equal(dense, P.toarray())
    no, yes, x = _brute(dense, phi, psi)
    graph = ondisk._graph(blocks, phi, psi, None)
    assert graph.complete and np.array_equal(graph.no, no) and np.array_equal(graph.yes, yes)
    out = unbounded_until(blocks, phi, psi, init, precision=1e-9, max_work=None)
    assert out.method == "interval iteration over the chain on disk"
    assert (out.zero, out.one) == (bool(no[init]), bool(yes[init]))
    if no[init] or yes[init]:
        assert out.value == out.lower == out.upper == float(yes[init]) and "exact" in out.note
        return
    assert out.lower <= x[init] * (1 + 1e-12) and x[init] * (1 - 1e-12) <= out.upper  # np.linalg.solve's own error
    if out.warning is None:  # within the precision (a rounded fixed point short of it says so)
        assert out.upper - out.lower <= 1e-9 * out.lower * 2 and abs(out.value - x[init]) <= 1e-9 * x[init] + 1e-15
    assert (out.lowers <= out.uppers).all() and (out.lowers[~np.isnan(out.values)] <= out.values[~np.isnan(out.values)]).all()


def _avoid_disk(tmp_path: Path, prop: str, **kw):
    model, policy = _avoid(3)
    disk = verify_exact(model, prop, policy, ExactOptions(all_states=True, chain_dir=str(tmp_path / "c"), **kw))
    names = list(disk.variables)
    val = {v: disk.state_valuations[:, names.index(v)] for v in names}
    collision = ((val["obstacle1_x"] == val["x"]) & (val["obstacle1_y"] == val["y"])) | (
        (val["obstacle2_x"] == val["x"]) & (val["obstacle2_y"] == val["y"])
    )
    return disk, _files_matrix(tmp_path / "c"), val, collision


def test_avoid_unbounded_until_on_disk_against_numpy(tmp_path):
    disk, P, val, collision = _avoid_disk(tmp_path, "P=? [!COLLISION U x=3]")
    no, yes, x = _brute(P, ~collision, val["x"] == 3)
    init = 0  # the initial state is explored first
    assert (val["x"][init], val["y"][init]) == (0, 0)
    assert disk.lower <= x[init] <= disk.upper and disk.upper - disk.lower <= 2e-6 * disk.lower
    assert abs(disk.value - x[init]) <= 1e-6 * x[init] and disk.warnings == []
    assert disk.method == "interval iteration over the chain on disk"
    assert re.search(
        rf"graph analysis in \d+ \+ \d+ passes .*{int(yes.sum())} states 1, {int(no.sum())} states 0", disk.precision_note
    )
    assert re.search(r"\d+ interval-iteration steps", disk.precision_note)
    maybe = ~no & ~yes
    assert np.array_equal(disk.state_values[no], np.zeros(int(no.sum()))) and (disk.state_values[yes] == 1).all()
    assert np.allclose(disk.state_values[maybe], x[maybe], rtol=1e-4, atol=1e-12)  # only the initial state's is asked to 1e-6


def test_avoid_threshold_at_the_value_is_undecided(tmp_path):
    _, P, val, collision = _avoid_disk(tmp_path / "a", "P=? [!COLLISION U x=3]")
    x = float(_brute(P, ~collision, val["x"] == 3)[2][0])
    at, _, _, _ = _avoid_disk(tmp_path / "b", f"P<={x!r} [!COLLISION U x=3]")  # the bracket contains the bound
    assert at.lower <= x <= at.upper and at.satisfied is None and any("undecided" in w for w in at.warnings), at.warnings


def _running(tmp_path: Path, prop: str, **kw):
    built = make("running-example-v1")
    return verify_exact(built.model(), prop, built.load_policy(), ExactOptions(all_states=True, chain_dir=str(tmp_path), **kw))


def test_running_example_thresholds_decided_by_the_bracket_only(tmp_path):
    first = _running(tmp_path / "a", 'P=? [x<3 U "goal"]')
    x_of = first.state_valuations[:, 0]
    x = float(_brute(_files_matrix(tmp_path / "a"), x_of < 3, x_of == 4)[2][0])
    assert 0 < x < 1 and first.lower <= x <= first.upper and abs(first.value - x) <= 1e-6 * x
    for name, bound, expected in [("below", x * (1 - 1e-4), False), ("above", x * (1 + 1e-4), True), ("at", x, None)]:
        got = _running(tmp_path / name, f'P<={bound!r} [x<3 U "goal"]')
        assert got.satisfied is expected, (name, got.lower, got.upper, bound)
        assert (expected is None) == any("undecided" in w for w in got.warnings)
    assert _running(tmp_path / "pos", 'P>0 [x<3 U "goal"]').satisfied is True  # the graph facts: reachable
    assert _running(tmp_path / "one", 'P>=1 [x<3 U "goal"]').satisfied is False  # and not surely


def test_avoid_unbounded_budget_exhausted_returns_the_bracket(tmp_path):
    # Avoid 3x3 has ~1.6e5 transitions: a budget of 3e6 multiply-adds is ~18 passes over the files
    disk, P, val, collision = _avoid_disk(tmp_path, "P=? [!COLLISION U x=3]", max_work=3_000_000)
    x = _brute(P, ~collision, val["x"] == 3)[2][0]
    assert disk.lower <= x <= disk.upper and disk.upper - disk.lower > 1e-6 * disk.lower
    (warning,) = [w for w in disk.warnings if "not reached" in w]
    assert "--max-work" in warning and f"[{disk.lower:.12g}, {disk.upper:.12g}]" in warning


def test_graph_passes_budget_exhausted_keeps_a_sound_bracket(tmp_path):
    # a line 0 -> 1 -> ... -> 9 (target), each step 1/2 forward, 1/2 to the trap 10: one pass per block (one row
    # each, last first) finds the whole line at once, so rows in reverse order need many passes
    n = 11
    P = np.zeros((n, n))
    for s in range(9):
        P[s, s + 1] = P[s, 10] = 0.5
    P[9, 9] = P[10, 10] = 1.0
    order = np.r_[9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 10]  # state i is stored as row where(order == i)
    perm = np.argsort(order)
    Q = sp.csr_matrix(P[np.ix_(order, order)])
    blocks = _write(tmp_path, Q)
    blocks = ondisk.RowBlocks(blocks.where, blocks.indptr, blocks.vptr, block=1)
    psi, phi = np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
    psi[perm[9]] = True
    init = int(perm[0])
    full = unbounded_until(blocks, phi, psi, init, precision=1e-12, max_work=None)
    assert full.lower <= 0.5**9 <= full.upper and full.warning is None and full.note.startswith("graph analysis in 10 + ")
    cut = unbounded_until(blocks, phi, psi, init, precision=1e-12, max_work=3 * Q.nnz)
    assert cut.lower <= 0.5**9 <= cut.upper and cut.zero is None and cut.one is None
    assert "did not finish within --max-work" in cut.warning and "incomplete" in cut.note


def test_cli_unbounded_on_disk(capsys, tmp_path, model_file, policy_file):
    prop = 'P=? [F "top"]'
    code, mem = _cli(capsys, model_file, "-p", prop, "--policy", policy_file, "--json")
    assert code == 0
    code, disk = _cli(capsys, model_file, "-p", prop, "--policy", policy_file, "--json", "--chain-dir", str(tmp_path / "d"))
    assert code == 0
    mem_json, disk_json = json.loads(mem)["result"], json.loads(disk)["result"]
    assert disk_json["method"] == "interval iteration over the chain on disk"
    assert disk_json["value"] == mem_json["value"] == 1.0  # 'up' (0.9) moves w.p. 1/2: x = 3 is reached surely
    assert "exact: the initial state is decided by the graph analysis" in disk_json["precision_note"]
