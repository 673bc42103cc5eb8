"""The policy's chain written out, as Storm's ``--exportbuild`` writes a model: DRN (Storm's explicit format), or DOT
for a picture of a small chain.

The chain is the one rlverify checks: the states the policy reaches, each row ``P(s, ·) = Σ_a π(a|s) T(s, a, ·)``,
with the property's target and the states that decide it made absorbing (as Storm does for a property-directed
build), the ``stalled`` sink where the policy puts mass on unavailable actions (``--unavailable stall``), labels,
reward models and each state's valuation. Probabilities are written with 17 significant digits: reading the DRN file
back (``stormpy.build_model_from_drn``, ``storm --explicit-drn``) gives the same doubles.
"""

from __future__ import annotations

import dataclasses
import re
from enum import StrEnum
from pathlib import Path

import numpy as np

from rlverify.errors import OptionError
from rlverify.exact.induced import STALLED_LABEL
from rlverify.files import FileWriteError, publishing
from rlverify.models.explicit import ExplicitModel, to_storm


#: the formats, by the file's suffix
class ExportFormat(StrEnum):
    """A chain file's format: Storm's explicit DRN, or a Graphviz DOT picture."""

    DRN = "drn"
    DOT = "dot"


FORMATS = {".drn": ExportFormat.DRN, ".dot": ExportFormat.DOT}
#: a DOT picture of more states than this is refused (Graphviz cannot lay it out legibly); DRN has no limit
MAX_DOT_STATES = 1000


def export_chain(chain: ExplicitModel, path: str | Path, *, force: bool = False) -> Path:
    """Write ``chain`` (a DTMC, the policy's chain) to ``path``, its format from the suffix (``.drn``, ``.dot``).

    The file is written atomically and never over an existing one without ``force`` (:mod:`rlverify.files`).

    Raises:
        OptionError: an unknown suffix, a chain that is not a DTMC held in memory, or a DOT picture of more than
            :data:`MAX_DOT_STATES` states.
        FileWriteError: the file cannot be written, or exists and ``force`` is not given.
    """
    suffix = Path(path).suffix.lower()
    fmt = FORMATS.get(suffix)
    if fmt is None:
        raise OptionError(
            f"--export {path}: the format is read from the suffix: .drn (Storm's explicit format) or .dot (Graphviz)"
        )
    if chain.model_type != "dtmc" or chain.transitions is None or not hasattr(chain.transitions, "tocsr"):
        raise OptionError(f"--export {path}: only a policy's chain held in memory is exported (not with --chain-dir)")
    if fmt is ExportFormat.DOT and chain.num_states > MAX_DOT_STATES:
        raise OptionError(
            f"--export {path}: the chain has {chain.num_states:,} states, more than a DOT picture can show "
            f"({MAX_DOT_STATES:,}); export it as .drn"
        )
    with publishing(path, force=force, what="--export") as tmp:
        if fmt is ExportFormat.DRN:
            _write_drn(chain, tmp)
            written = _drn_counts(tmp)
            if written != (chain.num_states, chain.num_transitions):
                raise FileWriteError(
                    f"--export {path}: cannot write the file (Storm's DRN writer stopped after {written[0]:,} of "
                    f"{chain.num_states:,} states and {written[1]:,} of {chain.num_transitions:,} transitions: is the "
                    "disk full?); nothing was written"
                )
        else:
            tmp.write_text(dot_text(chain), encoding="utf-8")
    return Path(path)


#: a label Storm's property parser can name (``"goal"``): an identifier
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: operators of a label's expression text, as words in its DRN name
_WORDS = {"<=>": "iff", "=>": "implies", "<=": "le", ">=": "ge", "!=": "ne", "=": "eq", "<": "lt", ">": "gt", "&": "and"}
_WORDS |= {"|": "or", "!": "not", "+": "plus", "-": "minus", "*": "times", "/": "div"}


