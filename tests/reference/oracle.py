"""An independent reference for rlverify: a policy's value on a PRISM/JANI MDP, from Storm's data and numpy only.

Nothing here comes from rlverify (no import; ``test_oracle_independence`` checks it): the MDP is built by
stormpy *without* properties, every choice is identified from Storm's own records, and the policy's
chain is formed and solved with numpy/scipy, following the semantics the README specifies:

* **Choice names.** A PRISM choice's command set (Storm's choice origins: global command indices) gives
  each command's module and 1-based position among that module's commands; a JANI choice's edges are
  identified by rewriting the file so that every automaton gets a fresh transient int variable
  (``refEdgeA0``, ...) assigned the 1-based *file* position of the edge in each of its destinations;
  Storm turns each into a reward model, whose state-action reward is that edge's position (Storm
  reorders a location's edges, so its own edge indices are not file positions). A choice's name is
  ``MODULE:K``, several synchronising modules joined by ``+`` in module order; Storm's deadlock
  self-loops have no name.
* **How a policy addresses choices.** A choice matches the policy's action named by its command name if
  the policy has one, else the one named by its action label (unlabelled choices: by name only). A state
  with a labelled choice, or with several choices, is a *decision* state (the policy is asked); a state
  with one unlabelled choice takes it. Choices the policy names no action for are never taken. Two
  choices of a state matching one action, or a label that matches a choice beside another choice of
  that label, cannot be followed (:class:`Refused`).
* **Modes.** ``stochastic``: each action with its probability; ``deterministic``: the argmax (ties: the
  first action in the policy's order; with ``renormalize``, the argmax among the available actions).
  ``stall``: mass on actions the state does not offer goes to an absorbing ``stalled`` sink that
  satisfies no state formula; ``renormalize``: the available actions are rescaled (refused where no
  available action has mass).
* **Property-directed.** States that decide the property (target, or outside the ``U``'s left side) are
  absorbing and the policy is not asked there; ``stalled`` is the probability of reaching the sink.

Values: bounded reachability by iteration; unbounded by graph analysis (prob0/prob1) and a sparse
linear solve; expected reward until a target (infinite where it is missed with positive probability);
cumulative reward ``C<=k``; Pmin/Pmax and Rmin/Rmax of the MDP by value iteration.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

#: prefix of the transient variables the JANI rewrite adds (valid Storm identifiers, no leading underscore)
MARKER = "refEdgeA"


class Refused(Exception):
    """The policy cannot be followed on this model (an ambiguous name, or nothing to renormalise)."""


class OutOfRange(Exception):
    """An update reachable in the MDP leaves its variable's range (Storm cannot store the valuation); ``variable``."""

    def __init__(self, message: str, variable: str) -> None:
        super().__init__(message)
        self.variable = variable


@dataclass
class RefModel:
    """An MDP as Storm builds it, with every choice named.

    Attributes:
        kind: ``prism`` or ``jani``.
        features: Storm's variable names in its valuations (``x``, ``AUTOMATON_VAR``, ``_loc_AUTOMATON``).
        values: ``(S, d)`` int64 valuations (booleans 0/1), columns as ``features``.
        initial: the initial state.
        row_start: ``(S+1,)`` the choices of state ``s`` are ``row_start[s]:row_start[s+1]``.
        choice_label: ``(C,)`` action label of each choice ('' unlabelled).
        choice_name: ``(C,)`` command name of each choice ('' for Storm's deadlock loops).
        T: ``(C, S)`` CSR transition probabilities.
        labels: state labels ``(S,)`` bool; state_rewards ``(S,)``, action_rewards ``(C,)`` by reward model.
    """

    kind: str
    features: tuple[str, ...]
    values: np.ndarray
    initial: int
    row_start: np.ndarray
    choice_label: list[str]
    choice_name: list[str]
    T: sp.csr_matrix
    labels: dict[str, np.ndarray]
    state_rewards: dict[str, np.ndarray] = field(default_factory=dict)
    action_rewards: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def num_states(self) -> int:
        return len(self.row_start) - 1

    @property
    def num_choices(self) -> int:
        return len(self.choice_label)

    def var(self, name: str) -> np.ndarray:
        """``(S,)`` values of one variable."""
        return self.values[:, self.features.index(name)]

    def choice_states(self) -> np.ndarray:
        return np.repeat(np.arange(self.num_states), np.diff(self.row_start))

    def key(self, s: int) -> tuple[int, ...]:
        return tuple(int(v) for v in self.values[s])


