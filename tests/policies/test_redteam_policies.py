"""Red-team findings on policies: non-real outputs, options contradicting a file's declaration, numbers that do not
fit, user exceptions that cannot be printed, an absurd --policy-timeout, torch's warnings on loading SB3 weights.

Each bad input: exit code 2 and one line naming the cause, never a traceback, never a silent change."""

from __future__ import annotations

import json
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.errors import InputFileError, OptionError, PolicyError
from rlverify.policies import MLP, CallablePolicy, load_policy, save_mlp_onnx
from rlverify.policies.base import numeric_output
from rlverify.policies.settings import check_timeout
from tests.small_models import UP_STAY

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.prism"
    path.write_text(UP_STAY)
    return path


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["verify", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code: int, err: str) -> str:
    """The error line of a refused run (exit code 2, nothing but that one line on stderr)."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def module(tmp_path: Path, name: str, body: str, *, declare: str = "FEATURES = ['x']\nACTIONS = ['up', 'stay']\n") -> Path:
    path = tmp_path / name
    path.write_text("import numpy as np\n" + declare + body)
    return path


# 1. complex (and other non-real) outputs are refused, not truncated to their real part ----------------------------


@pytest.mark.parametrize(
    "body",
    [
        "def pi(s):\n    return np.full((len(s), 2), 0.5) + 1j\n",  # complex128 array
        "def pi(s):\n    return [[0.5 + 0j, 0.5]] * len(s)\n",  # a list of Python complex numbers
        "def pi(s):\n    return np.array([[0.5 + 1j, 0.5]] * len(s), dtype=object)\n",  # complex inside an object array
    ],
    ids=["ndarray", "list", "object-array"],
)
def test_a_complex_output_is_refused_naming_the_policy(capsys, tmp_path, model, body):
    pol = module(tmp_path, "c.py", body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's ComplexWarning would mean the imaginary part was dropped
        code, _, err = verify(capsys, str(model), "-p", "P=? [F<=2 x=3]", "--policy", f"{pol}:pi")
    assert code == 2 and f"{pol}:pi" in err and "complex" in err and "Traceback" not in err
    assert "ComplexWarning" not in err


def test_non_real_outputs_are_refused_and_real_ones_converted_exactly():
    with pytest.raises(PolicyError, match="output has complex numbers"):
        numeric_output(np.array([[0.5 + 0j, 0.5]]), "p")  # even with imaginary part 0: not what a policy gives
    with pytest.raises(PolicyError, match=r"not an array of numbers \(list of <U3: strings\)"):
        numeric_output([["0.5", "0.5"]], "p")  # numpy would parse the strings
    with pytest.raises(PolicyError, match=r"objects that are not real numbers, e\.g\. a NoneType"):
        numeric_output(np.array([[0.5, None]], dtype=object), "p")
    with pytest.raises(PolicyError, match="dates"):
        numeric_output(np.array([[1, 0]], dtype="datetime64[s]"), "p")
    from fractions import Fraction

    out = numeric_output(np.array([[Fraction(1, 4), 0.75]], dtype=object), "p")
    assert out.dtype == np.float64 and out.tolist() == [[0.25, 0.75]]
    assert numeric_output(np.array([[True, False]]), "p").tolist() == [[1.0, 0.0]]


def test_a_torch_module_giving_complex_numbers_is_refused():
    torch = pytest.importorskip("torch")
    from rlverify.policies import TorchPolicy

    class Complex(torch.nn.Module):
        def forward(self, x):
            return torch.complex(torch.zeros(len(x), 2), torch.ones(len(x), 2))

    policy = TorchPolicy(Complex(), ["x"], ["up", "stay"], output="probabilities", name="c.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(PolicyError, match=r"c\.pt: output has complex numbers"):
            policy.action_probabilities(np.zeros((2, 1)))


def test_check_policy_refuses_a_protocol_policy_giving_complex_numbers(model):
    from rlverify.models import load_model
    from rlverify.policies import check_policy

    class Bare:  # a Policy by the protocol, not a BasePolicy
        name = "bare"
        features = ("x",)
        actions = ("up", "stay")

        def action_probabilities(self, states):
            return np.full((len(states), 2), 0.5 + 0j)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(PolicyError, match="bare: output has complex numbers"):
            check_policy(Bare(), load_model(model))


# 2. an option never changes what a file declares; it gives what the file does not ----------------------------------


def test_options_contradicting_a_python_module_are_refused(capsys, tmp_path, model):
    pol = module(tmp_path, "p.py", "OUTPUT = 'probabilities'\ndef pi(s):\n    return np.tile([0.6, 0.4], (len(s), 1))\n")
    for option, value, says in (
        ("--features", "y", "--features y contradicts its features x"),
        ("--actions", "stay,up", "--actions stay,up contradicts its actions up,stay"),
        ("--output", "q-values", "--output q-values contradicts its output probabilities"),
    ):
        line = one_line_error(*verify(capsys, str(model), "-p", "P=? [F<=2 x=3]", "--policy", f"{pol}:pi", option, value)[::2])
        assert says in line and f"{pol}:pi" in line and "drop " + option in line
    # repeating the declaration is no contradiction
    code, out, _ = verify(
        capsys,
        str(model),
        "-p",
        "P=? [F<=3 x=3]",
        "--policy",
        f"{pol}:pi",
        "--features",
        "x",
        "--actions",
        "up,stay",
        "--output",
        "probabilities",
        "--json",
    )
    assert code == 0 and json.loads(out)["result"]["value"] == pytest.approx(
        (0.6 * 0.5) ** 3, abs=1e-9
    )  # 3 ups, each 0.6 * 1/2


def test_output_is_applied_to_a_module_that_declares_none(capsys, tmp_path, model):
    # [0.6, 0.4] read as probabilities: up with 0.6 per step; read greedily (q-values): always up
    pol = module(tmp_path, "p.py", "def pi(s):\n    return np.tile([0.6, 0.4], (len(s), 1))\n")
    values = {}
    for output in ("probabilities", "q-values"):
        code, out, err = verify(
            capsys, str(model), "-p", "P=? [F<=3 x=3]", "--policy", f"{pol}:pi", "--output", output, "--json"
        )
        assert code == 0, err
        values[output] = json.loads(out)["result"]["value"]
    # reaching x=3 within 3 steps needs 3 successful ups, each with probability p * 1/2
    assert values["probabilities"] == pytest.approx((0.6 * 0.5) ** 3, abs=1e-9)
    assert values["q-values"] == pytest.approx(0.5**3, abs=1e-9)
    code, out, _ = verify(capsys, str(model), "-p", "P=? [F<=3 x=3]", "--policy", f"{pol}:pi", "--json")
    assert json.loads(out)["result"]["value"] == pytest.approx(values["probabilities"])  # without OUTPUT or --output


def test_options_contradicting_a_table_are_refused(capsys, tmp_path, model):
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"features": ["x"], "actions": ["up", "stay"], "table": [], "default": {"up": 1}}))
    for option, value, says in (
        ("--features", "y", "--features y contradicts its features x"),
        ("--actions", "stay,up", "--actions stay,up contradicts its actions up,stay"),
        ("--output", "logits", "--output logits contradicts its output probabilities"),
    ):
        line = one_line_error(*verify(capsys, str(model), "-p", "P=? [F<=3 x=3]", "--policy", str(table), option, value)[::2])
        assert says in line and "declared by the table" in line
    code, out, _ = verify(
        capsys,
        str(model),
        "-p",
        "P=? [F<=3 x=3]",
        "--policy",
        str(table),
        "--features",
        "x",
        "--output",
        "probabilities",
        "--json",
    )
    assert code == 0 and json.loads(out)["result"]["value"] == pytest.approx(0.5**3, abs=1e-9)


def test_options_contradicting_onnx_metadata_are_refused(tmp_path):
    path = save_mlp_onnx(
        tmp_path / "p.onnx", MLP.random([1, 4, 2], seed=0), features=["x"], actions=["up", "stay"], output="logits"
    )
    with pytest.raises(PolicyError, match=r"--features y contradicts its features x \(declared by its metadata\)"):
        load_policy(str(path), features=["y"])
    with pytest.raises(PolicyError, match="--actions stay,up contradicts its actions up,stay"):
        load_policy(str(path), actions=["stay", "up"])
    with pytest.raises(PolicyError, match="--output q-values contradicts its output logits"):
        load_policy(str(path), output="q-values")
    same = load_policy(str(path), features=["x"], actions=["up", "stay"], output="logits")
    assert same.features == ("x",) and same.output == "logits"


def test_options_contradicting_a_sidecar_are_refused(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(torch.nn.Sequential(torch.nn.Linear(1, 2))), str(path))
    (tmp_path / "m.pt.json").write_text(json.dumps({"features": ["x"], "actions": ["up", "stay"], "output": "logits"}))
    with pytest.raises(PolicyError, match=r"--features y contradicts its features x \(declared by .*m\.pt\.json\)"):
        load_policy(str(path), features=["y"])
    with pytest.raises(PolicyError, match="--output probabilities contradicts its output logits"):
        load_policy(str(path), output="probabilities")
    assert load_policy(str(path), features=["x"]).output == "logits"


def test_output_contradicting_an_sb3_zips_algorithm_is_refused(tmp_path):
    pytest.importorskip("stable_baselines3")
    zip_file = ROOT / "examples" / "gymnasium" / "ppo_frozenlake.zip"
    lake = ["left", "down", "right", "up"]
    with pytest.raises(PolicyError, match=r"--output q-values contradicts its output logits \(declared by its PPO model"):
        load_policy(str(zip_file), features=["s"], actions=lake, output="q-values")
    assert load_policy(str(zip_file), features=["s"], actions=lake, output="logits").output == "logits"


# 5. numbers that do not fit are refused naming the row ------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (
            {"table": [{"state": {"x": 99999999999999999999999}, "probabilities": {"up": 1}}]},
            "table[0].state.x: 99999999999999999999999 does not fit a 64-bit integer",
        ),
        ({"table": [{"state": {"x": 1e300}, "probabilities": {"up": 1}}]}, "table[0].state.x: 1e+300 does not fit"),
        ({"table": [], "default": {"up": 99999999999999999999999}}, "default: probabilities of ['up'] are not finite numbers"),
        (
            {"table": [{"state": {"x": 0}, "probabilities": {"up": 2**64}}]},
            "table[0].probabilities: probabilities of ['up'] are not finite numbers",
        ),
    ],
    ids=["bigint-state", "huge-float-state", "bigint-default", "bigint-probability"],
)
def test_numbers_a_table_cannot_hold_are_refused_naming_the_row(capsys, tmp_path, model, content, says):
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"features": ["x"], "actions": ["up", "stay"], **content}))
    code, _, err = verify(capsys, str(model), "-p", "P=? [F x=3]", "--policy", str(table))
    assert code == 2 and says in err and "Traceback" not in err and "internal error" not in err


def test_an_integer_longer_than_python_reads_is_a_json_error(tmp_path):
    table = tmp_path / "t.json"
    table.write_text('{"features": ["x"], "actions": ["up"], "table": [], "default": {"up": ' + "9" * 5000 + "}}")
    with pytest.raises(InputFileError, match=r"t\.json: invalid JSON: Exceeds the limit"):
        load_policy(str(table))


# 6. whatever the user's code raises becomes a one-line PolicyError ---------------------------------------------------

BAD_STR = "class E(Exception):\n    def __str__(self):\n        raise ValueError('str fails')\n"


@pytest.mark.parametrize(
    ("name", "body", "declare", "says"),
    [
        ("badstr", BAD_STR + "def pi(s):\n    raise E()\n", None, "evaluating the policy failed: <unprintable E>"),
        (
            "importbadstr",
            BAD_STR + "raise E()\ndef pi(s):\n    pass\n",
            None,
            "importing the policy module failed: <unprintable E>",
        ),
        (
            "featiter",
            "class F(list):\n    def __iter__(self):\n        raise RuntimeError('iter')\n"
            "FEATURES = F(['x'])\nACTIONS = ['up', 'stay']\ndef pi(s):\n    return np.full((len(s), 2), 0.5)\n",
            "",
            "reading the policy module's pi, FEATURES, ACTIONS and OUTPUT failed: RuntimeError: iter",
        ),
        (
            "baseexc",
            "class B(BaseException):\n    pass\ndef pi(s):\n    raise B('out')\n",
            None,
            "evaluating the policy failed: B: out",
        ),
        (
            "exitrepr",
            "class C:\n    def __repr__(self):\n        raise ValueError('no')\nimport sys\ndef pi(s):\n    sys.exit(C())\n",
            None,
            "called sys.exit(<unprintable C>)",
        ),
    ],
    ids=["str-raises", "str-raises-at-import", "features-iter-raises", "base-exception", "exit-code-repr-raises"],
)
def test_user_exceptions_become_one_line(capsys, tmp_path, model, name, body, declare, says):
    pol = module(tmp_path, f"{name}.py", body, **({} if declare is None else {"declare": declare}))
    code, _, err = verify(capsys, str(model), "-p", "P=? [F x=3]", "--policy", f"{pol}:pi")
    assert code == 2 and says in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 2  # the error, and the policy check's one problem line


def test_exception_text_never_raises():
    from rlverify.policies.base import exception_text

    class Weird(Exception):
        def __str__(self):
            raise RuntimeError

    class Sub(str):
        def strip(self):  # a str subclass returned by __str__: its methods are not trusted either
            raise RuntimeError

    class Odd(Exception):
        def __str__(self):
            return Sub("odd  \nsecond line")

    assert exception_text(Weird()) == "<unprintable Weird>"
    assert exception_text(Odd()) == "Odd: odd"
    assert exception_text(ValueError()) == "ValueError"


def test_a_python_api_callable_keeps_its_own_exceptions():
    policy = CallablePolicy(lambda s: 1 / 0, ["x"], ["a"])
    with pytest.raises(ZeroDivisionError):
        policy.action_probabilities(np.zeros((1, 1)))


# 7. --policy-timeout beyond what a timer holds -----------------------------------------------------------------------


def test_a_huge_policy_timeout_is_refused_as_an_option(capsys, tmp_path, model):
    pol = module(tmp_path, "p.py", "def pi(s):\n    return np.tile([0.5, 0.5], (len(s), 1))\n")
    line = one_line_error(
        *verify(capsys, str(model), "-p", "P=? [F x=3]", "--policy", f"{pol}:pi", "--policy-timeout", "99999999999999999999")[
            ::2
        ]
    )
    assert "--policy-timeout" in line and "0 for no limit" in line and "evaluating the policy" not in line
    assert check_timeout(1e6) == 1e6 and check_timeout(0) is None
    with pytest.raises(OptionError, match="timeout"):
        load_policy(f"{pol}:pi", timeout=1e7)


# 8. torch's warnings about weights_only loading are not shown -------------------------------------------------------


def test_refusing_sb3_weights_shows_no_torch_warning(tmp_path, recwarn):
    pytest.importorskip("torch")
    pytest.importorskip("stable_baselines3")
    import pickle

    src = ROOT / "examples" / "gymnasium" / "ppo_frozenlake.zip"
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["policy.pth"] = pickle.dumps({"w": [1.0, 2.0]}, protocol=4)  # torch warns about protocol 4 ...
    path = tmp_path / "p4.zip"
    with zipfile.ZipFile(path, "w") as z:
        for name, raw in members.items():
            z.writestr(name, raw)
    warnings.simplefilter("always")
    with pytest.raises(PolicyError, match=r"policy\.pth: not a PyTorch file of tensors \(a bare pickle"):  # refused
        load_policy(str(path), features=["s"], actions=["left", "down", "right", "up"])
    assert not [w for w in recwarn if "pickle protocol" in str(w.message) or "weights_only" in str(w.message)]
    policy = load_policy(str(src), features=["s"], actions=["left", "down", "right", "up"])  # the good zip: silent too
    assert policy.action_probabilities(np.zeros((1, 1))).shape == (1, 4) and not len(recwarn)
