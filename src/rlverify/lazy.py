"""Lazy exports: a package's public names are imported from their modules on first use (PEP 562, PEP 549).

Every package of rlverify declares its API with :func:`lazy_exports`, so ``import rlverify`` (and the CLI's
``--help``) loads no engine, numpy, scipy or stormpy: a name's module is imported when the name is first read,
then cached as a plain attribute. ``dir()`` and ``help()`` list the lazy names as well. Type checkers read the
same names from an ``if TYPE_CHECKING:`` block of imports; ``__all__`` lists them for readers and linters
(``tests/test_startup.py`` checks that the three agree and that every name resolves)::

    if TYPE_CHECKING:
        from rlverify.exact.chain import PolicyChain

    __all__ = ["PolicyChain"]
    lazy_exports(__name__, {"rlverify.exact.chain": "PolicyChain"})

This module imports only the standard library: every layer may use it.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping
from typing import Any

__all__ = ["LazyModule", "lazy_exports"]


class LazyModule(types.ModuleType):
    """A package whose exported names are imported on first access (the class :func:`lazy_exports` gives it).

    Importing a submodule sets the package's attribute of the same name to the submodule; where the package
    exports a function of that name (``rlverify.exact.optimum``, the function in ``rlverify/exact/optimum.py``)
    the attribute is the function, as it would be after an eager ``from .optimum import optimum``.
    """

    _lazy: dict[str, str]  # name -> its module ("" for a submodule of the same name)

    def __getattr__(self, name: str) -> Any:
        module = self._lazy.get(name)
        if module is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = (
            getattr(importlib.import_module(module), name) if module else importlib.import_module(f"{self.__name__}.{name}")
        )
        setattr(self, name, value)  # later reads are plain attribute reads
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        module = self._lazy.get(name)
        if module and isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            value = getattr(importlib.import_module(module), name)  # the import system binding submodule `name`
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        """The package's API, loaded or not: its lazy names, ``__all__``, what the package itself defines (functions,
        classes, submodules) and the dunders; not the helpers its ``__init__`` imports (``Any``, ``TYPE_CHECKING``,
        ``lazy_exports``), so tab completion and ``help()`` show what a user may call."""
        own = {
            name
            for name, value in vars(self).items()
            if (name.startswith("__") and name.endswith("__"))
            or getattr(value, "__module__", None) == self.__name__
            or getattr(value, "__name__", "").startswith(f"{self.__name__}.")  # a submodule
        }
        return sorted(own | self._lazy.keys() | set(getattr(self, "__all__", ())))


def lazy_exports(package: str, table: Mapping[str, str], *, submodules: str = "") -> None:
    """Make ``package`` (a package's ``__name__``, called from its ``__init__``) export ``table``'s names lazily.

    Args:
        package: the package's ``__name__``.
        table: module -> the names it exports (space-separated).
        submodules: subpackages/modules of ``package`` (space-separated) also reachable as attributes
            (``rlverify.models`` after ``import rlverify``), imported on first access.
    """
    lazy = {name: module for module, names in table.items() for name in names.split()}
    lazy.update({name: "" for name in submodules.split()})
    module = sys.modules[package]
    module.__dict__["_lazy"] = lazy  # before the class: its __getattr__ and __setattr__ read it
    module.__class__ = LazyModule
