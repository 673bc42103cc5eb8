"""The value types of a compiled PRISM program (variables, commands, choice groups, enabled choices, branches)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Env = dict[str, np.ndarray]
Fn = Callable[[Env], Any]


class Unsupported(Exception):
    """The program uses something this module does not evaluate (the caller lets Storm build it instead)."""


@dataclass(frozen=True)
class Var:
    """A state variable: name, inclusive bounds (booleans 0..1), whether boolean, and its key radix."""

    name: str
    lo: int
    hi: int
    is_bool: bool
    radix: int


@dataclass(frozen=True)
class Update:
    """One branch of a command: probability and assignments ``(variable index, value function)``."""

    probability: Fn
    assignments: tuple[tuple[int, Fn], ...]


@dataclass(frozen=True)
class Command:
    """One module's command: its module (position), name (``m:2``), label (``""``: unlabelled), guard and updates."""

    module: int
    name: str
    action: str
    guard: Fn
    updates: tuple[Update, ...]
    reads: tuple[int, ...] = ()  # the variables its updates read or assign (indices, ascending)
    guard_reads: tuple[int, ...] = ()  # the variables its guard reads

    @property
    def written(self) -> frozenset[int]:
        """The variables (indices) some update of the command assigns."""
        return frozenset(i for u in self.updates for i, _ in u.assignments)


@dataclass(frozen=True)
class Group:
    """The choices of one unlabelled command, or of one label, numbered ``offset`` to ``offset + count - 1``.

    ``modules`` holds, per module whose alphabet has the label (module order), its commands with the label
    (command ids, program order). Choice ``offset + r`` runs the ``r``-th combination in :func:`itertools.product`
    order: ``r`` is the mixed-radix number of the commands' positions, the first module's the most significant
    digit (``strides``). An unlabelled command is a group of one module and one command.
    """

    action: str
    modules: tuple[tuple[int, ...], ...]
    offset: int
    count: int
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Enabled:
    """The choices enabled in a batch of states, in Storm's order: by state, then program order.

    Attributes:
        state: ``(C,)`` int64, the batch row of each choice.
        kind: ``(C,)`` int64, its choice index (program order: :attr:`CompiledProgram.num_choices` of them).
        parts: ``(C, K)`` int64, the commands it runs (command ids, module order; -1 pads).
    """

    state: np.ndarray
    kind: np.ndarray
    parts: np.ndarray


@dataclass(frozen=True)
class Branches:
    """The branches of some choices, choice by choice, each choice's in :func:`itertools.product` order of its
    commands' updates (branches to one successor not merged, probability-0 updates kept).

    Attributes:
        number: ``(P,)`` int64, how many branches each choice has (its commands' numbers of updates multiplied).
        keys: ``(K,)`` int64 successor keys; probs: ``(K,)`` float64 probabilities (the product of the commands'
            update probabilities, multiplied in module order).
    """

    number: np.ndarray
    keys: np.ndarray
    probs: np.ndarray


class States(dict[str, np.ndarray]):
    """A batch of states as the compiled expressions read it: variable name -> ``(N,)`` int64 values, and the
    batch's row in each table over a set of variables (:class:`~rlverify.models.program_expressions.Tabled`), computed
    once per batch and set."""

    __slots__ = ("rows",)

    def __init__(self, values: dict[str, np.ndarray]) -> None:
        super().__init__(values)
        self.rows: dict[tuple[str, ...], np.ndarray] = {}
