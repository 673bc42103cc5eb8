"""TorchScript / ``torch.nn.Module`` policies (optional extra ``torch``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlverify.choices import OutputKind
from rlverify.errors import PolicyError, require
from rlverify.policies.base import BasePolicy
from rlverify.policies.formats import check_output_kind
from rlverify.policies.mlp import MLP, mlp_from_torch
from rlverify.policies.outputs import as_distribution, to_probabilities
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, check_threads
from rlverify.policies.torch_runtime import device_of, eval_mode, limit_torch_threads


class TorchPolicy(BasePolicy):
    """A ``torch.nn.Module`` mapping ``(N, d)`` float32 tensors to ``output`` (optional extra ``torch``).

    Its :meth:`network` is read from a ``Sequential`` of ``Linear`` and ``ReLU`` layers (plain or TorchScript).
    Making one limits torch to ``threads`` threads (:func:`limit_torch_threads`: process-global).

    The module is evaluated in eval mode (no dropout, batch norm's running statistics), and left in the mode it
    was in after each call: a module still being trained is not switched out of training mode.
    """

    no_network = None
    output: OutputKind
    threads: int
    input_dtype = np.float32

    def __init__(
        self,
        module: Any,
        features: Sequence[str],
        actions: Sequence[str],
        *,
        output: str = "logits",
        name: str = "torch policy",
        threads: int = DEFAULT_POLICY_THREADS,
    ) -> None:
        super().__init__(features, actions, name=name)
        self.threads = check_threads(threads, "threads")
        self._torch = require("torch", "torch", purpose="a TorchScript policy")
        limit_torch_threads(self._torch, self.threads)
        self._module = module
        self.output = check_output_kind(output, name)

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:
        torch = self._torch

        def run() -> Any:
            with torch.no_grad(), eval_mode(self._module):
                out = self._module(torch.as_tensor(states, dtype=torch.float32, device=device_of(self._module)))
            if not isinstance(out, torch.Tensor):
                raise PolicyError(f"{self.name}: the module returned a {type(out).__name__}, not a tensor of (N, |A|) outputs")
            if out.is_complex():  # .double() would drop the imaginary parts
                raise PolicyError(
                    f"{self.name}: output has complex numbers (a tensor of {out.dtype}); a policy gives "
                    "real probabilities, logits or Q-values (the imaginary parts are not dropped)"
                )
            return out.detach().cpu().double().numpy()

        return self._run_code(run)

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        return to_probabilities(self._network_outputs(states), self.output)

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        return as_distribution(self._network_outputs(states), self.output)

    def _read_network(self) -> MLP:
        return mlp_from_torch(self._module, name=self.name)
