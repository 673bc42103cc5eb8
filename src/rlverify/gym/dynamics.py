"""An explicit MDP as flat numpy arrays for simulation: the shared core of the Gymnasium bridge.

Given an :class:`~rlverify.models.ExplicitModel` (built by Storm), :class:`MDPDynamics` holds

* ``choice_of`` ``(S, A)`` int64: the choice taken for action ``a`` in state ``s`` (-1: unavailable);
* per-choice cumulative branch probabilities (exact per row, no global prefix sums);
* ``rewards`` ``(S, A)`` float64: state reward + state-action reward of a named reward model;
* ``terminal`` ``(S,)`` bool and ``observations`` ``(S, d)`` in a chosen feature order;

and samples successors for a batch of (state, action) pairs with a numpy ``Generator``.
Unavailable actions are handled as in the verifier (:mod:`rlverify.exact.induced`): never
silently repaired — ``stall`` ends the episode in a ``stalled`` sink (reported), ``renormalize``
expects the agent to choose among the available actions (an action mask is provided) and refuses
unavailable ones.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlverify.errors import ModelError, PolicyError, RlverifyError, did_you_mean
from rlverify.models.explicit import ExplicitModel

log = logging.getLogger(__name__)

UNAVAILABLE = ("stall", "renormalize")


class UnavailableActionError(PolicyError):
    """An action that is not available in the current state was chosen with ``unavailable='renormalize'``."""


class EnvError(RlverifyError):
    """The environment cannot be set up as asked (unknown reward model, terminal label, feature...)."""


@dataclass(frozen=True)
class MDPDynamics:
    """A simulation-ready explicit MDP (see the module docstring for the arrays).

    Attributes:
        model: the explicit MDP the arrays come from.
        features: observation components (model variable names), in order.
        actions: action labels; action ``i`` of the env is ``actions[i]``.
        reward_model: name of the reward model used (None: all rewards 0).
        terminal_description: what ``terminal`` was made from (for messages and ``repr``).
        unavailable: ``stall`` or ``renormalize``.
        dead_end: ``(S,)`` bool, states whose only choice is an unlabelled self-loop (they end episodes).
    """

    model: ExplicitModel
    features: tuple[str, ...]
    actions: tuple[str, ...]
    reward_model: str | None
    terminal_description: str
    unavailable: str
    choice_of: np.ndarray
    rewards: np.ndarray
    terminal: np.ndarray
    dead_end: np.ndarray
    observations: np.ndarray
    obs_low: np.ndarray
    obs_high: np.ndarray
    cumulative: np.ndarray
    max_branches: int

    @property
    def num_states(self) -> int:
        return self.model.num_states

    def available(self, states: np.ndarray) -> np.ndarray:
        """``(N, A)`` bool: which actions are available in ``states``."""
        return self.choice_of[states] >= 0

    def step(self, states: np.ndarray, actions: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One synchronous step of ``N`` copies.

        Args:
            states: ``(N,)`` int64 current states.
            actions: ``(N,)`` int64 action indices.
            rng: the generator all sampling draws from (one uniform per copy).

        Returns:
            ``(next_states, rewards, stalled)``: ``(N,)`` int64, ``(N,)`` float64, ``(N,)`` bool. A stalled
            copy keeps its state and gets reward 0.

        Raises:
            UnavailableActionError: with ``renormalize``, when some action is not available.
        """
        states = np.asarray(states, dtype=np.int64)
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != states.shape:
            raise EnvError(f"expected {states.shape[0]} actions, got shape {actions.shape}")
        bad_index = (actions < 0) | (actions >= len(self.actions))
        if bad_index.any():
            raise EnvError(f"action {int(actions[np.argmax(bad_index)])} is not in 0..{len(self.actions) - 1} ({list(self.actions)})")
        choices = self.choice_of[states, actions]
        stalled = choices < 0
        u = rng.random(len(states))
        if stalled.any() and self.unavailable == "renormalize":
            i = int(np.argmax(stalled))
            s = int(states[i])
            avail = [a for a, ok in zip(self.actions, self.choice_of[s] >= 0) if ok]
            raise UnavailableActionError(
                f"action '{self.actions[actions[i]]}' is not available in state {self.model.valuation_dict(s)} "
                f"(available: {avail}); with unavailable='renormalize' choose among the action mask "
                "(info['action_mask'] / action_masks()), or use unavailable='stall'")
        nxt = states.copy()
        ok = ~stalled
        if ok.any():
            nxt[ok] = self._sample(choices[ok], u[ok])
        rewards = np.where(stalled, 0.0, self.rewards[states, np.where(stalled, 0, actions)])
        return nxt, rewards, stalled

    def _sample(self, choices: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Successor of each choice for uniforms ``u`` in [0, 1): inverse CDF on the choice's own row."""
        indptr = self.model.transitions.indptr
        start, length = indptr[choices], indptr[choices + 1] - indptr[choices]
        width = int(length.max())
        offsets = np.arange(width)
        idx = start[:, None] + np.minimum(offsets[None, :], length[:, None] - 1)
        cum = self.cumulative[idx]
        total = cum[np.arange(len(choices)), length - 1]
        k = (cum <= (u * total)[:, None]).sum(axis=1)
        k = np.minimum(k, length - 1)
        return self.model.transitions.indices[start + k].astype(np.int64)


def row_cumulative(indptr: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Cumulative sums of ``data`` restarted at every row of a CSR matrix (summed in row order, exactly)."""
    out = np.empty_like(data, dtype=np.float64)
    lengths = np.diff(indptr)
    starts = indptr[:-1]
    for k in range(int(lengths.max()) if len(lengths) else 0):
        rows = np.flatnonzero(lengths > k)
        idx = starts[rows] + k
        out[idx] = data[idx] if k == 0 else out[idx - 1] + data[idx]
    return out


def dynamics_from_explicit(model: ExplicitModel, *, features: Sequence[str] | None = None,
                           actions: Sequence[str] | None = None, reward: str | None = None,
                           terminal: np.ndarray | str | None = None, unavailable: str = "stall",
                           dtype: type = np.float32) -> MDPDynamics:
    """Arrays for simulating ``model``.

    Args:
        model: an explicit MDP. A state offering none of ``actions`` but a single choice takes it
            whatever the agent chooses (as in the verifier); if that choice is a self-loop the state
            is a dead end and ends the episode. A DTMC has no labelled actions and is refused.
        features: observation variables in order (default: all model variables).
        actions: action labels in order (default: the model's labelled actions, sorted).
        reward: reward model name (state and state-action rewards are summed); None for zero rewards.
        terminal: ``(S,)`` bool mask, a label name, or None (only dead ends end episodes).
        unavailable: ``stall`` or ``renormalize`` (see the module docstring).
        dtype: observation dtype.

    Raises:
        EnvError: unknown features, actions, reward model or label; bad ``unavailable``.
        PolicyError: a state with two choices of the same action (no action label can pick one).
    """
    if unavailable not in UNAVAILABLE:
        raise EnvError(f"unavailable: expected one of {', '.join(UNAVAILABLE)}, got '{unavailable}'")
    features = tuple(model.variables if features is None else features)
    unknown = [f for f in features if f not in model.variables]
    if unknown:
        raise EnvError(f"features {unknown} are not model variables{did_you_mean(unknown[0], model.variables)}; "
                       f"variables: {', '.join(model.variables)}")
    labelled = sorted(a for a in set(model.action_names) if a)
    actions = tuple(labelled if actions is None else actions)
    unknown = [a for a in actions if a not in model.action_names]
    if unknown:
        raise EnvError(f"actions {unknown} are not action labels of the model{did_you_mean(unknown[0], labelled)}; "
                       f"labels: {', '.join(labelled)}")
    if not actions:
        raise EnvError("the model has no labelled actions: nothing for an agent to choose")
    S, A = model.num_states, len(actions)

    col_of_name = np.array([actions.index(a) if a in actions else -1 for a in model.action_names], dtype=np.int64)
    cols = col_of_name[model.choice_actions]
    cstates = model.choice_states()
    known = np.flatnonzero(cols >= 0)
    choice_of = np.full((S, A), -1, dtype=np.int64)
    counts = np.zeros((S, A), dtype=np.int64)
    np.add.at(counts, (cstates[known], cols[known]), 1)
    if (counts > 1).any():
        s, a = np.argwhere(counts > 1)[0]
        raise PolicyError(f"state {model.valuation_dict(int(s))} has {int(counts[s, a])} choices labelled "
                          f"'{actions[a]}': an agent choosing by action label cannot tell them apart")
    choice_of[cstates[known], cols[known]] = known
    # As in the verifier: states whose choices are all unlabelled are not the agent's to decide. A
    # single such choice is taken whatever the agent does (a forced step), or ends the episode when
    # it loops back with probability 1 (a dead end: terminal states, Storm's deadlock loops); several
    # are nondeterminism no action resolves. A state offering only labelled actions the agent lacks
    # is the agent's: every action is unavailable there (stall / refused, as in the verifier).
    n_choices = np.diff(model.row_groups)
    labelled_choice = (np.array([bool(a) for a in model.action_names], dtype=np.int64)[model.choice_actions]
                       if model.num_choices else np.zeros(0, dtype=np.int64))
    n_labelled = np.bincount(cstates, weights=labelled_choice, minlength=S) if model.num_choices else np.zeros(S)
    unlabelled = n_labelled == 0
    ambiguous = unlabelled & (n_choices > 1)
    if ambiguous.any():
        s = int(np.argmax(ambiguous))
        raise PolicyError(f"state {model.valuation_dict(s)} has {int(n_choices[s])} unlabelled choices: no agent "
                          "action can choose between them")
    single = np.flatnonzero(unlabelled & (n_choices == 1))
    first = model.row_groups[single]
    indptr = model.transitions.indptr
    absorbing = (indptr[first + 1] - indptr[first] == 1) & (model.transitions.indices[indptr[first]] == single)
    choice_of[single[~absorbing], :] = first[~absorbing, None]
    dead_end = np.zeros(S, dtype=bool)
    dead_end[single[absorbing]] = True

    rewards = np.zeros((S, A))
    if reward is not None:
        names = list(dict.fromkeys(list(model.state_rewards) + list(model.choice_rewards)))
        if reward not in names:
            raise EnvError(f"unknown reward model '{reward}'{did_you_mean(reward, names)}; "
                           f"the model has: {', '.join(repr(n) for n in names) or 'none'}")
        if reward in model.state_rewards:
            rewards += np.asarray(model.state_rewards[reward])[:, None]
        if reward in model.choice_rewards:
            cr = np.asarray(model.choice_rewards[reward])
            rewards += np.where(choice_of >= 0, cr[np.maximum(choice_of, 0)], 0.0)

    if terminal is None:
        mask, description = np.zeros(S, dtype=bool), "dead ends"
    elif isinstance(terminal, str):
        key = label_key(model, terminal)
        mask, description = model.labels[key].copy(), f'"{terminal.strip(chr(34))}"'
    else:
        mask, description = np.asarray(terminal, dtype=bool), "mask"
        if mask.shape != (S,):
            raise EnvError(f"terminal mask has shape {mask.shape}, expected ({S},)")
    term = mask | dead_end
    if term[model.initial_states].all():
        raise ModelError(f"every initial state is terminal ({description}): episodes would end before they start")

    observations = model.feature_matrix(features).astype(dtype)
    low, high = _bounds(model, features)
    cumulative = row_cumulative(model.transitions.indptr, model.transitions.data)
    branches = np.diff(model.transitions.indptr)
    log.info("gym: %d states, %d actions %s, %d features, reward %s, terminal %s (%d states, %d dead ends)",
             S, A, list(actions), len(features), reward, description, int(mask.sum()), int(dead_end.sum()))
    return MDPDynamics(model=model, features=features, actions=actions, reward_model=reward,
                       terminal_description=description, unavailable=unavailable, choice_of=choice_of, rewards=rewards,
                       terminal=term, dead_end=dead_end, observations=observations, obs_low=low.astype(dtype),
                       obs_high=high.astype(dtype), cumulative=cumulative,
                       max_branches=int(branches.max()) if len(branches) else 0)


def label_key(model: ExplicitModel, name: str) -> str:
    """The key of label ``name`` (or of a label whose alias is ``name``) in ``model.labels``."""
    name = name.strip().strip('"')
    for key in model.labels:
        if key == name or model.label_aliases.get(key) == name:
            return key
    known = sorted(model.label_aliases.get(k, k) for k in model.labels)
    raise EnvError(f"unknown label \"{name}\"{did_you_mean(name, known)}; the model has: {', '.join(known) or 'none'}")


def _bounds(model: ExplicitModel, features: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Declared variable bounds where Storm reports them (booleans 0..1), else the observed range."""
    declared: dict[str, tuple[float, float]] = {}
    if model.valuation_spec is not None:
        for cls in model.valuation_spec.get("classes", []):
            for v in cls.get("variables", []):
                if "name" not in v:
                    continue
                if v.get("type", {}).get("type") == "bool":
                    declared[v["name"]] = (0.0, 1.0)
                elif "lower" in v and "upper" in v:
                    declared[v["name"]] = (float(v["lower"]), float(v["upper"]))
    vals = model.feature_matrix(features)
    low = vals.min(axis=0) if len(vals) else np.zeros(len(features))
    high = vals.max(axis=0) if len(vals) else np.zeros(len(features))
    for i, f in enumerate(features):
        if f in declared:
            low[i] = min(low[i], declared[f][0])
            high[i] = max(high[i], declared[f][1])
    return low, high
