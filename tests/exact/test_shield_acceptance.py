"""Issue 25's acceptance cases for shields: Avoid 4x4 with the shipped network and FrozenLake with the shipped PPO.

Avoid: ``shield --meet`` for ``P<=0.2 [F<=100 COLLISION=true]`` (unshielded 0.846, optimum 0.093) returns a shield
whose shielded value is <= 0.2, verified by a second, separate ``rlverify verify ... --shield`` process; the kept
actions are checked against per-action values computed independently (Storm's own Pmin vector and its matrix,
read through stormpy, with numpy); a bound below the optimum is refused naming the optimum.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main

SRC = str(Path(__file__).resolve().parents[2] / "src")
AVOID = "P<=0.2 [F<=100 COLLISION=true]"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gymnasium"


def rlverify(*args: str) -> subprocess.CompletedProcess[str]:
    """A separate ``rlverify`` process (the package from this checkout)."""
    return subprocess.run(
        [sys.executable, "-m", "rlverify", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=600,
        check=False,
    )


def _storm_q_avoid(path: str, constants: str) -> dict[tuple[tuple[tuple[str, int], ...], str], float]:
    """(valuation, action label) -> Q_100 = sum_s' T(s, a, s') Pmin_99(s'), for the states not yet collided, from
    Storm's own matrix and Pmin vector (stormpy objects only)."""
    import stormpy

    prog = stormpy.parse_prism_program(path)
    prog, _ = stormpy.instantiate_constants(prog, constants) if hasattr(stormpy, "instantiate_constants") else (prog, None)
    built = stormpy.parse_properties("P=? [F<=100 COLLISION=true]", prog)
    opts = stormpy.BuilderOptions([p.get_raw_formula() for p in built])
    opts.set_build_state_valuations()
    opts.set_build_choice_labels()
    model = stormpy.build_model(prog, options=opts)
    prop = stormpy.parse_properties("Pmin=? [F<=99 COLLISION=true]", prog)[0]
    v = np.asarray(stormpy.model_checking(model, prop).get_value_vector())
    collided = stormpy.parse_properties("Pmax=? [F<=0 COLLISION=true]", prog)[0]
    now = np.asarray(stormpy.model_checking(model, collided).get_value_vector()) > 0.5
    out = {}
    for s in model.states:
        if now[int(s)]:
            continue
        key = _valuation(model.state_valuations.to_string(int(s)))
        for a in s.actions:
            labels = sorted(a.labels)
            if labels:
                out[(key, labels[0])] = float(sum(float(t.value) * v[int(t.column)] for t in a.transitions))
    return out


def _valuation(text: str) -> tuple[tuple[str, int], ...]:
    """Storm's ``[!done & x=0 & ...]`` as sorted (variable, value) pairs (booleans 0/1)."""
    pairs = []
    for token in text.strip("[]").split("&"):
        token = token.strip()
        m = re.fullmatch(r"(\w+)=(-?\d+)", token)
        pairs.append((m.group(1), int(m.group(2))) if m else (token.lstrip("!"), 0 if token.startswith("!") else 1))
    return tuple(sorted(pairs))


@pytest.mark.slow
def test_avoid_meet_then_a_separate_verify_and_the_kept_actions_from_storm(tmp_path: Path) -> None:
    shield = tmp_path / "avoid_shield.json"
    done = rlverify("shield", "avoid-v1", "-p", AVOID, "--meet", "--out", str(shield), "--json")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)["result"]
    assert r["satisfied"] is True and r["upper"] <= 0.2
    assert r["unshielded"] == pytest.approx(0.846, abs=5e-4) and r["optimum"] == pytest.approx(0.0929, abs=1e-4)
    # the second, separate run
    again = rlverify("verify", "avoid-v1", "-p", AVOID, "--shield", str(shield), "--json")
    assert again.returncode == 0, again.stderr
    v = json.loads(again.stdout)["result"]
    assert v["satisfied"] is True and v["upper"] <= 0.2
    assert v["value"] == pytest.approx(r["value"], rel=1e-9)
    # the kept actions, from per-action values computed with stormpy and numpy only
    data = json.loads(shield.read_text())
    from rlverify.benchmarks import make

    model = make("avoid-v1").load_model()
    q = _storm_q_avoid(str(model.path), model.constants or "")
    t = data["threshold"]["value"]
    assert data["threshold"]["kind"] == "relative"
    checked = boundary = 0
    for state, kept, best in zip(data["states"], data["kept"], data["best"], strict=True):
        key = tuple(sorted(zip(data["variables"], state, strict=True)))
        values = {a: q[(key, a)] for a in data["actions"] if (key, a) in q}
        assert values, state
        low = min(values.values())
        for i, a in enumerate(data["actions"]):
            if a not in values:
                assert i not in kept
                continue
            gap = values[a] - low
            if abs(gap - t) <= 1e-9:
                boundary += 1  # within rounding of the threshold: either side is right
                continue
            assert (i in kept) == (gap <= t), (state, a, gap, t)
            checked += 1
        assert set(best) <= set(kept)
    assert checked > 50_000 and boundary < 0.01 * checked


