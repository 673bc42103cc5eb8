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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlverify.errors import MemoryBudgetError, OptionError
from rlverify.exact.options import MAX_WORK
from rlverify.exact.outcome import CheckOutcome
from rlverify.exact.rounding import relative, rounded_down, rounded_up, sum_margin
from rlverify.files import published

__all__ = ["BLOCK_ENTRIES", "ChainWriter", "RowBlocks", "block_ranks", "prepare", "rank_passes", "unbounded_until"]

#: transitions per row block read for a product (~21 bytes each in buffers: ~45 MB)
BLOCK_ENTRIES = 1 << 21
#: the files a chain directory holds (``--force`` replaces these, never anything else)
FILES = ("indices.i32", "codes.u8", "values.f64", "indptr.i64", "vptr.i64", "chain.json")
#: most distinct values a row's uint8 codes address
CODED = 256
#: disk space kept free while writing (bytes)
RESERVE = 1 << 30
_SINK = -1
#: a chain's rows on disk: :class:`RowBlocks`, or rows partitioned across Ray actors (``local``: this machine's
#: :class:`RowBlocks`; :class:`~rlverify.exact.partition.RayRows`)
BlockMatrix = Any


def prepare(path: str | os.PathLike[str], *, force: bool = False) -> tuple[Path, Path, Path | None]:
    """``(directory, private temporary subdirectory, the topmost directory created or None)`` for a chain: the
    directory must be new or empty (``force``: it may hold the files of an earlier chain, which are replaced at the
    end; nothing else).

    Raises:
        OptionError: one line naming the cause (a file, not empty, not writable).
    """
    where = Path(path)
    _refuse_occupied(where, force)
    created = None
    for directory in (where, *where.parents):  # the directories mkdir creates, removed again if the chain is not
        if directory.exists():
            break
        created = directory
    try:
        where.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".rlverify-chain-", dir=where))
    except OSError as exc:
        _remove_created(where, created)
        raise OptionError(f"--chain-dir {where}: cannot write there ({exc.strerror or exc})") from None
    return where, tmp, created


def _refuse_occupied(where: Path, force: bool) -> None:
    """Refuse a ``--chain-dir`` that is a file, or a directory holding anything but (``force``) an earlier chain."""
    if where.exists() and not where.is_dir():
        raise OptionError(f"--chain-dir {where}: exists and is not a directory; give a new or empty directory")
    if not where.is_dir():
        return
    others = sorted(p.name for p in where.iterdir() if not (force and p.name in FILES))
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise OptionError(
            f"--chain-dir {where}: not empty ({shown}); give a new or empty directory"
            + ("" if force else " (--force replaces only an earlier chain's files)")
        )


def _remove_created(where: Path, created: Path | None) -> None:
    """Remove the directories :func:`prepare` made, ``where`` up to ``created``, those still empty."""
    if created is None:
        return
    for directory in (where, *where.parents):
        try:
            directory.rmdir()
        except OSError:
            return
        if directory == created:
            return


class ChainWriter:
    """Appends the merged rows of each batch to the chain files in a temporary subdirectory (:func:`prepare`)."""

    def __init__(self, where: Path, tmp: Path, created: Path | None = None) -> None:
        self.where, self.tmp, self.created = where, tmp, created
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
        made = self._made()
        for i, name in enumerate(FILES):
            published(self.where / name, made=made if i == 0 else None)
        return RowBlocks(self.where, indptr, vptr, sink=S if stalled else None)

    def _made(self) -> list[Path]:
        """The directories :func:`prepare` created, taken back with the files if the command fails later
        (:func:`rlverify.files.all_or_nothing`)."""
        made: list[Path] = []
        for directory in (self.where, *self.where.parents) if self.created is not None else ():
            made.append(directory)
            if directory == self.created:
                break
        return made

    def abort(self) -> None:
        """Remove the temporary subdirectory (an exploration that stopped)."""
        for f in (self.indices, self.codes, self.values):
            f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        _remove_created(self.where, self.created)


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
        """``(n,)`` (or ``(n, c)``): the product with ``x`` ``(n,)`` (or ``(n, c)``), row block by row block (scipy's
        CSR product on each)."""
        y = np.empty((self.shape[0], *x.shape[1:]), dtype=np.float64)
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
    """``(positive, surely)`` ``(n,)`` int64 step ranks of :func:`~rlverify.exact.bounded.ranks` on a chain
    (``all_choices`` irrelevant; ``all_successors`` False, True), -1 above ``limit`` or never, computed by passes
    over the row blocks (no reversed graph): :func:`rank_passes`."""
    pos, sure, _, _ = rank_passes(matrix, phi, psi, limit)
    assert sure is not None
    pos[pos > limit] = -1
    sure[sure > limit] = -1
    return pos, sure


