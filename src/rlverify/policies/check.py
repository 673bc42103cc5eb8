"""The door for policies: :func:`as_policy` wraps what the user passes once; :func:`check_policy` validates a policy
against a model before any work, reporting every problem at once; :func:`fit_problems` is the one check of a
policy's names against a model's or a system's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import PurePath
from typing import Any, Protocol

import numpy as np

from rlverify.choices import OutputKind
from rlverify.errors import PolicyError, did_you_mean, safe_repr, type_name
from rlverify.models.commands import Command
from rlverify.models.dynamics import fit
from rlverify.models.program import compiled as compile_program
from rlverify.policies.adapters import CallablePolicy, ObjectKind, ProtocolPolicy, object_kind
from rlverify.policies.base import BasePolicy, Policy, numeric_output, validate_probabilities
from rlverify.policies.continuous import ContinuousPolicy
from rlverify.policies.formats import check_name_options, declaration

#: What a policy object has (the :class:`~rlverify.policies.base.Policy` protocol, but its ``name``).
PROTOCOL = ("features", "actions", "action_probabilities")

#: What :func:`as_policy` takes: a policy (an adapter, or an object of the user's class with the protocol's
#: members) or a function ``states (N, d) -> (N, |A|)`` outputs.
PolicyLike = Policy | Callable[..., Any]

#: How messages name an in-memory network as_policy refuses (load_policy reads it).
_NETWORK_OBJECTS = {
    ObjectKind.SB3: "a Stable-Baselines3 model",
    ObjectKind.SB3_POLICY: "a Stable-Baselines3 model's .policy",
    ObjectKind.TORCH: "a torch module",
    ObjectKind.ONNX: "an ONNX model",
}


class PolicyInterface(Protocol):
    """What :func:`check_policy` reads of a model: its variables and action labels (a
    :class:`~rlverify.models.SymbolicModel` or an :class:`~rlverify.models.ExplicitModel`; command names,
    unassigned variables, an initial state or a feature matrix are read where the model has them)."""

    @property
    def variables(self) -> Sequence[str]: ...

    @property
    def action_names(self) -> Sequence[str]: ...


def as_policy(
    policy: PolicyLike,
    *,
    features: Sequence[str] | None = None,
    actions: Sequence[str] | None = None,
    output: str | None = None,
) -> BasePolicy:
    """``policy`` as the one kind of policy the engines take (a :class:`~rlverify.policies.base.BasePolicy`, which
    has a ``name`` and checks its outputs), wrapped once and its shape checked up front.

    * an adapter (what :func:`~rlverify.policies.load_policy` gives, a :class:`CallablePolicy`, ...): itself;
    * an object with ``features``, ``actions`` and ``action_probabilities``, of the user's own class: a
      :class:`~rlverify.policies.adapters.ProtocolPolicy` named by its ``name`` (a string) or else its class name;
    * a function ``fn(states (N, d)) -> (N, |A|)`` outputs of kind ``output`` (default ``probabilities``): a
      :class:`CallablePolicy` over ``features`` and ``actions`` (both needed), named by the function's name.

    A file or spec (a string, a path) is refused: :func:`~rlverify.policies.load_policy` reads those.

    For a policy object, ``features``/``actions``/``output`` may repeat what it declares but never change it (the
    rule of policy files, :func:`~rlverify.policies.formats.declaration`). What :func:`check_policy` checks without a
    model is checked here: the protocol's attributes are there, its names are lists of distinct non-empty strings,
    ``action_probabilities`` can be called. ``as_policy(as_policy(p))`` is ``as_policy(p)``.

    Raises:
        PolicyError: not a policy (what is missing, named), invalid names, an option contradicting the policy.
    """
    check_name_options(features, actions)
    if isinstance(policy, (str, PurePath)):
        raise PolicyError(
            f"{policy}: a policy file or spec is loaded by rlverify.load_policy (or given to resolve); "
            "as_policy takes a policy object or function"
        )
    if isinstance(policy, type):
        cls = _class_name(policy)
        raise PolicyError(f"{cls} is a class, not a policy: pass an instance ({cls}(...))")
    network = object_kind(policy)
    if network is not None:
        what = _NETWORK_OBJECTS[network]
        raise PolicyError(
            f"{type_name(policy)} is {what}: rlverify.load_policy reads it (as its saved file would be read: "
            "load_policy(obj, features=[...], actions=[...])), and resolve() and the engines' front door take it as "
            "the policy; as_policy takes policy objects and functions"
        )
    if isinstance(policy, BasePolicy):
        wrapped = policy
    elif all(hasattr(policy, attr) for attr in PROTOCOL) or not callable(policy):
        wrapped = _wrap_object(policy)
    else:
        return _wrap_function(policy, features, actions, output)
    declaration(
        wrapped.name,
        "the policy object",
        {"features": features, "actions": actions, "output": output},
        {"features": wrapped.features, "actions": wrapped.actions, "output": wrapped.output or OutputKind.PROBABILITIES},
    )
    return wrapped


def _class_name(cls: type) -> str:
    """A class's name for messages (a string even for an odd metaclass)."""
    name = getattr(cls, "__name__", None)
    return str.__str__(name) if isinstance(name, str) else "object"


