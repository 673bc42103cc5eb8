"""The enabled choices of a batch of states, enumerated from the commands' guards in a fixed number of numpy calls."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rlverify.models.program_tables import GUARD_TABLE_DOMAIN, TABLE_ENTRIES, Layout
from rlverify.models.program_types import Enabled, Env, Unsupported

if TYPE_CHECKING:
    from rlverify.models.program import CompiledProgram

#: most combinations of enabled commands one label may form in one state (each is a choice of that state)
MAX_ENABLED = 1 << 16


class ChoiceTables:
    """The program's choices as arrays, for enumerating a batch's enabled choices in a fixed number of numpy calls.

    Commands are held in *slot order*: by group (program order), then by the group's modules, then by command. A slot
    is one module's commands of one group (an unlabelled command is a slot, and a group, of its own). In a state, a
    group's choices are the products of its slots' enabled commands; most states enable one command per slot.
    """

    def __init__(self, program: CompiledProgram) -> None:
        self.program = program
        groups = program.groups
        order: list[int] = []
        slot_start: list[int] = []
        slot_stride: list[int] = []
        group_slots: list[list[int]] = []
        local: list[int] = []
        for g in groups:
            group_slots.append([])
            for cids, stride in zip(g.modules, g.strides, strict=True):
                group_slots[-1].append(len(slot_start))
                slot_start.append(len(order))
                slot_stride.append(stride)
                order.extend(cids)
                local.extend(range(len(cids)))
        self.order = np.asarray(order, dtype=np.int64)  # command id at each slot-order position
        self.local = np.asarray(local, dtype=np.int64)  # its position within its slot
        self.slot_start = np.asarray(slot_start, dtype=np.int64)
        self.slot_stride = np.asarray(slot_stride, dtype=np.int64)[:, None]
        self.group_start = np.asarray([s[0] for s in group_slots], dtype=np.int64)
        self.offsets = np.asarray([g.offset for g in groups], dtype=np.int64)[:, None]
        self.width = max((len(s) for s in group_slots), default=1)
        # slots of each group, padded with a slot that holds no command (-1)
        self.slots = np.full((len(groups), self.width), len(slot_start), dtype=np.int64)
        for gi, s in enumerate(group_slots):
            self.slots[gi, : len(s)] = s
        self.layout = Layout(program.variables, [program.commands[c].guard_reads for c in order], GUARD_TABLE_DOMAIN)
        # the guards with the smallest tables first, within TABLE_ENTRIES (all are built on the first batch)
        domains = np.asarray(self.layout.domains, dtype=np.int64)
        fits = np.flatnonzero(self.layout.tabled[:-1])
        fits = fits[np.argsort(domains[fits], kind="stable")]
        fits = fits[np.cumsum(domains[fits]) <= TABLE_ENTRIES]
        self.layout.tabled[:] = False
        self.layout.tabled[fits] = True
        self.tabled = np.sort(fits)
        self.direct = np.flatnonzero(~self.layout.tabled[:-1])
        sizes = np.asarray([self.layout.domains[p] for p in self.tabled], dtype=np.int64)
        self.base = np.zeros(len(order), dtype=np.int64)
        self.base[self.tabled] = np.cumsum(sizes) - sizes
        self.table: np.ndarray | None = None
        self.order_padded = np.r_[self.order, -1]
        self.slot_start_padded = np.r_[self.slot_start, len(order)]
        self.stride_padded = np.r_[self.slot_stride[:, 0], 0]
        self.n_slots = len(slot_start)
        self.slot_of = np.repeat(np.arange(len(slot_start)), np.diff(np.r_[self.slot_start, len(order)]))
        # the tabled guards' rows: per variable read (t-th of each guard), its index and stride for each guard
        lay = self.layout
        self.columns = [(lay.var[self.tabled, t], lay.stride[self.tabled, t, None]) for t in range(lay.var.shape[1])]
        # each guard's table offset, less its variables' lower bounds (times their strides)
        self.columns_base = (self.base[self.tabled] - (lay.lo[self.tabled] * lay.stride[self.tabled]).sum(axis=1))[:, None]

    def guards(self, values: np.ndarray, env: Env) -> np.ndarray:
        """``(commands, n)`` bool, each command's guard (slot order) in the ``n`` states ``values``."""
        n, program = len(values), self.program
        out = np.empty((len(self.order), n), dtype=bool)
        if len(self.tabled):
            if self.table is None:  # every table at once, on the first batch (every guard is needed in every batch)
                parts = []
                for p in self.tabled:
                    grid = self.layout.grid(int(p))
                    parts.append(program.evaluate(program.commands[self.order[p]].guard, program.env(grid), len(grid)))
                self.table = np.concatenate(parts)
            columns = np.ascontiguousarray(values.T)  # (V, n): a variable's values are one row
            rows = np.repeat(self.columns_base, n, axis=1)
            for var, stride in self.columns:
                rows += columns[var] * stride
            out[self.tabled] = self.table[rows]
        for p in self.direct:
            out[p] = program.evaluate(program.commands[self.order[p]].guard, env, n)
        return out

    def enabled(self, values: np.ndarray, env: Env) -> Enabled:
        """See :meth:`~rlverify.models.program.CompiledProgram.enabled`."""
        n = len(values)
        G = self.program.guards(values, env)
        if not len(G) or not n:
            empty = np.zeros(0, dtype=np.int64)
            return Enabled(empty, empty, np.zeros((0, self.width), dtype=np.int64))
        # enabled commands per (slot, state), and the sum of their positions in the slot (the position where one is)
        command, state = np.divmod(np.flatnonzero(G), n)
        key = self.slot_of[command] * n + state
        counts = np.bincount(key, minlength=self.n_slots * n).reshape(self.n_slots, n)
        counts = np.vstack([counts, np.ones((1, n), dtype=counts.dtype)])  # the padding slot: one (no) command
        weights = self.local[command].astype(np.float64)
        position = np.bincount(key, weights=weights, minlength=self.n_slots * n).astype(np.int64).reshape(self.n_slots, n)
        position = np.vstack([position, np.zeros((1, n), dtype=np.int64)])
        per_group = counts[self.slots[:, 0]].astype(np.float64)  # (groups, n) combinations: the slots' product
        for t in range(1, self.width):
            per_group *= counts[self.slots[:, t]]
        row, group = np.nonzero((per_group == 1).T)  # by state, then group (program order)
        slots = self.slots[group]  # (C, width); the padding slot holds no command
        at = position[slots, row[:, None]]
        parts = self.order_padded[self.slot_start_padded[slots] + at]
        kind = self.offsets[group, 0] + (at * self.stride_padded[slots]).sum(axis=1)
        found = Enabled(row.astype(np.int64), kind, parts)
        if (per_group > 1).any():
            found = self._several(found, G, counts, per_group, values)
        return found

    def _several(
        self, single: Enabled, G: np.ndarray, counts: np.ndarray, per_group: np.ndarray, values: np.ndarray
    ) -> Enabled:
        """``single`` with the choices of the (group, state) pairs enabling several combinations, in Storm's order.

        Raises:
            Unsupported: more than :data:`MAX_ENABLED` combinations of one group in one state.
        """
        program = self.program
        if per_group.max() > MAX_ENABLED:
            g, s = np.unravel_index(int(np.argmax(per_group)), per_group.shape)
            raise Unsupported(
                f"label '{program.groups[g].action}' has {int(per_group[g, s]):,} enabled command combinations in "
                f"state {program.describe(values[s])} (at most {MAX_ENABLED:,})"
            )
        counts = counts.astype(np.int64)
        states, kinds, parts = [single.state], [single.kind], [single.parts]
        for g in np.flatnonzero((per_group > 1).any(axis=1)):
            rows = np.flatnonzero(per_group[g] > 1)
            group = program.groups[g]
            slots = self.slots[g, : len(group.modules)]
            tables = [
                G[self.slot_start[sl] : self.slot_start[sl] + len(cids), rows].T
                for sl, cids in zip(slots, group.modules, strict=True)
            ]
            number = per_group[g, rows].astype(np.int64)
            owner = np.repeat(np.arange(len(rows)), number)
            r = np.arange(len(owner)) - np.repeat(np.cumsum(number) - number, number)  # rank within the state
            local = np.empty((len(owner), len(tables)), dtype=np.int64)
            for i in reversed(range(len(tables))):  # mixed radix over the enabled counts, the last module fastest
                cnt = counts[slots[i], rows][owner]
                digit = r % cnt
                r //= cnt
                _, hit = np.nonzero(tables[i])  # enabled commands, by row then command
                first = np.zeros(len(rows) + 1, dtype=np.int64)
                np.cumsum(counts[slots[i], rows], out=first[1:])
                local[:, i] = hit[first[owner] + digit]
            block = np.full((len(owner), self.width), -1, dtype=np.int64)
            for i, cids in enumerate(group.modules):
                block[:, i] = np.asarray(cids, dtype=np.int64)[local[:, i]]
            states.append(rows[owner])
            kinds.append(group.offset + local @ np.asarray(group.strides, dtype=np.int64))
            parts.append(block)
        state, kind = np.concatenate(states), np.concatenate(kinds)
        order = np.lexsort((kind, state))
        return Enabled(state[order], kind[order], np.concatenate(parts)[order])
