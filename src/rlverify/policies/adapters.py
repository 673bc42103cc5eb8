"""Policy adapters of what the user writes in Python: plain callables, tables and a user's own policy object
(:class:`ProtocolPolicy`); and what kind of network an in-memory object is (:func:`object_kind`).

Network adapters have their own modules: :mod:`~rlverify.policies.onnx_policy`,
:mod:`~rlverify.policies.torch_policy`, :mod:`~rlverify.policies.sb3_policy`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.choices import OutputKind
from rlverify.errors import PolicyError
from rlverify.policies.base import BasePolicy, numeric_output
from rlverify.policies.formats import check_output_kind, read_table
from rlverify.policies.mlp import MLP
from rlverify.policies.outputs import as_distribution, greedy_columns, to_probabilities


class ObjectKind(StrEnum):
    """The kinds of in-memory network :func:`object_kind` tells apart."""

    SB3 = "sb3"
    SB3_POLICY = "sb3-policy"
    TORCH = "torch"
    ONNX = "onnx"


class CallablePolicy(BasePolicy):
    """Wrap ``fn(states: (N, d) array) -> (N, |A|) probabilities`` (or logits with ``output='logits'``)."""

    no_network = "a Python callable cannot be bounded; give an ONNX or TorchScript ReLU network (file.onnx, module.pt)"
    transient_input = False  # the function is the user's: it may keep the array it is given
    output: OutputKind

    def __init__(
        self,
        fn: Callable[[np.ndarray], Any],
        features: Sequence[str],
        actions: Sequence[str],
        *,
        output: str = "probabilities",
        name: str = "callable policy",
    ) -> None:
        super().__init__(features, actions, name=name)
        self._fn = fn
        self.output = check_output_kind(output, name)

    def _output(self, states: np.ndarray) -> np.ndarray:
        """The function's ``(N, |A|)`` outputs as float64 (its errors, a timeout or non-numbers: a PolicyError)."""
        return numeric_output(self._run_code(self._fn, states), self.name)

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return to_probabilities(self._output(states), self.output)

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        return as_distribution(self._output(states), self.output)

    def _greedy_columns(self, states: np.ndarray) -> np.ndarray | None:
        out = self._output(states)
        return greedy_columns(out) if out.shape == (len(states), len(self.actions)) else None


class TablePolicy(BasePolicy):
    """A finite table from feature valuations to distributions (its JSON file: see
    :func:`~rlverify.policies.formats.read_table`). Actions missing from a row get probability 0.
    """

    no_network = (
        "a table policy cannot be bounded (it gives distributions for listed states, not a network over "
        "regions); give an ONNX or TorchScript ReLU network (file.onnx, module.pt)"
    )

    def __init__(
        self,
        features: Sequence[str],
        actions: Sequence[str],
        table: Mapping[tuple[int, ...], Sequence[float]],
        *,
        default: Sequence[float] | None = None,
        name: str = "table policy",
    ) -> None:
        super().__init__(features, actions, name=name)
        self._table = {tuple(int(v) for v in k): numeric_output(p, name) for k, p in table.items()}
        self._default = None if default is None else numeric_output(default, name)

    @classmethod
    def from_json(cls, path: str | Path) -> TablePolicy:
        """Read a table policy file (:func:`~rlverify.policies.formats.read_table`), reporting every problem at once.

        Raises:
            InputFileError: not a readable JSON file. PolicyError: every problem of its contents, each named.
        """
        path = Path(path)
        file = read_table(path)
        return cls(file.features, file.actions, file.table, default=file.default, name=str(path))

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        out = np.empty((len(states), len(self.actions)))
        ints = np.rint(states).astype(np.int64)
        for i, row in enumerate(map(tuple, ints.tolist())):
            p = self._table.get(row)
            if p is None:
                if self._default is None:
                    raise PolicyError(
                        f"{self.name}: no entry for state "
                        f"{dict(zip(self.features, row, strict=True))} and no 'default' distribution"
                    )
                p = self._default
            out[i] = p
        return out