# ---------------------------------------------------------------------------------------------------------------
# building


def read_jani(path: str | Path) -> dict:
    """A JANI file's JSON (a UTF-8 byte order mark allowed)."""
    return json.loads(Path(path).read_text(encoding="utf-8-sig"))


def mark_jani_edges(data: dict) -> tuple[dict, list[str]]:
    """A copy of JANI ``data`` whose automaton ``i`` assigns its fresh transient int ``refEdgeA<i>`` the 1-based
    file position of the edge in every destination; returns it and the marker names (one per automaton)."""
    data = json.loads(json.dumps(data))
    taken = {v["name"] for v in data.get("variables", [])}
    for a in data["automata"]:
        taken |= {v["name"] for v in a.get("variables", [])}
    markers = []
    for i, automaton in enumerate(data["automata"]):
        name = f"{MARKER}{i}"
        while name in taken:
            name += "x"
        markers.append(name)
        data.setdefault("variables", []).append({"name": name, "type": "int", "initial-value": 0, "transient": True})
        for k, edge in enumerate(automaton["edges"]):
            for dest in edge["destinations"]:
                dest.setdefault("assignments", []).append({"ref": name, "value": k + 1})
    return data, markers


def _options(checked: bool = False):
    import stormpy

    options = stormpy.BuilderOptions(build_full=True)
    options.set_build_state_valuations()
    options.set_build_choice_labels()
    options.set_build_choice_origins()
    options.set_build_all_labels()
    options.set_build_all_reward_models()
    if checked:
        options.set_exploration_checks(True)
    return options


def _build(symbolic):
    import re

    import stormpy

    # Storm's exploration checks refuse every update leaving its range (without them the value wraps into the
    # variable's bits, often silently); they also refuse probabilities that sum to 1 only up to rounding (QVBS's PPDDL
    # models), which are then built unchecked: a valuation decoded out of its range still fails the build
    try:
        return stormpy.build_model(symbolic, options=_options(checked=True))
    except RuntimeError as exc:
        found = re.search(r"out-of-bounds value \(\S+\) for the variable '([^']+)'", str(exc))
        if found:
            raise OutOfRange(str(exc), found.group(1)) from None
        if "sum to one" not in str(exc) and "some to one" not in str(exc):
            raise
    try:
        return stormpy.build_model(symbolic, options=_options())
    except RuntimeError as exc:
        found = re.search(r"out of range for variable (\S+?):", str(exc))
        if found:
            raise OutOfRange(str(exc), found.group(1)) from None
        raise


def build_prism(path: str | Path, constants: str = "") -> RefModel:
    """Build a PRISM program with Storm (no properties: nothing is made terminal) and name every choice."""
    import stormpy

    program = stormpy.parse_prism_program(str(path))
    if constants:
        program, _ = stormpy.instantiate_constants(program, constants)
    mdp = _build(program)
    command: dict[int, tuple[int, str]] = {}  # global index -> (module index, "module:k")
    for mi, module in enumerate(program.modules):
        for k, c in enumerate(module.commands):
            command[int(c.global_index)] = (mi, f"{module.name}:{k + 1}")
    origins = mdp.choice_origins.as_prism_choice_origins()
    names = []
    for c in range(mdp.nr_choices):
        parts = sorted(command[int(g)] for g in origins.get_command_set(c))
        names.append("+".join(n for _, n in parts))
    return _assemble(mdp, "prism", names, drop=())


