"""The induced chain of a PRISM MDP built without building the MDP (strategy ``merged``).

States are explored breadth-first in batches. For each batch the program's choices are enumerated
in numpy (:mod:`rlverify.models.program`), the policy is asked once for all the batch's decision
states, and each state's choices are merged into its chain row as they are generated:
``P(s, s') = sum_a pi(a|s) T(s, a, s')``. Only successors of choices the policy takes are explored,
so the chain covers exactly the policy-reachable states, and only the chain's arrays (int32 target,
float64 probability: 12 bytes per transition) are ever held; the MDP's transitions exist one batch
at a time.

What the policy sees and how mass on unavailable actions is handled is the one core of
:mod:`rlverify.models.dynamics` (each batch is an :class:`~rlverify.models.ExplicitModel` fragment
given to :func:`~rlverify.models.dynamics.choice_table` and
:func:`~rlverify.exact.induced.choice_weights`), as with the ``full`` strategy. Storm's conventions
are kept: property-directed terminal states (Storm's rules: a state satisfying the target of
``F``/``U`` is not expanded, nor one violating the left side of ``U``) and deadlocks get a self-loop;
labels, valuations and the property's expression atoms have Storm's names (taken from Storm's build
of the initial state alone), so Storm evaluates the property's state formulas on the chain as on the
MDP. Cross-checked against the ``full`` strategy in ``tests/exact/test_merged.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from rlverify.arrays import distinct
from rlverify.errors import MemoryBudgetError, ModelError, ModelTooLargeError
from rlverify.exact.induced import STALLED_LABEL, ChoiceWeights, ask_features, weigh, weights_at
from rlverify.exact.ondisk import ChainWriter, RowBlocks, prepare
from rlverify.models.commands import is_command_name
from rlverify.models.dynamics import choice_name, choice_table, forced_start_message
from rlverify.models.explicit import (
    ExplicitModel,
    export_umb,
    format_bytes,
    memory_limit,
    read_umb,
    resident_bytes,
)
from rlverify.models.program import (
    CompiledProgram,
    Enabled,
    Unsupported,
    compile_expression,
    compiled,
    terminal_functions,
)
from rlverify.models.properties import Property
from rlverify.models.storm import storm_message
from rlverify.models.storm_build import ambiguous_choices
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy

__all__ = ["MergedChain", "StormProbe", "Unsupported", "merged_chain"]

#: branches generated per batch (bounds the batch's temporary arrays: ~40 bytes per branch)
BATCH_BRANCHES = 1 << 19
#: states in the first batch (before the branches per state are measured) and at most in any batch
FIRST_BATCH = 256
BATCH_STATES = 1 << 16
#: (command, state) pairs a batch's guards are evaluated on at most (bounds arrays of ~8 bytes a pair)
BATCH_GUARDS = 1 << 22
#: largest domain indexed by a dense array (4 bytes per domain point, touched pages only)
DENSE_DOMAIN = 1 << 27
#: most commands a program may have for its batches to gather their choice structure by guard signature (a bit per
#: command; :class:`_Shapes`): beyond, every batch forms it
SHAPE_COMMANDS = 63 * 32
#: states whose labels are evaluated at a time (after the exploration)
LABEL_CHUNK = 1 << 20


@dataclass
class MergedChain:
    """The chain and what building it measured.

    Attributes:
        chain: the induced DTMC (state 0 initial; a ``stalled`` sink last when stalled mass is reachable).
        decision_states: how many states the policy was asked about; policy_seconds: time in the policy.
        untaken: choice name -> number of states offering a choice the policy names no action for.
        start_note: the forced-start note of :func:`~rlverify.models.dynamics.forced_start_message`, or None.
        mdp_branches: branches of the MDP's choices generated (the MDP's transitions before merging).
    """

    chain: ExplicitModel
    decision_states: int = 0
    policy_seconds: float = 0.0
    untaken: dict[str, int] = field(default_factory=dict)
    start_note: str | None = None
    mdp_branches: int = 0


class _Growing:
    """An array appended to in place (``ndarray.resize``: realloc, no second copy of the data)."""

    def __init__(self, dtype: Any, width: int | None = None, capacity: int = 1 << 16) -> None:
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


class _StateIndex:
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


class _Shapes:
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


def _atoms(formula: Any) -> list[Any]:
    """Storm formulas of the property's atomic expressions (for the expression labels Storm adds)."""
    import stormpy

    out: list[Any] = []

    def walk(f: Any) -> None:
        if isinstance(f, stormpy.logic.AtomicExpressionFormula):
            out.append(f.get_expression())
            return
        for attr in ("subformula", "left_subformula", "right_subformula"):
            sub = getattr(f, attr, None)
            if sub is not None and not callable(sub):
                walk(sub)

    walk(formula)
    return out


