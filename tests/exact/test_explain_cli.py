"""`rlverify explain`: the --json envelope, the tree file verified by a separate `rlverify verify`, the chart, and one
line with exit code 2 for every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlverify.cli.main import main

PROP = 'P>=0.5 [F<=3 "goal"]'


def test_explain_json_tree_file_and_chart(tmp_path: Path, capsys) -> None:
    tree, chart = tmp_path / "tree.json", tmp_path / "chart.png"
    code = main(["explain", "running-example-v1", "-p", PROP, "--json", "--save-tree", str(tree), "--out", str(chart)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["command"] == "explain" and data["exit_code"] == 0
    result = data["result"]
    (effect,) = result["features"]["effects"]
    assert effect["feature"] == "x" and result["features"]["model"] == "running-example-v1"
    assert result["tree"]["rules"] == ["if x = 1 then DOWN", "if x >= 2 then UP"]
    assert [c["state"]["x"] for c in result["critical"]["states"]] == [1, 2, 3]
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(tree.read_text())["fitted"]["model"] == "running-example-v1"
    assert main(["verify", "running-example-v1", "-p", PROP, "--policy", str(tree), "--json"]) == 0
    separate = json.loads(capsys.readouterr().out)["result"]["value"]
    assert separate == result["tree"]["tree_value"] == 0.0  # the tree's DOWN at x=1 never leaves x=1
    assert result["tree"]["policy_value"] == pytest.approx(0.4668, abs=1e-12)  # brute force: test_explain_features


def test_parts_are_computed_as_asked(capsys) -> None:
    assert main(["explain", "running-example-v1", "-p", PROP, "--parts", "tree", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["result"]
    assert result["features"] is None and result["critical"] is None and result["tree"]["depth"] == 1


def test_a_property_without_target_paths_skips_the_tree_and_critical_parts_when_not_asked(capsys) -> None:
    assert main(["explain", "running-example-v1", "-p", "P=? [G x<4]", "--json", "--no-perturb"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["result"]["skipped"]) == {"tree", "critical"}
    assert any("tree skipped" in w and "its path formula is G" in w for w in data["warnings"])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--parts", "trees"], "--parts: 'trees' is not a part"),
        (["--ablate", "y"], "--ablate: 'y' is not a feature of the policy"),
        (["--depth", "0"], "--depth: expected an integer from 1 to 64"),
        (["--fidelity", "1.5"], r"--fidelity: expected a number in \(0, 1\]"),
        (["--top", "0"], "--top: expected an integer from 1"),
        (["--depth", "2", "--fidelity", "0.9"], "--depth and --fidelity: give one"),
        (["--save-tree", "tree.txt"], "--save-tree tree.txt: expected a .json file name"),
        (["--out", "x.svg"], "--out x.svg: this command writes .json, .png files"),
        (["--parts", "tree", "--out", "c.png"], "--out FILE.png draws the features part"),
    ],
    ids=["part", "feature", "depth", "fidelity", "top", "depth-and-fidelity", "tree-suffix", "out-suffix", "png-no-features"],
)
def test_bad_input_exits_2_with_one_line(capsys, tmp_path: Path, monkeypatch, argv: list[str], expected: str) -> None:
    import re

    monkeypatch.chdir(tmp_path)
    code = main(["explain", "running-example-v1", "-p", PROP, *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert re.search(expected, err), err
    assert len(err.splitlines()) == 1, err


def test_a_part_asked_for_that_does_not_apply_is_refused(capsys) -> None:
    code = main(["explain", "running-example-v1", "-p", "P=? [G x<4]", "--parts", "tree"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--parts tree: property 'P=? [G x<4]' has no target paths" in err and len(err.splitlines()) == 1


def test_an_existing_tree_file_is_not_overwritten_without_force(tmp_path: Path, capsys) -> None:
    tree = tmp_path / "tree.json"
    tree.write_text("mine")
    code = main(["explain", "running-example-v1", "-p", PROP, "--parts", "tree", "--save-tree", str(tree)])
    err = capsys.readouterr().err
    assert code == 2 and "tree.json" in err and "--force" in err and tree.read_text() == "mine"


def test_a_table_policy_without_answers_for_perturbed_observations_skips_the_features_part(capsys, tmp_path):
    """QVBS ij.3 (public) with the uniform table `inspect --policy-template` writes: the ±1 perturbation of q1 shows the
    policy observations it does not list. The whole command failed with the table's own message; now the features
    part is skipped saying why (the tree and the critical states are computed), and asked for alone it exits 2."""
    import json
    from pathlib import Path

    from rlverify.cli.main import main

    model = Path(__file__).resolve().parents[1] / "data" / "qvbs" / "ij" / "ij.3.prism"
    table = tmp_path / "ij_pi.json"
    assert main(["inspect", str(model), "--policy-template", str(table)]) == 0
    capsys.readouterr()
    args = ["explain", str(model), "-p", "P>=0.9 [ F (q1 + q2 + q3) = 1 ]", "--policy", str(table)]
    assert main([*args, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["result"]
    assert r["features"] is None and "has no answer for" in r["skipped"]["features"]
    assert r["tree"] is not None and r["critical"] is not None
    assert main([*args, "--parts", "features"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "perturbed by ±1" in err and "--parts tree,critical" in err
