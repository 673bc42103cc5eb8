"""One stamp (``Target.stamp``) labels every result: the target's name and what the policy's own record says.

The shipped Avoid policy records that it was trained with xMax=4, yMax=4; verified on a 2x2 grid, every command
that takes a policy, the report, ``cross_check`` and the API must say so (before this, 4 of the 8 did).
"""

from __future__ import annotations

import json

import pytest

from rlverify.benchmarks.discrete import data_path
from rlverify.cli.main import main

POLICY = str(data_path("policies/avoid_4x4_ppo.onnx"))
SMALL = ["avoid-v1", "-c", "xMax=2,yMax=2", "--policy", POLICY, "-p", "collision-100"]


def _says_trained_elsewhere(warnings: list[str]) -> bool:
    return any("was trained with xMax=4, yMax=4" in w and "verified with xMax=2, yMax=2" in w for w in warnings)


@pytest.mark.parametrize(
    "command",
    [
        ["verify"],
        ["simulate", "--runs", "200"],
        ["robust"],
        ["simulate", "--rare", "splitting", "--effort", "100", "--repetitions", "5"],
    ],
    ids=["verify", "simulate", "robust", "rare"],
)
def test_every_command_names_the_target_and_warns(capsys, command):
    assert main([*command, *SMALL, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["result"]
    assert _says_trained_elsewhere(out["warnings"])
    assert out.get("model", out.get("benchmark")) == "avoid-v1 (xMax=2, yMax=2, slickness=0.1)"


def test_the_map_warns(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["map", *SMALL, "--map", "x,y", "--optimum", "min", "--out", str(out)]) == 0
    assert _says_trained_elsewhere(json.loads(out.read_text())["warnings"])


def test_the_api_cross_check_and_report_warn():
    import rlverify
    from rlverify.report import ReportOptions, make_report

    result = rlverify.verify_exact("avoid-v1", "collision-100", POLICY, constants="xMax=2,yMax=2")
    assert _says_trained_elsewhere(result.warnings) and result.model == "avoid-v1 (xMax=2, yMax=2, slickness=0.1)"
    agreement = rlverify.cross_check("avoid-v1", "collision-100", POLICY, constants="xMax=2,yMax=2", runs=200)
    assert _says_trained_elsewhere(agreement.exact.warnings) and _says_trained_elsewhere(agreement.statistical.warnings)
    report = make_report(
        "avoid-v1",
        property="collision-100",
        policy=POLICY,
        constants="xMax=2,yMax=2",
        options=ReportOptions(runs=200, epsilon=1, explain=1),
    )
    exact = next(s for s in report.sections if "exact" in s.data)
    assert _says_trained_elsewhere(exact.data["exact"]["warnings"])


def test_a_shield_keeps_the_policy_record(tmp_path, capsys):
    """A policy under a shield is still the policy that was trained with xMax=4: the warning stays, on the command
    line and through the API (``Target.with_shield``)."""
    from rlverify.resolve import resolve_model

    shield = tmp_path / "s.json"
    bounded = [*SMALL[:-1], "P<=0.5 [F<=100 COLLISION=true]"]
    assert main(["shield", *bounded, "--threshold", "0", "--out", str(shield), "--json"]) == 0
    capsys.readouterr()
    assert main(["verify", *bounded, "--shield", str(shield), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["result"]
    assert _says_trained_elsewhere(out["warnings"]) and "+ shield" in out["policy"]
    target = resolve_model("avoid-v1", constants="xMax=2,yMax=2", policy=POLICY, property="collision-100")
    shielded = target.with_shield(shield)
    assert shielded.policy is not target.policy and _says_trained_elsewhere(shielded.notes())
