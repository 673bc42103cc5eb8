"""Every bad policy is a clear refusal (issue 21): exit code 2 and a message naming the cause, never a traceback,
never a silent repair; a policy that never returns is stopped by the policy timeout; empty batches never reach
the policy's code."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from rlverify.cli.main import main
from rlverify.errors import PolicyError
from rlverify.policies import CallablePolicy, TablePolicy, load_policy
from tests.envelope import error_envelope
from tests.small_models import UP_STAY

MODEL = UP_STAY

POLICIES = """import time
import numpy as np
FEATURES = ['x']
ACTIONS = ['up', 'stay']

def good(s):
    return np.tile([0.9, 0.1], (len(s), 1))

def raises(s):
    raise ValueError("boom")

def strings(s):
    return [["a", "b"]] * len(s)

def wide(s):
    return np.full((len(s), 3), 1 / 3)

def nan(s):
    return np.full((len(s), 2), np.nan)

def exits(s):
    raise SystemExit(3)

def forever(s):
    while True:
        pass

def sleeps(s):
    time.sleep(600)

def swallows(s):
    try:
        while True:
            pass
    except Exception:
        return np.tile([0.5, 0.5], (len(s), 1))
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    model = tmp_path / "m.prism"
    model.write_text(MODEL)
    policies = tmp_path / "pols.py"
    policies.write_text(POLICIES)
    return model, policies


def verify(capsys, model: Path, policy: str, *extra: str) -> tuple[int, str, str]:
    try:
        code = main(["verify", str(model), "-p", 'P=? [F "top"]', "--policy", policy, "--json", *extra])
    except SystemExit as exc:  # argparse's own refusal of an option value (exit 2, usage on stderr)
        code = int(exc.code)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_what_a_policy_module_prints_stays_off_stdout(capsys, files, tmp_path):
    model, _ = files
    chatty = tmp_path / "chatty.py"
    chatty.write_text(
        POLICIES + "print('printed at import')\ndef talks(s):\n    print('printed at call')\n    return good(s)\n"
    )
    code, out, err = verify(capsys, model, f"{chatty}:talks")
    assert code == 0 and json.loads(out)["result"]["value"] == pytest.approx(1.0, abs=1e-9)  # stdout is the JSON alone
    assert "printed at import" in err and "printed at call" in err


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("raises", "pols.py:raises: evaluating the policy failed: ValueError: boom"),
        ("strings", "pols.py:strings: output is not an array of numbers (list of <U1: strings)"),
        ("wide", "pols.py:wide: output has shape (1, 3), expected (1, 2)"),
        ("nan", "1 rows contain NaN or inf"),
        ("exits", "pols.py:exits: the policy called sys.exit(3) while computing actions"),
    ],
)
def test_a_policy_that_fails_is_refused_naming_the_cause(capsys, files, name, expected):
    model, policies = files
    code, out, err = verify(capsys, model, f"{policies}:{name}")
    assert code == 2 and error_envelope(out) and expected in err and "Traceback" not in err, err


@pytest.mark.parametrize("name", ["forever", "sleeps", "swallows"])
def test_a_policy_that_never_returns_is_stopped_by_the_timeout(capsys, files, name):
    model, policies = files
    start = time.monotonic()
    code, _, err = verify(capsys, model, f"{policies}:{name}", "--policy-timeout", "0.5")
    assert time.monotonic() - start < 30
    assert code == 2 and f"pols.py:{name}: the policy did not return within 0.5 s" in err
    assert "--policy-timeout SECONDS" in err


def test_the_policy_timeout_option_is_checked(capsys, files):
    model, policies = files
    for bad in ("-1", "nan", "inf"):
        code, _, err = verify(capsys, model, f"{policies}:good", "--policy-timeout", bad)
        assert code == 2 and "--policy-timeout" in err and ("expected seconds" in err or "finite number" in err), err


