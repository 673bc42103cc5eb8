"""Validate a policy against a model before any work, reporting every problem at once."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlverify.errors import PolicyError
from rlverify.models.dynamics import fit
from rlverify.policies.base import Policy, numeric_output, validate_probabilities


def check_policy(policy: Policy, model: Any, *, sample: np.ndarray | None = None) -> None:
    """Check names, shapes and distributions of ``policy`` against ``model``.

    ``model`` needs ``variables`` and ``action_names`` (a :class:`~rlverify.models.SymbolicModel`,
    whose command names a policy may also use, or an :class:`~rlverify.models.ExplicitModel`). The policy's output is checked on ``sample`` (an
    ``(N, d)`` feature batch) or, if None, on the model's initial state (explicit models: up to
    1,000 states) when it is known.

    Raises:
        PolicyError: listing every problem found.
    """
    problems: list[str] = []
    for attr in ("features", "actions", "action_probabilities"):
        if not hasattr(policy, attr):
            raise PolicyError(f"{policy!r} is not a policy: it has no '{attr}' (see rlverify.policies.Policy)")
    problems += fit(policy.features, policy.actions, variables=model.variables, model_actions=model.action_names,
                    commands=getattr(model, "commands", ())).problems()
    batch = None
    if not problems:
        batch = _default_sample(policy, model) if sample is None else np.asarray(sample, dtype=np.float64)
    if batch is not None:
        try:
            probs = numeric_output(policy.action_probabilities(batch), getattr(policy, "name", "policy"))
            validate_probabilities(probs, len(batch), len(policy.actions), source=getattr(policy, "name", "policy"))
        except PolicyError as exc:
            problems.append(str(exc))
    if problems:
        name = getattr(policy, "name", type(policy).__name__)
        raise PolicyError(f"policy {name} does not fit model {getattr(model, 'path', '')}", problems)


def _default_sample(policy: Policy, model: Any) -> np.ndarray | None:
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
        from rlverify.models.program import CompiledProgram

        compiled = CompiledProgram(program, str(getattr(model, "path", "model")))
        values = np.asarray([[valuation[v.name] for v in compiled.variables]], dtype=np.int64)
        enabled = compiled.enabled(compiled.env(values), 1)[0]
    except Exception:  # noqa: BLE001 - not compilable here (e.g. a DTMC): check the state as before
        return True
    labelled = np.asarray([bool(c.action) for c in compiled.choices], dtype=bool)
    return bool((enabled & labelled).any() or enabled.sum() > 1)
