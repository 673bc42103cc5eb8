"""The resolved targets: one frozen type per kind of input, each knowing what the commands would branch on.

:class:`ModelTarget` (a PRISM/JANI or Gymnasium :class:`~rlverify.models.SymbolicModel`), :class:`EnvironmentTarget`
(a vectorised environment: the native benchmarks, Racetrack) and :class:`SystemTarget` (a
:class:`~rlverify.models.continuous.ContinuousSystem`) share :class:`Target`'s fields and labelling; each says
which command checks it, how messages name it, how it reads a property and whether it takes a shield.
:func:`rlverify.resolve.resolve` is the one place that builds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeAlias, TypeVar

from rlverify.benchmarks.registry import Benchmark, BenchmarkKind
from rlverify.errors import OptionError
from rlverify.models.properties import Property, parse_structure
from rlverify.policies.base import Policy
from rlverify.policies.shielded import ShieldedPolicy
from rlverify.results import Result

if TYPE_CHECKING:  # the base classes' arguments (strings: no import at run time)
    from rlverify.models.continuous.base import ContinuousSystem  # noqa: F401
    from rlverify.models.gym_simulator import GymSimulator  # noqa: F401
    from rlverify.models.symbolic import SymbolicModel  # noqa: F401
    from rlverify.statistical.envs import VectorEnv  # noqa: F401

    pass

M = TypeVar("M")
R = TypeVar("R", bound=Result)
T = TypeVar("T", bound="Target[Any]")

#: a network given in memory (a Stable-Baselines3 model or its ``.policy``, a ``torch.nn.Module``, ONNX bytes or an
#: ``onnx.ModelProto``): objects of libraries rlverify does not type (read as their file would be)
Network: TypeAlias = Any
#: what a policy may be given as: a spec (:data:`rlverify.policies.settings.SPEC_HELP`) or a benchmark's reference
#: policy name, a :class:`~rlverify.policies.Policy` (or an object or function with its members), or a network
PolicySpec: TypeAlias = "str | Policy | Network"

#: the property the statistical engine estimates when none is given (``None`` or this word): a system's own
UNSAFE = "unsafe"


@dataclass(frozen=True)
class Target(Generic[M]):
    """A resolved target: the model, and the policy and property when asked for.

    Attributes:
        given: the target as the user wrote it.
        name: how results name it (a benchmark id with its parameters, or the file path).
        model: what the engines take (the subclass says which type).
        benchmark: the :class:`~rlverify.benchmarks.Benchmark` (None for a model file).
        constants: the constants or parameters as given (``"xMax=4,yMax=4"``).
        policy: the loaded policy (None when not asked for, or in monolithic mode), under a shield if one was put.
        policy_source: the file the policy came from (a benchmark's shipped file, or the spec).
        property: the parsed property (PRISM/JANI: with Storm's parse attached).
        trained: the policy as loaded, when :attr:`policy` wraps it (a shield): :meth:`notes` read its record.
    """

    given: str
    name: str
    model: M
    benchmark: Benchmark | None = None
    constants: str | None = None
    policy: Policy | None = None
    policy_source: str | None = None
    property: Property | None = None
    trained: Policy | None = field(default=None, repr=False, compare=False)

    #: the registry's word for this kind (``Benchmark.kind``, the report's ``kind``)
    KIND: ClassVar[BenchmarkKind]
    #: the command that checks this kind of target (messages)
    ENGINE: ClassVar[str]
    #: how messages name what a command takes ("a PRISM/JANI model")
    WORDS: ClassVar[str]
    #: how messages name a target of this kind that is no benchmark
    ALONE: ClassVar[str]
    #: whether ``rlverify verify --mode monolithic`` (Pmin/Pmax over all policies) applies
    HAS_OPTIMUM: ClassVar[bool] = False

    @classmethod
    def described(cls, benchmark: Benchmark | None) -> str:
        """What messages call a target of this kind (``a native benchmark``, ``a continuous system``)."""
        return f"a {cls.KIND} benchmark" if benchmark is not None else cls.ALONE

    def notes(self, *, unavailable: str | None = None) -> list[str]:
        """What a result about this target must say besides its own warnings: the property's notes and the
        policy's (trained on another benchmark or with other parameters; a MaskablePPO policy with ``stall``),
        read from the policy as loaded (a shield does not hide them)."""
        from rlverify.policies.loading import policy_warnings  # lazy: scipy (policies.adapters), only with a policy

        notes = list(self.property.notes) if self.property is not None else []
        policy = self.trained if self.trained is not None else self.policy
        if policy is not None:
            notes += policy_warnings(policy, self, unavailable=unavailable)
        return notes

    def stamp(self, result: R, *, unavailable: str | None = None) -> R:
        """``result`` named after this target (its ``model`` field) with :meth:`notes` added to
        its ``warnings`` (once each): the one way every command, the report, ``cross_check`` and the API label
        a result."""
        have = list(result.warnings)
        changes: dict[str, Any] = {"warnings": have + [n for n in self.notes(unavailable=unavailable) if n not in have]}
        if not result.KEEPS_MODEL_NAME:
            changes["model"] = self.name
        return result.with_provenance(**changes)

    def policy_interface(self) -> dict[str, list[str]] | None:
        """The feature and action names a policy file that declares none is read with (None: the file's own)."""
        return None

    def has_choices(self) -> bool:
        """Whether a policy has choices to make here (False: a DTMC)."""
        return True

    def parse_property(self, given: str | Property, *, fixed_policy: bool = True) -> Property:
        """A property text or name (of the benchmark or JANI file) parsed for this target's model.

        ``fixed_policy``: evaluated on a policy's chain (every engine but ``verify --mode monolithic``): a
        named JANI ``Pmax``/``Pmin`` property is read as ``P=?`` (``Property.notes`` says so)."""
        text, name = self._property_text(given)
        return parse_structure(text, name=name)

    def simulated_property(self, given: str | Property | None) -> Property:
        """The property the statistical engine estimates: ``given`` parsed (None refused, naming the way in)."""
        if given is None:
            raise OptionError(
                "--property: give the property to estimate, a formula (e.g. 'P=? [F \"goal\"]') or a "
                "property name of the benchmark (rlverify benchmarks list)"
            )
        return self.parse_property(given)

    def with_property(self: T, given: str | Property, *, fixed_policy: bool = True) -> T:
        """This target with ``given`` parsed as its property (:meth:`parse_property`)."""
        return replace(self, property=self.parse_property(given, fixed_policy=fixed_policy))

    def with_shield(self, path: str | Path, *, say: Callable[[str], None] | None = None) -> ModelTarget:
        """This target's policy restricted to the actions the shield file ``path`` keeps (``rlverify shield --out``).

        Raises:
            OptionError: a target that is not a PRISM/JANI/Gymnasium model, or no policy.
        """
        raise OptionError(f"--shield: shields are computed on PRISM/JANI/Gymnasium models, not on {self.name}")

    def _property_text(self, given: str | Property) -> tuple[str, str | None]:
        if isinstance(given, Property):
            return given.text, given.name
        if self.benchmark is not None:
            return self.benchmark.property(given)
        return given, None


@dataclass(frozen=True)
class ModelTarget(Target["SymbolicModel"]):
    """A PRISM/JANI file, a ``prism`` benchmark or a ``gym:ID`` finite model: the exact engine's target."""

    KIND: ClassVar[BenchmarkKind] = BenchmarkKind.PRISM
    ENGINE: ClassVar[str] = "rlverify verify"
    WORDS: ClassVar[str] = "a PRISM/JANI model"
    ALONE: ClassVar[str] = "a PRISM/JANI model"
    HAS_OPTIMUM: ClassVar[bool] = True

    def policy_interface(self) -> dict[str, list[str]] | None:
        return getattr(self.model, "policy_interface", None)  # a Gymnasium model's (its states and actions)

    def has_choices(self) -> bool:
        return bool(self.model.model_type != "dtmc")

    def parse_property(self, given: str | Property, *, fixed_policy: bool = True) -> Property:
        from rlverify.models.property_parser import parse_property  # lazy: stormpy, start-up

        text, name = self._property_text(given)
        prop = parse_property(self.model, text, fixed_policy=fixed_policy)
        return replace(prop, name=name or prop.name)

    def with_shield(self, path: str | Path, *, say: Callable[[str], None] | None = None) -> ModelTarget:
        """See :meth:`Target.with_shield`; ``say`` is told when the shield was computed for another property.

        Raises:
            OptionError: no policy (monolithic); ShieldFileError: a file that is not a valid shield;
            PolicyError: a shield for another model or policy.
        """
        if self.policy is None:
            raise OptionError("--shield restricts a policy: give one (--policy), not --mode monolithic")
        from rlverify.exact.shield_file import load_shield  # lazy: start-up

        shield = load_shield(path, self.model, self.name)
        asked = self.property.text if self.property is not None else None
        if say is not None and asked is not None and asked != shield.property:
            say(f"--shield: the shield was computed for property '{shield.property}' (verifying '{asked}')")
        trained = self.trained if self.trained is not None else self.policy
        return replace(self, policy=ShieldedPolicy(self.policy, shield), trained=trained)


@dataclass(frozen=True)
class EnvironmentTarget(Target["VectorEnv"]):
    """A vectorised environment (the native benchmarks, Racetrack): the statistical engine's target."""

    KIND: ClassVar[BenchmarkKind] = BenchmarkKind.NATIVE
    ENGINE: ClassVar[str] = "rlverify simulate"
    WORDS: ClassVar[str] = "a native environment (Racetrack)"
    ALONE: ClassVar[str] = "a native model"


@dataclass(frozen=True)
class SystemTarget(Target["ContinuousSystem"]):
    """A continuous system (a benchmark or ``path.py:NAME``): the abstraction's target."""

    KIND: ClassVar[BenchmarkKind] = BenchmarkKind.CONTINUOUS
    ENGINE: ClassVar[str] = "rlverify abstract"
    WORDS: ClassVar[str] = "a continuous system"
    ALONE: ClassVar[str] = "a continuous system"

    def simulated_property(self, given: str | Property | None) -> Property:
        """The system's own default (``None`` or ``"unsafe"``): an unsafe state within its horizon, from a uniformly
        random start state (:func:`~rlverify.models.continuous.unsafe_property`)."""
        if given is None or given == UNSAFE:
            from rlverify.models.continuous.env import unsafe_property  # lazy: the continuous engine, start-up

            return unsafe_property(self.model)
        return self.parse_property(given)


@dataclass(frozen=True)
class SimulatorTarget(Target["GymSimulator"]):
    """A Gymnasium environment without a transition table (``gym:ID``, CartPole, MuJoCo, the user's own): simulated
    episode by episode (:mod:`rlverify.statistical.episodes`)."""

    KIND: ClassVar[BenchmarkKind] = BenchmarkKind.GYMNASIUM
    ENGINE: ClassVar[str] = "rlverify simulate"
    WORDS: ClassVar[str] = "a Gymnasium environment without a transition table"
    ALONE: ClassVar[str] = "a Gymnasium environment without a transition table (simulated only)"

    def policy_interface(self) -> dict[str, list[str]] | None:
        return {"features": list(self.model.features), "actions": list(self.model.actions)}

    def simulated_property(self, given: str | Property | None) -> Property:
        if given is None:
            raise OptionError(
                "--property: give the property to estimate over the episodes, e.g. 'P=? [F<=200 \"terminated\"]' "
                "(labels: terminated, truncated and your own --label NAME=CONDITION)"
            )
        return self.parse_property(given)


#: a resolved target of any kind
AnyTarget: TypeAlias = ModelTarget | EnvironmentTarget | SystemTarget | SimulatorTarget
#: a kind of target (what a command takes)
TargetKind: TypeAlias = type[ModelTarget] | type[EnvironmentTarget] | type[SystemTarget] | type[SimulatorTarget]
#: every kind of target, in the order messages list them
ALL_KINDS: tuple[TargetKind, ...] = (ModelTarget, EnvironmentTarget, SystemTarget, SimulatorTarget)
#: the target type of each registry kind
OF_BENCHMARK_KIND: dict[BenchmarkKind, TargetKind] = {t.KIND: t for t in ALL_KINDS}
