"""The named choices of the abstraction engine, as ``enum.StrEnum`` types (each member is its string).

Imports nothing heavy: the CLI's parser may read them.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Domain", "Milp", "WitnessMethod"]


class Domain(StrEnum):
    """The abstract domain: boxes, octagons, template polyhedra given by directions, or directions chosen
    automatically (``auto``: a ``template`` once chosen)."""

    BOX = "box"
    OCTAGON = "octagon"
    TEMPLATE = "template"
    AUTO = "auto"


class Milp(StrEnum):
    """When refinement tightens a part's bounds by MILP (:class:`~rlverify.abstraction.refinement.RefinementOptions`)."""

    AUTO = "auto"
    ALWAYS = "always"
    NEVER = "never"


class WitnessMethod(StrEnum):
    """How the worst-case witness is found (:func:`~rlverify.abstraction.witness.search_witness`)."""

    AUTO = "auto"
    ENUMERATION = "enumeration"
    SIMULATION = "simulation"
    NONE = "none"
