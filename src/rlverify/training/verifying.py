"""Verify a policy while it trains: one target and property resolved once, checked on the policy as it is now.

:class:`TrainingVerifier` is the one mechanism behind :class:`rlverify.sb3.VerifyCallback` (an SB3 model in
training) and ``rlverify train --verify-every`` (rlverify's own PPO): it resolves the target and the property once
(:func:`rlverify.resolve.resolve`), and each :meth:`~TrainingVerifier.check` reads the policy given in memory (an SB3
model, a torch module, ONNX bytes: :func:`~rlverify.policies.load_policy`; a policy object:
:func:`~rlverify.policies.as_policy`) and verifies it with the exact engine (:func:`~rlverify.exact.verify_exact`:
the value with its certified bracket) or the statistical one (:func:`~rlverify.statistical.verify_statistical`: an
estimate with its confidence interval). Nothing is written to disk.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlverify.errors import OptionError, PolicyError, safe_repr
from rlverify.results import Result

log = logging.getLogger(__name__)

#: The engines a check runs with.
VERIFY_MODES = ("exact", "statistical")
#: When a check stops training: when its threshold property holds, or when it is violated (decided only: a bracket
#: or interval that contains the threshold stops nothing).
STOP_WHEN = ("holds", "violated")


@dataclass(frozen=True)
class TrainingCheck:
    """One verification of the policy during training.

    Attributes:
        steps: environment steps of training when the policy was checked.
        value: the property's value (exact mode: at the initial state, within ``[lower, upper]``) or the estimate
            (statistical mode).
        lower, upper: exact mode: the certified bracket of ``value`` (None when the numerics give none);
            statistical mode: the confidence interval.
        stalled: exact mode: the probability of reaching the ``stalled`` sink (policy mass on unavailable actions);
            statistical mode: the fraction of runs that stalled.
        states: exact mode: states of the policy's chain; statistical mode: None.
        runs: statistical mode: simulated runs; exact mode: None.
        satisfied: for a threshold property, whether it holds (None: undecided, or no threshold).
        seconds: wall-clock seconds the check took (loading the policy and verifying it).
        result: the engine's full result (:class:`~rlverify.results.ExactResult` or
            :class:`~rlverify.statistical.StatisticalResult`), named after the target.
    """

    steps: int
    value: float
    lower: float | None
    upper: float | None
    stalled: float
    states: int | None
    runs: int | None
    satisfied: bool | None
    seconds: float
    result: Result = field(repr=False)

    def metrics(self, prefix: str = "rlverify") -> dict[str, float]:
        """The check as scalars for a training logger: ``PREFIX/value``, ``PREFIX/lower``, ``PREFIX/upper``,
        ``PREFIX/stalled``, ``PREFIX/seconds``, and when known ``PREFIX/states``, ``PREFIX/runs`` and
        ``PREFIX/satisfied`` (1.0 holds, 0.0 violated)."""
        out: dict[str, float] = {f"{prefix}/value": float(self.value)}
        for key, v in (
            ("lower", self.lower),
            ("upper", self.upper),
            ("stalled", self.stalled),
            ("states", self.states),
            ("runs", self.runs),
            ("satisfied", None if self.satisfied is None else float(self.satisfied)),
            ("seconds", self.seconds),
        ):
            if v is not None:
                out[f"{prefix}/{key}"] = float(v)
        return out

    def summary(self) -> str:
        """One line: steps, value with its bracket or interval, the verdict, stalled mass, size and time."""
        around = "" if self.lower is None or self.upper is None else f" in [{self.lower:.6g}, {self.upper:.6g}]"
        verdict = "" if self.satisfied is None else (", holds" if self.satisfied else ", violated")
        size = f", {self.states:,} states" if self.states is not None else f", {self.runs:,} runs" if self.runs else ""
        return (
            f"step {self.steps:,}: {self.result.property} = {self.value:.6g}{around}{verdict}, "
            f"stalled {self.stalled:.3g}{size}, {self.seconds:.2f} s"
        )


class TrainingVerifier:
    """A target and a property resolved once, to check the policy of a training run again and again.

    Args:
        target: a registered benchmark id (``avoid-v1``), ``gym:ID`` (``gym:FrozenLake-v1``) or a PRISM/JANI file
            (exact mode); statistical mode also takes the benchmarks and systems ``rlverify simulate`` takes.
        property: property text (``'P=? [F "goal"]'``, ``'P>=0.7 [F "goal"]'``) or a benchmark's property name.
        mode: ``exact`` (:func:`~rlverify.exact.verify_exact`) or ``statistical``
            (:func:`~rlverify.statistical.verify_statistical`).
        deterministic: verify the argmax of the policy's distribution (``predict(deterministic=True)``) instead of
            the distribution itself (what training samples from).
        stop_when: ``holds`` or ``violated``: :meth:`should_stop` is true after a check that decided the
            property's threshold so (needs a threshold property, ``P>=0.7 [...]``); None: never.
        constants, env_kwargs: the target's constants/parameters and a ``gym:ID`` target's arguments (as
            :func:`~rlverify.resolve.resolve` takes them).
        features, actions: the policy's feature and action names when the target does not supply them (a
            ``gym:ID`` target does: ``s`` and its action names).
        options: :class:`~rlverify.exact.ExactOptions` or :class:`~rlverify.statistical.StatisticalOptions` (None:
            the defaults); their mode is set by ``deterministic``.
        policy_threads: threads of the policy's runtime while it is checked (torch's count is restored after each
            check, so the training's own setting is kept).

    Raises:
        OptionError: an unknown mode or ``stop_when``, ``stop_when`` without a threshold property, options of the
            other engine. The errors of :func:`~rlverify.resolve.resolve` for the target and property.
    """

    def __init__(
        self,
        target: str | Path,
        property: str,
        *,
        mode: str = "exact",
        deterministic: bool = False,
        stop_when: str | None = None,
        constants: str | None = None,
        env_kwargs: str | dict[str, Any] | None = None,
        features: Sequence[str] | None = None,
        actions: Sequence[str] | None = None,
        options: Any = None,
        policy_threads: int = 1,
    ) -> None:
        from rlverify.policies.formats import check_name_options
        from rlverify.resolve import ALL_KINDS, ModelTarget, Target, check_property, resolve

        if mode not in VERIFY_MODES:
            raise OptionError(f"mode: expected one of {', '.join(VERIFY_MODES)}, got {mode!r}")
        check_name_options(features, actions, ("features", "actions"))
        if stop_when is not None and stop_when not in STOP_WHEN:
            raise OptionError(f"stop_when: expected one of {', '.join(STOP_WHEN)} or None, got {stop_when!r}")
        self.mode = mode
        self.deterministic = bool(deterministic)
        self.options = self._options(options)
        kinds = (ModelTarget,) if mode == "exact" else ALL_KINDS
        command = "verifying while training" + (" (mode exact: rlverify verify)" if mode == "exact" else "")
        check_property(property, command)
        resolved = resolve(
            target, constants=constants, env_kwargs=env_kwargs, needs_policy=False, kinds=kinds, command=command
        )
        prop = resolved.parse_property(property, fixed_policy=True)
        self.target: Target[Any] = dataclasses.replace(resolved, property=prop)
        if stop_when is not None and prop.threshold is None:
            raise OptionError(
                f"stop_when={stop_when!r} stops when a threshold property holds or is violated; '{prop.text}' has no "
                "threshold (write it as P>=0.7 [...] or P<=0.1 [...])"
            )
        self.stop_when = stop_when
        self.features = list(features) if features else None
        self.actions = list(actions) if actions else None
        self.policy_threads = policy_threads
        self.history: list[TrainingCheck] = []

    def _options(self, options: Any) -> Any:
        """The engine's options with the mode ``deterministic`` asks for."""
        policy_mode = "deterministic" if self.deterministic else "stochastic"
        if self.mode == "exact":
            from rlverify.exact.options import ExactOptions

            options = ExactOptions() if options is None else options
            if not isinstance(options, ExactOptions):
                raise OptionError(f"options: mode 'exact' takes ExactOptions, got {type(options).__name__}")
            if options.mode == "monolithic":
                raise OptionError("options: mode 'monolithic' checks no policy; use 'stochastic' (or deterministic=True)")
            return dataclasses.replace(options, mode=policy_mode)
        from rlverify.statistical.verify import StatisticalOptions

        options = StatisticalOptions() if options is None else options
        if not isinstance(options, StatisticalOptions):
            raise OptionError(f"options: mode 'statistical' takes StatisticalOptions, got {type(options).__name__}")
        return dataclasses.replace(options, simulation=dataclasses.replace(options.simulation, mode=policy_mode))

    def load(self, policy: Any) -> Any:
        """``policy`` (an SB3 model, torch module, ONNX bytes, or a policy object) as the engines take it, with the
        target's names as defaults."""
        from rlverify.policies.adapters import object_kind
        from rlverify.policies.check import as_policy
        from rlverify.policies.loading import load_policy

        if object_kind(policy) is None:
            return as_policy(policy, features=self.features, actions=self.actions)
        with _torch_threads_kept():  # the training's torch setting is kept
            return load_policy(
                policy,
                features=self.features,
                actions=self.actions,
                defaults=getattr(self.target.model, "policy_interface", None),
                threads=self.policy_threads,
            )

    def check_spaces(self, observation_space: Any, action_space: Any) -> None:
        """Refuse an agent whose spaces are not those of a ``gym:ID`` target's environment (an agent trained on the
        8x8 lake takes the 4x4 lake's states as valid observations: its value there would be a wrong answer).

        Raises:
            PolicyError: naming both spaces."""
        env_id = getattr(self.target.model, "env_id", "")
        if not env_id:
            return
        import gymnasium  # lazy: gymnasium, start-up

        env = gymnasium.make(env_id, **dict(self.target.model.env_kwargs))
        try:
            want = (env.observation_space, env.action_space)
        finally:
            env.close()
        if (observation_space, action_space) != want:
            raise PolicyError(
                f"the agent observes {observation_space} and acts in {action_space}, but the target "
                f"{self.target.name} has {want[0]} and {want[1]}: verify against the environment it trains on "
                "(env_kwargs=...)"
            )

    def check(self, policy: Any, steps: int) -> TrainingCheck:
        """Verify ``policy`` as it is now (after ``steps`` environment steps of training); the check is added to
        :attr:`history` and logged."""
        t0 = time.perf_counter()
        prop = self.target.property
        assert prop is not None  # resolved in __init__
        with _torch_threads_kept():
            loaded = self.load(policy)
            target = dataclasses.replace(self.target, policy=loaded)
            if self.mode == "exact":
                from rlverify.exact.verify import verify_exact

                exact = target.stamp(
                    verify_exact(target.model, prop, loaded, self.options), unavailable=self.options.unavailable
                )
                record = TrainingCheck(
                    steps=int(steps),
                    value=float(exact.value),
                    lower=exact.lower,
                    upper=exact.upper,
                    stalled=float(exact.stalled_probability),
                    states=int(exact.states),
                    runs=None,
                    satisfied=exact.satisfied,
                    seconds=time.perf_counter() - t0,
                    result=exact,
                )
            else:
                from rlverify.statistical.verify import verify_statistical

                stat = verify_statistical(target.model, prop, loaded, self.options)
                stat = target.stamp(stat, unavailable=self.options.simulation.unavailable)
                lo, hi = stat.interval
                record = TrainingCheck(
                    steps=int(steps),
                    value=float(stat.estimate),
                    lower=float(lo),
                    upper=float(hi),
                    stalled=stat.stalled / stat.runs if stat.runs else 0.0,
                    states=None,
                    runs=int(stat.runs),
                    satisfied=stat.satisfied,
                    seconds=time.perf_counter() - t0,
                    result=stat,
                )
        self.history.append(record)
        log.info("%s", record.summary())
        for w in record.result.warnings:
            log.warning("%s", w)
        return record

    def should_stop(self, check: TrainingCheck) -> bool:
        """Whether ``check`` asks training to stop (see ``stop_when``)."""
        if self.stop_when is None or check.satisfied is None:
            return False
        return check.satisfied is (self.stop_when == "holds")


class EveryNSteps:
    """When to check: the first time the step count reaches each multiple of ``every``."""

    def __init__(self, every: int, option: str = "every") -> None:
        if isinstance(every, bool) or not isinstance(every, int) or not 0 < every < 2**63:  # SB3 counts steps in int64
            raise OptionError(
                f"{option}: expected a positive number of environment steps (a 64-bit integer), got {safe_repr(every)}"
            )
        self.every = every
        self.next = every

    def due(self, steps: int) -> bool:
        """True once per multiple of ``every`` reached (several multiples passed at once: one check)."""
        if steps < self.next:
            return False
        self.next = (steps // self.every + 1) * self.every
        return True


@contextmanager
def _torch_threads_kept() -> Iterator[None]:
    """torch's thread count as it was before the block (loading a network policy limits it process-wide)."""
    import sys

    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        yield
    finally:
        torch = sys.modules.get("torch")
        if torch is not None and threads is not None and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
