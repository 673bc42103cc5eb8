"""Load a policy from a command-line spec."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path

from rlverify.errors import InputFileError, PolicyError
from rlverify.policies.adapters import CallablePolicy, OnnxPolicy, SB3Policy, TablePolicy, TorchPolicy
from rlverify.policies.base import Policy

SPEC_HELP = (
    "path.py:NAME (module defining FEATURES, ACTIONS and callable NAME), file.onnx, table.json, "
    "module.pt (TorchScript; features/actions from --features/--actions or file.pt.json), "
    "model.zip (Stable-Baselines3; same)"
)


def load_policy(spec: str, *, features: Sequence[str] | None = None, actions: Sequence[str] | None = None,
                output: str | None = None) -> Policy:
    """Load a policy from ``spec`` (see :data:`SPEC_HELP`).

    ``features``/``actions``/``output`` (``logits``, ``probabilities`` or ``q-values``) override the
    file's own. A network file must say what its outputs are (metadata, sidecar or ``output``):
    softmax applied to outputs that already are probabilities would give a valid-looking wrong policy.
    """
    if ".py:" in spec:
        file, _, name = spec.rpartition(":")
        return _load_python(Path(file), name, features, actions)
    path = Path(spec)
    if not path.is_file():
        raise InputFileError(f"{path}: policy file not found (expected {SPEC_HELP})")
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return OnnxPolicy(path, features=features, actions=actions, output=output)
    if suffix == ".json":
        policy = TablePolicy.from_json(path)
        if features or actions:
            raise PolicyError(f"{path}: a table policy declares its own features and actions; drop --features/--actions")
        return policy
    if suffix in (".pt", ".pth", ".zip"):
        if suffix == ".zip":
            feats, acts, _ = _sidecar(path, features, actions, "probabilities")
            return SB3Policy(path, feats, acts)
        from rlverify.policies.adapters import _import

        torch = _import("torch", "torch")
        feats, acts, output = _sidecar(path, features, actions, output)
        try:
            module = torch.jit.load(str(path), map_location="cpu")
        except Exception as exc:
            raise InputFileError(f"{path}: not a TorchScript module ({exc.__class__.__name__}); save with torch.jit.save") from None
        return TorchPolicy(module, feats, acts, output=output, name=str(path))
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


def _sidecar(path: Path, features, actions, output: str | None) -> tuple[list[str], list[str], str]:
    side = path.with_name(path.name + ".json")
    meta = {}
    if side.is_file():
        try:
            meta = json.loads(side.read_text())
        except json.JSONDecodeError as exc:
            raise InputFileError(f"{side}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    feats = list(features or meta.get("features") or [])
    acts = list(actions or meta.get("actions") or [])
    if not feats or not acts:
        raise PolicyError(f"{path}: features/actions unknown; pass --features and --actions or write {side} "
                          '({"features": [...], "actions": [...]})')
    kind = output or meta.get("output")
    if kind is None:
        raise PolicyError(f"{path}: what the network outputs is unknown; pass --output logits|probabilities|q-values "
                          f'or add "output" to {side}')
    return feats, acts, kind


def _load_python(file: Path, name: str, features, actions) -> Policy:
    if not file.is_file():
        raise InputFileError(f"{file}: policy module not found")
    spec = importlib.util.spec_from_file_location(f"rlverify_user_policy_{abs(hash(str(file.resolve())))}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise InputFileError(f"{file}: importing the policy module failed: {exc.__class__.__name__}: {exc}") from None
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        raise PolicyError(f"{file}: defines no callable '{name}'")
    feats = list(features or getattr(module, "FEATURES", []) or [])
    acts = list(actions or getattr(module, "ACTIONS", []) or [])
    missing = [n for n, v in (("FEATURES", feats), ("ACTIONS", acts)) if not v]
    if missing:
        raise PolicyError(f"{file}: module must define {' and '.join(missing)} (lists of names) or pass --features/--actions")
    output = getattr(module, "OUTPUT", "probabilities")
    return CallablePolicy(fn, feats, acts, output=output, name=f"{file}:{name}")
