"""A double integrator declared for ``rlverify abstract`` (see ``rlverify.models.continuous.declared``).

A cart at position ``x`` (m) with velocity ``v`` (m/s) on a rail; every ``dt = 0.1`` s the policy pushes
it left or right (``u = -/+ accel`` m/s^2) or lets it coast. The velocity saturates at ``+-vmax``.
Failure: leaving the rail, ``|x| >= limit`` (1 m). Start: ``x`` in [-0.5, 0.5], ``v`` in [-0.8, 0.8]::

    rlverify abstract examples/double_integrator.py:SYSTEM --policy examples/double_integrator.onnx --phi 0.3 --containment

``examples/double_integrator.onnx`` is a hand-made ReLU network, a saturated linear controller
(``examples/make_double_integrator_policy.py`` wrote it).
"""

SYSTEM = {
    "name": "double-integrator",
    "variables": ["x", "v"],
    "domain": {"x": [-2.0, 2.0], "v": [-1.5, 1.5]},
    "actions": ["left", "coast", "right"],
    "constants": {"dt": 0.1, "accel": 2.0, "vmax": 1.0, "limit": 1.0},
    "action_values": {"u": {"left": "-accel", "coast": 0, "right": "accel"}},
    "initial": {"default": {"x": [-0.5, 0.5], "v": [-0.8, 0.8]}},
    "unsafe": ["x >= limit", "x <= -limit"],
    "observation": {"x": "x", "v": "v"},
    "horizon": 4,
    "pieces": [
        # semi-implicit Euler: the new velocity moves the cart
        {"next": {"x": "x + dt*v + dt*dt*u", "v": "clip(v + dt*u, -vmax, vmax)"}},
    ],
}
