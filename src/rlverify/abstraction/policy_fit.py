"""The network the abstraction engine bounds: from a policy, a policy file or an MLP, checked against the system.

The engine bounds ``softmax(mlp(O x + o))`` over polytopes of states ``x``, where ``O x + o`` is the
system's observation map (:func:`~rlverify.abstraction.network_bounds.fold_observation`). So the
policy must take exactly the system's ``features`` and choose among exactly its ``actions``, in
their order, and its network must be a ReLU MLP whose outputs are logits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlverify.choices import OutputKind
from rlverify.errors import PolicyError
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.policies.base import Policy
from rlverify.policies.check import fit_problems
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
        return _given_mlp(system, policy), "MLP"
    if isinstance(policy, (str, Path)):
        policy = load_network_policy(str(policy))
    if not all(hasattr(policy, attr) for attr in ("features", "actions", "action_probabilities")):  # a name: not needed
        raise PolicyError(f"{policy!r} is not a policy: give a policy file, a loaded policy (rlverify.load_policy) or an MLP")
    name = str(getattr(policy, "name", type(policy).__name__))
    names = fit_problems(
        policy.features,
        policy.actions,
        variables=system.features,
        model_actions=system.actions,
        ordered=True,
        system=system.name,
    )
    mlp, engine = _bounded_network(system, policy, name, seed)
    if names:
        raise PolicyError(f"{name}: the policy was made for another system", names + engine)
    if len(engine) == 1:
        raise PolicyError(engine[0])
    if engine:
        raise PolicyError(f"{name}: cannot be bounded", engine)
    assert mlp is not None
    return mlp, name


def _given_mlp(system: ContinuousSystem, mlp: MLP) -> MLP:
    """An :class:`MLP` given as the policy, if its sizes fit the system's features and actions."""
    problems = []
    if mlp.sizes[0] != len(system.features):
        problems.append(f"network takes {mlp.sizes[0]} inputs but {system.name} has features {list(system.features)}")
    if mlp.sizes[-1] != len(system.actions):
        problems.append(f"network has {mlp.sizes[-1]} outputs but {system.name} has actions {list(system.actions)}")
    if problems:
        raise PolicyError(f"MLP {mlp.sizes}: does not fit {system.name}", problems)
    return mlp


def _bounded_network(system: ContinuousSystem, policy: Policy, name: str, seed: int) -> tuple[MLP | None, list[str]]:
    """The policy's network, cross-checked on states of ``system``, and why it cannot be bounded (whatever the
    system: no network, a network that is not a ReLU MLP, outputs that are not logits)."""
    engine: list[str] = []
    reason = getattr(policy, "no_network", None)
    network = getattr(policy, "network", None) if reason is None else None
    if not callable(network):
        return None, [f"{name}: {reason or 'this policy exposes no network (method network() -> MLP)'}"]
    mlp = None
    try:
        mlp = network(_check_sample(system, policy, seed))
    except PolicyError as exc:
        engine.append(str(exc))
    output = getattr(policy, "output", None)
    if output != OutputKind.LOGITS:
        why = _NOT_LOGITS.get(output, f"outputs {output!r}")
        engine.append(
            f"{name}: {why}; the abstraction engine bounds a softmax over logits: give a network that outputs logits"
        )
    return mlp, engine


#: Why a network whose outputs are not logits cannot be bounded, by its ``output``.
_NOT_LOGITS: dict[str | None, str] = {
    None: "does not say what its network outputs (attribute output)",
    OutputKind.Q_VALUES: "outputs Q-values (the policy is their argmax)",
    OutputKind.PROBABILITIES: "outputs probabilities",
}


def _check_sample(system: ContinuousSystem, policy: Policy, seed: int) -> np.ndarray | None:
    """Observations of states sampled from the initial region and the domain (None when the policy's features do
    not fit the system: then the network is read without a cross-check)."""
    if len(policy.features) != len(system.features):
        return None
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(system.domain_lo, dtype=np.float64), np.asarray(system.domain_hi, dtype=np.float64)
    states = np.vstack([system.sample_initial(CHECK_STATES, rng), lo + rng.random((CHECK_STATES, len(lo))) * (hi - lo)])
    return system.observe(states)
