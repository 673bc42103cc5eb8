"""The Ray backend gives the same results as the local backend, bit for bit, for the same seed.

Real Ray throughout (no mocks): a Ray runtime started in this process with 2 CPUs (shared by the
tests of this module), and a real two-node cluster on loopback (``ray start --head`` plus a worker
node, each with one CPU, in their own process groups, stopped by the fixture). The reference for
every comparison is the same computation on the local backend (this process, one task at a time).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import ray

from rlverify.abstraction import AbstractionOptions, verify_abstraction
from rlverify.backends import BackendError, BackendOptions, open_backend
from rlverify.benchmarks.registry import make
from rlverify.cli.main import main
from rlverify.errors import OptionError
from rlverify.resolve import EnvironmentTarget, ModelTarget, resolve
from rlverify.statistical.engine import SimulationOptions
from rlverify.statistical.heatmap import heatmap
from rlverify.statistical.verify import StatisticalOptions, verify_statistical
from tests.envelope import error_envelope
from tests.small_models import UP_STAY

RAY = BackendOptions(kind="ray")
GOAL = 'P=? [!"crashed" U "goal"]'
#: Ray's token authentication off for the loopback cluster (its processes and drivers), as on a private network
NO_AUTH = {"RAY_AUTH_MODE": "disabled"}


def short_temp_dir(prefix: str) -> str:
    """A short directory for Ray's session files (Unix socket paths are limited to 107 characters)."""
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


@pytest.fixture(scope="module")
def ray_runtime():
    """A Ray runtime in this process, limited to 2 CPUs; shut down (its processes end) after the module."""
    temp = short_temp_dir("rlr")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def racetrack():
    return resolve("racetrack-barto-small-v1", kinds=(EnvironmentTarget,), property=GOAL, command="test")


def same_statistical(a, b) -> None:
    for field in (
        "estimate",
        "interval",
        "runs",
        "successes",
        "undecided",
        "stalled",
        "decisions",
        "decision",
        "satisfied",
        "seed",
        "method",
    ):
        assert getattr(a, field) == getattr(b, field), field


@pytest.mark.parametrize("method", ["okamoto", "adaptive", "sprt"])
def test_statistical_results_identical_to_local(ray_runtime, racetrack, method):
    """Fixed-size (okamoto), adaptive and sequential (SPRT) stopping: the same runs, counts and stopping point.

    The adaptive rule stops inside the second round of tasks here (262 of 738 planned runs, tasks of 93 runs),
    the SPRT inside the first task: the rounds are read in run order, so the stop is the local one.
    """
    sim = SimulationOptions(seed=3, batch_size=300, max_steps=200)
    kw = dict(method=method, epsilon=0.05, simulation=sim)
    if method == "sprt":
        kw.update(threshold=0.9, indifference=0.05)
    local = verify_statistical(racetrack.model, racetrack.property, racetrack.policy, StatisticalOptions(**kw))
    seen = []
    distributed = verify_statistical(
        racetrack.model,
        racetrack.property,
        racetrack.policy,
        StatisticalOptions(**kw, backend=RAY),
        progress=lambda d, t: seen.append((d, t)),
    )
    same_statistical(local, distributed)
    assert distributed.settings["backend"]["kind"] == "ray" and distributed.settings["backend"]["workers"] == 2
    assert local.settings["backend"]["kind"] == "local"
    assert 0 < local.runs and (method == "okamoto") == (local.runs == 738)
    assert seen and seen[-1][0] == distributed.runs  # progress aggregated over the tasks


def test_prism_model_and_its_policy_are_shipped(ray_runtime):
    """A PRISM model (the explicit MDP Storm built) and an ONNX policy travel to the workers: same result."""
    target = resolve("avoid-v1", kinds=(ModelTarget, EnvironmentTarget), property="collision-100", command="test")
    opts = dict(method="clopper-pearson", runs=400, simulation=SimulationOptions(seed=5, batch_size=120))
    local = verify_statistical(target.model, target.property, target.policy, StatisticalOptions(**opts))
    distributed = verify_statistical(target.model, target.property, target.policy, StatisticalOptions(**opts, backend=RAY))
    same_statistical(local, distributed)
    assert 0 < local.successes < local.runs  # collisions happen and not always: the comparison can tell


