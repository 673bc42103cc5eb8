"""A continuous system declared by the user in a Python file (``rlverify abstract my_system.py:SYSTEM``).

The system written for these tests is a double integrator whose velocity saturates, declared with one
piece per velocity range (the saturation acts per action). Its declared ``step`` is checked against a
hand-written numpy formula; the abstraction's bound against exact failure probabilities computed by
enumerating every action sequence with that hand-written formula and the ONNX policy (onnxruntime),
and against Monte Carlo simulation through a one-sided Clopper-Pearson bound. The CLI, the
constants, malformed declarations (exit code 2, message naming file, field and expectation) and the
progress display are tested as well.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from rlverify.abstraction import AbstractionOptions, AbstractionProgress, verify_abstraction
from rlverify.abstraction.verify import part_polytopes
from rlverify.cli.main import main
from rlverify.errors import ConstantsError, ModelError
from rlverify.models.continuous import DeclaredSystem, InvertedPendulum, declare, load_system, unsafe_property
from rlverify.policies import MLP, load_policy, save_mlp_onnx
from rlverify.statistical import SimulationOptions, StatisticalOptions, verify_statistical

# x' = x + dt v', v' = clip(v + dt u, -vmax, vmax): the saturation depends on the action, so the
# velocity axis is split where some action's v + dt u crosses +-vmax (7 pieces, maps per action).
SYSTEM_FILE = """
FREE = {"x": "x + dt*v + dt*dt*u", "v": "v + dt*u"}
LOW = {"x": "x - dt*vmax", "v": "-vmax"}
HIGH = {"x": "x + dt*vmax", "v": "vmax"}

