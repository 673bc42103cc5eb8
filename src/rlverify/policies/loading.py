"""Load a policy from a command-line spec (the top of :mod:`rlverify.policies`), and say what to know before
trusting a verification of it (:func:`policy_warnings`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from rlverify.choices import OutputKind, Unavailable
from rlverify.errors import InputFileError, PolicyError, RlverifyError, exception_text, require
from rlverify.models.userfile import import_python_file
from rlverify.policies import sb3zip
from rlverify.policies.adapters import CallablePolicy, ObjectKind, TablePolicy, object_kind
from rlverify.policies.base import BasePolicy, Policy
from rlverify.policies.check import as_policy
from rlverify.policies.continuous import ContinuousPolicy
from rlverify.policies.formats import (
    check_name_options,
    declaration,
    module_declaration,
    read_json,
    read_sidecar,
    recorded_training,
    sidecar_declaration,
)
from rlverify.policies.mlp import load_network
from rlverify.policies.onnx_policy import OnnxPolicy
from rlverify.policies.sb3_policy import SB3Policy, has_box_actions, load_sb3_continuous, model_name, sb3_algorithm
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, DEFAULT_POLICY_TIMEOUT, SPEC_HELP, check_threads, check_timeout
from rlverify.policies.torch_policy import TorchPolicy
from rlverify.policies.tree import is_tree_data, tree_from_data

#: A network given in memory (an SB3 model, a ``torch.nn.Module``, ONNX bytes or an ``onnx.ModelProto``; see
#: :func:`~rlverify.policies.adapters.object_kind`): untyped, as their packages are optional extras.
NetworkObject = Any

#: What :func:`load_policy` takes: a policy file or spec, or a network in memory.
PolicySpec = str | PathLike[str] | NetworkObject

#: What :func:`load_policy` takes, for messages.
ACCEPTED = (
    "a policy file or spec (str or Path), a Stable-Baselines3 model (PPO, A2C, DQN, sb3-contrib MaskablePPO), "
    "a torch.nn.Module, or ONNX bytes (or an onnx.ModelProto)"
)


def load_policy(
    spec: PolicySpec,
    *,
    features: Sequence[str] | None = None,
    actions: Sequence[str] | None = None,
    output: str | None = None,
    defaults: Mapping[str, Sequence[str]] | None = None,
    trust_code: bool = False,
    timeout: float | None = DEFAULT_POLICY_TIMEOUT,
    threads: int = DEFAULT_POLICY_THREADS,
) -> BasePolicy:
    """Load a policy from ``spec`` (see :data:`SPEC_HELP`).

    ``features``/``actions``/``output`` (``logits``, ``probabilities`` or ``q-values``) give what the
    file does not declare; one that contradicts the file's declaration (a module's FEATURES/ACTIONS/OUTPUT,
    a table's names, ONNX metadata, a sidecar) is refused, never applied silently
    (:func:`~rlverify.policies.formats.declaration`). A network file must say what its outputs are (metadata, sidecar
    or ``output``): softmax applied to outputs that already are probabilities would give a valid-looking wrong policy.
    ``defaults`` (``{"features": [...], "actions": [...]}``) are the names the *model* supplies for
    files that declare none (a model made from a Gymnasium environment knows that the agent saw the
    state index ``s`` and acted by action index); a file's own declaration comes first.

    What runs code: a ``path.py:NAME`` policy is the user's Python module, imported and called by design.
    No other format runs code from the file: an SB3 zip is read from its JSON and its weights
    (:mod:`rlverify.policies.sb3zip`), unless ``trust_code`` (``--trust-code``) asks for Stable-Baselines3's
    own loader, which unpickles and can run code. ``timeout``: seconds one call of the policy, and importing a
    ``path.py:NAME`` policy's module, may take (``--policy-timeout``; None or 0: no limit; see
    :func:`~rlverify.policies.base.run_policy_code`).

    ``threads``: the threads a network's runtime computes one batch with (``--policy-threads``; default 1, see
    :data:`~rlverify.policies.settings.DEFAULT_POLICY_THREADS`): onnxruntime's, for this policy's session; torch's
    (TorchScript and SB3 policies) for the whole process, as torch's setting is process-global
    (:func:`~rlverify.policies.torch_runtime.limit_torch_threads`). Python policies and tables run as they are.

    ``spec`` may also be the policy itself, in memory (nothing is written to disk; see :func:`load_object`): a
    Stable-Baselines3 model object (PPO, A2C, DQN, MaskablePPO; e.g. one being trained: it is read at each
    evaluation as it is then), a ``torch.nn.Module`` (``features``, ``actions`` and ``output`` given, or the model's
    ``defaults``), or the bytes of an ONNX file (or an ``onnx.ModelProto``). A file of each kind is read and then
    taken by the same adapter, so a model and its saved file are the same policy. What the in-memory object's code
    raises passes through unchanged (it is the caller's own object), under ``timeout`` as a file's code.

    Raises:
        PolicyError: ``spec`` is none of these (one line naming what was given and what is taken), or its
            declaration does not fit (see above). InputFileError: a file that cannot be read.
    """
    timeout = check_timeout(timeout, "timeout")
    threads = check_threads(threads, "threads")
    if isinstance(spec, (str, PathLike)):
        policy = _load(str(spec), features, actions, output, dict(defaults or {}), trust_code, threads, timeout)
        policy.from_file = True  # its code's failures are the file's: PolicyErrors, exit code 2
    else:
        policy = load_object(spec, features=features, actions=actions, output=output, defaults=defaults, threads=threads)
    policy.timeout = timeout
    return policy


def load_object(
    obj: NetworkObject,
    *,
    features: Sequence[str] | None = None,
    actions: Sequence[str] | None = None,
    output: str | None = None,
    defaults: Mapping[str, Sequence[str]] | None = None,
    threads: int = DEFAULT_POLICY_THREADS,
    name: str | None = None,
) -> BasePolicy:
    """The policy ``obj`` given in memory (see :func:`object_kind`), by the adapter its file form is loaded with;
    ``features``/``actions``/``output`` and ``defaults`` as in :func:`load_policy` (an SB3 model's output is its
    algorithm's; an ONNX model's metadata is its declaration). ``name`` names it in messages and results.

    Raises:
        PolicyError: not such an object (one line: what was given, what is taken), or names that do not fit.
    """
    check_name_options(features, actions)
    threads = check_threads(threads, "threads")
    network = object_kind(obj)
    if network is None:
        raise _not_loadable(obj)
    given = _Given(features, actions, output, dict(defaults or {}), threads, name)
    return _OBJECT_LOADERS[network](obj, given)


@dataclass(frozen=True)
class _Given:
    """What :func:`load_object` was given besides the object."""

    features: Sequence[str] | None
    actions: Sequence[str] | None
    output: str | None
    defaults: dict[str, Sequence[str]]
    threads: int
    name: str | None

    def names(self) -> tuple[list[str], list[str]]:
        """The features and actions given, else the model's defaults."""
        feats = list(self.features or self.defaults.get("features") or [])
        return feats, list(self.actions or self.defaults.get("actions") or [])


def _onnx_object(obj: NetworkObject, given: _Given) -> BasePolicy:
    return OnnxPolicy(
        obj,
        features=given.features,
        actions=given.actions,
        output=given.output,
        defaults=given.defaults,
        threads=given.threads,
        name=given.name,
    )


def _sb3_object(obj: NetworkObject, given: _Given) -> BasePolicy:
    shown = given.name or model_name(obj)
    if has_box_actions(obj):  # SAC, TD3, DDPG, PPO/A2C with a Gaussian head: actions, not probabilities
        policy = load_sb3_continuous(obj, given.features or given.defaults.get("features"), threads=given.threads, name=shown)
        _continuous_declaration(policy, given.actions, given.output, "the model's action space")
        return policy
    algorithm_output = OutputKind.Q_VALUES if sb3_algorithm(obj) == "DQN" else OutputKind.LOGITS
    declaration(shown, "the model's algorithm", {"output": given.output}, {"output": algorithm_output})
    feats, acts = given.names()
    _need_names(shown, feats, acts)
    return SB3Policy(obj, feats, acts, threads=given.threads, name=given.name)


def _sb3_policy_object(obj: NetworkObject, given: _Given) -> BasePolicy:
    raise PolicyError(
        f"{type(obj).__name__} is a Stable-Baselines3 model's .policy; pass the model itself (the PPO, A2C, DQN or "
        "MaskablePPO object), whose algorithm says how its outputs are read"
    )


def _torch_object(obj: NetworkObject, given: _Given) -> BasePolicy:
    shown = given.name or f"{type(obj).__name__} module (in memory)"
    feats, acts = given.names()
    _need_names(shown, feats, acts)
    if given.output is None:
        raise PolicyError(f"{shown}: what the module outputs is unknown; pass output='logits', 'probabilities' or 'q-values'")
    return TorchPolicy(obj, feats, acts, output=given.output, name=shown, threads=given.threads)


#: How :func:`load_object` takes each kind of in-memory network.
_OBJECT_LOADERS: dict[ObjectKind, Callable[[NetworkObject, _Given], BasePolicy]] = {
    ObjectKind.ONNX: _onnx_object,
    ObjectKind.SB3: _sb3_object,
    ObjectKind.SB3_POLICY: _sb3_policy_object,
    ObjectKind.TORCH: _torch_object,
}


def _not_loadable(obj: object) -> PolicyError:
    """The refusal of an object that is no in-memory network (a class, a policy object, anything else)."""
    shown = "a class" if isinstance(obj, type) else f"a {type(obj).__module__}.{type(obj).__qualname__}"
    hint = (
        " (a policy object or function of your own: rlverify.policies.as_policy)"
        if callable(obj) or isinstance(obj, BasePolicy)
        else ""
    )
    return PolicyError(f"load_policy was given {shown}; it takes {ACCEPTED}{hint}")


def _need_names(name: str, features: Sequence[str], actions: Sequence[str]) -> None:
    missing = [k for k, v in (("features", features), ("actions", actions)) if not v]
    if missing:
        raise PolicyError(
            f"{name}: its {' and '.join(missing)} are unknown; pass {' and '.join(f'{m}=[...]' for m in missing)}"
        )


def _load(
    spec: str,
    features: Sequence[str] | None,
    actions: Sequence[str] | None,
    output: str | None,
    defaults: dict[str, Sequence[str]],
    trust_code: bool,
    threads: int = DEFAULT_POLICY_THREADS,
    timeout: float | None = DEFAULT_POLICY_TIMEOUT,
) -> BasePolicy:
    check_name_options(features, actions)
    if ".py:" in spec:
        file, _, name = spec.rpartition(":")
        return _load_python(Path(file), name, features, actions, output, defaults, timeout)
    path = Path(spec)
    if not path.is_file():
        raise InputFileError(f"{path}: policy file not found (expected {SPEC_HELP})")
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return OnnxPolicy(path, features=features, actions=actions, output=output, defaults=defaults, threads=threads)
    if suffix == ".json":
        data = read_json(path)
        if is_tree_data(data):  # a decision tree (rlverify explain --out tree.json), else a table
            tree = tree_from_data(data, str(path))
            declaration(
                str(path),
                "the tree",
                {"features": features, "actions": actions, "output": output},
                {"features": list(tree.features), "actions": list(tree.actions), "output": "probabilities"},
            )
            return tree
        table = TablePolicy.from_json(path)
        declaration(
            str(path),
            "the table",
            {"features": features, "actions": actions, "output": output},
            {"features": table.features, "actions": table.actions, "output": "probabilities"},
        )
        return table
    if suffix == ".zip":
        return _load_sb3(path, features, actions, output, defaults, trust_code, threads)
    if suffix in (".pt", ".pth"):
        return _load_torchscript(path, features, actions, output, defaults, threads)
    if suffix == ".py":
        raise InputFileError(f"{path}: a Python policy is given as FILE.py:NAME, NAME being the callable (e.g. {path}:pi)")
    raise InputFileError(f"{path}: unknown policy format '{suffix}' (expected {SPEC_HELP})")


def _load_sb3(
    path: Path,
    features: Sequence[str] | None,
    actions: Sequence[str] | None,
    output: str | None,
    defaults: Mapping[str, Sequence[str]],
    trust_code: bool,
    threads: int = DEFAULT_POLICY_THREADS,
) -> BasePolicy:
    """An SB3 zip: names from its sidecar or the options; its output kind is its algorithm's. A zip with a Box action
    space is a :class:`~rlverify.policies.continuous.ContinuousPolicy` (features from the sidecar, the options, the
    defaults, else ``obs[i]``; actions ``a[i]``)."""
    if sb3zip.has_box_actions(sb3zip.read_data(path)):
        return _load_sb3_continuous(path, features, actions, output, defaults, trust_code, threads)
    feats, acts, _, meta = sidecar_declaration(path, features, actions, "probabilities", defaults, output_known=True)
    policy = SB3Policy(path, feats, acts, trust_code=trust_code, threads=threads)
    declaration(str(path), f"its {policy.algorithm} model", {"output": output}, {"output": policy.output})
    policy.training = recorded_training(meta)
    return policy


def _load_sb3_continuous(
    path: Path,
    features: Sequence[str] | None,
    actions: Sequence[str] | None,
    output: str | None,
    defaults: Mapping[str, Sequence[str]],
    trust_code: bool,
    threads: int,
) -> ContinuousPolicy:
    """An SB3 zip over a Box action space: features from its sidecar, the options or the defaults (else ``obs[i]``)."""
    side = path.with_name(path.name + ".json")
    meta = read_sidecar(side) if side.is_file() else {}
    given = declaration(
        str(path),
        str(side),
        {"features": features, "actions": actions},
        {"features": meta.get("features"), "actions": meta.get("actions")},
    )
    feats = given["features"] or defaults.get("features") or None
    policy = load_sb3_continuous(path, feats, trust_code=trust_code, threads=threads)
    _continuous_declaration(policy, given["actions"], output, "its Box action space")
    policy.training = recorded_training(meta)
    return policy


def _continuous_declaration(policy: ContinuousPolicy, actions: Sequence[str] | None, output: str | None, where: str) -> None:
    """Refuse actions other than the policy's ``a[i]`` and any output kind (a continuous policy gives actions)."""
    if output is not None:
        raise PolicyError(
            f"{policy.name}: --output {output} does not apply: a continuous policy ({policy.kind}) gives actions, not "
            "logits, probabilities or Q-values; drop --output"
        )
    declaration(policy.name, where, {"actions": list(actions) if actions else None}, {"actions": list(policy.actions)})


def _load_torchscript(
    path: Path,
    features: Sequence[str] | None,
    actions: Sequence[str] | None,
    output: str | None,
    defaults: Mapping[str, Sequence[str]],
    threads: int = DEFAULT_POLICY_THREADS,
) -> TorchPolicy:
    """A TorchScript module: names and output kind from its sidecar or the options."""
    torch = require("torch", "torch", purpose="a TorchScript policy")
    feats, acts, kind, meta = sidecar_declaration(path, features, actions, output, defaults)
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:
        raise InputFileError(
            f"{path}: not a TorchScript module ({exc.__class__.__name__}); save with torch.jit.save"
        ) from None
    policy = TorchPolicy(module, feats, acts, output=kind, name=str(path), threads=threads)
    policy.training = recorded_training(meta)
    return policy


def load_network_policy(
    spec: str, *, features: Sequence[str] | None = None, actions: Sequence[str] | None = None, output: str | None = None
) -> BasePolicy:
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
        try:  # the file is read a second time, on this error path only
            load_network(path)
        except (PolicyError, InputFileError) as network_exc:
            raise PolicyError(f"{spec}: cannot be bounded as given", [str(exc), str(network_exc)]) from None
        raise


def policy_warnings(policy: Policy, target: Any = None, *, unavailable: str | None = None) -> list[str]:
    """What the user should know before trusting a verification of ``policy`` on ``target``.

    * the policy records (ONNX ``rlverify.training``, or a sidecar's ``benchmark``/``params``) that
      it was trained on another benchmark, or with other parameters/constants/environment arguments
      than ``target`` has (its features may then mean something else: an Avoid policy trained on a
      4x4 grid, verified on a 2x2 one);
    * a MaskablePPO policy verified with ``unavailable='stall'``: its mask is the model's action
      availability, so ``renormalize`` is the policy as trained.

    Args:
        policy: a loaded policy (its ``training`` and ``maskable``: :class:`~rlverify.policies.base.BasePolicy`; a
            wrapper's are the wrapped policy's); another policy object is read through :func:`as_policy`.
        target: a :class:`rlverify.resolve.Target` (or a model made by
            :func:`rlverify.models.from_gymnasium`); None skips the parameter check.
        unavailable: the ``unavailable`` setting of the verification.

    Returns:
        one message per problem (empty when there is nothing to say).
    """
    adapter = policy if isinstance(policy, BasePolicy) else as_policy(policy)
    name = adapter.unwrapped.name  # a wrapper's (a shield's) training and mask are the wrapped policy's
    out = _training_warnings(adapter, name, target) if target is not None else []
    if adapter.maskable and unavailable == Unavailable.STALL:
        out.append(
            f"{name} is a MaskablePPO policy: its action mask is the model's action availability, so "
            "--unavailable renormalize gives the policy as trained (masked); with 'stall' the mass its "
            "unmasked network puts on unavailable actions goes to the 'stalled' sink"
        )
    return out


def _training_warnings(policy: BasePolicy, name: str, target: Any) -> list[str]:
    """The warning that ``policy`` was trained on another benchmark than ``target``, or with other parameters."""
    recorded = policy.training
    if not isinstance(recorded, Mapping):
        return []
    bench, params = _target_identity(target)
    trained_on, trained_params = recorded.get("benchmark"), recorded.get("params")
    if bench and trained_on and trained_on != bench:
        return [f"{name} was trained on {trained_on}, not on {bench}: its features and actions may mean something else here"]
    if not isinstance(trained_params, Mapping) or (bench is not None and trained_on != bench):
        return []
    return _parameter_warnings(name, trained_params, params)


def _parameter_warnings(name: str, trained: Mapping[str, Any], params: Mapping[str, Any]) -> list[str]:
    """The warning that the policy was trained with other parameters than it is verified with."""
    differ = sorted(k for k in set(trained) | set(params) if not _same_value(trained.get(k), params.get(k)))
    if not differ:
        return []
    was = ", ".join(f"{k}={trained.get(k, '(default)')}" for k in differ)
    now = ", ".join(f"{k}={params.get(k, '(default)')}" for k in differ)
    return [
        f"{name} was trained with {was}; it is verified with {now}: the result is about a "
        "policy used outside the setting it was trained for"
    ]


def _target_identity(target: Any) -> tuple[str | None, dict[str, Any]]:
    """``(benchmark id or gym:ID or None, parameters)`` of a resolved target or a model."""
    from rlverify.models.symbolic import parse_constants  # lazy: models.symbolic (Storm's model layer), start-up

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


def _load_python(
    file: Path,
    name: str,
    features: Sequence[str] | None,
    actions: Sequence[str] | None,
    output: str | None,
    defaults: Mapping[str, Sequence[str]],
    timeout: float | None = DEFAULT_POLICY_TIMEOUT,
) -> BasePolicy:
    """The callable ``name`` of the user's module ``file`` as a policy (a continuous one when the module declares
    ACTION_LOW and ACTION_HIGH: :class:`~rlverify.policies.continuous.CallableContinuousPolicy`); the module's
    FEATURES/ACTIONS/OUTPUT are its declaration (see :func:`~rlverify.policies.formats.declaration`). Whatever the
    module's objects raise while they are read (a FEATURES whose ``__iter__`` fails, ...) is a :class:`PolicyError`.
    Importing the module may take ``timeout`` seconds, as one call of the policy (``--policy-timeout``)."""
    fn, declared = _read_python(file, name, timeout)
    low, high = declared.pop("low"), declared.pop("high")
    if low is not None and high is not None:
        features = features or declared.get("features") or defaults.get("features")
        return _continuous_python(file, name, fn, features, actions, output, declared, low, high)
    given = declaration(
        f"{file}:{name}",
        "the module's FEATURES/ACTIONS/OUTPUT",
        {"features": features, "actions": actions, "output": output},
        declared,
    )
    feats = list(given["features"] or defaults.get("features") or [])
    acts = list(given["actions"] or defaults.get("actions") or [])
    missing = [n for n, v in (("FEATURES", feats), ("ACTIONS", acts)) if not v]
    if missing:
        raise PolicyError(f"{file}: module must define {' and '.join(missing)} (lists of names) or pass --features/--actions")
    return CallablePolicy(fn, feats, acts, output=given["output"] or OutputKind.PROBABILITIES, name=f"{file}:{name}")


def _continuous_python(
    file: Path,
    name: str,
    fn: Callable[..., Any],
    features: Sequence[str] | None,
    actions: Sequence[str] | None,
    output: str | None,
    declared: dict[str, Any],
    low: list[float],
    high: list[float],
) -> BasePolicy:
    """A module declaring ACTION_LOW/ACTION_HIGH: ``fn(obs, noise)`` gives Box actions; its ACTIONS (if any) must be
    ``a[0]``, ... (the simulator's names), OUTPUT and --output do not apply."""
    from rlverify.policies.continuous import CallableContinuousPolicy, action_names

    where = f"{file}:{name}"
    if len(low) != len(high):
        raise PolicyError(f"{where}: ACTION_LOW has {len(low)} numbers and ACTION_HIGH {len(high)}: one per action dimension")
    if output is not None or declared.get("output") is not None:
        raise PolicyError(f"{where}: a continuous policy (ACTION_LOW/ACTION_HIGH) gives actions; OUTPUT/--output do not apply")
    names = list(action_names(len(low)))
    for given in (actions, declared.get("actions")):
        if given is not None and list(given) != names:
            raise PolicyError(
                f"{where}: a continuous policy's actions are {names} (one per ACTION_LOW entry), got {list(given)}"
            )
    feats = declaration(where, "the module's FEATURES", {"features": features}, {"features": declared.get("features")})
    if not feats["features"]:  # (the model's own names when neither the file nor --features gives them)
        raise PolicyError(f"{file}: module must define FEATURES (a list of names) or pass --features")
    return CallableContinuousPolicy(fn, list(feats["features"]), low, high, name=where)


def _read_python(file: Path, name: str, timeout: float | None) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The callable ``name`` of the user's module ``file`` and the module's declaration, its errors as
    :class:`PolicyError` s."""
    try:
        module = import_python_file(file, "policy module", timeout=timeout, option="--policy-timeout")
    except RlverifyError:
        raise
    except Exception as exc:  # the import's own error report failed (an exception whose __str__ raises)
        cause = exc.__context__ if exc.__context__ is not None else exc
        raise PolicyError(f"{file}: importing the policy module failed: {exception_text(cause)}") from None
    try:
        return module_declaration(module, file, name)
    except RlverifyError:
        raise
    except Exception as exc:  # the module's own objects (list subclasses, properties) raised
        raise PolicyError(
            f"{file}: reading the policy module's {name}, FEATURES, ACTIONS and OUTPUT failed: {exception_text(exc)}"
        ) from None