def build_jani(path: str | Path, constants: str = "", *, check_same: bool = True) -> RefModel:
    """Build a JANI model with its edges marked (:func:`mark_jani_edges`) and name every choice by file position.

    ``check_same``: also build the unmarked file and check equal state, choice and transition counts (the
    marker variables are transient: they must not change the MDP).
    """
    data = read_jani(path)
    marked, markers = mark_jani_edges(data)
    automata = [a["name"] for a in data["automata"]]
    # not features: transient variables (labels, rewards, the markers), which Storm lists in its valuations
    transient = {v["name"] for v in marked["variables"] if v.get("transient")}
    transient |= {f"{a['name']}_{v['name']}" for a in data["automata"] for v in a.get("variables", []) if v.get("transient")}
    # an automaton with one location has no location feature
    transient |= {f"_loc_{a['name']}" for a in data["automata"] if len(a["locations"]) == 1}
    mdp = _build_jani_text(json.dumps(marked), constants)
    if check_same:
        plain = _build_jani_text(json.dumps(data), constants)
        counts = (plain.nr_states, plain.nr_choices, plain.nr_transitions)
        marked_counts = (mdp.nr_states, mdp.nr_choices, mdp.nr_transitions)
        assert counts == marked_counts, f"marking the edges changed the MDP: {counts} != {marked_counts}"
    names = []
    edge_of = []
    for m in markers:
        rm = mdp.reward_models[m]
        r = np.asarray(rm.state_action_rewards, dtype=np.float64)
        k = np.rint(r).astype(np.int64)
        assert np.allclose(r, k, atol=1e-6), f"marker {m} is not an integer"
        edge_of.append(k)
    for c in range(mdp.nr_choices):
        names.append("+".join(f"{automata[i]}:{int(e[c])}" for i, e in enumerate(edge_of) if e[c] > 0))
    return _assemble(mdp, "jani", names, drop=tuple(sorted(transient)))


def _build_jani_text(text: str, constants: str):
    import stormpy

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.jani"
        path.write_text(text, encoding="utf-8")
        model, _ = stormpy.parse_jani_model(str(path))
    if constants:
        model, _ = stormpy.instantiate_constants(model, constants)
    return _build(model)


def _assemble(mdp, kind: str, names: list[str], drop: tuple[str, ...]) -> RefModel:
    S, C = mdp.nr_states, mdp.nr_choices
    valuations = mdp.state_valuations
    features, columns = [], []
    for v in valuations.get_all_variables():
        if v.name in drop:
            continue
        if v.has_boolean_type():
            col = np.asarray(valuations.get_boolean_values(v), dtype=np.int64)
        elif v.has_integer_type():
            col = np.asarray(valuations.get_int64_values(v), dtype=np.int64)
        else:
            raise NotImplementedError(f"variable {v.name} of a type the reference does not handle")
        features.append(v.name)
        columns.append(col)
    order = np.argsort(features, kind="stable")
    features = [features[i] for i in order]
    values = np.stack([columns[i] for i in order], axis=1) if columns else np.zeros((S, 0), dtype=np.int64)
    matrix = mdp.transition_matrix
    row_start = np.array([matrix.get_row_group_start(s) for s in range(S)] + [C], dtype=np.int64)
    rows, cols, probs = [], [], []
    for r in range(C):
        for e in matrix.get_row(r):
            rows.append(r)
            cols.append(e.column)
            probs.append(e.value)
    T = sp.csr_matrix((np.asarray(probs, dtype=np.float64), (rows, cols)), shape=(C, S))
    choice_labeling = mdp.choice_labeling
    labels_of = []
    for c in range(C):
        ls = sorted(choice_labeling.get_labels_of_choice(c))
        assert len(ls) <= 1, f"choice {c} has several labels {ls}"
        labels_of.append(ls[0] if ls else "")
    labels = {}
    for name in mdp.labeling.get_labels():
        bits = mdp.labeling.get_states(name)
        labels[name] = np.array([bits.get(s) for s in range(S)], dtype=bool)
    state_rewards, action_rewards = {}, {}
    for name, rm in mdp.reward_models.items():
        if name.startswith(MARKER) and name in drop:
            continue
        state_rewards[name] = np.asarray(rm.state_rewards, dtype=np.float64) if rm.has_state_rewards else np.zeros(S)
        action_rewards[name] = (
            np.asarray(rm.state_action_rewards, dtype=np.float64) if rm.has_state_action_rewards else np.zeros(C)
        )
        assert not rm.has_transition_rewards, "transition rewards are not handled by the reference"
    initial = list(mdp.initial_states)
    assert len(initial) == 1, f"{len(initial)} initial states"
    return RefModel(
        kind=kind,
        features=tuple(features),
        values=values,
        initial=int(initial[0]),
        row_start=row_start,
        choice_label=labels_of,
        choice_name=names,
        T=T,
        labels=labels,
        state_rewards=state_rewards,
        action_rewards=action_rewards,
    )


