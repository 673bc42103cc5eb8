"""How rlverify runs a torch module: with a bounded number of threads, in eval mode, on its own device.

Imports nothing but the standard library: the caller passes the ``torch`` module it has imported.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

#: torch's own module (untyped here: torch is an optional extra, imported by the caller)
Torch = Any
#: a ``torch.nn.Module`` (untyped, as above)
TorchModule = Any


def limit_torch_threads(torch: Torch, threads: int) -> None:
    """Let torch compute with ``threads`` intra-op threads and one inter-op thread, as onnxruntime does for an
    :class:`~rlverify.policies.onnx_policy.OnnxPolicy`.

    torch's thread counts are process-global: every torch computation in this process (another policy, a user's
    training loop) uses them from then on. Left at torch's default (one thread per core), each call of a policy's
    small network on a batch wakes a thread per core; on a machine whose cores are busy (the simulator's own
    threads, other processes) that made an SB3 policy's simulation 15-45x slower. The inter-op count can be set only
    before torch's first parallel work; where that has passed it is left as it is (it serves only
    ``torch.jit.fork``, which rlverify does not use).
    """
    torch.set_num_threads(threads)
    if torch.get_num_interop_threads() != 1:
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError as exc:  # "cannot set number of interop threads after parallel work has started"
            log.debug("torch's inter-op threads stay at %d: %s", torch.get_num_interop_threads(), exc)


@contextmanager
def eval_mode(module: TorchModule) -> Iterator[None]:
    """``module`` in eval mode inside the block, and back in the mode it was in after it."""
    was = bool(getattr(module, "training", False))
    module.train(False)
    try:
        yield
    finally:
        if was:
            module.train(True)


def device_of(module: TorchModule) -> Any:
    """The device of ``module``'s first parameter (CPU for a module without parameters)."""
    try:
        return next(iter(module.parameters())).device
    except (StopIteration, AttributeError, TypeError):
        return "cpu"


def limit_blas_threads(threads: int) -> None:
    """Let numpy's BLAS (OpenBLAS) compute with ``threads`` threads, as :func:`limit_torch_threads` does for torch: a
    network evaluated in numpy float32 (an SB3 zip read without running code) multiplies small matrices, and
    OpenBLAS's default (a thread per core, spinning between calls) made 1,000 CartPole episodes 6.5x slower
    (0.58 s -> 3.78 s) next to the environment's own numpy work. Process-global, like torch's setting."""
    from threadpoolctl import threadpool_limits  # lazy: only for a numpy-evaluated network

    threadpool_limits(limits=threads, user_api="blas")
