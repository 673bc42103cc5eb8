"""Template directions chosen automatically (``domain="auto"``).

Candidates, in order of priority: the normals of the unsafe set's constraints (a successor's distance to
the unsafe set is then exact along them), the left singular vectors and the real eigenvectors of the
affine parts of the dynamics on the initial region (the directions the dynamics stretch or keep), and
the principal directions of successors sampled from the initial region. A candidate nearly parallel to
the box axes or to one kept before (``|cos| > 0.98``) is dropped; at most ``extra`` are kept. The box
axes always come first, so the template bounds the state space whatever is added. Soundness never
depends on the choice: every template gives sound bounds; only their tightness and cost change.
"""

from __future__ import annotations

import numpy as np

from rlverify.models.continuous.base import ContinuousSystem

#: candidates closer than this (|cosine|) to a kept direction are dropped
PARALLEL = 0.98


def auto_directions(system: ContinuousSystem, lo: np.ndarray, hi: np.ndarray, *, extra: int = 4, seed: int = 0) -> np.ndarray:
    """Template directions ``(n + m, n)``, ``m <= extra``: the box axes, then the chosen candidates (unit length)."""
    candidates = _unsafe_rows(system) + _dynamics_directions(system, lo, hi) + _successor_directions(system, lo, hi, seed)
    return np.array(_distinct(candidates, system.n, extra))


def _unsafe_rows(system: ContinuousSystem) -> list[np.ndarray]:
    """The constraint rows of the unsafe set."""
    return [row for a, _ in system.unsafe.polyhedra for row in np.asarray(a, dtype=np.float64)]


def _dynamics_directions(system: ContinuousSystem, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """Per piece and action of the dynamics over the box: the left singular vectors and the real eigenvectors."""
    out: list[np.ndarray] = []
    for piece in system.pieces(np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)):
        for m in piece.maps:
            u, _, _ = np.linalg.svd(m.a)
            out.extend(u.T)
            values, vectors = np.linalg.eig(m.a)
            out.extend(np.real(vectors[:, np.abs(np.imag(values)) < 1e-12]).T)
    return out


def _successor_directions(system: ContinuousSystem, lo: np.ndarray, hi: np.ndarray, seed: int) -> list[np.ndarray]:
    """The principal directions of sampled successors (in state units; none if a successor is not finite)."""
    n = system.n
    rng = np.random.default_rng([seed, 5309])
    x = lo + (hi - lo) * rng.random((256, n))
    succ = np.vstack([system.step(x, np.full(len(x), a)) for a in range(len(system.actions))])
    if not (np.isfinite(succ).all() and len(succ) > n):
        return []
    centred = (succ - succ.mean(axis=0)) / np.maximum(succ.std(axis=0), 1e-12)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return list(vt * np.maximum(succ.std(axis=0), 1e-12)[None, :] ** -1)  # back to state units


def _distinct(candidates: list[np.ndarray], n: int, extra: int) -> list[np.ndarray]:
    """The box axes, then each finite non-zero candidate (unit length) not parallel to one kept, up to ``extra``."""
    kept = [row for row in np.eye(n)]
    for c in candidates:
        norm = float(np.linalg.norm(c))
        if not np.isfinite(c).all() or norm < 1e-12:
            continue
        u = c / norm
        if all(abs(float(u @ k)) <= PARALLEL for k in kept):
            kept.append(u)
        if len(kept) >= n + extra:
            break
    return kept