def _wrap_object(policy: Any) -> ProtocolPolicy:
    """A policy object of the user's class as a :class:`ProtocolPolicy`, its shape checked."""
    for attr in PROTOCOL:
        if not hasattr(policy, attr):
            raise PolicyError(f"{safe_repr(policy)} is not a policy: it has no '{attr}' (see rlverify.policies.Policy)")
    own = getattr(policy, "name", None)
    name = str.__str__(own) if isinstance(own, str) and own else type_name(policy)
    problems = []
    if not callable(policy.action_probabilities):
        problems.append(
            f"its action_probabilities is a {type_name(policy.action_probabilities)}, not a method "
            "(states (N, d) -> probabilities (N, |A|))"
        )
    features, feature_problems = _names(policy.features, "features")
    actions, action_problems = _names(policy.actions, "actions")
    problems += feature_problems + action_problems
    if problems:
        raise PolicyError(f"{name}: not a policy as rlverify takes one", problems)
    return ProtocolPolicy(policy, features, actions, name=name)


def _names(value: Any, what: str) -> tuple[list[str], list[str]]:
    """A policy object's ``features`` or ``actions`` as a list of plain strings, and what is wrong with them.

    Emptiness and duplicates are checked by the adapter (:class:`~rlverify.policies.base.BasePolicy`)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return [], [f"its {what} is {safe_repr(value)}, not a list of names"]
    names = list(value)
    bad = [v for v in names if not isinstance(v, str) or not v]
    if bad:
        return [], [f"its {what} must be non-empty strings, got {', '.join(safe_repr(v) for v in bad[:3])}"]
    return [str.__str__(v) for v in names], []


def _wrap_function(
    fn: Callable[..., Any], features: Sequence[str] | None, actions: Sequence[str] | None, output: str | None
) -> CallablePolicy:
    """A function of the user's as a :class:`CallablePolicy`, named by its ``__name__`` (a lambda: ``callable policy``)."""
    own = getattr(fn, "__name__", None)
    name = str.__str__(own) if isinstance(own, str) and own and own != "<lambda>" else "callable policy"
    if not features or not actions:
        missing = " and ".join(k for k, v in (("features", features), ("actions", actions)) if not v)
        raise PolicyError(
            f"{name}: a function is a policy only with its {missing} (as_policy(fn, features=[...], "
            "actions=[...]), or rlverify.policies.CallablePolicy)"
        )
    return CallablePolicy(fn, list(features), list(actions), output=output or "probabilities", name=name)


def check_policy(policy: PolicyLike, model: PolicyInterface, *, sample: np.ndarray | None = None) -> None:
    """Check names, shapes and distributions of ``policy`` against ``model``.

    ``policy`` is anything :func:`as_policy` takes. ``model`` needs ``variables`` and ``action_names`` (a
    :class:`~rlverify.models.SymbolicModel`, whose command names a policy may also use, or an
    :class:`~rlverify.models.ExplicitModel`). The policy's output is checked on ``sample`` (an ``(N, d)`` feature
    batch) or, if None, on the model's initial state (explicit models: up to 1,000 states) when it is known.

    Raises:
        PolicyError: listing every problem found.
    """
    policy = as_policy(policy)
    where = f"policy {policy.name} does not fit model {getattr(model, 'shown', '') or getattr(model, 'path', '')}"
    if isinstance(policy, ContinuousPolicy):  # gives actions: no fit check can make it a discrete policy
        raise PolicyError(where, [str(policy.refusal())])
    problems = fit_problems(
        policy.features,
        policy.actions,
        variables=model.variables,
        model_actions=model.action_names,
        commands=getattr(model, "commands", ()),
        unassigned=getattr(model, "unassigned", ()),
    )
    batch = None
    if not problems:
        batch = _default_sample(policy, model) if sample is None else np.asarray(sample, dtype=np.float64)
    if batch is not None:
        try:
            probs = numeric_output(policy.action_probabilities(batch), policy.name)
            validate_probabilities(probs, len(batch), len(policy.actions), source=policy.name)
        except PolicyError as exc:
            problems.append(str(exc))
    if problems:
        raise PolicyError(where, problems)


