"""Discrete (PRISM) benchmarks: a model source, named properties and reference policies."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rlverify.errors import BenchmarkPolicyError
from rlverify.models.symbolic import SymbolicModel, load_model
from rlverify.policies.base import Policy
from rlverify.policies.loading import load_policy


def data_path(relative: str) -> Path:
    """Absolute path of a file shipped in ``rlverify/benchmarks/data``."""
    return Path(str(resources.files("rlverify.benchmarks") / "data" / relative))


@dataclass(frozen=True)
class DiscreteBenchmark:
    """A PRISM benchmark, built: its source text, constants, properties and reference policies.

    Attributes:
        id: registry id.
        source: PRISM text (shipped file or generated).
        constants: constant definitions applied when loading.
        properties: name -> PCTL text.
        policies: name -> path of a shipped policy file.
    """

    id: str
    source: str
    constants: Mapping[str, Any] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    policies: Mapping[str, Path] = field(default_factory=dict)

    def model_file(self) -> Path:
        """The PRISM source as a file (content-addressed in the temp dir; never a user's file)."""
        digest = hashlib.sha256(self.source.encode()).hexdigest()[:16]
        path = Path(tempfile.gettempdir()) / f"rlverify-{self.id}-{digest}.prism"
        if not path.exists() or path.read_text() != self.source:
            tmp = path.with_suffix(f".{digest}.tmp")
            tmp.write_text(self.source)
            tmp.replace(path)
        return path

    def load_model(self) -> SymbolicModel:
        """Parse the model with its constants."""
        return load_model(self.model_file(), dict(self.constants))

    def load_policy(self, name: str = "reference") -> Policy:
        """A shipped reference policy by name."""
        if name not in self.policies:
            raise BenchmarkPolicyError(f"{self.id}: no reference policy '{name}'; shipped: {', '.join(self.policies) or 'none'}")
        return load_policy(str(self.policies[name]))
