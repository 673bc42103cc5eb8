"""Model and property text that crashed Storm's parser (a stack overflow kills the process) or escaped as a
traceback: refused before Storm sees it, in one line naming the file or the property."""

from __future__ import annotations

import pytest

from rlverify.cli.main import main
from rlverify.errors import ModelError, PropertyError
from rlverify.models.symbolic import load_model, parse_property

SMALL = "mdp\nmodule m\n  x : [0..3] init 0;\n  [a] x<3 -> (x'={update});\nendmodule\n"


def _write(tmp_path, text: str | bytes, name: str = "m.nm"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_a_property_nested_3000_deep_is_refused_not_a_crash(tmp_path, capsys):
    model = load_model(_write(tmp_path, SMALL.format(update="x+1")))
    deep = "P=? [F " + "(" * 3000 + "x=3" + ")" * 3000 + "]"
    with pytest.raises(PropertyError, match="nested more than 500 deep"):
        parse_property(model, deep)
    assert main(["verify", str(model.path), "-p", deep, "--mode", "monolithic"]) == 2
    assert "nested more than 500 deep" in capsys.readouterr().err


def test_a_model_nested_3000_deep_is_refused_naming_the_file(tmp_path):
    path = _write(tmp_path, SMALL.format(update="(" * 3000 + "x+1" + ")" * 3000))
    with pytest.raises(ModelError, match=r"m\.nm: brackets nested more than 500 deep"):
        load_model(path)


def test_nesting_within_the_limit_and_brackets_in_comments_are_fine(tmp_path):
    path = _write(tmp_path, "// " + "(" * 2000 + "\n" + SMALL.format(update="(" * 400 + "x+1" + ")" * 400))
    model = load_model(path)
    assert parse_property(model, "P=? [F " + "(" * 300 + "x=3" + ")" * 300 + "]").path == "F"


@pytest.mark.parametrize(
    "content", [b"\x00\x01binary\xff", b"mdp\nmodule m \xff\xfe\x80 endmodule"], ids=["nul-bytes", "not-utf8"]
)
def test_binary_prism_files_are_refused_in_one_line(tmp_path, capsys, content):
    path = _write(tmp_path, content)
    with pytest.raises(ModelError, match=r"m\.nm: not a PRISM file"):
        load_model(path)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not a PRISM file" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_latin1_comment_is_not_binary(tmp_path):
    path = _write(tmp_path, b"// caf\xe9\n" + SMALL.format(update="x+1").encode())
    assert load_model(path).variables == ("x",)