def fit_problems(
    features: Sequence[str],
    actions: Sequence[str],
    *,
    variables: Sequence[str],
    model_actions: Sequence[str],
    commands: Sequence[Command] = (),
    unassigned: Sequence[str] = (),
    ordered: bool = False,
    system: str = "",
) -> list[str]:
    """Every way a policy's ``features``/``actions`` do not fit a model's ``variables``/``model_actions``: the one
    "does this policy fit" check (one message per problem; empty: it fits).

    By default (a PRISM/JANI model, an explicit model) the policy's names must be among the model's, in any order
    (:func:`~rlverify.models.dynamics.fit`: its ``commands`` name choices too; ``unassigned`` variables are
    Storm's constants). ``ordered`` (a continuous ``system``, named in the messages, whose network is bounded
    over its observation in order): the names must be the system's, in its order.
    """
    if ordered:
        return _ordered_problems(tuple(features), tuple(actions), tuple(variables), tuple(model_actions), system)
    return fit(
        features, actions, variables=variables, model_actions=model_actions, commands=commands, unassigned=unassigned
    ).problems()


def _ordered_problems(
    features: tuple[str, ...],
    actions: tuple[str, ...],
    variables: tuple[str, ...],
    model_actions: tuple[str, ...],
    system: str,
) -> list[str]:
    problems = []
    if features != variables:
        count = f"the policy takes {len(features)} features but {system} gives {len(variables)}"
        problems.append(_differ("features", features, variables, system, count))
    if actions != model_actions:
        count = f"network has {len(actions)} outputs but the benchmark has {len(model_actions)} actions"
        problems.append(_differ("actions", actions, model_actions, system, count))
    return problems


def _differ(what: str, ours: tuple[str, ...], theirs: tuple[str, ...], system: str, count_message: str) -> str:
    text = f"{what} {list(ours)} != {system}'s {list(theirs)}"
    if len(ours) != len(theirs):
        return f"{count_message}: {text}"
    if sorted(ours) == sorted(theirs):
        return f"{text} (the same names in another order)"
    unknown = [f"'{n}'{did_you_mean(n, theirs)}" for n in ours if n not in theirs]
    return f"{text} (not {system}'s: {', '.join(unknown)})"


def _default_sample(policy: BasePolicy, model: Any) -> np.ndarray | None:
    if hasattr(model, "feature_matrix"):
        return model.feature_matrix(policy.features)[:1000]
    init = model.initial_valuation() if hasattr(model, "initial_valuation") else None
    if init is None or not _asked_in(model, init):
        return None
    return np.asarray([[init[f] for f in policy.features]], dtype=np.float64)


def _asked_in(model: Any, valuation: dict[str, int]) -> bool:
    """Whether a policy is asked in the PRISM state ``valuation``: some labelled choice is enabled there, or more
    than one choice (a state whose single choice is unlabelled — a reset step — is taken without asking, and the
    policy need not accept its features). True when it cannot be told (the engines check what they ask)."""
    program = getattr(model, "program", None)
    if program is None or getattr(model, "kind", "") != "prism":
        return True
    try:
        compiled = compile_program(program, str(getattr(model, "path", "model")))
        values = np.asarray([[valuation[v.name] for v in compiled.variables]], dtype=np.int64)
        kinds = compiled.enabled(values).kind
    except Exception:  # not compilable here (e.g. a DTMC): check the state as before
        return True
    labelled = np.asarray([bool(g.action) for g in compiled.groups], dtype=bool)[compiled.group_of(kinds)]
    return bool(labelled.any() or len(kinds) > 1)
