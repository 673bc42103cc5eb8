"""The Gymnasium episode simulator on Ray (a runtime in this process, 2 CPUs, loopback) gives the local backend's
estimate and counts bit for bit: episode ``i`` depends on the seed and ``i`` alone, not on the worker."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from rlverify.backends import BackendOptions
from rlverify.resolve import resolve
from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.verify import StatisticalOptions, verify_statistical
from tests.gym_fixtures import CARTPOLE_POLICIES

ray = pytest.importorskip("ray")

FIELDS = ("estimate", "interval", "runs", "successes", "undecided", "stalled", "decisions", "seed", "method")


@pytest.fixture(scope="module")
def ray_runtime():
    temp = tempfile.mkdtemp(prefix="rlg", dir="/tmp")  # short: Unix socket paths are limited to 107 characters
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("vectorization", ["native", "sync"])
@pytest.mark.parametrize("method", ["clopper-pearson", "adaptive"])
def test_ray_gives_the_local_result(ray_runtime, tmp_path, vectorization, method):
    path = tmp_path / "cartpole.py"
    path.write_text(CARTPOLE_POLICIES)
    t = resolve(
        "gym:CartPole-v1",
        policy=f"{path}:soft",
        property='P=? [F<=80 "terminated"]',
        vectorization=vectorization,
        command="test",
    )
    sim = SimulationOptions(seed=13, mode="stochastic", batch_size=50)
    kw = {"runs": 400} if method == "clopper-pearson" else {"epsilon": 0.1}
    local = verify_statistical(t.model, t.property, t.policy, StatisticalOptions(method=method, simulation=sim, **kw))
    remote = verify_statistical(
        t.model,
        t.property,
        t.policy,
        StatisticalOptions(method=method, simulation=sim, backend=BackendOptions(kind="ray"), **kw),
    )
    for field in FIELDS:
        assert getattr(remote, field) == getattr(local, field), field
    assert remote.settings["backend"]["kind"] == "ray" and local.settings["backend"]["kind"] == "local"
    assert 0 < local.successes < local.runs
