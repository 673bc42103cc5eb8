"""PRISM properties files: read (size-limited, UTF-8), split into statements, ``const`` declarations substituted into
the properties after them, ``"name": ...`` names kept."""

from __future__ import annotations

import re
from pathlib import Path

from rlverify.errors import InputFileError, PropertyError
from rlverify.files import read_input

#: suffixes of PRISM properties files (``-p FILE`` reads every property in it)
PROPERTY_FILE_SUFFIXES = (".props", ".pctl", ".prop", ".csl")
_CONST_DECL = re.compile(r"^const\s+(?:(?:int|double|bool)\s+)?(?P<name>[A-Za-z_]\w*)\s*(?:=\s*(?P<value>.+))?$", re.S)
_NAMED_PROPERTY = re.compile(r'^"(?P<name>[^"]+)"\s*:\s*(?P<body>.+)$', re.S)
_LITERAL = re.compile(r"^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|true|false)$")


class _Splitter:
    """:func:`_statements`' state: the statements so far, the current one, bracket depth, inside quotes."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.current: list[str] = []
        self.depth, self.quoted = 0, False

    def char(self, ch: str) -> None:
        """One character outside comments."""
        if self.quoted:
            self.quoted = ch != '"'
        elif ch == '"':
            self.quoted = True
        elif ch in "([{":
            self.depth += 1
        elif ch in ")]}":
            self.depth -= 1
        elif ch == ";" or (ch == "\n" and self.depth <= 0):
            self.end()
            return
        self.current.append(ch)

    def end(self) -> None:
        self.out.append("".join(self.current).strip())
        self.current = []


def _statements(text: str) -> list[str]:
    """``text`` without ``//`` comments, split at ``;`` and at line ends outside brackets and quotes."""
    split = _Splitter()
    i = 0
    while i < len(text):
        if not split.quoted and text.startswith("//", i):  # a comment: to the line's end
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        split.char(text[i])
        i += 1
    split.end()
    return [s for s in split.out if s]


def _substitute(text: str, values: dict[str, str]) -> str:
    """``text`` with each constant (a whole word outside quotes) replaced by its literal value."""
    if not values:
        return text
    parts = re.split(r'("[^"]*")', text)
    word = re.compile(r"\b(" + "|".join(re.escape(k) for k in values) + r")\b")
    return "".join(p if p.startswith('"') else word.sub(lambda m: values[m.group(1)], p) for p in parts)


def declared_constants(text: str) -> list[str]:
    """The constants a properties file's ``text`` declares (``const int T;``, ``const double p = 0.5;``), in order."""
    return [m.group("name") for s in _statements(text) if (m := _CONST_DECL.match(s)) is not None]


#: the largest properties file read (a property is a line; a file of this size holds some 100,000)
MAX_PROPERTIES_BYTES = 16 * 2**20


def read_properties_file(path: str | Path) -> str:
    """The text of a PRISM properties file (a leading UTF-8 byte-order mark is allowed, as in model files).

    Raises:
        InputFileError: the file is missing, unreadable, no regular file (a FIFO, a directory, a device), larger than
            :data:`MAX_PROPERTIES_BYTES` or not UTF-8 text.
    """
    try:
        return read_input(path, "properties file", MAX_PROPERTIES_BYTES).decode("utf-8-sig")  # a byte-order mark, as JANI
    except UnicodeDecodeError:
        raise InputFileError(f"{path}: the properties file is not UTF-8 text") from None


def written_properties(text: str) -> list[str]:
    """The properties of a properties file's ``text`` as written (constants not substituted, names dropped), in the
    order :func:`split_properties` returns them."""
    out = []
    for statement in _statements(text):
        if _CONST_DECL.match(statement) is None:
            named = _NAMED_PROPERTY.match(statement)
            out.append((named.group("body") if named else statement).strip())
    return out


def _constant(source: str, name: str, value: str | None, given: dict[str, str], values: dict[str, str]) -> str:
    """The literal value of a properties file's constant ``name`` (declared ``= value``, or given), the constants
    before it (``values``) substituted."""
    if value is None:
        if name not in given:
            raise PropertyError(f"{source}: constant {name} has no value: give it with -c {name}=VALUE")
        value = given[name]
    elif name in given:
        raise PropertyError(f"{source}: constant {name} is defined in the file (= {value.strip()}); drop -c {name}")
    value = _substitute(value.strip(), values)
    if not _LITERAL.match(value):
        raise PropertyError(
            f"{source}: constant {name} = {value}: rlverify reads literal values in property files; write the "
            f"number, or declare 'const {name};' and give -c {name}=VALUE"
        )
    return value


def _property(
    source: str, statement: str, found: list[tuple[str | None, str]], values: dict[str, str]
) -> tuple[str | None, str]:
    """A property statement's name (None where unnamed; refused where ``found`` has it) and text, the constants
    ``values`` substituted."""
    named = _NAMED_PROPERTY.match(statement)
    name, body = (named.group("name"), named.group("body")) if named else (None, statement)
    if name is not None and any(n == name for n, _ in found):
        raise PropertyError(f'{source}: property "{name}" is named twice')
    return name, _substitute(body.strip(), values)


def split_properties(
    text: str, constants: dict[str, str] | None = None, *, source: str = "properties"
) -> list[tuple[str | None, str]]:
    """The properties of a PRISM properties file's ``text``: ``(name or None, property text)`` in file order.

    ``//`` comments are dropped; properties end at ``;`` or at a line end outside brackets; ``"name": P=? [...]``
    names one. ``const`` declarations are substituted into the properties after them: with a literal value
    (``const int T = 10;``), or — declared without one (``const int T;``) — the value in ``constants``.

    Raises:
        PropertyError: no property; a constant without a value; a constant defined by an expression (rlverify reads
            literals: write the number, or declare it without a value and give it); a name given twice.
    """
    given = {k: str(v) for k, v in (constants or {}).items()}
    values: dict[str, str] = {}
    found: list[tuple[str | None, str]] = []
    for statement in _statements(text):
        const = _CONST_DECL.match(statement)
        if const is not None:
            name = const.group("name")
            values[name] = _constant(source, name, const.group("value"), given, values)
            continue
        found.append(_property(source, statement, found, values))
    unused = sorted(set(given) - set(values))
    if unused:
        raise PropertyError(
            f"{source}: -c {', '.join(unused)}: no such constant in the properties (declared: {', '.join(values) or 'none'})"
        )
    if not found:
        raise PropertyError(f"{source}: no property in it (one per line or ';'-separated, e.g. P=? [F \"goal\"])")
    return found
