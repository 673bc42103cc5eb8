"""Gymnasium environments with a finite model P as exact models, checked against numpy solves of ``env.unwrapped.P``.

Every expected value here is computed from Gymnasium's own table ``P[s][a] = [(p, s', r, terminated)]``
by a separate numpy solver (linear solve / value iteration / step iteration), never from the PRISM
program rlverify generates.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlverify import ExactOptions, verify_exact
from rlverify.cli.main import main
from rlverify.errors import InputFileError, ModelError, OptionError
from rlverify.gym import MDPEnv
from rlverify.models import from_gymnasium
from rlverify.models.gymnasium import parse_env_kwargs
from rlverify.policies import CallablePolicy
from rlverify.resolve import ModelTarget, resolve

# --- an independent solver over Gymnasium's P ------------------------------------------------------


def outcomes(env):
    """``[(s, a, p, s2, r, terminated)]`` straight from ``env.unwrapped.P``."""
    u = env.unwrapped
    return [
        (s, a, float(p), int(s2), float(r), bool(t))
        for s in range(u.observation_space.n)
        for a in range(u.action_space.n)
        for p, s2, r, t in u.P[s][a]
    ]


def chain(env, pi, event):
    """Under ``pi`` ``(S, A)``: ``M`` ``(S, S)`` continuing transitions (not terminal, not the event),
    ``b`` ``(S,)`` one-step probability of the event, ``cost`` ``(S,)`` expected reward of a step."""
    S = env.unwrapped.observation_space.n
    M, b, cost = np.zeros((S, S)), np.zeros(S), np.zeros(S)
    for s, a, p, s2, r, t in outcomes(env):
        w = pi[s, a] * p
        cost[s] += w * r
        if event(s, a, s2, r, t):
            b[s] += w
        elif not t:
            M[s, s2] += w
    return M, b, cost


def reach(M, b):
    """Least solution of ``x = b + M x`` (probability of the event eventually): graph analysis + linear solve."""
    S = len(b)
    can = b > 0
    while True:  # states that reach an event step with positive probability
        more = can | ((M > 0) & can[None, :]).any(axis=1)
        if (more == can).all():
            break
        can = more
    x = np.zeros(S)
    idx = np.flatnonzero(can)
    x[idx] = np.linalg.solve(np.eye(len(idx)) - M[np.ix_(idx, idx)], b[idx])
    return x


def bounded(M, b, k):
    """Probability of the event within ``k`` steps."""
    x = np.zeros(len(b))
    for _ in range(k):
        x = b + M @ x
    return x


def pmax(env, event, iterations=20_000):
    """Max over policies of P(event eventually), by value iteration from 0 (converges from below)."""
    S, A = env.unwrapped.observation_space.n, env.unwrapped.action_space.n
    x = np.zeros(S)
    out = outcomes(env)
    for _ in range(iterations):
        q = np.zeros((S, A))
        for s, a, p, s2, r, t in out:
            q[s, a] += p * (1.0 if event(s, a, s2, r, t) else (0.0 if t else x[s2]))
        new = q.max(axis=1)
        if np.abs(new - x).max() < 1e-13:
            return new
        x = new
    return x


def goal_of(env):
    desc = np.asarray(env.unwrapped.desc)
    return lambda s, a, s2, r, t: bool(t and desc.flat[s2] == b"G")


def table_policy(model, pi):
    """The policy ``pi[s]`` over the model's interface (feature ``s``, action names)."""
    return CallablePolicy(
        lambda st: pi[np.rint(st[:, 0]).astype(int)],
        model.policy_interface["features"],
        model.policy_interface["actions"],
        name="table",
    )


def random_policy(S, A, seed):
    return np.random.default_rng(seed).dirichlet(np.ones(A), size=S)


OPTS = ExactOptions(precision=1e-9)


# --- FrozenLake ------------------------------------------------------------------------------------


