"""`rlverify report --explain-policy`: a section per part of `rlverify explain`, and the same numbers."""

from __future__ import annotations

from rlverify.exact.critical import critical_states
from rlverify.exact.features import feature_effects
from rlverify.exact.tree import fit_tree
from rlverify.report import ReportOptions, make_report
from rlverify.resolve import resolve

PROP = 'P>=0.5 [F<=3 "goal"]'


def test_report_has_the_explain_sections_only_when_asked():
    assert ReportOptions().explain_policy is False  # off by default: report stays as fast as it was
    report = make_report(
        "running-example-v1", property=PROP, options=ReportOptions(runs=200, explain_policy=True, optimum="max")
    )
    titles = [s.title for s in report.sections]
    features, tree, critical = (
        next(s for s in report.sections if s.title.startswith(p)) for p in ("Safety", "A decision", "Critical")
    )
    assert titles.index(features.title) < titles.index(tree.title) < titles.index(critical.title)
    assert report.ok and any(c.name == "tree: the policy's value = exact value" and c.ok for c in report.checks)
    t = resolve("running-example-v1", property=PROP)
    assert features.data["features"]["effects"][0]["fixed"] == feature_effects(t.model, t.property, t.policy).effects[0].fixed
    assert tree.data["tree"]["rules"] == list(fit_tree(t.model, t.property, t.policy).rules)
    direct = critical_states(t.model, t.property, t.policy)  # P>=b: a goal, as the report's --optimum max reads it
    assert [c["state"] for c in critical.data["critical"]["states"]] == [c.state for c in direct.states]
    assert features.images and features.images[0][1][:4] == b"\x89PNG"
    assert "<h2>" in report.to_html() and "A decision tree standing in for the policy" in report.to_html()
