"""One simulator step, shared by plain simulation (:mod:`.engine`) and importance splitting (:mod:`.splitting`).

For a batch of undecided runs, :meth:`Stepper.step` asks the policy once (on the runs whose state is not
forced), validates and chooses, and moves every run that can move:

* runs in states whose single choice is unlabelled take it without asking the policy (the env's
  :meth:`~rlverify.models.environment.VectorEnv.forced`; none by default);
* ``stochastic`` mode samples the action from ``pi(.|s)``, ``deterministic`` takes the argmax (ties: first in
  the policy's action order); a policy adapter (:class:`~rlverify.policies.BasePolicy`) is asked through its
  fused :meth:`~rlverify.policies.BasePolicy.choose` (it validates its own output), any other policy's
  probabilities are validated here, batch by batch;
* with ``unavailable='renormalize'`` (explicit opt-in) the policy's probabilities of unavailable actions are
  zeroed and its row rescaled before choosing, as the exact engine does
  (:func:`~rlverify.models.dynamics.policy_weights`); otherwise a run whose chosen action is unavailable
  *stalls* (it is never given another action);
* a run whose policy surely takes an action that surely leads back to the same state (the env's
  :meth:`~rlverify.models.environment.VectorEnv.self_loops`; never known by default) is *stuck*: it would stay there
  forever;
* the other runs move: ``env.step`` with their own random numbers.

:func:`decide` is the other half of the rule: whether a run in a state is decided (``left U<=k right``
satisfied, or violated: ``left`` false, an absorbing state, the bound reached, or a state from which no policy
reaches ``right``).

Random numbers are counter-based (:mod:`rlverify.statistical.rng`): the policy's draw of a run at step ``i``
is ``uniforms(key, i, POLICY_STREAM)``, the environment's ``uniforms(key, i, ENV_STREAM)``.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from rlverify.choices import Mode, Unavailable
from rlverify.errors import PolicyError
from rlverify.models.dynamics import fit, policy_weights
from rlverify.models.environment import VectorEnv
from rlverify.policies.base import BasePolicy, Policy, choose_columns, validate_probabilities
from rlverify.statistical.properties import PathProperty
from rlverify.statistical.rng import uniforms

#: random streams: the policy's draw, the environment's step, the start state (a pick among finitely many, at
#: step -1), the coordinates of a start state drawn in a box (coordinate ``j`` at step ``j``)
POLICY_STREAM, ENV_STREAM, START_STREAM, BOX_STREAM = 0, 1, 2, 4

_NO_TURN = contextlib.nullcontext()
#: held around every policy call (one call at a time when parts of a batch run in threads; else nothing)
Turn: TypeAlias = contextlib.AbstractContextManager[object]


@dataclass(frozen=True)
class Binding:
    """How a policy's features and actions map onto an environment's."""

    feature_columns: np.ndarray  # (|features_policy|,) env observation column of each policy feature
    action_index: np.ndarray  # (|A_policy|,) env action index of each policy action


def bind_policy(env: VectorEnv, policy: Policy) -> Binding:
    """Map the policy's features/actions to the environment's, reporting every name that does not fit.

    Raises:
        PolicyError: features the environment does not observe, actions it does not have.
    """
    features, actions = tuple(env.features), tuple(env.actions)
    names = fit(policy.features, policy.actions, variables=features, model_actions=actions)
    if not names.ok:
        raise PolicyError(
            f"policy {getattr(policy, 'name', type(policy).__name__)} does not fit {env.name}", names.problems(where=env.name)
        )
    return Binding(
        np.array([features.index(f) for f in policy.features], dtype=np.int64),
        np.array([actions.index(a) for a in policy.actions], dtype=np.int64),
    )


def check_labels(env: VectorEnv, names: Iterable[str]) -> None:
    """Raise the environment's unknown-label error (a :class:`PropertyError` naming its labels) for ``names``
    it does not know, before any run."""
    for name in names:
        if name not in env.labels:
            env.label(name, env.initial_states()[:1])  # raises the unknown-label error


def draw_starts(env: VectorEnv, starts: np.ndarray | None, keys: np.ndarray) -> np.ndarray:
    """Start states of the runs with ``keys`` ``(N,)``: uniformly among ``starts`` ``(K, ...)``; with ``starts``
    None, among the env's initial states, or uniformly in its ``initial_box`` ``(lo, hi)`` when it is not None (a
    continuous initial region)."""
    box = env.initial_box if starts is None else None
    if box is not None:
        lo, hi = box
        u = np.stack([uniforms(keys, j, BOX_STREAM) for j in range(len(lo))], axis=1)
        return lo + (hi - lo) * u
    starts = env.initial_states() if starts is None else starts
    return starts[pick_starts(keys, len(starts))]


def pick_starts(keys: np.ndarray, count: int) -> np.ndarray:
    """``(N,)`` int64 index in ``0 .. count - 1`` per run key, uniformly at random (the start stream)."""
    return np.minimum((uniforms(keys, -1, START_STREAM) * count).astype(np.int64), count - 1)


@dataclass(frozen=True)
class Verdicts:
    """Which runs are decided in their current states (see :func:`decide`).

    Attributes:
        right: ``(N,)`` bool, ``right`` holds: the property is satisfied.
        violated: ``(N,)`` bool, decided false (``hopeless`` included).
        hopeless: ``(N,)`` bool, decided false only because no policy reaches ``right`` from the state (the
            property's ``hopeless`` states); None when the property knows no such states.
    """

    right: np.ndarray
    violated: np.ndarray
    hopeless: np.ndarray | None


def decide(env: VectorEnv, prop: PathProperty, states: np.ndarray, t: int | np.ndarray) -> Verdicts:
    """Whether runs in ``states`` ``(N, ...)`` at step ``t`` (one for all, or ``(N,)``) are decided for
    ``left U<=k right``: satisfied where ``right`` holds; violated where ``left`` does not hold, in an absorbing
    state, at the bound ``k`` or in a ``hopeless`` state."""
    right = prop.right.evaluate(env, states)
    left = prop.left.evaluate(env, states)
    violated = ~right & (~left | env.terminal(states))
    if prop.bound is not None:
        if np.ndim(t) == 0:
            if t >= prop.bound:
                violated |= ~right
        else:
            violated |= ~right & (t >= prop.bound)
    doomed = None
    if prop.hopeless is not None:
        doomed = prop.hopeless.evaluate(env, states) & ~violated & ~right
        violated |= doomed
    return Verdicts(right, violated, doomed)


@dataclass(frozen=True)
class Moves:
    """What one step did to a batch of ``n`` runs (indices are positions in the batch).

    Attributes:
        successors: ``(m, ...)`` next states of the runs that moved, in batch order.
        moved: ``(m,)`` int64 positions of the runs that moved; None: all ``n`` did.
        stalled: positions of the runs whose chosen action is unavailable (None: none).
        stuck: positions of the runs that surely loop forever in their state (None: none).
    """

    successors: np.ndarray
    moved: np.ndarray | None
    stalled: np.ndarray | None = None
    stuck: np.ndarray | None = None

    def select(self, values: np.ndarray) -> np.ndarray:
        """``values`` ``(n, ...)`` of the batch restricted to the runs that moved."""
        return values if self.moved is None else values[self.moved]


class Stepper:
    """The step of one environment, policy and simulation settings (see the module docstring).

    Args:
        env: a :class:`~rlverify.statistical.envs.VectorEnv`.
        policy: the oracle (a :class:`~rlverify.policies.Policy`, checked at the door).
        binding: ``bind_policy(env, policy)``.
        mode: ``stochastic`` or ``deterministic``; unavailable: ``stall`` or ``renormalize``.
    """

    def __init__(self, env: VectorEnv, policy: Policy, binding: Binding, *, mode: Mode, unavailable: Unavailable) -> None:
        self.env, self.policy, self.binding = env, policy, binding
        self.deterministic = mode == Mode.DETERMINISTIC
        self.mode = mode
        self.renormalize = unavailable == Unavailable.RENORMALIZE
        # an adapter validates its own output and chooses in one call (BasePolicy.choose); a greedy one needs no
        # random numbers; observations go to it in its input dtype, in one buffer reused every step if it allows
        self.adapter = policy if isinstance(policy, BasePolicy) else None
        self.greedy = self.adapter is not None and self.adapter.greedy
        self.columns = binding.feature_columns
        self.all_columns = len(self.columns) == len(env.features) and np.array_equal(
            self.columns, np.arange(len(self.columns))
        )
        n_actions = len(policy.actions)
        self.action_index = None if np.array_equal(binding.action_index, np.arange(n_actions)) else binding.action_index
        self.buffered = self.adapter is not None and self.adapter.transient_input and self.all_columns and _takes_out(env)
        self.name = getattr(policy, "name", type(policy).__name__)

    def buffer(self, n: int) -> np.ndarray | None:
        """An observation buffer for batches of up to ``n`` runs (in the policy's input dtype), or None when the
        policy or the environment does not allow one. One per batch: a buffer is not shared between threads."""
        if self.adapter is None or not self.buffered:
            return None
        return np.empty((n, len(self.columns)), dtype=self.adapter.input_dtype)

    def step(
        self,
        states: np.ndarray,
        keys: np.ndarray,
        index: int,
        *,
        buf: np.ndarray | None = None,
        turn: Turn = _NO_TURN,
    ) -> Moves:
        """One step of the undecided runs in ``states`` ``(n, ...)`` with keys ``(n,)``; ``index`` selects their
        random numbers; ``buf`` from :meth:`buffer`; policy calls are made holding ``turn``."""
        n = len(keys)
        asked = self._asked(states)
        avail = self.env.available(states)
        actions, sure = self._actions(states, keys, index, asked, avail, buf, turn)
        moved = stalled = stuck = None
        ok = self._offered(avail, actions, asked)
        if ok is not None:
            stalled, moved = np.flatnonzero(~ok), np.flatnonzero(ok)
            states, actions, sure, keys = states.take(moved, axis=0), actions[moved], sure[moved], keys[moved]
        back = self.env.self_loops(states, actions) if len(keys) else None
        surely_back = None if back is None else sure & back
        if surely_back is not None and surely_back.any():
            at = np.arange(n) if moved is None else moved
            keep = np.flatnonzero(~surely_back)
            stuck, moved = at[surely_back], at[keep]
            states, actions, keys = states.take(keep, axis=0), actions[keep], keys[keep]
        successors = self.env.step(states, actions, uniforms(keys, index, ENV_STREAM)) if len(keys) else states[:0]
        return Moves(successors, moved, stalled, stuck)

    def _asked(self, states: np.ndarray) -> np.ndarray | None:
        """``(n,)`` bool: the runs whose state is not forced (the policy is asked about them); None: all of them."""
        forced = self.env.forced(states)
        if forced is None:
            return None
        asked = ~forced
        return None if asked.all() else asked

    @staticmethod
    def _offered(avail: np.ndarray | None, actions: np.ndarray, asked: np.ndarray | None) -> np.ndarray | None:
        """``(n,)`` bool: the chosen action is available (or the run is forced); None when every run's is."""
        if avail is None:
            return None
        ok = avail[np.arange(len(actions)), actions]
        if asked is not None:
            ok |= ~asked
        return None if ok.all() else ok

    def _actions(
        self,
        states: np.ndarray,
        keys: np.ndarray,
        index: int,
        asked: np.ndarray | None,
        avail: np.ndarray | None,
        buf: np.ndarray | None,
        turn: Turn,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(n,)`` env action indices and ``(n,)`` bool: the action is taken surely (a forced run: its single
        choice, whatever index; the policy is asked about the others)."""
        at = states if asked is None else states.take(np.flatnonzero(asked), axis=0)
        if not len(at):  # every run is in a forced state (e.g. a reset step drawing the start): no policy call
            col, surely = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        else:
            col, surely = self._ask(at, keys if asked is None else keys[asked], index, avail, asked, buf, turn)
        if self.deterministic:
            surely = np.ones(len(col), dtype=bool)
        chosen = col if self.action_index is None else self.action_index[col]
        if asked is None:
            return chosen, surely
        actions, sure = np.zeros(len(states), dtype=np.int64), np.ones(len(states), dtype=bool)
        actions[asked], sure[asked] = chosen, surely
        return actions, sure

    def _ask(
        self,
        at: np.ndarray,
        keys: np.ndarray,
        index: int,
        avail: np.ndarray | None,
        asked: np.ndarray | None,
        buf: np.ndarray | None,
        turn: Turn,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The policy's choice ``(column, surely)`` in the run states ``at`` (at least one; keys ``(len(at),)``):
        the runs ``asked`` of the batch (None: all), whose availability is ``avail`` (None: every action)."""
        obs = self._observe(at, buf)
        u = None
        if not self.deterministic and not self.greedy:
            u = uniforms(keys, index, POLICY_STREAM)
        rescale = self.renormalize and avail is not None
        if self.adapter is not None and not rescale:
            with turn:
                return self.adapter.choose(obs, u)
        with turn:
            probs = self.policy.action_probabilities(obs)
        probs = np.asarray(probs, dtype=np.float64)
        if self.adapter is None:  # adapters validate their own output; a bare protocol object's is checked here
            validate_probabilities(probs, len(at), len(self.policy.actions), source=self.name)
        if rescale:
            assert avail is not None
            env = self.env
            probs, _ = policy_weights(
                probs,
                (avail if asked is None else avail[asked])[:, self.binding.action_index],
                mode=self.mode,
                unavailable=Unavailable.RENORMALIZE,
                where=lambda i: env.describe(at[i]),
            )
        return choose_columns(probs, u)

    def _observe(self, at: np.ndarray, buf: np.ndarray | None) -> np.ndarray:
        """The policy's features of the run states ``at``: written into ``buf`` when given, else the env's
        observation columns the policy reads."""
        if buf is not None:
            into: Callable[..., np.ndarray] = self.env.observe  # (an env whose observe takes out=: _takes_out)
            return into(at, out=buf[: len(at)])
        obs = self.env.observe(at)
        return obs if self.all_columns else obs[:, self.columns]


def _takes_out(env: VectorEnv) -> bool:
    """Whether ``env.observe`` takes ``out=`` (a preallocated observation buffer)."""
    try:
        return "out" in inspect.signature(env.observe).parameters
    except (TypeError, ValueError):
        return False


__all__ = [
    "BOX_STREAM",
    "ENV_STREAM",
    "POLICY_STREAM",
    "START_STREAM",
    "Binding",
    "Moves",
    "Stepper",
    "Verdicts",
    "bind_policy",
    "check_labels",
    "decide",
    "draw_starts",
    "pick_starts",
]
