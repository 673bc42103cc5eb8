"""Robust value iteration for step-bounded reachability on interval MDPs.

``maxmax``: the scheduler and the nature (choice of distributions within the intervals) both
maximise — the sound upper bound of Theorem 3.1 of Bacci & Parker (2022). ``maxmin``: the nature
minimises (for information; not a bound on the concrete probability). ``minmin``: both minimise and
only the surely failing states (:attr:`IMDP.surely_failing`) count — the sound lower bound: every
concrete state of an abstract state lies in the region of one of its choices (its part and piece) and
its true action probabilities lie in that choice's intervals, so its failure probability is at least
the least value over the choices and over the distributions within the intervals.

The inner optimisation over an interval distribution is the classic greedy: give every successor
its lower bound, then hand the remaining mass to successors in order of decreasing (maxmax) or
increasing (maxmin) value, each up to its upper bound. It is vectorised over all choices.
Intervals are validated first (:meth:`IMDP.validate`): an infeasible choice would silently lose mass.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from rlverify.abstraction.imdp import IMDP

#: the directions of robust value iteration: scheduler then nature
MODES = ("maxmax", "maxmin", "minmin")


def choice_values(imdp: IMDP, values: np.ndarray, mode: str = "maxmax") -> np.ndarray:
    """Value ``(C,)`` of each choice: the optimal expectation of ``values`` over its interval distributions."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    tv = values[imdp.trans_target]
    key = -tv if mode == "maxmax" else tv
    order = np.lexsort((key, imdp.trans_choice))
    ch = imdp.trans_choice[order]
    lo = imdp.trans_lo[order]
    cap = imdp.trans_hi[order] - lo
    v = tv[order]
    c = imdp.n_choices
    slack = 1.0 - np.bincount(ch, weights=lo, minlength=c)
    cum = np.cumsum(cap)
    starts = np.searchsorted(ch, np.arange(c))  # first transition of each choice (sorted by choice)
    start_cum = np.concatenate([[0.0], cum])[starts]
    before = cum - cap - start_cum[ch]  # capacity handed out earlier within the same choice
    extra = np.clip(slack[ch] - before, 0.0, cap)
    return np.bincount(ch, weights=(lo + extra) * v, minlength=c)


def bounded_reachability(
    imdp: IMDP, horizon: int, *, mode: str = "maxmax", validate: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Probability of reaching ``fail`` within ``horizon`` steps, per state.

    Args:
        imdp: the interval MDP.
        horizon: number of steps ``k >= 0``.
        mode: ``"maxmax"`` (sound upper bound), ``"minmin"`` (sound lower bound: only
            :attr:`IMDP.surely_failing` states count as failed) or ``"maxmin"``.
        validate: check interval feasibility first (raises :class:`IntervalError`).

    Returns:
        ``(values (S,), choice_values (C,))``: state values for horizon ``k`` and the choice values
        of the last iteration (i.e. for horizon ``k``, each choice taken first).
    """
    if validate:
        imdp.validate()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    target = imdp.surely_failing if mode == "minmin" else imdp.fail
    values = target.astype(np.float64)
    q = np.zeros(imdp.n_choices)
    has_choice = np.bincount(imdp.choice_state, minlength=imdp.n_states) > 0
    for _ in range(horizon):
        q = choice_values(imdp, values, mode)
        if mode == "minmin":
            best = np.full(imdp.n_states, np.inf)
            np.minimum.at(best, imdp.choice_state, q)
        else:
            best = np.zeros(imdp.n_states)
            np.maximum.at(best, imdp.choice_state, q)
        new = np.where(has_choice, best, 0.0)
        values = np.where(target, 1.0, np.where(imdp.fail & ~target, 0.0, new))
    return values, q


def _drn_states(imdp: IMDP) -> tuple[list[str], int]:
    """The DRN lines of every state (fail states and leaves with a self-loop) and the number of choices written."""
    starts = np.searchsorted(imdp.trans_choice, np.arange(imdp.n_choices + 1))
    by_state: dict[int, list[int]] = {}
    for c, st in enumerate(imdp.choice_state):
        by_state.setdefault(int(st), []).append(c)
    lines = []
    n_choices = 0
    for st in range(imdp.n_states):
        labels = " fail" if imdp.fail[st] else ""
        lines.append(f"state {st}{' init' if st == 0 else ''}{labels}")
        chs = [] if imdp.fail[st] else by_state.get(st, [])
        if not chs:
            lines += ["\taction 0", f"\t\t{st} : [1, 1]"]
            n_choices += 1
            continue
        for i, c in enumerate(chs):
            lines.append(f"\taction {i}")
            lines += _drn_choice(imdp, int(starts[c]), int(starts[c + 1]))
            n_choices += 1
    return lines, n_choices


def _drn_choice(imdp: IMDP, first: int, end: int) -> list[str]:
    """The DRN lines of the transitions ``first..end-1`` of one choice, intervals to the same target summed."""
    merged: dict[int, tuple[float, float]] = {}
    for t in range(first, end):
        tgt = int(imdp.trans_target[t])
        lo, hi = merged.get(tgt, (0.0, 0.0))
        merged[tgt] = (lo + float(imdp.trans_lo[t]), hi + float(imdp.trans_hi[t]))
    return [f"\t\t{tgt} : [{merged[tgt][0]!r}, {min(merged[tgt][1], 1.0)!r}]" for tgt in sorted(merged)]


def storm_bounded_reachability(imdp: IMDP, horizon: int, *, mode: str = "maxmax") -> np.ndarray:
    """The same values computed by Storm's interval-MDP engine (for cross-checks; needs stormpy).

    The IMDP is written as an explicit DRN file with interval entries; leaves and fail states get a
    self-loop (which does not change step-bounded reachability of ``fail``). Intervals are validated
    first because Storm does not check feasibility. ``maxmax`` uses Storm's ``MAXIMIZE`` uncertainty
    resolution, ``maxmin`` its ``ROBUST`` mode.
    """
    import stormpy  # lazy: stormpy, start-up (only this cross-check needs it)

    imdp.validate()
    lines, n_choices = _drn_states(imdp)
    text = (
        "\n".join(
            [
                "@type: MDP",
                "@parameters",
                "",
                "@reward_models",
                "",
                "@nr_states",
                str(imdp.n_states),
                "@nr_choices",
                str(n_choices),
                "@model",
                *lines,
            ]
        )
        + "\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "imdp.drn"
        path.write_text(text)
        model = stormpy.build_model_from_drn[stormpy.Interval](str(path))
    prop = stormpy.parse_properties(f'Pmax=? [F<={int(horizon)} "fail"]')[0]
    resolution = stormpy.UncertaintyResolutionMode.MAXIMIZE if mode == "maxmax" else stormpy.UncertaintyResolutionMode.ROBUST
    result = stormpy.model_checking(model, prop, uncertainty_resolution_mode=resolution)
    return np.array([result.get_value(st) for st in range(imdp.n_states)])
