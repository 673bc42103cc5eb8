"""Feed-forward ReLU networks as plain numpy weights, and their ONNX form.

The ONNX files rlverify writes are self-describing (see :mod:`rlverify.policies.adapters` for the
metadata keys) and use only ``Gemm`` and ``Relu`` nodes, so every engine can read the weights back
(:func:`mlp_from_onnx`) — the abstraction engine bounds them, the simulators run them in numpy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import InputFileError, PolicyError


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
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if w.ndim != 2 or b.shape != (w.shape[0],):
                raise PolicyError(f"MLP layer {i}: weight {w.shape} and bias {b.shape} do not fit")
            if i and w.shape[1] != self.weights[i - 1].shape[0]:
                raise PolicyError(f"MLP layer {i}: input size {w.shape[1]} != previous output {self.weights[i - 1].shape[0]}")

    @property
    def sizes(self) -> tuple[int, ...]:
        """Layer widths, input first, e.g. ``(2, 64, 64, 3)``."""
        return (self.weights[0].shape[1],) + tuple(w.shape[0] for w in self.weights)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Outputs ``(N, out)`` for inputs ``(N, in)`` (float64)."""
        h = np.asarray(x, dtype=np.float64)
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w.T + b
            if i < len(self.weights) - 1:
                np.maximum(h, 0.0, out=h)
        return h

    @classmethod
    def random(cls, sizes: Sequence[int], *, seed: int) -> MLP:
        """He-initialised random network with the given layer widths (for tests and benchmarks)."""
        rng = np.random.default_rng(seed)
        ws, bs = [], []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            ws.append(rng.normal(0.0, np.sqrt(2.0 / n_in), size=(n_out, n_in)))
            bs.append(rng.normal(0.0, 0.1, size=n_out))
        return cls(tuple(ws), tuple(bs))


def save_mlp_onnx(path: str | Path, mlp: MLP, *, features: Sequence[str], actions: Sequence[str],
                  output: str = "logits", training: Mapping[str, Any] | None = None) -> Path:
    """Write ``mlp`` as a self-describing ONNX policy file (float32 weights). Returns the path."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from rlverify.policies.adapters import META_ACTIONS, META_FEATURES, META_OUTPUT, META_TRAINING

    if mlp.sizes[0] != len(features) or mlp.sizes[-1] != len(actions):
        raise PolicyError(f"network sizes {mlp.sizes} do not fit {len(features)} features and {len(actions)} actions")
    nodes, inits = [], []
    prev = "state"
    for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases)):
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"W{i}"))
        inits.append(numpy_helper.from_array(b.astype(np.float32), f"b{i}"))
        out = "output" if i == len(mlp.weights) - 1 else f"h{i}"
        gemm_out = out if i == len(mlp.weights) - 1 else f"z{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"b{i}"], [gemm_out], transB=1))
        if i < len(mlp.weights) - 1:
            nodes.append(helper.make_node("Relu", [gemm_out], [out]))
        prev = out
    graph = helper.make_graph(
        nodes, "policy",
        [helper.make_tensor_value_info("state", TensorProto.FLOAT, ["N", len(features)])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", len(actions)])],
        initializer=inits,
    )
    model = helper.make_model(graph, producer_name="rlverify", opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    meta = {META_FEATURES: json.dumps(list(features)), META_ACTIONS: json.dumps(list(actions)), META_OUTPUT: output}
    if training is not None:
        facts = dict(training)
        if "versions" not in facts:  # what produced the weights, for reproducing them
            from importlib.metadata import PackageNotFoundError, version

            facts["versions"] = {}
            for pkg in ("rlverify", "torch", "numpy"):
                try:
                    facts["versions"][pkg] = version(pkg)
                except PackageNotFoundError:
                    pass
        meta[META_TRAINING] = json.dumps(facts, sort_keys=True)
    onnx.helper.set_model_props(model, meta)
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def mlp_from_onnx(path: str | Path) -> MLP:
    """Read the weights of an ONNX ReLU network: a chain of affine layers (Gemm, or MatMul with or
    without Add) with one Relu between consecutive layers and none after the last (the logits).

    Every node must take the previous node's output, so the MLP read is the function the file
    computes (a Relu on the logits, two affine layers in a row, or a branch are refused).

    Raises:
        PolicyError: naming the first node that is not of that shape.
    """
    import onnx
    from onnx import numpy_helper

    path = Path(path)
    try:
        model = onnx.load(str(path))
    except Exception as exc:
        raise InputFileError(f"{path}: not a readable ONNX model ({exc})") from None
    init = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in init]
    if len(inputs) != 1 or len(model.graph.output) != 1:
        raise PolicyError(f"{path}: expected one input and one output, got {len(inputs)} inputs and "
                          f"{len(model.graph.output)} outputs")
    current = inputs[0]
    shape = "a chain of affine layers (Gemm, MatMul[+Add]) with one Relu between consecutive layers"
    ws: list[np.ndarray] = []
    bs: list[np.ndarray] = []
    last = "input"  # what produced `current`: input, affine (awaiting an optional Add), bias, relu

    def refuse(node: Any, why: str) -> PolicyError:
        return PolicyError(f"{path}: node '{node.name or node.op_type}' ({node.op_type}) {why}; "
                           f"rlverify reads {shape}")

    for node in model.graph.node:
        op = node.op_type
        data_inputs = [i for i in node.input if i and i not in init]
        if data_inputs != [current]:
            raise refuse(node, f"does not take the previous node's output '{current}' alone")
        if op in ("Gemm", "MatMul"):
            if last in ("affine", "bias"):
                raise refuse(node, "follows an affine layer without a Relu between")
            if node.input[0] != current or node.input[1] not in init:
                raise refuse(node, "needs its weight as an initializer")
            if op == "Gemm":
                attrs = {a.name: helper_attr(a) for a in node.attribute}
                w = init[node.input[1]]
                if attrs.get("transB", 0) != 1:
                    w = w.T
                if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
                    raise refuse(node, "uses transA/alpha/beta")
                b = init[node.input[2]] if len(node.input) > 2 else np.zeros(w.shape[0])
                ws.append(w)
                bs.append(np.broadcast_to(b, (w.shape[0],)).copy())
                last = "bias"
            else:
                ws.append(init[node.input[1]].T)
                bs.append(np.zeros(ws[-1].shape[0]))
                last = "affine"
        elif op == "Add":
            if last != "affine":
                raise refuse(node, "is not the bias of a MatMul")
            bs[-1] = bs[-1] + np.broadcast_to(init[[i for i in node.input if i in init][0]].reshape(-1), bs[-1].shape)
            last = "bias"
        elif op == "Relu":
            if last not in ("affine", "bias"):
                raise refuse(node, "does not follow an affine layer")
            last = "relu"
        elif op in ("Identity", "Flatten", "Cast"):
            pass  # the same values
        else:
            raise PolicyError(f"{path}: layer '{node.name or op}' uses operator {op}, which rlverify cannot read "
                              "as a ReLU network (supported: Gemm, MatMul, Add, Relu)")
        current = node.output[0]
    if last == "relu":
        raise PolicyError(f"{path}: the network ends in a Relu; rlverify reads the logits layer (affine, no Relu) "
                          "as the output")
    if not ws:
        raise PolicyError(f"{path}: no affine layer found; rlverify reads {shape}")
    if current != model.graph.output[0].name:
        raise PolicyError(f"{path}: the graph output '{model.graph.output[0].name}' is not the last layer's output")
    return MLP(tuple(ws), tuple(bs))


def helper_attr(attr: Any) -> Any:
    from onnx import helper

    return helper.get_attribute_value(attr)
