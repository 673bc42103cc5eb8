"""The torch-free reader of PyTorch's file format (rlverify.policies.torch_file) against torch's own loader.

(a) Every tensor of every shipped zip and of files torch.save writes here (dtypes, views, shared storages, 0-d and
empty tensors) reads bit for bit as ``torch.load(weights_only=True)`` reads it; (b) a pickle naming anything but
tensors and plain data is refused naming it, and nothing in it runs; sizes out of bounds are refused in one line;
(c) from a process where torch cannot be imported, ``rlverify verify`` / ``simulate`` of the shipped SB3 zips print the
numbers they print with torch, and torch is never imported.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlverify.errors import PolicyError
from rlverify.policies import load_policy
from rlverify.policies.torch_file import read_object, read_state_dict

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "rlverify" / "benchmarks" / "data"
SHIPPED = sorted(DATA.rglob("*.zip"))
FROZENLAKE_PPO = ROOT / "examples" / "gymnasium" / "ppo_frozenlake.zip"
LAKE = ["left", "down", "right", "up"]


def _torch():
    return pytest.importorskip("torch")


def _same(ref: object, mine: object, where: str) -> int:
    """Assert ``mine`` (the reader's) is ``ref`` (torch's) with tensors as arrays, bit for bit; count the tensors."""
    torch = _torch()
    if isinstance(ref, torch.Tensor):
        expected = ref.numpy()
        assert isinstance(mine, np.ndarray), where
        assert mine.dtype == expected.dtype and mine.shape == expected.shape, where
        assert np.ascontiguousarray(expected).tobytes() == mine.tobytes(), where
        return 1
    if isinstance(ref, dict):
        assert isinstance(mine, dict) and list(mine) == list(ref), where
        return sum(_same(ref[k], mine[k], f"{where}[{k!r}]") for k in ref)
    if isinstance(ref, (list, tuple)):
        assert type(mine) is type(ref) and len(mine) == len(ref), where
        return sum(_same(a, b, f"{where}[{i}]") for i, (a, b) in enumerate(zip(ref, mine, strict=True)))
    assert type(mine) is type(ref) and mine == ref, where
    return 0


def _saved(obj: object) -> bytes:
    torch = _torch()
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


# (a) agreement with torch.load(weights_only=True) ---------------------------------------------------------------------


def test_the_shipped_zips_are_there():
    assert {p.name for p in SHIPPED} >= {"ppo_frozenlake.zip", "ppo_cartpole.zip", "td3_pendulum.zip"}


@pytest.mark.parametrize("zip_path", SHIPPED, ids=lambda p: p.name)
def test_every_tensor_of_every_shipped_zip_reads_as_torch_reads_it(zip_path):
    torch = _torch()
    with zipfile.ZipFile(zip_path) as z:
        members = {n: z.read(n) for n in z.namelist() if n.endswith(".pth")}
    assert "policy.pth" in members
    tensors = 0
    for name, raw in members.items():  # the policy, the optimizers' state, pytorch_variables
        ref = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        tensors += _same(ref, read_object(raw, name), f"{zip_path.name}: {name}")
    state = read_state_dict(members["policy.pth"], "policy.pth")
    assert all(v.dtype == np.float32 for v in state.values()) and tensors > len(state) > 0


def test_dtypes_views_shared_storages_0d_and_empty_tensors_read_as_torch_reads_them():
    torch = _torch()
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(5, 7, generator=gen, dtype=torch.float64)
    longs = torch.arange(24, dtype=torch.int64).reshape(2, 3, 4)
    state = {
        "f32": torch.randn(3, 4, generator=gen),
        "f64": base,
        "transposed": base.t(),  # non-contiguous, shares base's storage
        "offset": base[2:, 3:],  # an offset view of the same storage
        "strided": base[::2, ::3],
        "permuted": longs.permute(2, 0, 1),
        "i64": longs,
        "i32": torch.tensor([-(2**31), 2**31 - 1, 7], dtype=torch.int32),
        "i16": torch.tensor([-5, 9], dtype=torch.int16),
        "u8": torch.tensor([0, 255, 3], dtype=torch.uint8),
        "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "bool": torch.tensor([True, False, True]),
        "f16": torch.randn(6, generator=gen).half(),
        "c64": torch.randn(3, generator=gen, dtype=torch.complex64),
        "scalar": torch.tensor(2.5),
        "scalar_int": torch.tensor(-3),
        "empty": torch.zeros(0, 5),
        "empty_view": base[5:, :],
        "specials": torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45]),
    }
    raw = _saved(state)
    ref = torch.load(io.BytesIO(raw), weights_only=True)
    mine = read_state_dict(raw, "views.pt")
    assert _same(ref, mine, "views.pt") == len(state)
    # copies: nothing aliases another tensor or the file's bytes
    assert not np.shares_memory(mine["f64"], mine["transposed"]) and all(v.flags.c_contiguous for v in mine.values())
    mine["f64"][0, 0] = 99.0
    assert mine["transposed"][0, 0] == base[0, 0].item()


def test_bfloat16_reads_exactly_as_float32():
    torch = _torch()
    x = torch.randn(9, generator=torch.Generator().manual_seed(1)).bfloat16()
    out = read_state_dict(_saved({"x": x}), "bf16.pt")["x"]
    assert out.dtype == np.float32 and np.array_equal(out, x.float().numpy())


def test_a_module_state_dict_and_parameters_read_as_torch_reads_them():
    torch = _torch()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    for obj in (net.state_dict(), dict(net.named_parameters())):  # an OrderedDict with _metadata; Parameters
        raw = _saved(obj)
        ref = torch.load(io.BytesIO(raw), weights_only=True)
        assert _same({k: v.detach() for k, v in ref.items()}, read_state_dict(raw, "net.pt"), "net.pt") == 4


_DTYPES = ["float32", "float64", "int64", "int32", "bool", "float16", "uint8"]


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=4),
    dtype=st.sampled_from(_DTYPES),
    transpose=st.booleans(),
    start=st.integers(0, 3),
    seed=st.integers(0, 2**16),
)
def test_random_tensors_and_views_read_as_torch_reads_them(shape, dtype, transpose, start, seed):
    torch = _torch()
    rng = np.random.default_rng(seed)
    full = (rng.standard_normal([*shape, 1]) * 100).astype(dtype) if dtype != "bool" else rng.random([*shape, 1]) < 0.5
    t = torch.from_numpy(np.ascontiguousarray(full))[..., 0]
    if transpose and t.dim() >= 2:
        t = t.transpose(0, t.dim() - 1)
    if t.dim() and t.shape[0] > start:
        t = t[start:]
    raw = _saved({"t": t, "whole": torch.from_numpy(np.ascontiguousarray(full))})
    ref = torch.load(io.BytesIO(raw), weights_only=True)
    assert _same(ref, read_state_dict(raw, "random.pt"), "random.pt") == 2


# (b) hostile files --------------------------------------------------------------------------------------------------


class _Payload:
    """Unpickling this calls ``fn(*args)``: what a malicious policy.pth would do."""

    def __init__(self, fn, *args) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def _torch_zip(pickled: bytes, storages: dict[str, bytes] | None = None, *, root: str = "archive") -> bytes:
    """A zip laid out as torch.save lays it out, with ``pickled`` as its data.pkl (written without torch)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"{root}/data.pkl", pickled)
        z.writestr(f"{root}/byteorder", "little")
        for key, raw in (storages or {}).items():
            z.writestr(f"{root}/data/{key}", raw)
        z.writestr(f"{root}/version", "3\n")
    return buf.getvalue()


