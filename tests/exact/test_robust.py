"""Robustness to observation perturbations and to model error, against brute force on tiny models.

The expected values are computed here without the engine: the models' dynamics are written out in
numpy, every memoryless deterministic adversary (one admissible observation per state) or every
vertex resolution of the interval rows is enumerated, and each resulting chain is solved exactly.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from rlverify import verify_exact
from rlverify.cli.main import main
from rlverify.errors import OptionError, PropertyError
from rlverify.exact import ExactOptions, ModelErrorOptions, RobustnessOptions, model_error_bounds, robustness
from rlverify.exact.adversarial import fgsm, offsets
from rlverify.models import load_model
from rlverify.policies import MLP, load_policy, save_mlp_onnx
from tests.exact.resolved import parsed

# a 3 x 2 grid: start (0,0); crash at (1,1), goal at (2,1); moves slip
GRID = """mdp
formula stop = (x=1 & y=1) | (x=2 & y=1);
module grid
  x : [0..2] init 0;
  y : [0..1] init 0;
  [right] !stop & x<2 -> 0.8 : (x'=x+1) + 0.2 : true;
  [left]  !stop & x>0 -> 0.8 : (x'=x-1) + 0.2 : true;
  [up]    !stop & y<1 -> 0.6 : (y'=1) + 0.4 : (x'=min(x+1, 2));
  [down]  !stop & y>0 -> 0.9 : (y'=0) + 0.1 : true;
  [] stop -> true;
endmodule
label "crash" = x=1 & y=1;
label "goal" = x=2 & y=1;
rewards "steps"
  true : 1;
endrewards
"""
ACTIONS = ("right", "left", "up", "down")
CELLS = [(x, y) for x in range(3) for y in range(2)]
STOP = {(1, 1), (2, 1)}


def grid_moves(x: int, y: int) -> dict[str, list[tuple[float, tuple[int, int]]]]:
    """The grid's available actions in a non-stop cell and their outcomes (written out from GRID)."""
    out = {}
    if x < 2:
        out["right"] = [(0.8, (x + 1, y)), (0.2, (x, y))]
    if x > 0:
        out["left"] = [(0.8, (x - 1, y)), (0.2, (x, y))]
    if y < 1:
        out["up"] = [(0.6, (x, 1)), (0.4, (min(x + 1, 2), y))]
    if y > 0:
        out["down"] = [(0.9, (x, 0)), (0.1, (x, y))]
    return out


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    path = tmp_path_factory.mktemp("grid") / "grid.prism"
    path.write_text(GRID)
    return load_model(path)


def network_policy(tmp: Path, seed: int, *, scale: float = 1.5):
    mlp = MLP.random((2, 16, 4), seed=seed)
    mlp = MLP(tuple(w * scale for w in mlp.weights), mlp.biases)
    path = save_mlp_onnx(tmp / f"pi{seed}.onnx", mlp, features=["x", "y"], actions=list(ACTIONS))
    return load_policy(str(path))


def reach(P: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Exact ``P(F target)`` of a DTMC ``(n, n)`` by a linear solve over the states that can reach it."""
    can = target.copy()
    while True:
        more = can | ((P[:, can] > 0).any(axis=1))
        if (more == can).all():
            break
        can = more
    solve = can & ~target
    x = target.astype(float)
    idx = np.flatnonzero(solve)
    A = np.eye(len(idx)) - P[np.ix_(idx, idx)]
    b = P[np.ix_(idx, np.flatnonzero(target))].sum(axis=1)
    x[idx] = np.linalg.solve(A, b)
    return x


def chain(choice: dict, unavailable: str) -> np.ndarray:
    """``(7, 7)`` chain (cells, then the stalled sink) for one distribution per decision cell."""
    n = len(CELLS)
    P = np.zeros((n + 1, n + 1))
    P[n, n] = 1.0
    for i, (x, y) in enumerate(CELLS):
        if (x, y) in STOP:
            P[i, i] = 1.0
            continue
        moves, p = grid_moves(x, y), choice[(x, y)]
        avail = np.array([a in moves for a in ACTIONS])
        if unavailable == "renormalize":
            p = np.where(avail, p, 0.0) / p[avail].sum()
        else:
            P[i, n] += p[~avail].sum()
        for a, pa in zip(ACTIONS, p, strict=True):
            for q, cell in moves.get(a, []):
                P[i, CELLS.index(cell)] += pa * q
    return P


def brute_force(
    policy, epsilon: int, norm: str, perturb: tuple[str, ...], label: str, unavailable: str = "stall"
) -> tuple[float, float, float]:
    """(nominal, max, min) of P(F label) over every memoryless deterministic adversary."""
    options = {}
    for cell in CELLS:
        if cell in STOP:
            continue
        seen = [cell]  # the nominal observation first
        for dx in range(-epsilon, epsilon + 1):
            for dy in range(-epsilon, epsilon + 1):
                if ("x" not in perturb and dx) or ("y" not in perturb and dy):
                    continue
                if (max(abs(dx), abs(dy)) if norm == "linf" else abs(dx) + abs(dy)) > epsilon:
                    continue
                obs = (min(max(cell[0] + dx, 0), 2), min(max(cell[1] + dy, 0), 1))
                if obs not in seen:
                    seen.append(obs)
        probs = policy.action_probabilities(np.array(seen, dtype=float))
        options[cell] = [probs[i] for i in range(len(seen))]
    target = np.array([c == ((1, 1) if label == "crash" else (2, 1)) for c in CELLS] + [False])
    start = CELLS.index((0, 0))
    cells = list(options)
    values = []
    for pick in itertools.product(*(range(len(options[c])) for c in cells)):
        values.append(reach(chain({c: options[c][k] for c, k in zip(cells, pick, strict=True)}, unavailable), target)[start])
    nominal = reach(chain({c: options[c][0] for c in cells}, unavailable), target)[start]
    return nominal, max(values), min(values)


@pytest.mark.parametrize("norm", ["linf", "l1"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_worst_and_best_case_equal_brute_force(grid, tmp_path, seed, norm):
    policy = network_policy(tmp_path, seed)
    for label in ("crash", "goal"):
        r = robustness(grid, parsed(grid, f'P=? [F "{label}"]'), policy, RobustnessOptions(epsilon=1, norm=norm))
        nominal, hi, lo = brute_force(policy, 1, norm, ("x", "y"), label)
        assert r.nominal == pytest.approx(nominal, abs=1e-6)
        assert r.pmax == pytest.approx(hi, abs=1e-6)
        assert r.pmin == pytest.approx(lo, abs=1e-6)
        assert r.pmin - 1e-9 <= r.attack <= r.pmax + 1e-9  # the FGSM baseline never beats the exact worst case


def test_l1_is_a_smaller_budget_than_linf_and_brute_force_tells_them_apart(grid, tmp_path):
    policy = network_policy(tmp_path, 3)
    linf = robustness(grid, parsed(grid, 'P=? [F "crash"]'), policy, RobustnessOptions(epsilon=1, norm="linf"))
    l1 = robustness(grid, parsed(grid, 'P=? [F "crash"]'), policy, RobustnessOptions(epsilon=1, norm="l1"))
    bl = brute_force(policy, 1, "linf", ("x", "y"), "crash")
    b1 = brute_force(policy, 1, "l1", ("x", "y"), "crash")
    assert (linf.pmax, l1.pmax) == (pytest.approx(bl[1], abs=1e-6), pytest.approx(b1[1], abs=1e-6))
    assert l1.pmax <= linf.pmax + 1e-9 and l1.pmin >= linf.pmin - 1e-9
    assert l1.perturbations_per_state == 5 and linf.perturbations_per_state == 9
    assert l1.choices < linf.choices
    assert bl[1] - b1[1] > 1e-4 or b1[2] - bl[2] > 1e-4  # the two budgets really differ on this policy


@pytest.mark.parametrize("unavailable", ["stall", "renormalize"])
def test_feature_mask_perturbs_only_the_named_features(grid, tmp_path, unavailable):
    policy = network_policy(tmp_path, 4)
    r = robustness(
        grid, parsed(grid, 'P=? [F "goal"]'), policy, RobustnessOptions(epsilon=1, perturb=("x",), unavailable=unavailable)
    )
    nominal, hi, lo = brute_force(policy, 1, "linf", ("x",), "goal", unavailable)
    assert r.perturbed == ("x",) and r.perturbations_per_state == 3
    assert (r.nominal, r.pmax, r.pmin) == (
        pytest.approx(nominal, abs=1e-6),
        pytest.approx(hi, abs=1e-6),
        pytest.approx(lo, abs=1e-6),
    )
    for p in r.worst_perturbations:
        assert set(p["offset"]) == {"x"}


def test_epsilon_zero_is_the_nominal_value(grid, tmp_path):
    policy = network_policy(tmp_path, 5)
    for prop in ('P=? [F "goal"]', 'P=? [F<=4 "crash"]'):
        exact = verify_exact(grid, prop, policy, ExactOptions())
        r = robustness(grid, parsed(grid, prop), policy, RobustnessOptions(epsilon=0))
        assert r.nominal == exact.value
        assert r.pmax == pytest.approx(exact.value, abs=1e-9) and r.pmin == pytest.approx(exact.value, abs=1e-9)
        assert r.attack == pytest.approx(exact.value, abs=1e-9)
        assert r.changed_states == 0 and r.worst_perturbations == []
        assert r.choices == r.states  # one choice per state: the nominal chain


def test_step_bounded_worst_case_brackets_every_memoryless_adversary(grid, tmp_path):
    # for F<=k the worst adversary may depend on the step; memoryless ones can only do worse
    policy = network_policy(tmp_path, 6)
    r = robustness(grid, parsed(grid, 'P=? [F<=3 "crash"]'), policy, RobustnessOptions(epsilon=1))
    options = {}
    for cell in CELLS:
        if cell not in STOP:
            seen = sorted(
                {(min(max(cell[0] + dx, 0), 2), min(max(cell[1] + dy, 0), 1)) for dx in (-1, 0, 1) for dy in (-1, 0, 1)}
            )
            options[cell] = list(policy.action_probabilities(np.array(seen, dtype=float)))
    start, target = CELLS.index((0, 0)), np.array([c == (1, 1) for c in CELLS] + [False])
    for pick in itertools.product(*(range(len(v)) for v in options.values())):
        P = chain({c: options[c][k] for c, k in zip(options, pick, strict=True)}, "stall")
        v = target.astype(float)
        for _ in range(3):
            v = np.where(target, 1.0, P @ v)
        assert r.pmin - 1e-9 <= v[start] <= r.pmax + 1e-9


def test_changed_states_are_those_where_some_observation_changes_the_argmax(grid, tmp_path):
    policy = network_policy(tmp_path, 7, scale=3.0)
    r = robustness(grid, parsed(grid, 'P=? [F "crash"]'), policy, RobustnessOptions(epsilon=1))
    expected = set()
    for cell in CELLS:
        if cell in STOP:
            continue
        seen = [(min(max(cell[0] + dx, 0), 2), min(max(cell[1] + dy, 0), 1)) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
        best = np.argmax(policy.action_probabilities(np.array(seen, dtype=float)), axis=1)
        if (best != best[seen.index(cell)]).any():
            expected.add(cell)
    # every decision cell of this grid is reachable through some perturbation
    got = {(v[r.variables.index("x")], v[r.variables.index("y")]) for v in r.changed_valuations}
    assert got == expected and r.changed_states == len(expected)
    data = r.to_json()
    assert data["worst_perturbations_total"] == len(r.worst_perturbations)


def test_fgsm_perturbations_are_admissible(grid, tmp_path):
    policy = network_policy(tmp_path, 8)
    x = np.array([[0, 0], [1, 0], [2, 0], [0, 1]], dtype=float)
    low, high = np.array([0.0, 0.0]), np.array([2.0, 1.0])
    for norm in ("linf", "l1"):
        for eps in (1, 2):
            adv = fgsm(policy, x, eps, norm, np.array([0, 1]), low, high)
            d = np.abs(adv - x)
            assert (d.max(axis=1) if norm == "linf" else d.sum(axis=1)).max() <= eps
            assert (adv >= low).all() and (adv <= high).all() and (adv == np.rint(adv)).all()
    # the attack moves away from the nominal argmax where it can: the loss does not decrease on this network
    mlp = policy.network()
    adv = fgsm(policy, x, 1, "linf", np.array([0, 1]), low, high)
    a = np.argmax(mlp(x), axis=1)

    def loss(z):
        return -np.log(np.exp(z - z.max(1, keepdims=True))[np.arange(len(z)), a] / np.exp(z - z.max(1, keepdims=True)).sum(1))

    assert (loss(mlp(adv)) >= loss(mlp(x)) - 1e-9).sum() >= 3


def test_offsets():
    assert offsets(0, 2, "linf").tolist() == [[0, 0]]
    assert len(offsets(1, 2, "linf")) == 9 and len(offsets(1, 2, "l1")) == 5 and len(offsets(2, 2, "l1")) == 13
    assert offsets(1, 2, "l1")[0].tolist() == [0, 0]


# ---------------------------------------------------------------------------------------------
# model error

WALK = """mdp
module walk
  x : [0..4] init 2;
  [right] x>0 & x<4 -> 0.7 : (x'=x+1) + 0.3 : (x'=x-1);
  [left]  x>0 & x<4 -> 0.6 : (x'=x-1) + 0.3 : (x'=x+1) + 0.1 : true;
  [] x=0 | x=4 -> true;
endmodule
label "goal" = x=4;
"""
WALK_MOVES = {"right": [(0.7, 1), (0.3, -1)], "left": [(0.6, -1), (0.3, 1), (0.1, 0)]}


def vertices(lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """Vertices of ``{p : lo <= p <= hi, sum p = 1}``: all but one entry at a bound."""
    out: list[np.ndarray] = []
    n = len(lo)
    for free in range(n):
        others = [i for i in range(n) if i != free]
        for bits in itertools.product((0, 1), repeat=len(others)):
            p = np.zeros(n)
            for i, b in zip(others, bits, strict=True):
                p[i] = hi[i] if b else lo[i]
            p[free] = 1.0 - p.sum()
            if lo[free] - 1e-12 <= p[free] <= hi[free] + 1e-12 and not any(np.allclose(p, q) for q in out):
                out.append(p)
    return out


def walk_value(rows: dict[int, np.ndarray]) -> float:
    P = np.zeros((5, 5))
    P[0, 0] = P[4, 4] = 1.0
    for x, row in rows.items():
        P[x] = row
    return reach(P, np.arange(5) == 4)[2]


def walk_intervals(pi: np.ndarray, delta: float, relative: bool) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per action and state: the MDP's successor intervals; pi ``(2,)`` over (right, left)."""
    out = {}
    for x in (1, 2, 3):
        for a, moves in WALK_MOVES.items():
            lo, hi = np.zeros(5), np.zeros(5)
            for p, dx in moves:
                lo[x + dx] += max(p * (1 - delta) if relative else p - delta, 0.0)
                hi[x + dx] += min(p * (1 + delta) if relative else p + delta, 1.0)
            out[x, a] = (lo, hi)
    return out


@pytest.mark.parametrize("delta,relative", [(0.05, False), (0.2, True), (0.35, False)])
def test_model_error_bounds_equal_brute_force_over_vertices(tmp_path, delta, relative):
    path = tmp_path / "walk.prism"
    path.write_text(WALK)
    model = load_model(path)
    pi = np.array([0.55, 0.45])
    from rlverify.policies import CallablePolicy

    policy = CallablePolicy(lambda s: np.tile(pi, (len(s), 1)), ["x"], ["right", "left"], name="fixed")
    r = model_error_bounds(model, parsed(model, 'P=? [F "goal"]'), policy, ModelErrorOptions(delta=delta, relative=relative))
    per_action = walk_intervals(pi, delta, relative)
    # the interval chain: pi-weighted intervals; brute force over the vertices of each row
    rows = {
        x: (
            pi[0] * per_action[x, "right"][0] + pi[1] * per_action[x, "left"][0],
            pi[0] * per_action[x, "right"][1] + pi[1] * per_action[x, "left"][1],
        )
        for x in (1, 2, 3)
    }
    support = {x: np.flatnonzero(rows[x][1] > 0) for x in rows}
    verts = {x: vertices(rows[x][0][support[x]], rows[x][1][support[x]]) for x in rows}
    values = []
    for pick in itertools.product(*(verts[x] for x in (1, 2, 3))):
        full = {}
        for x, v in zip((1, 2, 3), pick, strict=True):
            full[x] = np.zeros(5)
            full[x][support[x]] = v
        values.append(walk_value(full))
    assert r.lower == pytest.approx(min(values), abs=1e-6)
    assert r.upper == pytest.approx(max(values), abs=1e-6)
    nominal = walk_value(
        {
            x: sum(pi[i] * sum(np.eye(5)[x + dx] * p for p, dx in WALK_MOVES[a]) for i, a in enumerate(("right", "left")))
            for x in (1, 2, 3)
        }
    )
    assert r.nominal == pytest.approx(nominal, abs=1e-6)
    assert r.lower <= r.nominal <= r.upper
    # sound for the real uncertainty: every model with per-action probabilities in their intervals
    # (vertices of each action's polytope) induces a chain whose value lies in [lower, upper]
    action_verts = {k: vertices(lo[hi > 0], hi[hi > 0]) for k, (lo, hi) in per_action.items()}
    keys = sorted(action_verts)
    for pick in itertools.product(*(action_verts[k] for k in keys)):
        rows_m = {x: np.zeros(5) for x in (1, 2, 3)}
        for (x, a), v in zip(keys, pick, strict=True):
            full = np.zeros(5)
            full[per_action[x, a][1] > 0] = v
            rows_m[x] += pi[0 if a == "right" else 1] * full
        assert r.lower - 1e-7 <= walk_value(rows_m) <= r.upper + 1e-7
    assert (r.clipped > 0) == (not relative and delta > 0.1)  # 0.1 - 0.35 < 0: clipped, and said
    if r.clipped:  # a low of 0: said
        assert "clipped" in r.warnings[0] and "rlverify's robust value iteration" in r.guarantee
        # step-bounded: every memoryless vertex resolution stays inside its bounds
        b = model_error_bounds(model, parsed(model, 'P=? [F<=6 "goal"]'), policy, ModelErrorOptions(delta=delta))
        assert b.guarantee.startswith("sound")
        for pick in itertools.product(*(verts[x] for x in (1, 2, 3))):
            P = np.zeros((5, 5))
            P[0, 0] = P[4, 4] = 1.0
            for x, v in zip((1, 2, 3), pick, strict=True):
                P[x, support[x]] = v
            val = (np.arange(5) == 4).astype(float)
            for _ in range(6):
                val = np.where(np.arange(5) == 4, 1.0, P @ val)
            assert b.lower - 1e-9 <= val[2] <= b.upper + 1e-9


def test_model_error_only_for_chosen_actions(tmp_path):
    path = tmp_path / "walk.prism"
    path.write_text(WALK)
    model = load_model(path)
    from rlverify.policies import CallablePolicy

    policy = CallablePolicy(lambda s: np.tile([0.55, 0.45], (len(s), 1)), ["x"], ["right", "left"], name="fixed")
    everything = model_error_bounds(model, parsed(model, 'P=? [F "goal"]'), policy, ModelErrorOptions(delta=0.05))
    right = model_error_bounds(
        model, parsed(model, 'P=? [F "goal"]'), policy, ModelErrorOptions(delta=0.05, actions=("right",))
    )
    assert everything.lower < right.lower <= right.nominal <= right.upper < everything.upper
    zero = model_error_bounds(model, parsed(model, 'P=? [F "goal"]'), policy, ModelErrorOptions(delta=0.0))
    assert zero.lower == pytest.approx(zero.nominal, abs=1e-8) and zero.upper == pytest.approx(zero.nominal, abs=1e-8)
    assert zero.clipped == 0 and not zero.warnings


# ---------------------------------------------------------------------------------------------
# bad input


def test_bad_input_is_named(grid, tmp_path):
    policy = network_policy(tmp_path, 0)
    with pytest.raises(OptionError, match="non-negative integer"):
        robustness(grid, parsed(grid, 'P=? [F "goal"]'), policy, RobustnessOptions(epsilon=0.5))  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="non-negative integer"):
        robustness(grid, parsed(grid, 'P=? [F "goal"]'), policy, RobustnessOptions(epsilon=-1))
    with pytest.raises(OptionError, match=r"'z' is not a feature.*did you mean|'z' is not a feature"):
        robustness(grid, parsed(grid, 'P=? [F "goal"]'), policy, RobustnessOptions(perturb=("z",)))
    with pytest.raises(PropertyError, match="probability properties"):
        robustness(grid, parsed(grid, 'Pmax=? [F "goal"]'), policy)
    with pytest.raises(OptionError, match="--delta"):
        model_error_bounds(grid, parsed(grid, 'P=? [F "goal"]'), policy, ModelErrorOptions(delta=-0.1))
    with pytest.raises(OptionError, match="--uncertain: 'jump'"):
        model_error_bounds(grid, parsed(grid, 'P=? [F "goal"]'), policy, ModelErrorOptions(actions=("jump",)))


def test_cli(grid, tmp_path, capsys):
    import json

    policy = network_policy(tmp_path, 0)
    spec = str(tmp_path / "pi0.onnx")
    model = str(grid.path)
    assert main(["robust", model, "--policy", spec, "-p", 'P=? [F "crash"]', "--epsilon", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["result"]
    r = robustness(grid, parsed(grid, 'P=? [F "crash"]'), policy, RobustnessOptions(epsilon=1))
    assert data["worst"] == pytest.approx(r.worst) and data["states"] == r.states
    assert main(["robust", model, "--policy", spec, "-p", 'P=? [F "crash"]', "--delta", "0.01", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["result"]
    assert data["lower"] <= data["nominal"] <= data["upper"]
    assert main(["robust", model, "--policy", spec, "-p", 'P=? [F "crash"]', "--epsilon", "0.5"]) == 2
    assert "--epsilon" in capsys.readouterr().err
    assert main(["robust", model, "--policy", spec, "-p", 'P=? [F "crash"]', "--perturb", "x,q"]) == 2
    assert "'q' is not a feature" in capsys.readouterr().err
    assert main(["robust", model, "--policy", spec, "-p", 'R=? [F "crash"]']) == 2
    assert "probability properties" in capsys.readouterr().err
    assert main(["robust", model, "--policy", spec, "-p", 'P=? [F "crash"]', "--delta", "0.01", "--norm", "l1"]) == 2
    assert "--delta" in capsys.readouterr().err
