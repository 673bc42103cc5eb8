"""The network the abstraction engine bounds: from a policy, a policy file or an MLP, checked against the system.

The engine bounds ``softmax(mlp(O x + o))`` over polytopes of states ``x``, where ``O x + o`` is the
system's observation map (:func:`~rlverify.abstraction.network_bounds.fold_observation`). So the
policy must take exactly the system's ``features`` and choose among exactly its ``actions``, in
their order, and its network must be a ReLU MLP whose outputs are logits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlverify.errors import PolicyError, did_you_mean
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.policies.base import Policy
from rlverify.policies.loading import load_network_policy
from rlverify.policies.mlp import MLP

#: States sampled (initial region, then the state domain) to cross-check a network against its runtime.
CHECK_STATES = 256


def policy_network(system: ContinuousSystem, policy: Policy | str | Path | MLP, *, seed: int = 0) -> tuple[MLP, str]:
    """The policy's ReLU logit network over ``system.features``, checked, and the policy's name.

    Args:
        system: the dynamics; it declares ``features`` (the policy's inputs ``O x + o``) and ``actions``.
        policy: a loaded policy that wraps a network (``OnnxPolicy``, ``TorchPolicy``, ``SB3Policy``: see
            ``BasePolicy.network``), a policy file (loaded by
            :func:`~rlverify.policies.loading.load_network_policy`), or an :class:`MLP` taken as given
            (from ``system.features`` to logits over ``system.actions``; it has no names to check).
        seed: seed of the states sampled to cross-check the weights read against the policy's runtime.

    Returns:
        ``(mlp, name)``: ``mlp`` maps ``(N, len(system.features))`` features to ``(N, len(system.actions))``
        logits in the system's action order; the policy verified is their softmax.

    Raises:
        PolicyError: the policy cannot be bounded (the reason: a callable, a table, a non-ReLU layer,
            outputs that are not logits) or does not fit the system (every mismatch listed at once).
    """
    if isinstance(policy, MLP):
        problems = []
        if policy.sizes[0] != len(system.features):
            problems.append(f"network takes {policy.sizes[0]} inputs but {system.name} has features {list(system.features)}")
        if policy.sizes[-1] != len(system.actions):
            problems.append(f"network has {policy.sizes[-1]} outputs but {system.name} has actions {list(system.actions)}")
        if problems:
            raise PolicyError(f"MLP {policy.sizes}: does not fit {system.name}", problems)
        return policy, "MLP"
    if isinstance(policy, (str, Path)):
        policy = load_network_policy(str(policy))
    if not all(hasattr(policy, attr) for attr in ("features", "actions", "action_probabilities")):  # a name: not needed
        raise PolicyError(f"{policy!r} is not a policy: give a policy file, a loaded policy (rlverify.load_policy) or an MLP")
    name = str(getattr(policy, "name", type(policy).__name__))
    names = fit_problems(system, tuple(policy.features), tuple(policy.actions))
    engine: list[str] = []  # why the policy cannot be bounded, whatever the system
    mlp = None
    reason = getattr(policy, "no_network", None)
    network = getattr(policy, "network", None) if reason is None else None
    has_network = callable(network)
    if not callable(network):
        engine.append(f"{name}: {reason or 'this policy exposes no network (method network() -> MLP)'}")
    else:
        sample = None
        if len(policy.features) == len(system.features):
            rng = np.random.default_rng(seed)
            lo, hi = np.asarray(system.domain_lo, dtype=np.float64), np.asarray(system.domain_hi, dtype=np.float64)
            states = np.vstack(
                [system.sample_initial(CHECK_STATES, rng), lo + rng.random((CHECK_STATES, len(lo))) * (hi - lo)]
            )
            sample = system.observe(states)
        try:
            mlp = network(sample)
        except PolicyError as exc:
            engine.append(str(exc))
    kind = getattr(policy, "output", None)
    if has_network and kind != "logits":
        why = {
            None: "does not say what its network outputs (attribute output)",
            "q-values": "outputs Q-values (the policy is their argmax)",
            "probabilities": "outputs probabilities",
        }.get(kind, f"outputs {kind!r}")
        engine.append(
            f"{name}: {why}; the abstraction engine bounds a softmax over logits: give a network that outputs logits"
        )
    if names:
        raise PolicyError(f"{name}: the policy was made for another system", names + engine)
    if len(engine) == 1:
        raise PolicyError(engine[0])
    if engine:
        raise PolicyError(f"{name}: cannot be bounded", engine)
    assert mlp is not None
    return mlp, name


def fit_problems(system: ContinuousSystem, features: tuple[str, ...], actions: tuple[str, ...]) -> list[str]:
    """Every way the declared ``features``/``actions`` differ from the system's (same names, same order)."""
    problems = []
    if features != tuple(system.features):
        problems.append(
            _differ(
                "features",
                features,
                tuple(system.features),
                system.name,
                f"the policy takes {len(features)} features but {system.name} gives {len(system.features)}",
            )
        )
    if actions != tuple(system.actions):
        problems.append(
            _differ(
                "actions",
                actions,
                tuple(system.actions),
                system.name,
                f"network has {len(actions)} outputs but the benchmark has {len(system.actions)} actions",
            )
        )
    return problems


def _differ(kind: str, ours: tuple[str, ...], theirs: tuple[str, ...], system: str, count_message: str) -> str:
    text = f"{kind} {list(ours)} != {system}'s {list(theirs)}"
    if len(ours) != len(theirs):
        return f"{count_message}: {text}"
    if sorted(ours) == sorted(theirs):
        return f"{text} (the same names in another order)"
    unknown = [f"'{n}'{did_you_mean(n, theirs)}" for n in ours if n not in theirs]
    return f"{text} (not {system}'s: {', '.join(unknown)})"
