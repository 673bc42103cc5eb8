"""The code's shape, held as tests (issue 41): modules that do one job stay small and simple, choices are typed,
and the public entry points say what they take.

- radon's cyclomatic complexity: at most 2.5 functions of rank C or worse (complexity > 10) per 1,000 lines of
  ``src/``, none above 25 (Gymnasium 2.4, SB3 2.0, momba 1.1 per 1,000 lines when this was written);
- no module over 800 lines;
- no kind compared as a string (``kind ==``): targets, formats and choices are types and enums;
- no ``Any`` in a public entry point's signature (an engine's, ``resolve``'s, the package's): Storm's and
  Gymnasium's untyped objects are named by aliases.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rlverify"
SOURCES = sorted(p for p in SRC.rglob("*.py") if "benchmarks/data" not in p.as_posix())
MAX_MODULE_LINES = 800
MAX_COMPLEX_PER_KLOC = 2.5
MAX_COMPLEXITY = 25


def _functions(blocks):
    """radon's blocks (functions, classes and their methods, as ``radon cc`` lists them) without the classes."""
    return [b for b in blocks if not hasattr(b, "methods")]


def complexities() -> tuple[int, list[tuple[int, str, str]]]:
    """(lines of src/, [(complexity, file, function) for every function above 10])."""
    radon = pytest.importorskip("radon.complexity")
    lines, complex_ = 0, []
    for path in SOURCES:
        text = path.read_text()
        lines += text.count("\n")
        rel = path.relative_to(SRC).as_posix()
        complex_ += [(f.complexity, rel, f.name) for f in _functions(radon.cc_visit(text)) if f.complexity > 10]
    return lines, complex_


def test_complexity_counter_sees_a_complex_function():
    pytest.importorskip("radon.complexity")
    from radon.complexity import cc_visit

    body = "".join(f"        if x == {i}:\n            return {i}\n" for i in range(12))
    found = list(_functions(cc_visit("class A:\n    def f(self, x):\n" + body)))
    assert [f.name for f in found] == ["f"] and found[0].complexity == 13


def test_few_complex_functions_and_none_very_complex():
    lines, complex_ = complexities()
    per_kloc = 1000 * len(complex_) / lines
    worst = sorted(complex_, reverse=True)
    assert per_kloc <= MAX_COMPLEX_PER_KLOC, (
        f"{len(complex_)} functions of complexity > 10 in {lines:,} lines: {per_kloc:.2f} per 1,000 lines "
        f"(at most {MAX_COMPLEX_PER_KLOC}); the most complex: {worst[:10]}"
    )
    too = [c for c in worst if c[0] > MAX_COMPLEXITY]
    assert not too, f"functions of complexity > {MAX_COMPLEXITY}: {too}"


def test_no_module_over_800_lines():
    big = {p.relative_to(SRC).as_posix(): n for p in SOURCES if (n := p.read_text().count("\n")) > MAX_MODULE_LINES}
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"


def test_no_kind_compared_as_text():
    found = [
        f"{p.relative_to(SRC).as_posix()}:{i}: {line.strip()}"
        for p in SOURCES
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "kind ==" in line
    ]
    assert not found, "\n".join(found)


#: where the public entry points are: each module's ``__all__`` functions (the engines' packages export them)
ENTRY_MODULES = ["rlverify", "rlverify.exact", "rlverify.statistical", "rlverify.abstraction", "rlverify.resolve"]
ANY = re.compile(r"\bAny\b")


def entry_points() -> list[tuple[str, object]]:
    out = []
    for name in ENTRY_MODULES:
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for attr in exported:
            obj = getattr(module, attr)
            if not inspect.isfunction(obj):
                continue
            own = obj.__module__.startswith("rlverify") if hasattr(module, "__all__") else obj.__module__ == name
            if own:
                out.append((f"{name}.{attr}", obj))
    return out


def test_entry_points_are_found():
    names = {n for n, _ in entry_points()}
    assert {"rlverify.resolve.resolve", "rlverify.exact.verify_exact", "rlverify.statistical.verify_statistical"} <= names


@pytest.mark.parametrize("name,fn", entry_points(), ids=lambda v: v if isinstance(v, str) else "")
def test_entry_point_signature_names_no_any(name, fn):
    annotations = {k: str(v) for k, v in inspect.get_annotations(fn).items()}
    bad = {k: v for k, v in annotations.items() if ANY.search(v)}
    assert not bad, f"{name}: Any in its signature: {bad} (name the type, or an alias for an untyped library's object)"
