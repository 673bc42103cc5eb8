"""The statistical engine's choices: estimation methods, rare-event methods and the property forms it simulates.

Imports nothing heavy (the standard library and :mod:`rlverify.choices`): the CLI's parser reads them
(``rlverify simulate --help`` loads no engine).
"""

from __future__ import annotations

from enum import StrEnum

from rlverify.choices import values

__all__ = ["METHODS", "RARE_METHODS", "SUPPORTED_FORMS", "Method", "RareMethod"]


class Method(StrEnum):
    """How many runs, and the interval or test reported (:mod:`rlverify.statistical.stats`)."""

    OKAMOTO = "okamoto"
    ADAPTIVE = "adaptive"
    CLOPPER_PEARSON = "clopper-pearson"
    WILSON = "wilson"
    SPRT = "sprt"


class RareMethod(StrEnum):
    """Rare events: ``splitting`` (fixed effort) or ``restart`` (RESTART)."""

    SPLITTING = "splitting"
    RESTART = "restart"


#: ``--method`` values
METHODS = values(Method)
#: ``--rare`` values
RARE_METHODS = values(RareMethod)
#: the path properties simulation decides (:mod:`rlverify.statistical.properties`)
SUPPORTED_FORMS = (
    "P=? [F phi], P=? [F<=k phi], P=? [phi1 U phi2], P=? [phi1 U<=k phi2] "
    "(or P>=theta / P>theta / P<=theta / P<theta [...] for hypothesis tests), "
    'e.g. P=? [!"crashed" U "goal"]'
)