# ---------------------------------------------------------------------------------------------------------------
# names a policy can use


def label_identifies(model: RefModel) -> dict[str, bool]:
    """For each action label: True where no state offers two choices of it."""
    out: dict[str, bool] = {}
    for s in range(model.num_states):
        seen: set[str] = set()
        for c in range(model.row_start[s], model.row_start[s + 1]):
            a = model.choice_label[c]
            if not a:
                continue
            out[a] = out.get(a, True) and a not in seen
            seen.add(a)
    return out


def natural_actions(model: RefModel) -> list[str]:
    """Labels where they identify the choice; command names for the other choices of decision states."""
    identifies = label_identifies(model)
    labels = [a for a in dict.fromkeys(model.choice_label) if a and identifies[a]]
    names: set[str] = set()
    for s in range(model.num_states):
        lo, hi = model.row_start[s], model.row_start[s + 1]
        decision = hi - lo > 1 or any(model.choice_label[c] for c in range(lo, hi))
        if not decision:
            continue
        for c in range(lo, hi):
            a = model.choice_label[c]
            if (not a or not identifies[a]) and model.choice_name[c]:
                names.add(model.choice_name[c])
    return labels + sorted(names, key=_name_order)


def all_command_names(model: RefModel) -> list[str]:
    """Every choice's command name (the policy then names every choice by command)."""
    return sorted({n for n in model.choice_name if n}, key=_name_order)


def _name_order(name: str) -> list[tuple[str, int]]:
    return [(m, int(k)) for m, _, k in (p.rpartition(":") for p in name.split("+"))]


# ---------------------------------------------------------------------------------------------------------------
# the policy's chain


@dataclass
class RefPolicy:
    """``fn((N, d) float64 features) -> (N, A) probabilities`` over ``actions``; features by Storm's names."""

    features: Sequence[str]
    actions: Sequence[str]
    fn: Callable[[np.ndarray], np.ndarray]


@dataclass
class Chain:
    """The policy's chain: ``P`` ``(S+1, S+1)`` CSR over the model's states and the ``stalled`` sink (index S).

    ``reward``: by reward model, ``(S+1,)`` expected reward per step (state reward + policy-weighted action
    rewards). ``reachable``: ``(S+1,)`` bool, reachable from the initial state.
    """

    P: sp.csr_matrix
    rewards: dict[str, np.ndarray]
    reachable: np.ndarray
    initial: int

    @property
    def sink(self) -> int:
        return self.P.shape[0] - 1

    @property
    def num_states(self) -> int:
        """Reachable states, the sink counted where it is reached."""
        return int(self.reachable.sum())


def induced_chain(
    model: RefModel,
    policy: RefPolicy,
    *,
    mode: str = "stochastic",
    unavailable: str = "stall",
    absorbing: np.ndarray | None = None,
) -> Chain:
    """The chain ``P(s,s') = sum_a pi(a|s) T(s,a,s')`` (plus the ``stalled`` sink); ``absorbing`` ``(S,)``: states
    that decide the property (made absorbing, the policy not asked). Raises :class:`Refused`."""
    assert mode in ("stochastic", "deterministic") and unavailable in ("stall", "renormalize")
    S, C = model.num_states, model.num_choices
    absorbing = np.zeros(S, dtype=bool) if absorbing is None else np.asarray(absorbing, dtype=bool)
    cs = model.choice_states()
    n_choices = np.diff(model.row_start)
    labelled = np.zeros(S, dtype=bool)
    labelled[cs[[bool(a) for a in model.choice_label]]] = True
    decision = (labelled | (n_choices > 1)) & ~absorbing
    choice_of, ambiguous = _choice_table(model, policy, decision)
    weights = np.zeros(C)
    stalled = np.zeros(S)
    nothing = np.zeros(S, dtype=bool)  # renormalize with no available mass
    dec = np.flatnonzero(decision)
    if len(dec):
        _decision_weights(model, policy, dec, choice_of, mode, unavailable, weights, stalled, nothing)
    forced = ~decision & ~absorbing
    for s in np.flatnonzero(forced):
        assert n_choices[s] == 1, f"state {s}: {n_choices[s]} choices and not a decision state"
        weights[model.row_start[s]] = 1.0
    # P = W T over the model's states; absorbing states loop; stalled mass to the sink
    W = sp.csr_matrix((weights, (cs, np.arange(C))), shape=(S, C))
    P = (W @ model.T).tolil()
    P.resize((S + 1, S + 1))
    for s in np.flatnonzero(absorbing):
        P.rows[s], P.data[s] = [s], [1.0]
    P = P.tocsr()
    P = P + sp.csr_matrix(
        (np.r_[stalled[stalled > 0], 1.0], (np.r_[np.flatnonzero(stalled > 0), S], np.full(int((stalled > 0).sum()) + 1, S))),
        shape=(S + 1, S + 1),
    )
    P = P.tocsr()
    P.eliminate_zeros()
    reachable = _forward(P, model.initial)
    bad = reachable[:S] & ambiguous
    if bad.any():
        raise Refused(f"state {model.key(int(np.argmax(bad)))}: two choices match one action of the policy")
    bad = reachable[:S] & nothing
    if bad.any():
        raise Refused(f"state {model.key(int(np.argmax(bad)))}: no available action has mass (renormalize)")
    rewards = {}
    for name in model.state_rewards:
        r = model.state_rewards[name] + np.bincount(cs, weights=weights * model.action_rewards[name], minlength=S)
        rewards[name] = np.r_[np.where(absorbing, model.state_rewards[name], r), 0.0]
    return Chain(P=P, rewards=rewards, reachable=reachable, initial=model.initial)


