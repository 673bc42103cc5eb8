"""One front door: what a model, a policy and a property given by the user mean, for every engine.

:func:`resolve` turns a *target* (a PRISM/JANI file or a registered benchmark id), its constants or
benchmark parameters, a policy spec and a property (text or a benchmark/JANI property name) into
the objects the engines take: the model, a :class:`~rlverify.policies.Policy` and a parsed
:class:`~rlverify.models.Property`. ``verify``, ``simulate``, ``heatmap``, ``abstract`` and ``train``
all resolve their input here, so the same input means the same thing in every command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict, Unpack

from rlverify.benchmarks.registry import Benchmark, BenchmarkError, make, parse_parameters, spec
from rlverify.errors import InputFileError, ModelError, OptionError, PolicyError, safe_repr, type_name
from rlverify.files import check_input
from rlverify.models.properties import Property
from rlverify.models.userfile import DEFAULT_SYSTEM_TIMEOUT
from rlverify.policies.base import Policy
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, DEFAULT_POLICY_TIMEOUT

if TYPE_CHECKING:
    import gymnasium

    from rlverify.models.gym_simulator import GymSimulator

from rlverify.targets import (
    ALL_KINDS,
    OF_BENCHMARK_KIND,
    AnyTarget,
    EnvironmentTarget,
    ModelTarget,
    PolicySpec,
    SimulatorTarget,
    SystemTarget,
    Target,
    TargetKind,
)

__all__ = [
    "ALL_KINDS",
    "AnyTarget",
    "EnvironmentTarget",
    "Kinds",
    "ModelTarget",
    "PolicySpec",
    "SimulatorTarget",
    "SystemTarget",
    "Target",
    "check_property",
    "resolve",
    "resolve_model",
    "resolve_simulated",
]

MODEL_SUFFIXES = (".prism", ".pm", ".nm", ".jani")
#: the kinds of target a command takes
Kinds = Sequence[TargetKind]
#: a Gymnasium environment given in Python: a ``gymnasium.Env``/``gymnasium.vector.VectorEnv`` object or a factory
#: making one (:func:`rlverify.models.gym_simulator.is_gym_source`)
GymSource: TypeAlias = "gymnasium.Env[Any, Any] | gymnasium.vector.VectorEnv[Any, Any, Any] | Callable[[], Any]"
#: what resolve takes as a target
TargetSpec: TypeAlias = "str | Path | Benchmark | GymSource"


class ResolveOptions(TypedDict, total=False):
    """:func:`resolve`'s keyword arguments but ``property`` and ``kinds``, for the functions that pass them on."""

    constants: str | None
    policy: PolicySpec | None
    features: Sequence[str] | None
    actions: Sequence[str] | None
    output: str | None
    needs_policy: bool
    command: str
    env_kwargs: str | dict[str, object] | None
    trust_code: bool
    policy_timeout: float | None
    policy_threads: int
    needs_property: bool
    system_timeout: float | None
    labels: Sequence[str] | None
    vectorization: str | None
    vec_normalize: str | Path | None


