"""gym: targets run no code unasked and take only arguments their constructor takes (issue 21); Taxi, whose model
starts in a reset state the policy is never asked about, verifies and simulates with a user's own SB3 zip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlverify.cli.main import main
from tests.envelope import error_envelope

gym = pytest.importorskip("gymnasium")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


MONO = ["-p", 'Pmax=? [F "goal"]', "--mode", "monolithic", "--json"]


def test_gym_module_id_imports_nothing_without_trust_code(capsys):
    code, out, err = run(capsys, "verify", "gym:this:X", *MONO)
    # `import this` prints the Zen of Python: nothing was imported, nothing printed
    assert code == 2 and error_envelope(out) and "Zen" not in err
    assert "imports the Python module 'this'" in err and "--trust-code" in err


def test_gym_module_id_with_trust_code_names_a_missing_module_and_keeps_stdout_clean(capsys):
    code, out, err = run(capsys, "verify", "gym:nosuchmodule_rlv:X", "--trust-code", *MONO)
    assert code == 2 and error_envelope(out)
    assert "cannot import module 'nosuchmodule_rlv'" in err and "Traceback" not in err
    code, out, err = run(capsys, "verify", "gym:this:X", "--trust-code", *MONO)
    assert code == 2 and error_envelope(out)  # what the module printed went to stderr, not into --json's stdout
    assert "Beautiful is better than ugly" in err and "no environment 'X' in Gymnasium's registry" in err


def test_an_id_outside_the_registry_is_refused_with_the_close_one(capsys):
    code, _, err = run(capsys, "verify", "gym:FrozenLak-v1", *MONO)
    assert code == 2 and "no environment 'FrozenLak-v1'" in err and "did you mean 'FrozenLake-v1'" in err


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ("is_slippery=no", "is_slippery expects true or false, got 'no'"),
        ("is_slippery=1", "is_slippery expects true or false, got 1"),
        ("is_slipery=false", "takes no argument 'is_slipery' (did you mean 'is_slippery'?)"),
        ("success_rate=NaN", "success_rate: NaN is not a finite number"),
        ('{"success_rate": "high"}', "success_rate expects a number, got 'high'"),
        ("map_name=8", "map_name expects a string, got 8"),
    ],
)
def test_env_kwargs_are_checked_against_the_constructor(capsys, kwargs, expected):
    code, out, err = run(capsys, "verify", "gym:FrozenLake-v1", "--env-kwargs", kwargs, *MONO)
    assert code == 2 and error_envelope(out) and expected in err, err


def test_a_bool_argument_given_as_a_bool_still_builds_the_lake_asked_for(capsys):
    # the deterministic lake: the goal is reached surely (slippery: 0.82353, README)
    code, out, _ = run(capsys, "verify", "gym:FrozenLake-v1", "--env-kwargs", "is_slippery=false", *MONO)
    assert code == 0 and json.loads(out)["result"]["value"] == pytest.approx(1.0, abs=1e-9)


# --- Taxi with the user's own SB3 zip --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def taxi_ppo(tmp_path_factory):
    """An SB3 PPO on Taxi-v4 (trained for one tiny update) and its path."""
    sb3 = pytest.importorskip("stable_baselines3")
    model = sb3.PPO(
        "MlpPolicy",
        gym.make("Taxi-v4"),
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [16]},
    )
    model.learn(total_timesteps=32)
    path = tmp_path_factory.mktemp("taxi") / "taxi_ppo.zip"
    model.save(str(path))
    return path, _delivered_within(model, 59)


def _delivered_within(model, agent_steps: int) -> float:
    """P(a successful drop-off, reward 20, within ``agent_steps`` steps) under SB3's own distribution, from
    Gymnasium's own table ``P`` and start distribution (numpy; no rlverify code)."""
    import torch

    env = gym.make("Taxi-v4").unwrapped
    obs, _ = model.policy.obs_to_tensor(np.arange(500))
    with torch.no_grad():
        pi = model.policy.get_distribution(obs).distribution.probs.double().numpy()
    # one row per (s, a, outcome): weight pi(a|s) * p, and whether it delivers / ends the episode
    rows = [(s, pi[s, a] * p, s2, r == 20, term) for s in range(500) for a in range(6) for p, s2, r, term in env.P[s][a]]
    src, w, dst, hit, term = (np.asarray(c) for c in zip(*rows, strict=True))
    v = np.zeros(500)
    for _ in range(agent_steps):
        v = np.bincount(src, weights=w * np.where(hit, 1.0, np.where(term, 0.0, v[dst])), minlength=500)
    return float(np.asarray(env.initial_state_distrib) @ v)


