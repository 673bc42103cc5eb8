"""The abstraction's default guards.

Imports nothing, so the CLI's parser reads these defaults without loading numpy (``rlverify --help``).
"""

from __future__ import annotations

__all__ = ["DEFAULT_TIME_BUDGET"]

#: seconds a run may take when no ``time_budget`` is given (``--time-budget S`` sets another): after it no new abstract
#: state is expanded (it counts as failing in the upper bound, as safe in the lower: sound, looser; a warning says so)
DEFAULT_TIME_BUDGET = 600.0
