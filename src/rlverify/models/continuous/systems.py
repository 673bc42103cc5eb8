"""The three continuous benchmarks of Bacci & Parker (NFM 2022), equations as in their published code.

See ``../shared/NOTES.md`` ("Continuous benchmarks"). Each is written as a declaration (see
:mod:`.declared`): ``step`` and the sound piecewise-affine enclosure ``pieces`` both come from it.
The ``*_declaration`` functions return the plain mappings (a template for your own systems).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlverify.models.continuous.declared import DeclaredSystem


def bouncing_ball_declaration() -> dict[str, Any]:
    """The bouncing ball's declaration (see :class:`BouncingBall`)."""
    return {
        "name": "bouncing-ball-v1",
        "variables": ["p", "v"],
        "domain": {"p": [0.0, 20.0], "v": [-30.0, 30.0]},
        "actions": ["nohit", "hit"],
        "initial": {"small": {"p": [5.0, 9.0], "v": [-0.1, 0.0]}, "large": {"p": [5.0, 9.0], "v": [-1.0, 1.0]}},
        "default_initial": "large",
        "unsafe": [["p <= 1", "v <= 7", "v >= -7"]],
        "observation": {"p": "p", "v": "v"},
        "horizon": 20,
        "min_width": 0.01,
        # the reference policy's decision boundary has normal ~(1, -0.11) (fitted on samples around S0)
        "template": [[1.0, -0.1], [1.0, 0.1]],
        # after free fall: v1 = v - 0.981, p1 = p + 0.1 v1 (before the floor and the paddle act)
        "let": {"p1": "p + 0.1*v - 0.0981", "v1": "v - 0.981"},
        "pieces": [
            {"when": ["p1 <= 0", "v1 <= 0"], "next": {"p": "0", "v": "-0.9*v1"}},  # bounce
            {"when": ["p1 <= 0", "v1 >= 0"], "next": {"p": "0", "v": "v1"}},  # on the floor, rising
            {"when": ["0 <= p1 <= 4"], "next": {"p": "p1", "v": "v1"}},  # below the paddle
            {
                "when": ["p1 >= 4", "v1 <= 0"],
                "next": {
                    "nohit": {"p": "p1", "v": "v1"},  # paddle, falling
                    "hit": {"p": "4", "v": "v1 - 4"},
                },
            },
            {
                "when": ["p1 >= 4", "v1 >= 0"],
                "next": {
                    "nohit": {"p": "p1", "v": "v1"},  # paddle, rising
                    "hit": {"p": "4", "v": "-0.9*v1 - 4"},
                },
            },
        ],
    }


def acc_declaration(accel: float = 3.0) -> dict[str, Any]:
    """Adaptive cruise control's declaration with acceleration magnitude ``accel`` (m/s^2)."""
    unclipped = {"dx": "dx - 0.1*v + 0.1*(28 - 0.1*acc)", "v": "v + 0.1*acc"}  # v' = v + 0.1 acc
    clipped = {"dx": "dx + 0.1*(28 - 36)", "v": "36"}  # v' = 36
    return {
        "name": "acc-v1",
        "variables": ["dx", "v"],
        "domain": {"dx": [-50.0, 100.0], "v": [0.0, 36.0]},
        "actions": ["decelerate", "accelerate"],
        "constants": {"accel": float(accel)},
        "action_values": {"acc": {"decelerate": "-accel", "accelerate": "accel"}},
        "initial": {"default": {"dx": [3.0, 10.0], "v": [26.0, 32.0]}},
        "unsafe": ["dx <= 0"],
        "observation": {"v_rel": "28 - v", "dx": "dx"},
        "horizon": 7,
        "min_width": 0.005,
        # the reference policy's decision boundary has normal ~(-0.53, 1) (fitted on samples around S0)
        "template": [[-0.5, 1.0], [1.0, 0.5]],
        "pieces": [
            {"when": ["v <= 36 - 0.1*accel"], "next": unclipped},
            {"when": ["v >= 36 - 0.1*accel", "v <= 36 + 0.1*accel"], "next": {"decelerate": unclipped, "accelerate": clipped}},
            {"when": ["v >= 36 + 0.1*accel"], "next": clipped},
        ],
    }


def pendulum_declaration() -> dict[str, Any]:
    """The inverted pendulum's declaration (see :class:`InvertedPendulum`)."""
    # omega+ = omega + (-15 sin(theta + pi) + 3 u) 0.05 = omega + 0.75 sin(theta) + 0.15 u; theta' uses omega+
    return {
        "name": "pendulum-v1",
        "variables": ["theta", "omega"],
        "domain": {"theta": [-np.pi, np.pi], "omega": [-8.0, 8.0]},
        "actions": ["noop", "left", "right"],
        "action_values": {"u": {"noop": 0.0, "left": -2.0, "right": 2.0}},
        "constants": {"limit": float(np.deg2rad(12.0))},
        "initial": {"default": {"theta": [-0.05, 0.05], "omega": [-0.05, 0.05]}},
        "unsafe": ["theta >= limit", "theta <= -limit"],
        "observation": {"theta": "theta", "omega": "omega"},
        "horizon": 6,
        "min_width": 1e-4,
        # the reference policy's decision boundaries have normal ~(1, 0.26) (fitted on samples around S0)
        "template": [[1.0, 0.25], [1.0, -0.25]],
        "pieces": [
            {
                "next": {
                    "theta": "wrap(theta + 0.05*omega + 0.0375*sin(theta) + 0.0075*u, -pi, pi)",
                    "omega": "clip(omega + 0.75*sin(theta) + 0.15*u, -8, 8)",
                }
            }
        ],
    }


