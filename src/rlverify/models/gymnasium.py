"""Gymnasium environments with a finite transition model (``env.unwrapped.P``) as PRISM MDPs.

:func:`from_gymnasium` writes a PRISM program from the table ``P[s][a] = [(p, s', r, terminated), ...]``
that FrozenLake, CliffWalking and Taxi (and any environment following their convention) expose,
and loads it with :func:`~rlverify.models.load_model`, so every engine (exact, statistical, the
Gym bridge) works on it unchanged.

The program has one module; its variables are

* ``s``: the state index, which is the observation the agent sees (a policy's one feature);
* decoded features where the environment defines them (FrozenLake/CliffWalking ``row``, ``col``;
  Taxi ``taxi_row``, ``taxi_col``, ``passenger``, ``destination`` from ``unwrapped.decode``),
  functions of ``s``;
* ``ev``: the event of the last transition (0: none), where the environment has events:
  FrozenLake ``goal``/``hole`` (entering a G/H cell), CliffWalking ``cliff`` (a -100 step, which
  in Gymnasium 1.x sends the agent back to the start without ending the episode) and ``goal``,
  Taxi ``delivered`` (a successful drop-off) and ``illegal`` (a -10 pick-up/drop-off);
* ``done``: a terminal transition was taken; such states are absorbing (one unlabelled self-loop).

Every command is labelled with its action, named as Gymnasium documents them (FrozenLake
``left/down/right/up``, CliffWalking ``up/right/down/left``, Taxi
``south/north/east/west/pickup/dropoff``; other environments ``a0, a1, ...``). Labels: one per
event, and ``terminal``. Rewards: the reward model ``reward``, whose state-action reward is the
expected reward ``sum_s' p * r`` of the step (expected accumulated rewards, the quantity ``R=?``
computes, are those of the environment; a simulated step earns the expectation, not a sample).
Where some reward is negative, two more reward models split it into non-negative parts,
``gain`` (``sum p * max(r, 0)``) and ``penalty`` (``sum p * max(-r, 0)``), ``reward = gain - penalty``
(the exact engine checks a signed reward model as the difference of such parts itself; Storm's own
solvers assume non-negative rewards).
Outcomes listing the same next state twice are merged (probabilities summed).

Initial state: the environment's ``initial_state_distrib`` (or ``initial=``). When it has several
states (Taxi), the model starts in a reset state ``s = -1`` whose one unlabelled command draws the
start state (the policy is not asked there); step bounds then count the reset as one step.
Gymnasium's time limit (``TimeLimit``, e.g. 100 steps for FrozenLake 4x4) is not part of the
model: use a step-bounded property (``F<=100``) for what happens within an episode.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import ModelError, OptionError, did_you_mean
from rlverify.models.assignments import parse_assignments
from rlverify.models.symbolic import SymbolicModel, load_model

#: Action names of the environments rlverify knows, in action-index order (Gymnasium's documentation).
ACTION_NAMES: dict[str, tuple[str, ...]] = {
    "FrozenLakeEnv": ("left", "down", "right", "up"),
    "CliffWalkingEnv": ("up", "right", "down", "left"),
    "TaxiEnv": ("south", "north", "east", "west", "pickup", "dropoff"),
}

#: Name of the reward model of a generated program.
REWARD_MODEL = "reward"


class NoStartStateError(ModelError):
    """The environment declares no start state and none was given; ``target_message`` says what a ``gym:ID`` target
    (the command line's ``--env-kwargs``, which has no ``initial=``) can change instead."""

    def __init__(self, message: str, target_message: str) -> None:
        super().__init__(message)
        self.target_message = target_message


@dataclass
class GymnasiumModel(SymbolicModel):
    """A :class:`~rlverify.models.SymbolicModel` generated from a Gymnasium environment.

    Attributes (beyond the model's):
        env_id: the environment's id (``FrozenLake-v1``) or class name.
        env_kwargs: the keyword arguments it was made with.
        events: the event labels (``ev = i + 1`` for ``events[i]``).
        policy_interface: ``{"features": ["s"], "actions": [...]}``: how a policy trained on the
            environment sees it (the observation, and the action names in action-index order);
            loaders use it for policy files that declare no names of their own.
    """

    env_id: str = ""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    events: tuple[str, ...] = ()
    policy_interface: dict[str, list[str]] = field(default_factory=dict)

    @property
    def display_name(self) -> str:
        """``gym:ID (k=v, ...)``, how results name the model: the arguments that chose it (a FrozenLake ``desc``
        map, not the registered ``map_name`` it overrides; a large map by its size and digest)."""
        args = ", ".join(f"{k}={_shown_value(k, v)}" for k, v in _used_kwargs(self.env_kwargs).items())
        return f"gym:{self.env_id}" + (f" ({args})" if args else "")


def _used_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` without FrozenLake's ``map_name`` when a ``desc`` map is given (which FrozenLake then uses alone;
    ``map_name=4x4`` is only the registered default)."""
    if kwargs.get("desc") is not None and "map_name" in kwargs:
        return {k: v for k, v in kwargs.items() if k != "map_name"}
    return dict(kwargs)


def _shown_value(key: str, value: Any) -> str:
    """``value`` as results show it; a ``desc`` map of more than 64 cells as ``RxC map sha256:...`` (its rows, joined
    by newlines, hashed), not thousands of characters."""
    if key == "desc" and isinstance(value, (list, tuple)) and value and all(isinstance(r, (str, bytes)) for r in value):
        rows = [r.decode() if isinstance(r, bytes) else r for r in value]
        if sum(map(len, rows)) > 64:
            digest = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:12]
            return f"{len(rows)}x{max(map(len, rows))} map sha256:{digest}"
        return str(rows)
    return str(value)


def parse_env_kwargs(text: str | Mapping[str, Any] | None, *, option: str = "--env-kwargs") -> dict[str, Any]:
    """Environment keyword arguments from ``K=V,K2=V2`` or a JSON object.

    In the ``K=V`` form a value is read as JSON where it is JSON (``true``, ``false``, numbers,
    ``null``, ``"text"``, a list without commas), else as a string (``map_name=8x8``). Values that
    contain commas (a FrozenLake ``desc`` map) need the JSON form:
    ``'{"desc": ["SFF", "FHF", "FFG"], "is_slippery": false}'``.

    Raises:
        OptionError: malformed text, naming ``option``; a number that is not finite (``nan``, ``1e999``);
            a name given twice.
    """
    if isinstance(text, Mapping):
        return {str(k): v for k, v in text.items()}
    text = (text or "").strip()
    if text.startswith("{"):
        return _json_kwargs(text, option)

    def malformed(entry: str) -> str:
        return f"{option}: expected NAME=VALUE, got '{entry}' (or a JSON object '{{\"desc\": [...]}}' for values with commas)"

    pairs = parse_assignments(
        text, option=option, what="argument", error=OptionError, malformed=malformed, names=r"[A-Za-z_]\w*"
    )
    return {key: _kwarg_value(key, raw, option) for key, raw in pairs.items()}


def _finite_json_number(option: str) -> Callable[[str], float]:
    """``json.loads``'s ``parse_float``: a finite float, else an :class:`OptionError` naming ``option``."""

    def finite(raw: str) -> float:
        value = float(raw)
        if not np.isfinite(value):
            raise OptionError(f"{option}: {raw} is not a finite number")
        return value

    return finite


def _json_kwargs(text: str, option: str) -> dict[str, Any]:
    """The JSON-object form of ``--env-kwargs`` (numbers finite, no name twice)."""

    def refuse(raw: str) -> Any:
        raise OptionError(f"{option}: {raw} is not a finite number")

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise OptionError(f"{option}: '{key}' is given twice")
            out[key] = value
        return out

    try:
        value = json.loads(text, parse_float=_finite_json_number(option), parse_constant=refuse, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise OptionError(f"{option}: invalid JSON at column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise OptionError(f"{option}: the JSON is nested too deeply") from None
    if not isinstance(value, dict):
        raise OptionError(f"{option}: expected a JSON object, got {type(value).__name__}")
    return value


def _kwarg_value(key: str, raw: str, option: str) -> Any:
    """One ``K=V`` value: ``true``/``false`` (any case), JSON where it is JSON (finite numbers), else the text."""
    lowered = raw.lower()
    if lowered in ("true", "false"):  # Python spellings too
        return lowered == "true"

    def refuse(raw: str) -> Any:
        raise OptionError(f"{option}: {raw} is not a finite number")

    try:
        return json.loads(raw, parse_float=_finite_json_number(option), parse_constant=refuse)
    except (json.JSONDecodeError, RecursionError):
        return raw
    except OptionError:
        raise OptionError(f"{option}: {key}: {raw} is not a finite number") from None


def from_gymnasium(
    env: Any,
    *,
    env_kwargs: str | Mapping[str, Any] | None = None,
    path: str | Path | None = None,
    initial: int | None = None,
    force: bool = False,
    trust_code: bool = False,
) -> GymnasiumModel:
    """The MDP of a Gymnasium environment with a finite transition model, as a loaded PRISM model.

    Args:
        env: a ``gymnasium.Env`` (wrappers are looked through with ``env.unwrapped``; they must not
            change the observation or action space), or an id in Gymnasium's registry (``"FrozenLake-v1"``,
            made with ``gymnasium.make(id, **env_kwargs)``), or ``"MODULE:ID"`` (Gymnasium's spelling for
            "import MODULE, which registers ID": only with ``trust_code``).
        env_kwargs: keyword arguments for ``gymnasium.make`` (a mapping, or text as
            :func:`parse_env_kwargs` reads it); only with an id. They are checked against the environment's
            constructor first (:func:`check_env_kwargs`): an unknown name, a bool parameter given anything but
            true/false (``is_slippery=no``), a number parameter given text, NaN or infinity are refused.
        trust_code: allow ``"MODULE:ID"``, which imports (runs) ``MODULE`` (``--trust-code``).
        path: where to write the PRISM program (default: a temporary directory of this process,
            removed at exit).
        initial: the start state index (default: the environment's ``initial_state_distrib``).
        force: overwrite an existing ``path``.

    Returns:
        a :class:`GymnasiumModel` (a :class:`~rlverify.models.SymbolicModel`); see the module
        docstring for its variables, actions, labels and reward model.

    Raises:
        ModelError: the environment has no finite model (``unwrapped.P`` with Discrete
            ``observation_space``/``action_space``), an unknown id, or a ``P`` that is not a
            distribution table (the entry is named).
        OptionError: bad ``env_kwargs``; InputFileError: ``path`` exists and not ``force``; ModelError also for
            ``MODULE:ID`` without ``trust_code``, or a module that cannot be imported.
    """
    kwargs = parse_env_kwargs(env_kwargs)
    if isinstance(env, str):
        env = _make(env, kwargs, trust_code)
    elif kwargs:
        raise OptionError("env_kwargs: only with an environment id; this environment is already made")
    spec = getattr(env, "spec", None)
    env_id = spec.id if spec is not None else type(getattr(env, "unwrapped", env)).__name__
    # the arguments it was made with, registered defaults included (how results and policy files name it)
    kwargs = {k: v for k, v in (spec.kwargs if spec is not None else kwargs).items() if k != "render_mode"}
    table = _read_table(env, env_id)
    text, events, actions = _program(table, env_id, kwargs, initial)
    file = _write(text, env_id, kwargs, initial, path, force)
    loaded = load_model(file)
    base = {f.name: getattr(loaded, f.name) for f in fields(SymbolicModel)}
    return GymnasiumModel(
        **base, env_id=env_id, env_kwargs=kwargs, events=events, policy_interface={"features": ["s"], "actions": list(actions)}
    )


def model_from_target(target: str, env_kwargs: str | Mapping[str, Any] | None, *, trust_code: bool = False) -> GymnasiumModel:
    """The model of a ``gym:ID`` target (the front door's spelling), with ``--env-kwargs`` (and ``--trust-code`` for
    ``gym:MODULE:ID``)."""
    env_id = target.removeprefix("gym:").strip()
    if not env_id:
        raise ModelError(f"{target}: expected gym:ID, e.g. gym:FrozenLake-v1")
    try:
        return from_gymnasium(env_id, env_kwargs=env_kwargs, trust_code=trust_code)
    except NoStartStateError as exc:  # from_gymnasium's remedy is its initial= argument, which a target has not
        raise ModelError(exc.target_message) from None


# --- reading the environment -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    """The finite model of an environment, merged: ``outcomes[s][a]`` = ``{(s', event, done): p}``."""

    n_states: int
    n_actions: int
    actions: tuple[str, ...]
    outcomes: list[list[dict[tuple[int, int, bool], float]]]
    rewards: np.ndarray  # (S, A) float64 expected reward of the step
    gains: np.ndarray  # (S, A) expected positive part
    penalties: np.ndarray  # (S, A) expected magnitude of the negative part
    initial: dict[int, float]  # {} : no start state declared (``no_start`` says why)
    no_start: str
    events: tuple[str, ...]
    features: dict[str, np.ndarray]  # decoded feature -> (S,) int64
    module: str


def _make(env_id: str, kwargs: dict[str, Any], trust_code: bool = False) -> Any:
    """``gymnasium.make(env_id, **kwargs)`` for an id in Gymnasium's registry (``MODULE:ID`` imports MODULE first, only
    with ``trust_code``), its arguments checked against the constructor first."""
    import contextlib
    import importlib
    import sys
    import warnings

    import gymnasium

    given = env_id
    module, sep, env_id = env_id.rpartition(":")
    if sep:
        if not trust_code:
            raise ModelError(
                f"gym:{given}: gym:MODULE:ID imports the Python module '{module}' (runs its code) to register "
                f"'{env_id}'; pass --trust-code to allow that (without it gym: targets are made only from "
                "ids already in Gymnasium's registry)"
            )
        from rlverify.models.userfile import note_user_code

        note_user_code()
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
    if env_id not in gymnasium.registry:
        known = [k for k in gymnasium.registry if "/" not in k]
        raise ModelError(
            f"gym:{given}: no environment '{env_id}' in Gymnasium's registry"
            f"{did_you_mean(env_id, known)}"
            + ("" if sep else " (an environment registered by your own module: gym:MODULE:ID with --trust-code)")
        )
    check_env_kwargs(env_id, kwargs)
    try:
        with warnings.catch_warnings():  # gymnasium's own deprecation notes (coloured); its errors say it plainly
            warnings.simplefilter("ignore", DeprecationWarning)
            return gymnasium.make(env_id, **kwargs)
    except TypeError as exc:
        raise OptionError(
            f"--env-kwargs {kwargs}: gym:{env_id} does not accept them: {str(exc).split(' was raised')[0]}"
        ) from None
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
    import inspect

    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    problems = [f"{k}: {v!r} is not a finite number" for k, v in kwargs.items() if not _finite_value(v)]
    spec = gymnasium.spec(env_id)
    try:
        creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
        params = inspect.signature(creator).parameters if creator is not None else None
    except Exception:  # no signature to check against: gymnasium.make reports what it refuses
        params = None
    if params is not None:
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        named = [
            n for n, p in params.items() if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        ]
        for key, value in kwargs.items():
            if key not in params or key not in named:
                if not var_kw:
                    problems.append(
                        f"gym:{env_id} takes no argument '{key}'{did_you_mean(key, named)} "
                        f"(it takes {', '.join(n for n in named if n != 'render_mode') or 'none'})"
                    )
                continue
            expected = _expected_type(params[key], spec.kwargs.get(key))
            if expected is not None and not _is_of(value, expected):
                problems.append(
                    f"{key} expects {_TYPE_WORDS[expected]}, got {value!r}"
                    + (" (a non-empty string would count as true)" if expected == "bool" else "")
                )
    if problems:
        raise OptionError(f"{option}: " + "; ".join(problems))


_TYPE_WORDS = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "str|None": "a string or null",
    "list": "a list",
    "list|None": "a list or null",
}


def _expected_type(param: Any, registered: Any) -> str | None:
    """What a constructor parameter takes, from its default (or the registered value) and its annotation."""
    default = param.default if param.default is not param.empty else registered
    annotation = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "")
    annotation = annotation.replace(" ", "")
    if isinstance(default, bool) or annotation == "bool":
        return "bool"
    if annotation in ("int", "float") or (isinstance(default, (int, float)) and not annotation):
        return "int" if annotation == "int" or (isinstance(default, int) and not annotation) else "float"
    if annotation in ("str", "str|None", "None|str") or (isinstance(default, str) and not annotation):
        return "str|None" if "None" in annotation else "str"
    if annotation.startswith(("list[", "tuple[", "Sequence[")) or isinstance(default, (list, tuple)):
        return "list|None" if "None" in annotation else "list"
    return None


def _is_of(value: Any, expected: str) -> bool:
    if expected == "bool":
        return isinstance(value, bool)
    if expected == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected.startswith("str"):
        return isinstance(value, str) or (value is None and expected.endswith("None"))
    return isinstance(value, (list, tuple)) or (value is None and expected.endswith("None"))


def _finite_value(value: Any) -> bool:
    """False if ``value`` is (or contains, in lists and objects) a NaN or infinite number."""
    if isinstance(value, float):
        return bool(np.isfinite(value))
    if isinstance(value, (list, tuple)):
        return all(_finite_value(v) for v in value)
    if isinstance(value, Mapping):
        return all(_finite_value(v) for v in value.values())
    return True


def _read_table(env: Any, env_id: str) -> _Table:
    u = getattr(env, "unwrapped", env)
    S, A, P = _finite_model(env, u, env_id)
    kind = type(u).__name__
    if kind == "TaxiEnv" and getattr(u, "fickle_passenger", False):
        raise ModelError(
            f"gym:{env_id}: fickle_passenger=True changes the destination in step() outside P; "
            "only fickle_passenger=False has a finite model"
        )
    actions = ACTION_NAMES.get(kind, tuple(f"a{i}" for i in range(A)))
    if len(actions) != A:
        actions = tuple(f"a{i}" for i in range(A))
    classify, events = _events(u, kind)
    outcomes: list[list[dict[tuple[int, int, bool], float]]] = []
    rewards, gains, penalties = np.zeros((S, A)), np.zeros((S, A)), np.zeros((S, A))
    for s in range(S):
        row = []
        entry = P.get(s) if isinstance(P, Mapping) else (P[s] if s < len(P) else None)
        for a in range(A):
            listed = (
                entry.get(a, []) if isinstance(entry, Mapping) else (entry[a] if entry is not None and a < len(entry) else [])
            )
            merged: dict[tuple[int, int, bool], float] = {}
            for i, item in enumerate(listed):
                p, s2, r, term = _outcome(item, f"gym:{env_id}: P[{s}][{a}][{i}]", S)
                if p == 0.0:
                    continue
                ev = classify(s, a, s2, r, term)
                key = (s2, events.index(ev) + 1 if ev else 0, term)
                merged[key] = merged.get(key, 0.0) + p  # the same outcome listed twice: one outcome
                rewards[s, a] += p * r
                gains[s, a] += p * max(r, 0.0)
                penalties[s, a] += p * max(-r, 0.0)
            total = sum(merged.values())
            if merged and abs(total - 1.0) > 1e-9:
                raise ModelError(f"gym:{env_id}: P[{s}][{a}] sums to {total!r}, not 1")
            row.append(merged)
        outcomes.append(row)
    return _Table(
        n_states=S,
        n_actions=A,
        actions=actions,
        outcomes=outcomes,
        rewards=rewards,
        gains=gains,
        penalties=penalties,
        initial=_initial_distribution(u, kind, env_id, S),
        no_start=(
            "the map (desc) has no start cell 'S'"
            if kind == "FrozenLakeEnv"
            else "the environment declares no start state (no initial_state_distrib)"
        ),
        events=events,
        features=_features(u, kind, S),
        module=re.sub(r"\W", "_", kind.removesuffix("Env").lower()) or "env",
    )


def _events(u: Any, kind: str) -> tuple[Callable[[int, int, int, float, bool], str | None], tuple[str, ...]]:
    """The environment's events: ``classify(s, a, s', r, terminated) -> name or None`` and the names."""
    if kind == "FrozenLakeEnv":
        desc = np.asarray(u.desc)

        def frozen(s: int, a: int, s2: int, r: float, term: bool) -> str | None:
            cell = desc.flat[s2]
            cell = cell.decode() if isinstance(cell, bytes) else str(cell)
            return {"G": "goal", "H": "hole"}.get(cell) if term else None

        return frozen, ("goal", "hole")
    if kind == "CliffWalkingEnv":
        return (lambda s, a, s2, r, term: "cliff" if r == -100 else ("goal" if term else None)), ("cliff", "goal")
    if kind == "TaxiEnv":
        return (lambda s, a, s2, r, term: "delivered" if (term and r > 0) else ("illegal" if r == -10 else None)), (
            "delivered",
            "illegal",
        )
    return (lambda s, a, s2, r, term: None), ()


def _features(u: Any, kind: str, S: int) -> dict[str, np.ndarray]:
    """Decoded features (functions of ``s``) the environment defines: name -> ``(S,)`` int64."""
    idx = np.arange(S)
    if kind == "FrozenLakeEnv":
        return {"row": idx // int(u.ncol), "col": idx % int(u.ncol)}
    if kind == "CliffWalkingEnv":
        rows, cols = np.unravel_index(idx, tuple(u.shape))
        return {"row": rows.astype(np.int64), "col": cols.astype(np.int64)}
    if kind == "TaxiEnv":
        decoded = np.array([list(u.decode(int(s))) for s in idx], dtype=np.int64)
        return {name: decoded[:, i] for i, name in enumerate(("taxi_row", "taxi_col", "passenger", "destination"))}
    return {}


def _initial_distribution(u: Any, kind: str, env_id: str, S: int) -> dict[int, float]:
    """The start distribution ``{s: p}`` the environment declares; ``{}`` if none (FrozenLake: a map without an 'S'
    cell, whose ``initial_state_distrib`` is 0/0, NaN everywhere)."""
    dist = getattr(u, "initial_state_distrib", None)
    if dist is None or (kind == "FrozenLakeEnv" and not (np.asarray(u.desc) == b"S").any()):
        return {}
    dist = np.asarray(dist, dtype=np.float64)
    if dist.shape != (S,) or not np.isfinite(dist).all() or (dist < 0).any() or abs(dist.sum() - 1.0) > 1e-9:
        raise ModelError(f"gym:{env_id}: initial_state_distrib is not a distribution over the {S} states")
    return {int(s): float(dist[s]) for s in np.flatnonzero(dist > 0)}


def _finite_model(env: Any, u: Any, env_id: str) -> tuple[int, int, Any]:
    """The number of states and actions and the transition model ``P`` of the unwrapped environment ``u``.

    Raises:
        ModelError: no ``P``, a space that is not ``Discrete`` (or starts other than at 0), a wrapper
            that changes a space.
    """
    from gymnasium import spaces

    obs, act = getattr(u, "observation_space", None), getattr(u, "action_space", None)
    P = getattr(u, "P", None)
    missing = []
    if P is None:
        missing.append("no finite transition model env.unwrapped.P (P[s][a] = [(p, s', r, terminated), ...])")
    if not isinstance(obs, spaces.Discrete):
        missing.append(f"observation_space is {obs}, not Discrete")
    if not isinstance(act, spaces.Discrete):
        missing.append(f"action_space is {act}, not Discrete")
    if P is None or not isinstance(obs, spaces.Discrete) or not isinstance(act, spaces.Discrete):
        raise ModelError(
            f"gym:{env_id}: not a finite MDP rlverify can read: "
            + "; ".join(missing)
            + " (FrozenLake, CliffWalking and Taxi have one)"
        )
    if getattr(env, "observation_space", obs) != obs or getattr(env, "action_space", act) != act:
        raise ModelError(
            f"gym:{env_id}: a wrapper changes the observation or action space "
            f"({env.observation_space} / {env.action_space}); rlverify models the unwrapped environment: "
            "pass env.unwrapped, or verify the wrapped observation with your own PRISM model"
        )
    if int(obs.start) != 0 or int(act.start) != 0:
        raise ModelError(f"gym:{env_id}: Discrete spaces with a start other than 0 are not supported")
    return int(obs.n), int(act.n), P


def _outcome(item: Any, where: str, n_states: int) -> tuple[float, int, float, bool]:
    """One entry ``(probability, next_state, reward, terminated)`` of ``P[s][a]``, checked."""
    try:
        p, s2, r, term = float(item[0]), int(item[1]), float(item[2]), bool(item[3])
    except (TypeError, ValueError, IndexError):
        raise ModelError(f"{where}: expected (probability, next_state, reward, terminated), got {item!r}") from None
    if not (0.0 <= p <= 1.0 + 1e-12) or not np.isfinite(r):
        raise ModelError(f"{where}: probability {p} / reward {r} out of range")
    if not 0 <= s2 < n_states:
        raise ModelError(f"{where}: next state {s2} is outside 0..{n_states - 1}")
    return p, s2, r, term


# --- writing the program ---------------------------------------------------------------------------


def _program(
    t: _Table, env_id: str, kwargs: Mapping[str, Any], initial: int | None
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    if initial is not None:
        if not 0 <= int(initial) < t.n_states:
            raise OptionError(f"initial: state {initial} is outside 0..{t.n_states - 1}")
        start = {int(initial): 1.0}
    elif t.initial:
        start = t.initial
    else:
        where = f"gym:{env_id}: {t.no_start}"
        if t.module == "frozenlake":
            fix = "mark the cell the agent starts on with 'S' in desc (several 'S' cells: a uniform start among them)"
            raise NoStartStateError(f"{where}: {fix}, or pass initial=STATE", f"{where}: {fix}")
        raise NoStartStateError(
            f"{where}: pass initial=STATE",
            f"{where}, and a gym:ID target cannot name one: make the environment declare it, or load it in Python "
            "with rlverify.models.from_gymnasium(env, initial=STATE)",
        )
    reset = len(start) > 1
    low = -1 if reset else 0

    def init(values: np.ndarray | None) -> int:
        return -1 if reset else (next(iter(start)) if values is None else int(values[next(iter(start))]))

    def update(s2: int, ev: int, done: bool) -> str:
        parts = [f"(s'={s2})"] + [f"({n}'={int(v[s2])})" for n, v in t.features.items()]
        if t.events:
            parts.append(f"(ev'={ev})")
        if done:
            parts.append("(done'=true)")
        return "&".join(parts)

    lines = [
        f"// generated by rlverify.models.from_gymnasium from {env_id} {json.dumps(dict(kwargs), default=str)}",
        "// the state index s is the observation the agent sees; do not edit (regenerate instead)",
        "mdp",
        "",
        f"module {t.module}",
    ]
    lines.append(f"  s : [{low}..{t.n_states - 1}] init {init(None)};" + ("  // -1: before the reset" if reset else ""))
    for name, values in t.features.items():
        lines.append(f"  {name} : [{min(low, int(values.min()))}..{int(values.max())}] init {init(values)};")
    if t.events:
        legend = ", ".join(f"{i + 1} {e}" for i, e in enumerate(t.events))
        lines.append(f"  ev : [0..{len(t.events)}] init 0;  // event of the last transition: 0 none, {legend}")
    lines.append("  done : bool init false;  // a terminal transition was taken")
    lines.append("")
    if reset:
        branches = " + ".join(f"{_number(p)}:{update(s, 0, False)}" for s, p in sorted(start.items()))
        lines.append(f"  [] s=-1 -> {branches};")
    for s in range(t.n_states):
        for a, name in enumerate(t.actions):
            out = t.outcomes[s][a]
            if not out:
                continue
            branches = " + ".join(f"{_number(p)}:{update(*key)}" for key, p in sorted(out.items()))
            lines.append(f"  [{name}] !done & s={s} -> {branches};")
    lines.append("  [] done -> true;  // absorbing")
    lines += ["endmodule", ""]
    lines += [f'label "{e}" = ev={i + 1};' for i, e in enumerate(t.events)]
    lines += ['label "terminal" = done;', ""]
    lines += _reward_lines(t)
    return "\n".join(lines), t.events, t.actions


def _reward_lines(t: _Table) -> list[str]:
    """The reward models: the environment's rewards, and (if some are negative) their gain and penalty parts."""
    models = {REWARD_MODEL: t.rewards}
    if (t.penalties > 0).any():  # non-negative parts for Storm's unbounded reward solvers
        models.update({"gain": t.gains, "penalty": t.penalties})
    lines: list[str] = []
    for reward_name, values in models.items():
        entries = [
            f"  [{name}] !done & s={s} : {_number(values[s, a])};"
            for s in range(t.n_states)
            for a, name in enumerate(t.actions)
            if t.outcomes[s][a] and values[s, a] != 0.0
        ]
        lines += [f'rewards "{reward_name}"', *(entries or ["  true : 0;  // no such reward"]), "endrewards", ""]
    return lines


@functools.lru_cache(maxsize=4096)
def _number(x: float) -> str:
    """A probability or reward as PRISM text: a short fraction when ``x`` is one (1/3), else its repr (cached: a table
    repeats few numbers, and a fraction's search cost 2.5 s of a 60x60 FrozenLake's 14,400 commands)."""
    f = Fraction(float(x)).limit_denominator(10_000)
    if abs(float(f) - x) <= 1e-12 * max(1.0, abs(x)):
        return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"
    return repr(float(x))


def _write(
    text: str, env_id: str, kwargs: Mapping[str, Any], initial: int | None, path: str | Path | None, force: bool
) -> Path:
    from rlverify.files import private_temp_dir, write_text

    if path is not None:
        return write_text(path, text, force=force)  # atomically; an existing file only with force
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    file = private_temp_dir("gym") / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', env_id)}-{key}.prism"
    return write_text(file, text, force=True, private=True)
