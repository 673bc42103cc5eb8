"""One policy chain: built once by policy_chain, read by every exact analysis of the policy (same numbers as when
each builds its own), refused where it was built for something else."""

from __future__ import annotations

import pytest

from rlverify.benchmarks import make
from rlverify.errors import OptionError
from rlverify.exact import (
    ExactOptions,
    ModelErrorOptions,
    RobustnessOptions,
    explain_paths,
    full_mdp,
    model_error_bounds,
    optimum,
    policy_chain,
    robustness,
    verify_exact,
)
from tests.exact.resolved import parsed


@pytest.fixture(scope="module")
def running():
    bench = make("running-example-v1")
    model = bench.load_model()
    return model, parsed(model, 'P=? [F<=2 "goal"]'), bench.load_policy()


@pytest.fixture
def nothing_is_built(monkeypatch):
    """After the fixture: building a chain or an MDP fails the test."""
    import rlverify.exact.chain as chain_module
    import rlverify.exact.merged as merged_module  # the chain module imports merged_chain where it explores

    def refuse(*args, **kwargs):
        pytest.fail("a chain or an MDP was built again")

    builders = ((merged_module, "merged_chain"), (chain_module, "build_explicit"))
    return lambda: [monkeypatch.setattr(module, name, refuse) for module, name in builders]


def test_every_analysis_reads_the_chain_built_once(running, nothing_is_built) -> None:
    model, prop, policy = running
    alone = {
        "exact": verify_exact(model, prop, policy).value,
        "paths": explain_paths(model, prop, policy, 3).covered,
        "robust": robustness(model, prop, policy, RobustnessOptions(epsilon=1)).nominal,
        "interval": model_error_bounds(model, prop, policy, ModelErrorOptions(delta=0.01)).nominal,
    }
    chain = policy_chain(model, prop, policy)
    mdp = full_mdp(model, prop, policy=policy)
    kept = policy_chain(model, prop, policy, ExactOptions(strategy="full"), mdp=mdp)
    best = optimum(model, prop, mdp=mdp)
    nothing_is_built()
    # auto picks Storm's builder for the running example (few branches over 4 valuations), not the merged exploration
    assert chain.strategy == "full" and chain.source is None and kept.strategy == "full" and kept.source is mdp.mdp
    shared = {
        "exact": verify_exact(model, prop, policy, chain=chain).value,
        "paths": explain_paths(model, prop, policy, 3, chain=chain, mdp=mdp).covered,
        "robust": robustness(model, prop, policy, RobustnessOptions(epsilon=1), chain=chain, mdp=mdp).nominal,
        "interval": model_error_bounds(model, prop, policy, ModelErrorOptions(delta=0.01), chain=kept).nominal,
    }
    # 0.3 * (0.2 * 0.5 * 0.8 + 0.8) by hand (tests/test_running_example.py)
    assert alone == pytest.approx(shared, abs=1e-12) and shared["exact"] == pytest.approx(0.264, abs=1e-12)
    assert shared["paths"] == pytest.approx(0.264, abs=1e-12)  # F<=2: the three paths are all there are
    assert (best.pmin, best.pmax) == (0.0, pytest.approx(0.96, abs=1e-12))


def test_a_chain_built_for_something_else_is_refused(running) -> None:
    model, prop, policy = running
    chain = policy_chain(model, prop, policy)
    other = parsed(model, 'P=? [F "goal"]')
    with pytest.raises(OptionError, match=r"built for property 'P=\? \[F<=2 \"goal\"\]', not 'P=\? \[F \"goal\"\]'"):
        verify_exact(model, other, policy, chain=chain)
    with pytest.raises(OptionError, match="built for mode 'stochastic', not 'deterministic'"):
        verify_exact(model, prop, policy, ExactOptions(mode="deterministic"), chain=chain)
    with pytest.raises(OptionError, match="built for unavailable 'stall', not 'renormalize'"):
        explain_paths(model, prop, policy, 2, ExactOptions(unavailable="renormalize"), chain=chain)


def test_the_engines_refuse_text_and_paths_with_the_way_in():
    # a user calling the engine module directly with text or a path got an AttributeError traceback
    from rlverify.benchmarks.discrete import data_path
    from rlverify.errors import PropertyError
    from rlverify.exact import ExactOptions, optimum, policy_chain, verify_exact
    from rlverify.models import load_model, parse_property
    from rlverify.policies import load_policy

    path = data_path("models/running_example.prism")
    model = load_model(path)
    prop = parse_property(model, 'P=? [F "goal"]')
    policy = load_policy(str(data_path("policies/running_example.json")))
    with pytest.raises(PropertyError, match=r"takes a parsed property .*parse_property.*not a str"):
        verify_exact(model, 'P=? [F "goal"]', policy)
    with pytest.raises(PropertyError, match=r"takes a loaded model .*load_model.*not a PosixPath"):
        policy_chain(path, prop, policy, ExactOptions())
    with pytest.raises(PropertyError, match=r"takes a loaded model .*not a str"):
        optimum(str(path), prop, ExactOptions(mode="monolithic"))
    assert verify_exact(model, prop, policy).value == pytest.approx(1.0)


@pytest.mark.parametrize("strategy", ["full", "merged"])
def test_the_reported_total_covers_the_checks_before_the_build(running, monkeypatch, strategy) -> None:
    """The policy's check (which compiles a PRISM program) is part of the build's phase: the result's ``total``
    is not shorter than the call it reports on."""
    import time

    import rlverify.exact.chain as chain_module

    model, prop, policy = running
    checked = chain_module.check_policy

    def slow_check(*args, **kwargs):
        time.sleep(0.3)
        return checked(*args, **kwargs)

    monkeypatch.setattr(chain_module, "check_policy", slow_check)
    started = time.perf_counter()
    result = verify_exact(model, prop, policy, ExactOptions(strategy=strategy))
    wall = time.perf_counter() - started
    assert result.timings["build"] >= 0.3
    assert wall - 0.05 <= result.timings["total"] - result.timings["parse"] <= wall
