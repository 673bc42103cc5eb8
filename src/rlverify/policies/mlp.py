"""Feed-forward ReLU networks as plain numpy weights, read from and written to policy files.

The ONNX files rlverify writes are self-describing (see :mod:`rlverify.policies.formats` for the
metadata keys) and use only ``Gemm`` and ``Relu`` nodes. This module is the one place that reads a
network's weights: :func:`mlp_from_onnx` (Gemm/MatMul/Add/Relu graphs) and :func:`mlp_from_torch`
(``Sequential`` of ``Linear`` and ``ReLU``), used by the policies' ``network()`` methods (the
abstraction engine bounds what they return) and by :func:`load_network` for bare files. What is
read is checked against the file's own runtime by :func:`cross_check_network`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import InputFileError, PolicyError, require
from rlverify.files import publishing
from rlverify.policies.formats import META_ACTIONS, META_FEATURES, META_OUTPUT, META_TRAINING, read_sidecar, softmax
from rlverify.policies.settings import onnx_runtime

#: What :func:`mlp_from_torch` reads, for error messages.
TORCH_SHAPE = "a torch.nn.Sequential alternating Linear and ReLU layers, ending with the output Linear"

#: Largest difference :func:`cross_check_network` accepts: between action probabilities for logits,
#: relative to ``1 + max |output|`` of the row otherwise (float32 inference vs float64 weights).
CROSS_CHECK_TOLERANCE = 1e-4


@dataclass(frozen=True)
class MLP:
    """ReLU network ``x -> W_k(...relu(W_1 x + b_1)...) + b_k``.

    Attributes:
        weights: per layer, a float64 array of shape ``(out, in)``.
        biases: per layer, a float64 array of shape ``(out,)``.
    """

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]

    def __post_init__(self) -> None:
        if len(self.weights) != len(self.biases) or not self.weights:
            raise PolicyError("MLP: need one bias per weight matrix and at least one layer")
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if w.ndim != 2 or b.shape != (w.shape[0],):
                raise PolicyError(f"MLP layer {i}: weight {w.shape} and bias {b.shape} do not fit")
            if i and w.shape[1] != self.weights[i - 1].shape[0]:
                raise PolicyError(f"MLP layer {i}: input size {w.shape[1]} != previous output {self.weights[i - 1].shape[0]}")

    @property
    def sizes(self) -> tuple[int, ...]:
        """Layer widths, input first, e.g. ``(2, 64, 64, 3)``."""
        return (self.weights[0].shape[1], *(w.shape[0] for w in self.weights))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Outputs ``(N, out)`` for inputs ``(N, in)`` (float64)."""
        h = np.asarray(x, dtype=np.float64)
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w.T
            h += b  # in place: the same sums as h @ w.T + b, one temporary less
            if i < len(self.weights) - 1:
                np.maximum(h, 0.0, out=h)
        return h

    @classmethod
    def random(cls, sizes: Sequence[int], *, seed: int) -> MLP:
        """He-initialised random network with the given layer widths (for tests and benchmarks)."""
        rng = np.random.default_rng(seed)
        ws, bs = [], []
        for n_in, n_out in pairwise(sizes):
            ws.append(rng.normal(0.0, np.sqrt(2.0 / n_in), size=(n_out, n_in)))
            bs.append(rng.normal(0.0, 0.1, size=n_out))
        return cls(tuple(ws), tuple(bs))