def resolve(
    target: TargetSpec,
    *,
    constants: str | None = None,
    policy: PolicySpec | None = None,
    features: Sequence[str] | None = None,
    actions: Sequence[str] | None = None,
    output: str | None = None,
    property: str | Property | None = None,
    needs_policy: bool = True,
    kinds: Kinds = ALL_KINDS,
    command: str = "",
    env_kwargs: str | dict[str, object] | None = None,
    trust_code: bool = False,
    policy_timeout: float | None = DEFAULT_POLICY_TIMEOUT,
    policy_threads: int = DEFAULT_POLICY_THREADS,
    needs_property: bool = False,
    system_timeout: float | None = DEFAULT_SYSTEM_TIMEOUT,
    labels: Sequence[str] | None = None,
    vectorization: str | None = None,
    vec_normalize: str | Path | None = None,
) -> AnyTarget:
    """Resolve a target, its policy and its property once.

    Args:
        target: a PRISM (``.prism``/``.pm``/``.nm``) or JANI file, a registered benchmark id (see
            ``rlverify benchmarks list``), or a built :class:`~rlverify.benchmarks.Benchmark`.
        constants: model constants (files) or benchmark parameters, ``"K=V,K2=V2"``.
        policy: a policy spec (see :data:`rlverify.policies.loading.SPEC_HELP`), a benchmark's
            reference policy name, a :class:`Policy`, or a network in memory (a Stable-Baselines3 model, a
            ``torch.nn.Module``, ONNX bytes: :func:`rlverify.policies.load_policy`, with the model's names as
            defaults). None: the benchmark's reference policy (its first one), if any.
        features: the policy's feature names, for policy files that do not declare them.
        actions: the policy's action names, likewise.
        output: what the policy outputs (``logits``, ``probabilities``, ``q-values``), likewise.
        property: property text, or a benchmark's / JANI file's property name. With a policy (when
            ``needs_policy``), a named JANI ``Pmax``/``Pmin`` property is read as ``P=?`` (its ``notes`` say so).
        needs_policy: refuse (with the way out) when no policy is given or shipped; False (``verify
            --mode monolithic``): the property is over all schedulers, named ones keep their Pmin/Pmax.
        kinds: the target types this command accepts (:class:`~rlverify.targets.ModelTarget`,
            :class:`~rlverify.targets.EnvironmentTarget`, :class:`~rlverify.targets.SystemTarget`).
        command: the command's name, for messages.
        env_kwargs: keyword arguments of a ``gym:ID`` target (``"map_name=8x8,is_slippery=false"`` or a
            JSON object; see :func:`rlverify.models.gymnasium.parse_env_kwargs`).
        trust_code: the ``--trust-code`` opt-in: a ``gym:MODULE:ID`` target may import ``MODULE``, and an SB3
            zip is loaded with Stable-Baselines3's loader (which unpickles and can run code). Without it
            nothing but a ``path.py:NAME`` policy or system (code by design) runs code from the user's files.
        policy_timeout: seconds one call of the policy may take (``--policy-timeout``; None or 0: no limit).
        policy_threads: threads of a network policy's runtime (``--policy-threads``; see
            :func:`rlverify.policies.load_policy`: torch's setting is process-global).
        needs_property: refuse a ``property`` of None (the command checks one).
        system_timeout: seconds importing a ``path.py:NAME`` system's file, and calling ``NAME()``, may each take
            (``--system-timeout``; None or 0: no limit; see :func:`rlverify.models.continuous.load_system`).
        labels: ``NAME=CONDITION`` labels over the episodes of a Gymnasium environment without a transition table
            (``--label``; see :mod:`rlverify.models.gym_simulator`).
        vectorization: how such an environment's copies are made (``--vectorization``: auto, native, sync, async).
        vec_normalize: an SB3 ``VecNormalize`` statistics file (``--vec-normalize``): the policy is given observations
            normalised as in training (:func:`rlverify.policies.normalization.normalized`).

    Returns:
        a :class:`~rlverify.targets.ModelTarget`, :class:`~rlverify.targets.EnvironmentTarget` or
        :class:`~rlverify.targets.SystemTarget` (one of ``kinds``).

    Raises:
        OptionError: a target that is not a path, an id or a benchmark; a property that is not text or a
            :class:`Property` (or None when ``needs_property``).
        InputFileError: a file that cannot be read.
        BenchmarkError: an unknown benchmark id or parameter.
        ModelError: a model rlverify refuses (ConstantsError: its constants).
        PolicyError: a policy that cannot be loaded or does not fit the model.
        PropertyError: a property that cannot be parsed or named.
    """
    _check_arguments(target, property, needs_property, command)
    _refuse_system_early(target, kinds, command)
    episodes = _Episodes(labels, vectorization, features)
    t = _model(target, constants, env_kwargs, trust_code, system_timeout, episodes)
    if not isinstance(t, tuple(kinds)):
        raise _wrong_kind(t.benchmark, type(t), t.name, target, kinds, command)
    if needs_policy and policy is None:
        _refuse_no_choices(t, target)
    loaded, source = _policy(
        t,
        policy,
        _Names(features, actions, output),
        needs_policy,
        trust_code=trust_code,
        timeout=policy_timeout,
        threads=policy_threads,
    )
    if vec_normalize is not None:
        loaded = _normalized(loaded, vec_normalize)
    if isinstance(t, SimulatorTarget):  # the observation named as the policy names it; the labels over those names
        t = replace(t, model=episodes.named(t.model, loaded))
    t = replace(t, policy=loaded, policy_source=source)
    if property is None:
        return t
    return t.with_property(property, fixed_policy=needs_policy and loaded is not None)


