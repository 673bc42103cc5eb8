"""Pictures that say what happened: the report's verdict first, maps that are not constant, titles as the user wrote
them, failure paths on the pairs that move, tables not dicts, categorical colours with a legend, and figure
functions that return matplotlib figures (no pyplot, no backend forced)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.results import FailurePath, FailurePaths, PathStep, Provenance

SRC = Path(__file__).resolve().parents[1] / "src"


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def result_of(stdout: str) -> dict:
    """A command's --json result (inside the JSON envelope when the CLI prints one)."""
    data = json.loads(stdout)
    return data["result"] if "result" in data and "command" in data else data


def test_the_report_opens_with_the_verdict(tmp_path, capsys):
    out = tmp_path / "report.html"
    code, stdout, err = run(
        capsys, "report", "running-example-v1", "-p", "reach-goal-2", "--optimum", "max", "--out", str(out), "--json"
    )
    assert code == 0, err
    r = result_of(stdout)
    sections = {s["title"].split(" (")[0]: s for s in r["sections"]}
    exact = sections["Exact value"]["exact"]["value"]
    best = sections["Optimum over all schedulers"]["monolithic"]
    head = r["headline"]
    assert float(head["the policy's value (exact)"]) == pytest.approx(0.264, abs=1e-6)  # by hand (test_running_example)
    assert float(head["the policy's value (exact)"]) == pytest.approx(exact, rel=1e-5)
    # reaching the goal is good: the best policy gets Pmax (0.96 by hand: test_running_example), the worst Pmin (0)
    assert float(head["best possible (Pmax, over all policies)"]) == pytest.approx(best["pmax"], rel=1e-5)
    assert float(head["best possible (Pmax, over all policies)"]) == pytest.approx(0.96, abs=1e-6)
    assert float(head["worst possible (Pmin)"]) == pytest.approx(best["pmin"], abs=1e-12) and best["pmin"] == 0.0
    assert float(head["regret (what the policy gives away)"]) == pytest.approx(0.96 - 0.264, abs=1e-6)
    page = out.read_text()
    # the verdict comes before the consistency table and every engine's section
    assert page.index("id='verdict'") < page.index("id='checks'") < page.index("Exact value (Storm")
    verdict = page[page.index("id='verdict'") : page.index("</section>")]
    assert "0.264" in verdict and "all engines agree" in verdict
    assert "{'" not in page  # tables, not Python dicts


def test_the_risk_map_default_shows_the_initial_slice_not_a_constant(capsys):
    """The default --where initial: the other variables at their initial values. The initial state's cell is then
    the exact value at the initial state; `--where all --agg max` (the former default) is 1.0 everywhere."""
    args = ["map", "avoid-v1", "-p", "collision-100", "--map", "x,y", "--optimum", "min", "--json"]
    code, stdout, err = run(capsys, *args)
    assert code == 0, err
    d = result_of(stdout)
    value, opt = (np.array(d["grid"][k], dtype=float) for k in ("value", "optimum"))
    assert d["where"] == "obstacle1_x=4 & obstacle1_y=4 & obstacle2_x=4 & obstacle2_y=4 & done=false"
    assert np.nanstd(value) > 0.01 and np.nanstd(opt) > 0.01  # the panels say something
    assert (np.array(d["grid"]["policy_states"]) == 1).all()  # one state per cell
    # the agent starts at (0, 0): that cell is the initial state, whose value verify computes independently
    code, stdout, _ = run(capsys, "verify", "avoid-v1", "-p", "collision-100", "--json")
    assert value[0, 0] == pytest.approx(result_of(stdout)["value"], rel=1e-6)
    assert opt[0, 0] == pytest.approx(d["initial"]["optimum"], rel=1e-6)
    # titles name the benchmark and the policy as the user wrote them, not a temporary file or an absolute path
    assert d["model"].startswith("avoid-v1 (") and d["policy"] == "avoid_4x4_ppo.onnx (shipped)"
    code, stdout, err = run(capsys, *args, "--where", "all", "--agg", "max")
    assert code == 0, err
    assert set(np.array(result_of(stdout)["grid"]["value"], dtype=float).ravel()) == {1.0}


def _step(**state):
    return PathStep(state=state, policy=None, actions=(), probability=None)