SYSTEM = {
    "name": "saturated-double-integrator",
    "variables": ["x", "v"],
    "domain": {"x": [-2, 2], "v": [-1.5, 1.5]},
    "actions": ["left", "coast", "right"],
    "constants": {"dt": 0.1, "accel": 2.0, "vmax": 1.0, "limit": 0.8},
    "action_values": {"u": {"left": "-accel", "coast": 0, "right": "accel"}},
    "initial": {"default": {"x": [-0.5, 0.5], "v": [-0.8, 0.8]}, "centre": [[-0.1, -0.1], [0.1, 0.1]]},
    "unsafe": ["x >= limit", "x <= -limit"],
    "observation": {"x": "x", "v": "v"},
    "horizon": 4,
    "pieces": [
        {"when": "v <= -vmax - dt*accel", "next": LOW},
        {"when": "-vmax - dt*accel <= v <= -vmax", "next": {"left": LOW, "coast": LOW, "right": FREE}},
        {"when": "-vmax <= v <= -vmax + dt*accel", "next": {"left": LOW, "coast": FREE, "right": FREE}},
        {"when": ["v >= -vmax + dt*accel", "v <= vmax - dt*accel"], "next": FREE},
        {"when": "vmax - dt*accel <= v <= vmax", "next": {"left": FREE, "coast": FREE, "right": HIGH}},
        {"when": "vmax <= v <= vmax + dt*accel", "next": {"left": FREE, "coast": HIGH, "right": HIGH}},
        {"when": "v >= vmax + dt*accel", "next": HIGH},
    ],
}
"""

U = np.array([-2.0, 0.0, 2.0])


def hand_step(s: np.ndarray, a: np.ndarray, dt: float = 0.1, vmax: float = 1.0) -> np.ndarray:
    """The double integrator written independently of the declaration."""
    v1 = np.clip(s[:, 1] + dt * U[a], -vmax, vmax)
    return np.stack([s[:, 0] + dt * v1, v1], axis=1)


def hand_unsafe(s: np.ndarray, limit: float = 0.8) -> np.ndarray:
    return np.abs(s[:, 0]) >= limit


def controller(gain: float) -> MLP:
    """ReLU network: logits ``gain * (s, 0, -s)`` with ``s = clip(x + 0.5 v, -1, 1)`` (a saturated controller)."""
    w0 = np.array([[1.0, 0.5], [-1.0, -0.5], [1.0, 0.5], [-1.0, -0.5]])
    sat = np.array([1.0, -1.0, -1.0, 1.0])  # relu(s) - relu(-s) - relu(s - 1) + relu(-s - 1) = clip(s, -1, 1)
    return MLP((w0, np.stack([gain * sat, np.zeros(4), -gain * sat])), (np.array([0.0, 0.0, -1.0, -1.0]), np.zeros(3)))


def exact_failure(policy, x0: np.ndarray, horizon: int) -> np.ndarray:
    """P(F<=k unsafe) per start state: every action sequence, with :func:`hand_step` (no rlverify dynamics)."""
    x = np.array(x0, dtype=float)
    owner, mass, failed = np.arange(len(x)), np.ones(len(x)), np.zeros(len(x))
    bad = hand_unsafe(x)
    np.add.at(failed, owner[bad], mass[bad])
    x, owner, mass = x[~bad], owner[~bad], mass[~bad]
    for _ in range(horizon):
        probs = policy.action_probabilities(x)  # features = the state
        x = np.concatenate([hand_step(x, np.full(len(x), a)) for a in range(3)])
        mass = np.concatenate([mass * probs[:, a] for a in range(3)])
        owner = np.tile(owner, 3)
        bad = hand_unsafe(x)
        np.add.at(failed, owner[bad], mass[bad])
        x, owner, mass = x[~bad], owner[~bad], mass[~bad]
    return failed


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("user_system")
    system = root / "my_system.py"
    system.write_text(SYSTEM_FILE)
    policy = root / "net.onnx"
    save_mlp_onnx(
        policy,
        controller(1.0),
        features=["x", "v"],
        actions=["left", "coast", "right"],
        training={"algorithm": "hand-made", "seed": 0},
    )
    return root, f"{system}:SYSTEM", str(policy)


OPTIONS = AbstractionOptions(horizon=4, domain="box", phi=0.2, containment=True, seed=0)


@pytest.fixture(scope="module")
def verified(files):
    _, target, policy = files
    system = load_system(target)
    return system, verify_abstraction(system, policy, OPTIONS)


def test_declared_step_is_the_hand_written_dynamics(files):
    system = load_system(files[1])
    assert isinstance(system, DeclaredSystem) and system.name == "saturated-double-integrator"
    assert system.variables == ("x", "v") and system.actions == ("left", "coast", "right")
    assert not system.pieces_depend_on_box  # no terms, no clip: one static set of pieces
    rng = np.random.default_rng(0)
    x = np.array([-3.0, -2.0]) + np.array([6.0, 4.0]) * rng.random((20000, 2))  # beyond the domain too
    x[:50, 1] = [-1.2, -1.0, -0.8, 0.8, 1.0, 1.2, 0.9, -0.9, 1.1, -1.1] * 5  # on the pieces' boundaries
    for a in range(3):
        np.testing.assert_allclose(system.step(x, np.full(len(x), a)), hand_step(x, np.full(len(x), a)), rtol=0, atol=1e-12)
    assert system.is_unsafe(x).tolist() == hand_unsafe(x).tolist()


def test_pieces_enclose_step_on_random_boxes(files):
    system = load_system(files[1])
    rng = np.random.default_rng(1)
    for _ in range(30):
        lo = np.array([-2.5, -2.0]) + rng.random(2) * np.array([4.0, 3.0])
        hi = lo + rng.random(2) * np.array([1.0, 1.0])
        x = lo + (hi - lo) * rng.random((500, 2))
        pieces = system.pieces(lo, hi)
        for a in range(3):
            y = hand_step(x, np.full(len(x), a))
            ok = np.zeros(len(x), dtype=bool)
            for piece in pieces:
                ok |= piece.contains(x) & piece.maps[a].contains(x, y)
            assert ok.all()


def test_bound_is_above_the_exact_failure_probability_of_every_start_state(files, verified):
    _, result = verified
    policy = load_policy(files[2])
    rng = np.random.default_rng(2)
    lo, hi = np.array(result.initial_lo), np.array(result.initial_hi)
    corners = np.array(np.meshgrid(*zip(lo, hi, strict=True))).reshape(2, -1).T
    x0 = np.vstack([corners, lo + (hi - lo) * rng.random((400, 2))])
    exact = exact_failure(policy, x0, OPTIONS.horizon)
    polys = part_polytopes(result)
    bounds = np.array([p.bound for p in result.parts])
    for x, e in zip(x0, exact, strict=True):
        containing = [b for p, b in zip(polys, bounds, strict=True) if p.contains_points(x[None, :], tol=1e-9)[0]]
        assert containing, f"start state {x} in no initial part"
        assert e <= min(containing) + 1e-9, f"start {x}: exact {e} above its part's bound {min(containing)}"
    # not vacuous: the worst start (a corner, moving fast towards the edge) fails often, the bound is informative
    assert exact.max() > 0.1
    assert exact.max() <= result.upper_bound < 0.6
    assert result.guarantee == "sound upper bound" and len(result.parts) > 1


def test_bound_is_above_monte_carlo_from_the_worst_start(files, verified):
    system, result = verified
    worst = np.array([[-0.5, -0.8]])  # the worst corner (exact: about 0.11)
    stat = verify_statistical(
        system,
        unsafe_property(system, OPTIONS.horizon),
        load_policy(files[2]),
        StatisticalOptions(method="clopper-pearson", runs=20000, delta=2e-6, simulation=SimulationOptions(seed=3)),
        starts=worst,
    )
    assert 0.08 < stat.estimate < 0.14
    assert stat.interval[0] <= result.upper_bound  # the lower end: beta.ppf(1e-6, k, n - k + 1)


def test_cli_gives_the_api_bound_and_the_constants_take_effect(files, capsys):
    _, target, policy = files
    args = ["abstract", target, "--policy", policy, "-k", "4", "--phi", "0.2", "--containment", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)["result"]
    result = verify_abstraction(load_system(target), policy, OPTIONS)
    assert out["upper_bound"] == result.upper_bound and out["guarantee"] == "sound upper bound"
    assert out["model"] == "saturated-double-integrator"
    # a wider rail (limit 0.95): the exact worst failure drops, and so must not rise above the new bound
    assert main([*args, "-c", "limit=0.95"]) == 0
    wide = json.loads(capsys.readouterr().out)["result"]
    assert load_system(target, "limit=0.95").constants["limit"] == 0.95
    assert wide["upper_bound"] < out["upper_bound"]
    # the table names the system and its constants
    assert main(args[:-1]) == 0
    table = capsys.readouterr().out
    assert all(word in table for word in ("saturated-double-integrator", "dt=0.1,", "accel=2,", "vmax=1,", "limit=0.8)"))


def test_cli_initial_region_of_the_declaration(files, capsys):
    _, target, policy = files
    assert main(["abstract", target, "--policy", policy, "-k", "2", "--initial", "centre", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["result"]
    assert out["initial_lo"] == [-0.1, -0.1] and out["upper_bound"] == 0.0  # 2 steps from near 0 cannot reach 0.8


def test_unknown_constant_and_bad_target(files, capsys):
    _, target, policy = files
    assert main(["abstract", target, "--policy", policy, "-c", "limt=1"]) == 2
    assert "no constant 'limt' (did you mean 'limit'?)" in capsys.readouterr().err
    with pytest.raises(ConstantsError, match="malformed constant 'limit'"):
        load_system(target, "limit")
    assert main(["abstract", target.replace("SYSTEM", "SYSTME"), "--policy", policy]) == 2
    assert "defines no 'SYSTME' (did you mean 'SYSTEM'?)" in capsys.readouterr().err
    assert main(["abstract", target.replace("my_system", "none"), "--policy", policy]) == 2
    assert "system declaration file not found" in capsys.readouterr().err
    # another engine refuses a continuous system, naming the one that takes it
    assert main(["verify", target, "--policy", policy, "-p", 'P=? [F "x"]']) == 2
    assert "rlverify abstract" in capsys.readouterr().err


def broken(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


MALFORMED = {
    "missing-field": (
        broken(SYSTEM_FILE, '"unsafe": ["x >= limit", "x <= -limit"],', ""),
        "missing field 'unsafe' (expected a list of polyhedra, each an inequality like 'x >= 1'",
    ),
    "non-affine-piece": (
        broken(SYSTEM_FILE, '"x + dt*v + dt*dt*u"', '"x + dt*v*x"'),
        ("field 'pieces[1].next.right.x': 'x + dt*v*x' is not affine: it multiplies two state-dependent expressions"),
    ),
    "unknown-term": (
        broken(SYSTEM_FILE, '"v": "v + dt*u"}', '"v": "v + dt*log(u + 3)"}'),
        (
            "field 'pieces[1].next.right.v': unknown term 'log' in 'v + dt*log(u + 3)': the engine can "
            "bound sin, cos, tanh, exp"
        ),
    ),
    "wrong-shape": (
        broken(SYSTEM_FILE, '"x": [-2, 2], "v": [-1.5, 1.5]}', '"x": [-2, 2, 3], "v": [-1.5, 1.5]}'),
        "field 'domain': expected [lo, hi] for each variable",
    ),
    "pieces-leave-a-gap": (
        broken(SYSTEM_FILE, '{"when": "v >= vmax + dt*accel", "next": HIGH},', ""),
        "field 'pieces': the pieces' 'when' regions do not cover the state space: e.g. (x=",
    ),
    "guard-uses-the-action": (
        broken(SYSTEM_FILE, '"when": "v <= -vmax - dt*accel"', '"when": "v <= -vmax - dt*u"'),
        "field 'pieces[0].when[0]': 'v <= -vmax - dt*u' uses 'u', which depends on the action",
    ),
    "missing-update": (
        broken(SYSTEM_FILE, '"next": {"left": LOW, "coast": LOW, "right": FREE}', '"next": {"left": LOW, "right": FREE}'),
        "field 'pieces[1].next': no update for action(s) ['coast']",
    ),
    "unbounded-term": (
        broken(SYSTEM_FILE, '"v": "v + dt*u"}', '"v": "v + dt*u + 1e-300*exp(1000*x)"}'),
        "field 'pieces[1].next': action right: a term cannot be bounded on the box",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_declaration_is_a_clear_error_with_exit_code_2(case, files, capsys):
    root, _, policy = files
    text, message = MALFORMED[case]
    path = root / f"bad_{case.replace('-', '_')}.py"
    path.write_text(text)
    assert main(["abstract", f"{path}:SYSTEM", "--policy", policy, "-k", "1"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:SYSTEM: " in err and message in err, err
    assert "Traceback" not in err
    with pytest.raises(ModelError):
        load_system(f"{path}:SYSTEM")


def test_a_factory_gets_the_constants_and_a_non_declaration_is_refused(tmp_path):
    path = tmp_path / "factory.py"
    path.write_text(
        SYSTEM_FILE + "\ndef make(limit=0.8):\n    return dict(SYSTEM, constants=dict(SYSTEM['constants'], "
        "limit=limit))\n\nNOT_A_SYSTEM = 3\n"
    )
    assert load_system(f"{path}:make", "limit=0.5").constants["limit"] == 0.5
    with pytest.raises(ConstantsError, match="cannot pass accel"):
        load_system(f"{path}:make", "accel=1")
    with pytest.raises(ModelError, match=r"expected a system declaration .* got int"):
        load_system(f"{path}:NOT_A_SYSTEM")


def in_enclosure(m, x: np.ndarray, y: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """Boolean ``(N,)``: ``y in {A x + c + B w : w in [w_lo, w_hi]}`` for 2-D states, exactly.

    The disturbance set is a zonotope; in 2-D its facet normals are perpendicular to its generators,
    so the support function in the directions +-e_i, +-b_j and +-perp(b_j) decides membership.
    (``ActionMap.contains`` solves by least squares, which can miss a valid ``w`` when there are more
    disturbance columns than state dimensions.)
    """
    cols = m.b.T
    dirs = np.vstack([np.eye(2), cols, cols[:, ::-1] * [-1.0, 1.0]]) if len(cols) else np.eye(2)
    dirs = np.vstack([dirs, -dirs])
    r = (y - (x @ m.a.T + m.c)) @ dirs.T  # (N, D)
    db = dirs @ m.b  # (D, q)
    s = np.maximum(db * m.w_lo, db * m.w_hi).sum(axis=1) if m.b.shape[1] else np.zeros(len(dirs))
    return (r <= s + tol * (1 + np.abs(y).max(axis=1, keepdims=True))).all(axis=1)


def test_terms_and_saturations_enclose_step(tmp_path):
    """A damped pendulum with sin, cos and tanh terms and clip/wrap: the enclosure contract on random boxes."""
    system = declare(
        {
            "variables": ["th", "om"],
            "domain": {"th": [-3.2, 3.2], "om": [-4, 4]},
            "actions": ["l", "r"],
            "action_values": {"u": [-1, 1]},
            "initial": {"s": {"th": [-0.1, 0.1], "om": [-0.1, 0.1]}},
            "unsafe": ["th >= 1"],
            "let": {"om1": "0.98*om + 0.1*sin(th) + 0.05*cos(2*th + 1) + 0.1*tanh(om - th) + 0.2*u"},
            "pieces": [{"next": {"th": "wrap(th + 0.1*om1, -pi, pi)", "om": "clip(om1, -3, 3)"}}],
        }
    )
    assert system.pieces_depend_on_box
    rng = np.random.default_rng(4)
    for width in (0.01, 0.3, 2.0, 8.0):
        for _ in range(20):
            lo = np.array([-4.0, -5.0]) + rng.random(2) * np.array([8.0, 10.0])
            hi = lo + rng.random(2) * width
            x = lo + (hi - lo) * rng.random((400, 2))
            (piece,) = system.pieces(lo, hi)
            for a in range(2):
                y = system.step(x, np.full(len(x), a))
                th, om = x[:, 0], x[:, 1]
                om1 = 0.98 * om + 0.1 * np.sin(th) + 0.05 * np.cos(2 * th + 1) + 0.1 * np.tanh(om - th) + 0.2 * (-1.0, 1.0)[a]
                np.testing.assert_allclose(y[:, 1], np.clip(om1, -3, 3), atol=1e-12)
                assert in_enclosure(piece.maps[a], x, y).all()
                assert not in_enclosure(piece.maps[a], x, y + np.array([0.0, 7.0])).any()  # the check can fail


def test_pendulum_enclosure_is_sound_on_wide_boxes():
    """sin's range over an angle interval beyond +-3pi/2 (the hand-written enclosure missed the extrema there)."""
    pen = InvertedPendulum()
    rng = np.random.default_rng(5)
    lo, hi = np.array([5.565, -6.56]), np.array([13.97, 15.6])
    x = np.vstack([lo + (hi - lo) * rng.random((5000, 2)), [[3.5 * np.pi, -6.56]]])  # sin = -1 at 7pi/2
    (piece,) = pen.pieces(lo, hi)
    for a in range(3):
        assert in_enclosure(piece.maps[a], x, pen.step(x, np.full(len(x), a))).all()


