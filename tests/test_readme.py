"""The README's Python examples run as written, and their numbers agree across the engines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run_and_agree(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own documentation
    result, est, bound = namespace["result"], namespace["est"], namespace["bound"]
    assert (result.states, result.transitions) == (15_625, 892_165)  # the paper's Table 2 and its reference file
    assert est.interval[0] - 1e-9 <= result.value <= est.interval[1] + 1e-9  # fails with probability <= 0.05
    assert 0.0 <= bound.upper_bound <= 1.0 and bound.guarantee == "sound upper bound"
    assert capsys.readouterr().out.count("\n") >= 3
