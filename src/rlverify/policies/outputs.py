"""A network's raw outputs as action probabilities (:class:`~rlverify.choices.OutputKind`): as they are, their
softmax, or a one-hot of their argmax."""

from __future__ import annotations

import numpy as np

from rlverify.choices import OutputKind
from rlverify.policies.formats import softmax


def to_probabilities(out: np.ndarray, output: OutputKind, columns: np.ndarray | None = None) -> np.ndarray:
    """``(N, |A|)`` network outputs of ``output`` (an :class:`~rlverify.choices.OutputKind`) as action probabilities.

    ``columns``: for ``q-values``, the ``(N,)`` argmax of ``out`` if already computed (e.g. by the runtime)."""
    return as_distribution(out, output, columns)[0]


def as_distribution(out: np.ndarray, output: OutputKind, columns: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """:func:`to_probabilities`, and whether the rows are distributions by construction (a softmax or a one-hot
    of finite outputs: no need to check them again)."""
    out = np.asarray(out)
    finite = out.ndim == 2 and bool(np.isfinite(out.sum()))  # a sum is finite only if every entry is
    if out.ndim != 2 or output == OutputKind.PROBABILITIES:
        return np.asarray(out, dtype=np.float64), False  # shapes and values are checked by BasePolicy
    if output == OutputKind.LOGITS:
        return softmax(out), finite
    greedy = np.zeros(out.shape, dtype=np.float64)
    if columns is None or not finite:
        columns = np.argmax(np.asarray(out, dtype=np.float64), axis=1)
    greedy.reshape(-1)[np.arange(0, out.size, out.shape[1]) + columns] = 1.0
    if not finite:
        greedy[~np.isfinite(out).all(axis=1)] = np.nan  # reported by the distribution check, never hidden
    return greedy, finite


def greedy_columns(out: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray | None:
    """``(N,)`` int64 argmax (first on ties) of ``(N, |A|)`` Q-values ``out``, or None if an entry is not finite
    (then the full path reports it). ``columns``: the argmax if already computed (e.g. by the runtime)."""
    if out.ndim != 2 or not out.shape[1] or not np.isfinite(out.sum()):
        return None
    return np.argmax(out, axis=1) if columns is None else np.asarray(columns, dtype=np.int64)
