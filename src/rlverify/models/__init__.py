"""Environment models: PRISM/JANI through stormpy as explicit numpy arrays."""

from rlverify.models.explicit import ExplicitModel, read_umb, to_storm, write_umb
from rlverify.models.symbolic import SymbolicModel, build_explicit, load_model, parse_constants, parse_property

__all__ = ["ExplicitModel", "SymbolicModel", "build_explicit", "load_model", "parse_constants", "parse_property",
           "read_umb", "to_storm", "write_umb"]
