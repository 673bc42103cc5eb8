"""Run numpy's BLAS single-threaded while the engine works.

The engine multiplies many small matrices (a batch of samples through a 64-wide network, linear
relaxations); multi-threaded OpenBLAS spends more time synchronising than computing on them (measured
12x slower on a loaded 2-core machine). :func:`single_threaded_blas` sets the thread count of the
OpenBLAS library numpy loaded to 1 and restores it afterwards; if the library or its symbols are not
found it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
from collections.abc import Callable, Iterator
from typing import Any

_SETTERS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


@functools.cache  # looked up once per process: reading /proc/self/maps took ~4 ms for every chunk of a frontier
def _openblas() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    importlib.import_module("numpy")  # loads numpy's BLAS, which is looked up next

    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _SETTERS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                return getattr(lib, set_name), getattr(lib, get_name)
    return None


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Context manager: OpenBLAS with one thread inside, the previous count restored on exit."""
    found = _openblas()
    if found is None:
        yield
        return
    set_threads, get_threads = found
    try:
        before = int(get_threads())
    except Exception:  # pragma: no cover - exotic builds
        yield
        return
    set_threads(1)
    try:
        yield
    finally:
        set_threads(before)
