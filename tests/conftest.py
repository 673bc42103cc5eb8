"""Shared fixtures: where the reference PRISM models of ``../shared`` are, or that they are absent.

The suite stands on the repository alone. With ``../shared`` beside the clone (as in CI), tests
compare our generated models with the reference files; without it they check the facts recorded
from those files as numbers in the tests (tests/benchmarks/test_prism_equivalence.py), and tests
that only need an input model use the repository's own equivalent benchmark. Set
``RLVERIFY_SHARED=/nonexistent`` to check the suite as a clone without ``../shared`` would run it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: The one definition of the ``../shared`` location; ``RLVERIFY_SHARED`` overrides it.
SHARED = Path(os.environ.get("RLVERIFY_SHARED") or Path(__file__).resolve().parents[2] / "shared")
REFERENCE = SHARED / "benchmarks" / "prism-reference"


def pytest_report_header(config):
    if REFERENCE.is_dir():
        return f"reference PRISM models: {REFERENCE} (compared with the generated models)"
    return f"reference PRISM models: none at {REFERENCE} (checking the facts recorded in the tests instead)"


@pytest.fixture(scope="session")
def prism_reference():
    """``name -> Path`` of a reference PRISM file in ``../shared/benchmarks/prism-reference``, or
    None when that directory is absent (the caller then checks its recorded facts instead).

    When the directory is there, every file asked for must be too: a broken checkout fails, it never
    falls back silently.
    """

    def find(name: str) -> Path | None:
        if not REFERENCE.is_dir():
            return None
        path = REFERENCE / name
        if not path.is_file():
            pytest.fail(f"reference file {path} not found although {REFERENCE} exists")
        return path

    return find


@pytest.fixture(autouse=True, scope="session")
def sb3_logs_stay_in_the_test_tmp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """SB3's learn() makes a log folder in the system's temporary directory unless SB3_LOGDIR names one: the tests'
    training runs write theirs under pytest's own temporary directory instead of leaving /tmp/SB3-* behind."""
    os.environ.setdefault("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3-logs")))
