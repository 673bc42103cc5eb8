"""Continuous-state dynamics as pure functions with sound set-valued successor operators."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.models.continuous.base import ActionMap, ContinuousSystem, Piece, UnsafeSet
    from rlverify.models.continuous.declared import DeclaredSystem, declare, load_system
    from rlverify.models.continuous.env import ContinuousEnv, unsafe_property
    from rlverify.models.continuous.systems import AdaptiveCruiseControl, BouncingBall, InvertedPendulum

__all__ = [
    "ActionMap",
    "AdaptiveCruiseControl",
    "BouncingBall",
    "ContinuousEnv",
    "ContinuousSystem",
    "DeclaredSystem",
    "InvertedPendulum",
    "Piece",
    "UnsafeSet",
    "declare",
    "load_system",
    "unsafe_property",
]

lazy_exports(
    __name__,
    {
        "rlverify.models.continuous.base": "ActionMap ContinuousSystem Piece UnsafeSet",
        "rlverify.models.continuous.declared": "DeclaredSystem declare load_system",
        "rlverify.models.continuous.env": "ContinuousEnv unsafe_property",
        "rlverify.models.continuous.systems": "AdaptiveCruiseControl BouncingBall InvertedPendulum",
    },
)