def test_heatmap_arrays_identical_to_local(ray_runtime, racetrack):
    env = racetrack.model
    cells = env.track.free_cells()[:10]
    opts = dict(method="clopper-pearson", runs=40, simulation=SimulationOptions(seed=8, batch_size=100, max_steps=200))
    local = heatmap(env, racetrack.policy, StatisticalOptions(**opts), cells=cells)
    distributed = heatmap(env, racetrack.policy, StatisticalOptions(**opts, backend=RAY), cells=cells)
    for field in ("goal", "crash", "goal_interval", "crash_interval", "runs", "undecided", "stalled", "cells"):
        assert np.array_equal(getattr(local, field), getattr(distributed, field)), field
    assert local.decisions == distributed.decisions
    assert len(np.unique(local.goal)) > 1  # cells differ: a shuffled cell order would be noticed


def test_abstraction_bound_identical_to_local(ray_runtime):
    system = make("acc-v1")
    opts = dict(horizon=3, domain="octagon", phi=0.5, containment=True, seed=4, chunk=4)
    local = verify_abstraction(system.model(), system.policies["ppo"], AbstractionOptions(**opts))
    distributed = verify_abstraction(system.model(), system.policies["ppo"], AbstractionOptions(**opts, backend=RAY))
    for field in (
        "upper_bound",
        "maxmin_value",
        "parts",
        "n_abstract_states",
        "n_polyhedra",
        "n_choices",
        "n_transitions",
        "n_shared_successors",
        "n_containment_merges",
    ):
        assert getattr(local, field) == getattr(distributed, field), field
    assert local.n_abstract_states > 3 * opts["chunk"]  # the frontiers were cut into several tasks


def test_worker_errors_are_the_users_errors(ray_runtime):
    """Bad input found inside a task is raised as the same error as locally (not a Ray traceback)."""
    from rlverify.backends import LOCAL, RayBackend
    from rlverify.statistical.stats import StatisticsError, check_unit

    for backend in (LOCAL, RayBackend(RAY)):
        with pytest.raises(StatisticsError, match=r"epsilon must be in the open interval \(0, 1\), got 2.0"):
            backend.map(check_unit, backend.share("epsilon"), [(0.5,), (2.0,)])
        assert backend.map(check_unit, backend.share("delta"), [(0.25,), (0.5,)]) == [0.25, 0.5]


