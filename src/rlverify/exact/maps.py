"""Risk and regret maps: a policy's per-state value beside the optimum over all policies, on two variables.

:func:`risk_map` checks the property twice with Storm — on the chain the policy induces (every
policy-reachable state's value) and on the full MDP (Pmin/Pmax, or Rmin/Rmax, per state) — joins
the two on the states' valuations, and projects values, optimum and their difference (the regret)
onto two variables, aggregating the others with max, min or mean and keeping the states a filter
such as ``obs=1 & done=false`` selects (:func:`compile_where`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rlverify.arrays import distinct
from rlverify.choices import Mode, Optimum, Strategy
from rlverify.errors import OptionError, PropertyError, did_you_mean
from rlverify.exact.chain import PolicyChain, states_of
from rlverify.exact.optimum import optimum as over_all_schedulers
from rlverify.exact.options import AGGREGATES, OPTIMA, ExactOptions, Progress
from rlverify.exact.verify import verify_exact
from rlverify.models.expressions import compile_expression
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.results import ExactResult, OptimumResult, Provenance, RiskMap, versions

#: an axis spans every integer between its smallest and largest value (so missing values show as
#: cells with no state) unless that is more than this many cells; then only the values that occur
MAX_DENSE_AXIS = 256


@dataclass(frozen=True)
class MapOptions:
    """Settings of one risk map.

    Attributes:
        agg: how a cell aggregates the states whose other variables differ: ``max`` (default: the
            worst case for a bad event), ``min`` or ``mean`` (unweighted over states).
        where: a filter over the state variables (see :func:`compile_where`), :data:`INITIAL` (the other
            variables at their initial values: :func:`initial_slice`), or None.
        optimum: ``min`` (a bad event such as a crash: the best policy minimises it) or ``max`` (a
            goal). None: from the property's comparison (``P<=b`` -> min, ``P>=b`` -> max); a ``P=?``
            property needs it said.
        exact: the exact engine's settings for the policy's chain (mode ``stochastic`` or
            ``deterministic``, ``unavailable``, ``numerics``, ``precision``, ``max_states``); the
            optimum uses the same numerics on the full MDP.
    """

    agg: str = "max"
    where: str | None = None
    optimum: str | None = None
    exact: ExactOptions = field(default_factory=ExactOptions)

    def validate(self) -> None:
        if self.agg not in AGGREGATES:
            raise OptionError(f"--agg: expected one of {', '.join(AGGREGATES)}, got '{self.agg}'")
        if self.optimum is not None and self.optimum not in OPTIMA:
            raise OptionError(f"--optimum: expected min or max, got '{self.optimum}'")
        if self.exact.mode is Mode.MONOLITHIC:
            raise OptionError("--mode: a risk map compares a policy with the optimum; use stochastic or deterministic")
        self.exact.validate()


def _sliced(model: SymbolicModel, options: MapOptions, x: str, y: str) -> tuple[MapOptions, list[str]]:
    """``--where initial``: the other variables fixed at their initial values (a note when they are not constant)."""
    options = dataclasses.replace(options, where=initial_slice(model, (x, y)))
    if options.where is not None:
        return options, []
    return options, [
        f"--where {INITIAL}: the model's initial state is not one constant valuation; each cell shows the "
        f"{options.agg} over all its states instead"
    ]


def _initial_regret(value: float, best: OptimumResult, direction: str) -> tuple[float, float]:
    """``(optimum, regret)`` at the initial state: how much worse than the optimum ``direction`` the policy's value is."""
    initial_opt = float(best.pmin if direction == Optimum.MIN else best.pmax)
    return initial_opt, value - initial_opt if direction == Optimum.MIN else initial_opt - value


