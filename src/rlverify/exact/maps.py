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
from pathlib import Path
import numpy as np

from rlverify.errors import OptionError, PropertyError, did_you_mean
from rlverify.exact.verify import ExactOptions, Progress, model_and_property, verify_exact
from rlverify.models.expressions import compile_expression
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.base import Policy
from rlverify.results import RiskMap, versions

AGGREGATES = ("max", "min", "mean")
OPTIMA = ("min", "max")
#: an axis spans every integer between its smallest and largest value (so missing values show as
#: cells with no state) unless that is more than this many cells; then only the values that occur
MAX_DENSE_AXIS = 256


@dataclass(frozen=True)
class MapOptions:
    """Settings of one risk map.

    Attributes:
        agg: how a cell aggregates the states whose other variables differ: ``max`` (default: the
            worst case for a bad event), ``min`` or ``mean`` (unweighted over states).
        where: a filter over the state variables (see :func:`compile_where`), or None.
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
        if self.exact.mode == "monolithic":
            raise OptionError("--mode: a risk map compares a policy with the optimum; use stochastic or deterministic")
        self.exact.validate()


def risk_map(model: SymbolicModel | str | Path, property_text: str | Property, policy: Policy,
             xy: str | Sequence[str], options: MapOptions = MapOptions(), *, constants: str | None = None,
             progress: Progress | None = None) -> RiskMap:
    """The policy's value, the optimum and the regret per state, projected onto the variables ``xy``.

    Args:
        model: a loaded model (or a benchmark, whose property names are then accepted), or a
            PRISM/JANI file (loaded with ``constants``).
        property_text: ``P=? [...]`` or ``R=? [...]`` (or a threshold form, which also sets the
            optimum's direction); one initial state.
        policy: any :class:`~rlverify.policies.Policy`; evaluated in one batch on the MDP's states.
        xy: the two variables of the map, ``"x,y"`` or ``("x", "y")``.

    Returns:
        A :class:`~rlverify.results.RiskMap` (exact per state up to the solver's precision).

    Raises:
        OptionError: an unknown map variable, a bad filter, an unknown aggregate.
        PropertyError: not a P/R value or threshold property, Pmin/Pmax forms, no direction for the optimum.
    """
    options.validate()
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    model, prop = model_and_property(model, property_text, constants)
    optimum, source = _direction(prop, options.optimum)
    x, y = _map_variables(xy, model.variables)
    where = compile_where(options.where, model.variables, model.boolean_variables) if options.where else None

    say("checking the policy's chain")
    ex = dataclasses.replace(options.exact, all_states=True)
    pol = verify_exact(model, prop, policy, ex, progress=progress)
    say("checking the optimum over all policies (full MDP)")
    mono = verify_exact(model, prop, None, dataclasses.replace(ex, mode="monolithic", strategy="full"),
                        progress=progress)
    t_map = time.perf_counter()
    assert pol.state_values is not None and pol.state_valuations is not None
    assert mono.state_values is not None and mono.state_values_min is not None and mono.state_valuations is not None
    variables = tuple(mono.variables)
    p_vals = _reorder(pol.state_valuations, tuple(pol.variables), variables)
    m_vals = mono.state_valuations
    m_opt = mono.state_values_min if optimum == "min" else mono.state_values
    at = _join(m_vals, p_vals)  # MDP index of each state of the policy's chain
    value = np.asarray(pol.state_values, dtype=np.float64)
    opt = m_opt[at]
    with np.errstate(invalid="ignore"):
        regret = value - opt if optimum == "min" else opt - value

    ix_col, iy_col = variables.index(x), variables.index(y)
    x_values = _axis(m_vals[:, ix_col])
    y_values = _axis(m_vals[:, iy_col])
    m_keep = where(m_vals, variables) if where else np.ones(len(m_vals), dtype=bool)
    p_keep = m_keep[at]
    shape = (len(y_values), len(x_values))
    p_cells = (np.searchsorted(y_values, p_vals[p_keep, iy_col]), np.searchsorted(x_values, p_vals[p_keep, ix_col]))
    m_cells = (np.searchsorted(y_values, m_vals[m_keep, iy_col]), np.searchsorted(x_values, m_vals[m_keep, ix_col]))
    grid_value, n_policy = aggregate(p_cells, value[p_keep], shape, options.agg)
    grid_opt, _ = aggregate(p_cells, opt[p_keep], shape, options.agg)
    grid_regret, _ = aggregate(p_cells, regret[p_keep], shape, options.agg)
    grid_all, n_mdp = aggregate(m_cells, m_opt[m_keep], shape, options.agg)

    initial_opt = float(mono.pmin if optimum == "min" else mono.pmax)
    initial_regret = pol.value - initial_opt if optimum == "min" else initial_opt - pol.value
    timings = {"policy_chain": pol.timings.get("total", 0.0), "optimum": mono.timings.get("total", 0.0),
               "map": time.perf_counter() - t_map, "total": time.perf_counter() - t0}
    states = {"mdp": len(m_vals), "policy": len(p_vals), "mdp_only": int(len(m_vals) - len(p_vals)),
              "mdp_filtered": int(m_keep.sum()), "policy_filtered": int(p_keep.sum())}
    warnings = list(pol.warnings)
    if where is not None and not p_keep.any():
        warnings.append(f"--where {options.where}: no state of the policy's chain satisfies it")
    return RiskMap(
        model=str(model.path), policy=pol.policy, property=prop.text, mode=options.exact.mode, optimum=optimum,
        optimum_source=source, agg=options.agg, where=options.where, x=x, y=y, x_values=x_values, y_values=y_values,
        value=grid_value, optimum_value=grid_opt, regret=grid_regret, optimum_all=grid_all, policy_states=n_policy,
        mdp_states=n_mdp, initial_value=float(pol.value), initial_optimum=initial_opt,
        initial_regret=float(initial_regret), states=states, guarantee=pol.guarantee, precision=pol.precision,
        stalled_probability=pol.stalled_probability, variables=variables, timings=timings,
        settings={**pol.settings, "agg": options.agg, "where": options.where, "optimum": optimum},
        versions=versions(), warnings=warnings, state_valuations=p_vals, state_value=value, state_optimum=opt)


def _direction(prop: Property, optimum: str | None) -> tuple[str, str]:
    """The optimum's direction (``min``/``max``) and where it came from; refuses what is not a value property."""
    text = prop.text
    if prop.operator not in ("P", "R"):
        raise PropertyError(f"property '{text}': a risk map needs a P or R property (P=? [...], R{{\"r\"}}=? [...])")
    if prop.optimality is not None:
        raise PropertyError(f"property '{text}': give P=? (or R=?) and say the optimum with --optimum "
                            f"{prop.optimality}: the map checks the policy and the optimum of the same formula")
    if prop.comparison is not None:
        implied = "min" if prop.comparison in ("<", "<=") else "max"
        if optimum is not None and optimum != implied:
            raise OptionError(f"--optimum {optimum}: property '{text}' bounds its value with {prop.comparison} "
                              f"(a {'bad event' if implied == 'min' else 'goal'}: optimum {implied}); "
                              "give P=? to choose freely")
        return implied, f"the property's comparison {prop.comparison}"
    if optimum is None:
        raise OptionError(f"property '{text}' does not say whether it is a bad event or a goal: give --optimum min "
                          "(a bad event such as a crash; the best policy minimises it) or --optimum max (a goal)")
    return optimum, "option"


def _map_variables(xy: str | Sequence[str], known: Sequence[str]) -> tuple[str, str]:
    names = [n.strip() for n in xy.split(",")] if isinstance(xy, str) else [str(n).strip() for n in xy]
    if len(names) != 2 or not all(names):
        raise OptionError(f"--map: expected two variables 'x,y', got {xy!r}; the model's variables: {', '.join(known)}")
    for n in names:
        if n not in known:
            raise OptionError(f"--map: unknown variable '{n}'{did_you_mean(n, known)}; "
                              f"the model's variables: {', '.join(known)}")
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


def _join(mdp: np.ndarray, chain: np.ndarray) -> np.ndarray:
    """``(P,)`` int64: the row of ``mdp`` ``(N, V)`` with the valuation of each row of ``chain`` ``(P, V)``."""
    n = len(mdp)
    _, inverse = np.unique(np.vstack([mdp, chain]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    lookup = np.full(int(inverse.max()) + 1 if len(inverse) else 0, -1, dtype=np.int64)
    lookup[inverse[:n]] = np.arange(n)
    at = lookup[inverse[n:]]
    if (at < 0).any():  # the chain is built from the same property-directed MDP: a bug, not bad input
        raise RuntimeError(f"{int((at < 0).sum())} states of the policy's chain are not states of the full MDP")
    return at


def _axis(column: np.ndarray) -> np.ndarray:
    """``(K,)`` int64 sorted axis values: the whole integer range, or the values present when that is too long."""
    if not len(column):
        return np.zeros(1, dtype=np.int64)
    lo, hi = int(column.min()), int(column.max())
    if hi - lo + 1 <= MAX_DENSE_AXIS:
        return np.arange(lo, hi + 1, dtype=np.int64)
    return np.unique(column).astype(np.int64)


def aggregate(cells: tuple[np.ndarray, np.ndarray], values: np.ndarray, shape: tuple[int, int],
              agg: str) -> tuple[np.ndarray, np.ndarray]:
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