def test_a_policy_module_exiting_at_import_is_refused(capsys, tmp_path, files):
    model, _ = files
    mod = tmp_path / "exits.py"
    mod.write_text("import sys\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\nsys.exit(3)\ndef pi(s):\n    return s\n")
    code, _, err = verify(capsys, model, f"{mod}:pi")
    assert code == 2 and "importing the policy module called sys.exit(3)" in err


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("FEATURES = 5\nACTIONS = ['up', 'stay']", "FEATURES must be a list of names (strings), got int 5"),
        ("FEATURES = 'x'\nACTIONS = ['up', 'stay']", "FEATURES must be a list of names (strings), got str 'x'"),
        ("FEATURES = ['x']\nACTIONS = ['up', 'stay']\nOUTPUT = 3", "OUTPUT must be one of"),
    ],
)
def test_a_policy_module_with_wrong_declarations_is_refused(capsys, tmp_path, files, source, expected):
    model, _ = files
    mod = tmp_path / "decl.py"
    mod.write_text(f"import numpy as np\n{source}\ndef pi(s):\n    return np.tile([0.5, 0.5], (len(s), 1))\n")
    code, _, err = verify(capsys, model, f"{mod}:pi")
    assert code == 2 and expected in err, err


def _table(**over):
    doc = {
        "features": ["x"],
        "actions": ["up", "stay"],
        "table": [{"state": {"x": v}, "probabilities": {"up": 1.0}} for v in range(4)],
    }
    doc.update(over)
    return doc


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            _table(
                table=[{"state": {"x": 0}, "probabilities": {"up": 1.0}}, {"state": {"x": 0}, "probabilities": {"stay": 1.0}}],
                default={"up": 1.0},
            ),
            "table[1]: the state {'x': 0} is already given by table[0]",
        ),
        (
            _table(table=[{"state": {"x": 0.7}, "probabilities": {"stay": 1.0}}], default={"up": 1.0}),
            "table[0].state.x: 0.7 is not an integer",
        ),
        (_table(features="x"), "'features' must be a list of names (strings), got a string"),
        (_table(actions=[1, 2]), "'actions' must be a list of names (strings), got a list"),
        (_table(table={"x": 0}), "'table' must be a list of rows, got an object"),
        (_table(table=[5]), "table[0]: expected an object with 'state' and 'probabilities', got a number"),
        (_table(table=[{"state": {"x": "0"}, "probabilities": {"up": 1}}]), "table[0].state.x: '0' is not an integer"),
        (_table(table=[{"state": {"x": 0}, "probabilities": [1, 0]}]), "table[0].probabilities: expected an object"),
        (_table(table=[{"state": {"x": 0}, "probabilities": {"up": "1"}}]), "probabilities of ['up'] are not finite numbers"),
        ([1, 2], "not a table policy (expected a JSON object"),
    ],
)
def test_a_table_policy_with_wrong_contents_is_refused(capsys, tmp_path, files, doc, expected):
    model, _ = files
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    code, _, err = verify(capsys, model, str(path))
    assert code == 2 and expected in err, err


def test_binary_garbage_as_a_table_is_refused(capsys, tmp_path, files):
    model, _ = files
    path = tmp_path / "t.json"
    path.write_bytes(bytes(range(256)) * 4)
    code, _, err = verify(capsys, model, str(path))
    assert code == 2 and "t.json: not a JSON text file (byte 128 is not UTF-8)" in err


@pytest.mark.parametrize(
    ("sidecar", "expected"),
    [
        (
            {"features": 5, "actions": ["left", "down", "right", "up"]},
            "'features' must be a list of names (strings), got a number",
        ),
        (
            {"features": "s", "actions": ["left", "down", "right", "up"]},
            "'features' must be a list of names (strings), got a string",
        ),
        ({"output": 7}, "'output' must be one of"),
        ({"params": [1]}, "'params' must be an object"),
        ([1], "expected a JSON object"),
    ],
)
def test_a_sidecar_with_wrong_types_is_refused(capsys, tmp_path, sidecar, expected):
    src = Path(__file__).resolve().parents[2] / "examples" / "gymnasium" / "ppo_frozenlake.zip"
    path = tmp_path / "model.zip"
    path.write_bytes(src.read_bytes())
    (tmp_path / "model.zip.json").write_text(json.dumps(sidecar))
    code = main(["verify", "gym:FrozenLake-v1", "--policy", str(path), "-p", 'P=? [F "goal"]'])
    err = capsys.readouterr().err
    assert code == 2 and "model.zip.json" in err and expected in err, err


def test_a_torchscript_sidecar_with_wrong_types_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "module.pt"
    torch.jit.save(torch.jit.script(torch.nn.Sequential(torch.nn.Linear(1, 2))), str(path))
    (tmp_path / "module.pt.json").write_text(json.dumps({"features": ["x"], "actions": "up", "output": "logits"}))
    with pytest.raises(PolicyError, match=r"module\.pt\.json: invalid policy sidecar: 'actions' must be a list"):
        load_policy(str(path))


