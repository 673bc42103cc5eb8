"""A PRISM program's semantics on batches of states, in numpy: the successors of many states at once.

Storm parses the program (constants and formulas substituted); this module compiles its guards,
probabilities and assignments into numpy functions over ``(N,)`` arrays of variable values and
enumerates the choices of a batch of states as PRISM defines them: an unlabelled command is a choice
of its own; commands sharing a label synchronise, one command of every module whose alphabet has the
label, guards conjoined, probabilities multiplied, each module assigning its own variables from the
old state. Every choice is named by its commands (``m:2+n:1``, :mod:`rlverify.models.commands`).

A state is a key: the mixed-radix number of its variables' offsets from their lower bounds
(``int64``, so the product of the domains must stay below 2**62). Used by the exact engine's
``merged`` strategy (:mod:`rlverify.exact.merged`), which builds a policy's chain without building
the MDP; everything here is cross-checked against Storm's builder in tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlverify.errors import ModelError

Env = dict[str, np.ndarray]
Fn = Callable[[Env], Any]

#: largest product of the variables' domains a key can hold
MAX_DOMAIN = 2**62
#: most command combinations one label may synchronise (each is a choice evaluated on every state)
MAX_COMBINATIONS = 1 << 16
#: largest domain searched for the states of an ``init ... endinit`` block
MAX_INIT_DOMAIN = 1 << 22


class Unsupported(Exception):
    """The program uses something this module does not evaluate (the caller lets Storm build it instead)."""


@dataclass(frozen=True)
class Var:
    """A state variable: name, inclusive bounds (booleans 0..1), whether boolean, and its key radix."""

    name: str
    lo: int
    hi: int
    is_bool: bool
    radix: int


@dataclass(frozen=True)
class Update:
    """One branch of a command: probability and assignments ``(variable index, value function)``."""

    probability: Fn
    assignments: tuple[tuple[int, Fn], ...]


@dataclass(frozen=True)
class Part:
    """One module's command inside a choice."""

    name: str
    guard: Fn
    updates: tuple[Update, ...]


@dataclass(frozen=True)
class Choice:
    """A choice of the program: its label (``""``: unlabelled), command name and the module commands it runs."""

    action: str
    name: str
    parts: tuple[Part, ...]


def compile_expression(expr: Any, variables: dict[str, Var]) -> Fn:
    """A numpy function of a Storm expression: env (variable name -> ``(N,)`` int64) -> array or scalar.

    Integer arithmetic stays int64; ``/`` is real division (as Storm evaluates probabilities and
    ``floor``/``ceil`` arguments); ``%`` truncates (C++, as Storm; PRISM's ``mod`` arrives rewritten).
    """
    import stormpy

    op_type = stormpy.expressions.OperatorType
    if expr.is_literal():
        if expr.has_boolean_type():
            value: Any = bool(expr.evaluate_as_bool())
        elif expr.has_integer_type():
            value = int(expr.evaluate_as_int())
        else:
            value = float(expr.evaluate_as_double())
        return lambda env: value
    if expr.is_variable():
        name = expr.get_identifier()
        var = variables.get(name)
        if var is None:
            raise Unsupported(f"unknown identifier '{name}'")
        if var.is_bool:
            return lambda env: env[name] != 0
        return lambda env: env[name]
    try:
        op = expr.operator
    except Exception:  # e.g. a user-defined function: no operator
        raise Unsupported(f"expression '{expr}'") from None
    args = [compile_expression(expr.get_operand(i), variables) for i in range(expr.arity)]
    integer = expr.has_integer_type()
    if op == op_type.MINUS and len(args) == 1:
        (a,) = args
        return lambda env: -a(env)
    if op == op_type.NOT:
        (a,) = args
        return lambda env: np.logical_not(a(env))
    if op == op_type.ITE:
        c, a, b = args
        return lambda env: np.where(c(env), a(env), b(env))
    if op in (op_type.FLOOR, op_type.CEIL):
        (a,) = args
        rounding = np.floor if op == op_type.FLOOR else np.ceil
        return lambda env: np.asarray(rounding(a(env))).astype(np.int64)
    binary: dict[Any, Callable[[Any, Any], Any]] = {
        op_type.AND: np.logical_and,
        op_type.OR: np.logical_or,
        op_type.XOR: np.logical_xor,
        op_type.IMPLIES: lambda x, y: np.logical_or(np.logical_not(x), y),
        op_type.IFF: np.equal,
        op_type.PLUS: np.add,
        op_type.MINUS: np.subtract,
        op_type.TIMES: np.multiply,
        op_type.DIVIDE: lambda x, y: np.true_divide(x, y),
        op_type.MIN: np.minimum,
        op_type.MAX: np.maximum,
        op_type.MODULO: np.fmod,
        # Storm evaluates pow in double (std::pow) and truncates an integer result; negative exponents are fine
        op_type.POWER: (lambda x, y: np.trunc(np.power(np.asarray(x, dtype=np.float64), y)).astype(np.int64))
        if integer
        else (lambda x, y: np.power(np.asarray(x, dtype=np.float64), y)),
        op_type.EQUAL: np.equal,
        op_type.NOT_EQUAL: np.not_equal,
        op_type.LESS: np.less,
        op_type.LESS_OR_EQUAL: np.less_equal,
        op_type.GREATER: np.greater,
        op_type.GREATER_OR_EQUAL: np.greater_equal,
    }
    f = binary.get(op)
    if f is None or len(args) != 2:
        raise Unsupported(f"operator {op} in '{expr}'")
    a, b = args
    return lambda env: f(a(env), b(env))


