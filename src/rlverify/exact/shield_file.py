"""A shield file fitted to a model: its fingerprint, the size limits it is read under, and the checks that refuse
a shield computed for another model or listing states outside the model's ranges."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from rlverify.errors import PolicyError, safe_repr
from rlverify.models.summary import summarize
from rlverify.models.symbolic import SymbolicModel
from rlverify.policies.shielded import MAX_SHIELD_BYTES, Shield, read_shield

__all__ = ["check_shield_fits", "load_shield", "model_fingerprint", "shield_limits"]


def model_fingerprint(model: SymbolicModel) -> str:
    """A hash of the model's program text and constants: a shield is refused on a model with another."""
    text = f"{model.kind}\n{model.constants}\n{model.program}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def check_shield_fits(shield: Shield, model: SymbolicModel, name: str | None = None) -> None:
    """Refuse (:class:`PolicyError`) a shield computed for another model (another program text or constants), whose
    ``model`` field names another model than ``name`` (how messages name ``model``, default :attr:`shown`; a model
    file may have moved: the same file name is enough), or that lists a state outside the model's declared ranges."""
    shown = name or model.shown
    named_here = shield.model == shown or (Path(shield.model).name == Path(shown).name and bool(Path(shown).suffix))
    if shield.fingerprint != model_fingerprint(model):
        _refuse_fingerprint(shield, model, name, shown, named_here)
    if not named_here:
        raise PolicyError(
            f"the shield's 'model' field names {safe_repr(shield.model)}, not {shown} (its fingerprint is this "
            "model's: an edited or mislabelled file); compute a shield for this model (rlverify shield)"
        )
    _check_ranges(shield, model)


def _refuse_fingerprint(shield: Shield, model: SymbolicModel, name: str | None, shown: str, named_here: bool) -> None:
    """Refuse a shield whose fingerprint is not ``model``'s, saying which model (or which constants) it names."""
    if not named_here:
        raise PolicyError(
            f"the shield was computed for model '{shield.model}'"
            + (f" with constants '{shield.constants}'" if shield.constants else "")
            + f", not for {shown}"
            + (f" with constants '{model.constants}'" if model.constants and not name else "")
            + ": compute a shield for this model (rlverify shield)"
        )
    constants = str(model.constants or "")
    other = (
        f"with constants '{shield.constants or 'none'}', not '{constants or 'none'}'"
        if shield.constants != constants
        else "for another version of the model (another program text, constants or parameters), or the file was edited"
    )
    raise PolicyError(
        f"the shield's fingerprint is not {shown}'s: it was computed {other}; compute a shield for this model "
        "(rlverify shield)"
    )


def _check_ranges(shield: Shield, model: SymbolicModel) -> None:
    """Refuse a shield listing a state outside the model's declared ranges."""
    ranges = _declared_ranges(model)
    for column, variable in enumerate(shield.variables):
        low, high = ranges.get(variable, (None, None))
        values = shield.valuations[:, column]
        below = values < low if low is not None else np.zeros(len(values), dtype=bool)
        outside = np.flatnonzero(below | (values > high if high is not None else False))
        if outside.size:
            raise PolicyError(
                f"the shield lists state {shield.valuation_text(int(outside[0]))}, outside the model's range of {variable} "
                f"[{low}..{high}] (an edited file, or a shield for another model); compute a shield for this model "
                "(rlverify shield)"
            )


def _declared_ranges(model: SymbolicModel) -> dict[str, tuple[int | None, int | None]]:
    """Each state variable's declared ``(low, high)`` (a JANI location: its codes; None where not a constant)."""
    declared = {v["name"]: v for v in summarize(model, build=False)[0].variables}
    out: dict[str, tuple[int | None, int | None]] = {}
    for v in model.variables:
        if v in model.locations:
            out[v] = (0, len(model.locations[v]) - 1)
        else:
            low, high = declared.get(v, {}).get("low"), declared.get(v, {}).get("high")
            out[v] = (None if low is None else int(low), None if high is None else int(high))
    return out


def shield_limits(model: SymbolicModel) -> tuple[int | None, int]:
    """The most states a shield of ``model`` can list (the product of its variables' declared ranges; None when
    some range is unknown) and the most bytes such a file takes (generously: any JSON layout of its numbers)."""
    states: int | None = 1
    widest = 1
    for low, high in _declared_ranges(model).values():
        if low is None or high is None:
            return None, MAX_SHIELD_BYTES
        size, widest = max(high - low + 1, 0), max(widest, len(str(low)), len(str(high)))
        states = None if states is None or states * size > MAX_SHIELD_BYTES else states * size
        if states is None:
            return None, MAX_SHIELD_BYTES
    assert states is not None
    actions = len(model.action_names) + len(model.commands) + 1
    per_state = len(model.variables) * (widest + 32) + 2 * actions * (len(str(actions)) + 32) + 64
    return states, min(MAX_SHIELD_BYTES, (1 << 20) + states * per_state)


def load_shield(path: str | Path, model: SymbolicModel, name: str | None = None) -> Shield:
    """The shield file ``path`` for ``model``: refused before it is read when larger than a shield of the model's
    states takes, before its states are checked when it lists more than the model can have, and when it was
    computed for another model (:func:`check_shield_fits`)."""
    max_states, max_bytes = shield_limits(model)
    shield = read_shield(path, max_states=max_states, max_bytes=max_bytes)
    check_shield_fits(shield, model, name)
    return shield
