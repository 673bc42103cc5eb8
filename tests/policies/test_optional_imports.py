"""One way to import an optional dependency: rlverify.errors.require, whose error names the extra to install."""

from __future__ import annotations

import builtins
import json
import re
import sys
from pathlib import Path

import pytest

from rlverify.errors import DependencyNotInstalled, require
from rlverify.policies import load_policy

POLICIES = Path(__file__).resolve().parents[2] / "src" / "rlverify" / "policies"
ROOT = Path(__file__).resolve().parents[2]


def test_require_gives_the_module():
    assert require("json", "torch") is json


def test_a_missing_package_names_the_extra():
    with pytest.raises(DependencyNotInstalled) as err:
        require("rlverify_no_such_package.sub", "sb3", purpose="a thing")
    assert str(err.value) == (
        "a thing needs the Python package 'rlverify_no_such_package', which is not installed: pip install 'rlverify[sb3]'"
    )


def test_a_package_that_cannot_import_its_own_dependency_says_which(tmp_path, monkeypatch):
    (tmp_path / "rlverify_half_installed").mkdir()
    (tmp_path / "rlverify_half_installed" / "__init__.py").write_text("import rlverify_its_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(DependencyNotInstalled) as err:
        require("rlverify_half_installed", "torch")
    assert str(err.value) == (
        "this feature needs the Python package 'rlverify_half_installed', which cannot be imported "
        "(ModuleNotFoundError: No module named 'rlverify_its_missing_dependency'): "
        "pip install 'rlverify[torch]'"
    )


def _without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("no torch", name="torch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)


def test_an_sb3_zip_loaded_by_sb3_without_torch_names_the_sb3_extra(monkeypatch):
    zip_file = ROOT / "examples" / "gymnasium" / "ppo_frozenlake.zip"
    _without_torch(monkeypatch)
    # read without running code, the zip needs no torch (tests/policies/test_torch_file.py holds its values) ...
    assert load_policy(str(zip_file), features=["s"], actions=["left", "down", "right", "up"]).algorithm == "PPO"
    expected = (
        "a Stable-Baselines3 policy needs the Python package 'torch', which is not installed: pip install 'rlverify[sb3]'"
    )
    with pytest.raises(DependencyNotInstalled, match=re.escape(expected)):  # ... SB3's own loader does
        load_policy(str(zip_file), features=["s"], actions=["left", "down", "right", "up"], trust_code=True)


def test_policies_import_optional_dependencies_only_through_require():
    # the other ways (a local _import, catching ImportError, writing the extra's pip line) are gone from policies/
    for path in POLICIES.glob("*.py"):
        text = path.read_text()
        for other in ("ImportError", "DependencyNotInstalled", "pip install 'rlverify[", "import_module"):
            assert other not in text, f"{path.name} uses {other}: import optional dependencies with rlverify.errors.require"
