"""Which strategy builds a policy's chain: the one the options name (refused where it cannot build the model), or
``auto``'s pick from cheap facts of the PRISM program (never of its states); and what a chain on disk needs."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from rlverify.choices import Mode, Strategy
from rlverify.errors import OptionError, PropertyError
from rlverify.exact.checking import solved_here
from rlverify.exact.formulas import is_reward_bounded
from rlverify.exact.options import ExactOptions
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel

__all__ = [
    "AUTO_BRANCHING",
    "AUTO_DOMAIN",
    "AUTO_FANNED",
    "AUTO_FANNING",
    "AUTO_TINY",
    "check_on_disk",
    "choose_strategy",
    "is_prism",
    "program_shape",
    "strategy_and_reason",
]

log = logging.getLogger("rlverify.exact.chain")  # the strategy's choice is logged as the chain's build

#: Storm's PRISM program (untyped)
StormProgram = Any

#: ``auto`` picks ``merged`` for a PRISM MDP whose choices have at least this many branches on average (the
#: policy's chain fans out: a few wide breadth-first steps, where exploring in numpy batches is cheapest) ...
AUTO_BRANCHING = 2.2
#: ... or whose variables' domains multiply to at least this (large state spaces: the steps grow wide) ...
AUTO_DOMAIN = 2**45
#: ... or whose choices branch at least AUTO_FANNING ways on average over a domain of at least AUTO_FANNED valuations
#: (csma: 1.7 over 3e11); elsewhere Storm's builder is faster: the chain is explored in many narrow steps, each with a
#: fixed cost in numpy (measured in benchmarks/exact.py --files: the paper's Avoid, Freeway, Crazy Climber; QVBS
#: consensus, csma, firewire, leader)
AUTO_FANNING = 1.5
AUTO_FANNED = 2**30
#: ... or whose choices branch two ways or more on average over at most AUTO_TINY valuations: a handful of breadth-first
#: steps, cheaper than the fixed set-up of Storm's builder (its state table; ij: 7 states, merged ~0.9x full once
#: Storm's one-state build runs beside the policy's check). A program of that size explored in many narrow steps
#: costs at most AUTO_TINY of them (a 64-state chain: ~50 vs ~25 ms)
AUTO_TINY = 64


def choose_strategy(model: SymbolicModel, options: ExactOptions, prop: Property | None = None) -> str:
    """The strategy ``options`` ask for on ``model`` (see :func:`strategy_and_reason`)."""
    return strategy_and_reason(model, options, prop)[0]


def strategy_and_reason(model: SymbolicModel, options: ExactOptions, prop: Property | None = None) -> tuple[str, str | None]:
    """The strategy ``options`` ask for on ``model`` (for ``prop``), and why ``auto`` did not pick ``merged`` (None: it
    did, or ``auto`` was not asked for).

    ``auto`` is ``full`` for JANI; for a PRISM MDP it is ``merged`` where the program's choices branch widely or its
    variables span a large domain (:data:`AUTO_BRANCHING`, :data:`AUTO_DOMAIN`, :data:`AUTO_FANNING` over
    :data:`AUTO_FANNED`), or it is tiny and branching (:data:`AUTO_TINY`): cheap facts of the compiled program,
    never of its states), else ``full``; ``merged`` falls back to ``full`` for what it does not evaluate (a reward
    property, say: then ``merged`` is returned and declines, saying why). Monolithic mode builds the full MDP.
    """
    if options.mode == Mode.MONOLITHIC or options.strategy != Strategy.AUTO:
        return _asked_for(model, options), None
    if not is_prism(model):
        return "full", None
    if prop is not None and (prop.operator != "P" or is_reward_bounded(prop.storm_formula())):
        return "merged", None  # merged declines it, saying why
    shape = program_shape(model.program)
    if shape is None:  # merged declines it, saying why
        return "merged", None
    branching, domain = shape
    if _merged_pays(branching, domain):
        return "merged", None
    reason = (
        f"auto chose Storm's builder: the program's choices have {branching:.3g} branches on average over "
        f"{domain:.3g} valuations of its variables, so the merged exploration would take many narrow steps"
    )
    log.info("strategy %s", reason)
    return "full", reason


def _asked_for(model: SymbolicModel, options: ExactOptions) -> str:
    """The strategy named by ``options`` (monolithic mode: ``full``), refused where it cannot build ``model``."""
    needs_prism = options.strategy in (Strategy.ONTHEFLY, Strategy.MERGED)
    if options.mode == Mode.MONOLITHIC:
        if needs_prism:
            raise PropertyError(f"--strategy {options.strategy} needs a policy; monolithic mode builds the full MDP")
        return "full"
    if needs_prism and not is_prism(model):
        raise PropertyError(f"--strategy {options.strategy} is available for PRISM models (JANI: use full)")
    return options.strategy


def _merged_pays(branching: float, domain: int) -> bool:
    """Whether ``auto`` takes ``merged`` for a program of these branches per choice and valuations (see
    :func:`strategy_and_reason`)."""
    return (
        branching >= AUTO_BRANCHING
        or domain >= AUTO_DOMAIN
        or (branching >= AUTO_FANNING and domain >= AUTO_FANNED)
        or (branching >= 2 and domain <= AUTO_TINY)
    )


def is_prism(model: SymbolicModel) -> bool:
    """Whether ``model`` is a PRISM program (else JANI)."""
    return model.kind in {"prism"}


def program_shape(program: StormProgram) -> tuple[float, int] | None:
    """Cheap facts of a Storm PRISM program (nothing compiled): branches per choice, averaged over its unlabelled
    commands and its labels (a label's: the product over its modules of their commands' mean number of updates), and
    how many valuations its variables have (the product of their domains).

    None where a variable's bounds are not constants (``merged`` declines the program, saying why). Here, not in
    :mod:`rlverify.models.program`: deciding loads nothing of the exploration.
    """
    program = program.substitute_constants()
    domain = _domain(program)
    if domain is None:
        return None
    per_group: list[float] = []
    labels: dict[str, float] = {}
    for m in program.modules:
        updates: dict[str, list[int]] = {}
        for c in m.commands:
            if c.is_labeled:
                updates.setdefault(c.action_name, []).append(len(c.updates))
            else:
                per_group.append(len(c.updates))
        for label, counts in updates.items():
            labels[label] = labels.get(label, 1.0) * float(np.mean(counts))
    per_group += labels.values()
    return (float(np.mean(per_group)) if per_group else 0.0), domain


def _domain(program: StormProgram) -> int | None:
    """How many valuations the (constant-substituted) program's variables have; None where a bound is not a
    constant."""
    domain = 1
    for v in [*program.global_integer_variables, *(v for m in program.modules for v in m.integer_variables)]:
        if any(str(e) == "__storm::notinitialized__" for e in (v.lower_bound_expression, v.upper_bound_expression)):
            return None  # an unbounded int: evaluating unset bounds crashes Storm
        try:
            domain *= int(v.upper_bound_expression.evaluate_as_int()) - int(v.lower_bound_expression.evaluate_as_int()) + 1
        except Exception:  # an unbounded int, or bounds that are not constants
            return None
    return domain * 2 ** (len(program.global_boolean_variables) + sum(len(m.boolean_variables) for m in program.modules))


def check_on_disk(model: SymbolicModel, prop: Property, options: ExactOptions, strategy: str) -> None:
    """Refuse (``OptionError``, before anything is built) what a chain on disk (``--chain-dir``) cannot check: it is
    built by the ``merged`` strategy (PRISM programs) and checked for reachability, step-bounded or not
    (:func:`~rlverify.exact.checking.solved_here`: ``--numerics sound`` or ``direct``), only."""
    if strategy != Strategy.MERGED:
        why = "JANI models are built by Storm" if not is_prism(model) else f"not with --strategy {options.strategy}"
        raise OptionError(f"--chain-dir needs the merged strategy (PRISM programs, --strategy auto or merged): {why}")
    formula = prop.storm_formula()
    if not solved_here(formula, options.numerics):  # F, U (bounded by steps or not) over state formulas
        raise OptionError(
            f"--chain-dir checks reachability only (P=? [F phi], P=? [phi U psi], their step-bounded forms F<=k, "
            f"U<=k, and thresholds, over labels and expressions, --numerics sound or direct), not '{prop.text}' "
            f"with --numerics {options.numerics}"
        )
