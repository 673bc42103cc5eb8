"""Reading the CLI's ``--json`` output in tests: one envelope (``rlverify.cli.output``) around every result."""

from __future__ import annotations

import json


def error_envelope(stdout: str, code: int = 2) -> str:
    """The error of a failed ``--json`` run: stdout must be exactly its envelope (no result); returns the one-line
    cause (also on stderr)."""
    data = json.loads(stdout)
    assert data["exit_code"] == code and data["result"] is None and data["error"], data
    return data["error"]