def test_the_tasks_abandoned_after_a_users_error_log_no_remote_tracebacks():
    """Eight tasks that all fail, in a fresh process that starts its own Ray: the first error to arrive is raised; the
    others, abandoned, are not logged by Ray as "Unhandled error" with their remote tracebacks once their
    references go (they were, on stderr, after rlverify's one line)."""
    code = (
        "import gc, time\n"
        "from rlverify.backends import BackendOptions, open_backend\n"
        "from rlverify.statistical.stats import StatisticsError, check_unit\n"
        "backend = open_backend(BackendOptions(kind='ray', num_cpus=2))\n"
        "try:\n"
        "    backend.map(check_unit, backend.share('epsilon'), [(float(x),) for x in range(2, 10)])\n"
        "except StatisticsError as exc:\n"
        "    print('StatisticsError:', exc)\n"
        "gc.collect()\n"
        "time.sleep(3)  # Ray reports unfetched errors from its own thread\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.stdout.startswith("StatisticsError: epsilon must be in the open interval (0, 1), got "), res.stderr[-2000:]
    assert "Unhandled error" not in res.stderr and "File " not in res.stderr, res.stderr[-2000:]


# ------------------------------------------------------------------------------------ a real cluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen) -> None:
    """End a process started in its own session and everything it started (by process group id)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # Ray's daemons (gcs_server, raylet, workers) share the group
    except ProcessLookupError:
        pass
    proc.wait(timeout=15)


@pytest.fixture(scope="module")
def loopback_cluster():
    """A two-node Ray cluster on 127.0.0.1: a head and a worker node with one CPU each, as separate processes.

    Each ``ray start --block`` runs in its own process group; the fixture ends both groups by id.
    """
    ray_cli = str(Path(sys.executable).with_name("ray"))
    port = free_port()
    temp = short_temp_dir("rlc")
    env = {**os.environ, **NO_AUTH}
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"]
    procs = []
    try:
        procs.append(
            subprocess.Popen(
                [ray_cli, "start", "--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}", *common],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        procs.append(
            subprocess.Popen(
                [ray_cli, "start", f"--address=127.0.0.1:{port}", *common],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        deadline = time.monotonic() + 90
        while True:  # both nodes up: the cluster has 2 CPUs
            status = subprocess.run(
                [ray_cli, "status", f"--address=127.0.0.1:{port}"], env=env, capture_output=True, text=True, timeout=60
            )
            if "/2.0 CPU" in status.stdout:
                break
            assert all(p.poll() is None for p in procs), "a Ray node exited while starting"
            assert time.monotonic() < deadline, f"the loopback cluster did not come up:\n{status.stdout}{status.stderr}"
            time.sleep(2)
        yield f"127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            stop_group(p)
        shutil.rmtree(temp, ignore_errors=True)


def run_cli(args: list[str], *, timeout: float = 240, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlverify.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_cli_on_a_loopback_cluster_matches_local(loopback_cluster, capsys):
    """``rlverify simulate``, ``heatmap`` and ``abstract`` with ``--backend ray --address`` on the two-node cluster
    give the local results (the CLI run here in this process with the default backend)."""
    sim = [
        "simulate",
        "racetrack-barto-small-v1",
        "-p",
        GOAL,
        "--epsilon",
        "0.05",
        "--batch-size",
        "300",
        "--max-steps",
        "200",
        "--seed",
        "3",
        "--json",
    ]
    heat = [
        "heatmap",
        "racetrack-barto-small-v1",
        "--runs",
        "30",
        "--batch-size",
        "400",
        "--max-steps",
        "200",
        "--seed",
        "2",
        "--json",
    ]
    abstract = [
        "abstract",
        "acc-v1",
        "-k",
        "3",
        "--domain",
        "octagon",
        "--phi",
        "0.5",
        "--containment",
        "--seed",
        "4",
        "--json",
    ]
    sim_keys = ("estimate", "interval", "runs", "successes", "undecided", "stalled", "decisions")
    abstract_keys = ("upper_bound", "parts", "n_abstract_states")
    for args, keys in ((sim, sim_keys), (heat, ("cells", "decisions")), (abstract, abstract_keys)):
        remote = run_cli([*args, "--backend", "ray", "--address", loopback_cluster], env=NO_AUTH)
        assert remote.returncode == 0, remote.stderr[-3000:]
        assert main(args) == 0
        local = json.loads(capsys.readouterr().out)["result"]
        got = json.loads(remote.stdout)["result"]
        for key in keys:
            assert got[key] == local[key], key
        if args is sim:
            assert got["settings"]["backend"]["kind"] == "ray" and local["settings"]["backend"]["kind"] == "local"
    assert json.loads(remote.stdout)["result"]["options"]["backend"]["address"] == loopback_cluster


def test_cli_starts_its_own_ray_runtime(capsys):
    """``--backend ray`` without ``--address`` in a fresh process: Ray is started there (and ends with it)."""
    args = ["abstract", "acc-v1", "-k", "2", "--domain", "octagon", "--phi", "0.5", "--seed", "1", "--json"]
    remote = run_cli([*args, "--backend", "ray"])
    assert remote.returncode == 0, remote.stderr[-3000:]
    assert main(args) == 0
    local = json.loads(capsys.readouterr().out)["result"]
    got = json.loads(remote.stdout)["result"]
    assert (got["upper_bound"], got["parts"]) == (local["upper_bound"], local["parts"])
    assert got["options"]["backend"]["kind"] == "ray" and local["options"]["backend"]["kind"] == "local"


# ---------------------------------------------------------------------------------------------- bad input


def test_backend_ray_without_the_extra_names_it(tmp_path):
    """A real failed import: a package ``ray`` on PYTHONPATH whose import raises ImportError."""
    shim = tmp_path / "shim" / "ray"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("ray is hidden by the test")\n')
    res = run_cli(
        ["heatmap", "racetrack-barto-small-v1", "--json", "--backend", "ray"],
        timeout=120,
        env={"PYTHONPATH": str(shim.parent)},
    )
    assert res.returncode == 2, res.stderr
    assert "pip install 'rlverify[ray]'" in res.stderr and "Traceback" not in res.stderr


def test_unreachable_address_fails_fast_with_exit_2():
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    res = run_cli(["abstract", "acc-v1", "-k", "1", "--backend", "ray", "--address", f"127.0.0.1:{port}"], timeout=120)
    assert res.returncode == 2, res.stderr
    assert f"127.0.0.1:{port}" in res.stderr and "cannot reach a Ray head node" in res.stderr
    assert "Traceback" not in res.stderr
    assert time.monotonic() - t0 < 60


def test_silent_address_fails_after_a_bounded_wait():
    """A port that accepts TCP connections but never speaks Ray: Ray's own waits are bounded by connect_timeout."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # the kernel completes the handshakes; nobody answers
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        code = (
            "from rlverify.backends import BackendError, BackendOptions, open_backend\n"
            "try:\n"
            f"    open_backend(BackendOptions(kind='ray', address='{address}', connect_timeout=2))\n"
            "except BackendError as exc:\n"
            "    print('BackendError:', exc)\n"
        )
        t0 = time.monotonic()
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - t0
    assert f"BackendError: --address {address}: no Ray cluster answered" in res.stdout, res.stdout + res.stderr[-2000:]
    assert elapsed < 60


@pytest.mark.parametrize(
    "options,message",
    [
        (BackendOptions(kind="spark"), "--backend: expected one of local, ray, got 'spark'"),
        (BackendOptions(address="10.0.0.5:6379"), "an address is used with --backend ray only"),
        (BackendOptions(kind="ray", address="10.0.0.5"), "expected 'auto' or HOST:PORT"),
        (BackendOptions(kind="ray", address="head:99999"), "expected 'auto' or HOST:PORT"),
        (BackendOptions(kind="ray", connect_timeout=0), "connect_timeout"),
    ],
    ids=["unknown-kind", "address-without-ray", "no-port", "bad-port", "timeout"],
)
def test_bad_backend_options_are_named(options, message):
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace("'", "'")):
        open_backend(options)


