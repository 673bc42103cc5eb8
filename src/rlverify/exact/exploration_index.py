"""The merged exploration's growing state: arrays appended to in place, the index from a state's key to its id, and
the choice structure of the states explored so far by guard signature (:mod:`rlverify.exact.merged`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rlverify.arrays import distinct

__all__ = ["DENSE_DOMAIN", "Growing", "Shapes", "StateIndex"]

#: largest domain indexed by a dense array (4 bytes per domain point, touched pages only)
DENSE_DOMAIN = 1 << 27


class Growing:
    """An array appended to in place (``ndarray.resize``: realloc, no second copy of the data)."""

    def __init__(self, dtype: npt.DTypeLike, width: int | None = None, capacity: int = 1 << 16) -> None:
        self.shape_tail = () if width is None else (width,)
        self.data = np.empty((capacity, *self.shape_tail), dtype=dtype)  # rows from n on are never read
        self.n = 0

    def extend(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.data):
            self.data.resize((max(need, len(self.data) + len(self.data) // 16), *self.shape_tail), refcheck=False)
        self.data[self.n : need] = values
        self.n = need

    def final(self) -> np.ndarray:
        self.data.resize((self.n, *self.shape_tail), refcheck=False)
        return self.data


class StateIndex:
    """Key -> state id: a dense array for small domains, sorted runs (searched in numpy) otherwise."""

    def __init__(self, domain: int) -> None:
        self.dense = np.zeros(domain, dtype=np.int32) if domain <= DENSE_DOMAIN else None  # id + 1; 0: unseen
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []
        self.count = 0

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ids ``(N,)`` int32 of ``keys`` (any order, repeats allowed) and the sorted keys seen for the first time
        (their ids are the next ones, in that order). The dense index sorts only the new keys."""
        if self.dense is None:
            uniq, inverse = np.unique(keys, return_inverse=True)
            ids, new = self.ids(uniq)
            return ids[inverse].astype(np.int32), uniq[new]
        ids = self.dense[keys] - 1
        unseen = ids < 0
        if not unseen.any():
            return ids, keys[:0]
        missing = keys[unseen]
        added = distinct(missing)  # all unseen: numbered in key order
        self.dense[added] = np.arange(self.count + 1, self.count + 1 + len(added), dtype=np.int32)
        self.count += len(added)
        ids[unseen] = self.dense[missing] - 1
        return ids, added

    def ids(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ids of sorted unique ``keys``; unseen keys get new ids (in key order). Returns ``(ids, new mask)``."""
        if self.dense is not None:
            ids = self.dense[keys].astype(np.int64) - 1
        else:
            ids = np.full(len(keys), -1, dtype=np.int64)
            for run_keys, run_ids in self.runs:
                pos = np.minimum(np.searchsorted(run_keys, keys), len(run_keys) - 1)
                hit = run_keys[pos] == keys
                ids[hit] = run_ids[pos[hit]]
        new = ids < 0
        fresh = np.arange(self.count, self.count + int(new.sum()), dtype=np.int64)
        ids[new] = fresh
        self.count += len(fresh)
        if self.dense is not None:
            self.dense[keys[new]] = (fresh + 1).astype(np.int32)
        elif len(fresh):
            self.runs.append((keys[new], fresh))
            # merge runs of similar size (a binary counter of sorted runs: O(log n) searches per key)
            while len(self.runs) > 1 and len(self.runs[-2][0]) <= 2 * len(self.runs[-1][0]):
                (k1, i1), (k2, i2) = self.runs.pop(), self.runs.pop()
                k, i = np.concatenate([k2, k1]), np.concatenate([i2, i1])
                order = np.argsort(k, kind="stable")
                self.runs.append((k[order], i[order]))
        return ids, new


class Shapes:
    """The choice structure of the states explored so far, by guard signature: a state's choices (their program
    indices and commands), how the policy's actions map onto them (its choice table's row), whether the policy is
    asked there, and what it leaves untaken depend only on which commands' guards hold there, or on its being terminal
    (a self-loop).
    Signatures are rows of ``uint64`` words (:meth:`~rlverify.models.program.CompiledProgram.guard_signature`; a
    terminal state's: :data:`STOP` alone), found by a hash of the words (the first word itself when there is one) kept
    sorted and then compared word by word; two signatures with one hash set :attr:`broken` (the batches then form their
    structure themselves). The per-signature arrays are indexed by signature id, the per-choice ones from ``start[id]``
    on."""

    STOP = np.uint64(1 << 63)

    def __init__(self, n_labels: int, words: int) -> None:
        self.sorted = np.zeros(0, dtype=np.uint64)
        self.ids = np.zeros(0, dtype=np.int64)
        self.words = np.zeros((0, words), dtype=np.uint64)
        self.broken = False
        self.n_labels = n_labels
        self.seen = np.zeros(0, dtype=np.int64)  # explored states of each signature (batches gathering them)
        self.untaken: list[dict[str, int]] = []  # choice name -> 1 per untaken choice of a state of the signature
        self.untaken_by_label = np.zeros((0, n_labels), dtype=np.int64)
        # per signature: its choices (how many, where in the per-choice arrays), its choice table's row, a deadlock
        self.count = np.zeros(0, dtype=np.int64)
        self.start = np.zeros(0, dtype=np.int64)
        self.decision = np.zeros(0, dtype=bool)
        self.deadlock = np.zeros(0, dtype=bool)
        self.choice_of = np.zeros((0, 0), dtype=np.int64)
        self.kind = np.zeros(0, dtype=np.int64)
        self.parts = np.zeros((0, 0), dtype=np.int64)
        # per choice: its branches (how many, where in ``update``); per branch: the update each command takes
        self.branches = np.zeros(0, dtype=np.int64)
        self.branch_start = np.zeros(0, dtype=np.int64)
        self.update = np.zeros((0, 0), dtype=np.int16)

    @staticmethod
    def hash(words: np.ndarray) -> np.ndarray:
        """``(B,)`` uint64 hashes of signatures ``words`` ``(B, W)`` (the word itself when ``W`` is 1)."""
        h = words[:, 0].copy()
        for w in range(1, words.shape[1]):  # uint64 arithmetic wraps around
            h *= np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(29)
            h += words[:, w]
        return h

    def find(self, h: np.ndarray, words: np.ndarray) -> np.ndarray:
        """``(B,)`` int64 ids of the signatures ``words`` ``(B, W)`` with hashes ``h`` ``(B,)``; -1 where not seen."""
        if not len(self.sorted):
            return np.full(len(h), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.sorted, h), len(self.sorted) - 1)
        ids = self.ids[pos]
        same = (self.sorted[pos] == h) & (self.words[ids] == words).all(axis=1)
        return np.where(same, ids, -1)

    def fresh(self, h: np.ndarray) -> bool:
        """Whether the hashes ``h`` (distinct) are all new."""
        if not len(self.sorted):
            return True
        pos = np.minimum(np.searchsorted(self.sorted, h), len(self.sorted) - 1)
        return not (self.sorted[pos] == h).any()

    def add(
        self,
        signature: np.ndarray,
        words: np.ndarray,
        row_groups: np.ndarray,
        kind: np.ndarray,
        parts: np.ndarray,
        choice_of: np.ndarray,
        decision: np.ndarray,
        deadlock: np.ndarray,
        untaken: list[dict[str, int]],
        untaken_by_label: np.ndarray,
        branches: np.ndarray,
        update: np.ndarray,
    ) -> None:
        """Signatures ``(R,)`` (hashes, new and distinct; ``words`` ``(R, W)``), with their states' structure
        (``row_groups`` ``(R + 1,)`` over the per-choice arrays; the per-state ones ``(R,)``; ``choice_of`` ``(R, A)``
        local to the state's row; ``branches`` ``(C,)`` and ``update`` ``(NB, K)``: the choices'
        :meth:`~rlverify.models.program.CompiledProgram.branch_structure`)."""
        n, R = len(self.seen), len(signature)
        self.sorted = np.concatenate([self.sorted, signature])
        self.ids = np.concatenate([self.ids, np.arange(n, n + R)])
        self.words = np.concatenate([self.words, words])
        order = np.argsort(self.sorted, kind="stable")
        self.sorted, self.ids = self.sorted[order], self.ids[order]
        self.count = np.concatenate([self.count, np.diff(row_groups)])
        self.start = np.concatenate([self.start, len(self.kind) + row_groups[:-1]])
        self.decision = np.concatenate([self.decision, decision])
        self.deadlock = np.concatenate([self.deadlock, deadlock])
        self.choice_of = np.concatenate([self.choice_of.reshape(n, choice_of.shape[1]), choice_of.astype(np.int64)])
        self.kind = np.concatenate([self.kind, kind])
        self.parts = np.concatenate([self.parts.reshape(-1, parts.shape[1]), parts])
        self.branch_start = np.concatenate([self.branch_start, len(self.update) + np.cumsum(branches) - branches])
        self.branches = np.concatenate([self.branches, branches])
        self.update = np.concatenate([self.update.reshape(-1, update.shape[1]), update])
        self.seen = np.concatenate([self.seen, np.zeros(R, dtype=np.int64)])
        self.untaken += untaken
        self.untaken_by_label = np.concatenate([self.untaken_by_label, untaken_by_label])