def risk_map(
    model: SymbolicModel,
    prop: Property,
    policy: Policy,
    xy: str | Sequence[str],
    options: MapOptions | None = None,
    *,
    chain: PolicyChain | None = None,
    optimum: OptimumResult | None = None,
    progress: Progress | None = None,
) -> RiskMap:
    """The policy's value, the optimum and the regret per state, projected onto the variables ``xy``.

    Args:
        model: a loaded PRISM/JANI model.
        prop: its parsed property, ``P=? [...]`` or ``R=? [...]`` (or a threshold form, which also sets the
            optimum's direction); one initial state.
        policy: any :class:`~rlverify.policies.Policy`.
        xy: the two variables of the map, ``"x,y"`` or ``("x", "y")``.
        options: :class:`MapOptions` (None: the defaults).
        chain: the policy's chain when already built (:func:`~rlverify.exact.chain.policy_chain`, same mode).
        optimum: the optimum over all schedulers when already computed (:func:`~rlverify.exact.optimum.optimum` of
            ``prop`` with the same numerics: its per-state optima are read); else it is computed here.

    Returns:
        A :class:`~rlverify.results.RiskMap` (exact per state up to the solver's precision).

    Raises:
        OptionError: an unknown map variable, a bad filter, an unknown aggregate.
        PropertyError: not a P/R value or threshold property, Pmin/Pmax forms, no direction for the optimum.
    """
    options = MapOptions() if options is None else options
    options.validate()
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    direction, source = _direction(prop, options.optimum)
    x, y = _map_variables(xy, model.variables)
    sliced = options.where == INITIAL
    options, notes = _sliced(model, options, x, y) if sliced else (options, [])
    where = compile_where(options.where, model.variables, model.boolean_variables) if options.where else None
    say("checking the policy's chain")
    ex = dataclasses.replace(options.exact, all_states=True)
    pol = verify_exact(model, prop, policy, ex, chain=chain, progress=progress)
    say("checking the optimum over all policies (full MDP)")
    best = _optimum(model, prop, ex, optimum, progress)
    t_map = time.perf_counter()
    grids = _grids(pol, best, direction, x, y, where, options.agg)
    if sliced and where is not None and int((grids.policy_states > 0).sum()) <= 1:
        # the initial slice fixed x and y too (gym:FrozenLake: s determines row and col): one cell says nothing
        grids = _grids(pol, best, direction, x, y, None, options.agg)
        notes.append(
            f"--where {INITIAL}: fixing the other variables at their initial values leaves one cell ({x} and {y} "
            f"follow from them); each cell shows the {options.agg} over all its states instead"
        )
        options = dataclasses.replace(options, where=None)
    timings = {
        "policy_chain": pol.timings.get("total", 0.0),
        "optimum": best.timings.get("total", 0.0),
        "map": time.perf_counter() - t_map,
        "total": time.perf_counter() - t0,
    }
    warnings = list(pol.warnings) + notes
    if where is not None and not grids.p_keep.any():
        warnings.append(f"--where {options.where}: no state of the policy's chain satisfies it")
    initial_opt, initial_regret = _initial_regret(pol.value, best, direction)
    return RiskMap(
        mode=options.exact.mode,
        optimum=direction,
        optimum_source=source,
        agg=options.agg,
        where=options.where,
        x=x,
        y=y,
        x_values=grids.x_values,
        y_values=grids.y_values,
        value=grids.value,
        optimum_value=grids.optimum,
        regret=grids.regret,
        optimum_all=grids.optimum_all,
        policy_states=grids.policy_states,
        mdp_states=grids.mdp_states,
        initial_value=float(pol.value),
        initial_optimum=initial_opt,
        initial_regret=float(initial_regret),
        states=grids.states,
        guarantee=pol.guarantee,
        precision=pol.precision,
        stalled_probability=pol.stalled_probability,
        variables=grids.variables,
        state_valuations=grids.p_vals,
        state_value=grids.state_value,
        state_optimum=grids.state_optimum,
        provenance=Provenance(
            model=model.shown,
            policy=pol.policy,
            property=prop.text,
            timings=timings,
            settings={**pol.settings, "agg": options.agg, "where": options.where, "optimum": direction},
            versions=versions(),
            warnings=warnings,
        ),
    )


def _optimum(
    model: SymbolicModel, prop: Property, ex: ExactOptions, given: OptimumResult | None, progress: Progress | None
) -> OptimumResult:
    """``given`` (refused unless it is of ``prop`` with per-state optima), else the optimum computed here."""
    if given is None:
        whole = dataclasses.replace(ex, mode=Mode.MONOLITHIC, strategy=Strategy.FULL)
        return over_all_schedulers(model, prop, whole, progress=progress)
    if given.property != prop.text or given.state_pmin is None or given.state_pmax is None:
        raise OptionError(
            f"the optimum given is of property '{given.property}' (or has no per-state optima), not "
            f"'{prop.text}': compute it with optimum(...) for this property"
        )
    return given


@dataclass(frozen=True)
class _Grids:
    """The per-state values joined on the valuations, and their cells."""

    variables: tuple[str, ...]
    x_values: np.ndarray
    y_values: np.ndarray
    value: np.ndarray
    optimum: np.ndarray
    regret: np.ndarray
    optimum_all: np.ndarray
    policy_states: np.ndarray
    mdp_states: np.ndarray
    states: dict[str, int]
    p_vals: np.ndarray
    p_keep: np.ndarray
    state_value: np.ndarray
    state_optimum: np.ndarray