def _choice_table(model: RefModel, policy: RefPolicy, decision: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(S, A)`` the choice each action of the policy takes in each decision state (-1: none), by command name
    first, then label; and ``(S,)`` which states a policy cannot be followed in (checked where reached)."""
    S, C, A = model.num_states, model.num_choices, len(policy.actions)
    index = {a: i for i, a in enumerate(policy.actions)}
    column = np.full(C, -1, dtype=np.int64)
    by_label = np.zeros(C, dtype=bool)
    for c in range(C):
        name, label = model.choice_name[c], model.choice_label[c]
        if name and name in index:
            column[c] = index[name]
        elif label and label in index:
            column[c] = index[label]
            by_label[c] = True
    ambiguous = np.zeros(S, dtype=bool)
    choice_of = np.full((S, A), -1, dtype=np.int64)
    for s in np.flatnonzero(decision):
        lo, hi = model.row_start[s], model.row_start[s + 1]
        labels_here = [model.choice_label[c] for c in range(lo, hi)]
        for c in range(lo, hi):
            a = column[c]
            if a < 0:
                continue
            if choice_of[s, a] >= 0:
                ambiguous[s] = True
            choice_of[s, a] = c
            if by_label[c] and labels_here.count(model.choice_label[c]) > 1:
                ambiguous[s] = True
    return choice_of, ambiguous


def _decision_weights(
    model: RefModel,
    policy: RefPolicy,
    dec: np.ndarray,
    choice_of: np.ndarray,
    mode: str,
    unavailable: str,
    weights: np.ndarray,
    stalled: np.ndarray,
    nothing: np.ndarray,
) -> None:
    """Fill ``weights`` (per choice), ``stalled`` and ``nothing`` (per state) for the decision states ``dec``."""
    A = len(policy.actions)
    feats = [model.features.index(f) for f in policy.features]
    probs = np.asarray(policy.fn(model.values[dec][:, feats].astype(np.float64)), dtype=np.float64)
    assert probs.shape == (len(dec), A)
    probs = probs / probs.sum(axis=1, keepdims=True)
    avail = choice_of[dec] >= 0
    if mode == "deterministic":
        scores = np.where(avail, probs, -np.inf) if unavailable == "renormalize" else probs
        best = np.argmax(scores, axis=1)
        if unavailable == "renormalize":
            nothing[dec] = scores[np.arange(len(dec)), best] <= 0
        probs = np.zeros_like(probs)
        probs[np.arange(len(dec)), best] = 1.0
    off = np.where(avail, 0.0, probs).sum(axis=1)
    if unavailable == "renormalize":
        kept = np.where(avail, probs, 0.0)
        total = kept.sum(axis=1)
        nothing[dec] |= total <= 0
        probs = kept / np.where(total > 0, total, 1.0)[:, None]
    else:
        stalled[dec] = off
    for i, s in enumerate(dec):
        for a in np.flatnonzero(avail[i]):
            weights[choice_of[s, a]] = probs[i, a]


def _forward(P: sp.csr_matrix, start: int) -> np.ndarray:
    seen = np.zeros(P.shape[0], dtype=bool)
    seen[start] = True
    frontier = np.array([start])
    while len(frontier):
        succ = np.unique(P[frontier].indices)
        frontier = succ[~seen[succ]]
        seen[frontier] = True
    return seen


def _backward(P: sp.csr_matrix, targets: np.ndarray, through: np.ndarray) -> np.ndarray:
    """States that reach ``targets`` (bool) along paths whose other states are in ``through`` (bool)."""
    Pt = P.T.tocsr()
    seen = targets.copy()
    frontier = np.flatnonzero(targets)
    while len(frontier):
        pred = np.unique(Pt[frontier].indices)
        pred = pred[~seen[pred] & through[pred]]
        seen[pred] = True
        frontier = pred
    return seen


# ---------------------------------------------------------------------------------------------------------------
# values on a chain (vectors over its S+1 states; the sink satisfies no state formula)


def extend(x: np.ndarray) -> np.ndarray:
    """A ``(S,)`` state formula over the chain's ``S+1`` states: false at the sink."""
    return np.r_[np.asarray(x, dtype=bool), False]


def until(chain: Chain, target: np.ndarray, left: np.ndarray | None = None) -> np.ndarray:
    """``P=? [left U target]`` (``F target`` without ``left``) per state; ``target``/``left`` ``(S+1,)`` bool."""
    P = chain.P
    n = P.shape[0]
    left = np.ones(n, dtype=bool) if left is None else left
    target = np.asarray(target, dtype=bool)
    go = left & ~target
    can = _backward(P, target, go)
    no = ~can
    # states that can reach a `no` state through `go` states have probability < 1
    below = _backward(P, no, go & can)
    yes = target | (can & ~below)
    x = np.zeros(n)
    x[yes] = 1.0
    maybe = np.flatnonzero(can & ~yes)
    if len(maybe):
        A = P[maybe][:, maybe]
        b = np.asarray(P[maybe][:, np.flatnonzero(yes)].sum(axis=1)).ravel()
        x[maybe] = spla.spsolve((sp.identity(len(maybe), format="csc") - A).tocsc(), b)
    return x


def bounded_until(chain: Chain, target: np.ndarray, k: int, left: np.ndarray | None = None) -> np.ndarray:
    """``P=? [left U<=k target]`` per state."""
    n = chain.P.shape[0]
    left = np.ones(n, dtype=bool) if left is None else left
    go = (left & ~target).astype(np.float64)
    x = target.astype(np.float64)
    for _ in range(k):
        x = np.where(target, 1.0, go * (chain.P @ x))
    return x


def reach_reward(chain: Chain, reward: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``R=? [F target]``: expected reward before reaching ``target`` (inf where it is missed w.p. > 0)."""
    p = until(chain, target)
    x = np.full(len(target), np.inf)
    x[target] = 0.0
    sure = np.flatnonzero((p >= 1.0) & ~target)
    # a state reaching the target surely moves only to such states or targets: solve on them
    if len(sure):
        sure_mask = np.zeros(len(target), dtype=bool)
        sure_mask[sure] = True
        Pu = chain.P[sure]
        assert np.all(sure_mask[Pu.indices] | target[Pu.indices])
        A = Pu[:, sure]
        x[sure] = spla.spsolve((sp.identity(len(sure), format="csc") - A).tocsc(), reward[sure])
    return x


def cumulative_reward(chain: Chain, reward: np.ndarray, k: int) -> np.ndarray:
    """``R=? [C<=k]``: expected reward of the first ``k`` steps."""
    x = np.zeros(chain.P.shape[0])
    for _ in range(k):
        x = reward + chain.P @ x
    return x


def stalled_probability(chain: Chain, bound: int | None = None) -> float:
    """Probability of reaching the ``stalled`` sink from the initial state (within ``bound`` steps, if given)."""
    target = np.zeros(chain.P.shape[0], dtype=bool)
    target[chain.sink] = True
    if not chain.reachable[chain.sink]:
        return 0.0
    x = until(chain, target) if bound is None else bounded_until(chain, target, bound)
    return float(x[chain.initial])


# ---------------------------------------------------------------------------------------------------------------
# the MDP over all schedulers (value iteration)


def _optimum(model: RefModel, y: np.ndarray, maximize: bool) -> np.ndarray:
    f = np.maximum.reduceat if maximize else np.minimum.reduceat
    return f(y, model.row_start[:-1])


def optimal_until(
    model: RefModel,
    target: np.ndarray,
    left: np.ndarray | None = None,
    *,
    maximize: bool,
    tol: float = 1e-14,
    max_iter: int = 1_000_000,
) -> np.ndarray:
    """Pmax or Pmin of ``left U target`` per state, by value iteration from below after graph analysis.

    Pmax = 0 where no path reaches the target; Pmin = 0 where some scheduler avoids it forever (the greatest
    set of non-target states that are outside ``left`` or have a choice whose successors all stay in the set).
    """
    S = model.num_states
    target = np.asarray(target, dtype=bool)
    left = np.ones(S, dtype=bool) if left is None else np.asarray(left, dtype=bool)
    go = left & ~target
    cs = model.choice_states()
    T = model.T
    if maximize:
        # reach the target with positive probability under some scheduler (backward over any choice)
        M = sp.csr_matrix((np.ones(len(T.data)), T.indices, T.indptr), shape=T.shape)
        succ = sp.csr_matrix((np.ones(len(cs)), (cs, np.arange(len(cs)))), shape=(S, len(cs))) @ M
        zero = ~_backward(succ.tocsr(), target, go)
    else:
        # greatest set Z of non-target states that are outside `left` or have a choice staying inside Z
        M = sp.csr_matrix((np.ones(len(T.data)), T.indices, T.indptr), shape=T.shape)
        zero = ~target
        while True:
            leaves = (M @ (~zero).astype(np.float64)) > 0
            stays = np.bincount(cs, weights=(~leaves).astype(np.float64), minlength=S) > 0
            keep = zero & (~left | stays)
            if (keep == zero).all():
                break
            zero = keep
    x = target.astype(np.float64)
    for _ in range(max_iter):
        y = _optimum(model, T @ x, maximize)
        new = np.where(target, 1.0, np.where(zero, 0.0, np.where(go, y, 0.0)))
        if np.max(np.abs(new - x)) < tol:
            return new
        x = new
    raise RuntimeError("value iteration did not converge")


def optimal_reach_reward(
    model: RefModel, reward: str, target: np.ndarray, *, maximize: bool, tol: float = 1e-12, max_iter: int = 10_000_000
) -> np.ndarray:
    """Rmax or Rmin of ``F target`` per state by value iteration from below; only for models where every
    scheduler reaches the target with probability 1 (checked: Pmin = 1)."""
    target = np.asarray(target, dtype=bool)
    pmin = optimal_until(model, target, maximize=False)
    assert np.all(pmin[_forward_mdp(model)] > 1 - 1e-9), "some scheduler misses the target: Rmax/Rmin not handled"
    r = model.action_rewards[reward] + model.state_rewards[reward][model.choice_states()]
    x = np.zeros(model.num_states)
    for _ in range(max_iter):
        new = np.where(target, 0.0, _optimum(model, r + model.T @ x, maximize))
        if np.max(np.abs(new - x)) <= tol * max(1.0, np.max(np.abs(new))):
            return new
        x = new
    raise RuntimeError("value iteration did not converge")


def _forward_mdp(model: RefModel) -> np.ndarray:
    cs = model.choice_states()
    W = sp.csr_matrix((np.ones(len(cs)), (cs, np.arange(len(cs)))), shape=(model.num_states, model.num_choices))
    return _forward((W @ model.T).tocsr(), model.initial)


# ---------------------------------------------------------------------------------------------------------------
# one property, end to end


@dataclass(frozen=True)
class Query:
    """A property in the reference's terms. ``path``: ``U`` (``F`` when ``left`` is None), ``R`` (``R=? [F target]``)
    or ``C`` (``R=? [C<=bound]``); ``target``/``left``: ``model -> (S,) bool``; ``bound``: step bound (U, C)."""

    path: str
    target: Callable[[RefModel], np.ndarray] | None = None
    left: Callable[[RefModel], np.ndarray] | None = None
    bound: int | None = None
    reward: str | None = None


@dataclass(frozen=True)
class Answer:
    """The reference's value at the initial state, the stalled probability and the chain's reachable states
    (the ``stalled`` sink counted where it is reached)."""

    value: float
    stalled: float
    states: int


def evaluate(
    model: RefModel, policy: RefPolicy, query: Query, *, mode: str = "stochastic", unavailable: str = "stall"
) -> Answer:
    """The value of ``query`` on the chain ``policy`` induces on ``model`` (property-directed: states that
    decide it are absorbing: the target, and states outside ``left``). Raises :class:`Refused`.

    ``stalled``: the probability of reaching the ``stalled`` sink before the property is decided, i.e. before
    an absorbing state and, for a step-bounded property (``U<=k``, ``C<=k``), within its ``k`` steps."""
    S = model.num_states
    target = np.asarray(query.target(model), dtype=bool) if query.target is not None else np.zeros(S, dtype=bool)
    left = np.asarray(query.left(model), dtype=bool) if query.left is not None else np.ones(S, dtype=bool)
    absorbing = target | ~left if query.path in ("U", "R") else np.zeros(S, dtype=bool)
    chain = induced_chain(model, policy, mode=mode, unavailable=unavailable, absorbing=absorbing)
    t, lt = extend(target), extend(left)
    if query.path == "U":
        x = until(chain, t, lt) if query.bound is None else bounded_until(chain, t, query.bound, lt)
    elif query.path == "R":
        x = reach_reward(chain, chain.rewards[query.reward], t)
    elif query.path == "C":
        x = cumulative_reward(chain, chain.rewards[query.reward], query.bound)
    else:
        raise ValueError(query.path)
    # stalled before the property is decided: within the step bound, if any (after it the property is decided)
    return Answer(value=float(x[chain.initial]), stalled=stalled_probability(chain, query.bound), states=chain.num_states)


# ---------------------------------------------------------------------------------------------------------------
# random policies keyed on the state (pure functions of the features: any engine may ask any state, in any order)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on ``uint64`` arrays (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def state_uniforms(states: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``(N, n)`` uniforms in [0, 1), a fixed random function of each row of ``states`` ``(N, d)`` and ``seed``."""
    ints = np.rint(np.asarray(states, dtype=np.float64)).astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        h = np.full(len(ints), np.uint64(seed) * _GOLDEN + np.uint64(1), dtype=np.uint64)
        for j in range(ints.shape[1]):
            h = _mix(h ^ (ints[:, j] + np.uint64(j + 1) * _GOLDEN))
        out = np.stack([_mix(h + np.uint64(a + 1) * _GOLDEN) for a in range(n)], axis=1) if n else np.zeros((len(h), 0))
    return (out >> np.uint64(11)).astype(np.float64) / float(2**53)


#: kinds of random policy: ``uniform``; ``stochastic`` (random positive weights); ``sparse`` (random weights, some
#: actions 0); ``deterministic`` (one random action per state: a random deterministic table)
POLICY_KINDS = ("uniform", "stochastic", "sparse", "deterministic")


def random_policy(features: Sequence[str], actions: Sequence[str], kind: str, seed: int = 0) -> RefPolicy:
    """A policy of ``kind`` (:data:`POLICY_KINDS`) whose row for a state depends only on its features."""
    A = len(actions)

    def fn(states: np.ndarray) -> np.ndarray:
        states = np.asarray(states, dtype=np.float64)
        if kind == "uniform":
            return np.full((len(states), A), 1.0 / A)
        u = state_uniforms(states, A, seed)
        if kind == "stochastic":
            w = u + 0.05
        elif kind == "sparse":
            w = np.where(u < 0.4, 0.0, u)
            w[np.arange(len(u)), np.argmax(u, axis=1)] = 1.0
        elif kind == "deterministic":
            w = np.zeros_like(u)
            w[np.arange(len(u)), np.argmax(u, axis=1)] = 1.0
        else:
            raise ValueError(kind)
        return w / w.sum(axis=1, keepdims=True)

    return RefPolicy(tuple(features), tuple(actions), fn)
