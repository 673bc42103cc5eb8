"""Cross-engine agreement as a library object: the exact and the statistical engine on the same input.

:func:`cross_check` resolves one target, policy and property once (:func:`rlverify.resolve.resolve`),
checks it exactly (Storm on the induced chain), bounds it by the optimum over all schedulers (Pmin
and Pmax of the MDP) and estimates it by simulation, and says whether the three agree:
``Pmin <= value <= Pmax`` and the exact value inside the statistical interval. The latter fails
with probability at most ``delta`` when both engines are right.

The consistency predicates (:func:`within_optimum`, :func:`ordered`, :func:`inside`, :func:`same`) are the ones
``rlverify report`` composes too; each allows the exact value's numerical ``slack`` (:func:`slack`).
"""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass, field
from typing import Any

from rlverify.resolve import PolicySpec, TargetSpec, resolve_model
from rlverify.results import (
    ExactResult,
    OptimumResult,
    Provenance,
    Result,
    StatisticalResult,
    Summary,
    shown,
    shown_pair,
    solver_guarantee,
    versions,
)


def slack(exact: ExactResult) -> float:
    """The numerical slack of an exact value in the consistency checks: twice its relative precision (0 for an
    infinite expected reward, which is exact)."""
    return 2 * (exact.precision or 0.0) * max(1.0, abs(exact.value)) if math.isfinite(exact.value) else 0.0


def within_optimum(value: float, pmin: float, pmax: float, slack: float, *, stalled: bool = False) -> bool:
    """``Pmin <= value <= Pmax`` within ``slack``. With ``stalled`` mass (the policy puts mass on unavailable
    actions: no scheduler of the MDP does that, and a stalled run never satisfies the property) only
    ``value <= Pmax`` must hold."""
    return (pmin - slack <= value or stalled) and value <= pmax + slack


def ordered(worst: float, nominal: float, best: float, *, worst_is: str = "max", slack: float = 0.0) -> bool:
    """``worst >= nominal >= best`` within ``slack`` (``worst_is`` ``max``: the property names a failure), or
    ``worst <= nominal <= best`` (``min``: a goal)."""
    if worst_is == "max":
        return worst + slack >= nominal >= best - slack
    return worst - slack <= nominal <= best + slack


def inside(value: float, low: float, high: float, slack: float) -> bool:
    """``low <= value <= high`` within ``slack``."""
    return low - slack <= value <= high + slack


def same(a: float, b: float, slack: float) -> bool:
    """Whether two engines' values agree: equal (infinite expected rewards included) or within ``slack`` + 1e-9."""
    return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= slack + 1e-9)


@dataclass(frozen=True)
class Agreement(Result):
    """What the engines said about one (model, policy, property), and whether it agrees.

    Attributes:
        provenance: model, property (as resolved: names), policy (its source), versions.
        exact: the induced chain's value (stochastic mode); optimum: Pmin/Pmax over all schedulers.
        statistical: the simulation estimate with its interval (confidence ``1 - delta``).
        checks: check name -> passed: ``"pmin <= value <= pmax"`` (within the solver's precision) and
            ``"value in statistical interval"``.
    """

    exact: ExactResult
    optimum: OptimumResult
    statistical: StatisticalResult
    checks: dict[str, bool] = field(default_factory=dict)

    @builtins.property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(self.checks.values())

    def disagreements(self) -> list[str]:
        """One line per failed check, with both numbers."""
        out = []
        v, lo, hi = self.exact.value, self.optimum.pmin, self.optimum.pmax
        if not self.checks.get("pmin <= value <= pmax", True):
            out.append(f"{self.model} {self.property}: exact value {v:.6g} outside [Pmin, Pmax] = [{lo:.6g}, {hi:.6g}]")
        if not self.checks.get("value in statistical interval", True):
            a, b = self.statistical.interval
            out.append(
                f"{self.model} {self.property}: exact value {v:.6g} outside the statistical interval "
                f"[{a:.6g}, {b:.6g}] ({self.statistical.confidence:.1%} confidence, {self.statistical.runs} runs)"
            )
        return out

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """``ok``, the checks and the three results."""
        return {"ok": self.ok, **own}

    def _summary(self) -> Summary:
        """Whether the engines agree, with the three engines' numbers and each check."""
        e, o, st = self.exact, self.optimum, self.statistical
        rows = [
            ("exact value", f"{shown(e.value)} ({solver_guarantee(e.guarantee, e.precision, e.lower, e.upper)})"),
            ("Pmin / Pmax", f"{shown(o.pmin)} / {shown(o.pmax)} (all schedulers)"),
            (
                "statistical",
                f"{shown(st.estimate)} in {shown_pair(*st.interval)} at {st.confidence:.4g} confidence, {st.runs:,} runs",
            ),
            *((check, "holds" if ok else "FAILS") for check, ok in self.checks.items()),
        ]
        return Summary(
            "cross-check of the exact and the statistical engine",
            "the engines agree" if self.ok else "the engines DISAGREE",
            "exact (sound solver) against the optimum and a statistical interval: a disagreement is a bug, or a "
            f"miss of probability at most {1 - st.confidence:.4g}",
            tuple(rows),
        )


