"""Network policies compute with one thread unless asked for more: torch (TorchScript, SB3) as onnxruntime.

torch's default is a thread per core; on a loaded machine a policy's small batches then made simulation 15-45x
slower (``benchmarks/startup.py``'s sibling figures are in the issue). ``threads`` / ``--policy-threads`` raises it for
every adapter; torch's count is process-global, so each test restores it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlverify.errors import OptionError
from rlverify.policies import load_policy

ROOT = Path(__file__).resolve().parents[2]
FROZENLAKE_PPO = ROOT / "examples" / "gymnasium" / "ppo_frozenlake.zip"
LAKE = ["left", "down", "right", "up"]


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(4)  # as torch starts on a 4-core machine: the adapters must bring it down
    yield torch
    torch.set_num_threads(before)


def torchscript(torch, path: Path) -> Path:
    """A tiny TorchScript logits network (2 features, 3 actions) with its sidecar."""
    torch.manual_seed(0)
    torch.jit.save(
        torch.jit.script(torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))), str(path)
    )
    path.with_name(path.name + ".json").write_text(
        json.dumps({"features": ["x", "y"], "actions": ["a", "b", "c"], "output": "logits"})
    )
    return path


def test_a_torchscript_policy_computes_with_one_thread(torch, tmp_path):
    path = torchscript(torch, tmp_path / "net.pt")
    policy = load_policy(str(path))
    assert torch.get_num_threads() == 1 and policy.threads == 1
    states = np.array([[0.5, -1.0], [2.0, 3.0]])
    with torch.no_grad():  # the same probabilities as the module's own softmax
        own = torch.softmax(torch.jit.load(str(path))(torch.as_tensor(states, dtype=torch.float32)), dim=1).double().numpy()
    np.testing.assert_allclose(policy.action_probabilities(states), own, rtol=1e-6)


def test_a_torchscript_policy_takes_the_threads_asked_for(torch, tmp_path):
    load_policy(str(torchscript(torch, tmp_path / "net.pt")), threads=3)
    assert torch.get_num_threads() == 3


def test_an_sb3_policy_computes_with_one_thread_or_as_asked(torch):
    pytest.importorskip("stable_baselines3")
    from threadpoolctl import threadpool_info

    # read without running code: numpy computes, its BLAS limited (torch's setting untouched)
    torch.set_num_threads(4)
    policy = load_policy(str(FROZENLAKE_PPO), features=["s"], actions=LAKE)
    blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    assert policy.threads == 1 and blas and set(blas) == {1} and torch.get_num_threads() == 4
    assert load_policy(str(FROZENLAKE_PPO), features=["s"], actions=LAKE, threads=2).threads == 2
    assert {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"} == {2}
    load_policy(str(FROZENLAKE_PPO), features=["s"], actions=LAKE, trust_code=True, threads=3)  # SB3's own loader
    assert torch.get_num_threads() == 3


def test_an_onnx_session_takes_the_threads_asked_for():
    from rlverify.benchmarks import make

    path = str(make("freeway-v1").policies["reference"])
    assert load_policy(path)._session.get_session_options().intra_op_num_threads == 1
    raised = load_policy(path, threads=2)
    assert raised.threads == 2 and raised._session.get_session_options().intra_op_num_threads == 2


@pytest.mark.parametrize("bad", [0, -1, 1025, 2.5, "2", True, None])
def test_a_thread_count_that_is_no_whole_number_in_range_is_refused(bad):
    with pytest.raises(OptionError, match=r"^threads: expected a whole number of threads \(1 to 1024\), got "):
        load_policy(str(FROZENLAKE_PPO), features=["s"], actions=LAKE, threads=bad)


def test_the_cli_option_sets_torchs_threads(torch, capsys):
    pytest.importorskip("stable_baselines3")
    from rlverify.cli.main import main

    argv = ["verify", "gym:FrozenLake-v1", "--policy", str(FROZENLAKE_PPO), "-p", 'P=? [F<=3 "goal"]', "--json"]
    argv.append("--trust-code")  # SB3's own loader: torch computes (a zip read without running code is numpy's)
    assert main([*argv, "--policy-threads", "2"]) == 0
    assert torch.get_num_threads() == 2
    assert main(argv) == 0  # the default: one thread
    assert torch.get_num_threads() == 1
    capsys.readouterr()


@pytest.mark.parametrize("value,message", [("0", "got 0"), ("many", "expected an integer, got 'many'")])
def test_the_cli_refuses_a_bad_thread_count_naming_the_option(capsys, value, message):
    from rlverify.cli.main import main

    argv = ["verify", "running-example-v1", "-p", "reach-goal-2", "--policy-threads", value]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusal of a non-integer
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "--policy-threads" in err and message in err and "Traceback" not in err
