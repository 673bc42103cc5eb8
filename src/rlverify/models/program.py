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

Cost follows the enabled choices, as in Storm's builder: each command's guard is evaluated once per batch
of states (:meth:`CompiledProgram.enabled`), and a label's choices are formed only from the commands each state
enables, in Storm's order (unlabelled commands in module order, then the labels by Storm's action index, each
label's combinations in :func:`itertools.product` order: the choice's index among all combinations names it).
Each command's updates are evaluated once per batch on the states where a choice runs it, and a synchronised
choice's branches combine its commands' by broadcasting (:meth:`CompiledProgram.branches`). Guards, updates and
expressions reading few variables are looked up in tables over those variables' values, built on first use.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlverify.arrays import distinct
from rlverify.errors import ModelError

Env = dict[str, np.ndarray]
Fn = Callable[[Env], Any]

#: largest product of the variables' domains a key can hold
MAX_DOMAIN = 2**62
#: most combinations of enabled commands one label may form in one state (each is a choice of that state)
MAX_ENABLED = 1 << 16
#: most choices a program may have in all (choice indices are int64; only enabled combinations are ever formed)
MAX_CHOICES = 1 << 62
#: largest domain searched for the states of an ``init ... endinit`` block
MAX_INIT_DOMAIN = 1 << 22
#: largest domain of the variables an expression or a command's updates read for them to be looked up in a table
#: (built on first use); a command's updates over a larger domain (up to :data:`MAX_TABLE_DOMAIN`) get one once they
#: have been evaluated often enough to pay for it (:class:`_UpdateTables`), within :data:`TABLE_ENTRIES` in all
TABLE_DOMAIN = 1 << 12
MAX_TABLE_DOMAIN = 1 << 18
TABLE_ENTRIES = 1 << 22
#: largest table of guard bits over a span of variables (:class:`_GuardSignature`; 8 bytes a row)
SPAN_DOMAIN = 1 << 12
#: largest domain of the variables a guard reads for it to be looked up in a table (every guard is evaluated in
#: every batch: all the guards' tables are built on the first)
GUARD_TABLE_DOMAIN = 1 << 14
#: branches computed at a time by :meth:`CompiledProgram.structured_branches`
BRANCH_CHUNK = 1 << 16


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
class Command:
    """One module's command: its module (position), name (``m:2``), label (``""``: unlabelled), guard and updates."""

    module: int
    name: str
    action: str
    guard: Fn
    updates: tuple[Update, ...]
    reads: tuple[int, ...] = ()  # the variables its updates read or assign (indices, ascending)
    guard_reads: tuple[int, ...] = ()  # the variables its guard reads

    @property
    def written(self) -> frozenset[int]:
        """The variables (indices) some update of the command assigns."""
        return frozenset(i for u in self.updates for i, _ in u.assignments)


@dataclass(frozen=True)
class Group:
    """The choices of one unlabelled command, or of one label, numbered ``offset`` to ``offset + count - 1``.

    ``modules`` holds, per module whose alphabet has the label (module order), its commands with the label
    (command ids, program order). Choice ``offset + r`` runs the ``r``-th combination in :func:`itertools.product`
    order: ``r`` is the mixed-radix number of the commands' positions, the first module's the most significant
    digit (``strides``). An unlabelled command is a group of one module and one command.
    """

    action: str
    modules: tuple[tuple[int, ...], ...]
    offset: int
    count: int
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Enabled:
    """The choices enabled in a batch of states, in Storm's order: by state, then program order.

    Attributes:
        state: ``(C,)`` int64, the batch row of each choice.
        kind: ``(C,)`` int64, its choice index (program order: :attr:`CompiledProgram.num_choices` of them).
        parts: ``(C, K)`` int64, the commands it runs (command ids, module order; -1 pads).
    """

    state: np.ndarray
    kind: np.ndarray
    parts: np.ndarray


@dataclass(frozen=True)
class Branches:
    """The branches of some choices, choice by choice, each choice's in :func:`itertools.product` order of its
    commands' updates (branches to one successor not merged, probability-0 updates kept).

    Attributes:
        number: ``(P,)`` int64, how many branches each choice has (its commands' numbers of updates multiplied).
        keys: ``(K,)`` int64 successor keys; probs: ``(K,)`` float64 probabilities (the product of the commands'
            update probabilities, multiplied in module order).
    """

    number: np.ndarray
    keys: np.ndarray
    probs: np.ndarray


def compile_expression(expr: Any, variables: dict[str, Var]) -> Fn:
    """A numpy function of a Storm expression: env (variable name -> ``(N,)`` int64) -> array or scalar.

    Integer arithmetic stays int64; ``/`` is real division (as Storm evaluates probabilities and
    ``floor``/``ceil`` arguments); ``%`` truncates (C++, as Storm; PRISM's ``mod`` arrives rewritten).
    """
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
    ops = _operator_names()
    name = ops.get(op, "")  # one lookup: the enum's members hash in Python
    if name == "MINUS" and len(args) == 1:
        (a,) = args
        return lambda env: -a(env)
    if name == "NOT":
        (a,) = args
        return lambda env: np.logical_not(a(env))
    if name == "ITE":
        c, a, b = args
        return lambda env: np.where(c(env), a(env), b(env))
    if name in ("FLOOR", "CEIL"):
        (a,) = args
        rounding = np.floor if name == "FLOOR" else np.ceil
        return lambda env: np.asarray(rounding(a(env))).astype(np.int64)
    if name == "POWER":  # Storm: pow in double (std::pow), an integer result truncated; negative exponents are fine
        f: Callable[[Any, Any], Any] | None = (
            (lambda x, y: np.trunc(np.power(np.asarray(x, dtype=np.float64), y)).astype(np.int64))
            if expr.has_integer_type()
            else (lambda x, y: np.power(np.asarray(x, dtype=np.float64), y))
        )
    else:
        f = _BINARY.get(name)
    if f is None or len(args) != 2:
        raise Unsupported(f"operator {op} in '{expr}'")
    a, b = args
    return lambda env: f(a(env), b(env))


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "AND": np.logical_and,
    "OR": np.logical_or,
    "XOR": np.logical_xor,
    "IMPLIES": lambda x, y: np.logical_or(np.logical_not(x), y),
    "IFF": np.equal,
    "PLUS": np.add,
    "MINUS": np.subtract,
    "TIMES": np.multiply,
    "DIVIDE": lambda x, y: np.true_divide(x, y),
    "MIN": np.minimum,
    "MAX": np.maximum,
    "MODULO": np.fmod,
    "EQUAL": np.equal,
    "NOT_EQUAL": np.not_equal,
    "LESS": np.less,
    "LESS_OR_EQUAL": np.less_equal,
    "GREATER": np.greater,
    "GREATER_OR_EQUAL": np.greater_equal,
}