class ProtocolPolicy(BasePolicy):
    """A policy object of the user's own class (the :class:`~rlverify.policies.base.Policy` protocol: ``features``,
    ``actions``, ``action_probabilities``) as an adapter; made by :func:`~rlverify.policies.as_policy`.

    Its outputs are checked on every call like any adapter's, and it has a :attr:`name`: the object's own ``name``
    if that is a string, else its class name. What engines read besides the protocol is the object's own: its
    ``output``, ``training`` and ``maskable`` (copied when it has them), and its ``network()`` (what the abstraction
    engine bounds), unless it has none or its ``no_network`` says why not. Exceptions its code raises pass through
    unchanged, as for :class:`CallablePolicy`.

    Attributes:
        policy: the object wrapped.
    """

    transient_input = False  # the object is the user's: it may keep the array it is given

    def __init__(self, policy: Any, features: Sequence[str], actions: Sequence[str], *, name: str) -> None:
        super().__init__(features, actions, name=name)
        self.policy = policy
        for attr in ("output", "training", "maskable"):
            if hasattr(policy, attr):
                setattr(self, attr, getattr(policy, attr))
        reason = getattr(policy, "no_network", None)
        has_network = reason is None and callable(getattr(policy, "network", None))
        self.no_network = None if has_network else str(reason or "this policy exposes no network (method network() -> MLP)")

    @property
    def greedy(self) -> bool:
        """False: the object's probabilities are sampled from as they are, whatever its ``output`` says."""
        return False

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return self._run_code(self.policy.action_probabilities, states)

    def network(self, sample: np.ndarray | None = None) -> MLP:
        """The object's own ``network()`` (called with ``sample`` when one is given), or a :class:`PolicyError`
        saying why it has none."""
        if self.no_network is not None:
            raise PolicyError(f"{self.name}: {self.no_network}")
        return self.policy.network() if sample is None else self.policy.network(sample)


def object_kind(obj: Any) -> ObjectKind | None:
    """``sb3`` (a Stable-Baselines3 model), ``sb3-policy`` (an SB3 model's ``.policy``), ``torch`` (a
    ``torch.nn.Module``), ``onnx`` (bytes, or an ``onnx.ModelProto``) or None: the kind of in-memory network
    :func:`~rlverify.policies.loading.load_object` takes. None also for an object with ``features``, ``actions`` and
    ``action_probabilities`` of any class (a torch module among them): it is a policy object
    (:func:`~rlverify.policies.as_policy`). Imports nothing: an SB3 model or a torch module exists only once its
    package is imported."""
    if isinstance(obj, BasePolicy) or all(hasattr(obj, a) for a in ("features", "actions", "action_probabilities")):
        return None
    if _is_onnx(obj):
        return ObjectKind.ONNX
    sb3 = _sb3_kind(obj)
    if sb3 is not None:
        return sb3
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        return ObjectKind.TORCH
    return None


def _is_onnx(obj: Any) -> bool:
    """Whether ``obj`` is the bytes of an ONNX file or an ``onnx.ModelProto`` (onnx imported already)."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return True
    onnx = sys.modules.get("onnx")
    return onnx is not None and isinstance(obj, onnx.ModelProto)


def _sb3_kind(obj: Any) -> ObjectKind | None:
    """``sb3``/``sb3-policy`` for an SB3 model or its ``.policy`` (SB3 imported already), else None."""
    if sys.modules.get("stable_baselines3") is None:
        return None
    from stable_baselines3.common.base_class import BaseAlgorithm  # lazy: sb3, imported by the user already
    from stable_baselines3.common.policies import BasePolicy as SB3BasePolicy  # lazy: sb3, as above

    if isinstance(obj, BaseAlgorithm):
        return ObjectKind.SB3
    if isinstance(obj, SB3BasePolicy):
        return ObjectKind.SB3_POLICY
    return None