@pytest.mark.slow
def test_avoid_bound_below_the_optimum_is_refused_naming_it() -> None:
    done = rlverify("shield", "avoid-v1", "-p", "P<=0.05 [F<=100 COLLISION=true]", "--meet")
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert "no policy meets the bound" in line and "Pmin = 0.0928" in line


@pytest.mark.slow
def test_frozenlake_meet_and_a_separate_verify(capsys, tmp_path: Path) -> None:
    shield = tmp_path / "fl.json"
    policy = str(EXAMPLES / "ppo_frozenlake.zip")
    prop = 'P>=0.7 [F "goal"]'
    code = main(["shield", "gym:FrozenLake-v1", "-p", prop, "--policy", policy, "--meet", "--out", str(shield), "--json"])
    r = json.loads(capsys.readouterr().out)["result"]
    assert code == 0 and r["satisfied"] is True and r["lower"] >= 0.7
    assert r["unshielded"] == pytest.approx(0.666058, abs=1e-6)
    # Pmax of FrozenLake 4x4 (slippery) from the start: 0.8235 (Storm, the optimum over all schedulers)
    assert r["optimum"] == pytest.approx(0.82353, abs=1e-5)
    code = main(["verify", "gym:FrozenLake-v1", "-p", prop, "--policy", policy, "--shield", str(shield), "--json"])
    v = json.loads(capsys.readouterr().out)["result"]
    assert code == 0 and v["satisfied"] is True and v["value"] == pytest.approx(r["value"], abs=1e-12)
    code = main(["verify", "gym:FrozenLake-v1", "-p", prop, "--policy", policy, "--mode", "monolithic", "--json"])
    assert json.loads(capsys.readouterr().out)["result"]["pmax"] == pytest.approx(r["optimum"], abs=1e-9)


def test_report_takes_the_shield(capsys, tmp_path: Path) -> None:
    shield = tmp_path / "s.json"
    prop = 'P>=0.9 [F<=3 "goal"]'
    assert main(["shield", "running-example-v1", "-p", prop, "--threshold", "0", "--out", str(shield), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["result"]
    out = tmp_path / "r.html"
    code = main(
        ["report", "running-example-v1", "-p", prop, "--shield", str(shield), "--out", str(out), "--runs", "300", "--json"]
    )
    rep = json.loads(capsys.readouterr().out)["result"]
    assert code == 0 and rep["policy"].startswith("running_example.json + shield")
    exact = next(s for s in rep["sections"] if "exact" in s)["exact"]
    assert exact["value"] == pytest.approx(r["value"], abs=1e-12) and r["value"] != pytest.approx(r["unshielded"])
