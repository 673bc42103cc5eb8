"""The ``rlverify`` process as the console script runs it, for the benchmarks that time whole processes.

``[python, "-c", ENTRY, *args]``: :func:`rlverify.cli.main.run` of the tree on ``PYTHONPATH``, or ``main`` in a tree
from before ``run`` existed (so that a ``--before`` tree is timed too).
"""

ENTRY = "import sys, rlverify.cli.main as m; m.run() if hasattr(m, 'run') else sys.exit(m.main())"


def source_tree(path: str) -> str:
    """``path`` if it holds the ``rlverify`` package (a tree's ``src``), else exit 2 naming it: on ``PYTHONPATH`` a
    directory without the package is skipped silently, and the installed rlverify would be measured in its place."""
    import sys
    from pathlib import Path

    if not (Path(path) / "rlverify" / "__init__.py").is_file():
        print(f"error: {path} holds no rlverify package (give a source tree's src directory)", file=sys.stderr)
        sys.exit(2)
    return path
