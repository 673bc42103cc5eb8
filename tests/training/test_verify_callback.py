"""rlverify.sb3.VerifyCallback on real Stable-Baselines3 training (no mocks): the model in training is verified as it is
at each check, logged through SB3's logger to TensorBoard event files (read back here), and nothing else is written.

The expected values are computed independently of rlverify: by a linear solve over FrozenLake's own transition table
``env.unwrapped.P`` with SB3's own action probabilities at the same step, and through the other route rlverify has
(the same model saved to a zip and verified from its path).
"""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlverify import ExactOptions, StatisticalOptions, verify_exact
from rlverify.errors import OptionError, PolicyError
from rlverify.resolve import resolve

torch = pytest.importorskip("torch")
sb3 = pytest.importorskip("stable_baselines3")
pytest.importorskip("tensorboard")
from stable_baselines3.common.callbacks import BaseCallback, CallbackList  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from rlverify.sb3 import VerifyCallback  # noqa: E402

GOAL = 'P=? [F "goal"]'
ACTIONS = ["left", "down", "right", "up"]


@pytest.fixture(autouse=True)
def _one_thread():
    """Training on one torch thread (the machine's cores are shared); the callback must keep this setting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def goal_probability(env: gym.Env, pi: np.ndarray) -> float:
    """P(reach the goal cell) from the start under ``pi`` ``(16, 4)``, from FrozenLake's own table ``P[s][a] = [(p,
    s', r, terminated)]`` (the goal: the transitions with reward 1): graph analysis, then a linear solve."""
    u = env.unwrapped
    n = u.observation_space.n
    M, b = np.zeros((n, n)), np.zeros(n)
    for s in range(n):
        for a in range(u.action_space.n):
            for p, s2, r, terminated in u.P[s][a]:
                if r > 0:
                    b[s] += pi[s, a] * p
                elif not terminated:
                    M[s, s2] += pi[s, a] * p
    can = b > 0
    while True:
        more = can | ((M > 0) & can[None, :]).any(axis=1)
        if (more == can).all():
            break
        can = more
    x = np.zeros(n)
    idx = np.flatnonzero(can)
    x[idx] = np.linalg.solve(np.eye(len(idx)) - M[np.ix_(idx, idx)], b[idx])
    return float(x[int(np.flatnonzero(np.asarray(u.desc).reshape(-1) == b"S")[0])])


class Witness(BaseCallback):
    """The test's own record, at the same steps as the callback under test (it runs after it in the list): SB3's
    action probabilities for the 16 states, and the model saved to a zip in a folder of the test's."""

    def __init__(self, every: int, folder: Path) -> None:
        super().__init__()
        self.every, self.folder, self.seen = every, folder, []

    def _on_step(self) -> bool:
        # a check due on the last rollout is the model learn() returns: recorded at training end, after SB3's update
        if self.num_timesteps % self.every == 0 and self.num_timesteps < self.model._total_timesteps:
            self._record()
        return True

    def _on_training_end(self) -> None:
        if not self.seen or self.seen[-1][0] != self.num_timesteps:
            self._record()

    def _record(self) -> None:
        with torch.no_grad():
            obs, _ = self.model.policy.obs_to_tensor(np.arange(16))
            pi = self.model.policy.get_distribution(obs).distribution.probs.double().numpy()
        path = self.folder / f"model_{self.num_timesteps}.zip"
        self.model.save(str(path))
        self.seen.append((self.num_timesteps, pi, path))


def scalars(logdir: Path, tag: str) -> list[tuple[int, float]]:
    """``(step, value)`` of every scalar ``tag`` in the event files under ``logdir``."""
    out = []
    for events in sorted(logdir.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            out += [(e.step, e.value) for e in acc.Scalars(tag)]
    return out


def _ppo(env: gym.Env, logdir: Path | None = None) -> sb3.PPO:
    return sb3.PPO(
        "MlpPolicy",
        env,
        n_steps=256,
        batch_size=64,
        n_epochs=2,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [16]},
        tensorboard_log=None if logdir is None else str(logdir),
    )


