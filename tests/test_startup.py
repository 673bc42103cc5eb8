"""Start-up: ``import rlverify`` and the CLI's parser load no engine or heavy library; the lazy API stays complete.

Regression guards, not timings (``benchmarks/startup.py`` times the commands): each import runs in a fresh
interpreter, where ``sys.modules`` shows what it loaded. Every package's public names (``__all__``) resolve, are
listed by ``dir()`` and ``help()``, and are the objects its ``if TYPE_CHECKING:`` imports name for type checkers.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import pydoc
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
#: libraries no command loads before it needs them
HEAVY = ("numpy", "scipy", "stormpy", "onnxruntime", "onnx", "torch", "matplotlib", "ray", "highspy", "gymnasium", "rich")
#: every package whose __init__ exports lazily
PACKAGES = sorted(
    ".".join(p.parent.relative_to(SRC).parts)
    for p in SRC.joinpath("rlverify").rglob("__init__.py")
    if "lazy_exports(" in p.read_text()
)


def loaded_after(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter (this tree's src first); what it prints as JSON on its last line."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


HEAVY_LOADED = f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"


def test_the_packages_are_found():
    assert {"rlverify", "rlverify.exact", "rlverify.statistical", "rlverify.policies", "rlverify.models"} <= set(PACKAGES)


def test_importing_the_package_and_the_cli_loads_no_heavy_library():
    loaded = loaded_after(f"import json, sys, rlverify, rlverify.cli.main\n{HEAVY_LOADED}")
    assert loaded == []


def test_help_of_every_command_loads_no_heavy_library():
    # rlverify --help and each subcommand's --help: the whole parser is built and every help text formatted
    code = f"""
import contextlib, io, json, sys
from rlverify.cli.main import COMMANDS, main
for argv in [["--help"], *([c, "--help"] for c in COMMANDS)]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(argv)
{HEAVY_LOADED}
"""
    assert loaded_after(code) == []


def test_a_package_attribute_loads_only_its_module():
    loaded = loaded_after(f"import json, sys, rlverify\nrlverify.RlverifyError\nrlverify.statistical.METHODS\n{HEAVY_LOADED}")
    assert loaded == []  # errors.py and statistical/choices.py: no numpy


@pytest.mark.parametrize("package", PACKAGES)
def test_dir_lists_every_lazy_name_before_it_is_loaded(package):
    names = loaded_after(
        f"import json, importlib\nm = importlib.import_module({package!r})\n"
        "print(json.dumps([sorted(m.__all__), sorted(dir(m)), sorted(vars(m))]))"
    )
    public, listed, defined = (set(n) for n in names)
    assert public <= listed
    lazy = listed - defined  # what dir() shows that is not loaded yet: exactly the public names not loaded
    assert lazy == public - defined


def type_checking_imports(package: str) -> dict[str, str]:
    """name -> module, of the ``from M import name`` lines under ``if TYPE_CHECKING:`` in ``package``'s __init__."""
    init = SRC.joinpath(*package.split("."), "__init__.py")
    out: dict[str, str] = {}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                out.update({a.asname or a.name: stmt.module for a in stmt.names})
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_the_public_names_are_the_type_checkers_names_and_resolve(package):
    pkg = importlib.import_module(package)
    typed = type_checking_imports(package)
    for name in pkg.__all__:
        value = getattr(pkg, name)
        if name in typed:  # the object the type checker sees is the one a user gets
            assert value is getattr(importlib.import_module(typed[name]), name), name
        elif getattr(value, "__name__", "") != f"{package}.{name}":  # not a submodule: defined in the package itself
            assert getattr(value, "__module__", "") == package, name


def test_help_lists_the_lazy_api():
    import rlverify

    text = pydoc.render_doc(rlverify, renderer=pydoc.plaintext)
    for name in ("verify_exact", "verify_statistical", "verify_abstraction", "load_model", "load_policy", "ExactOptions"):
        assert name in text, name
    assert {"verify_statistical", "ExactOptions", "benchmarks", "models"} <= set(dir(rlverify))


def test_a_function_named_like_its_module_stays_the_function():
    # importing rlverify/exact/optimum.py binds the package's attribute "optimum": the function, as when eager
    import rlverify.exact
    import rlverify.exact.optimum
    import rlverify.statistical
    import rlverify.statistical.heatmap

    assert callable(rlverify.exact.optimum) and rlverify.exact.optimum.__module__ == "rlverify.exact.optimum"
    assert callable(rlverify.statistical.heatmap) and rlverify.statistical.heatmap.__name__ == "heatmap"
    from rlverify.exact import optimum

    assert optimum is rlverify.exact.optimum


