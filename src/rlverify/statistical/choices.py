"""The statistical engine's choices: estimation methods, rare-event methods and the property forms it simulates.

Imports nothing but the standard library: the CLI's parser reads them (``rlverify simulate --help`` loads no engine).
"""

from __future__ import annotations

__all__ = ["METHODS", "RARE_METHODS", "SUPPORTED_FORMS"]

#: ``--method`` values: how many runs, and the interval or test reported (:mod:`rlverify.statistical.stats`)
METHODS = ("okamoto", "adaptive", "clopper-pearson", "wilson", "sprt")
#: ``--rare`` values: ``splitting`` (fixed effort) and ``restart`` (RESTART)
RARE_METHODS = ("splitting", "restart")
#: the path properties simulation decides (:mod:`rlverify.statistical.properties`)
SUPPORTED_FORMS = (
    "P=? [F phi], P=? [F<=k phi], P=? [phi1 U phi2], P=? [phi1 U<=k phi2] "
    "(or P>=theta / P>theta / P<=theta / P<theta [...] for hypothesis tests), "
    'e.g. P=? [!"crashed" U "goal"]'
)