def cross_check(
    target: TargetSpec,
    property: str,
    policy: PolicySpec | None = None,
    *,
    constants: str | None = None,
    runs: int = 4_000,
    delta: float = 0.001,
    seed: int = 0,
    max_steps: int = 10_000,
) -> Agreement:
    """Check ``property`` of ``policy`` on ``target`` with the exact and the statistical engine.

    Args:
        target: as for :func:`rlverify.resolve.resolve`: a model file or a PRISM benchmark id.
        property: a property text or name.
        policy: a policy spec (default: the benchmark's reference policy).
        constants: model constants or benchmark parameters.
        runs: the simulation's number of runs.
        delta: the Clopper–Pearson interval's confidence is ``1 - delta``.
        seed: the simulation's seed.
        max_steps: the simulation's step limit per run.

    Returns:
        An :class:`Agreement` (``ok`` is False when an engine disagrees; nothing is raised for that).
    """
    from rlverify.exact import ExactOptions, optimum, verify_exact  # lazy: the engines, only when cross-checking
    from rlverify.statistical.engine import SimulationOptions  # lazy: the engines, only when cross-checking
    from rlverify.statistical.verify import (  # lazy: the engines, only when cross-checking
        StatisticalOptions,
        verify_statistical,
    )

    t = resolve_model(
        target,
        constants=constants,
        policy=policy,
        property=property,
        command="cross_check",
        needs_property=True,
    )
    prop, pol = t.property, t.policy
    assert prop is not None and pol is not None  # resolved with a property and (needs_policy) a policy
    exact = t.stamp(verify_exact(t.model, prop, pol, ExactOptions()))
    best = t.stamp(optimum(t.model, prop, ExactOptions()))
    stat = verify_statistical(
        t.model,
        prop,
        pol,
        StatisticalOptions(
            method="clopper-pearson", runs=runs, delta=delta, simulation=SimulationOptions(seed=seed, max_steps=max_steps)
        ),
    )
    stat = t.stamp(stat)
    within = slack(exact)
    checks = {
        "pmin <= value <= pmax": within_optimum(
            exact.value, best.pmin, best.pmax, within, stalled=exact.stalled_probability > 0
        ),
        "value in statistical interval": inside(exact.value, stat.interval[0], stat.interval[1], within),
    }
    return Agreement(
        exact=exact,
        optimum=best,
        statistical=stat,
        checks=checks,
        provenance=Provenance(model=t.name, property=prop.name or prop.text, policy=t.policy_source, versions=versions()),
    )


__all__ = ["Agreement", "cross_check", "inside", "ordered", "same", "slack", "within_optimum"]
