"""PRISM properties files (``-p FILE.props``): comments, names, constants, several properties; each value against the
closed form of a geometric race written in the test."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.errors import InputFileError, PropertyError
from rlverify.models import load_model, parse_properties
from rlverify.models.properties import parse_structure
from rlverify.models.property_files import split_properties
from rlverify.policies import CallablePolicy

# "done" after the second success of fair coin flips: P(F<=T done) = 1 - P(Binomial(T, 1/2) <= 1) = 1 - (1 + T) / 2^T
MODEL = """mdp
module m
  x : [0..2] init 0;
  [go] x<2 -> 0.5 : (x'=x+1) + 0.5 : (x'=x);
  [go] x=2 -> true;
endmodule
label "done" = x=2;
"""

PROPS = """// a properties file as PRISM writes them
const int T;
const int U = 3;   // a literal
"two": P=? [ F<=T "done" ];
"three": P=? [ F<=U "done" ]
P>=0.4 [F<=U "done"]
P=? [ F<=U+7
      "done" ]
"""


def closed_form(T: int) -> float:
    return 1 - (1 + T) / 2**T


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "coin.prism"
    path.write_text(MODEL)
    return load_model(path)


def test_every_property_of_a_file_is_read_named_and_checked(tmp_path, model):
    props_file = tmp_path / "coin.props"
    props_file.write_text(PROPS)
    props = parse_properties(model, props_file, constants="T=2")
    assert [p.name for p in props] == ["two", "three", None, None]
    assert [p.bound for p in props] == [2, 3, 3, 10]
    assert props[3].right == '"done"' and props[3].bound_text == "3+7"
    policy = CallablePolicy(lambda s: np.ones((len(s), 1)), ["x"], ["go"], name="always")
    results = [verify_exact(model, p, policy, ExactOptions()) for p in props]
    for r, T in zip(results, (2, 3, 3, 10), strict=True):
        assert r.value == pytest.approx(closed_form(T), rel=1e-12)
    assert results[2].satisfied is True  # 0.5 >= 0.4, decided from the bracket


def test_text_with_several_properties_is_read_like_a_file(model):
    props = parse_properties(model, 'P=? [F<=2 "done"]; P=? [F<=4 "done"]')
    assert [p.bound for p in props] == [2, 4]


@pytest.mark.parametrize(
    "text, constants, words",
    [
        ('const int T;\nP=? [F<=T "done"]', {}, "constant T has no value: give it with -c T=VALUE"),
        ('const int T = N+1;\nP=? [F<=T "done"]', {}, "rlverify reads literal values in property files"),
        ('const int T = 2;\nP=? [F<=T "done"]', {"T": "3"}, "constant T is defined in the file (= 2); drop -c T"),
        ('"a": P=? [F "done"]\n"a": P=? [F<=2 "done"]', {}, 'property "a" is named twice'),
        ('P=? [F "done"]', {"Q": "1"}, "-c Q: no such constant in the properties"),
        ("// only a comment\n\n", {}, "no property in it"),
    ],
)
def test_what_a_properties_file_cannot_mean_is_refused_naming_it(text, constants, words):
    with pytest.raises(PropertyError) as info:
        split_properties(text, constants, source="f.props")
    assert words in str(info.value) and str(info.value).startswith("f.props: ")


def test_comments_and_quotes_do_not_split_a_property():
    """``//`` inside a quoted label is not a comment; a line end inside brackets does not end the property."""
    text = 'P=? [F "a//b"] // a comment\nP=? [F\n x=1 ]'
    assert split_properties(text) == [(None, 'P=? [F "a//b"]'), (None, "P=? [F\n x=1 ]")]


def test_a_missing_properties_file_is_named(model, tmp_path):
    with pytest.raises(InputFileError, match=r"nothere\.props: properties file not found"):
        parse_properties(model, tmp_path / "nothere.props")


def _fifo(tmp_path):
    import os

    path = tmp_path / "pipe.props"
    os.mkfifo(path)
    return path


