"""One report: every engine that applies to a target, side by side, checked against each other.

:func:`make_report` resolves a target, policy and property once (:func:`rlverify.resolve.resolve`)
and runs what applies:

* a PRISM/JANI model: the exact value, the deterministic estimate, Pmin/Pmax over all schedulers
  (when the MDP fits), a simulation estimate, the failure paths, a risk map and the robustness to
  observation perturbations (epsilon = 1);
* a native environment (Racetrack): a simulation estimate and the per-start-cell heat map, with
  Storm's optimum per cell;
* a continuous system: the abstraction's sound bound and a simulation estimate from random starts.

It then asserts that the answers are consistent — the exact value inside the statistical interval,
``Pmin <= value <= Pmax``, ``worst >= nominal >= best``, each heat-map cell's goal probability no
higher than its optimum, the abstraction bound at least the statistical interval's lower end — and
:meth:`Report.to_html` writes one self-contained page (inline images and styles; no network needed).
A check fails with probability at most the statistical ``delta`` when every engine is right.

The modules: :mod:`~rlverify.report.page` (the result and its page), :mod:`~rlverify.report.common` (options and
what the sections share), :mod:`~rlverify.report.model` (a PRISM/JANI model's sections),
:mod:`~rlverify.report.simulated` (an environment's and a continuous system's), :mod:`~rlverify.report.make` (the
report: resolve, run the sections of the target's kind, the verdict).
"""

from __future__ import annotations

from rlverify.report.common import ReportOptions, Shared
from rlverify.report.make import make_report
from rlverify.report.page import Check, Report, Section, write_report

__all__ = ["Check", "Report", "ReportOptions", "Section", "Shared", "make_report", "write_report"]
