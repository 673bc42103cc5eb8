"""A Gymnasium environment without a transition table, as something the statistical engine simulates.

:class:`GymSimulator` describes the environment (an id in Gymnasium's registry, or a factory) and how its episodes
are read: the observation's features, the action space, and the labels a property names. It is small and
picklable (Ray ships it to workers); :meth:`GymSimulator.open` makes the lockstep copies
(:mod:`rlverify.models.gym_vector`).

An episode is read as a sequence of *rows*, one per step: the observation's features, then ``reward`` (of the step
that led here; 0 after the reset), ``terminated``, ``truncated``, ``step`` (the number of steps taken) and the
``info`` entries the labels name (``info["cost"]`` is the column ``info_cost``). Labels are conditions over these
columns, parsed by :func:`rlverify.models.expressions.compile_expression` (never ``eval``): ``obs[2]`` reads the
third feature, ``abs(obs[2]) > 0.15``, ``terminated & !truncated``, ``info["cost"] > 0``. ``terminated`` and
``truncated`` are labels of their own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np

from rlverify.errors import ModelError, OptionError, PropertyError, did_you_mean
from rlverify.models.environment import VectorEnv
from rlverify.models.expressions import ResultKind, compile_expression

__all__ = ["BUILT_IN_LABELS", "GymSimulator", "Vectorization", "parse_labels"]

#: the labels every episode has: the environment said the episode ended (``terminated``: a terminal state of the
#: MDP) or was cut (``truncated``: a time limit; what would have come next is unknown)
BUILT_IN_LABELS = ("terminated", "truncated")
#: the columns after the features
EPISODE_COLUMNS = ("reward", "terminated", "truncated", "step")
#: the environments' own vectorised implementations rlverify can seed episode by episode
#: (:mod:`rlverify.models.gym_vector` has one adapter each)
NATIVE_VECTORS = frozenset({"CartPoleVectorEnv"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OBS = re.compile(r"\bobs\s*\[\s*(\d+)\s*\]")
#: a feature's default name: its position in the flat observation
DEFAULT_FEATURE = re.compile(r"obs\[\d+\]")
_INFO = re.compile(r"""\binfo\s*\[\s*(?:"([A-Za-z_][A-Za-z0-9_]*)"|'([A-Za-z_][A-Za-z0-9_]*)')\s*\]""")


class Vectorization(StrEnum):
    """How the lockstep copies are made: ``auto`` (the environment's own vectorised implementation where rlverify
    can seed its episodes one by one, else ``sync``), ``native`` (that implementation: refused where there is none),
    ``sync`` (copies stepped in this process, ``SyncVectorEnv``) or ``async`` (copies in worker processes,
    ``AsyncVectorEnv``)."""

    AUTO = "auto"
    NATIVE = "native"
    SYNC = "sync"
    ASYNC = "async"


@dataclass(frozen=True)
class Label:
    """A user label ``name=condition`` over an episode's columns."""

    name: str
    text: str


def parse_labels(given: Sequence[str] | Mapping[str, str] | None, *, option: str = "--label") -> tuple[Label, ...]:
    """``["fall=terminated & !truncated", ...]`` (or ``{"fall": "..."}``) as labels, names checked.

    Raises:
        OptionError: no ``=``, a name that is not an identifier, a built-in name or a name given twice.
    """
    if not given:
        return ()
    pairs = list(given.items()) if isinstance(given, Mapping) else [_split_label(g, option) for g in given]
    labels: list[Label] = []
    for name, text in pairs:
        if not isinstance(name, str) or not _NAME.match(name):
            raise OptionError(f"{option} {name!r}: a label name is a name (letters, digits, _), e.g. fall=terminated")
        if name in BUILT_IN_LABELS or name in EPISODE_COLUMNS or name in ("obs", "info"):
            raise OptionError(f"{option} {name}: '{name}' is a built-in name; choose another label name")
        if any(label.name == name for label in labels):
            raise OptionError(f"{option} {name}: given twice")
        if not isinstance(text, str) or not text.strip():
            raise OptionError(f"{option} {name}: give its condition, e.g. {name}=abs(obs[2]) > 0.15")
        labels.append(Label(name, text.strip()))
    return tuple(labels)


def _split_label(given: str, option: str) -> tuple[str, str]:
    name, sep, text = str(given).partition("=")
    if not sep or not name.strip():
        raise OptionError(f"{option} {given!r}: expected NAME=CONDITION, e.g. 'tilted=abs(obs[2]) > 0.15'")
    return name.strip(), text


