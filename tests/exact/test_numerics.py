"""The default numerics are right where plain value iteration is not, and fast on the benchmarks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.models import load_model
from rlverify.policies import CallablePolicy

N = 6
LEAK_GOAL, LEAK_FAIL = 0.0004, 0.0002


def _slow_ring(tmp_path: Path) -> Path:
    """A ring of N states leaking rarely to goal (x=N) or fail (x=N+1): ~1,700 expected steps."""
    lines = ["mdp", "module ring", f"  x : [0..{N + 1}] init 0;"]
    stay = 1 - LEAK_GOAL - LEAK_FAIL
    for s in range(N):
        lines.append(f"  [go] x={s} -> {LEAK_GOAL} : (x'={N}) + {LEAK_FAIL} : (x'={N + 1}) + {stay:.4f} : (x'={(s + 1) % N});")
    lines += [f"  [go] x>={N} -> true;", "endmodule"]
    path = tmp_path / "ring.prism"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sound_default_is_right_where_plain_value_iteration_is_not(tmp_path: Path) -> None:
    model = load_model(_slow_ring(tmp_path))
    policy = CallablePolicy(lambda s: np.ones((len(s), 1)), ["x"], ["go"])
    exact = LEAK_GOAL / (LEAK_GOAL + LEAK_FAIL)  # by symmetry of the ring
    sound = verify_exact(model, f"P=? [F x={N}]", policy)
    assert sound.guarantee == "sound"
    assert sound.value == pytest.approx(exact, rel=2e-6)
    assert sound.lower <= exact <= sound.upper  # the sound solver's bounds bracket the true value
    direct = verify_exact(model, f"P=? [F x={N}]", policy, ExactOptions(numerics="direct"))
    assert direct.value == pytest.approx(exact, rel=1e-9)
    # direct: the sparse LU value; its bounds are None or a certified bracket (never Storm's 0 and 1)
    assert direct.lower is None or direct.lower <= exact <= direct.upper
    fast = verify_exact(model, f"P=? [F x={N}]", policy, ExactOptions(numerics="fast"))
    assert fast.guarantee == "unsound" and (fast.lower, fast.upper) == (None, None)
    # plain value iteration stops on a small change between iterates, far from the true value
    assert abs(fast.value - exact) > 10 * 1e-6 * exact
