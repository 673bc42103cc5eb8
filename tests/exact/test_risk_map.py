"""Risk and regret maps against values computed independently: the policy's chain solved with numpy, the
optimum by value iteration over the MDP enumerated here in Python (a mirror of the PRISM text below)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.errors import OptionError, PropertyError, RlverifyError
from rlverify.exact.maps import MapOptions, compile_where, risk_map
from rlverify.models import load_model
from rlverify.policies import CallablePolicy
from tests.exact.resolved import parsed

#: a 4x3 grid; the agent starts at (0,0); a pit whose place flips with `obs` (every move flips it, waiting
#: flips it with probability 1/2); a wall at (1,2) (a cell with no state); the goal at (3,2)
GRID = """mdp
const double slip = 0.2;
formula pit = (x=1 & y=1 & obs=1) | (x=2 & y=0 & obs=0);
formula goal = x=3 & y=2;
formula stop = pit | goal;
module grid
  x : [0..3] init 0;
  y : [0..2] init 0;
  obs : [0..1] init 0;
  [east]  !stop & x<3 & !(x=0 & y=2) -> 1-slip : (x'=x+1) & (obs'=1-obs) + slip : (obs'=1-obs);
  [north] !stop & y<2 & !(x=1 & y=1) -> 1-slip : (y'=y+1) & (obs'=1-obs) + slip : (obs'=1-obs);
  [wait]  !stop -> 0.5 : (obs'=1-obs) + 0.5 : true;
  [done]  stop -> true;
endmodule
label "crash" = pit;
label "goal" = goal;
"""
ACTIONS = ["east", "north", "wait", "done"]
CRASH = 'P=? [F "crash"]'
GOAL = 'P=? [F "goal"]'


def pit(x, y, o):
    return (x == 1 and y == 1 and o == 1) or (x == 2 and y == 0 and o == 0)


def stop(x, y, o):
    return pit(x, y, o) or (x == 3 and y == 2)


def actions(s):
    """The MDP by hand: action -> [(probability, successor)] of state (x, y, obs)."""
    x, y, o = s
    if stop(x, y, o):
        return {"done": [(1.0, s)]}
    out = {"wait": [(0.5, (x, y, 1 - o)), (0.5, s)]}
    if x < 3 and not (x == 0 and y == 2):
        out["east"] = [(0.8, (x + 1, y, 1 - o)), (0.2, (x, y, 1 - o))]
    if y < 2 and not (x == 1 and y == 1):
        out["north"] = [(0.8, (x, y + 1, 1 - o)), (0.2, (x, y, 1 - o))]
    return out


def policy_probs(s):
    """The known policy: done where stopped; else east 0.5, north 0.3 (never north at x = 0), wait 0.2,
    renormalised over the available ones."""
    x, _y, _o = s
    avail = actions(s)
    w = {"east": 0.5, "north": 0.3 if x > 0 else 0.0, "wait": 0.2, "done": 1.0}
    p = np.array([w[a] if a in avail else 0.0 for a in ACTIONS])
    return p / p.sum()


def pi(states: np.ndarray) -> np.ndarray:
    return np.array([policy_probs(tuple(int(v) for v in s)) for s in states])


POLICY = CallablePolicy(pi, ["x", "y", "obs"], ACTIONS, name="hand policy")


def reachable(start, step):
    seen, todo = {start}, [start]
    while todo:
        s = todo.pop()
        for t in step(s):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return sorted(seen)


def mdp_states():
    return reachable((0, 0, 0), lambda s: [t for d in actions(s).values() for _, t in d])


def chain(s):
    p = policy_probs(s)
    return [(p[ACTIONS.index(a)] * q, t) for a, d in actions(s).items() for q, t in d if p[ACTIONS.index(a)] > 0]


def policy_states():
    return reachable((0, 0, 0), lambda s: [t for _, t in chain(s)])


def policy_values(target):
    """Reachability of ``target`` on the policy's chain: a linear solve over the states that can reach it."""
    S = policy_states()
    idx = {s: i for i, s in enumerate(S)}
    can = {s for s in S if target(*s)}
    changed = True
    while changed:  # states with a path to the target (the others have value 0)
        changed = False
        for s in S:
            if s not in can and any(t in can for _, t in chain(s)):
                can.add(s)
                changed = True
    A, b = np.eye(len(S)), np.zeros(len(S))
    for s in S:
        i = idx[s]
        if target(*s):
            b[i] = 1.0
        elif s in can:
            for p, t in chain(s):
                A[i, idx[t]] -= p
    return {s: v for s, v in zip(S, np.linalg.solve(A, b), strict=True)}


def optimum_values(target, kind):
    """Pmin/Pmax reachability by value iteration from 0 (the least fixed point of either operator)."""
    S = mdp_states()
    v = {s: 0.0 for s in S}
    pick = min if kind == "min" else max
    for _ in range(20_000):
        new = {s: 1.0 if target(*s) else pick(sum(p * v[t] for p, t in d) for d in actions(s).values()) for s in S}
        delta = max(abs(new[s] - v[s]) for s in S)
        v = new
        if delta < 1e-14:
            break
    return v


def expected_grids(value, optimum, kind, agg, keep=lambda s: True):
    """Cells (x, y) -> (value, optimum, regret, optimum over all MDP states), by hand."""
    f = {"max": max, "min": min, "mean": lambda a: sum(a) / len(a)}[agg]
    out = {}
    for x in range(4):
        for y in range(3):
            pol = [s for s in value if s[:2] == (x, y) and keep(s)]
            every = [s for s in optimum if s[:2] == (x, y) and keep(s)]
            regret = [value[s] - optimum[s] if kind == "min" else optimum[s] - value[s] for s in pol]
            out[(x, y)] = (
                f([value[s] for s in pol]) if pol else None,
                f([optimum[s] for s in pol]) if pol else None,
                f(regret) if pol else None,
                f([optimum[s] for s in every]) if every else None,
                len(pol),
                len(every),
            )
    return out


@pytest.fixture(scope="module")
def grid_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("grid") / "grid.prism"
    path.write_text(GRID)
    return path


def cell(grid, r, x, y):
    i, j = int(np.flatnonzero(r.y_values == y)[0]), int(np.flatnonzero(r.x_values == x)[0])
    v = grid[i, j]
    return None if np.isnan(v) else float(v)


@pytest.mark.parametrize(
    "prop,kind,target", [(CRASH, "min", pit), (GOAL, "max", lambda x, y, o: x == 3 and y == 2)], ids=["crash-min", "goal-max"]
)
@pytest.mark.parametrize("agg", ["max", "min", "mean"])
def test_cells_equal_the_values_computed_by_hand(grid_model, prop, kind, target, agg):
    value, optimum = policy_values(target), optimum_values(target, kind)
    model = load_model(grid_model)
    r = risk_map(model, parsed(model, prop), POLICY, "x,y", MapOptions(agg=agg, optimum=kind))
    assert r.states == {
        "mdp": len(optimum),
        "policy": len(value),
        "mdp_only": len(optimum) - len(value),
        "mdp_filtered": len(optimum),
        "policy_filtered": len(value),
    }
    assert r.initial_value == pytest.approx(value[(0, 0, 0)], abs=1e-5)
    assert r.initial_optimum == pytest.approx(optimum[(0, 0, 0)], abs=1e-5)
    assert list(r.x_values) == [0, 1, 2, 3] and list(r.y_values) == [0, 1, 2]
    for (x, y), (v, o, g, o_all, n_pol, n_mdp) in expected_grids(value, optimum, kind, agg).items():
        got = [cell(r.value, r, x, y), cell(r.optimum_value, r, x, y), cell(r.regret, r, x, y), cell(r.optimum_all, r, x, y)]
        for a, b in zip(got, [v, o, g, o_all], strict=True):
            assert (a is None) == (b is None), (x, y)
            if b is not None:
                assert a == pytest.approx(b, abs=1e-5), (x, y)
        assert (cell(r.policy_states, r, x, y), cell(r.mdp_states, r, x, y)) == (n_pol, n_mdp)
    # per state: the policy never beats the optimum
    assert (
        (r.state_value >= r.state_optimum - 1e-6).all() if kind == "min" else (r.state_value <= r.state_optimum + 1e-6).all()
    )


def test_sets_of_states_wall_and_unreached_cells(grid_model):
    model = load_model(grid_model)
    r = risk_map(model, parsed(model, CRASH), POLICY, ("x", "y"), MapOptions(optimum="min"))
    # the wall (1,2) has no state; (0,1), (0,2) are MDP states the policy (never north at x=0) does not reach
    assert r.mdp_states[2, 1] == 0 and r.policy_states[2, 1] == 0
    assert r.mdp_states[1, 0] > 0 and r.policy_states[1, 0] == 0 and r.mdp_states[2, 0] > 0
    assert np.isnan(r.value[1, 0]) and not np.isnan(r.optimum_all[1, 0])
    fig = r.figure()
    no_state, unreached = (s.mask for s in fig.shades)
    assert no_state.sum() == 1 and no_state[2, 1]
    assert set(zip(*np.nonzero(unreached), strict=True)) == {(1, 0), (2, 0)}


@pytest.mark.parametrize(
    "where,keep",
    [
        ("obs=1", lambda s: s[2] == 1),
        ("obs == 0 and x >= 1", lambda s: s[2] == 0 and s[0] >= 1),
        ("!(obs=1) | x+y>3", lambda s: s[2] != 1 or s[0] + s[1] > 3),
    ],
)
def test_where_filter(grid_model, where, keep):
    value, optimum = policy_values(pit), optimum_values(pit, "min")
    model = load_model(grid_model)
    r = risk_map(model, parsed(model, CRASH), POLICY, "x,y", MapOptions(agg="max", optimum="min", where=where))
    assert r.states["policy_filtered"] == sum(keep(s) for s in value)
    assert r.states["mdp_filtered"] == sum(keep(s) for s in optimum)
    for (x, y), (v, _o, g, o_all, _n_pol, _n_mdp) in expected_grids(value, optimum, "min", "max", keep).items():
        for a, b in zip(
            [cell(r.value, r, x, y), cell(r.regret, r, x, y), cell(r.optimum_all, r, x, y)], [v, g, o_all], strict=True
        ):
            assert (a is None) == (b is None) and (b is None or a == pytest.approx(b, abs=1e-5)), (x, y, where)


def test_compile_where_is_a_restricted_language():
    names = ["x", "y", "done"]
    vals = np.array([[0, 1, 0], [2, 1, 1], [3, 0, 0]])
    f = compile_where("x>=2 & !done", names, booleans=["done"])
    assert f(vals, names).tolist() == [False, False, True]
    assert compile_where("1 <= x < 3 or done=true", names, ["done"])(vals, names).tolist() == [False, True, False]
    assert compile_where("true", names)(vals, names).tolist() == [True, True, True]
    for bad, words in [
        ("z=1", ["unknown variable 'z'", "x, y, done"]),
        ("x==", ["syntax error"]),
        ("__import__('os')", ["not allowed"]),
        ("x.real > 0", ["not allowed"]),
        ("x+1", ["not a condition"]),
        ("[x][0] = 1", ["not allowed"]),
    ]:
        with pytest.raises(OptionError) as err:
            compile_where(bad, names, ["done"])
        assert all(w in str(err.value) for w in words), (bad, str(err.value))
    # numpy would answer x % 0 with 0 (every state kept): refused instead
    for text in ("x % 0 = 0", "x / y > 1"):
        with pytest.raises(OptionError, match="divides by zero"):
            compile_where(text, names, ["done"])(vals, names)
    assert compile_where("x % 2 = 0", names, ["done"])(vals, names).tolist() == [True, True, False]


def test_bad_input_names_the_problem(grid_model):
    model = load_model(grid_model)
    cases = [
        ({"xy": "x,z"}, OptionError, ["unknown variable 'z'", "x, y, obs"]),
        ({"xy": "x"}, OptionError, ["two variables"]),
        ({"xy": "x,x"}, OptionError, ["different"]),
        ({"options": MapOptions(optimum="min", where="obz=1")}, OptionError, ["'obz'", "did you mean 'obs'"]),
        ({"options": MapOptions()}, OptionError, ["--optimum min", "bad event"]),
        ({"prop": 'Pmin=? [F "crash"]'}, PropertyError, ["--optimum min"]),
        ({"prop": 'P<=0.1 [F "crash"]', "options": MapOptions(optimum="max")}, OptionError, ["<="]),
        ({"options": MapOptions(agg="median", optimum="min")}, OptionError, ["--agg"]),
    ]
    for kwargs, error, words in cases:
        args = {"xy": "x,y", "prop": CRASH, "options": MapOptions(optimum="min"), **kwargs}
        with pytest.raises(error) as err:
            risk_map(model, parsed(model, args["prop"]), POLICY, args["xy"], args["options"])
        assert all(w in str(err.value) for w in words), (kwargs, str(err.value))
    # a threshold form says the direction itself
    r = risk_map(model, parsed(model, 'P<=0.1 [F "crash"]'), POLICY, "x,y")
    assert r.optimum == "min" and "<=" in r.optimum_source


def test_several_initial_states_are_refused(tmp_path: Path):
    path = tmp_path / "two_inits.prism"
    path.write_text(
        GRID.replace("x : [0..3] init 0;", "x : [0..3];")
        .replace("y : [0..2] init 0;", "y : [0..2];")
        .replace("obs : [0..1] init 0;", "obs : [0..1];")
        .replace("module grid", "init x=0 & y=0 endinit\nmodule grid")
    )
    with pytest.raises(RlverifyError) as err:
        model = load_model(path)
        risk_map(model, parsed(model, CRASH), POLICY, "x,y", MapOptions(optimum="min"))
    assert "initial states" in str(err.value)


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory):
    """The hand policy as a Python policy file (``pi.py:pi``) for the CLI."""
    import inspect

    path = tmp_path_factory.mktemp("policy") / "pi.py"
    path.write_text(
        "import numpy as np\nFEATURES = ['x', 'y', 'obs']\nACTIONS = "
        + repr(ACTIONS)
        + "\n\n"
        + "\n".join(inspect.getsource(f) for f in (pit, stop, actions, policy_probs, pi))
    )
    return path


def test_cli_png_and_json(grid_model, policy_file, tmp_path, capsys):
    from PIL import Image

    png, cells = tmp_path / "risk.png", tmp_path / "cells.json"
    pol = policy_file
    argv = [
        "map",
        str(grid_model),
        "-p",
        CRASH,
        "--policy",
        f"{pol}:pi",
        "--map",
        "x,y",
        "--optimum",
        "min",
        "--agg",
        "mean",
        "--y-down",
        "--out",
        str(png),
        "--out",
        str(cells),
    ]
    assert main(argv) == 0
    image = np.asarray(Image.open(png).convert("RGB"), dtype=np.float64)
    model = load_model(grid_model)
    r = risk_map(model, parsed(model, CRASH), POLICY, "x,y", MapOptions(agg="mean", optimum="min"))
    _, _, (w, h) = r.figure().layout()
    assert image.shape[:2] == (round(h * 110), round(w * 110))
    assert image.std() > 20  # not blank
    colours = np.unique(image.reshape(-1, 3), axis=0)
    assert len(colours) > 200  # colour bars: gradients (the three 4x3 panels alone have at most 36 colours)
    data = json.loads(cells.read_text())
    assert data["optimum"] == "min" and data["agg"] == "mean" and data["x"] == "x" and data["y"] == "y"
    assert data["x_values"] == [0, 1, 2, 3] and data["y_values"] == [0, 1, 2]
    value, optimum = policy_values(pit), optimum_values(pit, "min")
    for (x, y), (v, _o, _g, _o_all, n_pol, n_mdp) in expected_grids(value, optimum, "min", "mean").items():
        got = data["grid"]["value"][y][x]
        assert (got is None) == (v is None) and (v is None or got == pytest.approx(v, abs=1e-5))
        assert data["grid"]["policy_states"][y][x] == n_pol and data["grid"]["mdp_states"][y][x] == n_mdp
    assert data["states"]["policy"] == len(value) and data["states"]["mdp"] == len(optimum)
    # --json prints the same grid
    capsys.readouterr()
    assert main([*argv[:-4], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["grid"] == data["grid"]


def test_cli_bad_input_exit_2(grid_model, policy_file, capsys):
    base = ["map", str(grid_model), "-p", CRASH, "--policy", f"{policy_file}:pi"]
    for extra, words in [
        (["--map", "x,q", "--optimum", "min"], ["unknown variable 'q'", "x, y, obs"]),
        (["--map", "x,y", "--optimum", "min", "--where", "x=(1"], ["syntax error"]),
        (["--map", "x,y", "--optimum", "min", "--where", "q=1"], ["unknown variable 'q'"]),
        (["--map", "x,y"], ["--optimum"]),
    ]:
        capsys.readouterr()
        assert main(base + extra) == 2, extra
        err = " ".join(capsys.readouterr().err.split())
        assert all(w in err for w in words), (extra, err)


def test_the_map_reads_a_given_chain_and_optimum(grid_model, monkeypatch):
    """The report hands the map its stochastic chain and its optimum: the same map, nothing built again."""
    import rlverify.exact.chain as chain_module
    from rlverify.exact import optimum, policy_chain

    model = load_model(grid_model)
    prop = parsed(model, CRASH)
    alone = risk_map(model, prop, POLICY, "x,y", MapOptions(optimum="min"))
    chain, best, other = policy_chain(model, prop, POLICY), optimum(model, prop), optimum(model, parsed(model, GOAL))
    import rlverify.exact.merged as merged_module  # the chain module imports merged_chain where it explores

    for module, name in ((merged_module, "merged_chain"), (chain_module, "build_explicit")):
        monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail("a chain or an MDP was built again"))
    shared = risk_map(model, prop, POLICY, "x,y", MapOptions(optimum="min"), chain=chain, optimum=best)
    for grid in ("value", "optimum_value", "regret", "optimum_all"):
        np.testing.assert_allclose(getattr(shared, grid), getattr(alone, grid), rtol=0, atol=1e-12)
    value, optimum_by_hand = policy_values(pit), optimum_values(pit, "min")
    assert shared.initial_value == pytest.approx(value[(0, 0, 0)], abs=1e-5)
    assert shared.initial_optimum == pytest.approx(optimum_by_hand[(0, 0, 0)], abs=1e-5)
    with pytest.raises(OptionError, match="optimum given is of property"):
        risk_map(model, prop, POLICY, "x,y", MapOptions(optimum="min"), chain=chain, optimum=other)