def test_an_unknown_name_is_an_attribute_error():
    import rlverify

    with pytest.raises(AttributeError, match="module 'rlverify' has no attribute 'verify_exactly'"):
        _ = rlverify.verify_exactly


@pytest.mark.parametrize("command", ["verify", "simulate", "benchmarks", "reproduce"])
def test_the_parser_of_one_command_is_the_full_parsers(command):
    from rlverify.cli.main import _subparsers, build_parser

    full, one = build_parser(), build_parser(command)
    assert list(_subparsers(one).choices) == list(_subparsers(full).choices)  # every name, for argparse's messages
    assert _subparsers(one).choices[command].format_help() == _subparsers(full).choices[command].format_help()


def test_a_misspelt_command_is_refused_naming_the_commands(capsys):
    from rlverify.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["verfy", "running-example-v1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "invalid choice: 'verfy'" in err and "'verify'" in err and "'robust'" in err


def test_versions_are_the_package_metadatas():
    from importlib.metadata import version

    from rlverify.results import versions

    recorded = versions()
    assert {"rlverify", "numpy", "scipy", "stormpy"} <= set(recorded)
    assert recorded == {package: version(package) for package in recorded}


class _Dist:
    """A distribution whose metadata is ``text`` (and whose email-parsed version is ``parsed``)."""

    def __init__(self, text: str | None, parsed: str = "9.9") -> None:
        self.text, self.version = text, parsed

    def read_text(self, name: str) -> str | None:
        return self.text if name == "METADATA" else None


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Metadata-Version: 2.1\nName: x\nVersion: 1.2.3\n\nVersion: 7 (in the description)\n", "1.2.3"),
        ("Name: x\nversion:  4.5 \n", "4.5"),  # header names are case-insensitive
        ("Name: x\n\nVersion: 7\n", "9.9"),  # only a description mentions one: importlib's own reading
        (None, "9.9"),  # no METADATA file
    ],
    ids=["header", "lower-case", "description-only", "no-metadata"],
)
def test_a_version_is_read_from_the_metadata_header(text, expected):
    from rlverify.results import _version

    assert _version(_Dist(text)) == expected


def test_no_spinner_is_made_where_stderr_is_no_terminal(capsys):
    import threading

    from rlverify.cli.console import err_console, status

    assert not err_console.is_terminal  # pytest captures stderr
    before = threading.active_count()
    with status("verifying") as update:
        update("step 2")
        assert threading.active_count() == before  # Rich's spinner would run a refresh thread
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("verbose,level", [(False, "OFF"), (True, "WARN")])
def test_storms_log_level_is_set_when_stormpy_is_first_imported(verbose, level):
    code = f"""
import json, sys
from rlverify.models.numerics import set_storm_logging
set_storm_logging({verbose})
before = "stormpy" in sys.modules
import stormpy.developer as dev  # the submodule first: stormpy's own set-up runs before it, then the level
print(json.dumps([before, dev.get_log_level().name]))
"""
    assert loaded_after(code) == [False, level]


def test_a_command_without_storm_loads_neither_storm_nor_numpy():
    code = f"""
import contextlib, io, json, sys
from rlverify.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["benchmarks", "list"]) == 0
{HEAVY_LOADED}
"""
    assert loaded_after(code) == ["rich"]


@pytest.mark.parametrize("verbose", [False, True])
def test_storms_own_parse_error_log_shows_with_v_only(tmp_path, verbose):
    bad = tmp_path / "bad.prism"
    bad.write_text("mdp\nmodule m\n x : [0..1] init 0;\n [a] y=1 -> true;\nendmodule\n")
    argv = [*(["-v"] if verbose else []), "verify", str(bad), "-p", "P=? [F x=1]", "--mode", "monolithic"]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-m", "rlverify.cli.main", *argv], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and f"{bad}: PRISM syntax error: Parsing error at 4:5" in done.stderr
    assert ("SpiritErrorHandler" in done.stderr) is verbose and done.stdout == ""


def test_only_files_that_outlive_the_process_are_flushed_to_disk(tmp_path, monkeypatch):
    from rlverify import files

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    generated = files.write_text(files.private_temp_dir("models") / "m.prism", "dtmc\n", private=True)
    assert generated.read_text() == "dtmc\n" and synced == []  # removed at exit: no fsync (80 ms of a start-up)
    users = files.write_text(tmp_path / "out.json", "{}")
    assert users.read_text() == "{}" and len(synced) == 1