class BouncingBall(DeclaredSystem):
    """Bouncing ball with a paddle.

    State ``(p, v)``: height (m) and vertical velocity (m/s); ``dt = 0.1`` s. Actions ``nohit`` (0) and
    ``hit`` (1). First ``v' = v - 0.981``, ``p' = max(p + 0.1 v', 0)``; then if ``p' <= 0`` and
    ``v' <= 0`` the ball bounces (``v'' = -0.9 v'``, ``p'' = 0``); else if ``p' >= 4`` and the action is
    hit, ``v'' = v' - 4`` (``v' <= 0``) or ``-0.9 v' - 4`` (``v' >= 0``) and ``p'' = 4``. Unsafe: ``p <= 1``
    and ``-7 <= v <= 7`` (the ball stopped bouncing). Initial regions ``small`` p in [5, 9],
    v in [-0.1, 0] and ``large`` v in [-1, 1]. Horizon 20.

    Default template (``domain="template"`` without directions): the box axes plus ``(1, -0.1)`` and
    ``(1, 0.1)`` over ``(p, v)``, near the shipped policy's decision boundary.
    """

    def __init__(self) -> None:
        super().__init__(bouncing_ball_declaration(), source="bouncing-ball-v1")

    def reward(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        # +1 per step the ball keeps bouncing, a small cost per paddle hit (energy)
        return 1.0 - 0.05 * (np.asarray(actions) == 1)


class AdaptiveCruiseControl(DeclaredSystem):
    """Adaptive cruise control: the ego car follows a lead car driving at 28 m/s.

    State ``(dx, v)``: distance to the lead car (m) and ego speed (m/s); ``dt = 0.1`` s. Actions
    ``decelerate`` (0, ``-a`` m/s^2) and ``accelerate`` (1, ``+a``). ``v' = min(36, v + 0.1 acc)``,
    ``dx' = dx + 0.1 (28 - v')``. Network input ``(28 - v, dx)``. Unsafe: ``dx <= 0``. Initial:
    ``dx`` in [3, 10], ``v`` in [26, 32]. Horizon 7.

    The acceleration magnitude ``a`` defaults to 3 m/s^2: the paper's text says 1, but the code
    that produced its Table 1 uses 3 (with 1 the ego car cannot close a 3 m gap within 7 steps).

    Default template (``domain="template"`` without directions; the ``template`` rows of
    ``docs/table1.md``): the box axes plus ``(-0.5, 1)`` and ``(1, 0.5)`` over ``(dx, v)``, near the
    shipped policy's decision boundary.
    """

    def __init__(self, accel: float = 3.0) -> None:
        self.accel = float(accel)
        super().__init__(acc_declaration(self.accel), source="acc-v1")

    def reward(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        # stay close behind the lead car: 1 at 0 m, 0 at 20 m and beyond (crash handled by the trainer)
        return 1.0 - np.clip(next_states[:, 0], 0.0, 20.0) / 20.0


class InvertedPendulum(DeclaredSystem):
    """Inverted pendulum (discrete-action Pendulum-v0): ``g = 10``, ``m = l = 1``, ``dt = 0.05`` s.

    State ``(theta, omega)``: angle (rad, 0 upright) and angular velocity (rad/s). Actions ``noop`` (0),
    ``left`` (1, torque -2) and ``right`` (2, torque +2). ``omega+ = omega + (-15 sin(theta + pi) + 3 u) 0.05``,
    ``theta' = wrap(theta + 0.05 omega+)`` into [-pi, pi), ``omega' = clip(omega+, -8, 8)``. Unsafe:
    ``|theta| >= 12`` degrees. Initial: theta, omega in [-0.05, 0.05]. Horizon 6.

    Declared with ``sin(theta + pi) = -sin(theta)`` expanded, so ``step`` equals the formula above up to
    rounding (~1e-16). The enclosure linearises ``sin`` on each box (secant slope, remainder as a
    disturbance); ``clip`` and ``wrap`` become interval disturbances where they can act.

    Default template (``domain="template"`` without directions): the box axes plus ``(1, 0.25)`` and
    ``(1, -0.25)`` over ``(theta, omega)``, near the shipped policy's decision boundaries.
    """

    torques = (0.0, -2.0, 2.0)

    def __init__(self) -> None:
        super().__init__(pendulum_declaration(), source="pendulum-v1")
        self.limit = self.constants["limit"]

    def reward(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        th, om = next_states[:, 0], next_states[:, 1]
        return 1.0 - (th / self.limit) ** 2 - 0.01 * om**2
