"""policies/ imports go one way: file formats at the bottom, then the weights, the contract, the adapters, the door
(as_policy, check_policy) and the loader on top; no policies module reaches for another's private names.

Every import in src/rlverify/policies (module level and inside functions, absolute and relative) is read with
``ast``, as tests/test_layers.py reads the package's layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

POLICIES = Path(__file__).resolve().parents[2] / "src" / "rlverify" / "policies"

#: The order of the policies modules, bottom first; a module may import only modules on lower levels (two modules
#: on one level are independent). ``__init__`` (the package) is above them all: no module imports it.
LEVELS: list[set[str]] = [
    # what a policy file declares (names, output kind, sidecars, ONNX metadata); PyTorch's file format read with
    # numpy (torch_file); what a policy is loaded with (settings: spec syntax, timeout, threads; no numpy, the CLI's
    # parser reads it); how a torch module is run (threads, eval mode)
    {"formats", "torch_file", "settings", "torch_runtime"},
    # the weights: MLP, reading and writing networks; raw outputs as probabilities; SB3 zips (read with torch_file)
    {"mlp", "outputs", "sb3zip"},
    {"base"},  # the contract: Policy, BasePolicy, PolicyWrapper, output validation, timeouts
    {"continuous"},  # policies over Box actions: ContinuousPolicy (act(obs, noise)), the numpy actor
    # ONNX, torch, SB3, callable, table, a user's object; a policy with fixed features, a decision tree (explain),
    # a policy under a shield
    {"adapters", "onnx_policy", "torch_policy", "sb3_policy", "ablated", "tree", "shielded", "normalization"},
    {"check"},  # as_policy, check_policy
    {"loading"},  # load_policy from a spec
]
LEVEL = {name: i for i, names in enumerate(LEVELS) for name in names}
TOP = len(LEVELS)  # the package itself


def policies_imports(source: str) -> list[tuple[str, str, int]]:
    """``(imported policies module, imported name or "", line)`` for every import of a policies module in
    ``source`` (a module of rlverify.policies), wherever it is written."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(_module(a.name), "", node.lineno) for a in node.names if _module(a.name) is not None]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from . import x, from .x import y
                module = "rlverify.policies" + (f".{module}" if module else "")
            target = _module(module)
            if target == "__init__":  # from rlverify.policies import x: the module x, or a name of the package
                out += [(a.name if a.name in LEVEL else "__init__", "", node.lineno) for a in node.names]
            elif target is not None:
                out += [(target, a.name, node.lineno) for a in node.names]
    return out


def _module(dotted: str) -> str | None:
    """The policies module a dotted name is (``__init__`` for the package), or None for anything else."""
    parts = dotted.split(".")
    if parts[:2] != ["rlverify", "policies"]:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def violations(module: str, source: str) -> list[str]:
    """Every import in ``source`` (the policies module ``module``) of a module on its level or above, or of another
    module's private name."""
    bad = []
    for target, name, line in policies_imports(source):
        if target == module:
            continue
        level = LEVEL.get(target, TOP)
        if level >= LEVEL[module]:
            bad.append(f"{module}.py:{line} imports {target} (level {level} >= its own {LEVEL[module]})")
        if name.startswith("_"):
            bad.append(f"{module}.py:{line} imports the private name {target}.{name}")
    return bad


def test_every_policies_module_has_a_place_in_the_order():
    modules = {p.stem for p in POLICIES.glob("*.py")} - {"__init__"}
    assert modules == set(LEVEL), f"place {sorted(modules - set(LEVEL))} in LEVELS (or drop {sorted(set(LEVEL) - modules)})"


@pytest.mark.parametrize("module", sorted(LEVEL))
def test_imports_go_down_only(module):
    assert not violations(module, (POLICIES / f"{module}.py").read_text())


@pytest.mark.parametrize(
    "source,expected",
    [
        ("from rlverify.policies.loading import load_policy", "imports loading (level 6 >= its own 1)"),
        ("def f():\n    from rlverify.policies.adapters import softmax", "imports adapters (level 4 >= its own 1)"),
        ("from . import base", "imports base (level 2 >= its own 1)"),
        ("from .check import as_policy", "imports check (level 5 >= its own 1)"),
        ("import rlverify.policies.base", "imports base (level 2 >= its own 1)"),
        ("from rlverify.policies import softmax", "imports __init__ (level 7 >= its own 1)"),
        ("from rlverify.policies.formats import _declared_value", "imports the private name formats._declared_value"),
    ],
    ids=["up", "inside-a-function", "relative-module", "relative-name", "plain-import", "the-package", "private"],
)
def test_the_check_sees_an_upward_or_private_import(source, expected):
    # mlp (level 1) importing what it must not: each way of writing it is seen
    assert any(expected in v for v in violations("mlp", source)), violations("mlp", source)


def test_the_check_lets_a_downward_import_pass():
    assert violations("loading", "from rlverify.policies.formats import declaration\nimport numpy") == []
    assert violations("adapters", "from rlverify.policies import sb3zip") == []
