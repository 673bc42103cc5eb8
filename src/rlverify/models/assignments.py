"""The one ``K=V,K2=V2`` parser behind ``-c``/``--constants`` (PRISM/JANI constants, benchmark
parameters, a declared system's constants) and the ``K=V`` form of ``--env-kwargs``.

It owns the syntax (splitting on commas, ``NAME=VALUE``, blank entries skipped), empty names and
names given twice; every caller converts the values (text) to its own type.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

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
        if not _well_formed(key, eq, names):
            raise error(malformed(entry) if malformed else f"{option}: expected NAME=VALUE, got '{entry}'")
        if key in out:
            raise error(f"{option}: '{key}' is given twice ({key}={out[key]} and {key}={value}); give each {what} once")
        out[key] = value
    return out


def _well_formed(key: str, eq: str, names: str | None) -> bool:
    """Whether an entry split at its ``=`` is ``NAME=VALUE`` with a name ``names`` accepts."""
    return bool(eq and key and (names is None or re.fullmatch(names, key)))


#: most points a sweep may expand to (a typo such as N=1:1000000 is refused, not run)
MAX_SWEEP_POINTS = 1000
_RANGE = re.compile(r"^(?P<a>[^:]+):(?:(?P<step>[^:]+):)?(?P<b>[^:]+)$")


def _sweep_values(name: str, value: str, option: str) -> list[str]:
    """``value`` as the values it sweeps (``4:8``, ``0.1:0.1:0.5``: start, optional step, end inclusive; PRISM's
    experiment syntax), or ``[value]`` when it is no range. Decimal arithmetic: ``0.1:0.1:0.3`` gives ``0.3``, not
    ``0.30000000000000004``."""
    m = _RANGE.match(value)
    if m is None:
        return [value]
    a, step, b = _range_numbers(m, name, value, option)
    if step <= 0 or b < a:
        raise ConstantsError(f"{option}: {name}={value}: a sweep needs START <= END and a positive STEP")
    span = (b - a) / step
    if span >= MAX_SWEEP_POINTS:  # said without the count itself (1:1e400 would print 400 digits)
        many = f"{int(span) + 1:,}" if span < 10**12 else f"about {span:.3E}"
        raise ConstantsError(f"{option}: {name}={value} sweeps {many} values, more than {MAX_SWEEP_POINTS:,}")
    count = int(span) + 1
    return [str(a + i * step) for i in range(count)]


def _range_numbers(m: re.Match[str], name: str, value: str, option: str) -> tuple[Decimal, Decimal, Decimal]:
    """A range's start, step (default 1) and end as finite decimals (ConstantsError: not numbers)."""
    try:
        a, b = Decimal(m.group("a").strip()), Decimal(m.group("b").strip())
        step = Decimal(m.group("step").strip()) if m.group("step") else Decimal(1)
        finite = all(x.is_finite() for x in (a, b, step))
    except InvalidOperation:
        finite = False
    if not finite:
        raise ConstantsError(f"{option}: {name}={value}: a sweep is START:END or START:STEP:END, with numbers")
    return a, step, b


def expand_sweep(text: str | None, *, option: str = "--constants") -> list[str]:
    """The constants ``text`` (``"N=4:8,p=0.1"``) as one ``K=V,...`` text per point of the sweep it asks for: the
    product of every swept constant's values, the first named varying slowest; ``[text]`` without a sweep.

    Raises:
        ConstantsError: a malformed range, or a sweep of more than :data:`MAX_SWEEP_POINTS` points.
    """
    given = parse_assignments(text, option=option)
    axes = [[(k, v) for v in _sweep_values(k, value, option)] for k, value in given.items()]
    total = 1
    for axis in axes:
        total *= len(axis)
    if total > MAX_SWEEP_POINTS:
        raise ConstantsError(f"{option}: the sweep has {total:,} points, more than {MAX_SWEEP_POINTS:,}")
    if total == 1:
        return [text or ""]
    return [",".join(f"{k}={v}" for k, v in point) for point in itertools.product(*axes)]


def swept_names(text: str | None, *, option: str = "--constants") -> list[str]:
    """The constants of ``text`` that a sweep varies (a range of more than one value), in the order given."""
    return [k for k, v in parse_assignments(text, option=option).items() if len(_sweep_values(k, v, option)) > 1]
