"""Gymnasium environments: rlverify's episode simulator side by side with SB3's evaluate_policy and a bare loop.

Prints figures and ratios measured in one run; not a unit test.

1. CartPole-v1, a PPO agent trained here (seconds; also as saved after a quarter of its training, when it still
   fails) and the shipped zip (examples/gymnasium/cartpole; ``--zip``), deterministic
   mode: rlverify's ``P=? [F<=500 "terminated"]`` (Clopper-Pearson) and ``R=? [C<=500]`` (Student-t) over ``N``
   episodes against SB3's ``evaluate_policy(model, DummyVecEnv of 16 copies, n_eval_episodes=N, deterministic=True,
   return_episode_rewards=True)``; its intervals computed here from its episode lengths and returns (Clopper-Pearson
   from scipy's beta quantiles; a Student-t interval). Printed: both estimates and intervals, whether they overlap,
   seconds each and the ratio (target >= 20x). evaluate_policy on 16 copies takes ``N/16`` episodes from each copy
   in a way that favours short episodes (SB3 documents it); what it does is reported as is.
2. A bare loop: gymnasium's native ``CartPoleVectorEnv`` (``N`` copies) and the same PPO network exported to ONNX
   (``mlp_extractor.policy_net`` + ``action_net``) in onnxruntime, actions sampled, until every episode is done; vs
   rlverify (stochastic mode) on the same ``N`` episodes with the SB3 zip and with the ONNX file. Printed: seconds
   (best of ``--repeats``, interleaved) and the ratio bare/rlverify (target >= 0.7).
3. Pendulum-v1 with a TD3 agent trained here (net_arch [64, 64]): ``R=? [C<=200]`` with Hoeffding's interval
   (per-step reward in [-16.2736044, 0]) and ``P=? [F<=200 ("down" & "late")]`` (``down=obs[0] < -0.9``: the pole
   hanging, ``late=step >= 50``: after the swing-up time). Acrobot-v1 with an energy-pumping heuristic (a Python
   policy file): ``P=? [F<=500 "slow"]`` with ``slow=step >= 100`` (the tip not above the line within 99 steps: a
   failure; the episode terminates when it is).
4. Ray on loopback (a 2-CPU runtime started in this process): the CartPole zip's estimate on Ray is bit-identical to
   the local one (identical: yes/no).

Wall-clock figures: other processes on the machine slow every figure (the load average is printed).

Usage: python benchmarks/gymnasium.py [--quick] [--episodes 1000] [--repeats 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

# `python benchmarks/gymnasium.py` puts this folder first on the path, where this file would shadow the gymnasium
# package (for SB3 too): the folder is taken off before anything imports gymnasium
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

T = TypeVar("T")
HERE = Path(__file__).resolve().parents[1]
SHIPPED = HERE / "examples" / "gymnasium" / "cartpole" / "ppo_cartpole.zip"
TERMINATED = 'P=? [F<=500 "terminated"]'
RETURN = "R=? [C<=500]"
SLOW = 'P=? [F<=500 "slow"]'
CP_FEATURES = ["obs[0]", "obs[1]", "obs[2]", "obs[3]"]
PENDULUM_REWARD = (-16.2736044, 0.0)  # -(pi^2 + 0.1 * 8^2 + 0.001 * 2^2): the least reward of a step, and 0
ACROBOT_POLICY = '''
import numpy as np

FEATURES = ["obs[0]", "obs[1]", "obs[2]", "obs[3]", "obs[4]", "obs[5]"]
ACTIONS = ["0", "1", "2"]


def pump(obs):
    """Torque with the second joint's angular velocity (energy pumping): +1 (action 2) or -1 (action 0)."""
    out = np.zeros((len(obs), 3))
    out[np.arange(len(obs)), np.where(obs[:, 5] > 0, 2, 0)] = 1.0
    return out