def _probe(model: SymbolicModel, prop: Property) -> ExplicitModel:
    """Storm's build of the initial state alone (every action masked): Storm's names and valuation layout."""
    import tempfile
    from pathlib import Path

    import stormpy
    import stormpy.developer as dev

    opts = stormpy.BuilderOptions([prop.storm])
    opts.set_build_state_valuations()
    opts.set_build_choice_labels()
    opts.set_build_all_labels()
    mask = dev.StateValuationFunctionMask[float](lambda valuation, action: False)
    try:
        storm_model = dev.make_explicit_model_builder[float](
            model.description(), opts, mask, dev.ExplicitModelBuilderOptions[float]()
        ).build()
    except RuntimeError as exc:
        raise Unsupported(f"Storm's build of the initial state failed: {storm_message(exc)}") from None
    with tempfile.TemporaryDirectory(prefix="rlverify-") as tmp:
        path = Path(tmp) / "probe.umb"
        export_umb(storm_model, path)
        return read_umb(path)


class StormProbe:
    """:func:`_probe` in a thread of its own, started before the caller's checks and the program's compile (Storm's
    build releases the GIL): :meth:`result` joins it, raising what the probe raised.

    Joined before the exploration begins, so that none of its allocations or frees interleave with the exploration's
    (glibc then kept the exploration's freed arrays resident: issue 23's closing notes).
    """

    def __init__(self, model: SymbolicModel, prop: Property) -> None:
        import threading

        self._out: ExplicitModel | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(model, prop), name="rlverify-storm-probe", daemon=True)
        self._thread.start()

    def _run(self, model: SymbolicModel, prop: Property) -> None:
        try:
            self._out = _probe(model, prop)
        except BaseException as exc:  # re-raised by result(), in the caller's thread
            self._error = exc

    def wait(self) -> None:
        """Join the thread, whatever it raised: it must not outlive the caller's call (a thread still inside Storm's
        C++ when the interpreter exits aborts the process: ``terminate called without an active exception``)."""
        self._thread.join()

    def result(self) -> ExplicitModel:
        self.wait()
        if self._error is not None:
            raise self._error
        assert self._out is not None
        return self._out


def merged_chain(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    *,
    mode: str,
    unavailable: str,
    max_states: int | None = None,
    max_memory: int | None = None,
    progress: Callable[[str], None] | None = None,
    chain_dir: str | None = None,
    force: bool = False,
    probe: StormProbe | None = None,
) -> MergedChain:
    """The chain ``policy`` induces on a PRISM MDP, explored and merged in batches (see the module docstring).

    Raises:
        Unsupported: the program or property uses what :mod:`rlverify.models.program` does not evaluate
            (the caller builds with Storm instead).
        ModelTooLargeError: more than ``max_states`` policy-reachable states.
        MemoryBudgetError: resident memory above ``max_memory`` (None: the default guard,
            :func:`~rlverify.models.explicit.memory_limit`; checked after every batch).
        ModelError: an assignment out of range or probabilities not summing to 1 (as Storm refuses them).
        PolicyError: as with the ``full`` strategy (choices no policy can pick, renormalising nothing).
        OptionError: ``chain_dir`` is not a new or empty directory (``force``: it may hold an earlier chain's files,
            replaced) or cannot be written.

    With ``chain_dir`` the chain's rows are written to files there as they are explored
    (:mod:`rlverify.exact.ondisk`) and the chain's ``transitions`` is a :class:`~rlverify.exact.ondisk.RowBlocks`
    reading them back: memory per state, not per transition. ``probe``: Storm's build of the initial state, started
    by the caller for this model and property (:class:`StormProbe`; None: built here).
    """
    if model.kind != "prism":
        raise Unsupported("JANI models are built by Storm")
    if prop.operator != "P":
        raise Unsupported("reward properties need Storm's reward models")
    writer = None if chain_dir is None else ChainWriter(*prepare(chain_dir, force=force))
    try:
        exploration = _Exploration(
            model, prop, policy, mode=mode, unavailable=unavailable, say=progress or (lambda msg: None), probe=probe
        )
        exploration.writer = writer
        exploration.explore(max_states, max_memory)
        return exploration.result()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise


