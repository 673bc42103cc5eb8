"""Results of the abstraction engine: sound bounds from a whole initial region."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from rlverify.results import Result, Summary, shown, total_time

if TYPE_CHECKING:
    from rlverify.abstraction.imdp import IMDP
    from rlverify.abstraction.options import AbstractionOptions


class Verdict(StrEnum):
    """The verdict of an abstraction on ``Pr(F<=k fail) <= threshold`` (each member is the text it shows)."""

    SAFE = "safe"
    UNSAFE_SOUND = "unsafe (witness, sound)"
    UNSAFE_STATISTICAL = "unsafe (witness, statistical)"
    UNDECIDED = "undecided at budget"

    @property
    def unsafe(self) -> bool:
        """Whether a lower bound on the worst case is above the threshold (a witness, sound or statistical)."""
        return self in (Verdict.UNSAFE_SOUND, Verdict.UNSAFE_STATISTICAL)


@dataclass(frozen=True)
class PartBound:
    """One part of the refined initial region and the bound from it.

    Attributes:
        lo, hi: template bounds of the part (along ``AbstractionResult.template_axes``).
        probability_lower, probability_upper: sound action-probability bounds over the part.
        bound: sound upper bound on ``Pr(F<=k fail)`` from every state of the part.
        lower: sound lower bound on ``Pr(F<=k fail)`` from every state of the part (None: not computed).
    """

    lo: tuple[float, ...]
    hi: tuple[float, ...]
    probability_lower: tuple[float, ...]
    probability_upper: tuple[float, ...]
    bound: float
    lower: float | None = None


@dataclass(frozen=True)
class WorstWitness:
    """A start state whose failure probability bounds the worst case from below (:class:`AbstractionResult`).

    Attributes:
        state: the start state ``(n,)``, in the system's variables.
        probability: its failure probability under the policy as it runs (its own runtime, e.g. onnxruntime): exact
            (``method == "enumeration"``: every action sequence, in floating point) or the estimate (``"simulation"``:
            successes / runs).
        lower: what it proves about the worst case over the initial region: ``worst >= lower``. Exact: the
            probability; simulation: the one-sided Clopper-Pearson lower bound at ``confidence`` (runs fresh from
            those that chose the state, so the choice does not bias it).
        upper: the upper end of the state's interval (exact: the probability; simulation: None, one-sided).
        method: ``"enumeration"`` or ``"simulation"``; guarantee: the same in words.
        confidence: the confidence of ``lower`` (None when exact); runs: runs behind it (None when exact).
        candidates: start states examined; seed: the seed of the sampling of candidates and runs.
    """

    state: tuple[float, ...]
    probability: float
    lower: float
    upper: float | None
    method: str
    guarantee: str
    confidence: float | None
    runs: int | None
    candidates: int
    seed: int


@dataclass(frozen=True)
class AbstractionResult(Result):
    """Result of :func:`verify_abstraction`: a sound upper bound on the failure probability.

    Attributes:
        guarantee: always ``"sound upper bound"``: for every state ``s`` of the initial region,
            ``Pr_s(F<=k fail) <= upper_bound`` (and ``<=`` the bound of the part containing ``s``).
        upper_bound: the max-max value of the initial abstract state.
        maxmin_value: the max-min value (information only; not a bound).
        parts: the refined initial region with per-part bounds.
        n_abstract_states: IMDP states (including the fail sink).
        n_polyhedra: refined parts over all abstract states (the paper's "num. poly").
        n_containment_merges: successors merged into visited states (the paper's "num. visited").
        n_shared_successors: successors that were exactly an existing abstract state and share it
            (lossless, with or without containment; also actions of one part with the same successor).
        n_unrefined_states: abstract states not refined because the policy's choice cannot matter
            there: a last step that is safe whatever happens, and with ``refine_everywhere=False`` also
            states where every action leads to the same successor (or, at the last step, outcome).
        n_choices, n_transitions: IMDP size.
        n_unresolved_parts: parts accepted with spread above ``phi`` (minimum size or budget).
        n_milp_parts: parts bounded by MILP.
        options: the :class:`AbstractionOptions` used; seed: their seed.
        variables, actions; template_axes: the axes of the domain.
        initial_lo, initial_hi: the initial box.
        provenance: model (the system's name), property (the failure event, ``F<=k fail``), policy; timings
            (seconds: bounds, refinement, successors, solving, total); versions; warnings.
        lower_all: sound lower bound: for every state ``s`` of the initial region, ``Pr_s(F<=k fail) >= lower_all``
            (min-min robust value iteration counting only successors inside the unsafe set as failed).
        worst_witness: a start state whose failure probability bounds the worst case from below
            (:class:`WorstWitness`; exact or statistical, as it says), or None when not searched.
        gap: ``upper_bound - worst_witness.lower``: how far the sound upper bound can be above the worst case.
        verdict: with a threshold ``B``: :class:`Verdict` ``"safe"`` (upper <= B), ``"unsafe (witness, sound|statistical)"``
            (a lower bound on the worst case > B) or ``"undecided at budget"``; None without one. ``unsafe`` says
            whether it is one of the two unsafe ones.
        stopped: why the refinement by the gap stopped (None: a single abstraction, no refinement loop).
        cells: initial cells the refinement by the gap ended with (each abstracted on its own).
        history: per round of the refinement by the gap ``(seconds, upper, lower_all, witness lower)``.
    """

    guarantee: str
    upper_bound: float
    maxmin_value: float
    parts: tuple[PartBound, ...]
    n_abstract_states: int
    n_polyhedra: int
    n_containment_merges: int
    n_shared_successors: int
    n_unrefined_states: int
    n_choices: int
    n_transitions: int
    n_unresolved_parts: int
    n_milp_parts: int
    options: AbstractionOptions
    seed: int
    variables: tuple[str, ...]
    actions: tuple[str, ...]
    template_axes: tuple[tuple[float, ...], ...]
    initial_lo: tuple[float, ...]
    initial_hi: tuple[float, ...]
    imdp: IMDP | None = field(default=None, repr=False, compare=False)
    lower_all: float | None = None
    worst_witness: WorstWitness | None = None
    gap: float | None = None
    verdict: Verdict | None = None
    stopped: str | None = None
    cells: int | None = None
    history: tuple[tuple[float, float, float, float], ...] = ()

    NOT_IN_JSON: ClassVar[tuple[str, ...]] = ("imdp",)
    KEEPS_MODEL_NAME: ClassVar[bool] = True

    @property
    def unsafe(self) -> bool:
        """Whether the threshold is refuted: a lower bound on the worst case lies above it (:class:`Verdict`)."""
        return self.verdict is not None and Verdict(self.verdict).unsafe

    def _summary(self) -> Summary:
        """The sound bound, the refinement's size and what was left unresolved."""
        rows = [
            ("max-min value", f"{shown(self.maxmin_value)} (information only, not a bound)"),
            (
                "initial parts",
                f"{len(self.parts):,} (bounds {shown(min((p.bound for p in self.parts), default=None))} .. "
                f"{shown(max((p.bound for p in self.parts), default=None))})",
            ),
            (
                "abstraction",
                f"{self.n_abstract_states:,} abstract states, {self.n_polyhedra:,} polyhedra, "
                f"{self.n_transitions:,} transitions",
            ),
        ]
        if self.n_unresolved_parts:
            rows.append(("unresolved parts", f"{self.n_unresolved_parts:,} (accepted above the spread target)"))
        rows = _two_sided_rows(self) + rows
        rows += [("seed", str(self.seed)), ("time", total_time(self))]
        guarantee = f"sound upper bound: from every state of the initial region, Pr(failure) <= {shown(self.upper_bound)}"
        return Summary(
            "sound upper bound on the failure probability (interval-MDP abstraction)",
            shown(self.upper_bound),
            guarantee,
            tuple(rows),
        )


def _two_sided_rows(result: AbstractionResult) -> list[tuple[str, str]]:
    """The lower bound, the witness, the gap and the threshold's verdict of an abstraction, each with its guarantee."""
    rows = []
    if result.lower_all is not None:
        rows.append(("lower bound (sound)", f"{shown(result.lower_all)}: from every initial state, Pr(failure) >= it"))
    w = result.worst_witness
    if w is not None:
        at = "(" + ", ".join(f"{name}={x:.6g}" for name, x in zip(result.variables, w.state, strict=False)) + ")"
        rows.append(("worst witness", f"{shown(w.lower)} at {at}: {w.guarantee}"))
    if result.gap is not None:
        rows.append(("gap", f"{shown(result.gap)} (upper bound - worst witness: the worst case lies in between)"))
    if result.verdict is not None:
        rows.append(("verdict", result.verdict))
    if result.stopped is not None:
        rows.append(("refinement", f"{result.cells or 0:,} initial cells; stopped: {result.stopped}"))
    return rows