def test_each_check_logs_the_exact_goal_probability_to_tensorboard_and_writes_nothing_else(tmp_path, monkeypatch):
    logdir, zips, work = tmp_path / "tb", tmp_path / "zips", tmp_path / "cwd"
    for d in (zips, work):
        d.mkdir()
    monkeypatch.chdir(work)
    env = gym.make("FrozenLake-v1")
    model = _ppo(env, logdir)
    callback = VerifyCallback("gym:FrozenLake-v1", GOAL, every=512, options=ExactOptions(precision=1e-9))
    witness = Witness(512, zips)
    model.learn(2048, callback=CallbackList([callback, witness]))
    returned = tmp_path / "returned.zip"
    model.save(str(returned))  # the model learn() returned, after SB3's update that follows the last rollout

    assert [c.steps for c in callback.history] == [512, 1024, 1536, 2048] == [s for s, _, _ in witness.seen]
    assert torch.get_num_threads() == 1  # the training's torch setting was kept
    logged = scalars(logdir, "rlverify/value")
    assert [s for s, _ in logged] == [512, 1024, 1536, 2048]  # one scalar per check, at its step
    values = [c.value for c in callback.history]
    assert len(set(values)) == 4  # the model changed between checks: each check saw it as it was then
    for (step, pi, path), check, (_, tb_value) in zip(witness.seen, callback.history, logged, strict=True):
        independent = goal_probability(env, pi)
        assert check.value == pytest.approx(independent, rel=1e-6)
        assert tb_value == pytest.approx(independent, rel=1e-6)  # TensorBoard keeps float32
        assert check.lower <= check.value <= check.upper and check.stalled == 0.0 and check.states == 16
        # the independent route: the model saved at that step, verified from its path
        target = resolve("gym:FrozenLake-v1", policy=str(path), property=GOAL)
        saved = verify_exact(target.model, target.property, target.policy, ExactOptions(precision=1e-9))
        assert check.value == pytest.approx(saved.value, abs=1e-12), step
    # the last check, logged at the last step, is the model learn() returned (not the one before SB3's last update)
    target = resolve("gym:FrozenLake-v1", policy=str(returned), property=GOAL)
    final = verify_exact(target.model, target.property, target.policy, ExactOptions(precision=1e-9))
    assert callback.history[-1].value == pytest.approx(final.value, abs=1e-12)
    assert logged[-1][1] == pytest.approx(final.value, rel=1e-6)
    for tag in ("rlverify/lower", "rlverify/upper", "rlverify/stalled", "rlverify/states", "rlverify/seconds"):
        assert [s for s, _ in scalars(logdir, tag)] == [512, 1024, 1536, 2048], tag
    # nothing but SB3's event files: no policy file, nothing in the working directory
    written = [p for p in logdir.rglob("*") if p.is_file()]
    assert written and all(p.name.startswith("events.out.tfevents.") for p in written)
    assert os.listdir(work) == []


def test_verifying_does_not_change_the_training():
    """The same seed trains the same weights with and without the callback (it draws no random numbers, leaves the
    policy's mode and torch's thread count as they were)."""

    def weights(callback):
        model = _ppo(gym.make("FrozenLake-v1"))
        model.learn(768, callback=callback)
        return torch.cat([p.detach().flatten() for p in model.policy.parameters()]).numpy()

    alone = weights(None)
    checked = VerifyCallback("gym:FrozenLake-v1", GOAL, every=256)
    np.testing.assert_array_equal(weights(checked), alone)
    assert [c.steps for c in checked.history] == [256, 512, 768]


def test_deterministic_mode_verifies_the_argmax_sb3_predicts():
    env = gym.make("FrozenLake-v1")
    model = _ppo(env)
    callback = VerifyCallback("gym:FrozenLake-v1", GOAL, every=256, deterministic=True, at_end=False)
    model.learn(256, callback=callback)
    actions, _ = model.predict(np.arange(16), deterministic=True)
    pi = np.zeros((16, 4))
    pi[np.arange(16), actions] = 1.0
    assert [c.steps for c in callback.history] == [256]
    assert callback.history[0].value == pytest.approx(goal_probability(env, pi), rel=1e-9, abs=1e-12)
    assert callback.history[0].result.mode == "deterministic"


def test_statistical_mode_logs_an_interval_that_covers_the_exact_value():
    env = gym.make("FrozenLake-v1")
    model = _ppo(env)
    options = StatisticalOptions(epsilon=0.02, delta=0.001)
    callback = VerifyCallback("gym:FrozenLake-v1", GOAL, every=256, mode="statistical", options=options, at_end=False)
    model.learn(256, callback=callback)
    (check,) = callback.history
    with torch.no_grad():
        obs, _ = model.policy.obs_to_tensor(np.arange(16))
        pi = model.policy.get_distribution(obs).distribution.probs.double().numpy()
    exact = goal_probability(env, pi)
    assert check.lower <= exact <= check.upper
    # Okamoto: the estimate +- epsilon, within [0, 1]
    assert (check.lower, check.upper) == pytest.approx((max(0.0, check.value - 0.02), min(1.0, check.value + 0.02)))
    assert check.runs == check.result.runs > 0 and check.states is None