def drn_label_names(chain: ExplicitModel) -> dict[str, str]:
    """Each of ``chain``'s labels -> its name in a DRN file: an identifier, so that a property over the file can
    name it (``P=? [F "x_eq_3_and_y_ge_2"]``). A label named by expression text (a property's target,
    ``(x = 3) & (y >= 2)``) gets its operators as words; an identifier keeps its name; clashes get ``_2``, ``_3``."""
    names = {key: chain.label_aliases.get(key, key) for key in chain.labels}
    taken = {n for n in names.values() if _IDENTIFIER.fullmatch(n)} | {"init", "deadlock"}
    for key, name in names.items():
        if _IDENTIFIER.fullmatch(name):
            continue
        text = name
        for op, word in sorted(_WORDS.items(), key=lambda w: -len(w[0])):  # longest first: "<=" before "<"
            text = text.replace(op, f" {word} ")
        base = "_".join(re.findall(r"[A-Za-z0-9_]+", text)).strip("_") or "label"
        base = base if _IDENTIFIER.fullmatch(base) else f"label_{base}"
        unique, i = base, 1
        while unique in taken:
            i += 1
            unique = f"{base}_{i}"
        taken.add(unique)
        names[key] = unique
    return names


def _write_drn(chain: ExplicitModel, path: Path) -> None:
    import stormpy.developer as dev  # lazy: stormpy, start-up

    chain = dataclasses.replace(chain, label_aliases=drn_label_names(chain))
    options = dev.DirectEncodingExporterOptions()
    options.allow_placeholders = False  # every probability written as a number
    options.output_precision = 17  # doubles round-trip
    dev.export_sparse_model_as_drn(to_storm(chain), str(path), options)


def _drn_counts(path: Path, chunk: int = 1 << 24) -> tuple[int, int]:
    """The states and transitions a DTMC's DRN file holds, complete lines only: Storm's C++ writer does not report a
    failed write (a full disk leaves a short or empty file). A state's line starts ``state ``, a transition's two
    tabs; each counts once its newline is there."""
    states = transitions = 0
    tail = b"\n"  # what precedes the next chunk (the file's start counts as a line start)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            text = tail + block
            cut = text.rfind(b"\n")  # count whole lines only; the rest is carried over
            whole, tail = text[: cut + 1], text[cut:]
            states += whole.count(b"\nstate ")
            transitions += whole.count(b"\n\t\t")
    return states, transitions


def _quoted(text: str) -> str:
    """``text`` as a DOT double-quoted string (a name is never read as DOT syntax or HTML)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _shown(chain: ExplicitModel, s: int, stalled: bool) -> str:
    """State ``s``'s valuation as a node shows it; the sink has none of its own (the DRN file's comment shows a
    placeholder)."""
    if stalled:
        return "the policy chose an unavailable action"
    return ", ".join(f"{k}={v}" for k, v in chain.valuation_dict(s).items()) if chain.variables else ""


def dot_text(chain: ExplicitModel) -> str:
    """The chain as a Graphviz digraph: one node per state (its valuation and labels; initial states bold), one edge
    per transition with its probability (``repr``: the exact double); the ``stalled`` sink is named, not valued."""
    M = chain.transitions.tocsr()
    init = set(int(s) for s in chain.initial_states)
    labels_of: list[list[str]] = [[] for _ in range(chain.num_states)]
    for name, mask in chain.labels.items():
        for state in np.flatnonzero(mask):
            labels_of[int(state)].append(name)
    stalled = chain.labels.get(STALLED_LABEL, np.zeros(chain.num_states, dtype=bool))
    lines = ["digraph chain {", "  node [shape=box, fontname=monospace];"]
    for s in range(chain.num_states):
        text = f"{s}: {_shown(chain, s, bool(stalled[s]))}" + (f"\n{' '.join(labels_of[s])}" if labels_of[s] else "")
        style = ", style=bold" if s in init else ""
        lines.append(f"  {s} [label={_quoted(text)}{style}];")
    for s in range(chain.num_states):
        for k in range(M.indptr[s], M.indptr[s + 1]):
            lines.append(f"  {s} -> {int(M.indices[k])} [label={_quoted(repr(float(M.data[k])))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
