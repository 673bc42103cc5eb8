"""The package follows the product: models/policies at the bottom, the engines on them, the rest above.

Every import in src/rlverify (module level and inside functions) is read with ``ast``; no edge may
point up the layers, and only models/, exact/ and abstraction/ may import stormpy.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rlverify"

BOTTOM = {"models", "policies"}
SHARED = {"backends", "confidence"}  # root modules every engine may use (like errors, results): they import no engine
#: root modules below everything, importable from models/ and policies/ up: they import only rlverify.errors
FOUNDATION = {"errors", "files", "lazy", "imports", "arrays", "choices"}
ENGINES = {"exact", "abstraction", "statistical"}
ABOVE = {"benchmarks", "gym", "training", "cli", "resolve", "targets", "report", "crosscheck", "experiments", "sb3"}
STORM_ALLOWED = {"models", "exact", "abstraction"}


def imports() -> list[tuple[str, str, int]]:
    """(package of the importing module, imported module, line) for every import in the package."""
    out = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        package = rel.parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [(package, a.name, node.lineno, str(rel)) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.append((package, node.module, node.lineno, str(rel)))
    return out


def target_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "rlverify" and len(parts) > 1 else None


def test_the_scan_sees_imports():
    found = imports()
    assert any(m == "stormpy" for _, m, _, _ in found)  # the test would notice a stormpy import
    assert any(target_package(m) == "models" for _, m, _, _ in found)


@pytest.mark.parametrize(
    "layer,forbidden",
    [
        (BOTTOM, ENGINES | ABOVE),
        (ENGINES, ABOVE),
        (SHARED, ENGINES | ABOVE),
    ],
    ids=["models-policies-import-no-engine", "engines-import-nothing-above", "backends-import-no-engine"],
)
def test_no_edge_points_up(layer, forbidden):
    bad = [f"{file}:{line} imports {m}" for pkg, m, line, file in imports() if pkg in layer and target_package(m) in forbidden]
    assert not bad, "\n".join(bad)


def test_foundation_modules_import_only_errors():
    bad = [
        f"{file}:{line} imports {m}"
        for pkg, m, line, file in imports()
        if pkg in FOUNDATION and target_package(m) is not None and m != "rlverify.errors"
    ]
    assert not bad, "\n".join(bad)


def test_engines_do_not_import_each_other_except_through_models():
    bad = [
        f"{file}:{line} imports {m}"
        for pkg, m, line, file in imports()
        if pkg in ENGINES and target_package(m) in ENGINES - {pkg}
    ]
    assert not bad, "\n".join(bad)


def test_only_models_exact_and_abstraction_touch_stormpy():
    bad = [
        f"{file}:{line} imports {m}"
        for pkg, m, line, file in imports()
        if m.split(".")[0] == "stormpy" and pkg not in STORM_ALLOWED
    ]
    assert not bad, "\n".join(bad)
