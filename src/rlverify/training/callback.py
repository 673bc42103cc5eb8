"""Verify a Stable-Baselines3 model while it trains: :class:`VerifyCallback` (extra ``sb3``; also
``rlverify.sb3.VerifyCallback``).

Importing this module imports Stable-Baselines3; without it the import raises
:class:`~rlverify.errors.DependencyNotInstalled` naming ``pip install 'rlverify[sb3]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlverify.errors import OptionError, PolicyError, require, safe_repr
from rlverify.training.verifying import EveryNSteps, TrainingCheck, TrainingVerifier

_callbacks = require("stable_baselines3.common.callbacks", "sb3", purpose="rlverify.sb3.VerifyCallback")


class VerifyCallback(_callbacks.BaseCallback):  # type: ignore[name-defined]
    """Every ``every`` environment steps, verify the model being trained and log the result to SB3's logger.

    The policy checked is the model itself, as it is at that step (nothing is saved to disk): the distribution SB3
    samples its actions from (PPO, A2C: the categorical distribution of its actor; MaskablePPO: the unmasked
    distribution, which ``unavailable='renormalize'`` masks exactly as training does), or with
    ``deterministic=True`` its argmax (``predict(deterministic=True)``; DQN is greedy in both: its exploration is not
    verified). Each check is logged with ``logger.record`` and dumped at the check's step, as SB3's ``EvalCallback``
    does, so TensorBoard, CSV and MLflow get it through SB3's logger:

    * ``rlverify/value``: the property's value (exact) or estimate (statistical);
    * ``rlverify/lower``, ``rlverify/upper``: its certified bracket (exact, sound numerics) or its confidence
      interval (statistical);
    * ``rlverify/stalled``: probability (exact) or fraction of runs (statistical) that reach the ``stalled`` sink:
      the policy's mass on unavailable actions;
    * ``rlverify/states`` (exact: the chain's states), ``rlverify/runs`` (statistical), ``rlverify/seconds``, and
      ``rlverify/satisfied`` (1 holds, 0 violated) for a threshold property once decided.

    :attr:`history` keeps every :class:`~rlverify.training.verifying.TrainingCheck` (steps, value, bracket, the
    engine's full result). With ``stop_when="holds"`` (``"violated"``) training stops after the first check that
    decided the threshold property (``P>=0.7 [F "goal"]``) holds (is violated): ``_on_step`` returns False.

    Args:
        target: a benchmark id (``avoid-v1``), ``gym:ID`` (``gym:FrozenLake-v1``) or a PRISM/JANI file; the model's
            features must be the observations the agent is trained on (see
            :class:`~rlverify.training.verifying.TrainingVerifier`).
        property: property text or a benchmark's property name.
        every: environment steps between checks (``model.num_timesteps``, summed over the vectorised environments).
        mode: ``exact`` or ``statistical``.
        deterministic: check the argmax policy (``predict(deterministic=True)``) instead of the distribution.
        stop_when: ``"holds"`` or ``"violated"``: stop training once a check decides the threshold property so.
        constants: the target's constants or benchmark parameters.
        env_kwargs: a ``gym:ID`` target's keyword arguments.
        features: the model's features the agent observes, where the target does not say.
        actions: the agent's action names, where the target does not say.
        options: the engine's options (:class:`~rlverify.exact.options.ExactOptions` or
            :class:`~rlverify.statistical.verify.StatisticalOptions`); all as
            :class:`~rlverify.training.verifying.TrainingVerifier` takes them.
        at_end: also check the model ``learn()`` returns, when training ends. A check due during the last rollout is
            always made then, on that model (SB3 updates the model once more after its last rollout), and logged
            at the last step.
        prefix: the logger keys' prefix.
        verbose: 1: also print each check (``print``, as SB3's callbacks do with ``verbose``).

    Raises:
        OptionError: a bad option (``verbose``, ``every``, ``features`` ...), when made.
        PolicyError: when training starts: a model that does not fit the target, or observations normalised by
            ``VecNormalize``.
        RlverifyError: the target's and property's errors (a bad target or property), when made.
    """

    def __init__(
        self,
        target: str | Path,
        property: str,
        *,
        every: int = 10_000,
        mode: str = "exact",
        deterministic: bool = False,
        stop_when: str | None = None,
        constants: str | None = None,
        env_kwargs: str | dict[str, Any] | None = None,
        features: Sequence[str] | None = None,
        actions: Sequence[str] | None = None,
        options: Any = None,
        at_end: bool = True,
        prefix: str = "rlverify",
        verbose: int = 0,
    ) -> None:
        if not isinstance(verbose, int) or not 0 <= verbose <= 2:  # (True is 1, as in SB3)
            raise OptionError(f"verbose: expected 0, 1 or 2 (as SB3's callbacks take it), got {safe_repr(verbose)}")
        if not isinstance(prefix, str) or not prefix:
            raise OptionError(f"prefix: expected a non-empty name for the logger's keys, got {safe_repr(prefix)}")
        if not isinstance(at_end, bool):
            raise OptionError(f"at_end: expected True or False, got {safe_repr(at_end)}")
        schedule = EveryNSteps(every)  # every option is checked before the target is resolved
        super().__init__(verbose=verbose)
        self.schedule = schedule
        self.verifier = TrainingVerifier(
            target,
            property,
            mode=mode,
            deterministic=deterministic,
            stop_when=stop_when,
            constants=constants,
            env_kwargs=env_kwargs,
            features=features,
            actions=actions,
            options=options,
        )
        self.at_end = at_end
        self.prefix = prefix
        #: the step at which a check stopped training (None: it was not stopped by this callback)
        self.stopped_at: int | None = None
        self._deferred = False  # a check due on the last rollout, made at training end

    @property
    def history(self) -> list[TrainingCheck]:
        """Every check so far, oldest first."""
        return self.verifier.history

    def _on_training_start(self) -> None:
        from stable_baselines3.common.vec_env import unwrap_vec_normalize  # lazy: sb3, start-up

        normalize = unwrap_vec_normalize(self.training_env) if self.training_env is not None else None
        if normalize is not None and getattr(normalize, "norm_obs", False):
            raise PolicyError(
                "VerifyCallback: the training environment is wrapped in VecNormalize(norm_obs=True), so the policy "
                "sees normalised observations, not the model's features; train with norm_obs=False to verify it"
            )
        # a model that does not fit the target is refused before any training
        self.verifier.check_spaces(self.model.observation_space, self.model.action_space)
        self.verifier.load(self.model)

    def _on_step(self) -> bool:
        if not self.schedule.due(self.num_timesteps):
            return True
        total = getattr(self.model, "_total_timesteps", None)
        if isinstance(total, int) and self.num_timesteps >= total:
            # the last rollout: SB3 updates the model once more after it, so the check waits for the model
            # learn() returns (at training end, logged at this step)
            self._deferred = True
            return True
        return self._check()

    def _on_training_end(self) -> None:
        # the model learn() returns: checked when asked (at_end) or when the last scheduled check fell on the last
        # rollout. Not again when training was stopped (by this or another callback) right after a check at this
        # step: SB3 stops before updating, so that check saw this model.
        again = self._deferred or not self.history or self.history[-1].steps != self.num_timesteps
        if self.stopped_at is None and (self.at_end or self._deferred) and again:
            self._check()
        self._deferred = False

    def _check(self) -> bool:
        """Verify the model now, log the check; False if it asks training to stop."""
        check = self.verifier.check(self.model, self.num_timesteps)
        for key, value in check.metrics(self.prefix).items():
            self.logger.record(key, value)
        self.logger.dump(self.num_timesteps)
        if self.verbose >= 1:
            print(f"rlverify: {check.summary()}")
        if self.verifier.should_stop(check):
            self.stopped_at = check.steps
            if self.verbose >= 1:
                print(f"rlverify: stopping training: the property {self.verifier.stop_when} at step {check.steps:,}")
            return False
        return True
