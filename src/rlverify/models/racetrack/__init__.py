"""Racetrack (the DSMC case study): maps, a vectorised numpy environment, and the explicit MDP for Storm."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.models.racetrack.env import ACCELERATIONS, ACTIONS, FEATURES, LABELS, RacetrackEnv, move
    from rlverify.models.racetrack.explicit import RacetrackMDP, build_racetrack_mdp, pmax_goal
    from rlverify.models.racetrack.track import FREE, GOAL, START, WALL, Track, TrackError, load_track, parse_track

__all__ = [
    "ACCELERATIONS",
    "ACTIONS",
    "FEATURES",
    "FREE",
    "GOAL",
    "LABELS",
    "START",
    "WALL",
    "RacetrackEnv",
    "RacetrackMDP",
    "Track",
    "TrackError",
    "build_racetrack_mdp",
    "load_track",
    "move",
    "parse_track",
    "pmax_goal",
]

lazy_exports(
    __name__,
    {
        "rlverify.models.racetrack.env": "ACCELERATIONS ACTIONS FEATURES LABELS RacetrackEnv move",
        "rlverify.models.racetrack.explicit": "RacetrackMDP build_racetrack_mdp pmax_goal",
        "rlverify.models.racetrack.track": "FREE GOAL START WALL Track TrackError load_track parse_track",
    },
)
