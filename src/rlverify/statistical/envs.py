"""Environments the simulator runs in lockstep: the protocol, and explicit MDPs as one.

An environment advances many runs at once. Its run states are a numpy array whose first axis
is the run (``(N,)`` state indices for explicit MDPs, ``(N, 5)`` rows for Racetrack).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from rlverify.errors import PolicyError, PropertyError, did_you_mean
from rlverify.models.explicit import ExplicitModel


@runtime_checkable
class VectorEnv(Protocol):
    """What the simulator needs from an environment.

    Attributes:
        name: for messages and results.
        features: names of the columns :meth:`observe` returns.
        actions: action names; :meth:`step` takes indices into this tuple.
        labels: atomic propositions :meth:`label` knows.
    """

    name: str
    features: tuple[str, ...]
    actions: tuple[str, ...]
    labels: tuple[str, ...]

    def initial_states(self) -> np.ndarray:
        """``(K, ...)`` possible initial run states (a run starts in one of them, uniformly at random)."""
        ...

    def observe(self, states: np.ndarray) -> np.ndarray:
        """``(N, len(features))`` float64 observations."""
        ...

    def available(self, states: np.ndarray) -> np.ndarray | None:
        """``(N, len(actions))`` bool availability, or None when every action is always available."""
        ...

    def step(self, states: np.ndarray, actions: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Successor states for action indices ``(N,)`` and uniforms ``u`` ``(N,)`` in [0, 1)."""
        ...

    def label(self, name: str, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool truth of label ``name``."""
        ...

    def terminal(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: absorbing states (the run stays there and its labels never change)."""
        ...


class ExplicitEnv:
    """An explicit MDP (:class:`~rlverify.models.ExplicitModel`) as a vectorised environment.

    Run states are ``(N,)`` int64 state indices. Observations are the state valuations; the
    actions are the model's action labels. In a state where the chosen action has no choice the
    run stalls (see the simulator). A state whose only choice is unlabelled (no action the
    policy could name) takes it without asking the policy, as in the exact engine.
    Successors are drawn by inverting the per-choice cumulative distribution (binary search).
    """

    def __init__(self, model: ExplicitModel, *, name: str = "") -> None:
        self.model = model
        self.name = name or "explicit model"
        self.features = tuple(model.variables)
        named = [i for i, a in enumerate(model.action_names) if a]
        self.actions = tuple(model.action_names[i] for i in named)
        self._labels = {}
        for key, mask in model.labels.items():
            self._labels[model.label_aliases.get(key, key)] = mask
            self._labels.setdefault(key, mask)
        self.labels = tuple(self._labels)
        S, C = model.num_states, model.num_choices
        col_of_name = np.full(len(model.action_names), -1, dtype=np.int64)
        col_of_name[named] = np.arange(len(named))
        cs = model.choice_states()
        cols = col_of_name[model.choice_actions]
        idx_dtype = np.int32 if C < 2**31 - 1 else np.int64
        self._choice = np.full((S, max(len(self.actions), 1)), -1, dtype=idx_dtype)
        labelled = cols >= 0
        counts_sa = np.zeros((S, max(len(self.actions), 1)), dtype=np.int64)
        np.add.at(counts_sa, (cs[labelled], cols[labelled]), 1)
        if (counts_sa > 1).any():  # as the exact engine: an agent choosing by label cannot tell them apart
            s, a = np.argwhere(counts_sa > 1)[0]
            raise PolicyError(f"state {model.valuation_dict(int(s))} has {int(counts_sa[s, a])} choices labelled "
                              f"'{self.actions[a]}': a policy over action labels cannot tell them apart "
                              "(label the commands differently)")
        self._choice[cs[labelled], cols[labelled]] = np.flatnonzero(labelled)
        counts = np.diff(model.row_groups)
        n_labelled = np.bincount(cs[labelled], minlength=S)
        self._forced = np.full(S, -1, dtype=np.int64)
        single = (counts == 1) & (n_labelled == 0)
        self._forced[single] = model.row_groups[:-1][single]
        P = model.transitions.tocsr()
        P.sort_indices()
        self._indptr = P.indptr.astype(np.int64)
        self._targets = P.indices.astype(np.int64)
        self._cum = _row_cumsum(P.data.astype(np.float64), self._indptr)
        # absorbing: every choice of the state is a self-loop with probability 1
        row_len = np.diff(self._indptr)
        self_loop = (row_len == 1) & (self._targets[np.minimum(self._indptr[:-1], len(self._targets) - 1)] == cs)
        self._choice_self_loop = self_loop
        self._absorbing = (counts > 0) & (np.bincount(cs, weights=self_loop, minlength=S) == counts)

    def initial_states(self) -> np.ndarray:
        return np.asarray(self.model.initial_states, dtype=np.int64)

    def observe(self, states: np.ndarray) -> np.ndarray:
        return self.model.valuations[states].astype(np.float64)

    def available(self, states: np.ndarray) -> np.ndarray:
        return self._choice[states] >= 0

    def step(self, states: np.ndarray, actions: np.ndarray, u: np.ndarray) -> np.ndarray:
        choice = self._choice[states, actions].astype(np.int64)
        forced = self._forced[states]
        choice = np.where(forced >= 0, forced, choice)
        if (choice < 0).any():
            raise PolicyError("internal: stepping with an unavailable action")  # the simulator stalls these first
        return self.sample(choice, u)

    def sample(self, choices: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Successor states of ``choices`` ``(N,)`` for uniforms ``u`` ``(N,)``: the first branch whose cumulative probability exceeds ``u * total``."""
        lo = self._indptr[choices].copy()
        hi = self._indptr[choices + 1] - 1
        x = u * self._cum[hi]
        while True:
            open_ = lo < hi
            if not open_.any():
                break
            mid = (lo + hi) // 2
            right = open_ & (self._cum[mid] <= x)
            left = open_ & ~right
            lo = np.where(right, mid + 1, lo)
            hi = np.where(left, mid, hi)
        return self._targets[lo]

    def self_loops(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: the (available or forced) choice returns to the same state with probability 1."""
        choice = np.where(self._forced[states] >= 0, self._forced[states], self._choice[states, actions])
        return (choice >= 0) & self._choice_self_loop[np.maximum(choice, 0)]

    def forced(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: the state's only choice is unlabelled (the policy is not asked)."""
        return self._forced[states] >= 0

    def label(self, name: str, states: np.ndarray) -> np.ndarray:
        mask = self._labels.get(name)
        if mask is None:
            raise PropertyError(f"unknown label \"{name}\"{did_you_mean(name, self.labels)}; labels: "
                                + ", ".join(f'"{x}"' for x in self.labels))
        return mask[states]

    def terminal(self, states: np.ndarray) -> np.ndarray:
        return self._absorbing[states]


def _row_cumsum(data: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Cumulative sums within each CSR row (exact per row, no global running sum)."""
    out = data.copy()
    lengths = np.diff(indptr)
    starts = indptr[:-1]
    for k in range(1, int(lengths.max(initial=0))):
        rows = np.flatnonzero(lengths > k)
        out[starts[rows] + k] += out[starts[rows] + k - 1]
    return out