def test_progress_reports_every_depth_and_the_states_explored(files):
    _, target, policy = files
    events: list[AbstractionProgress] = []
    result = verify_abstraction(load_system(target), policy, OPTIONS, progress=events.append)
    assert [(e.depth, e.stage) for e in events] == [
        (d, s) for d in range(1, 5) for s in ("refining", "successors", "expanded")
    ] + [(4, "solving")]
    assert all(e.horizon == 4 for e in events)
    states = [e.states for e in events]
    assert states == sorted(states) and states[0] == 2  # the fail sink and the root
    assert events[-1].states == result.n_abstract_states and events[-1].polyhedra == result.n_polyhedra
    assert events[0].frontier == 1


def test_cli_progress_on_a_terminal_only(files, capsys, monkeypatch):
    from rich.console import Console

    from rlverify.cli import abstract

    _, target, policy = files
    args = ["abstract", target, "--policy", policy, "-k", "2", "--json"]
    assert main(args) == 0
    assert "abstracting" not in capsys.readouterr().err  # stderr is not a terminal: no progress
    screen = io.StringIO()
    monkeypatch.setattr(abstract, "err_console", Console(file=screen, force_terminal=True, width=200))
    assert main(args) == 0
    json.loads(capsys.readouterr().out)["result"]  # stdout stays clean JSON
    shown = screen.getvalue()
    assert "abstracting: depth" in shown and "states explored" in shown and "frontier" in shown


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_shipped_example_and_its_policy(tmp_path, capsys):
    """examples/double_integrator.py with the committed ONNX: the README's commands, held against exact values."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_policy", EXAMPLES / "make_double_integrator_policy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = load_policy(str(EXAMPLES / "double_integrator.onnx"))
    assert shipped.features == ("x", "v") and shipped.actions == ("left", "coast", "right")
    x = np.random.default_rng(6).uniform(-2, 2, (500, 2))
    z = np.maximum(x @ np.array([[1.0, 0.5], [-1.0, -0.5], [1.0, 0.5], [-1.0, -0.5]]).T - [0, 0, 1, 1], 0)
    s = z @ np.array([1.0, -1.0, -1.0, 1.0])  # clip(x + v/2, -1, 1), by hand
    np.testing.assert_allclose(s, np.clip(x[:, 0] + 0.5 * x[:, 1], -1, 1), atol=1e-12)
    logits = np.stack([3 * s, 0 * s, -3 * s], axis=1)
    expected = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(shipped.action_probabilities(x), expected, atol=1e-5)  # float32 weights
    mlp = module.saturated_controller()
    np.testing.assert_allclose(mlp.weights[1][0], 3 * np.array([1.0, -1.0, -1.0, 1.0]))

    target, policy = f"{EXAMPLES / 'double_integrator.py'}:SYSTEM", str(EXAMPLES / "double_integrator.onnx")
    system = load_system(target, "limit=0.7")
    assert system.pieces_depend_on_box  # clip: the saturation is enclosed per box
    rng = np.random.default_rng(7)
    x = rng.uniform([-2, -1.5], [2, 1.5], (2000, 2))
    for a, u in enumerate((-2.0, 0.0, 2.0)):  # x' = x + dt v + dt^2 u, v' = clip(v + dt u, -1, 1), by hand
        hand = np.stack([x[:, 0] + 0.1 * x[:, 1] + 0.01 * u, np.clip(x[:, 1] + 0.1 * u, -1, 1)], axis=1)
        np.testing.assert_allclose(system.step(x, np.full(len(x), a)), hand, atol=1e-12)
    common = ["abstract", target, "--policy", policy, "-k", "4", "--containment", "--json"]
    assert main([*common, "--phi", "0.3"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["upper_bound"] == 0.0
    assert main([*common, "--phi", "0.2", "-c", "limit=0.7"]) == 0
    bound = json.loads(capsys.readouterr().out)["result"]["upper_bound"]
    corners = np.array([[-0.5, -0.8], [-0.5, 0.8], [0.5, -0.8], [0.5, 0.8]])
    worst = float(simulate_exact(system, shipped, corners, 4).max())
    assert 0.05 < worst <= bound < 0.6


def simulate_exact(system, policy, x0: np.ndarray, horizon: int) -> np.ndarray:
    """Exact P(F<=k unsafe) per start state by enumerating action sequences with ``system.step``."""
    x, owner, mass, failed = np.array(x0, dtype=float), np.arange(len(x0)), np.ones(len(x0)), np.zeros(len(x0))
    for _ in range(horizon):
        probs = policy.action_probabilities(system.observe(x))
        na = probs.shape[1]
        x = np.concatenate([system.step(x, np.full(len(x), a)) for a in range(na)])
        mass, owner = np.concatenate([mass * probs[:, a] for a in range(na)]), np.tile(owner, na)
        bad = system.is_unsafe(x)
        np.add.at(failed, owner[bad], mass[bad])
        x, owner, mass = x[~bad], owner[~bad], mass[~bad]
    return failed


def test_module_docstring_example_is_a_valid_declaration():
    from rlverify.models.continuous import declared

    text = declared.__doc__
    code = text[text.index("    SYSTEM = {") : text.index("Fields (required")]
    namespace: dict = {}
    source = "\n".join(line[4:] for line in code.splitlines())
    exec(compile(source, "docstring", "exec"), namespace)  # the docstring's own example, as written
    system = declare(namespace["SYSTEM"])
    assert system.features == ("x", "v") and system.horizon == 8 and system.default_initial == "default"
    x = np.array([[0.2, 0.95], [0.0, -0.5]])
    # x' = x + dt v, v' = clip(v + dt u, -1, 1), by hand (action right: u = 1)
    np.testing.assert_allclose(system.step(x, np.array([2, 2])), [[0.2 + 0.095, 1.0], [-0.05, -0.4]], atol=1e-12)
