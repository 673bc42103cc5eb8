"""rlverify.files: every writer, on a real full file system (a tiny tmpfs), exits 2 in one line and leaves nothing."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path

import pytest

from rlverify.files import FileWriteError, all_or_nothing, write_text
from tests.incli import cli, one_line


def _mount(where: Path, size: str) -> None:
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs of a few KB needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here ({done.stderr.strip()})")


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """An empty 4 KB tmpfs (one page): a file of a few hundred bytes fits, a second one does not."""
    where = tmp_path / "fs"
    _mount(where, "4k")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def full_fs(tiny_fs: Path) -> Path:
    """The tmpfs filled up to its last byte, with an empty directory ``out`` to write into."""
    (tiny_fs / "out").mkdir()
    with contextlib.suppress(OSError), open(tiny_fs / "filler", "wb", buffering=0) as f:
        while True:
            f.write(b"x" * 512)
    with pytest.raises(OSError) as full:
        (tiny_fs / "probe").write_bytes(b"x")
    assert full.value.errno == errno.ENOSPC
    (tiny_fs / "probe").unlink(missing_ok=True)
    return tiny_fs / "out"


#: a small risk map (a 2x2 Avoid; the 4x4 policy reads its features)
MAP = ["avoid-v1", "-c", "xMax=2,yMax=2", "--policy", "POLICY", "-p", "collision-100", "--map", "x,y", "--optimum", "min"]
#: each writer of the CLI: (arguments with OUT for the output directory); a figure, table, chain, shield, tree, ...
WRITERS = {
    "verify-states-csv": ["verify", "running-example-v1", "-p", "reach-goal", "--out", "OUT/states.csv"],
    "verify-states-npz": ["verify", "running-example-v1", "-p", "reach-goal", "--out", "OUT/states.npz"],
    "verify-result-json": ["verify", "running-example-v1", "-p", "reach-goal", "--out", "OUT/result.json"],
    "verify-export-drn": ["verify", "running-example-v1", "-p", "reach-goal", "--export", "OUT/chain.drn"],
    "verify-export-dot": ["verify", "running-example-v1", "-p", "reach-goal", "--export", "OUT/chain.dot"],
    "verify-chain-dir": ["verify", "avoid-v1", "-p", "collision", "--strategy", "merged", "--chain-dir", "OUT/c"],
    "verify-paths-png": ["verify", "avoid-v1", "-p", "collision", "--explain", "2", "--out", "OUT/paths.png"],
    "shield-json": ["shield", "running-example-v1", "-p", 'P>=0.5 [F "goal"]', "--threshold", "0.1", "--out", "OUT/s.json"],
    "explain-tree-json": ["explain", "running-example-v1", "-p", "reach-goal", "--parts", "tree", "--save-tree", "OUT/t.json"],
    "explain-features-png": ["explain", "running-example-v1", "-p", "reach-goal", "--parts", "features", "--out", "OUT/f.png"],
    "report-html": ["report", "running-example-v1", "-p", "reach-goal", "--out", "OUT/r.html"],
    "inspect-template-py": ["inspect", "running-example-v1", "--policy-template", "OUT/t.py"],
    "examples-dir": ["examples", "OUT/ex"],
    "heatmap-png-json": ["heatmap", "racetrack-barto-small-v1", "--runs", "2", "--out", "OUT/h.png", "--out", "OUT/h.json"],
    "map-png": ["map", *MAP, "--out", "OUT/m.png"],
    "map-json": ["map", *MAP, "--out", "OUT/m.json"],
}
SLOW = {"heatmap-png-json", "report-html"}


@pytest.mark.parametrize(
    "writer", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW else k for k in WRITERS], ids=lambda k: k
)
def test_a_full_disk_leaves_nothing(writer: str, full_fs: Path, capsys, monkeypatch) -> None:
    """On a full file system each writer exits 2 with one line naming the file and the cause; the directory stays
    empty (no target, no temporary, no directory it made)."""
    from rlverify.benchmarks.registry import data_path

    policy = str(data_path("policies/avoid_4x4_ppo.onnx"))
    args = [a.replace("OUT", str(full_fs)).replace("POLICY", policy) for a in WRITERS[writer]]
    monkeypatch.chdir(full_fs.parent.parent)
    code, _, err = cli(capsys, *args)
    line = one_line("\n".join(ln for ln in err.splitlines() if not ln.startswith("warning: ")))
    assert code == 2, err
    if "--out" in args:  # the option is named, as every command names it (map's figure did not)
        assert line.startswith("error: --out "), line
    assert str(full_fs) in line and ("no space left on device" in line or "disk is nearly full" in line or "disk full" in line)
    assert sorted(os.listdir(full_fs)) == []


def test_the_onnx_writer_on_a_full_disk_leaves_nothing(full_fs: Path) -> None:
    from rlverify.policies.mlp import MLP, save_mlp_onnx

    with pytest.raises(FileWriteError, match="no space left on device"):
        save_mlp_onnx(full_fs / "p.onnx", MLP.random([2, 4, 2], seed=0), features=["a", "b"], actions=["l", "r"])
    assert os.listdir(full_fs) == []


def test_the_onnx_writer_replaces_a_file_only_with_force(tmp_path: Path) -> None:
    from rlverify.policies.mlp import MLP, save_mlp_onnx

    (tmp_path / "p.onnx").write_text("mine")
    with pytest.raises(FileWriteError, match="file exists; pass force=True"):
        save_mlp_onnx(tmp_path / "p.onnx", MLP.random([2, 4, 2], seed=0), features=["a", "b"], actions=["l", "r"])
    assert (tmp_path / "p.onnx").read_text() == "mine"


def test_a_command_that_fails_at_its_second_file_takes_back_the_first(tiny_fs: Path, capsys) -> None:
    """The CSV fits the 4 KB file system, the JSON does not: the command says nothing was written, and nothing is
    (the CSV and the directories made for it were left behind before)."""
    code, _, err = cli(
        capsys, "verify", "running-example-v1", "-p", "reach-goal", "--out", f"{tiny_fs}/a/b/states.csv", "--out",
        f"{tiny_fs}/result.json",
    )  # fmt: skip
    assert code == 2 and "result.json: cannot write the file (no space left on device); nothing was written" in one_line(err)
    assert os.listdir(tiny_fs) == []


def test_examples_that_do_not_all_fit_are_not_copied_at_all(tiny_fs: Path, capsys) -> None:
    """The first example file fits the 4 KB file system, the second does not: none stays (the first did)."""
    code, _, err = cli(capsys, "examples", f"{tiny_fs}/ex")
    assert code == 2 and "cannot write the file (no space left on device); nothing was written" in one_line(err)
    assert os.listdir(tiny_fs) == []


def test_all_or_nothing_restores_a_file_replaced_with_force(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("the user's")
    with pytest.raises(RuntimeError), all_or_nothing():
        write_text(tmp_path / "old.txt", "new", force=True)
        write_text(tmp_path / "sub" / "new.txt", "new")
        assert (tmp_path / "old.txt").read_text() == "new"
        raise RuntimeError("a later step fails")
    assert (tmp_path / "old.txt").read_text() == "the user's"
    assert sorted(os.listdir(tmp_path)) == ["old.txt"]  # no backup, no new file, no directory made for it


def test_all_or_nothing_keeps_what_a_successful_block_wrote(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("the user's")
    with all_or_nothing():
        with all_or_nothing():
            write_text(tmp_path / "old.txt", "new", force=True)
        write_text(tmp_path / "b.txt", "b")
    assert (tmp_path / "old.txt").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["b.txt", "old.txt"]


def test_all_or_nothing_leaves_a_file_someone_else_put_there_meanwhile(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), all_or_nothing():
        write_text(tmp_path / "a.txt", "ours")
        (tmp_path / "a.txt").unlink()
        (tmp_path / "a.txt").write_text("theirs")
        raise RuntimeError
    assert (tmp_path / "a.txt").read_text() == "theirs"


def test_a_chain_directory_is_taken_back_when_the_command_fails_after_it(tmp_path: Path, capsys, monkeypatch) -> None:
    """``--chain-dir`` is written (outside publishing(): its six files fill a 24 KB tmpfs, a page each); the JSON
    then finds the disk full: the chain's files and the directory made for them go too."""
    from rlverify.exact import ondisk

    fs = tmp_path / "fs"
    _mount(fs, "24k")
    try:
        monkeypatch.setattr(ondisk, "RESERVE", 0)  # no 1 GB kept free on a 24 KB file system
        code, _, err = cli(
            capsys, "verify", "running-example-v1", "-p", "reach-goal", "--strategy", "merged", "--chain-dir",
            f"{fs}/c/d", "--out", f"{fs}/result.json",
        )  # fmt: skip
        assert code == 2 and "result.json: cannot write the file (no space left on device)" in one_line(err)
        assert os.listdir(fs) == []
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=False)


def test_a_read_only_file_system_is_named_not_taken_for_a_permission(tmp_path: Path, capsys) -> None:
    """``--out`` on a read-only file system said "permission denied" (os.access refuses both alike): now it names it."""
    where = tmp_path / "ro"
    _mount(where, "4k")
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        for args in (
            ["verify", "running-example-v1", "-p", "reach-goal", "--out", str(where / "states.csv")],
            ["shield", "running-example-v1", "-p", 'P>=0.5 [F "goal"]', "--threshold", "0.1", "--out", str(where / "s.json")],
        ):
            code, _out, err = cli(capsys, *args)
            line = one_line(err)
            assert code == 2 and f"--out {where}" in line and "(read-only file system)" in line, line
        with pytest.raises(FileWriteError, match=r"\(read-only file system\)"):
            write_text(where / "x.txt", "x")
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
