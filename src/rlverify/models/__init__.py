"""Environment models: PRISM/JANI through stormpy as explicit numpy arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlverify.lazy import lazy_exports

if TYPE_CHECKING:
    from rlverify.models.constants import parse_constants
    from rlverify.models.dynamics import ChoiceTable, choice_table, fit
    from rlverify.models.explicit import ExplicitModel, read_umb, to_storm, write_umb
    from rlverify.models.gymnasium import GymnasiumModel, from_gymnasium
    from rlverify.models.properties import Property, parse_structure
    from rlverify.models.property_parser import parse_properties, parse_property
    from rlverify.models.storm_build import build_explicit
    from rlverify.models.symbolic import ModelFormat, SymbolicModel, load_model

__all__ = [
    "ChoiceTable",
    "ExplicitModel",
    "GymnasiumModel",
    "ModelFormat",
    "Property",
    "SymbolicModel",
    "build_explicit",
    "choice_table",
    "fit",
    "from_gymnasium",
    "load_model",
    "parse_constants",
    "parse_properties",
    "parse_property",
    "parse_structure",
    "read_umb",
    "to_storm",
    "write_umb",
]

lazy_exports(
    __name__,
    {
        "rlverify.models.dynamics": "ChoiceTable choice_table fit",
        "rlverify.models.explicit": "ExplicitModel read_umb to_storm write_umb",
        "rlverify.models.gymnasium": "GymnasiumModel from_gymnasium",
        "rlverify.models.properties": "Property parse_structure",
        "rlverify.models.constants": "parse_constants",
        "rlverify.models.property_parser": "parse_properties parse_property",
        "rlverify.models.storm_build": "build_explicit",
        "rlverify.models.symbolic": "ModelFormat SymbolicModel load_model",
    },
)