def test_every_result_type_is_in_the_top_level_api():
    # a notebook user types rlverify.<TAB>: every result a top-level function returns is there, for isinstance/hints
    import rlverify
    from rlverify import results

    defined = {n for n, v in vars(results).items() if isinstance(v, type) and issubclass(v, results.Result)}
    assert defined <= set(rlverify.__all__), defined - set(rlverify.__all__)
    assert {"Report", "Agreement", "StatisticalResult", "AbstractionResult"} <= set(rlverify.__all__)


@pytest.mark.parametrize("package", PACKAGES)
def test_dir_shows_the_api_not_the_init_modules_helpers(package):
    listed = set(loaded_after(f"import json, importlib\nprint(json.dumps(dir(importlib.import_module({package!r}))))"))
    assert not listed & {"Any", "TYPE_CHECKING", "annotations", "lazy_exports"}, package
    assert "__all__" in listed and "__doc__" in listed


def test_the_submodules_are_visible_to_type_checkers():
    # `import rlverify; rlverify.benchmarks.make(...)`: the type checker must know the lazily loaded submodules
    typed = type_checking_imports("rlverify")
    for name in ("abstraction", "benchmarks", "exact", "models", "policies", "statistical"):
        assert typed.get(name) == "rlverify", name


@pytest.mark.slow
def test_mypy_sees_the_lazy_api_with_its_types(tmp_path):
    script = tmp_path / "use.py"
    script.write_text(
        "import rlverify\n"
        "from rlverify.statistical import StatisticalOptions\n"
        "m = rlverify.benchmarks.make('running-example-v1')\n"
        "r = rlverify.verify_statistical(m.load_model(), 'P=? [F<=2 \"goal\"]', m.load_policy(), StatisticalOptions())\n"
        "reveal_type(r)\n"
        "reveal_type(rlverify.cross_check)\n"
        "reveal_type(rlverify.exact.risk_map)\n"
        "reveal_type(rlverify.verify_abstraction)\n"
    )
    mypy = Path(sys.executable).with_name("mypy")
    done = subprocess.run(
        [str(mypy), "--no-incremental", "--follow-imports=silent", "--ignore-missing-imports", str(script)],
        env={**os.environ, "MYPYPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    out = done.stdout
    assert done.returncode == 0, out
    revealed = [line.split("Revealed type is ", 1)[1] for line in out.splitlines() if "Revealed type is" in line]
    assert revealed[0] == '"rlverify.results.statistical.StatisticalResult"'
    assert revealed[1].endswith('-> rlverify.crosscheck.Agreement"')
    assert revealed[2].endswith('-> rlverify.results.maps.RiskMap"')
    assert revealed[3].endswith('-> rlverify.results.abstraction.AbstractionResult"')


NUMPY_EXTRAS = ("f2py", "testing", "ma", "polynomial", "matlib", "ctypeslib")
EXTRAS_LOADED = f"print(json.dumps(sorted(m for m in sys.modules if m in {[f'numpy.{n}' for n in NUMPY_EXTRAS]!r})))"


def test_scipy_sparse_after_rlverify_loads_none_of_numpys_test_and_build_tools():
    # without rlverify scipy's array-API layer imports them all (0.13 s): the comparison shows the test can fail
    assert loaded_after(f"import json, sys, scipy.sparse\n{EXTRAS_LOADED}") != []
    assert loaded_after(f"import json, sys, rlverify, scipy.sparse\n{EXTRAS_LOADED}") == []


def test_scipys_numpy_copy_still_reaches_numpys_extras_and_is_otherwise_unchanged():
    code = """
import json, sys{first}
import numpy, scipy.sparse
from scipy._lib._array_api import np_compat
extras = {{n: getattr(np_compat, n) is getattr(numpy, n) for n in ("f2py", "testing", "ma", "polynomial", "ctypeslib")}}
extras["matlib"] = hasattr(np_compat, "matlib")  # numpy lists no matlib: the copy never had it
try:
    np_compat.no_such_name
    missing = "found"
except AttributeError as e:
    missing = str(e)
names = sorted(n for n in vars(np_compat) if not n.startswith("_"))
print(json.dumps([extras, missing, names, "testing" in numpy.__all__, "f2py" in dir(numpy)]))
"""
    plain = loaded_after(code.format(first=""))
    hooked = loaded_after(code.format(first=", rlverify"))
    reached = {**dict.fromkeys(["f2py", "testing", "ma", "polynomial", "ctypeslib"], True), "matlib": False}
    assert hooked[0] == plain[0] == reached
    assert "no attribute 'no_such_name'" in hooked[1]
    assert set(hooked[2]) == set(plain[2]) - set(NUMPY_EXTRAS)  # the same copy but for the extras, reached lazily
    assert hooked[3:] == [True, True]  # numpy's own namespace is restored


def test_a_failing_import_under_a_hook_is_undone_and_still_fails(tmp_path):
    tmp_path.joinpath("broken_mod.py").write_text("raise RuntimeError('broken on purpose')\n")
    code = f"""
import json, sys
sys.path.insert(0, {str(tmp_path)!r})
from rlverify.imports import _Around
log = []
hook = _Around(
    "broken_mod", lambda: log.append("before") or 7, lambda m, s: log.append("after"), lambda s: log.append(f"undo {{s}}")
)
sys.meta_path.insert(0, hook)
try:
    import broken_mod
except RuntimeError as e:
    log.append(str(e))
print(json.dumps(log))
"""
    assert loaded_after(code) == ["before", "undo 7", "broken on purpose"]


def test_metadata_directories_are_found_as_importlib_metadata_finds_them(tmp_path, monkeypatch):
    """The directory scan that spares every command importlib.metadata's imports agrees with importlib.metadata on
    normalised names, the first entry along ``sys.path`` winning, egg-info directories and absent packages."""
    import importlib.metadata as md

    from rlverify.results import _metadata_directories, _MetadataDirectory, _version

    first, second = tmp_path / "first", tmp_path / "second"
    made = {
        first / "Foo_Bar-1.2.dist-info": "Foo-Bar",
        second / "foo_bar-9.9.dist-info": "foo-bar",
        second / "zope.interface-3.0.egg-info": "zope.interface",
        second / "Other-0.1.dist-info": "Other",
    }
    for directory, name in made.items():
        directory.mkdir(parents=True)
        version = directory.name.rpartition(".")[0].partition("-")[2]
        meta = "METADATA" if directory.name.endswith("dist-info") else "PKG-INFO"
        (directory / meta).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody\n")
    monkeypatch.setattr("sys.path", [str(tmp_path / "missing"), str(first), str(second)])
    asked = ("foo.bar", "zope-interface", "absent")
    found = _metadata_directories(asked)
    assert set(found) == {"foo.bar", "zope-interface"}
    for package in ("foo.bar", "zope-interface"):
        assert _version(_MetadataDirectory(found[package])) == md.version(package)
    assert md.version("foo.bar") == "1.2"  # the first along sys.path, as the scan found
    with pytest.raises(md.PackageNotFoundError):
        md.version("absent")


def test_a_command_does_not_import_importlib_metadata():
    """Recording the versions reads the metadata directories directly (importlib.metadata costs ~20 ms of imports)."""
    import subprocess
    import sys

    code = (
        "import sys; from rlverify.results import versions; v = versions(); "
        "print('importlib.metadata' in sys.modules, sorted(v))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(None, 1)
    assert out[0] == "False" and "'numpy'" in out[1] and "'rlverify'" in out[1]


def test_the_cli_collects_cycles_coarsely_and_restores_the_callers_thresholds():
    """A small verification ran ~100 collections at Python's default thresholds (~30 ms of 0.7 s of start-up);
    under ``main`` a handful; the caller's thresholds come back after (main may run inside a notebook)."""
    code = (
        "import gc, json, io, contextlib\n"
        "from rlverify.cli.main import main\n"
        "gc.set_threshold(700, 10, 10); n = [0]\n"
        "gc.callbacks.append(lambda phase, info: n.__setitem__(0, n[0] + (phase == 'start')))\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    code = main(['verify', 'running-example-v1', '-p', 'reach-goal-2', '--json'])\n"
        "print(json.dumps([code, n[0], gc.get_threshold(), json.loads(out.getvalue())['result']['value']]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    code_, collections, thresholds, value = json.loads(done.stdout.strip().splitlines()[-1])
    # by hand (tests/test_running_example.py): 0.3 * (0.2 * 0.5 * 0.8 + 0.8)
    assert code_ == 0 and value == pytest.approx(0.3 * (0.2 * 0.5 * 0.8 + 0.8), abs=1e-12)
    assert collections <= 5, collections
    assert thresholds == [700, 10, 10]
