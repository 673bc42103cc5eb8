"""Stable-Baselines3 integration (extra ``sb3``): :class:`VerifyCallback` verifies a model while it trains.

    from rlverify.sb3 import VerifyCallback

    model.learn(50_000, callback=VerifyCallback("gym:FrozenLake-v1", 'P=? [F "goal"]', every=5_000))

Importing this module imports Stable-Baselines3; without it the import raises
:class:`~rlverify.errors.DependencyNotInstalled` naming ``pip install 'rlverify[sb3]'``.
"""

from __future__ import annotations

from rlverify.training.callback import VerifyCallback
from rlverify.training.verifying import TrainingCheck, TrainingVerifier

__all__ = ["TrainingCheck", "TrainingVerifier", "VerifyCallback"]
