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

The parts: :mod:`~rlverify.models.program_types` (the value types), :mod:`~rlverify.models.program_expressions`
(expressions), :mod:`~rlverify.models.program_tables` (lookup tables), :mod:`~rlverify.models.program_choices`
(enabled choices), :mod:`~rlverify.models.program_checks` (terminal states, the range check).

Cost follows the enabled choices, as in Storm's builder: each command's guard is evaluated once per batch
of states (:meth:`CompiledProgram.enabled`), and a label's choices are formed only from the commands each state
enables, in Storm's order (unlabelled commands in module order, then the labels by Storm's action index, each
label's combinations in :func:`itertools.product` order: the choice's index among all combinations names it).
Each command's updates are evaluated once per batch on the states where a choice runs it, and a synchronised
choice's branches combine its commands' by broadcasting (:meth:`CompiledProgram.branches`). Guards, updates and
expressions reading few variables are looked up in tables over those variables' values, built on first use.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from rlverify.arrays import distinct
from rlverify.errors import ModelError
from rlverify.models.program_checks import check_update_ranges, terminal_functions
from rlverify.models.program_choices import ChoiceTables
from rlverify.models.program_expressions import StormExpression, Tabled, compile_expression, count_operators
from rlverify.models.program_tables import TABLE_DOMAIN, GuardSignature, UpdateTables
from rlverify.models.program_types import Branches, Command, Enabled, Env, Fn, Group, States, Unsupported, Update, Var

__all__ = [  # with the parts' names the engines import from here
    "BRANCH_CHUNK",
    "MAX_CHOICES",
    "MAX_DOMAIN",
    "MAX_INIT_DOMAIN",
    "Branches",
    "Command",
    "CompiledProgram",
    "Enabled",
    "Group",
    "States",
    "Unsupported",
    "Update",
    "Var",
    "check_update_ranges",
    "compile_expression",
    "compiled",
    "program_action_index",
    "terminal_functions",
]

#: Storm's PRISM program and its parts (``stormpy.storage.PrismProgram``, ``PrismModule``, ``PrismCommand``,
#: ``PrismUpdate``, ``Variable``; stormpy is untyped)
StormProgram = Any
StormModule = Any
StormCommand = Any
StormUpdate = Any
StormVariable = Any

#: largest product of the variables' domains a key can hold
MAX_DOMAIN = 2**62
#: most choices a program may have in all (choice indices are int64; only enabled combinations are ever formed)
MAX_CHOICES = 1 << 62
#: largest domain searched for the states of an ``init ... endinit`` block
MAX_INIT_DOMAIN = 1 << 22
#: branches computed at a time by :meth:`CompiledProgram.structured_branches`
BRANCH_CHUNK = 1 << 16


