"""A chain on disk partitioned across Ray actors (``--chain-dir DIR --backend ray``).

The chain's rows are cut into consecutive partitions of about equal transitions; each actor reads its partition's
rows from the chain directory once and holds them (a CSR in its process: 12 bytes per transition on its node). A
product is one ``@`` per actor on the vector shipped once (``ray.put``); the driver concatenates the parts in row
order. Each row's sum is scipy's CSR product of that row, as in the local run, so the values are bit-identical
whatever the number of actors. The chain directory must be readable at the same path on every node (a shared file
system, or one machine).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.arrays import distinct
from rlverify.backends import BackendError, BackendOptions, import_ray, open_backend
from rlverify.exact.ondisk import RowBlocks

__all__ = ["RayRows"]


class _Partition:
    """A Ray actor holding rows ``indptr`` (a slice of the chain's) of the chain in ``where``."""

    def __init__(self, where: str, indptr: np.ndarray, vptr: np.ndarray, sink: int | None, columns: int) -> None:
        self.rows = RowBlocks(Path(where), indptr, vptr, sink=sink, columns=columns).load()

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.rows @ x

    def memory(self) -> dict[str, Any]:
        """This actor's node, process and peak resident size (bytes)."""
        import ray  # lazy: ray, start-up

        return {
            "node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "transitions": int(self.rows.nnz),
        }


class RayRows:
    """The chain's matrix with its rows held by Ray actors (the checks' matrix: ``@``, ``shape``, ``nnz``,
    ``indptr``; ``local``: the chain on this machine's disk, for what reads the blocks itself)."""

    def __init__(self, local: RowBlocks, backend: BackendOptions, partitions: int | None = None) -> None:
        open_backend(backend)  # connects (or starts Ray here), with the backend's bounded waits and messages
        ray = self._ray = import_ray(backend)
        self.local = local
        self.shape, self.nnz, self.indptr, self.dtype = local.shape, local.nnz, local.indptr, local.dtype
        n = local.shape[0]
        parts = partitions or max(1, int(ray.cluster_resources().get("CPU", 1)))
        want = local.indptr[0] + (local.nnz * np.arange(1, parts)) // parts
        cuts = distinct(np.r_[0, np.searchsorted(local.indptr, want).clip(0, n), n])
        actor = ray.remote(num_cpus=0)(_Partition).options(scheduling_strategy="SPREAD")
        self.rows = list(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True))
        self.actors = [
            actor.remote(str(local.where), local.indptr[r0 : r1 + 1], local.vptr[r0 : r1 + 1], local.sink, n)
            for r0, r1 in self.rows
        ]

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """``(n,)``: one product per actor on ``x`` (shipped once), concatenated in row order."""
        ray = self._ray
        try:
            ref = ray.put(np.ascontiguousarray(x, dtype=np.float64))
            return np.concatenate(ray.get([a.matvec.remote(ref) for a in self.actors]))
        except ray.exceptions.RayError as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            raise BackendError(
                f"a Ray actor holding rows of the chain failed ({type(exc).__name__}: {first}); the result would be "
                "incomplete, so there is none (check the nodes' memory and that --chain-dir is readable on every "
                "node, or use --backend local)"
            ) from None

    def memory(self) -> list[dict[str, Any]]:
        """Each actor's node, process, peak resident size (bytes) and transitions held."""
        return list(self._ray.get([a.memory.remote() for a in self.actors]))

    def close(self) -> None:
        """End the actors (their rows are freed)."""
        for a in self.actors:
            self._ray.kill(a)
        self.actors = []
