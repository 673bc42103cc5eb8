"""The lockstep simulator: many runs advance together, the policy is called once per step on all of them.

Semantics (as in the exact engine and the DSMC paper): each step is :meth:`~rlverify.statistical.step.Stepper.step`
(the one step, shared with importance splitting: forced states, stochastic or deterministic choice, stalling on an
unavailable action or, opted in, renormalising, sure self-loops); before it, :func:`~rlverify.statistical.step.decide`
decides the property ``left U<=k right`` on the fly: satisfied as soon as ``right`` holds, violated as soon as
neither holds, or when the bound ``k`` is reached, or when the run sits in an absorbing state where ``right`` is
false, or in a state from which no policy can reach ``right`` any more (the property's
:attr:`~rlverify.statistical.properties.PathProperty.hopeless` states, found by graph analysis of an explicit model;
such runs are counted in ``hopeless``). A run that stalls (its chosen action is unavailable; the default
``unavailable='stall'``) ends, counts as not satisfying the property and is reported in ``stalled``; a run whose
policy surely takes an action that surely leads back to the same state is violated (it would stay there forever);
a run still undecided after ``max_steps`` steps is *undecided* (neither true nor false).

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
import itertools
import logging
import numbers
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np

from rlverify.choices import Mode, Unavailable
from rlverify.errors import OptionError, PropertyError
from rlverify.models.dynamics import check_unavailable
from rlverify.models.gym_simulator import GymSimulator
from rlverify.policies.base import BasePolicy, Policy, choose_columns
from rlverify.statistical.envs import VectorEnv
from rlverify.statistical.episodes import simulate_episodes
from rlverify.statistical.outcomes import SATISFIED, UNDECIDED, VIOLATED, EpisodeReturn, OutcomeArrays, RunOutcomes
from rlverify.statistical.properties import PathProperty
from rlverify.statistical.rng import run_keys, seed_key
from rlverify.statistical.step import Binding, Stepper, bind_policy, check_labels, decide, draw_starts

log = logging.getLogger(__name__)

#: the simulator's ``--mode`` values (no ``monolithic``: a simulation needs a policy)
MODES = (Mode.STOCHASTIC.value, Mode.DETERMINISTIC.value)
#: a batch is cut between threads only if every part gets at least this many runs (smaller policy calls cost
#: more per row than the overlap saves; the results are the same either way)
MIN_PART_RUNS = 1024
#: guards: the longest run (steps) and the largest batch (runs in lockstep) accepted
MAX_STEPS = 10_000_000
MAX_BATCH = 10_000_000


def positive_int(x: object) -> bool:
    """Whether ``x`` is a positive whole number (an integer type, not a bool)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and int(x) > 0


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

    mode: Mode | str = Mode.STOCHASTIC  # text accepted at the door, a member after it
    max_steps: int = 10_000
    seed: int = 0
    batch_size: int = 20_000
    unavailable: Unavailable | str = Unavailable.STALL
    threads: int = 2
    #: Gymnasium episodes only: each episode's return is summed too (:class:`~rlverify.statistical.outcomes.EpisodeReturn`)
    episode_return: EpisodeReturn | None = None

    def __post_init__(self) -> None:
        """Text given for ``mode``/``unavailable`` becomes the member (an unknown one is refused by :meth:`validate`)."""
        if self.mode in MODES:
            object.__setattr__(self, "mode", Mode(self.mode))
        if self.unavailable in tuple(Unavailable):
            object.__setattr__(self, "unavailable", Unavailable(self.unavailable))

    def validate(self) -> None:
        if self.mode not in MODES:
            raise OptionError(f"--mode: expected one of {', '.join(MODES)}, got '{self.mode}'")
        self._check_sizes()
        if not isinstance(self.seed, numbers.Integral) or isinstance(self.seed, bool):
            raise OptionError(f"--seed: expected an integer, got {self.seed!r}")
        check_unavailable(self.unavailable)
        if not positive_int(self.threads):
            raise OptionError(f"threads: expected a positive integer (1: one thread), got {self.threads!r}")

    def stepper(self, env: VectorEnv, policy: Policy, binding: Binding) -> Stepper:
        """The step of ``env`` and ``policy`` in this mode, with these unavailable actions."""
        return Stepper(env, policy, binding, mode=Mode(self.mode), unavailable=Unavailable(self.unavailable))

    def _check_sizes(self) -> None:
        """The run length and batch size: positive and under their guards."""
        if not positive_int(self.max_steps):
            raise OptionError(f"--max-steps: the maximal run length must be a positive integer, got {self.max_steps!r}")
        if self.max_steps > MAX_STEPS:
            raise OptionError(
                f"--max-steps {self.max_steps:,}: more than {MAX_STEPS:,} steps per run, refused (every "
                "step of an open run is a policy call for its batch: a run that never decides would keep "
                "it going for days); runs still open after --max-steps are reported undecided"
            )
        if not positive_int(self.batch_size):
            raise OptionError(f"--batch-size: expected a positive integer, got {self.batch_size!r}")
        if self.batch_size > MAX_BATCH:
            raise OptionError(
                f"--batch-size {self.batch_size:,}: more than {MAX_BATCH:,} runs in lockstep, refused "
                "(memory grows with the batch: states, observations and the policy's output per run); "
                "the batch size never changes a result"
            )


