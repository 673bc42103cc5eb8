"""The policy's chain on disk (``--chain-dir``): its rows streamed to files as they are explored, read back in row
blocks for the checks, so the process holds memory per state (vectors, indptr, valuations, labels), not per transition.

Layout of a chain directory (written in a private temporary subdirectory, renamed in when complete):

* ``indices.i32``: int32 column of every transition, rows in state order, each row sorted by column (as the
  in-memory CSR after ``sort_indices``); -1 stands for the ``stalled`` sink (its index is known at the end only);
* ``data.f64``: float64 probability of every transition, same order;
* ``indptr.i64``: int64 ``(n+1,)`` row offsets; ``chain.json``: counts and the layout's version.

:class:`RowBlocks` is the matrix the checks read: ``@`` is scipy's CSR product on each row block (each row's sum in
the same order as on the whole matrix, so the values are bit-identical to the in-memory run), read with ordinary
reads into one reused buffer (no memory map whose pages the resident size would count).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import MemoryBudgetError, OptionError

__all__ = ["BLOCK_ENTRIES", "ChainWriter", "RowBlocks", "block_ranks", "prepare"]

#: transitions per row block read for a product (12 bytes each: ~50 MB of buffers)
BLOCK_ENTRIES = 1 << 22
#: the files a chain directory holds (``--force`` replaces these, never anything else)
FILES = ("indices.i32", "data.f64", "indptr.i64", "chain.json")
#: disk space kept free while writing (bytes)
RESERVE = 1 << 30
_SINK = -1


def prepare(path: str | os.PathLike[str], *, force: bool = False) -> tuple[Path, Path]:
    """``(directory, private temporary subdirectory)`` for a chain: the directory must be new or empty (``force``: it
    may hold the files of an earlier chain, which are replaced at the end; nothing else).

    Raises:
        OptionError: one line naming the cause (a file, not empty, not writable).
    """
    where = Path(path)
    if where.exists() and not where.is_dir():
        raise OptionError(f"--chain-dir {where}: exists and is not a directory; give a new or empty directory")
    if where.is_dir():
        others = sorted(p.name for p in where.iterdir() if not (force and p.name in FILES))
        if others:
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            raise OptionError(
                f"--chain-dir {where}: not empty ({shown}); give a new or empty directory"
                + ("" if force else " (--force replaces only an earlier chain's files)")
            )
    try:
        where.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".rlverify-chain-", dir=where))
    except OSError as exc:
        raise OptionError(f"--chain-dir {where}: cannot write there ({exc.strerror or exc})") from None
    return where, tmp


class ChainWriter:
    """Appends the merged rows of each batch to the chain files in a temporary subdirectory (:func:`prepare`)."""

    def __init__(self, where: Path, tmp: Path) -> None:
        self.where, self.tmp = where, tmp
        self.indices = open(tmp / "indices.i32", "wb")
        self.data = open(tmp / "data.f64", "wb")
        self.n = 0  # transitions written
        self.lengths: list[np.ndarray] = []

    def append(self, row: np.ndarray, target: np.ndarray, w: np.ndarray, B: int) -> None:
        """One batch: ``row`` ``(E,)`` its local row of each transition (sorted), ``target`` ``(E,)`` int32 (-1: the
        sink), ``w`` ``(E,)`` float64; each row is written sorted by column (the sink last)."""
        free = shutil.disk_usage(self.tmp).free
        need = 12 * len(w)
        if free - need < RESERVE:
            raise MemoryBudgetError(
                f"--chain-dir {self.where}: the disk is nearly full after {self.n:,} transitions "
                f"({free / 2**30:.1f} GB free, {RESERVE / 2**30:.0f} GB kept free); free disk space or use another "
                "directory",
                phase="explore",
                estimate=need,
                limit=free,
            )
        sums = np.bincount(row, weights=w, minlength=B)
        if np.abs(sums - 1.0).max(initial=0.0) > 1e-6:
            bad = int(np.argmax(np.abs(sums - 1.0)))
            raise AssertionError(f"internal: merged chain row {self.n}+{bad} sums to {sums[bad]!r}")
        import scipy.sparse as sp

        top = np.iinfo(np.int32).max  # the sink sorts last, as its index (the last) does in memory
        lengths = np.bincount(row, minlength=B).astype(np.int64)
        ptr = np.zeros(B + 1, dtype=np.int64)
        np.cumsum(lengths, out=ptr[1:])
        column = np.where(target == _SINK, top, target).astype(np.int32)
        part = sp.csr_matrix((np.asarray(w, dtype=np.float64), column, ptr.astype(np.int32)), shape=(B, top), copy=False)
        part.has_sorted_indices = False
        part.sort_indices()  # in place, per row: as the in-memory chain's sort_indices
        idx = part.indices
        idx[idx == top] = _SINK
        idx.tofile(self.indices)
        part.data.tofile(self.data)
        self.lengths.append(lengths)
        self.n += len(w)

    def finish(self, S: int, stalled: bool) -> RowBlocks:
        """The chain complete: ``S`` states (plus the sink when ``stalled``), renamed into the directory."""
        if stalled:  # the sink's self-loop, its last row
            np.array([S], dtype=np.int32).tofile(self.indices)
            np.array([1.0]).tofile(self.data)
            self.lengths.append(np.ones(1, dtype=np.int64))
            self.n += 1
        self.indices.close()
        self.data.close()
        n = S + int(stalled)
        indptr = np.zeros(n + 1, dtype=np.int64)
        if self.lengths:
            np.cumsum(np.concatenate(self.lengths), out=indptr[1:])
        self.lengths = []
        indptr.tofile(self.tmp / "indptr.i64")
        meta = {"version": 1, "states": n, "transitions": int(indptr[-1]), "sink": S if stalled else None}
        (self.tmp / "chain.json").write_text(json.dumps(meta) + "\n")
        for name in FILES:
            os.replace(self.tmp / name, self.where / name)
        self.tmp.rmdir()
        return RowBlocks(self.where, indptr, sink=S if stalled else None)

    def abort(self) -> None:
        """Remove the temporary subdirectory (an exploration that stopped)."""
        for f in (self.indices, self.data):
            f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class RowBlocks:
    """A chain's ``(n, n)`` transition matrix on disk, read in row blocks (the checks' matrix: ``@``, ``shape``,
    ``nnz``, ``indptr``, ``dtype``). ``indptr`` ``(n+1,)`` int64 is held in memory (8 bytes per state)."""

    def __init__(self, where: Path, indptr: np.ndarray, *, sink: int | None = None, block: int | None = None) -> None:
        block = BLOCK_ENTRIES if block is None else block
        self.where = where
        self.indptr = indptr
        self.shape = (len(indptr) - 1, len(indptr) - 1)
        self.nnz = int(indptr[-1])
        self.dtype = np.dtype(np.float64)
        self.sink = sink
        starts = [0]
        n = self.shape[0]
        while starts[-1] < n:  # rows up to ~block transitions per block (at least one row)
            r = int(np.searchsorted(indptr, indptr[starts[-1]] + block, side="right")) - 1
            starts.append(min(n, max(r, starts[-1] + 1)))
        self.starts = np.asarray(starts, dtype=np.int64)
        widest = int(np.diff(indptr[self.starts]).max(initial=0))
        self._idx = np.empty(widest, dtype=np.int32)
        self._val = np.empty(widest, dtype=np.float64)

    def blocks(self, *, reverse: bool = False) -> Any:
        """``(first row, CSR of the block's rows)`` for each block in order (``reverse``: last block first); the CSR's
        arrays are the reused buffers (valid until the next block is read)."""
        import scipy.sparse as sp

        with open(self.where / "indices.i32", "rb", buffering=0) as fi, open(self.where / "data.f64", "rb", buffering=0) as fd:
            pairs = list(zip(self.starts[:-1], self.starts[1:], strict=True))
            for r0, r1 in reversed(pairs) if reverse else pairs:
                a, b = int(self.indptr[r0]), int(self.indptr[r1])
                idx, val = self._idx[: b - a], self._val[: b - a]
                _read(fi, idx, 4 * a)
                _read(fd, val, 8 * a)
                if self.sink is not None:
                    idx[idx == _SINK] = self.sink
                ptr = (self.indptr[r0 : r1 + 1] - a).astype(np.int32)  # int32 like the indices: no upcast copy
                yield int(r0), sp.csr_matrix((val, idx, ptr), shape=(int(r1 - r0), self.shape[1]), copy=False)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """``(n,)``: the product with ``x`` ``(n,)``, row block by row block (scipy's CSR product on each)."""
        y = np.empty(self.shape[0], dtype=np.float64)
        for r0, part in self.blocks():
            y[r0 : r0 + part.shape[0]] = part @ x
        return y


def _read(f: Any, out: np.ndarray, offset: int) -> None:
    """Fill ``out`` from ``f`` at byte ``offset`` (ordinary reads into ``out``'s memory)."""
    view = out.data.cast("B")
    f.seek(offset)
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            raise OSError(f"{f.name}: the chain file ends early (at byte {offset + got})")
        got += n


def block_ranks(matrix: RowBlocks, phi: np.ndarray, psi: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """``(positive, surely)`` ``(n,)`` int64 step ranks of :func:`~rlverify.exact.checking.ranks` on a chain
    (``all_choices`` irrelevant; ``all_successors`` False, True), -1 above ``limit`` or never, computed by passes
    over the row blocks (no reversed graph).

    Each pass updates, in place, ``rank(s) = 1 + min`` (resp. ``max``) over ``s``'s positive successors for
    ``phi & ~psi`` states, from ``limit + 1`` (never) everywhere but ``psi`` (0). Values only decrease and stay
    above the true ranks; after ``j`` passes they are at most the ``j``-th Jacobi iterate, which is exact from
    ``limit + 1`` on: so at most ``limit + 2`` passes, fewer when a pass changes nothing (a fixed point below the
    exact ranks' is the exact ranks). Pure graph analysis: no floating point.
    """
    never = limit + 1
    go = np.asarray(phi, dtype=bool) & ~np.asarray(psi, dtype=bool)
    pos = np.where(psi, 0, never).astype(np.int64)
    sure = pos.copy()
    for _ in range(limit + 2):
        changed = False
        for r0, part in matrix.blocks(reverse=True):  # successors mostly come later (breadth-first order)
            r1 = r0 + part.shape[0]
            rows = np.flatnonzero(go[r0:r1])
            if not len(rows):
                continue
            keep = part.data > 0
            owner = np.repeat(np.arange(part.shape[0]), np.diff(part.indptr))[keep]
            cols = part.indices[keep]
            counts = np.bincount(owner, minlength=part.shape[0])
            some = counts > 0
            starts = (np.cumsum(counts) - counts)[some]
            best = np.full(part.shape[0], never, dtype=np.int64)
            worst = np.full(part.shape[0], never, dtype=np.int64)  # no positive successor: never surely
            if len(starts):
                best[some] = np.minimum.reduceat(pos[cols], starts)
                worst[some] = np.maximum.reduceat(sure[cols], starts)
            new_pos = np.minimum(pos[r0:r1], np.minimum(best + 1, never))
            new_sure = np.minimum(sure[r0:r1], np.minimum(worst + 1, never))
            at = r0 + rows
            if (new_pos[rows] != pos[at]).any() or (new_sure[rows] != sure[at]).any():
                changed = True
                pos[at], sure[at] = new_pos[rows], new_sure[rows]
        if not changed:
            break
    pos[pos > limit] = -1
    sure[sure > limit] = -1
    return pos, sure
