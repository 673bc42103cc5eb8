"""The ``onthefly`` strategy's action mask: which actions the policy may take in each state Storm's builder explores.

The policy is asked once per distinct observation, in batches. Before Storm builds, the states it will explore are
found one breadth-first layer at a time with the compiled PRISM program (:mod:`rlverify.models.program`; Storm's
property-directed terminal states are not expanded, and only choices the mask keeps are followed), and each layer's
new observations are asked in one call. Storm's mask then reads the answers, and the chain's weights are read from
the same answers (:meth:`PolicyMask.probabilities`). An observation Storm meets that the layers did not find (a
program the compiler does not evaluate, a search stopped at ``max_states``) is asked when met.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from rlverify.arrays import distinct
from rlverify.choices import Mode, Unavailable
from rlverify.errors import RlverifyError
from rlverify.exact.exploration_index import StateIndex
from rlverify.exact.options import ExactOptions, Progress
from rlverify.models.commands import is_command_name
from rlverify.models.explicit import ExplicitModel
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import BasePolicy, Policy, validate_probabilities

if TYPE_CHECKING:
    from rlverify.models.program import CompiledProgram

__all__ = ["PolicyMask", "StormMask", "available_actions"]

#: Storm's untyped objects: the action mask (``stormpy.developer.StateValuationFunctionMask``), a state's valuation
#: it is called with, a module of a PRISM program
StormMask = Any
StormValuation = Any
StormModule = Any
#: an observation: the policy's features in a state, as integers
Observation = tuple[int, ...]


class PolicyMask:
    """A Storm action mask keeping the actions the policy may take; the policy asked once per observation, in
    batches (see the module docstring).

    It also remembers states where every available action was masked out (the policy gives them
    probability 0), which Storm then treats as deadlocks: their mass is stalled, as with ``full``.
    """

    def __init__(self, model: SymbolicModel, policy: Policy, options: ExactOptions, progress: Progress | None = None) -> None:
        self.model, self.policy, self.options = model, policy, options
        self.progress = progress
        manager = model.program.expression_manager
        self.variables = [manager.get_variable(f) for f in policy.features]
        self.is_bool = [f in model.boolean_variables for f in policy.features]
        self.action_col = {a: i for i, a in enumerate(policy.actions)}
        #: observation -> the policy's distribution there, and the actions it may take
        self.answers: dict[Observation, np.ndarray] = {}
        self.kept: dict[Observation, np.ndarray] = {}
        #: the observations Storm's builder asked about (the policy's distinct states)
        self.looked_up: set[Observation] = set()
        #: how many calls of the policy, and their seconds
        self.calls = 0
        self.seconds = 0.0
        self.names: dict[int, str] = {}
        # prune by label only where that cannot change what is verified: a label does not say which command a
        # choice is (choices named by command are weighed when induced), and removing the labelled choices of a
        # state that also offers an unlabelled command would leave that command to be taken without asking
        self.prune = not any(is_command_name(a) for a in policy.actions) and all(c.action for c in model.commands)
        # deterministic + renormalize needs every available action to find the best available one
        self.keep_all = not self.prune or (
            options.mode == Mode.DETERMINISTIC and options.unavailable == Unavailable.RENORMALIZE
        )

    def ask(self, observations: np.ndarray) -> None:
        """The policy asked, in one call, at the rows of ``observations`` ``(N, d)`` not asked before."""
        new = [k for k in dict.fromkeys(map(_observation, observations)) if k not in self.answers]
        if not new:
            return
        t = time.perf_counter()
        p = np.asarray(self.policy.action_probabilities(np.asarray(new, dtype=np.float64)), dtype=np.float64)
        self.seconds += time.perf_counter() - t
        self.calls += 1
        if self.options.mode == Mode.DETERMINISTIC:
            keep = np.zeros(p.shape, dtype=bool)
            keep[np.arange(len(p)), np.argmax(p, axis=1)] = True
        else:
            keep = p > 0
        for i, k in enumerate(new):
            self.answers[k], self.kept[k] = p[i], keep[i]

    def mask(self) -> StormMask:
        import stormpy.developer as dev  # lazy: stormpy, start-up

        return dev.StateValuationFunctionMask[float](self._allowed)

    def _allowed(self, valuation: StormValuation, action_index: int) -> bool:
        keep = self._keep(valuation)
        name = self.names.get(action_index)
        if name is None:
            name = self.names[action_index] = self.model.program.get_action_name(action_index)
        col = self.action_col.get(name)
        if col is None or self.keep_all:  # as with 'full': such choices are weighed (or refused) when the chain is induced
            return True
        return bool(keep[col])

    def _keep(self, valuation: StormValuation) -> np.ndarray:
        """``(|A|,)`` bool: the actions the policy may take in the state (asked now if no layer found it)."""
        key = tuple(
            int(valuation.get_boolean_value(v)) if b else valuation.get_integer_value(v)
            for v, b in zip(self.variables, self.is_bool, strict=True)
        )
        if key not in self.looked_up:
            self.looked_up.add(key)
            if key not in self.answers:
                self.ask(np.asarray([key]))
            if self.progress is not None and len(self.looked_up) % 10_000 == 0:
                self.progress(f"exploring policy-reachable states with Storm's builder: {len(self.looked_up):,} so far")
        return self.kept[key]

    def probabilities(self, mdp: ExplicitModel, policy: Policy, states: np.ndarray) -> tuple[np.ndarray, float]:
        """The policy's distributions ``(K, |A|)`` at ``states`` ``(K,)`` of the masked MDP, from the answers (one
        call for any not asked yet), validated as :func:`~rlverify.exact.induced.ask_features` validates them; and
        the seconds spent in the policy over the whole build (``policy``: the mask's, as
        :func:`~rlverify.exact.induced.ask_policy` takes it)."""
        n, A = len(states), len(self.policy.actions)
        if n:
            observations = mdp.feature_matrix(self.policy.features, states)
            self.ask(observations)
            probs = np.stack([self.answers[k] for k in map(_observation, observations)])
        else:
            probs = np.zeros((0, A))
        if not isinstance(self.policy, BasePolicy):  # the adapters validate their output themselves
            validate_probabilities(probs, n, A, source=getattr(self.policy, "name", "policy"))
        return probs, self.seconds

    def prefetch(self, prop: Property, max_states: int | None) -> None:
        """Ask the policy, a layer at a time, at the states Storm's builder will explore (see the module docstring);
        stops quietly where the compiled program does not evaluate the model (Storm then decides)."""
        from rlverify.models.program import Unsupported, compiled, terminal_functions  # lazy: 0.1 s, onthefly only

        try:
            program = compiled(self.model.program, self.model.shown)
            terminal = terminal_functions(prop.storm.get_raw_formula(), program.label_functions.get, program.by_name)
            layers = _Layers(program, terminal, self)
        except (Unsupported, RlverifyError, KeyError):
            return
        try:
            while layers.next():
                if max_states is not None and layers.index.count > max_states:
                    return
        except (Unsupported, RlverifyError):
            return

    def all_unavailable(self, mdp: ExplicitModel) -> np.ndarray:
        """``(S,)`` bool: deadlocks of the masked model that have available actions in the real one.

        The mask removed them all (probability 0), so all the policy's mass is on unavailable actions.
        Few states; their guards are evaluated on their valuations.
        """
        out = np.zeros(mdp.num_states, dtype=bool)
        dead = mdp.labels.get("deadlock")
        if dead is None or not dead.any():
            return out
        for i in np.flatnonzero(dead):
            out[i] = bool(available_actions(self.model, mdp.valuation_dict(int(i))))
        return out


def _observation(row: np.ndarray) -> Observation:
    return tuple(int(x) for x in row)


class _Layers:
    """The breadth-first layers of the states Storm's builder explores under a :class:`PolicyMask`, found with the
    compiled program (``terminal``: its property-directed terminal states, as
    :func:`~rlverify.models.program.terminal_functions` gives them); each layer's observations asked in one call."""

    def __init__(self, program: CompiledProgram, terminal: list[tuple[Any, bool]], mask: PolicyMask) -> None:
        self.program, self.mask, self.terminal = program, mask, terminal
        self.columns = [program.index[f] for f in mask.policy.features]
        # each choice group's policy action column (-1: no action of the policy, always kept)
        self.column_of_group = np.array([mask.action_col.get(g.action, -1) for g in program.groups], dtype=np.int64)
        self.index = StateIndex(program.domain)
        self.frontier = distinct(program.keys(program.initial))
        self.index.ids(self.frontier)

    def next(self) -> bool:
        """Explore the next layer (its policy asked); False when none is left."""
        if not len(self.frontier):
            return False
        program, keys = self.program, self.frontier
        vals = program.values(keys)
        env = program.env(vals)
        stop = np.zeros(len(vals), dtype=bool)
        for fn, value in self.terminal:
            stop |= program.evaluate(fn, env, len(vals)) == value
        active = np.flatnonzero(~stop)
        found = program.enabled(vals[active])
        state = active[found.state]
        observations = vals[:, self.columns]
        self.mask.ask(observations[distinct(state)])
        follow = self._followed(found.kind, observations[state])
        br = program.branches(found.parts[follow], state[follow], vals, keys)
        _, self.frontier = self.index.lookup(br.keys[br.probs > 0])
        return True

    def _followed(self, kind: np.ndarray, observations: np.ndarray) -> np.ndarray:
        """``(C,)`` bool: the choices (``kind``, at states with ``observations``) the mask keeps."""
        if self.mask.keep_all:
            return np.ones(len(kind), dtype=bool)
        column = self.column_of_group[self.program.group_of(kind)]
        kept = self.mask.kept
        return np.array(
            [c < 0 or bool(kept[_observation(o)][c]) for c, o in zip(column.tolist(), observations, strict=True)],
            dtype=bool,
        )


