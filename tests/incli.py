"""The CLI run in-process in tests: its exit code and output, and the one error line a refusal must be."""

from __future__ import annotations

import pytest

from rlverify.cli.main import main


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``rlverify ARGS`` in-process: (exit code, stdout, stderr); argparse's and the user's ``sys.exit`` are caught
    (``None`` is 0, another non-integer 1, as Python's own exit)."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(err: str) -> str:
    """The single error line of ``err`` (fails when there are more lines or a traceback)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]