def _grids(pol: ExactResult, best: OptimumResult, direction: str, x: str, y: str, where: Where | None, agg: str) -> _Grids:
    """Join the policy's per-state values with the optimum's on the states' valuations, and aggregate both per cell."""
    assert pol.state_values is not None and pol.state_valuations is not None
    assert best.state_pmin is not None and best.state_pmax is not None and best.state_valuations is not None
    variables = tuple(best.variables)
    p_vals = _reorder(pol.state_valuations, tuple(pol.variables), variables)
    m_vals = best.state_valuations
    m_opt = best.state_pmin if direction == "min" else best.state_pmax
    at = states_of(m_vals, variables, p_vals, variables)  # MDP index of each state of the policy's chain
    value = np.asarray(pol.state_values, dtype=np.float64)
    opt = m_opt[at]
    with np.errstate(invalid="ignore"):
        regret = value - opt if direction == "min" else opt - value
    ix_col, iy_col = variables.index(x), variables.index(y)
    x_values = _axis(m_vals[:, ix_col])
    y_values = _axis(m_vals[:, iy_col])
    m_keep = where(m_vals, variables) if where else np.ones(len(m_vals), dtype=bool)
    p_keep = m_keep[at]
    shape = (len(y_values), len(x_values))
    p_cells = (np.searchsorted(y_values, p_vals[p_keep, iy_col]), np.searchsorted(x_values, p_vals[p_keep, ix_col]))
    m_cells = (np.searchsorted(y_values, m_vals[m_keep, iy_col]), np.searchsorted(x_values, m_vals[m_keep, ix_col]))
    grid_value, n_policy = aggregate(p_cells, value[p_keep], shape, agg)
    grid_opt, _ = aggregate(p_cells, opt[p_keep], shape, agg)
    grid_regret, _ = aggregate(p_cells, regret[p_keep], shape, agg)
    grid_all, n_mdp = aggregate(m_cells, m_opt[m_keep], shape, agg)
    states = {
        "mdp": len(m_vals),
        "policy": len(p_vals),
        "mdp_only": int(len(m_vals) - len(p_vals)),
        "mdp_filtered": int(m_keep.sum()),
        "policy_filtered": int(p_keep.sum()),
    }
    return _Grids(
        variables=variables,
        x_values=x_values,
        y_values=y_values,
        value=grid_value,
        optimum=grid_opt,
        regret=grid_regret,
        optimum_all=grid_all,
        policy_states=n_policy,
        mdp_states=n_mdp,
        states=states,
        p_vals=p_vals,
        p_keep=p_keep,
        state_value=value,
        state_optimum=opt,
    )


def reading(prop: Property, optimum: str | None) -> tuple[str | None, str]:
    """How ``prop`` is read: ``min`` (a bad event: the best policy minimises it), ``max`` (a goal) or None (the
    property does not say and ``optimum`` is None), and where that came from: the property's comparison
    (``P<=b``: min, ``P>=b``: max) or the option. Refuses what is not a value property, and an option that
    contradicts the comparison."""
    text = prop.text
    if prop.operator not in ("P", "R"):
        raise PropertyError(f"property '{text}': a risk map needs a P or R property (P=? [...], R{{\"r\"}}=? [...])")
    if prop.optimality is not None:
        raise PropertyError(
            f"property '{text}': give P=? (or R=?) and say the optimum with --optimum "
            f"{prop.optimality}: the map checks the policy and the optimum of the same formula"
        )
    if prop.comparison is not None:
        implied = "min" if prop.comparison in ("<", "<=") else "max"
        if optimum is not None and optimum != implied:
            raise OptionError(
                f"--optimum {optimum}: property '{text}' bounds its value with {prop.comparison} "
                f"(a {'bad event' if implied == 'min' else 'goal'}: optimum {implied}); "
                "give P=? to choose freely"
            )
        return implied, f"the property's comparison {prop.comparison}"
    return optimum, "option" if optimum is not None else "unknown"


def _direction(prop: Property, optimum: str | None) -> tuple[str, str]:
    """:func:`reading`, refusing a property that does not say how it is read when ``optimum`` does not either."""
    direction, source = reading(prop, optimum)
    if direction is None:
        raise OptionError(
            f"property '{prop.text}' does not say whether it is a bad event or a goal: give --optimum min "
            "(a bad event such as a crash; the best policy minimises it) or --optimum max (a goal)"
        )
    return direction, source


