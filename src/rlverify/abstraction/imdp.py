"""Interval MDPs as flat numpy arrays.

States ``0..S-1``; choices ``0..C-1`` each belonging to one state (``choice_state``); transitions
``0..T-1`` each belonging to one choice (``trans_choice``) with a target state and a probability
interval ``[trans_lo, trans_hi]``. ``fail`` marks the target states (absorbing, value 1). A state
without choices is a leaf of the unfolding: its value is 0 unless it is a ``fail`` state.

``sure_fail`` (optional) marks the ``fail`` states every concrete state of which fails (a successor
contained in the unsafe set); the other ``fail`` states only *may* fail (a successor that meets the
unsafe set, or a state left unexpanded at a budget). The upper bound counts every ``fail`` state as
failed; the lower bound only the ``sure_fail`` ones (None: every ``fail`` state fails surely).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlverify.errors import IntervalError


@dataclass(frozen=True)
class IMDP:
    """An interval MDP (see the module docstring for the layout).

    Attributes:
        n_states: ``S``.
        fail: bool ``(S,)``.
        choice_state: int64 ``(C,)``, non-decreasing.
        trans_choice: int64 ``(T,)``, non-decreasing; trans_target: int64 ``(T,)``.
        trans_lo, trans_hi: float64 ``(T,)`` probability intervals.
        sure_fail: bool ``(S,)``, a subset of ``fail`` (see the module docstring), or None (= ``fail``).
    """

    n_states: int
    fail: np.ndarray
    choice_state: np.ndarray
    trans_choice: np.ndarray
    trans_target: np.ndarray
    trans_lo: np.ndarray
    trans_hi: np.ndarray
    sure_fail: np.ndarray | None = None

    @property
    def surely_failing(self) -> np.ndarray:
        """Bool ``(S,)``: the states the lower bound counts as failed (``sure_fail``, else ``fail``)."""
        return self.fail if self.sure_fail is None else self.sure_fail & self.fail

    @property
    def n_choices(self) -> int:
        return len(self.choice_state)

    @property
    def n_transitions(self) -> int:
        return len(self.trans_choice)

    def validate(self, tol: float = 1e-9) -> None:
        """Raise :class:`IntervalError` listing the choices whose intervals admit no distribution.

        Checked per choice: ``0 <= lo <= hi <= 1``, ``sum lo <= 1 <= sum hi`` (within ``tol``); targets
        in range; every choice has a transition.
        """
        problems = self._transition_problems(tol)
        lo, hi = self.trans_lo, self.trans_hi
        c = self.n_choices
        slo = np.bincount(self.trans_choice, weights=lo, minlength=c)
        shi = np.bincount(self.trans_choice, weights=hi, minlength=c)
        n_tr = np.bincount(self.trans_choice, minlength=c)
        for name, mask in (
            ("lower bounds sum above 1", slo > 1 + tol),
            ("upper bounds sum below 1", shi < 1 - tol),
            ("no transitions", n_tr == 0),
        ):
            if mask.any():
                i = int(np.argmax(mask))
                problems.append(
                    f"{int(mask.sum())} choices with {name} (first: choice {i} of state "
                    f"{int(self.choice_state[i])}, sums [{slo[i]:.6g}, {shi[i]:.6g}])"
                )
        if problems:
            raise IntervalError("infeasible interval MDP: " + "; ".join(problems))

    def _transition_problems(self, tol: float) -> list[str]:
        """The first interval that is no sub-interval of ``[0, 1]`` (within ``tol``), and targets out of range."""
        problems = []
        lo, hi = self.trans_lo, self.trans_hi
        if len(lo) and (lo.min() < -tol or hi.max() > 1 + tol or (lo > hi + tol).any()):
            bad = int(np.argmax((lo < -tol) | (hi > 1 + tol) | (lo > hi + tol)))
            problems.append(f"transition {bad}: [{lo[bad]:.6g}, {hi[bad]:.6g}] is not a sub-interval of [0, 1]")
        if len(self.trans_target) and (self.trans_target.min() < 0 or self.trans_target.max() >= self.n_states):
            problems.append("transition target out of range")
        return problems

    def tightened(self) -> IMDP:
        """Equivalent IMDP with ``hi <= 1 - sum(other lo)`` and ``lo >= 1 - sum(other hi)`` (same distributions).

        Only for feasible IMDPs: :meth:`validate` first (tightening an infeasible choice can make it
        look feasible).
        """
        self.validate()
        c = self.n_choices
        slo = np.bincount(self.trans_choice, weights=self.trans_lo, minlength=c)[self.trans_choice]
        shi = np.bincount(self.trans_choice, weights=self.trans_hi, minlength=c)[self.trans_choice]
        lo = np.maximum(self.trans_lo, 1.0 - (shi - self.trans_hi))
        hi = np.minimum(self.trans_hi, 1.0 - (slo - self.trans_lo))
        return IMDP(
            self.n_states,
            self.fail,
            self.choice_state,
            self.trans_choice,
            self.trans_target,
            np.clip(lo, 0.0, 1.0),
            np.clip(np.maximum(hi, lo), 0.0, 1.0),
            self.sure_fail,
        )


class IMDPBuilder:
    """Incrementally collects states, choices and transitions."""

    def __init__(self) -> None:
        self.fail: list[bool] = []
        self.sure_fail: list[bool] = []
        self.choice_state: list[int] = []
        self.trans: list[tuple[int, int, float, float]] = []

    def add_state(self, fail: bool = False, *, sure: bool | None = None) -> int:
        """A new state; ``sure`` (default: ``fail``) says whether a ``fail`` state fails for every concrete state."""
        self.fail.append(bool(fail))
        self.sure_fail.append(bool(fail) if sure is None else bool(sure) and bool(fail))
        return len(self.fail) - 1

    def add_choice(self, state: int, transitions: dict[int, tuple[float, float]]) -> int:
        """Add a choice of ``state``: target -> ``(lo, hi)`` (intervals to the same target are summed by the caller)."""
        c = len(self.choice_state)
        self.choice_state.append(state)
        for target, (lo, hi) in transitions.items():
            self.trans.append((c, target, min(lo, 1.0), min(hi, 1.0)))
        return c

    def build(self) -> IMDP:
        # choices must be grouped by state: sort stably
        cs = np.asarray(self.choice_state, dtype=np.int64)
        order = np.argsort(cs, kind="stable")
        remap = np.empty_like(order)
        remap[order] = np.arange(len(order))
        tr = np.array(self.trans, dtype=np.float64).reshape(-1, 4)
        tc = remap[tr[:, 0].astype(np.int64)] if len(tr) else np.zeros(0, dtype=np.int64)
        torder = np.argsort(tc, kind="stable")
        return IMDP(
            n_states=len(self.fail),
            fail=np.asarray(self.fail, dtype=bool),
            choice_state=cs[order],
            trans_choice=tc[torder],
            trans_target=tr[torder, 1].astype(np.int64) if len(tr) else np.zeros(0, dtype=np.int64),
            trans_lo=tr[torder, 2] if len(tr) else np.zeros(0),
            trans_hi=tr[torder, 3] if len(tr) else np.zeros(0),
            sure_fail=np.asarray(self.sure_fail, dtype=bool),
        )

    def choice_index_map(self) -> np.ndarray:
        """Position of each added choice (in insertion order) in the built IMDP."""
        cs = np.asarray(self.choice_state, dtype=np.int64)
        order = np.argsort(cs, kind="stable")
        remap = np.empty_like(order)
        remap[order] = np.arange(len(order))
        return remap
