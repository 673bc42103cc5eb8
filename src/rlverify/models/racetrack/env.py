"""Racetrack as a vectorised numpy environment (the semantics of the DSMC paper).

State of a run: ``(x, y, vx, vy, status)`` int64, ``status`` 0 = driving, 1 = goal, 2 = crashed.
One step with acceleration ``(ax, ay) in {-1, 0, 1}^2``:

1. with probability ``noise`` the action fails and the velocity stays unchanged, otherwise
   ``v' = v + a``;
2. the car moves from ``p`` to ``p + v'``; the segment is checked cell by cell: with
   ``n = max(|dx|, |dy|)``, tick ``k = 1..n`` visits ``p + floor(k * d / n + 1/2)``
   (per coordinate). The first wall or off-map cell is a crash, the first goal cell is the goal;
   both end the run (the position is the cell where it ended, clipped to the map for off-map).

The 15 observation features (in this order, all integers): ``x, y, vx, vy``, the distance to the
first wall or map edge in 8 directions (``N, NE, E, SE, S, SW, W, NW``; the number of steps to the
first blocked cell, so a wall next to the car is 1; ``N`` is up = decreasing y), the offset
``goal_dx, goal_dy`` to the nearest goal cell (Manhattan distance; ties: first in row-major order)
and that Manhattan distance ``goal_dist``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlverify.errors import PropertyError, did_you_mean
from rlverify.models.environment import VectorEnv
from rlverify.models.racetrack.track import GOAL, WALL, Track

#: Accelerations ``(ax, ay)``, in the order of :data:`ACTIONS`.
ACCELERATIONS = np.array([(ax, ay) for ax in (-1, 0, 1) for ay in (-1, 0, 1)], dtype=np.int64)
_AX, _AY = ACCELERATIONS[:, 0].copy(), ACCELERATIONS[:, 1].copy()
_STANDS = (ACCELERATIONS == 0).all(axis=1)  # per action: no acceleration
#: Largest number of entries of a :class:`RacetrackEnv`'s table of moves (cells x tabled velocities), and
#: the largest tabled speed per axis (faster moves are checked cell by cell, as :func:`move` does).
MOVE_TABLE_ENTRIES, MOVE_TABLE_SPEED = 1 << 18, 10
_MOVE_TABLES: dict[tuple[bytes, int, int, int], np.ndarray] = {}  # per map and speed (a few MB each)
#: Action names, e.g. ``"ax-1_ay+0"``.
ACTIONS: tuple[str, ...] = tuple(f"ax{ax:+d}_ay{ay:+d}" for ax, ay in ACCELERATIONS.tolist())
#: Compass directions of the wall-distance features: ``(dx, dy)`` with y growing downwards.
DIRECTIONS = {"n": (0, -1), "ne": (1, -1), "e": (1, 0), "se": (1, 1), "s": (0, 1), "sw": (-1, 1), "w": (-1, 0), "nw": (-1, -1)}
#: The 15 observation features.
FEATURES: tuple[str, ...] = ("x", "y", "vx", "vy", *(f"wall_{d}" for d in DIRECTIONS), "goal_dx", "goal_dy", "goal_dist")
#: Atomic propositions a property can use.
LABELS: tuple[str, ...] = ("goal", "crashed", "driving")

DRIVING, AT_GOAL, CRASHED = 0, 1, 2


def wall_distances(track: Track) -> np.ndarray:
    """``(rows, cols, 8)`` int64: steps to the first wall/off-map cell in each direction of :data:`DIRECTIONS`."""
    H, W = track.height, track.width
    blocked = np.ones((H + 2, W + 2), dtype=bool)
    blocked[1:-1, 1:-1] = track.grid == WALL
    out = np.zeros((H, W, len(DIRECTIONS)), dtype=np.int64)
    ys, xs = np.mgrid[0:H, 0:W]
    for i, (dx, dy) in enumerate(DIRECTIONS.values()):
        dist = np.zeros((H, W), dtype=np.int64)
        open_ = np.ones((H, W), dtype=bool)
        k = 0
        while open_.any():
            k += 1
            cx = np.clip(xs + k * dx, -1, W) + 1
            cy = np.clip(ys + k * dy, -1, H) + 1
            hit = open_ & blocked[cy, cx]
            dist[hit] = k
            open_ &= ~hit
        out[:, :, i] = dist
    return out


def nearest_goals(track: Track) -> np.ndarray:
    """``(rows, cols, 2)`` int64 ``(goal_dx, goal_dy)`` to the nearest goal cell (Manhattan; ties row-major)."""
    goals = track.goals  # (G, 2) row-major order
    H, W = track.height, track.width
    ys, xs = np.mgrid[0:H, 0:W]
    dx = goals[None, None, :, 0] - xs[:, :, None]
    dy = goals[None, None, :, 1] - ys[:, :, None]
    best = np.argmin(np.abs(dx) + np.abs(dy), axis=2)  # argmin takes the first minimum
    return np.stack(
        [np.take_along_axis(dx, best[..., None], 2)[..., 0], np.take_along_axis(dy, best[..., None], 2)[..., 0]], axis=2
    )


def move(track: Track, states: np.ndarray, velocities: np.ndarray) -> np.ndarray:
    """Move runs with new velocities, checking the discretised segment cell by cell.

    Args:
        track: the map.
        states: ``(N, 5)`` int64 driving states ``(x, y, vx, vy, status)``.
        velocities: ``(N, 2)`` int64 new velocities ``(vx', vy')``.

    Returns:
        ``(N, 5)`` int64 successor states (status 1 at the first goal cell, 2 at the first blocked cell).
    """
    H, W = track.height, track.width
    grid = track.grid
    x0, y0 = states[:, 0], states[:, 1]
    dx, dy = velocities[:, 0], velocities[:, 1]
    n = np.maximum(np.abs(dx), np.abs(dy))
    out = np.empty_like(states)
    out[:, 0] = x0 + dx
    out[:, 1] = y0 + dy
    out[:, 2] = dx
    out[:, 3] = dy
    out[:, 4] = DRIVING
    todo = np.flatnonzero(n > 0)
    k = 0
    while len(todo):
        k += 1
        nn = n[todo]
        cx = x0[todo] + (2 * k * dx[todo] + nn) // (2 * nn)
        cy = y0[todo] + (2 * k * dy[todo] + nn) // (2 * nn)
        off = (cx < 0) | (cx >= W) | (cy < 0) | (cy >= H)
        cell = grid[np.clip(cy, 0, H - 1), np.clip(cx, 0, W - 1)]
        crash = off | (cell == WALL)
        goal = ~crash & (cell == GOAL)
        end = crash | goal
        ended = todo[end]
        out[ended, 0] = np.clip(cx[end], 0, W - 1)
        out[ended, 1] = np.clip(cy[end], 0, H - 1)
        out[ended, 4] = np.where(crash[end], CRASHED, AT_GOAL)
        todo = todo[~end & (nn > k)]
    return out


@dataclass
class RacetrackEnv(VectorEnv):
    """Vectorised Racetrack (see the module docstring); implements the simulator's environment protocol.

    Attributes:
        track: the map.
        noise: probability that an action fails (velocity unchanged), in [0, 1).
    """

    track: Track
    noise: float = 0.2
    name: str = ""
    features: tuple[str, ...] = FEATURES
    actions: tuple[str, ...] = ACTIONS
    labels: tuple[str, ...] = LABELS
    _walls: np.ndarray = field(init=False, repr=False)
    _goals: np.ndarray = field(init=False, repr=False)
    _cell_obs: dict[Any, Any] = field(init=False, repr=False)
    _moves: np.ndarray | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if not (0.0 <= self.noise < 1.0):
            raise PropertyError(f"Racetrack noise must be in [0, 1), got {self.noise}")
        self.name = self.name or f"racetrack {self.track.name} (noise {self.noise:g})"
        self._walls = wall_distances(self.track)
        self._goals = nearest_goals(self.track)
        # the position-dependent features of every cell, row-major (the velocity columns 2-3 are filled per state)
        H, W = self.track.height, self.track.width
        table = np.zeros((H * W, len(FEATURES)), dtype=np.float64)
        table[:, 0], table[:, 1] = np.arange(H * W) % W, np.arange(H * W) // W
        table[:, 4:12] = self._walls.reshape(H * W, -1)
        table[:, 12:14] = self._goals.reshape(H * W, 2)
        table[:, 14] = np.abs(self._goals).sum(axis=2).reshape(-1)
        self._cell_obs = {np.dtype(np.float64): table, np.dtype(np.float32): table.astype(np.float32)}
        # velocities |v_x|, |v_y| <= _vmax are stepped by table look-up (see _move_table)
        self._vmax = max(0, min(MOVE_TABLE_SPEED, max(H, W), int((np.sqrt(MOVE_TABLE_ENTRIES / (H * W)) - 1) // 2)))

    def start_states(self, cells: np.ndarray | None = None) -> np.ndarray:
        """``(K, 5)`` states at velocity 0 on ``cells`` ``(K, 2)`` (default: the start line 's')."""
        cells = self.track.starts if cells is None else np.asarray(cells, dtype=np.int64).reshape(-1, 2)
        if not len(cells):
            raise PropertyError(f"{self.track.name}: the map has no start cell ('s')")
        out = np.zeros((len(cells), 5), dtype=np.int64)
        out[:, :2] = cells
        code = self.track.grid[cells[:, 1], cells[:, 0]]
        if (code == WALL).any():
            bad = cells[np.argmax(code == WALL)]
            raise PropertyError(f"{self.track.name}: start cell (x={bad[0]}, y={bad[1]}) is a wall")
        out[:, 4] = np.where(code == GOAL, AT_GOAL, DRIVING)
        return out

    def initial_states(self) -> np.ndarray:
        """The start line at velocity 0 (each run starts on one of its cells, uniformly at random)."""
        return self.start_states()

    def observe(self, states: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``(N, 15)`` features of ``(N, 5)`` states (see :data:`FEATURES`): float64, or written into ``out``
        (``(N, 15)`` float32 or float64, e.g. a preallocated buffer; every feature is a small integer, so
        float32 holds it exactly). Positions off the map are clipped to it for the look-ups."""
        H, W = self.track.height, self.track.width
        x, y = states[:, 0], states[:, 1]
        if out is None:
            out = np.empty((len(states), len(FEATURES)), dtype=np.float64)
        table = self._cell_obs.get(out.dtype)
        if table is None or out.shape != (len(states), len(FEATURES)):
            out[...] = self.observe(states)
            return out
        if _on_map(states, H, W):
            cell = y * W
            cell += x
            np.take(table, cell, axis=0, out=out, mode="clip")  # the cells are on the map
            out[:, 2:4] = states[:, 2:4]
        else:
            np.take(table, np.clip(y, 0, H - 1) * W + np.clip(x, 0, W - 1), axis=0, out=out)
            out[:, 0:4] = states[:, 0:4]  # the position as it is
        return out

    def available(self, states: np.ndarray) -> np.ndarray | None:
        """All nine accelerations are available in every driving state (None)."""
        return None

    def step(self, states: np.ndarray, actions: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Successors of driving ``states`` ``(N, 5)`` under action indices ``(N,)``; ``u`` ``(N,)`` uniforms decide the noise.

        The same successors as :func:`move` (which it uses for velocities beyond the table), read from a
        table of every cell's moves (built on first use)."""
        actions = np.asarray(actions)
        ax, ay = _AX.take(actions), _AY.take(actions)
        if self.noise > 0.0:
            ok = np.asarray(u) >= self.noise  # the action does not fail
            ax *= ok
            ay *= ok
        vx, vy = ax, ay
        vx += states[:, 2]
        vy += states[:, 3]
        return self._move(states, vx, vy)

    def _move(self, states: np.ndarray, vx: np.ndarray, vy: np.ndarray) -> np.ndarray:
        """:func:`move` with new velocities ``vx``, ``vy`` ``(N,)`` int64 (reused as scratch), by table look-up."""
        H, W, V = self.track.height, self.track.width, self._vmax
        S = 2 * V + 1
        moves = self._move_table()
        x, y = states[:, 0], states[:, 1]
        if not len(states) or states.dtype != np.int64:
            return move(self.track, states, np.stack([vx, vy], axis=1))
        tabled = _on_map(states, H, W) and -V <= vx.min() and vx.max() <= V and -V <= vy.min() and vy.max() <= V
        if not tabled:  # some moves are beyond the table (or start off the map): those are checked cell by cell
            inside = _in_range(x, W) & _in_range(y, H) & (np.abs(vx) <= V) & (np.abs(vy) <= V)
            out = np.empty_like(states)
            slow = ~inside
            out[slow] = move(self.track, states[slow], np.stack([vx[slow], vy[slow]], axis=1))
            fast = np.flatnonzero(inside)
            out[fast] = self._move(states[fast], vx[fast], vy[fast])
            return out
        idx = y * (W * S * S)
        idx += x * (S * S)
        vx *= S
        idx += vx
        idx += vy
        idx += V * S + V
        return moves.take(idx, axis=0, mode="clip")  # the indices are in range (checked above)

    def _move_table(self) -> np.ndarray:
        """``(H * W * (2V + 1)**2, 5)`` int64 successor states of the move from every cell (row-major) with every
        velocity ``|vx|, |vy| <= V`` (row ``((cell * (2V+1)) + vx + V) * (2V+1) + vy + V``), computed by
        :func:`move` once per map."""
        if self._moves is None:
            H, W, V = self.track.height, self.track.width, self._vmax
            key = (self.track.grid.tobytes(), H, W, V)
            if key not in _MOVE_TABLES:
                cell, vx, vy = np.meshgrid(np.arange(H * W), np.arange(-V, V + 1), np.arange(-V, V + 1), indexing="ij")
                states = np.zeros((cell.size, 5), dtype=np.int64)
                states[:, 0], states[:, 1] = cell.reshape(-1) % W, cell.reshape(-1) // W
                if len(_MOVE_TABLES) >= 8:
                    _MOVE_TABLES.pop(next(iter(_MOVE_TABLES)))
                _MOVE_TABLES[key] = move(self.track, states, np.stack([vx.reshape(-1), vy.reshape(-1)], axis=1))
            self._moves = _MOVE_TABLES[key]
        return self._moves

    def self_loops(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: the action surely leads back to the same state (standing still, no acceleration).

        At velocity 0 with acceleration (0, 0) the velocity stays 0 whether or not the action fails.
        """
        out = _STANDS.take(actions)
        out &= states[:, 2] == 0
        out &= states[:, 3] == 0
        return out

    def label(self, name: str, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: ``goal``, ``crashed`` or ``driving``."""
        status = states[:, 4]
        if name == "goal":
            return status == AT_GOAL
        if name == "crashed":
            return status == CRASHED
        if name == "driving":
            return status == DRIVING
        raise PropertyError(
            f'unknown label "{name}"{did_you_mean(name, self.labels)}; Racetrack labels: '
            + ", ".join(f'"{lab}"' for lab in self.labels)
        )

    def terminal(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: the run has ended (goal or crash); the simulator stops such runs."""
        return states[:, 4] != DRIVING


def _on_map(states: np.ndarray, H: int, W: int) -> bool:
    """Whether every ``(N, 5)`` int64 state's position is on the ``H x W`` map (two reductions)."""
    if states.dtype != np.int64:
        return False
    return not len(states) or (states[:, 0].view(np.uint64).max() < W and states[:, 1].view(np.uint64).max() < H)


def _in_range(a: np.ndarray, n: int) -> np.ndarray:
    """``(N,)`` bool ``0 <= a < n`` (for int64 ``a``: one unsigned comparison)."""
    if a.dtype == np.int64:
        return a.view(np.uint64) < np.uint64(n)
    return (a >= 0) & (a < n)
