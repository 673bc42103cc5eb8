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

import numpy as np
import scipy.sparse as sp

from rlverify.arrays import distinct
from rlverify.errors import MemoryBudgetError, ModelError, ModelTooLargeError
from rlverify.exact import storm_probe
from rlverify.exact.exploration_index import Growing, Shapes, StateIndex
from rlverify.exact.induced import ChoiceWeights, ask_features, weigh, weights_at
from rlverify.exact.merged_assembly import SINK, chain_around, chain_matrix, evaluate_labels, merge_parallel
from rlverify.exact.ondisk import ChainWriter, RowBlocks, prepare
from rlverify.exact.storm_probe import StormProbe, label_plan
from rlverify.models.commands import is_command_name
from rlverify.models.dynamics import choice_name, choice_table, forced_start_message
from rlverify.models.explicit import ExplicitModel, format_bytes, memory_limit, resident_bytes
from rlverify.models.program import CompiledProgram, Enabled, States, Unsupported, compiled, terminal_functions
from rlverify.models.properties import Property
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
#: most commands a program may have for its batches to gather their choice structure by guard signature (a bit per
#: command; :class:`Shapes`): beyond, every batch forms it
SHAPE_COMMANDS = 63 * 32


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
        self.probe = storm_probe.probe(model, prop) if probe is None else probe.result()
        self.names = [v.name for v in program.variables]
        self.storm_cols = _storm_columns(program, self.probe)
        self.label_plan = label_plan(program, self.probe, prop)
        self.terminal = terminal_functions(prop.storm.get_raw_formula(), program.label_functions.get, program.by_name)
        self.actions = ("", *program.actions)
        # each choice's action by its group; Storm's self-loop at terminal states and deadlocks (choice J) has none
        self.action_of_group = np.array([self.actions.index(g.action) for g in program.groups] + [0], dtype=np.int32)
        self.J = program.num_choices
        self.index = StateIndex(program.domain)
        self.state_keys = Growing(np.int64)
        self.values = Growing(np.int64, len(self.names))
        self.init_keys = self._initial_states()
        self.targets = Growing(np.int32, capacity=1 << 20)
        self.probs = Growing(np.float64, capacity=1 << 20)
        #: the chain's rows go to files instead of ``targets``/``probs`` (``--chain-dir``)
        self.writer: ChainWriter | None = None
        self.row_lengths = Growing(np.int64)
        self.deadlocks = Growing(bool)  # Storm's ``deadlock`` label; the others are evaluated on all states at the end
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
        self.shapes = self._shapes()

    def _initial_states(self) -> np.ndarray:
        """The initial states' keys, sorted and unique (an init block's are found in key order), numbered first."""
        program = self.program
        init_keys = program.keys(program.initial)
        if not len(init_keys):
            raise ModelError(f"{self.model.shown}: no state satisfies the init ... endinit block")
        self.index.ids(distinct(init_keys))
        self.state_keys.extend(init_keys)
        self.values.extend(program.initial)
        return init_keys

    def _shapes(self) -> Shapes | None:
        """The choice structure by guard signature (None beyond :data:`SHAPE_COMMANDS` commands)."""
        commands = len(self.program.commands)
        return Shapes(len(self.actions), max(1, -(-commands // 63))) if commands <= SHAPE_COMMANDS else None

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
        row, key, w = merge_parallel(row, key, w, B, self.program.domain)
        self._append(row, key, w, B)
        self.deadlocks.extend(deadlock)

    def _fragment(
        self, vals: np.ndarray, keys: np.ndarray, env: States, n_init: int
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
        self, vals: np.ndarray, keys: np.ndarray, env: States
    ) -> tuple[Enabled, np.ndarray, ChoiceWeights, np.ndarray] | None:
        """The batch's choices, deadlocks and policy weights (as :meth:`_fragment` and :meth:`_weigh` give them) with
        the choice structure gathered from :class:`Shapes` by each state's guard signature; the structure of a
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
        words[stop, 0] = Shapes.STOP
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
        c_state, c_choice = choices.state, choices.kind
        dummy_cols = np.where(c_choice == self.J, c_state, B)
        lone = np.flatnonzero((c_state < n_init) & (c_choice < self.J) & (np.diff(row_groups)[c_state] == 1))
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
        c_state, c_choice = choices.state, choices.kind
        pick = (taken & (c_choice < self.J)).nonzero()[0]
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
        loops = (taken & (c_choice == self.J)).nonzero()[0]
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

    def _append(self, row: np.ndarray, key: np.ndarray, w: np.ndarray, B: int) -> None:
        """The batch's merged rows appended; successors seen for the first time become new states."""
        self.row_lengths.extend(np.bincount(row, minlength=B))
        real = key >= 0
        ids, added = self.index.lookup(key[real])
        if len(added):
            self.state_keys.extend(added)
            self.values.extend(self.program.values(added))
        tgt = np.full(len(key), SINK, dtype=np.int32)
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
        if self.writer is None:
            M: sp.csr_matrix | RowBlocks = chain_matrix(
                self.row_lengths.final(), self.targets.final(), self.probs.final(), self.any_stalled
            )
        else:
            M = self.writer.finish(S, self.any_stalled)
        values = self.values.final()
        labels = evaluate_labels(self.program, self.label_plan, values, self.deadlocks.final(), len(self.init_keys))
        chain = chain_around(M, self.probe, labels, values[:, self.storm_cols], len(self.init_keys))
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


_INT32_MAX = int(np.iinfo(np.int32).max)


def _storm_columns(program: CompiledProgram, probe: ExplicitModel) -> list[int]:
    """The program-order column of each of Storm's variables (the probe's order); Unsupported where Storm's states
    have a variable the program does not declare."""
    missing = [v for v in probe.variables if v not in program.index]
    if missing:
        raise Unsupported(f"Storm's states have variables {missing} the program does not declare")
    return [program.index[v] for v in probe.variables]
