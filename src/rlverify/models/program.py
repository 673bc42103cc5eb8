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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

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
        owner: ``(K,)`` int64, the choice (position in the choices given) of each branch.
        keys: ``(K,)`` int64 successor keys; probs: ``(K,)`` float64 probabilities (the product of the commands'
            update probabilities, multiplied in module order).
    """

    owner: np.ndarray
    keys: np.ndarray
    probs: np.ndarray


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
        self.groups = self._groups()
        self._offsets = np.asarray([g.offset for g in self.groups], dtype=np.int64)
        #: how many choices the program has (choice indices are ``0 .. num_choices - 1``, program order)
        self.num_choices = self.groups[-1].offset + self.groups[-1].count if self.groups else 0
        self._names: dict[int, str] = {}
        self._n_updates = np.asarray([len(c.updates) for c in self.commands] + [1], dtype=np.int64)
        self.label_functions = {
            lab.name: compile_expression(program.get_label_expression(lab.name), self.by_name) for lab in program.labels
        }

    def _command(self, m: int, module: Any, k: int, command: Any) -> Command:
        updates = []
        for u in command.updates:
            assigns = []
            for a in u.assignments:
                name = a.variable.name
                if name not in self.index:
                    raise Unsupported(f"assignment to unknown variable '{name}'")
                assigns.append((self.index[name], compile_expression(a.expression, self.by_name)))
            updates.append(Update(compile_expression(u.probability_expression, self.by_name), tuple(assigns)))
        return Command(
            m,
            f"{module.name}:{k + 1}",
            command.action_name if command.is_labeled else "",
            compile_expression(command.guard_expression, self.by_name),
            tuple(updates),
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
            strides = [int(np.prod(sizes[i + 1 :], dtype=object)) for i in range(len(sizes))]
            count = int(np.prod(sizes, dtype=object))
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

    def enabled(self, env: Env, n: int) -> Enabled:
        """The choices enabled in ``n`` states (``env``), in Storm's order. Each command's guard is evaluated once;
        a label's choices are only the combinations of its commands enabled in a state (cost follows them).

        Raises:
            Unsupported: a label with more than :data:`MAX_ENABLED` enabled combinations in one state.
        """
        guards: list[np.ndarray | None] = [None] * len(self.commands)

        def guard(c: int) -> np.ndarray:
            g = guards[c]
            if g is None:
                g = guards[c] = self.evaluate(self.commands[c].guard, env, n)
            return g

        width = max((len(g.modules) for g in self.groups), default=1)
        states, kinds, parts = [], [], []
        for group in self.groups:
            found = self._combinations(group, guard, n, env)
            if found is None:
                continue
            rows, kind, cids = found
            block = np.full((len(rows), width), -1, dtype=np.int64)
            block[:, : cids.shape[1]] = cids
            states.append(rows)
            kinds.append(kind)
            parts.append(block)
        if not states:
            empty = np.zeros(0, dtype=np.int64)
            return Enabled(empty, empty, np.zeros((0, width), dtype=np.int64))
        state = np.concatenate(states)
        order = np.argsort(state, kind="stable")  # groups are in program order; each is sorted by (state, choice)
        return Enabled(state[order], np.concatenate(kinds)[order], np.concatenate(parts)[order])

    def _combinations(
        self, group: Group, guard: Callable[[int], np.ndarray], n: int, env: Env
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """A group's enabled choices: ``(rows, choice indices, commands (C, modules))`` sorted by (row, choice);
        None where none is enabled."""
        if len(group.modules) == 1 and len(group.modules[0]) == 1:  # an unlabelled command (or a lone one)
            c = group.modules[0][0]
            rows = np.flatnonzero(guard(c))
            if not len(rows):
                return None
            return rows, np.full(len(rows), group.offset, dtype=np.int64), np.full((len(rows), 1), c, dtype=np.int64)
        tables = []
        alive = np.ones(n, dtype=bool)
        for cids in group.modules:
            table = np.stack([guard(c) for c in cids], axis=1)  # (n, commands of the module)
            alive &= table.any(axis=1)
            if not alive.any():
                return None
            tables.append(table)
        rows = np.flatnonzero(alive)
        tables = [t[rows] for t in tables]
        counts = np.stack([t.sum(axis=1) for t in tables], axis=1)  # (R, modules)
        if counts.max() == 1:  # one combination per state (the common case)
            local = np.stack([t.argmax(axis=1) for t in tables], axis=1)
            return rows, group.offset + local @ np.asarray(group.strides, dtype=np.int64), self._cids(group, local)
        per_state = counts.prod(axis=1, dtype=np.float64)
        if per_state.max() > MAX_ENABLED:
            s = int(rows[np.argmax(per_state)])
            raise Unsupported(
                f"label '{group.action}' has {int(per_state.max()):,} enabled command combinations in state "
                f"{self.describe(np.asarray([env[v.name][s] for v in self.variables]))} (at most {MAX_ENABLED:,})"
            )
        number = counts.prod(axis=1)
        owner = np.repeat(np.arange(len(rows)), number)
        r = np.arange(len(owner)) - np.repeat(np.cumsum(number) - number, number)  # rank within the state
        local = np.empty((len(owner), len(tables)), dtype=np.int64)
        for i in reversed(range(len(tables))):  # mixed radix over the enabled counts, the last module fastest
            cnt = counts[owner, i]
            digit = r % cnt
            r //= cnt
            _, hit_cmd = np.nonzero(tables[i])  # enabled commands, by row then command
            first = np.zeros(len(rows) + 1, dtype=np.int64)
            np.cumsum(counts[:, i], out=first[1:])
            local[:, i] = hit_cmd[first[owner] + digit]
        return rows[owner], group.offset + local @ np.asarray(group.strides, dtype=np.int64), self._cids(group, local)

    @staticmethod
    def _cids(group: Group, local: np.ndarray) -> np.ndarray:
        """``(C, modules)`` command ids of positions ``local`` within each module's commands of the group."""
        out = np.empty_like(local)
        for i, cids in enumerate(group.modules):
            out[:, i] = np.asarray(cids, dtype=np.int64)[local[:, i]]
        return out

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
        table = self._updates(parts, rows, values)
        pair, off, size, fprob, fdelta = table
        P, K = pair.shape
        shape = size[pair]  # (P, K) updates per command (1 for padding)
        number = shape.prod(axis=1)
        total = int(number.sum())
        owner = np.repeat(np.arange(P), number)
        r = np.arange(total) - np.repeat(np.cumsum(number) - number, number)
        index = [np.empty(0, dtype=np.int64)] * K
        for i in reversed(range(K)):  # the last command's updates fastest (the product's order)
            cnt = shape[owner, i]
            index[i] = off[pair[owner, i]] + r % cnt
            r //= cnt
        probs = fprob[index[0]]
        succ = keys[rows][owner] + fdelta[index[0]]
        for i in range(1, K):
            probs = probs * fprob[index[i]]
            succ += fdelta[index[i]]
        return Branches(owner, succ, probs)

    def _updates(
        self, parts: np.ndarray, rows: np.ndarray, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every (command, row) pair of ``parts`` at ``rows`` evaluated once: ``(pair (P, K), offset (Q+1,), updates
        (Q+1,), probabilities, key deltas)``: pair ``q``'s updates are entries ``offset[q] ..`` of the flat arrays; the
        padding (-1) points to pair ``Q``, one update of probability 1 changing nothing."""
        n = len(values)
        P, K = parts.shape
        flat = parts.ravel()
        real = flat >= 0
        pair_keys = flat[real] * n + np.repeat(rows, K)[real]
        uniq, inverse = np.unique(pair_keys, return_inverse=True)
        Q = len(uniq)
        cmd, row = np.divmod(uniq, n)
        size = self._n_updates[np.r_[cmd, len(self.commands)]]
        off = np.zeros(Q + 2, dtype=np.int64)
        np.cumsum(size, out=off[1:])
        fprob = np.empty(off[-1])
        fdelta = np.empty(off[-1], dtype=np.int64)
        fprob[off[Q]], fdelta[off[Q]] = 1.0, 0
        bad_rows = []
        starts = np.flatnonzero(np.r_[True, cmd[1:] != cmd[:-1]]) if Q else np.zeros(0, dtype=np.int64)
        for a, b in zip(starts, np.r_[starts[1:], Q][: len(starts)], strict=True):
            command = self.commands[int(cmd[a])]
            vals = values[row[a:b]]
            probs, deltas, bad = self._command_updates(command, vals)
            if bad.any():
                bad_rows.append(int(row[a:b][bad].min()))
            where = off[a:b, None] + np.arange(len(command.updates))
            fprob[where] = probs
            fdelta[where] = deltas
        if bad_rows:
            self._raise_first(min(bad_rows), parts, rows, values)
        pair = np.full(P * K, Q, dtype=np.int64)
        pair[real] = inverse.reshape(-1)
        return pair.reshape(P, K), off[:-1], size, fprob, fdelta

    def _raise_first(self, s: int, parts: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
        """Raise the error of the first command (choices in program order, commands in module order) failing in row
        ``s`` (its checks in Storm's order: each update's probability, then its assignments; then the sum)."""
        vals = values[[s]]
        for p in np.flatnonzero(rows == s):
            for c in parts[p]:
                if c >= 0:
                    self._command_updates(self.commands[int(c)], vals, explain=True)
        raise AssertionError(f"internal: a failing update in state {self.describe(vals[0])} was not found again")

    def _command_updates(
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
        found = self.enabled(self.env(values), len(values))
        if len(found.state):
            self._updates(found.parts, found.state, values)

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
        program.check(vals[~stop])
