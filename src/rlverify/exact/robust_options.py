"""What the robustness and model-error analyses accept: their options, checked at the door (text turned into the
choices' members), and the properties they compute."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlverify.choices import Mode, Numerics, Unavailable, choose
from rlverify.choices import values as texts
from rlverify.errors import OptionError, PolicyError, PropertyError
from rlverify.exact.formulas import is_reward_bounded
from rlverify.models.properties import Property
from rlverify.policies.base import Policy

__all__ = ["MAX_OFFSETS", "NORMS", "PATHS", "ModelErrorOptions", "RobustnessOptions", "check_input", "choose_among"]

NORMS = ("linf", "l1")


#: the most perturbation vectors enumerated per state
MAX_OFFSETS = 1_000_000


#: path operators of the probability properties these analyses check
PATHS = ("F", "U", "G", "X", "W")


@dataclass(frozen=True)
class RobustnessOptions:
    """Settings of :func:`robustness`.

    Attributes:
        epsilon: integer budget (features are integers or booleans): the L∞ or L1 distance between
            the true and the shown observation, in feature units.
        norm: ``linf`` (each perturbed feature moves by at most ``epsilon``) or ``l1`` (the moves sum
            to at most ``epsilon``).
        perturb: the features the adversary may change (None: all of the policy's features).
        worst: which optimum is the worst case, ``max`` or ``min``; None: ``min`` for a lower-bound
            threshold (``P>=b``), else ``max`` (the property names a failure).
        mode, unavailable: as in :class:`~rlverify.exact.ExactOptions` (the nominal engine's semantics).
        attack: also run the FGSM baseline (network policies only).
        numerics, precision, max_states: as in :class:`~rlverify.exact.ExactOptions`.
        max_memory: refuse before the (state, perturbation) pairs are enumerated when their estimated memory
            (:func:`pair_bytes` each) exceeds this; None: the default guard (80% of the machine's memory).
    """

    epsilon: int = 1
    norm: str = "linf"
    perturb: tuple[str, ...] | None = None
    worst: str | None = None
    mode: Mode | str = Mode.STOCHASTIC
    unavailable: Unavailable | str = Unavailable.STALL
    attack: bool = True
    numerics: Numerics | str = Numerics.SOUND
    precision: float = 1e-6
    max_states: int | None = 2_000_000
    max_memory: int | None = None

    def __post_init__(self) -> None:
        _as_members(self, {"mode": Mode, "unavailable": Unavailable, "numerics": Numerics})

    def validate(self) -> None:
        if self.max_memory is not None and self.max_memory <= 0:
            raise OptionError(f"--max-memory: expected a positive size, got {self.max_memory}")
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, np.integer)) or self.epsilon < 0:
            raise OptionError(f"--epsilon: expected a non-negative integer (the features are integers), got {self.epsilon!r}")
        choose_among("norm", self.norm, NORMS)
        choose_among("mode", self.mode, POLICY_MODES)
        choose(Unavailable, self.unavailable, "--unavailable")
        choose(Numerics, self.numerics, "--numerics")
        if self.worst is not None:
            choose_among("worst", self.worst, ("max", "min"))
        if not (0 < self.precision < 1):
            raise OptionError(f"--precision: expected a number in (0, 1), got {self.precision}")


@dataclass(frozen=True)
class ModelErrorOptions:
    """Settings of :func:`model_error_bounds`.

    Attributes:
        delta: the error of every transition probability ``p`` of the MDP: ``p ± delta`` (absolute),
            or ``p (1 ± delta)`` with ``relative``; intervals are clipped to [0, 1].
        actions: only the choices of these action labels or command names are uncertain (None: all).
        mode, unavailable, max_states: as in :class:`~rlverify.exact.ExactOptions`.
        precision: of Storm's robust value iteration (unbounded properties; step-bounded ones are
            computed by k exact steps).
    """

    delta: float = 0.01
    relative: bool = False
    actions: tuple[str, ...] | None = None
    mode: Mode | str = Mode.STOCHASTIC
    unavailable: Unavailable | str = Unavailable.STALL
    precision: float = 1e-10
    max_states: int | None = 2_000_000

    def __post_init__(self) -> None:
        _as_members(self, {"mode": Mode, "unavailable": Unavailable})

    def validate(self) -> None:
        if isinstance(self.delta, bool) or not isinstance(self.delta, (int, float)) or not (0 <= self.delta < np.inf):
            raise OptionError(f"--delta: expected a non-negative number, got {self.delta!r}")
        if not self.relative and self.delta >= 1:
            raise OptionError(
                f"--delta {self.delta}: an absolute error of 1 or more says nothing about any "
                "probability (every interval is [0, 1])"
            )
        choose_among("mode", self.mode, POLICY_MODES)
        choose(Unavailable, self.unavailable, "--unavailable")
        if not (0 < self.precision < 1):
            raise OptionError(f"--precision: expected a number in (0, 1), got {self.precision}")


def choose_among(name: str, value: str, allowed: tuple[str, ...]) -> None:
    """Refuse (:class:`OptionError`) ``value`` of option ``--name`` unless it is one of ``allowed``."""
    if value not in allowed:
        raise OptionError(f"--{name}: expected one of {', '.join(allowed)}, got '{value}'")


#: the modes these analyses read a policy in (a policy is needed: not monolithic)
POLICY_MODES = (Mode.STOCHASTIC, Mode.DETERMINISTIC)


def _as_members(options: object, fields: dict[str, type[Mode] | type[Unavailable] | type[Numerics]]) -> None:
    """Text given for ``fields`` of a frozen ``options`` turned into the choices' members (anything else is left for
    ``validate`` to refuse, with its message)."""
    for name, kind in fields.items():
        value = getattr(options, name)
        if value in texts(kind):
            object.__setattr__(options, name, kind(value))


def check_input(prop: Property, policy: Policy | None) -> None:
    """Refuse what these analyses do not compute: other than probability properties of the forms :data:`PATHS`
    (step-bounded or not, no reward bound), and no policy."""
    if (
        prop.operator != "P"
        or prop.optimality is not None
        or prop.path not in PATHS
        or is_reward_bounded(prop.storm_formula())
    ):
        raise PropertyError(
            f"property '{prop.text}': robustness is computed for probability properties "
            "(P=? or P<=b / P>=b with F, U, G, X or W, step-bounded or not); rewards, Pmin/Pmax "
            "and other forms are not supported"
        )
    if policy is None:
        raise PolicyError("robustness needs a policy (--policy)")