def _hostile(tmp_path: Path) -> list[tuple[str, bytes, Path]]:
    """``(forbidden name, data.pkl, marker)``: pickles whose loading would create ``marker``."""
    import builtins

    out = []
    marker = tmp_path / "os_system"
    out.append(("system", pickle.dumps({"w": _Payload(os.system, f"touch {marker}")}, protocol=2), marker))
    marker = tmp_path / "eval"
    out.append(("builtins.eval", pickle.dumps(_Payload(builtins.eval, f"open({str(marker)!r}, 'w')")), marker))
    marker = tmp_path / "popen"
    out.append(("subprocess.Popen", pickle.dumps([_Payload(subprocess.Popen, ["touch", str(marker)])]), marker))
    marker = tmp_path / "open"
    out.append(("io.open", pickle.dumps(_Payload(open, str(marker), "w"), protocol=4), marker))
    return out


def test_a_pickle_naming_code_is_refused_naming_it_and_nothing_runs(tmp_path):
    for name, pickled, marker in _hostile(tmp_path):
        with pytest.raises(PolicyError) as info:
            read_state_dict(_torch_zip(pickled), "evil.pth")
        line = str(info.value)
        assert line.startswith("evil.pth: refused, nothing in it was run: the pickle names ") and name in line, line
        assert "\n" not in line and not marker.exists()
    # the payload is live: plain pickle.loads runs it (so its not running above is the reader's doing)
    name, pickled, marker = _hostile(tmp_path)[-1]
    pickle.loads(pickled)
    assert marker.exists()


