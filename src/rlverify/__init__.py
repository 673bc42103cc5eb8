"""rlverify: how safe is this trained policy, really?

Exact (Storm on the policy-induced Markov chain), sound (interval-MDP abstraction) and
statistical (simulation with the policy as oracle) verification of RL policies.

The exact engine is imported eagerly; the abstraction and statistical engines load on first use
(``rlverify.verify_abstraction``, ``rlverify.verify_statistical``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from rlverify import exact
from rlverify.errors import RlverifyError
from rlverify.exact import ExactOptions
from rlverify.exact.options import Progress
from rlverify.models import Property, SymbolicModel, load_model
from rlverify.policies import Policy, check_policy, load_policy
from rlverify.results import ExactResult, Provenance, Result

__version__ = "0.1.0"

_LAZY = {
    "verify_abstraction": "rlverify.abstraction",
    "AbstractionOptions": "rlverify.abstraction",
    "AbstractionResult": "rlverify.abstraction",
    "verify_statistical": "rlverify.statistical",
    "StatisticalOptions": "rlverify.statistical",
    "StatisticalResult": "rlverify.statistical",
    "benchmarks": "rlverify.benchmarks",
    "Target": "rlverify.resolve",
    "cross_check": "rlverify.crosscheck",
    "Agreement": "rlverify.crosscheck",
    "Property": "rlverify.models",
    "parse_property": "rlverify.models",
}

__all__ = [
    "AbstractionOptions",
    "AbstractionResult",
    "Agreement",
    "ExactOptions",
    "ExactResult",
    "Property",
    "Provenance",
    "Result",
    "RlverifyError",
    "StatisticalOptions",
    "StatisticalResult",
    "Target",
    "benchmarks",
    "check_policy",
    "cross_check",
    "load_model",
    "load_policy",
    "parse_property",
    "verify_abstraction",
    "verify_exact",
    "verify_statistical",
]


def verify_exact(
    model: SymbolicModel | str | Path | Any,
    property: str | Property,
    policy: Policy | str | None = None,
    options: ExactOptions | None = None,
    *,
    constants: str | None = None,
    progress: Progress | None = None,
) -> ExactResult:
    """The exact engine on a model given any way the front door takes it (:func:`rlverify.resolve.resolve`: a
    PRISM/JANI file with ``constants``, a benchmark id or object), or a loaded model; the property as text, a
    benchmark's or JANI file's property name, or parsed. Resolved once, then
    :func:`rlverify.exact.verify_exact` (``options``: :class:`~rlverify.exact.ExactOptions`, None: the defaults).
    """
    from rlverify.models import parse_property
    from rlverify.resolve import resolve

    options = ExactOptions() if options is None else options
    with_policy = options.mode != "monolithic"
    if isinstance(model, SymbolicModel):
        if constants:
            from rlverify.errors import ConstantsError

            raise ConstantsError(f"{model.path}: constants are fixed when a model is loaded; pass them to load_model")
        prop = parse_property(model, property, fixed_policy=with_policy)  # a parsed one as it is
        if isinstance(policy, str):
            policy = load_policy(policy)
        return exact.verify_exact(model, prop, policy, options, progress=progress)
    target = resolve(
        model,
        constants=constants,
        policy=policy,
        property=property,
        needs_policy=with_policy,
        kinds=("prism",),
        command="verify_exact",
    )
    assert target.property is not None
    result = exact.verify_exact(target.model, target.property, target.policy, options, progress=progress)
    return target.stamp(result, unavailable=options.unavailable)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rlverify' has no attribute '{name}'")
    mod = importlib.import_module(module)
    return mod if name == "benchmarks" else getattr(mod, name)
