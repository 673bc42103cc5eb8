"""Sound action-probability bounds over polytopes: samples inside, MILP no looser, bad networks named."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.abstraction.domains import Template
from rlverify.abstraction.network_bounds import NetworkBounder, fold_observation, probabilities_from_differences
from rlverify.errors import PolicyError
from rlverify.policies.mlp import MLP, load_network, save_mlp_onnx

CASES = [((2, 16, 16, 2), 0), ((2, 16, 16, 3), 1), ((2, 32, 32, 2), 2), ((2, 8, 8, 8, 4), 3)]


@pytest.mark.parametrize("sizes,seed", CASES, ids=[str(c[0]) for c in CASES])
@pytest.mark.parametrize("kind", ["box", "octagon"])
def test_sampled_probabilities_lie_within_bounds(sizes, seed, kind):
    rng = np.random.default_rng(seed)
    bounder = NetworkBounder(MLP.random(sizes, seed=seed), milp_time_limit=10.0)
    t = Template.named(kind, ("a", "b"))
    for _ in range(3):
        part = t.hull(rng.normal(size=(4, 2)) * rng.uniform(0.02, 0.5) + rng.normal(size=2))
        x = part.sample(2000, rng)
        probs = bounder(x)
        lin = bounder.bounds(part, milp=False)
        milp = bounder.bounds(part, milp=True)
        for b in (lin, milp):
            assert (probs >= b.lower[None, :]).all() and (probs <= b.upper[None, :]).all()
        # MILP is never looser than the linear bounds it starts from
        assert (milp.lower >= lin.lower - 1e-12).all() and (milp.upper <= lin.upper + 1e-12).all()


@pytest.mark.parametrize("sizes,seed", CASES, ids=[str(c[0]) for c in CASES])
@pytest.mark.parametrize("kind", ["box", "octagon"])
def test_batched_interval_bounds_contain_samples_and_match_single_interval_bounds(sizes, seed, kind):
    rng = np.random.default_rng(seed + 10)
    bounder = NetworkBounder(MLP.random(sizes, seed=seed))
    t = Template.named(kind, ("a", "b"))
    parts = [t.hull(rng.normal(size=(4, 2)) * rng.uniform(0.01, 0.5) + rng.normal(size=2)) for _ in range(40)]
    many = bounder.bounds_many(parts, enough=1.0)  # interval bounds are always "enough" here
    assert [b.method for b in many] == ["interval"] * 40 and many[0].lower.shape == (sizes[-1],)
    for part, b in zip(parts, many, strict=True):
        lo, hi = b.lower, b.upper
        probs = bounder(part.sample(500, rng))
        assert (probs >= lo - 1e-12).all() and (probs <= hi + 1e-12).all()
        single = bounder.bounds(part, milp=False, enough=1.0)  # interval bounds are always "enough" here
        assert single.method == "interval"
        assert np.allclose(single.lower, lo, rtol=1e-9, atol=1e-12) and np.allclose(single.upper, hi, rtol=1e-9, atol=1e-12)
        # the linear relaxation is never looser than interval propagation
        lin = bounder.bounds(part, milp=False)
        assert (lin.lower >= lo - 1e-9).all() and (lin.upper <= hi + 1e-9).all()


def test_probability_bounds_agree_with_onnx_float32_inference(tmp_path):
    from rlverify.policies import load_policy

    rng = np.random.default_rng(5)
    mlp = MLP.random((2, 32, 32, 3), seed=5)
    path = save_mlp_onnx(tmp_path / "p.onnx", mlp, features=["a", "b"], actions=["l", "n", "r"])
    policy = load_policy(str(path))
    bounder = NetworkBounder(load_network(str(path), n_actions=3))
    t = Template.box(("a", "b"))
    part = t.from_box(np.array([0.1, -0.2]), np.array([0.15, -0.17]))
    b = bounder.bounds(part, milp=True)
    probs = policy.action_probabilities(part.sample(3000, rng))
    assert (probs >= b.lower).all() and (probs <= b.upper).all()


def test_two_action_bounds_equal_sigmoid_of_difference():
    # z1 - z0 in [-1, 2]: p0 = sigmoid(z0 - z1) in [sigmoid(-2), sigmoid(1)]
    dl = np.array([[0.0, -1.0], [-2.0, 0.0]])
    du = np.array([[0.0, 2.0], [1.0, 0.0]])
    lo, hi = probabilities_from_differences(dl, du)

    def sig(z: float) -> float:
        return 1.0 / (1.0 + np.exp(-z))

    assert np.allclose(lo, [sig(-2.0), sig(-1.0)])
    assert np.allclose(hi, [sig(1.0), sig(2.0)])


def test_softmax_bounds_match_notes_formula_for_independent_logits():
    # with logit intervals [lb, ub] and differences bounded by ub_j - lb_i etc. the bounds are the NOTES formulas
    lb = np.array([0.0, -1.0, 0.5])
    ub = np.array([1.0, 0.0, 0.7])
    dl = lb[None, :] - ub[:, None]
    du = ub[None, :] - lb[:, None]
    lo, hi = probabilities_from_differences(dl, du)
    for i in range(3):
        others = [j for j in range(3) if j != i]
        exp_hi = np.exp(ub[i]) / (np.exp(ub[i]) + np.exp(lb[others]).sum())
        exp_lo = np.exp(lb[i]) / (np.exp(lb[i]) + np.exp(ub[others]).sum())
        assert hi[i] <= exp_hi + 1e-12 and lo[i] >= exp_lo - 1e-12


def test_fold_observation_is_exact():
    rng = np.random.default_rng(0)
    mlp = MLP.random((2, 8, 2), seed=0)
    o, off = np.array([[0.0, -1.0], [1.0, 0.0]]), np.array([28.0, 0.0])
    x = rng.normal(size=(10, 2))
    assert np.allclose(fold_observation(mlp, o, off)(x), mlp(x @ o.T + off))


def test_unsupported_layer_is_named(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 2), dtype=np.float32), "W")
    b = numpy_helper.from_array(np.zeros(2, dtype=np.float32), "b")
    nodes = [
        helper.make_node("Gemm", ["s", "W", "b"], ["z"], transB=1),
        helper.make_node("Sigmoid", ["z"], ["h"], name="squash1"),
        helper.make_node("Gemm", ["h", "W", "b"], ["out"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 2])],
        initializer=[w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "sigmoid.onnx"
    onnx.save(model, str(path))
    with pytest.raises(PolicyError, match=r"squash1.*Sigmoid"):
        load_network(str(path), n_actions=2)


def test_probability_output_network_is_rejected(tmp_path):
    path = save_mlp_onnx(
        tmp_path / "p.onnx", MLP.random((2, 4, 2), seed=0), features=["a", "b"], actions=["x", "y"], output="probabilities"
    )
    with pytest.raises(PolicyError, match="logits"):
        load_network(str(path), n_actions=2)


def test_torchscript_policy_is_read_and_bad_layer_named(tmp_path):
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
    path = tmp_path / "p.pt"
    torch.jit.save(torch.jit.script(net), str(path))
    mlp = load_network(str(path), n_actions=3)
    x = np.random.default_rng(0).normal(size=(5, 2))
    with torch.no_grad():
        expected = net(torch.as_tensor(x, dtype=torch.float32)).double().numpy()
    assert np.allclose(mlp(x), expected, atol=1e-5)
    bad = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 3))
    torch.jit.save(torch.jit.script(bad), str(tmp_path / "bad.pt"))
    with pytest.raises(PolicyError, match="layer '1' is Tanh"):
        load_network(str(tmp_path / "bad.pt"), n_actions=3)


def test_refine_many_accepts_what_refine_accepts_and_keeps_interval_bounds_narrow():
    from rlverify.abstraction.refinement import RefinementOptions, refine, refine_many

    bounder = NetworkBounder(MLP.random((2, 16, 16, 2), seed=5))
    t = Template.named("octagon", ("a", "b"))
    rng = np.random.default_rng(6)
    polys = [t.hull(rng.normal(size=(4, 2)) * s + rng.normal(size=2)) for s in np.geomspace(1e-4, 1.0, 30)]
    opts = RefinementOptions(phi=0.2, min_width=1e-3)
    many = refine_many(polys, bounder, opts, np.random.default_rng(0))
    methods = {part.bounds.method for parts in many for part in parts}
    assert "interval" in methods and methods & {"linear", "milp"}  # both paths taken
    for poly, parts in zip(polys, many, strict=True):
        for part in parts:
            spread = part.bounds.spread
            assert spread <= opts.phi or part.bounds.method == "milp"
            if part.bounds.method == "interval":
                assert spread <= min(opts.phi, opts.interval_spread)
        if len(parts) == 1 and parts[0].bounds.method == "interval":  # accepted whole: refine agrees
            single = refine(poly, bounder, opts, np.random.default_rng(0))
            assert len(single) == 1 and np.allclose(single[0].bounds.upper, parts[0].bounds.upper, rtol=1e-9)


def test_the_milp_prints_nothing_to_stdout_not_even_the_highs_banner():
    """The library's MILP writes nothing to file descriptor 1 (no CLI guard here): HiGHS's banner, printed by
    ``highspy.Highs()`` before ``output_flag`` could be set, broke ``abstract --json`` (run as a process: the
    banner is written by native code to the real descriptor)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import numpy as np\n"
        "from rlverify.abstraction.domains import Template\n"
        "from rlverify.abstraction.network_bounds import NetworkBounder\n"
        "from rlverify.policies.mlp import MLP\n"
        "b = NetworkBounder(MLP.random((2, 8, 8, 3), seed=1))\n"
        "part = Template.named('box', ('a', 'b')).hull(np.array([[0.0, 0.0], [1.0, 1.0]]))\n"
        "bounds = b.bounds(part, milp=True)\n"
        "assert b.milp_calls > 0, b.milp_calls\n"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(src)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == ""