def save_mlp_onnx(
    path: str | Path,
    mlp: MLP,
    *,
    features: Sequence[str],
    actions: Sequence[str],
    output: str = "logits",
    training: Mapping[str, Any] | None = None,
    force: bool = False,
) -> Path:
    """Write ``mlp`` as a self-describing ONNX policy file (float32 weights), atomically and over an existing file
    only with ``force`` (:mod:`rlverify.files`). Returns the path."""
    import onnx  # lazy: onnx, start-up
    from onnx import TensorProto, helper  # lazy: onnx, start-up

    if mlp.sizes[0] != len(features) or mlp.sizes[-1] != len(actions):
        raise PolicyError(f"network sizes {mlp.sizes} do not fit {len(features)} features and {len(actions)} actions")
    nodes, inits = _onnx_layers(mlp)
    graph = helper.make_graph(
        nodes,
        "policy",
        [helper.make_tensor_value_info("state", TensorProto.FLOAT, ["N", len(features)])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", len(actions)])],
        initializer=inits,
    )
    model = helper.make_model(graph, producer_name="rlverify", opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    meta = {META_FEATURES: json.dumps(list(features)), META_ACTIONS: json.dumps(list(actions)), META_OUTPUT: output}
    if training is not None:
        meta[META_TRAINING] = json.dumps(_training_facts(training), sort_keys=True)
    onnx.helper.set_model_props(model, meta)
    onnx.checker.check_model(model)
    with publishing(path, force=force) as tmp:
        onnx.save(model, str(tmp))
    return Path(path)


def _onnx_layers(mlp: MLP) -> tuple[list[Any], list[Any]]:
    """The ONNX nodes (Gemm, Relu between) and float32 initializers of ``mlp``, from input ``state`` to ``output``."""
    from onnx import helper, numpy_helper  # lazy: onnx, start-up

    nodes, inits = [], []
    prev = "state"
    last = len(mlp.weights) - 1
    for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases, strict=True)):
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"W{i}"))
        inits.append(numpy_helper.from_array(b.astype(np.float32), f"b{i}"))
        out = "output" if i == last else f"h{i}"
        gemm_out = out if i == last else f"z{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"b{i}"], [gemm_out], transB=1))
        if i < last:
            nodes.append(helper.make_node("Relu", [gemm_out], [out]))
        prev = out
    return nodes, inits


def _training_facts(training: Mapping[str, Any]) -> dict[str, Any]:
    """How the weights were trained, with the versions of what produced them (for reproducing them)."""
    from importlib.metadata import PackageNotFoundError, version  # lazy: importlib.metadata costs ~20 ms of start-up

    facts = dict(training)
    if "versions" not in facts:
        facts["versions"] = {}
        for pkg in ("rlverify", "torch", "numpy"):
            try:
                facts["versions"][pkg] = version(pkg)
            except PackageNotFoundError:
                pass
    return facts


def mlp_from_onnx(source: str | Path | Any, *, name: str | None = None) -> MLP:
    """Read the weights of an ONNX ReLU network: a chain of affine layers (Gemm, or MatMul with or
    without Add) with one Relu between consecutive layers and none after the last (the outputs).

    Every node must take the previous node's output, so the MLP read is the function the file
    computes (a Relu on the outputs, two affine layers in a row, or a branch are refused).

    Args:
        source: an ONNX file, or an ``onnx.ModelProto`` already loaded (not read again).
        name: how errors name the network (default: the path).

    Returns:
        The :class:`MLP` from the ``(N, d)`` graph input to the ``(N, out)`` graph output (float64).

    Raises:
        PolicyError: naming the first node that is not of that shape.
    """
    from onnx import numpy_helper  # lazy: onnx, start-up

    model, shown = _onnx_source(source, name)
    init = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in init]
    if len(inputs) != 1 or len(model.graph.output) != 1:
        raise PolicyError(
            f"{shown}: expected one input and one output, got {len(inputs)} inputs and {len(model.graph.output)} outputs"
        )
    chain = _OnnxChain(shown, init, inputs[0])
    for node in model.graph.node:
        chain.read(node)
    return chain.mlp(model.graph.output[0].name)


def _onnx_source(source: str | Path | Any, name: str | None) -> tuple[Any, str]:
    """The ``onnx.ModelProto`` of a file (read) or given, and how errors name it."""
    if not isinstance(source, (str, Path)):
        return source, name or "ONNX model"
    import onnx  # lazy: onnx, start-up

    try:
        model = onnx.load(str(source))
    except Exception as exc:
        raise InputFileError(f"{Path(source)}: not a readable ONNX model ({exc})") from None
    return model, name or str(Path(source))


#: What :func:`mlp_from_onnx` reads, for error messages.
_ONNX_SHAPE = "a chain of affine layers (Gemm, MatMul[+Add]) with one Relu between consecutive layers"

_FLOAT_TYPES = (1, 11)  # onnx.TensorProto.FLOAT, DOUBLE


