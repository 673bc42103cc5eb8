"""Importance functions of importance splitting: an expression over the features, the graph distance to the target
(explicit models) or a callable, as the level of run states."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rlverify.errors import OptionError
from rlverify.models.environment import VectorEnv
from rlverify.models.expressions import compile_expression
from rlverify.statistical.envs import ExplicitEnv
from rlverify.statistical.properties import PathProperty

__all__ = ["Importance", "Level", "compile_importance", "graph_distance_importance", "importance_of"]

#: ``imp(observations (N, len(features)) float64) -> (N,) float64``; higher means closer to the target
Importance = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Level:
    """The importance of run states, as splitting measures levels.

    Attributes:
        of: run states ``(N, ...)`` -> ``(N,)`` float64 (finite or ``-inf``).
        text: how it was given (for messages and results).
        highest: the largest finite importance of any state, where every state is known (explicit models); None
            otherwise.
    """

    of: Callable[[np.ndarray], np.ndarray]
    text: str
    highest: float | None = None


def compile_importance(text: str, features: Sequence[str]) -> Importance:
    """A numeric expression over ``features`` as ``f(observations (N, len(features)) float64) -> (N,) float64``
    (the one expression language, :func:`rlverify.models.expressions.compile_expression`; true counts 1).

    Raises:
        OptionError: a syntax error, an unknown variable (naming the known ones), another construct.
    """
    return compile_expression(text, features, option="--importance", kind="number")


def graph_distance_importance(env: ExplicitEnv, prop: PathProperty) -> np.ndarray:
    """``(S,)`` float64: minus the least number of steps from each state to a ``right`` state through ``left``
    states (over every choice of the explicit MDP, whatever the policy); ``-inf`` where none is reachable."""
    return -env.steps_to(prop.left, prop.right)


def importance_of(env: VectorEnv, prop: PathProperty, spec: str | Importance) -> Level:
    """The importance ``spec`` (``"auto"``, an expression over the features of ``env``, or a callable) of the run
    states of ``env``.

    Raises:
        OptionError: ``auto`` on an environment that is not an explicit model, an empty or bad expression, values that
            are not one finite (or ``-inf``) number per state.
    """
    features = tuple(env.features)
    if isinstance(spec, str) and spec.strip() == "auto":
        if not isinstance(env, ExplicitEnv):
            raise OptionError(
                f"--importance auto needs an explicit model (a PRISM/JANI file or benchmark); "
                f"{env.name} is simulated natively: give an expression over its features "
                f"({', '.join(features)})"
            )
        return _table(graph_distance_importance(env, prop), "auto: minus the graph distance (steps) to the target")
    f, text = _function(spec, features)
    if isinstance(env, ExplicitEnv):  # the importance of every state, once
        return _table(_checked(f(env.observe(np.arange(env.model.num_states))), env.model.num_states, text), text)
    return Level(lambda states: _checked(f(env.observe(states)), len(states), text), text)


def _function(spec: str | Importance, features: tuple[str, ...]) -> tuple[Importance, str]:
    """An expression compiled over ``features``, or the callable as it is; with its text."""
    if not isinstance(spec, str):
        return spec, getattr(spec, "__name__", "callable")
    if not spec.strip():
        raise OptionError(
            f"--importance: empty expression; give an expression over the variables ({', '.join(features)}) or 'auto'"
        )
    return compile_importance(spec, features), spec


def _table(table: np.ndarray, text: str) -> Level:
    """The importance of explicit states ``(S,)``, looked up by state index, with its largest finite value."""
    finite = table[np.isfinite(table)]
    return Level(table.__getitem__, text, float(finite.max()) if len(finite) else None)


def _checked(values: object, n: int, text: str) -> np.ndarray:
    """``values`` as ``(n,)`` float64, refused when of another shape, NaN or ``+inf`` somewhere."""
    out = np.asarray(values, dtype=np.float64)
    if out.shape != (n,):
        raise OptionError(f"--importance {text!r}: expected one value per state, got shape {out.shape}")
    if np.isnan(out).any():
        raise OptionError(f"--importance {text!r}: is NaN in some states (e.g. 0/0)")
    if np.isposinf(out).any():  # +inf is the target's level value: a state outside the target must not have it
        raise OptionError(
            f"--importance {text!r}: is +inf in some states (an overflow?); give finite values "
            "(the target's own level is above every value)"
        )
    return out.copy()