def rank_passes(
    matrix: RowBlocks,
    phi: np.ndarray,
    psi: np.ndarray,
    limit: int,
    *,
    surely: bool = True,
    max_passes: int | None = None,
) -> tuple[np.ndarray, np.ndarray | None, int, bool]:
    """``(positive, surely, passes, exact)``: the step ranks of :func:`block_ranks` (``(n,)`` int64, ``limit + 1``:
    above ``limit`` or never; ``surely`` False: not computed, None), the passes over the files made, and whether the
    ranks are exact (else ``max_passes`` stopped the passes: then a finite ``positive`` rank is still a path's
    length, and ``limit + 1`` means unknown).

    Each pass updates, in place, ``rank(s) = 1 + min`` (resp. ``max``) over ``s``'s positive successors for
    ``phi & ~psi`` states, from ``limit + 1`` (never) everywhere but ``psi`` (0). Values only decrease and stay
    above the true ranks; after ``j`` passes they are at most the ``j``-th Jacobi iterate, which is exact from
    ``limit + 1`` on: so at most ``limit + 2`` passes, fewer when a pass changes nothing (a fixed point below the
    exact ranks' is the exact ranks). Pure graph analysis: no floating point.
    """
    never = limit + 1
    go = np.asarray(phi, dtype=bool) & ~np.asarray(psi, dtype=bool)
    pos = np.where(psi, 0, never).astype(np.int64)
    sure = pos.copy() if surely else None
    most = limit + 2 if max_passes is None else min(limit + 2, max(int(max_passes), 1))
    passes, exact = 0, False
    while passes < most:
        passes += 1
        if not _rank_pass(matrix, go, pos, sure, never):
            exact = True
            break
    return pos, sure, passes, exact or passes >= limit + 2


def _relax(
    rank: np.ndarray,
    at: np.ndarray,
    rows: np.ndarray,
    reduce: Any,
    cols: np.ndarray,
    starts: np.ndarray,
    some: np.ndarray,
    n: int,
    r0: int,
    never: int,
) -> bool:
    """``rank[at] = min(rank[at], reduce over each row's positive successors' ranks + 1)`` (capped at ``never``; a row
    without positive successors gets ``never``), in place for a block of ``n`` rows from ``r0``; whether it changed."""
    best = np.full(n, never, dtype=np.int64)
    if len(starts):
        best[some] = reduce.reduceat(rank[cols], starts)
    new = np.minimum(rank[r0 : r0 + n], np.minimum(best + 1, never))
    if (new[rows] != rank[at]).any():
        rank[at] = new[rows]
        return True
    return False


def _rank_pass(matrix: RowBlocks, go: np.ndarray, pos: np.ndarray, sure: np.ndarray | None, never: int) -> bool:
    """One pass of :func:`rank_passes` over the blocks (last block first); whether it changed a rank."""
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
        at = r0 + rows
        changed |= _relax(pos, at, rows, np.minimum, cols, starts, some, part.shape[0], r0, never)
        if sure is not None:  # no positive successor: never surely
            changed |= _relax(sure, at, rows, np.maximum, cols, starts, some, part.shape[0], r0, never)
    return changed


@dataclass(frozen=True)
class _Graph:
    """The exact graph facts of ``P(phi U psi)`` on a chain on disk: ``no`` / ``yes`` ``(n,)`` bool, states whose
    value is exactly 0 / 1 (all of them when ``complete``; else only the trivial ones: ``~phi & ~psi`` / ``psi``),
    and the passes over the files each fixed point took."""

    no: np.ndarray
    yes: np.ndarray
    passes: tuple[int, ...]
    complete: bool


