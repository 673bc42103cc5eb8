"""An SB3 zip is read without running code from it (issue 21): its JSON ``data`` and its ``policy.pth`` weights
only; SB3's own loader (which unpickles) only with ``--trust-code``. The numbers are SB3's own."""

from __future__ import annotations

import base64
import json
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.errors import PolicyError
from rlverify.policies import load_policy
from rlverify.policies.sb3zip import MAX_INFLATED_BYTES

sb3 = pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")

ROOT = Path(__file__).resolve().parents[2]
FROZENLAKE_PPO = ROOT / "examples" / "gymnasium" / "ppo_frozenlake.zip"
LAKE = ["left", "down", "right", "up"]


class _CreateFile:
    """Unpickling this opens (creates) ``path``: what a malicious pickle in a policy zip could do."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _poison(src: Path, dst: Path, marker: Path) -> None:
    """``src`` with every ``:serialized:`` blob of its ``data`` replaced by a pickle that creates ``marker``."""
    payload = base64.b64encode(pickle.dumps(_CreateFile(str(marker)))).decode()
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    data = json.loads(members["data"])
    for value in data.values():
        if isinstance(value, dict) and ":serialized:" in value:
            value[":serialized:"] = payload
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(dst, "w") as z:
        for name, raw in members.items():
            z.writestr(name, raw)


def _own_probabilities(model, obs: np.ndarray) -> np.ndarray:
    """SB3's own action distribution (PPO/A2C/MaskablePPO) or greedy one-hot (DQN) for observations ``obs``."""
    tensor, _ = model.policy.obs_to_tensor(obs)
    with torch.no_grad():
        if isinstance(model, sb3.DQN):
            q = model.policy.q_net(tensor).numpy()
            return np.eye(q.shape[1])[q.argmax(axis=1)]
        return model.policy.get_distribution(tensor).distribution.probs.double().numpy()


def test_a_pickled_call_in_the_zip_runs_only_with_trust_code(tmp_path, capsys):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.zip"
    _poison(FROZENLAKE_PPO, evil, marker)
    prop = 'P=? [F "goal"]'
    code = main(["verify", "gym:FrozenLake-v1", "--policy", str(evil), "-p", prop, "--json"])
    out = capsys.readouterr()
    assert not marker.exists()  # nothing was unpickled
    # and the policy read from the JSON text fields and the weights is the shipped one (README: 0.66606)
    assert code == 0 and json.loads(out.out)["result"]["value"] == pytest.approx(0.66606, abs=5e-6)
    # the opt-in is SB3's loader, which unpickles: the payload runs (and the zip, now broken, is refused)
    code = main(["verify", "gym:FrozenLake-v1", "--policy", str(evil), "-p", prop, "--trust-code", "--json"])
    assert marker.exists()
    assert code == 2 and "cannot load the model with Stable-Baselines3's loader" in capsys.readouterr().err


