"""Counter-based random numbers: the u for run i, step t, stream j depends only on (seed, i, t, j).

This makes a simulation independent of how runs are batched or ordered: run ``i`` sees the same
random numbers whether it is simulated alone or among 100,000 others. The generator is the
SplitMix64 finaliser applied twice to a combination of the counters (a strong 64-bit mixer,
used e.g. to seed xoshiro); 53 bits of the output give a uniform double in [0, 1).
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_STEP_MUL = np.uint64(0xD1B54A32D192ED03)
_STREAM_MUL = np.uint64(0x8CB92BA72F3D8DD7)


def _mix(z: np.ndarray) -> np.ndarray:
    z = z ^ (z >> np.uint64(30))
    z = z * _M1
    z = z ^ (z >> np.uint64(27))
    z = z * _M2
    return z ^ (z >> np.uint64(31))


def seed_key(seed: int) -> np.uint64:
    """The 64-bit key of an integer seed."""
    with np.errstate(over="ignore"):
        return np.uint64(_mix(np.asarray([np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF) + _GOLDEN], dtype=np.uint64))[0])


def run_keys(key: np.uint64 | np.ndarray, runs: np.ndarray) -> np.ndarray:
    """``(N,)`` uint64 per-run keys for global run indices ``runs`` ``(N,)`` (``key``: one key, or ``(N,)`` keys, one per
    run)."""
    with np.errstate(over="ignore"):
        return _mix((np.asarray(runs, dtype=np.uint64) + np.uint64(1)) * _GOLDEN ^ key)


def _mix_inplace(z: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """:func:`_mix` on ``z`` in place (``tmp``: scratch of the same shape and dtype); the same numbers."""
    np.right_shift(z, np.uint64(30), out=tmp)
    z ^= tmp
    z *= _M1
    np.right_shift(z, np.uint64(27), out=tmp)
    z ^= tmp
    z *= _M2
    np.right_shift(z, np.uint64(31), out=tmp)
    z ^= tmp
    return z


def uniforms(keys: np.ndarray, step: int | np.ndarray, stream: int) -> np.ndarray:
    """``(N,)`` float64 uniforms in [0, 1) for per-run ``keys`` at ``step`` (one for all, or ``(N,)``) and ``stream``."""
    keys = np.asarray(keys, dtype=np.uint64)
    with np.errstate(over="ignore"):
        offset = np.uint64(step + 1) * _STEP_MUL + np.uint64(stream + 1) * _STREAM_MUL
        z = keys + offset
        _mix_inplace(z, np.empty_like(z))
    z >>= np.uint64(11)
    u = z.astype(np.float64)
    u *= 1.0 / 9007199254740992.0  # 2**-53: exact, u = k / 2**53
    return u
