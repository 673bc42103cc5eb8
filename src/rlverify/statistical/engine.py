"""The lockstep simulator: many runs advance together, the policy is called once per step on all of them.

Semantics (as in the exact engine and the DSMC paper):

* at each step the policy gives ``pi(.|s)`` for every active run; ``stochastic`` mode samples the
  action from it, ``deterministic`` takes the argmax (ties: first in the policy's action order);
  runs in states whose single choice is unlabelled take it without asking the policy (the env's
  optional ``forced``);
* if the chosen action is not available in the run's state, the run *stalls* (``unavailable='stall'``,
  the default): it ends, counts as not satisfying the property and is reported in ``stalled`` (never
  replaced by another action); with ``unavailable='renormalize'`` (explicit opt-in) the policy's
  probabilities of unavailable actions are zeroed and its row rescaled before choosing, as the exact
  engine does (:func:`~rlverify.models.dynamics.policy_weights`);
* the property ``left U<=k right`` is decided on the fly: satisfied as soon as ``right`` holds,
  violated as soon as neither holds, or when the bound ``k`` is reached, or when the run sits in
  an absorbing state where ``right`` is false, or in a state from which no policy can reach ``right``
  any more (the property's :attr:`~rlverify.statistical.properties.PathProperty.hopeless` states, found
  by graph analysis of an explicit model; such runs are counted in ``hopeless``), or when the policy
  surely takes an action that surely leads back to the same state (the env's optional ``self_loops``:
  the run would stay there forever); a run still undecided after ``max_steps`` steps is *undecided*
  (neither true nor false).

Randomness is counter-based (:mod:`rlverify.statistical.rng`): run ``i`` uses the same random
numbers whatever the batch size, so results depend only on the seed.

Speed (the same results): a policy adapter (:class:`~rlverify.policies.BasePolicy`) is asked through its
fused :meth:`~rlverify.policies.BasePolicy.choose` (a greedy Q-value network returns its argmax, computed
by the runtime, without building probabilities or drawing random numbers); observations are written into
one buffer per batch in the dtype the policy takes (float32 for ONNX), when the environment's ``observe``
takes ``out=``; finished runs are compacted with index takes. With a policy that may be called from two
threads (:attr:`~rlverify.policies.BasePolicy.concurrent`, e.g. ONNX: the runtime releases the GIL while it
evaluates), each batch is cut into ``threads`` parts advanced by ``threads`` threads, at most one policy call at
a time: the numpy work of one part (environment step, labels, compaction) runs while the network evaluates
another's rows, so the network is not idle waiting for it; a thread that finishes its part takes the next one
(of the next batch), so no thread waits for the slowest part of a batch. A run's outcome depends only on its
own random numbers and start state, so the parts give exactly what the whole batch gives.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import numbers
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np

from rlverify.errors import OptionError, PolicyError, PropertyError
from rlverify.models.dynamics import check_unavailable, fit, policy_weights
from rlverify.policies.base import BasePolicy, Policy, choose_columns, validate_probabilities
from rlverify.statistical.properties import PathProperty
from rlverify.statistical.rng import run_keys, seed_key, uniforms

log = logging.getLogger(__name__)

MODES = ("stochastic", "deterministic")
#: run outcome codes
SATISFIED, VIOLATED, UNDECIDED = 1, 0, -1
_POLICY_STREAM, _ENV_STREAM, _START_STREAM = 0, 1, 2
#: a batch is cut between threads only if every part gets at least this many runs (smaller policy calls cost
#: more per row than the overlap saves; the results are the same either way)
MIN_PART_RUNS = 1024
#: guards: the longest run (steps) and the largest batch (runs in lockstep) accepted
MAX_STEPS = 10_000_000
MAX_BATCH = 10_000_000


def _positive_int(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and x > 0  # type: ignore[operator]


@dataclass(frozen=True)
class SimulationOptions:
    """How runs are simulated.

    Attributes:
        mode: ``stochastic`` (sample from pi) or ``deterministic`` (argmax of pi).
        max_steps: maximal run length (steps); longer runs are reported undecided.
        seed: seed of the counter-based random numbers.
        batch_size: runs simulated together (memory/speed only; results do not depend on it).
        unavailable: ``stall`` (a run choosing an unavailable action stalls) or ``renormalize``
            (the policy's row is rescaled over the available actions before choosing).
        threads: threads advancing parts of a batch at once, at most one policy call at a time (speed only;
            results do not depend on it). Used with a policy that may be called from several threads
            (:attr:`~rlverify.policies.BasePolicy.concurrent`: ONNX); 1, or any other policy: one thread.
            The environment's methods are then called from several threads on distinct arrays (the
            protocol's methods are functions of their arguments).
    """

    mode: str = "stochastic"
    max_steps: int = 10_000
    seed: int = 0
    batch_size: int = 20_000
    unavailable: str = "stall"
    threads: int = 2

    def validate(self) -> None:
        if self.mode not in MODES:
            raise OptionError(f"--mode: expected one of {', '.join(MODES)}, got '{self.mode}'")
        if not _positive_int(self.max_steps):
            raise OptionError(f"--max-steps: the maximal run length must be a positive integer, got {self.max_steps!r}")
        if self.max_steps > MAX_STEPS:
            raise OptionError(f"--max-steps {self.max_steps:,}: more than {MAX_STEPS:,} steps per run, refused (every "
                              "step of an open run is a policy call for its batch: a run that never decides would keep "
                              "it going for days); runs still open after --max-steps are reported undecided")
        if not _positive_int(self.batch_size):
            raise OptionError(f"--batch-size: expected a positive integer, got {self.batch_size!r}")
        if self.batch_size > MAX_BATCH:
            raise OptionError(f"--batch-size {self.batch_size:,}: more than {MAX_BATCH:,} runs in lockstep, refused "
                              "(memory grows with the batch: states, observations and the policy's output per run); "
                              "the batch size never changes a result")
        if not isinstance(self.seed, numbers.Integral) or isinstance(self.seed, bool):
            raise OptionError(f"--seed: expected an integer, got {self.seed!r}")
        check_unavailable(self.unavailable)
        if isinstance(self.threads, bool) or not isinstance(self.threads, numbers.Integral) or self.threads <= 0:
            raise OptionError(f"threads: expected a positive integer (1: one thread), got {self.threads!r}")


@dataclass(frozen=True)
class RunOutcomes:
    """Per-run results of a simulation.

    Attributes:
        outcome: ``(N,)`` int8, 1 satisfied / 0 violated / -1 undecided.
        stalled: ``(N,)`` bool, the run stalled (outcome 0).
        steps: ``(N,)`` int64, steps taken (policy decisions).
        recorded: label name -> ``(N,)`` bool value in the state where the run was decided/stopped.
        hopeless: ``(N,)`` bool, the run was decided violated because it reached a state from which
            ``right`` cannot be reached under any policy (outcome 0; the property's ``hopeless`` states).
    """

    outcome: np.ndarray
    stalled: np.ndarray
    steps: np.ndarray
    recorded: dict[str, np.ndarray]
    hopeless: np.ndarray


@dataclass(frozen=True)
class Binding:
    """How a policy's features and actions map onto an environment's."""

    feature_columns: np.ndarray
    action_index: np.ndarray  # (|A_policy|,) env action index of each policy action


def bind_policy(env: object, policy: Policy) -> Binding:
    """Check names and map the policy's features/actions to the environment's, reporting every problem.

    Raises:
        PolicyError: features the environment does not observe, actions it does not have.
    """
    for attr in ("features", "actions", "action_probabilities"):
        if not hasattr(policy, attr):
            raise PolicyError(f"{policy!r} is not a policy: it has no '{attr}' (see rlverify.policies.Policy)")
    features, actions = tuple(env.features), tuple(env.actions)  # type: ignore[attr-defined]
    names = fit(policy.features, policy.actions, variables=features, model_actions=actions)
    if not names.ok:
        raise PolicyError(f"policy {getattr(policy, 'name', type(policy).__name__)} does not fit {env.name}",  # type: ignore[attr-defined]
                          names.problems(where=env.name))  # type: ignore[attr-defined]
    return Binding(np.array([features.index(f) for f in policy.features], dtype=np.int64),
                   np.array([actions.index(a) for a in policy.actions], dtype=np.int64))


def choose_actions(probs: np.ndarray, u: np.ndarray | None) -> np.ndarray:
    """Policy column per row of ``probs`` ``(N, |A|)``: argmax when ``u`` is None, else sampled with uniforms ``u`` ``(N,)``
    (see :func:`~rlverify.policies.base.choose_columns`)."""
    return choose_columns(probs, u)[0]


def simulate(env: object, policy: Policy, prop: PathProperty, run_ids: np.ndarray, *,
             starts: np.ndarray | None = None, start_of_run: np.ndarray | None = None,
             options: SimulationOptions = SimulationOptions(), record: tuple[str, ...] = (),
             binding: Binding | None = None, on_batch: Callable[[int], None] | None = None) -> RunOutcomes:
    """Simulate runs ``run_ids`` ``(N,)`` (global indices: they select the random numbers).

    Args:
        env: a :class:`~rlverify.statistical.envs.VectorEnv`.
        policy: the oracle; called once per step on every active run of a batch.
        prop: the path property decided on the fly.
        run_ids: ``(N,)`` int64 global run indices.
        starts: ``(K, ...)`` start states (default ``env.initial_states()``).
        start_of_run: ``(N,)`` index into ``starts`` per run (default: uniform at random, from the seed).
        options: mode, maximal run length, seed, batch size, threads.
        record: labels whose value in the final state is returned (e.g. ``("crashed",)``).
        on_batch: called with the number of runs finished after each batch (progress).
    """
    options.validate()
    binding = binding or bind_policy(env, policy)
    for name in prop.left.labels() | prop.right.labels() | set(record):
        if name not in env.labels:  # type: ignore[attr-defined]
            env.label(name, env.initial_states()[:1])  # type: ignore[attr-defined]  # raises the unknown-label error
    starts = env.initial_states() if starts is None else starts  # type: ignore[attr-defined]
    if len(starts) == 0:
        raise PropertyError(f"{env.name}: no initial state")  # type: ignore[attr-defined]
    run_ids = np.asarray(run_ids, dtype=np.int64)
    key = seed_key(options.seed)
    N = len(run_ids)
    outcome = np.full(N, UNDECIDED, dtype=np.int8)
    stalled = np.zeros(N, dtype=bool)
    steps = np.zeros(N, dtype=np.int64)
    hopeless = np.zeros(N, dtype=bool)
    recorded = {name: np.zeros(N, dtype=bool) for name in record}
    parts = int(options.threads) if isinstance(policy, BasePolicy) and policy.concurrent else 1
    if parts > 1 and min(N, options.batch_size) < 2 * MIN_PART_RUNS:
        parts = 1
    batches = []  # per batch, its parts: (first, stop) run positions
    for b0 in range(0, N, options.batch_size):
        n = min(N, b0 + options.batch_size) - b0
        k = max(1, min(parts, n // MIN_PART_RUNS))
        cuts = [b0 + n * i // k for i in range(k + 1)]
        batches.append(list(zip(cuts, cuts[1:])))

    def run(a: int, b: int, turn: _Turn | None = None) -> None:  # runs a .. b - 1, into the result arrays
        keys = run_keys(key, run_ids[a:b])
        if start_of_run is None:
            pick = np.minimum((uniforms(keys, -1, _START_STREAM) * len(starts)).astype(np.int64), len(starts) - 1)
        else:
            pick = np.asarray(start_of_run[a:b], dtype=np.int64)
        res = _simulate_batch(env, policy, prop, binding, starts[pick], keys, options, record, turn=turn)
        outcome[a:b], stalled[a:b], steps[a:b], hopeless[a:b] = res[0], res[1], res[2], res[4]
        for name in record:
            recorded[name][a:b] = res[3][name]

    if parts == 1:
        for batch in batches:
            for a, b in batch:
                run(a, b)
            if on_batch is not None:
                on_batch(batch[-1][1] - batch[0][0])
    else:
        with ThreadPoolExecutor(parts, thread_name_prefix="rlverify-sim") as pool:
            _run_parts(pool, run, batches, on_batch)
    return RunOutcomes(outcome=outcome, stalled=stalled, steps=steps, recorded=recorded, hopeless=hopeless)


class _Cancelled(Exception):
    """A part stopped because another part failed (never seen outside :func:`_run_parts`)."""


class _Turn:
    """Held around every policy call of the parts of a simulation: one call at a time; after a part failed, the
    others stop at their next call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failed = threading.Event()

    def __enter__(self) -> None:
        self.lock.acquire()
        if self.failed.is_set():
            self.lock.release()
            raise _Cancelled

    def __exit__(self, kind: type | None, *exc: object) -> None:
        if kind is not None:
            self.failed.set()  # before another part takes its turn
        self.lock.release()


def _run_parts(pool: ThreadPoolExecutor, run: Callable[..., None], batches: list[list[tuple[int, int]]],
               on_batch: Callable[[int], None] | None) -> None:
    """``run(a, b, turn)`` for every part of every batch in the threads of ``pool``, in order, one policy call at a
    time: a thread that finishes a part takes the next one (also of the next batch) while the others finish
    theirs. ``on_batch`` is called (in this thread) as each batch is complete, in order. The first error in part
    order (not counting parts stopped because of it) is raised as it was raised in its thread."""
    turn = _Turn()

    def part(a: int, b: int) -> None:
        try:
            run(a, b, turn)
        except BaseException:
            turn.failed.set()
            raise

    futures = [[pool.submit(part, a, b) for a, b in batch] for batch in batches]
    try:
        for batch, done in zip(batches, futures):
            wait(done)
            if any(f.exception() is not None for f in done):
                break
            if on_batch is not None:
                on_batch(batch[-1][1] - batch[0][0])
    except BaseException:  # e.g. KeyboardInterrupt, or from on_batch: the parts stop at their next policy call
        turn.failed.set()
        raise
    finally:
        if turn.failed.is_set():
            for f in (f for done in futures for f in done):
                f.cancel()
    if turn.failed.is_set():
        everything = [f for done in futures for f in done if not f.cancelled()]
        wait(everything)
        for f in everything:
            err = f.exception()
            if err is not None and not isinstance(err, _Cancelled):
                raise err


_NO_TURN = contextlib.nullcontext()


def _simulate_batch(env, policy, prop: PathProperty, binding: Binding, states: np.ndarray, keys: np.ndarray,
                    options: SimulationOptions, record: tuple[str, ...], *, turn: _Turn | None = None):
    """Outcomes of the runs with ``keys`` ``(n,)`` from ``states``; policy calls are made holding ``turn`` (if
    given: the parts of a batch in threads)."""
    n = len(keys)
    outcome = np.full(n, UNDECIDED, dtype=np.int8)
    stalled = np.zeros(n, dtype=bool)
    steps = np.zeros(n, dtype=np.int64)  # set when a run is decided: the step count t at that moment
    hopeless = np.zeros(n, dtype=bool)
    recorded = {name: np.zeros(n, dtype=bool) for name in record}
    active = np.arange(n)
    akeys = keys  # keys of the active runs, compacted with them
    bound = prop.bound
    deterministic = options.mode == "deterministic"
    forced_fn = getattr(env, "forced", None)
    loops_fn = getattr(env, "self_loops", None)  # optional: (states, actions) -> returns surely to the same state
    describe = getattr(env, "describe", None)  # optional: state -> its description (messages)
    renormalize = options.unavailable == "renormalize"
    n_actions = len(policy.actions)
    # an adapter validates its own output and chooses in one call (BasePolicy.choose); a greedy one needs no
    # random numbers; observations go to it in its input dtype, in one buffer reused every step if it allows
    fused = isinstance(policy, BasePolicy)
    greedy = fused and policy.greedy
    columns = binding.feature_columns
    all_columns = len(columns) == len(env.features) and np.array_equal(columns, np.arange(len(columns)))
    action_index = None if np.array_equal(binding.action_index, np.arange(n_actions)) else binding.action_index
    turn = _NO_TURN if turn is None else turn
    buf = None
    if fused and policy.transient_input and all_columns and _takes_out(env):
        buf = np.empty((n, len(columns)), dtype=policy.input_dtype)
    t = 0
    while len(active):
        right = prop.right.evaluate(env, states)
        left = prop.left.evaluate(env, states)
        violated = ~right & (~left | env.terminal(states))
        if bound is not None and t >= bound:
            violated |= ~right
        if prop.hopeless is not None:
            doomed = prop.hopeless.evaluate(env, states) & ~violated & ~right
            if doomed.any():
                hopeless[active[doomed]] = True
                violated |= doomed
        done = right | violated
        if t >= options.max_steps:
            done = np.ones(len(active), dtype=bool)
        if done.any():
            idx = active[done]
            outcome[idx] = np.where(right[done], SATISFIED, np.where(violated[done], VIOLATED, UNDECIDED))
            steps[idx] = t
            for name in record:
                recorded[name][idx] = env.label(name, states[done])
            keep = np.flatnonzero(~done)
            active, states, akeys = active[keep], states.take(keep, axis=0), akeys[keep]
            if not len(active):
                break
        # runs in forced states take their single choice: the policy is asked only where it decides
        asked = None if forced_fn is None else ~forced_fn(states)
        if asked is not None and asked.all():
            asked = None
        at = states if asked is None else states.take(np.flatnonzero(asked), axis=0)
        avail = env.available(states)
        if not len(at):  # every run is in a forced state (e.g. a reset step drawing the start): no policy call
            col, surely = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        else:
            if buf is not None:
                obs = env.observe(at, out=buf[:len(at)])
            else:
                obs = env.observe(at)
                obs = obs if all_columns else obs[:, columns]
            u = None
            if not deterministic and not greedy:
                u = uniforms(akeys if asked is None else akeys[asked], t, _POLICY_STREAM)
            if fused and (not renormalize or avail is None):
                with turn:
                    col, surely = policy.choose(obs, u)
            else:
                with turn:
                    probs = policy.action_probabilities(obs)
                probs = np.asarray(probs, dtype=np.float64)
                if not fused:  # adapters validate their own output; a bare protocol object is checked here
                    validate_probabilities(probs, len(at), n_actions, source=getattr(policy, "name", type(policy).__name__))
                if renormalize and avail is not None:
                    probs, _ = policy_weights(probs, (avail if asked is None else avail[asked])[:, binding.action_index],
                                              mode=options.mode, unavailable="renormalize",
                                              where=lambda i: describe(at[i]) if describe is not None else at[i])
                col, surely = choose_columns(probs, u)  # surely: the policy takes this action with probability 1
            if deterministic:
                surely = np.ones(len(col), dtype=bool)
        chosen = col if action_index is None else action_index[col]
        if asked is None:
            actions, sure = chosen, surely
        else:  # forced runs: any action index (the env takes the forced choice), surely
            actions, sure = np.zeros(len(active), dtype=np.int64), np.ones(len(active), dtype=bool)
            actions[asked], sure[asked] = chosen, surely
        if avail is not None:
            ok = avail[np.arange(len(active)), actions]
            if asked is not None:
                ok |= ~asked
            if not ok.all():
                bad = active[~ok]
                stalled[bad] = True
                outcome[bad] = VIOLATED
                steps[bad] = t
                for name in record:
                    recorded[name][bad] = False
                keep = np.flatnonzero(ok)
                active, states, actions, sure, akeys = (active[keep], states.take(keep, axis=0), actions[keep], sure[keep],
                                                        akeys[keep])
                if not len(active):
                    break
        if loops_fn is not None:
            # a run whose policy surely takes an action leading back to the same state with
            # probability 1 stays there forever: `right` (false now) never holds, so it is decided
            stuck = sure & loops_fn(states, actions)
            if stuck.any():
                idx = active[stuck]
                outcome[idx] = VIOLATED
                steps[idx] = t
                for name in record:
                    recorded[name][idx] = env.label(name, states[stuck])
                keep = np.flatnonzero(~stuck)
                active, states, actions, akeys = active[keep], states.take(keep, axis=0), actions[keep], akeys[keep]
                if not len(active):
                    break
        states = env.step(states, actions, uniforms(akeys, t, _ENV_STREAM))
        t += 1
    return outcome, stalled, steps, recorded, hopeless


def _takes_out(env: object) -> bool:
    """Whether ``env.observe`` takes ``out=`` (a preallocated observation buffer)."""
    try:
        return "out" in inspect.signature(env.observe).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False
