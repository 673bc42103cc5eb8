"""An explicit MDP as flat numpy arrays for an RL agent: the Gymnasium bridge's adapter of the dynamics core.

Given an :class:`~rlverify.models.ExplicitModel` (built by Storm), :class:`MDPDynamics` adds to the
model's :class:`~rlverify.models.dynamics.ChoiceTable` (the verifier's view of it: availability,
forced and dead-end states, the successor sampler)

* ``choice_of`` ``(S, A)``: the choice taken for action ``a`` in state ``s`` (-1: unavailable); in a
  state whose single choice is unlabelled every action takes it (a forced step: the agent must
  act, the verifier does not ask);
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
from typing import TYPE_CHECKING

import numpy as np

from rlverify.choices import Unavailable
from rlverify.errors import EnvError, ModelError, UnavailableActionError, did_you_mean
from rlverify.models.commands import is_command_name
from rlverify.models.dynamics import UNAVAILABLE, ChoiceTable, agent_actions, check_unavailable, choice_table, fit
from rlverify.models.explicit import ExplicitModel

if TYPE_CHECKING:
    from rlverify.models.symbolic import SymbolicModel

log = logging.getLogger(__name__)

__all__ = ["UNAVAILABLE", "EnvError", "MDPDynamics", "UnavailableActionError", "dynamics_from_explicit", "label_key"]


@dataclass(frozen=True)
class MDPDynamics:
    """A simulation-ready explicit MDP (see the module docstring for the arrays).

    Attributes:
        model: the explicit MDP the arrays come from.
        table: its :class:`~rlverify.models.dynamics.ChoiceTable` for ``actions``.
        features: observation components (model variable names), in order.
        actions: action labels; action ``i`` of the env is ``actions[i]``.
        reward_model: name of the reward model used (None: all rewards 0).
        terminal_description: what ``terminal`` was made from (for messages and ``repr``).
        unavailable: ``stall`` or ``renormalize``.
        dead_end: ``(S,)`` bool, states whose only choice is an unlabelled self-loop (they end episodes).
    """

    model: ExplicitModel
    table: ChoiceTable
    features: tuple[str, ...]
    actions: tuple[str, ...]
    reward_model: str | None
    terminal_description: str
    unavailable: Unavailable
    choice_of: np.ndarray
    rewards: np.ndarray
    terminal: np.ndarray
    dead_end: np.ndarray
    observations: np.ndarray
    obs_low: np.ndarray
    obs_high: np.ndarray

    @property
    def num_states(self) -> int:
        return self.model.num_states

    def available(self, states: np.ndarray) -> np.ndarray:
        """``(N, A)`` bool: which actions are available in ``states`` (all of them on a forced step)."""
        return self.choice_of[states] >= 0

    def step(
        self, states: np.ndarray, actions: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
            raise EnvError(
                f"action {int(actions[np.argmax(bad_index)])} is not in 0..{len(self.actions) - 1} ({list(self.actions)})"
            )
        choices = self.choice_of[states, actions]
        stalled = choices < 0
        u = rng.random(len(states))
        if stalled.any() and self.unavailable is Unavailable.RENORMALIZE:
            i = int(np.argmax(stalled))
            s = int(states[i])
            avail = [a for a, ok in zip(self.actions, self.choice_of[s] >= 0, strict=True) if ok]
            raise UnavailableActionError(
                f"action '{self.actions[actions[i]]}' is not available in state {self.model.valuation_dict(s)} "
                f"(available: {avail}); with unavailable='renormalize' choose among the action mask "
                "(info['action_mask'] / action_masks()), or use unavailable='stall'"
            )
        nxt = states.copy()
        ok = ~stalled
        if ok.any():
            nxt[ok] = self.table.sample(choices[ok], u[ok])
        rewards = np.where(stalled, 0.0, self.rewards[states, np.where(stalled, 0, actions)])
        return nxt, rewards, stalled


def dynamics_from_explicit(
    model: ExplicitModel,
    *,
    features: Sequence[str] | None = None,
    actions: Sequence[str] | None = None,
    reward: str | None = None,
    terminal: np.ndarray | str | None = None,
    unavailable: str = "stall",
    dtype: type = np.float32,
    declared: SymbolicModel | None = None,
) -> MDPDynamics:
    """Arrays for simulating ``model``.

    Args:
        model: an explicit MDP. A state offering no labelled action but a single choice takes it
            whatever the agent chooses (as in the verifier); if that choice is a self-loop the state
            is a dead end and ends the episode. A DTMC has no labelled actions and is refused.
        features: observation variables in order (default: all model variables).
        actions: action labels or command names in order (default: the declared model's labelled
            actions, sorted; where labels do not tell the choices apart, :func:`~rlverify.models.dynamics.agent_actions`).
        reward: reward model name (state and state-action rewards are summed); None for zero rewards.
        terminal: ``(S,)`` bool mask, a label name, or None (only dead ends end episodes).
        unavailable: ``stall`` or ``renormalize`` (see the module docstring).
        dtype: observation dtype.
        declared: the model as declared (a :class:`~rlverify.models.SymbolicModel`) when ``model`` is a
            property-directed build of it: its actions are the agent's even where the build lacks
            them (never available there). Default: ``model``.

    Raises:
        EnvError: unknown features, actions, reward model or label; bad ``unavailable``.
        PolicyError: a choice no action label can pick (two choices of one action, several unlabelled ones).
    """
    check_unavailable(unavailable, EnvError)
    source: ExplicitModel | SymbolicModel = model if declared is None else declared
    features = tuple(model.variables if features is None else features)
    actions = _actions(model, source, actions)
    _check_names(model, source, features, actions)
    S, A = model.num_states, len(actions)
    table = choice_table(model, actions)
    # a forced step is taken whatever the agent chooses; a dead end ends the episode instead
    choice_of = table.choice_of.copy()
    moving = (table.forced >= 0) & ~table.dead_end
    choice_of[moving] = table.forced[moving, None]
    rewards = _rewards(model, reward, choice_of)
    mask, description = _terminal_mask(model, terminal)
    term = mask | table.dead_end
    if term[model.initial_states].all():
        raise ModelError(f"every initial state is terminal ({description}): episodes would end before they start")

    observations: np.ndarray = model.feature_matrix(features).astype(dtype)
    low, high = _bounds(model, features)
    log.info(
        "gym: %d states, %d actions %s, %d features, reward %s, terminal %s (%d states, %d dead ends)",
        S,
        A,
        list(actions),
        len(features),
        reward,
        description,
        int(mask.sum()),
        int(table.dead_end.sum()),
    )
    return MDPDynamics(
        model=model,
        table=table,
        features=features,
        actions=actions,
        reward_model=reward,
        terminal_description=description,
        unavailable=Unavailable(unavailable),
        choice_of=choice_of,
        rewards=rewards,
        terminal=term,
        dead_end=table.dead_end,
        observations=observations,
        obs_low=low.astype(dtype),
        obs_high=high.astype(dtype),
    )


def _actions(model: ExplicitModel, declared: ExplicitModel | SymbolicModel, actions: Sequence[str] | None) -> tuple[str, ...]:
    """The agent's actions: as given, else the declared model's labelled actions (sorted) or, where the build's labels
    do not tell the choices apart, labels that do, then command names."""
    labelled = sorted(a for a in set(declared.action_names) if a)
    if actions is None and model.choice_commands is not None:  # labels that tell the choices apart, then commands
        return _telling_actions(model, labelled)
    return tuple(labelled if actions is None else actions)


def _telling_actions(model: ExplicitModel, labelled: list[str]) -> tuple[str, ...]:
    """The labels that tell the build's choices apart and the declared labels the build lacks (sorted), then the
    command names that stand for the rest."""
    agent = agent_actions(model)
    built = set(model.action_names)
    labels = [a for a in agent if not is_command_name(a)] + [a for a in labelled if a not in built]
    return tuple(sorted(labels) + [a for a in agent if is_command_name(a)])


def _check_names(
    model: ExplicitModel, declared: ExplicitModel | SymbolicModel, features: tuple[str, ...], actions: tuple[str, ...]
) -> None:
    """Refuse (EnvError) features that are not model variables, actions the model lacks, or no actions at all."""
    names = fit(
        features,
        actions,
        variables=model.variables,
        model_actions=declared.action_names,
        commands=getattr(declared, "commands", ()),
    )
    if names.missing_features:
        raise EnvError(
            f"features {list(names.missing_features)} are not model variables"
            f"{did_you_mean(names.missing_features[0], model.variables)}; variables: {', '.join(model.variables)}"
        )
    if names.missing_actions:
        raise EnvError("; ".join(names.problems()))
    if not actions:
        raise EnvError("the model has no labelled actions: nothing for an agent to choose")


def _rewards(model: ExplicitModel, reward: str | None, choice_of: np.ndarray) -> np.ndarray:
    """``(S, A)`` float64: reward model ``reward``'s state reward plus the taken choice's reward (None: zeros)."""
    rewards = np.zeros(choice_of.shape)
    if reward is None:
        return rewards
    reward_names = list(dict.fromkeys(list(model.state_rewards) + list(model.choice_rewards)))
    if reward not in reward_names:
        raise EnvError(
            f"unknown reward model '{reward}'{did_you_mean(reward, reward_names)}; "
            f"the model has: {', '.join(repr(n) for n in reward_names) or 'none'}"
        )
    if reward in model.state_rewards:
        rewards += np.asarray(model.state_rewards[reward])[:, None]
    if reward in model.choice_rewards:
        cr = np.asarray(model.choice_rewards[reward])
        rewards += np.where(choice_of >= 0, cr[np.maximum(choice_of, 0)], 0.0)
    return rewards


def _terminal_mask(model: ExplicitModel, terminal: np.ndarray | str | None) -> tuple[np.ndarray, str]:
    """``(S,)`` bool: the states ``terminal`` names (a mask, a label, None: none), and how it was given."""
    S = model.num_states
    if terminal is None:
        return np.zeros(S, dtype=bool), "dead ends"
    if isinstance(terminal, str):
        key = label_key(model, terminal)
        return model.labels[key].copy(), f'"{terminal.strip(chr(34))}"'
    mask = np.asarray(terminal, dtype=bool)
    if mask.shape != (S,):
        raise EnvError(f"terminal mask has shape {mask.shape}, expected ({S},)")
    return mask, "mask"


def label_key(model: ExplicitModel, name: str) -> str:
    """The key of label ``name`` (or of a label whose alias is ``name``) in ``model.labels``."""
    name = name.strip().strip('"')
    for key in model.labels:
        if key == name or model.label_aliases.get(key) == name:
            return key
    known = sorted(model.label_aliases.get(k, k) for k in model.labels)
    raise EnvError(f'unknown label "{name}"{did_you_mean(name, known)}; the model has: {", ".join(known) or "none"}')


def _bounds(model: ExplicitModel, features: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Declared variable bounds where Storm reports them (booleans 0..1), else the observed range."""
    declared = _declared_bounds(model)
    vals = model.feature_matrix(features)
    low = vals.min(axis=0) if len(vals) else np.zeros(len(features))
    high = vals.max(axis=0) if len(vals) else np.zeros(len(features))
    for i, f in enumerate(features):
        if f in declared:
            low[i] = min(low[i], declared[f][0])
            high[i] = max(high[i], declared[f][1])
    return low, high


def _declared_bounds(model: ExplicitModel) -> dict[str, tuple[float, float]]:
    """The variables' bounds as Storm's valuation spec reports them (booleans 0..1; absent where it reports none)."""
    declared: dict[str, tuple[float, float]] = {}
    if model.valuation_spec is None:
        return declared
    for cls in model.valuation_spec.get("classes", []):
        for v in cls.get("variables", []):
            if "name" not in v:
                continue
            if v.get("type", {}).get("type") == "bool":
                declared[v["name"]] = (0.0, 1.0)
            elif "lower" in v and "upper" in v:
                declared[v["name"]] = (float(v["lower"]), float(v["upper"]))
    return declared
