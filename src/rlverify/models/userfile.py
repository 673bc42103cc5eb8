"""Import a user's Python file (a policy module, a system declaration): one way, one error."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from rlverify.errors import InputFileError


def import_python_file(file: Path, what: str) -> ModuleType:
    """Execute ``file`` as a fresh module; ``what`` names it in messages (``"policy module"``).

    Raises:
        InputFileError: the file is missing, or importing it raised (the exception's class and text).
    """
    if not file.is_file():
        raise InputFileError(f"{file}: {what} not found")
    tag = what.replace(" ", "_")
    spec = importlib.util.spec_from_file_location(f"rlverify_user_{tag}_{abs(hash(str(file.resolve())))}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any error in the user's file is reported as bad input
        raise InputFileError(f"{file}: importing the {what} failed: {exc.__class__.__name__}: {exc}") from None
    return module
