"""Hostile input at the command line (issue 21): names that look like markup or TeX, values that start with
``-``, numbers that are not finite or do not fit, files that are not text, and outputs that must never be
lost or clobbered. Every case exits 0 with the name shown verbatim, or 2 with one line naming the cause."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.incli import cli, one_line

MODEL = """mdp
module m
  x : [0..3] init 0;
  y : [0..1] init 0;
  [up] x<3 -> 0.5 : (x'=x+1) + 0.5 : (x'=x);
  [stay] true -> (y'=1-y);
endmodule
label "top" = x=3;
"""

POLICY = (
    "import numpy as np\nFEATURES = ['x', 'y']\nACTIONS = ['up', 'stay']\n"
    "def pi(s):\n    return np.tile([0.9, 0.1], (len(s), 1))\n"
)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with ``m.prism`` and ``p.py`` (short relative names keep table cells unwrapped)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.prism").write_text(MODEL)
    (tmp_path / "p.py").write_text(POLICY)
    return tmp_path


# ---------------------------------------------------------------------------------------------------
# 1. one safe way to write a file


def test_a_file_created_while_verify_runs_is_not_overwritten(capsys, here, monkeypatch) -> None:
    import rlverify.exact.verify as engine  # the CLI imports the engine's function when it runs

    real = engine.verify_exact

    def slow_verify(*args, **kwargs):  # another program (or a second run) writes the file meanwhile
        (here / "values.csv").write_text("theirs")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "verify_exact", slow_verify)
    code, _, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--out", "values.csv")
    assert code == 2 and "--out values.csv: file exists; pass --force to overwrite it" in one_line(err)
    assert (here / "values.csv").read_text() == "theirs"
    assert sorted(p.name for p in here.iterdir()) == ["m.prism", "p.py", "values.csv"]  # no temporary left


def test_publishing_never_clobbers_a_file_that_appears_while_writing(tmp_path) -> None:
    """Two writers of one file: the second to publish fails (no-clobber link), whichever wrote first."""
    from rlverify.files import FileWriteError, publishing, write_text

    target = tmp_path / "out.json"
    with pytest.raises(FileWriteError, match=r"out\.json: a file appeared there while rlverify was running"):
        with publishing(target, what="--out") as tmp:
            tmp.write_text("second")
            write_text(target, "first")  # the other run finishes first
    assert target.read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
    with publishing(target, force=True) as tmp:
        tmp.write_text("forced")
    assert target.read_text() == "forced" and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_with_force_the_file_is_replaced_atomically(capsys, here) -> None:
    (here / "v.json").write_text("old")
    code, _, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--out", "v.json", "--force")
    assert code == 0, err
    assert json.loads((here / "v.json").read_text())["value"] == pytest.approx(1.0, abs=1e-6)


def test_out_suffix_in_capitals_writes_that_format(capsys, here) -> None:
    code, _, err = cli(capsys, "verify", "m.prism", "-p", "P=? [F<=1 x=1]", "--policy", "p.py:pi", "--out", "V.NPZ")
    assert code == 0, err
    with np.load(here / "V.NPZ") as data:  # a zip archive, not CSV text
        values = dict(zip(map(tuple, data["valuations"].tolist()), data["values"].tolist(), strict=True))
    assert list(data_variables(here / "V.NPZ")) == ["x", "y"]
    assert values[(0, 0)] == pytest.approx(0.9 * 0.5)  # up (0.9) succeeds (0.5) in one step


def data_variables(path: Path) -> list[str]:
    with np.load(path) as data:
        return [str(v) for v in data["variables"]]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("adir.csv", r"--out adir.csv: is a directory"),
        ("full.csv", r"--out full.csv: /dev is a system file system"),  # a symlink to /dev/full
        ("m.prism/x.csv", r"--out m.prism/x.csv: (a parent of the file is not a directory|m.prism is not a directory)"),
        ("/proc/self/x.csv", r"--out /proc/self/x.csv: /proc is a system file system"),
        ("/sys/x.csv", r"--out /sys/x.csv: /sys is a system file system"),
    ],
    ids=["directory", "link-to-dev-full", "parent-is-a-file", "proc", "sys"],
)
def test_bad_out_targets_exit_2_with_one_line(capsys, here, target: str, expected: str) -> None:
    (here / "adir.csv").mkdir()
    (here / "full.csv").symlink_to("/dev/full")
    code, _, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--out", target, "--force")
    assert code == 2 and re.search(expected, one_line(err)), err


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_directory(capsys, here) -> None:
    (here / "ro").mkdir(mode=0o500)
    code, _, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--out", "ro/v.json")
    assert code == 2 and "permission denied" in one_line(err)


def test_a_full_disk_leaves_no_truncated_file(capsys, here, monkeypatch) -> None:
    """The disk fills up halfway through the CSV (ENOSPC): exit 2, and no truncated file, no temporary left."""
    import errno

    real = np.savetxt

    def half_then_full(fname, X, *args, **kwargs):
        real(fname, X[: len(X) // 2], *args, **kwargs)  # half the rows reach the disk ...
        raise OSError(errno.ENOSPC, "No space left on device")  # ... then it is full

    monkeypatch.setattr(np, "savetxt", half_then_full)
    code, _, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--out", "all.csv")
    assert code == 2
    assert one_line(err) == "error: --out all.csv: cannot write the file (no space left on device); nothing was written"
    assert sorted(p.name for p in here.iterdir()) == ["m.prism", "p.py"]


def test_train_out_is_checked_before_training_and_never_overwritten(capsys, here) -> None:
    (here / "x.onnx").write_text("mine")
    code, _, err = cli(capsys, "train", "running-example-v1", "--steps", "64", "--out", "x.onnx")
    assert code == 2 and "--out x.onnx: file exists; pass --force to overwrite it" in one_line(err)
    assert (here / "x.onnx").read_text() == "mine"
    code, _, err = cli(capsys, "train", "running-example-v1", "--steps", "64", "--out", "x.zip")
    assert code == 2 and "train writes an ONNX policy" in one_line(err)


def test_train_with_force_replaces_the_file(capsys, here) -> None:
    pytest.importorskip("torch")
    (here / "x.onnx").write_text("mine")
    code, _, err = cli(capsys, "train", "running-example-v1", "--steps", "2048", "--hidden", "4", "--out", "x.onnx", "--force")
    assert code == 0, err
    from rlverify.policies import load_policy

    assert load_policy("x.onnx").training["benchmark"] == "running-example-v1"  # the new file, complete


# ---------------------------------------------------------------------------------------------------
# 2. generated model files: never under a predictable name in the shared temp dir


def test_benchmark_model_files_are_private(tmp_path) -> None:
    import hashlib
    import stat
    import tempfile

    from rlverify.benchmarks import make

    bench = make("running-example-v1")
    digest = hashlib.sha256(bench.source.encode()).hexdigest()[:16]
    victim = tmp_path / "victim"
    victim.write_text("precious")
    shared = Path(tempfile.gettempdir())
    planted = [
        shared / f"rlverify-running-example-v1-{digest}.prism",
        shared / f"rlverify-running-example-v1-{digest}.{digest}.{os.getpid()}.tmp",
    ]
    for link in planted:
        if not link.is_symlink() and not link.exists():
            link.symlink_to(victim)
    try:
        path = bench.model_file()
        bench.model()
    finally:
        for link in planted:
            if link.is_symlink() and link.resolve() == victim:
                link.unlink()
    assert victim.read_text() == "precious"
    assert path.read_text() == bench.source
    directory = path.parent
    assert directory != shared and directory.parent == shared
    st = os.stat(directory)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()


# ---------------------------------------------------------------------------------------------------
# 3. user text is text: Rich markup and TeX in names


def test_markup_in_paths_is_shown_verbatim(capsys, here) -> None:
    model, policy = "a[bold]/m[/]x.prism", "p[bold]y.py:pi"  # directories a[bold] and a[bold]/m[, file ]x.prism
    (here / model).parent.mkdir(parents=True)
    (here / model).write_text(MODEL)
    (here / "p[bold]y.py").write_text(POLICY)
    for command in (["verify"], ["simulate", "--runs", "50"], ["robust", "--no-attack"]):
        code, out, err = cli(capsys, command[0], model, "-p", 'P=? [F<=3 "top"]', "--policy", policy, *command[1:])
        assert code == 0, err
        assert model in out and policy in out, out
    code, out, err = cli(
        capsys, "map", model, "-p", 'P=? [F<=3 "top"]', "--policy", policy, "--map", "x,y", "--optimum", "max"
    )
    assert code == 0 and model in out and policy in out, err
    code, out, err = cli(capsys, "inspect", model)
    assert code == 0 and model in out, err


def test_markup_in_errors_and_warnings_is_shown_verbatim(capsys, here) -> None:
    code, _, err = cli(capsys, "verify", "[red]no[/]such.prism", "-p", "P=? [F x=3]", "--mode", "monolithic")
    assert code == 2 and one_line(err) == "error: [red]no[/]such.prism: model file not found"


def test_control_characters_are_shown_escaped(capsys, here) -> None:
    code, _, err = cli(capsys, "verify", "\x1b[31mred.prism", "-p", "P=? [F x=3]", "--mode", "monolithic")
    assert code == 2 and one_line(err) == "error: \\x1b[31mred.prism: model file not found"


def test_tex_in_names_does_not_break_figures(capsys, here) -> None:
    name = "r$\\frac{x$.prism"  # a broken TeX formula in the file name, which is in the figure's title
    (here / name).write_text(MODEL)
    code, _, err = cli(
        capsys,
        "map",
        name,
        "-p",
        'P=? [F<=3 "top"]',
        "--policy",
        "p.py:pi",
        "--map",
        "x,y",
        "--optimum",
        "max",
        "--out",
        "$m$.png",
    )
    assert code == 0, err
    assert (here / "$m$.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tex_and_markup_in_a_declared_system(capsys, here) -> None:
    from rlverify.policies import MLP, save_mlp_onnx

    (here / "sys[").mkdir()
    (here / "sys[/].py").write_text(
        'SYSTEM = {"name": "s$\\\\frac[/]y$", "variables": ["x", "v"], "domain": {"x": [-2, 2], "v": [-1, 1]},\n'
        '  "actions": ["left", "right"], "initial": {"default": {"x": [-0.5, 0.5], "v": [-0.5, 0.5]}},\n'
        '  "unsafe": ["x >= 1.5"], "observation": {"x": "x", "v": "v"}, "horizon": 1,\n'
        '  "pieces": [{"when": "v <= 0", "next": {"left": {"x": "x + 0.1*v", "v": "v"},\n'
        '                                       "right": {"x": "x + 0.1*v + 0.1", "v": "v"}}},\n'
        '             {"when": "v >= 0", "next": {"left": {"x": "x + 0.1*v", "v": "v"},\n'
        '                                       "right": {"x": "x + 0.1*v + 0.1", "v": "v"}}}]}\n'
    )
    save_mlp_onnx(here / "c.onnx", MLP.random([2, 4, 2], seed=0), features=["x", "v"], actions=["left", "right"])
    code, out, err = cli(capsys, "abstract", "sys[/].py:SYSTEM", "--policy", "c.onnx", "--out", "a.png")
    assert code == 0, err
    assert "s$\\frac[/]y$" in out and (here / "a.png").read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------------------------------
# 4. options: values starting with '-', numbers that are not finite or do not fit, duplicates


def test_option_values_may_start_with_a_dash(capsys, here) -> None:
    code, out, err = cli(
        capsys,
        "simulate",
        "m.prism",
        "-p",
        'P=? [F "top"]',
        "--policy",
        "p.py:pi",
        "--rare",
        "splitting",
        "--importance",
        "-abs(x-3)",
        "--effort",
        "20",
        "--repetitions",
        "2",
    )
    assert code == 0, err
    assert "-abs(x-3)" in out
    code, _, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--mode", "monolithic", "--max-memory", "-5G")
    assert code == 2 and "--max-memory: expected a positive size" in one_line(err) and "-5G" in err


def test_verbose_after_the_subcommand(capsys, here) -> None:
    code, out, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--mode", "monolithic", "--json", "-v")
    assert code == 0, err
    assert json.loads(out)["result"]["pmax"] == pytest.approx(1.0, abs=1e-6)


CONSTANT_MODEL = MODEL.replace("mdp\n", "mdp\nconst int N;\nconst double q;\n").replace("[0..3]", "[0..N]")


@pytest.mark.parametrize(
    ("constants", "expected"),
    [
        ("N=99999999999999999999,q=0.5", "99999999999999999999 does not fit a 64-bit integer"),
        ("N=3,q=nan", "nan is not a finite number"),
        ("N=3,q=1e999", "1e999 is not a finite number"),
        ("N=3,N=4,q=0.5", "'N' is given twice (N=3 and N=4)"),
        ("=3,q=0.5", "expected NAME=VALUE, got '=3'"),
    ],
    ids=["int-overflow", "nan", "inf", "duplicate", "no-name"],
)
def test_bad_constants(capsys, here, constants: str, expected: str) -> None:
    (here / "c.prism").write_text(CONSTANT_MODEL)
    code, _, err = cli(capsys, "verify", "c.prism", "-c", constants, "-p", "P=? [F x=3]", "--mode", "monolithic")
    line = one_line(err)
    assert code == 2 and expected in line and "pybind" not in line and "Invoked with" not in line


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_benchmark_parameters(capsys, value: str) -> None:
    code, _, err = cli(capsys, "verify", "avoid-v1", "-c", f"slickness={value}", "-p", "P=? [F x=1]", "--mode", "monolithic")
    line = one_line(err)
    assert code == 2 and f"avoid-v1: parameter slickness={float(value)} must be a finite number" in line
    assert "/tmp" not in line and ".prism" not in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["verify", "m.prism", "--mode", "monolithic", "--precision", "nan"],
            "--precision: expected a finite number, got 'nan'",
        ),
        (["simulate", "m.prism", "--policy", "p.py:pi", "--epsilon", "inf"], "--epsilon: expected a finite number, got 'inf'"),
        (["simulate", "m.prism", "--policy", "p.py:pi", "--delta", "-nan"], "--delta: expected a finite number, got '-nan'"),
        (
            ["verify", "m.prism", "--mode", "monolithic", "--max-states", "99999999999999999999"],
            "--max-states: 99999999999999999999 is out of range (a 64-bit integer)",
        ),
        (
            ["simulate", "m.prism", "--policy", "p.py:pi", "--seed", "-99999999999999999999"],
            "--seed: -99999999999999999999 is out of range",
        ),
    ],
    ids=["precision-nan", "epsilon-inf", "delta-negative-nan", "max-states-overflow", "seed-overflow"],
)
def test_numeric_options_are_finite_and_fit(capsys, here, args: list[str], expected: str) -> None:
    code, _, err = cli(capsys, *args, "-p", 'P=? [F "top"]')
    assert code == 2 and expected in err and "Traceback" not in err, err


def test_env_kwargs_numbers_are_finite() -> None:
    from rlverify.errors import OptionError
    from rlverify.models.gymnasium import parse_env_kwargs

    for text in ("x=NaN", "x=Infinity", "x=1e999", '{"x": NaN}', '{"x": [1, -Infinity]}'):
        with pytest.raises(OptionError, match="is not a finite number"):
            parse_env_kwargs(text)
    with pytest.raises(OptionError, match="'x' is given twice"):
        parse_env_kwargs("x=1,x=2")
    with pytest.raises(OptionError, match="'x' is given twice"):
        parse_env_kwargs('{"x": 1, "x": 2}')
    assert parse_env_kwargs("x=1.5,y=true") == {"x": 1.5, "y": True}


# ---------------------------------------------------------------------------------------------------
# 5./6. files that are not what they claim to be; exceptions that only the input causes


@pytest.mark.parametrize(
    ("kind", "make", "expected"),
    [
        ("model", lambda d: (d / "b.prism").write_bytes(b"mdp\n\xb1\xb1" + bytes(range(256))), r"b.prism: not a PRISM file"),
        ("model", lambda d: (d / "b.prism").write_bytes(b""), r"b.prism: PRISM syntax error"),
        ("model", lambda d: (d / "b.prism").mkdir(), r"b.prism: is a directory, not a model file"),
        ("policy", lambda d: (d / "b.json").write_bytes(bytes(range(256)) * 4), r"b.json: not a JSON text file.*not UTF-8"),
        ("policy", lambda d: (d / "b.json").write_text("[" * 100_000 + "]" * 100_000), r"nested too deeply"),
        ("policy", lambda d: (d / "b.json").write_bytes(b""), r"b.json: invalid JSON"),
        ("template", lambda d: (d / "b.csv").write_bytes(bytes(range(256)) * 4), r"b.csv: not a text file"),
        ("template", lambda d: (d / "b.csv").write_bytes(b""), r"b.csv: expected a matrix"),
        ("template", lambda d: (d / "b.csv").write_text("1,nan\n0,1\n"), r"b.csv: every direction must be finite"),
        ("template", lambda d: (d / "b.csv").mkdir(), r"b.csv: template file not found"),
    ],
    ids=[
        "binary-model",
        "empty-model",
        "directory-model",
        "binary-policy",
        "deep-policy",
        "empty-policy",
        "binary-template",
        "empty-template",
        "nan-template",
        "directory-template",
    ],
)
def test_garbage_files_exit_2_with_one_line(capsys, here, kind: str, make, expected: str) -> None:
    make(here)
    if kind == "model":
        args = ["verify", "b.prism", "-p", "P=? [F x=3]", "--mode", "monolithic"]
    elif kind == "policy":
        args = ["verify", "m.prism", "-p", "P=? [F x=3]", "--policy", "b.json"]
    else:
        args = ["abstract", "bouncing-ball-v1", "--domain", "template", "--template", "b.csv"]
    code, _, err = cli(capsys, *args)
    assert code == 2 and re.search(expected, one_line(err)), err


def test_an_internal_error_stays_exit_1_with_the_trace(capsys, here, monkeypatch) -> None:
    import rlverify.exact.verify as engine  # the CLI imports the engine's function when it runs

    def broken(*args, **kwargs):
        raise OSError("no file involved")  # an OSError without a file name is no input problem

    monkeypatch.setattr(engine, "verify_exact", broken)
    code, _, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--mode", "monolithic")
    assert code == 1 and "internal error" in err and "Traceback" in err and "no file involved" in err


# ---------------------------------------------------------------------------------------------------
# generated hostile names, through the CLI

#: fragments that broke, or could break, a printer or a figure: Rich markup, emoji codes, TeX, format
#: braces, terminal escapes, right-to-left and wide characters
FRAGMENTS = [
    "[/]",
    "[bold]",
    "[red]x[/red]",
    "[link=file:///etc]",
    ":smile:",
    "$x$",
    "$\\frac",
    "\\",
    "{}",
    "{0}",
    "%s",
    "\x1b[31m",
    "\x07",
    "\u202e",
    "\u00e9",
    "\u6f22",
    "\U0001f600",
    " ",
    "-",
    "'",
    '"',
    "*",
    "..",
    "#",
]
NAMES = (
    st.lists(
        st.one_of(
            st.sampled_from(FRAGMENTS),
            st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00\n\r\t:"), max_size=3),
        ),
        min_size=1,
        max_size=3,
    )
    .map("".join)
    .filter(lambda s: 0 < len(s.encode()) < 60 and ".." not in s.split("/") and not s.endswith("/"))
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES)
def test_generated_hostile_names_are_printed_verbatim(capsys, here, name: str) -> None:
    """A model and a policy file named ``name`` (a ``/`` in it makes directories): verify and inspect exit 0
    and show both names as written (control characters as escapes); a refusal exits 2 with one line naming
    the file."""
    from rlverify.cli.console import shown

    model, policy = Path(f"{name}.prism"), Path(f"{name}.py")
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_text(MODEL)
    policy.write_text(POLICY)
    try:
        runs = [
            ("verify", f"./{model}", "-p", "P=? [F<=1 x=1]", "--policy", f"./{policy}:pi"),
            ("inspect", f"./{model}", "--no-build"),
        ]
        for args in runs:
            code, out, err = cli(capsys, *args)
            assert code in (0, 2), err
            if code == 2:
                assert shown(model) in one_line(err) or shown(policy) in one_line(err)
                continue
            assert shown(model) in out, out  # the path as the CLI normalises it ('./a' is shown 'a')
            if args[0] == "verify":
                assert shown(f"{policy}:pi") in out, out
                assert re.search(r"value\s*│\s*0\.45\b", out), out  # up (0.9) succeeds (0.5) within one step
    finally:
        model.unlink()
        policy.unlink()


def test_a_model_name_cannot_inject_code_into_a_policy_template(capsys, here) -> None:
    """The template's docstring names the model: a name with triple quotes stays inside the docstring."""
    import ast

    name = 'x"""\nimport os; PWNED = 1\n""".prism'
    (here / name).write_text(MODEL)
    code, _, err = cli(capsys, "inspect", name, "--policy-template", "t.py")
    assert code == 0, err
    tree = ast.parse((here / "t.py").read_text())
    assert name in (ast.get_docstring(tree) or "")
    assigned = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets]
    assert "PWNED" not in assigned and assigned[:2] == ["FEATURES", "ACTIONS"]
    code, _, err = cli(capsys, "inspect", name, "--policy-template", "t.py")
    assert code == 2 and "--policy-template t.py: file exists; pass --force to overwrite it" in one_line(err)