def test_address_without_ray_backend_on_the_cli(capsys):
    assert main(["abstract", "acc-v1", "-k", "1", "--address", "127.0.0.1:6379"]) == 2
    assert "--address 127.0.0.1:6379: an address is used with --backend ray only" in capsys.readouterr().err


def test_unknown_host_is_named():
    with pytest.raises(BackendError, match=r"unknown host 'no-such-host\.invalid'"):
        open_backend(BackendOptions(kind="ray", address="no-such-host.invalid:6379", connect_timeout=2))


def test_an_object_that_cannot_be_shipped_is_named(ray_runtime):
    """A TorchScript module cannot be pickled: the error says so and what to do, instead of Ray's traceback."""
    torch = pytest.importorskip("torch")  # the torch extra; the error path itself needs no torch
    from rlverify.backends import RayBackend

    with pytest.raises(BackendError, match=r"cannot ship this job to Ray workers.*export.*ONNX"):
        RayBackend(RAY).share(torch.jit.script(torch.nn.Linear(2, 2)))


# ------------------------------------------------------------------------------------------ Ray failing

KILLER_POLICY = """
import os, signal, time
import numpy as np
FEATURES = ["x"]
ACTIONS = ["up", "stay"]
DRIVER = os.getpid()
TARGET = {target!r}


def raylet():
    # the raylet's pid, or None once it is gone (another task killed it first)
    pid = int(os.environ["RAY_RAYLET_PID"])  # set by Ray in its workers (they share the raylet's fate)
    with open(f"/proc/{{pid}}/cmdline", "rb") as f:
        name = f.read().split(b"\\0")[0]
    assert not name or b"raylet" in name, "RAY_RAYLET_PID is not a raylet"
    return pid if name else None


def pi(s):
    if os.getpid() != DRIVER:  # in a Ray worker: kill it, or the raylet that started it
        pid = os.getpid() if TARGET == "worker" else raylet()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        time.sleep(120)  # the worker ends with its raylet
    return np.tile([0.9, 0.1], (len(s), 1))
"""

SMALL_MODEL = UP_STAY