def test_frozenlake_slippery_matches_numpy_under_a_stochastic_policy_and_pmax():
    env = gym.make("FrozenLake-v1", is_slippery=True)
    model = from_gymnasium(env)
    assert model.policy_interface == {"features": ["s"], "actions": ["left", "down", "right", "up"]}
    assert set(model.labels) >= {"goal", "hole", "terminal"}
    pi = random_policy(16, 4, seed=0)
    M, b, _ = chain(env, pi, goal_of(env))
    expected = reach(M, b)[0]
    r = verify_exact(model, 'P=? [F "goal"]', table_policy(model, pi), OPTS)
    assert r.value == pytest.approx(expected, rel=1e-7)
    assert 0.01 < expected < 0.5  # a value that says something
    r10 = verify_exact(model, 'P=? [F<=10 "goal"]', table_policy(model, pi), OPTS)
    assert r10.value == pytest.approx(bounded(M, b, 10)[0], rel=1e-9)
    mono = verify_exact(model, 'Pmax=? [F "goal"]', None, ExactOptions(mode="monolithic", precision=1e-9))
    assert mono.pmax == pytest.approx(pmax(env, goal_of(env))[0], rel=1e-6)
    assert mono.pmax == pytest.approx(0.8235294, abs=1e-6)  # the known optimum of slippery 4x4 (14/17)


DESC = ["SFFF", "FHFH", "FFFH", "HFFG"]


def test_custom_desc_map_non_slippery():
    desc = ["SFH", "FFF", "HFG"]
    env = gym.make("FrozenLake-v1", desc=desc, is_slippery=False)
    model = from_gymnasium(env)
    pi = random_policy(9, 4, seed=1)
    goal = goal_of(env)

    def hole(s, a, s2, r, t):
        return bool(t and np.asarray(env.unwrapped.desc).flat[s2] == b"H")

    policy = table_policy(model, pi)
    for prop, event in (('P=? [F "goal"]', goal), ('P=? [F "hole"]', hole)):
        M, b, _ = chain(env, pi, event)
        assert verify_exact(model, prop, policy, OPTS).value == pytest.approx(reach(M, b)[0], rel=1e-7)
    M, b, _ = chain(env, pi, goal)
    assert verify_exact(model, 'P=? [F<=4 "goal"]', policy, OPTS).value == pytest.approx(bounded(M, b, 4)[0], rel=1e-9)
    # deterministic moves: the goal is surely reachable, and not in fewer than 4 steps
    mono = verify_exact(model, 'Pmax=? [F "goal"]', None, ExactOptions(mode="monolithic"))
    assert mono.pmax == pytest.approx(1.0)
    assert verify_exact(model, 'Pmax=? [F<=3 "goal"]', None, ExactOptions(mode="monolithic")).pmax == 0.0
    # decoded features are the cell's row/col
    r = verify_exact(model, "P=? [F row=2 & col=2]", policy, OPTS)
    assert r.value == pytest.approx(reach(M, b)[0], rel=1e-7)


def numpy_pmax_goal(env, tol=1e-14, iterations=100_000):
    """Pmax(F goal) by value iteration in numpy over ``env.unwrapped.P`` alone: ``(S,)``, from below."""
    u = env.unwrapped
    S, A = u.observation_space.n, u.action_space.n
    desc = np.asarray(u.desc).ravel()
    rows = [
        (s * A + a, p, s2, bool(t and desc[s2] == b"G"), t) for s in range(S) for a in range(A) for p, s2, _, t in u.P[s][a]
    ]
    sa, p, s2, goal, term = (np.asarray(c) for c in zip(*rows, strict=True))
    x = np.zeros(S)
    for _ in range(iterations):
        q = np.bincount(sa, weights=p * np.where(goal, 1.0, np.where(term, 0.0, x[s2])), minlength=S * A)
        new = q.reshape(S, A).max(axis=1)
        if np.abs(new - x).max() < tol:
            return new
        x = new
    raise AssertionError("value iteration did not converge")