@functools.cache
def _operator_names() -> dict[Any, str]:
    """Storm's operators (``stormpy.expressions.OperatorType``) -> their names."""
    import stormpy

    return {member: name for name, member in stormpy.expressions.OperatorType.__members__.items()}


class States(dict[str, np.ndarray]):
    """A batch of states as the compiled expressions read it: variable name -> ``(N,)`` int64 values, and the
    batch's row in each table over a set of variables (:class:`Tabled`), computed once per batch and set."""

    __slots__ = ("rows",)

    def __init__(self, values: dict[str, np.ndarray]) -> None:
        super().__init__(values)
        self.rows: dict[tuple[str, ...], np.ndarray] = {}


class Tabled:
    """An expression looked up in a table of its values over the few variables it reads (``(D,)``, ``D`` the product
    of their domains, at most :data:`TABLE_DOMAIN`), built on first use by evaluating it once on every combination
    of their values: a gather per batch instead of one numpy call per operator."""

    __slots__ = ("fn", "key", "los", "sizes", "strides", "table")

    def __init__(self, fn: Fn, variables: list[Var]) -> None:
        self.fn = fn
        self.key = tuple(v.name for v in variables)
        self.los = [v.lo for v in variables]
        self.sizes = [v.hi - v.lo + 1 for v in variables]
        self.strides = [math.prod(self.sizes[:i]) for i in range(len(variables))]
        self.table: np.ndarray | None = None

    def row(self, env: Env) -> np.ndarray:
        """``(N,)`` int64: each state's row in the table (cached in a :class:`States` batch)."""
        rows = getattr(env, "rows", None)
        found = None if rows is None else rows.get(self.key)
        if found is None:
            found = env[self.key[0]] - self.los[0]
            for name, lo, stride in zip(self.key[1:], self.los[1:], self.strides[1:], strict=True):
                found = found + (env[name] - lo) * stride
            if rows is not None:
                rows[self.key] = found
        return found

    def __call__(self, env: Env) -> Any:
        if self.table is None:
            size = math.prod(self.sizes)
            every = np.arange(size, dtype=np.int64)
            grid = {
                name: lo + (every // stride) % n
                for name, lo, n, stride in zip(self.key, self.los, self.sizes, self.strides, strict=True)
            }
            with np.errstate(all="ignore"):
                self.table = np.array(np.broadcast_to(np.asarray(self.fn(grid)), (size,)))
        return self.table[self.row(env)]


def _operators(expr: Any) -> int:
    """How many operators a Storm expression applies (0: a literal or a variable)."""
    if expr.is_literal() or expr.is_variable():
        return 0
    return 1 + sum(_operators(expr.get_operand(i)) for i in range(expr.arity))


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
        self._radix = np.asarray([v.radix for v in vars_], dtype=np.int64)
        self._sizes = np.asarray([v.hi - v.lo + 1 for v in vars_], dtype=np.int64)
        self._los = np.asarray([v.lo for v in vars_], dtype=np.int64)
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
        self.groups = self._groups()
        self._offsets = np.asarray([g.offset for g in self.groups], dtype=np.int64)
        #: how many choices the program has (choice indices are ``0 .. num_choices - 1``, program order)
        self.num_choices = self.groups[-1].offset + self.groups[-1].count if self.groups else 0
        self._names: dict[int, str] = {}
        self._tables = _UpdateTables(self)
        self._structure = _Choices(self)
        self._signature: _GuardSignature | None = None
        self.label_functions = {lab.name: self._compile(program.get_label_expression(lab.name)) for lab in program.labels}

    def _command(self, m: int, module: Any, k: int, command: Any) -> Command:
        updates = []
        reads: set[str] = set()
        for u in command.updates:
            assigns = []
            reads |= {v.name for v in u.probability_expression.get_variables()}
            for a in u.assignments:
                name = a.variable.name
                if name not in self.index:
                    raise Unsupported(f"assignment to unknown variable '{name}'")
                assigns.append((self.index[name], self._compile(a.expression)))
                reads |= {name} | {v.name for v in a.expression.get_variables()}
            updates.append(Update(self._compile(u.probability_expression), tuple(assigns)))
        return Command(
            m,
            f"{module.name}:{k + 1}",
            command.action_name if command.is_labeled else "",
            self._compile(command.guard_expression),
            tuple(updates),
            tuple(sorted(self.index[v] for v in reads if v in self.index)),
            tuple(sorted(self.index[v.name] for v in command.guard_expression.get_variables() if v.name in self.index)),
        )

    def _groups(self) -> tuple[Group, ...]:
        """The program's choices in Storm's order: unlabelled commands (module order), then the labels by Storm's
        action index, each label's command combinations in :func:`itertools.product` order."""
        program = self.program
        commands: list[Command] = []
        groups: list[Group] = []
        labelled: dict[str, list[tuple[int, ...]]] = {}
        offset = 0
        for m, module in enumerate(program.modules):
            per_label: dict[str, list[int]] = {}
            for k, c in enumerate(module.commands):
                cid = len(commands)
                commands.append(self._command(m, module, k, c))
                if c.is_labeled:
                    per_label.setdefault(c.action_name, []).append(cid)
                else:
                    groups.append(Group("", ((cid,),), offset, 1, (1,)))
                    offset += 1
            for label, cids in per_label.items():
                labelled.setdefault(label, []).append(tuple(cids))
        self.commands = tuple(commands)
        for label in sorted(labelled, key=lambda a: program_action_index(program, a)):
            modules = tuple(labelled[label])
            sizes = [len(cids) for cids in modules]
            strides = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
            count = math.prod(sizes)
            if offset + count > MAX_CHOICES:
                raise Unsupported(f"label '{label}' synchronises {count:,} command combinations")
            self._refuse_shared_writes(modules)
            groups.append(Group(label, modules, offset, count, tuple(strides)))
            offset += count
        return tuple(groups)

    def _refuse_shared_writes(self, modules: tuple[tuple[int, ...], ...]) -> None:
        """Refuse a label whose commands of two modules may write one variable (naming the first such combination
        in :func:`itertools.product` order; checked per pair of modules, never per combination)."""
        written = [[self.commands[c].written for c in cids] for cids in modules]

        def clash(i: int, a: int, j: int, b: int) -> bool:
            return bool(written[i][a] & written[j][b])

        def completes(prefix: list[int]) -> bool:  # some completion of the prefix has a clash
            m = len(prefix)
            if any(clash(i, prefix[i], j, prefix[j]) for j in range(m) for i in range(j)):
                return True
            later = range(m, len(modules))
            if any(clash(i, prefix[i], j, b) for i in range(m) for j in later for b in range(len(modules[j]))):
                return True
            return any(
                clash(i, a, j, b)
                for j in later
                for i in range(m, j)
                for a in range(len(modules[i]))
                for b in range(len(modules[j]))
            )

        if len(modules) < 2 or not completes([]):
            return
        prefix: list[int] = []
        for cids in modules:
            prefix.append(next(a for a in range(len(cids)) if completes([*prefix, a])))
        names = "+".join(self.commands[cids[a]].name for cids, a in zip(modules, prefix, strict=True))
        raise Unsupported(f"commands {names} write one variable twice")

    @property
    def actions(self) -> tuple[str, ...]:
        """The program's action labels in Storm's order (of its synchronising choices)."""
        return tuple(g.action for g in self.groups if g.action)

    def group_of(self, kind: np.ndarray) -> np.ndarray:
        """``(C,)`` int64: the group (position in :attr:`groups`) of each choice index in ``kind``."""
        return np.searchsorted(self._offsets, kind, side="right") - 1

    def choice_parts(self, kind: int) -> tuple[int, ...]:
        """The commands (ids) choice ``kind`` runs, in module order."""
        g = self.groups[int(self.group_of(np.asarray([kind]))[0])]
        r = kind - g.offset
        return tuple(cids[(r // stride) % len(cids)] for cids, stride in zip(g.modules, g.strides, strict=True))

    def choice_name(self, kind: int) -> str:
        """Choice ``kind``'s command name (``m:2+n:1``, :mod:`rlverify.models.commands`)."""
        name = self._names.get(kind)
        if name is None:
            name = self._names[kind] = "+".join(self.commands[c].name for c in self.choice_parts(kind))
        return name

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

    def _compile(self, expr: Any) -> Fn:
        """:func:`compile_expression`, looked up in a table (:class:`Tabled`) where it applies two operators or more
        to variables whose domains multiply to at most :data:`TABLE_DOMAIN`."""
        fn = compile_expression(expr, self.by_name)
        variables = sorted((self.by_name[v.name] for v in expr.get_variables()), key=lambda v: self.index[v.name])
        if not variables or _operators(expr) < 2:
            return fn
        if math.prod(v.hi - v.lo + 1 for v in variables) > TABLE_DOMAIN:
            return fn
        return Tabled(fn, variables)

    # -- states as keys ---------------------------------------------------------------------
    def keys(self, values: np.ndarray) -> np.ndarray:
        """``(N,)`` int64 keys of ``values`` ``(N, V)`` (columns in :attr:`variables` order)."""
        out = np.zeros(len(values), dtype=np.int64)
        for i, v in enumerate(self.variables):
            out += (values[:, i] - v.lo) * v.radix
        return out

    def values(self, keys: np.ndarray) -> np.ndarray:
        """``(N, V)`` int64 variable values of ``keys`` ``(N,)``."""
        if not self.variables:
            return np.empty((len(keys), 0), dtype=np.int64)
        out = keys[:, None] // self._radix
        out %= self._sizes
        out += self._los
        return out

    def env(self, values: np.ndarray) -> States:
        """The states ``values`` ``(N, V)`` as the compiled expressions read them."""
        return States({v.name: values[:, i] for i, v in enumerate(self.variables)})

    def evaluate(self, fn: Fn, env: Env, n: int, dtype: Any = bool) -> np.ndarray:
        """``fn`` on ``env`` as an ``(n,)`` array (a constant broadcast). Both branches of an ``ITE`` are evaluated
        for every state, so a division by zero in the branch not taken must stay silent."""
        with np.errstate(all="ignore"):
            out = np.asarray(fn(env))
        return np.broadcast_to(out, (n,)).astype(dtype, copy=False) if out.ndim == 0 else out.astype(dtype, copy=False)

    def enabled(self, values: np.ndarray, env: Env | None = None) -> Enabled:
        """The choices enabled in the states ``values`` ``(n, V)`` (``env``: the same as :meth:`env` gives), in
        Storm's order. Each command's guard is evaluated once (looked up in a table over the variables it reads where
        they are few); a label's choices are only the combinations of its commands enabled in a state.

        Raises:
            Unsupported: a label with more than :data:`MAX_ENABLED` enabled combinations in one state.
        """
        return self._structure.enabled(values, self.env(values) if env is None else env)

    def guard_signature(self, values: np.ndarray, env: Env, keys: np.ndarray) -> np.ndarray:
        """``(n, W)`` uint64: bit ``i % 63`` of word ``i // 63`` set where command ``i``'s guard holds in the states
        ``values`` (``env``: :meth:`env`'s; ``keys``: :meth:`keys`'); bit 63 of every word is clear. States with one
        signature enable the same choices (:meth:`enabled` depends on the states only through their guards)."""
        return self._guard_tables()(values, env, keys)

    def _guard_tables(self) -> _GuardSignature:
        if self._signature is None:
            self._signature = _GuardSignature(self)
        return self._signature

    def guards(self, values: np.ndarray, env: Env) -> np.ndarray:
        """``(len(commands), n)`` bool: each command's guard in the ``n`` states ``values`` (``env``: :meth:`env`'s),
        commands in a fixed order (by group, then module, then program order). States with equal columns enable the
        same choices: :meth:`enabled` depends on the states only through this matrix.

        Read from :meth:`guard_signature`'s tables where they hold every guard (one table per span of variables, not
        one per command: the guards are evaluated once, for both), else from per-command tables."""
        tables = self._guard_tables()
        if not tables.direct:
            return tables.guards(values, env, self.keys(values))
        return self._structure.guards(values, env)

    def branches(self, parts: np.ndarray, rows: np.ndarray, values: np.ndarray, keys: np.ndarray) -> Branches:
        """The branches of the choices running commands ``parts`` ``(P, K)`` (as :attr:`Enabled.parts`) in batch
        rows ``rows`` ``(P,)`` of the states ``values`` ``(n, V)`` with ``keys`` ``(n,)``.

        Each command's updates are evaluated once per batch, on the rows where it runs; a synchronised choice's
        branches combine its commands' by broadcasting (probabilities multiplied in module order, key deltas summed).

        Raises:
            ModelError: an assignment outside a variable's bounds, a negative probability, or a command whose
                probabilities do not sum to 1 (the command and the state named, as Storm would refuse to build it;
                with several, the first state's first choice in program order).
            Unsupported: a non-integer value assigned to an integer variable.
        """
        off, shape = self._tables.locate(parts, rows, values, keys)
        P, K = shape.shape
        number = shape.prod(axis=1)
        start = np.cumsum(number) - number
        total = int(number.sum())
        probs = np.empty(total)
        succ = np.empty(total, dtype=np.int64)
        fprob, fdelta = self._tables.probs, self._tables.deltas
        base = keys[rows]
        # choices of one shape (updates per command) at once, their branches the outer product of their commands'
        # updates (the last command's fastest: the product's order), probabilities multiplied in module order
        radix = int(shape.max(initial=1)) + 1
        signature = shape @ (radix ** np.arange(K, dtype=np.int64)) if radix**K < 2**62 else None
        if signature is not None:  # most batches have one kind
            kinds = signature[:1] if len(signature) and (signature == signature[0]).all() else distinct(signature)
        else:
            kinds = np.unique(shape, axis=0)
        for kind in kinds:
            if signature is not None:
                sel = np.arange(P) if len(kinds) == 1 else np.flatnonzero(signature == kind)
                sig = shape[sel[0]]
            else:
                sel = np.flatnonzero((shape == kind).all(axis=1))
                sig = kind
            p, d = fprob[off[sel, 0, None] + np.arange(sig[0])], fdelta[off[sel, 0, None] + np.arange(sig[0])]
            for i in range(1, K):
                if sig[i] == 1 and not off[sel, i].any():  # padding: probability 1, no change
                    continue
                at = off[sel, i, None] + np.arange(sig[i])
                p = (p[:, :, None] * fprob[at][:, None, :]).reshape(len(sel), -1)
                d = (d[:, :, None] + fdelta[at][:, None, :]).reshape(len(sel), -1)
            d += base[sel, None]
            if len(sel) == P:
                probs, succ = p.reshape(-1), d.reshape(-1)
            else:
                where = start[sel, None] + np.arange(p.shape[1])
                probs[where] = p
                succ[where] = d
        return Branches(number, succ, probs)

    def branch_structure(self, parts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What :meth:`branches` computes of choices ``parts`` ``(P, K)`` without their states: ``(P,)`` int64 number
        of branches of each choice, and ``(NB, K)`` int64 the update each of its commands takes in each branch (the
        product's order, the last command fastest; padding: 0), choice after choice."""
        size = self._tables.size[np.where(parts >= 0, parts, len(self.commands))]
        number = size.prod(axis=1)
        owner = np.repeat(np.arange(len(parts)), number)
        rank = np.arange(len(owner)) - np.repeat(np.cumsum(number) - number, number)  # branch within its choice
        update = np.empty((len(owner), parts.shape[1]), dtype=np.int16 if len(owner) and size.max() <= 1 << 15 else np.int64)
        for k in reversed(range(parts.shape[1])):  # mixed radix over the updates, the last command fastest
            update[:, k] = rank % size[owner, k]
            rank //= size[owner, k]
        return number, update

    def structured_branches(
        self, parts: np.ndarray, rows: np.ndarray, values: np.ndarray, keys: np.ndarray, number: np.ndarray, update: np.ndarray
    ) -> Branches:
        """:meth:`branches` of choices ``parts`` in rows ``rows`` given their :meth:`branch_structure` (``number``,
        ``update``): the same arrays, bit for bit, in fewer numpy calls where every command of ``parts`` has a built
        table read from the key; otherwise (or where an update fails its checks) :meth:`branches` itself."""
        tables = self._tables
        real = parts >= 0
        cmd = np.where(real, parts, len(self.commands))
        if not tables.keyed[cmd].all():
            tables.build(cmd)  # the tables these commands have and have not built yet
            if not tables.keyed[cmd].all():
                return self.branches(parts, rows, values, keys)
        base = keys[rows]
        sub = base[:, None] // tables.layout.key_radix[cmd]
        sub %= tables.layout.key_size[cmd]
        if tables.bad[tables.bad_base[cmd[real]] + sub[real]].any():
            return self.branches(parts, rows, values, keys)  # raises, naming the first failing update
        off = np.where(real, tables.base[cmd] + sub * tables.size[cmd], 0)  # padding: entry 0 (probability 1, no change)
        owner = np.repeat(np.arange(len(parts)), number)
        probs, succ = np.empty(len(owner)), np.empty(len(owner), dtype=np.int64)
        # the commands after the first that some choice runs (padding multiplies by 1 and adds 0: skipped where all pad)
        later = [k for k in range(1, parts.shape[1]) if real[:, k].any()]
        for a in range(0, len(owner), BRANCH_CHUNK):  # bounds the temporaries (a few arrays of a chunk)
            mine, u = owner[a : a + BRANCH_CHUNK], update[a : a + BRANCH_CHUNK]
            at = off[mine, 0] + u[:, 0]
            p, d = tables.probs[at], tables.deltas[at]
            for k in later:  # probabilities multiplied in module order, as branches does
                at = off[mine, k]
                at += u[:, k]
                p *= tables.probs[at]
                d += tables.deltas[at]
            d += base[mine]
            probs[a : a + len(mine)], succ[a : a + len(mine)] = p, d
        return Branches(number, succ, probs)

    def raise_first(self, s: int, parts: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
        """Raise the error of the first command (choices in program order, commands in module order) failing in row
        ``s`` (its checks in Storm's order: each update's probability, then its assignments; then the sum)."""
        vals = values[[s]]
        for p in np.flatnonzero(rows == s):
            for c in parts[p]:
                if c >= 0:
                    self.command_updates(self.commands[int(c)], vals, explain=True)
        raise AssertionError(f"internal: a failing update in state {self.describe(vals[0])} was not found again")

    def command_updates(
        self, command: Command, vals: np.ndarray, explain: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``command``'s updates in states ``vals`` ``(m, V)``: ``(m, U)`` probabilities, ``(m, U)`` int64 key deltas,
        and ``(m,)`` bool where a check fails (``explain``: raise for the first failing check of the first row)."""
        m, U = len(vals), len(command.updates)
        env = self.env(vals)
        probs = np.empty((m, U))
        deltas = np.zeros((m, U), dtype=np.int64)
        bad = np.zeros(m, dtype=bool)

        def fail(mask: np.ndarray, error: Callable[[int], Exception]) -> None:
            nonlocal bad
            if explain and mask.any():
                raise error(int(np.argmax(mask)))
            bad = bad | mask

        for j, u in enumerate(command.updates):
            p = probs[:, j] = self.evaluate(u.probability, env, m, np.float64)
            live = p > 0  # Storm skips updates of probability 0 (their targets are never checked)

            def negative(s: int, j: int = j, p: np.ndarray = p) -> Exception:
                return ModelError(
                    f"{self.path}: command {command.name} has a negative probability {p[s]:.6g} "
                    f"(update {j + 1}) in state {self.describe(vals[s])}"
                )

            fail(p < 0, negative)
            for i, fn in u.assignments:
                v = self.variables[i]
                with np.errstate(all="ignore"):
                    new = np.asarray(fn(env))
                    if new.dtype.kind == "f":

                        def fraction(s: int, v: Var = v) -> Exception:
                            return Unsupported(f"a non-integer value assigned to '{v.name}' in {command.name}")

                        fail((new != np.floor(new)) & live, fraction)
                        new = new.astype(np.int64)
                new = np.broadcast_to(new.astype(np.int64, copy=False), (m,))

                def outside(s: int, v: Var = v, new: np.ndarray = new) -> Exception:
                    return ModelError(
                        f"{self.path}: command {command.name} assigns {v.name}={int(new[s])} outside its range "
                        f"[{v.lo}..{v.hi}] in state {self.describe(vals[s])}"
                    )

                fail(((new < v.lo) | (new > v.hi)) & live, outside)
                deltas[:, j] += (new - vals[:, i]) * v.radix
        total = probs.sum(axis=1)

        def unsummed(s: int) -> Exception:
            return ModelError(
                f"{self.path}: the probabilities of command {command.name} sum to {float(total[s]):.6g}, not 1, "
                f"in state {self.describe(vals[s])}"
            )

        fail(~(np.abs(total - 1.0) <= 1e-6), unsummed)
        return probs, deltas, bad

    def check(self, values: np.ndarray) -> None:
        """Evaluate the updates of every choice enabled in the states ``values`` ``(N, V)``: raises as :meth:`branches`."""
        found = self.enabled(values)
        if len(found.state):
            self._tables.locate(found.parts, found.state, values)

    def describe(self, row: np.ndarray) -> dict[str, int]:
        return {v.name: int(x) for v, x in zip(self.variables, row, strict=True)}


class _Layout:
    """Where items (commands' guards or updates) are looked up in their tables: each reads a few variables, and a
    state's row in an item's table is the mixed-radix number of their offsets (the first variable fastest). Items
    whose variables' domains multiply beyond ``limit`` can have no table (``tabled`` False)."""

    def __init__(self, variables: tuple[Var, ...], reads: list[tuple[int, ...]], limit: int, spans: bool = False) -> None:
        self.variables = variables
        self.domains = [math.prod(variables[i].hi - variables[i].lo + 1 for i in r) for r in reads]
        # ``spans``: an item reading variables i..j and a few between reads them all (a table at most 4 times larger, or
        # within TABLE_DOMAIN): its row is then a digit range of the state's key, found in two numpy calls
        self.spanned = np.zeros(len(reads) + 1, dtype=bool)
        self.key_radix = np.ones(len(reads) + 1, dtype=np.int64)
        self.key_size = np.ones(len(reads) + 1, dtype=np.int64)
        if spans:
            reads = list(reads)
            for item, r in enumerate(reads):
                if not r:
                    self.spanned[item] = True
                    continue
                first, last = variables[min(r)], variables[max(r)]
                D = last.radix * (last.hi - last.lo + 1) // first.radix
                if D <= limit and (D <= TABLE_DOMAIN or D <= 4 * self.domains[item]):
                    reads[item] = tuple(range(min(r), max(r) + 1))
                    self.domains[item] = D
                    self.spanned[item] = True
                    self.key_radix[item], self.key_size[item] = first.radix, D
        self.reads = reads
        self.tabled = np.asarray([d <= limit for d in self.domains] + [False])
        width = max([len(r) for r, t in zip(reads, self.tabled, strict=False) if t], default=0)
        self.var = np.zeros((len(reads) + 1, width), dtype=np.int64)
        self.lo = np.zeros((len(reads) + 1, width), dtype=np.int64)
        self.stride = np.zeros((len(reads) + 1, width), dtype=np.int64)  # 0 pads
        for item, r in enumerate(reads):
            if self.tabled[item]:
                stride = 1
                for t, i in enumerate(r):
                    v = variables[i]
                    self.var[item, t], self.lo[item, t], self.stride[item, t] = i, v.lo, stride
                    stride *= v.hi - v.lo + 1

    def rows(self, items: np.ndarray, states: np.ndarray, values: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
        """Rows (int64, ``items`` and ``states`` broadcast) of tabled ``items`` in states ``states`` (rows of ``values``;
        ``keys``: their keys, for items whose row is a digit range of the key)."""
        if keys is not None and self.spanned[items].all():
            out = keys[states] // self.key_radix[items]
            out %= self.key_size[items]
            return out
        out = np.zeros(np.broadcast_shapes(items.shape, states.shape), dtype=np.int64)
        for t in range(self.var.shape[1]):
            out += (values[states, self.var[items, t]] - self.lo[items, t]) * self.stride[items, t]
        return out

    def grid(self, item: int) -> np.ndarray:
        """``(D, V)`` int64: every combination of the values of the variables ``item`` reads (table row order; the
        other variables at their lower bounds: never read)."""
        D = self.domains[item]
        every = np.arange(D, dtype=np.int64)
        grid = np.tile(np.asarray([v.lo for v in self.variables], dtype=np.int64), (D, 1))
        for t, i in enumerate(self.reads[item]):
            v = self.variables[i]
            grid[:, i] = v.lo + (every // self.stride[item, t]) % (v.hi - v.lo + 1)
        return grid


class _GuardSignature:
    """Each state's guards as ``uint64`` words (bit ``i % 63`` of word ``i // 63``: command ``i``'s guard holds), in a
    few numpy calls on the
    states' keys. Commands are grouped by the span of variables their guards read (from the first to the last in key
    order): a state's row in a table over a span is a digit range of its key, ``(key // radix) % size``, so every
    group's row is found by two numpy calls on a ``(groups, n)`` array, the tables (the bits of the group's guards at
    every valuation of the span, built on first use) gathered at once and or-ed. Guards whose span has more than
    :data:`SPAN_DOMAIN` valuations are taken from :meth:`CompiledProgram.guards`."""

    def __init__(self, program: CompiledProgram) -> None:
        commands = program.commands
        self.words = max(1, -(-len(commands) // 63))
        self.program = program
        variables = program.variables
        spans: dict[tuple[int, int], list[int]] = {}
        self.constant = np.uint64(0)
        self.direct: list[int] = []
        for i, c in enumerate(commands):
            if not c.guard_reads:
                spans.setdefault((0, 0), []).append(i)  # no variable: a table of one row (row 0 of span (0, 0))
            else:
                spans.setdefault((min(c.guard_reads), max(c.guard_reads)), []).append(i)
        self.groups: list[tuple[int, int, list[int]]] = []  # (first variable, rows, commands)
        entries = 0
        for (first, last), cids in sorted(spans.items()):
            radix = variables[first].radix if variables else 1
            D = (variables[last].radix * (variables[last].hi - variables[last].lo + 1)) // radix if variables else 1
            if D <= SPAN_DOMAIN and entries + D <= TABLE_ENTRIES:
                self.groups.append((first, D, cids))
                entries += D
            else:
                self.direct += cids
        # the other commands' guards: their rows in CompiledProgram.guards, and their bits
        slot = np.empty(len(commands), dtype=np.int64)
        slot[program._structure.order] = np.arange(len(commands))
        self.direct_rows = slot[self.direct]
        self.direct_word = np.asarray(self.direct, dtype=np.int64) // 63
        self.direct_bits = (np.uint64(1) << (np.asarray(self.direct, dtype=np.uint64) % np.uint64(63)))[:, None]
        self.radix = np.asarray([variables[f].radix if variables else 1 for f, _, _ in self.groups], dtype=np.int64)[:, None]
        self.size = np.asarray([D for _, D, _ in self.groups], dtype=np.int64)[:, None]
        self.offsets = (np.cumsum(self.size) - self.size[:, 0])[:, None]
        self.table: np.ndarray | None = None
        # each command's word and bit, in the slot order of CompiledProgram.guards
        order = program._structure.order
        self.word_of = order // 63
        self.bit_of = (order % 63).astype(np.uint64)

    def _build(self) -> np.ndarray:
        program = self.program
        parts = []
        for (_, D, cids), radix in zip(self.groups, self.radix[:, 0], strict=True):
            grid = program.values(np.arange(D, dtype=np.int64) * radix)  # the span's valuations, others at lower bounds
            env = program.env(grid)
            bits = np.zeros((D, self.words), dtype=np.uint64)
            for c in cids:
                bits[program.evaluate(program.commands[c].guard, env, D), c // 63] |= np.uint64(1 << (c % 63))
            parts.append(bits)
        return np.concatenate(parts) if parts else np.zeros((0, self.words), dtype=np.uint64)

    def __call__(self, values: np.ndarray, env: Env, keys: np.ndarray) -> np.ndarray:
        n, program = len(values), self.program
        if self.table is None:
            self.table = self._build()
        if self.groups:
            rows = keys // self.radix
            rows %= self.size
            rows += self.offsets
            out = np.bitwise_or.reduce(self.table[rows], axis=0)
        else:
            out = np.zeros((n, self.words), dtype=np.uint64)
        if self.direct:  # every guard at once (looked up in tables over the variables each reads, where they are few)
            guards = program.guards(values, env)[self.direct_rows]
            bits = np.where(guards, self.direct_bits, np.uint64(0))
            for w in distinct(self.direct_word):
                out[:, w] |= np.bitwise_or.reduce(bits[self.direct_word == w], axis=0)
        return out

    def guards(self, values: np.ndarray, env: Env, keys: np.ndarray) -> np.ndarray:
        """``(commands, n)`` bool in :meth:`CompiledProgram.guards`' order, read from the words (no direct guards)."""
        words = self(values, env, keys)
        return ((words.T[self.word_of] >> self.bit_of[:, None]) & np.uint64(1)).astype(bool)


class _Choices:
    """The program's choices as arrays, for enumerating a batch's enabled choices in a fixed number of numpy calls.

    Commands are held in *slot order*: by group (program order), then by the group's modules, then by command. A slot
    is one module's commands of one group (an unlabelled command is a slot, and a group, of its own). In a state, a
    group's choices are the products of its slots' enabled commands; most states enable one command per slot.
    """

    def __init__(self, program: CompiledProgram) -> None:
        self.program = program
        groups = program.groups
        order: list[int] = []
        slot_start: list[int] = []
        slot_stride: list[int] = []
        group_slots: list[list[int]] = []
        local: list[int] = []
        for g in groups:
            group_slots.append([])
            for cids, stride in zip(g.modules, g.strides, strict=True):
                group_slots[-1].append(len(slot_start))
                slot_start.append(len(order))
                slot_stride.append(stride)
                order.extend(cids)
                local.extend(range(len(cids)))
        self.order = np.asarray(order, dtype=np.int64)  # command id at each slot-order position
        self.local = np.asarray(local, dtype=np.int64)  # its position within its slot
        self.slot_start = np.asarray(slot_start, dtype=np.int64)
        self.slot_stride = np.asarray(slot_stride, dtype=np.int64)[:, None]
        self.group_start = np.asarray([s[0] for s in group_slots], dtype=np.int64)
        self.offsets = np.asarray([g.offset for g in groups], dtype=np.int64)[:, None]
        self.width = max((len(s) for s in group_slots), default=1)
        # slots of each group, padded with a slot that holds no command (-1)
        self.slots = np.full((len(groups), self.width), len(slot_start), dtype=np.int64)
        for gi, s in enumerate(group_slots):
            self.slots[gi, : len(s)] = s
        self.layout = _Layout(program.variables, [program.commands[c].guard_reads for c in order], GUARD_TABLE_DOMAIN)
        # the guards with the smallest tables first, within TABLE_ENTRIES (all are built on the first batch)
        domains = np.asarray(self.layout.domains, dtype=np.int64)
        fits = np.flatnonzero(self.layout.tabled[:-1])
        fits = fits[np.argsort(domains[fits], kind="stable")]
        fits = fits[np.cumsum(domains[fits]) <= TABLE_ENTRIES]
        self.layout.tabled[:] = False
        self.layout.tabled[fits] = True
        self.tabled = np.sort(fits)
        self.direct = np.flatnonzero(~self.layout.tabled[:-1])
        sizes = np.asarray([self.layout.domains[p] for p in self.tabled], dtype=np.int64)
        self.base = np.zeros(len(order), dtype=np.int64)
        self.base[self.tabled] = np.cumsum(sizes) - sizes
        self.table: np.ndarray | None = None
        self.order_padded = np.r_[self.order, -1]
        self.slot_start_padded = np.r_[self.slot_start, len(order)]
        self.stride_padded = np.r_[self.slot_stride[:, 0], 0]
        self.n_slots = len(slot_start)
        self.slot_of = np.repeat(np.arange(len(slot_start)), np.diff(np.r_[self.slot_start, len(order)]))
        # the tabled guards' rows: per variable read (t-th of each guard), its index and stride for each guard
        lay = self.layout
        self.columns = [(lay.var[self.tabled, t], lay.stride[self.tabled, t, None]) for t in range(lay.var.shape[1])]
        # each guard's table offset, less its variables' lower bounds (times their strides)
        self.columns_base = (self.base[self.tabled] - (lay.lo[self.tabled] * lay.stride[self.tabled]).sum(axis=1))[:, None]

    def guards(self, values: np.ndarray, env: Env) -> np.ndarray:
        """``(commands, n)`` bool, each command's guard (slot order) in the ``n`` states ``values``."""
        n, program = len(values), self.program
        out = np.empty((len(self.order), n), dtype=bool)
        if len(self.tabled):
            if self.table is None:  # every table at once, on the first batch (every guard is needed in every batch)
                parts = []
                for p in self.tabled:
                    grid = self.layout.grid(int(p))
                    parts.append(program.evaluate(program.commands[self.order[p]].guard, program.env(grid), len(grid)))
                self.table = np.concatenate(parts)
            columns = np.ascontiguousarray(values.T)  # (V, n): a variable's values are one row
            rows = np.repeat(self.columns_base, n, axis=1)
            for var, stride in self.columns:
                rows += columns[var] * stride
            out[self.tabled] = self.table[rows]
        for p in self.direct:
            out[p] = program.evaluate(program.commands[self.order[p]].guard, env, n)
        return out

    def enabled(self, values: np.ndarray, env: Env) -> Enabled:
        """See :meth:`CompiledProgram.enabled`."""
        n = len(values)
        G = self.program.guards(values, env)
        if not len(G) or not n:
            empty = np.zeros(0, dtype=np.int64)
            return Enabled(empty, empty, np.zeros((0, self.width), dtype=np.int64))
        # enabled commands per (slot, state), and the sum of their positions in the slot (the position where one is)
        command, state = np.divmod(np.flatnonzero(G), n)
        key = self.slot_of[command] * n + state
        counts = np.bincount(key, minlength=self.n_slots * n).reshape(self.n_slots, n)
        counts = np.vstack([counts, np.ones((1, n), dtype=counts.dtype)])  # the padding slot: one (no) command
        weights = self.local[command].astype(np.float64)
        position = np.bincount(key, weights=weights, minlength=self.n_slots * n).astype(np.int64).reshape(self.n_slots, n)
        position = np.vstack([position, np.zeros((1, n), dtype=np.int64)])
        per_group = counts[self.slots[:, 0]].astype(np.float64)  # (groups, n) combinations: the slots' product
        for t in range(1, self.width):
            per_group *= counts[self.slots[:, t]]
        row, group = np.nonzero((per_group == 1).T)  # by state, then group (program order)
        slots = self.slots[group]  # (C, width); the padding slot holds no command
        at = position[slots, row[:, None]]
        parts = self.order_padded[self.slot_start_padded[slots] + at]
        kind = self.offsets[group, 0] + (at * self.stride_padded[slots]).sum(axis=1)
        found = Enabled(row.astype(np.int64), kind, parts)
        if (per_group > 1).any():
            found = self._several(found, G, counts, per_group, values)
        return found

    def _several(
        self, single: Enabled, G: np.ndarray, counts: np.ndarray, per_group: np.ndarray, values: np.ndarray
    ) -> Enabled:
        """``single`` with the choices of the (group, state) pairs enabling several combinations, in Storm's order.

        Raises:
            Unsupported: more than :data:`MAX_ENABLED` combinations of one group in one state.
        """
        program = self.program
        if per_group.max() > MAX_ENABLED:
            g, s = np.unravel_index(int(np.argmax(per_group)), per_group.shape)
            raise Unsupported(
                f"label '{program.groups[g].action}' has {int(per_group[g, s]):,} enabled command combinations in "
                f"state {program.describe(values[s])} (at most {MAX_ENABLED:,})"
            )
        counts = counts.astype(np.int64)
        states, kinds, parts = [single.state], [single.kind], [single.parts]
        for g in np.flatnonzero((per_group > 1).any(axis=1)):
            rows = np.flatnonzero(per_group[g] > 1)
            group = program.groups[g]
            slots = self.slots[g, : len(group.modules)]
            tables = [
                G[self.slot_start[sl] : self.slot_start[sl] + len(cids), rows].T
                for sl, cids in zip(slots, group.modules, strict=True)
            ]
            number = per_group[g, rows].astype(np.int64)
            owner = np.repeat(np.arange(len(rows)), number)
            r = np.arange(len(owner)) - np.repeat(np.cumsum(number) - number, number)  # rank within the state
            local = np.empty((len(owner), len(tables)), dtype=np.int64)
            for i in reversed(range(len(tables))):  # mixed radix over the enabled counts, the last module fastest
                cnt = counts[slots[i], rows][owner]
                digit = r % cnt
                r //= cnt
                _, hit = np.nonzero(tables[i])  # enabled commands, by row then command
                first = np.zeros(len(rows) + 1, dtype=np.int64)
                np.cumsum(counts[slots[i], rows], out=first[1:])
                local[:, i] = hit[first[owner] + digit]
            block = np.full((len(owner), self.width), -1, dtype=np.int64)
            for i, cids in enumerate(group.modules):
                block[:, i] = np.asarray(cids, dtype=np.int64)[local[:, i]]
            states.append(rows[owner])
            kinds.append(group.offset + local @ np.asarray(group.strides, dtype=np.int64))
            parts.append(block)
        state, kind = np.concatenate(states), np.concatenate(kinds)
        order = np.lexsort((kind, state))
        return Enabled(state[order], kind[order], np.concatenate(parts)[order])


class _UpdateTables:
    """Every command's updates as flat arrays, an entry per (command, state, update), each command's evaluated once per
    batch where it runs, or looked up in a table over the variables it reads: from the start where they span at most
    :data:`TABLE_DOMAIN` valuations, else (up to :data:`MAX_TABLE_DOMAIN`) once its direct evaluations (64 rows' worth
    per batch, for the batch's fixed cost, plus its rows) reach a quarter of the table's rows.

    ``probs``/``deltas`` hold: entry 0, the padding's update (probability 1, no change); the tables (command ``c``'s
    row ``t``, update ``u`` at ``base[c] + t * updates[c] + u``, built on first use); then the batch's commands that
    have no table (from ``scratch`` on). ``bad`` flags a tabled command's rows where a check fails.
    """

    def __init__(self, program: CompiledProgram) -> None:
        self.program = program
        commands = program.commands
        self.size = np.asarray([len(c.updates) for c in commands] + [1], dtype=np.int64)
        self.layout = _Layout(program.variables, [c.reads for c in commands], MAX_TABLE_DOMAIN, spans=True)
        self.domains = np.asarray([*self.layout.domains, 0], dtype=np.int64)
        self.eligible = self.layout.tabled.copy()
        self.tabled = self.eligible & (self.domains <= TABLE_DOMAIN)
        self.work = np.zeros(len(commands) + 1, dtype=np.int64)  # rows evaluated directly so far (and 64 a batch)
        domains = self.domains * self.tabled
        self.base = 1 + np.cumsum(domains * self.size) - domains * self.size
        self.bad_base = np.cumsum(domains) - domains
        self.built = np.zeros(len(commands) + 1, dtype=bool)
        self.scratch = int(self.base[-1])
        self.probs = np.empty(self.scratch)
        self.deltas = np.empty(self.scratch, dtype=np.int64)
        self.probs[0], self.deltas[0] = 1.0, 0
        self.bad = np.zeros(int(domains.sum()), dtype=bool)
        self._update_keyed()

    def _update_keyed(self) -> None:
        """:attr:`keyed` ``(commands + 1,)`` bool, the padding's last (True): a command's table is built and its row
        is a digit range of the key."""
        self.keyed = self.built & self.layout.spanned
        self.keyed[-1] = True

    def build(self, commands: np.ndarray) -> None:
        """The tables of ``commands`` (command ids, repeats and the padding allowed) that have one and are not built."""
        unbuilt = commands[self.tabled[commands] & ~self.built[commands]]
        if len(unbuilt):
            for c in distinct(unbuilt):
                self._build(int(c))
            self._update_keyed()

    def _build(self, c: int) -> None:
        """Command ``c``'s table: its updates evaluated once on every combination of the variables it reads."""
        grid = self.layout.grid(c)
        probs, deltas, bad = self.program.command_updates(self.program.commands[c], grid)
        D, U = probs.shape
        self.probs[self.base[c] : self.base[c] + D * U] = probs.ravel()
        self.deltas[self.base[c] : self.base[c] + D * U] = deltas.ravel()
        self.bad[self.bad_base[c] : self.bad_base[c] + D] = bad
        self.built[c] = True

    def _promote(self, c: int) -> None:
        """Give command ``c`` a table (built on its next use) after the tables so far; the scratch moves after it."""
        entries = int(self.domains[c] * self.size[c])
        if self.scratch + entries > TABLE_ENTRIES:
            self.eligible[c] = False
            return
        self.base[c], self.bad_base[c] = self.scratch, len(self.bad)
        self.scratch += entries
        if self.scratch > len(self.probs):
            self.probs.resize(self.scratch, refcheck=False)
            self.deltas.resize(self.scratch, refcheck=False)
        self.bad = np.r_[self.bad, np.zeros(int(self.domains[c]), dtype=bool)]
        self.tabled[c] = True

    def locate(
        self, parts: np.ndarray, rows: np.ndarray, values: np.ndarray, keys: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Where the updates of commands ``parts`` ``(P, K)`` (-1: padding) in batch rows ``rows`` ``(P,)`` of
        ``values`` ``(n, V)`` are: ``(P, K)`` first entry and ``(P, K)`` number of updates. Raises as
        :meth:`CompiledProgram.branches` (each (command, state) checked once)."""
        n_cmd = len(self.program.commands)
        cmd = np.where(parts >= 0, parts, n_cmd)
        size = self.size[cmd]
        off = np.zeros(cmd.shape, dtype=np.int64)
        row = rows[:, None].repeat(cmd.shape[1], axis=1)
        tab = self.tabled[cmd]
        bad_rows = []
        if tab.any():
            tc, tr = cmd[tab], row[tab]
            self.build(tc)
            sub = self.layout.rows(tc, tr, values, keys)
            bad = self.bad[self.bad_base[tc] + sub]
            if bad.any():
                bad_rows.append(int(tr[bad].min()))
            off[tab] = self.base[tc] + sub * size[tab]
        direct = (cmd < n_cmd) & ~tab
        if direct.any():
            found = self._direct(cmd[direct], row[direct], values)
            off[direct] = found[0]
            if found[1] is not None:
                bad_rows.append(found[1])
        if bad_rows:
            self.program.raise_first(min(bad_rows), parts, rows, values)
        return off, size

    def _direct(self, cmd: np.ndarray, row: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, int | None]:
        """Commands without a table evaluated once per (command, row) pair into the scratch entries: the first entry
        of each pair given, and the first row where a check fails (None: none)."""
        n = len(values)
        uniq, inverse = np.unique(cmd * n + row, return_inverse=True)
        c_of, r_of = np.divmod(uniq, n)
        first = np.zeros(len(uniq) + 1, dtype=np.int64)
        np.cumsum(self.size[c_of], out=first[1:])
        first += self.scratch
        if first[-1] > len(self.probs):
            self.probs.resize(int(first[-1]), refcheck=False)
            self.deltas.resize(int(first[-1]), refcheck=False)
        bad_row = None
        starts = np.flatnonzero(np.r_[True, c_of[1:] != c_of[:-1]])
        for a, b in zip(starts, np.r_[starts[1:], len(uniq)], strict=True):
            c = int(c_of[a])
            command = self.program.commands[c]
            probs, deltas, bad = self.program.command_updates(command, values[r_of[a:b]])
            self.work[c] += 64 + b - a
            if bad.any():
                worst = int(r_of[a:b][bad].min())
                bad_row = worst if bad_row is None else min(bad_row, worst)
            where = first[a:b, None] + np.arange(len(command.updates))
            self.probs[where] = probs
            self.deltas[where] = deltas
        located = first[:-1][inverse.reshape(-1)]
        for c in distinct(c_of):  # after this batch's scratch was read: promotion moves it
            if self.eligible[c] and 4 * self.work[c] >= self.domains[c]:
                self._promote(int(c))
        return located, bad_row


#: programs compiled lately: ``id(program)`` -> (the program, its path, the compiled program or the Unsupported raised)
_COMPILED: dict[int, tuple[Any, str, CompiledProgram | Unsupported]] = {}


def compiled(program: Any, path: str = "model") -> CompiledProgram:
    """:class:`CompiledProgram` of a Storm PRISM program, compiled once per program object (the last few are kept: a
    verification compiles it for the policy check, the exploration and the range check).

    Raises:
        Unsupported: as :class:`CompiledProgram` (also from the cache).
    """
    hit = _COMPILED.get(id(program))
    if hit is None or hit[0] is not program or hit[1] != path:
        try:
            made: CompiledProgram | Unsupported = CompiledProgram(program, path)
        except Unsupported as exc:
            made = exc
        while len(_COMPILED) >= 4:
            del _COMPILED[next(iter(_COMPILED))]
        hit = _COMPILED[id(program)] = (program, path, made)
    if isinstance(hit[2], Unsupported):
        raise Unsupported(str(hit[2]))
    return hit[2]


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
        program.check(vals[~stop])
