"""Random explicit MDPs with every kind of state an agent meets, and an independent description of them.

Kinds of state: ``decision`` (some labelled choices),
``forced`` (one unlabelled choice moving on), ``dead`` (one unlabelled self-loop) and ``sink``
(labelled choices that all loop back). The model's labels include ``d``, which the agent lacks;
the agent has ``z``, which the model lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rlverify.models.explicit import ExplicitModel

MODEL_LABELS = ("", "a", "b", "c", "d")
AGENT = ("c", "a", "z", "b")  # agent order differs from the model's; lacks 'd', has 'z'


@dataclass
class RandomExplicit:
    """The model and what it is by construction.

    Attributes:
        model: the explicit MDP (valuations: ``s`` = state index; one label ``is_k`` per state).
        kind: ``(S,)`` str, one of decision / forced / dead / sink.
        T: ``(state, label) -> (S,)`` distribution of the state's choice with that label (``""``: unlabelled).
    """

    model: ExplicitModel
    kind: np.ndarray
    T: dict[tuple[int, str], np.ndarray]

    def available(self, actions: tuple[str, ...] = AGENT) -> np.ndarray:
        """``(S, A)`` bool: the state offers a choice labelled ``actions[a]``."""
        return np.array([[(s, a) in self.T for a in actions] for s in range(self.model.num_states)], dtype=bool)


def _distribution(rng: np.random.Generator, n: int) -> np.ndarray:
    k = int(rng.integers(1, 5))
    dist = np.zeros(n)
    dist[rng.choice(n, size=min(k, n), replace=False)] = rng.dirichlet(np.ones(min(k, n)))
    return dist


def random_explicit(rng: np.random.Generator, n: int = 10) -> RandomExplicit:
    """A random model on ``n`` states (state 0 is a decision state and the initial one)."""
    kinds = rng.choice(["decision", "forced", "dead", "sink"], size=n, p=[0.55, 0.2, 0.15, 0.1])
    kinds[0] = "decision"
    T: dict[tuple[int, str], np.ndarray] = {}
    rows, row_groups, choice_actions = [], [0], []
    for s in range(n):
        if kinds[s] in ("decision", "sink"):
            labels = [a for a in MODEL_LABELS[1:] if rng.random() < 0.5] or [MODEL_LABELS[1 + int(rng.integers(4))]]
            if kinds[s] == "decision":  # (drawn as before, so the models stay the same otherwise)
                # no unlabelled choice beside labelled ones: every engine refuses those (tests/test_front_door.py)
                rng.random()
        else:
            labels = [""]
        for a in labels:
            if kinds[s] in ("dead", "sink"):
                dist = np.zeros(n)
                dist[s] = 1.0
            else:
                dist = _distribution(rng, n)
                if kinds[s] == "forced" and dist[s] == 1.0:  # a forced step that moves on (a pure self-loop is "dead")
                    dist[s], dist[(s + 1) % n] = 0.5, 0.5
            T[(s, a)] = dist
            rows.append(dist)
            choice_actions.append(MODEL_LABELS.index(a))
        row_groups.append(len(rows))
    transitions = sp.csr_matrix(np.array(rows))
    labels = {f"is_{k}": np.arange(n) == k for k in range(n)}
    labels["never"] = np.zeros(n, dtype=bool)
    model = ExplicitModel(
        model_type="mdp",
        row_groups=np.array(row_groups, dtype=np.int64),
        transitions=transitions,
        choice_actions=np.array(choice_actions, dtype=np.int32),
        action_names=MODEL_LABELS,
        variables=("s",),
        valuations=np.arange(n, dtype=np.int64)[:, None],
        initial_states=np.array([0]),
        labels=labels,
        label_aliases={k: k for k in labels},
    )
    return RandomExplicit(model=model, kind=kinds, T=T)


def with_choices(base: RandomExplicit, state: int, labels: tuple[str, ...]) -> ExplicitModel:
    """``base.model`` with the choices of ``state`` replaced by self-loops labelled ``labels`` (for refusals)."""
    m = base.model
    rows, groups, acts = [], [0], []
    dense = m.transitions.toarray()
    for s in range(m.num_states):
        if s == state:
            for a in labels:
                loop = np.zeros(m.num_states)
                loop[s] = 1.0
                rows.append(loop)
                acts.append(MODEL_LABELS.index(a))
        else:
            for c in range(m.row_groups[s], m.row_groups[s + 1]):
                rows.append(dense[c])
                acts.append(int(m.choice_actions[c]))
        groups.append(len(rows))
    return ExplicitModel(
        model_type="mdp",
        row_groups=np.array(groups, dtype=np.int64),
        transitions=sp.csr_matrix(np.array(rows)),
        choice_actions=np.array(acts, dtype=np.int32),
        action_names=m.action_names,
        variables=m.variables,
        valuations=m.valuations,
        initial_states=m.initial_states,
        labels=m.labels,
        label_aliases=m.label_aliases,
    )
