"""The policy's chain on disk (``--chain-dir``): its rows streamed to files as they are explored, read back in row
blocks for the checks, so the process holds memory per state (vectors, indptr, valuations, labels), not per transition.

Layout of a chain directory (written in a private temporary subdirectory, renamed in when complete):

* ``indices.i32``: int32 column of every transition, rows in state order, each row sorted by column (as the
  in-memory CSR after ``sort_indices``); -1 stands for the ``stalled`` sink (its index is known at the end only);
* the probabilities, losslessly compressed: each row's distinct probabilities once (``values.f64``, float64, the
  row's table in increasing order) and a ``uint8`` code per transition (``codes.u8``: its value's place in its row's
  table); a row with more than 256 distinct values keeps all its values in column order as its table (codes 0);
  stochastic Avoid has ~7 distinct values per 100 transitions: ~5.6 bytes per transition instead of 12, so the
  files of n = 16 fit in this machine's page cache;
* ``indptr.i64``, ``vptr.i64``: int64 ``(n+1,)`` row offsets into the transitions and into the tables;
  ``chain.json``: counts and the layout's version.

:class:`RowBlocks` is the matrix the checks read: ``@`` is scipy's CSR product on each row block (each row's sum in
the same order as on the whole matrix, so the values are bit-identical to the in-memory run), read with ordinary
reads into reused buffers (no memory map whose pages the resident size would count); each block's float64
probabilities are rebuilt exactly from the tables before the product.
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

#: transitions per row block read for a product (~21 bytes each in buffers: ~45 MB)
BLOCK_ENTRIES = 1 << 21
#: the files a chain directory holds (``--force`` replaces these, never anything else)
FILES = ("indices.i32", "codes.u8", "values.f64", "indptr.i64", "vptr.i64", "chain.json")
#: most distinct values a row's uint8 codes address
CODED = 256
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
        self.codes = open(tmp / "codes.u8", "wb")
        self.values = open(tmp / "values.f64", "wb")
        self.n = 0  # transitions written
        self.lengths: list[np.ndarray] = []
        self.tables: list[np.ndarray] = []  # each row's table length

    def append(self, row: np.ndarray, target: np.ndarray, w: np.ndarray, B: int) -> None:
        """One batch: ``row`` ``(E,)`` its local row of each transition (sorted), ``target`` ``(E,)`` int32 (-1: the
        sink), ``w`` ``(E,)`` float64; each row is written sorted by column (the sink last)."""
        free = shutil.disk_usage(self.tmp).free
        need = 13 * len(w)
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
        codes, table, table_lengths = encode(ptr, part.data)
        codes.tofile(self.codes)
        table.tofile(self.values)
        self.lengths.append(lengths)
        self.tables.append(table_lengths)
        self.n += len(w)

    def finish(self, S: int, stalled: bool) -> RowBlocks:
        """The chain complete: ``S`` states (plus the sink when ``stalled``), renamed into the directory."""
        if stalled:  # the sink's self-loop, its last row
            np.array([S], dtype=np.int32).tofile(self.indices)
            np.zeros(1, dtype=np.uint8).tofile(self.codes)
            np.array([1.0]).tofile(self.values)
            self.lengths.append(np.ones(1, dtype=np.int64))
            self.tables.append(np.ones(1, dtype=np.int64))
            self.n += 1
        for f in (self.indices, self.codes, self.values):
            f.close()
        n = S + int(stalled)
        indptr, vptr = np.zeros(n + 1, dtype=np.int64), np.zeros(n + 1, dtype=np.int64)
        if self.lengths:
            np.cumsum(np.concatenate(self.lengths), out=indptr[1:])
            np.cumsum(np.concatenate(self.tables), out=vptr[1:])
        self.lengths, self.tables = [], []
        indptr.tofile(self.tmp / "indptr.i64")
        vptr.tofile(self.tmp / "vptr.i64")
        meta = {
            "version": 2,
            "states": n,
            "transitions": int(indptr[-1]),
            "values": int(vptr[-1]),
            "sink": S if stalled else None,
        }
        (self.tmp / "chain.json").write_text(json.dumps(meta) + "\n")
        for name in FILES:
            os.replace(self.tmp / name, self.where / name)
        self.tmp.rmdir()
        return RowBlocks(self.where, indptr, vptr, sink=S if stalled else None)

    def abort(self) -> None:
        """Remove the temporary subdirectory (an exploration that stopped)."""
        for f in (self.indices, self.codes, self.values):
            f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class RowBlocks:
    """A chain's ``(n, n)`` transition matrix on disk, read in row blocks (the checks' matrix: ``@``, ``shape``,
    ``nnz``, ``indptr``, ``dtype``). ``indptr`` and ``vptr`` ``(n+1,)`` int64 are held in memory (16 bytes per
    state)."""

    def __init__(
        self,
        where: Path,
        indptr: np.ndarray,
        vptr: np.ndarray,
        *,
        sink: int | None = None,
        block: int | None = None,
        columns: int | None = None,
    ) -> None:
        block = BLOCK_ENTRIES if block is None else block
        self.where = where
        self.indptr, self.vptr = indptr, vptr  # a slice of the chain's (consecutive rows): offsets stay absolute
        self.shape = (len(indptr) - 1, len(indptr) - 1 if columns is None else columns)
        self.local = self  # the rows on this machine's disk (a partition across Ray actors keeps them as ``local``)
        self.nnz = int(indptr[-1] - indptr[0])
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
        self._codes = np.empty(widest, dtype=np.uint8)
        self._val = np.empty(widest, dtype=np.float64)
        self._table = np.empty(int(np.diff(vptr[self.starts]).max(initial=0)), dtype=np.float64)

    def blocks(self, *, reverse: bool = False) -> Any:
        """``(first row, CSR of the block's rows)`` for each block in order (``reverse``: last block first); the CSR's
        arrays are the reused buffers (valid until the next block is read)."""
        import scipy.sparse as sp

        files = [open(self.where / name, "rb", buffering=0) for name in ("indices.i32", "codes.u8", "values.f64")]
        try:
            pairs = list(zip(self.starts[:-1], self.starts[1:], strict=True))
            for r0, r1 in reversed(pairs) if reverse else pairs:
                a, b = int(self.indptr[r0]), int(self.indptr[r1])
                ta, tb = int(self.vptr[r0]), int(self.vptr[r1])
                idx, codes, table = self._idx[: b - a], self._codes[: b - a], self._table[: tb - ta]
                _read(files[0], idx, 4 * a)
                _read(files[1], codes, a)
                _read(files[2], table, 8 * ta)
                if self.sink is not None:
                    idx[idx == _SINK] = self.sink
                ptr = (self.indptr[r0 : r1 + 1] - a).astype(np.int32)  # int32 like the indices: no upcast copy
                val = decode(ptr, codes, table, self.vptr[r0 : r1 + 1] - ta, self._val[: b - a])
                yield int(r0), sp.csr_matrix((val, idx, ptr), shape=(int(r1 - r0), self.shape[1]), copy=False)
        finally:
            for f in files:
                f.close()

    def load(self) -> Any:
        """The rows as one CSR in memory (12 bytes per transition: a Ray actor's partition)."""
        import scipy.sparse as sp

        indices = np.empty(self.nnz, dtype=np.int32)
        data = np.empty(self.nnz, dtype=np.float64)
        base = int(self.indptr[0])
        for r0, part in self.blocks():
            a = int(self.indptr[r0]) - base
            indices[a : a + part.nnz] = part.indices
            data[a : a + part.nnz] = part.data
        indptr = self.indptr - base
        indptr = indptr.astype(np.int32) if self.nnz < np.iinfo(np.int32).max else indptr
        return sp.csr_matrix((data, indices, indptr), shape=self.shape, copy=False)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """``(n,)``: the product with ``x`` ``(n,)``, row block by row block (scipy's CSR product on each)."""
        y = np.empty(self.shape[0], dtype=np.float64)
        for r0, part in self.blocks():
            y[r0 : r0 + part.shape[0]] = part @ x
        return y


def encode(ptr: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(codes, table, table lengths)`` of rows ``ptr`` ``(R+1,)`` of ``data`` ``(E,)`` float64 (see the module
    docstring): ``codes`` ``(E,)`` uint8, ``table`` the rows' tables concatenated, ``table lengths`` ``(R,)`` int64.
    Lossless: :func:`decode` returns ``data`` bit for bit."""
    R, E = len(ptr) - 1, len(data)
    lengths = np.diff(ptr)
    row = np.repeat(np.arange(R), lengths)
    order = np.lexsort((data, row))  # by row, then value
    d, r = data[order], row[order]
    new = np.ones(E, dtype=bool)
    new[1:] = (d[1:] != d[:-1]) | (r[1:] != r[:-1])  # bitwise: -0.0 and 0.0 never occur (probabilities > 0)
    group = np.cumsum(new) - 1
    distinct = np.bincount(r[new], minlength=R)
    first = np.zeros(R, dtype=np.int64)
    np.cumsum(distinct[:-1], out=first[1:])
    raw = distinct > CODED
    codes = np.zeros(E, dtype=np.uint8)
    codes[order] = np.where(raw[r], 0, group - first[r]).astype(np.uint8)
    if not raw.any():
        return codes, d[new], distinct.astype(np.int64)
    # rows beyond uint8 codes: all their values in column order as their table
    keep = new & ~raw[r]
    entries_row = np.concatenate([r[keep], row[raw[row]]])
    entries = np.concatenate([d[keep], data[raw[row]]])
    table = entries[np.argsort(entries_row, kind="stable")]
    return codes, table, np.where(raw, lengths, distinct).astype(np.int64)


def decode(ptr: np.ndarray, codes: np.ndarray, table: np.ndarray, tptr: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out`` ``(E,)`` filled with the float64 probabilities of rows ``ptr`` from their ``codes`` and ``table`` (row
    tables at ``tptr`` ``(R+1,)``), the inverse of :func:`encode`."""
    lengths = np.diff(ptr)
    at = np.repeat(tptr[:-1], lengths)
    at += codes
    np.take(table, at, out=out, mode="clip")  # in range by construction; "clip" skips the bounds check (3x faster)
    raw = np.flatnonzero(np.diff(tptr) > CODED)
    for i in raw:  # rows stored whole (rare)
        out[ptr[i] : ptr[i + 1]] = table[tptr[i] : tptr[i + 1]]
    return out


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