class CompiledProgram:
    """A PRISM MDP's variables, choices and labels as numpy functions (see the module docstring).

    Raises :class:`Unsupported` for what it does not evaluate: a model type other than MDP, an
    ``init ... endinit`` block over more than :data:`MAX_INIT_DOMAIN` valuations, variable bounds that are
    not constants, two modules writing one variable, a domain product above :data:`MAX_DOMAIN`.
    """

    def __init__(self, program: StormProgram, path: str = "model") -> None:
        self.path = path
        if str(program.model_type).rsplit(".", 1)[-1].lower() != "mdp":
            raise Unsupported("the model is not an MDP")
        init_block = bool(program.has_initial_states_expression)
        program = program.substitute_constants().substitute_formulas()
        self.program = program
        declared = _declared(program)
        vars_, initial, radix = _variables(declared, init_block)
        self._set_variables(vars_, declared)
        self.domain = radix
        self.initial = self._initial_block() if init_block else self._initial_values(initial)
        self.groups = self._groups()
        self._offsets = np.asarray([g.offset for g in self.groups], dtype=np.int64)
        #: how many choices the program has (choice indices are ``0 .. num_choices - 1``, program order)
        self.num_choices = self.groups[-1].offset + self.groups[-1].count if self.groups else 0
        self._names: dict[int, str] = {}
        self._tables = UpdateTables(self)
        self._structure = ChoiceTables(self)
        self._signature: GuardSignature | None = None
        self.label_functions = {lab.name: self._compile(program.get_label_expression(lab.name)) for lab in program.labels}

    def _set_variables(self, vars_: list[Var], declared: list[tuple[StormVariable, bool]]) -> None:
        """The variables, their key arrays (radixes, sizes, lower bounds), Storm's expression of each, and lookups
        by name."""
        self.variables = tuple(vars_)
        self._radix = np.asarray([v.radix for v in vars_], dtype=np.int64)
        self._sizes = np.asarray([v.hi - v.lo + 1 for v in vars_], dtype=np.int64)
        self._los = np.asarray([v.lo for v in vars_], dtype=np.int64)
        self._storm_variables = {v.name: v.expression_variable.get_expression() for v, _ in declared}
        self.by_name = {v.name: v for v in vars_}
        self.index = {v.name: i for i, v in enumerate(vars_)}

    def _initial_block(self) -> np.ndarray:
        """``(I, V)`` int64: the valuations satisfying the ``init ... endinit`` expression, found over the whole domain."""
        if self.domain > MAX_INIT_DOMAIN:
            raise Unsupported(f"an init ... endinit block over more than {MAX_INIT_DOMAIN:,} valuations")
        every = self.values(np.arange(self.domain, dtype=np.int64))
        where = compile_expression(self.program.initial_states_expression, self.by_name)
        return every[self.evaluate(where, self.env(every), self.domain)]

    def _initial_values(self, initial: list[int]) -> np.ndarray:
        """``(1, V)`` int64: the variables' declared initial values, refused (ModelError) outside their bounds."""
        for v, init in zip(self.variables, initial, strict=True):
            if not v.lo <= init <= v.hi:
                raise ModelError(f"{self.path}: the initial value {init} of variable '{v.name}' is outside [{v.lo}..{v.hi}]")
        return np.asarray([initial], dtype=np.int64)

    def _command(self, m: int, module: StormModule, k: int, command: StormCommand) -> Command:
        updates = []
        reads: set[str] = set()
        for u in command.updates:
            update, read = self._update(u)
            updates.append(update)
            reads |= read
        return Command(
            m,
            f"{module.name}:{k + 1}",
            command.action_name if command.is_labeled else "",
            self._compile(command.guard_expression),
            tuple(updates),
            tuple(sorted(self.index[v] for v in reads if v in self.index)),
            tuple(sorted(self.index[v.name] for v in command.guard_expression.get_variables() if v.name in self.index)),
        )

    def _update(self, u: StormUpdate) -> tuple[Update, set[str]]:
        """One of a command's updates compiled, and the names of the variables it reads or assigns."""
        assigns = []
        reads = {v.name for v in u.probability_expression.get_variables()}
        for a in u.assignments:
            name = a.variable.name
            if name not in self.index:
                raise Unsupported(f"assignment to unknown variable '{name}'")
            assigns.append((self.index[name], self._compile(a.expression)))
            reads |= {name} | {v.name for v in a.expression.get_variables()}
        return Update(self._compile(u.probability_expression), tuple(assigns)), reads

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
        import stormpy  # lazy: stormpy, start-up

        parser = stormpy.expressions.ExpressionParser(self.program.expression_manager)
        parser.set_identifier_mapping(self._storm_variables)
        try:
            expr = parser.parse_from_string(text, False)
        except Exception as exc:  # Storm's parse error
            raise Unsupported(f"expression '{text}': {exc}") from None
        return compile_expression(expr, self.by_name)

    def _compile(self, expr: StormExpression) -> Fn:
        """:func:`compile_expression`, looked up in a table (:class:`Tabled`) where it applies two operators or more
        to variables whose domains multiply to at most :data:`TABLE_DOMAIN`."""
        fn = compile_expression(expr, self.by_name)
        variables = sorted((self.by_name[v.name] for v in expr.get_variables()), key=lambda v: self.index[v.name])
        if not variables or count_operators(expr) < 2:
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

    def evaluate(self, fn: Fn, env: Env, n: int, dtype: npt.DTypeLike = bool) -> np.ndarray:
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

    def _guard_tables(self) -> GuardSignature:
        if self._signature is None:
            self._signature = GuardSignature(self)
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
        P = len(shape)
        number = shape.prod(axis=1)
        start = np.cumsum(number) - number
        total = int(number.sum())
        probs = np.empty(total)
        succ = np.empty(total, dtype=np.int64)
        base = keys[rows]
        # choices of one shape (updates per command) at once, their branches the outer product of their commands'
        # updates (the last command's fastest: the product's order), probabilities multiplied in module order
        for sel, sig in _shape_classes(shape):
            p, d = self._outer(off, sel, sig)
            d += base[sel, None]
            if len(sel) == P:
                probs, succ = p.reshape(-1), d.reshape(-1)
            else:
                where = start[sel, None] + np.arange(p.shape[1])
                probs[where] = p
                succ[where] = d
        return Branches(number, succ, probs)

    def _outer(self, off: np.ndarray, sel: np.ndarray, sig: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(len(sel), B)`` probabilities and key deltas of the choices ``sel``, all of shape ``sig`` (updates per
        command): the outer product of their commands' updates (``off``: each command's first entry)."""
        fprob, fdelta = self._tables.probs, self._tables.deltas
        p, d = fprob[off[sel, 0, None] + np.arange(sig[0])], fdelta[off[sel, 0, None] + np.arange(sig[0])]
        for i in range(1, len(sig)):
            if sig[i] == 1 and not off[sel, i].any():  # padding: probability 1, no change
                continue
            at = off[sel, i, None] + np.arange(sig[i])
            p = (p[:, :, None] * fprob[at][:, None, :]).reshape(len(sel), -1)
            d = (d[:, :, None] + fdelta[at][:, None, :]).reshape(len(sel), -1)
        return p, d

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
                    if np.issubdtype(new.dtype, np.floating):

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


#: programs compiled lately: ``id(program)`` -> (the program, its path, the compiled program or the Unsupported raised)
_COMPILED: dict[int, tuple[StormProgram, str, CompiledProgram | Unsupported]] = {}


def compiled(program: StormProgram, path: str = "model") -> CompiledProgram:
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


def program_action_index(program: StormProgram, label: str) -> int:
    """Storm's index of an action label (its order of synchronising choices)."""
    for m in program.modules:
        for c in m.commands:
            if c.is_labeled and c.action_name == label:
                return int(c.action_index)
    return 1 << 30


