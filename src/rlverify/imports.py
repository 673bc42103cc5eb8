"""Code run around a module's first import, without importing it now.

Two uses: Storm's log level is set right after stormpy first loads (:func:`after_import`), and scipy's
copy of numpy's namespace is made without importing numpy's build and test tools
(:func:`lighten_scipy_import`), which saves ~0.13 s of every process that uses scipy.sparse.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

#: scipy's vendored array-API layer (``scipy._lib.array_api_compat.numpy``) copies numpy's whole namespace at
#: import (``from numpy import *`` and ``getattr`` over ``dir(numpy)``), which imports these lazily loaded numpy
#: submodules: f2py, testing, ma, polynomial, matlib and ctypeslib, ~0.13 s on this machine (scipy 1.17). None is
#: used by scipy.sparse; the copy reaches them lazily instead (the same module objects, on first use).
NUMPY_EXTRAS = ("f2py", "testing", "ma", "polynomial", "matlib", "ctypeslib")
SCIPY_NUMPY_COPY = "scipy._lib.array_api_compat.numpy"


def after_import(name: str, then: Callable[[ModuleType], None]) -> None:
    """Call ``then(module)`` once module ``name`` has been executed by its first import (now if it already is)."""
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _Around(name, lambda: None, lambda module, _: then(module), lambda _: None))


def lighten_scipy_import() -> None:
    """Make scipy's copy of numpy's namespace without importing :data:`NUMPY_EXTRAS` (no effect once scipy's copy
    exists). The copy then gets each of them from numpy on first use (a module ``__getattr__``), so scipy behaves
    as before; only the import cost moves to where it is used."""
    if SCIPY_NUMPY_COPY not in sys.modules and not any(
        isinstance(f, _Around) and f.name == SCIPY_NUMPY_COPY for f in sys.meta_path
    ):
        sys.meta_path.insert(0, _Around(SCIPY_NUMPY_COPY, _hide_numpy_extras, _forward_numpy_extras, _show_numpy_extras))


def _hide_numpy_extras() -> Any:
    import numpy  # lazy: runs around numpy's own import (the hook this module installs)

    names, listing = numpy.__all__, numpy.__dir__
    hidden = set(NUMPY_EXTRAS) & (set(names) | set(listing()))  # those the copy would have taken
    numpy.__all__ = [n for n in names if n not in hidden]
    numpy.__dir__ = lambda: [n for n in listing() if n not in hidden]  # type: ignore[method-assign]
    return names, listing, hidden


def _show_numpy_extras(saved: Any) -> None:
    import numpy  # lazy: runs around numpy's own import (the hook this module installs)

    numpy.__all__, numpy.__dir__, _ = saved  # type: ignore[method-assign]


def _forward_numpy_extras(copy: ModuleType, saved: Any) -> None:
    import numpy  # lazy: runs around numpy's own import (the hook this module installs)

    _show_numpy_extras(saved)
    if "__getattr__" in vars(copy):  # scipy gave its copy its own: leave it be
        return

    hidden = saved[2]

    def forward(name: str) -> Any:
        if name in hidden:
            return getattr(numpy, name)
        raise AttributeError(f"module {copy.__name__!r} has no attribute {name!r}")

    setattr(copy, "__getattr__", forward)  # noqa: B010  (a module's own __getattr__, PEP 562)


class _Around:
    """A meta path finder (not derived from ``importlib.abc``, whose import takes ~40 ms) ahead of the others that
    steps aside once: it finds module ``name``'s spec with them and wraps its
    loader so that ``before()`` runs before the module executes, then ``after(module, before's value)``, or
    ``undo(before's value)`` if executing it fails (the import then fails as it would have)."""

    def __init__(
        self,
        name: str,
        before: Callable[[], Any],
        after: Callable[[ModuleType, Any], None],
        undo: Callable[[Any], None],
    ) -> None:
        self.name, self.before, self.after, self.undo = name, before, after, undo

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _AroundLoader(spec.loader, self)  # type: ignore[assignment]
        return spec


class _AroundLoader:
    """``loader`` with the hook's ``before``/``after``/``undo`` around its ``exec_module``; every other attribute is
    ``loader``'s."""

    def __init__(self, loader: Any, hook: _Around) -> None:
        self._loader, self._hook = loader, hook

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        state = self._hook.before()
        try:
            self._loader.exec_module(module)
        except BaseException:
            self._hook.undo(state)
            raise
        self._hook.after(module, state)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
