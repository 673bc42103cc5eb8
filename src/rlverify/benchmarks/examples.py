"""The example files shipped with the package (``rlverify/benchmarks/data/examples``) and copying them out.

The README's commands name them as ``examples/...``: in a clone of the repository ``examples/`` is a link to the
package's copy (one copy of each file); after ``pip install rlverify``, ``rlverify examples`` writes them to
``./examples``. Every file is written with :mod:`rlverify.files` (atomically, never over an existing file
without ``force``).
"""

from __future__ import annotations

from pathlib import Path

from rlverify.benchmarks.registry import data_path
from rlverify.files import FileWriteError, check_target, write_bytes

__all__ = ["copy_examples", "example_files", "examples_dir"]

#: caches and byte code are not examples
_SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}


def examples_dir() -> Path:
    """The directory holding the shipped examples (inside the installed package)."""
    return data_path("examples")


def example_files() -> list[str]:
    """The shipped example files, as POSIX paths relative to :func:`examples_dir`, sorted."""
    root = examples_dir()
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.is_file() and not _SKIP_PARTS.intersection(rel.parts) and path.suffix not in _SKIP_SUFFIXES:
            out.append(rel.as_posix())
    return sorted(out)


def copy_examples(directory: str | Path = "examples", *, force: bool = False) -> list[Path]:
    """Copy every shipped example file into ``directory`` (created if needed), keeping the sub-folders.

    Every target is checked before anything is written: an existing file is refused without ``force`` (one
    error naming it and how many others exist), as is a target that cannot be a file. Each file is then
    written atomically. Files in ``directory`` that are not examples are left alone.

    Returns:
        The written paths, in :func:`example_files` order.

    Raises:
        FileWriteError: a target exists (without ``force``) or cannot be written.
    """
    directory = Path(directory)
    root = examples_dir()
    files = example_files()
    if directory.exists() and directory.resolve() == root.resolve():
        raise FileWriteError(f"{directory}: is where rlverify's examples are kept; give another directory")
    targets = [directory / rel for rel in files]
    if not force:
        _refuse_existing(targets)
    for target in targets:
        check_target(target, force=force)
    return [write_bytes(target, (root / rel).read_bytes(), force=force) for rel, target in zip(files, targets, strict=True)]


def _refuse_existing(targets: list[Path]) -> None:
    """One error naming the first target that exists and how many others do."""
    exist = [t for t in targets if t.exists() or t.is_symlink()]
    if exist:
        more = f" (and {len(exist) - 1} more of the {len(targets)} example files)" if len(exist) > 1 else ""
        raise FileWriteError(f"{exist[0]}: file exists{more}; pass --force to overwrite")
