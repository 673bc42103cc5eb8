"""One cut of a model to the states a policy reaches plus the absorbing ``stalled`` sink: the sink's index, the
states' labels, valuations and per-state arrays, and the sink's self-loop (the induced chain, the adversarial MDP
and the merged exploration all cut through here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rlverify.models.explicit import ExplicitModel

__all__ = ["STALLED_LABEL", "Cut", "StateParts", "sink_loop", "with_sink"]

#: the label of the absorbing state the policy's mass on unavailable actions goes to
STALLED_LABEL = "stalled"


@dataclass(frozen=True)
class StateParts:
    """The per-state parts of a cut model: labels ``(n,)`` bool each, their aliases, valuations ``(n, V)`` and
    their encoded records ``(n, B)`` uint8 (or None); ``n`` counts the sink, last, when there is one."""

    labels: dict[str, np.ndarray]
    label_aliases: dict[str, str]
    valuations: np.ndarray
    valuation_bytes: np.ndarray | None


def with_sink(
    labels: dict[str, np.ndarray],
    aliases: dict[str, str],
    valuations: np.ndarray,
    valuation_bytes: np.ndarray | None,
    has_sink: bool,
) -> StateParts:
    """The per-state parts of ``n`` states, with the sink appended when ``has_sink``: no label but ``stalled``,
    all-zero valuation and record."""
    if not has_sink:
        return StateParts(labels, aliases, valuations, valuation_bytes)
    n = len(valuations)
    labels = {k: np.r_[m, [False]] for k, m in labels.items()}
    labels[STALLED_LABEL] = np.r_[np.zeros(n, dtype=bool), [True]]
    aliases = {**aliases, STALLED_LABEL: STALLED_LABEL}
    valuations = np.vstack([valuations, np.zeros((1, valuations.shape[1]), dtype=valuations.dtype)])
    if valuation_bytes is not None:
        valuation_bytes = np.vstack([valuation_bytes, np.zeros((1, valuation_bytes.shape[1]), dtype=np.uint8)])
    return StateParts(labels, aliases, valuations, valuation_bytes)


def sink_loop(rows: sp.csr_matrix) -> sp.csr_matrix:
    """``rows`` ``(k, n+1)`` with the sink's row appended: its self-loop (column ``n``, probability 1)."""
    n = rows.shape[1] - 1
    return sp.vstack([rows, sp.csr_matrix(([1.0], ([0], [n])), shape=(1, n + 1))], format="csr")


@dataclass(frozen=True)
class Cut:
    """The states of a model of ``num_states`` kept: ``reach`` ``(n,)`` int64 sorted, and the sink after them when
    ``has_sink`` (the sink is state ``num_states`` of the model's numbering, e.g. an extra column)."""

    reach: np.ndarray
    has_sink: bool
    num_states: int

    @classmethod
    def of(cls, seen: np.ndarray, num_states: int) -> Cut:
        """The cut of a reachability answer ``seen`` ``(num_states,)`` or ``(num_states + 1,)`` bool (its last
        entry: whether the sink is reached)."""
        has_sink = len(seen) > num_states and bool(seen[num_states])
        return cls(np.flatnonzero(seen[:num_states]), has_sink, num_states)

    @property
    def size(self) -> int:
        """States of the cut model, the sink included."""
        return len(self.reach) + int(self.has_sink)

    def index(self) -> np.ndarray:
        """``(num_states + 1,)`` int64: each model state's index in the cut (-1: cut away); the last entry the
        sink's."""
        n = len(self.reach)
        new_index = np.full(self.num_states + 1, -1, dtype=np.int64)
        new_index[self.reach] = np.arange(n)
        if self.has_sink:
            new_index[self.num_states] = n
        return new_index

    def origin(self) -> np.ndarray:
        """``(size,)`` int64: the model state of each cut state (the sink: -1)."""
        return np.r_[self.reach, [-1]] if self.has_sink else self.reach

    def values(self, per_state: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """``per_state`` ``(num_states,)`` on the cut's states (``fill`` at the sink)."""
        return np.r_[per_state[self.reach], [fill]] if self.has_sink else per_state[self.reach]

    def parts(self, model: ExplicitModel) -> StateParts:
        """``model``'s labels, aliases, valuations and records on the cut's states, with the sink's."""
        reach = self.reach
        vbytes = model.valuation_bytes[reach] if model.valuation_bytes is not None else None
        return with_sink(
            {k: m[reach] for k, m in model.labels.items()},
            dict(model.label_aliases),
            model.valuations[reach],
            vbytes,
            self.has_sink,
        )
