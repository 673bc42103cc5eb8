"""Shared fixtures: paths to the reference models in ../shared and small random MDPs."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
REFERENCE = SHARED / "benchmarks" / "prism-reference"


@pytest.fixture
def reference_dir() -> Path:
    if not REFERENCE.is_dir():
        pytest.skip(f"reference models not found at {REFERENCE}")
    return REFERENCE
