"""Slow abstraction tests run only when asked: ``-m slow`` or ``RLVERIFY_SLOW=1``."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("RLVERIFY_SLOW") == "1" or "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or RLVERIFY_SLOW=1")
    for item in items:
        if "slow" in item.keywords and "tests/abstraction" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)