class CompiledProgram:
    """A PRISM MDP's variables, choices and labels as numpy functions (see the module docstring).

    Raises :class:`Unsupported` for what it does not evaluate: a model type other than MDP, an
    ``init ... endinit`` block over more than :data:`MAX_INIT_DOMAIN` valuations, variable bounds that are
    not constants, two modules writing one variable, a domain product above :data:`MAX_DOMAIN`.
    """

    def __init__(self, program: Any, path: str = "model") -> None:
        self.path = path
        if str(program.model_type).rsplit(".", 1)[-1].lower() != "mdp":
            raise Unsupported("the model is not an MDP")
        init_block = bool(program.has_initial_states_expression)
        program = program.substitute_constants().substitute_formulas()
        self.program = program
        declared = [(v, False) for v in program.global_integer_variables] + [
            (v, True) for v in program.global_boolean_variables
        ]
        for m in program.modules:
            declared += [(v, False) for v in m.integer_variables] + [(v, True) for v in m.boolean_variables]
        vars_: list[Var] = []
        radix = 1
        initial: list[int] = []
        for v, is_bool in declared:
            if not is_bool and not all(
                str(e) != "__storm::notinitialized__" for e in (v.lower_bound_expression, v.upper_bound_expression)
            ):
                raise Unsupported(f"variable '{v.name}' is an unbounded int")
            try:
                lo, hi = (
                    (0, 1)
                    if is_bool
                    else (int(v.lower_bound_expression.evaluate_as_int()), int(v.upper_bound_expression.evaluate_as_int()))
                )
                init = 0
                if not init_block:
                    init_expr = v.initial_value_expression
                    if str(init_expr) == "__storm::notinitialized__":
                        raise Unsupported(f"variable '{v.name}' has no initial value")
                    init = int(init_expr.evaluate_as_bool()) if is_bool else int(init_expr.evaluate_as_int())
            except Exception as exc:  # a bound or initial value that is not a constant
                raise Unsupported(f"variable '{v.name}': {exc}") from None
            vars_.append(Var(v.name, lo, hi, is_bool, radix))
            initial.append(init)
            radix *= hi - lo + 1
            if radix > MAX_DOMAIN:
                raise Unsupported("the variables' domains multiply beyond 2**62")
        self.variables = tuple(vars_)
        self._storm_variables = {v.name: v.expression_variable.get_expression() for v, _ in declared}
        self.domain = radix
        self.by_name = {v.name: v for v in vars_}
        self.index = {v.name: i for i, v in enumerate(vars_)}
        if init_block:  # the valuations satisfying the init expression, found over the whole domain
            if radix > MAX_INIT_DOMAIN:
                raise Unsupported(f"an init ... endinit block over more than {MAX_INIT_DOMAIN:,} valuations")
            every = self.values(np.arange(radix, dtype=np.int64))
            where = compile_expression(program.initial_states_expression, self.by_name)
            self.initial = every[self.evaluate(where, self.env(every), radix)]
        else:
            for v, init in zip(vars_, initial, strict=True):
                if not v.lo <= init <= v.hi:
                    raise ModelError(f"{path}: the initial value {init} of variable '{v.name}' is outside [{v.lo}..{v.hi}]")
            self.initial = np.asarray([initial], dtype=np.int64)
        self.choices = self._choices()
        self.label_functions = {
            lab.name: compile_expression(program.get_label_expression(lab.name), self.by_name) for lab in program.labels
        }

    def _part(self, module: Any, k: int, command: Any) -> Part:
        updates = []
        for u in command.updates:
            assigns = []
            for a in u.assignments:
                name = a.variable.name
                if name not in self.index:
                    raise Unsupported(f"assignment to unknown variable '{name}'")
                assigns.append((self.index[name], compile_expression(a.expression, self.by_name)))
            updates.append(Update(compile_expression(u.probability_expression, self.by_name), tuple(assigns)))
        return Part(f"{module.name}:{k + 1}", compile_expression(command.guard_expression, self.by_name), tuple(updates))

    def _choices(self) -> tuple[Choice, ...]:
        program = self.program
        choices: list[Choice] = []
        labelled: dict[str, list[list[Part]]] = {}
        order: list[str] = []
        for module in program.modules:
            per_label: dict[str, list[Part]] = {}
            for k, c in enumerate(module.commands):
                part = self._part(module, k, c)
                if c.is_labeled:
                    per_label.setdefault(c.action_name, []).append(part)
                else:
                    choices.append(Choice("", part.name, (part,)))
            for label, parts in per_label.items():
                if label not in labelled:
                    labelled[label] = []
                    order.append(label)
                labelled[label].append(parts)
        for label in sorted(order, key=lambda a: program_action_index(program, a)):
            combos = int(np.prod([len(parts) for parts in labelled[label]]))
            if combos > MAX_COMBINATIONS:  # each is evaluated on every state: Storm finds the enabled ones per state
                raise Unsupported(f"label '{label}' synchronises {combos:,} command combinations")
            for combo in itertools.product(*labelled[label]):
                written = [{i for u in p.updates for i, _ in u.assignments} for p in combo]
                if len(combo) > 1 and any(written[i] & written[j] for i in range(len(combo)) for j in range(i)):
                    raise Unsupported(f"commands {'+'.join(p.name for p in combo)} write one variable twice")
                choices.append(Choice(label, "+".join(p.name for p in combo), tuple(combo)))
        return tuple(choices)

    def parse(self, text: str) -> Fn:
        """A numpy function of an expression over the program's variables, given as text (Storm's syntax)."""
        import stormpy

        parser = stormpy.expressions.ExpressionParser(self.program.expression_manager)
        parser.set_identifier_mapping(self._storm_variables)
        try:
            expr = parser.parse_from_string(text, False)
        except Exception as exc:  # Storm's parse error
            raise Unsupported(f"expression '{text}': {exc}") from None
        return compile_expression(expr, self.by_name)

    # -- states as keys ---------------------------------------------------------------------
    def keys(self, values: np.ndarray) -> np.ndarray:
        """``(N,)`` int64 keys of ``values`` ``(N, V)`` (columns in :attr:`variables` order)."""
        out = np.zeros(len(values), dtype=np.int64)
        for i, v in enumerate(self.variables):
            out += (values[:, i] - v.lo) * v.radix
        return out

    def values(self, keys: np.ndarray) -> np.ndarray:
        """``(N, V)`` int64 variable values of ``keys`` ``(N,)``."""
        out = np.empty((len(keys), len(self.variables)), dtype=np.int64)
        for i, v in enumerate(self.variables):
            out[:, i] = (keys // v.radix) % (v.hi - v.lo + 1) + v.lo
        return out

    def env(self, values: np.ndarray) -> Env:
        return {v.name: values[:, i] for i, v in enumerate(self.variables)}

    def evaluate(self, fn: Fn, env: Env, n: int, dtype: Any = bool) -> np.ndarray:
        """``fn`` on ``env`` as an ``(n,)`` array (a constant broadcast). Both branches of an ``ITE`` are evaluated
        for every state, so a division by zero in the branch not taken must stay silent."""
        with np.errstate(all="ignore"):
            out = np.asarray(fn(env))
        return np.broadcast_to(out, (n,)).astype(dtype, copy=False) if out.ndim == 0 else out.astype(dtype, copy=False)

    def enabled(self, env: Env, n: int) -> np.ndarray:
        """``(n, J)`` bool: states where choice ``j``'s guards all hold (each command's guard evaluated once)."""
        guards: dict[int, np.ndarray] = {}
        out = np.ones((n, len(self.choices)), dtype=bool)
        for j, choice in enumerate(self.choices):
            for part in choice.parts:
                g = guards.get(id(part))
                if g is None:
                    g = guards[id(part)] = self.evaluate(part.guard, env, n)
                out[:, j] &= g
        return out

    def successors(self, choice: Choice, values: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Branches of ``choice`` from states ``values`` ``(N, V)`` with ``keys`` ``(N,)`` (all enabled).

        Returns ``(N, U)`` int64 successor keys and ``(N, U)`` float64 probabilities, ``U`` the product of
        the parts' update counts (branches to one successor are not merged here).

        Raises:
            ModelError: an assignment outside a variable's bounds, or a command whose probabilities do not
                sum to 1 (the command and the state named, as Storm would refuse to build it).
        """
        n = len(keys)
        env = self.env(values)
        out_keys = keys[:, None]
        out_probs = np.ones((n, 1))
        for part in choice.parts:
            deltas = np.zeros((n, len(part.updates)), dtype=np.int64)
            probs = np.empty((n, len(part.updates)))
            for j, u in enumerate(part.updates):
                probs[:, j] = self.evaluate(u.probability, env, n, np.float64)
                live = probs[:, j] > 0  # Storm skips updates of probability 0 (their targets are never checked)
                if (probs[:, j] < 0).any():
                    s = int(np.argmax(probs[:, j] < 0))
                    raise ModelError(
                        f"{self.path}: command {part.name} has a negative probability {probs[s, j]:.6g} "
                        f"(update {j + 1}) in state {self.describe(values[s])}"
                    )
                for i, fn in u.assignments:
                    v = self.variables[i]
                    with np.errstate(all="ignore"):
                        new = np.asarray(fn(env))
                    if new.dtype.kind == "f":
                        if not np.all((new == np.floor(new)) | ~live):
                            raise Unsupported(f"a non-integer value assigned to '{v.name}' in {part.name}")
                        new = new.astype(np.int64)
                    new = np.broadcast_to(new.astype(np.int64, copy=False), (n,))
                    bad = ((new < v.lo) | (new > v.hi)) & live
                    if bad.any():
                        s = int(np.argmax(bad))
                        raise ModelError(
                            f"{self.path}: command {part.name} assigns {v.name}={int(new[s])} outside its range "
                            f"[{v.lo}..{v.hi}] in state {self.describe(values[s])}"
                        )
                    deltas[:, j] += (new - values[:, i]) * v.radix
            total = probs.sum(axis=1)
            if np.abs(total - 1.0).max(initial=0.0) > 1e-6:
                s = int(np.argmax(np.abs(total - 1.0)))
                raise ModelError(
                    f"{self.path}: the probabilities of command {part.name} sum to {float(total[s]):.6g}, not 1, "
                    f"in state {self.describe(values[s])}"
                )
            out_keys = (out_keys[:, :, None] + deltas[:, None, :]).reshape(n, -1)
            out_probs = (out_probs[:, :, None] * probs[:, None, :]).reshape(n, -1)
        return out_keys, out_probs

    def describe(self, row: np.ndarray) -> dict[str, int]:
        return {v.name: int(x) for v, x in zip(self.variables, row, strict=True)}


def program_action_index(program: Any, label: str) -> int:
    """Storm's index of an action label (its order of synchronising choices)."""
    for m in program.modules:
        for c in m.commands:
            if c.is_labeled and c.action_name == label:
                return int(c.action_index)
    return 1 << 30


def terminal_functions(formula: Any, label_fn: Callable[[str], Any], variables: dict[str, Any]) -> list[tuple[Any, bool]]:
    """Storm's property-directed terminal states: ``(function, value)`` pairs, a state is terminal when one
    function takes its value there (the rules of Storm's ``getTerminalStatesFromFormula``)."""
    import stormpy

    L = stormpy.logic
    out: list[tuple[Any, bool]] = []

    def atom(f: Any, value: bool) -> None:
        if isinstance(f, L.AtomicExpressionFormula):
            out.append((compile_expression(f.get_expression(), variables), value))
        elif isinstance(f, L.AtomicLabelFormula) and label_fn(f.label) is not None:
            out.append((label_fn(f.label), value))

    def is_atom(f: Any) -> bool:
        return isinstance(f, (L.AtomicExpressionFormula, L.AtomicLabelFormula))

    def path(f: Any) -> None:
        if isinstance(f, L.EventuallyFormula):
            if is_atom(f.subformula):
                atom(f.subformula, True)
        elif isinstance(f, L.BoundedUntilFormula):
            if not positive_lower_bound(f) and is_atom(f.right_subformula):
                atom(f.right_subformula, True)
            atom(f.left_subformula, False)
        elif isinstance(f, L.UntilFormula):
            if is_atom(f.right_subformula):
                atom(f.right_subformula, True)
            atom(f.left_subformula, False)

    def simple(f: Any) -> bool:
        return is_atom(f) or isinstance(f, L.BooleanLiteralFormula)

    if isinstance(formula, L.ProbabilityOperatorFormula):
        sub = formula.subformula
        # only where every operand is an atom or a literal: for nested path formulas Storm's builder keeps
        # exploring (measured: Freeway's P=? [(true U px24=0) U px17=0]), and exploring more never changes a value
        operands = [getattr(sub, a) for a in ("subformula", "left_subformula", "right_subformula") if hasattr(sub, a)]
        if isinstance(sub, (L.EventuallyFormula, L.UntilFormula, L.BoundedUntilFormula)) and all(map(simple, operands)):
            path(sub)
    return out


def positive_lower_bound(f: Any) -> bool:
    """Whether a bounded until has a lower step bound other than a non-strict 0 (``U[0,k]``, ``U>=0`` count as none,
    as in Storm; stormpy exposes only the upper bound, so the lower one is read from the formula's text)."""
    if not f.has_lower_bound:
        return False
    import re

    m = re.search(r"U\[\s*([^,\]]+?)\s*,", str(f)) or re.search(r"U>=\s*([^\s(]+)", str(f))
    try:
        return m is None or float(m.group(1)) != 0.0
    except ValueError:  # a constant's name: not known to be 0
        return True


def check_update_ranges(
    program: CompiledProgram,
    variables: tuple[str, ...],
    valuations: np.ndarray,
    terminal: list[tuple[Any, bool]],
    *,
    batch: int = 1 << 14,
) -> None:
    """Refuse (``ModelError`` naming the command, the variable, the value and the state) an update of any command
    enabled in one of the states ``valuations`` ``(S, len(variables))`` (columns named ``variables``, as Storm keeps
    them: variables it dropped take their constant initial value) that leaves its variable's range. States where a
    ``terminal`` function (:func:`terminal_functions`) takes its value are not expanded (Storm's rule).

    Raises:
        Unsupported: a variable of the program missing from ``variables`` without one initial value.
    """
    columns = []
    for i, v in enumerate(program.variables):
        if v.name in variables:
            columns.append(("column", variables.index(v.name)))
        elif len(program.initial) == 1:
            columns.append(("constant", int(program.initial[0][i])))
        else:
            raise Unsupported(f"variable '{v.name}' is not in the built states and has several initial values")
    for lo in range(0, len(valuations), batch):
        part = valuations[lo : lo + batch]
        n = len(part)
        vals = np.empty((n, len(program.variables)), dtype=np.int64)
        for i, (kind, x) in enumerate(columns):
            vals[:, i] = part[:, x] if kind == "column" else x
        inside = np.ones(n, dtype=bool)
        for i, v in enumerate(program.variables):  # a value Storm could not store in range: checked by the caller
            inside &= (vals[:, i] >= v.lo) & (vals[:, i] <= v.hi)
        vals = vals[inside]
        n = len(vals)
        env = program.env(vals)
        stop = np.zeros(n, dtype=bool)
        for fn, value in terminal:
            stop |= program.evaluate(fn, env, n) == value
        enabled = program.enabled(env, n) & ~stop[:, None]
        keys = program.keys(vals)
        for j, choice in enumerate(program.choices):
            rows = np.flatnonzero(enabled[:, j])
            if len(rows):
                program.successors(choice, vals[rows], keys[rows])