def choose_actions(probs: np.ndarray, u: np.ndarray | None) -> np.ndarray:
    """Policy column per row of ``probs`` ``(N, |A|)``: argmax when ``u`` is None, else sampled with uniforms ``u`` ``(N,)``
    (see :func:`~rlverify.policies.base.choose_columns`)."""
    return choose_columns(probs, u)[0]


def simulate(
    env: VectorEnv,
    policy: Policy,
    prop: PathProperty,
    run_ids: np.ndarray,
    *,
    starts: np.ndarray | None = None,
    start_of_run: np.ndarray | None = None,
    options: SimulationOptions | None = None,
    record: tuple[str, ...] = (),
    binding: Binding | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> RunOutcomes:
    """Simulate runs ``run_ids`` ``(N,)`` (global indices: they select the random numbers).

    Args:
        env: a :class:`~rlverify.statistical.envs.VectorEnv`.
        policy: the oracle; called once per step on every active run of a batch.
        prop: the path property decided on the fly.
        run_ids: ``(N,)`` int64 global run indices.
        starts: ``(K, ...)`` start states (default: the environment's initial states, or its initial box).
        start_of_run: ``(N,)`` index into ``starts`` per run (default: uniform at random, from the seed).
        options: mode, maximal run length, seed, batch size, threads (default :class:`SimulationOptions`).
        record: labels whose value in the final state is returned (e.g. ``("crashed",)``).
        binding: ``bind_policy(env, policy)`` if already known.
        on_batch: called with the number of runs finished after each batch (progress).
    """
    options = SimulationOptions() if options is None else options
    options.validate()
    if isinstance(env, GymSimulator):  # a Gymnasium environment without a transition table: its own copies step
        if starts is not None or start_of_run is not None:
            raise PropertyError(f"{env.name}: episodes start where the environment's reset puts them (no starts=)")
        bound = binding or bind_policy(env, policy)
        return simulate_episodes(env, policy, prop, run_ids, options=options, record=record, binding=bound)
    if options.episode_return is not None:
        raise PropertyError(
            f"{getattr(env, 'name', type(env).__name__)}: expected returns (R=? [C<=k]) are estimated over the episodes "
            "of a Gymnasium environment; a PRISM/JANI model's rewards are checked exactly by rlverify verify"
        )
    stepper = Stepper(
        env, policy, binding or bind_policy(env, policy), mode=Mode(options.mode), unavailable=Unavailable(options.unavailable)
    )
    check_labels(env, prop.left.labels() | prop.right.labels() | set(record))
    starts = _starts(env, starts, start_of_run)
    run_ids = np.asarray(run_ids, dtype=np.int64)
    key = seed_key(options.seed)
    out = OutcomeArrays.empty(len(run_ids), record)

    def run(a: int, b: int, turn: _Turn | None = None) -> None:  # runs a .. b - 1, into the result arrays
        keys = run_keys(key, run_ids[a:b])
        if start_of_run is None or starts is None:  # (starts is known when start_of_run is given)
            first = draw_starts(env, starts, keys)
        else:
            first = starts[np.asarray(start_of_run[a:b], dtype=np.int64)]
        out.put(a, b, _simulate_batch(stepper, prop, first, keys, options.max_steps, record, turn=turn))

    batches = _plan(len(run_ids), options, policy)
    if all(len(batch) == 1 for batch in batches):
        _run_in_order(run, batches, on_batch)
    else:
        with ThreadPoolExecutor(int(options.threads), thread_name_prefix="rlverify-sim") as pool:
            _run_parts(pool, run, batches, on_batch)
    return RunOutcomes(
        outcome=out.outcome,
        stalled=out.stalled,
        steps=out.steps,
        recorded=out.recorded,
        hopeless=out.hopeless,
        stuck=out.stuck,
    )


def _starts(env: VectorEnv, starts: np.ndarray | None, start_of_run: np.ndarray | None) -> np.ndarray | None:
    """The start states runs pick from: ``starts``, else the env's initial states (None: drawn in its initial box).

    Raises:
        PropertyError: no start state at all.
    """
    if starts is None and (start_of_run is not None or env.initial_box is None):
        starts = env.initial_states()
    if starts is not None and len(starts) == 0:
        raise PropertyError(f"{env.name}: no initial state")
    return starts


#: ``run(first, stop, turn)``: simulate runs ``first .. stop - 1`` (holding ``turn`` around policy calls)
PartRunner = Callable[..., None]
Batches = list[list[tuple[int, int]]]


def _run_in_order(run: PartRunner, batches: Batches, on_batch: Callable[[int], None] | None) -> None:
    """Every part of every batch in this thread, in order; ``on_batch`` after each batch."""
    for batch in batches:
        for a, b in batch:
            run(a, b)
        if on_batch is not None:
            on_batch(batch[-1][1] - batch[0][0])


def _plan(n: int, options: SimulationOptions, policy: Policy) -> Batches:
    """Per batch of ``options.batch_size`` runs, its parts ``(first, stop)`` (run positions), one per thread: more
    than one only for a policy that may be called from several threads and parts of ``MIN_PART_RUNS`` runs or more."""
    parts = int(options.threads) if isinstance(policy, BasePolicy) and policy.concurrent else 1
    if parts > 1 and min(n, options.batch_size) < 2 * MIN_PART_RUNS:
        parts = 1
    batches: Batches = []
    for b0 in range(0, n, options.batch_size):
        size = min(n, b0 + options.batch_size) - b0
        k = max(1, min(parts, size // MIN_PART_RUNS))
        cuts = [b0 + size * i // k for i in range(k + 1)]
        batches.append(list(itertools.pairwise(cuts)))
    return batches


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


def _run_parts(
    pool: ThreadPoolExecutor,
    run: PartRunner,
    batches: Batches,
    on_batch: Callable[[int], None] | None,
) -> None:
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
        _report_batches(batches, futures, on_batch)
    except BaseException:  # e.g. KeyboardInterrupt, or from on_batch: the parts stop at their next policy call
        turn.failed.set()
        raise
    finally:
        if turn.failed.is_set():
            for f in itertools.chain.from_iterable(futures):
                f.cancel()
    if turn.failed.is_set():
        _raise_first(futures)


def _report_batches(batches: Batches, futures: list[list[Future[None]]], on_batch: Callable[[int], None] | None) -> None:
    """Wait for each batch's parts in order and report it to ``on_batch``; stop at the first batch with an error."""
    for batch, done in zip(batches, futures, strict=True):
        wait(done)
        if any(f.exception() is not None for f in done):
            return
        if on_batch is not None:
            on_batch(batch[-1][1] - batch[0][0])


def _raise_first(futures: list[list[Future[None]]]) -> None:
    """Raise the first error, in part order, of the parts not cancelled (a part stopped by it does not count)."""
    everything = [f for f in itertools.chain.from_iterable(futures) if not f.cancelled()]
    wait(everything)
    for f in everything:
        err = f.exception()
        if err is not None and not isinstance(err, _Cancelled):
            raise err


def _simulate_batch(
    stepper: Stepper,
    prop: PathProperty,
    states: np.ndarray,
    keys: np.ndarray,
    max_steps: int,
    record: tuple[str, ...],
    *,
    turn: _Turn | None = None,
) -> OutcomeArrays:
    """Outcomes of the runs with ``keys`` ``(n,)`` from ``states``: decided (:func:`~.step.decide`) before every
    step (:meth:`~.step.Stepper.step`); policy calls are made holding ``turn`` (if given: the parts of a batch in
    threads)."""
    env = stepper.env
    out = OutcomeArrays.empty(len(keys), record)
    active = np.arange(len(keys))
    akeys = keys  # keys of the active runs, compacted with them
    buf = stepper.buffer(len(keys))
    t = 0
    while len(active):
        verdicts = decide(env, prop, states, t)
        done = out.finish(env, active, states, verdicts, t, everything=t >= max_steps)
        if done is not None:
            keep = np.flatnonzero(~done)
            active, states, akeys = active[keep], states.take(keep, axis=0), akeys[keep]
            if not len(active):
                break
        moves = stepper.step(states, akeys, t, buf=buf, turn=_NO_TURN if turn is None else turn)
        out.stop(env, active, states, moves, t)
        active, akeys, states = moves.select(active), moves.select(akeys), moves.successors
        t += 1
    return out


_NO_TURN = contextlib.nullcontext()


__all__ = [
    "MODES",
    "SATISFIED",
    "UNDECIDED",
    "VIOLATED",
    "RunOutcomes",
    "SimulationOptions",
    "choose_actions",
    "positive_int",
    "simulate",
]
