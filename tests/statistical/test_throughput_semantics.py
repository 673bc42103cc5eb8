"""The fast simulation path computes what the plain one does (issue 14, item 3).

Each fast piece is checked against an independent computation: the table-driven Racetrack step against
the cell-by-cell :func:`~rlverify.models.racetrack.move`, its observations against features computed by
walking the grid in Python, the lockstep simulator against a one-run-at-a-time Python loop with the same
counter-based random numbers, the fused policy choice against sampling from ``action_probabilities``,
the in-place random numbers against SplitMix64 in Python integers, the fast distribution check against
an explicit per-row check.
"""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

from rlverify.errors import OptionError, PolicyError
from rlverify.models.racetrack import ACCELERATIONS, ACTIONS, FEATURES, RacetrackEnv, move, parse_track
from rlverify.models.racetrack.env import DIRECTIONS
from rlverify.models.racetrack.track import GOAL, WALL
from rlverify.policies import MLP, CallablePolicy, OnnxPolicy, save_mlp_onnx, validate_probabilities
from rlverify.statistical import SimulationOptions, simulate
from rlverify.statistical.engine import SATISFIED, UNDECIDED, VIOLATED, choose_actions
from rlverify.statistical.properties import parse_path_property
from rlverify.statistical.rng import run_keys, seed_key, uniforms

TRACK = """dim: 7 12
xxxxxxxxxxxx
x...x......x
xs..x..xx.gx
xs.....xx.gx
xs..........
x......x...x
xxxxxxxxxxxx
"""


@pytest.fixture(scope="module")
def env():
    return RacetrackEnv(parse_track(TRACK), noise=0.25)


@pytest.fixture(scope="module")
def net_file(tmp_path_factory):
    """A random 15-64-64-9 Q-value network as a self-describing ONNX file."""
    path = tmp_path_factory.mktemp("net") / "q.onnx"
    return save_mlp_onnx(
        path, MLP.random([len(FEATURES), 64, 64, len(ACTIONS)], seed=4), features=FEATURES, actions=ACTIONS, output="q-values"
    )


class Plain:
    """A bare protocol object around a policy: the simulator takes its general path (float64 observations,
    ``action_probabilities``, its own distribution check, :func:`choose_actions`)."""

    def __init__(self, policy):
        self.features, self.actions, self._policy = policy.features, policy.actions, policy

    def action_probabilities(self, states):
        return self._policy.action_probabilities(np.asarray(states, dtype=np.float64))


# ------------------------------------------------------------------------------------------------
# Racetrack: table-driven step and observations


def test_step_matches_cell_by_cell_move(env):
    """Every cell (walls and off-map positions included), velocities up to 3 beyond the table, every action,
    failing or not: the table step gives :func:`move`'s successor."""
    H, W, V = env.track.height, env.track.width, env._vmax
    xs, ys, vxs, vys = np.meshgrid(
        np.arange(-1, W + 1), np.arange(-1, H + 1), np.arange(-V - 3, V + 4), np.arange(-V - 3, V + 4), indexing="ij"
    )
    states = np.zeros((xs.size, 5), dtype=np.int64)
    states[:, 0], states[:, 1], states[:, 2], states[:, 3] = xs.ravel(), ys.ravel(), vxs.ravel(), vys.ravel()
    rng = np.random.default_rng(0)
    for a in range(len(ACTIONS)):
        actions = np.full(len(states), a)
        u = rng.random(len(states))
        want = move(env.track, states, states[:, 2:4] + np.where((u < env.noise)[:, None], 0, ACCELERATIONS[actions]))
        assert np.array_equal(env.step(states, actions, u), want)
    on_table = (
        (np.abs(states[:, 2:4]) <= V - 1).all(axis=1)
        & (states[:, 0] >= 0)
        & (states[:, 0] < W)
        & (states[:, 1] >= 0)
        & (states[:, 1] < H)
    )
    inside = states[on_table]  # only table look-ups
    u = rng.random(len(inside))
    actions = rng.integers(0, len(ACTIONS), len(inside))
    want = move(env.track, inside, inside[:, 2:4] + np.where((u < env.noise)[:, None], 0, ACCELERATIONS[actions]))
    assert np.array_equal(env.step(inside, actions, u), want)


