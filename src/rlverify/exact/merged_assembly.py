"""The merged exploration's chain assembled: parallel branches merged, the merged rows as a CSR matrix (a ``stalled``
sink last where stalled mass was found), Storm's labels evaluated on the explored states, and the chain around them
in Storm's names and layout (:mod:`rlverify.exact.merged`)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from rlverify.exact.cut import with_sink
from rlverify.exact.ondisk import RowBlocks
from rlverify.models.explicit import ExplicitModel
from rlverify.models.program import CompiledProgram

__all__ = ["LABEL_CHUNK", "SINK", "chain_around", "chain_matrix", "evaluate_labels", "merge_parallel"]

#: states whose labels are evaluated at a time (after the exploration)
LABEL_CHUNK = 1 << 20
#: placeholder target of stalled mass, replaced by the sink's index at the end
SINK = np.int32(-1)


def merge_parallel(
    row: np.ndarray, key: np.ndarray, w: np.ndarray, B: int, domain: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parallel branches merged: sorted by (row, key), each run's mass summed in the order given (``row`` ``(N,)``
    in ``0..B-1``, ``key`` ``(N,)`` a successor's key in ``0..domain-1`` or -1 for the sink)."""
    N = len(row)
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


def _run_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """``(R,)`` int64: where each run of equal entries of ``sorted_keys`` ``(N,)`` starts."""
    change = np.empty(len(sorted_keys), dtype=bool)
    change[:1] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=change[1:])
    return change.nonzero()[0]


def chain_matrix(row_lengths: np.ndarray, indices: np.ndarray, data: np.ndarray, any_stalled: bool) -> sp.csr_matrix:
    """``(n, n)`` CSR of the merged rows (``row_lengths`` ``(S,)``; ``indices`` int32 targets, :data:`SINK` for
    stalled mass; ``data`` float64), ``n = S`` plus the ``stalled`` sink when stalled mass was found; the arrays
    are taken over (resized in place)."""
    S = len(row_lengths)
    n = S + int(any_stalled)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(row_lengths, out=indptr[1 : S + 1])
    if any_stalled:
        indices[indices == SINK] = S
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


def _append(a: np.ndarray, value: Any) -> np.ndarray:
    a.resize(len(a) + 1, refcheck=False)
    a[-1] = value
    return a


def evaluate_labels(
    program: CompiledProgram, plan: list[tuple[str, Any]], values: np.ndarray, deadlock: np.ndarray, n_init: int
) -> dict[str, np.ndarray]:
    """``(S,)`` bool per label of ``plan`` (:func:`~rlverify.exact.storm_probe.label_plan`) on the explored states
    ``values`` ``(S, V)`` (program order; the first ``n_init`` initial; ``deadlock`` ``(S,)``), evaluated
    :data:`LABEL_CHUNK` states at a time (bounds the temporaries)."""
    S = len(values)
    labels: dict[str, np.ndarray] = {}
    for k_, how in plan:
        if how == "init":
            labels[k_] = np.zeros(S, dtype=bool)
            labels[k_][:n_init] = True
        elif how == "deadlock":
            labels[k_] = deadlock
        else:
            labels[k_] = np.empty(S, dtype=bool)
            for a in range(0, S, LABEL_CHUNK):
                part = values[a : a + LABEL_CHUNK]
                labels[k_][a : a + len(part)] = program.evaluate(how, program.env(part), len(part))
    return labels


def chain_around(
    M: sp.csr_matrix | RowBlocks, probe: ExplicitModel, labels: dict[str, np.ndarray], valuations: np.ndarray, n_init: int
) -> ExplicitModel:
    """The chain around ``M`` ``(n, n)``: Storm's variable order, labels and valuation layout (from ``probe``,
    Storm's build of the initial state), ``labels`` and ``valuations`` ``(S, V)`` (Storm's order) of the explored
    states, the sink's appended when ``n`` is ``S + 1``."""
    n = M.shape[0]
    parts = with_sink(labels, dict(probe.label_aliases), valuations, None, n > len(valuations))
    return ExplicitModel(
        model_type="dtmc",
        row_groups=np.arange(n + 1, dtype=np.int64),
        # on disk: the row blocks, read by the checks (which take ``@``, ``shape``, ``nnz``, ``indptr``)
        transitions=cast(sp.csr_matrix, M),
        choice_actions=np.zeros(n, dtype=np.int32),
        action_names=("",),
        variables=probe.variables,
        valuations=parts.valuations,
        initial_states=np.arange(n_init),
        labels=parts.labels,
        label_aliases=parts.label_aliases,
        state_rewards={},
        choice_rewards={},
        valuation_spec=probe.valuation_spec,  # the records are encoded from the valuations when written
    )