def _normalized(policy: Policy | None, path: str | Path) -> Policy:
    """``policy`` under the observation statistics of the VecNormalize file ``path``."""
    from rlverify.policies.base import BasePolicy
    from rlverify.policies.normalization import load_vec_normalize, normalized  # lazy: only with the option

    if not isinstance(policy, BasePolicy):
        raise OptionError(
            f"--vec-normalize {path}: applies to a policy loaded by rlverify (a file or a network), not to {policy!r}"
        )
    return normalized(policy, load_vec_normalize(path))


def _refuse_system_early(target: TargetSpec, kinds: Kinds, command: str) -> None:
    """A ``path.py:NAME`` system where the command takes none: refused before the file's code runs."""
    if SystemTarget in kinds or not isinstance(target, (str, Path)) or ".py:" not in str(target).lower():
        return
    from rlverify.models.continuous.declared import is_declaration_target  # lazy: the continuous engine

    if is_declaration_target(str(target)):
        raise _wrong_kind(None, SystemTarget, str(target), target, kinds, command)


def _refuse_no_choices(t: Target[Any], target: TargetSpec) -> None:
    """A DTMC asked for its policy: there is none to check (the way out: monolithic)."""
    if not t.has_choices():
        given = t.benchmark.id if t.benchmark is not None else target
        raise PolicyError(
            f"{t.name} is a DTMC: it has no choices for a policy to make; check it with rlverify verify "
            f"{given} --mode monolithic (its Pmin = Pmax is the value)"
        )


@dataclass(frozen=True)
class _Episodes:
    """How a Gymnasium environment without a transition table is read: ``--label``, ``--vectorization``, and the
    observation's feature names (``--features``)."""

    labels: Sequence[str] | None = None
    vectorization: str | None = None
    features: Sequence[str] | None = None

    def named(self, sim: GymSimulator, policy: Policy | None) -> GymSimulator:
        """``sim`` with its observation named by ``--features``, else by the policy's features where the policy
        declares as many names (its own names for the observation, by position), and the ``--label`` labels compiled
        over those names (they may read them)."""
        from rlverify.models.gym_simulator import DEFAULT_FEATURE, named  # lazy: gymnasium's simulator

        names: Sequence[str] | None = self.features
        default = all(DEFAULT_FEATURE.fullmatch(f) for f in sim.feature_names)
        if names is None and policy is not None and default and len(policy.features) == len(sim.feature_names):
            names = list(policy.features)
        return named(sim, names, self.labels)

    def refuse(self, target: TargetSpec) -> None:
        """Refuse ``--label``/``--vectorization`` for a target that is not such an environment."""
        for option, given in (("--label", self.labels), ("--vectorization", self.vectorization)):
            if given:
                raise OptionError(
                    f"{option}: applies to Gymnasium environments without a transition table (gym:ID, e.g. "
                    f"gym:CartPole-v1), not {target}"
                )


