"""PRISM and JANI models through stormpy: parse, instantiate constants, parse properties, build.

Only this package, :mod:`rlverify.exact` and :mod:`rlverify.abstraction` import stormpy.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from rlverify.arrays import distinct
from rlverify.errors import (
    ConstantsError,
    InputFileError,
    ModelError,
    ModelTooLargeError,
    OptionError,
    PropertyError,
    did_you_mean,
)
from rlverify.files import check_input
from rlverify.models.assignments import parse_assignments
from rlverify.models.commands import Command, choice_commands, jani_commands, prism_commands
from rlverify.models.explicit import ExplicitModel
from rlverify.models.jani import read_jani
from rlverify.models.numerics import storm_log_verbose
from rlverify.models.properties import Property, check_nesting, parse_structure

log = logging.getLogger(__name__)

_STORM_MSG = re.compile(r"^\s*\w+Exception:\s*", re.DOTALL)


@contextlib.contextmanager
def storm_log_off() -> Iterator[None]:
    """Storm's own log off for a call whose failure rlverify reports (Storm's exception carries the message): a parse
    error is then rlverify's one error, not also Storm's ``ERROR (SpiritErrorHandler.h:27): ...`` lines on stdout in
    a Python session, where the CLI's setting (:func:`rlverify.models.numerics.set_storm_logging`) does not apply;
    kept on where the CLI's ``-v`` asked for it."""
    import stormpy.developer as dev

    if storm_log_verbose():
        yield
        return

    level = dev.get_log_level()
    dev.set_log_level(dev.LogLevel.OFF)
    try:
        yield
    finally:
        dev.set_log_level(level)


def storm_message(exc: BaseException, *, limit: int | None = None) -> str:
    """Storm's exception text without the C++ exception class prefix, on one line where possible; beyond ``limit``
    characters its start and end around ``...`` (Storm quotes a whole expression, which may be megabytes)."""
    text = re.sub(r"\s*\n\s*", " | ", _STORM_MSG.sub("", str(exc)).strip())
    if limit is not None and len(text) > limit:
        text = f"{text[: limit // 2]} ... {text[-(limit // 2) :]}"
    return text


@dataclass
class SymbolicModel:
    """A parsed PRISM program or JANI model with all constants defined.

    Attributes:
        path: the source file.
        kind: ``"prism"`` or ``"jani"``.
        model_type: ``"mdp"`` or ``"dtmc"`` (others are rejected at load).
        variables: state variable names (as Storm keeps them: never-updated variables are dropped
            from built valuations). JANI: as Storm names them in the states it builds: an automaton's
            local variable ``p`` of automaton ``a`` is ``a_p``, and each automaton with several
            locations adds its location ``_loc_AUTOMATON`` (first; codes in :attr:`locations`).
        boolean_variables: the subset of ``variables`` that are booleans (features 0/1).
        action_names: action labels of the commands/edges (``""`` for unlabelled ones).
        labels: label names defined in the file.
        reward_models: reward model names defined in the file (``""`` for an unnamed one).
        constants: the constant definitions applied, as given.
        file_properties: properties defined in a JANI file (name -> text).
        locations: JANI automata with more than one location: the location's feature name (Storm's
            ``_loc_AUTOMATON``, a policy feature like any variable) -> the location names by code
            (code = position in the automaton's ``locations``, as in the file).
        name: what messages call the model when not its file: a benchmark and its parameters (its file is a
            private temporary one); see :attr:`shown`.
        unassigned: PRISM variables declared in the file but never assigned: Storm's parser makes each a constant
            (its initial value), so it is no state variable and no policy feature.
    """

    path: Path
    kind: str
    program: Any
    model_type: str
    variables: tuple[str, ...]
    boolean_variables: tuple[str, ...]
    action_names: tuple[str, ...]
    labels: tuple[str, ...]
    reward_models: tuple[str, ...]
    constants: str
    file_properties: dict[str, Any]
    parse_seconds: float = 0.0
    #: every command/edge with its name (see :mod:`rlverify.models.commands`), and Storm's origin index -> position
    commands: tuple[Command, ...] = ()
    command_keys: dict[int, int] = field(default_factory=dict, repr=False)
    locations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    name: str = ""
    unassigned: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """The model as messages name it: :attr:`name`, else its file."""
        return self.name or str(self.path)

    def initial_valuation(self) -> dict[str, int] | None:
        """Variable -> initial value when every variable has a constant initial value (PRISM), else None."""
        if self.kind != "prism" or self.program.has_initial_states_expression:
            return None
        p = self.program.substitute_constants()
        out: dict[str, int | None] = {}
        for v in [*p.global_integer_variables, *(v for m in p.modules for v in m.integer_variables)]:
            out[v.name] = constant_value(v.initial_value_expression)
        for v in [*p.global_boolean_variables, *(v for m in p.modules for v in m.boolean_variables)]:
            out[v.name] = constant_value(v.initial_value_expression, as_bool=True)
        constant = {name: x for name, x in out.items() if x is not None}
        return constant if len(constant) == len(out) else None

    def description(self) -> Any:
        import stormpy.developer as dev

        return dev.SymbolicModelDescription(self.program)


def constant_value(expr: Any, *, as_bool: bool = False) -> int | None:
    """The value of a Storm expression without variables (booleans as 0/1), else None.

    Storm crashes (not raises) evaluating an expression over undefined identifiers; substitute the
    program's constants first (``program.substitute_constants()``).
    """
    if not is_initialized(expr) or expr.contains_variables():
        return None
    try:
        return int(expr.evaluate_as_bool()) if as_bool else int(expr.evaluate_as_int())
    except (RuntimeError, ValueError):
        return None


def is_initialized(expr: Any) -> bool:
    """Whether a Storm expression is set: an unbounded PRISM ``int`` has no bound expressions, and Storm crashes the
    process (SIGSEGV) on any use of one but printing it."""
    return expr is not None and str(expr) != "__storm::notinitialized__"


def parse_constants(text: str | Mapping[str, Any] | None) -> dict[str, str]:
    """``"K=V,K2=V2"`` (or a mapping) as a dict of strings.

    Raises:
        ConstantsError: an entry that is not ``NAME=VALUE`` (or has an empty name), or a name given twice
            (``N=3,N=4`` would otherwise silently mean ``N=4``).
    """
    if isinstance(text, Mapping):
        return {str(k): str(v) for k, v in text.items()}
    return parse_assignments(text)