def _onnx(path: Path, *, inputs, nodes, meta, initializers=()):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])], initializer=list(initializers)
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    helper.set_model_props(model, meta)
    onnx.save(model, str(path))
    return path


META = {"rlverify.features": '["x"]', "rlverify.actions": '["up", "stay"]', "rlverify.output": "logits"}


def _weights():
    from onnx import numpy_helper

    return [numpy_helper.from_array(np.ones((1, 2), dtype=np.float32), "W")]


def test_an_onnx_network_with_an_int64_input_is_refused(capsys, tmp_path, files):
    from onnx import TensorProto, helper

    model, _ = files
    path = _onnx(
        tmp_path / "int.onnx",
        inputs=[helper.make_tensor_value_info("x", TensorProto.INT64, ["N", 1])],
        nodes=[helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT), helper.make_node("MatMul", ["xf", "W"], ["y"])],
        meta=META,
        initializers=_weights(),
    )
    code, _, err = verify(capsys, model, str(path))
    assert code == 2 and "its input 'x' is tensor(int64); rlverify feeds the features as floats" in err, err


def test_an_onnx_network_with_two_inputs_is_refused(capsys, tmp_path, files):
    from onnx import TensorProto, helper

    model, _ = files
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 1]) for n in ("a", "b")]
    path = _onnx(
        tmp_path / "two.onnx", inputs=inputs, nodes=[helper.make_node("Concat", ["a", "b"], ["y"], axis=1)], meta=META
    )
    code, _, err = verify(capsys, model, str(path))
    assert code == 2 and "it has 2 inputs ('a', 'b'); rlverify feeds one (N, d) tensor" in err, err


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("rlverify.features", "5", "metadata rlverify.features must be a JSON list of names"),
        ("rlverify.features", '["x", 1]', "metadata rlverify.features must be a JSON list of names"),
        ("rlverify.training", "{not json", "metadata rlverify.training must be a JSON object"),
        ("rlverify.training", "[1, 2]", "metadata rlverify.training must be a JSON object"),
    ],
)
def test_malformed_onnx_metadata_is_refused(capsys, tmp_path, files, key, value, expected):
    from onnx import TensorProto, helper

    model, _ = files
    path = _onnx(
        tmp_path / "meta.onnx",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1])],
        nodes=[helper.make_node("MatMul", ["x", "W"], ["y"])],
        meta={**META, key: value},
        initializers=_weights(),
    )
    code, _, err = verify(capsys, model, str(path))
    assert code == 2 and expected in err, err


def test_empty_batches_never_reach_the_policys_code(tmp_path):
    def explode(states):
        raise AssertionError("called with an empty batch")

    policy = CallablePolicy(explode, ["x"], ["up", "stay"])
    assert policy.action_probabilities(np.zeros((0, 1))).shape == (0, 2)
    cols, surely = policy.choose(np.zeros((0, 1)), np.zeros(0))
    assert cols.shape == surely.shape == (0,)
    greedy = CallablePolicy(explode, ["x"], ["up", "stay"], output="q-values")
    assert greedy.choose(np.zeros((0, 1)))[0].shape == (0,)
    table = TablePolicy(["x"], ["up", "stay"], {(0,): [1.0, 0.0]})
    assert table.action_probabilities(np.zeros((0, 1))).shape == (0, 2)
    pytest.importorskip("torch")
    src = Path(__file__).resolve().parents[2] / "examples" / "gymnasium" / "ppo_frozenlake.zip"
    sb3 = load_policy(str(src), features=["s"], actions=["left", "down", "right", "up"])
    assert sb3.action_probabilities(np.zeros((0, 1))).shape == (0, 4)
    assert sb3.choose(np.zeros((0, 1)), np.zeros(0))[0].shape == (0,)


@pytest.mark.parametrize(
    ("output", "body", "expected"),
    [
        ("logits", "np.zeros(len(s))", "output has shape (1,), expected (1, 2)"),
        ("logits", "np.zeros((len(s), 3))", "output has shape (1, 3), expected (1, 2)"),
        ("q-values", "np.full((len(s), 2), np.nan)", "1 rows contain NaN or inf"),
        ("q-values", "[['a', 'b']] * len(s)", "output is not an array of numbers"),
    ],
)
def test_a_logits_or_q_values_policy_with_wrong_outputs_is_refused(capsys, tmp_path, files, output, body, expected):
    model, _ = files
    mod = tmp_path / "net.py"
    mod.write_text(
        f"import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\nOUTPUT = {output!r}\ndef pi(s):\n    return {body}\n"
    )
    code, out, err = verify(capsys, model, f"{mod}:pi")
    assert code == 2 and error_envelope(out) and expected in err and "Traceback" not in err, err