@dataclass
class _OnnxChain:
    """The layers of an ONNX graph read so far, node by node (:meth:`read`), as :func:`mlp_from_onnx` reads them.

    ``current`` is the tensor the last node produced; ``last`` what produced it: ``input``, ``affine`` (a MatMul,
    awaiting an optional Add), ``bias`` or ``relu``.
    """

    name: str
    init: dict[str, np.ndarray]
    current: str
    last: str = "input"
    ws: list[np.ndarray] = field(default_factory=list)
    bs: list[np.ndarray] = field(default_factory=list)

    def refuse(self, node: Any, why: str) -> PolicyError:
        return PolicyError(
            f"{self.name}: node '{node.name or node.op_type}' ({node.op_type}) {why}; rlverify reads {_ONNX_SHAPE}"
        )

    def read(self, node: Any) -> None:
        """Take one node: an affine layer, its bias, a Relu, or an operator that keeps the values; else refuse it."""
        op = node.op_type
        data_inputs = [i for i in node.input if i and i not in self.init]
        if data_inputs != [self.current]:
            raise self.refuse(node, f"does not take the previous node's output '{self.current}' alone")
        steps: dict[str, Callable[[Any], None]] = {
            "Gemm": self._affine,
            "MatMul": self._affine,
            "Add": self._add,
            "Relu": self._relu,
        }
        if op in steps:
            steps[op](node)
        elif not _keeps_values(node):
            raise PolicyError(
                f"{self.name}: layer '{node.name or op}' uses operator {op}, which rlverify cannot read "
                "as a ReLU network (supported: Gemm, MatMul, Add, Relu)"
            )
        self.current = node.output[0]

    def _affine(self, node: Any) -> None:
        if self.last in ("affine", "bias"):
            raise self.refuse(node, "follows an affine layer without a Relu between")
        if node.input[0] != self.current or node.input[1] not in self.init:
            raise self.refuse(node, "needs its weight as an initializer")
        if node.op_type == "MatMul":
            self.ws.append(self.init[node.input[1]].T)
            self.bs.append(np.zeros(self.ws[-1].shape[0]))
            self.last = "affine"
            return
        self._gemm(node)

    def _gemm(self, node: Any) -> None:
        """A Gemm node ``x W^T + b`` (transB=1; or ``x W + b``) as one layer with its bias."""
        attrs = {a.name: helper_attr(a) for a in node.attribute}
        w = self.init[node.input[1]]
        if attrs.get("transB", 0) != 1:
            w = w.T
        if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
            raise self.refuse(node, "uses transA/alpha/beta")
        b = self.init[node.input[2]] if len(node.input) > 2 and node.input[2] else np.zeros(w.shape[0])
        if b.size not in (1, w.shape[0]):
            raise self.refuse(node, f"has a bias of shape {b.shape} for {w.shape[0]} outputs")
        self.ws.append(w)
        self.bs.append(np.broadcast_to(b.reshape(-1), (w.shape[0],)).copy())
        self.last = "bias"

    def _add(self, node: Any) -> None:
        if self.last != "affine":
            raise self.refuse(node, "is not the bias of a MatMul")
        found = next((i for i in node.input if i in self.init), None)
        if found is None:
            raise self.refuse(node, "needs its bias as an initializer")
        bias = self.init[found]
        self.bs[-1] = self.bs[-1] + np.broadcast_to(bias.reshape(-1), self.bs[-1].shape)
        self.last = "bias"

    def _relu(self, node: Any) -> None:
        if self.last not in ("affine", "bias"):
            raise self.refuse(node, "does not follow an affine layer")
        self.last = "relu"

    def mlp(self, output: str) -> MLP:
        """The network read, once every node is read; ``output``: the graph's output tensor."""
        if self.last == "relu":
            raise PolicyError(
                f"{self.name}: the network ends in a Relu; rlverify reads the last affine layer (no Relu "
                "after it) as the output: export the logits"
            )
        if not self.ws:
            raise PolicyError(f"{self.name}: no affine layer found; rlverify reads {_ONNX_SHAPE}")
        if self.current != output:
            raise PolicyError(f"{self.name}: the graph output '{output}' is not the last layer's output")
        return MLP(tuple(self.ws), tuple(self.bs))