def _model(
    target: TargetSpec,
    constants: str | None,
    env_kwargs: str | dict[str, object] | None = None,
    trust_code: bool = False,
    system_timeout: float | None = DEFAULT_SYSTEM_TIMEOUT,
    episodes: _Episodes | None = None,
) -> AnyTarget:
    """The one place that builds targets: the target type from the input (no policy or property yet)."""
    episodes = _Episodes() if episodes is None else episodes
    if isinstance(target, str) and target.startswith("gym:"):  # a Gymnasium environment, with a finite model or not
        return _gym_target(target, constants, env_kwargs, trust_code, episodes)
    if not isinstance(target, (str, Path, Benchmark)):  # a Gymnasium environment or factory given in Python
        if constants or env_kwargs:
            raise OptionError("constants/env_kwargs: an environment given in Python is made as given (set them in it)")
        return _gym_object_target(target, episodes)
    episodes.refuse(target)
    if env_kwargs:
        raise OptionError(f"--env-kwargs: applies to gym:ID targets only (e.g. gym:FrozenLake-v1), not {target}")
    if isinstance(target, Benchmark):
        if constants:
            raise BenchmarkError(f"{target.id}: parameters are fixed when the benchmark is made; pass them to make()")
        return _of_benchmark(target, target.id, constants)
    return _file_or_id(target, constants, system_timeout)


def _gym_target(
    target: str, constants: str | None, env_kwargs: str | dict[str, object] | None, trust: bool, episodes: _Episodes
) -> ModelTarget | SimulatorTarget:
    """A ``gym:ID`` target: its finite model (exact engines) when it has a transition table, else its simulator."""
    from rlverify.models.gym_simulator import has_transition_table, simulator_of  # lazy: gymnasium
    from rlverify.models.gymnasium import model_from_target, parse_env_kwargs  # lazy: gymnasium
    from rlverify.models.gymnasium_make import make_env  # lazy: gymnasium

    if constants:
        raise OptionError(
            f"{target}: -c/--constants is for PRISM/JANI models and benchmarks; "
            f"give the environment's arguments with --env-kwargs {constants!r}"
        )
    env_id = target.removeprefix("gym:").strip()
    if not env_id:
        raise ModelError(f"{target}: expected gym:ID, e.g. gym:FrozenLake-v1 or gym:CartPole-v1")
    kwargs = parse_env_kwargs(env_kwargs)
    env = make_env(env_id, kwargs, trust)
    try:
        if has_transition_table(env):
            episodes.refuse(target)
            gym_model = model_from_target(target, env_kwargs, trust_code=trust)
            return ModelTarget(given=target, name=gym_model.display_name, model=gym_model, constants=constants)
        sim = simulator_of(env, env_id=env_id, env_kwargs=kwargs, vectorization=episodes.vectorization or "auto", shown=target)
    finally:
        env.close()
    return SimulatorTarget(given=target, name=sim.name, model=sim)


def _gym_object_target(target: GymSource, episodes: _Episodes) -> ModelTarget | SimulatorTarget:
    """A Gymnasium environment, vector environment or factory given in Python (how copies are made:
    :func:`~rlverify.models.gym_simulator.gym_source`): simulated episode by episode; one with a transition table:
    its finite model, read exactly."""
    from rlverify.models.gym_simulator import gym_source, has_transition_table, simulator_of  # lazy: gymnasium
    from rlverify.models.gym_vector import one_line  # lazy: gymnasium
    from rlverify.models.gymnasium import from_gymnasium  # lazy: gymnasium

    source = gym_source(target)
    maker = source.factory or (lambda: _make_quietly(source.env_id, source.env_kwargs))
    try:
        env = maker()
    except Exception as exc:  # the user's own factory: its failure is bad input
        raise ModelError(f"{source.name}: making the environment failed: {type(exc).__name__}: {one_line(exc)}") from None
    import gymnasium  # lazy: gymnasium, start-up

    if not isinstance(env, gymnasium.Env):
        raise ModelError(f"{source.name}: the factory returned {type(env).__name__}, not a gymnasium.Env")
    try:
        if has_transition_table(env):
            episodes.refuse(source.name)
            gym_model = from_gymnasium(env)
            return ModelTarget(given=source.name, name=gym_model.display_name, model=gym_model)
        sim = simulator_of(
            env,
            env_id=source.env_id,
            env_kwargs=source.env_kwargs,
            factory=source.factory,
            vectorization=episodes.vectorization or "auto",
            shown=source.name,
        )
    finally:
        env.close()
    return SimulatorTarget(given=source.name, name=sim.name, model=sim)