def python_features(track, x: int, y: int, vx: int, vy: int) -> list[float]:
    """The 15 features of the module docstring, computed by walking the grid cell by cell."""
    H, W = track.height, track.width

    def blocked(cx: int, cy: int) -> bool:
        return not (0 <= cx < W and 0 <= cy < H) or track.grid[cy, cx] == WALL

    walls = []
    for dx, dy in DIRECTIONS.values():
        k = 1
        while not blocked(x + k * dx, y + k * dy):
            k += 1
        walls.append(k)
    goals = [(gx, gy) for gy in range(H) for gx in range(W) if track.grid[gy, gx] == GOAL]  # row-major
    gx, gy = min(goals, key=lambda g: abs(g[0] - x) + abs(g[1] - y))  # min keeps the first of equals
    return [x, y, vx, vy, *walls, gx - x, gy - y, abs(gx - x) + abs(gy - y)]


def test_observations_match_features_walked_on_the_grid(env):
    H, W = env.track.height, env.track.width
    cells = [(x, y) for y in range(H) for x in range(W)]
    states = np.array([(x, y, (x % 5) - 2, (y % 3) - 1, 0) for x, y in cells], dtype=np.int64)
    want = np.array([python_features(env.track, *s[:4]) for s in states.tolist()], dtype=np.float64)
    assert np.array_equal(env.observe(states), want)
    buf = np.full((len(states), len(FEATURES)), np.nan, dtype=np.float32)
    assert env.observe(states, out=buf) is buf and np.array_equal(buf, want.astype(np.float32))
    off = np.array([[-3, 2, 1, 0, 0], [W + 4, H + 1, 0, 2, 2]], dtype=np.int64)  # clipped for the look-ups only
    got = env.observe(off)
    assert np.array_equal(got[:, :4], off[:, :4]) and np.array_equal(got[0, 4:], want[cells.index((0, 2)), 4:])


# ------------------------------------------------------------------------------------------------
# the simulator against a one-run-at-a-time loop


def reference_run(env, policy, run: int, *, seed: int, mode: str, max_steps: int, starts: np.ndarray):
    """Outcome and steps of run ``run`` of ``P=? [!"crashed" U "goal"]``, simulated alone in Python."""
    key = run_keys(seed_key(seed), np.array([run]))

    def u(step: int, stream: int) -> float:
        return float(uniforms(key, step, stream)[0])

    state = starts[min(int(u(-1, 2) * len(starts)), len(starts) - 1)].copy()
    for t in range(max_steps + 1):
        if state[4] == 1:
            return SATISFIED, t
        if state[4] == 2:
            return VIOLATED, t
        if t >= max_steps:
            return UNDECIDED, t
        p = policy.action_probabilities(env.observe(state[None]).astype(np.float64))[0]
        if mode == "deterministic":
            a = int(np.argmax(p))
        else:  # the first action whose cumulative probability exceeds u (never one of probability 0)
            cum, x = np.cumsum(p), u(t, 0) * np.sum(p)
            a = min(int((cum <= x).sum()), max(i for i in range(len(p)) if p[i] > 0))
        if (mode == "deterministic" or p[a] >= 1.0) and state[2] == state[3] == 0 and not ACCELERATIONS[a].any():
            return VIOLATED, t  # stands still forever
        v = state[2:4] + (0 if u(t, 1) < env.noise else ACCELERATIONS[a])
        state = move(env.track, state[None], v[None])[0]
    raise AssertionError("unreachable")


def steer(x: np.ndarray) -> np.ndarray:
    """Logits preferring the velocity (sign goal_dx, sign goal_dy): a car that often reaches the goal."""
    target = np.sign(x[:, 12:14])
    v = x[:, None, 2:4] + ACCELERATIONS[None, :, :]
    return -2.0 * np.abs(v - target[:, None, :]).sum(axis=2)


@pytest.mark.parametrize("mode", ["deterministic", "stochastic"])
@pytest.mark.parametrize("kind", ["onnx q-values", "numpy logits", "plain logits"])
def test_simulation_matches_one_run_at_a_time(env, net_file, mode, kind):
    if kind == "onnx q-values":
        policy = OnnxPolicy(net_file)  # a random network: runs crash, after different numbers of steps
    else:
        policy = CallablePolicy(steer, FEATURES, ACTIONS, output="logits")
        policy = Plain(policy) if kind == "plain logits" else policy
    prop = parse_path_property('P=? [!"crashed" U "goal"]', env.labels)
    starts = env.start_states(env.track.free_cells())
    runs = np.arange(40, 240)
    res = simulate(
        env, policy, prop, runs, starts=starts, options=SimulationOptions(mode=mode, max_steps=25, seed=11, batch_size=64)
    )
    want = [reference_run(env, policy, int(r), seed=11, mode=mode, max_steps=25, starts=starts) for r in runs]
    assert res.outcome.tolist() == [o for o, _ in want]
    assert res.steps.tolist() == [s for _, s in want]
    assert len(set(res.steps.tolist())) >= 3  # the runs do not all end alike
    if kind != "onnx q-values":
        assert {SATISFIED, VIOLATED} <= set(res.outcome.tolist())


