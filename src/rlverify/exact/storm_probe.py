"""Storm's build of a PRISM model's initial state alone (every action masked), in a thread of its own: the names,
labels and valuation layout the merged exploration gives its chain so that Storm reads it as it reads the MDP, and
the plan of how each of Storm's labels is evaluated on the explored states."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

from rlverify.models.explicit import ExplicitModel, export_umb, read_umb
from rlverify.models.program import CompiledProgram, Unsupported, compile_expression
from rlverify.models.properties import Property
from rlverify.models.symbolic import SymbolicModel, storm_message

__all__ = ["StormProbe", "label_plan", "probe"]


def _atoms(formula: Any) -> list[Any]:
    """Storm formulas of the property's atomic expressions (for the expression labels Storm adds)."""
    import stormpy  # lazy: stormpy, start-up

    out: list[Any] = []

    def walk(f: Any) -> None:
        if isinstance(f, stormpy.logic.AtomicExpressionFormula):
            out.append(f.get_expression())
            return
        for attr in ("subformula", "left_subformula", "right_subformula"):
            sub = getattr(f, attr, None)
            if sub is not None and not callable(sub):
                walk(sub)

    walk(formula)
    return out


def probe(model: SymbolicModel, prop: Property) -> ExplicitModel:
    """Storm's build of the initial state alone (every action masked): Storm's names and valuation layout."""
    import stormpy  # lazy: stormpy, start-up
    import stormpy.developer as dev  # lazy: stormpy, start-up

    opts = stormpy.BuilderOptions([prop.storm])
    opts.set_build_state_valuations()
    opts.set_build_choice_labels()
    opts.set_build_all_labels()
    mask = dev.StateValuationFunctionMask[float](lambda valuation, action: False)
    try:
        storm_model = dev.make_explicit_model_builder[float](
            model.description(), opts, mask, dev.ExplicitModelBuilderOptions[float]()
        ).build()
    except RuntimeError as exc:
        raise Unsupported(f"Storm's build of the initial state failed: {storm_message(exc)}") from None
    with tempfile.TemporaryDirectory(prefix="rlverify-") as tmp:
        path = Path(tmp) / "probe.umb"
        export_umb(storm_model, path)
        return read_umb(path)


class StormProbe:
    """:func:`probe` in a thread of its own, started before the caller's checks and the program's compile (Storm's
    build releases the GIL): :meth:`result` joins it, raising what the probe raised.

    Joined before the exploration begins, so that none of its allocations or frees interleave with the exploration's
    (glibc then kept the exploration's freed arrays resident: issue 23's closing notes).
    """

    def __init__(self, model: SymbolicModel, prop: Property) -> None:
        self._out: ExplicitModel | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(model, prop), name="rlverify-storm-probe", daemon=True)
        self._thread.start()

    def _run(self, model: SymbolicModel, prop: Property) -> None:
        try:
            self._out = probe(model, prop)
        except BaseException as exc:  # re-raised by result(), in the caller's thread
            self._error = exc

    def wait(self) -> None:
        """Join the thread, whatever it raised: it must not outlive the caller's call (a thread still inside Storm's
        C++ when the interpreter exits aborts the process: ``terminate called without an active exception``)."""
        self._thread.join()

    def result(self) -> ExplicitModel:
        self.wait()
        if self._error is not None:
            raise self._error
        assert self._out is not None
        return self._out


def label_plan(program: CompiledProgram, probe: ExplicitModel, prop: Property) -> list[tuple[str, Any]]:
    """``(UMB key, function or "init"/"deadlock")`` per label of Storm's build: the program's labels, Storm's own,
    and the expression labels Storm adds for the property's atoms."""
    atoms = {str(e): compile_expression(e, program.by_name) for e in _atoms(prop.storm.get_raw_formula())}
    plan: list[tuple[str, Any]] = []
    for key, alias in probe.label_aliases.items():
        if alias in ("init", "deadlock"):
            plan.append((key, alias))
        elif alias in program.label_functions:
            plan.append((key, program.label_functions[alias]))
        elif alias in atoms:
            plan.append((key, atoms[alias]))
        else:  # an atom the walk did not reach (under X, say): Storm names the label by its expression
            plan.append((key, program.parse(alias)))
    return plan
