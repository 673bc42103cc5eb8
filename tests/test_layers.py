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


def module_graph() -> dict[str, set[str]]:
    """Module -> the rlverify modules it imports, at module level or in a function body, but not under
    ``if TYPE_CHECKING:`` (those never run). A package's own ``__init__`` and its submodules are not edges: a
    package that re-exports its submodules is not a circle."""
    modules = {}
    for path in SRC.rglob("*.py"):
        parts = ("rlverify", *path.relative_to(SRC).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}

    def walk(node: ast.AST, module: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for sub in child.orelse:
                    walk(sub, module)
                continue
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [f"{child.module}.{a.name}" for a in child.names]
                names = [n if n in modules else child.module for n in names]
            for name in names:
                target = owner(name) if name.startswith("rlverify") else None
                related = target is not None and (target.startswith(module + ".") or module.startswith(target + "."))
                if target is not None and target != module and not related:
                    graph[module].add(target)
            walk(child, module)

    for module, path in modules.items():
        walk(ast.parse(path.read_text(), str(path)), module)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    graph = module_graph()
    assert "rlverify.errors" in graph["rlverify.resolve"]  # the scan sees imports
    found = circles(graph)
    assert not found, "import circles (module level or in function bodies):\n" + "\n".join(" <-> ".join(c) for c in found)