def test_fused_path_equals_general_path(env, net_file):
    """The same runs through OnnxPolicy.choose (float32 buffer, runtime argmax) and through the general path."""
    prop = parse_path_property('P=? [F<=12 "goal"]', env.labels)
    fast = OnnxPolicy(net_file)
    for mode in ("deterministic", "stochastic"):
        opts = SimulationOptions(mode=mode, max_steps=40, seed=5, batch_size=1000)
        a = simulate(env, fast, prop, np.arange(3000), options=opts, record=("crashed",))
        b = simulate(env, Plain(fast), prop, np.arange(3000), options=opts, record=("crashed",))
        for field in ("outcome", "stalled", "steps"):
            assert np.array_equal(getattr(a, field), getattr(b, field))
        assert np.array_equal(a.recorded["crashed"], b.recorded["crashed"])


# ------------------------------------------------------------------------------------------------
# policies: fused choice, runtime argmax, distribution check


def tie_network(bias):
    """A 15-4-9 network whose outputs are ``bias`` whatever the input (zero last-layer weights)."""
    return MLP((np.ones((4, len(FEATURES))), np.zeros((len(ACTIONS), 4))), (np.zeros(4), np.asarray(bias, float)))


def test_choose_equals_sampling_from_action_probabilities(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(500, len(FEATURES))) * 5
    u = rng.random(500)
    ties = save_mlp_onnx(
        tmp_path / "ties.onnx",
        tie_network([1, 3, 3, 0, 3, -1, 2, 2, 0]),
        features=FEATURES,
        actions=ACTIONS,
        output="q-values",
    )
    random = save_mlp_onnx(
        tmp_path / "r.onnx",
        MLP.random([len(FEATURES), 16, len(ACTIONS)], seed=3),
        features=FEATURES,
        actions=ACTIONS,
        output="q-values",
    )
    mlp = MLP.random([len(FEATURES), 16, len(ACTIONS)], seed=3)
    # the same network declared as logits (an option may not contradict what a file declares)
    as_logits = save_mlp_onnx(
        tmp_path / "r_logits.onnx",
        MLP.random([len(FEATURES), 16, len(ACTIONS)], seed=3),
        features=FEATURES,
        actions=ACTIONS,
        output="logits",
    )
    policies = [
        OnnxPolicy(ties),
        OnnxPolicy(random),
        OnnxPolicy(as_logits),
        CallablePolicy(mlp, FEATURES, ACTIONS, output="q-values"),
        CallablePolicy(mlp, FEATURES, ACTIONS, output="logits"),
    ]
    for policy in policies:
        probs = policy.action_probabilities(x)
        for uu in (None, u):
            col, sure = policy.choose(x, uu)
            assert np.array_equal(col, choose_actions(probs, uu))
            assert np.array_equal(sure, probs[np.arange(len(x)), col] >= 1.0)
        # a float32 batch goes to the network as it is; the network sees the same values as from float64
        x32 = x.astype(np.float32)
        same = probs if isinstance(policy, OnnxPolicy) else policy.action_probabilities(x32.astype(np.float64))
        assert np.array_equal(policy.action_probabilities(x32), same)
    assert (policies[0].choose(x)[0] == 1).all()  # ties: the first of the maximal outputs
    assert (policies[0].action_probabilities(x)[:, 1] == 1.0).all()


def test_non_finite_outputs_are_reported_by_every_path(tmp_path):
    bias = [0.0] * len(ACTIONS)
    bias[4] = np.nan
    path = save_mlp_onnx(tmp_path / "nan.onnx", tie_network(bias), features=FEATURES, actions=ACTIONS, output="q-values")
    x = np.zeros((3, len(FEATURES)))
    for policy in (OnnxPolicy(path), CallablePolicy(tie_network(bias), FEATURES, ACTIONS, output="q-values")):
        for call in (
            lambda p=policy: p.action_probabilities(x),
            lambda p=policy: p.choose(x),
            lambda p=policy: p.choose(x, np.zeros(3)),
        ):
            with pytest.raises(PolicyError, match="NaN or inf"):
                call()


def explicit_problems(probs: np.ndarray, tol: float = 1e-6) -> bool:
    """Whether any row of ``probs`` is not a distribution, row by row in Python."""
    for row in probs.tolist():
        if any(not np.isfinite(p) or p < 0 for p in row) or abs(sum(row) - 1.0) > tol:
            return True
    return False