def test_a_policy_that_swallows_every_exception_is_still_stopped(capsys, tmp_path, files):
    model, _ = files
    mod = tmp_path / "stubborn.py"
    mod.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(s):\n    for _ in range(4):\n        try:\n            while True:\n                pass\n"
        "        except BaseException:\n            pass\n    return np.tile([0.5, 0.5], (len(s), 1))\n"
    )
    code, _, err = verify(capsys, model, f"{mod}:pi", "--policy-timeout", "0.3")
    assert code == 2 and "stubborn.py:pi: the policy did not return within 0.3 s" in err


def _matmul_onnx(path: Path, *, width: int, unused: bool) -> Path:
    """An ONNX network ``obs @ W`` with ``W`` of ``width`` rows (its input width left open) and 3 actions, declared
    for the running example's feature x; ``unused``: an initializer no node reads (onnxruntime warns it away)."""
    import onnx
    from onnx import TensorProto, helper

    inits = [helper.make_tensor("W", TensorProto.FLOAT, [width, 3], np.ones(3 * width, dtype=np.float32))]
    if unused:
        inits.append(helper.make_tensor("unused", TensorProto.FLOAT, [2], np.ones(2, dtype=np.float32)))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["logits"])],
        "g",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [None, None])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, 3])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    meta = {"rlverify.features": '["x"]', "rlverify.actions": '["UP","NOP","DOWN"]', "rlverify.output": "logits"}
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(path))
    return path


def test_onnxruntimes_own_log_lines_do_not_precede_the_one_error_line(tmp_path):
    """A network whose weights do not fit its one feature, with an unused initializer: onnxruntime wrote its own
    ``[W:onnxruntime:...]`` (the initializer) and ``[E:onnxruntime:...]`` (the failed MatMul) lines to the process's
    stderr before rlverify's error. Now stderr is the one line, which still carries onnxruntime's message. (A process of
    its own: onnxruntime writes to the file descriptor, and its logger is set once per process.)"""
    import subprocess
    import sys

    policy = _matmul_onnx(tmp_path / "bad.onnx", width=2, unused=True)
    model = Path(__file__).parents[2] / "src/rlverify/benchmarks/data/models/running_example.prism"
    done = subprocess.run(
        [sys.executable, "-m", "rlverify", "verify", str(model), "-p", 'P=? [F "goal"]', "--policy", str(policy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "evaluating the policy failed" in lines[0] and "MatMul" in lines[0] and "onnxruntime:" not in lines[0]


def test_a_never_assigned_variable_is_named_as_such_by_inspect_and_the_policy_check(tmp_path, capsys):
    """``y : [0..1000000000] init 0;`` added to the running example, never assigned: Storm's parser makes it a
    constant (the oracle: Storm's own program lists it among the constants, not the variables). inspect did not list
    it and a table policy over x,y was refused "feature 'y' is not a model variable (model variables: x)"; both now
    say why."""
    import json

    import stormpy

    from rlverify.benchmarks.registry import data_path
    from rlverify.cli.main import main

    text = data_path("models/running_example.prism").read_text()
    path = tmp_path / "rey.prism"
    path.write_text(text.replace("  x : [1..4] init 1;", "  x : [1..4] init 1;\n  y : [0..1000000000] init 0;"))
    storm = stormpy.parse_prism_program(str(path), prism_compatibility=True)
    assert "y" in [c.name for c in storm.constants] and "y" not in [v.name for m in storm.modules for v in m.integer_variables]
    policy = tmp_path / "tab.json"
    policy.write_text(
        json.dumps(
            {
                "features": ["x", "y"],
                "actions": ["UP", "NOP", "DOWN"],
                "table": [{"state": {"x": 1, "y": 0}, "probabilities": {"UP": 1}}],
                "default": {"NOP": 1},
            }
        )
    )
    assert main(["verify", str(path), "-p", 'P=? [F "goal"]', "--policy", str(policy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "feature 'y' is declared but never assigned" in err[0] and "drop it from the policy" in err[0]
    assert main(["inspect", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["unassigned"] == ["y"]
