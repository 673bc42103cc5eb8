"""What a policy is loaded with: the spec syntax, the limit on one call's time and the threads its runtime uses.

The bottom of :mod:`rlverify.policies`: imports nothing but the standard library and :mod:`rlverify.errors`, so
the CLI's parser reads these defaults without loading numpy or a network runtime (``rlverify --help``).
"""

from __future__ import annotations

import math
import operator
import os
from typing import Any

from rlverify.errors import OptionError

__all__ = [
    "DEFAULT_POLICY_THREADS",
    "DEFAULT_POLICY_TIMEOUT",
    "MAX_POLICY_THREADS",
    "MAX_POLICY_TIMEOUT",
    "SPEC_HELP",
    "check_threads",
    "check_timeout",
]

#: The policy specs :func:`~rlverify.policies.load_policy` reads (``--policy``).
SPEC_HELP = (
    "path.py:NAME (module defining FEATURES, ACTIONS and callable NAME), file.onnx, table.json, "
    "module.pt (TorchScript; features/actions from --features/--actions or file.pt.json), "
    "model.zip (Stable-Baselines3 PPO/A2C/DQN or sb3-contrib MaskablePPO; same)"
)

#: Seconds one call of a policy loaded from a file (one batch of states) may take before it is stopped with a
#: :class:`PolicyError` (``--policy-timeout`` / ``load_policy(timeout=...)``; None or 0: no limit); an adapter built
#: in Python has no limit unless its ``timeout`` is set. See :func:`~rlverify.policies.base.run_policy_code`.
DEFAULT_POLICY_TIMEOUT = 120.0
#: The largest policy timeout in seconds (larger ones are refused: 0 is no limit; the timer cannot hold any number).
MAX_POLICY_TIMEOUT = 1e6

#: Threads a network policy's runtime computes one batch with (``--policy-threads`` / ``load_policy(threads=...)``
#: / the ``threads`` of :class:`~rlverify.policies.OnnxPolicy`, :class:`~rlverify.policies.TorchPolicy` and
#: :class:`~rlverify.policies.SB3Policy`). One: the engines already keep the cores busy (the simulator overlaps
#: its own work with the network's; Ray runs one process per core), and a runtime that starts a thread per core
#: on a loaded machine slows every call down many times (an SB3 policy simulated 15-45x slower).
DEFAULT_POLICY_THREADS = 1
#: The most threads a policy's runtime may be given.
MAX_POLICY_THREADS = 1024


def check_timeout(seconds: float | None, option: str = "--policy-timeout") -> float | None:
    """``seconds`` as a policy timeout (None or 0: no limit), or an :class:`OptionError` naming ``option``."""
    if seconds is None:
        return None
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        raise OptionError(f"{option}: expected seconds (a number >= 0; 0 = no limit), got {seconds!r}") from None
    if not math.isfinite(value) or value < 0:
        raise OptionError(f"{option}: expected seconds (a number >= 0; 0 = no limit), got {seconds!r}")
    if value > MAX_POLICY_TIMEOUT:
        raise OptionError(
            f"{option}: {value:g} s is beyond the largest limit, {MAX_POLICY_TIMEOUT:g} s (about "
            f"{MAX_POLICY_TIMEOUT / 86400:.1f} days); give 0 for no limit"
        )
    return value or None


def check_threads(threads: Any, option: str = "--policy-threads") -> int:
    """``threads`` as the number of threads of a policy's runtime (an integer from 1 to :data:`MAX_POLICY_THREADS`),
    or an :class:`OptionError` naming ``option``."""
    try:
        if isinstance(threads, bool):
            raise TypeError
        value = operator.index(threads)
    except TypeError:
        raise OptionError(
            f"{option}: expected a whole number of threads (1 to {MAX_POLICY_THREADS}), got {threads!r}"
        ) from None
    if not 1 <= value <= MAX_POLICY_THREADS:
        raise OptionError(f"{option}: expected a whole number of threads (1 to {MAX_POLICY_THREADS}), got {threads!r}")
    return value


#: onnxruntime's opt-out of its telemetry (read once, when onnxruntime initialises)
ONNX_TELEMETRY_OFF = "ORT_DISABLE_TELEMETRY"


#: onnxruntime's log severity that prints only what precedes a crash (0 verbose, 1 info, 2 warning, 3 error, 4 fatal)
ONNX_LOG_FATAL = 4


def onnx_runtime() -> Any:
    """The ``onnxruntime`` module, imported with its telemetry off unless the user set ``ORT_DISABLE_TELEMETRY``.

    onnxruntime's Linux wheels (1.32 here) upload usage events to Microsoft and keep a device id and an event cache
    under ``~/.cache/Microsoft`` and a session file ``.ses`` in ``$TMPDIR``; a verifier of possibly confidential
    policies sends and leaves nothing of the kind. (Set ``ORT_DISABLE_TELEMETRY=0`` to allow it; an onnxruntime
    the process imported earlier keeps its own setting.)

    Its own log lines (``[W:onnxruntime:...]`` on an unused initializer, ``[E:onnxruntime:...]`` before a failed run
    raises) are off: what goes wrong reaches the user as rlverify's one error line, carrying onnxruntime's message."""
    os.environ.setdefault(ONNX_TELEMETRY_OFF, "1")
    import onnxruntime  # lazy: onnxruntime, start-up

    onnxruntime.set_default_logger_severity(ONNX_LOG_FATAL)
    return onnxruntime
