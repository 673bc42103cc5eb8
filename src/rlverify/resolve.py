"""One front door: what a model, a policy and a property given by the user mean, for every engine.

:func:`resolve` turns a *target* (a PRISM/JANI file or a registered benchmark id), its constants or
benchmark parameters, a policy spec and a property (text or a benchmark/JANI property name) into
the objects the engines take: the model, a :class:`~rlverify.policies.Policy` and a parsed
:class:`~rlverify.models.Property`. ``verify``, ``simulate``, ``heatmap``, ``abstract`` and ``train``
all resolve their input here, so the same input means the same thing in every command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rlverify.benchmarks.registry import Benchmark, BenchmarkError, make, parse_parameters, spec
from rlverify.errors import InputFileError, OptionError, PolicyError, safe_repr, type_name
from rlverify.models.properties import Property, parse_structure
from rlverify.models.userfile import DEFAULT_SYSTEM_TIMEOUT
from rlverify.policies.base import Policy
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, DEFAULT_POLICY_TIMEOUT
from rlverify.results import Result

R = TypeVar("R", bound=Result)

MODEL_SUFFIXES = (".prism", ".pm", ".nm", ".jani")
#: which engine checks which kind of benchmark (for messages)
ENGINE_OF_KIND = {"prism": "rlverify verify", "native": "rlverify simulate", "continuous": "rlverify abstract"}


@dataclass(frozen=True)
class Target:
    """A resolved target: the model, and the policy and property when asked for.

    Attributes:
        given: the target as the user wrote it.
        name: how results name it (a benchmark id with its parameters, or the file path).
        kind: ``prism`` (a PRISM/JANI MDP), ``native`` (a vectorised environment) or ``continuous``.
        model: a :class:`~rlverify.models.SymbolicModel`, a vectorised environment, or a
            :class:`~rlverify.models.continuous.ContinuousSystem`.
        benchmark: the :class:`~rlverify.benchmarks.Benchmark` (None for a model file).
        constants: the constants or parameters as given (``"xMax=4,yMax=4"``).
        policy: the loaded policy (None when not asked for, or in monolithic mode).
        policy_source: the file the policy came from (a benchmark's shipped file, or the spec).
        property: the parsed property (PRISM/JANI: with Storm's parse attached).
    """

    given: str
    name: str
    kind: str
    model: Any
    benchmark: Benchmark | None = None
    constants: str | None = None
    policy: Policy | None = None
    policy_source: str | None = None
    property: Property | None = None

    def notes(self, *, unavailable: str | None = None) -> list[str]:
        """What a result about this target must say besides its own warnings: the property's notes and the
        policy's (trained on another benchmark or with other parameters; a MaskablePPO policy with ``stall``)."""
        from rlverify.policies.loading import policy_warnings

        notes = list(self.property.notes) if self.property is not None else []
        if self.policy is not None:
            notes += policy_warnings(self.policy, self, unavailable=unavailable)
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


def resolve(
    target: str | Path | Benchmark,
    *,
    constants: str | None = None,
    policy: str | Policy | Any | None = None,
    features: Sequence[str] | None = None,
    actions: Sequence[str] | None = None,
    output: str | None = None,
    property: str | Property | None = None,
    needs_policy: bool = True,
    kinds: Sequence[str] = ("prism", "native", "continuous"),
    command: str = "",
    env_kwargs: str | dict[str, Any] | None = None,
    trust_code: bool = False,
    policy_timeout: float | None = DEFAULT_POLICY_TIMEOUT,
    policy_threads: int = DEFAULT_POLICY_THREADS,
    needs_property: bool = False,
    system_timeout: float | None = DEFAULT_SYSTEM_TIMEOUT,
) -> Target:
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
        kinds: the kinds this command accepts.
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
    if "continuous" not in kinds and isinstance(target, (str, Path)) and ".py:" in str(target).lower():
        from rlverify.models.continuous.declared import is_declaration_target

        if is_declaration_target(str(target)):  # refused before the file's code runs
            raise _wrong_kind(None, "continuous", str(target), target, kinds, command)
    bench, model, kind, name = _model(target, constants, env_kwargs, trust_code, system_timeout)
    if kind not in kinds:
        raise _wrong_kind(bench, kind, name, target, kinds, command)
    if needs_policy and policy is None and getattr(model, "model_type", "") == "dtmc":
        given = bench.id if bench is not None else target
        raise PolicyError(
            f"{name} is a DTMC: it has no choices for a policy to make; check it with rlverify verify "
            f"{given} --mode monolithic (its Pmin = Pmax is the value)"
        )
    loaded, source = _policy(
        bench,
        name,
        policy,
        features,
        actions,
        output,
        needs_policy,
        getattr(model, "policy_interface", None),
        trust_code=trust_code,
        timeout=policy_timeout,
        threads=policy_threads,
    )
    fixed = needs_policy and loaded is not None
    prop = resolve_property(bench, model, kind, property, fixed_policy=fixed) if property is not None else None
    return Target(
        given=str(target) if not isinstance(target, Benchmark) else target.id,
        name=name,
        kind=kind,
        model=model,
        benchmark=bench,
        constants=constants,
        policy=loaded,
        policy_source=source,
        property=prop,
    )


def _model(
    target: str | Path | Benchmark,
    constants: str | None,
    env_kwargs: str | dict[str, Any] | None = None,
    trust_code: bool = False,
    system_timeout: float | None = DEFAULT_SYSTEM_TIMEOUT,
) -> tuple[Benchmark | None, Any, str, str]:
    if isinstance(target, str) and target.startswith("gym:"):  # a Gymnasium environment with a finite model
        from rlverify.models.gymnasium import model_from_target

        if constants:
            raise OptionError(
                f"{target}: -c/--constants is for PRISM/JANI models and benchmarks; "
                f"give the environment's arguments with --env-kwargs {constants!r}"
            )
        gym_model = model_from_target(target, env_kwargs, trust_code=trust_code)
        return None, gym_model, "prism", gym_model.display_name
    if env_kwargs:
        raise OptionError(f"--env-kwargs: applies to gym:ID targets only (e.g. gym:FrozenLake-v1), not {target}")
    if isinstance(target, Benchmark):
        if constants:
            raise BenchmarkError(f"{target.id}: parameters are fixed when the benchmark is made; pass them to make()")
        return target, target.model(), target.kind, target.name
    path = Path(target)
    text = str(target)
    if text.lower().endswith(".py"):
        raise InputFileError(
            f"{text}: a continuous system is given as FILE.py:NAME, NAME being the declaration (e.g. {text}:SYSTEM)"
        )
    if ".py:" in text.lower():  # (the continuous engine's module is imported only for such a target)
        from rlverify.models.continuous.declared import is_declaration_target, load_system

        if is_declaration_target(text):  # path.py:NAME, a continuous system declared in a Python file
            return None, load_system(text, constants, timeout=system_timeout), "continuous", text
    if path.suffix.lower() in MODEL_SUFFIXES or path.is_file():
        from rlverify.files import check_input
        from rlverify.models.symbolic import load_model

        check_input(path, "model file")  # (a FIFO or device: named as such, never opened)

        return None, load_model(path, constants), "prism", str(path)
    if "/" in text or "\\" in text:
        raise InputFileError(f"{text}: model file not found (expected a PRISM/JANI file or a benchmark id)")
    s = spec(text)  # unknown ids: a BenchmarkError naming the close ones
    bench = make(s.id, **parse_parameters(constants))
    return bench, bench.model(), bench.kind, bench.name


def _policy(
    bench: Benchmark | None,
    name: str,
    policy: str | Policy | Any | None,
    features: Sequence[str] | None,
    actions: Sequence[str] | None,
    output: str | None,
    needs_policy: bool,
    interface: dict[str, list[str]] | None = None,
    *,
    trust_code: bool = False,
    timeout: float | None = DEFAULT_POLICY_TIMEOUT,
    threads: int = DEFAULT_POLICY_THREADS,
) -> tuple[Policy | None, str | None]:
    from rlverify.policies.adapters import object_kind
    from rlverify.policies.check import as_policy
    from rlverify.policies.loading import load_policy

    if policy is not None and not isinstance(policy, str) and object_kind(policy) is not None:
        # a network given in memory (an SB3 model, a torch module, ONNX bytes): read as its file would be
        loaded = load_policy(
            policy,
            features=list(features) if features else None,
            actions=list(actions) if actions else None,
            output=output,
            defaults=interface,
            timeout=timeout,
            threads=threads,
        )
        return loaded, loaded.name
    if policy is not None and not isinstance(policy, str):  # a policy object (or function) given through the API
        wrapped = as_policy(policy, features=features, actions=actions, output=output)
        return wrapped, wrapped.name
    if policy is None:
        if not needs_policy:
            return None, None
        if bench is None:
            raise PolicyError(
                f"{name}: checking a policy needs --policy FILE (a model file has no reference policy), "
                "or (rlverify verify) --mode monolithic for Pmin/Pmax over all policies"
            )
        if not bench.policies:
            shipped = ""
            names = list(spec(bench.id).policies) if bench is not None else []
            if names:
                which = ", ".join(repr(n) for n in names)
                shipped = (
                    f" (its reference {'policy' if len(names) == 1 else 'policies'} {which} "
                    f"{'was' if len(names) == 1 else 'were'} trained for the default parameters only)"
                )
            raise PolicyError(
                f"{name} has no reference policy{shipped}; pass --policy FILE"
                + (", or (rlverify verify) --mode monolithic for Pmin/Pmax" if bench.kind == "prism" else "")
            )
        policy = next(iter(bench.policies))
    if bench is not None and policy in bench.policies:
        file = str(bench.policy_file(policy))
    else:
        file = policy
    return load_policy(
        file,
        features=list(features) if features else None,
        actions=list(actions) if actions else None,
        output=output,
        defaults=interface,
        trust_code=trust_code,
        timeout=timeout,
        threads=threads,
    ), file


def resolve_property(
    bench: Benchmark | None, model: Any, kind: str, given: str | Property, *, fixed_policy: bool = True
) -> Property:
    """A property text or name (of the benchmark or JANI file) parsed for an already resolved model.

    ``fixed_policy``: evaluated on a policy's chain (every engine but ``verify --mode monolithic``): a
    named JANI ``Pmax``/``Pmin`` property is read as ``P=?`` (``Property.notes`` says so)."""
    if isinstance(given, Property):
        text, name = given.text, given.name
    elif bench is not None:
        text, name = bench.property(given)
    else:
        text, name = given, None
    if kind == "prism":
        from dataclasses import replace

        from rlverify.models.property_parser import parse_property

        prop = parse_property(model, text, fixed_policy=fixed_policy)
        return replace(prop, name=name or prop.name)
    return parse_structure(text, name=name)


def resolve_simulated(target: str | Path | Benchmark, property: str | Property | None, **kwargs: Any) -> Target:
    """:func:`resolve` for the statistical engine (every kind), with its property: a continuous system's default
    (``None`` or ``"unsafe"``) is :func:`~rlverify.models.continuous.unsafe_property` (an unsafe state within its
    horizon, from a uniformly random start state); every other target needs one (a
    :class:`~rlverify.errors.OptionError` naming the way in). ``kwargs``: :func:`resolve`'s."""
    from dataclasses import replace

    from rlverify.models.continuous import unsafe_property

    kwargs.setdefault("kinds", ("prism", "native", "continuous"))
    t = resolve(target, **kwargs)
    if t.kind == "continuous" and property in (None, "unsafe"):
        prop: Any = unsafe_property(t.model)
    elif property is None:
        raise OptionError(
            "--property: give the property to estimate, a formula (e.g. 'P=? [F \"goal\"]') or a "
            "property name of the benchmark (rlverify benchmarks list)"
        )
    else:
        prop = resolve_property(t.benchmark, t.model, t.kind, property)
    return replace(t, property=prop)


def _check_arguments(target: Any, property: Any, needs_property: bool, command: str) -> None:
    """Refuse a target or property of a type no engine takes (None among them), naming the argument."""
    if isinstance(target, bool) or not isinstance(target, (str, Path, Benchmark)):
        raise OptionError(
            f"target: expected a PRISM/JANI file, a benchmark id, gym:ID or path.py:NAME (text or a Path) or a "
            f"Benchmark, got {type_name(target)} {safe_repr(target)}"
        )
    if property is not None or needs_property:
        check_property(property, command)


def check_property(property: Any, command: str) -> None:
    """Refuse a property that is not text or a :class:`Property` (None among them), naming the argument."""
    if property is None:
        raise OptionError(
            f"property: {command or 'this command'} checks a property: give a formula (e.g. 'P=? [F \"goal\"]') or "
            "a benchmark's or JANI file's property name"
        )
    if not isinstance(property, (str, Property)):
        raise OptionError(f"property: expected a formula or a property name (text) or a Property, got {type_name(property)}")


def _wrong_kind(
    bench: Benchmark | None, kind: str, name: str, target: str | Path | Benchmark, kinds: Sequence[str], command: str
) -> BenchmarkError:
    """The error for a target of a kind the command does not take, naming the command that does."""
    what = (
        f"a {kind} benchmark"
        if bench is not None
        else {"prism": "a PRISM/JANI model", "continuous": "a continuous system"}.get(kind, f"a {kind} model")
    )
    return BenchmarkError(
        f"{name} is {what}; {command or 'this command'} takes "
        f"{' or '.join(_kind_words(kinds))}: use {ENGINE_OF_KIND[kind]} {bench.id if bench else target}"
    )


def _kind_words(kinds: Sequence[str]) -> list[str]:
    words = {"prism": "a PRISM/JANI model", "native": "a native environment (Racetrack)", "continuous": "a continuous system"}
    return [words[k] for k in kinds]
