"""Making a registered Gymnasium environment: ``gym:MODULE:ID`` imports, and the keyword arguments checked against the
environment's constructor first."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlverify.errors import ModelError, OptionError, did_you_mean
from rlverify.models.gymnasium_table import GymEnv
from rlverify.models.userfile import note_user_code


def make_env(env_id: str, kwargs: dict[str, Any], trust_code: bool = False) -> GymEnv:
    """``gymnasium.make(env_id, **kwargs)`` for an id in Gymnasium's registry (``MODULE:ID`` imports MODULE first, only
    with ``trust_code``), its arguments checked against the constructor first."""
    import gymnasium  # lazy: gymnasium, start-up

    given = env_id
    module, sep, env_id = env_id.rpartition(":")
    if sep:
        _import_user_module(given, module, env_id, trust_code)
    if env_id not in gymnasium.registry:
        known = [k for k in gymnasium.registry if "/" not in k]
        raise ModelError(
            f"gym:{given}: no environment '{env_id}' in Gymnasium's registry"
            f"{did_you_mean(env_id, known)}"
            + ("" if sep else " (an environment registered by your own module: gym:MODULE:ID with --trust-code)")
        )
    check_env_kwargs(env_id, kwargs)
    return _construct(env_id, kwargs)


def _import_user_module(given: str, module: str, env_id: str, trust_code: bool) -> None:
    """Import the module of a ``gym:MODULE:ID`` target (it registers ID), only with ``trust_code``."""
    if not trust_code:
        raise ModelError(
            f"gym:{given}: gym:MODULE:ID imports the Python module '{module}' (runs its code) to register "
            f"'{env_id}'; pass --trust-code to allow that (without it gym: targets are made only from "
            "ids already in Gymnasium's registry)"
        )
    note_user_code()
    here = os.getcwd()
    added = here not in sys.path  # a module beside the user is found, as ``python -m`` finds it
    if added:
        sys.path.insert(0, here)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # what it prints must not mix into --json output
            importlib.import_module(module)
    except SystemExit as exc:
        raise ModelError(f"gym:{given}: importing module '{module}' called sys.exit({exc.code!r})") from None
    except Exception as exc:  # the user's module: its failure is bad input
        raise ModelError(
            f"gym:{given}: cannot import module '{module}' ({exc.__class__.__name__}: "
            f"{str(exc).splitlines()[0][:200] if str(exc) else ''})"
        ) from None
    finally:
        if added:
            sys.path.remove(here)


#: the extras of rlverify that install an environment family's engine, by a word of gymnasium's message
_EXTRAS = {"box2d": "box2d", "mujoco": "mujoco"}


def _construct(env_id: str, kwargs: dict[str, Any]) -> GymEnv:
    """``gymnasium.make(env_id, **kwargs)``, its refusals as rlverify's errors."""
    import gymnasium  # lazy: gymnasium, start-up

    try:
        with warnings.catch_warnings():  # gymnasium's own deprecation notes (coloured); its errors say it plainly
            warnings.simplefilter("ignore", DeprecationWarning)
            return gymnasium.make(env_id, **kwargs)
    except TypeError as exc:
        raise OptionError(
            f"--env-kwargs {kwargs}: gym:{env_id} does not accept them: {str(exc).split(' was raised')[0]}"
        ) from None
    except gymnasium.error.DependencyNotInstalled as exc:  # Box2D, MuJoCo: an extra of rlverify's
        extra = next((e for key, e in _EXTRAS.items() if key in str(exc).lower()), None)
        how = f"pip install 'rlverify[{extra}]'" if extra else str(exc)
        raise ModelError(f"gym:{env_id} needs a package that is not installed: {how}") from None
    except gymnasium.error.Error as exc:
        known = [k for k in gymnasium.registry if "/" not in k]
        close = did_you_mean(env_id, known) if "Did you mean" not in str(exc) else ""
        raise ModelError(f"gym:{env_id}: {exc}{close}") from None
    except ImportError as exc:
        raise ModelError(f"gym:{env_id}: needs a Python package that is not installed ({exc})") from None
    except (ValueError, KeyError, IndexError, AssertionError, AttributeError) as exc:  # the env's own checks (a bad map)
        raise OptionError(f"--env-kwargs {kwargs}: gym:{env_id} refused them: {exc.__class__.__name__}: {exc}") from None


