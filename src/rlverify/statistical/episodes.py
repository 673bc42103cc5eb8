"""The episode simulator: a Gymnasium environment without a transition table, stepped in lockstep copies.

The copies (:func:`~rlverify.models.gym_vector.open_vector`) hold one episode each. Episode ``i`` (a
global run index) is reset with a seed computed from the run's seed and ``i`` alone, and the policy's random numbers
for its step ``t`` are ``uniforms(key_i, t, POLICY_STREAM)`` (counter-based, :mod:`.rng`): an episode's outcome does
not depend on the slot, the batch, the number of copies, the worker or the backend it ran on. When an episode ends,
its slot is reset with the next episode before the copies step again (no autoreset cuts or repeats an episode).

Each episode is read as rows (:mod:`rlverify.models.gym_simulator`) and decided on the fly by the one rule of the
lockstep simulator (:func:`~rlverify.statistical.step.decide`): satisfied as soon as ``right`` holds; violated when
``left`` fails, when the episode *terminated* without ``right`` (a terminal state), or at the bound. An episode
*truncated* (a time limit) before deciding is **undecided** (what would have followed is unknown), and so is one
still open after ``max_steps`` steps. The policy is asked once per lockstep step, on every open episode.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from rlverify.choices import Mode
from rlverify.errors import ModelError, OptionError, PolicyError
from rlverify.models.gym_simulator import EPISODE_COLUMNS, GymSimulator
from rlverify.models.gym_vector import EpisodeVector, SlotError, Stepped, one_line, open_vector
from rlverify.policies.base import BasePolicy, Policy, choose_columns, validate_probabilities
from rlverify.statistical.outcomes import UNDECIDED, OutcomeArrays, RunOutcomes
from rlverify.statistical.properties import PathProperty
from rlverify.statistical.rng import run_keys, seed_key, uniforms
from rlverify.statistical.step import POLICY_STREAM, Binding, decide

if TYPE_CHECKING:
    from rlverify.statistical.engine import SimulationOptions

R = TypeVar("R")

__all__ = ["ENV_SEED_STREAM", "NOISE_STREAM", "episode_seeds", "max_copies", "simulate_episodes"]

#: the random streams of an episode: its environment's seed, and a continuous policy's noise (dimension ``j`` in
#: stream ``NOISE_STREAM + j``)
ENV_SEED_STREAM, NOISE_STREAM = 3, 16
#: the most lockstep copies, by how they are made (the native implementation is one array; copies are objects)
COPIES = {"native": 4096, "sync": 256, "async": 8}


def episode_seeds(seed: int, run_ids: np.ndarray) -> list[int]:
    """The environment seed of each episode ``run_ids`` ``(N,)``: a 63-bit number from the run's seed and the index."""
    keys = run_keys(seed_key(seed) ^ np.uint64(0xA5A5_5A5A_C3C3_3C3C), np.asarray(run_ids, dtype=np.int64))
    return [int(k) >> 1 for k in keys.tolist()]


def max_copies(sim: GymSimulator) -> int:
    """How many copies run in lockstep at most (speed only: results do not depend on it)."""
    kind = "native" if sim.native is not None else str(sim.vectorization)
    return COPIES.get(kind, COPIES["sync"])


#: copies kept open in this process (a Ray worker simulates many tasks of one job): ``id(sim)`` -> (sim, copies)
_OPEN: dict[int, tuple[GymSimulator, EpisodeVector]] = {}


def _copies(sim: GymSimulator, count: int) -> EpisodeVector:
    """``count`` copies of ``sim``, the ones already open when they are as many."""
    held = _OPEN.get(id(sim))
    if held is not None and held[0] is sim and held[1].copies == count:
        return held[1]
    if held is not None:
        held[1].close()
    vec = open_vector(sim, count)
    _OPEN[id(sim)] = (sim, vec)
    return vec


def close_copies() -> None:
    """Close every open copy (worker processes of ``async``)."""
    for _, vec in list(_OPEN.values()):
        vec.close()
    _OPEN.clear()


