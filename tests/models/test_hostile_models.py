"""Model and property text that crashed Storm's parser (a stack overflow kills the process) or escaped as a
traceback: refused before Storm sees it, in one line naming the file or the property."""

from __future__ import annotations

import pytest

from rlverify.cli.main import main
from rlverify.errors import ModelError, PropertyError
from rlverify.models.property_parser import parse_property
from rlverify.models.symbolic import load_model

SMALL = "mdp\nmodule m\n  x : [0..3] init 0;\n  [a] x<3 -> (x'={update});\nendmodule\n"


def _write(tmp_path, text: str | bytes, name: str = "m.nm"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_a_property_nested_3000_deep_is_refused_not_a_crash(tmp_path, capsys):
    model = load_model(_write(tmp_path, SMALL.format(update="x+1")))
    deep = "P=? [F " + "(" * 3000 + "x=3" + ")" * 3000 + "]"
    with pytest.raises(PropertyError, match="nested 3002 deep, more than 500"):
        parse_property(model, deep)
    assert main(["verify", str(model.path), "-p", deep, "--mode", "monolithic"]) == 2
    assert "nested 3002 deep, more than 500" in capsys.readouterr().err


def test_a_model_nested_3000_deep_is_refused_naming_the_file(tmp_path):
    path = _write(tmp_path, SMALL.format(update="(" * 3000 + "x+1" + ")" * 3000))
    with pytest.raises(ModelError, match=r"m\.nm: line 4: an expression nested 3001 deep, more than 500"):
        load_model(path)


def test_nesting_within_the_limit_and_brackets_in_comments_are_fine(tmp_path):
    path = _write(tmp_path, "// " + "(" * 2000 + "\n" + SMALL.format(update="(" * 400 + "x+1" + ")" * 400))
    model = load_model(path)
    assert parse_property(model, "P=? [F " + "(" * 300 + "x=3" + ")" * 300 + "]").path == "F"


def _run(*args: str) -> tuple[int, list[str], str]:
    """``rlverify ARGS`` in a process of its own (a crash kills it, not the test run): exit code, stderr's lines, stdout."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "rlverify", *args], capture_output=True, text=True, timeout=120)
    return done.returncode, [line for line in done.stderr.splitlines() if line.strip()], done.stdout


RUNNING = "src/rlverify/benchmarks/data/models/running_example.prism"


def _running(tmp_path, name: str, extra: str = "", nop: str = "true"):
    from pathlib import Path

    text = (Path(__file__).parents[2] / RUNNING).read_text()
    return _write(tmp_path, text.replace("[NOP]  true", f"[NOP]  {nop}") + extra, name)


def test_operators_nested_or_chained_beyond_what_storm_survives_are_refused_in_one_line(tmp_path):
    """Each killed the process with SIGSEGV (exit 139, no message) in Storm's parser or builder: 3,000 chained X or
    6,000 ! in a property, a label summing 50,000 terms or negated 6,000 times. Now exit 2 and one line naming where."""
    many_x = "Pmax=? [" + "X " * 3000 + '"goal"]'
    many_not = "Pmax=? [F " + "!" * 6000 + '"goal"]'
    summed = _running(tmp_path, "summed.nm", 'label "big" = (' + "+".join(["x"] * 50_000) + ")>0;\n")
    negated = _running(tmp_path, "negated.nm", 'label "big" = ' + "!" * 6000 + "(x>0);\n")
    cases = [
        (RUNNING, many_x, "nested 3001 deep, more than 500"),
        (RUNNING, many_not, "nested 6002 deep, more than 500"),
        (str(summed), 'Pmax=? [F "big"]', "summed.nm: line 23: an expression chaining 50001 operators, more than 10,000"),
        (str(negated), 'Pmax=? [F "big"]', "negated.nm: line 23: an expression nested 6001 deep, more than 500"),
    ]
    for model, prop, expected in cases:
        code, err, _ = _run("verify", model, "-p", prop, "--mode", "monolithic")
        assert code == 2 and len(err) == 1 and expected in err[0], (expected, code, err)


def _pmax_next(steps: int) -> float:
    """Pmax of being in D (x=4) after exactly ``steps`` steps of the running example from A, by value iteration in
    numpy over its transition table written out by hand (shares nothing with Storm or rlverify)."""
    import numpy as np

    up = np.array([[0, 0.2, 0.8, 0], [0, 0, 0.2, 0.8], [0, 0, 0, 1.0], [0, 0, 0, 0]])
    down = np.array([[1.0, 0, 0, 0], [1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]])
    value = np.array([0, 0, 0, 1.0])
    for _ in range(steps):
        value = np.maximum.reduce([up @ value + np.array([0, 0, 0, -np.inf]), value, down @ value])
    return float(value[0])


def test_nesting_and_chains_just_within_the_limits_reach_storm_and_give_the_right_value(tmp_path):
    """499 X, a guard of 499 brackets around a 9,999-term sum, a label negated 498 times: checked by Storm (in a
    process of its own: a crash is exit 139, not a failed test run) and the value is the numpy one."""
    guard = "(" * 499 + "+".join(["x"] * 9_999) + ")" * 499 + ">0"  # always true: the model is the running example
    path = _running(tmp_path, "deep.nm", 'label "big" = ' + "!" * 498 + "(x=4);\n", nop=guard)
    code, err, out = _run("verify", str(path), "-p", "Pmax=? [" + "X " * 499 + '"goal"]', "--mode", "monolithic", "--json")
    assert code == 0 and not err, err
    import json

    assert json.loads(out)["result"]["value"] == pytest.approx(_pmax_next(499), abs=1e-6)
    for prop in ('Pmax=? [F<=2 "big"]', "Pmax=? [F<=2 " + "!" * 498 + '"goal"]'):  # 498 ! are none: 0.96
        code, err, out = _run("verify", str(path), "-p", prop, "--mode", "monolithic", "--json")
        assert code == 0 and not err, err
        assert json.loads(out)["result"]["value"] == pytest.approx(_pmax_next(2), abs=1e-6)  # (NOP keeps D)


def test_a_flat_model_of_20000_commands_is_not_a_deep_one():
    """A chain is one expression's: a 20,000-command file's updates, guards and labels (each short) and a 9,000-way
    disjunction (9,001 deep, not 18,000: = binds tighter than |) pass, and the check costs string counts per command."""
    import time

    from rlverify.models.nesting import check_nesting, expression_depth

    commands = "".join(f"  [a{i}] x={i} & y<3 -> 0.5 : (x'=x+1) + 0.5 : (y'=min(y+1,3));\n" for i in range(20_000))
    text = f"mdp\nmodule m\n  x : [0..20000] init 0;\n  y : [0..3] init 0;\n{commands}endmodule\n"
    started = time.perf_counter()
    check_nesting(text, "m.nm", lines=True)
    assert time.perf_counter() - started < 0.5
    assert expression_depth("[a] x>0 -> " + " + ".join(["0.5 : (x'=1)"] * 20_000) + ";") == (1, 1, 1)
    assert expression_depth('label "s" = ' + "|".join(f"x={i}" for i in range(9_000)) + ";")[:2] == (0, 9_001)
    assert expression_depth("!a & !b & !c") == (1, 2, 1)  # a negated operand each, not three negations deep
    assert expression_depth("((((a)+b+c)+d+e)+f+g)") == (4, 6, 1)  # the chains of enclosing groups add up


@pytest.mark.parametrize(
    "content", [b"\x00\x01binary\xff", b"mdp\nmodule m \xff\xfe\x80 endmodule"], ids=["nul-bytes", "not-utf8"]
)
def test_binary_prism_files_are_refused_in_one_line(tmp_path, capsys, content):
    path = _write(tmp_path, content)
    with pytest.raises(ModelError, match=r"m\.nm: not a PRISM file"):
        load_model(path)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not a PRISM file" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_latin1_comment_is_not_binary(tmp_path):
    path = _write(tmp_path, b"// caf\xe9\n" + SMALL.format(update="x+1").encode())
    assert load_model(path).variables == ("x",)


# --- division by zero in the model (PRISM refuses it; Storm's parser crashed the process on 1/(2*K) with K=0, and
# evaluated x/0 in a guard or label to some number and built on) ------------------------------------------------

DIVIDING = """mdp
const int K;
formula f = K - K;
module m
  x : [0..2] init 0;
  [go] {guard} -> {prob} : (x'={update}) + 1-({prob}) : (x'=x);
  [stay] true -> (x'=x);
endmodule
rewards "r"
  [go] true : {reward};
endrewards
label "goal" = {label};
"""
FINE = {"guard": "x<2", "prob": "1/2", "update": "min(x+1, 2)", "reward": "1", "label": "x=2"}


@pytest.mark.parametrize(
    ("part", "text", "where"),
    [
        ("guard", "x/0>=0", "line 6 ([go] x/0>=0 ->"),
        ("guard", "(x+1)/(K-K)>=0", "line 6 ([go] (x+1)/(K-K)>=0 ->"),  # a divisor that is zero once K is defined
        ("guard", "mod(x, K)=0", "line 6 ([go] mod(x, K)=0 ->"),
        ("prob", "1/(2*K)", "line 6 ([go] x<2 -> 1/(2*K) :"),  # Storm's parser: SIGFPE, the process killed
        ("update", "floor(x/0)", "line 6 ([go] x<2 -> 1/2 : (x'=floor(x/0))"),
        ("label", "x/0>=0", 'line 12 (label "goal" = x/0>=0;)'),
        ("reward", "1/K", "line 10 ([go] true : 1/K;)"),
        ("guard", "x/f>=0", "the guard of command m:1 divides by zero: (x / 0)"),  # through a formula: after parsing
    ],
)
def test_a_model_dividing_by_zero_is_refused_naming_where(tmp_path, part, text, where):
    path = _write(tmp_path, DIVIDING.format(**{**FINE, part: text}))
    with pytest.raises(ModelError, match="divides by zero") as err:
        load_model(path, "K=0")
    assert where in str(err.value) and "\n" not in str(err.value)


def test_storms_parser_never_sees_a_constant_zero_divisor(tmp_path):
    """Defined in the file, on the command line, or written out: each crashed the process (exit 136, SIGFPE) in
    Storm's parser; now exit 2 and one line. Run as processes: a regression kills the process, not the test run."""
    import subprocess
    import sys

    crashing = DIVIDING.format(**{**FINE, "prob": "1/(2*K)"})
    cases = [
        (crashing.replace("const int K;", "const int K = 0;"), []),
        (crashing, ["-c", "K=0"]),
        (DIVIDING.format(**{**FINE, "prob": "1/(2*0)"}), ["-c", "K=1"]),
    ]
    for i, (text, constants) in enumerate(cases):
        path = _write(tmp_path, text, f"crash{i}.nm")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlverify",
                "verify",
                str(path),
                *constants,
                "-p",
                'Pmax=? [F "goal"]',
                "--mode",
                "monolithic",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2 and len(lines) == 1 and "divides by zero" in lines[0], (i, done.returncode, done.stderr)


def test_a_divisor_that_is_not_zero_is_fine(tmp_path):
    """The same parts with K=2 divide by 2: the model loads and its value is the hand-computed one (x climbs by 1 with
    probability 1/(2K) = 1/4 per step under go: Pmax of reaching x=2 is 1; within 2 steps it is (1/4)^2)."""
    from rlverify import ExactOptions, verify_exact

    parts = {"guard": "(x+1)/(K-1)>=0", "prob": "1/(2*K)", "update": "min(x+1, 2)", "reward": "1/K", "label": "x/K=1"}
    model = load_model(_write(tmp_path, DIVIDING.format(**parts)), "K=2")
    options = ExactOptions(mode="monolithic")
    assert verify_exact(model, 'Pmax=? [F<=2 "goal"]', options=options).pmax == pytest.approx(1 / 16, rel=1e-12)
    assert verify_exact(model, 'Pmax=? [F "goal"]', options=options).pmax == pytest.approx(1.0, abs=1e-6)


def test_a_jani_edge_dividing_by_zero_is_refused(tmp_path):
    import json

    from tests.models.test_file_edges import _jani

    zero = {"op": "-", "left": 1, "right": 1}
    edge = {
        "location": "l",
        "guard": {"exp": {"op": "≥", "left": {"op": "/", "left": "y", "right": zero}, "right": 0}},
        "destinations": [{"location": "l", "probability": {"exp": 1}, "assignments": [{"ref": "y", "value": 1}]}],
    }
    path = _write(tmp_path, json.dumps(_jani([edge], top=2)), "m.jani")
    with pytest.raises(ModelError, match=r"the guard of an edge of aut divides by zero: \(y / \(1 - 1\)\)"):
        load_model(path)


def test_a_jani_integer_beyond_pythons_digit_limit_is_refused_in_one_line(tmp_path, capsys):
    """json.loads raised ValueError (4,300 digits at most in int(str)): a traceback, exit 1."""
    import json

    from rlverify.errors import InputFileError
    from tests.models.test_file_edges import _jani

    text = json.dumps(_jani([], top=2)).replace('"upper-bound": 2', '"upper-bound": ' + "9" * 5000)
    path = _write(tmp_path, text, "huge.jani")
    with pytest.raises(InputFileError, match="an integer in the file is too long to read"):
        load_model(path)
    assert main(["inspect", str(path)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "too long to read" in lines[0]


def test_a_jani_number_beyond_double_precision_is_refused_in_one_line(tmp_path):
    """1e999 read as inf: Storm's JSON parser refused the marked copy (a warning line), then ExprTk a 1000-digit number."""
    import json

    from tests.models.test_file_edges import _jani

    text = json.dumps(_jani([], top=2)).replace('"upper-bound": 2', '"upper-bound": 2e999')
    with pytest.raises(ModelError, match=r"the number 2e999 is beyond double precision"):
        load_model(_write(tmp_path, text, "inf.jani"))


def test_a_zero_divisor_the_text_check_cannot_judge_is_still_refused(tmp_path):
    """floor is outside the language the text check evaluates: x/floor(K/2) with K=1 is left to the walk over Storm's
    expressions (which runs only where some divisor in the text was not judged)."""
    from rlverify.models.divisions import constant_zero_divisor

    text = DIVIDING.format(**{**FINE, "guard": "x/floor(K/2)>=0"})
    assert constant_zero_divisor(text, {"K": "1"}) == (None, False)
    assert constant_zero_divisor(DIVIDING.format(**FINE), {"K": "1"}) == (None, True)  # only 1/2: all judged
    with pytest.raises(ModelError, match=r"the guard of command m:1 divides by zero"):
        load_model(_write(tmp_path, text), "K=1")


def test_the_line_named_is_the_files_line_whatever_its_control_characters(tmp_path):
    """Lines are counted at newlines only: splitting at \\r and \\f as well named the wrong line's text."""
    text = "mdp\nmodule m\n x:[0..1] init 0;\n [a] x<1 -> (x'=1);\n\r\x0c [b] x/0>0 -> true;\nendmodule\n"
    with pytest.raises(ModelError, match=r"line 5 \(\[b\] x/0>0 -> true;\) divides by zero"):
        load_model(_write(tmp_path, text))


def _formulas(tmp_path, name: str, formulas: str, label: str):
    text = f'mdp\n{formulas}module m\n  x : [0..3] init 0;\n  [a] x<3 -> (x\'=x+1);\nendmodule\nlabel "goal" = {label};\n'
    return _write(tmp_path, text, name)


def test_formulas_written_out_beyond_what_storm_parses_in_time_are_refused_in_one_line(tmp_path):
    """Storm's parser writes each formula out where it is used: 20,000 formulas each using the one before took over
    120 s, 40 each using the one before twice never end; formulas summing 9,999 terms onto the one before reach a
    30,000-deep tree (a crash; h2 is already too deep). Each is now exit 2 and one line within seconds (a process
    with a time limit)."""
    chained = "formula f1 = x;\n" + "".join(f"formula f{i} = f{i - 1}+1;\n" for i in range(2, 20_001))
    doubled = "formula g0 = x;\n" + "".join(f"formula g{i} = g{i - 1}+g{i - 1};\n" for i in range(1, 41))
    terms = "+".join(["1"] * 9_999)
    deep = f"formula h1 = x+{terms};\nformula h2 = h1+{terms};\nformula h3 = h2+{terms};\n"
    cases = [
        (_formulas(tmp_path, "chained.nm", chained, "f20000>0"), "(formula f20000 alone has 20,000;"),  # x and 19,999 ones
        (_formulas(tmp_path, "doubled.nm", doubled, "g40>0"), "(formula g21 alone has more than 2,000,000;"),
        # h2: its 9,999 + h1's 9,999 + its definition's =
        (_formulas(tmp_path, "deep.nm", deep, "h3>0"), "deep.nm: line 3: an expression chaining 19999 operators"),
    ]
    for path, expected in cases:
        code, err, _ = _run("inspect", str(path))
        assert code == 2 and len(err) == 1 and expected in err[0], (expected, code, err)


def test_a_thousand_chained_formulas_load_and_mean_what_they_say(tmp_path):
    """f1000 = x + 999 written out through 999 formulas: goal is x=3, reached by the deterministic count only after
    three steps (Pmax of F<=2 is 0, of F<=3 is 1)."""
    from rlverify import ExactOptions, verify_exact

    chained = "formula f1 = x;\n" + "".join(f"formula f{i} = f{i - 1}+1;\n" for i in range(2, 1_001))
    model = load_model(_formulas(tmp_path, "chain.nm", chained, "f1000=1002"))
    options = ExactOptions(mode="monolithic")
    assert verify_exact(model, 'Pmax=? [F<=2 "goal"]', options=options).pmax == pytest.approx(0.0, abs=1e-12)
    assert verify_exact(model, 'Pmax=? [F<=3 "goal"]', options=options).pmax == pytest.approx(1.0, abs=1e-12)


def test_storms_own_parse_error_lines_stay_out_of_a_python_session(tmp_path, capfd):
    """In Python (no CLI to turn Storm's log off) a bad model or property printed Storm's ``ERROR
    (SpiritErrorHandler.h:27): ...`` lines besides raising; now only the exception says it, with Storm's message."""
    import stormpy.developer as dev

    level = dev.get_log_level()
    dev.set_log_level(dev.LogLevel.WARN)  # as a Python session starts (an earlier CLI test may have set it off)
    try:
        capfd.readouterr()
        with pytest.raises(ModelError, match=r"PRISM syntax error: Parsing error at 4:\d+: +expecting"):
            load_model(_write(tmp_path, SMALL.format(update="x+1").replace("x<3", "x< ")))
        model = load_model(_write(tmp_path, SMALL.format(update="x+1"), "fine.nm"))
        with pytest.raises(PropertyError, match="does not parse: Expected expression x to be of boolean type"):
            parse_property(model, "P=? [F x=]")
        out, err = capfd.readouterr()
        assert "ERROR" not in out + err and "SpiritErrorHandler" not in out + err, out + err
        assert dev.get_log_level() == dev.LogLevel.WARN  # the user's level is restored
    finally:
        dev.set_log_level(level)


def _storm_depth(text: str) -> int:
    """The depth of the syntax tree Storm's own expression parser builds for ``text`` over an integer ``x`` (walked
    without recursion)."""
    import stormpy

    manager = stormpy.expressions.ExpressionManager()
    x = manager.declare_integer_variable("x")
    parser = stormpy.expressions.ExpressionParser(manager)
    parser.set_identifier_mapping({"x": x.get_expression()})
    best, stack = 0, [(parser.parse_from_string(text, False), 0)]
    while stack:
        node, depth = stack.pop()
        best = max(best, depth)
        if not (node.is_literal() or node.is_variable()):
            stack.extend((node.get_operand(i), depth + 1) for i in range(node.arity))
    return best


def _integer_expressions():
    from hypothesis import strategies as st

    atoms = st.sampled_from(["x", "1", "2"])

    def extend(inner):
        return st.one_of(
            st.tuples(st.sampled_from(["-", "- "]), inner).map("".join),
            st.tuples(inner, st.sampled_from(["+", "-", "*", " + ", " * "]), inner).map("".join),
            st.lists(inner, min_size=2, max_size=6).map("+".join),
            inner.map(lambda e: f"({e})"),
            st.tuples(st.integers(1, 30), inner).map(lambda t: "-" * t[0] + f"({t[1]})"),
        )

    return st.recursive(atoms, extend, max_leaves=40)


def test_the_measured_depths_bound_the_tree_storm_builds():
    """Generated integer expressions (chains, precedence, prefix minus, brackets): the nesting and chain the check
    measures add up to at least the depth of Storm's own syntax tree (the oracle: Storm's expression parser), so what
    passes both limits is a tree Storm has been measured to survive."""
    from hypothesis import given, settings

    from rlverify.models.nesting import expression_depth

    @settings(max_examples=150, deadline=None)
    @given(_integer_expressions())
    def check(text):
        nest, chain, _ = expression_depth(text)
        assert nest + chain >= _storm_depth(text), text

    check()


def _chain(n: int, part: str) -> tuple[str, str]:
    """A model's extra text and the property, with an expression Storm builds ``n`` operators deep in ``part``:
    ``(x+...+x)>4n-1`` (n-1 ``+`` and one ``>``), which holds in D (x=4) only."""
    text = "(" + "+".join(["x"] * n) + f")>{4 * n - 1}"
    if part == "property":
        return "", f"Pmax=? [X X {text}]"
    if part == "label":
        return f'label "big" = {text};\n', 'Pmax=? [F<=2 "big"]'
    return f'rewards "deep"\n  {text} : 1;\nendrewards\n', 'R{"deep"}max=? [C<=3]'  # 1 per step in D


@pytest.mark.parametrize("part", ["property", "label", "reward"])
def test_chains_beyond_what_storms_exprtk_takes_are_refused_before_storm(tmp_path, capsys, part):
    """A state formula, label or reward chaining 4,999 operators passed the chain limit (10,000) and Storm's ExprTk
    evaluator refused it, blamed on the model: "running-example-v1: Storm could not build the model: Expression was
    not properly parsed by ExprTk: ((((... stack depth 10001 exceeds maximum allowed stack depth of 10000". Now it is
    refused before Storm naming the property or the file's line; 4,998 (Storm's own limit, measured) reach Storm and
    give the numpy value."""
    import json

    for n, ok in ((4_998, True), (4_999, False)):
        extra, prop = _chain(n, part)
        path = _running(tmp_path, f"{part}{n}.nm", extra)
        code = main(["verify", str(path), "-p", prop, "--mode", "monolithic", "--json"])
        out, err = capsys.readouterr()
        if ok:
            assert code == 0, err
            # the steps in D among 0, 1, 2: moving up maximizes each step's chance at once, so the sum of the maxima
            expected = sum(_pmax_next(k) for k in range(3)) if part == "reward" else _pmax_next(2)
            assert json.loads(out)["result"]["value"] == pytest.approx(expected, abs=1e-9)
            continue
        lines = err.strip().splitlines()
        where = "property 'Pmax=? [X X (x+x+" if part == "property" else f"{part}{n}.nm: line 23"
        assert code == 2 and len(lines) == 1 and where in lines[0], err
        assert "chaining 4,999 operators, more than the 4,998 Storm's ExprTk evaluator takes" in lines[0]


def test_storms_exprtk_refusal_the_check_lets_through_is_one_short_line_naming_the_expressions(tmp_path, capsys):
    """400 negations around a 4,900-term sum are within both limits but beyond ExprTk's stack: Storm's refusal quoted
    the whole expression (a 30,000-character line) and blamed the model's build; now one short line with the cause."""
    path = _running(tmp_path, "mixed.nm", 'label "big" = ' + "!" * 400 + "((" + "+".join(["x"] * 4_900) + ")>0);\n")
    assert main(["verify", str(path), "-p", 'Pmax=? [F "big"]', "--mode", "monolithic"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and len(err[0]) < 400, err
    assert "labels or rewards is too deep for Storm's ExprTk evaluator" in err[0] and "stack depth" in err[0]
