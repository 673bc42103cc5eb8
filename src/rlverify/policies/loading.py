"""Load a policy from a command-line spec."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlverify.errors import InputFileError, PolicyError, RlverifyError
from rlverify.models.userfile import import_python_file
from rlverify.policies.adapters import (
    OUTPUT_KINDS,
    CallablePolicy,
    OnnxPolicy,
    SB3Policy,
    TablePolicy,
    TorchPolicy,
    _json_type,
    declaration,
    _read_json,
    is_name_list,
)
from rlverify.policies.base import (
    DEFAULT_POLICY_TIMEOUT,
    BasePolicy,
    Policy,
    check_timeout,
    exception_text,
    safe_repr,
)

SPEC_HELP = (
    "path.py:NAME (module defining FEATURES, ACTIONS and callable NAME), file.onnx, table.json, "
    "module.pt (TorchScript; features/actions from --features/--actions or file.pt.json), "
    "model.zip (Stable-Baselines3 PPO/A2C/DQN or sb3-contrib MaskablePPO; same)"
)

#: Keys of a policy sidecar (``model.zip.json``, ``module.pt.json``) besides the names and the output kind:
#: where the policy was trained (``benchmark``: a benchmark id, ``gym:ID`` or a model file; ``params``:
#: its parameters/constants/environment arguments), as ONNX files record them in ``rlverify.training``.
SIDECAR_KEYS = ("features", "actions", "output", "benchmark", "params")


def load_policy(spec: str, *, features: Sequence[str] | None = None, actions: Sequence[str] | None = None,
                output: str | None = None, defaults: Mapping[str, Sequence[str]] | None = None,
                trust_code: bool = False, timeout: float | None = DEFAULT_POLICY_TIMEOUT) -> Policy:
    """Load a policy from ``spec`` (see :data:`SPEC_HELP`).

    ``features``/``actions``/``output`` (``logits``, ``probabilities`` or ``q-values``) give what the
    file does not declare; one that contradicts the file's declaration (a module's FEATURES/ACTIONS/OUTPUT,
    a table's names, ONNX metadata, a sidecar) is refused, never applied silently
    (:func:`~rlverify.policies.adapters.declaration`). A network file must say what its outputs are (metadata, sidecar or ``output``):
    softmax applied to outputs that already are probabilities would give a valid-looking wrong policy.
    ``defaults`` (``{"features": [...], "actions": [...]}``) are the names the *model* supplies for
    files that declare none (a model made from a Gymnasium environment knows that the agent saw the
    state index ``s`` and acted by action index); a file's own declaration comes first.

    What runs code: a ``path.py:NAME`` policy is the user's Python module, imported and called by design.
    No other format runs code from the file: an SB3 zip is read from its JSON and its weights
    (:mod:`rlverify.policies.sb3zip`), unless ``trust_code`` (``--trust-code``) asks for Stable-Baselines3's
    own loader, which unpickles and can run code. ``timeout``: seconds one call of the policy may take
    (``--policy-timeout``; None or 0: no limit; see :func:`~rlverify.policies.base.run_policy_code`).
    """
    timeout = check_timeout(timeout, "timeout")
    policy = _load(spec, features, actions, output, dict(defaults or {}), trust_code)
    if isinstance(policy, BasePolicy):
        policy.timeout = timeout
        policy.from_file = True  # its code's failures are the file's: PolicyErrors, exit code 2
    return policy


def _load(spec: str, features: Sequence[str] | None, actions: Sequence[str] | None, output: str | None,
          defaults: dict[str, Sequence[str]], trust_code: bool) -> Policy:
    for what, names in (("--features", features), ("--actions", actions)):
        if names is not None and not is_name_list(list(names)):
            raise PolicyError(f"{what}: expected a list of names, got {names!r}")
    if ".py:" in spec:
        file, _, name = spec.rpartition(":")
        return _load_python(Path(file), name, features, actions, output, defaults)
    path = Path(spec)
    if not path.is_file():
        raise InputFileError(f"{path}: policy file not found (expected {SPEC_HELP})")
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return OnnxPolicy(path, features=features, actions=actions, output=output, defaults=defaults)
    if suffix == ".json":
        policy = TablePolicy.from_json(path)
        declaration(str(path), "the table", {"features": features, "actions": actions, "output": output},
                    {"features": policy.features, "actions": policy.actions, "output": "probabilities"})
        return policy
    if suffix in (".pt", ".pth", ".zip"):
        if suffix == ".zip":
            feats, acts, _, meta = _sidecar(path, features, actions, "probabilities", defaults, output_known=True)
            policy = SB3Policy(path, feats, acts, trust_code=trust_code)
            declaration(str(path), f"its {policy.algorithm} model", {"output": output}, {"output": policy.output})
            policy.training = _recorded(meta)
            return policy
        from rlverify.policies.adapters import _import

        torch = _import("torch", "torch")
        feats, acts, output, meta = _sidecar(path, features, actions, output, defaults)
        try:
            module = torch.jit.load(str(path), map_location="cpu")
        except Exception as exc:
            raise InputFileError(f"{path}: not a TorchScript module ({exc.__class__.__name__}); save with torch.jit.save") from None
        policy = TorchPolicy(module, feats, acts, output=output, name=str(path))
        policy.training = _recorded(meta)
        return policy
    if suffix == ".py":
        raise InputFileError(f"{path}: a Python policy is given as FILE.py:NAME, NAME being the callable "
                             f"(e.g. {path}:pi)")
    raise InputFileError(f"{path}: unknown policy format '{suffix}' (expected {SPEC_HELP})")


def load_network_policy(spec: str, *, features: Sequence[str] | None = None, actions: Sequence[str] | None = None,
                        output: str | None = None) -> Policy:
    """:func:`load_policy` for an engine that bounds the policy's network (the abstraction engine).

    The same policy as :func:`load_policy`; its network is ``policy.network()``. When a network
    file's declaration is incomplete (no names, no output kind), the file is also read as a bare
    network (:func:`~rlverify.policies.mlp.load_network`), so that one error names every fix: the
    missing declaration and what in the network cannot be bounded (a non-ReLU layer, ...).

    Raises:
        PolicyError: as :func:`load_policy`, with the network's problems added.
    """
    try:
        return load_policy(spec, features=features, actions=actions, output=output)
    except PolicyError as exc:
        path = Path(spec)
        if ".py:" in spec or path.suffix.lower() not in (".onnx", ".pt", ".pth"):
            raise
        from rlverify.policies.mlp import load_network

        try:  # the file is read a second time, on this error path only
            load_network(path)
        except (PolicyError, InputFileError) as network_exc:
            raise PolicyError(f"{spec}: cannot be bounded as given", [str(exc), str(network_exc)]) from None
        raise


def _sidecar(path: Path, features, actions, output: str | None, defaults: Mapping[str, Sequence[str]], *,
             output_known: bool = False) -> tuple[list[str], list[str], str, dict[str, Any]]:
    """Names and output kind of a TorchScript module or SB3 zip: its sidecar ``FILE.json``'s, else the options',
    else ``defaults``; an option contradicting the sidecar is refused (``output_known``: the file itself says what
    it outputs (an SB3 zip: its algorithm), the sidecar's ``output`` is not read)."""
    side = path.with_name(path.name + ".json")
    meta = read_sidecar(side) if side.is_file() else {}
    given = declaration(str(path), str(side), {"features": features, "actions": actions,
                                               "output": None if output_known else output},
                        {"features": meta.get("features"), "actions": meta.get("actions"),
                         "output": None if output_known else meta.get("output")})
    feats = list(given["features"] or defaults.get("features") or [])
    acts = list(given["actions"] or defaults.get("actions") or [])
    if not feats or not acts:
        raise PolicyError(f"{path}: features/actions unknown; pass --features and --actions or write {side} "
                          '({"features": [...], "actions": [...]}; rlverify.gym.save_policy_metadata writes it)')
    kind = output if output_known else given["output"]
    if kind is None:
        raise PolicyError(f"{path}: what the network outputs is unknown; pass --output logits|probabilities|q-values "
                          f'or add "output" to {side}')
    return feats, acts, kind, meta


def read_sidecar(side: Path) -> dict[str, Any]:
    """A policy sidecar (``model.zip.json``, ``module.pt.json``), its fields checked: ``features``/``actions`` lists of
    names, ``output`` one of the output kinds, ``benchmark`` a string, ``params`` an object.

    Raises:
        InputFileError: not a JSON object. PolicyError: a field of the wrong type (each named).
    """
    meta = _read_json(side)
    if not isinstance(meta, dict):
        raise InputFileError(f"{side}: expected a JSON object with {', '.join(SIDECAR_KEYS)}, got {_json_type(meta)}")
    problems = []
    for key in ("features", "actions"):
        if key in meta and not is_name_list(meta[key]):
            problems.append(f"'{key}' must be a list of names (strings), got {_json_type(meta[key])}")
    if "output" in meta and meta["output"] not in OUTPUT_KINDS:
        problems.append(f"'output' must be one of {', '.join(repr(k) for k in OUTPUT_KINDS)}, got {_json_type(meta['output'])}")
    if meta.get("benchmark") is not None and not isinstance(meta["benchmark"], str):
        problems.append(f"'benchmark' must be a string, got {_json_type(meta['benchmark'])}")
    if meta.get("params") is not None and not isinstance(meta["params"], dict):
        problems.append(f"'params' must be an object, got {_json_type(meta['params'])}")
    if problems:
        raise PolicyError(f"{side}: invalid policy sidecar", problems)
    return meta


def _recorded(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where a sidecar says the policy was trained (``benchmark``, ``params``), or None."""
    out = {k: meta[k] for k in ("benchmark", "params") if meta.get(k) is not None}
    return out or None


def policy_warnings(policy: Any, target: Any = None, *, unavailable: str | None = None) -> list[str]:
    """What the user should know before trusting a verification of ``policy`` on ``target``.

    * the policy records (ONNX ``rlverify.training``, or a sidecar's ``benchmark``/``params``) that
      it was trained on another benchmark, or with other parameters/constants/environment arguments
      than ``target`` has (its features may then mean something else: an Avoid policy trained on a
      4x4 grid, verified on a 2x2 one);
    * a MaskablePPO policy verified with ``unavailable='stall'``: its mask is the model's action
      availability, so ``renormalize`` is the policy as trained.

    Args:
        policy: a loaded policy (adapters carry ``training`` and ``maskable``; others give no warning).
        target: a :class:`rlverify.resolve.Target` (or a model made by
            :func:`rlverify.models.from_gymnasium`); None skips the parameter check.
        unavailable: the ``unavailable`` setting of the verification.

    Returns:
        one message per problem (empty when there is nothing to say).
    """
    out: list[str] = []
    name = getattr(policy, "name", "the policy")
    recorded = getattr(policy, "training", None)
    if target is not None and isinstance(recorded, Mapping):
        bench, params = _target_identity(target)
        trained_on, trained_params = recorded.get("benchmark"), recorded.get("params")
        if bench and trained_on and trained_on != bench:
            out.append(f"{name} was trained on {trained_on}, not on {bench}: its features and actions may mean "
                       "something else here")
        elif isinstance(trained_params, Mapping) and (bench is None or trained_on == bench):
            differ = sorted(k for k in set(trained_params) | set(params)
                            if not _same_value(trained_params.get(k), params.get(k)))
            if differ:
                was = ", ".join(f"{k}={trained_params.get(k, '(default)')}" for k in differ)
                now = ", ".join(f"{k}={params.get(k, '(default)')}" for k in differ)
                out.append(f"{name} was trained with {was}; it is verified with {now}: the result is about a "
                           "policy used outside the setting it was trained for")
    if getattr(policy, "maskable", False) and unavailable == "stall":
        out.append(f"{name} is a MaskablePPO policy: its action mask is the model's action availability, so "
                   "--unavailable renormalize gives the policy as trained (masked); with 'stall' the mass its "
                   "unmasked network puts on unavailable actions goes to the 'stalled' sink")
    return out


def _target_identity(target: Any) -> tuple[str | None, dict[str, Any]]:
    """``(benchmark id or gym:ID or None, parameters)`` of a resolved target or a model."""
    from rlverify.models.symbolic import parse_constants

    bench = getattr(target, "benchmark", None)
    if bench is not None:
        return bench.id, dict(bench.parameters)
    model = getattr(target, "model", target)
    if getattr(model, "env_id", ""):
        return f"gym:{model.env_id}", dict(model.env_kwargs)
    constants = getattr(target, "constants", None) or getattr(model, "constants", None) or ""
    return None, dict(parse_constants(constants) if isinstance(constants, str) else constants)


def _same_value(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a).lower() == str(b).lower()


def _load_python(file: Path, name: str, features, actions, output: str | None,
                 defaults: Mapping[str, Sequence[str]]) -> Policy:
    """The callable ``name`` of the user's module ``file`` as a policy; the module's FEATURES/ACTIONS/OUTPUT are its
    declaration (see :func:`~rlverify.policies.adapters.declaration`). Whatever the module's objects raise while
    they are read (a FEATURES whose ``__iter__`` fails, ...) is a :class:`PolicyError`."""
    try:
        module = import_python_file(file, "policy module")
    except RlverifyError:
        raise
    except Exception as exc:  # noqa: BLE001 - the import's own error report failed (an exception whose __str__ raises)
        cause = exc.__context__ if exc.__context__ is not None else exc
        raise PolicyError(f"{file}: importing the policy module failed: {exception_text(cause)}") from None
    try:
        fn, declared = _declared(module, file, name)
    except RlverifyError:
        raise
    except Exception as exc:  # noqa: BLE001 - the module's own objects (list subclasses, properties) raised
        raise PolicyError(f"{file}: reading the policy module's {name}, FEATURES, ACTIONS and OUTPUT failed: "
                          f"{exception_text(exc)}") from None
    given = declaration(f"{file}:{name}", "the module's FEATURES/ACTIONS/OUTPUT",
                        {"features": features, "actions": actions, "output": output}, declared)
    feats = list(given["features"] or defaults.get("features") or [])
    acts = list(given["actions"] or defaults.get("actions") or [])
    missing = [n for n, v in (("FEATURES", feats), ("ACTIONS", acts)) if not v]
    if missing:
        raise PolicyError(f"{file}: module must define {' and '.join(missing)} (lists of names) or pass --features/--actions")
    return CallablePolicy(fn, feats, acts, output=given["output"] or "probabilities", name=f"{file}:{name}")


def _declared(module: Any, file: Path, name: str) -> tuple[Any, dict[str, Any]]:
    """The callable ``name`` of ``module`` and its declaration (FEATURES and ACTIONS as lists of plain strings,
    OUTPUT; None where absent), checked. The module's objects are the user's code: this may raise anything."""
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        raise PolicyError(f"{file}: defines no callable '{name}'")
    problems = []
    declared: dict[str, Any] = {}
    for attr, key in (("FEATURES", "features"), ("ACTIONS", "actions")):
        value = getattr(module, attr, None)
        if value is None:
            declared[key] = None
        elif not is_name_list(value):
            problems.append(f"{attr} must be a list of names (strings), got {type(value).__name__} {_short(value)}")
        else:
            declared[key] = [str.__str__(v) for v in value]  # plain strings, read once
    output = getattr(module, "OUTPUT", None)
    declared["output"] = None if output is None or not isinstance(output, str) else str.__str__(output)
    if output is not None and declared["output"] not in OUTPUT_KINDS:
        problems.append(f"OUTPUT must be one of {', '.join(repr(k) for k in OUTPUT_KINDS)}, got {_short(output)}")
    if problems:
        raise PolicyError(f"{file}: invalid policy module", problems)
    return fn, declared


def _short(value: Any) -> str:
    return safe_repr(value)
