"""Red-team findings on seeds and training: one --seed range for every command and engine, training refused up front
when its network cannot fit in memory, layer widths that are empty or zero refused by name."""

from __future__ import annotations

import pytest

from rlverify.cli.main import main
from rlverify.errors import RlverifyError

MAX = 2**63 - 1


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize(
    "argv",
    [
        ["abstract", "acc-v1", "-k", "1"],
        ["train", "running-example-v1", "--steps", "64", "--out", "{tmp}/s.onnx"],
        ["simulate", "running-example-v1", "-p", "reach-goal-2", "--runs", "10"],
    ],
    ids=["abstract", "train", "simulate"],
)
@pytest.mark.parametrize("seed", ["-1", str(2**63)])
def test_a_seed_no_engine_can_use_is_refused(capsys, tmp_path, argv, seed):
    code, out = run(capsys, *[a.replace("{tmp}", str(tmp_path)) for a in argv], "--seed", seed)
    assert code == 2 and f"argument --seed: {seed} is out of range" in out and "Traceback" not in out
    assert not (tmp_path / "s.onnx").exists()


def test_the_largest_seed_runs(capsys):
    import json

    code, out = run(
        capsys, "simulate", "running-example-v1", "-p", "reach-goal-2", "--runs", "10", "--seed", str(MAX), "--json"
    )
    assert code == 0 and json.loads(out)["result"]["runs"] == 10


def test_the_python_apis_refuse_a_negative_seed():
    from rlverify import AbstractionOptions, benchmarks, verify_abstraction
    from rlverify.errors import TrainingError
    from rlverify.training.ppo import check_seed

    acc = benchmarks.make("acc-v1")
    with pytest.raises(RlverifyError, match=r"seed must be a whole number in \[0, 2\*\*63-1\].*got -1"):
        verify_abstraction(acc.model(), acc.load_policy("ppo"), AbstractionOptions(horizon=1, seed=-1))
    with pytest.raises(TrainingError, match="seed"):
        check_seed(-1)
    assert check_seed(MAX) == MAX


def test_a_network_too_large_for_memory_is_refused_before_training(capsys, tmp_path):
    pytest.importorskip("torch")
    code, out = run(
        capsys, "train", "running-example-v1", "--hidden", "100000,100000", "--steps", "64", "--out", str(tmp_path / "h.onnx")
    )
    lines = out.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--hidden" in out and "20,001,000,004 parameters" in out
    assert "GB" in out and "memory guard" in out and not (tmp_path / "h.onnx").exists()


def test_the_memory_estimate_counts_the_networks_parameters(monkeypatch):
    torch = pytest.importorskip("torch")
    import rlverify.models.explicit as explicit
    from rlverify.errors import TrainingError
    from rlverify.training.ppo import BYTES_PER_ACTIVATION, BYTES_PER_PARAMETER, check_training_memory

    sizes = [3, 50, 40, 5]
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 50), torch.nn.ReLU(), torch.nn.Linear(50, 40), torch.nn.ReLU(), torch.nn.Linear(40, 5)
    )
    params = sum(p.numel() for p in net.parameters())  # torch's own count: 3*50+50 + 50*40+40 + 40*5+5
    estimate = check_training_memory([sizes], 100)
    assert estimate == BYTES_PER_PARAMETER * params + BYTES_PER_ACTIVATION * (50 + 40 + 5) * 100
    monkeypatch.setattr(explicit, "machine_memory", lambda: 2**30)  # a 1 GiB machine
    monkeypatch.setattr(explicit, "resident_bytes", lambda: 0)
    check_training_memory([[3, 1000, 3]], 100)  # about 200 kB
    with pytest.raises(TrainingError, match=r"--hidden: training the network 3-10000-10000-3 \(100,080,003 param"):
        check_training_memory([[3, 10000, 10000, 3]], 100)  # 3.2 GB > 80% of 1 GiB


@pytest.mark.parametrize(
    ("hidden", "says"),
    [
        ("64,,64", "an empty layer width"),
        ("64,64,", "an empty layer width"),
        ("0", "positive whole layer widths"),
        ("64,-1", "expected comma-separated positive integers"),
        ("1e3", "expected comma-separated positive integers"),
        (",".join(["2"] * 65), "at most 64 hidden layers"),
    ],
)
def test_bad_layer_widths_are_refused(capsys, tmp_path, hidden, says):
    pytest.importorskip("torch")
    code, out = run(
        capsys, "train", "running-example-v1", f"--hidden={hidden}", "--steps", "64", "--out", str(tmp_path / "h.onnx")
    )
    assert code == 2 and says in out and len(out.strip().splitlines()) == 1


def test_layer_widths_from_python():
    from rlverify.errors import TrainingError
    from rlverify.training.ppo import parse_hidden

    assert parse_hidden("64, 32") == (64, 32) and parse_hidden((8, 8)) == (8, 8)
    for bad in ((8, 1.5), (8, True), (), "x"):
        with pytest.raises(TrainingError, match="hidden"):
            parse_hidden(bad)