def test_a_large_custom_slippery_map_is_named_by_its_map_and_matches_numpy(capsys):
    """A custom 12x12 ``desc`` (slippery, holes at random): Pmax from the CLI equals plain numpy value iteration over
    the environment's own P; the model row names that map (size and digest of its rows), not ``map_name=4x4``, the
    registered default it overrides."""
    import hashlib

    rng = np.random.default_rng(3)
    grid = np.where(rng.random((12, 12)) < 0.25, "H", "F")
    grid[0, 0], grid[-1, -1] = "S", "G"
    desc = ["".join(row) for row in grid]
    kwargs = json.dumps({"desc": desc, "is_slippery": True})
    expected = numpy_pmax_goal(gym.make("FrozenLake-v1", desc=desc, is_slippery=True))[0]
    assert 0.05 < expected < 0.95  # holes on the way: a value that says something
    args = ["verify", "gym:FrozenLake-v1", "--env-kwargs", kwargs, "-p", 'Pmax=? [F "goal"]', "--mode", "monolithic"]
    assert main([*args, "--precision", "1e-9", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["result"]
    assert result["pmax"] == pytest.approx(expected, rel=1e-8)
    digest = hashlib.sha256("\n".join(desc).encode()).hexdigest()[:12]
    assert result["model"] == f"gym:FrozenLake-v1 (desc=12x12 map sha256:{digest}, is_slippery=True)"
    P = gym.make("FrozenLake-v1", desc=desc, is_slippery=True).unwrapped.P
    seen, todo = {(0, False)}, [0]  # (cell, episode over) reachable from the start by P's positive entries
    while todo:
        cell = todo.pop()
        for a in range(4):
            for p, s2, _, t in P[cell][a]:
                if p > 0 and (s2, bool(t)) not in seen:
                    seen.add((s2, bool(t)))
                    if not t:
                        todo.append(s2)
    assert result["states"] == len(seen)


def test_a_small_custom_map_is_shown_as_it_is_without_the_default_map_name():
    model = from_gymnasium("FrozenLake-v1", env_kwargs={"desc": ["SFF", "FHF", "FFG"]})
    assert model.display_name == "gym:FrozenLake-v1 (desc=['SFF', 'FHF', 'FFG'])"
    assert model.env_kwargs["map_name"] == "4x4"  # what it was made with, as policy files record it
    assert from_gymnasium("FrozenLake-v1", env_kwargs="map_name=8x8").display_name == "gym:FrozenLake-v1 (map_name=8x8)"


def test_the_gym_bridge_plays_the_model_as_gymnasium_plays_the_environment():
    env = gym.make("FrozenLake-v1", desc=DESC, is_slippery=False)
    bridge = MDPEnv.from_model(from_gymnasium(env))
    assert bridge.dynamics.features == ("s",) and bridge.action_names == ("left", "down", "right", "up")
    assert bridge.dynamics.reward_model == "reward"
    actions = [2, 2, 1, 1, 1, 2]  # right right down down down right: into the goal at (3, 3)
    obs, _ = env.reset(seed=0)
    bobs, _ = bridge.reset(seed=0)
    for a in actions:
        obs, r, term, _, _ = env.step(a)
        bobs, br, bterm, _, _ = bridge.step(a)
        assert (int(obs), float(r), term) == (int(bobs[0]), br, bterm)
    assert term and r == 1.0


# --- CliffWalking ----------------------------------------------------------------------------------


def test_cliffwalking_cliff_is_an_event_and_rewards_are_the_environment_s():
    env = gym.make("CliffWalking-v1")
    model = from_gymnasium(env)
    assert "cliff" in model.labels and "reward" in model.reward_models
    pi = random_policy(48, 4, seed=2)
    policy = table_policy(model, pi)

    def cliff(s, a, s2, r, t):  # not terminal in Gymnasium 1.x: the event is the step
        return r == -100

    M, b, _ = chain(env, pi, cliff)
    for k in (1, 5, 30):
        value = verify_exact(model, f'P=? [F<={k} "cliff"]', policy, OPTS).value
        assert value == pytest.approx(bounded(M, b, k)[36], rel=1e-9)  # the start cell (3, 0)
    # expected total reward until the goal: E = c + M' E over every non-terminal step (the cliff step included);
    # every reward is negative, so "penalty" is its magnitude (Storm's unbounded solvers need rewards >= 0)
    Mall, _, cost = chain(env, pi, lambda *o: False)
    expected = np.linalg.solve(np.eye(48) - Mall, cost)[36]
    value = verify_exact(model, 'R{"penalty"}=? [F "terminal"]', policy, OPTS).value
    assert value == pytest.approx(-expected, rel=1e-6)
    assert expected < -1000  # a random walk falls many times
    # signed rewards, step-bounded: the environment's own return over 20 steps
    ret = np.zeros(48)
    for _ in range(20):
        ret = cost + Mall @ ret
    value = verify_exact(model, 'R{"reward"}=? [C<=20]', policy, OPTS).value
    assert value == pytest.approx(ret[36], rel=1e-9)


# --- Taxi ------------------------------------------------------------------------------------------


def test_taxi_loads_with_decoded_features_and_a_reset_step():
    env = gym.make("Taxi-v4")
    model = from_gymnasium(env)
    assert model.policy_interface["actions"] == ["south", "north", "east", "west", "pickup", "dropoff"]
    assert {"taxi_row", "taxi_col", "passenger", "destination"} <= set(model.variables)
    assert {"delivered", "illegal", "terminal"} <= set(model.labels)
    pi = np.full((500, 6), 1 / 6)

    def illegal(s, a, s2, r, t):
        return r == -10

    M, b, _ = chain(env, pi, illegal)
    mu = env.unwrapped.initial_state_distrib
    # the model's first step draws the start state (the policy is not asked): F<=k covers k-1 agent steps
    value = verify_exact(model, 'P=? [F<=4 "illegal"]', table_policy(model, pi), OPTS).value
    assert value == pytest.approx(mu @ bounded(M, b, 3), rel=1e-9)
    # decoded features agree with Taxi's decode on every reachable state
    from rlverify.models import build_explicit

    explicit, _ = build_explicit(model, None)
    vals = explicit.feature_matrix(("s", "taxi_row", "taxi_col", "passenger", "destination")).astype(int)
    for row in vals[vals[:, 0] >= 0]:
        assert tuple(env.unwrapped.decode(int(row[0]))) == tuple(row[1:])


def test_taxi_fickle_passenger_is_refused():
    with pytest.raises(ModelError, match="fickle_passenger"):
        from_gymnasium("Taxi-v4", env_kwargs="fickle_passenger=true")


# --- generic environments, merging, errors ---------------------------------------------------------


class TwoStates(gym.Env):
    """A finite env whose P lists the same next state twice (0.25 + 0.25 to state 1)."""

    def __init__(self):
        self.observation_space = spaces.Discrete(3)
        self.action_space = spaces.Discrete(2)
        self.P = {
            0: {0: [(0.25, 1, 0.0, False), (0.5, 0, 0.0, False), (0.25, 1, 0.0, False)], 1: [(1.0, 2, 1.0, True)]},
            1: {0: [(1.0, 2, 5.0, True)], 1: [(1.0, 1, 0.0, False)]},
            2: {0: [(1.0, 2, 0.0, True)], 1: [(1.0, 2, 0.0, True)]},
        }
        self.initial_state_distrib = np.array([1.0, 0.0, 0.0])


def test_duplicate_outcomes_are_merged_and_generic_names_used(tmp_path):
    model = from_gymnasium(TwoStates(), path=tmp_path / "two.prism")
    text = (tmp_path / "two.prism").read_text()
    assert "[a0] !done & s=0 -> 1/2:(s'=0)" in text and "1/2:(s'=1)" in text  # 0.25 + 0.25 merged
    assert model.policy_interface == {"features": ["s"], "actions": ["a0", "a1"]}
    policy = CallablePolicy(lambda st: np.tile([1.0, 0.0], (len(st), 1)), ["s"], ["a0", "a1"])
    # a0 always: from 0, reach 1 w.p. 1 eventually, then terminal with reward 5; expected reward 5
    assert verify_exact(model, 'R{"reward"}=? [F "terminal"]', policy, OPTS).value == pytest.approx(5.0)
    with pytest.raises(InputFileError, match="force"):
        from_gymnasium(TwoStates(), path=tmp_path / "two.prism")


def test_an_env_without_a_finite_model_is_refused_with_what_is_needed():
    with pytest.raises(ModelError, match=r"unwrapped\.P.*observation_space is Box"):
        from_gymnasium("CartPole-v1")


def test_a_distribution_table_that_does_not_sum_to_one_is_refused():
    env = TwoStates()
    env.P[1][1] = [(0.5, 1, 0.0, False)]
    with pytest.raises(ModelError, match=r"P\[1\]\[1\] sums to 0.5"):
        from_gymnasium(env)


def test_env_kwargs_forms():
    assert parse_env_kwargs("map_name=8x8,is_slippery=false") == {"map_name": "8x8", "is_slippery": False}
    assert parse_env_kwargs('{"desc": ["SF", "FG"], "is_slippery": true}') == {"desc": ["SF", "FG"], "is_slippery": True}
    assert parse_env_kwargs("success_rate=0.5,is_slippery=True") == {"success_rate": 0.5, "is_slippery": True}
    with pytest.raises(OptionError, match="--env-kwargs: expected NAME=VALUE"):
        parse_env_kwargs("map_name")
    with pytest.raises(OptionError, match="--env-kwargs: invalid JSON"):
        parse_env_kwargs('{"desc": [}')


def test_front_door_resolves_gym_targets_with_env_kwargs():
    t = resolve(
        "gym:FrozenLake-v1", env_kwargs="map_name=8x8,is_slippery=false", property='P=? [F "goal"]', needs_policy=False
    )
    assert isinstance(t, ModelTarget) and t.name.startswith("gym:FrozenLake-v1 (") and "map_name=8x8" in t.name
    assert t.model.env_kwargs["is_slippery"] is False
    with pytest.raises(OptionError, match="--env-kwargs"):
        resolve("running-example-v1", env_kwargs="a=1", needs_policy=False)
    with pytest.raises(OptionError, match="--env-kwargs"):
        resolve("gym:FrozenLake-v1", constants="is_slippery=false", needs_policy=False)


@pytest.mark.parametrize(
    "args,message",
    [
        (["gym:FrozenLak-v1"], "FrozenLake"),
        (["gym:FrozenLake-v1", "--env-kwargs", "foo=1"], "--env-kwargs"),
        (["gym:FrozenLake-v1", "--env-kwargs", "map_name"], "NAME=VALUE"),
        (["gym:CartPole-v1"], "use rlverify simulate gym:CartPole-v1"),
        (["gym:FrozenLake-v1", "-p", 'P=? [F "gold"]'], "goal"),
    ],
    ids=["unknown-id", "unknown-kwarg", "malformed-kwargs", "no-finite-model", "unknown-label"],
)
def test_cli_bad_gym_input_exits_2(capsys, args, message):
    argv = ["verify", *args] + ([] if "-p" in args else ["-p", 'P=? [F "goal"]']) + ["--mode", "monolithic"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# --- an SB3 PPO trained on the Gymnasium environment, verified without a sidecar --------------------


def test_sb3_ppo_trained_on_frozenlake_verifies_through_the_cli(tmp_path, capsys):
    sb3 = pytest.importorskip("stable_baselines3")
    torch = pytest.importorskip("torch")
    env = gym.make("FrozenLake-v1")
    ppo = sb3.PPO(
        "MlpPolicy", env, n_steps=256, batch_size=64, n_epochs=2, seed=0, device="cpu", policy_kwargs={"net_arch": [16]}
    )
    ppo.learn(total_timesteps=2048)
    path = tmp_path / "ppo.zip"
    ppo.save(str(path))
    assert not (tmp_path / "ppo.zip.json").exists()
    with torch.no_grad():  # the network's own distribution, as SB3 computes it for integer observations
        obs, _ = ppo.policy.obs_to_tensor(np.arange(16))
        pi = ppo.policy.get_distribution(obs).distribution.probs.double().numpy()
    M, b, _ = chain(env, pi, goal_of(env))
    expected = reach(M, b)[0]
    code = main(
        ["verify", "gym:FrozenLake-v1", "--policy", str(path), "--property", 'P=? [F "goal"]', "--json", "--precision", "1e-9"]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)["result"]
    assert result["value"] == pytest.approx(expected, rel=1e-6)
    assert result["states"] <= 16
    # the statistical engine on the same target agrees (99.9% interval covers the exact value)
    code = main(
        [
            "simulate",
            "gym:FrozenLake-v1",
            "--policy",
            str(path),
            "--property",
            'P=? [F "goal"]',
            "--json",
            "--runs",
            "4000",
            "--delta",
            "0.001",
            "--seed",
            "3",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    lo, hi = json.loads(out.out)["result"]["interval"]
    assert lo <= expected <= hi


def test_the_shipped_example_policy_verifies_as_the_readme_says(capsys):
    """examples/gymnasium/ppo_frozenlake.zip (train_frozenlake.py, 40960 steps, seed 0), as the README runs it."""
    sb3 = pytest.importorskip("stable_baselines3")
    torch = pytest.importorskip("torch")
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "gymnasium" / "ppo_frozenlake.zip"
    ppo = sb3.PPO.load(str(path), device="cpu")
    with torch.no_grad():
        obs, _ = ppo.policy.obs_to_tensor(np.arange(16))
        pi = ppo.policy.get_distribution(obs).distribution.probs.double().numpy()
    env = gym.make("FrozenLake-v1")
    M, b, _ = chain(env, pi, goal_of(env))
    assert main(["verify", "gym:FrozenLake-v1", "--policy", str(path), "-p", 'P=? [F "goal"]', "--json"]) == 0
    value = json.loads(capsys.readouterr().out)["result"]["value"]
    assert value == pytest.approx(reach(M, b)[0], rel=1e-5)
    assert value == pytest.approx(0.66606, abs=1e-4)  # the figure the README quotes