#: ``MapOptions(where=INITIAL)``: the map's other variables fixed at their initial values (:func:`initial_slice`)
INITIAL = "initial"


def initial_slice(model: SymbolicModel, xy: Sequence[str]) -> str | None:
    """A ``--where`` filter fixing every variable but the two of ``xy`` at its initial value (``done=false &
    obstacle1_x=4 & ...``): the map then shows, per cell, the state that differs from the initial one only in
    ``xy`` ("what if the run started here"). None when the initial state is not one constant valuation, or when
    there is no other variable."""
    init = model.initial_valuation()
    if init is None:
        return None
    booleans = set(model.boolean_variables)
    parts = [
        f"{name}={('true' if value else 'false') if name in booleans else int(value)}"
        for name, value in init.items()
        if name not in xy
    ]
    return " & ".join(parts) or None


def _map_variables(xy: str | Sequence[str], known: Sequence[str]) -> tuple[str, str]:
    names = [n.strip() for n in xy.split(",")] if isinstance(xy, str) else [str(n).strip() for n in xy]
    if len(names) != 2 or not all(names):
        raise OptionError(f"--map: expected two variables 'x,y', got {xy!r}; the model's variables: {', '.join(known)}")
    for n in names:
        if n not in known:
            raise OptionError(
                f"--map: unknown variable '{n}'{did_you_mean(n, known)}; the model's variables: {', '.join(known)}"
            )
    if names[0] == names[1]:
        raise OptionError(f"--map: expected two different variables, got '{names[0]}' twice")
    return names[0], names[1]


def _reorder(valuations: np.ndarray, have: tuple[str, ...], want: tuple[str, ...]) -> np.ndarray:
    """``valuations`` ``(S, V)`` with columns in ``want``'s order."""
    if have == want:
        return valuations
    if set(have) != set(want):
        raise PropertyError(f"the policy's chain has variables {have}, the full MDP {want}; cannot join their states")
    return valuations[:, [have.index(v) for v in want]]


def _axis(column: np.ndarray) -> np.ndarray:
    """``(K,)`` int64 sorted axis values: the whole integer range, or the values present when that is too long."""
    if not len(column):
        return np.zeros(1, dtype=np.int64)
    lo, hi = int(column.min()), int(column.max())
    if hi - lo + 1 <= MAX_DENSE_AXIS:
        return np.arange(lo, hi + 1, dtype=np.int64)
    return distinct(column).astype(np.int64)


def aggregate(
    cells: tuple[np.ndarray, np.ndarray], values: np.ndarray, shape: tuple[int, int], agg: str
) -> tuple[np.ndarray, np.ndarray]:
    """Aggregate per-state ``values`` ``(S,)`` into cells ``(rows (S,), cols (S,))`` of a ``shape`` grid.

    Returns ``(grid, counts)``: ``(H, W)`` float64 (NaN in empty cells) and ``(H, W)`` int64 states per cell.
    """
    counts = np.zeros(shape, dtype=np.int64)
    np.add.at(counts, cells, 1)
    if agg == "mean":
        grid = np.zeros(shape)
        np.add.at(grid, cells, values)
        with np.errstate(invalid="ignore", divide="ignore"):
            grid = grid / counts
    else:
        grid = np.full(shape, -np.inf if agg == "max" else np.inf)
        (np.maximum if agg == "max" else np.minimum).at(grid, cells, values)
    grid[counts == 0] = np.nan
    return grid, counts


# --- the filter: the one expression language over state variables (rlverify.models.expressions) -----------

Where = Callable[[np.ndarray, Sequence[str]], np.ndarray]


def compile_where(text: str, variables: Sequence[str], booleans: Sequence[str] = ()) -> Where:
    """A condition over state variables (:func:`rlverify.models.expressions.compile_expression`), PRISM style
    (``obs=1 & !done``) or Python style. ``booleans``: the boolean variables (0/1 read as false/true). Returns
    ``f(valuations (S, V) int64, names) -> (S,) bool`` (``names``: the valuations' columns).

    Raises:
        OptionError: a syntax error, a name that is no variable (naming the known ones), another construct.
    """
    condition = compile_expression(text, variables, option="--where", booleans=booleans, kind="condition")
    order = list(variables)

    def evaluate(valuations: np.ndarray, names: Sequence[str]) -> np.ndarray:
        names = list(names)
        return condition(valuations[:, [names.index(v) for v in order]])

    return evaluate