def _keeps_values(node: Any) -> bool:
    """Whether an ONNX node passes its input on unchanged (up to float rounding, covered by the cross-check):
    Identity, Flatten of an ``(N, d)`` input on axis 1, a Cast to float32/float64."""
    attrs = {a.name: helper_attr(a) for a in node.attribute}
    return (
        node.op_type == "Identity"
        or (node.op_type == "Flatten" and attrs.get("axis", 1) == 1)
        or (node.op_type == "Cast" and attrs.get("to") in _FLOAT_TYPES)
    )


def helper_attr(attr: Any) -> Any:
    """The value of an ONNX node attribute."""
    from onnx import helper  # lazy: onnx, start-up

    return helper.get_attribute_value(attr)


def _linear_weights(linear: Any) -> tuple[np.ndarray, np.ndarray]:
    """A torch ``Linear`` layer's ``(out, in)`` weight and ``(out,)`` bias (zeros without one), float64 copies."""
    w = linear.weight.detach().double().cpu().numpy().copy()
    b = getattr(linear, "bias", None)
    return w, (b.detach().double().cpu().numpy().copy() if b is not None else np.zeros(w.shape[0]))


def mlp_from_torch(module: Any, *, name: str = "torch module") -> MLP:
    """Read the weights of a ``torch.nn.Sequential`` of ``Linear`` and ``ReLU`` layers (plain or TorchScript).

    Nested ``Sequential`` blocks are read in order; one ReLU must separate consecutive Linear layers
    and none may follow the last (the outputs).

    Returns:
        The :class:`MLP` from ``(N, d)`` inputs to the ``(N, out)`` outputs of the last Linear (float64).

    Raises:
        PolicyError: naming the first layer that is not of that shape.
    """
    if _torch_kind(module) != "Sequential":
        raise PolicyError(
            f"{name}: the module is a {_torch_kind(module)}, not a Sequential; rlverify reads {TORCH_SHAPE} "
            "(wrap the layers in torch.nn.Sequential, without pre- or post-processing in forward)"
        )
    weights, biases = [], []
    expect_linear = True
    for layer, child in _torch_layers(module, ""):
        layer_type = _torch_kind(child)
        if layer_type == "Linear" and expect_linear:
            w, b = _linear_weights(child)
            weights.append(w)
            biases.append(b)
            expect_linear = False
        elif layer_type == "ReLU" and not expect_linear:
            expect_linear = True
        else:
            raise PolicyError(
                f"{name}: layer '{layer}' is {layer_type}"
                f"{' after a Linear without a ReLU between' if layer_type == 'Linear' else ''}, which rlverify "
                f"cannot read as a ReLU network (supported: {TORCH_SHAPE})"
            )
    if not weights:
        raise PolicyError(f"{name}: no Linear layers found; rlverify reads {TORCH_SHAPE}")
    if expect_linear:
        raise PolicyError(
            f"{name}: the network ends in a ReLU; rlverify reads the last Linear (no ReLU after it) as "
            "the output: export the logits"
        )
    return MLP(tuple(weights), tuple(biases))


def _torch_kind(module: Any) -> str:
    # a TorchScript module keeps its Python class name in original_name
    return str(getattr(module, "original_name", None) or type(module).__name__)