@pytest.mark.slow  # ~5 s on an idle machine (Storm builds Taxi's 500-state model), more when the cores are shared
def test_taxi_verifies_with_the_users_sb3_zip(capsys, taxi_ppo):
    path, expected = taxi_ppo
    code, out, err = run(capsys, "verify", "gym:Taxi-v4", "--policy", str(path), "-p", 'P=? [F<=60 "delivered"]', "--json")
    assert code == 0, err
    # the bound counts the reset step that draws the start: 59 steps are the policy's
    assert json.loads(out)["result"]["value"] == pytest.approx(expected, rel=1e-6, abs=1e-12) and expected > 1e-4


@pytest.mark.slow
def test_taxi_simulates_with_the_users_sb3_zip(capsys, taxi_ppo):
    path, expected = taxi_ppo
    code, out, err = run(
        capsys, "simulate", "gym:Taxi-v4", "--policy", str(path), "-p", 'P=? [F<=60 "delivered"]', "--runs", "400", "--json"
    )
    assert code == 0, err
    result = json.loads(out)["result"]
    low, high = result["interval"]
    assert low <= expected <= high and result["runs"] == 400


# --- a map without a start cell (issue 40) ---------------------------------------------------------------------

NO_START = json.dumps({"desc": ["FFF", "FHF", "FFG"], "is_slippery": False})
PROP = ["-p", 'P=? [F "goal"]']


@pytest.mark.parametrize(
    "command",
    [
        ["verify", *PROP],
        ["verify", "-p", 'Pmax=? [F "goal"]', "--mode", "monolithic"],
        ["simulate", *PROP, "--runs", "10"],
        ["inspect"],
        ["map", *PROP, "--map", "row,col"],
        ["explain", *PROP],
        ["robust", *PROP],
        ["report", *PROP],
        ["shield", "-p", 'Pmax>=0.5 [F "goal"]', "--threshold", "0.1"],
    ],
    ids=lambda c: "-".join(a for a in c if a.isalpha()),
)
def test_a_map_without_a_start_cell_says_what_to_change_in_the_map(capsys, command):
    """Every command taking gym: targets: exit 2 and one line naming the map's missing 'S' cell, and no advice in
    Python (``initial=``, the argument of from_gymnasium, which the command line has not)."""
    code, out, err = run(capsys, command[0], "gym:FrozenLake-v1", "--env-kwargs", NO_START, *command[1:], "--json")
    assert code == 2, err
    assert error_envelope(out) == err.strip().removeprefix("error: ")
    assert err.count("\n") == 1 and err.startswith("error: gym:FrozenLake-v1: the map (desc) has no start cell 'S': "), err
    assert "with 'S' in desc" in err and "initial" not in err and "Traceback" not in err


def test_from_gymnasium_names_its_initial_argument_for_a_map_without_a_start_cell():
    """In Python the remedy is also the argument: ``initial=STATE``; with it the map without an 'S' is a model."""
    from rlverify.errors import ModelError
    from rlverify.models import from_gymnasium

    kwargs = json.loads(NO_START)
    with pytest.raises(ModelError, match=r"no start cell 'S': mark the cell .* with 'S' in desc .*, or pass initial=STATE$"):
        from_gymnasium("FrozenLake-v1", env_kwargs=kwargs)
    model = from_gymnasium("FrozenLake-v1", env_kwargs=kwargs, initial=0)
    assert model.initial_valuation()["s"] == 0


def test_a_start_distribution_that_is_not_a_number_is_refused():
    """An environment whose initial_state_distrib holds NaN (what 0/0 gives) is no distribution: refused, not taken
    as "no start state"."""
    from gymnasium import spaces

    from rlverify.errors import ModelError
    from rlverify.models import from_gymnasium

    env = gym.Env()
    env.observation_space, env.action_space = spaces.Discrete(2), spaces.Discrete(1)
    env.P = {0: {0: [(1.0, 1, 1.0, True)]}, 1: {0: [(1.0, 1, 0.0, True)]}}
    env.initial_state_distrib = np.array([np.nan, np.nan])
    with pytest.raises(ModelError, match="initial_state_distrib is not a distribution over the 2 states"):
        from_gymnasium(env)