@pytest.mark.parametrize(
    "prop,stop_when", [('P<=0.5 [F "goal"]', "holds"), ('P>=0.5 [F "goal"]', "violated")], ids=["holds", "violated"]
)
def test_stop_when_stops_training_at_the_first_check_that_decides_it(prop, stop_when):
    env = gym.make("FrozenLake-v1")
    model = _ppo(env)
    callback = VerifyCallback("gym:FrozenLake-v1", prop, every=256, stop_when=stop_when)
    model.learn(4096, callback=callback)
    assert model.num_timesteps == 256 and callback.stopped_at == 256
    (check,) = callback.history  # no check at the end of a stopped training
    assert check.value < 0.5 and check.satisfied is (stop_when == "holds")


def test_an_undecided_or_unwanted_verdict_does_not_stop_training():
    env = gym.make("FrozenLake-v1")
    model = _ppo(env)
    callback = VerifyCallback("gym:FrozenLake-v1", 'P<=0.5 [F "goal"]', every=256, stop_when="violated", at_end=False)
    model.learn(512, callback=callback)
    assert model.num_timesteps == 512 and callback.stopped_at is None
    assert [c.satisfied for c in callback.history] == [True, True]


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"stop_when": "holds"}, OptionError, "has no threshold"),
        ({"stop_when": "sometimes", "property": 'P>=0.5 [F "goal"]'}, OptionError, "stop_when: expected one of holds"),
        ({"mode": "fast"}, OptionError, "mode: expected one of exact, statistical"),
        ({"every": 0}, OptionError, "every: expected a positive number"),
        ({"options": StatisticalOptions()}, OptionError, "mode 'exact' takes ExactOptions"),
        ({"target": "racetrack-ring-v1"}, Exception, "rlverify verify"),
        ({"property": 'P=? [F "gold"]'}, Exception, "gold"),
        ({"verbose": "x"}, OptionError, "verbose: expected 0, 1 or 2"),
        ({"verbose": -1}, OptionError, "verbose: expected 0, 1 or 2"),
        ({"features": "row"}, PolicyError, "features: expected a list of names, got 'row'"),
        ({"actions": 5}, PolicyError, "actions: expected a list of names, got 5"),
        ({"every": 10**30}, OptionError, "every: expected a positive number of environment steps \\(a 64-bit integer\\)"),
        ({"every": 2**63}, OptionError, "every: expected a positive number"),
        ({"prefix": None}, OptionError, "prefix: expected a non-empty name"),
        ({"at_end": "no"}, OptionError, "at_end: expected True or False"),
        ({"target": None}, OptionError, "target: expected a PRISM/JANI file.* got NoneType None"),
        ({"property": None}, OptionError, "property: verifying while training.* checks a property"),
    ],
    ids=[
        "no-threshold",
        "stop-when",
        "mode",
        "every",
        "options",
        "exact-on-native",
        "unknown-label",
        "verbose-text",
        "verbose-negative",
        "features-string",
        "actions-number",
        "every-beyond-64-bits",
        "every-2**63",
        "prefix",
        "at-end",
        "target-none",
        "property-none",
    ],
)
def test_bad_settings_are_refused_when_the_callback_is_made(kwargs, error, message):
    args = {"target": "gym:FrozenLake-v1", "property": GOAL, **kwargs}
    with pytest.raises(error, match=message) as info:
        VerifyCallback(args.pop("target"), args.pop("property"), **args)
    assert "\n" not in str(info.value).split(":", 1)[0]


def test_the_largest_64_bit_step_count_is_taken():
    assert VerifyCallback("gym:FrozenLake-v1", GOAL, every=2**63 - 1, verbose=True).schedule.every == 2**63 - 1