def _torch_layers(module: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for child_name, child in module.named_children():
        if _torch_kind(child) == "Sequential":
            yield from _torch_layers(child, f"{prefix}{child_name}.")
        else:
            yield f"{prefix}{child_name}", child


def load_network(path: str | Path, *, n_actions: int | None = None) -> MLP:
    """The ReLU logit network of a bare ONNX or TorchScript file, read without a policy declaration.

    For files whose names are not known; a loaded policy gives its network by ``policy.network()``.
    The file must not declare another output kind than ``logits`` (ONNX metadata ``rlverify.output``
    or the ``.pt.json`` sidecar). The weights read are cross-checked against onnxruntime / torch on
    :func:`default_check_sample` inputs.

    Args:
        path: ``.onnx`` or TorchScript ``.pt``/``.pth`` file.
        n_actions: if given, the number of outputs the network must have.

    Returns:
        The :class:`MLP` from ``(N, d)`` features to ``(N, |A|)`` logits.

    Raises:
        PolicyError: unsupported layer (named), another output kind, or a wrong output count.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"{path}: network file not found")
    read = _torchscript_network if path.suffix.lower() in (".pt", ".pth") else _onnx_network
    mlp, kind, run = read(path)
    if kind != "logits":
        raise PolicyError(
            f"{path}: the network outputs {kind!r}, not logits; the abstraction engine bounds a softmax "
            "over logits: export the logits layer"
        )
    if n_actions is not None and mlp.sizes[-1] != n_actions:
        raise PolicyError(f"{path}: network has {mlp.sizes[-1]} outputs but the benchmark has {n_actions} actions")
    sample = default_check_sample(mlp.sizes[0])
    cross_check_network(mlp, sample, run(sample), output="logits", name=str(path))
    return mlp


#: A network file's own runtime: ``(N, d)`` inputs to its ``(N, out)`` float64 outputs.
Runtime = Callable[[np.ndarray], np.ndarray]


def _torchscript_network(path: Path) -> tuple[MLP, str, Runtime]:
    """The weights of a TorchScript file, its output kind (its sidecar's; default logits) and its runtime."""
    torch = require("torch", "torch", purpose="a TorchScript network")
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:
        raise InputFileError(
            f"{path}: not a TorchScript module ({exc.__class__.__name__}); save with torch.jit.save"
        ) from None
    side = path.with_name(path.name + ".json")
    kind = read_sidecar(side).get("output", "logits") if side.is_file() else "logits"
    mlp = mlp_from_torch(module, name=str(path))

    def run(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return module(torch.as_tensor(x, dtype=torch.float32)).double().numpy()

    return mlp, kind, run


def _onnx_network(path: Path) -> tuple[MLP, str, Runtime]:
    """The weights of an ONNX file, its output kind (its metadata's; default logits) and its runtime."""
    import onnx  # lazy: onnx, start-up

    ort = onnx_runtime()

    try:
        model = onnx.load(str(path))
    except Exception as exc:
        raise InputFileError(f"{path}: not a readable ONNX model ({exc.__class__.__name__}: {exc})") from None
    kind = {p.key: p.value for p in model.metadata_props}.get(META_OUTPUT, "logits")
    mlp = mlp_from_onnx(model, name=str(path))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])

    def run(x: np.ndarray) -> np.ndarray:
        return np.asarray(session.run(None, {session.get_inputs()[0].name: x.astype(np.float32)})[0], dtype=np.float64)

    return mlp, kind, run


def default_check_sample(n_features: int) -> np.ndarray:
    """``(512, n_features)`` inputs for :func:`cross_check_network`: seeded normal draws at scales 1 and 10."""
    rng = np.random.default_rng(0)
    return np.vstack([rng.normal(size=(256, n_features)), 10.0 * rng.normal(size=(256, n_features))])


def cross_check_network(mlp: MLP, sample: np.ndarray, outputs: np.ndarray, *, output: str, name: str) -> None:
    """Check that the weights read compute what the file computes.

    Args:
        mlp: the network read.
        sample: ``(N, d)`` inputs.
        outputs: ``(N, |A|)`` outputs of the file's own runtime (onnxruntime / torch) on ``sample``.
        output: what the outputs are; ``logits`` are compared as softmax probabilities (the policy they
            define; a constant shift does not matter), others as they are, relative to the row's scale.
        name: how the error names the network.

    Raises:
        PolicyError: the largest difference exceeds :data:`CROSS_CHECK_TOLERANCE`.
    """
    ours = mlp(sample)
    theirs = np.asarray(outputs, dtype=np.float64)
    if theirs.shape != ours.shape:
        raise PolicyError(f"{name}: the network read gives outputs of shape {ours.shape}, the file {theirs.shape}")
    if output == "logits":
        err = float(np.abs(softmax(ours) - softmax(theirs)).max(initial=0.0))
        what = "probability"
    else:
        scale = 1.0 + np.abs(theirs).max(axis=1, keepdims=True)
        err = float((np.abs(ours - theirs) / scale).max(initial=0.0))
        what = "relative output"
    if not err <= CROSS_CHECK_TOLERANCE:  # also NaN
        raise PolicyError(
            f"{name}: the weights read as a Linear/ReLU network do not reproduce the file's outputs "
            f"(max {what} difference {err:.3g} on {len(sample)} inputs); rlverify bounds only plain "
            "Linear/ReLU networks"
        )
