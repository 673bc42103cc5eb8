"""What the statistical engine simulates: each kind of resolved model as an environment with its path property, one
registration per kind (:func:`simulated`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

from rlverify.errors import PolicyError, PropertyError
from rlverify.models.commands import check_names, is_command_name
from rlverify.models.continuous.base import ContinuousSystem
from rlverify.models.continuous.env import ContinuousEnv, unsafe_property
from rlverify.models.explicit import ExplicitModel
from rlverify.models.gym_simulator import GymSimulator
from rlverify.models.properties import Property, parse_structure
from rlverify.models.property_parser import parse_property
from rlverify.models.storm_build import build_explicit
from rlverify.models.symbolic import SymbolicModel
from rlverify.statistical.envs import ExplicitEnv, VectorEnv, hopeless_states
from rlverify.statistical.episodes import columns_note
from rlverify.statistical.properties import PathProperty, decidable, parse_path_property, property_from_storm

__all__ = ["SimulatedModel", "check_one_start", "prepare", "simulated", "with_graph_analysis", "with_start_note"]

#: what the statistical engine simulates: a resolved model (:func:`rlverify.resolve.resolve` turns files and benchmark
#: ids into one)
SimulatedModel: TypeAlias = SymbolicModel | ExplicitModel | ContinuousSystem | VectorEnv


def prepare(
    model: SimulatedModel,
    prop: str | Property | PathProperty,
    *,
    actions: Sequence[str] = (),
    max_states: int | None = 2_000_000,
) -> tuple[VectorEnv, PathProperty, str]:
    """The environment, the path property and the model's name for a resolved ``model`` (see
    :func:`rlverify.resolve.resolve`), by the kind of model (:func:`simulated`).

    ``model`` is a :class:`~rlverify.models.SymbolicModel` (built property-directed by Storm; any propositional
    state formulas), an :class:`~rlverify.models.ExplicitModel` (label-based properties), a
    :class:`~rlverify.models.continuous.ContinuousSystem` (runs start uniformly in its initial region; one label,
    ``unsafe``: :class:`~rlverify.models.continuous.ContinuousEnv`) or a vectorised environment
    (:class:`~rlverify.statistical.envs.VectorEnv`, e.g. :class:`~rlverify.models.racetrack.RacetrackEnv`).
    ``prop`` is a parsed :class:`~rlverify.models.Property` (or its text, parsed for ``model``), or, for an
    environment, a :class:`PathProperty` over it. Actions of a PRISM/JANI model are its declared action labels,
    also those the property-directed build never offers (the policy may name them; they are unavailable where they
    are not offered), plus the command names (``m:2``) among ``actions`` (the policy's), for which the model is
    built with its commands named.

    Raises:
        PropertyError: a property the simulator cannot decide, or a model of another kind.
    """
    return simulated(model, prop, actions=actions, max_states=max_states)


@functools.singledispatch
def simulated(
    model: object, prop: str | Property | PathProperty, *, actions: Sequence[str], max_states: int | None
) -> tuple[VectorEnv, PathProperty, str]:
    """How each kind of model is simulated: its environment, the path property over it and its name (see
    :func:`prepare`). A new kind of model is one more ``@simulated.register``; anything else is refused.

    Raises:
        PropertyError: a model of no registered kind.
    """
    raise PropertyError(
        f"cannot simulate {type(model).__name__}: expected a SymbolicModel, an ExplicitModel, a "
        "ContinuousSystem or a vectorised environment (resolve a file or benchmark id first: "
        "rlverify.resolve.resolve)"
    )


@simulated.register
def _explicit(
    model: ExplicitModel, prop: str | Property | PathProperty, *, actions: Sequence[str], max_states: int | None
) -> tuple[VectorEnv, PathProperty, str]:
    """An explicit MDP: its labels, with graph analysis of the hopeless states."""
    env = ExplicitEnv(model)
    return env, with_graph_analysis(env, _path_property(env, prop)), env.name


@simulated.register
def _system(
    model: ContinuousSystem, prop: str | Property | PathProperty, *, actions: Sequence[str], max_states: int | None
) -> tuple[VectorEnv, PathProperty, str]:
    """A continuous system: runs start uniformly in its initial region (:class:`ContinuousEnv`)."""
    return _continuous(ContinuousEnv(model), prop)


@simulated.register
def _environment(
    model: VectorEnv, prop: str | Property | PathProperty, *, actions: Sequence[str], max_states: int | None
) -> tuple[VectorEnv, PathProperty, str]:
    """A vectorised environment, as it is."""
    return model, _path_property(model, prop), model.name


@simulated.register
def _gymnasium(
    model: GymSimulator, prop: str | Property | PathProperty, *, actions: Sequence[str], max_states: int | None
) -> tuple[VectorEnv, PathProperty, str]:
    """A Gymnasium environment without a transition table: simulated episode by episode (:mod:`.episodes`)."""
    path = _path_property(model, prop)
    return model, dataclasses.replace(path, notes=(*path.notes, columns_note(model))), model.name


def _path_property(env: VectorEnv, prop: str | Property | PathProperty) -> PathProperty:
    """``prop`` over the labels of ``env``."""
    return prop if isinstance(prop, PathProperty) else parse_path_property(prop, tuple(env.labels))


@simulated.register
def _symbolic(
    model: SymbolicModel, prop: str | Property | PathProperty, *, actions: Sequence[str], max_states: int | None
) -> tuple[VectorEnv, PathProperty, str]:
    """A PRISM/JANI model built property-directed by Storm, as an explicit environment."""
    if isinstance(prop, PathProperty):
        raise PropertyError(
            f"property '{prop.text}': a PathProperty is over one environment's states; give the "
            f"property of {model.shown} (text or Property) to simulate it"
        )
    parsed = parse_property(model, prop, fixed_policy=True)  # a named JANI Pmax: P=? (its notes say so)
    decidable(parsed)
    commands = tuple(a for a in actions if is_command_name(a))
    problems = check_names(commands, model.commands)
    if problems:
        raise PolicyError(f"the policy's actions do not fit model {model.shown}", [m for _, m in problems])
    mdp, storm_model = build_explicit(model, [parsed], command_names=True if commands else None, max_states=max_states)
    env = ExplicitEnv(mdp, name=model.shown, actions=tuple(sorted(a for a in model.action_names if a)) + commands)
    return env, with_graph_analysis(env, property_from_storm(model, storm_model, parsed)), model.shown


def _continuous(env: ContinuousEnv, prop: str | Property | PathProperty) -> tuple[ContinuousEnv, PathProperty, str]:
    """A continuous system's environment and property (``Pmax``/``Pmin``, over the start states, refused)."""
    if isinstance(prop, PathProperty):
        return env, prop, env.name
    parsed = prop if isinstance(prop, Property) else parse_structure(prop)
    if parsed.optimality is not None:
        raise PropertyError(
            f"property '{parsed.text}': on a continuous system P{parsed.optimality} is the "
            f"{'largest' if parsed.optimality == 'max' else 'smallest'} probability over the start "
            "states of the initial region (rlverify abstract bounds the largest); the simulator "
            f"estimates P=? [...] from a uniformly random start state (e.g. "
            f"{unsafe_property(env.system).text})"
        )
    return env, parse_path_property(parsed, env.labels), env.name


def with_start_note(env: VectorEnv, prop: PathProperty, starts: np.ndarray | None) -> PathProperty:
    """``prop`` with a note saying where the runs start when they start anywhere in a continuous initial region
    (``starts`` None and an env with an ``initial_box``): the estimate is then an average over the region."""
    if starts is not None or not isinstance(env, ContinuousEnv):
        return prop
    note = (
        f"{env.name}: the runs start uniformly at random in the initial region '{env.region}' "
        f"({env.describe_start()}): the estimate is the probability from a random start state there, not the "
        "largest over the region (which rlverify abstract bounds)"
    )
    return dataclasses.replace(prop, notes=(*prop.notes, note))


def with_graph_analysis(env: ExplicitEnv, prop: PathProperty) -> PathProperty:
    """``prop`` with its :attr:`~PathProperty.hopeless` states on the explicit model of ``env`` (runs reaching them are
    decided false at once instead of wandering until ``max_steps``)."""
    return dataclasses.replace(prop, hopeless=hopeless_states(env, prop.left, prop.right))


def check_one_start(env: VectorEnv, name: str, starts: np.ndarray | None) -> None:
    """Refuse an explicit model with several initial states and no ``starts`` (the simulator does not pick)."""
    if isinstance(env, ExplicitEnv) and starts is None and len(env.initial_states()) != 1:
        raise PropertyError(
            f"{name}: the model has {len(env.initial_states())} initial states; "
            "pass starts= to choose (the simulator does not pick among them)"
        )
