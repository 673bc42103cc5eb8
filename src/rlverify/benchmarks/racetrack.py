"""Racetrack benchmarks (DSMC, Gros et al. 2020): Barto-small, Barto-big and Ring as native vectorised environments.

Description:
    A car drives on a grid map from the start line to the goal line. Each step it accelerates by
    ``(ax, ay) in {-1, 0, 1}^2``; with probability ``noise`` (default 0.2, as in the DSMC paper)
    the action fails and the velocity stays. The move is checked cell by cell; touching a wall or
    leaving the map is a crash, touching a goal cell reaches the goal (see
    :mod:`rlverify.models.racetrack.env`).
State:
    ``(x, y, vx, vy)``; policy features: the 15 integers of the DSMC paper (position, velocity,
    wall distance in 8 directions, offset and Manhattan distance to the nearest goal).
Actions:
    9 accelerations ``ax-1_ay-1`` ... ``ax+1_ay+1``.
Labels / failure:
    ``"goal"``, ``"crashed"``, ``"driving"``; properties ``goal`` = ``P=? [!"crashed" U "goal"]``,
    ``crash`` = ``P=? [F "crashed"]``, ``reach`` = ``P=? [F "goal"]``.
Initial states:
    Uniformly one of the start cells ('s') at velocity 0; heat maps start from every free cell.
Reference results:
    Storm's optimal ``Pmax=? [F "goal"]`` from the start line at noise 0.1 on Barto-small is about
    0.9999 on the explicit MDP (no intermediate states).
    Reference policies (``rlverify train BENCHMARK --seed 0`` reproduces them; 15-64-64-9 ReLU,
    outputs declared ``q-values``: greedy), goal rate of 2,000 simulated runs at noise 0.2 from the
    start line / from random free cells (their ONNX metadata has the details):
    Barto-small 0.927 / 0.681 (600k steps, 50 s); Barto-big 0.903 / 0.914 and Ring 0.908 / 0.879
    (6M steps, potential-based shaping by goal distance, 11 min each on 2 shared cores).
    Barto-small heat map (every free cell, 18,445 runs each): mean goal 0.68, mean crash 0.035;
    the rest stand still (decided at once, never the goal); Storm's optimum averages 0.999.

Maps: MIT licence, from the ``racetrack`` package (Köhl & Klauck, Saarland University); see
``data/tracks/LICENSE``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlverify.benchmarks.registry import BenchmarkError, BenchmarkSpec, Built, Parameter, data_path, make, register
from rlverify.errors import did_you_mean

PROPERTIES = {
    "goal": 'P=? [!"crashed" U "goal"]',
    "crash": 'P=? [F "crashed"]',
    "reach": 'P=? [F "goal"]',
}

#: benchmark id -> (track file, reference policy file), both package data.
MAPS = {
    "racetrack-barto-small-v1": ("barto-small.track", "racetrack_barto_small.onnx"),
    "racetrack-barto-big-v1": ("barto-big.track", "racetrack_barto_big.onnx"),
    "racetrack-ring-v1": ("ring.track", "racetrack_ring.onnx"),
}

_SPECS: dict[str, BenchmarkSpec] = {}


def track_path(benchmark_id: str) -> Path:
    """The ``.track`` file of a Racetrack benchmark."""
    return data_path(f"tracks/{_map(benchmark_id)[0]}")


def policy_path(benchmark_id: str) -> Path:
    """The shipped DQN reference policy (ONNX) of a Racetrack benchmark."""
    return data_path(f"policies/{_map(benchmark_id)[1]}")


def _map(benchmark_id: str) -> tuple[str, str]:
    try:
        return MAPS[benchmark_id]
    except KeyError:
        raise BenchmarkError(
            f"unknown Racetrack benchmark '{benchmark_id}'{did_you_mean(benchmark_id, MAPS)}; known: {', '.join(MAPS)}"
        ) from None


def _entry(benchmark_id: str) -> Any:
    def make(noise: float = 0.2) -> Built:
        def env() -> Any:
            from rlverify.models.racetrack import RacetrackEnv, load_track

            return RacetrackEnv(load_track(track_path(benchmark_id)), noise=noise, name=f"{benchmark_id} (noise {noise:g})")

        return Built(model=env, policies={"dqn": f"policies/{MAPS[benchmark_id][1]}"})

    return make


def make_racetrack(benchmark_id: str, **params: Any) -> Any:
    """The :class:`~rlverify.models.racetrack.RacetrackEnv` of a Racetrack benchmark
    (``rlverify.benchmarks.make(benchmark_id, **params).model()``)."""
    _map(benchmark_id)
    return make(benchmark_id, **params).model()


for _id in MAPS:
    _SPECS[_id] = register(
        BenchmarkSpec(
            id=_id,
            kind="native",
            entry_point=_entry(_id),
            parameters={"noise": Parameter(0.2, 0.0, 0.99, "probability that an acceleration fails (velocity unchanged)")},
            properties=dict(PROPERTIES),
            policies={"dqn": f"policies/{MAPS[_id][1]}"},
            doc=__doc__ or "",
        )
    )
