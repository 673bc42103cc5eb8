"""``inspect --policy-template`` writes a JANI model's edges' guards as code beyond the listed-states limit (issue 40:
"only a PRISM model's guards can be written as code" refused QVBS consensus N=4 and exploding-blocksworld).

Oracles: a closed form on a generated model of 24,000 decision states, and on the QVBS copies the choices Storm's
built MDP offers in every decision state and a numpy solve of the chain "uniform over those choices".
"""

from __future__ import annotations

import importlib.util
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from rlverify.cli.main import main
from rlverify.models import load_model
from rlverify.models.dynamics import choice_table
from rlverify.models.summary import policy_template, summarize

QVBS = Path(__file__).parents[1] / "data" / "qvbs"


def _int(name: str, top: int, init: int = 0) -> dict:
    return {
        "name": name,
        "type": {"kind": "bounded", "base": "int", "lower-bound": 0, "upper-bound": top},
        "initial-value": init,
    }


def _edge(location: str, guard: dict | bool, destinations: list[tuple[float, str, list]], action: str | None = None) -> dict:
    edge = {
        "location": location,
        "guard": {"exp": guard},
        "destinations": [
            {"location": to, "probability": {"exp": p}, "assignments": [{"ref": r, "value": v} for r, v in assign]}
            for p, to, assign in destinations
        ],
    }
    if action is not None:
        edge["action"] = action
    return edge