@dataclass(frozen=True, eq=False)
class GymSimulator(VectorEnv):
    """A Gymnasium environment simulated episode by episode (no transition table): the statistical engine's model.

    Attributes:
        env_id: the id in Gymnasium's registry (``CartPole-v1``; ``MODULE:ID`` once ``--trust-code`` allowed
            importing MODULE), or "" with ``factory``.
        env_kwargs: ``gymnasium.make``'s keyword arguments.
        factory: a function making one environment (the Python API), instead of an id.
        vectorization: how the copies are made (:class:`Vectorization`).
        feature_names: the observation's features, in order (default ``obs[0]``, ``obs[1]``, ...).
        action_names: a Discrete space's actions, ``"0"``, ``"1"``, ... (action ``i`` is ``start + i``); a Box
            space's dimensions ``a[0]``, ...
        action_low, action_high: a Box action space's bounds (None: Discrete).
        action_start: a Discrete space's first action.
        user_labels: the ``--label`` definitions.
        info_keys: the ``info`` entries the labels read (columns ``info_KEY``).
        max_episode_steps: the environment's own time limit (None: none registered).
        native: the name of the native vectorised implementation used (None: copies of the environment).
    """

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    factory: Callable[[], Any] | None = None
    vectorization: Vectorization = Vectorization.AUTO
    feature_names: tuple[str, ...] = ()
    action_names: tuple[str, ...] = ()
    action_low: np.ndarray | None = None
    action_high: np.ndarray | None = None
    action_start: int = 0
    user_labels: tuple[Label, ...] = ()
    info_keys: tuple[str, ...] = ()
    max_episode_steps: int | None = None
    native: str | None = None
    shown: str = ""
    _compiled: dict[str, Callable[[np.ndarray], np.ndarray]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._compile_labels()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the compiled labels (closures): they are compiled again on unpickling."""
        state = dict(self.__dict__)
        state["_compiled"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._compile_labels()

    # --- the VectorEnv members (rows: (N, len(columns)) float64) ---------------------------------------------

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.shown or f"gym:{self.env_id}"

    @property
    def features(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.feature_names

    @property
    def actions(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.action_names

    @property
    def labels(self) -> tuple[str, ...]:  # type: ignore[override]
        return BUILT_IN_LABELS + tuple(label.name for label in self.user_labels)

    @property
    def continuous(self) -> bool:
        """Whether the action space is a Box (a policy gives numbers, not one of named actions)."""
        return self.action_low is not None

    @property
    def columns(self) -> tuple[str, ...]:
        """The names of an episode row's columns."""
        return self.feature_names + EPISODE_COLUMNS + tuple(f"info_{k}" for k in self.info_keys)

    def initial_states(self) -> np.ndarray:
        """One row of zeros (episodes start where the environment's reset puts them: no state to pick)."""
        return np.zeros((1, len(self.columns)))

    def observe(self, states: np.ndarray) -> np.ndarray:
        return np.asarray(states[:, : len(self.feature_names)], dtype=np.float64)

    def available(self, states: np.ndarray) -> np.ndarray | None:
        return None

    def step(self, states: np.ndarray, actions: np.ndarray, u: np.ndarray) -> np.ndarray:
        raise ModelError(f"{self.name}: a Gymnasium environment is stepped through its copies (open), not row by row")

    def label(self, name: str, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool truth of ``name`` on episode rows ``(N, len(columns))``."""
        if name in BUILT_IN_LABELS:
            return np.asarray(states[:, len(self.feature_names) + EPISODE_COLUMNS.index(name)] != 0)
        compiled = self._compiled.get(name)
        if compiled is None:
            raise PropertyError(
                f'unknown label "{name}"{did_you_mean(name, self.labels)}; labels of {self.name}: '
                + ", ".join(f'"{x}"' for x in self.labels)
                + " (define your own with --label NAME=CONDITION over obs[i], reward, terminated, truncated, step, "
                'info["KEY"])'
            )
        return compiled(states)

    def terminal(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: the episode terminated (a terminal state: its labels never change)."""
        return self.label("terminated", states)

    def truncated(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: the episode was cut (time limit): what would have followed is unknown."""
        return self.label("truncated", states)

    def describe(self, state: object) -> object:
        row = np.asarray(state, dtype=np.float64).ravel()
        return dict(zip(self.columns, row.tolist(), strict=False))

    # --- making the copies -----------------------------------------------------------------------------

    def describe_vectorization(self) -> str:
        """How the copies are made, for the result's notes."""
        if self.native is not None:
            return f"the environment's own vectorised implementation ({self.native})"
        if self.vectorization is Vectorization.ASYNC:
            return "copies in worker processes (gymnasium AsyncVectorEnv)"
        return "copies stepped in this process (gymnasium SyncVectorEnv)"

    def _compile_labels(self) -> None:
        variables = self._variables()
        for label in self.user_labels:
            text = _OBS.sub(lambda m: f"obs_{m.group(1)}", label.text)
            text = _INFO.sub(lambda m: f"info_{m.group(1) or m.group(2)}", text)
            known = [*variables, *(f"obs_{i}" for i in range(len(self.feature_names)))]
            try:
                evaluate = compile_expression(
                    text, known, option=f"--label {label.name}", booleans=BUILT_IN_LABELS, kind=ResultKind.CONDITION
                )
            except (OptionError, PropertyError) as exc:  # the message in the user's words: obs[i], info["k"]
                raise type(exc)(self._as_written(str(exc), text, label.text)) from None
            n = len(variables)
            self._compiled[label.name] = _with_obs_aliases(evaluate, n, len(self.feature_names))

    def _as_written(self, message: str, rewritten: str, written: str) -> str:
        """``message`` about the rewritten label text, in the names the user wrote (``obs[2]``, ``info["cost"]``, the
        feature names), with the variables listed once each."""
        message = message.replace(f"'{rewritten}'", f"'{written}'")
        names = [*self.feature_names, *EPISODE_COLUMNS, *(f'info["{k}"]' for k in self.info_keys)]
        if len(self.feature_names) and not any(_OBS.fullmatch(f) for f in self.feature_names):
            names += [f"obs[{i}]" for i in range(len(self.feature_names))]
        message = re.sub(r"the variables: .*", "the variables: " + ", ".join(names), message)
        message = re.sub(r"\bobs_(\d+)_?\b", lambda m: f"obs[{m.group(1)}]", message)
        return re.sub(r"\binfo_([A-Za-z0-9_]+)\b", lambda m: f'info["{m.group(1)}"]', message)

    def _variables(self) -> list[str]:
        """The names a label may read, in column order (features under their names, then the episode's columns)."""
        return [*(_variable(f) for f in self.feature_names), *EPISODE_COLUMNS, *(f"info_{k}" for k in self.info_keys)]


def _variable(feature: str) -> str:
    """A feature's name as a label reads it (``obs[2]`` -> ``obs_2``)."""
    m = _OBS.fullmatch(feature)
    return f"obs_{m.group(1)}_" if m else feature


def _with_obs_aliases(
    evaluate: Callable[[np.ndarray], np.ndarray], n_columns: int, n_features: int
) -> Callable[[np.ndarray], np.ndarray]:
    """``evaluate`` over rows: the columns, then the features again as ``obs_i``."""

    def on_rows(states: np.ndarray) -> np.ndarray:
        rows = np.asarray(states, dtype=np.float64)
        return evaluate(np.concatenate([rows[:, :n_columns], rows[:, :n_features]], axis=1))

    return on_rows


def info_keys_of(labels: Sequence[Label]) -> tuple[str, ...]:
    """The ``info`` entries the labels read, in order of first use."""
    keys: list[str] = []
    for label in labels:
        for m in _INFO.finditer(label.text):
            key = m.group(1) or m.group(2)
            if key not in keys:
                keys.append(key)
    return tuple(keys)


def native_name(env_id: str) -> str | None:
    """The class of ``env_id``'s own vectorised implementation if rlverify can start it episode by episode
    (None: none, or one rlverify does not know)."""
    import gymnasium  # lazy: gymnasium, start-up

    try:
        entry = getattr(gymnasium.spec(env_id), "vector_entry_point", None)
    except Exception:  # gym:MODULE:ID (imported by make, not by spec), or an id spec() cannot read: no native one
        return None
    name = entry.rpartition(":")[2] if isinstance(entry, str) else None
    return name if name in NATIVE_VECTORS else None


@dataclass(frozen=True)
class Maker:
    """``gymnasium.make(env_id, **kwargs)`` as a picklable factory (``AsyncVectorEnv`` and Ray ship it to workers)."""

    env_id: str
    kwargs: dict[str, Any]

    def __call__(self) -> Any:
        import warnings

        import gymnasium  # lazy: gymnasium, start-up

        with warnings.catch_warnings():  # gymnasium's own (passive checker, deprecations) kept out of rlverify's output
            warnings.simplefilter("ignore")
            return gymnasium.make(self.env_id, **self.kwargs)


def is_gym_source(obj: object) -> bool:
    """Whether ``obj`` is a Gymnasium environment given in Python: a ``gymnasium.Env`` or ``gymnasium.vector.VectorEnv``
    object, or a factory (a function, class or ``functools.partial``) that makes one (checked when called)."""
    import functools
    import inspect
    import sys

    if inspect.isfunction(obj) or isinstance(obj, functools.partial) or inspect.isclass(obj):
        return True
    gymnasium = sys.modules.get("gymnasium")  # (an object of gymnasium's exists only once gymnasium is imported)
    return gymnasium is not None and isinstance(obj, (gymnasium.Env, gymnasium.vector.VectorEnv))


@dataclass(frozen=True)
class GymSource:
    """How rlverify makes copies of an environment given in Python: by registered id (``env_id``, ``env_kwargs``: as
    ``gym:ID``, with its native vectorised implementation where it has one) or by ``factory``; ``name`` for messages."""

    name: str
    env_id: str = ""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    factory: Callable[[], Any] | None = None


#: arguments of ``gymnasium.make_vec`` a vector environment's spec records, not the environment's own
_VECTOR_KWARGS = ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers")


def gym_source(obj: object) -> GymSource:
    """How to make copies of the Gymnasium environment ``obj`` (:func:`is_gym_source`): an environment or vector
    environment with a registered spec by its id and arguments; a ``SyncVectorEnv``/``AsyncVectorEnv`` by its first
    ``env_fns``; a factory as given.

    Raises:
        ModelError: an environment object rlverify cannot make copies of (no spec, no factory): pass a factory.
    """
    import gymnasium  # lazy: gymnasium, start-up

    if isinstance(obj, (gymnasium.Env, gymnasium.vector.VectorEnv)):
        spec = getattr(obj, "spec", None)
        if isinstance(obj, gymnasium.vector.SyncVectorEnv) and obj.envs:
            spec = getattr(obj.envs[0], "spec", None) or spec
        wrapped = bool(getattr(spec, "additional_wrappers", None))
        if spec is not None and wrapped and not isinstance(obj, gymnasium.vector.VectorEnv):
            import functools

            return GymSource(f"gym:{spec.id} (with its wrappers)", factory=functools.partial(gymnasium.make, spec))
        if spec is not None and getattr(spec, "id", None) in gymnasium.registry:
            kwargs = {k: v for k, v in dict(spec.kwargs or {}).items() if k not in _VECTOR_KWARGS}
            return GymSource(f"gym:{spec.id}", spec.id, kwargs)
        fns = getattr(obj, "env_fns", None)
        if isinstance(obj, (gymnasium.vector.SyncVectorEnv, gymnasium.vector.AsyncVectorEnv)) and fns:
            return GymSource(f"{type(obj).__name__}'s environment", factory=fns[0])
        raise ModelError(
            f"{type(obj).__name__}: rlverify makes its own copies of the environment, one episode each, and cannot copy "
            "this object (no registered spec): pass a factory instead, e.g. lambda: MyEnv(...)"
        )
    if not callable(obj):
        raise ModelError(f"{type(obj).__name__}: expected a Gymnasium environment, vector environment or a factory")
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
    return GymSource(str(name), factory=obj)


def has_transition_table(env: Any) -> bool:
    """Whether ``env`` has a finite transition model rlverify reads exactly (``unwrapped.P`` over Discrete spaces)."""
    u = getattr(env, "unwrapped", env)
    discrete = all(type(getattr(env, s, None)).__name__ == "Discrete" for s in ("observation_space", "action_space"))
    return discrete and getattr(u, "P", None) is not None


def named(sim: GymSimulator, features: Sequence[str] | None, labels: Sequence[str] | Mapping[str, str] | None) -> GymSimulator:
    """``sim`` with its observation's ``features`` named (None: as they are) and ``labels`` compiled over the names.

    Raises:
        OptionError: feature names of the wrong count, bad labels (in the user's words).
    """
    names = sim.feature_names if features is None else _feature_names(features, len(sim.feature_names), sim.name)
    parsed = parse_labels(labels)
    return replace(sim, feature_names=names, user_labels=parsed, info_keys=info_keys_of(parsed))


def simulator_of(
    env: Any,
    *,
    env_id: str = "",
    env_kwargs: Mapping[str, Any] | None = None,
    factory: Callable[[], Any] | None = None,
    vectorization: Vectorization | str = Vectorization.AUTO,
    labels: Sequence[str] | Mapping[str, str] | None = None,
    feature_names: Sequence[str] | None = None,
    shown: str = "",
) -> GymSimulator:
    """The :class:`GymSimulator` of an environment ``env`` made once to read its spaces (made again, ``copies``
    times, when simulated): by ``env_id`` (with ``env_kwargs``) or by ``factory``.

    Raises:
        ModelError: an observation or action space rlverify does not simulate (Dict, Tuple, Text...), or
            ``vectorization='native'`` where the environment has no native implementation rlverify can seed.
        OptionError: feature names of the wrong count, bad labels.
    """
    vec = _vectorization(vectorization)
    name = shown or (f"gym:{env_id}" if env_id else type(getattr(env, "unwrapped", env)).__name__)
    n_features = _feature_count(env.observation_space, name)
    features = _feature_names(feature_names, n_features, name)
    actions, low, high, start = _action_space(env.action_space, name)
    parsed = parse_labels(labels)
    native = None
    if env_id and factory is None and vec in (Vectorization.AUTO, Vectorization.NATIVE):
        native = native_name(env_id) if not env_kwargs or vec is Vectorization.NATIVE else None
    if vec is Vectorization.NATIVE and native is None:
        raise ModelError(
            f"{name}: --vectorization native: no vectorised implementation of this environment that rlverify can "
            "start episode by episode (known: CartPole); use sync or async"
        )
    spec = getattr(env, "spec", None)
    steps = getattr(spec, "max_episode_steps", None)
    return GymSimulator(
        env_id=env_id,
        env_kwargs=dict(env_kwargs or {}),
        factory=factory,
        vectorization=Vectorization.SYNC if vec is Vectorization.AUTO and native is None else vec,
        feature_names=features,
        action_names=actions,
        action_low=low,
        action_high=high,
        action_start=start,
        user_labels=parsed,
        info_keys=info_keys_of(parsed),
        max_episode_steps=int(steps) if isinstance(steps, int) else None,
        native=native,
        shown=name,
    )


def _vectorization(given: Vectorization | str) -> Vectorization:
    try:
        return Vectorization(given)
    except ValueError:
        raise OptionError(
            f"--vectorization: expected one of {', '.join(v.value for v in Vectorization)}, got {given!r}"
        ) from None


def _feature_count(space: Any, name: str) -> int:
    """The number of features of a flat Box (any shape: flattened) or Discrete (one: the index) observation space."""
    from gymnasium import spaces  # lazy: gymnasium (the space is one of its objects)

    if isinstance(space, spaces.Discrete):
        return 1
    shape = getattr(space, "shape", None)
    if isinstance(space, spaces.Box) and shape is not None and all(isinstance(d, int) for d in shape):
        return int(np.prod(shape)) if shape else 1
    if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)) and shape is not None:
        return int(np.prod(shape))
    raise ModelError(
        f"{name}: the observation space is {space}; rlverify simulates Box, Discrete, MultiDiscrete and MultiBinary "
        "observations (flatten a Dict or Tuple space with gymnasium.wrappers.FlattenObservation in your factory)"
    )


def _feature_names(given: Sequence[str] | None, count: int, name: str) -> tuple[str, ...]:
    if not given:
        return tuple(f"obs[{i}]" for i in range(count))
    names = tuple(str(g) for g in given)
    if len(names) != count:
        raise OptionError(f"--features: {len(names)} names given, but {name}'s observations have {count} features")
    if len(set(names)) != len(names):
        raise OptionError("--features: a name is given twice")
    return names


def _action_space(space: Any, name: str) -> tuple[tuple[str, ...], np.ndarray | None, np.ndarray | None, int]:
    """``(action names, low, high, start)``: a Discrete space's actions ``"0"``..., a Box's dimensions ``a[i]``."""
    from gymnasium import spaces  # lazy: gymnasium (the space is one of its objects)

    if isinstance(space, spaces.Discrete):
        return tuple(str(i) for i in range(int(space.n))), None, None, int(getattr(space, "start", 0))
    shape = getattr(space, "shape", None)
    if isinstance(space, spaces.Box) and shape is not None and len(shape) == 1:
        low = np.asarray(space.low, dtype=np.float64)
        high = np.asarray(space.high, dtype=np.float64)
        return tuple(f"a[{i}]" for i in range(int(shape[0]))), low, high, 0
    raise ModelError(f"{name}: the action space is {space}; rlverify simulates Discrete and one-dimensional Box action spaces")