def load_model(path: str | Path, constants: str | Mapping[str, Any] | None = None) -> SymbolicModel:
    """Parse a PRISM (``.prism``, ``.pm``, ``.nm``) or JANI (``.jani``) file and define its constants.

    Raises:
        InputFileError: missing/unreadable file or unknown extension.
        ModelError: syntax error (Storm's message, with line and column), or a model type other
            than MDP/DTMC (CTMCs and Markov automata are not policy-controlled MDPs).
        ConstantsError: undefined constants (all listed) or unknown constant names.
    """
    import time

    import stormpy
    from stormpy.exceptions import StormError

    started = time.perf_counter()
    path = Path(path)
    check_input(path, "model file")
    try:
        path.open("rb").close()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read model file ({exc.strerror})") from None
    given = parse_constants(constants)
    file_props: dict[str, Any] = {}
    jani_data = None
    if path.suffix.lower() == ".jani":
        jani_data = read_jani(path)
        _check_jani_supported(path, jani_data)
    try:
        if path.suffix.lower() == ".jani":
            with storm_log_off():
                program, props = stormpy.parse_jani_model(str(path))
            kind = "jani"
            file_props = {_property_name(p): p for p in props}
        else:
            divisions_judged = _check_prism_text(path, given)
            with storm_log_off():
                program = parse_prism_file(path)
            kind = "prism"
    except RuntimeError as exc:
        language = "JANI" if path.suffix.lower() == ".jani" else "PRISM"
        raise ModelError(f"{path}: {language} syntax error: {storm_message(exc)}") from None
    except UnicodeDecodeError:  # Storm's message quotes the file's bytes, which are not text
        raise ModelError(
            f"{path}: not a {'JANI' if path.suffix.lower() == '.jani' else 'PRISM'} file "
            "(Storm's parser stopped at bytes that are not UTF-8 text)"
        ) from None

    defined_names = {c.name for c in program.constants}
    unknown = [k for k in given if k not in defined_names]
    if unknown:
        k = unknown[0]
        raise ConstantsError(
            f"{path}: unknown constant '{k}'{did_you_mean(k, defined_names)}; "
            f"the model declares: {', '.join(sorted(defined_names)) or 'no constants'}"
        )
    undefined = [c.name for c in program.constants if not c.defined]
    missing = [c for c in undefined if c not in given]
    if missing:
        raise ConstantsError(
            f"{path}: undefined constants {', '.join(missing)}; pass --constants " + ",".join(f"{c}=VALUE" for c in missing),
            missing=missing,
        )
    as_parsed = program  # the file's edges as Storm parsed them (matched to the file before constants are substituted)
    if given:
        try:
            with storm_log_off():
                program, _ = stormpy.instantiate_constants(program, _constant_values(program, given))
        except (RuntimeError, ValueError, TypeError, StormError) as exc:
            raise ConstantsError(
                f"{path}: cannot define constants {given}: {storm_message(exc)} (values must be "
                "numbers, true/false, or rationals like 1/10)"
            ) from None

    try:
        model_type = str(program.model_type).rsplit(".", 1)[-1].lower()
    except ValueError:  # a type stormpy's enumeration lacks (PRISM's pta and smg: "7 is not a valid PrismModelType")
        model_type = _declared_type(path)
    if model_type not in ("mdp", "dtmc"):
        why = _UNSUPPORTED_TYPES.get(model_type, _CONTINUOUS_TIME)
        raise ModelError(f"{path}: model type {model_type.upper()} is not supported (rlverify takes an MDP or a DTMC; {why})")

    if kind == "jani" or not divisions_judged:  # (a PRISM file whose every divisor was a constant: judged already)
        _refuse_division_by_zero(path, kind, program)
    if kind == "prism":
        ints = [v.name for v in program.global_integer_variables]
        ints += [v.name for m in program.modules for v in m.integer_variables]
        bools = [v.name for v in program.global_boolean_variables]
        bools += [v.name for m in program.modules for v in m.boolean_variables]
        actions = sorted({c.action_name for m in program.modules for c in m.commands})
        labels = tuple(lab.name for lab in program.labels)
        rewards = tuple(r.name for r in program.reward_models)
        locations: dict[str, tuple[str, ...]] = {}
        declared = _declared_variables(path)
        unassigned = tuple(c.name for c in as_parsed.constants if c.name in declared)
    else:
        ints, bools, actions, labels, rewards, locations = _jani_names(jani_data, program)
        unassigned = ()
    commands, keys = prism_commands(program) if kind == "prism" else jani_commands(path, as_parsed, jani_data)
    return SymbolicModel(
        path=path,
        kind=kind,
        program=program,
        model_type=model_type,
        variables=tuple(ints + bools),
        boolean_variables=tuple(bools),
        action_names=tuple(actions),
        labels=labels,
        reward_models=rewards,
        constants=",".join(f"{k}={v}" for k, v in given.items()),
        file_properties=file_props,
        parse_seconds=time.perf_counter() - started,
        commands=commands,
        command_keys=keys,
        locations=locations,
        unassigned=unassigned,
    )


#: why a model type rlverify does not take has no policy to verify (the others: continuous time)
_CONTINUOUS_TIME = "continuous-time models and Markov automata have no discrete-step policy semantics"
_UNSUPPORTED_TYPES = {
    "pta": "a probabilistic timed automaton's clocks run in real time, with no discrete step for a policy to act in",
    "smg": "a stochastic game's players choose against each other; model one player's choices as an MDP",
    "pomdp": "a POMDP's policy sees observations, not states",
}
_MODEL_TYPE = re.compile(r"^\s*([A-Za-z]+)\b")


#: the UTF-8 byte-order mark some editors write first
_BOM = b"\xef\xbb\xbf"


def parse_prism_file(path: Path) -> Any:
    """Storm's parse of a PRISM file. A leading UTF-8 byte-order mark is allowed, as in a JANI file: Storm's PRISM
    parser refuses it at 1:1 ("expecting <model type>"), so such a file is parsed from a copy without it (its lines
    and columns are the file's)."""
    import tempfile

    import stormpy

    with path.open("rb") as f:
        bom = f.read(len(_BOM)) == _BOM
    if not bom:
        return stormpy.parse_prism_program(str(path), prism_compatibility=True)
    with tempfile.TemporaryDirectory(prefix="rlverify-prism-") as tmp:
        copy = Path(tmp) / "model.prism"
        copy.write_bytes(path.read_bytes()[len(_BOM) :])
        return stormpy.parse_prism_program(str(copy), prism_compatibility=True)


_VARIABLE_DECLARATION = re.compile(r"(?m)^\s*(?:global\s+)?([A-Za-z_]\w*)\s*:\s*(?:\[|bool\b|int\b)")


def _declared_variables(path: Path) -> set[str]:
    """The variable names a PRISM file declares (``x : [0..3] ...``, ``b : bool ...``, ``global g : ...``)."""
    return set(_VARIABLE_DECLARATION.findall(re.sub(r"//[^\n]*", "", path.read_text("utf-8-sig", errors="replace"))))


def _declared_type(path: Path) -> str:
    """The model type keyword a PRISM file starts with (comments skipped), for a type stormpy cannot name."""
    text = re.sub(r"//[^\n]*", "", path.read_text(encoding="utf-8-sig", errors="replace"))
    found = _MODEL_TYPE.match(text)
    return found.group(1).lower() if found else "unknown"


def _refuse_division_by_zero(path: Path, kind: str, program: Any) -> None:
    """Refuse a model dividing by a constant zero (``x/0``, ``mod(x, K)`` with ``K=0``) in a guard, a probability, an
    update or a label, once its constants are defined: PRISM refuses it, while Storm evaluates it to some number and
    builds on (a guard ``x/0>=0`` is false, ``(x+1)/0>=0`` true). A divisor that reads variables is evaluated per state
    by Storm and is not checked here; a PRISM file's constant divisions are checked in its text before Storm parses it
    (:func:`constant_zero_divisor`)."""
    walked: set[str] = set()  # expressions already walked, by their text (commands repeat their probabilities)
    for where, expr in _expressions(kind, program.substitute_constants()):
        text = str(expr)
        if ("/" not in text and "%" not in text) or text in walked:
            continue
        walked.add(text)
        found = _zero_division(expr)
        if found is not None:
            raise ModelError(
                f"{path}: {where} divides by zero: {found} (PRISM refuses this; Storm would evaluate it to some number "
                "and build on)"
            )


def _expressions(kind: str, program: Any) -> Iterator[tuple[str, Any]]:
    """Where each expression of a Storm PRISM program or JANI model is, and the expression: guards, probabilities,
    updates (assignments) and labels (JANI: locations' transient assignments)."""
    if kind == "prism":
        program = program.substitute_formulas()
        for module in program.modules:
            for k, command in enumerate(module.commands):
                where = f"command {module.name}:{k + 1}"
                yield f"the guard of {where}", command.guard_expression
                for update in command.updates:
                    yield f"a probability of {where}", update.probability_expression
                    yield from ((f"an update of {where}", a.expression) for a in update.assignments)
        yield from ((f'label "{label.name}"', label.expression) for label in program.labels)
        return
    for automaton in program.automata:
        for location in automaton.locations:
            for a in location.assignments or ():  # None where a location assigns nothing
                yield f"location {location.name} of {automaton.name}", a.expression
        for edge in automaton.edges:
            where = f"an edge of {automaton.name}"
            yield f"the guard of {where}", edge.guard
            yield from ((f"an assignment of {where}", a.expression) for a in edge.template_edge.assignments)
            for destination, template in zip(edge.destinations, edge.template_edge.destinations, strict=True):
                yield f"a probability of {where}", destination.probability
                yield from ((f"an assignment of {where}", a.expression) for a in template.assignments)


