"""Without ``--time-budget`` an abstraction still has a time budget, the default guard (issue 40: ``abstract -k 12``
ran unbounded); reaching it keeps the bounds sound and the warning names the option that raises it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlverify.abstraction.options as engine
from rlverify.abstraction import AbstractionOptions, verify_abstraction
from rlverify.abstraction.settings import DEFAULT_TIME_BUDGET
from rlverify.cli.main import main
from rlverify.models.continuous import load_system

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SYSTEM = f"{EXAMPLES / 'double_integrator.py'}:SYSTEM"
POLICY = str(EXAMPLES / "double_integrator.onnx")


def test_the_default_budget_stops_expansion_soundly_and_names_the_option(monkeypatch):
    monkeypatch.setattr(engine, "DEFAULT_TIME_BUDGET", 1e-9, raising=False)  # spent before the first depth
    result = verify_abstraction(load_system(SYSTEM), POLICY, AbstractionOptions(horizon=6, witness="none"))
    # the initial state is left unexpanded: it may fail (upper 1) or not (lower 0), the bounds of an unknown state
    assert (result.upper_bound, result.lower_all) == (1.0, 0.0)
    assert any("(the default; --time-budget S / time_budget= raises it) ran out at depth 0 of 6" in w for w in result.warnings)
    assert result.cells is None  # no refinement by the gap: the default budget does not imply it


def test_an_explicit_budget_is_named_without_the_hint(monkeypatch):
    options = AbstractionOptions(horizon=3, time_budget=1e-9, witness="none")
    result = verify_abstraction(load_system(SYSTEM), POLICY, options)
    assert result.upper_bound == 1.0 and "time budget of 1e-09 s is spent" in str(result.stopped)


def test_the_cli_reports_the_default_budget_and_documents_it(monkeypatch, capsys):
    monkeypatch.setattr(engine, "DEFAULT_TIME_BUDGET", 1e-9, raising=False)
    assert main(["abstract", SYSTEM, "--policy", POLICY, "-k", "12", "--witness", "none", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["result"]["upper_bound"] == 1.0
    assert any("--time-budget S" in w for w in out["warnings"] + out["result"]["warnings"])
    with pytest.raises(SystemExit):
        main(["abstract", "--help"])
    assert f"default {DEFAULT_TIME_BUDGET:g}" in " ".join(capsys.readouterr().out.split())