@pytest.mark.slow
@pytest.mark.parametrize(
    "target,cause",
    [
        ("worker", "a Ray worker process died while running a task, and again on each of its retries"),
        ("raylet", "the Ray runtime failed while running tasks (LocalRayletDiedError"),
    ],
)
def test_a_dying_worker_or_raylet_is_one_line_and_stdout_stays_clean(tmp_path, target, cause):
    """A real local Ray runtime whose worker is killed on every try (or whose raylet is killed): exit 2 with one line
    naming what happened, no traceback; Ray's messages (8 KB of raylet logs) never reach stdout. (Once the node of a
    killed raylet was declared dead, Ray ended the driver with exit code 1, before or after rlverify reported.)"""
    model, policy = tmp_path / "m.prism", tmp_path / "killer.py"
    model.write_text(SMALL_MODEL)
    policy.write_text(KILLER_POLICY.format(target=target))
    res = run_cli(
        [
            "simulate",
            str(model),
            "-p",
            'P=? [F "top"]',
            "--policy",
            f"{policy}:pi",
            "--runs",
            "100",
            "--backend",
            "ray",
            "--json",
        ],
        timeout=300,
        env={"RAY_num_cpus": "1"},
    )
    assert res.returncode == 2, res.stderr[-3000:]
    assert error_envelope(res.stdout)
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and cause in errors[0], res.stderr[-3000:]
    assert "Traceback" not in res.stderr


def test_the_raylet_watched_while_tasks_run_is_this_runtimes(ray_runtime):
    """The fast part of the raylet test above: the process the backend watches is the raylet Ray started here (its
    pid from Ray's own record of the processes it started), and a killed process that is not yet reaped counts as
    dead (a killed raylet is a zombie until Ray reaps it)."""
    from ray._private import ray_constants
    from ray._private.worker import _global_node

    from rlverify.backends import _alive, _local_raylet

    started = _global_node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process
    watched = _local_raylet(ray_runtime)
    assert watched is not None and watched.pid == started.pid and _alive(watched)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import psutil

        proc = psutil.Process(child.pid)
        assert _alive(proc)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while proc.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(proc)  # not reaped yet (no wait()): a zombie is not alive
    finally:
        child.kill()
        child.wait()
    assert not _alive(proc)  # reaped: gone


@pytest.mark.slow
def test_a_head_that_requires_a_token_is_named(tmp_path):
    """A real head started with token authentication: joining it without the token says so (not 'no cluster')."""
    ray_cli = str(Path(sys.executable).with_name("ray"))
    port = free_port()
    temp = short_temp_dir("rla")
    token = "rlverify-test-token-0123456789abcdef"
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    env.pop("RAY_AUTH_TOKEN_PATH", None)
    head = subprocess.Popen(
        [
            ray_cli,
            "start",
            "--head",
            f"--port={port}",
            "--include-dashboard=false",
            f"--temp-dir={temp}",
            "--num-cpus=1",
            "--node-ip-address=127.0.0.1",
            "--disable-usage-stats",
            "--block",
        ],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while True:  # the head is up when it answers its owner (with the token)
            status = subprocess.run(
                [ray_cli, "status", f"--address=127.0.0.1:{port}"], env=env, capture_output=True, text=True, timeout=60
            )
            if "1.0 CPU" in status.stdout:
                break
            assert head.poll() is None, "the Ray head exited while starting"
            assert time.monotonic() < deadline, f"the Ray head did not come up:\n{status.stdout}{status.stderr}"
            time.sleep(2)
        res = run_cli(
            ["abstract", "acc-v1", "-k", "1", "--backend", "ray", "--address", f"127.0.0.1:{port}", "--json"],
            timeout=120,
            env={"RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN": "", "HOME": str(tmp_path)},
        )
        assert res.returncode == 2, res.stderr[-3000:]
        assert error_envelope(res.stdout)
        assert f"--address 127.0.0.1:{port}: the Ray cluster there requires authentication" in res.stderr
        assert "RAY_AUTH_TOKEN" in res.stderr and "no Ray cluster answered" not in res.stderr
        assert "Traceback" not in res.stderr
    finally:
        stop_group(head)
        shutil.rmtree(temp, ignore_errors=True)
