"""Resolved input for the engines in tests: property texts parsed for their model, as the front door parses them
(:func:`rlverify.resolve.resolve`): engines take a loaded model and a parsed property."""

from __future__ import annotations

from rlverify.models import Property, SymbolicModel, parse_property


def parsed(model: SymbolicModel, text: str, *, policy: bool = True) -> Property:
    """``text`` parsed for ``model`` (``policy``: checked on a policy's chain, as ``resolve`` reads it with one)."""
    return parse_property(model, text, fixed_policy=policy)
