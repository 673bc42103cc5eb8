"""The optimum over all schedulers as its own function and result (Pmin/Pmax never under lower/upper), read from
a full MDP built once; ``verify --mode monolithic`` reports it with the same fields and JSON keys as before."""

from __future__ import annotations

import json

import pytest

from rlverify.benchmarks import make
from rlverify.cli.main import main
from rlverify.exact import ExactOptions, full_mdp, optimum, verify_exact
from rlverify.exact.optimum import as_exact_result
from tests.exact.resolved import parsed

#: the keys of `rlverify verify --mode monolithic --json` (a user-facing format)
MONOLITHIC_KEYS = {
    "property",
    "mode",
    "strategy",
    "value",
    "lower",
    "upper",
    "guarantee",
    "precision",
    "satisfied",
    "states",
    "transitions",
    "choices",
    "stalled_probability",
    "pmin",
    "pmax",
    "timings",
    "settings",
    "versions",
    "model",
    "policy",
    "variables",
    "warnings",
    "untaken_choices",
    "explanation",
    "method",
    "precision_note",
}


@pytest.fixture(scope="module")
def running():
    model = make("running-example-v1").load_model()
    return model, parsed(model, 'P<=0.5 [F<=2 "goal"]', policy=False)


def test_pmin_and_pmax_by_hand_with_their_own_brackets(running) -> None:
    model, prop = running
    r = optimum(model, prop)
    # Pmax: UP twice: 0.2 * 0.8 + 0.8 * 1 = 0.96; Pmin: stay in A (tests/test_running_example.py)
    assert r.pmax == pytest.approx(0.96, abs=1e-12) and r.pmin == 0.0
    assert r.pmax_bounds is not None and r.pmax_bounds[0] <= 0.96 <= r.pmax_bounds[1]
    assert r.pmin_bounds == (0.0, 0.0)
    # P<=0.5 holds for every scheduler iff Pmax <= 0.5: the optimum asked for is Pmax, and it does not
    assert (r.asked, r.value, r.satisfied) == ("max", r.pmax, False)
    assert not hasattr(r, "lower") and not hasattr(r, "upper")
    assert r.state_pmax is not None and r.state_pmin is not None and len(r.state_pmax) == r.states


def test_a_given_full_mdp_is_not_built_again(running, monkeypatch) -> None:
    import rlverify.exact.chain as chain_module

    model, prop = running
    mdp = full_mdp(model, prop)
    monkeypatch.setattr(chain_module, "build_explicit", lambda *a, **k: pytest.fail("the MDP was built again"))
    again = optimum(model, prop, mdp=mdp)
    assert (again.pmin, again.pmax, again.states) == (0.0, pytest.approx(0.96, abs=1e-12), mdp.mdp.num_states)


def test_verify_monolithic_reports_the_optimum_as_before(running, capsys) -> None:
    model, prop = running
    exact = verify_exact(model, prop, None, ExactOptions(mode="monolithic"))
    best = optimum(model, prop)
    assert exact == as_exact_result(best).with_provenance(timings=exact.timings)
    assert (exact.value, exact.pmin, exact.pmax) == (best.pmax, best.pmin, best.pmax)
    assert (exact.lower, exact.upper) == best.pmax_bounds  # the bracket of the value asked for
    assert main(["verify", "running-example-v1", "-p", 'P<=0.5 [F<=2 "goal"]', "--mode", "monolithic", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["result"]
    assert set(out) == MONOLITHIC_KEYS
    assert (out["mode"], out["strategy"], out["satisfied"]) == ("monolithic", "full", False)
    assert out["value"] == out["pmax"] == pytest.approx(0.96, abs=1e-12) and out["pmin"] == 0.0
