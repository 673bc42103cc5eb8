"""The ``rlverify`` process as the console script runs it, for the benchmarks that time whole processes.

``[python, "-c", ENTRY, *args]``: :func:`rlverify.cli.main.run` of the tree on ``PYTHONPATH``, or ``main`` in a tree
from before ``run`` existed (so that a ``--before`` tree is timed too).
"""

ENTRY = "import sys, rlverify.cli.main as m; m.run() if hasattr(m, 'run') else sys.exit(m.main())"
