"""An explicit MDP as an agent sees it: the one core the induced chain, the simulator and the Gym bridge adapt.

An agent chooses among named actions (a tuple in its own order). A choice is matched to the agent's
action named by its command name (``m:2``, see :mod:`rlverify.models.commands`) if the agent has
one, else to the action named by its label. In each state of an
:class:`~rlverify.models.ExplicitModel` (S states, C choices, B branches):

* a state with at least one labelled choice, or with several choices of which some are named by
  command, is a *decision* state: the agent is asked, and an action is available iff a choice
  matches it (an agent action the model does not have, e.g. one a property-directed build made
  unreachable, is never available; a state offering only choices the agent does not name is still
  asked, and all the agent's mass is unavailable). Choices the agent does not name are never taken:
  :meth:`ChoiceTable.untaken` lists them so the engines report them;
* a state whose choices are all unlabelled and which has one choice takes it without asking
  (Storm's self-loops at terminal states and deadlocks, a lone unlabelled command); when that choice
  loops back with probability 1 the state is a *dead end*;
* two choices matching one action in a state are refused (:func:`refuse_ambiguous`), with the command
  names that tell them apart; so are unlabelled choices of a model built without command names.

What happens to mass on unavailable actions (``stall`` or ``renormalize``) is decided by
:func:`policy_weights`, shared by the exact and the statistical engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from rlverify.arrays import distinct
from rlverify.choices import Mode, Unavailable, values
from rlverify.errors import OptionError, PolicyError, RlverifyError, did_you_mean
from rlverify.models.commands import Command, check_names, is_command_name
from rlverify.models.explicit import ExplicitModel

#: what mass on unavailable actions does: ends the run in a ``stalled`` sink, or the available actions are rescaled
UNAVAILABLE = values(Unavailable)


def check_unavailable(value: str, error: type[RlverifyError] = OptionError) -> None:
    """Refuse an ``unavailable`` setting outside :data:`UNAVAILABLE` (message names ``--unavailable``)."""
    if value not in UNAVAILABLE:
        raise error(f"--unavailable: expected one of {', '.join(UNAVAILABLE)}, got '{value}'")


@dataclass(frozen=True)
class Fit:
    """Which names of an agent a model (or an environment) lacks; built by :func:`fit`.

    Attributes:
        missing_features: agent features that are not model variables, in the agent's order.
        missing_actions: agent actions that are neither labelled actions nor command names of the model.
        variables, actions, commands: the model's variables, action labels and command names (for messages).
        reasons: why a command name is wrong, by missing action (when it is a malformed combination).
    """

    missing_features: tuple[str, ...]
    missing_actions: tuple[str, ...]
    variables: tuple[str, ...]
    actions: tuple[str, ...]
    reasons: dict[str, str] = field(default_factory=dict)
    commands: tuple[str, ...] = ()
    unassigned: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.missing_features or self.missing_actions)

    def problems(self, where: str | None = None) -> list[str]:
        """One message per missing name; ``where`` names an environment (None: the model)."""
        if where is None:
            feature, variables, owner, actions = "a model variable", "model variables", "the model", "model actions"
        else:
            feature, variables, owner, actions = f"observed by {where}", "features", where, "actions"
        return [
            f"feature '{f}' is declared but never assigned: Storm's builder makes such a variable a constant (its "
            "initial value), so it is no state variable; drop it from the policy's features"
            if f in self.unassigned
            else f"feature '{f}' is not {feature}{did_you_mean(f, self.variables)} ({variables}: {', '.join(self.variables)})"
            for f in self.missing_features
        ] + [
            self.reasons[a]
            if a in self.reasons
            else f"action '{a}' is not an action of {owner}{did_you_mean(a, self.actions + self.commands)} "
            f"({actions}: {', '.join(self.actions)}{self._command_hint()})"
            for a in self.missing_actions
        ]

    def _command_hint(self) -> str:
        if not self.commands:
            return ""
        shown = ", ".join(self.commands[:6]) + (", ..." if len(self.commands) > 6 else "")
        return f"; command names: {shown} (rlverify inspect MODEL lists them)"


def fit(
    features: Sequence[str],
    actions: Sequence[str],
    *,
    variables: Sequence[str],
    model_actions: Sequence[str],
    commands: Sequence[Command] = (),
    unassigned: Sequence[str] = (),
) -> Fit:
    """How an agent's feature and action names fit a model's: the one name check of every engine.

    Pass the names of the model as declared (a :class:`~rlverify.models.SymbolicModel`'s
    ``variables``/``action_names``/``commands``; an environment's ``features``/``actions``): a
    property-directed build may lack actions (they are then never available, not unknown). ``""``
    (unlabelled) is no action; an agent action may also be a command name (``m:2``, ``m:3+n:1``). ``unassigned``:
    variables the model declares but Storm made constants (:attr:`~rlverify.models.SymbolicModel.unassigned`).
    """
    variables = tuple(variables)
    labelled = tuple(a for a in model_actions if a)
    missing, reasons = _missing_actions(actions, labelled, commands)
    return Fit(
        missing_features=tuple(f for f in features if f not in variables),
        missing_actions=missing,
        variables=variables,
        actions=labelled,
        reasons=reasons,
        commands=tuple(c.name for c in commands),
        unassigned=tuple(unassigned),
    )


def _missing_actions(
    actions: Sequence[str], labelled: tuple[str, ...], commands: Sequence[Command]
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The agent's actions that are neither a model label nor a valid command name, and why a command name is not."""
    bad = dict(check_names([a for a in actions if a not in labelled], commands))
    missing = tuple(a for a in actions if a not in labelled and (not is_command_name(a) or not commands or a in bad))
    return missing, {a: bad[a] for a in missing if a in bad}


def labelled_states(model: ExplicitModel) -> np.ndarray:
    """``(S,)`` bool: states with at least one labelled choice (the agent's decision states)."""
    named = np.array([bool(a) for a in model.action_names], dtype=bool)[model.choice_actions]
    return np.bincount(model.choice_states()[named], minlength=model.num_states) > 0


def action_columns(model: ExplicitModel, actions: Sequence[str]) -> np.ndarray:
    """``(C,)`` int64 index in ``actions`` of the action each choice matches; -1 where none.

    A choice matches the action named by its command name if ``actions`` has it, else the action
    named by its label (unlabelled choices match only by command name).
    """
    lookup = {a: i for i, a in enumerate(actions)}
    per_name = np.array([lookup.get(a, -1) if a else -1 for a in model.action_names], dtype=np.int64)
    cols = per_name[model.choice_actions]
    if model.choice_commands is not None and any(is_command_name(a) for a in actions):
        per_command = np.array([lookup.get(n, -1) if n else -1 for n in model.command_names], dtype=np.int64)
        by_command = per_command[model.choice_commands]
        cols = np.where(by_command >= 0, by_command, cols)
    return cols


def choice_name(model: ExplicitModel, choice: int) -> str:
    """How messages name a choice: its label, with its command name where the model has one (``b (m:3+n:1)``)."""
    label = model.action_names[model.choice_actions[choice]]
    command = model.command_names[model.choice_commands[choice]] if model.choice_commands is not None else ""
    if label and command:
        return f"{label} ({command})"
    return label or command or "(unlabelled)"


def refuse_ambiguous(
    model: ExplicitModel,
    actions: Sequence[str],
    duplicate: tuple[int, int, int] | None,
    unresolved: np.ndarray,
    mixed: np.ndarray | None = None,
) -> None:
    """Raise :class:`PolicyError` for the first choice a policy over ``actions`` cannot pick.

    Args:
        duplicate: ``(state, action index, count)`` of a state with ``count`` choices matching ``actions[a]``.
        unresolved: ``(S,)`` bool, states with several choices and none labelled (model without command names).
        mixed: ``(S,)`` bool, states offering an unlabelled choice beside labelled ones (model without
            command names): a policy over labels would never take it, silently changing what is verified.
    """
    if duplicate is not None:
        s, a, n = duplicate
        lo, hi = model.row_groups[s], model.row_groups[s + 1]
        cols = action_columns(model, actions)[lo:hi]
        same = [lo + i for i in np.flatnonzero(cols == a)]
        if model.choice_commands is not None:
            names = [model.command_names[model.choice_commands[c]] for c in same]
            raise PolicyError(
                f"state {model.valuation_dict(s)} has {n} choices labelled '{actions[a]}' "
                f"(commands {', '.join(names)}): a policy cannot tell them apart by the label; "
                "name the commands in the policy's actions instead (rlverify inspect lists them)"
            )
        raise PolicyError(
            f"state {model.valuation_dict(s)} has {n} choices labelled '{actions[a]}': a policy over "
            "action labels cannot tell them apart (label the commands differently, or build the "
            "model from its PRISM/JANI file so that rlverify can name the commands)"
        )
    if unresolved.any():
        s = int(np.argmax(unresolved))
        n = int(model.row_groups[s + 1] - model.row_groups[s])
        raise PolicyError(
            f"state {model.valuation_dict(s)} has {n} unlabelled choices: no agent action can choose "
            "between them (label the commands, or build the model from its PRISM/JANI file so that "
            "rlverify can name the commands)"
        )
    if mixed is not None and mixed.any():
        s = int(np.argmax(mixed))
        lo, hi = model.row_groups[s], model.row_groups[s + 1]
        labels = sorted({model.action_names[a] for a in model.choice_actions[lo:hi] if model.action_names[a]})
        raise PolicyError(
            f"state {model.valuation_dict(s)} offers an unlabelled command beside the labelled actions "
            f"{labels}: a policy over action labels would never take it, which would change what is "
            "verified (label the command, or build the model from its PRISM/JANI file so that "
            "rlverify can name the commands)"
        )


@dataclass(frozen=True, eq=False)
class ChoiceTable:
    """An explicit MDP as an agent with ``actions`` sees it (built by :func:`choice_table`).

    Attributes:
        model: the explicit MDP.
        actions: the agent's action names, in its order (``A`` of them).
        choice_of: ``(S, A)`` int32 (int64 beyond 2**31 choices), the choice action ``a`` takes in state
            ``s``; -1 where unavailable (and in every non-decision state).
        decision: ``(S,)`` bool, states with at least one labelled choice: the agent is asked there.
        forced: ``(S,)`` the single choice of a non-decision state (same dtype as ``choice_of``), -1 elsewhere.
        dead_end: ``(S,)`` bool, the forced choice loops back with probability 1.
        absorbing: ``(S,)`` bool, every choice of the state loops back with probability 1.
        loop: ``(C,)`` bool, the choice loops back to its state with probability 1.
        columns: ``(C,)`` int64, the agent action each choice matches (-1: none; :func:`action_columns`).

    The sampler's arrays (cumulative branch probabilities) are made on first use: the exact engine
    never needs them.
    """

    model: ExplicitModel
    actions: tuple[str, ...]
    choice_of: np.ndarray
    decision: np.ndarray
    forced: np.ndarray
    dead_end: np.ndarray
    absorbing: np.ndarray
    loop: np.ndarray
    columns: np.ndarray

    def untaken(self, states: np.ndarray | None = None) -> dict[str, int]:
        """Choices of decision states the agent names no action for (it never takes them).

        Returns name (:func:`choice_name`) -> number of states offering it, over ``states`` (indices;
        None: all). Engines report this: such a choice is never silently dropped.
        """
        cs = self.model.choice_states()
        mask = (self.columns < 0) & self.decision[cs]
        if states is not None:
            keep = np.zeros(self.model.num_states, dtype=bool)
            keep[np.asarray(states, dtype=np.int64)] = True
            mask &= keep[cs]
        choices = np.flatnonzero(mask)
        if not len(choices):
            return {}
        # one name per (label, command) pair: group the choices by it before naming
        commands = self.model.choice_commands[choices] if self.model.choice_commands is not None else 0
        keys = self.model.choice_actions[choices].astype(np.int64) * (len(self.model.command_names) + 1) + commands
        _, first, counts = np.unique(keys, return_index=True, return_counts=True)
        out: dict[str, int] = {}
        for f, n in zip(first, counts, strict=True):
            name = choice_name(self.model, int(choices[f]))
            out[name] = out.get(name, 0) + int(n)
        return dict(sorted(out.items()))

    @cached_property
    def branches(self) -> sp.csr_matrix:
        """``(C, S)`` the model's transitions with each choice's branches sorted by target."""
        P = self.model.transitions
        return P if P.has_sorted_indices else P.sorted_indices()

    @cached_property
    def cumulative(self) -> np.ndarray:
        """``(B,)`` float64 cumulative branch probabilities within each choice (summed in row order, exactly)."""
        P = self.branches
        out = P.data.astype(np.float64)
        lengths = np.diff(P.indptr)
        order = np.argsort(-lengths, kind="stable")  # rows longer than k are a prefix of this order
        starts, desc = P.indptr[:-1][order], -lengths[order]
        for k in range(1, int(lengths.max(initial=0))):
            idx = starts[: np.searchsorted(desc, -k, side="left")] + k
            out[idx] += out[idx - 1]
        return out

    def available(self, states: np.ndarray) -> np.ndarray:
        """``(N, A)`` bool: which agent actions ``states`` ``(N,)`` offer (all False in non-decision states)."""
        return self.choice_of[states] >= 0

    def taken(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``(N,)`` int64 choice taken in ``states`` for agent actions ``actions``.

        The forced choice where a state is forced; -1 where the action is unavailable.
        """
        states = np.asarray(states, dtype=np.int64)
        out = self.forced[states].astype(np.int64)
        free = out < 0
        out[free] = self.choice_of[states[free], np.asarray(actions)[free]]
        return out

    def sample(self, choices: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``(N,)`` int64 successors of ``choices`` ``(N,)`` for uniforms ``u`` ``(N,)`` in [0, 1).

        Inverse CDF on each choice's own row: the first branch whose cumulative probability exceeds
        ``u * total`` (vectorised binary search, exact per row).
        """
        cum, P = self.cumulative, self.branches
        choices = np.asarray(choices, dtype=np.int64)
        lo = P.indptr[choices].astype(np.int64)
        hi = P.indptr[choices + 1].astype(np.int64) - 1
        x = np.asarray(u, dtype=np.float64) * cum[hi]
        open_ = lo < hi
        while open_.any():
            mid = (lo + hi) // 2
            right = open_ & (cum[mid] <= x)
            lo = np.where(right, mid + 1, lo)
            hi = np.where(open_ & ~right, mid, hi)
            open_ = lo < hi
        return P.indices[lo].astype(np.int64)

    def self_loop(self, choices: np.ndarray) -> np.ndarray:
        """``(N,)`` bool: ``choices`` loop back to their state with probability 1."""
        return self.loop[choices]


def choice_table(model: ExplicitModel, actions: Sequence[str] | None = None) -> ChoiceTable:
    """The :class:`ChoiceTable` of ``model`` for an agent with ``actions`` (default: :func:`agent_actions`).

    ``actions`` may name actions the model does not have (never available). The model is refused
    (:func:`refuse_ambiguous`, :class:`PolicyError`) where two choices of a state match one action.
    """
    actions = agent_actions(model) if actions is None else tuple(actions)
    if model.choice_commands is None and any(is_command_name(a) for a in actions):
        named = [a for a in actions if is_command_name(a)]
        raise PolicyError(
            f"actions {named} are command names, but the model was built without them: build it with "
            "build_explicit(..., command_names=True)"
        )
    S, C = model.num_states, model.num_choices
    dtype = np.int32 if C < 2**31 - 1 else np.int64
    cs = model.choice_states()
    cols = action_columns(model, actions)
    choice_of, duplicate = _choice_of(S, len(actions), cs, cols, dtype)
    if duplicate is None and model.choice_commands is not None:
        _refuse_label_beside_its_commands(model, actions, cols, cs, model.choice_commands)
    n_choices = np.diff(model.row_groups)
    decision, mixed = _decision_states(model, cs, n_choices)
    refuse_ambiguous(model, actions, duplicate, ~decision & (n_choices > 1), mixed)
    forced: np.ndarray = np.where(~decision & (n_choices == 1), model.row_groups[:-1], -1).astype(dtype)

    indptr, targets = model.transitions.indptr, model.transitions.indices
    single = np.flatnonzero(np.diff(indptr) == 1)
    loop = np.zeros(C, dtype=bool)
    loop[single] = targets[indptr[single]] == cs[single]
    dead_end = forced >= 0
    dead_end[dead_end] = loop[forced[dead_end]]
    absorbing = (n_choices > 0) & (np.bincount(cs[loop], minlength=S) == n_choices)
    return ChoiceTable(
        model=model,
        actions=actions,
        choice_of=choice_of,
        decision=decision,
        forced=forced,
        dead_end=dead_end,
        absorbing=absorbing,
        loop=loop,
        columns=cols,
    )


def _choice_of(
    S: int, A: int, cs: np.ndarray, cols: np.ndarray, dtype: type
) -> tuple[np.ndarray, tuple[int, int, int] | None]:
    """``(S, A)`` the choice matching each (state, action) (-1: none), and the first (state, action, count) that two
    or more choices match (None: none does)."""
    known = np.flatnonzero(cols >= 0)
    choice_of: np.ndarray = np.full((S, A), -1, dtype=dtype)
    choice_of[cs[known], cols[known]] = known
    if int((choice_of >= 0).sum()) == len(known):
        return choice_of, None
    # two choices landed on one (state, action)
    keys, counts = np.unique(cs[known] * A + cols[known], return_counts=True)
    first = int(keys[np.argmax(counts > 1)])
    return choice_of, (first // A, first % A, int(counts[np.argmax(counts > 1)]))


def _decision_states(model: ExplicitModel, cs: np.ndarray, n_choices: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """``(S,)`` bool decision states, and (a model without command names) those offering an unlabelled choice beside
    labelled ones (None with command names)."""
    decision = labelled_states(model)
    if model.choice_commands is not None:  # several choices, some unlabelled: a decision among command names
        return decision | (n_choices > 1), None
    unlabelled = ~np.array([bool(a) for a in model.action_names], dtype=bool)[model.choice_actions]
    return decision, decision & (np.bincount(cs[unlabelled], minlength=model.num_states) > 0)


def _refuse_label_beside_its_commands(
    model: ExplicitModel, actions: Sequence[str], cols: np.ndarray, cs: np.ndarray, commands: np.ndarray
) -> None:
    """Refuse a label that addresses a choice in a state offering another choice of that label.

    With ``actions = ("m:1", "go")`` and two ``go`` commands in a state, ``go`` would silently mean
    the one ``m:1`` does not claim; the label does not identify it there.
    """
    lookup = {a: i for i, a in enumerate(actions)}
    label_col = np.array([lookup.get(a, -1) if a else -1 for a in model.action_names], dtype=np.int64)
    by_label = (cols >= 0) & (cols == label_col[model.choice_actions])
    if not by_label.any():
        return
    A = len(model.action_names)
    keys = cs * A + model.choice_actions
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    bad = by_label & (counts[inverse] > 1)
    if bad.any():
        c = int(np.argmax(bad))
        s, label = int(cs[c]), model.action_names[model.choice_actions[c]]
        same = np.flatnonzero(keys == keys[c])
        names = [model.command_names[commands[i]] for i in same]
        raise PolicyError(
            f"state {model.valuation_dict(s)} has {len(same)} choices labelled '{label}' (commands "
            f"{', '.join(names)}); the policy names some by command, so its action '{label}' does not "
            f"say which of the others it means: name each of them by command "
            f"({', '.join(n for n in names if n not in lookup)})"
        )


def agent_actions(model: ExplicitModel) -> tuple[str, ...]:
    """The fewest names that address every choice of ``model``: its labels, and command names where labels do not tell.

    A label stays where no state has two choices of it; the choices of a label that some state repeats,
    and unlabelled choices of decision states, are named by command (model order). Without command
    names: the labels.
    """
    labels = tuple(a for a in dict.fromkeys(model.action_names) if a)
    if model.choice_commands is None:
        return labels
    cs = model.choice_states()
    A = len(model.action_names)
    keys, counts = np.unique(cs * A + model.choice_actions, return_counts=True)
    repeated = {model.action_names[int(k % A)] for k in keys[counts > 1]}
    n_choices = np.diff(model.row_groups)
    decision = labelled_states(model) | (n_choices > 1)
    label_of = np.asarray(model.action_names, dtype=object)[model.choice_actions]
    by_command = decision[cs] & np.isin(label_of, list(repeated | {""})) & (model.choice_commands > 0)
    commands = sorted(
        (model.command_names[int(c)] for c in distinct(model.choice_commands[by_command])),
        key=lambda n: [(m, int(k)) for m, _, k in (p.rpartition(":") for p in n.split("+"))],
    )
    return tuple(a for a in labels if a not in repeated) + tuple(commands)


def forced_start_message(table: ChoiceTable, bound: int | None) -> str | None:
    """A note when a step-bounded property starts in a forced state (the policy is not asked there), else None.

    E.g. a model whose unlabelled first command draws the start state (a Gymnasium environment with
    an initial distribution): ``F<=k`` then counts that step, so k-1 steps are the policy's.
    """
    init = np.asarray(table.model.initial_states, dtype=np.int64)
    if bound is None or not len(init) or not ((table.forced[init] >= 0) & ~table.dead_end[init]).all():
        return None
    return (
        f"the initial state takes a forced step (a lone unlabelled command) before the policy is asked: the step "
        f"bound {bound} counts it, so at most {bound - 1} steps are the policy's"
    )


def untaken_message(untaken: dict[str, int], where: str = "states") -> str:
    """One line saying which choices a policy never takes (for warnings), from :meth:`ChoiceTable.untaken`."""
    shown = ", ".join(f"{name} ({n} {where})" for name, n in list(untaken.items())[:8])
    more = f" and {len(untaken) - 8} more" if len(untaken) > 8 else ""
    return (
        f"the policy names no action for these choices, so it never takes them: {shown}{more}; "
        "add them to its actions to let it (rlverify inspect MODEL lists the names)"
    )


def policy_weights(
    probs: np.ndarray,
    available: np.ndarray,
    *,
    mode: str,
    unavailable: str,
    where: Callable[[int], object],
    refuse: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """The distribution over actions a policy is followed with, and the mass that stalls.

    Args:
        probs: ``(N, A)`` policy rows (validated distributions; rescaled here to sum to 1 exactly).
        available: ``(N, A)`` bool availability of the same actions.
        mode: ``stochastic``, or ``deterministic`` (argmax; ties: the first action; with
            ``renormalize``, the argmax among available actions).
        unavailable: ``stall`` (mass on unavailable actions stalls) or ``renormalize`` (the
            available actions are rescaled; the explicit opt-in).
        where: row index -> the state it describes (for messages).

    Returns:
        ``(p, stalled)``: ``(N, A)`` float64 weights (zero on unavailable actions with ``renormalize``)
        and ``(N,)`` float64 mass on unavailable actions (0 with ``renormalize``).

        refuse: with ``renormalize``, raise for a row with no available mass (False: give it no weight and all its
            mass as stalled, for a caller that refuses only if such a state is reached under the policy).

    Raises:
        PolicyError: with ``renormalize`` and ``refuse``, a row with all its mass on unavailable actions.
    """
    p = np.asarray(probs, dtype=np.float64)
    renormalize = unavailable == Unavailable.RENORMALIZE
    if len(p):
        # rows were validated (sums within ROW_SUM_TOLERANCE); rescale away float32 rounding so the
        # chain's rows sum to 1 as closely as the MDP's own
        p = p / p.sum(axis=1, keepdims=True)
    if mode == Mode.DETERMINISTIC:
        scores = np.where(available, p, -np.inf) if renormalize else p
        best = np.argmax(scores, axis=1)
        nothing = scores[np.arange(len(p)), best] <= 0.0 if renormalize and len(p) else np.zeros(len(p), dtype=bool)
        p = np.zeros_like(p)
        p[np.arange(len(p)), best] = 1.0
        p[nothing] = 0.0  # a greedy (q-values) policy whose choice is unavailable: no order is left
    stalled = np.where(available, 0.0, p).sum(axis=1)
    if renormalize:
        kept = 1.0 - stalled
        # no available action has mass (1 - stalled may round to a tiny positive number then)
        nothing = (kept <= 0) | ~(available & (p > 0)).any(axis=1)
        if refuse:
            refuse_all_unavailable(nothing, where)
        out = np.where(available & ~nothing[:, None], p, 0.0) / np.where(nothing, 1.0, kept)[:, None]
        return out, nothing.astype(np.float64)
    return p, stalled


def refuse_all_unavailable(zero: np.ndarray, where: Callable[[int], object]) -> None:
    """With ``renormalize``: raise :class:`PolicyError` for the first row of ``zero`` ``(N,)`` bool (no available mass)."""
    if zero.any():
        raise PolicyError(
            f"policy puts all its mass on unavailable actions in state {where(int(np.argmax(zero)))}; "
            "nothing to renormalise (use --unavailable stall)"
        )
