"""Racetrack maps: the ``.track`` text format and its parser.

Format (as in the ``racetrack`` package by Köhl & Klauck)::

    dim: ROWS COLS
    <ROWS lines of COLS characters: 'x' wall, '.' free, 's' start, 'g' goal>

Coordinates: ``x`` is the column (0 = left), ``y`` the row (0 = top line of the map).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlverify.errors import TrackError

#: Cell codes of :attr:`Track.grid`.
FREE, WALL, START, GOAL = 0, 1, 2, 3
_CODES = {".": FREE, "x": WALL, "s": START, "g": GOAL}
_DIM = re.compile(r"^dim:\s*(\S+)\s+(\S+)\s*$")


@dataclass(frozen=True)
class Track:
    """A Racetrack map.

    Attributes:
        name: where the map came from (file name or ``"<string>"``).
        grid: ``(rows, cols)`` uint8 cell codes (:data:`FREE`, :data:`WALL`, :data:`START`, :data:`GOAL`).
    """

    name: str
    grid: np.ndarray

    @property
    def height(self) -> int:
        return int(self.grid.shape[0])

    @property
    def width(self) -> int:
        return int(self.grid.shape[1])

    def cells(self, code: int) -> np.ndarray:
        """``(K, 2)`` int64 ``(x, y)`` of the cells with ``code``, in row-major order."""
        ys, xs = np.nonzero(self.grid == code)
        return np.stack([xs, ys], axis=1).astype(np.int64)

    @property
    def starts(self) -> np.ndarray:
        """``(K, 2)`` ``(x, y)`` of the start cells ('s')."""
        return self.cells(START)

    @property
    def goals(self) -> np.ndarray:
        """``(K, 2)`` ``(x, y)`` of the goal cells ('g')."""
        return self.cells(GOAL)

    def free_cells(self) -> np.ndarray:
        """``(K, 2)`` ``(x, y)`` of every cell a run can start from: free and start cells (not walls, not goals)."""
        ys, xs = np.nonzero((self.grid == FREE) | (self.grid == START))
        return np.stack([xs, ys], axis=1).astype(np.int64)


def parse_track(text: str, *, source: str = "<string>") -> Track:
    """Parse the ``.track`` format.

    Raises:
        TrackError: naming ``source``, the line and the column of the first problem.
    """
    lines = text.splitlines()
    if not lines:
        raise TrackError(f"{source}: line 1, column 1: empty track file (expected 'dim: ROWS COLS')")
    rows, cols = _dims(lines[0], source)
    body = _map_rows(lines[1:], rows, source)
    grid = np.empty((rows, cols), dtype=np.uint8)
    for i, raw in enumerate(body):
        _parse_row(raw, i, grid, source)
    if not (grid == GOAL).any():
        raise TrackError(f"{source}: line 2, column 1: the map has no goal cell ('g')")
    if not ((grid == FREE) | (grid == START)).any():
        raise TrackError(f"{source}: line 2, column 1: the map has no free cell to start from")
    return Track(name=source, grid=grid)


def _dims(first: str, source: str) -> tuple[int, int]:
    """``(rows, cols)`` of the ``dim: ROWS COLS`` line."""
    m = _DIM.match(first.rstrip())
    if not m:
        raise TrackError(f"{source}: line 1, column 1: expected 'dim: ROWS COLS', got {first[:40]!r}")
    dims = []
    for group, what in ((1, "ROWS"), (2, "COLS")):
        tok = m.group(group)
        if not tok.isdigit() or int(tok) <= 0:
            col = m.start(group) + 1
            raise TrackError(f"{source}: line 1, column {col}: {what} must be a positive integer, got {tok!r}")
        dims.append(int(tok))
    return dims[0], dims[1]


def _map_rows(body: list[str], rows: int, source: str) -> list[str]:
    """The map's lines (trailing blank lines dropped): exactly ``rows`` of them."""
    body = list(body)
    while body and not body[-1].strip():
        body.pop()
    if len(body) < rows:
        raise TrackError(
            f"{source}: line {len(body) + 2}, column 1: expected {rows} map rows after the 'dim' line, found {len(body)}"
        )
    if len(body) > rows:
        raise TrackError(f"{source}: line {rows + 2}, column 1: more map rows than the {rows} declared in line 1")
    return body


def _parse_row(raw: str, i: int, grid: np.ndarray, source: str) -> None:
    """Map row ``i`` (file line ``i + 2``) into ``grid[i]``: known cells, exactly ``cols`` of them."""
    cols = grid.shape[1]
    line_no = i + 2
    line = raw.rstrip("\r\n").rstrip()
    for j, ch in enumerate(line[:cols]):
        code = _CODES.get(ch)
        if code is None:
            raise TrackError(
                f"{source}: line {line_no}, column {j + 1}: unknown cell {ch!r} "
                "(expected 'x' wall, '.' free, 's' start or 'g' goal)"
            )
        grid[i, j] = code
    if len(line) != cols:
        col = min(len(line), cols) + 1
        raise TrackError(
            f"{source}: line {line_no}, column {col}: row has {len(line)} cells, expected {cols} (from the 'dim' line)"
        )


def load_track(path: str | Path) -> Track:
    """Read and parse a ``.track`` file (see :func:`parse_track`)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise TrackError(f"{path}: cannot read track file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise TrackError(f"{path}: not a text file ({exc.reason} at byte {exc.start}); expected a .track map") from None
    return parse_track(text, source=str(path))
