"""Load a policy from a command-line spec."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlverify.errors import InputFileError, PolicyError
from rlverify.models.userfile import import_python_file
from rlverify.policies.adapters import CallablePolicy, OnnxPolicy, SB3Policy, TablePolicy, TorchPolicy
from rlverify.policies.base import Policy

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
                output: str | None = None, defaults: Mapping[str, Sequence[str]] | None = None) -> Policy:
    """Load a policy from ``spec`` (see :data:`SPEC_HELP`).

    ``features``/``actions``/``output`` (``logits``, ``probabilities`` or ``q-values``) override the
    file's own. A network file must say what its outputs are (metadata, sidecar or ``output``):
    softmax applied to outputs that already are probabilities would give a valid-looking wrong policy.
    ``defaults`` (``{"features": [...], "actions": [...]}``) are the names the *model* supplies for
    files that declare none (a model made from a Gymnasium environment knows that the agent saw the
    state index ``s`` and acted by action index); a file's own declaration comes first.
    """
    defaults = dict(defaults or {})
    if ".py:" in spec:
        file, _, name = spec.rpartition(":")
        return _load_python(Path(file), name, features, actions, defaults)
    path = Path(spec)
    if not path.is_file():
        raise InputFileError(f"{path}: policy file not found (expected {SPEC_HELP})")
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return OnnxPolicy(path, features=features, actions=actions, output=output, defaults=defaults)
    if suffix == ".json":
        policy = TablePolicy.from_json(path)
        if features or actions:
            raise PolicyError(f"{path}: a table policy declares its own features and actions; drop --features/--actions")
        return policy
    if suffix in (".pt", ".pth", ".zip"):
        if suffix == ".zip":
            feats, acts, _, meta = _sidecar(path, features, actions, "probabilities", defaults)
            policy = SB3Policy(path, feats, acts)
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


def _sidecar(path: Path, features, actions, output: str | None,
             defaults: Mapping[str, Sequence[str]]) -> tuple[list[str], list[str], str, dict[str, Any]]:
    side = path.with_name(path.name + ".json")
    meta: dict[str, Any] = {}
    if side.is_file():
        try:
            meta = json.loads(side.read_text())
        except json.JSONDecodeError as exc:
            raise InputFileError(f"{side}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
        if not isinstance(meta, dict):
            raise InputFileError(f"{side}: expected a JSON object with {', '.join(SIDECAR_KEYS)}")
    feats = list(features or meta.get("features") or defaults.get("features") or [])
    acts = list(actions or meta.get("actions") or defaults.get("actions") or [])
    if not feats or not acts:
        raise PolicyError(f"{path}: features/actions unknown; pass --features and --actions or write {side} "
                          '({"features": [...], "actions": [...]}; rlverify.gym.save_policy_metadata writes it)')
    kind = output or meta.get("output")
    if kind is None:
        raise PolicyError(f"{path}: what the network outputs is unknown; pass --output logits|probabilities|q-values "
                          f'or add "output" to {side}')
    return feats, acts, kind, meta


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


def _load_python(file: Path, name: str, features, actions, defaults: Mapping[str, Sequence[str]]) -> Policy:
    module = import_python_file(file, "policy module")
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        raise PolicyError(f"{file}: defines no callable '{name}'")
    feats = list(features or getattr(module, "FEATURES", []) or defaults.get("features") or [])
    acts = list(actions or getattr(module, "ACTIONS", []) or defaults.get("actions") or [])
    missing = [n for n, v in (("FEATURES", feats), ("ACTIONS", acts)) if not v]
    if missing:
        raise PolicyError(f"{file}: module must define {' and '.join(missing)} (lists of names) or pass --features/--actions")
    output = getattr(module, "OUTPUT", "probabilities")
    return CallablePolicy(fn, feats, acts, output=output, name=f"{file}:{name}")