def _zero_division(expr: Any) -> Any:
    """The first division or ``mod`` in Storm expression ``expr`` whose divisor reads no variable and is 0, or None."""
    import stormpy

    ops = stormpy.expressions.OperatorType
    stack = [expr]
    while stack:
        e = stack.pop()
        if e.is_literal() or e.is_variable():
            continue
        try:
            op, operands = e.operator, [e.get_operand(i) for i in range(e.arity)]
        except (RuntimeError, AttributeError, TypeError):  # no operator (a function application): not looked into
            continue
        if op in (ops.DIVIDE, ops.MODULO) and len(operands) == 2 and not operands[1].contains_variables():
            try:
                if float(operands[1].evaluate_as_double()) == 0.0:
                    return e
            except (RuntimeError, ValueError):
                pass
        stack.extend(operands)
    return None


def _check_prism_text(path: Path, given: Mapping[str, str] | None = None) -> bool:
    """Refuse before Storm parses it a PRISM file that is binary, nests expressions deeper than Storm's recursive
    parser survives (it crashes the process at ~2,000 levels), or divides by a constant zero (``given``: the
    constants defined on the command line). Returns whether every divisor in the text was a constant (judged here)."""
    data = path.read_bytes()
    if b"\x00" in data:
        raise ModelError(f"{path}: not a PRISM file (it contains NUL bytes: binary data)")
    text = data.decode("utf-8-sig", errors="replace")
    formulas = _formula_depths(path, text)
    try:
        check_nesting(text, str(path), lines=True, formulas=formulas)
    except PropertyError as exc:
        raise ModelError(str(exc)) from None
    check_literals(text, str(path))
    zero, judged = constant_zero_divisor(text, given or {})
    if zero is not None:
        raise ModelError(f"{path}: {zero} divides by zero (PRISM refuses this; Storm crashes or computes on with some number)")
    return judged