'''


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and its wall seconds."""
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def clopper_pearson(k: int, n: int, delta: float) -> tuple[float, float]:
    """The exact two-sided interval of a binomial proportion ``k/n`` at confidence ``1 - delta`` (scipy's beta)."""
    from scipy.stats import beta

    lo = 0.0 if k == 0 else float(beta.ppf(delta / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - delta / 2, k + 1, n - k))
    return lo, hi


def student_t(values: np.ndarray, delta: float) -> tuple[float, float]:
    """The Student-t interval of the mean of ``values`` at confidence ``1 - delta`` (asymptotic, not a guarantee)."""
    from scipy.stats import t

    n, mean = len(values), float(np.mean(values))
    half = float(t.ppf(1 - delta / 2, n - 1)) * float(np.std(values, ddof=1)) / math.sqrt(n) if n > 1 else math.inf
    return mean - half, mean + half


def overlap(a: tuple[float, float], b: tuple[float, float]) -> str:
    return "yes" if max(a[0], b[0]) <= min(a[1], b[1]) else "NO"


def fmt(iv: tuple[float, float], digits: int = 4) -> str:
    return f"[{iv[0]:.{digits}f}, {iv[1]:.{digits}f}]"


def train_ppo(steps: int, seed: int):  # -> stable_baselines3.PPO
    """The shipped agent's recipe: ``train()`` of examples/gymnasium/cartpole/train_cartpole.py (PPO, 8 copies, two
    hidden layers of 32 units), run from that file so that the benchmark trains what the example ships."""
    import runpy

    return runpy.run_path(str(HERE / "examples" / "gymnasium" / "cartpole" / "train_cartpole.py"))["train"](steps, seed)


def train_td3(steps: int, seed: int):  # -> stable_baselines3.TD3
    """A small TD3 on Pendulum-v1 (net_arch [64, 64], Gaussian exploration noise 0.1)."""
    from stable_baselines3 import TD3
    from stable_baselines3.common.noise import NormalActionNoise

    noise = NormalActionNoise(mean=np.zeros(1), sigma=0.1 * np.ones(1))
    model = TD3(
        "MlpPolicy",
        "Pendulum-v1",
        learning_rate=1e-3,
        learning_starts=min(1000, steps // 4),
        action_noise=noise,
        gamma=0.98,
        seed=seed,
        device="cpu",
        policy_kwargs={"net_arch": [64, 64]},
    )
    model.learn(total_timesteps=steps)
    return model


def export_onnx(model, path: Path) -> None:  # model: stable_baselines3.PPO
    """The PPO's logits (``mlp_extractor.policy_net`` then ``action_net``) as an ONNX file with a batch axis."""
    import torch

    net = torch.nn.Sequential(*model.policy.mlp_extractor.policy_net, model.policy.action_net).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter (dynamo=False), on purpose
        torch.onnx.export(
            net,
            (torch.zeros(1, 4),),
            str(path),
            input_names=["obs"],
            output_names=["logits"],
            dynamic_axes={"obs": {0: "n"}, "logits": {0: "n"}},
            dynamo=False,
        )


def bare_loop(onnx: Path, n: int, seed: int) -> tuple[float, int, int]:
    """Seconds of ``n`` CartPole episodes in gymnasium's native vector env with the ONNX network in onnxruntime
    (actions sampled from the softmax), until every episode is done (each copy's first episode); also the steps
    taken and the episodes that terminated (fell) rather than reached the time limit."""
    import onnxruntime as ort
    from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

    sess = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    venv = CartPoleVectorEnv(num_envs=n, max_episode_steps=500)
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    obs, _ = venv.reset(seed=seed)
    done = np.zeros(n, bool)
    fell = np.zeros(n, bool)
    steps = 0
    while not done.all():
        logits = sess.run(None, {"obs": obs.astype(np.float32)})[0]
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        a = (rng.random(n)[:, None] > np.cumsum(p, 1)[:, :-1]).sum(1)
        obs, _, term, trunc, _ = venv.step(a)
        steps += int((~done).sum())
        fell |= term & ~done
        done |= term | trunc
    seconds = time.perf_counter() - t
    venv.close()
    return seconds, steps, int(fell.sum())


def part_sb3(model, label: str, n: int, seed: int, delta: float) -> None:
    """Section 1 for one agent: rlverify against evaluate_policy, same episodes count, deterministic."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    import rlverify
    from rlverify.resolve import resolve_simulated
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.returns import estimate_return
    from rlverify.statistical.verify import StatisticalOptions

    opts = StatisticalOptions(
        method="clopper-pearson", runs=n, delta=delta, simulation=SimulationOptions(seed=seed, mode="deterministic")
    )
    with tempfile.TemporaryDirectory(prefix="rlverify-gym-") as tmp:
        zip_path = Path(tmp) / "ppo.zip"
        model.save(str(zip_path))
        warm = replace_runs(opts, 16)
        rlverify.verify_statistical("gym:CartPole-v1", TERMINATED, str(zip_path), warm)  # warm-up (imports), not timed
        # the whole call: the zip read, the environment made, the episodes simulated
        p_res, p_sec = timed(lambda: rlverify.verify_statistical("gym:CartPole-v1", TERMINATED, str(zip_path), opts))
        target = resolve_simulated("gym:CartPole-v1", RETURN, policy=str(zip_path), command="benchmark")
        assert target.property is not None
        r_res, r_sec = timed(lambda: estimate_return(target.model, target.property, target.policy, opts))
    venv = make_vec_env("CartPole-v1", n_envs=16, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluate_policy(model, venv, n_eval_episodes=16, deterministic=True)  # warm-up (imports, torch), not timed
        (returns, lengths), e_sec = timed(
            lambda: evaluate_policy(model, venv, n_eval_episodes=n, deterministic=True, return_episode_rewards=True)
        )
    venv.close()
    lengths_a, returns_a = np.asarray(lengths), np.asarray(returns, dtype=float)
    fell = int((lengths_a < 500).sum())  # the time limit is 500 steps: shorter episodes terminated (the pole fell)
    e_iv = clopper_pearson(fell, len(lengths_a), delta)
    e_r_iv = student_t(returns_a, delta)
    p_iv = (float(p_res.interval[0]), float(p_res.interval[1]))
    r_iv = (float(r_res.interval[0]), float(r_res.interval[1]))
    print(f"\n1. CartPole-v1, {label}, deterministic, {n:,} episodes, confidence {1 - delta:g}")
    print(f"   {'':34}{'estimate':>10}  {'interval':<22}{'seconds':>9}")
    print(f"   {'rlverify ' + TERMINATED:<34}{p_res.estimate:>10.4f}  {fmt(p_iv):<22}{p_sec:>9.2f}")
    print(f"   {'evaluate_policy (len < 500)':<34}{fell / len(lengths_a):>10.4f}  {fmt(e_iv):<22}{e_sec:>9.2f}")
    print(f"   {'rlverify ' + RETURN:<34}{r_res.estimate:>10.2f}  {fmt(r_iv, 2):<22}{r_sec:>9.2f}")
    print(f"   {'evaluate_policy (returns)':<34}{returns_a.mean():>10.2f}  {fmt(e_r_iv, 2):<22}{'(same run)':>9}")
    print(
        f"   overlap: P {overlap(p_iv, e_iv)}, R {overlap(r_iv, e_r_iv)}; evaluate_policy / rlverify: "
        f"{e_sec / p_sec:.1f}x (P, whole call), {e_sec / r_sec:.1f}x (R, resolved target); "
        f"episodes {p_res.runs:,} vs {len(lengths_a):,}; rlverify {p_res.decisions:,} steps, "
        f"evaluate_policy {int(lengths_a.sum()):,}"
    )


def part_bare(model, n: int, seed: int, repeats: int) -> None:
    """Section 2: the bare native + onnxruntime loop against rlverify with the zip and the ONNX file."""
    from rlverify.resolve import resolve_simulated
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.verify import StatisticalOptions, verify_statistical

    with tempfile.TemporaryDirectory(prefix="rlverify-gym-") as tmp:
        zip_path, onnx = Path(tmp) / "ppo.zip", Path(tmp) / "ppo.onnx"
        model.save(str(zip_path))
        export_onnx(model, onnx)
        targets = {
            "rlverify, SB3 zip": resolve_simulated("gym:CartPole-v1", TERMINATED, policy=str(zip_path), command="benchmark"),
            "rlverify, ONNX file": resolve_simulated(
                "gym:CartPole-v1",
                TERMINATED,
                policy=str(onnx),
                features=CP_FEATURES,
                actions=["0", "1"],
                output="logits",
                command="benchmark",
            ),
        }
        opts = StatisticalOptions(method="clopper-pearson", runs=n, simulation=SimulationOptions(seed=seed, mode="stochastic"))
        best: dict[str, float] = {}
        info: dict[str, str] = {}
        bare_loop(onnx, min(n, 64), seed)  # warm-up: imports, the session
        for t in targets.values():
            verify_statistical(t.model, t.property, t.policy, replace_runs(opts, min(n, 64)))
        for _ in range(repeats):
            sec, steps, fell = bare_loop(onnx, n, seed)
            best["bare loop"] = min(best.get("bare loop", math.inf), sec)
            info["bare loop"] = f"{steps:,} steps, {fell} fell"
            for name, t in targets.items():
                res, sec = timed(lambda t=t: verify_statistical(t.model, t.property, t.policy, opts))
                best[name] = min(best.get(name, math.inf), sec)
                info[name] = f"{res.decisions:,} steps, {res.successes} fell, P={res.estimate:.4f}"
    print(f"\n2. CartPole-v1 bare loop vs rlverify, the same PPO network, stochastic, {n:,} episodes (best of {repeats})")
    for name, sec in best.items():
        ratio = "" if name == "bare loop" else f"   bare/rlverify {best['bare loop'] / sec:.2f}"
        print(f"   {name:<22}{sec:>8.3f} s  ({info[name]}){ratio}")


def replace_runs(opts, runs: int):  # StatisticalOptions -> StatisticalOptions
    from dataclasses import replace

    return replace(opts, runs=runs)


def part_control(n: int, seed: int, td3_steps: int, delta: float) -> None:
    """Section 3: Pendulum-v1 with TD3 (a return and a failure probability), Acrobot-v1 with a heuristic."""
    from rlverify.resolve import resolve_simulated
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.returns import estimate_return
    from rlverify.statistical.verify import StatisticalOptions, verify_statistical

    td3, train_sec = timed(lambda: train_td3(td3_steps, seed))
    det = StatisticalOptions(
        method="clopper-pearson", runs=n, delta=delta, simulation=SimulationOptions(seed=seed, mode="deterministic")
    )
    down = 'P=? [F<=200 ("down" & "late")]'
    with tempfile.TemporaryDirectory(prefix="rlverify-gym-") as tmp:
        zip_path = Path(tmp) / "td3.zip"
        td3.save(str(zip_path))
        t_ret = resolve_simulated("gym:Pendulum-v1", "R=? [C<=200]", policy=str(zip_path), command="benchmark")
        t_down = resolve_simulated(
            "gym:Pendulum-v1",
            down,
            policy=str(zip_path),
            labels=["down=obs[0] < -0.9", "late=step >= 50"],
            command="benchmark",
        )
        pol = Path(tmp) / "acrobot.py"
        pol.write_text(ACROBOT_POLICY)
        t_acro = resolve_simulated(
            "gym:Acrobot-v1", SLOW, policy=f"{pol}:pump", labels=["slow=step >= 100"], command="benchmark"
        )
        assert t_ret.property is not None and t_down.property is not None and t_acro.property is not None
        ret, ret_sec = timed(
            lambda: estimate_return(t_ret.model, t_ret.property, t_ret.policy, det, reward_range=PENDULUM_REWARD)
        )
        dn, dn_sec = timed(lambda: verify_statistical(t_down.model, t_down.property, t_down.policy, det))
        ac, ac_sec = timed(lambda: verify_statistical(t_acro.model, t_acro.property, t_acro.policy, det))
    print(f"\n3. control tasks, deterministic, {n:,} episodes, confidence {1 - delta:g}")
    print(f"   Pendulum-v1, TD3 net_arch [64, 64] trained {td3_steps:,} steps ({train_sec:.1f} s)")
    print(f"   {'property':<44}{'estimate':>10}  {'interval':<24}{'seconds':>8}")
    print(
        f"   {'R=? [C<=200] (Hoeffding, reward -16.27:0)':<44}{ret.estimate:>10.2f}  {fmt(ret.interval, 2):<24}{ret_sec:>8.2f}"
    )
    print(f"   {down + ' (CP)':<44}{dn.estimate:>10.4f}  {fmt(dn.interval):<24}{dn_sec:>8.2f}")
    print("   (down=obs[0] < -0.9: the pole hanging; late=step >= 50)")
    print("   Acrobot-v1, energy-pumping heuristic (torque with the second joint's velocity)")
    failed = SLOW + " (slow=step >= 100)"
    print(f"   {failed:<44}{ac.estimate:>10.4f}  {fmt(ac.interval):<24}{ac_sec:>8.2f}")
    print(f"   ({ac.decisions / max(ac.runs, 1):.0f} steps per episode on average; undecided {ac.undecided})")


def part_ray(shipped: Path, n: int, seed: int) -> None:
    """Section 4: the CartPole zip's estimate on a 2-CPU Ray runtime on loopback, against the local one."""
    import ray

    from rlverify.backends import BackendOptions
    from rlverify.resolve import resolve_simulated
    from rlverify.statistical.engine import SimulationOptions
    from rlverify.statistical.verify import StatisticalOptions, verify_statistical

    if not shipped.is_file():
        print(f"\n4. Ray: skipped ({shipped} not found)")
        return
    t = resolve_simulated("gym:CartPole-v1", TERMINATED, policy=str(shipped), command="benchmark")
    sim = SimulationOptions(seed=seed, mode="stochastic", batch_size=max(n // 4, 1))
    local_opts = StatisticalOptions(method="clopper-pearson", runs=n, simulation=sim)
    local, local_sec = timed(lambda: verify_statistical(t.model, t.property, t.policy, local_opts))
    temp = tempfile.mkdtemp(prefix="rlg", dir="/tmp")  # short: Unix socket paths are limited to 107 characters
    try:
        _, start_sec = timed(lambda: ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp))
        opts = StatisticalOptions(method="clopper-pearson", runs=n, simulation=sim, backend=BackendOptions(kind="ray"))
        remote, remote_sec = timed(lambda: verify_statistical(t.model, t.property, t.policy, opts))
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    fields = ("estimate", "interval", "runs", "successes", "undecided", "stalled", "decisions", "seed", "method")
    same = all(getattr(remote, f) == getattr(local, f) for f in fields)
    print(f"\n4. Ray on loopback (2 CPUs), shipped CartPole zip, stochastic, {n:,} episodes, {TERMINATED}")
    print(
        f"   local: P={local.estimate:.4f} {fmt(local.interval)} {local_sec:.2f} s; ray: P={remote.estimate:.4f} "
        f"{fmt(remote.interval)} {remote_sec:.2f} s (runtime start-up {start_sec:.1f} s, once per process)"
    )
    print(f"   identical: {'yes' if same else 'NO'} ({', '.join(fields)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a ~1 minute run: fewer episodes and training steps")
    ap.add_argument("--episodes", type=int, help="episodes per estimate (default 1000; --quick 200)")
    ap.add_argument("--repeats", type=int, help="repetitions of the bare-loop comparison (default 3; --quick 2)")
    ap.add_argument("--seed", type=int, default=0, help="seed of training, episodes and the bare loop (default 0)")
    ap.add_argument("--zip", type=Path, default=SHIPPED, help="the shipped CartPole PPO zip")
    ap.add_argument("--delta", type=float, default=0.05, help="error probability of every interval (default 0.05)")
    args = ap.parse_args()
    n = args.episodes or (200 if args.quick else 1000)
    repeats = args.repeats or (2 if args.quick else 3)
    ppo_steps, td3_steps = (16_000, 1_500) if args.quick else (48_000, 5_000)
    if n < 2 or repeats < 1:
        ap.error("--episodes must be at least 2 and --repeats at least 1")

    import gymnasium
    import onnxruntime
    import ray
    import stable_baselines3
    import torch

    import rlverify

    torch.set_num_threads(1)  # SB3's predict: one thread, as rlverify's policies
    print(
        f"versions: rlverify {rlverify.__version__}, gymnasium {gymnasium.__version__}, stable-baselines3 "
        f"{stable_baselines3.__version__}, torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, "
        f"ray {ray.__version__}"
    )
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; seed {args.seed} (training, "
        f"episodes, bare loop); {n:,} episodes; PPO {ppo_steps:,} steps, TD3 {td3_steps:,} steps"
    )
    from stable_baselines3 import PPO

    with tempfile.TemporaryDirectory(prefix="rlverify-gym-") as tmp:
        # the agent after a quarter of its training too (it still fails: a comparison with something to estimate)
        partial = Path(tmp) / "partial.zip"
        ppo, sec = timed(lambda: train_ppo(ppo_steps // 4, args.seed))
        ppo.save(str(partial))
        _, sec2 = timed(lambda: ppo.learn(total_timesteps=ppo_steps - ppo_steps // 4, reset_num_timesteps=False))
        print(
            f"PPO trained on CartPole-v1 in {sec + sec2:.1f} s ({ppo_steps:,} steps, 8 copies, net_arch [32, 32]; "
            f"saved after {ppo_steps // 4:,} too)"
        )
        part_sb3(PPO.load(str(partial), device="cpu"), f"PPO trained here, {ppo_steps // 4:,} steps", n, args.seed, args.delta)
    part_sb3(ppo, f"PPO trained here, {ppo_steps:,} steps", n, args.seed, args.delta)
    if args.zip.is_file():
        part_sb3(PPO.load(str(args.zip), device="cpu"), "shipped zip", n, args.seed, args.delta)
    else:
        print(f"(shipped zip {args.zip} not found: skipped)")
    part_bare(ppo, n, args.seed, repeats)
    part_control(n, args.seed, td3_steps, args.delta)
    part_ray(args.zip, n, args.seed)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
