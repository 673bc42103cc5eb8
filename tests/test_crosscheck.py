"""Cross-engine agreement on every registered PRISM benchmark with its reference policy.

The exact value must lie in [Pmin, Pmax] (Storm's optimum over all schedulers) and inside the
statistical interval of ``rlverify simulate`` on the same benchmark id and property name (fails
with probability <= delta = 0.001 per case when both engines are right; seeds are fixed).
"""

from __future__ import annotations

import pytest

from rlverify.benchmarks import all_ids, spec
from rlverify.crosscheck import cross_check

#: unbounded properties whose runs under the reference policy take thousands of steps of a large
#: network (minutes of simulation): checked in the slow suite
SLOW = {("crazy-climber-v1", "collision"), ("avoid-v1", "collision")}
CASES = [
    pytest.param(i, name, id=f"{i}:{name}", marks=[pytest.mark.slow] if (i, name) in SLOW else [])
    for i in all_ids()
    if spec(i).kind == "prism" and spec(i).policies
    for name, text in spec(i).properties.items()
    if text.startswith("P=?") and "((" not in text
]


def test_every_prism_benchmark_is_covered():
    fast = {c.values[0] for c in CASES if not c.marks}
    assert fast == {i for i in all_ids() if spec(i).kind == "prism"}


@pytest.mark.parametrize("bench_id,name", CASES)
def test_exact_statistical_and_optimum_agree(bench_id, name):
    a = cross_check(bench_id, name, runs=3000, delta=0.001, seed=11)
    assert a.ok, a.disagreements()
    assert a.statistical.stalled == 0 and a.exact.stalled_probability == 0.0  # reference policies never stall
    assert a.to_json()["checks"] == {"pmin <= value <= pmax": True, "value in statistical interval": True}


def test_a_disagreement_is_reported_with_both_numbers():
    from dataclasses import replace

    a = cross_check("running-example-v1", "reach-goal-2", runs=500)
    wrong = replace(
        a, exact=replace(a.exact, value=0.99), checks={"pmin <= value <= pmax": False, "value in statistical interval": False}
    )
    lines = wrong.disagreements()
    assert not wrong.ok and len(lines) == 2
    assert "0.99" in lines[0] and "0.96" in lines[0]  # the value and Pmax = 0.96 of the running example
    assert "0.99" in lines[1] and str(a.statistical.runs) in lines[1]