def test_a_zip_that_inflates_hugely_is_refused_before_inflating(tmp_path, capsys):
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("data", "w", force_zip64=True) as f:
            chunk = bytes(1 << 24)
            for _ in range(MAX_INFLATED_BYTES // len(chunk) + 1):
                f.write(chunk)
    assert bomb.stat().st_size < 4 * 2**20
    for extra in ([], ["--trust-code"]):
        code = main(["verify", "gym:FrozenLake-v1", "--policy", str(bomb), "-p", 'P=? [F "goal"]', *extra])
        err = capsys.readouterr().err
        assert code == 2 and "inflate to 272 MiB" in err and "refused without inflating" in err, err


def test_the_shipped_frozenlake_ppo_gives_sb3s_own_distribution():
    model = sb3.PPO.load(str(FROZENLAKE_PPO), device="cpu")
    policy = load_policy(str(FROZENLAKE_PPO), features=["s"], actions=LAKE)
    assert policy.algorithm == "PPO" and not policy.trusted
    obs = np.arange(16)[:, None]
    # numpy's float32 tanh and softmax against torch's: within two float32 ulps of 1 (2.4e-7)
    np.testing.assert_allclose(policy.action_probabilities(obs), _own_probabilities(model, obs[:, 0]), rtol=0, atol=2.5e-7)
    predicted, _ = model.predict(obs[:, 0], deterministic=True)
    assert (policy.choose(obs)[0] == predicted).all()


def _box_env():
    from rlverify.gym import MDPEnv

    return MDPEnv.from_benchmark("running-example-v1")


@pytest.mark.parametrize(
    ("algo", "kwargs"),
    [
        ("PPO", {"net_arch": [8, 8]}),  # default Tanh
        ("PPO", {"net_arch": {"pi": [6], "vf": [5]}, "activation_fn": "ReLU"}),
        ("A2C", {"net_arch": [7], "activation_fn": "ELU"}),
        ("DQN", {"net_arch": [8]}),
        ("MaskablePPO", {"net_arch": [8], "activation_fn": "ReLU"}),
    ],
    ids=["ppo-tanh", "ppo-relu-dict", "a2c-elu", "dqn", "maskable"],
)
def test_models_trained_here_give_sb3s_own_numbers(tmp_path, algo, kwargs):
    env = _box_env()
    kwargs = dict(kwargs)
    if "activation_fn" in kwargs:
        kwargs["activation_fn"] = getattr(torch.nn, kwargs["activation_fn"])
    if algo == "MaskablePPO":
        cls = pytest.importorskip("sb3_contrib").MaskablePPO
    else:
        cls = getattr(sb3, algo)
    extra = {"learning_starts": 0, "train_freq": 4} if algo == "DQN" else {"n_steps": 32}
    if algo in ("PPO", "MaskablePPO"):
        extra["batch_size"] = 32
    model = cls("MlpPolicy", env, seed=0, device="cpu", policy_kwargs=kwargs, **extra)
    model.learn(total_timesteps=64)
    path = tmp_path / "m.zip"
    model.save(str(path))
    features, actions = list(env.unwrapped.dynamics.features), list(env.action_names)
    policy = load_policy(str(path), features=features, actions=actions)
    assert policy.algorithm == ("A2C" if algo == "A2C" else algo) and policy.maskable == (algo == "MaskablePPO")
    obs = np.vstack([env.unwrapped.dynamics.observations, np.random.default_rng(0).uniform(-5, 5, (64, len(features)))])
    obs = obs.astype(np.float32)
    own = _own_probabilities(model, obs)
    np.testing.assert_allclose(policy.action_probabilities(obs), own, rtol=0, atol=1e-7)
    if kwargs.get("activation_fn") is torch.nn.ReLU:  # a ReLU actor is read as the MLP the abstraction bounds
        assert policy.network().sizes[0] == len(features)


def test_a_custom_policy_class_is_refused_naming_trust_code_which_then_loads_it(tmp_path):
    from stable_baselines3.common.policies import ActorCriticPolicy

    env = gym.make("FrozenLake-v1")
    model = sb3.PPO(_MyPolicy, env, n_steps=32, batch_size=32, seed=0, device="cpu")
    assert isinstance(model.policy, ActorCriticPolicy)
    path = tmp_path / "custom.zip"
    model.save(str(path))
    with pytest.raises(PolicyError, match=r"--trust-code \(loads the zip with Stable-Baselines3's loader, which unpickles"):
        load_policy(str(path), features=["s"], actions=LAKE)
    trusted = load_policy(str(path), features=["s"], actions=LAKE, trust_code=True)
    obs = np.arange(16)[:, None]
    np.testing.assert_allclose(trusted.action_probabilities(obs), _own_probabilities(model, obs[:, 0]), atol=1e-7)


def test_a_custom_feature_extractor_is_refused_naming_trust_code(tmp_path):
    from stable_baselines3.common.torch_layers import FlattenExtractor

    class MyExtractor(FlattenExtractor):
        pass

    model = sb3.PPO(
        "MlpPolicy",
        gym.make("FrozenLake-v1"),
        n_steps=32,
        batch_size=32,
        seed=0,
        device="cpu",
        policy_kwargs={"features_extractor_class": MyExtractor},
    )
    path = tmp_path / "extractor.zip"
    model.save(str(path))
    with pytest.raises(PolicyError, match="cannot be read without running code; pass --trust-code") as info:
        load_policy(str(path), features=["s"], actions=LAKE)
    assert "features_extractor_class" in str(info.value) and "MyExtractor" in str(info.value)


def test_weights_that_are_not_plain_tensors_are_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil_weights.zip"
    with zipfile.ZipFile(FROZENLAKE_PPO) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["policy.pth"] = pickle.dumps(_CreateFile(str(marker)))
    with zipfile.ZipFile(path, "w") as z:
        for name, raw in members.items():
            z.writestr(name, raw)
    with pytest.raises(PolicyError, match=r"policy\.pth: not a PyTorch file of tensors \(a bare pickle"):
        load_policy(str(path), features=["s"], actions=LAKE)
    assert not marker.exists()


def test_weights_that_do_not_fit_the_architecture_are_refused(tmp_path):
    path = tmp_path / "wrong.zip"
    with zipfile.ZipFile(FROZENLAKE_PPO) as z:
        members = {n: z.read(n) for n in z.namelist()}
    data = json.loads(members["data"])
    data["policy_kwargs"] = {"net_arch": [16]}  # the weights are of net_arch [32]
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(path, "w") as z:
        for name, raw in members.items():
            z.writestr(name, raw)
    with pytest.raises(PolicyError, match="do not fit the PPO MlpPolicy") as info:
        load_policy(str(path), features=["s"], actions=LAKE)
    assert "mlp_extractor.policy_net.0: expected weight (16, 16)" in str(info.value)


try:  # a policy class of the user's own (defined here, so SB3's loader can import it back with --trust-code)
    from stable_baselines3.common.policies import ActorCriticPolicy as _Base

    class _MyPolicy(_Base):
        pass
except ImportError:  # pragma: no cover - sb3 missing: the tests above are skipped
    pass
