"""Continuous-state benchmarks of Bacci & Parker (NFM 2022): bouncing ball, ACC, inverted pendulum.

``make("acc-v1").model()`` is the :class:`~rlverify.models.continuous.ContinuousSystem`; the
benchmark's ``policies`` name its reference policies (name -> ONNX path). Verify with
``rlverify.abstraction.verify_abstraction`` or ``rlverify abstract``.
"""

from __future__ import annotations

from rlverify.benchmarks.registry import BenchmarkSpec, Built, Parameter, register

POLICIES = {
    "bouncing-ball-v1": {"ppo": "policies/bouncing_ball_ppo.onnx"},
    "acc-v1": {"ppo": "policies/acc_ppo.onnx"},
    "pendulum-v1": {"ppo": "policies/pendulum_ppo.onnx"},
}


def make_bouncing_ball() -> Built:
    """The bouncing ball (see :class:`BouncingBall`)."""
    from rlverify.models.continuous.systems import BouncingBall  # when made: the registry is read by every command

    return Built(model=BouncingBall, policies=POLICIES["bouncing-ball-v1"])


def make_acc(accel: float = 3.0) -> Built:
    """Adaptive cruise control with acceleration magnitude ``accel`` (m/s^2)."""
    from rlverify.models.continuous.systems import AdaptiveCruiseControl

    return Built(model=lambda: AdaptiveCruiseControl(accel=accel), policies=POLICIES["acc-v1"])


def make_pendulum() -> Built:
    """The inverted pendulum (see :class:`InvertedPendulum`)."""
    from rlverify.models.continuous.systems import InvertedPendulum

    return Built(model=InvertedPendulum, policies=POLICIES["pendulum-v1"])


_COMMON = """
Properties: "unsafe" = the probability of reaching an unsafe state within the horizon (k steps), bounded
    from above soundly by the abstraction engine (``rlverify abstract``).
Reference policy "ppo": trained with rlverify's PPO (``rlverify.training``); the ONNX metadata records
    seed, steps and final mean return.
"""

DOC_BB = (
    """Bouncing ball (Bacci & Parker 2022; equations of their published code).

Description: a ball falls under gravity and bounces losing 10% of its speed; a paddle can hit it
    down (adding 4 m/s) when it is at height >= 4 m. The policy must keep it bouncing.
State: p (height, m), v (velocity, m/s); dt = 0.1 s.
Actions: nohit, hit.
Labels/failure: unsafe = p <= 1 and -7 <= v <= 7 (the ball stopped bouncing).
Initial states: "large" p in [5, 9], v in [-1, 1] (default); "small" p in [5, 9], v in [-0.1, 0].
Reference results: paper Table 1, k = 20, phi = 0.1: bound 0.0 for S and L with octagons.
"""
    + _COMMON
)

DOC_ACC = (
    """Adaptive cruise control (Bacci & Parker 2022).

Description: the ego car follows a lead car at 28 m/s by choosing to accelerate or decelerate.
State: dx (distance, m), v (ego speed, m/s); dt = 0.1 s. Network input (28 - v, dx).
Actions: decelerate (-a), accelerate (+a); parameter accel = a, default 3 m/s^2 (the paper's code; its
    text says 1).
Labels/failure: dx <= 0.
Initial states: dx in [3, 10], v in [26, 32].
Reference results: paper Table 1, k = 7: octagons, phi = 0.33, containment: 0.078.
"""
    + _COMMON
)

DOC_PENDULUM = (
    """Inverted pendulum (discrete-action Pendulum-v0; Bacci & Parker 2022).

Description: keep a pole upright by applying torque 0, -2 or +2.
State: theta (rad, 0 upright), omega (rad/s); g = 10, m = l = 1, dt = 0.05 s.
Actions: noop, left (-2), right (+2).
Labels/failure: |theta| >= 12 degrees.
Initial states: theta, omega in [-0.05, 0.05].
Reference results: paper Table 1, k = 6, boxes, phi = 0.5: 0.057.
"""
    + _COMMON
)

register(
    BenchmarkSpec(
        id="bouncing-ball-v1",
        kind="continuous",
        entry_point=make_bouncing_ball,
        properties={"unsafe": 'Pmax=? [F<=20 "unsafe"]'},
        policies=POLICIES["bouncing-ball-v1"],
        doc=DOC_BB,
    )
)
register(
    BenchmarkSpec(
        id="acc-v1",
        kind="continuous",
        entry_point=make_acc,
        parameters={"accel": Parameter(3.0, 0.1, 10.0, "acceleration magnitude (m/s^2)")},
        properties={"unsafe": 'Pmax=? [F<=7 "unsafe"]'},
        policies=POLICIES["acc-v1"],
        doc=DOC_ACC,
    )
)
register(
    BenchmarkSpec(
        id="pendulum-v1",
        kind="continuous",
        entry_point=make_pendulum,
        properties={"unsafe": 'Pmax=? [F<=6 "unsafe"]'},
        policies=POLICIES["pendulum-v1"],
        doc=DOC_PENDULUM,
    )
)