@pytest.mark.parametrize("case", ["ok", "near", "over", "under", "negative", "nan", "inf"])
def test_distribution_check_agrees_with_an_explicit_check(case):
    rng = np.random.default_rng(7)
    probs = rng.random((200, 5))
    probs /= probs.sum(axis=1, keepdims=True)
    if case == "near":
        probs[17, 2] += 0.9e-6  # within the tolerance
    elif case == "over":
        probs[17, 2] += 1.2e-6
    elif case == "under":
        probs[17, 2] -= 1.2e-6
    elif case == "negative":
        probs[3, 0], probs[3, 1] = -0.1, probs[3, 1] + probs[3, 0] + 0.1
    elif case == "nan":
        probs[5, 4] = np.nan
    elif case == "inf":
        probs[9, 1] = np.inf
    bad = explicit_problems(probs)
    assert bad == (case not in ("ok", "near"))
    if bad:
        with pytest.raises(PolicyError):
            validate_probabilities(probs, 200, 5, source="p")
    else:
        validate_probabilities(probs, 200, 5, source="p")


# ------------------------------------------------------------------------------------------------
# random numbers


def splitmix_uniform(seed: int, run: int, step: int, stream: int) -> float:
    """The generator of :mod:`rlverify.statistical.rng` in Python integers (mod 2**64)."""
    M = (1 << 64) - 1

    def mix(z: int) -> int:
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & M
        z = (z ^ (z >> 27)) * 0x94D049BB133111EB & M
        return z ^ (z >> 31)

    key = mix((seed + 0x9E3779B97F4A7C15) & M)
    run_key = mix((((run + 1) * 0x9E3779B97F4A7C15) & M) ^ key)
    offset = ((step + 1) * 0xD1B54A32D192ED03 + (stream + 1) * 0x8CB92BA72F3D8DD7) & M
    return (mix((run_key + offset) & M) >> 11) / 2.0**53


def test_uniforms_are_splitmix64():
    runs = np.array([0, 1, 7, 123_456, 2**40 + 3])
    keys = run_keys(seed_key(42), runs)
    for step, stream in ((-1, 2), (0, 0), (5, 1), (10_000, 0)):
        got = uniforms(keys, step, stream)
        assert got.dtype == np.float64
        assert got.tolist() == [splitmix_uniform(42, int(r), step, stream) for r in runs]


# ------------------------------------------------------------------------------------------------
# batches cut between threads (SimulationOptions.threads): the same runs, one policy call at a time


class Watched:
    """Wraps ``policy.choose`` and ``policy.action_probabilities`` on the instance: which threads call them,
    and the most calls in progress at once."""

    def __init__(self, policy):
        self.threads, self.busy, self.most = set(), 0, 0
        self._guard, self._depth = threading.Lock(), threading.local()
        for name in ("choose", "action_probabilities"):
            setattr(policy, name, self._wrap(getattr(policy, name)))

    def _wrap(self, fn):
        def call(*args):
            outer = not getattr(self._depth, "n", 0)  # choose may call action_probabilities: one call
            self._depth.n = getattr(self._depth, "n", 0) + 1
            if outer:
                with self._guard:
                    self.threads.add(threading.get_ident())
                    self.busy += 1
                    self.most = max(self.most, self.busy)
            try:
                return fn(*args)
            finally:
                self._depth.n -= 1
                if outer:
                    with self._guard:
                        self.busy -= 1

        return call


@pytest.fixture(scope="module")
def barto_small():
    from rlverify.benchmarks.racetrack import make_racetrack, policy_path

    env = make_racetrack("racetrack-barto-small-v1")
    prop = parse_path_property('P=? [!"crashed" U "goal"]', env.labels)
    return env, prop, policy_path("racetrack-barto-small-v1"), env.start_states(env.track.free_cells())