def _obstacle_walks() -> FailurePaths:
    """Two paths in which the agent stays at (0, 0) and obstacle 2 walks from (2, 2) to it; obstacle 1 stays."""
    fixed = {"done": 0, "x": 0, "y": 0, "obstacle1_x": 2, "obstacle1_y": 0}
    walks = [[(2, 2), (1, 2), (0, 2), (0, 1), (0, 0)], [(2, 2), (2, 1), (2, 0), (1, 0), (0, 0)]]
    paths = tuple(
        FailurePath(0.1 / (i + 1), tuple(_step(**fixed, obstacle2_x=a, obstacle2_y=b) for a, b in walk))
        for i, walk in enumerate(walks)
    )
    names = ("done", "x", "y", "obstacle1_x", "obstacle1_y", "obstacle2_x", "obstacle2_y")
    return FailurePaths(
        k=2,
        paths=paths,
        value=0.5,
        covered=0.15,
        share=0.3,
        exhausted=False,
        bound=None,
        mode="stochastic",
        variables=names,
        ranges={n: (0, 0) if n == "done" else (0, 2) for n in names},
        provenance=Provenance(model="avoid-v1", property='P=? [F "collision"]', policy="mine.onnx"),
    )


def test_failure_paths_are_drawn_on_the_pairs_that_move():
    from matplotlib.figure import Figure

    from rlverify.figures import path_pairs, paths_figure

    fp = _obstacle_walks()
    assert path_pairs(fp) == (("x", "y"), ("obstacle2_x", "obstacle2_y"))  # obstacle 1 never moves
    fig = paths_figure(fp)
    assert isinstance(fig, Figure)
    drawn = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in drawn] == ["#1  p = 0.1  (4 steps)", "#2  p = 0.05  (4 steps)"]  # a panel per path
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "(x, y)",
        "(obstacle2_x, obstacle2_y)",
        "start",
        "end (target)",
    ]
    # each pair is one line per panel, in its own colour, through the path's cells
    line = drawn[0].get_lines()[3]  # pair 2's line (pair 1: line, start, end)
    np.testing.assert_allclose(np.round(line.get_xdata()), [2, 1, 0, 0, 0])
    assert drawn[0].get_lines()[0].get_color() != line.get_color()
    title = fig._suptitle.get_text()
    assert title.startswith('avoid-v1: P=? [F "collision"]\npolicy mine.onnx:')
    fig = paths_figure(fp, [("x", "y"), ("obstacle1_x", "obstacle1_y")])  # as the user names them
    assert [t.get_text() for t in fig.legends[0].get_texts()][:2] == ["(x, y)", "(obstacle1_x, obstacle1_y)"]


