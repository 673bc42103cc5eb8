"""``python -m rlverify``: the ``rlverify`` command (:func:`rlverify.cli.main.run`), exit codes included.

For environments where the script is not on ``PATH`` (a notebook's kernel, ``pipx run``, a venv not activated).
"""

from __future__ import annotations

from rlverify.cli.main import run

if __name__ == "__main__":
    run()