@pytest.fixture(scope="module")
def avoid_onnx(avoid_model, avoid_policy, tmp_path_factory):
    """Avoid 4x4 (the PRISM model of conftest) and conftest's random 2x64 logits network as an ONNX file."""
    from rlverify.statistical.verify import prepare

    env, prop, _ = prepare(avoid_model, "P=? [F<=100 COLLISION=true]")
    path = save_mlp_onnx(
        tmp_path_factory.mktemp("avoid") / "avoid.onnx",
        MLP.random([6, 64, 64, 4], seed=1),
        features=avoid_policy.features,
        actions=avoid_policy.actions,
        output="logits",
    )
    return env, prop, path


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("mode", ["deterministic", "stochastic"])
@pytest.mark.parametrize("case", ["barto-small shipped policy", "avoid logits", "avoid logits renormalize"])
def test_threaded_parts_equal_one_thread(barto_small, avoid_onnx, monkeypatch, case, mode, threads):
    """Every run's outcome, stall, steps and recorded labels are the same, bit for bit, whether a batch is
    advanced whole in one thread or cut into parts run by threads (uneven parts, a last batch too small to cut);
    the threaded policy calls come from the worker threads, never two at a time."""
    import rlverify.statistical.engine as engine

    monkeypatch.setattr(engine, "MIN_PART_RUNS", 300)  # small parts: several batches, some not cut
    if case.startswith("barto"):
        env, prop, path, starts = barto_small
        record, max_steps = ("crashed", "goal"), 60
    else:
        env, prop, path = avoid_onnx
        starts, record, max_steps = None, ("collide", "deadlock"), 120
    runs = np.arange(7, 4107)  # batches of 1,900, 1,900 and 300 runs (the last one too small to cut)
    unavailable = "renormalize" if case.endswith("renormalize") else "stall"
    results = []
    for k in (1, threads):
        policy = OnnxPolicy(path)
        watch = Watched(policy)
        opts = SimulationOptions(mode=mode, max_steps=max_steps, seed=17, batch_size=1900, threads=k, unavailable=unavailable)
        progress = []
        results.append(simulate(env, policy, prop, runs, starts=starts, options=opts, record=record, on_batch=progress.append))
        assert progress == [1900, 1900, 300]  # batch by batch, in order
        assert watch.most == 1
        main = threading.get_ident()
        assert watch.threads == {main} if k == 1 else (main not in watch.threads and len(watch.threads) == k)
    one, many = results
    for name in ("outcome", "stalled", "steps"):
        assert np.array_equal(getattr(one, name), getattr(many, name)), name
    assert one.recorded.keys() == many.recorded.keys()
    for name in one.recorded:
        assert np.array_equal(one.recorded[name], many.recorded[name]), name
    assert len(set(one.steps.tolist())) >= 3 and len(set(one.outcome.tolist())) >= 2  # the runs differ


class Boom(Exception):
    pass


class ConcurrentCallable(CallablePolicy):
    """A callable policy the simulator may call from its threads (the test's own function)."""

    concurrent = True


def test_threaded_error_propagates_unchanged(barto_small, monkeypatch, tmp_path):
    """An error raised in a part's thread reaches the caller as it was raised (the same object); the other parts
    stop at their next policy call; a network that outputs NaN raises the PolicyError of the one-thread path."""
    import rlverify.statistical.engine as engine

    monkeypatch.setattr(engine, "MIN_PART_RUNS", 300)
    env, prop, _path, starts = barto_small
    net = MLP.random([len(FEATURES), 16, len(ACTIONS)], seed=2)
    raised, calls = [], []

    def fails_on_third_call(x):
        calls.append(len(x))
        if len(calls) == 3:
            raised.append(Boom(f"third call, {len(x)} rows"))
            raise raised[-1]
        return net(x)

    policy = ConcurrentCallable(fails_on_third_call, FEATURES, ACTIONS, output="q-values")
    with pytest.raises(Boom) as info:
        simulate(
            env,
            policy,
            prop,
            np.arange(2000),
            starts=starts,
            options=SimulationOptions(mode="deterministic", max_steps=50, seed=1, batch_size=2000, threads=2),
        )
    assert info.value is raised[0]
    assert len(calls) == 3  # the other part took no turn after the failure

    bias = [0.0] * len(ACTIONS)
    bias[2] = np.nan
    nan_file = save_mlp_onnx(tmp_path / "nan.onnx", tie_network(bias), features=FEATURES, actions=ACTIONS, output="q-values")
    errors = []
    for threads in (1, 2):
        with pytest.raises(PolicyError, match="NaN or inf") as info:
            simulate(
                env,
                OnnxPolicy(nan_file),
                prop,
                np.arange(2000),
                starts=starts,
                options=SimulationOptions(mode="stochastic", seed=1, batch_size=2000, threads=threads),
            )
        errors.append(info.value)
    # the same error; each thread counts the rows of its own part (2000 in one thread, 1000 of 2 in two)
    same = [re.sub(r"\d+ rows", "N rows", str(e)) for e in errors]
    assert type(errors[0]) is type(errors[1]) and same[0] == same[1] and "N rows contain NaN or inf" in same[0]


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2", None])
def test_threads_option_must_be_a_positive_integer(barto_small, threads):
    env, prop, path, _starts = barto_small
    with pytest.raises(OptionError, match="threads: expected a positive integer"):
        simulate(env, OnnxPolicy(path), prop, np.arange(10), options=SimulationOptions(threads=threads))
