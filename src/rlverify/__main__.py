"""``python -m rlverify``: the ``rlverify`` command (:func:`rlverify.cli.main.main`), exit codes included.

For environments where the script is not on ``PATH`` (a notebook's kernel, ``pipx run``, a venv not activated).
"""

from __future__ import annotations

import sys

from rlverify.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