def _long(n: int = 24000) -> dict:
    """The JANI form of the PRISM model in test_policy_template_guards.py: ``m`` advances ``x`` (with probability 1/2,
    synchronised with ``n``, the result renamed 'advance') and may stop (to location 'done') at x = 0 and at x = h,
    a variable no edge assigns (Storm makes it a constant: it is no feature). Uniform over the available choices,
    each milestone is passed with probability (1/4) / (1 - 1/4) = 1/3: P(F x=N) = 1/9."""
    milestone = {
        "op": "∨",
        "left": {"op": "=", "left": "x", "right": 0},
        "right": {"op": "=", "left": "x", "right": "h"},
    }
    inc = {"op": "+", "left": "x", "right": 1}
    m = {
        "name": "m",
        "locations": [{"name": "run"}, {"name": "done"}],
        "initial-locations": ["run"],
        "edges": [
            _edge("run", {"op": "<", "left": "x", "right": n}, [(0.5, "run", [("x", inc)]), (0.5, "run", [])], "inc"),
            _edge("run", milestone, [(1, "done", [])], "stop"),
            _edge("run", {"op": "=", "left": "x", "right": n}, [(1, "run", [])]),
            _edge("done", True, [(1, "done", [])]),
        ],
    }
    other = {
        "name": "n",
        "locations": [{"name": "l"}],
        "initial-locations": ["l"],
        "variables": [_int("y", 1)],
        "edges": [_edge("l", {"op": "=", "left": "y", "right": 0}, [(1, "l", [])], "inc")],
    }
    return {
        "jani-version": 1,
        "name": "long",
        "type": "mdp",
        "actions": [{"name": "inc"}, {"name": "stop"}, {"name": "advance"}],
        "variables": [_int("x", n), _int("h", n, n // 2)],
        "automata": [m, other],
        "system": {
            "elements": [{"automaton": "m"}, {"automaton": "n"}],
            "syncs": [{"synchronise": ["inc", "inc"], "result": "advance"}, {"synchronise": ["stop", None], "result": "stop"}],
        },
        "properties": [],
    }


def test_a_large_jani_models_template_is_code_and_verifies_to_the_closed_form(capsys, tmp_path):
    model = tmp_path / "long.jani"
    model.write_text(json.dumps(_long()))
    template = tmp_path / "pi.py"
    assert main(["inspect", str(model), "--policy-template", str(template), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["result"]
    assert summary["decision_states"] == 24000 and summary["actions"] == ["advance", "stop"]
    assert summary["features"] == ["_loc_m", "x"]
    text = template.read_text()
    assert "AVAILABLE = {" not in text and "def available" in text
    code = main(["verify", str(model), "-p", "P=? [F x=24000]", "--policy", f"{template}:pi", "--json"])
    result = json.loads(capsys.readouterr().out)["result"]
    assert code == 0 and result["stalled_probability"] == 0.0
    assert result["value"] == pytest.approx(float(Fraction(1, 9)), rel=1e-6)


def _load(path: Path, name: str = "pi"):
    spec = importlib.util.spec_from_file_location(f"tmpl_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


COPIES = [
    ("consensus/consensus.2.jani", "K=2"),
    ("ij/ij.3.jani", None),
    ("philosophers-mdp/philosophers-mdp.3.jani", None),
    ("csma/csma.3-2.jani", None),
]


@pytest.mark.parametrize("file, constants", COPIES, ids=[Path(f).stem for f, _ in COPIES])
def test_the_guard_template_of_a_qvbs_model_offers_what_storm_built(tmp_path, file, constants):
    model = load_model(QVBS / file, constants)
    summary, mdp = summarize(model, max_states=100_000)
    written = policy_template(tmp_path / "guarded.py", summary, mdp, max_rows=0, model=model)
    assert "AVAILABLE = {" not in written.read_text()
    table = choice_table(mdp, summary.actions)
    states = np.flatnonzero(table.decision)
    avail = table.available(states)
    ours = _load(written)(mdp.feature_matrix(summary.features, states))
    np.testing.assert_array_equal(ours, avail / avail.sum(axis=1, keepdims=True))


def _uniform_reach(mdp, target: np.ndarray) -> np.ndarray:
    """P(F target) per state of the chain that picks each state's choices uniformly (numpy/scipy on Storm's arrays)."""
    n = mdp.num_states
    counts = np.diff(mdp.row_groups)
    pick = sp.csr_matrix(
        (1.0 / np.repeat(counts, counts), (mdp.choice_states(), np.arange(mdp.num_choices))), shape=(n, mdp.num_choices)
    )
    chain = (pick @ mdp.transitions).tocsr()
    reach = target.copy()  # states that reach the target with positive probability
    edges = (chain != 0).astype(np.int64).tocsr()
    frontier = target.copy()
    while frontier.any():
        frontier = (edges @ frontier.astype(np.int64) > 0) & ~reach  # predecessors
        reach |= frontier
    x = np.zeros(n)
    x[target] = 1.0
    q = np.flatnonzero(reach & ~target)
    a = sp.identity(len(q)) - chain[q][:, q]
    x[q] = spla.spsolve(a.tocsc(), np.asarray(chain[q][:, np.flatnonzero(target)].sum(axis=1)).ravel())
    return x


@pytest.mark.parametrize(
    "file, constants, prop, goal",
    [
        ("consensus/consensus.2.jani", "K=2", "c2", lambda m, v: m.labels["finished"] & m.labels["all_coins_equal_1"]),
        ("ij/ij.3.jani", None, "stable", lambda m, v: v("q1") + v("q2") + v("q3") == 1),
    ],
    ids=["consensus-c2", "ij-stable"],
)
def test_the_guard_template_verifies_to_the_uniform_chains_value(capsys, tmp_path, file, constants, prop, goal):
    model = load_model(QVBS / file, constants)
    summary, mdp = summarize(model, max_states=100_000)
    written = policy_template(tmp_path / "guarded.py", summary, mdp, max_rows=0, model=model)

    def column(name: str) -> np.ndarray:
        return mdp.valuations[:, mdp.variables.index(name)]

    expected = _uniform_reach(mdp, np.asarray(goal(mdp, column), dtype=bool))[mdp.initial_states[0]]
    argv = ["verify", str(QVBS / file), "-p", prop, "--policy", f"{written}:pi", "--json"]
    code = main(argv + (["-c", constants] if constants else []))
    result = json.loads(capsys.readouterr().out)["result"]
    assert code == 0
    assert result["value"] == pytest.approx(expected, abs=2e-6)


def _published(file: str, constants: str | None) -> dict[str, float]:
    """Storm's published value of each property of one QVBS file (its index.json), for the given constants."""
    index = json.loads((QVBS / file).parent.joinpath("index.json").read_text())
    entry = next(f for f in index["files"] if f["file"] == Path(file).name)
    given = constants or ""
    for values in entry.get("open-parameter-values", []):
        if ",".join(f"{v['name']}={v['value']}" for v in values.get("values", [])) == given:
            return {
                r["property"]: float(r["value"]["approx"] if isinstance(r["value"], dict) else r["value"])
                for r in values["results"]
            }
    raise AssertionError(f"no published results for {file} {given}")


@pytest.mark.parametrize(
    "file, constants",
    [*COPIES, pytest.param("zenotravel/zenotravel.4-2-2.jani", None, marks=pytest.mark.slow)],
    ids=[*(Path(f).stem for f, _ in COPIES), "zenotravel.4-2-2"],
)
def test_every_qvbs_jani_copy_inspects_templates_and_verifies(capsys, tmp_path, file, constants):
    """The acceptance of issue 40 on the copies: inspect, --policy-template, verify with the template, and the
    monolithic value of every published property equal to Storm's published one."""
    path = str(QVBS / file)
    c = ["-c", constants] if constants else []
    template = tmp_path / "pi.py"
    assert main(["inspect", path, *c, "--policy-template", str(template)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    for prop, value in _published(file, constants).items():
        assert main(["verify", path, *c, "-p", prop, "--policy", f"{template}:pi", "--json"]) == 0, prop
        capsys.readouterr()
        assert main(["verify", path, *c, "-p", prop, "--mode", "monolithic", "--json"]) == 0, prop
        assert json.loads(capsys.readouterr().out)["result"]["value"] == pytest.approx(value, rel=1e-5), prop
