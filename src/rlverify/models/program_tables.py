"""Lookup tables over the few variables a command's guard or updates read: where a state's row is, the guards' bits
as words, and the updates' probabilities and key deltas."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from rlverify.arrays import distinct
from rlverify.models.program_types import Command, Env, Var

if TYPE_CHECKING:
    from rlverify.models.program import CompiledProgram

#: largest domain of the variables an expression or a command's updates read for them to be looked up in a table
#: (built on first use); a command's updates over a larger domain (up to :data:`MAX_TABLE_DOMAIN`) get one once they
#: have been evaluated often enough to pay for it (:class:`UpdateTables`), within :data:`TABLE_ENTRIES` in all
TABLE_DOMAIN = 1 << 12
MAX_TABLE_DOMAIN = 1 << 18
TABLE_ENTRIES = 1 << 22
#: largest table of guard bits over a span of variables (:class:`GuardSignature`; 8 bytes a row)
SPAN_DOMAIN = 1 << 12
#: largest domain of the variables a guard reads for it to be looked up in a table (every guard is evaluated in
#: every batch: all the guards' tables are built on the first)
GUARD_TABLE_DOMAIN = 1 << 14


class Layout:
    """Where items (commands' guards or updates) are looked up in their tables: each reads a few variables, and a
    state's row in an item's table is the mixed-radix number of their offsets (the first variable fastest). Items
    whose variables' domains multiply beyond ``limit`` can have no table (``tabled`` False)."""

    def __init__(self, variables: tuple[Var, ...], reads: list[tuple[int, ...]], limit: int, spans: bool = False) -> None:
        self.variables = variables
        self.domains = [math.prod(variables[i].hi - variables[i].lo + 1 for i in r) for r in reads]
        # ``spans``: an item reading variables i..j and a few between reads them all (a table at most 4 times larger, or
        # within TABLE_DOMAIN): its row is then a digit range of the state's key, found in two numpy calls
        self.spanned = np.zeros(len(reads) + 1, dtype=bool)
        self.key_radix = np.ones(len(reads) + 1, dtype=np.int64)
        self.key_size = np.ones(len(reads) + 1, dtype=np.int64)
        if spans:
            reads = self._spans(list(reads), limit)
        self.reads = reads
        self.tabled = np.asarray([d <= limit for d in self.domains] + [False])
        self._strides()

    def _spans(self, reads: list[tuple[int, ...]], limit: int) -> list[tuple[int, ...]]:
        """``reads`` with each item that reads variables i..j and a few between widened to all of them (its table at
        most 4 times larger, or within :data:`TABLE_DOMAIN`, and within ``limit``): its row a digit range of the key."""
        variables = self.variables
        for item, r in enumerate(reads):
            if not r:
                self.spanned[item] = True
                continue
            first, last = variables[min(r)], variables[max(r)]
            D = last.radix * (last.hi - last.lo + 1) // first.radix
            if D <= limit and (D <= TABLE_DOMAIN or D <= 4 * self.domains[item]):
                reads[item] = tuple(range(min(r), max(r) + 1))
                self.domains[item] = D
                self.spanned[item] = True
                self.key_radix[item], self.key_size[item] = first.radix, D
        return reads

    def _strides(self) -> None:
        """Each tabled item's variables (``var``), their lower bounds (``lo``) and row strides (``stride``; 0 pads)."""
        reads = self.reads
        width = max([len(r) for r, t in zip(reads, self.tabled, strict=False) if t], default=0)
        self.var = np.zeros((len(reads) + 1, width), dtype=np.int64)
        self.lo = np.zeros((len(reads) + 1, width), dtype=np.int64)
        self.stride = np.zeros((len(reads) + 1, width), dtype=np.int64)  # 0 pads
        for item, r in enumerate(reads):
            if self.tabled[item]:
                stride = 1
                for t, i in enumerate(r):
                    v = self.variables[i]
                    self.var[item, t], self.lo[item, t], self.stride[item, t] = i, v.lo, stride
                    stride *= v.hi - v.lo + 1

    def rows(self, items: np.ndarray, states: np.ndarray, values: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
        """Rows (int64, ``items`` and ``states`` broadcast) of tabled ``items`` in states ``states`` (rows of ``values``;
        ``keys``: their keys, for items whose row is a digit range of the key)."""
        if keys is not None and self.spanned[items].all():
            out = keys[states] // self.key_radix[items]
            out %= self.key_size[items]
            return out
        out = np.zeros(np.broadcast_shapes(items.shape, states.shape), dtype=np.int64)
        for t in range(self.var.shape[1]):
            out += (values[states, self.var[items, t]] - self.lo[items, t]) * self.stride[items, t]
        return out

    def grid(self, item: int) -> np.ndarray:
        """``(D, V)`` int64: every combination of the values of the variables ``item`` reads (table row order; the
        other variables at their lower bounds: never read)."""
        D = self.domains[item]
        every = np.arange(D, dtype=np.int64)
        grid = np.tile(np.asarray([v.lo for v in self.variables], dtype=np.int64), (D, 1))
        for t, i in enumerate(self.reads[item]):
            v = self.variables[i]
            grid[:, i] = v.lo + (every // self.stride[item, t]) % (v.hi - v.lo + 1)
        return grid


class GuardSignature:
    """Each state's guards as ``uint64`` words (bit ``i % 63`` of word ``i // 63``: command ``i``'s guard holds), in a
    few numpy calls on the
    states' keys. Commands are grouped by the span of variables their guards read (from the first to the last in key
    order): a state's row in a table over a span is a digit range of its key, ``(key // radix) % size``, so every
    group's row is found by two numpy calls on a ``(groups, n)`` array, the tables (the bits of the group's guards at
    every valuation of the span, built on first use) gathered at once and or-ed. Guards whose span has more than
    :data:`SPAN_DOMAIN` valuations are taken from :meth:`~rlverify.models.program.CompiledProgram.guards`."""

    def __init__(self, program: CompiledProgram) -> None:
        commands = program.commands
        self.words = max(1, -(-len(commands) // 63))
        self.program = program
        variables = program.variables
        self.constant = np.uint64(0)
        self._group(variables, _guard_spans(commands))
        # the other commands' guards: their rows in CompiledProgram.guards, and their bits
        slot = np.empty(len(commands), dtype=np.int64)
        slot[program._structure.order] = np.arange(len(commands))
        self.direct_rows = slot[self.direct]
        self.direct_word = np.asarray(self.direct, dtype=np.int64) // 63
        self.direct_bits = (np.uint64(1) << (np.asarray(self.direct, dtype=np.uint64) % np.uint64(63)))[:, None]
        self.radix = np.asarray([variables[f].radix if variables else 1 for f, _, _ in self.groups], dtype=np.int64)[:, None]
        self.size = np.asarray([D for _, D, _ in self.groups], dtype=np.int64)[:, None]
        self.offsets = (np.cumsum(self.size) - self.size[:, 0])[:, None]
        self.table: np.ndarray | None = None
        # each command's word and bit, in the slot order of CompiledProgram.guards
        order = program._structure.order
        self.word_of = order // 63
        self.bit_of = (order % 63).astype(np.uint64)

    def _group(self, variables: tuple[Var, ...], spans: dict[tuple[int, int], list[int]]) -> None:
        """:attr:`groups` ``(first variable, rows, commands)``: the spans of at most :data:`SPAN_DOMAIN` valuations
        (within :data:`TABLE_ENTRIES` in all), by span; :attr:`direct`: the other spans' commands."""
        self.groups: list[tuple[int, int, list[int]]] = []
        self.direct: list[int] = []
        entries = 0
        for (first, last), cids in sorted(spans.items()):
            radix = variables[first].radix if variables else 1
            D = (variables[last].radix * (variables[last].hi - variables[last].lo + 1)) // radix if variables else 1
            if D <= SPAN_DOMAIN and entries + D <= TABLE_ENTRIES:
                self.groups.append((first, D, cids))
                entries += D
            else:
                self.direct += cids

    def _build(self) -> np.ndarray:
        program = self.program
        parts = []
        for (_, D, cids), radix in zip(self.groups, self.radix[:, 0], strict=True):
            grid = program.values(np.arange(D, dtype=np.int64) * radix)  # the span's valuations, others at lower bounds
            env = program.env(grid)
            bits = np.zeros((D, self.words), dtype=np.uint64)
            for c in cids:
                bits[program.evaluate(program.commands[c].guard, env, D), c // 63] |= np.uint64(1 << (c % 63))
            parts.append(bits)
        return np.concatenate(parts) if parts else np.zeros((0, self.words), dtype=np.uint64)

    def __call__(self, values: np.ndarray, env: Env, keys: np.ndarray) -> np.ndarray:
        n, program = len(values), self.program
        if self.table is None:
            self.table = self._build()
        if self.groups:
            rows = keys // self.radix
            rows %= self.size
            rows += self.offsets
            out = np.bitwise_or.reduce(self.table[rows], axis=0)
        else:
            out = np.zeros((n, self.words), dtype=np.uint64)
        if self.direct:  # every guard at once (looked up in tables over the variables each reads, where they are few)
            guards = program.guards(values, env)[self.direct_rows]
            bits = np.where(guards, self.direct_bits, np.uint64(0))
            for w in distinct(self.direct_word):
                out[:, w] |= np.bitwise_or.reduce(bits[self.direct_word == w], axis=0)
        return out

    def guards(self, values: np.ndarray, env: Env, keys: np.ndarray) -> np.ndarray:
        """``(commands, n)`` bool in :meth:`~rlverify.models.program.CompiledProgram.guards`' order, read from the words
        (no direct guards)."""
        words = self(values, env, keys)
        return ((words.T[self.word_of] >> self.bit_of[:, None]) & np.uint64(1)).astype(bool)


def _guard_spans(commands: tuple[Command, ...]) -> dict[tuple[int, int], list[int]]:
    """The commands (ids) by the span of variables their guards read (first, last; no variable: ``(0, 0)``, a table
    of one row)."""
    spans: dict[tuple[int, int], list[int]] = {}
    for i, c in enumerate(commands):
        key = (min(c.guard_reads), max(c.guard_reads)) if c.guard_reads else (0, 0)
        spans.setdefault(key, []).append(i)
    return spans


class UpdateTables:
    """Every command's updates as flat arrays, an entry per (command, state, update), each command's evaluated once per
    batch where it runs, or looked up in a table over the variables it reads: from the start where they span at most
    :data:`TABLE_DOMAIN` valuations, else (up to :data:`MAX_TABLE_DOMAIN`) once its direct evaluations (64 rows' worth
    per batch, for the batch's fixed cost, plus its rows) reach a quarter of the table's rows.

    ``probs``/``deltas`` hold: entry 0, the padding's update (probability 1, no change); the tables (command ``c``'s
    row ``t``, update ``u`` at ``base[c] + t * updates[c] + u``, built on first use); then the batch's commands that
    have no table (from ``scratch`` on). ``bad`` flags a tabled command's rows where a check fails.
    """

    def __init__(self, program: CompiledProgram) -> None:
        self.program = program
        commands = program.commands
        self.size = np.asarray([len(c.updates) for c in commands] + [1], dtype=np.int64)
        self.layout = Layout(program.variables, [c.reads for c in commands], MAX_TABLE_DOMAIN, spans=True)
        self.domains = np.asarray([*self.layout.domains, 0], dtype=np.int64)
        self.eligible = self.layout.tabled.copy()
        self.tabled = self.eligible & (self.domains <= TABLE_DOMAIN)
        self.work = np.zeros(len(commands) + 1, dtype=np.int64)  # rows evaluated directly so far (and 64 a batch)
        domains = self.domains * self.tabled
        self.base = 1 + np.cumsum(domains * self.size) - domains * self.size
        self.bad_base = np.cumsum(domains) - domains
        self.built = np.zeros(len(commands) + 1, dtype=bool)
        self.scratch = int(self.base[-1])
        self.probs = np.empty(self.scratch)
        self.deltas = np.empty(self.scratch, dtype=np.int64)
        self.probs[0], self.deltas[0] = 1.0, 0
        self.bad = np.zeros(int(domains.sum()), dtype=bool)
        self._update_keyed()

    def _update_keyed(self) -> None:
        """:attr:`keyed` ``(commands + 1,)`` bool, the padding's last (True): a command's table is built and its row
        is a digit range of the key."""
        self.keyed = self.built & self.layout.spanned
        self.keyed[-1] = True

    def build(self, commands: np.ndarray) -> None:
        """The tables of ``commands`` (command ids, repeats and the padding allowed) that have one and are not built."""
        unbuilt = commands[self.tabled[commands] & ~self.built[commands]]
        if len(unbuilt):
            for c in distinct(unbuilt):
                self._build(int(c))
            self._update_keyed()

    def _build(self, c: int) -> None:
        """Command ``c``'s table: its updates evaluated once on every combination of the variables it reads."""
        grid = self.layout.grid(c)
        probs, deltas, bad = self.program.command_updates(self.program.commands[c], grid)
        D, U = probs.shape
        self.probs[self.base[c] : self.base[c] + D * U] = probs.ravel()
        self.deltas[self.base[c] : self.base[c] + D * U] = deltas.ravel()
        self.bad[self.bad_base[c] : self.bad_base[c] + D] = bad
        self.built[c] = True

    def _promote(self, c: int) -> None:
        """Give command ``c`` a table (built on its next use) after the tables so far; the scratch moves after it."""
        entries = int(self.domains[c] * self.size[c])
        if self.scratch + entries > TABLE_ENTRIES:
            self.eligible[c] = False
            return
        self.base[c], self.bad_base[c] = self.scratch, len(self.bad)
        self.scratch += entries
        if self.scratch > len(self.probs):
            self.probs.resize(self.scratch, refcheck=False)
            self.deltas.resize(self.scratch, refcheck=False)
        self.bad = np.r_[self.bad, np.zeros(int(self.domains[c]), dtype=bool)]
        self.tabled[c] = True

    def locate(
        self, parts: np.ndarray, rows: np.ndarray, values: np.ndarray, keys: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Where the updates of commands ``parts`` ``(P, K)`` (-1: padding) in batch rows ``rows`` ``(P,)`` of
        ``values`` ``(n, V)`` are: ``(P, K)`` first entry and ``(P, K)`` number of updates. Raises as
        :meth:`~rlverify.models.program.CompiledProgram.branches` (each (command, state) checked once)."""
        n_cmd = len(self.program.commands)
        cmd = np.where(parts >= 0, parts, n_cmd)
        size = self.size[cmd]
        off = np.zeros(cmd.shape, dtype=np.int64)
        row = rows[:, None].repeat(cmd.shape[1], axis=1)
        tab = self.tabled[cmd]
        bad_rows = []
        if tab.any():
            tc, tr = cmd[tab], row[tab]
            self.build(tc)
            sub = self.layout.rows(tc, tr, values, keys)
            bad = self.bad[self.bad_base[tc] + sub]
            if bad.any():
                bad_rows.append(int(tr[bad].min()))
            off[tab] = self.base[tc] + sub * size[tab]
        direct = (cmd < n_cmd) & ~tab
        if direct.any():
            found = self._direct(cmd[direct], row[direct], values)
            off[direct] = found[0]
            if found[1] is not None:
                bad_rows.append(found[1])
        if bad_rows:
            self.program.raise_first(min(bad_rows), parts, rows, values)
        return off, size

    def _direct(self, cmd: np.ndarray, row: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, int | None]:
        """Commands without a table evaluated once per (command, row) pair into the scratch entries: the first entry
        of each pair given, and the first row where a check fails (None: none)."""
        n = len(values)
        uniq, inverse = np.unique(cmd * n + row, return_inverse=True)
        c_of, r_of = np.divmod(uniq, n)
        first = np.zeros(len(uniq) + 1, dtype=np.int64)
        np.cumsum(self.size[c_of], out=first[1:])
        first += self.scratch
        if first[-1] > len(self.probs):
            self.probs.resize(int(first[-1]), refcheck=False)
            self.deltas.resize(int(first[-1]), refcheck=False)
        bad_row = None
        starts = np.flatnonzero(np.r_[True, c_of[1:] != c_of[:-1]])
        for a, b in zip(starts, np.r_[starts[1:], len(uniq)], strict=True):
            c = int(c_of[a])
            command = self.program.commands[c]
            probs, deltas, bad = self.program.command_updates(command, values[r_of[a:b]])
            self.work[c] += 64 + b - a
            if bad.any():
                worst = int(r_of[a:b][bad].min())
                bad_row = worst if bad_row is None else min(bad_row, worst)
            where = first[a:b, None] + np.arange(len(command.updates))
            self.probs[where] = probs
            self.deltas[where] = deltas
        located = first[:-1][inverse.reshape(-1)]
        for c in distinct(c_of):  # after this batch's scratch was read: promotion moves it
            if self.eligible[c] and 4 * self.work[c] >= self.domains[c]:
                self._promote(int(c))
        return located, bad_row