def _shape_classes(shape: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The choices of ``shape`` ``(P, K)`` (updates per command) by shape: ``(rows, shape)`` for each shape."""
    P, K = shape.shape
    radix = int(shape.max(initial=1)) + 1
    if radix**K >= 2**62:
        return [(np.flatnonzero((shape == sig).all(axis=1)), sig) for sig in np.unique(shape, axis=0)]
    signature = shape @ (radix ** np.arange(K, dtype=np.int64))
    # most batches have one shape
    ids = signature[:1] if len(signature) and (signature == signature[0]).all() else distinct(signature)
    classes = []
    for sid in ids:
        sel = np.arange(P) if len(ids) == 1 else np.flatnonzero(signature == sid)
        classes.append((sel, shape[sel[0]]))
    return classes


#: Storm's text of an expression that was never given (an unbounded int's bound, a missing initial value)
_NOT_INITIALIZED = "__storm::notinitialized__"


def _declared(program: StormProgram) -> list[tuple[StormVariable, bool]]:
    """The program's variables in Storm's order (globals, then each module's; integers before booleans), each with
    whether it is boolean."""
    declared = [(v, False) for v in program.global_integer_variables] + [(v, True) for v in program.global_boolean_variables]
    for m in program.modules:
        declared += [(v, False) for v in m.integer_variables] + [(v, True) for v in m.boolean_variables]
    return declared


def _variables(declared: list[tuple[StormVariable, bool]], init_block: bool) -> tuple[list[Var], list[int], int]:
    """The variables with their key radixes, their initial values (0 under an ``init`` block), and the domain's size.

    Raises:
        Unsupported: an unbounded int, a bound or initial value that is not a constant, a domain beyond 2**62.
    """
    vars_: list[Var] = []
    radix = 1
    initial: list[int] = []
    for v, is_bool in declared:
        lo, hi, init = _bounds(v, is_bool, init_block)
        vars_.append(Var(v.name, lo, hi, is_bool, radix))
        initial.append(init)
        radix *= hi - lo + 1
        if radix > MAX_DOMAIN:
            raise Unsupported("the variables' domains multiply beyond 2**62")
    return vars_, initial, radix


def _bounds(v: StormVariable, is_bool: bool, init_block: bool) -> tuple[int, int, int]:
    """A variable's inclusive bounds (a boolean's 0..1) and initial value (0 under an ``init`` block)."""
    if not is_bool and not all(str(e) != _NOT_INITIALIZED for e in (v.lower_bound_expression, v.upper_bound_expression)):
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
            if str(init_expr) == _NOT_INITIALIZED:
                raise Unsupported(f"variable '{v.name}' has no initial value")
            init = int(init_expr.evaluate_as_bool()) if is_bool else int(init_expr.evaluate_as_int())
    except Exception as exc:  # a bound or initial value that is not a constant (the message above included)
        raise Unsupported(f"variable '{v.name}': {exc}") from None
    return lo, hi, init