def _graph(blocks: RowBlocks, phi: np.ndarray, psi: np.ndarray, max_passes: int | None) -> _Graph:
    """prob0: the states that cannot reach ``psi`` through ``phi & ~psi`` states; prob1: those that cannot reach a
    prob0 state through ``phi & ~psi`` states (on a chain, probability 1); by :func:`rank_passes` with the ranks'
    limit the number of states (every shortest path is shorter), ``max_passes`` each."""
    n = blocks.shape[0]
    go = phi & ~psi
    pos, _, first, exact = rank_passes(blocks, phi, psi, n, surely=False, max_passes=max_passes)
    if not exact:
        return _Graph(no=~phi & ~psi, yes=psi.copy(), passes=(first,), complete=False)
    no = pos > n
    pos, _, second, exact = rank_passes(blocks, go, no, n, surely=False, max_passes=max_passes)
    yes = pos > n if exact else psi.copy()
    return _Graph(no=no, yes=yes, passes=(first, second), complete=exact)


def unbounded_until(
    matrix: BlockMatrix,
    phi: np.ndarray,
    psi: np.ndarray,
    init: int,
    *,
    precision: float = 1e-6,
    max_work: int | None = MAX_WORK,
    progress: Callable[[str], None] | None = None,
) -> CheckOutcome:
    """``P(phi U psi)`` (``F psi``: ``phi`` all true) at ``init`` on a chain on disk, with a certified bracket.

    ``matrix``: the chain's :class:`RowBlocks` (or rows partitioned across Ray actors, its ``local`` the blocks);
    ``phi``, ``psi`` ``(n,)`` bool. Graph analysis by passes over the blocks (:func:`_graph`: exact 0 and 1 states),
    then interval iteration on the remaining "maybe" states: the lower bounds from 0, the upper from 1, each step
    ``x' = A x + b`` one blocked product of both (``(n, 2)``), rounded outwards with the in-memory check's margins
    (:func:`~rlverify.exact.rounding.rounded_down`, ``rounded_up``), so each iterate stays a certified bracket. Stops
    when the bracket at ``init`` is within ``precision`` (relative), after ``max_work / transitions`` steps (each a
    pass over the files; the graph analysis's fixed points get as many passes each), or when a step changes no
    bound (the rounded iteration's fixed point); short of the precision the outcome's ``warning`` says so and gives
    the bracket reached. Memory per state: the vectors and the masks.
    """
    blocks: RowBlocks = matrix.local
    phi, psi = np.asarray(phi, dtype=bool), np.asarray(psi, dtype=bool)
    nnz = max(int(blocks.nnz), 1)
    budget = None if max_work is None else max(int(max_work) // nnz, 1)
    if progress is not None:
        progress(f"graph analysis by passes over the chain's files ({nnz:,} transitions)")
    graph = _graph(blocks, phi, psi, budget)
    maybe = ~graph.yes & ~graph.no
    values = graph.yes.astype(np.float64)
    lowers, uppers = values.copy(), values.copy()
    lowers[maybe], uppers[maybe] = 0.0, 1.0
    steps, stop = 0, "decided"
    if maybe[init]:
        steps, stop = _interval_steps(matrix, graph.yes, maybe, init, lowers, uppers, precision, budget, progress)
    values[maybe] = (lowers[maybe] + uppers[maybe]) / 2
    return _unbounded_outcome(graph, maybe, init, values, lowers, uppers, steps, stop, precision, max_work)


def _interval_steps(
    matrix: Any,
    yes: np.ndarray,
    maybe: np.ndarray,
    init: int,
    lowers: np.ndarray,
    uppers: np.ndarray,
    precision: float,
    budget: int | None,
    progress: Callable[[str], None] | None,
) -> tuple[int, str]:
    """Interval iteration on the ``maybe`` states, ``lowers``/``uppers`` ``(n,)`` updated in place (see
    :func:`unbounded_until`); ``(steps, why it stopped)``: ``"precision"``, ``"budget"`` or ``"fixed point"``."""
    idx = np.flatnonzero(maybe)
    gamma, k = sum_margin(int(np.diff(matrix.local.indptr).max(initial=0)))
    v = np.zeros((len(maybe), 2), dtype=np.float64)
    v[yes] = 1.0  # exactly 1: the products with them are the row's probabilities; the 0 states add exact zeros
    lo, hi = lowers[idx], uppers[idx]
    j = int(np.searchsorted(idx, init))
    steps, shown = 0, time.perf_counter()
    while True:
        if relative((lo[j] + hi[j]) / 2, lo[j], hi[j]) <= precision:
            stop = "precision"
            break
        if budget is not None and steps >= budget:
            stop = "budget"
            break
        v[idx, 0], v[idx, 1] = lo, hi
        s = (matrix @ v)[idx]
        new_lo, new_hi = np.maximum(lo, rounded_down(s[:, 0], gamma, k)), np.minimum(hi, rounded_up(s[:, 1], gamma, k))
        steps += 1
        if np.array_equal(new_lo, lo) and np.array_equal(new_hi, hi):
            stop = "fixed point"
            break
        lo, hi = new_lo, new_hi
        if progress is not None and time.perf_counter() - shown > 0.5:
            shown = time.perf_counter()
            progress(f"interval iteration on disk: step {steps:,}, value in [{lo[j]:.6g}, {hi[j]:.6g}]")
    lowers[idx], uppers[idx] = lo, hi
    return steps, stop


def _unbounded_outcome(
    graph: _Graph,
    maybe: np.ndarray,
    init: int,
    values: np.ndarray,
    lowers: np.ndarray,
    uppers: np.ndarray,
    steps: int,
    stop: str,
    precision: float,
    max_work: int | None,
) -> CheckOutcome:
    """The :class:`~rlverify.exact.outcome.CheckOutcome` of :func:`unbounded_until`: value, bracket, exact facts,
    and a note saying what was computed (passes, steps, bracket) and a warning when short of ``precision``."""
    value, lower, upper = float(values[init]), float(lowers[init]), float(uppers[init])
    zero = True if graph.no[init] else (False if graph.complete or lower > 0 else None)
    one = True if graph.yes[init] else (False if graph.complete or upper < 1 else None)
    graph_note, warning = _graph_note(graph, maybe, lower, upper, max_work)
    if stop == "decided":
        note = f"exact: the initial state is decided by the graph analysis ({graph_note}; other states not iterated)"
        values[maybe] = np.nan
        lower = upper = value
    else:
        note, short = _iteration_note(graph_note, value, lower, upper, steps, stop, precision, max_work)
        warning = short if warning is None else warning
    return CheckOutcome(
        value=value,
        lower=lower,
        upper=upper,
        values=values,
        method=METHOD,
        note=note,
        warning=warning,
        zero=zero,
        one=one,
        lowers=lowers,
        uppers=uppers,
    )


def _graph_note(graph: _Graph, maybe: np.ndarray, lower: float, upper: float, max_work: int | None) -> tuple[str, str | None]:
    """What the graph analysis found, and the warning when the work budget stopped it."""
    passes = " + ".join(str(p) for p in graph.passes)
    note = (
        f"graph analysis in {passes} passes over the chain's files: {int(graph.yes.sum())} states 1, "
        f"{int(graph.no.sum())} states 0, {int(maybe.sum())} iterated"
    )
    if graph.complete:
        return note, None
    note += f" (incomplete: --max-work {max_work:.3g} stopped the passes; only the trivial 0/1 states known)"
    return note, (
        f"the graph analysis did not finish within --max-work {max_work:.3g}: the true value is in "
        f"[{lower:.6g}, {upper:.6g}]; raise --max-work"
    )


def _iteration_note(
    graph_note: str, value: float, lower: float, upper: float, steps: int, stop: str, precision: float, max_work: int | None
) -> tuple[str, str | None]:
    """What the interval iteration certified, and the warning when it stopped short of ``precision``."""
    rel = relative(value, lower, upper)
    bracket = f"true value in [{lower:.12g}, {upper:.12g}] (certified: outward rounding)"
    note = f"{graph_note}; {steps:,} interval-iteration steps (each a pass over the files); {bracket}, "
    note += f"relative error <= {rel:.2g}" if lower > 0 else "only an absolute bound is known (the lower bound is 0)"
    if stop == "precision":
        return note, None
    why = (
        f"within --max-work {max_work:.3g} ({steps:,} steps, each a pass over the files; raise --max-work)"
        if stop == "budget"
        else f"by the rounded iteration (a fixed point after {steps:,} steps)"
    )
    return note, f"the requested precision {precision:g} (relative) was not reached {why}: {bracket}"


#: the ``method`` of :func:`unbounded_until`'s outcomes
METHOD = "interval iteration over the chain on disk"