#: the most operands a PRISM file may have once its formulas are written out where they are used, as Storm's parser
#: does (its time grows with it: 1,000 formulas each using the one before, 500,000 operands, parse in 0.3 s; 2,000 in
#: 1.6 s; 5,000 in 10 s; 20,000 took over 120 s; 40 formulas each using the one before twice never finish)
MAX_WRITTEN_OUT = 2_000_000
_FORMULA = re.compile(r"\bformula\s+([A-Za-z_]\w*)\s*=\s*([^;]*);")
_OPERAND = re.compile(r"[A-Za-z_]\w*|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _formula_depths(path: Path, text: str) -> dict[str, tuple[int, int]]:
    """The nesting and chain depths (:func:`~rlverify.models.properties.expression_depth`) of each formula of PRISM
    ``text`` written out, in file order; refusing a file whose formulas written out where they are used exceed
    :data:`MAX_WRITTEN_OUT` operands."""
    from rlverify.models.properties import MAX_EVALUATED_CHAIN, MAX_NESTING, expression_depth

    code = re.sub(r"//[^\n]*", "", text)
    depths: dict[str, tuple[int, int]] = {}
    sizes: dict[str, int] = {}
    for name, body in _FORMULA.findall(code):
        operands = _OPERAND.findall(body)
        used = [depths[t] for t in operands if t in depths]
        # an upper bound from string counts where it is within the limits (a file of 20,000 short formulas is not
        # scanned token by token), else the scan
        nest = sum(body.count(c) for c in "([{!-XFG") + max((n for n, _ in used), default=0)
        chain = sum(body.count(c) for c in "+-*/^&|=<>?:,") + max((c for _, c in used), default=0)  # >= its operators
        # (bounded by the smallest chain limit, a label's, which the formula may be used in)
        within = nest <= MAX_NESTING and chain <= MAX_EVALUATED_CHAIN
        depths[name] = (nest, chain) if within else expression_depth(body, depths)[:2]
        sizes[name] = min(sum(sizes.get(t, 1) for t in operands), MAX_WRITTEN_OUT + 1)
    if not sizes:
        return depths
    total = sum(sizes.values()) + sum(sizes.get(t, 1) for t in _OPERAND.findall(_FORMULA.sub(" ", code)))
    if total > MAX_WRITTEN_OUT:
        largest = max(sizes, key=sizes.__getitem__)
        alone = f"{sizes[largest]:,}" if sizes[largest] <= MAX_WRITTEN_OUT else f"more than {MAX_WRITTEN_OUT:,}"
        raise ModelError(
            f"{path}: {total:,} operands once its formulas are written out where they are used, more than "
            f"{MAX_WRITTEN_OUT:,} (formula {largest} alone has {alone}; Storm's parser writes each formula out and its "
            "time grows with that size: 20,000 formulas each using the one before took over 120 s); use formulas "
            "less often inside formulas and in commands"
        )
    return depths


_CONSTANT = re.compile(r"\bconst\s+(?:(?:int|double|bool)\s+)?([A-Za-z_]\w*)\s*=\s*([^;]*);")
_DIVISOR_START = re.compile(r"/|\bmod\s*\(")
_SPACE = re.compile(r"\s*")
_PRIMARY = re.compile(r"\s*-?\s*(?:[A-Za-z_]\w*|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)")


def _group(text: str, start: int) -> int:
    """The end of the bracketed group opened at ``text[start]`` (``(``), or -1 when it is not closed."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    return -1


def _after_space(text: str, at: int) -> int:
    """The position of the first character from ``at`` on that is not white space (``len(text)`` if none)."""
    found = _SPACE.match(text, at)
    return found.end() if found else at


def _divisors(code: str) -> Iterator[tuple[int, str]]:
    """Each division's ``(position, divisor text)`` in PRISM ``code`` (comments and strings blanked): the operand after
    ``/`` (a number, a name, a call or a bracketed group, possibly negated) and ``mod``'s second argument; ``""``
    where the divisor is not found (an unclosed bracket), which no one can judge."""
    for m in _DIVISOR_START.finditer(code):
        end = -1
        if m.group() == "/":
            operand = _PRIMARY.match(code, m.end())
            at = _after_space(code, m.end())
            if at < len(code) and code[at] == "(":
                end = _group(code, at)
            elif operand is not None:
                end = operand.end()
                after = _after_space(code, end)
                if code.startswith("(", after) and re.fullmatch(r"\s*-?\s*[A-Za-z_]\w*", operand.group()):  # a call
                    end = _group(code, after)
            yield m.start(), code[m.end() : end] if end > 0 else ""
            continue
        end = _group(code, m.end() - 1)
        args, depth, cut = code[m.end() : end - 1] if end > 0 else "", 0, -1
        for i, c in enumerate(args):
            depth += {"(": 1, ")": -1}.get(c, 0)
            if c == "," and depth == 0:
                cut = i
        yield m.start(), args[cut + 1 :] if cut >= 0 else ""


def constant_zero_divisor(text: str, given: Mapping[str, str]) -> tuple[str | None, bool]:
    """The line (``line 7 (its text)``) of the first division in PRISM ``text`` whose divisor is a constant zero
    (numbers and constants defined in the file or ``given``, evaluated with
    :func:`rlverify.models.expressions.compile_expression`), or None; and whether every divisor was such a constant.
    A divisor reading variables, formulas or what that language does not read is not judged here."""

    def blank(m: re.Match[str]) -> str:  # positions stay those of the file's text
        return " " * len(m.group())

    code = _LABEL.sub(blank, re.sub(r"//[^\n]*", blank, text))
    values: dict[str, float] = {}
    divisors: dict[str, float | None] = {}  # each distinct divisor's value (a model repeats its "/2" many times)

    def value(expression: str) -> float | None:
        """``expression``'s value over the constants known so far; None where it is no such constant; NaN where it
        divides by zero itself."""
        from rlverify.models.expressions import compile_expression

        names = list(values)
        try:
            evaluate = compile_expression(expression, names, option="", kind="number")
            return float(evaluate(np.array([[values[n] for n in names]], dtype=np.float64))[0])
        except OptionError as exc:
            return math.nan if "divides by zero" in str(exc) else None
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
            return None

    for name, expression in _CONSTANT.findall(code):
        known = value(given[name]) if name in given else value(expression)
        if known is not None and math.isfinite(known):
            values[name] = known
    for name, number in given.items():
        if name not in values:
            known = value(number)
            if known is not None and math.isfinite(known):
                values[name] = known
    for at, divisor in _divisors(code):
        if divisor not in divisors:
            divisors[divisor] = value(divisor) if len(divisor) <= 1000 else None
        found = divisors[divisor]
        if found is not None and (found == 0 or math.isnan(found)):
            line = text.count("\n", 0, at) + 1
            written = " ".join(text.split("\n")[line - 1].split())  # (splitlines also splits at \r, \f, ...)
            return f"line {line} ({written[:120]}{'...' if len(written) > 120 else ''})", False
    return None, all(v is not None for v in divisors.values())


def _property_name(prop: Any) -> str:
    """A JANI property's name (stormpy 2.0 spells it ``get_name()``; older versions ``name``)."""
    getter = getattr(prop, "get_name", None)
    return getter() if callable(getter) else prop.name


def _jani_names(
    data: Any, program: Any
) -> tuple[list[str], list[str], list[str], tuple[str, ...], tuple[str, ...], dict[str, tuple[str, ...]]]:
    """State variables, actions, labels (transient booleans), reward names (transient numbers) and location
    features of a JANI model, named as Storm names them in the states it builds.

    Storm names an automaton's local variable ``AUTOMATON_VAR`` (``p`` of automaton ``agent`` is
    ``agent_p``) and an automaton's location ``_loc_AUTOMATON`` (an integer code: the location's
    position in the file); the state valuations, hence the policy features, carry these names.
    Automata with a single location add no feature. A variable with an initial value that no edge assigns is not a
    feature either: Storm's builder replaces it by that value (a constant), so its states do not carry it.
    """

    ints: list[str] = []
    bools: list[str] = []
    labels: list[str] = []
    rewards: list[str] = []
    locations: dict[str, tuple[str, ...]] = {}
    for automaton in program.automata:
        names = [loc.name for loc in automaton.locations]
        if len(names) > 1:
            by_code = sorted(names, key=automaton.get_location_index)
            locations[automaton.location_variable.name] = tuple(by_code)
    ints += list(locations)
    assigned = {
        a.variable.expression_variable.name
        for automaton in program.automata
        for edge in automaton.edges
        for a in (*edge.template_edge.assignments, *(x for d in edge.template_edge.destinations for x in d.assignments))
    }
    scopes = [list(program.global_variables)] + [list(a.variables) for a in program.automata]
    for scope in scopes:
        for v in scope:
            name = v.expression_variable.name
            is_bool = str(v.type) == "bool"
            if v.is_transient:
                (labels if is_bool else rewards).append(name)
            elif name in assigned or not is_initialized(v.init_expression):
                (bools if is_bool else ints).append(name)
    actions = sorted({a["name"] for a in data.get("actions", [])})
    if any("action" not in e for a in data.get("automata", []) for e in a.get("edges", [])):
        actions.append("")
    return ints, bools, actions, tuple(labels), tuple(rewards), locations


#: JANI model types with a discrete-step policy semantics
_JANI_TYPES = ("dtmc", "mdp")
#: JANI ``features`` rlverify does not support, with why
_JANI_UNSUPPORTED = {
    "nondet-selection": "nondeterministic selection (assignments choosing a value) has no probabilistic step semantics here",
}


def _check_jani_supported(path: Path, data: Any) -> None:
    """Refuse, naming the feature and the file, what a JANI file declares that rlverify does not support.

    Checked before Storm parses the file (whose messages do not always name the feature): the model
    type (DTMC and MDP only: no CTMCs, Markov automata, timed or hybrid automata), the declared
    ``features`` listed in :data:`_JANI_UNSUPPORTED`, and clock, continuous or array state variables.

    Raises:
        ModelError: naming the unsupported feature and where it is; a file that is no JSON object.
    """
    if not isinstance(data, dict):
        raise ModelError(f"{path}: not a JANI model (the file's JSON is not an object)")
    _check_jani_shape(path, data)
    mtype = data.get("type")
    if isinstance(mtype, str) and mtype.lower() not in _JANI_TYPES:
        raise ModelError(
            f'{path}: JANI model type \'{mtype}\' is not supported (expected "dtmc" or "mdp"; '
            "continuous-time, timed and hybrid models have no discrete-step policy semantics)"
        )
    for feature in data.get("features", []) or []:
        if feature in _JANI_UNSUPPORTED:
            raise ModelError(f"{path}: JANI feature '{feature}' is not supported: {_JANI_UNSUPPORTED[feature]}")
    scopes = [("", data.get("variables", []))] + [
        (a.get("name", "?"), a.get("variables", [])) for a in data.get("automata", [])
    ]
    for owner, declared in scopes:
        for v in declared or []:
            vtype = v.get("type")
            kind = vtype if isinstance(vtype, str) else vtype.get("kind")
            where = f"automaton '{owner}'" if owner else "the global variables"
            if kind in ("clock", "continuous"):
                raise ModelError(
                    f"{path}: JANI {kind} variable '{v.get('name')}' ({where}) is not supported: "
                    "timed and hybrid automata have no discrete-step policy semantics"
                )
            if kind == "array" and not v.get("transient"):
                raise ModelError(
                    f"{path}: JANI array variable '{v.get('name')}' ({where}) is not supported (feature "
                    "'arrays'): Storm flattens an array into variables NAME_at_I, which a policy could "
                    "not name before the model is built; declare one variable per element"
                )


def _check_jani_shape(path: Path, data: dict[str, Any]) -> None:
    """Refuse JSON of the wrong type where the JANI format has lists and objects (Storm's parser does not always
    refuse them: a variable whose type is a list crashes it), naming the place."""
    features = data.get("features")
    if features is not None and not (isinstance(features, list) and all(isinstance(f, str) for f in features)):
        _jani_shape_error(path, "'features'", "a list of strings", features)
    _jani_variables(path, data.get("variables"), "'variables'")
    _jani_objects(path, data.get("constants"), "'constants'")
    _jani_objects(path, data.get("actions"), "'actions'")
    _jani_objects(path, data.get("properties"), "'properties'")
    for i, automaton in enumerate(_jani_objects(path, data.get("automata"), "'automata'")):
        where = f"automaton {automaton.get('name', i)!r}"
        _jani_variables(path, automaton.get("variables"), f"{where}: 'variables'")
        _jani_objects(path, automaton.get("locations"), f"{where}: 'locations'")
        for j, edge in enumerate(_jani_objects(path, automaton.get("edges"), f"{where}: 'edges'")):
            destinations = _jani_objects(path, edge.get("destinations"), f"{where}: edge {j + 1} 'destinations'")
            for k, destination in enumerate(destinations):
                _jani_objects(path, destination.get("assignments"), f"{where}: edge {j + 1} destination {k + 1} 'assignments'")


def _jani_shape_error(path: Path, where: str, expected: str, value: Any) -> NoReturn:
    raise ModelError(f"{path}: not a valid JANI model: {where} must be {expected}, not {json_type(value)}")


def _jani_objects(path: Path, value: Any, where: str) -> list[dict[str, Any]]:
    """``value`` as a list of JSON objects (``None``: empty), else a :class:`ModelError` naming ``where``."""
    if value is None:
        return []
    if not isinstance(value, list):
        _jani_shape_error(path, where, "a list", value)
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            _jani_shape_error(path, f"{where}[{i}]", "an object", item)
    return value


def _jani_variables(path: Path, value: Any, where: str) -> None:
    """Refuse a variable declaration whose name or type has the wrong JSON type."""
    for i, v in enumerate(_jani_objects(path, value, where)):
        if not isinstance(v.get("name"), str):
            _jani_shape_error(path, f"{where}[{i}].name", "a string", v.get("name"))
        vtype = v.get("type")
        if isinstance(vtype, dict):
            if not isinstance(vtype.get("kind"), str):
                _jani_shape_error(path, f"{where}[{i}].type.kind", "a string", vtype.get("kind"))
            if "base" in vtype and not isinstance(vtype["base"], (str, dict)):
                _jani_shape_error(path, f"{where}[{i}].type.base", "a string", vtype["base"])
        elif not isinstance(vtype, str):
            _jani_shape_error(path, f"{where}[{i}].type", "a string or an object", vtype)


def json_type(value: Any) -> str:
    """The JSON type of ``value`` as a user reads it (``a number``, ``a list``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _constant_values(program: Any, given: Mapping[str, str]) -> dict[str, Any]:
    """The values of ``given`` constants for Storm; an integer given for a ``double`` constant becomes a float (PRISM
    allows ``-c p=1``; Storm refuses an integer expression there)."""
    types = {c.name: str(c.type) for c in program.constants}
    out = {}
    for k, v in given.items():
        value = _constant_value(v)
        if isinstance(value, int) and not isinstance(value, bool) and types.get(k) in ("rational", "double", "real"):
            value = float(value)
        out[k] = value
    return out


def _constant_value(text: str) -> Any:
    """A constant's value for Storm: a bool, a 64-bit integer, a finite float (also from a rational ``1/10``),
    else the text (which Storm then refuses).

    Raises:
        ValueError: an integer beyond 64 bits or a number that is not finite (``nan``, ``inf``, ``1e999``),
            with a message naming the value (the caller reports it with the file).
    """
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        value = int(text)
    except ValueError:
        pass
    else:
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"{text} does not fit a 64-bit integer")
        return value
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if not np.isfinite(number):
            raise ValueError(f"{text} is not a finite number")
        return _normal(number, text)
    num, slash, den = text.partition("/")  # a rational, as PRISM writes them (1/10)
    if slash:
        from fractions import Fraction  # (and decimal: 4 ms of every start-up otherwise)

        try:
            number = float(Fraction(int(num.strip()), int(den.strip())))
        except (ValueError, ZeroDivisionError, OverflowError):
            pass
        else:
            return _normal(number, text)
    return text


#: the smallest positive normal double: below it a probability loses precision or becomes 0
SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)


def _normal(number: float, text: str) -> float:
    """``number`` (read from ``text``), refused where double precision would change it beyond rounding: a non-zero
    value that became 0 or lies below the smallest normal double (rlverify and Storm compute in doubles: a transition
    of probability 1e-400 would silently vanish, and ``P>0`` flip)."""
    if number == 0.0 and re.search(r"[1-9]", text.split("e")[0].split("E")[0]):
        raise ValueError(
            f"{text} is below the smallest double and would become 0 (rlverify computes in double "
            f"precision; the smallest normal double is {SMALLEST_NORMAL:.3g})"
        )
    if 0.0 < abs(number) < SMALLEST_NORMAL:
        raise ValueError(f"{text} is below the smallest normal double {SMALLEST_NORMAL:.3g} (its precision is lost)")
    return number


_NUMBER = re.compile(r"(?<![\w.])(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def check_literals(text: str, where: str) -> None:
    """Refuse a number written in a model (``text``, ``//`` comments left out) that double precision turns into 0 or
    a subnormal (:func:`_normal`), naming ``where``."""
    code = re.sub(r"//[^\n]*", "", text)
    for literal in _NUMBER.findall(code):
        try:
            _normal(float(literal), literal)
        except ValueError as exc:
            raise ModelError(f"{where}: the number {exc}") from None


_LABEL = re.compile(r'"([^"]*)"')
_DIVISION_BY_ZERO = re.compile(r"/\s*\(?\s*0+(?:\.0*)?\s*\)?(?![\w.])")
#: Storm prints a JANI step bound as ``Usteps<=k`` (``Csteps<=k``), and ``F phi`` of a JANI file as ``true U phi``
_STEPS_BOUND = re.compile(r'(?<![\w"])([UFC])\s*steps\s*(?=<=|<)')
_TRUE_UNTIL = re.compile(r"^([^\[]*\[)\s*true\s+U(?![\w])")


def _prism_text(text: str) -> str:
    """Storm's text of a JANI property in the PRISM syntax every engine reads (same formula):
    ``P=? [true Usteps<=12 "goal"]`` is ``P=? [F<=12 "goal"]``."""
    return _TRUE_UNTIL.sub(r"\1F", _STEPS_BOUND.sub(r"\1", text))


#: a reward accumulation Storm prints for a JANI property that collects less than all rewards (``F [steps](...)``)
_ACCUMULATION = re.compile(r'(?<![\w"])([FCI])\s*\[\s*((?:steps|time|exit)(?:\s*,\s*(?:steps|time|exit))*)?\s*\]')
_REWARD_NAME = re.compile(r'\{\s*"[^"]*"\s*\}')
_IDENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\b")
_KEYWORDS = {
    "P",
    "R",
    "Pmin",
    "Pmax",
    "Rmin",
    "Rmax",
    "F",
    "G",
    "U",
    "X",
    "C",
    "I",
    "true",
    "false",
    "min",
    "max",
    "S",
    "LRA",
    "T",
    "W",
    "floor",
    "ceil",
    "pow",
    "mod",
    "log",
    "filter",
    "forall",
    "exists",
}


def parse_property(model: SymbolicModel, text: str | Property, *, fixed_policy: bool = False) -> Property:
    """Parse one PCTL property against ``model`` (structure read once, then Storm's parse attached).

    ``text`` may also name a property of a JANI file. Unknown labels, variables and reward models
    are errors naming the close alternatives.

    ``fixed_policy``: the property is evaluated on the chain of a fixed policy, where Pmin = Pmax = P
    (and Rmin = Rmax = R). A *named* JANI property asking ``Pmax``/``Pmin``/``Rmax``/``Rmin`` (as most
    public JANI benchmarks do) is then read as ``P=?``/``R=?`` (its ``text`` says so; see
    :func:`fixed_policy_note` for the note to show); a typed ``Pmax=? [...]`` is kept as written.
    """
    import stormpy

    if isinstance(text, Property):
        if text.storm is not None:
            return text
        text = text.text
    if model.kind == "jani" and text in model.file_properties:
        return _named_jani_property(model, text, fixed_policy=fixed_policy)
    malformed: PropertyError | None = None
    try:
        structure = parse_structure(text)
    except PropertyError as exc:  # Storm's message says more (with the position) where it parses the text too
        structure, malformed = Property(text=text), exc
    _check_names_and_values(model, text, structure)
    try:
        with storm_log_off():
            props = stormpy.parse_properties(text, model.program)
    except RuntimeError as exc:
        raise _storm_parse_error(model, text, structure, exc) from None
    if malformed is not None:
        raise malformed
    if len(props) != 1:
        raise PropertyError(f"expected exactly one property, got {len(props)} in '{text}'")
    return structure.with_storm(props[0], _storm_bound(structure, props[0]), _storm_threshold(props[0]))


def parse_properties(
    model: SymbolicModel, source: str | Path, *, constants: str | dict[str, str] | None = None, fixed_policy: bool = False
) -> list[Property]:
    """Several properties against ``model``: a PRISM properties file (``.props``, ``.pctl``, ``.prop``, ``.csl``) or
    text holding one or more (separated by ``;`` or line ends), each parsed as :func:`parse_property` does.

    Read by :func:`~rlverify.models.properties.split_properties`: ``//`` comments, ``"name": P=? [...]`` names,
    ``const`` declarations with literal values, or without a value and given in ``constants`` (``"T=10"`` or a
    dict). Properties keep their file names (None where unnamed).

    Raises:
        InputFileError: the file cannot be read.
        PropertyError: see :func:`split_properties` and :func:`parse_property`.
    """
    from rlverify.models.properties import PROPERTY_FILE_SUFFIXES, read_properties_file, split_properties

    path = Path(source) if isinstance(source, Path) or str(source).lower().endswith(PROPERTY_FILE_SUFFIXES) else None
    text, where = (read_properties_file(path), str(path)) if path is not None else (str(source), "properties")
    out = []
    for name, body in split_properties(text, parse_constants(constants), source=where):
        prop = parse_property(model, body, fixed_policy=fixed_policy)
        out.append(replace(prop, name=name) if name is not None else prop)
    return out


def _named_jani_property(model: SymbolicModel, name: str, *, fixed_policy: bool) -> Property:
    """The JANI file's property ``name`` (see :func:`parse_property` for ``fixed_policy``)."""
    storm_prop = model.file_properties[name]
    formula = storm_prop.get_raw_formula()
    if fixed_policy and getattr(formula, "has_optimality_type", False) and formula.has_optimality_type:
        import stormpy.developer as dev

        formula = formula.clone()
        formula.remove_optimality_type()
        storm_prop = dev.Property(name, formula, set())
    if re.match(r"\s*T(?:min|max)?\s*[=<>]", str(formula)):  # Storm's time operator: expected steps
        raise PropertyError(
            f"{model.shown}: property '{name}' ({formula}) asks for an expected number of steps (a JANI expected "
            "value of 1 accumulated over steps), which is not supported; declare a reward of 1 per step (a transient "
            "real variable) and ask for its expected value"
        )
    accumulated = _ACCUMULATION.search(str(formula))
    if accumulated is not None:
        raise PropertyError(
            f"{model.shown}: property '{name}' ({formula}) accumulates only "
            f"[{accumulated.group(2) or 'nothing'}] of its rewards: a JANI reward accumulation other than "
            'state and action rewards together is not supported; declare "accumulate": ["steps", "exit"] '
            "(state rewards are exit rewards in discrete time) or give the property as text, e.g. "
            'R{"r"}=? [F "goal"]'
        )
    structure = parse_structure(_prism_text(str(formula)), name=name)
    structure = structure.with_storm(storm_prop, _storm_bound(structure, storm_prop), _storm_threshold(storm_prop))
    note = fixed_policy_note(model, structure)
    return replace(structure, notes=(note,)) if note else structure


def _check_names_and_values(model: SymbolicModel, text: str, structure: Property) -> None:
    """Refuse an unknown reward model or label (naming close ones), too deep a nesting, a division by zero."""
    reward = structure.reward_model
    if structure.operator == "R" and not reward and len(model.reward_models) != 1:
        known = ", ".join(f'"{r}"' for r in model.reward_models)
        raise PropertyError(
            f"property '{text}': the model defines no reward model"
            if not model.reward_models
            else f"property '{text}' names no reward model and the model defines {len(model.reward_models)} "
            f'({known}): name one, e.g. R{{"{model.reward_models[0]}"}}=? [...]'
        )
    if reward and reward not in model.reward_models:
        raise PropertyError(
            f"property '{text}': unknown reward model \"{reward}\""
            f"{did_you_mean(reward, model.reward_models)}; "
            f"the model defines: {', '.join(repr(x) for x in model.reward_models) or 'none'}"
        )
    known_labels = set(model.labels) | {"init", "deadlock"}
    for lab in _LABEL.findall(_REWARD_NAME.sub("", text)):
        if lab not in known_labels:
            named = (
                f" ('{lab}' names one of the file's properties, not a label: give the property as {lab} to check "
                "it as the file states it)"
                if lab in (model.file_properties or {})
                else ""
            )
            raise PropertyError(
                f"property '{text}': unknown label \"{lab}\"{did_you_mean(lab, known_labels)}; "
                f"the model defines: {', '.join(sorted(known_labels))}{named}"
            )
    check_nesting(text, f"property '{text[:60]}{'...' if len(text) > 60 else ''}'", evaluated=True)
    if _DIVISION_BY_ZERO.search(_LABEL.sub('""', text)):
        raise PropertyError(
            f"property '{text}': a division by zero (Storm would evaluate it to some number and check the property on it)"
        )


def _storm_parse_error(model: SymbolicModel, text: str, structure: Property, exc: Exception) -> PropertyError:
    """The error for a property Storm does not parse: an unknown name, a misspelt property name of the file."""
    reward = structure.reward_model
    names = set(model.variables) | {c.name for c in model.program.constants} | _KEYWORDS | ({reward} if reward else set())
    names |= _formula_names(model)
    unknown = [w for w in _IDENT.findall(_LABEL.sub("", text)) if w not in names and not w.isdigit()]
    hint = f" (unknown name '{unknown[0]}'{did_you_mean(unknown[0], model.variables)})" if unknown else ""
    if structure.path == "G" and structure.bound_text is not None:
        hint += " (Storm has no step-bounded G; use P=? [F<=k !phi] and 1 minus its value)"
    if model.file_properties and not re.match(r"\s*[PR](min|max)?\s*[=<>{]", text):  # a misspelt property name?
        close = did_you_mean(text, model.file_properties)
        return PropertyError(
            f"property '{text}' is neither a property of {model.shown}{close} nor a formula; its "
            f"properties: {', '.join(repr(n) for n in model.file_properties)}"
        )
    return PropertyError(f"property '{text}' does not parse{hint}: {storm_message(exc)}")


def _formula_names(model: SymbolicModel) -> set[str]:
    """The names a PRISM file defines with ``formula NAME = ...`` (Storm's program does not list them), read from its
    text for a parse error's hint only (one in a comment counts: it only keeps a name from being called unknown)."""
    if model.kind != "prism":
        return set()
    try:
        return set(re.findall(r"\bformula\s+([A-Za-z_]\w*)\s*=", model.path.read_text("utf-8-sig", errors="replace")))
    except OSError:
        return set()


def fixed_policy_note(model: SymbolicModel, prop: Property) -> str | None:
    """What a user must be told when ``prop`` is a named JANI property whose ``Pmax``/``Pmin`` (``Rmax``/``Rmin``)
    :func:`parse_property` read as ``P=?`` (``R=?``) for a fixed policy; None otherwise."""
    if model.kind != "jani" or prop.name is None or prop.name not in model.file_properties or prop.optimality:
        return None
    formula = model.file_properties[prop.name].get_raw_formula()
    if not (getattr(formula, "has_optimality_type", False) and formula.has_optimality_type):
        return None
    asked = ("P" if formula.is_probability_operator_formula else "R") + (
        "min" if str(formula.optimality_type).endswith("MINIMIZE") else "max"
    )
    plain = asked[0]
    return (
        f"property '{prop.name}' of {model.path.name} asks {asked}; under the fixed policy it is evaluated as "
        f"{plain}=? ({prop.text}): on the policy's chain {plain}min = {plain}max = {plain}"
    )


def _storm_bound(structure: Property, storm_prop: Any) -> int | None:
    """The inclusive step bound as Storm evaluates it (``F<=(N+2)``), strictness read from the text."""
    if structure.lower_bounded or structure.reward_bound is not None:
        return None
    try:
        path = storm_prop.get_raw_formula().subformula
        if path.is_bounded_until_formula and not path.has_lower_bound:
            bound = int(path.upper_bound_expression.evaluate_as_int()) - (1 if structure.strict else 0)
        else:
            return None
    except (AttributeError, RuntimeError):
        return None
    if bound < 0:
        raise PropertyError(
            f"property '{structure.text}': the step bound evaluates to "
            f"{bound + (1 if structure.strict else 0)}, which is negative"
        )
    return bound


def _storm_threshold(storm_prop: Any) -> float | None:
    """The threshold of ``P>=t [...]`` as Storm evaluates it (a constant or an expression), else None."""
    formula = storm_prop.get_raw_formula()
    return float(formula.threshold) if getattr(formula, "has_bound", False) and formula.has_bound else None


def truth_values(storm_model: Any, state_formula: Any) -> Any:
    """``(S,)`` bool: the states of a built Storm model satisfying a propositional ``state_formula``
    (a Storm formula, e.g. a subformula of a parsed property)."""
    import stormpy

    result = stormpy.model_checking(storm_model, state_formula)
    return bit_mask(result.get_truth_values_vector(), storm_model.nr_states)


def bit_mask(bits: Any, size: int) -> np.ndarray:
    """``(size,)`` bool: Storm's ``BitVector`` ``bits`` as an array.

    Read from its stored form (its size, then its 64-bit buckets in decimal, bit i the bit ``63 - i % 64``
    of bucket ``i // 64``): ~0.2 ms for 37k states where iterating its set bits takes ~5 ms. Where that form is not
    as expected (its size, bucket count or count of set bits disagree), its set bits are iterated."""
    parts = bits.store_as_string().split()
    if len(parts) == 1 + (size + 63) // 64 and int(parts[0]) == size:
        buckets = np.array(parts[1:], dtype=np.uint64).astype(">u8")
        mask = np.unpackbits(buckets.view(np.uint8), count=size).astype(bool)
        if int(np.count_nonzero(mask)) == bits.get_number_of_set_bits():
            return mask
    out = np.zeros(size, dtype=bool)
    out[np.fromiter(iter(bits), dtype=np.int64)] = True
    return out


def build_explicit(
    model: SymbolicModel,
    properties: list[Any] | None,
    *,
    max_states: int | None = None,
    mask: Any = None,
    command_names: bool | None = None,
    keep_storm: bool = True,
    max_memory: int | None = None,
    memory_estimates: dict[str, int] | None = None,
) -> tuple[ExplicitModel, Any]:
    """Build the model with Storm (property-directed when ``properties`` are given) as arrays.

    Property-directed: states that already decide the properties are terminal (absorbing), as in
    Storm's own builder. ``mask`` is an optional ``stormpy.developer.StateValuationFunctionMask``
    restricting the explored choices (on-the-fly construction). ``command_names``: give every choice
    its command name (``ExplicitModel.choice_commands``); None: only where labels do not identify the
    choices (a state with two choices of one label, or an unlabelled choice among several), which
    costs a second build with Storm's choice origins. Returns the explicit model and the stormpy model;
    with ``keep_storm=False`` the stormpy model is freed as soon as it is exported, before its arrays
    are read (peak memory: Storm's build or the arrays, not both), and None is returned in its place.
    ``max_memory`` (bytes): refuse before exporting/reading the arrays when the estimated resident memory
    would exceed it (:func:`~rlverify.models.explicit.memory_guard`; Storm's own build is limited by
    ``max_states`` only); the estimates are recorded in ``memory_estimates``.

    Raises:
        ModelTooLargeError: more than ``max_states`` states would be explored.
        MemoryBudgetError: a phase would exceed ``max_memory``.
    """
    budget = (max_memory, memory_estimates)
    if command_names is None and sum(1 for c in model.commands if not c.action) >= 2:
        # two unlabelled commands: a state with an unlabelled choice among several is all but certain, and finding
        # it after the build would cost a second build (csma: 2 x 0.27 s); so build with Storm's choice origins at
        # once and drop the names where labels do tell the choices apart (the same model as the label-only build)
        explicit, storm_model = _build(model, properties, max_states, mask, True, keep_storm, budget)
        if not ambiguous_choices(explicit):
            explicit = replace(explicit, choice_commands=None, command_names=())
        return explicit, storm_model
    explicit, storm_model = _build(model, properties, max_states, mask, bool(command_names), keep_storm, budget)
    if command_names is None and ambiguous_choices(explicit):
        del explicit, storm_model
        explicit, storm_model = _build(model, properties, max_states, mask, True, keep_storm, budget)
    return explicit, storm_model


def ambiguous_choices(model: ExplicitModel) -> bool:
    """Whether some state has two choices with one action label, or an unlabelled choice among several."""
    cs = model.choice_states()
    A = len(model.action_names)
    keys = cs * A + model.choice_actions
    if len(distinct(keys)) != len(keys):
        return True
    unlabelled = np.array([not a for a in model.action_names], dtype=bool)[model.choice_actions]
    several = np.diff(model.row_groups) > 1
    return bool(several[cs[unlabelled]].any())


def _ranges_checked(explicit: ExplicitModel, model: SymbolicModel, properties: list[Any] | None) -> ExplicitModel:
    """``explicit`` (built without Storm's exploration checks) after refusing an update that leaves its variable's
    range: a PRISM program's commands are evaluated in every expanded state (:func:`~rlverify.models.program.
    check_update_ranges`); Storm's out-of-bounds state (:func:`_distributions_checked`) covers the rest, but not every
    synchronised update, which the returned model's ``notes`` then say."""
    note = None
    if model.kind == "prism":
        from rlverify.models.program import Unsupported, check_update_ranges, compiled, terminal_functions

        try:
            program = compiled(model.program, model.shown)
            terminal = (
                terminal_functions(properties[0].get_raw_formula(), program.label_functions.get, program.by_name)
                if properties and len(properties) == 1
                else []
            )
            check_update_ranges(program, explicit.variables, explicit.valuations, terminal)
        except Unsupported as exc:
            note = (
                f"the updates' ranges were checked only where Storm reports them ({exc}): an update of synchronised "
                "commands leaving its variable's range may have wrapped around"
            )
    elif len(model.program.automata) > 1:
        note = (
            "the updates' ranges were checked only where Storm reports them (its own checks refuse this model's "
            "probabilities, which sum to 1 only up to rounding): an update of synchronised edges leaving its "
            "variable's range may have wrapped around"
        )
    if note is not None:
        log.warning("%s: %s", model.path, note)
        explicit = replace(explicit, notes=(*explicit.notes, note))
    return explicit


def _out_of_range_update(model: SymbolicModel, valuation: dict[str, int]) -> str | None:
    """Which command writes which value outside which variable's range in the state ``valuation`` (a PRISM
    program's commands evaluated there, :mod:`rlverify.models.program`), as a message; None if not found."""
    if model.kind != "prism":
        return _out_of_range_edge(model, valuation)
    from rlverify.models.program import Unsupported, compiled

    try:
        program = compiled(model.program, model.shown)
        row = np.asarray([[valuation[v.name] for v in program.variables]], dtype=np.int64)
        program.check(row)
    except ModelError as exc:
        if "outside its range" in str(exc):
            return f"{exc} (PRISM and Storm's checks refuse this; rlverify does not wrap the value around)"
        return None
    except (Unsupported, KeyError, ValueError, RuntimeError):
        return None
    return None


def _out_of_range_edge(model: SymbolicModel, valuation: dict[str, int]) -> str | None:
    """:func:`_out_of_range_update` for a JANI model: its edges enabled in ``valuation`` (location and guard) and
    their destinations' assignments, evaluated by Storm; None if none leaves a bounded variable's range."""
    try:
        program = model.program.substitute_constants()
        manager = program.expression_manager
        subst = {}
        for name, value in valuation.items():
            if manager.has_variable(name):
                variable = manager.get_variable(name)
                subst[variable] = (
                    manager.boolean(bool(value)) if name in model.boolean_variables else manager.integer(int(value))
                )
        bounds = {}
        for v in list(program.global_variables) + [v for a in program.automata for v in a.variables]:
            if v.type.is_bounded_type and not v.is_transient:
                bounds[v.expression_variable.name] = (
                    int(v.type.lower_bound.evaluate_as_int()),
                    int(v.type.upper_bound.evaluate_as_int()),
                )
        for ai, automaton in enumerate(program.automata):
            location = valuation.get(automaton.location_variable.name, 0)
            for ei, edge in enumerate(automaton.edges):
                if edge.source_location_index != location or not edge.guard.substitute(subst).evaluate_as_bool():
                    continue
                for d, td in zip(edge.destinations, edge.template_edge.destinations, strict=True):
                    if float(d.probability.substitute(subst).evaluate_as_double()) <= 0:
                        continue
                    for a in td.assignments:
                        name = a.variable.expression_variable.name
                        if name not in bounds:
                            continue
                        new = int(a.expression.substitute(subst).evaluate_as_int())
                        lo, hi = bounds[name]
                        if not lo <= new <= hi:
                            position = model.command_keys.get((ai << 32) | ei)
                            edge_name = model.commands[position].name if position is not None else f"of {automaton.name}"
                            return (
                                f"{model.shown}: edge {edge_name} assigns {name}={new} outside its range [{lo}..{hi}] "
                                f"in state {valuation} (JANI and Storm's checks refuse this; rlverify does not wrap "
                                "the value around)"
                            )
    except (RuntimeError, ValueError, AttributeError, TypeError):
        return None
    return None


def _distributions_checked(model: ExplicitModel, path: Path, symbolic: SymbolicModel | None = None) -> ExplicitModel:
    """``model``, after checking that no update left a variable's range and that every choice is a distribution.

    Storm's builder wraps an out-of-range value into the variable's bits (``x'=x+1`` from ``x=3`` for ``x:[0..3]``
    gives ``x=0``) unless it is asked to route such updates to an ``out_of_bounds`` state (done in :func:`_build`);
    its own checks, which would refuse both, also refuse distributions that sum to 1 only up to rounding. PRISM
    refuses both. Raises :class:`ModelError` naming the state and the choice's label."""
    if _OUT_OF_BOUNDS_BIT in model.variables:  # Storm's marker of that state, not a variable of the model
        keep = [i for i, v in enumerate(model.variables) if v != _OUT_OF_BOUNDS_BIT]
        model = replace(model, variables=tuple(model.variables[i] for i in keep), valuations=model.valuations[:, keep])
    oob = model.labels.get(OUT_OF_BOUNDS)
    if oob is not None and oob.any():
        target = int(np.flatnonzero(oob)[0])
        column = model.transitions[:, target].tocoo()
        sources = column.row[(column.data > 0) & ~oob[model.choice_states()[column.row]]]
        if len(sources):
            c = int(sources[0])
            state = int(np.searchsorted(model.row_groups, c, side="right") - 1)
            label = model.action_names[model.choice_actions[c]] or "unlabelled"
            valuation = model.valuation_dict(state)
            precise = _out_of_range_update(symbolic, valuation) if symbolic is not None else None
            raise ModelError(
                precise
                or f"{path}: in state {valuation}, an update of the {label} choice leaves a "
                "variable's declared range (PRISM and Storm's checks refuse this; rlverify does not wrap "
                "the value around): guard the update or widen the range"
            )
    sums = model.transitions @ np.ones(model.transitions.shape[1])
    bad = np.abs(sums - 1.0) > 1e-6
    if bad.any():
        c = int(np.argmax(bad))
        state = int(np.searchsorted(model.row_groups, c, side="right") - 1)
        label = model.action_names[model.choice_actions[c]] or "unlabelled"
        raise ModelError(
            f"{path}: the probabilities of a '{label}' command sum to {float(sums[c]):.6g}, not 1, in state "
            f"{model.valuation_dict(state)}"
        )
    return model


#: the label of the state Storm's builder sends out-of-range updates to (``BuilderOptions.set_add_out_of_bounds_state``)
OUT_OF_BOUNDS = "out_of_bounds"
#: the valuation bit Storm adds for that state
_OUT_OF_BOUNDS_BIT = "_OutOfBoundsBit"


def _defines_label(model: SymbolicModel, name: str) -> bool:
    return name in model.labels


def _build_input(model: SymbolicModel, properties: list[Any] | None) -> tuple[Any, list[Any] | None]:
    """The program and property formulas to give Storm's builder.

    Storm's builder declares a variable for its out-of-bounds state in the program's expression manager, once:
    a second such build of the same program would fail. The first build uses the loaded program and properties;
    later ones a fresh parse of the file with the same constants, and the properties parsed against it (a JANI
    file's property by name, a typed property from its text)."""
    import stormpy

    storm_props = [p.storm if isinstance(p, Property) else p for p in properties] if properties else None
    if not model.program.expression_manager.has_variable(_OUT_OF_BOUNDS_BIT):
        return model.program, storm_props
    path = str(model.path)
    given = parse_constants(model.constants)
    try:
        if model.kind == "jani":
            program, named = stormpy.parse_jani_model(path)
            by_name = {_property_name(p): p for p in named}
        else:
            program, by_name = parse_prism_file(model.path), {}
        if given:
            program, _ = stormpy.instantiate_constants(program, _constant_values(program, given))
    except (RuntimeError, OSError) as exc:
        raise ModelError(
            f"{model.shown}: cannot read the model file again to build it (was it changed or removed "
            f"since it was loaded?): {storm_message(exc)}"
        ) from None
    if not properties:
        return program, None
    fresh = []
    for p in properties:
        if not isinstance(p, Property):
            raise ModelError("build_explicit: give properties as rlverify Property objects (parse_property)")
        if model.kind == "jani" and p.name is not None and p.name in by_name:
            fresh.append(by_name[p.name])
        else:
            fresh.append(stormpy.parse_properties(p.text, program)[0])
    return program, fresh


def _build(
    model: SymbolicModel,
    properties: list[Any] | None,
    max_states: int | None,
    mask: Any,
    origins: bool,
    keep_storm: bool = True,
    budget: tuple[int | None, dict[str, int] | None] = (None, None),
) -> tuple[ExplicitModel, Any]:
    import tempfile

    import stormpy
    import stormpy.developer as dev

    from rlverify.models.explicit import export_umb, memory_guard, read_umb

    program, storm_properties = _build_input(model, properties)
    explore = dev.ExplicitModelBuilderOptions[float]()
    if max_states is not None:
        explore.exploration_state_limit = int(max_states) + 1

    def options(checked: bool) -> Any:
        opts = stormpy.BuilderOptions(storm_properties) if storm_properties else stormpy.BuilderOptions()
        # what the arrays need; choice origins (costly) only where commands must be named
        opts.set_build_state_valuations()
        opts.set_build_choice_labels()
        opts.set_build_all_labels()
        opts.set_build_all_reward_models()
        if origins:
            opts.set_build_choice_origins()
        if checked:
            opts.set_exploration_checks(True)
        elif not _defines_label(model, OUT_OF_BOUNDS):  # out-of-range updates to a labelled state, refused once built
            opts.set_add_out_of_bounds_state()
        return opts

    # Storm's exploration checks refuse every update that leaves its variable's range (without them Storm wraps the
    # value into the variable's bits); they also refuse distributions that sum to 1 only up to rounding (0.1 + 0.2 +
    # 0.7, in Avoid, Freeway and the PPDDL models), and those are built again unchecked and range-checked here.
    checked = True
    with storm_log_off():  # a refused attempt is reported by rlverify (or retried), not logged by Storm
        try:
            description = dev.SymbolicModelDescription(program)
            builder = dev.make_explicit_model_builder[float](description, options(True), mask, explore)
            storm_model = builder.build()
        except RuntimeError as exc:
            message = storm_message(exc)
            if "out-of-bounds value" in message:
                raise ModelError(
                    f"{model.shown}: {message.rstrip('.')} (PRISM, JANI and Storm's checks refuse this; rlverify "
                    "does not wrap the value around): guard the update or widen the range"
                ) from None
            if "ExprTk" in message:  # a deep expression the nesting check let through (a label, reward, state formula)
                cause = message.rsplit("Returned error:", 1)[-1].strip(" ).")[:160]
                raise ModelError(
                    f"{model.shown}: an expression of {'the properties or ' if properties else ''}the model's labels "
                    f"or rewards is too deep for Storm's ExprTk evaluator ({cause}); split it"
                ) from None
            if "sum to one" not in message and "some to one" not in message:
                raise ModelError(f"{model.shown}: Storm could not build the model: {storm_message(exc, limit=600)}") from None
            checked = False
            program, storm_properties = _build_input(model, properties)
            try:
                builder = dev.make_explicit_model_builder[float](
                    dev.SymbolicModelDescription(program), options(False), mask, explore
                )
                storm_model = builder.build()
            except RuntimeError as exc2:
                raise ModelError(f"{model.shown}: Storm could not build the model: {storm_message(exc2, limit=600)}") from None
    if max_states is not None and storm_model.nr_states > max_states:
        smaller = (
            ", or (verify, PRISM models) use --strategy merged or onthefly with a policy to explore only policy-reachable "
            "states"
            if model.kind == "prism"
            else ""
        )
        raise ModelTooLargeError(
            f"{model.shown}: the model has more than --max-states={max_states} states "
            f"(exploration stopped at {storm_model.nr_states}); raise --max-states{smaller}"
        )
    del builder
    counts = {"states": storm_model.nr_states, "transitions": storm_model.nr_transitions, "what": "MDP transitions"}
    memory_guard(budget[0], "export", **counts, estimates=budget[1])
    with tempfile.TemporaryDirectory(prefix="rlverify-") as tmp:
        path = Path(tmp) / "model.umb"
        export_umb(storm_model, path)
        if not (keep_storm or origins):
            del storm_model  # Storm's copy goes before the arrays are read (stormpy frees it here)
            memory_guard(budget[0], "read", **counts, estimates=budget[1])
            explicit = _distributions_checked(read_umb(path), model.path, model)
            return (explicit if checked else _ranges_checked(explicit, model, storm_properties)), None
        explicit = _distributions_checked(read_umb(path), model.path, model)
    if not checked:
        explicit = _ranges_checked(explicit, model, storm_properties)
    if origins:
        labels = np.asarray(explicit.action_names, dtype=object)[explicit.choice_actions]
        ids, names = choice_commands(storm_model, model.commands, model.command_keys, labels)
        explicit = replace(explicit, choice_commands=ids, command_names=names)
    return explicit, (storm_model if keep_storm else None)