class _Slots:
    """The episodes in ``n`` copies: per slot, the position (in the runs asked for) of its episode (-1: idle), its
    step count, and its last step's row: one ``(n, len(sim.columns))`` float64 table whose columns are the
    observation, reward, terminated, truncated, step and the info entries read (the labels' rows, gathered with
    one index per lockstep rather than assembled from parts)."""

    def __init__(self, n: int, sim: GymSimulator) -> None:
        f = len(sim.features)
        self.run = np.full(n, -1, dtype=np.int64)
        self.t = np.zeros(n, dtype=np.int64)
        self.table = np.zeros((n, f + len(EPISODE_COLUMNS) + len(sim.info_keys)))
        self.obs = self.table[:, :f]  # views of the table's columns
        self.reward, self.terminated, self.truncated, self.step = (self.table[:, f + i] for i in range(4))
        self.info = {k: self.table[:, f + 4 + i] for i, k in enumerate(sim.info_keys)}
        self.ret = np.zeros(n)  # the return summed so far (EpisodeReturn), and the discount of the next step
        self.weight = np.ones(n)

    def rows(self, slots: np.ndarray) -> np.ndarray:
        """``(len(slots), len(columns))`` episode rows of ``slots``."""
        return self.table[slots]


class _Run:
    """One call of :func:`simulate_episodes`: the copies, the queue of episodes and their outcomes."""

    def __init__(
        self,
        sim: GymSimulator,
        policy: Policy,
        prop: PathProperty,
        run_ids: np.ndarray,
        options: SimulationOptions,
        record: tuple[str, ...],
        binding: Binding,
    ) -> None:
        self.sim, self.policy, self.prop, self.options, self.record = sim, policy, prop, options, record
        self.run_ids = np.asarray(run_ids, dtype=np.int64)
        self.keys = run_keys(seed_key(options.seed), self.run_ids)
        self.seeds = episode_seeds(options.seed, self.run_ids)
        self.returns = options.episode_return
        self.out = OutcomeArrays.empty(len(self.run_ids), record, returns=self.returns is not None)
        self.columns = binding.feature_columns
        self.all_columns = np.array_equal(self.columns, np.arange(len(sim.features)))
        self.action_index = binding.action_index
        self.deterministic = Mode(options.mode) == Mode.DETERMINISTIC
        self.next = 0
        self.deadline = time.monotonic() + TIME_LIMIT
        count = min(len(self.run_ids), int(options.batch_size), max_copies(sim))
        self.vec = _copies(sim, count)
        self.slots = _Slots(self.vec.copies, sim)

    # --- the loop -------------------------------------------------------------------------------------

    def simulate(self) -> RunOutcomes:
        self._refill(np.ones(self.vec.copies, dtype=bool))
        while True:
            open_ = np.flatnonzero(self.slots.run >= 0)
            if not len(open_):
                break
            self._check_time()
            stepped = self._step(open_)
            self._advance(open_, stepped)
            self._reset_idle(stepped)
            ended = self._decide(open_)
            if len(ended):
                self._refill_slots(ended)
        return self.out.outcomes()

    def _refill(self, mask: np.ndarray) -> None:
        """Reset the slots ``mask`` with the next episodes and decide their first rows; slots whose new episode is
        decided at once take the next ones, until none is (a loop: many may be)."""
        while True:
            fresh = self._reset(mask)
            decided = self._decide(fresh) if len(fresh) else fresh
            if not len(decided):
                return
            mask = np.zeros(self.vec.copies, dtype=bool)
            mask[decided] = True

    def _reset(self, mask: np.ndarray) -> np.ndarray:
        """Reset the slots ``mask`` with the next episodes; returns the slots given an episode. Past the last episode
        a slot is left idle: reset without a seed so that every copy may be stepped (its rows are never read), or
        not at all where the copies reset their own ended slots (the native implementation's autoreset)."""
        slots = np.flatnonzero(mask)
        take = min(len(slots), len(self.run_ids) - self.next)
        positions = np.full(len(slots), -1, dtype=np.int64)
        positions[:take] = np.arange(self.next, self.next + take)
        self.next += take
        s = self.slots
        s.run[slots] = positions
        if not self.vec.steps_idle:  # idle slots: never stepped, or reset by the implementation's own autoreset
            slots, positions = slots[:take], positions[:take]
            mask = np.zeros(self.vec.copies, dtype=bool)
            mask[slots] = True
        if not len(slots):
            return slots
        seeds = [self.seeds[p] if p >= 0 else None for p in positions.tolist()]
        obs = self._guarded(lambda: self.vec.reset(mask, seeds), "resetting", positions[:take])
        s.t[slots] = 0
        s.table[slots] = 0.0
        s.obs[slots] = self._checked_obs(obs[slots], slots)
        s.ret[slots] = 0.0
        s.weight[slots] = 1.0
        return slots[positions >= 0]

    def _refill_slots(self, slots: np.ndarray) -> None:
        mask = np.zeros(self.vec.copies, dtype=bool)
        mask[slots] = True
        self._refill(mask)

    def _decide(self, slots: np.ndarray) -> np.ndarray:
        """Decide the episodes in ``slots`` on their current rows; returns the slots whose episode ended."""
        s, prop = self.slots, self.prop
        rows = s.rows(slots)
        t = s.t[slots]
        verdicts = decide(self.sim, prop, rows, t)
        done = verdicts.right | verdicts.violated
        cut = ~done & ((s.truncated[slots] != 0) | (t >= self.options.max_steps))
        ended = done | cut
        if not ended.any():
            return slots[:0]
        positions = s.run[slots]
        self.out.finish(self.sim, positions, rows, verdicts, 0, everything=False)
        where = positions[cut]
        self.out.outcome[where] = UNDECIDED
        self.out.steps[positions[ended]] = t[ended]
        if self.out.returns is not None:
            self.out.returns[positions[ended]] = s.ret[slots[ended]]
        for name in self.record:
            self.out.recorded[name][where] = self.sim.label(name, rows[cut])
        s.run[slots[ended]] = -1
        return slots[ended]

    def _step(self, open_: np.ndarray) -> Stepped:
        actions = self._actions(open_)
        return self._guarded(lambda: self.vec.step(actions, open_), "stepping", self.slots.run[open_], self.slots.t[open_] + 1)

    def _advance(self, open_: np.ndarray, stepped: Stepped) -> None:
        """Write what the step gave into the rows, checked on the open episodes' rows. Every copy's row is written
        whole (column writes, no gather): an idle copy's row is never read (a slot's row is cleared when it is
        given an episode)."""
        s = self.slots
        s.t[open_] += 1  # (first: what this step returned is named by its own step number)
        obs, reward = stepped.obs, stepped.reward
        if obs.ndim != 2 or obs.shape[1] != len(self.sim.features):
            self._checked_obs(obs, open_)  # names the change of shape
        if not np.isfinite(obs).all():
            self._checked_obs(obs[open_], open_)  # a non-finite number in an open episode's observation
        if not np.isfinite(reward).all():
            bad = ~np.isfinite(reward[open_])
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ModelError(f"{self._where(open_[i])}: the environment returned the reward {reward[open_][i]!r}")
        s.obs[:] = obs
        s.reward[:] = reward
        s.terminated[:] = stepped.terminated
        s.truncated[:] = stepped.truncated
        s.step[:] = s.t
        for k in self.sim.info_keys:
            s.info[k][:] = stepped.info[k]
        if self.returns is not None:
            gained = reward[open_] if not self.returns.reward else s.info[self.returns.reward][open_]
            if not np.isfinite(gained).all():
                i = int(np.flatnonzero(~np.isfinite(gained))[0])
                raise ModelError(f'{self._where(open_[i])}: info["{self.returns.reward}"] is {gained[i]!r}')
            s.ret[open_] += s.weight[open_] * gained
            s.weight[open_] *= self.returns.discount

    def _reset_idle(self, stepped: Stepped) -> None:
        """Idle copies whose (unread) episode ended are reset before the copies step again."""
        idle = (self.slots.run < 0) & (stepped.terminated | stepped.truncated)
        if idle.any() and self.vec.steps_idle:
            self._reset(idle)

    # --- the policy -----------------------------------------------------------------------------------

    def _actions(self, open_: np.ndarray) -> np.ndarray:
        """Every copy's action: the policy's for the open episodes (one call), a neutral one for the idle copies."""
        sim, s = self.sim, self.slots
        obs = s.obs[open_] if self.all_columns else s.obs[open_][:, self.columns]
        keys, steps = self.keys[s.run[open_]], s.t[open_]
        if sim.continuous:
            chosen = self._continuous_actions(obs, keys, steps, open_)
            full = np.zeros((self.vec.copies, len(sim.actions)), dtype=np.float32)
            full[:] = np.clip(0.0, sim.action_low, sim.action_high)
            full[open_] = chosen
            return full
        cols = self._columns(obs, keys, steps)
        full_d = np.full(self.vec.copies, sim.action_start, dtype=np.int64)
        full_d[open_] = self.action_index[cols] + sim.action_start
        return full_d

    def _columns(self, obs: np.ndarray, keys: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """The policy's action columns for ``obs`` (sampled with each episode's own uniforms, or its argmax)."""
        policy = self.policy
        greedy = isinstance(policy, BasePolicy) and policy.greedy
        u = None if self.deterministic or greedy else uniforms(keys, steps, POLICY_STREAM)
        if isinstance(policy, BasePolicy):
            return policy.choose(obs, u)[0]
        probs = np.asarray(policy.action_probabilities(obs), dtype=np.float64)
        validate_probabilities(probs, len(obs), len(policy.actions), source=getattr(policy, "name", "policy"))
        return choose_columns(probs, u)[0]

    def _continuous_actions(self, obs: np.ndarray, keys: np.ndarray, steps: np.ndarray, open_: np.ndarray) -> np.ndarray:
        """``(n, d)`` actions of a policy over a Box action space (``act(obs, noise)``), checked against the space."""
        from scipy.special import ndtri  # lazy: scipy, only for continuous actions

        sim = self.sim
        act: Callable[[np.ndarray, np.ndarray | None], np.ndarray] | None = getattr(self.policy, "act", None)
        if act is None:
            raise PolicyError(
                f"{sim.name} has a Box action space: the policy must give actions (a continuous policy, e.g. an SB3 "
                f"SAC/TD3/DDPG/PPO zip trained on it), not probabilities over {len(self.policy.actions)} named actions"
            )
        noise = None
        if not self.deterministic:
            noise = np.stack([ndtri(uniforms(keys, steps, NOISE_STREAM + j)) for j in range(len(sim.actions))], axis=1)
        try:
            actions = np.asarray(act(obs, noise), dtype=np.float64)
        except PolicyError as exc:  # a row the policy refused (its own bounds): the episode and step it was
            if exc.row is None or not 0 <= exc.row < len(open_):
                raise
            raise PolicyError(f"{self._where(open_[exc.row])}: {exc}") from None
        if actions.shape != (len(obs), len(sim.actions)):
            raise PolicyError(
                f"{getattr(self.policy, 'name', 'policy')}: gave actions of shape {actions.shape}, expected "
                f"({len(obs)}, {len(sim.actions)})"
            )
        assert sim.action_low is not None and sim.action_high is not None
        outside = ~np.isfinite(actions) | (actions < sim.action_low) | (actions > sim.action_high)
        if outside.any():
            i = int(np.flatnonzero(outside.any(axis=1))[0])
            raise PolicyError(
                f"{self._where(open_[i])}: the policy's action {actions[i].tolist()} is outside the action space "
                f"[{sim.action_low.tolist()}, {sim.action_high.tolist()}]"
            )
        return actions

    # --- guards ---------------------------------------------------------------------------------------

    def _which(self, ids: np.ndarray, steps: np.ndarray | None) -> str:
        """The episodes (and steps) a failed call of the environment was for, in words."""
        if not len(ids):
            return "a copy left idle after the last episode (no episode of the estimate)"
        at = (
            ""
            if steps is None
            else f", step {int(steps[0])}"
            if len(ids) == 1
            else f", steps {int(steps.min())}..{int(steps.max())}"
        )
        if len(ids) == 1:
            return f"episode {int(ids[0])}{at}"
        return f"one of episodes {int(ids.min())}..{int(ids.max())}{at} (--batch-size 1 names the one)"

    def _guarded(self, call: Callable[[], R], what: str, positions: np.ndarray, steps: np.ndarray | None = None) -> R:
        try:
            return call()
        except SlotError as exc:  # one copy failed: its episode and step
            raise ModelError(f"{self._where(exc.slot, stepped=what == 'stepping')}: {exc}") from None
        except (ModelError, PolicyError, OptionError):
            raise
        except Exception as exc:  # the environment's own code: its failure is bad input
            held = positions >= 0
            ids = self.run_ids[positions[held]]
            which = self._which(ids, steps[held] if steps is not None else None)
            raise ModelError(
                f"{self.sim.name}: the environment raised {type(exc).__name__} while {what} {which}: {one_line(exc)}"
            ) from None

    def _checked_obs(self, obs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        f = len(self.sim.features)
        if obs.ndim != 2 or obs.shape[1] != f:
            raise ModelError(
                f"{self._where(slots[0])}: the observation has {obs.shape[1] if obs.ndim == 2 else obs.size} "
                f"numbers, the observation space {f}: the environment changed its observation's shape"
            )
        bad = ~np.isfinite(obs)
        if bad.any():
            i, j = (int(x) for x in np.argwhere(bad)[0])
            raise ModelError(
                f"{self._where(slots[i])}: the environment returned {self.sim.features[j]} = {obs[i, j]!r} "
                "(not a finite number)"
            )
        return obs

    def _where(self, slot: int | np.integer, *, stepped: bool = False) -> str:
        """The episode in ``slot`` and its step (``stepped``: the step being taken, not yet counted)."""
        s = self.slots
        run = int(s.run[slot])
        if run < 0:
            return f"{self.sim.name}: a copy left idle after the last episode (no episode of the estimate)"
        return f"{self.sim.name}: episode {int(self.run_ids[run])}, step {int(s.t[slot]) + int(stepped)}"

    def _check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise OptionError(
                f"{self.sim.name}: the simulation ran past its wall-clock guard of {TIME_LIMIT:,.0f} s "
                f"({int(self.next):,} episodes started); ask for fewer runs, lower --max-steps, or raise the guard "
                "(rlverify.statistical.episodes.TIME_LIMIT)"
            )


#: the wall-clock guard of one simulation call (seconds)
TIME_LIMIT = 3600.0


def simulate_episodes(
    sim: GymSimulator,
    policy: Policy,
    prop: PathProperty,
    run_ids: np.ndarray,
    *,
    options: SimulationOptions,
    record: tuple[str, ...] = (),
    binding: Binding,
) -> RunOutcomes:
    """Simulate episodes ``run_ids`` ``(N,)`` of ``sim`` under ``policy`` and decide ``prop`` on each (see the
    module docstring); the outcomes depend only on ``options.seed`` and the run indices.

    Raises:
        ModelError: the environment raised, returned a NaN or infinite number, or changed its observation's shape
            (naming the episode and step); PolicyError: an action outside the action space; OptionError: past the
            wall-clock guard.
    """
    if len(run_ids) == 0:
        return OutcomeArrays.empty(0, record).outcomes()
    return _Run(sim, policy, prop, run_ids, options, record, binding).simulate()


def columns_note(sim: GymSimulator) -> str:
    """How the episodes were read, for the result's notes."""
    return (
        f"{sim.name} has no transition table: simulated episode by episode with Gymnasium's own step, "
        f"{sim.describe_vectorization()}; episode i is seeded from --seed and i alone; labels read "
        f"{', '.join((*sim.features, *EPISODE_COLUMNS))}"
    )