def test_a_hostile_policy_pth_in_an_sb3_zip_is_refused_in_one_line_by_the_cli(tmp_path, capsys):
    from rlverify.cli.main import main

    name, pickled, marker = _hostile(tmp_path)[0]
    with zipfile.ZipFile(FROZENLAKE_PPO) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["policy.pth"] = _torch_zip(pickled)
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as z:
        for member, raw in members.items():
            z.writestr(member, raw)
    code = main(["verify", "gym:FrozenLake-v1", "--policy", str(path), "-p", 'P=? [F "goal"]'])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "policy.pth: refused" in err and name in err and "--trust-code" in err and not marker.exists()


def _tensor_pickle(storage_numel: object, size: object, stride: object, offset: object = 0, kind: str = "FloatStorage"):
    """data.pkl of ``{"w": tensor}`` written opcode by opcode as torch writes it, with the given declarations."""

    out = bytearray(b"\x80\x02")
    out += b"ccollections\nOrderedDict\n)R"  # OrderedDict()
    out += b"X\x01\x00\x00\x00w"  # key
    out += b"ctorch._utils\n_rebuild_tensor_v2\n("
    out += b"(X\x07\x00\x00\x00storage" + f"ctorch\n{kind}\n".encode() + b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpu"
    out += pickle.dumps(storage_numel, protocol=2)[2:-1] + b"tQ"
    for value in (offset, size, stride):
        out += pickle.dumps(value, protocol=2)[2:-1]
    out += b"\x89ccollections\nOrderedDict\n)Rt"  # requires_grad False, hooks OrderedDict()
    out += b"Rs."  # rebuild; setitem; stop
    return bytes(out)


def test_the_hand_written_tensor_pickle_is_what_torch_reads():
    torch = _torch()
    raw = _torch_zip(_tensor_pickle(6, (2, 3), (3, 1)), {"0": np.arange(6, dtype="<f4").tobytes()})
    ref = torch.load(io.BytesIO(raw), weights_only=True)["w"].numpy()
    assert np.array_equal(read_state_dict(raw, "w.pt")["w"], ref) and ref.shape == (2, 3)


@pytest.mark.parametrize(
    "pickled,storage,message",
    [
        (_tensor_pickle(6, (2, 3), (3, 1)), np.arange(5, dtype="<f4").tobytes(), "declared as 6 elements of FloatStorage"),
        (_tensor_pickle(7, (2, 3), (3, 1)), np.arange(6, dtype="<f4").tobytes(), "declared as 7 elements"),
        (_tensor_pickle(6, (2, 4), (3, 1)), np.arange(6, dtype="<f4").tobytes(), "reaches beyond its storage 0 of 6"),
        (_tensor_pickle(6, (2, 3), (3, 1), 1), np.arange(6, dtype="<f4").tobytes(), "reaches beyond its storage"),
        (_tensor_pickle(6, (2, -3), (3, 1)), np.arange(6, dtype="<f4").tobytes(), "a tensor's size is -3"),
        (_tensor_pickle(6, (2, 3), (-3, 1)), np.arange(6, dtype="<f4").tobytes(), "a tensor's stride is -3"),
        (_tensor_pickle(-1, (2, 3), (3, 1)), b"", "element count is -1"),
        (_tensor_pickle(10**30, (2, 3), (3, 1)), b"", "element count is 1000000000000000000000000000000"),
        (_tensor_pickle(1, (10**9, 10**9), (0, 0)), np.zeros(1, "<f4").tobytes(), "would take 4,000,000,000,000,000,000"),
        (_tensor_pickle(6, (2, 3), (3, 1), kind="UntypedStorage"), b"", "names torch.UntypedStorage"),
        (_tensor_pickle(6, (2, 3), (3, 1)) [:-5], np.arange(6, dtype="<f4").tobytes(), "truncated (its pickle"),
        (_tensor_pickle(6, (2, 3), (3, 1)), None, "has no archive/data/0"),
    ],
    ids=["truncated", "wrong-numel", "view-past-end", "offset-past-end", "negative-size", "negative-stride",
         "negative-numel", "huge-numel", "stride-0-bomb", "other-storage", "truncated-pickle", "missing-storage"],
)  # fmt: skip
def test_sizes_out_of_bounds_are_refused_in_one_line(pickled, storage, message):
    raw = _torch_zip(pickled, {"0": storage} if storage is not None else {})
    with pytest.raises(PolicyError) as info:
        read_state_dict(raw, "bad.pth")
    line = str(info.value)
    assert line.startswith("bad.pth: ") and message in line and "\n" not in line, line


