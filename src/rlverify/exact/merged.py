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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from rlverify.errors import MemoryBudgetError, ModelError, ModelTooLargeError
from rlverify.exact.induced import STALLED_LABEL, choice_weights
from rlverify.models.commands import is_command_name
from rlverify.models.dynamics import choice_table, forced_start_message
from rlverify.models.explicit import (ExplicitModel, encode_valuations, export_umb, format_bytes, memory_limit, read_umb,
                                      resident_bytes)
from rlverify.models.program import CompiledProgram, Unsupported, compile_expression, terminal_functions
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel, ambiguous_choices, storm_message
from rlverify.policies.base import Policy, validate_probabilities

__all__ = ["MergedChain", "Unsupported", "merged_chain"]

#: branches generated per batch (bounds the batch's temporary arrays: ~40 bytes per branch)
BATCH_BRANCHES = 1 << 19
#: largest domain indexed by a dense array (4 bytes per domain point, touched pages only)
DENSE_DOMAIN = 1 << 27


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
        self.data = np.zeros((capacity,) + self.shape_tail, dtype=dtype)
        self.n = 0

    def extend(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.data):
            self.data.resize((max(need, len(self.data) + len(self.data) // 16),) + self.shape_tail, refcheck=False)
        self.data[self.n: need] = values
        self.n = need

    def final(self) -> np.ndarray:
        self.data.resize((self.n,) + self.shape_tail, refcheck=False)
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
        added = np.unique(keys[unseen])
        self.ids(added)
        ids[unseen] = self.dense[keys[unseen]] - 1
        return ids, added

    def ids(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ids of sorted unique ``keys``; unseen keys get new ids (in key order). Returns ``(ids, new mask)``."""
        if self.dense is not None:
            ids = self.dense[keys].astype(np.int64) - 1
        else:
            ids = np.full(len(keys), -1, dtype=np.int64)
            for run_keys, run_ids in self.runs:
                pos = np.searchsorted(run_keys, keys).clip(max=len(run_keys) - 1)
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
        storm_model = dev.make_explicit_model_builder[float](model.description(), opts, mask,
                                                             dev.ExplicitModelBuilderOptions[float]()).build()
    except RuntimeError as exc:
        raise Unsupported(f"Storm's build of the initial state failed: {storm_message(exc)}") from None
    with tempfile.TemporaryDirectory(prefix="rlverify-") as tmp:
        path = Path(tmp) / "probe.umb"
        export_umb(storm_model, path)
        return read_umb(path)


def merged_chain(model: SymbolicModel, prop: Property, policy: Policy, *, mode: str, unavailable: str,
                 max_states: int | None = None, max_memory: int | None = None,
                 progress: Callable[[str], None] | None = None) -> MergedChain:
    """The chain ``policy`` induces on a PRISM MDP, explored and merged in batches (see the module docstring).

    Raises:
        Unsupported: the program or property uses what :mod:`rlverify.models.program` does not evaluate
            (the caller builds with Storm instead).
        ModelTooLargeError: more than ``max_states`` policy-reachable states.
        MemoryBudgetError: resident memory above ``max_memory`` (None: the default guard,
            :func:`~rlverify.models.explicit.memory_limit`; checked after every batch).
        ModelError: an assignment out of range or probabilities not summing to 1 (as Storm refuses them).
        PolicyError: as with the ``full`` strategy (choices no policy can pick, renormalising nothing).
    """
    if model.kind != "prism":
        raise Unsupported("JANI models are built by Storm")
    if prop.operator != "P":
        raise Unsupported("reward properties need Storm's reward models")
    program = CompiledProgram(model.program, str(model.path))
    memory_bound, memory_how = memory_limit(max_memory)
    probe = _probe(model, prop)
    say = progress or (lambda msg: None)

    names = [v.name for v in program.variables]
    missing = [v for v in probe.variables if v not in program.index]
    if missing:
        raise Unsupported(f"Storm's states have variables {missing} the program does not declare")
    storm_cols = [program.index[v] for v in probe.variables]

    def label_fn(name: str) -> Any:
        return program.label_functions.get(name)  # None: Storm's own labels (init, deadlock): no terminal states

    atoms = {str(e): compile_expression(e, program.by_name) for e in _atoms(prop.storm.get_raw_formula())}
    label_plan: list[tuple[str, Any]] = []  # (UMB key, function or "init"/"deadlock")
    for key, alias in probe.label_aliases.items():
        if alias in ("init", "deadlock"):
            label_plan.append((key, alias))
        elif alias in program.label_functions:
            label_plan.append((key, program.label_functions[alias]))
        elif alias in atoms:
            label_plan.append((key, atoms[alias]))
        else:  # an atom the walk did not reach (under X, say): Storm names the label by its expression
            label_plan.append((key, program.parse(alias)))
    terminal = terminal_functions(prop.storm.get_raw_formula(), label_fn, program.by_name)

    actions = ("",) + tuple(dict.fromkeys(c.action for c in program.choices if c.action))
    action_of = np.array([actions.index(c.action) for c in program.choices] + [0], dtype=np.int32)
    commands = ("",) + tuple(c.name for c in program.choices)
    # choice j is command name j + 1; Storm's self-loop at terminal states and deadlocks (last kind) has none
    command_of = np.r_[np.arange(1, len(program.choices) + 1), 0].astype(np.int32)
    J = len(program.choices)

    index = _StateIndex(program.domain)
    state_keys = _Growing(np.int64)
    values = _Growing(np.int64, len(names))
    init_keys = program.keys(program.initial)  # sorted and unique (an init block's are found in key order)
    if not len(init_keys):
        raise ModelError(f"{model.path}: no state satisfies the init ... endinit block")
    index.ids(np.unique(init_keys))
    state_keys.extend(init_keys)
    values.extend(program.initial)
    targets = _Growing(np.int32, capacity=1 << 20)
    probs = _Growing(np.float64, capacity=1 << 20)
    row_lengths = _Growing(np.int64)
    label_parts: dict[str, list[np.ndarray]] = {key: [] for key, _ in label_plan}
    untaken: dict[str, int] = {}
    untaken_by_label: dict[str, int] = {}
    # without command names in the policy, Storm's build names choices by label unless some state is ambiguous
    by_label = not any(is_command_name(a) for a in policy.actions)
    start_note = None
    n_decision = 0
    policy_seconds = 0.0
    branches_total = 0
    sink = np.int32(-1)  # placeholder target of stalled mass, replaced by the sink's index at the end
    any_stalled = False
    per_state = max(1, sum(int(np.prod([len(p.updates) for p in c.parts])) for c in program.choices))
    batch = max(256, BATCH_BRANCHES // per_state)
    lo = 0
    last_report = time.perf_counter()
    while lo < state_keys.n:
        hi = min(state_keys.n, lo + batch)
        B = hi - lo
        vals = values.data[lo:hi].copy()
        keys = state_keys.data[lo:hi].copy()
        env = program.env(vals)
        stop = np.zeros(B, dtype=bool)
        for fn, value in terminal:
            stop |= program.evaluate(fn, env, B) == value
        enabled = np.zeros((B, J + 1), dtype=bool)
        enabled[:, :J] = program.enabled(env, B) & ~stop[:, None]
        none = ~enabled[:, :J].any(axis=1)
        deadlock = none & ~stop
        enabled[:, J] = none
        c_state, c_kind = np.nonzero(enabled)  # choices in state order, then program order; self-loops last
        row_groups = np.zeros(B + 1, dtype=np.int64)
        np.cumsum(np.bincount(c_state, minlength=B), out=row_groups[1:])
        C = len(c_state)
        # the fragment's transitions only say which choices loop back (Storm's self-loops, and lone commands of the
        # initial states that loop back: the forced-start note needs them); every other choice points elsewhere
        dummy_cols = np.where(c_kind == J, c_state, B)
        n_init_here = max(0, min(hi, len(init_keys)) - lo)
        for ci in np.flatnonzero((c_state < n_init_here) & (c_kind < J)):
            s_ = c_state[ci]
            if row_groups[s_ + 1] - row_groups[s_] == 1:
                k_, pr_ = program.successors(program.choices[c_kind[ci]], vals[[s_]], keys[[s_]])
                if np.all(k_[pr_ > 0] == keys[s_]):
                    dummy_cols[ci] = s_
        fragment = ExplicitModel(
            model_type="mdp", row_groups=row_groups,
            transitions=sp.csr_matrix((np.ones(C), dummy_cols, np.arange(C + 1)), shape=(C, B + 1)),
            choice_actions=action_of[c_kind], action_names=actions, variables=tuple(names), valuations=vals,
            initial_states=np.arange(lo, max(lo, min(hi, len(init_keys)))) - lo,
            choice_commands=command_of[c_kind], command_names=commands)
        table = choice_table(fragment, policy.actions)
        decision = np.flatnonzero(table.decision)
        features = fragment.feature_matrix(policy.features, decision)
        t = time.perf_counter()
        p = policy.action_probabilities(features) if len(decision) else np.zeros((0, len(policy.actions)))
        policy_seconds += time.perf_counter() - t
        p = np.asarray(p, dtype=np.float64)
        validate_probabilities(p, len(decision), len(policy.actions), source=getattr(policy, "name", "policy"))
        n_decision += len(decision)
        cw = choice_weights(fragment, policy, p, decision, mode=mode, unavailable=unavailable, table=table)
        for name, n in table.untaken().items():
            untaken[name] = untaken.get(name, 0) + n
        if by_label:  # name untaken choices as the full strategy does: by label, unless labels are ambiguous
            plain = replace(fragment, choice_commands=None, command_names=())
            if ambiguous_choices(plain):
                by_label = False
            else:
                for name, n in choice_table(plain, policy.actions).untaken().items():
                    untaken_by_label[name] = untaken_by_label.get(name, 0) + n
        if lo == 0:
            start_note = forced_start_message(table, prop.bound)

        rows, succ, mass = [], [], []
        taken = cw.weights > 0
        for j, c in enumerate(program.choices):
            pick = np.flatnonzero(taken & (c_kind == j))
            if not len(pick):
                continue
            s = c_state[pick]
            k, pr = program.successors(c, vals[s], keys[s])
            branches_total += k.size
            rows.append(np.repeat(s, k.shape[1]))
            succ.append(k.ravel())
            mass.append((pr * cw.weights[pick][:, None]).ravel())
        loops = np.flatnonzero(taken & (c_kind == J))
        rows.append(c_state[loops])
        succ.append(keys[c_state[loops]])
        mass.append(cw.weights[loops])
        stalled = np.flatnonzero(cw.stalled > 0)
        if len(stalled):
            any_stalled = True
            rows.append(stalled)
            succ.append(np.full(len(stalled), -1, dtype=np.int64))
            mass.append(cw.stalled[stalled])
        row = np.concatenate(rows)
        key = np.concatenate(succ)
        w = np.concatenate(mass)
        del rows, succ, mass
        positive = w > 0
        row, key, w = row[positive], key[positive], w[positive]
        # merge parallel branches: sort by (row, key) and sum runs
        if program.domain < (1 << 62) // (B + 1):
            composite = row * (program.domain + 1) + (key + 1)
            order = np.argsort(composite, kind="stable")
            composite = composite[order]
            starts = np.flatnonzero(np.r_[True, composite[1:] != composite[:-1]])
        else:
            order = np.lexsort((key, row))
            rk = np.stack([row[order], key[order]])
            starts = np.flatnonzero(np.r_[True, (rk[:, 1:] != rk[:, :-1]).any(axis=0)])
        w = np.add.reduceat(w[order], starts) if len(starts) else w[:0]
        row, key = row[order][starts], key[order][starts]
        row_lengths.extend(np.bincount(row, minlength=B))
        real = key >= 0
        ids, added = index.lookup(key[real])
        if len(added):
            state_keys.extend(added)
            values.extend(program.values(added))
        tgt = np.full(len(key), sink, dtype=np.int32)
        tgt[real] = ids
        targets.extend(tgt)
        probs.extend(w)
        for k_, plan in label_plan:
            if plan == "init":
                part = np.zeros(B, dtype=bool)
                part[: max(0, min(hi, len(init_keys)) - lo)] = True
            elif plan == "deadlock":
                part = deadlock
            else:
                part = program.evaluate(plan, env, B)
            label_parts[k_].append(part.copy())
        lo = hi
        if state_keys.n >= np.iinfo(np.int32).max - 1:
            raise ModelTooLargeError(f"{model.path}: the policy reaches more than 2**31 states (int32 indices); "
                                     "verify a smaller model")
        if max_states is not None and state_keys.n > max_states:
            raise ModelTooLargeError(
                f"{model.path}: the policy reaches more than --max-states={max_states} states (exploration stopped at "
                f"{state_keys.n:,}); raise --max-states")
        if memory_bound is not None and resident_bytes() > memory_bound:
            raise MemoryBudgetError(
                f"{memory_how}: exploring the policy's chain took {format_bytes(resident_bytes())} "
                f"after {lo:,} states and {targets.n:,} transitions; raise --max-memory, or verify a smaller model",
                phase="explore", estimate=resident_bytes(), limit=memory_bound)
        if time.perf_counter() - last_report > 2.0:
            say(f"exploring and merging: {lo:,} of {state_keys.n:,} states so far, {targets.n:,} transitions")
            last_report = time.perf_counter()

    S = state_keys.n
    del index, state_keys
    n = S + int(any_stalled)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(row_lengths.final(), out=indptr[1:S + 1])
    data = probs.final()
    indices = targets.final()
    if any_stalled:
        indices[indices == sink] = S
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

    vals = values.final()[:, storm_cols]
    labels = {k_: np.concatenate(parts) if parts else np.zeros(0, dtype=bool) for k_, parts in label_parts.items()}
    aliases = dict(probe.label_aliases)
    if any_stalled:
        vals = np.vstack([vals, np.zeros((1, vals.shape[1]), dtype=vals.dtype)])
        labels = {k_: np.r_[m, [False]] for k_, m in labels.items()}
        labels[STALLED_LABEL] = np.r_[np.zeros(S, dtype=bool), [True]]
        aliases[STALLED_LABEL] = STALLED_LABEL
    spec = probe.valuation_spec
    vbytes = encode_valuations(vals, spec["classes"][0]["variables"]) if spec is not None else None
    chain = ExplicitModel(
        model_type="dtmc", row_groups=np.arange(n + 1, dtype=np.int64), transitions=M,
        choice_actions=np.zeros(n, dtype=np.int32), action_names=("",), variables=probe.variables, valuations=vals,
        initial_states=np.arange(len(init_keys)), labels=labels, label_aliases=aliases, state_rewards={},
        choice_rewards={}, valuation_bytes=vbytes, valuation_spec=spec)
    return MergedChain(chain=chain, decision_states=n_decision, policy_seconds=policy_seconds,
                       untaken=dict(sorted((untaken_by_label if by_label else untaken).items())), start_note=start_note, mdp_branches=branches_total)


def _append(a: np.ndarray, value: Any) -> np.ndarray:
    a.resize(len(a) + 1, refcheck=False)
    a[-1] = value
    return a