def _make_quietly(env_id: str, kwargs: dict[str, Any]) -> Any:
    from rlverify.models.gym_simulator import Maker  # lazy: gymnasium

    return Maker(env_id, kwargs)()


def _of_benchmark(bench: Benchmark, given: str, constants: str | None) -> AnyTarget:
    kind = OF_BENCHMARK_KIND[bench.kind]
    return kind(given=given, name=bench.name, model=bench.model(), benchmark=bench, constants=constants)


def _file_or_id(target: str | Path, constants: str | None, system_timeout: float | None) -> AnyTarget:
    path = Path(target)
    text = str(target)
    if text.lower().endswith(".py"):
        raise InputFileError(
            f"{text}: a continuous system is given as FILE.py:NAME, NAME being the declaration (e.g. {text}:SYSTEM)"
        )
    if ".py:" in text.lower():  # (the continuous engine's module is imported only for such a target)
        from rlverify.models.continuous.declared import is_declaration_target, load_system  # lazy: continuous engine

        if is_declaration_target(text):  # path.py:NAME, a continuous system declared in a Python file
            system = load_system(text, constants, timeout=system_timeout)
            return SystemTarget(given=text, name=text, model=system, constants=constants)
    if path.suffix.lower() in MODEL_SUFFIXES or path.is_file():
        from rlverify.models.symbolic import load_model  # lazy: stormpy, start-up

        check_input(path, "model file")  # (a FIFO or device: named as such, never opened)
        return ModelTarget(given=text, name=str(path), model=load_model(path, constants), constants=constants)
    if "/" in text or "\\" in text:
        raise InputFileError(f"{text}: model file not found (expected a PRISM/JANI file or a benchmark id)")
    s = spec(text)  # unknown ids: a BenchmarkError naming the close ones
    return _of_benchmark(make(s.id, **parse_parameters(constants)), text, constants)


@dataclass(frozen=True)
class _Names:
    """A policy file's names as given (``--features/--actions/--output``), for files that do not declare them."""

    features: Sequence[str] | None
    actions: Sequence[str] | None
    output: str | None

    def load(self, t: Target[Any], spec: PolicySpec, **settings: Any) -> Policy:
        """``spec`` loaded (:func:`~rlverify.policies.load_policy`) with these names, ``t``'s as defaults."""
        from rlverify.policies.loading import load_policy  # lazy: scipy (policies.adapters), only with a policy

        return load_policy(
            spec,
            features=list(self.features) if self.features else None,
            actions=list(self.actions) if self.actions else None,
            output=self.output,
            defaults=t.policy_interface(),
            **settings,
        )


def _policy(
    t: Target[Any],
    policy: PolicySpec | None,
    names: _Names,
    needs_policy: bool,
    *,
    trust_code: bool = False,
    timeout: float | None = DEFAULT_POLICY_TIMEOUT,
    threads: int = DEFAULT_POLICY_THREADS,
) -> tuple[Policy | None, str | None]:
    """The policy of ``t`` (None when none is needed and none given) and the file or name it came from."""
    from rlverify.policies.adapters import object_kind  # lazy: scipy, only with a policy
    from rlverify.policies.check import as_policy  # lazy: scipy.sparse (models.dynamics), only with a policy

    if policy is not None and not isinstance(policy, str) and object_kind(policy) is not None:
        # a network given in memory (an SB3 model, a torch module, ONNX bytes): read as its file would be
        loaded = names.load(t, policy, timeout=timeout, threads=threads)
        return loaded, loaded.name
    if policy is not None and not isinstance(policy, str):  # a policy object (or function) given through the API
        wrapped = as_policy(policy, features=names.features, actions=names.actions, output=names.output)
        return wrapped, wrapped.name
    if policy is None:
        if not needs_policy:
            return None, None
        policy = _reference_policy(t)
    bench = t.benchmark
    file = str(bench.policy_file(policy)) if bench is not None and policy in bench.policies else policy
    return names.load(t, file, trust_code=trust_code, timeout=timeout, threads=threads), file


