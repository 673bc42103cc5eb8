"""Continuous-state dynamics as pure functions with sound set-valued successor operators."""

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
