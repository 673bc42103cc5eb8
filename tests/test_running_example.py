"""The paper's running example, with values worked out by hand (see the benchmark's docstring)."""

from __future__ import annotations

import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks import make


@pytest.fixture(scope="module")
def bench():
    return make("running-example-v1")


def test_stochastic_values_by_hand(bench) -> None:
    model, policy = bench.load_model(), bench.load_policy()
    # from A: DOWN (0.7) loops in A; UP (0.3) -> B 0.2 / C 0.8; B: UP/NOP 0.5 each; C: UP -> D
    assert verify_exact(model, 'P=? [F "goal"]', policy).value == pytest.approx(1.0, abs=1e-6)
    # two steps: 0.3 * (0.2 * P_B(1 step) + 0.8 * P_C(1 step)) = 0.3 * (0.2 * 0.5 * 0.8 + 0.8)
    assert verify_exact(model, 'P=? [F<=2 "goal"]', policy).value == pytest.approx(0.264, abs=1e-12)
    # expected steps: E_C = 1; E_B = 1 + 0.5 E_B + 0.5 * 0.2 * E_C -> 2.2; E_A = 1 + 0.7 E_A + 0.3 (0.2 E_B + 0.8 E_C)
    res = verify_exact(model, 'R{"steps"}=? [F "goal"]', policy)
    assert res.value == pytest.approx(343 / 75, rel=1e-6)
    # the induced DTMC of Fig. 4: A -> A 0.7, A -> B 0.06, A -> C 0.24 ...; D absorbing (property-directed)
    assert (res.states, res.transitions) == (4, 8)


def test_threshold_property_answers_yes_no(bench) -> None:
    model, policy = bench.load_model(), bench.load_policy()
    assert verify_exact(model, 'P>=0.25 [F<=2 "goal"]', policy).satisfied is True
    assert verify_exact(model, 'P>=0.27 [F<=2 "goal"]', policy).satisfied is False


def test_deterministic_estimate_and_monolithic(bench) -> None:
    model, policy = bench.load_model(), bench.load_policy()
    # argmax in A is DOWN: the agent never leaves A
    det = verify_exact(model, 'P=? [F "goal"]', policy, ExactOptions(mode="deterministic"))
    assert det.value == 0.0 and det.states == 1
    mono = verify_exact(model, 'P=? [F<=2 "goal"]', None, ExactOptions(mode="monolithic"))
    # Pmax: UP twice: 0.2 * 0.8 + 0.8 * 1 = 0.96; Pmin: stay in A
    assert mono.pmax == pytest.approx(0.96) and mono.pmin == pytest.approx(0.0)


def test_same_values_from_the_jani_translation(bench, tmp_path) -> None:
    import stormpy.io

    from rlverify.models import load_model

    prism = bench.load_model()
    path = tmp_path / "running_example.jani"
    stormpy.io.export_jani_to_file(str(path), prism.program.to_jani(False))
    jani = load_model(path)
    assert jani.kind == "jani" and set(jani.action_names) == {"UP", "NOP", "DOWN"}
    policy = bench.load_policy()
    for prop in ('P=? [F<=2 "goal"]', 'R{"steps"}=? [F "goal"]'):
        assert verify_exact(jani, prop, policy).value == pytest.approx(verify_exact(prism, prop, policy).value, rel=1e-9)


def test_monolithic_threshold_holds_for_every_scheduler(bench) -> None:
    model = bench.load_model()

    def mono(text):
        return verify_exact(model, text, None, ExactOptions(mode="monolithic"))

    # Pmin = 0, Pmax = 0.96 for F<=2 "goal": P<=0.97 holds for all schedulers, P<=0.5 and P>=0.1 do not
    assert mono('P<=0.97 [F<=2 "goal"]').satisfied is True
    assert mono('P<=0.5 [F<=2 "goal"]').satisfied is False
    assert mono('P>=0.1 [F<=2 "goal"]').satisfied is False
    assert mono('P>=0 [F<=2 "goal"]').satisfied is True


def test_monolithic_explicit_optimum_thresholds(bench) -> None:
    model = bench.load_model()

    def mono(text):
        return verify_exact(model, text, None, ExactOptions(mode="monolithic")).satisfied

    # Pmin = 0 and Pmax = 0.96 for F<=2 "goal": an explicit optimum is compared as that optimum's value
    assert mono('Pmin<=0.5 [F<=2 "goal"]') is True and mono('Pmin>0 [F<=2 "goal"]') is False
    assert mono('Pmax>=0.5 [F<=2 "goal"]') is True and mono('Pmax<0.96 [F<=2 "goal"]') is False
    # strict comparisons without an optimum: for every scheduler
    assert mono('P<0.97 [F<=2 "goal"]') is True and mono('P>0 [F<=2 "goal"]') is False