def check_env_kwargs(env_id: str, kwargs: Mapping[str, Any], *, option: str = "--env-kwargs") -> None:
    """Check ``kwargs`` against the constructor of the registered environment ``env_id``, before making it.

    Refused (an :class:`OptionError` listing every problem): a name the constructor does not take; a value
    of another type than the parameter's default or annotation says (``is_slippery=no``: a bool parameter
    given a string, which Python would read as true; text for a number); NaN or infinity anywhere.
    Parameters without a typed default or annotation are checked only for NaN/infinity.
    """
    import gymnasium  # lazy: gymnasium, start-up

    problems = [f"{k}: {v!r} is not a finite number" for k, v in kwargs.items() if not _finite_value(v)]
    spec = gymnasium.spec(env_id)
    params = _constructor_parameters(spec)
    if params is not None:
        problems += _parameter_problems(env_id, params, spec.kwargs, kwargs)
    if problems:
        raise OptionError(f"{option}: " + "; ".join(problems))


def _constructor_parameters(spec: Any) -> Mapping[str, inspect.Parameter] | None:
    """The parameters of a registered environment's constructor (None: it has no signature to check against)."""
    from gymnasium.envs.registration import load_env_creator  # lazy: gymnasium, start-up

    try:
        creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
        return inspect.signature(creator).parameters if creator is not None else None
    except Exception:  # no signature to check against: gymnasium.make reports what it refuses
        return None


def _parameter_problems(
    env_id: str, params: Mapping[str, inspect.Parameter], registered: Mapping[str, Any], kwargs: Mapping[str, Any]
) -> list[str]:
    """What is wrong with ``kwargs`` for a constructor with ``params``: unknown names, values of another type."""
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = [n for n, p in params.items() if p.kind in keyword]
    problems = []
    for key, value in kwargs.items():
        if key not in params or key not in named:
            problem = None if var_kw else _unknown_argument(env_id, key, named)
        else:
            problem = _type_problem(key, value, _expected_type(params[key], registered.get(key)))
        if problem is not None:
            problems.append(problem)
    return problems


def _unknown_argument(env_id: str, key: str, named: list[str]) -> str:
    return (
        f"gym:{env_id} takes no argument '{key}'{did_you_mean(key, named)} "
        f"(it takes {', '.join(n for n in named if n != 'render_mode') or 'none'})"
    )


def _type_problem(key: str, value: Any, expected: str | None) -> str | None:
    """Why ``value`` does not fit a parameter taking ``expected`` (None: it fits, or nothing is expected)."""
    if expected is None or _TYPE_CHECKS[expected](value):
        return None
    return f"{key} expects {_TYPE_WORDS[expected]}, got {value!r}" + (
        " (a non-empty string would count as true)" if expected == "bool" else ""
    )


_TYPE_WORDS = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "str|None": "a string or null",
    "list": "a list",
    "list|None": "a list or null",
}

#: what a parameter's annotation (spaces removed) says it takes
_ANNOTATED = {"bool": "bool", "int": "int", "float": "float", "str": "str", "str|None": "str|None", "None|str": "str|None"}
#: what an unannotated parameter's default says it takes (bool before int: a bool is an int)
_DEFAULT_TYPES: tuple[tuple[type, str], ...] = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"))


def _expected_type(param: inspect.Parameter, registered: Any) -> str | None:
    """What a constructor parameter takes, from its default (or the registered value) and its annotation."""
    default = param.default if param.default is not param.empty else registered
    annotation = _annotation(param)
    if isinstance(default, bool):
        return "bool"
    if annotation in _ANNOTATED:
        return _ANNOTATED[annotation]
    found = None if annotation else next((name for t, name in _DEFAULT_TYPES if isinstance(default, t)), None)
    return found if found is not None else _sequence_type(annotation, default)


def _sequence_type(annotation: str, default: Any) -> str | None:
    """``list`` (``list|None``) for a sequence parameter, by its annotation or its default; None otherwise."""
    if annotation.startswith(("list[", "tuple[", "Sequence[")) or isinstance(default, (list, tuple)):
        return "list|None" if "None" in annotation else "list"
    return None


def _annotation(param: inspect.Parameter) -> str:
    """A parameter's annotation as text without spaces (``str|None``; ``""``: none)."""
    annotation = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "")
    return str(annotation).replace(" ", "")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: whether a value is of each type :func:`_expected_type` names
_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": _is_number,
    "str": lambda v: isinstance(v, str),
    "str|None": lambda v: isinstance(v, str) or v is None,
    "list": lambda v: isinstance(v, (list, tuple)),
    "list|None": lambda v: isinstance(v, (list, tuple)) or v is None,
}


def _finite_value(value: Any) -> bool:
    """False if ``value`` is (or contains, in lists and objects) a NaN or infinite number."""
    if isinstance(value, float):
        return bool(np.isfinite(value))
    if isinstance(value, (list, tuple)):
        return all(_finite_value(v) for v in value)
    if isinstance(value, Mapping):
        return all(_finite_value(v) for v in value.values())
    return True