class _Exploration:
    """The breadth-first exploration of the policy's chain: states, their merged rows and labels, grown per batch."""

    def __init__(
        self,
        model: SymbolicModel,
        prop: Property,
        policy: Policy,
        *,
        mode: str,
        unavailable: str,
        say: Callable[[str], None],
        probe: StormProbe | None = None,
    ) -> None:
        self.model, self.prop, self.policy, self.mode, self.unavailable, self.say = (
            model,
            prop,
            policy,
            mode,
            unavailable,
            say,
        )
        self.program = program = compiled(model.program, model.shown)
        self.probe = _probe(model, prop) if probe is None else probe.result()
        self.names = [v.name for v in program.variables]
        missing = [v for v in self.probe.variables if v not in program.index]
        if missing:
            raise Unsupported(f"Storm's states have variables {missing} the program does not declare")
        self.storm_cols = [program.index[v] for v in self.probe.variables]
        self.label_plan = _label_plan(program, self.probe, prop)
        self.terminal = terminal_functions(prop.storm.get_raw_formula(), program.label_functions.get, program.by_name)
        self.actions = ("", *program.actions)
        # each choice's action by its group; Storm's self-loop at terminal states and deadlocks (choice J) has none
        self.action_of_group = np.array([self.actions.index(g.action) for g in program.groups] + [0], dtype=np.int32)
        self.J = program.num_choices
        self.index = _StateIndex(program.domain)
        self.state_keys = _Growing(np.int64)
        self.values = _Growing(np.int64, len(self.names))
        self.init_keys = program.keys(program.initial)  # sorted and unique (an init block's are found in key order)
        if not len(self.init_keys):
            raise ModelError(f"{model.shown}: no state satisfies the init ... endinit block")
        self.index.ids(distinct(self.init_keys))
        self.state_keys.extend(self.init_keys)
        self.values.extend(program.initial)
        self.targets = _Growing(np.int32, capacity=1 << 20)
        self.probs = _Growing(np.float64, capacity=1 << 20)
        #: the chain's rows go to files instead of ``targets``/``probs`` (``--chain-dir``)
        self.writer: ChainWriter | None = None
        self.row_lengths = _Growing(np.int64)
        self.deadlocks = _Growing(bool)  # Storm's ``deadlock`` label; the others are evaluated on all states at the end
        self.untaken: dict[str, int] = {}
        self.untaken_by_label: dict[str, int] = {}
        # without command names in the policy, Storm's build names choices by label unless some state is ambiguous
        self.by_label = not any(is_command_name(a) for a in policy.actions)
        self.start_note: str | None = None
        self.n_decision = 0
        self.policy_seconds = 0.0
        self.branches_total = 0
        self.memory_read = (-np.inf, 0)  # when resident memory was last read, and the transitions then
        self.any_stalled = False
        self.feature_columns: list[int] | None = None
        #: the choice structure by guard signature (None beyond SHAPE_COMMANDS: every batch forms it itself)
        words = max(1, -(-len(program.commands) // 63))
        self.shapes = _Shapes(len(self.actions), words) if len(program.commands) <= SHAPE_COMMANDS else None

    def explore(self, max_states: int | None, max_memory: int | None) -> None:
        """Explore batch by batch until no new state is found (refusing beyond ``max_states`` or ``max_memory``)."""
        memory_bound, memory_how = memory_limit(max_memory)
        lo = 0
        last_report = time.perf_counter()
        while lo < self.state_keys.n:
            hi = min(self.state_keys.n, lo + self._batch_size(lo))
            self._batch(lo, hi)
            lo = hi
            self._guard(lo, max_states, memory_bound, memory_how)
            if time.perf_counter() - last_report > 2.0:
                self.say(
                    f"exploring and merging: {lo:,} of {self.state_keys.n:,} states so far, {self.transitions:,} transitions"
                )
                last_report = time.perf_counter()

    def _batch_size(self, explored: int) -> int:
        """States in the next batch: :data:`BATCH_BRANCHES` branches at the rate of the states explored so far (the
        MDP's branches of the choices the policy takes), at most :data:`BATCH_STATES` states and
        :data:`BATCH_GUARDS` guard evaluations."""
        if explored == 0:
            return FIRST_BATCH
        rate = max(1.0, self.branches_total / explored)
        most = min(BATCH_STATES, max(1, BATCH_GUARDS // max(1, len(self.program.commands))))
        return int(max(1, min(most, BATCH_BRANCHES // rate)))

    def _batch(self, lo: int, hi: int) -> None:
        """States ``lo:hi``: their choices, the policy's weights, their merged rows, their new successors, labels."""
        B = hi - lo
        vals = self.values.data[lo:hi].copy()
        keys = self.state_keys.data[lo:hi].copy()
        env = self.program.env(vals)
        shaped = None
        if self.shapes is not None and not self.shapes.broken and lo >= len(self.init_keys):
            shaped = self._shaped(vals, keys, env)
        at = None
        if shaped is not None:
            choices, deadlock, cw, at = shaped
        else:  # the initial states (their lone commands that loop back and the forced-start note need the states)
            fragment, choices, deadlock = self._fragment(vals, keys, env, max(0, min(hi, len(self.init_keys)) - lo))
            cw = self._weigh(fragment, lo)
        row, key, w = self._branches(cw, choices, vals, keys, at)
        row, key, w = self._merged_rows(row, key, w, B)
        self._append(row, key, w, B)
        self.deadlocks.extend(deadlock)

    def _fragment(
        self, vals: np.ndarray, keys: np.ndarray, env: Any, n_init: int
    ) -> tuple[ExplicitModel, Enabled, np.ndarray]:
        """The states ``vals`` (the first ``n_init`` initial) as an MDP fragment (the one dynamics core reads it), its
        choices (``kind`` ``J``: Storm's self-loop at terminal states and deadlocks, last in program order) and the
        deadlocks ``(B,)`` bool."""
        program, J, B = self.program, self.J, len(vals)
        stop = np.zeros(B, dtype=bool)
        for fn, value in self.terminal:
            stop |= program.evaluate(fn, env, B) == value
        if stop.any():
            active = np.flatnonzero(~stop)
            found = program.enabled(vals[active])
            state = active[found.state]
        else:
            found = program.enabled(vals, env)
            state = found.state
        count = np.bincount(state, minlength=B)
        deadlock = (count == 0) & ~stop
        row_groups = np.zeros(B + 1, dtype=np.int64)
        np.cumsum(np.maximum(count, 1), out=row_groups[1:])
        C = int(row_groups[-1])
        # the enabled choices in their rows (state order, then program order); one self-loop in each row without
        first = np.cumsum(count) - count
        pos = row_groups[state] + np.arange(len(state)) - first[state]
        choices = Enabled(
            np.repeat(np.arange(B), np.maximum(count, 1)),
            np.full(C, J, dtype=np.int64),
            np.full((C, found.parts.shape[1]), -1, dtype=np.int64),
        )
        choices.kind[pos] = found.kind
        choices.parts[pos] = found.parts
        group = np.full(C, len(program.groups), dtype=np.int64)
        group[pos] = program.group_of(found.kind)
        kinds, local = np.unique(found.kind, return_inverse=True)
        commands = np.zeros(C, dtype=np.int32)
        commands[pos] = local.reshape(-1) + 1
        fragment = ExplicitModel(
            model_type="mdp",
            row_groups=row_groups,
            transitions=sp.csr_matrix(  # int32 indices: scipy's constructor converts int64 ones (5x its cost)
                (
                    np.ones(C),
                    self._loops(choices, row_groups, n_init, vals, keys).astype(np.int32),
                    np.arange(C + 1, dtype=np.int32),
                ),
                shape=(C, B + 1),
            ),
            choice_actions=self.action_of_group[group],
            action_names=self.actions,
            variables=tuple(self.names),
            valuations=vals,
            initial_states=np.arange(n_init),
            choice_commands=commands,
            command_names=("", *(program.choice_name(int(k)) for k in kinds)),
        )
        return fragment, choices, deadlock

    def _shaped(
        self, vals: np.ndarray, keys: np.ndarray, env: Any
    ) -> tuple[Enabled, np.ndarray, ChoiceWeights, np.ndarray] | None:
        """The batch's choices, deadlocks and policy weights (as :meth:`_fragment` and :meth:`_weigh` give them) with
        the choice structure gathered from :class:`_Shapes` by each state's guard signature; the structure of a
        signature not seen before is made by :meth:`_fragment` and :func:`~rlverify.models.dynamics.choice_table` on
        the batch's first state showing it (so a model they refuse is refused naming the same state). None (and the
        shapes broken) where two signatures share a hash."""
        program, shapes, B = self.program, self.shapes, len(vals)
        assert shapes is not None
        stop = np.zeros(B, dtype=bool)
        for fn, value in self.terminal:
            stop |= program.evaluate(fn, env, B) == value
        words = program.guard_signature(vals, env, keys)
        words[stop] = 0
        words[stop, 0] = _Shapes.STOP
        signature = shapes.hash(words)
        sid = shapes.find(signature, words)
        if (sid < 0).any():
            new = np.flatnonzero(sid < 0)
            _, first = np.unique(signature[new], return_index=True)
            reps = np.sort(new[first])
            if not shapes.fresh(signature[reps]):
                shapes.broken = True
                return None
            self._add_shapes(vals[reps], keys[reps], signature[reps], words[reps])
            sid = shapes.find(signature, words)
            if (sid < 0).any():  # two new signatures with one hash
                shapes.broken = True
                return None
        shapes.seen += np.bincount(sid, minlength=len(shapes.seen))
        count = shapes.count[sid]
        row_groups = np.zeros(B + 1, dtype=np.int64)
        count.cumsum(out=row_groups[1:])
        start = row_groups[:-1]
        C = int(row_groups[-1])
        state = np.arange(B).repeat(count)
        at = (shapes.start[sid] - start).repeat(count) + np.arange(C)  # each choice's entry in the shapes' arrays
        choices = Enabled(state, shapes.kind[at], shapes.parts[at])
        # the policy asked on the decision states, its weights on their choices (as weigh on the batch's fragment)
        states = shapes.decision[sid].nonzero()[0]
        local = shapes.choice_of[sid[states]]
        choice_of = np.where(local >= 0, local + start[states, None], -1)
        features = vals[states][:, self._feature_columns()].astype(np.float64) if len(states) else None
        probs, seconds = ask_features(self.policy, features, len(states))
        cw = weights_at(
            probs,
            states,
            choice_of,
            state,
            B,
            mode=self.mode,
            unavailable=self.unavailable,
            where=lambda i: self._describe(vals, int(states[i])),
            describe=lambda s: self._describe(vals, s),
        )
        self.policy_seconds += seconds
        self.n_decision += len(states)
        return choices, shapes.deadlock[sid], cw, at

    def _feature_columns(self) -> list[int]:
        """The program-order columns of the policy's features (ValueError naming a feature the states lack)."""
        if self.feature_columns is None:
            self.feature_columns = [self.names.index(f) for f in self.policy.features]
        return self.feature_columns

    def _describe(self, vals: np.ndarray, s: int) -> dict[str, int]:
        """Variable name -> value of row ``s`` of ``vals`` (for messages, as ``ExplicitModel.valuation_dict``)."""
        return {v: int(x) for v, x in zip(self.names, vals[s], strict=True)}

    def _add_shapes(self, vals: np.ndarray, keys: np.ndarray, signature: np.ndarray, words: np.ndarray) -> None:
        """The structure of states ``vals`` (each the first of its new signature, in batch order) made by the one path
        and added to :attr:`shapes`: their choices, choice table, what they leave untaken."""
        shapes = self.shapes
        assert shapes is not None
        fragment, choices, deadlock = self._fragment(vals, keys, self.program.env(vals), 0)
        table = choice_table(fragment, self.policy.actions)  # refuses as on the whole batch (its first such state)
        if self.by_label and ambiguous_choices(fragment):
            self.by_label = False
        cs = fragment.choice_states()
        R, L = len(vals), len(self.actions)
        untaken = (table.columns < 0) & table.decision[cs]
        by_label = np.bincount(cs[untaken] * L + fragment.choice_actions[untaken], minlength=R * L).reshape(R, L)
        names: list[dict[str, int]] = [{} for _ in range(R)]  # as ChoiceTable.untaken names them, state by state
        for c in np.flatnonzero(untaken):
            name = choice_name(fragment, int(c))
            names[cs[c]][name] = names[cs[c]].get(name, 0) + 1
        rows = fragment.row_groups[:-1]
        shapes.add(
            signature,
            words,
            fragment.row_groups,
            choices.kind,
            choices.parts,
            np.where(table.choice_of >= 0, table.choice_of - rows[:, None], -1),
            table.decision,
            deadlock,
            names,
            by_label,
            *self.program.branch_structure(choices.parts),
        )

    def _loops(self, choices: Enabled, row_groups: np.ndarray, n_init: int, vals: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """``(C,)`` the fragment's dummy column of each choice: the transitions only say which choices loop back
        (Storm's self-loops, and lone commands of the initial states that loop back: the forced-start note needs
        them); every other choice points elsewhere (column ``B``)."""
        B = len(row_groups) - 1
        c_state, c_kind = choices.state, choices.kind
        dummy_cols = np.where(c_kind == self.J, c_state, B)
        lone = np.flatnonzero((c_state < n_init) & (c_kind < self.J) & (np.diff(row_groups)[c_state] == 1))
        if len(lone):
            br = self.program.branches(choices.parts[lone], c_state[lone], vals, keys)
            owner = np.repeat(np.arange(len(lone)), br.number)
            away = (br.probs > 0) & (br.keys != keys[c_state[lone]][owner])
            loops = np.ones(len(lone), dtype=bool)
            loops[owner[away]] = False
            dummy_cols[lone[loops]] = c_state[lone[loops]]
        return dummy_cols

    def _weigh(self, fragment: ExplicitModel, lo: int) -> ChoiceWeights:
        """The policy's weights on the batch's choices (asked once on its decision states), and what it leaves
        untaken; the forced-start note from the first batch (the initial states)."""
        cw, table, seconds = weigh(fragment, self.policy, mode=self.mode, unavailable=self.unavailable)
        self.policy_seconds += seconds
        self.n_decision += len(cw.decision_states)
        for name, n in table.untaken().items():
            self.untaken[name] = self.untaken.get(name, 0) + n
        if self.by_label:  # name untaken choices as the full strategy does: by label, unless labels are ambiguous
            if ambiguous_choices(fragment):
                self.by_label = False
            else:  # no state repeats a label: the table's untaken choices, counted by label
                untaken = (table.columns < 0) & table.decision[fragment.choice_states()]
                counts = np.bincount(fragment.choice_actions[untaken], minlength=len(self.actions))
                for a in np.flatnonzero(counts):
                    name = self.actions[a] or "(unlabelled)"
                    self.untaken_by_label[name] = self.untaken_by_label.get(name, 0) + int(counts[a])
        if lo == 0:
            self.start_note = forced_start_message(table, self.prop.bound)
        return cw

    def _branches(
        self, cw: ChoiceWeights, choices: Enabled, vals: np.ndarray, keys: np.ndarray, at: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(row, successor key, mass)`` of every branch of the choices the policy takes (key -1: the sink), in
        the order (row, choice, branch); parallel branches are summed in this order by :meth:`_merged_rows`. ``at``:
        each choice's entry in :attr:`shapes` (its branch structure there), or None."""
        taken = cw.weights > 0
        c_state, c_kind = choices.state, choices.kind
        pick = (taken & (c_kind < self.J)).nonzero()[0]
        if at is None:
            br = self.program.branches(choices.parts[pick], c_state[pick], vals, keys)
        else:
            assert self.shapes is not None
            shapes, entry = self.shapes, at[pick]
            number = shapes.branches[entry]
            first = number.cumsum() - number
            where = (shapes.branch_start[entry] - first).repeat(number) + np.arange(int(number.sum()))
            br = self.program.structured_branches(choices.parts[pick], c_state[pick], vals, keys, number, shapes.update[where])
        self.branches_total += len(br.keys)
        rows, succ, mass = (
            [c_state[pick].repeat(br.number)],
            [br.keys],
            [br.probs * cw.weights[pick].repeat(br.number)],
        )
        loops = (taken & (c_kind == self.J)).nonzero()[0]
        rows.append(c_state[loops])
        succ.append(keys[c_state[loops]])
        mass.append(cw.weights[loops])
        stalled = (cw.stalled > 0).nonzero()[0]
        if len(stalled):
            self.any_stalled = True
            rows.append(stalled)
            succ.append(np.full(len(stalled), -1, dtype=np.int64))
            mass.append(cw.stalled[stalled])
        row, key, w = np.concatenate(rows), np.concatenate(succ), np.concatenate(mass)
        positive = w > 0
        if positive.all():
            return row, key, w
        return row[positive], key[positive], w[positive]

    def _merged_rows(
        self, row: np.ndarray, key: np.ndarray, w: np.ndarray, B: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Parallel branches merged: sorted by (row, key), each run's mass summed in the order given."""
        domain, N = self.program.domain, len(row)
        if domain < (1 << 62) // (B + 1):
            composite = row * (domain + 1) + (key + 1)
            if N and int(composite.max()) < ((1 << 62) - N) // N:  # unique sort keys: (composite, position)
                tagged = np.sort(composite * N + np.arange(N))
                composite, order = np.divmod(tagged, N)
            else:
                order = np.argsort(composite, kind="stable")
                composite = composite[order]
            starts = _run_starts(composite)
            w = np.add.reduceat(w[order], starts) if len(starts) else w[:0]
            row, key = np.divmod(composite[starts], domain + 1)
            return row, key - 1, w
        order = np.lexsort((key, row))
        rk = np.stack([row[order], key[order]])
        starts = np.flatnonzero(np.r_[True, (rk[:, 1:] != rk[:, :-1]).any(axis=0)])
        w = np.add.reduceat(w[order], starts) if len(starts) else w[:0]
        return row[order][starts], key[order][starts], w

    def _append(self, row: np.ndarray, key: np.ndarray, w: np.ndarray, B: int) -> None:
        """The batch's merged rows appended; successors seen for the first time become new states."""
        self.row_lengths.extend(np.bincount(row, minlength=B))
        real = key >= 0
        ids, added = self.index.lookup(key[real])
        if len(added):
            self.state_keys.extend(added)
            self.values.extend(self.program.values(added))
        tgt = np.full(len(key), _SINK, dtype=np.int32)
        tgt[real] = ids
        if self.writer is not None:
            self.writer.append(row, tgt, w, B)
        else:
            self.targets.extend(tgt)
            self.probs.extend(w)

    @property
    def transitions(self) -> int:
        """The chain's transitions so far."""
        return self.targets.n if self.writer is None else self.writer.n

    def _labels(self, values: np.ndarray) -> dict[str, np.ndarray]:
        """``(S,)`` bool per label of :attr:`label_plan` on the explored states ``values`` ``(S, V)`` (program order),
        evaluated :data:`LABEL_CHUNK` states at a time (bounds the temporaries)."""
        S = len(values)
        deadlock = self.deadlocks.final()
        labels: dict[str, np.ndarray] = {}
        for k_, plan in self.label_plan:
            if plan == "init":
                labels[k_] = np.zeros(S, dtype=bool)
                labels[k_][: len(self.init_keys)] = True
            elif plan == "deadlock":
                labels[k_] = deadlock
            else:
                labels[k_] = np.empty(S, dtype=bool)
                for a in range(0, S, LABEL_CHUNK):
                    part = values[a : a + LABEL_CHUNK]
                    labels[k_][a : a + len(part)] = self.program.evaluate(plan, self.program.env(part), len(part))
        return labels

    def _guard(self, lo: int, max_states: int | None, memory_bound: int | None, memory_how: str) -> None:
        """Refuse beyond int32 indices, ``max_states`` states or the memory bound (after each batch; resident memory
        after a batch adding many transitions or taking time)."""
        n = self.state_keys.n
        if n >= _INT32_MAX - 1:
            raise ModelTooLargeError(
                f"{self.model.shown}: the policy reaches more than 2**31 states (int32 indices); verify a smaller model"
            )
        if max_states is not None and n > max_states:
            raise ModelTooLargeError(
                f"{self.model.shown}: the policy reaches more than --max-states={max_states} states (exploration stopped "
                f"at {n:,}); raise --max-states"
            )
        if memory_bound is None:
            return
        # resident memory read (a file) after a batch that added 2**16 transitions or ended 50 ms after the last read
        now = time.perf_counter()
        if now - self.memory_read[0] < 0.05 and self.transitions - self.memory_read[1] < 1 << 16:
            return
        self.memory_read = (now, self.transitions)
        if resident_bytes() > memory_bound:
            raise MemoryBudgetError(
                f"{memory_how}: exploring the policy's chain took {format_bytes(resident_bytes())} "
                f"after {lo:,} states and {self.transitions:,} transitions; raise --max-memory, or verify a smaller model",
                phase="explore",
                estimate=resident_bytes(),
                limit=memory_bound,
            )

    def result(self) -> MergedChain:
        """The explored chain (its arrays handed over, not copied) and what exploring it measured."""
        S = self.state_keys.n
        del self.index, self.state_keys
        M = self._matrix(S) if self.writer is None else self.writer.finish(S, self.any_stalled)
        chain = self._chain(M, S)
        if self.shapes is not None:  # the batches that gathered their structure: per signature, times its states
            shapes = self.shapes
            for i in np.flatnonzero(shapes.seen):
                for name, n in shapes.untaken[i].items():
                    self.untaken[name] = self.untaken.get(name, 0) + int(shapes.seen[i]) * n
            counts = shapes.seen @ shapes.untaken_by_label
            for a in np.flatnonzero(counts):
                name = self.actions[a] or "(unlabelled)"
                self.untaken_by_label[name] = self.untaken_by_label.get(name, 0) + int(counts[a])
        untaken = self.untaken_by_label if self.by_label else self.untaken
        return MergedChain(
            chain=chain,
            decision_states=self.n_decision,
            policy_seconds=self.policy_seconds,
            untaken=dict(sorted(untaken.items())),
            start_note=self.start_note,
            mdp_branches=self.branches_total,
        )

    def _matrix(self, S: int) -> sp.csr_matrix:
        """``(n, n)`` CSR of the merged rows (``n = S`` plus the ``stalled`` sink when stalled mass was found)."""
        n = S + int(self.any_stalled)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(self.row_lengths.final(), out=indptr[1 : S + 1])
        data = self.probs.final()
        indices = self.targets.final()
        if self.any_stalled:
            indices[indices == _SINK] = S
            indptr[-1] = indptr[-2] + 1
            indices = _append(indices, np.int32(S))
            data = _append(data, 1.0)
        if indptr[-1] < np.iinfo(np.int32).max:
            indptr = indptr.astype(np.int32)
        M = sp.csr_matrix((data, indices, indptr), shape=(n, n), copy=False)
        M.has_sorted_indices = False
        M.sort_indices()  # rows were merged by key; sort them by state index (in place)
        row_sums = M @ np.ones(n)
        if np.abs(row_sums - 1.0).max(initial=0.0) > 1e-6:
            bad = int(np.argmax(np.abs(row_sums - 1.0)))
            raise AssertionError(f"internal: merged chain row {bad} sums to {row_sums[bad]!r}")
        return M

    def _chain(self, M: sp.csr_matrix | RowBlocks, S: int) -> ExplicitModel:
        """The chain around ``M``: Storm's variable order, labels and valuation layout (from the probe)."""
        n = M.shape[0]
        program_values = self.values.final()
        labels = self._labels(program_values)
        vals = program_values[:, self.storm_cols]
        aliases = dict(self.probe.label_aliases)
        if self.any_stalled:
            vals = np.vstack([vals, np.zeros((1, vals.shape[1]), dtype=vals.dtype)])
            labels = {k_: np.r_[m, [False]] for k_, m in labels.items()}
            labels[STALLED_LABEL] = np.r_[np.zeros(S, dtype=bool), [True]]
            aliases[STALLED_LABEL] = STALLED_LABEL
        return ExplicitModel(
            model_type="dtmc",
            row_groups=np.arange(n + 1, dtype=np.int64),
            # on disk: the row blocks, read by the checks (which take ``@``, ``shape``, ``nnz``, ``indptr``)
            transitions=cast(sp.csr_matrix, M),
            choice_actions=np.zeros(n, dtype=np.int32),
            action_names=("",),
            variables=self.probe.variables,
            valuations=vals,
            initial_states=np.arange(len(self.init_keys)),
            labels=labels,
            label_aliases=aliases,
            state_rewards={},
            choice_rewards={},
            valuation_spec=self.probe.valuation_spec,  # the records are encoded from the valuations when written
        )


_INT32_MAX = int(np.iinfo(np.int32).max)
#: placeholder target of stalled mass, replaced by the sink's index at the end
_SINK = np.int32(-1)


def _label_plan(program: CompiledProgram, probe: ExplicitModel, prop: Property) -> list[tuple[str, Any]]:
    """``(UMB key, function or "init"/"deadlock")`` per label of Storm's build: the program's labels, Storm's own,
    and the expression labels Storm adds for the property's atoms."""
    atoms = {str(e): compile_expression(e, program.by_name) for e in _atoms(prop.storm.get_raw_formula())}
    plan: list[tuple[str, Any]] = []
    for key, alias in probe.label_aliases.items():
        if alias in ("init", "deadlock"):
            plan.append((key, alias))
        elif alias in program.label_functions:
            plan.append((key, program.label_functions[alias]))
        elif alias in atoms:
            plan.append((key, atoms[alias]))
        else:  # an atom the walk did not reach (under X, say): Storm names the label by its expression
            plan.append((key, program.parse(alias)))
    return plan


def _run_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """``(R,)`` int64: where each run of equal entries of ``sorted_keys`` ``(N,)`` starts."""
    change = np.empty(len(sorted_keys), dtype=bool)
    change[:1] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=change[1:])
    return change.nonzero()[0]


def _append(a: np.ndarray, value: Any) -> np.ndarray:
    a.resize(len(a) + 1, refcheck=False)
    a[-1] = value
    return a
