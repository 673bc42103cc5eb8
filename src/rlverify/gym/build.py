"""Build simulation arrays from a PRISM/JANI file or a registered benchmark (through Storm)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.benchmarks.registry import BenchmarkSpec, EnvDefaults, all_ids, make, spec
from rlverify.gym.dynamics import EnvError, MDPDynamics, dynamics_from_explicit, label_key
from rlverify.models.commands import is_command_name
from rlverify.models.properties import Property
from rlverify.models.property_parser import parse_property
from rlverify.models.storm_build import build_explicit
from rlverify.models.symbolic import SymbolicModel, load_model


def load_dynamics(
    model: SymbolicModel | str | Path,
    *,
    constants: str | Mapping[str, Any] | None = None,
    terminal: str | None = None,
    reward: str | None = None,
    features: Sequence[str] | None = None,
    actions: Sequence[str] | None = None,
    unavailable: str = "stall",
    max_states: int | None = 10_000_000,
    dtype: type = np.float32,
) -> MDPDynamics:
    """Build ``model`` with Storm and return its simulation arrays.

    With ``terminal`` the build is property-directed for ``F terminal`` (as the verifier builds
    for such a property): terminal states are not explored beyond, episodes end there.

    Args:
        model: a loaded model, or a PRISM/JANI path (with ``constants``).
        terminal: a label (``'"goal"'`` or a bare label name) or an expression over variables.
        reward, actions, unavailable, dtype: see :func:`~rlverify.gym.dynamics.dynamics_from_explicit`.
        features: observation variables in order; default: the built model's variables (JANI: the
            policy features ``SymbolicModel.variables``, each automaton's location ``_loc_AUTOMATON``
            included, the transient label variables Storm also records left out).
        max_states: refuse bigger models.

    Raises:
        EnvError: the terminal condition is neither a label nor a single expression.
        ModelError, PropertyError, ConstantsError, ModelTooLargeError: as for verification.
    """
    symbolic = model if isinstance(model, SymbolicModel) else load_model(model, constants)
    if features is None and _is_jani(symbolic):  # its policy features: locations in, transient labels out
        features = symbolic.variables
    named = _command_names(actions)
    if terminal is None:
        mdp, _ = build_explicit(symbolic, None, max_states=max_states, command_names=named)
        return dynamics_from_explicit(
            mdp, features=features, actions=actions, reward=reward, unavailable=unavailable, declared=symbolic, dtype=dtype
        )
    text = terminal.strip()
    is_label = _is_label(symbolic, text)
    condition = f'"{text.strip(chr(34))}"' if is_label else f"({text})"
    prop = parse_property(symbolic, f"P=? [F {condition}]")
    mdp, _ = build_explicit(symbolic, [prop], max_states=max_states, command_names=named)
    mask = mdp.labels[label_key(mdp, text if is_label else _expression_label(terminal, prop))]
    dyn = dynamics_from_explicit(
        mdp,
        features=features,
        actions=actions,
        reward=reward,
        terminal=mask,
        declared=symbolic,
        unavailable=unavailable,
        dtype=dtype,
    )
    return replace(dyn, terminal_description=text)


def _command_names(actions: Sequence[str] | None) -> bool | None:
    """``build_explicit``'s ``command_names``: True where some action is a command name (None: the default)."""
    return True if actions is not None and any(is_command_name(a) for a in actions) else None


def _is_label(symbolic: SymbolicModel, text: str) -> bool:
    """Whether a terminal condition names a label (quoted, or a label's bare name that is no variable)."""
    return re.fullmatch(r'"[^"]*"', text) is not None or (text in symbolic.labels and text not in symbolic.variables)


def _is_jani(symbolic: SymbolicModel) -> bool:
    """Whether the model was read from a JANI file (``load_model`` reads a ``.jani`` file as JANI, any other as
    PRISM)."""
    return symbolic.path.suffix.lower() == ".jani"


def _expression_label(terminal: str, prop: Property) -> str:
    """The text of the terminal expression of ``P=? [F (terminal)]``, which names its label in the build."""
    state_formula = prop.storm_formula().subformula.subformula
    if not hasattr(state_formula, "get_expression"):
        raise EnvError(
            f"terminal '{terminal}': expected one label or one expression over variables, not a "
            "combination of labels; define a label for it in the model"
        )
    return str(state_formula)


def reward_spec(reward: str | None, reward_label: str | None = None) -> tuple[str | None, dict[str, float] | None]:
    """Split a reward spec into a reward model name and label rewards.

    ``reward`` is a reward model name (``"r"``), or label rewards ``"label:goal=1,hole=-1"`` (a reward
    earned on *entering* a state with the label; a bare ``label:goal`` means 1); ``reward_label="goal"``
    is short for ``"label:goal=1"``. Returns ``(reward_model or None, {label: value} or None)``.

    Raises:
        EnvError: a malformed spec, or both a label spec and ``reward_label``.
    """
    labels: dict[str, float] = {}
    if reward is not None and reward.strip().startswith("label:"):
        for part in reward.strip().removeprefix("label:").split(","):
            name, eq, value = part.strip().removeprefix("label:").partition("=")
            name = name.strip().strip('"')
            if not name:
                raise EnvError(f"reward {reward!r}: expected label:NAME=VALUE[,NAME=VALUE...]")
            try:
                labels[name] = float(value) if eq else 1.0
            except ValueError:
                raise EnvError(f"reward {reward!r}: the reward of label {name!r} must be a number, got {value!r}") from None
        reward = None
    if reward_label is not None:
        if labels:
            raise EnvError("give label rewards once: reward='label:...' or reward_label=..., not both")
        labels[reward_label.strip().strip('"')] = 1.0
    return reward, labels or None


def benchmark_dynamics(
    benchmark_id: str, params: Mapping[str, Any] | None = None, **overrides: Any
) -> tuple[MDPDynamics, EnvDefaults]:
    """Simulation arrays of a registered PRISM benchmark with its training defaults (overridable)."""
    s = spec(benchmark_id)
    if not _played(s):
        raise EnvError(f"{benchmark_id} is a '{s.kind}' benchmark; the Gymnasium bridge plays PRISM/JANI MDPs")
    bench = make(benchmark_id, **dict(params or {}))
    defaults = bench.env or EnvDefaults(reward=None, terminal=None)
    kwargs: dict[str, Any] = {"reward": defaults.reward, "terminal": defaults.terminal}
    kwargs.update({k: v for k, v in overrides.items() if k != "max_episode_steps"})
    dyn = load_dynamics(bench.load_model(), **kwargs)
    steps = overrides.get("max_episode_steps", defaults.max_episode_steps)
    return dyn, EnvDefaults(reward=dyn.reward_model, terminal=kwargs["terminal"], max_episode_steps=steps)


def benchmark_envs() -> dict[str, EnvDefaults]:
    """How each registered PRISM benchmark is played (its registry entry's ``env``)."""
    specs = [spec(i) for i in all_ids()]
    return {s.id: s.env for s in specs if _played(s) and s.env is not None}


#: the registry's kinds of benchmark the bridge plays: PRISM (and JANI) MDPs
_PLAYED_KINDS = frozenset({"prism"})


def _played(s: BenchmarkSpec) -> bool:
    """Whether the Gymnasium bridge plays benchmark ``s`` (a PRISM one; not a native or continuous one)."""
    return s.kind in _PLAYED_KINDS