def available_actions(model: SymbolicModel, valuation: dict[str, int]) -> set[str]:
    """Action labels enabled in a state of a PRISM program (synchronisation respected; "" = unlabelled)."""
    program = model.program.substitute_constants()  # Storm crashes evaluating undefined identifiers
    manager = program.expression_manager
    subst = {}
    for name, value in valuation.items():
        if manager.has_variable(name):
            var = manager.get_variable(name)
            subst[var] = manager.boolean(bool(value)) if name in model.boolean_variables else manager.integer(int(value))
    enabled: dict[str, bool] = {}
    unlabelled = False
    for module in program.modules:
        here = _enabled_in(module, subst)
        unlabelled |= here.pop("", False)
        for a, on in here.items():
            enabled[a] = enabled.get(a, True) and on
    return {a for a, on in enabled.items() if on} | ({""} if unlabelled else set())


def _enabled_in(module: StormModule, subst: dict[StormValuation, StormValuation]) -> dict[str, bool]:
    """Per action label of ``module``'s commands, whether one of them is enabled under ``subst`` (key "": an
    unlabelled command)."""
    here: dict[str, bool] = {}
    for command in module.commands:
        on = command.guard_expression.substitute(subst).evaluate_as_bool()
        name = command.action_name or ""
        here[name] = here.get(name, False) or on
    return here
