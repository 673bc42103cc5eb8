"""Continuous-action SB3 policies (SAC, TD3, DDPG, PPO/A2C Gaussian) against SB3's own numbers.

Tiny agents are trained here (a few hundred steps), saved, and read back by rlverify without running code from the
zip and with ``trust_code``. The oracle is always SB3: ``model.predict(obs, deterministic=True)``; for the stochastic
action, SB3's own torch distribution sampled under a fixed torch seed (its ``rsample`` noise is then drawn again with
the same seed and given to rlverify), and SB3's samples' mean and spread.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rlverify.errors import PolicyError, RlverifyError
from rlverify.policies import load_policy
from rlverify.policies.continuous import ContinuousKind, ContinuousPolicy, is_continuous

sb3 = pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")

SMALL = {"net_arch": [16, 16]}
OFF_POLICY = {"learning_starts": 20, "batch_size": 16, "buffer_size": 500, "seed": 0, "policy_kwargs": SMALL}
ON_POLICY = {"n_steps": 64, "seed": 0, "policy_kwargs": SMALL}


def _train(algo: str, env_id: str = "Pendulum-v1", **extra: object):
    cls = getattr(sb3, algo)
    kwargs = dict(OFF_POLICY if algo in ("SAC", "TD3", "DDPG") else ON_POLICY)
    kwargs["policy_kwargs"] = dict(SMALL)  # SB3 adds to it
    if algo == "PPO":
        kwargs.update(batch_size=64, n_epochs=1)
    kwargs.update(extra)
    model = cls("MlpPolicy", env_id, device="cpu", **kwargs)
    model.learn(80 if algo in ("SAC", "TD3", "DDPG") else 64)
    return model


@pytest.fixture(scope="module")
def zips(tmp_path_factory):
    """Trained SAC, TD3, DDPG, PPO, A2C models on Pendulum and their zips."""
    root = tmp_path_factory.mktemp("continuous")
    out = {}
    for algo in ("SAC", "TD3", "DDPG", "PPO", "A2C"):
        model = _train(algo)
        path = root / f"{algo}.zip"
        model.save(path)
        out[algo] = (model, path)
    return out


def _observations(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.uniform(-np.pi, np.pi, n)
    return np.stack([np.cos(theta), np.sin(theta), rng.uniform(-8, 8, n)], axis=1).astype(np.float32)


ALGOS = ["SAC", "TD3", "DDPG", "PPO", "A2C"]
KINDS = {"SAC": "squashed", "TD3": "deterministic", "DDPG": "deterministic", "PPO": "gaussian", "A2C": "gaussian"}


@pytest.mark.parametrize("trust", [False, True], ids=["json+weights", "trust-code"])
@pytest.mark.parametrize("algo", ALGOS)
def test_deterministic_actions_are_sb3_predict(zips, algo, trust):
    model, path = zips[algo]
    policy = load_policy(str(path), trust_code=trust)
    assert is_continuous(policy) and isinstance(policy, ContinuousPolicy)
    assert policy.kind == KINDS[algo] and policy.algorithm == algo
    assert policy.features == ("obs[0]", "obs[1]", "obs[2]") and policy.actions == ("a[0]",)
    assert policy.low.tolist() == [-2.0] and policy.high.tolist() == [2.0]
    obs = _observations(200)
    expected, _ = model.predict(obs, deterministic=True)
    got = policy.act(obs.astype(np.float64), None)
    assert got.dtype == np.float64 and got.shape == (200, 1)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


def _sb3_sample(model, obs: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """SB3's own stochastic action (its distribution's sample, post-processed as predict does) under torch seed
    ``seed``, and the standard normals torch drew for it (the same seed, the same draw)."""
    policy = model.policy
    x = torch.as_tensor(obs)
    with torch.no_grad():
        if isinstance(model, sb3.SAC):
            mean, log_std, _ = policy.actor.get_action_dist_params(x)
            dist = policy.actor.action_dist.proba_distribution(mean, log_std)
        else:
            dist = policy.get_distribution(x)
        torch.manual_seed(seed)
        raw = dist.sample().numpy()
        torch.manual_seed(seed)
        eps = torch.normal(torch.zeros(raw.shape), torch.ones(raw.shape)).numpy()
    low, high = model.action_space.low, model.action_space.high
    action = policy.unscale_action(raw) if policy.squash_output else np.clip(raw, low, high)
    return action, eps.astype(np.float64)


@pytest.mark.parametrize("trust", [False, True], ids=["json+weights", "trust-code"])
@pytest.mark.parametrize("algo", ["SAC", "PPO", "A2C"])
def test_stochastic_action_with_fixed_noise_is_sb3s_sample(zips, algo, trust):
    model, path = zips[algo]
    policy = load_policy(str(path), trust_code=trust)
    obs = _observations(300, seed=1)
    expected, eps = _sb3_sample(model, obs, seed=7)
    got = policy.act(obs.astype(np.float64), eps)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    # the noise matters: another draw gives other actions
    assert np.abs(policy.act(obs.astype(np.float64), -eps) - expected).max() > 1e-2


@pytest.mark.parametrize("algo", ["SAC", "PPO"])
def test_sampled_actions_have_sb3s_mean_and_spread(zips, algo):
    model, path = zips[algo]
    policy = load_policy(str(path))
    obs = np.repeat(_observations(1, seed=3), 20_000, axis=0)
    theirs, _ = _sb3_sample(model, obs, seed=11)  # SB3's own samples
    ours = policy.act(obs.astype(np.float64), np.random.default_rng(5).standard_normal((len(obs), 1)))
    se = theirs.std() / np.sqrt(len(obs))
    assert abs(ours.mean() - theirs.mean()) < 5 * np.sqrt(2) * se
    assert ours.std() == pytest.approx(theirs.std(), rel=0.03)


def test_td3_ignores_noise_and_says_so(zips):
    _, path = zips["TD3"]
    policy = load_policy(str(path))
    obs = _observations(20).astype(np.float64)
    np.testing.assert_array_equal(policy.act(obs, np.ones((20, 1)) * 3), policy.act(obs, None))
    assert policy.kind is ContinuousKind.DETERMINISTIC and "exploration noise" in (policy.note or "")
    assert "exploration noise" in policy.describe() and "\n" not in policy.describe()


def test_model_object_in_memory_is_its_zip(zips):
    model, path = zips["SAC"]
    obs = _observations(50).astype(np.float64)
    np.testing.assert_allclose(load_policy(model).act(obs), load_policy(str(path)).act(obs), atol=1e-6)


def test_the_discrete_api_is_refused_in_one_line(zips):
    policy = load_policy(str(zips["SAC"][1]))
    obs = _observations(3).astype(np.float64)
    for call in (policy.action_probabilities, policy.choose, policy.network):
        with pytest.raises(PolicyError, match="gives actions, not probabilities") as exc:
            call(obs)
        assert "\n" not in str(exc.value)


def test_names_and_shapes_are_checked(zips):
    path = zips["PPO"][1]
    named = load_policy(str(path), features=["cos", "sin", "omega"])
    assert named.features == ("cos", "sin", "omega")
    with pytest.raises(PolicyError, match=r"observes 3 features, but the features declared are \[.a., .b.\]"):
        load_policy(str(path), features=["a", "b"])
    with pytest.raises(PolicyError, match="contradicts"):
        load_policy(str(path), actions=["torque"])
    with pytest.raises(PolicyError, match="drop --output"):
        load_policy(str(path), output="logits")
    with pytest.raises(PolicyError, match=r"noise of shape \(4, 1\)"):
        named.act(np.zeros((4, 3)), np.zeros((4, 2)))
    with pytest.raises(PolicyError, match=r"shape \(N, 3\)"):
        named.act(np.zeros((4, 2)))


@pytest.mark.parametrize("activation", ["LeakyReLU", "ELU", "Sigmoid"])
def test_recorded_activations_are_computed_as_torch_does(tmp_path, activation):
    model = sb3.PPO(
        "MlpPolicy",
        "Pendulum-v1",
        seed=1,
        device="cpu",
        policy_kwargs={"net_arch": [8], "activation_fn": getattr(torch.nn, activation)},
    )
    model.save(tmp_path / "m.zip")
    obs = _observations(100)
    got = load_policy(str(tmp_path / "m.zip")).act(obs.astype(np.float64))
    np.testing.assert_allclose(got, model.predict(obs, deterministic=True)[0], atol=1e-5, rtol=0)


def test_an_activation_it_does_not_compute_needs_trust_code(tmp_path):
    model = sb3.SAC(
        "MlpPolicy", "Pendulum-v1", seed=1, device="cpu", policy_kwargs={"net_arch": [8], "activation_fn": torch.nn.GELU}
    )
    model.save(tmp_path / "gelu.zip")
    with pytest.raises(PolicyError, match=r"GELU.*--trust-code") as exc:
        load_policy(str(tmp_path / "gelu.zip"))
    assert "\n" not in str(exc.value)
    obs = _observations(30)
    got = load_policy(str(tmp_path / "gelu.zip"), trust_code=True).act(obs.astype(np.float64))
    np.testing.assert_allclose(got, model.predict(obs, deterministic=True)[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("algo", ["SAC", "PPO"])
def test_gsde_is_refused_naming_the_option(tmp_path, algo):
    model = getattr(sb3, algo)("MlpPolicy", "Pendulum-v1", seed=0, device="cpu", use_sde=True)
    model.save(tmp_path / "m.zip")
    for trust in (False, True):
        with pytest.raises(PolicyError, match=r"use_sde=True\)?[;,]? ") as exc:
            load_policy(str(tmp_path / "m.zip"), trust_code=trust)
        assert "gSDE" in str(exc.value) and "\n" not in str(exc.value)


def test_squash_output_is_refused_naming_the_option(zips, tmp_path):
    """SB3 takes squash_output only with gSDE; a zip that says so without it is refused, not read as clipped."""
    path = zips["PPO"][1]
    with zipfile.ZipFile(path) as z:
        data = json.loads(z.read("data"))
    data["policy_kwargs"] = {**data["policy_kwargs"], "squash_output": True}
    _rewrite(path, tmp_path / "m.zip", "data", json.dumps(data).encode())
    with pytest.raises(PolicyError, match=r"policy_kwargs squash_output=True \(tanh-squashed") as exc:
        load_policy(str(tmp_path / "m.zip"))
    assert "\n" not in str(exc.value)


def _rewrite(src: Path, dst: Path, member: str, raw: bytes) -> None:
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members[member] = raw
    with zipfile.ZipFile(dst, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_hostile_zips_are_refused_in_one_line(zips, tmp_path):
    path = zips["SAC"][1]
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(RlverifyError, match=r"truncated\.zip: not a (readable zip|Stable-Baselines3 model zip)") as exc:
        load_policy(str(truncated))
    assert "\n" not in str(exc.value)

    with zipfile.ZipFile(path) as z:
        state = torch.load(io.BytesIO(z.read("policy.pth")), weights_only=True)
    state["actor.mu.weight"] = torch.zeros(3, 16)
    buf = io.BytesIO()
    torch.save(state, buf)
    wrong = tmp_path / "wrong.zip"
    _rewrite(path, wrong, "policy.pth", buf.getvalue())
    with pytest.raises(PolicyError, match=r"actor\.mu: expected weight \(1, 16\).*got \(3, 16\)") as exc:
        load_policy(str(wrong))
    assert "\n" not in str(exc.value)