def _reference_policy(t: Target[Any]) -> str:
    """The benchmark's first reference policy, or the refusal naming the way out."""
    bench = t.benchmark
    if bench is None:
        raise PolicyError(
            f"{t.name}: checking a policy needs --policy FILE (a model file has no reference policy), "
            "or (rlverify verify) --mode monolithic for Pmin/Pmax over all policies"
        )
    if bench.policies:
        return next(iter(bench.policies))
    shipped = ""
    names = list(spec(bench.id).policies)
    if names:
        which = ", ".join(repr(n) for n in names)
        shipped = (
            f" (its reference {'policy' if len(names) == 1 else 'policies'} {which} "
            f"{'was' if len(names) == 1 else 'were'} trained for the default parameters only)"
        )
    raise PolicyError(
        f"{t.name} has no reference policy{shipped}; pass --policy FILE"
        + (", or (rlverify verify) --mode monolithic for Pmin/Pmax" if t.HAS_OPTIMUM else "")
    )


def resolve_simulated(
    target: TargetSpec, property: str | Property | None, *, kinds: Kinds = ALL_KINDS, **kwargs: Unpack[ResolveOptions]
) -> AnyTarget:
    """:func:`resolve` for the statistical engine (every kind), with its property: a continuous system's default
    (``None`` or ``"unsafe"``) is :func:`~rlverify.models.continuous.unsafe_property` (an unsafe state within its
    horizon, from a uniformly random start state); every other target needs one (a
    :class:`~rlverify.errors.OptionError` naming the way in). ``kwargs``: :func:`resolve`'s."""
    t = resolve(target, kinds=kinds, **kwargs)
    return replace(t, property=t.simulated_property(property))


def _check_arguments(target: object, property: object, needs_property: bool, command: str) -> None:
    """Refuse a target or property of a type no engine takes (None among them), naming the argument."""
    from rlverify.models.gym_simulator import is_gym_source  # (gymnasium itself only if the caller imported it)

    if isinstance(target, bool) or not (isinstance(target, (str, Path, Benchmark)) or is_gym_source(target)):
        raise OptionError(
            f"target: expected a PRISM/JANI file, a benchmark id, gym:ID or path.py:NAME (text or a Path) or a "
            f"Benchmark, got {type_name(target)} {safe_repr(target)}"
        )
    if property is not None or needs_property:
        check_property(property, command)


def check_property(property: object, command: str) -> None:
    """Refuse a property that is not text or a :class:`Property` (None among them), naming the argument."""
    if property is None:
        raise OptionError(
            f"property: {command or 'this command'} checks a property: give a formula (e.g. 'P=? [F \"goal\"]') or "
            "a benchmark's or JANI file's property name"
        )
    if not isinstance(property, (str, Property)):
        raise OptionError(f"property: expected a formula or a property name (text) or a Property, got {type_name(property)}")


def _wrong_kind(
    bench: Benchmark | None, kind: TargetKind, name: str, target: TargetSpec, kinds: Kinds, command: str
) -> BenchmarkError:
    """The error for a target of a kind the command does not take, naming the command that does."""
    return BenchmarkError(
        f"{name} is {kind.described(bench)}; {command or 'this command'} takes "
        f"{' or '.join(k.WORDS for k in kinds)}: use {kind.ENGINE} {bench.id if bench else target}"
    )


def resolve_model(
    target: TargetSpec, *, property: str | Property | None = None, **kwargs: Unpack[ResolveOptions]
) -> ModelTarget:
    """:func:`resolve` for a command that takes PRISM/JANI/Gymnasium models only (the exact engine's)."""
    t = resolve(target, property=property, kinds=(ModelTarget,), **kwargs)
    assert isinstance(t, ModelTarget)  # resolve refuses every other kind
    return t
