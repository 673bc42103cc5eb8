"""End-to-end soundness of the abstraction engine, plus bad input.

Soundness is checked against quantities computed independently of the engine:

* exact failure probabilities of concrete start states, by enumerating every action sequence of
  the policy (ACC: 2^k, pendulum: 3^k sequences), evaluated with onnxruntime on the ONNX file;
* Monte Carlo simulation with actions sampled from the policy, compared through a one-sided
  Clopper-Pearson lower confidence bound.

Besides the shipped policies (whose true failure probability is tiny) each check also runs on a
deliberately risky policy, so that the bound is tested where it is not trivially zero.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from rlverify.abstraction import GUARANTEE, AbstractionError, AbstractionOptions, DomainError, verify_abstraction
from rlverify.abstraction.verify import part_polytopes
from rlverify.benchmarks.registry import make
from rlverify.errors import PolicyError, RlverifyError
from rlverify.models.continuous import unsafe_property
from rlverify.policies import load_policy
from rlverify.policies.mlp import MLP, save_mlp_onnx
from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical


def exact_failure(system, policy, x0: np.ndarray, horizon: int) -> np.ndarray:
    """P(F<=k unsafe) for each start state, by enumerating the whole probability tree (batched)."""
    n = len(x0)
    x = np.array(x0, dtype=float)
    owner = np.arange(n)
    mass = np.ones(n)
    failed = np.zeros(n)
    bad = system.model().is_unsafe(x)
    np.add.at(failed, owner[bad], mass[bad])
    x, owner, mass = x[~bad], owner[~bad], mass[~bad]
    na = len(system.model().actions)
    for _ in range(horizon):
        if len(x) == 0:
            break
        probs = policy.action_probabilities(system.model().observe(x))
        x = np.concatenate([system.model().step(x, np.full(len(x), a)) for a in range(na)])
        mass = np.concatenate([mass * probs[:, a] for a in range(na)])
        owner = np.tile(owner, na)
        bad = system.model().is_unsafe(x)
        np.add.at(failed, owner[bad], mass[bad])
        keep = ~bad & (mass > 1e-15)
        # mass below 1e-15 is dropped: it can only lower the exact value by < 2^k * 1e-15
        x, owner, mass = x[keep], owner[keep], mass[keep]
    return failed


def risky_policy(tmp_path, benchmark: str) -> str:
    """A policy that takes the dangerous action most of the time (a fixed, hand-made network)."""
    rng = np.random.default_rng(11)
    system = make(benchmark)
    if benchmark == "acc-v1":
        w0, b0 = rng.normal(0, 0.1, (8, 2)), np.ones(8)
        w1, b1 = rng.normal(0, 0.2, (2, 8)), np.array([0.0, 1.2])  # accelerate ~ 0.75
    elif benchmark == "bouncing-ball-v1":
        rng = np.random.default_rng(12)
        w0, b0 = rng.normal(0, 0.5, (8, 2)), np.ones(8)
        w1, b1 = rng.normal(0, 0.2, (2, 8)), np.array([0.0, -0.3])  # hit ~ 0.14
    else:
        w0, b0 = rng.normal(0, 1.0, (8, 2)), np.ones(8)
        w1, b1 = rng.normal(0, 0.2, (3, 8)), np.array([0.0, -0.5, 0.8])  # push right ~ 0.5
    path = tmp_path / f"risky-{benchmark}.onnx"
    save_mlp_onnx(
        path,
        MLP((w0, w1), (b0, b1)),
        features=list(system.model().features),
        actions=list(system.model().actions),
        training={"algorithm": "hand-made", "seed": 11, "benchmark": benchmark},
        force=True,  # the module's fixtures write the same hand-made network again
    )
    return str(path)


def check_parts_against_exact(system, policy_file: str, result, count: int, seed: int) -> float:
    """Assert each sampled start state's exact failure probability is below its part's bound."""
    rng = np.random.default_rng(seed)
    lo, hi = np.array(result.initial_lo), np.array(result.initial_hi)
    x0 = lo + (hi - lo) * rng.random((count, system.model().n))
    # the corners are the riskiest start states of these benchmarks
    corners = np.array(np.meshgrid(*zip(lo, hi, strict=True))).reshape(system.model().n, -1).T
    x0 = np.vstack([corners, x0])
    exact = exact_failure(system, load_policy(policy_file), x0, result.options.horizon)
    polys = part_polytopes(result)
    bounds = np.array([p.bound for p in result.parts])
    for x, e in zip(x0, exact, strict=True):
        containing = [b for p, b in zip(polys, bounds, strict=True) if p.contains_points(x[None, :], tol=1e-9)[0]]
        assert containing, f"start state {x} is in no initial part"
        # sound for every part that contains the state (boundary states may be in several)
        assert e <= min(containing) + 1e-9, f"state {x}: exact {e} above part bound {min(containing)}"
    assert exact.max() <= result.upper_bound + 1e-9
    return float(exact.max())


@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory):
    return tmp_path_factory.mktemp("abstraction")


@pytest.fixture(scope="module")
def acc_risky(tmp_module):
    system = make("acc-v1")
    policy = risky_policy(tmp_module, "acc-v1")
    result = verify_abstraction(
        system.model(), policy, AbstractionOptions(horizon=7, domain="octagon", phi=0.3, containment=True, seed=1)
    )
    return system, policy, result


def test_acc_risky_bound_is_sound_and_informative(acc_risky):
    system, policy, result = acc_risky
    assert result.guarantee == GUARANTEE == "sound upper bound"
    worst = check_parts_against_exact(system, policy, result, count=300, seed=2)
    assert worst > 0.05  # the check is not vacuous ...
    assert result.upper_bound < 1.0  # ... and neither is the bound


def test_acc_risky_monte_carlo_below_bound(acc_risky):
    system, policy, result = acc_risky
    rng = np.random.default_rng(3)
    # start in the riskiest part: simulate from uniform points of it
    part = part_polytopes(result)[int(np.argmax([p.bound for p in result.parts]))]
    x0 = part.sample(4000, rng)
    stat = verify_statistical(
        system.model(),
        unsafe_property(system.model(), result.options.horizon),
        load_policy(policy),
        StatisticalOptions(method="clopper-pearson", runs=4000, delta=2e-6, simulation=SimulationOptions(seed=3)),
        starts=x0,
    )
    assert stat.interval[0] <= max(p.bound for p in result.parts)  # the lower end: beta.ppf(1e-6, k, n - k + 1)


def test_pendulum_risky_bound_is_sound(tmp_module):
    system = make("pendulum-v1")
    policy = risky_policy(tmp_module, "pendulum-v1")
    result = verify_abstraction(system.model(), policy, AbstractionOptions(horizon=5, domain="box", phi=0.3, containment=True))
    worst = check_parts_against_exact(system, policy, result, count=150, seed=4)
    assert worst > 0.01
    assert worst <= result.upper_bound < 1.0


@pytest.mark.parametrize("everywhere", [True, False], ids=["refine-everywhere", "where-action-matters"])
@pytest.mark.parametrize("domain,containment", [("box", False), ("octagon", False), ("octagon", True)])
def test_bouncing_ball_risky_bound_is_sound_and_tight(tmp_module, domain, containment, everywhere):
    """A ball just above the paddle's reach that is rarely hit: it fails unless hit in time.

    Exercises the engine's shortcuts with a bound far from 0: identical successors (every hit lands
    at p = 4) are shared, safe last steps are not refined, and (``refine_everywhere=False``) states
    out of the paddle's reach are not refined either.
    """
    system = make("bouncing-ball-v1")
    policy = risky_policy(tmp_module, "bouncing-ball-v1")
    result = verify_abstraction(
        system.model(),
        policy,
        AbstractionOptions(
            horizon=10,
            domain=domain,
            phi=0.2,
            containment=containment,
            refine_everywhere=everywhere,
            initial=((4.2, -0.3), (4.6, 0.3)),
        ),
    )
    worst = check_parts_against_exact(system, policy, result, count=200, seed=12)
    assert worst > 0.5
    assert result.upper_bound < worst + 0.05  # the bound is close to the true worst case
    assert result.n_unrefined_states > 0
    assert result.n_shared_successors > 0 or domain != "box"  # boxes of parts hit over the same v-range coincide


def test_refining_every_state_keeps_the_successors_of_parts_apart(tmp_path):
    """A state the action cannot influence is still split by the policy by default, which keeps its
    parts' successors apart: here the whole state's successor meets the unsafe set, its parts' do not.
    """
    system = make("bouncing-ball-v1")
    # hit iff v > 6 (a steep step in v): the policy splits the states along v
    mlp = MLP(
        (np.array([[0.0, 20.0], [0.0, -20.0]]), np.array([[1.0, -1.0], [-1.0, 1.0]])), (np.array([120.0, -120.0]), np.zeros(2))
    )
    policy = str(
        save_mlp_onnx(
            tmp_path / "step.onnx",
            mlp,
            features=list(system.model().features),
            actions=list(system.model().actions),
            training={"algorithm": "hand-made"},
        )
    )
    opts = dict(horizon=2, phi=0.1, domain="octagon", max_parts=64, initial=((2.4, -5.54), (2.7, -4.54)))
    tight = verify_abstraction(system.model(), policy, AbstractionOptions(**opts))
    coarse = verify_abstraction(system.model(), policy, AbstractionOptions(**opts, refine_everywhere=False))
    check_parts_against_exact(system, policy, tight, count=300, seed=13)
    check_parts_against_exact(system, policy, coarse, count=100, seed=14)
    assert tight.upper_bound < 1e-9 < coarse.upper_bound  # both sound; the default is tighter here


def test_shipped_acc_policy_bound_is_sound():
    system = make("acc-v1")
    policy = str(system.policies["ppo"])
    result = verify_abstraction(
        system.model(), policy, AbstractionOptions(horizon=3, domain="octagon", phi=0.5, containment=True)
    )
    check_parts_against_exact(system, policy, result, count=200, seed=5)


def test_shipped_bouncing_ball_simulation_below_bound():
    system = make("bouncing-ball-v1")
    policy = str(system.policies["ppo"])
    result = verify_abstraction(
        system.model(), policy, AbstractionOptions(horizon=8, domain="octagon", phi=0.3, containment=True, initial="small")
    )
    rng = np.random.default_rng(6)
    x0 = system.model().sample_initial(5000, rng, "small")
    stat = verify_statistical(
        system.model(),
        unsafe_property(system.model(), 8),
        load_policy(policy),
        StatisticalOptions(method="clopper-pearson", runs=5000, delta=2e-6, simulation=SimulationOptions(seed=6)),
        starts=x0,
    )
    assert stat.interval[0] <= result.upper_bound


def test_sampled_initial_probabilities_lie_in_part_intervals(acc_risky):
    """Every concrete action probability (onnxruntime, float32) lies in the interval of its part."""
    system, policy_file, result = acc_risky
    policy = load_policy(policy_file)
    rng = np.random.default_rng(7)
    for poly, part in zip(part_polytopes(result), result.parts, strict=True):
        x = poly.sample(50, rng)
        probs = policy.action_probabilities(system.model().observe(x))
        assert (probs >= np.array(part.probability_lower)).all()
        assert (probs <= np.array(part.probability_upper)).all()


def test_result_records_settings_seed_and_versions(acc_risky):
    _, _, result = acc_risky
    d = result.to_json()
    assert d["options"]["horizon"] == 7 and d["options"]["domain"] == "octagon" and d["seed"] == 1
    assert {"numpy", "scipy", "highspy", "rlverify"} <= set(d["versions"])
    assert result.n_abstract_states == result.imdp.n_states
    assert result.timings["total"] >= result.timings["solving"]


def test_same_seed_same_result():
    system = make("acc-v1")
    opts = AbstractionOptions(horizon=2, domain="octagon", phi=0.5, containment=True, seed=4)
    a = verify_abstraction(system.model(), system.policies["ppo"], opts)
    b = verify_abstraction(system.model(), system.policies["ppo"], opts)
    assert a.upper_bound == b.upper_bound
    assert a.n_abstract_states == b.n_abstract_states and a.n_polyhedra == b.n_polyhedra


def test_initial_region_meeting_unsafe_set_gives_one():
    system = make("acc-v1")
    r = verify_abstraction(
        system.model(), system.policies["ppo"], AbstractionOptions(horizon=2, initial=((-1.0, 26.0), (1.0, 27.0)))
    )
    assert r.upper_bound == 1.0


# ---------------------------------------------------------------------------------------- bad input


def test_initial_region_outside_domain():
    system = make("acc-v1")
    with pytest.raises(DomainError, match=r"outside the state domain: v in \[30, 40\]"):
        verify_abstraction(system.model(), system.policies["ppo"], AbstractionOptions(horizon=2, initial=((5, 30), (6, 40))))


@pytest.mark.parametrize("horizon", [0, -3])
def test_horizon_must_be_positive(horizon):
    system = make("acc-v1")
    with pytest.raises(AbstractionError, match="horizon must be a positive integer"):
        verify_abstraction(system.model(), system.policies["ppo"], AbstractionOptions(horizon=horizon))


@pytest.mark.parametrize("phi", [0.0, -0.1, 1.5])
def test_phi_must_be_in_unit_interval(phi):
    system = make("acc-v1")
    with pytest.raises(AbstractionError, match=r"phi .* must be in \(0, 1\]"):
        verify_abstraction(system.model(), system.policies["ppo"], AbstractionOptions(horizon=2, phi=phi))


def test_unbounded_template_is_rejected():
    system = make("acc-v1")
    with pytest.raises(DomainError, match="unbounded"):
        from rlverify.abstraction.domains import Template

        Template(np.array([[1.0, 1.0], [2.0, 2.0]]), system.model().variables)


def test_unsupported_layer_is_named(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 2), dtype=np.float32), "W")
    nodes = [helper.make_node("MatMul", ["s", "W"], ["z"]), helper.make_node("Tanh", ["z"], ["out"], name="act0")]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 2])],
        initializer=[w],
    )
    path = tmp_path / "tanh.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    with pytest.raises(PolicyError, match=r"act0.*Tanh") as info:
        verify_abstraction(make("acc-v1").model(), str(path), AbstractionOptions(horizon=2))
    assert isinstance(info.value, RlverifyError)


def test_network_of_wrong_size_is_rejected(tmp_path):
    path = save_mlp_onnx(tmp_path / "p.onnx", MLP.random((2, 4, 3), seed=0), features=["a", "b"], actions=["x", "y", "z"])
    with pytest.raises(PolicyError, match="3 outputs but the benchmark has 2 actions"):
        verify_abstraction(make("acc-v1").model(), str(path), AbstractionOptions(horizon=2))


@pytest.mark.parametrize("domain,containment", [("box", False), ("template", True), ("octagon", False)])
def test_acc_risky_other_domains_are_sound(tmp_module, domain, containment):
    system = make("acc-v1")
    policy = risky_policy(tmp_module, "acc-v1")
    result = verify_abstraction(
        system.model(), policy, AbstractionOptions(horizon=5, domain=domain, phi=0.3, containment=containment)
    )
    check_parts_against_exact(system, policy, result, count=100, seed=8)
    assert result.n_containment_merges == 0 or containment


def test_shipped_pendulum_policy_bound_is_sound():
    system = make("pendulum-v1")
    policy = str(system.policies["ppo"])
    result = verify_abstraction(system.model(), policy, AbstractionOptions(horizon=3, domain="box", phi=0.5, containment=True))
    check_parts_against_exact(system, policy, result, count=100, seed=9)


@pytest.mark.slow
def test_shipped_policies_at_paper_horizons_are_sound():
    for bid, k, dom, phi in (("acc-v1", 7, "octagon", 0.5), ("pendulum-v1", 6, "box", 0.5)):
        system = make(bid)
        policy = str(system.policies["ppo"])
        result = verify_abstraction(
            system.model(), policy, AbstractionOptions(horizon=k, domain=dom, phi=phi, containment=True)
        )
        check_parts_against_exact(system, policy, result, count=300, seed=10)


def test_engine_imdp_agrees_with_storm(acc_risky):
    pytest.importorskip("stormpy")
    from rlverify.abstraction.robust_vi import bounded_reachability, storm_bounded_reachability

    _, _, result = acc_risky
    ours, _ = bounded_reachability(result.imdp, 7)
    storm = storm_bounded_reachability(result.imdp, 7)
    assert np.allclose(ours, storm, atol=1e-6)


def test_budget_of_abstract_states_is_enforced_with_advice():
    """At max_states the run answers (it used to abort with no result): the states not expanded count as failing in
    the upper bound and as safe in the lower, and a warning names the budget and what helps."""
    system = make("bouncing-ball-v1")
    r = verify_abstraction(
        system.model(),
        system.policies["ppo"],
        AbstractionOptions(horizon=20, domain="box", phi=0.1, max_states=40),
    )
    assert r.n_abstract_states <= 42
    assert any(re.search(r"max_states=40 abstract states reached at depth \d+ .*--containment", w) for w in r.warnings)
    assert r.upper_bound == 1.0 and r.lower_all == 0.0  # unexpanded states reach the horizon's end: nothing is known


def test_acc_risky_two_sided_bounds_bracket_the_exact_values(acc_risky):
    """The sound lower bounds (overall and per part) lie below, and the witness's value equals, the failure
    probabilities enumerated here (every action sequence, onnxruntime): on a risky network, so neither is 0."""
    system, policy_file, result = acc_risky
    policy = load_policy(policy_file)
    rng = np.random.default_rng(21)
    lo, hi = np.array(result.initial_lo), np.array(result.initial_hi)
    x0 = lo + (hi - lo) * rng.random((150, system.model().n))
    exact = exact_failure(system, policy, x0, 7)
    assert result.lower_all <= exact.min() + 1e-9
    for poly, part in zip(part_polytopes(result), result.parts, strict=True):
        inside = poly.contains_points(x0, tol=1e-9)
        assert (part.lower <= exact[inside] + 1e-9).all()
    w = result.worst_witness
    at_witness = exact_failure(system, policy, np.array([w.state]), 7)[0]
    assert w.method == "enumeration" and w.lower <= at_witness + 1e-9 <= result.upper_bound + 2e-9
    assert at_witness > 0.3  # a risky start state: the witness is informative
    assert result.gap == pytest.approx(result.upper_bound - max(w.lower, max(p.lower for p in result.parts)))