def test_figure_functions_return_figures_without_pyplot(tmp_path):
    """In a fresh interpreter (no backend chosen): a map renders to a Figure, pyplot is never imported, a notebook
    gets its PNG from _repr_png_, and the CLI's writer saves the same figure."""
    code = """
import sys
import numpy as np
from matplotlib.figure import Figure
from rlverify.figures import MapFigure, MapPanel
m = MapFigure(panels=(MapPanel("p", np.arange(4.0).reshape(2, 2), "viridis", 0.0, 3.0, "v"),), x_label="x", y_label="y",
              x_values=np.arange(2), y_values=np.arange(2), title="t $x$")
fig = m.render()
assert isinstance(fig, Figure), type(fig)
assert "matplotlib.pyplot" not in sys.modules
assert m._repr_png_()[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
assert "matplotlib.pyplot" not in sys.modules
assert [t.get_text() for t in fig.axes[0].texts] == ["0", "1", "2", "3"]  # a small map prints its values
print(m.draw(sys.argv[1]))
"""
    out = tmp_path / "m.png"
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        env={**env, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_action_partition_has_categorical_colours_and_a_legend():
    """The double integrator's three actions: each part takes its most likely action's colour (not an RGB mix of the
    three probabilities), and the legend names the actions drawn."""
    import matplotlib
    from matplotlib.collections import PolyCollection

    from rlverify.abstraction import AbstractionOptions, verify_abstraction
    from rlverify.abstraction.plots import result_figure
    from rlverify.resolve import resolve

    root = SRC.parent
    t = resolve(
        str(root / "examples/double_integrator.py:SYSTEM"),
        policy=str(root / "examples/double_integrator.onnx"),
        trust_code=True,
    )
    r = verify_abstraction(t.model, t.policy, AbstractionOptions(horizon=1))
    assert r.actions == ("left", "coast", "right")
    mid = np.array([(np.array(p.probability_lower) + np.array(p.probability_upper)) / 2 for p in r.parts])
    best = mid.argmax(axis=1)
    fig = result_figure(r)
    ax = fig.axes[-1] if fig.axes[-1].get_legend() is not None else fig.axes[1]
    legend = ax.get_legend()
    assert legend.get_title().get_text() == "action"
    assert [t.get_text() for t in legend.get_texts()] == [r.actions[a] for a in sorted(set(best.tolist()))]
    assert len(set(best.tolist())) >= 2  # the picture has something to tell apart
    faces = next(c for c in ax.collections if isinstance(c, PolyCollection)).get_facecolors()
    tab10 = np.array([matplotlib.colormaps["tab10"](i)[:3] for i in range(3)])
    np.testing.assert_allclose(faces[:, :3], tab10[best], atol=1e-6)  # the category's colour, whatever the mix
    np.testing.assert_allclose(faces[:, 3], np.clip(mid[np.arange(len(mid)), best], 0.15, 1.0), atol=1e-6)


def test_report_figures_name_the_benchmark_and_policy_as_written(tmp_path, capsys):
    """The risk map and the failure paths were titled with the generated /tmp/rlverify-models-.../*.prism file and
    the policy's absolute path; the robustness table printed Python dicts."""
    out = tmp_path / "fw.html"
    code, stdout, err = run(capsys, "report", "freeway-v1", "--runs", "100", "--out", str(out), "--json")
    assert code == 0, err
    sections = result_of(stdout)["sections"]
    named = [s[k] for s in sections for k in ("risk_map", "paths") if k in s]
    assert len(named) == 2
    for result in named:
        assert result["model"] == "freeway-v1" and result["policy"] == "freeway_ppo.onnx (shipped with rlverify)"
    page = out.read_text()
    assert "rlverify-models" not in page and "{'" not in page
    robust = next(s for s in sections if "robustness" in s)["robustness"]
    shown = [f"{k} shown" for k in robust["worst_perturbations"][0]["observed"]]
    assert all(f"<th>{h}</th>" in page for h in shown)  # one column per variable


def test_heatmap_cli_counts_never_decided_runs_in_the_json(capsys):
    code, stdout, err = run(capsys, "heatmap", "racetrack-barto-small-v1", "--runs", "5", "--max-steps", "200", "--json")
    assert code == 0, err
    d = result_of(stdout)
    assert d["policy"] == "racetrack_barto_small.onnx (shipped)"  # not the package's absolute path
    cells = d["cells"]
    assert all(c["goal"] + c["crash"] + c["never_decided"] == pytest.approx(1.0, abs=1e-12) for c in cells)
    assert all(c["never_decided"] == (c["stuck"] + c["undecided"]) / c["runs"] for c in cells)
    assert sum(c["never_decided"] == 1.0 for c in cells) >= 40


def test_verify_explain_names_the_paths_after_the_target_and_policy(capsys, tmp_path):
    """The paths figure of `verify --explain --out` was titled ': P=? ...' and 'policy None' (the explanation was
    not stamped); its default pairs are x,y and the obstacle that moves."""
    code, stdout, err = run(capsys, "verify", "avoid-v1", "-p", "collision-100", "--explain", "2", "--json")
    assert code == 0, err
    e = result_of(stdout)["explanation"]
    assert e["model"].startswith("avoid-v1 (") and e["policy"] == "avoid_4x4_ppo.onnx (shipped)"
    from rlverify.figures import path_pairs, paths_figure
    from rlverify.results import FailurePath, FailurePaths, PathStep, StepAction

    paths = tuple(
        FailurePath(
            p["probability"],
            tuple(
                PathStep(s["state"], s["policy"], tuple(StepAction(**a) for a in s["actions"]), s["probability"])
                for s in p["steps"]
            ),
        )
        for p in e["paths"]
    )
    keep = {k: e[k] for k in ("k", "value", "covered", "share", "exhausted", "bound", "mode")}
    fp = FailurePaths(
        paths=paths,
        variables=tuple(e["variables"]),
        ranges={k: tuple(v) for k, v in e["ranges"].items()},
        provenance=Provenance(model=e["model"], property=e["property"], policy=e["policy"]),
        **keep,
    )
    assert path_pairs(fp) == (("x", "y"), ("obstacle2_x", "obstacle2_y"))  # the obstacle walks to the agent
    assert paths_figure(fp)._suptitle.get_text().startswith(f"{e['model']}: {e['property']}\npolicy {e['policy']}: the 2")


def test_an_initial_slice_that_leaves_one_cell_falls_back_to_every_state(capsys):
    """gym:FrozenLake's observation s fixes row and col: the initial slice (s=0 & ...) kept the start cell only, a map
    of one number. The map falls back to every state and says so; the goal cell is 1 by definition, the start cell is
    verify's value."""
    import json

    from rlverify.cli.main import main

    zip_path = str(Path(__file__).resolve().parents[1] / "examples" / "gymnasium" / "ppo_frozenlake.zip")
    args = ["--policy", zip_path, "-p", 'P=? [F<=100 "goal"]', "--json"]
    assert main(["verify", "gym:FrozenLake-v1", *args]) == 0
    value = json.loads(capsys.readouterr().out)["result"]["value"]
    assert main(["map", "gym:FrozenLake-v1", *args, "--optimum", "max", "--map", "col,row"]) == 0
    env = json.loads(capsys.readouterr().out)
    grid = env["result"]["grid"]["value"]
    assert sum(v is not None for row in grid for v in row) > 1 and env["result"]["where"] is None
    assert grid[0][0] == pytest.approx(value, rel=1e-12) and grid[3][3] == 1.0
    assert any("leaves one cell (col and row follow from them)" in w for w in env["warnings"])