# --- the red team's second round (issue 23's session of 2026-11-27) -------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--precision=nan"], "expected a finite number"),
        (["verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--precision=1e-400"], "rounds to 0"),
        (["verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--policy-timeout=1e-400"], "rounds to 0"),
        (["verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--max-states="], "expected an integer"),
        (["verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--mode", "fast"], "invalid choice"),
        (["verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--max-memory=1.5"], "whole number of bytes"),
        (["verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--max-memory=0.0001K"], "whole number"),
        (["verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--max-work=1.5"], "whole number"),
        (["simulate", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--runs=inf"], "--runs"),
        (["simulate", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--alpha=-1"], "alpha must be in"),
        (["simulate", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--indifference=0"], "indifference"),
        (["simulate", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--epsilon=-1"], "epsilon"),
        (["verify", "m.prism", "-p", 'R=? [F "top"]', "--policy", "p.py:pi"], "the model defines no reward model"),
    ],
)
def test_a_bad_value_is_one_line_without_the_usage(capsys, here, args, words) -> None:
    """A bad option value printed argparse's 17-22 lines of usage first; an option never used (--alpha without
    --sprt) was not checked; --policy-timeout 1e-400 became 0, "no limit"; --max-memory 1.5 became 1 byte."""
    code, _, err = cli(capsys, *args)
    assert code == 2 and words in one_line(err), err
    assert not err.startswith("\n") and "usage:" not in err


def test_a_usage_error_still_shows_the_usage(capsys, here) -> None:
    code, _, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--bogus")
    assert code == 2 and err.startswith("usage: rlverify verify") and "unrecognized arguments: --bogus" in err


def test_simulate_writes_nothing_to_stderr_off_a_terminal(capsys, here) -> None:
    """A transient progress bar, disabled nowhere, wrote an empty line when it stopped: errors were 2 lines."""
    code, out, err = cli(capsys, "simulate", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--runs", "200")
    assert code == 0 and "estimate" in out and err == "", repr(err)


def test_a_newline_in_user_text_stays_in_its_line(capsys, here) -> None:
    code, _, err = cli(capsys, "inspect", "no\nsuch.prism")
    assert code == 2 and one_line(err) == "error: no\\nsuch.prism: model file not found"
    from tests.models.test_file_edges import _edge, _jani

    jani = _jani([_edge(1, action="go\nnext")], actions=("go\nnext",), top=1)
    Path("nl.jani").write_text(json.dumps(jani))
    code, out, err = cli(capsys, "inspect", "nl.jani")
    assert code == 0, err
    row = next(line for line in out.splitlines() if "aut:1" in line)
    assert "go\\nnext" in row and not any(line.strip(" │").startswith("next") for line in out.splitlines())


def test_a_dangling_link_is_named_as_what_is_there(capsys, here) -> None:
    os.symlink("/nonexistent/dangling.json", "dangle.json")
    code, _, err = cli(capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--out", "dangle.json")
    assert code == 2 and "a symbolic link (to a missing file) is there; pass --force" in one_line(err)
    assert os.readlink("dangle.json") == "/nonexistent/dangling.json"
    code, _, err = cli(
        capsys, "verify", "m.prism", "-p", 'P=? [F "top"]', "--policy", "p.py:pi", "--out", "dangle.json", "--force"
    )
    assert code == 0 and not os.path.islink("dangle.json") and json.loads(Path("dangle.json").read_text())