def test_a_model_that_does_not_fit_the_target_is_refused_before_training():
    env = gym.make("FrozenLake-v1", map_name="8x8")
    model = _ppo(env)
    callback = VerifyCallback("gym:FrozenLake-v1", GOAL, every=256)  # the 4x4 lake: 16 states, not 64
    with pytest.raises(PolicyError, match=r"observes Discrete\(64\).*has Discrete\(16\)"):
        model.learn(256, callback=callback)
    assert model.num_timesteps == 0 and callback.history == []


def test_normalised_observations_are_refused():
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from rlverify.gym import MDPEnv

    env = VecNormalize(DummyVecEnv([lambda: MDPEnv.from_benchmark("running-example-v1")]), norm_obs=True)
    model = sb3.PPO("MlpPolicy", env, n_steps=32, batch_size=32, device="cpu")
    callback = VerifyCallback("running-example-v1", "reach-goal", every=32, features=["x"], actions=["UP"])
    with pytest.raises(PolicyError, match="VecNormalize"):
        model.learn(32, callback=callback)


@pytest.mark.slow
def test_a_five_minute_frozenlake_training_logs_the_exact_goal_probability_at_every_check(tmp_path, monkeypatch):
    """The issue's acceptance: a 5-minute training, every check's exact value in the event files, no policy files."""
    logdir, work = tmp_path / "tb", tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    env = gym.make("FrozenLake-v1")
    model = sb3.PPO("MlpPolicy", env, n_steps=512, batch_size=64, seed=0, device="cpu", tensorboard_log=str(logdir))
    callback = VerifyCallback("gym:FrozenLake-v1", GOAL, every=2_048, options=ExactOptions(precision=1e-9))

    class Probe(BaseCallback):
        """SB3's probabilities at each check's step; stops after five minutes of training."""

        def __init__(self) -> None:
            super().__init__()
            self.pis: list[np.ndarray] = []
            self.start = 0.0

        def _on_training_start(self) -> None:
            import time

            self.start = time.perf_counter()

        def _on_step(self) -> bool:
            import time

            if self.num_timesteps % 2_048 == 0:
                with torch.no_grad():
                    obs, _ = self.model.policy.obs_to_tensor(np.arange(16))
                    self.pis.append(self.model.policy.get_distribution(obs).distribution.probs.double().numpy())
            return time.perf_counter() - self.start < 300

    probe = Probe()
    model.learn(10_000_000, callback=CallbackList([callback, probe]))
    checks = [c for c in callback.history if c.steps % 2_048 == 0]
    assert len(checks) >= 5 and len(checks) == len(probe.pis)  # ~40,000 steps in 5 minutes on 2 busy cores
    logged = dict(scalars(logdir, "rlverify/value"))
    assert sorted(logged) == [c.steps for c in callback.history]
    for check, pi in zip(checks, probe.pis, strict=True):
        expected = goal_probability(env, pi)
        assert check.value == pytest.approx(expected, rel=1e-6)
        assert logged[check.steps] == pytest.approx(expected, rel=1e-6)
    assert all(p.name.startswith("events.out.tfevents.") for p in logdir.rglob("*") if p.is_file())
    assert os.listdir(work) == []


def test_the_example_trains_verifies_and_plots(tmp_path, monkeypatch, capsys):
    """examples/train_frozenlake_verified.py, shortened: one check per 512 steps, the plot written, and refused over an
    existing file without --force."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "train_frozenlake_verified.py"
    spec = importlib.util.spec_from_file_location("train_frozenlake_verified", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.chdir(tmp_path)
    assert example.main(["--steps", "1024", "--every", "512", "--out", "safety.png"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "safety.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    checks = [line for line in out.splitlines() if line.startswith("rlverify: step")]
    assert [c.split(":")[1].strip() for c in checks] == ["step 512", "step 1,024"]
    assert "over 1,024 steps" in out and os.listdir(tmp_path) == ["safety.png"]
    assert example.main(["--steps", "1024", "--out", "safety.png"]) == 2
    assert "pass --force" in capsys.readouterr().err


def test_without_stable_baselines3_the_import_names_the_sb3_extra(monkeypatch):
    import importlib
    import sys

    from rlverify.errors import DependencyNotInstalled

    for name in ("rlverify.sb3", "rlverify.training.callback"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # import stable_baselines3 now raises ImportError
    monkeypatch.setitem(sys.modules, "stable_baselines3.common.callbacks", None)
    with pytest.raises(DependencyNotInstalled) as info:
        importlib.import_module("rlverify.sb3")
    assert "pip install 'rlverify[sb3]'" in str(info.value) and "VerifyCallback" in str(info.value)
