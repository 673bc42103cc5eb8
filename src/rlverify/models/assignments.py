"""The one ``K=V,K2=V2`` parser behind ``-c``/``--constants`` (PRISM/JANI constants, benchmark
parameters, a declared system's constants) and the ``K=V`` form of ``--env-kwargs``.

It owns the syntax (splitting on commas, ``NAME=VALUE``, blank entries skipped), empty names and
names given twice; every caller converts the values (text) to its own type.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rlverify.errors import ConstantsError, RlverifyError


def parse_assignments(
    text: str | None,
    *,
    option: str = "--constants",
    what: str = "constant",
    error: type[RlverifyError] = ConstantsError,
    malformed: Callable[[str], str] | None = None,
    names: str | None = None,
) -> dict[str, str]:
    """``"K=V,K2=V2"`` as ``{"K": "V", "K2": "V2"}`` (names and values stripped, in the given order).

    Args:
        text: the option's text; None or blank means no assignments.
        option: the option named in messages (``--constants``).
        what: what one assignment sets, for the duplicate message (``constant``).
        error: the error raised.
        malformed: the message for an entry that is not ``NAME=VALUE`` (given the entry, stripped);
            default ``"{option}: expected NAME=VALUE, got '{entry}'"``.
        names: a regular expression every name must match in full (e.g. an identifier), else the
            entry is malformed; default: any non-empty name.

    Raises:
        error: an entry without ``=``, with an empty name or one ``names`` refuses; a name given
            twice (``N=3,N=4`` would otherwise silently mean ``N=4``).
    """
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        entry = part.strip()
        if not entry:
            continue
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not key or (names is not None and not re.fullmatch(names, key)):
            raise error(malformed(entry) if malformed else f"{option}: expected NAME=VALUE, got '{entry}'")
        if key in out:
            raise error(f"{option}: '{key}' is given twice ({key}={out[key]} and {key}={value}); give each {what} once")
        out[key] = value
    return out
