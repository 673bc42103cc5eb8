"""``rlverify shield`` and ``--shield FILE``: the shield file written, read back and used by a separate run; hostile
shield files, a shield for another model and impossible bounds refused with exit 2 and one line naming the cause."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.exact.shield import ShieldOptions, shield_policy
from rlverify.exact.verify import verify_exact
from rlverify.models import load_model, parse_property
from rlverify.policies import CallablePolicy
from rlverify.policies.shielded import ShieldedPolicy, read_shield
from tests.models.test_command_names import INTERLEAVED

TARGET = "running-example-v1"
PROP = 'P>=0.9 [F<=3 "goal"]'


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def shield_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shield") / "s.json"
    assert main(["shield", TARGET, "-p", PROP, "--threshold", "0.01", "--out", str(path), "-q"]) == 0
    return path


def test_the_shield_file_is_read_back_and_a_separate_verify_gives_the_certified_value(capsys, tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    code, out, _ = run(capsys, "shield", TARGET, "-p", PROP, "--meet", "--out", str(path), "--json")
    assert code == 0
    r = json.loads(out)["result"]
    assert r["satisfied"] is True and r["value"] >= 0.9 and r["shield_file"] == str(path)
    shield = read_shield(path)
    assert shield.property == PROP and shield.threshold == {"kind": "relative", "value": r["threshold"]}
    assert shield.model.startswith(TARGET) and shield.optimum == "max"
    # a second, separate run: the exact engine on the shielded policy (its own chain, strategy auto)
    code, out, _ = run(capsys, "verify", TARGET, "-p", PROP, "--shield", str(path), "--json")
    v = json.loads(out)["result"]
    assert code == 0 and v["satisfied"] is True
    assert v["value"] == pytest.approx(r["value"], abs=1e-12)
    assert v["policy"].endswith("+ shield")


def test_simulate_takes_the_shield(capsys, shield_file: Path) -> None:
    code, out, _ = run(capsys, "verify", TARGET, "-p", PROP, "--shield", str(shield_file), "--json")
    exact = json.loads(out)["result"]["value"]
    code, out, _ = run(
        capsys, "simulate", TARGET, "-p", 'P=? [F<=3 "goal"]', "--shield", str(shield_file), "--json", "--runs", "4000"
    )
    r = json.loads(out)["result"]
    assert code == 0 and r["policy"].endswith("+ shield")
    assert r["interval"][0] <= exact <= r["interval"][1]


def test_map_takes_the_shield_on_a_model_with_unlabelled_commands(capsys, tmp_path: Path) -> None:
    """INTERLEAVED with a policy preferring the unlabelled m:1 (0.9): 0.55 unshielded (by hand), 1 shielded."""
    model = tmp_path / "i.prism"
    model.write_text(INTERLEAVED)
    policy = tmp_path / "p.py"
    policy.write_text(
        'import numpy as np\nFEATURES = ["x", "y"]\nACTIONS = ["m:1", "n:1"]\n'
        "def pi(s):\n    return np.tile([0.9, 0.1], (len(s), 1))\n"
    )
    shield = tmp_path / "s.json"
    prop = 'P>=0.9 [F "goal"]'
    code, out, _ = run(
        capsys, "shield", str(model), "-p", prop, "--policy", f"{policy}:pi", "--meet", "--out", str(shield), "--json"
    )
    r = json.loads(out)["result"]
    assert code == 0 and r["unshielded"] == pytest.approx(0.55, abs=1e-9) and r["value"] == pytest.approx(1.0, abs=1e-9)
    for shielded, expected in ((["--shield", str(shield)], 1.0), ([], 0.55)):
        code, out, _ = run(
            capsys, "map", str(model), "-p", prop, "--policy", f"{policy}:pi", "--map", "x,y", "--json", *shielded
        )
        assert code == 0 and json.loads(out)["result"]["initial"]["value"] == pytest.approx(expected, abs=1e-9)


def test_writing_over_an_existing_file_needs_force(capsys, tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("keep me")
    code, _, err = run(capsys, "shield", TARGET, "-p", PROP, "--threshold", "0.1", "--out", str(path))
    assert code == 2 and "--force" in err and path.read_text() == "keep me"
    code, _, _ = run(capsys, "shield", TARGET, "-p", PROP, "--threshold", "0.1", "--out", str(path), "--force", "-q")
    assert code == 0 and read_shield(path).threshold["value"] == 0.1


def test_a_bound_below_the_optimum_is_refused_naming_the_optimum(capsys) -> None:
    # the running example: Pmin of reaching the goal within 3 steps is 0 (stay put), so P<=... is reachable, but
    # Pmax within 1 step from x=1 is 0 (the goal is 3 cells away): P>=0.5 [F<=1 "goal"] no policy meets
    code, _out, err = run(capsys, "shield", TARGET, "-p", 'P>=0.5 [F<=1 "goal"]', "--meet")
    assert code == 2
    assert "no policy meets the bound" in err and "Pmax = 0" in err
    assert len(err.strip().splitlines()) == 1


def _valid(shield_file: Path) -> dict:
    return json.loads(shield_file.read_text())


@pytest.mark.parametrize(
    ("make", "cause"),
    [
        (lambda d: "{", "not valid JSON"),
        (lambda d: "", "not valid JSON"),
        (lambda d: "[" * 100_000 + "]" * 100_000, "not valid JSON|expected a JSON object"),
        (lambda d: json.dumps([d]), "expected a JSON object"),
        (lambda d: json.dumps({**d, "format": "other"}), "'format'"),
        (lambda d: json.dumps({**d, "version": 2}), "'version' 2 is not supported"),
        (lambda d: json.dumps({**d, "threshold": {"kind": "relative", "value": 1}}).replace(": 1}", ": NaN}"), "NaN"),
        (lambda d: json.dumps({**d, "threshold": {"kind": "nope", "value": 0.1}}), "'threshold'"),
        (lambda d: json.dumps({**d, "states": [[0, 1], *d["states"][1:]]}), "state 0: expected 1 integers"),
        (lambda d: json.dumps({**d, "states": [[True], *d["states"][1:]]}), "state 0: expected 1 integers"),
        (lambda d: json.dumps({**d, "kept": [[7], *d["kept"][1:]]}), "'kept' of state 0"),
        (lambda d: json.dumps({**d, "kept": [[], *d["kept"][1:]]}), "'kept' of state 0"),
        (lambda d: json.dumps({**d, "best": d["best"][1:]}), "'best' must be a list with one entry per state"),
        (lambda d: json.dumps({**d, "states": [d["states"][0]] * len(d["states"])}), "a state listed twice"),
        (lambda d: json.dumps({**d, "actions": ["a", "a"]}), "'actions' lists a name twice"),
        (lambda d: json.dumps({**d, "model": 3}), "'model' must be a string"),
        # the same model's name and another fingerprint: said "computed for model 'X', not for X"
        (
            lambda d: json.dumps({**d, "fingerprint": "0" * 32}),
            "the shield's fingerprint is not running-example-v1's: it was computed for another version of the model",
        ),
        (lambda d: json.dumps({**d, "fingerprint": "0" * 32, "constants": "T=3"}), "with constants 'T=3', not 'none'"),
        # a valuation outside x in [1..4] was used silently
        (lambda d: json.dumps({**d, "states": [[99], *d["states"][1:]]}), r"x=99, outside the model's range of x \[1..4\]"),
        (lambda d: json.dumps({**d, "states": [*d["states"][:-1], [0]]}), r"lists state x=0, outside the model's range"),
        (lambda d: json.dumps({**d, "states": [], "kept": [], "best": []}), "'states' lists no state"),
        (lambda d: json.dumps({**d, "model": "avoid-v1"}), "'model' field names 'avoid-v1', not running-example-v1"),
        (lambda d: json.dumps({**d, "model": "elsewhere/running-example-v1"}), "'model' field names"),
        # 5 states for a model of 4 (x in 1..4): refused before they are checked
        (
            lambda d: json.dumps({**d, "states": [[i] for i in range(5)], "kept": [[0]] * 5, "best": [[0]] * 5}),
            "'states' lists 5 states, more than the 4 the model can have",
        ),
    ],
)
def test_hostile_shield_files_exit_2_with_one_line(capsys, tmp_path: Path, shield_file: Path, make, cause: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(make(_valid(shield_file)))
    code, _out, err = run(capsys, "verify", TARGET, "-p", PROP, "--shield", str(bad))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert re.search(cause, lines[0]), lines[0]


def test_a_shield_file_larger_than_the_models_states_take_is_refused_before_it_is_read(
    capsys, tmp_path: Path, shield_file: Path
) -> None:
    # 2,000,000 states for a 4-state model: took 200 s and 880 MB before anything was said
    d = _valid(shield_file)
    n = 2_000_000
    text = json.dumps({**d, "states": "S", "kept": "K", "best": "K"}, separators=(",", ":"))
    text = text.replace('"S"', "[" + ",".join(f"[{i}]" for i in range(n)) + "]")
    text = text.replace('"K"', "[" + ",".join(["[0]"] * n) + "]")
    big = tmp_path / "big.json"
    big.write_text(text)
    code, _, err = run(capsys, "verify", TARGET, "-p", PROP, "--shield", str(big))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{big.stat().st_size:,} bytes, more than a shield of the model's at most 4 states takes" in err


def test_a_moved_model_file_keeps_its_shield(capsys, tmp_path: Path) -> None:
    """The 'model' field names the file: the same file name elsewhere (same program: same fingerprint) is this model."""
    first, second = tmp_path / "a" / "i.prism", tmp_path / "b" / "i.prism"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text(INTERLEAVED)
    policy = tmp_path / "p.py"
    policy.write_text(
        'import numpy as np\nFEATURES = ["x", "y"]\nACTIONS = ["m:1", "n:1"]\n'
        "def pi(s):\n    return np.tile([0.9, 0.1], (len(s), 1))\n"
    )
    shield, prop = tmp_path / "s.json", 'P>=0.9 [F "goal"]'
    common = ["-p", prop, "--policy", f"{policy}:pi"]
    assert main(["shield", str(first), *common, "--meet", "--out", str(shield), "-q"]) == 0
    capsys.readouterr()
    code, _, err = run(capsys, "verify", str(second), *common, "--shield", str(shield))
    assert code == 0, err
    renamed = tmp_path / "b" / "other.prism"
    second.rename(renamed)
    code, _, err = run(capsys, "verify", str(renamed), *common, "--shield", str(shield))
    assert code == 2 and "'model' field names" in err and len(err.strip().splitlines()) == 1


def test_missing_binary_and_directory_shield_files(capsys, tmp_path: Path) -> None:
    for path, cause in (
        (tmp_path / "none.json", "no such file"),
        (tmp_path, "not a regular file"),
    ):
        code, _, err = run(capsys, "verify", TARGET, "-p", PROP, "--shield", str(path))
        assert code == 2 and cause in err and len(err.strip().splitlines()) == 1
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run(capsys, "verify", TARGET, "-p", PROP, "--shield", str(binary))
    assert code == 2 and "cannot be read" in err


def test_a_shield_for_another_model_is_refused(capsys, shield_file: Path) -> None:
    code, _, err = run(capsys, "verify", "avoid-v1", "-p", "P<=0.2 [F<=100 COLLISION=true]", "--shield", str(shield_file))
    assert code == 2
    assert f"computed for model '{TARGET}" in err and "avoid-v1" in err and len(err.strip().splitlines()) == 1


def test_monolithic_mode_has_no_policy_to_shield(capsys, shield_file: Path) -> None:
    code, _, err = run(capsys, "verify", TARGET, "-p", PROP, "--mode", "monolithic", "--shield", str(shield_file))
    assert code == 2 and "--shield restricts a policy" in err


@pytest.mark.parametrize(
    ("prop", "cause"),
    [
        ('P=? [F "goal"]', "P<=b for a bad event, P>=b for a goal"),
        ('Pmax=? [F "goal"]', "P<=b for a bad event, P>=b for a goal"),
        ('R{"steps"}<=3 [F "goal"]', "not rewards"),
        ("P>=0.5 [G x<4]", r"P \[F psi\] and P \[phi U psi\]"),
    ],
)
def test_properties_a_shield_does_not_cover_exit_2(capsys, prop: str, cause: str) -> None:
    code, _, err = run(capsys, "shield", TARGET, "-p", prop, "--threshold", "0.1")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert re.search(cause, err), err


def test_bad_shield_options_exit_2(capsys) -> None:
    for args, cause in (
        (["--threshold", "0.1", "--meet"], "not both"),
        ([], "needs a threshold"),
        (["--threshold", "-1"], "gap >= 0"),
        (["--threshold", "0.1", "--out", "s.npz"], "JSON"),
    ):
        code, _, err = run(capsys, "shield", TARGET, "-p", PROP, *args)
        assert code == 2 and cause in err, (args, err)


def test_unlabelled_commands_shield_by_command_name(tmp_path: Path) -> None:
    """INTERLEAVED: at (0,0) the unlabelled m:1 reaches the goal with 1/2, n:1 surely; a policy preferring m:1
    (0.9) shielded at the tightest threshold takes n:1 only: value 1; by hand unshielded 0.9 * 0.5 + 0.1 = 0.55."""
    path = tmp_path / "interleaved.prism"
    path.write_text(INTERLEAVED)
    model = load_model(path)
    policy = CallablePolicy(lambda s: np.tile([0.9, 0.1], (len(s), 1)), ["x", "y"], ["m:1", "n:1"], name="prefers m:1")
    prop = parse_property(model, 'P>=0.9 [F "goal"]', fixed_policy=True)
    r = shield_policy(model, prop, policy, ShieldOptions(meet=True))
    assert r.unshielded == pytest.approx(0.55, abs=1e-9)
    assert r.value == pytest.approx(1.0, abs=1e-9) and r.satisfied is True
    assert r.optimum == pytest.approx(1.0, abs=1e-9)
    # the kept actions at (0,0): n:1 only; at (0,1) (only m:1 enabled for m) nothing is removed
    rows = r.shield.rows(np.array([[0, 0]]), ("x", "y"))
    assert r.shield.kept[rows[0]].tolist() == [False, True]
    again = verify_exact(model, prop, ShieldedPolicy(policy, r.shield))
    assert again.value == pytest.approx(1.0, abs=1e-9)
    assert r.expected_interventions == pytest.approx(1.0, abs=1e-12)  # once, at the start
    assert r.expected_removed_mass == pytest.approx(0.9, abs=1e-12)


def test_a_shield_for_another_property_is_used_and_said(capsys, shield_file: Path) -> None:
    code, out, err = run(capsys, "verify", TARGET, "-p", 'P>=0.5 [F<=2 "goal"]', "--shield", str(shield_file), "--json")
    assert code == 0 and json.loads(out)["result"]["policy"].endswith("+ shield")
    assert f"the shield was computed for property '{PROP}'" in err


def test_a_table_policy_need_not_list_the_states_where_nothing_is_decided(capsys, tmp_path: Path) -> None:
    """QVBS ij.3 (public) with the uniform table `inspect --policy-template` writes: the template lists the states that
    offer a choice, not the goal states (nothing to decide there). The shield's intervention count asked the policy
    on every reached state and refused the table ("no entry for state ..."); verify never did."""
    model = Path(__file__).resolve().parents[1] / "data" / "qvbs" / "ij" / "ij.3.prism"
    template = tmp_path / "ij_pi.json"
    assert main(["inspect", str(model), "--policy-template", str(template)]) == 0
    capsys.readouterr()
    prop = "P>=0.9 [ F (q1 + q2 + q3) = 1 ]"
    code, out, err = run(capsys, "shield", str(model), "-p", prop, "--policy", str(template), "--threshold", "0", "--json")
    assert code == 0, err
    r = json.loads(out)["result"]
    # Pmax is 1 from every state of ij (QVBS: stable = 1), so every action's value is 1: threshold 0 keeps them all
    assert r["value"] == pytest.approx(1.0, abs=1e-9) and r["unshielded"] == pytest.approx(1.0, abs=1e-9)
    assert r["intervened_states"] == 0 and r["expected_interventions"] == 0.0
