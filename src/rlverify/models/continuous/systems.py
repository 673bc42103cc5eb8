"""The three continuous benchmarks of Bacci & Parker (NFM 2022), equations as in their published code.

See ``../shared/NOTES.md`` ("Continuous benchmarks"). Every system gives the exact vectorised
``step`` and a sound piecewise-affine enclosure ``pieces`` (see :mod:`.base`).
"""

from __future__ import annotations

import numpy as np

from rlverify.models.continuous.base import ActionMap, ContinuousSystem, Piece, UnsafeSet


class BouncingBall(ContinuousSystem):
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

    name = "bouncing-ball-v1"
    variables = ("p", "v")
    actions = ("nohit", "hit")
    features = ("p", "v")
    horizon = 20
    default_initial = "large"
    min_width = 0.01
    pieces_depend_on_box = False

    def __init__(self) -> None:
        self.domain_lo = np.array([0.0, -30.0])
        self.domain_hi = np.array([20.0, 30.0])
        self.initial_regions = {"small": (np.array([5.0, -0.1]), np.array([9.0, 0.0])),
                                "large": (np.array([5.0, -1.0]), np.array([9.0, 1.0]))}
        self.unsafe = UnsafeSet(((np.array([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]), np.array([1.0, 7.0, 7.0])),))
        self.obs_matrix = np.eye(2)
        self.obs_offset = np.zeros(2)
        # the reference policy's decision boundary has normal ~(1, -0.11) (fitted on samples around S0)
        self.template_directions = np.array([[1.0, -0.1], [1.0, 0.1]])

    def step(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        p, v = states[:, 0], states[:, 1]
        v1 = v - 0.981
        p1 = np.maximum(p + 0.1 * v1, 0.0)
        hit = np.asarray(actions) == 1
        bounce = (p1 <= 0) & (v1 <= 0)
        paddle = ~bounce & (p1 >= 4) & hit
        v2 = np.where(bounce, -0.9 * v1, np.where(paddle, np.where(v1 <= 0, v1 - 4.0, -0.9 * v1 - 4.0), v1))
        p2 = np.where(bounce, 0.0, np.where(paddle, 4.0, p1))
        return np.stack([p2, v2], axis=1)

    def pieces(self, lo: np.ndarray, hi: np.ndarray) -> list[Piece]:
        # with p1 = p + 0.1 v - 0.0981 and v1 = v - 0.981 (both affine in the state)
        p1 = (np.array([[1.0, 0.1], [0.0, 1.0]]), np.array([-0.0981, -0.981]))  # (p1, v1)
        keep = ActionMap.affine(*p1)
        bounce = ActionMap.affine(np.array([[0.0, 0.0], [0.0, -0.9]]), np.array([0.0, 0.9 * 0.981]))
        floor = ActionMap.affine(np.array([[0.0, 0.0], [0.0, 1.0]]), np.array([0.0, -0.981]))
        hit_down = ActionMap.affine(np.array([[0.0, 0.0], [0.0, 1.0]]), np.array([4.0, -0.981 - 4.0]))
        hit_up = ActionMap.affine(np.array([[0.0, 0.0], [0.0, -0.9]]), np.array([4.0, 0.9 * 0.981 - 4.0]))
        g_p1_le0 = ([1.0, 0.1], 0.0981)        # p1 <= 0
        g_p1_ge0 = ([-1.0, -0.1], -0.0981)     # p1 >= 0
        g_p1_le4 = ([1.0, 0.1], 4.0981)        # p1 <= 4
        g_p1_ge4 = ([-1.0, -0.1], -4.0981)     # p1 >= 4
        g_v1_le0 = ([0.0, 1.0], 0.981)         # v1 <= 0
        g_v1_ge0 = ([0.0, -1.0], -0.981)       # v1 >= 0

        def piece(guards, maps):
            return Piece(np.array([g[0] for g in guards]), np.array([g[1] for g in guards]), tuple(maps))

        return [
            piece([g_p1_le0, g_v1_le0], [bounce, bounce]),
            piece([g_p1_le0, g_v1_ge0], [floor, floor]),
            piece([g_p1_ge0, g_p1_le4], [keep, keep]),
            piece([g_p1_ge4, g_v1_le0], [keep, hit_down]),
            piece([g_p1_ge4, g_v1_ge0], [keep, hit_up]),
        ]

    def reward(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        # +1 per step the ball keeps bouncing, a small cost per paddle hit (energy)
        return 1.0 - 0.05 * (np.asarray(actions) == 1)


class AdaptiveCruiseControl(ContinuousSystem):
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

    name = "acc-v1"
    variables = ("dx", "v")
    actions = ("decelerate", "accelerate")
    features = ("v_rel", "dx")
    horizon = 7
    min_width = 0.005
    pieces_depend_on_box = False

    def __init__(self, accel: float = 3.0) -> None:
        self.accel = float(accel)
        self.domain_lo = np.array([-50.0, 0.0])
        self.domain_hi = np.array([100.0, 36.0])
        self.initial_regions = {"default": (np.array([3.0, 26.0]), np.array([10.0, 32.0]))}
        self.unsafe = UnsafeSet(((np.array([[1.0, 0.0]]), np.array([0.0])),))
        self.obs_matrix = np.array([[0.0, -1.0], [1.0, 0.0]])
        self.obs_offset = np.array([28.0, 0.0])
        # the reference policy's decision boundary has normal ~(-0.53, 1) (fitted on samples around S0)
        self.template_directions = np.array([[-0.5, 1.0], [1.0, 0.5]])

    def step(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        dx, v = states[:, 0], states[:, 1]
        acc = np.where(np.asarray(actions) == 1, self.accel, -self.accel)
        v1 = np.minimum(36.0, v + 0.1 * acc)
        return np.stack([dx + 0.1 * (28.0 - v1), v1], axis=1)

    def pieces(self, lo: np.ndarray, hi: np.ndarray) -> list[Piece]:
        d = 0.1 * self.accel

        def unclipped(delta: float) -> ActionMap:  # v' = v + delta, dx' = dx + 0.1 (28 - v - delta)
            return ActionMap.affine(np.array([[1.0, -0.1], [0.0, 1.0]]), np.array([0.1 * (28.0 - delta), delta]))

        clipped = ActionMap.affine(np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([0.1 * (28.0 - 36.0), 36.0]))
        row = np.array([[0.0, 1.0]])
        return [
            Piece(row, np.array([36.0 - d]), (unclipped(-d), unclipped(d))),
            Piece(np.vstack([-row, row]), np.array([-(36.0 - d), 36.0 + d]), (unclipped(-d), clipped)),
            Piece(-row, np.array([-(36.0 + d)]), (clipped, clipped)),
        ]

    def reward(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        # stay close behind the lead car: 1 at 0 m, 0 at 20 m and beyond (crash handled by the trainer)
        return 1.0 - np.clip(next_states[:, 0], 0.0, 20.0) / 20.0


class InvertedPendulum(ContinuousSystem):
    """Inverted pendulum (discrete-action Pendulum-v0): ``g = 10``, ``m = l = 1``, ``dt = 0.05`` s.

    State ``(theta, omega)``: angle (rad, 0 upright) and angular velocity (rad/s). Actions ``noop`` (0),
    ``left`` (1, torque -2) and ``right`` (2, torque +2). ``omega+ = omega + (-15 sin(theta + pi) + 3 u) 0.05``,
    ``theta' = wrap(theta + 0.05 omega+)`` into [-pi, pi), ``omega' = clip(omega+, -8, 8)``. Unsafe:
    ``|theta| >= 12`` degrees. Initial: theta, omega in [-0.05, 0.05]. Horizon 6.

    Default template (``domain="template"`` without directions): the box axes plus ``(1, 0.25)`` and
    ``(1, -0.25)`` over ``(theta, omega)``, near the shipped policy's decision boundaries.
    """

    name = "pendulum-v1"
    variables = ("theta", "omega")
    actions = ("noop", "left", "right")
    features = ("theta", "omega")
    horizon = 6
    min_width = 1e-4
    torques = (0.0, -2.0, 2.0)

    def __init__(self) -> None:
        lim = np.deg2rad(12.0)
        self.limit = lim
        self.domain_lo = np.array([-np.pi, -8.0])
        self.domain_hi = np.array([np.pi, 8.0])
        self.initial_regions = {"default": (np.array([-0.05, -0.05]), np.array([0.05, 0.05]))}
        self.unsafe = UnsafeSet(((np.array([[-1.0, 0.0]]), np.array([-lim])), (np.array([[1.0, 0.0]]), np.array([-lim]))))
        self.obs_matrix = np.eye(2)
        self.obs_offset = np.zeros(2)
        # the reference policy's decision boundaries have normal ~(1, 0.26) (fitted on samples around S0)
        self.template_directions = np.array([[1.0, 0.25], [1.0, -0.25]])

    def step(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        th, om = states[:, 0], states[:, 1]
        u = np.asarray(self.torques)[np.asarray(actions)]
        om1 = om + (-15.0 * np.sin(th + np.pi) + 3.0 * u) * 0.05
        th1 = th + 0.05 * om1
        th1 = ((th1 + np.pi) % (2 * np.pi)) - np.pi
        return np.stack([th1, np.clip(om1, -8.0, 8.0)], axis=1)

    def pieces(self, lo: np.ndarray, hi: np.ndarray) -> list[Piece]:
        tl, th = float(lo[0]), float(hi[0])
        # sin(theta + pi) = -sin(theta), so omega+ = omega + 0.75 sin(theta) + 0.15 u.
        # Linearise sin(theta) = s theta + r with r in [r_lo, r_hi] on [tl, th].
        s, r_lo, r_hi = _sin_enclosure(tl, th)
        maps = []
        for u in self.torques:
            # theta' = (1 + 0.0375 s) theta + 0.05 omega + 0.0075 u + 0.0375 r
            # omega' = 0.75 s theta + omega + 0.15 u + 0.75 r
            a = np.array([[1.0 + 0.0375 * s, 0.05], [0.75 * s, 1.0]])
            c = np.array([0.0075 * u, 0.15 * u])
            cols = [np.array([0.0375, 0.75])]
            w_lo, w_hi = [r_lo], [r_hi]
            # interval range of omega+ and theta' on the box, to see whether clip / wrap can act
            om_lo, om_hi = _interval_sin_omega(lo, hi, u)
            th_lo, th_hi = tl + 0.05 * min(om_lo, 0.0) - 1e-9, th + 0.05 * max(om_hi, 0.0) + 1e-9
            if om_lo < -8.0 or om_hi > 8.0:
                # clip may act: omega' enclosed by its clipped interval (a fresh disturbance)
                a[1] = 0.0
                c[1] = 0.0
                cols[0] = np.array([0.0375, 0.0])
                cols.append(np.array([0.0, 1.0]))
                w_lo.append(float(np.clip(om_lo, -8.0, 8.0)))
                w_hi.append(float(np.clip(om_hi, -8.0, 8.0)))
            if th_lo < -np.pi or th_hi >= np.pi:
                # wrap may act: theta' enclosed by the whole circle
                a[0] = 0.0
                c[0] = 0.0
                cols = [col * np.array([0.0, 1.0]) for col in cols]
                cols.append(np.array([1.0, 0.0]))
                w_lo.append(-np.pi)
                w_hi.append(np.pi)
            maps.append(ActionMap(a, c, np.stack(cols, axis=1), np.array(w_lo), np.array(w_hi)))
        return [Piece(np.zeros((0, 2)), np.zeros(0), tuple(maps))]

    def reward(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        th, om = next_states[:, 0], next_states[:, 1]
        return 1.0 - (th / self.limit) ** 2 - 0.01 * om ** 2


def _sin_enclosure(lo: float, hi: float) -> tuple[float, float, float]:
    """Slope ``s`` and remainder range with ``sin(t) - s t`` in ``[r_lo, r_hi]`` for ``t`` in ``[lo, hi]``."""
    if hi - lo < 1e-12:
        s = float(np.cos(0.5 * (lo + hi)))
    else:
        s = float((np.sin(hi) - np.sin(lo)) / (hi - lo))
    cand = [lo, hi]
    if -1.0 <= s <= 1.0:
        base = float(np.arccos(s))
        for root in (base, -base):
            k0 = int(np.floor((lo - root) / (2 * np.pi)))
            for k in range(k0, k0 + 3):
                t = root + 2 * np.pi * k
                if lo <= t <= hi:
                    cand.append(t)
    vals = np.sin(np.array(cand)) - s * np.array(cand)
    margin = 1e-12 + 1e-12 * float(np.abs(vals).max())
    return s, float(vals.min()) - margin, float(vals.max()) + margin


def _interval_sin_omega(lo: np.ndarray, hi: np.ndarray, u: float) -> tuple[float, float]:
    """Interval of ``omega + 0.75 sin(theta) + 0.15 u`` over the box (sound)."""
    tl, th = float(lo[0]), float(hi[0])
    vals = [np.sin(tl), np.sin(th)]
    for t in (np.pi / 2, -np.pi / 2, 3 * np.pi / 2, -3 * np.pi / 2):
        if tl <= t <= th:
            vals.append(np.sin(t))
    smin, smax = min(vals) - 1e-12, max(vals) + 1e-12
    return float(lo[1] + 0.75 * smin + 0.15 * u), float(hi[1] + 0.75 * smax + 0.15 * u)