def test_files_that_are_no_torch_zip_are_refused_in_one_line():
    torch = _torch()
    legacy = io.BytesIO()
    torch.save({"w": torch.ones(2)}, legacy, _use_new_zipfile_serialization=False)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/version", "3\n")
    scripted = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), scripted)
    cases = {
        legacy.getvalue(): "legacy format (torch < 1.6, not a zip), which rlverify does not read: re-save it with torch",
        pickle.dumps({"w": [1.0]}): "not a PyTorch file of tensors (a bare pickle",
        b"hello": "not a PyTorch file of tensors (not a zip",
        buf.getvalue(): "not a torch.save zip (no <root>/data.pkl in it)",
        b"PK\x03\x04broken": "not a readable PyTorch zip",
        scripted.getvalue(): "a TorchScript archive, not a torch.save file of tensors",
        _saved([torch.ones(1)]): "holds a list, not a state dict",
        _saved({"w": 1.5}): "entry 'w' holds a float, not a tensor",
    }
    for raw, message in cases.items():
        with pytest.raises(PolicyError) as info:
            read_state_dict(raw, "f.pth")
        assert message in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_a_zip_bomb_inside_policy_pth_is_refused_before_inflating():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", _tensor_pickle(1, (1,), (1,)))
        z.writestr("archive/data/0", bytes(64 * 2**20))
    with pytest.raises(PolicyError, match=r"members inflate to 64 MiB \(more than 16 MiB\); refused without inflating"):
        read_state_dict(buf.getvalue(), "bomb.pth", max_bytes=16 * 2**20)


# (c) a process without torch ----------------------------------------------------------------------------------------

_NO_TORCH = """
import json, sys
sys.modules["torch"] = None  # import torch raises ImportError
from rlverify.cli.main import main
code = main(sys.argv[1:] + ["--json"])
assert "torch" not in sys.modules or sys.modules["torch"] is None
print(json.dumps({"code": code, "torch_imported": sys.modules.get("torch") is not None}), file=sys.stderr)
"""


def _run(args: list[str], *, block_torch: bool) -> tuple[dict, dict]:
    script = _NO_TORCH if block_torch else _NO_TORCH.replace('sys.modules["torch"] = None', "")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=300)
    status = json.loads(done.stderr.strip().splitlines()[-1])
    assert status["code"] == 0, done.stderr
    return json.loads(done.stdout), status


def test_verify_and_simulate_of_shipped_sb3_zips_without_torch_print_what_they_print_with_torch():
    lake = ["verify", "gym:FrozenLake-v1", "--policy", str(FROZENLAKE_PPO), "-p", 'P=? [F "goal"]']
    cart = ROOT / "examples" / "gymnasium" / "cartpole" / "ppo_cartpole.zip"
    pole = ["simulate", "gym:CartPole-v1", "--policy", str(cart), "-p", 'P=? [F<=500 "terminated"]', "--runs", "100"]
    pole += ["--seed", "1"]
    values = {}
    for args, key in ((lake, "value"), (pole, "estimate")):
        without, status = _run(args, block_torch=True)
        assert not status["torch_imported"]
        with_torch, _ = _run(args, block_torch=False)
        assert without["result"][key] == with_torch["result"][key], args
        values[key] = without["result"][key]
    assert f"{values['value']:.5f}" == "0.66606"  # the README's figure


def test_a_zip_read_without_torch_gives_sb3s_own_distribution():
    sb3 = pytest.importorskip("stable_baselines3")
    torch = _torch()
    model = sb3.PPO.load(str(FROZENLAKE_PPO), device="cpu")
    policy = load_policy(str(FROZENLAKE_PPO), features=["s"], actions=LAKE)
    with torch.no_grad():
        own = model.policy.get_distribution(torch.arange(16)).distribution.probs.numpy()
    np.testing.assert_allclose(policy.action_probabilities(np.arange(16)[:, None]), own, rtol=0, atol=2.5e-7)


@pytest.mark.parametrize(
    "pickled,message",
    [
        (b"\x80\x02ccollections\nOrderedDict\n}X\x01\x00\x00\x00aK\x01sb.", "sets the state of collections.OrderedDict"),
        (b"\x80\x02ctorch\nFloatStorage\n)\x81.", "not a plain tensor file"),  # NEWOBJ of a stand-in: not a class
        (b"\x80\x02ctorch\nFloatStorage\n)R.", "not a plain tensor file"),  # calling a storage type
        (b"\x80\x02X\x01\x00\x00\x00xQ.", "refers to the outside object 'x'"),  # a persistent id but a storage's
        (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(K\x01K\x00))\x89NtR.", "a tensor is rebuilt from int, not a storage"),
        (b"\x80\x02ctorch\nFloatStorage\n.", "holds a storage type, not tensors and plain data"),
    ],
    ids=["build-on-allowed", "newobj", "call-storage-type", "persistent-id", "rebuild-from-int", "bare-global"],
)
def test_opcodes_that_would_reach_beyond_plain_data_are_refused(pickled, message):
    with pytest.raises(PolicyError) as info:
        read_object(_torch_zip(pickled), "op.pth")
    assert message in str(info.value) and "\n" not in str(info.value), str(info.value)
