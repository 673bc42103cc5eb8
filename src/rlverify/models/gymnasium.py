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

from rlverify.errors import ModelError, OptionError
from rlverify.files import private_temp_dir, write_text
from rlverify.models.assignments import parse_assignments
from rlverify.models.gymnasium_make import make_env
from rlverify.models.gymnasium_table import GymEnv, Table, read_table
from rlverify.models.symbolic import SymbolicModel, load_model

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

    @property
    def shown(self) -> str:
        """The model as messages name it: :attr:`display_name` (its PRISM file is a private temporary one)."""
        return self.name or self.display_name


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
    env: GymEnv | str,
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
            constructor first (:func:`~rlverify.models.gymnasium_make.check_env_kwargs`): an unknown name, a bool
            parameter given anything but true/false (``is_slippery=no``), a number parameter given text, NaN or
            infinity are refused.
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
        env = make_env(env, kwargs, trust_code)
    elif kwargs:
        raise OptionError("env_kwargs: only with an environment id; this environment is already made")
    spec = getattr(env, "spec", None)
    env_id = spec.id if spec is not None else type(getattr(env, "unwrapped", env)).__name__
    # the arguments it was made with, registered defaults included (how results and policy files name it)
    kwargs = {k: v for k, v in (spec.kwargs if spec is not None else kwargs).items() if k != "render_mode"}
    table = read_table(env, env_id)
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


# --- writing the program ---------------------------------------------------------------------------


def _program(
    t: Table, env_id: str, kwargs: Mapping[str, Any], initial: int | None
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    start = _start(t, env_id, initial)
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
    lines += _declarations(t, low, init, reset)
    if reset:
        branches = " + ".join(f"{_number(p)}:{update(s, 0, False)}" for s, p in sorted(start.items()))
        lines.append(f"  [] s=-1 -> {branches};")
    lines += _commands(t, update)
    lines.append("  [] done -> true;  // absorbing")
    lines += ["endmodule", ""]
    lines += [f'label "{e}" = ev={i + 1};' for i, e in enumerate(t.events)]
    lines += ['label "terminal" = done;', ""]
    lines += _reward_lines(t)
    return "\n".join(lines), t.events, t.actions


def _start(t: Table, env_id: str, initial: int | None) -> dict[int, float]:
    """The start distribution ``{s: p}``: ``initial``, else the environment's (NoStartStateError: neither)."""
    if initial is not None:
        if not 0 <= int(initial) < t.n_states:
            raise OptionError(f"initial: state {initial} is outside 0..{t.n_states - 1}")
        return {int(initial): 1.0}
    if t.initial:
        return t.initial
    where = f"gym:{env_id}: {t.no_start}"
    if t.module == "frozenlake":
        fix = "mark the cell the agent starts on with 'S' in desc (several 'S' cells: a uniform start among them)"
        raise NoStartStateError(f"{where}: {fix}, or pass initial=STATE", f"{where}: {fix}")
    raise NoStartStateError(
        f"{where}: pass initial=STATE",
        f"{where}, and a gym:ID target cannot name one: make the environment declare it, or load it in Python "
        "with rlverify.models.from_gymnasium(env, initial=STATE)",
    )


def _declarations(t: Table, low: int, init: Callable[[np.ndarray | None], int], reset: bool) -> list[str]:
    """The module's variable declarations (``s``, the decoded features, ``ev``, ``done``), then a blank line."""
    lines = [f"  s : [{low}..{t.n_states - 1}] init {init(None)};" + ("  // -1: before the reset" if reset else "")]
    for name, values in t.features.items():
        lines.append(f"  {name} : [{min(low, int(values.min()))}..{int(values.max())}] init {init(values)};")
    if t.events:
        legend = ", ".join(f"{i + 1} {e}" for i, e in enumerate(t.events))
        lines.append(f"  ev : [0..{len(t.events)}] init 0;  // event of the last transition: 0 none, {legend}")
    lines.append("  done : bool init false;  // a terminal transition was taken")
    lines.append("")
    return lines


def _commands(t: Table, update: Callable[[int, int, bool], str]) -> list[str]:
    """One labelled command per (state, action) with outcomes: its branches in sorted order."""
    lines = []
    for s in range(t.n_states):
        for a, name in enumerate(t.actions):
            out = t.outcomes[s][a]
            if not out:
                continue
            branches = " + ".join(f"{_number(p)}:{update(*key)}" for key, p in sorted(out.items()))
            lines.append(f"  [{name}] !done & s={s} -> {branches};")
    return lines


def _reward_lines(t: Table) -> list[str]:
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
    if path is not None:
        return write_text(path, text, force=force)  # atomically; an existing file only with force
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    file = private_temp_dir("gym") / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', env_id)}-{key}.prism"
    return write_text(file, text, force=True, private=True)