def _huge(tmp_path):
    from rlverify.models.property_files import MAX_PROPERTIES_BYTES

    path = tmp_path / "huge.props"
    with path.open("wb") as f:  # sparse: no disk used
        f.truncate(MAX_PROPERTIES_BYTES + 1)
    return path


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_fifo, "pipe.props: not a regular file (a pipe, device or socket), not a properties file"),
        (lambda tmp_path: tmp_path, "is a directory, not a properties file"),
        (lambda tmp_path: "/dev/zero", "/dev/zero: not a regular file"),
        (_huge, "huge.props: 16,777,217 bytes, more than the 16,777,216 a properties file may have"),
    ],
    ids=["fifo", "directory", "dev-zero", "huge"],
)
def test_a_properties_file_that_is_no_small_regular_file_is_refused_before_reading(tmp_path, make, expected):
    """A FIFO as -p FILE.props blocked verify forever (open waits for a writer), /dev/zero read without end: each is
    now exit 2 and one line, before the file is opened (run as a process with a time limit: a hang fails the test)."""
    import subprocess
    import sys

    model = tmp_path / "coin.prism"
    model.write_text(MODEL)
    target = make(tmp_path)
    if not str(target).endswith(".props"):  # a directory or device named as a properties file
        target = tmp_path / "link.props"
        target.symlink_to(make(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "rlverify", "verify", str(model), "-p", str(target), "--mode", "monolithic"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and expected.split(": ", 1)[-1] in lines[0], done.stderr


@pytest.mark.parametrize(
    "text, bound_text, right",
    [
        ('P=? [F<=2+1 "goal"]', "2+1", '"goal"'),
        ('P=? [F<=(N + 2) "goal"]', "(N + 2)", '"goal"'),
        ("P=? [F<=N*2 x=3]", "N*2", "x=3"),
        ("P=? [F<=((N)+2)*3 (x=3)]", "((N)+2)*3", "(x=3)"),
    ],
)
def test_an_expression_step_bound_is_not_read_into_the_state_formula(text, bound_text, right):
    """Before, ``right`` was ``2+1 "goal"``: the bound's expression taken as part of the target."""
    p = parse_structure(text)
    assert (p.bound_text, p.right) == (bound_text, right)


def test_a_public_properties_file_gives_the_published_values():
    """QVBS's csma.props (five named properties, Pmin/Pmax and Rmin/Rmax, nobody here wrote it) on csma.3-2, in
    monolithic mode, against Storm's published exact results (QVBS, Storm exact 2018-10-17: rationals): each certified
    bracket contains the exact rational, and each value lies within the default relative precision 1e-6."""
    import json
    from fractions import Fraction
    from pathlib import Path

    from rlverify.experiments import verify_experiments

    root = Path(__file__).resolve().parents[1] / "data" / "qvbs" / "csma"
    published = json.loads((root / "results" / "Storm.exact.3-2.2018-10-17.json").read_text(encoding="utf-8-sig"))
    exact = {r["property"]: Fraction(r["value"]["num"], r["value"]["den"]) for r in published["data"] if "property" in r}
    result = verify_experiments(root / "csma.3-2.prism", [str(root / "csma.props")], options=ExactOptions(mode="monolithic"))
    runs = {run.name: run.result for run in result.runs}
    assert runs.keys() == exact.keys() == {"all_before_max", "all_before_min", "some_before", "time_max", "time_min"}
    for name, value in exact.items():
        r = runs[name]
        assert Fraction(r.lower) <= value <= Fraction(r.upper), (name, r.lower, r.upper, float(value))
        assert r.value == pytest.approx(float(value), rel=1e-6), name


@pytest.mark.parametrize("where", ["model", "properties", "both"])
def test_a_utf8_byte_order_mark_is_read_as_in_a_jani_file(tmp_path, where):
    """A leading BOM (some editors write one) was refused in PRISM files ("expecting <model type>" at 1:1) and in
    properties files (the formula started with an invisible U+FEFF); it is allowed, as in JANI files: the values are
    the closed form's and the BOM-less files'. Two builds: the second parses the model file again."""
    from rlverify.models import build_explicit

    bom = "\ufeff"
    values = {}
    for marked in (False, True):
        model_path, props_path = tmp_path / f"coin{marked}.prism", tmp_path / f"coin{marked}.props"
        model_path.write_text((bom if marked and where != "properties" else "") + MODEL, encoding="utf-8")
        props_path.write_text((bom if marked and where != "model" else "") + PROPS, encoding="utf-8")
        model = load_model(model_path)
        props = parse_properties(model, props_path, constants="T=2")
        policy = CallablePolicy(lambda s: np.ones((len(s), 1)), ["x"], ["go"], name="always")
        values[marked] = [verify_exact(model, p, policy, ExactOptions()).value for p in props]
        assert [build_explicit(model, None)[0].num_states for _ in range(2)] == [3, 3]
    assert values[True] == values[False]
    for value, T in zip(values[True], (2, 3, 3, 10), strict=True):
        assert value == pytest.approx(closed_form(T), rel=1e-12)


def test_a_bom_before_an_unsupported_model_type_still_names_the_type(tmp_path):
    path = tmp_path / "game.prism"
    path.write_text("\ufeffsmg\nplayer p1 m endplayer\nmodule m x : [0..1] init 0; [a] x=0 -> (x'=1); endmodule\n")
    with pytest.raises(Exception, match=r"model type SMG is not supported"):
        load_model(path)
