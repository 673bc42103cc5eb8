"""Explicit MDPs and DTMCs as numpy arrays, moved to and from Storm through UMB archives.

Layout (S states, C choices, B branches):

* ``row_groups`` ``(S+1,)`` int64 — choices of state ``s`` are ``row_groups[s]:row_groups[s+1]``
  (a DTMC has one choice per state);
* ``transitions`` scipy CSR ``(C, S)`` float64 — row ``c`` is the distribution of choice ``c``;
* ``choice_actions`` ``(C,)`` int32 — index into ``action_names`` (``""`` for unlabelled);
* ``valuations`` ``(S, V)`` int64 — variable values (booleans as 0/1) in ``variables`` order;
* ``labels`` name -> ``(S,)`` bool; ``state_rewards`` name -> ``(S,)``; ``choice_rewards`` name -> ``(C,)``;
* optionally ``choice_commands`` ``(C,)`` int32 — index into ``command_names`` (see :mod:`rlverify.models.commands`).

The UMB route (``stormpy.io.export_to_umb`` / ``stormpy.build_model_from_umb``) moves 1M
transitions in tens of milliseconds; per-entry Python loops over Storm matrices are avoided.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp


@dataclass(frozen=True)
class ExplicitModel:
    """An explicit MDP (``model_type='mdp'``) or DTMC (``'dtmc'``); see the module docstring."""

    model_type: str
    row_groups: np.ndarray
    transitions: sp.csr_matrix
    choice_actions: np.ndarray
    action_names: tuple[str, ...]
    variables: tuple[str, ...]
    valuations: np.ndarray
    initial_states: np.ndarray
    labels: dict[str, np.ndarray] = field(default_factory=dict)
    label_aliases: dict[str, str] = field(default_factory=dict)
    state_rewards: dict[str, np.ndarray] = field(default_factory=dict)
    choice_rewards: dict[str, np.ndarray] = field(default_factory=dict)
    #: raw UMB valuation records ``(S, bytes)`` uint8 and their index.json description (for export; with a description
    #: and no records, the records are encoded from ``valuations``, which then follow the description's variables).
    valuation_bytes: np.ndarray | None = None
    valuation_spec: dict[str, Any] | None = None
    #: ``(C,)`` int32 index of each choice's command name in ``command_names`` (``""``: no command), when
    #: the model was built with Storm's choice origins (see :mod:`rlverify.models.commands`); else None
    choice_commands: np.ndarray | None = None
    command_names: tuple[str, ...] = ()
    #: what building it could not check, for every result that uses it to say (e.g. update ranges)
    notes: tuple[str, ...] = ()

    @property
    def num_states(self) -> int:
        return len(self.row_groups) - 1

    @property
    def num_choices(self) -> int:
        return self.transitions.shape[0]

    @property
    def num_transitions(self) -> int:
        return int(self.transitions.nnz)

    def choice_states(self) -> np.ndarray:
        """``(C,)`` int64: the state each choice belongs to."""
        return np.repeat(np.arange(self.num_states), np.diff(self.row_groups))

    def valuation_dict(self, state: int) -> dict[str, int]:
        """Variable name -> value of ``state`` (for messages)."""
        if not self.variables:
            return {"state": int(state)}
        return {v: int(x) for v, x in zip(self.variables, self.valuations[state], strict=True)}

    def feature_matrix(self, features: tuple[str, ...] | list[str], states: np.ndarray | None = None) -> np.ndarray:
        """``(N, d)`` float64 valuations of ``states`` (all if None) in the order of ``features``."""
        cols = [self.variables.index(f) for f in features]
        vals = self.valuations if states is None else self.valuations[states]
        return vals[:, cols].astype(np.float64)


# ---------------------------------------------------------------------------------------------
# UMB reading


def read_umb(path: str | Path, *, keep_valuation_bytes: bool = True) -> ExplicitModel:
    """Read an uncompressed UMB archive written by Storm into an :class:`ExplicitModel`.

    Each array is read from the archive file into its final array (no intermediate copy of the
    file's bytes); branch targets and the CSR row pointers are stored as int32 when the counts fit
    (12 bytes per transition instead of 24). ``keep_valuation_bytes=False`` drops the raw valuation
    records (only needed to write the model, or a chain induced on it, back to Storm).
    """
    with tarfile.open(path) as tf, open(path, "rb") as raw_file:
        umb = _Archive({m.name: m for m in tf.getmembers() if m.isfile()}, raw_file)
        index = json.loads(umb.arr("index.json", np.uint8).tobytes())
        ts = index["transition-system"]
        n_states, n_choices = int(ts["#states"]), int(ts["#choices"])
        if "state-to-choices.bin" in umb.files:
            row_groups = umb.index_array("state-to-choices.bin", n_states + 1, np.int64)
        else:
            row_groups = np.arange(n_states + 1, dtype=np.int64)
        n_branches = int(ts["#branches"])
        idx = index_dtype(max(n_states, n_choices, n_branches))
        c2b = umb.index_array("choice-to-branches.bin", n_choices + 1, idx)
        targets = umb.index_array("branch-to-target.bin", n_branches, idx)
        probs = umb.arr("branch-to-probability.bin", np.float64)[:n_branches]
        transitions = csr(probs, targets, c2b, (n_choices, n_states))
        initial = np.flatnonzero(_bits(umb.arr("state-is-initial.bin", np.uint8), n_states))
        action_names, choice_actions = umb.actions(n_choices)
        labels, aliases = umb.labels(index, n_states)
        state_rewards, choice_rewards = umb.rewards(index, n_states, n_choices)
        variables, valuations, vbytes, vspec = umb.valuations(index, n_states)
        if not keep_valuation_bytes:
            vbytes, vspec = None, None

    model_type = "dtmc" if int(ts.get("#players", 1)) == 0 else "mdp"
    return ExplicitModel(
        model_type=model_type,
        row_groups=row_groups,
        transitions=transitions,
        choice_actions=choice_actions,
        action_names=action_names,
        variables=variables,
        valuations=valuations,
        initial_states=initial,
        labels=labels,
        label_aliases=aliases,
        state_rewards=state_rewards,
        choice_rewards=choice_rewards,
        valuation_bytes=vbytes,
        valuation_spec=vspec,
    )


#: a stormpy sparse model (``stormpy.SparseMdp``/``SparseDtmc``; stormpy is untyped)
StormModel = Any

#: entries converted at a time when index arrays are read or written (bounds the temporary copies)
_CHUNK = 1 << 22


class _Archive:
    """The members of an open UMB archive (``files``: name -> tar member), each array read from the archive file
    (``raw_file``) into its final array."""

    def __init__(self, files: dict[str, tarfile.TarInfo], raw_file: BinaryIO) -> None:
        self.files = files
        self.raw_file = raw_file

    def arr(self, name: str, dtype: npt.DTypeLike) -> np.ndarray:
        member = self.files[name]
        self.raw_file.seek(member.offset_data)
        return np.fromfile(self.raw_file, dtype=dtype, count=member.size // np.dtype(dtype).itemsize)

    def index_array(self, name: str, count: int, dtype: npt.DTypeLike) -> np.ndarray:
        """``count`` uint64 entries of member ``name`` as ``dtype``, converted in chunks."""
        self.raw_file.seek(self.files[name].offset_data)
        out = np.empty(count, dtype=dtype)
        for start in range(0, count, _CHUNK):
            part = np.fromfile(self.raw_file, dtype=np.uint64, count=min(_CHUNK, count - start))
            out[start : start + len(part)] = part
        return out

    def actions(self, n_choices: int) -> tuple[tuple[str, ...], np.ndarray]:
        """The action names and ``(C,)`` int32 each choice's action (one unnamed action if the archive has none)."""
        if "actions/choices/values.bin" not in self.files:
            return ("",), np.zeros(n_choices, dtype=np.int32)
        choice_actions = self.arr("actions/choices/values.bin", np.uint32).astype(np.int32)[:n_choices]
        offsets = self.arr("actions/choices/string-mapping.bin", np.uint64).astype(np.int64)
        blob = self.arr("actions/choices/strings.bin", np.uint8).tobytes()
        return tuple(blob[offsets[i] : offsets[i + 1]].decode() for i in range(len(offsets) - 1)), choice_actions

    def labels(self, index: dict[str, Any], n_states: int) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """The state labels ``(S,)`` bool by UMB key, and each key's alias."""
        labels: dict[str, np.ndarray] = {}
        aliases: dict[str, str] = {}
        for key, desc in index.get("annotations", {}).get("aps", {}).items():
            name = f"annotations/aps/{key}/states/values.bin"
            if name in self.files:
                labels[key] = _bits(self.arr(name, np.uint8), n_states)
                aliases[key] = desc.get("alias", key)
        return labels, aliases

    def rewards(
        self, index: dict[str, Any], n_states: int, n_choices: int
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The state and the choice rewards (float64) by reward model name."""
        state_rewards: dict[str, np.ndarray] = {}
        choice_rewards: dict[str, np.ndarray] = {}
        for key, desc in index.get("annotations", {}).get("rewards", {}).items():
            alias = desc.get("alias", key)
            for applies, target, n in (("states", state_rewards, n_states), ("choices", choice_rewards, n_choices)):
                name = f"annotations/rewards/{key}/{applies}/values.bin"
                if name in self.files:
                    target[alias] = self.arr(name, np.float64)[:n].copy()
        return state_rewards, choice_rewards

    def valuations(
        self, index: dict[str, Any], n_states: int
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray | None, dict[str, Any] | None]:
        """The variables, ``(S, V)`` int64 valuations, the raw ``(S, bytes)`` records and their spec (None: none)."""
        if "valuations/states/valuations.bin" not in self.files:
            return (), np.zeros((n_states, 0), dtype=np.int64), None, None
        vspec = index["valuations"]["states"]
        classes = vspec["classes"]
        if len(classes) != 1:
            raise ValueError("UMB valuations with several classes are not supported")
        raw = self.arr("valuations/states/valuations.bin", np.uint8)
        width = sum(_bit_size(v) for v in classes[0]["variables"]) // 8
        vbytes = raw[: n_states * width].reshape(n_states, width)
        variables, valuations = _decode_valuations(vbytes, classes[0]["variables"])
        return variables, valuations, vbytes, vspec


def index_dtype(largest: int) -> type:
    """The narrowest index type scipy accepts for indices up to ``largest``: int32 or int64."""
    return np.int32 if largest < np.iinfo(np.int32).max else np.int64


def csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """A CSR matrix on these arrays, without copying them (indices and indptr of one integer dtype)."""
    return sp.csr_matrix((data, indices, indptr), shape=shape, copy=False)


def _bits(raw: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(raw, bitorder="little")[:n].astype(bool)


def _bit_size(v: dict[str, Any]) -> int:
    if "padding" in v:
        return int(v["padding"])
    return int(v["type"].get("size", 64))  # doubles come without a size


def _decode_valuations(vbytes: np.ndarray, spec: list[dict[str, Any]]) -> tuple[tuple[str, ...], np.ndarray]:
    bits = np.unpackbits(vbytes, axis=1, bitorder="little")
    names, cols = [], []
    pos = 0
    for v in spec:
        if "padding" in v:
            pos += v["padding"]
            continue
        size = _bit_size(v)
        if v["type"]["type"] == "double":  # transient reward variables of JANI models: not state features
            pos += size
            continue
        chunk = bits[:, pos : pos + size].astype(np.uint64)
        raw = chunk @ (np.uint64(1) << np.arange(size, dtype=np.uint64))  # fields of up to 64 bits, in uint64
        vtype = v["type"]["type"]
        match vtype:
            case "int":  # two's complement: the field's top bit shifted to bit 63, then shifted back with its sign
                shift = np.uint64(64 - size)
                signed = (raw << shift).view(np.int64) >> np.int64(64 - size)
            case "uint" | "bool":
                signed = raw.view(np.int64)  # below 2**63 (int64 valuations)
            case _:
                raise ValueError(f"UMB valuation variable {v.get('name')} has unsupported type {vtype}")
        cols.append(signed + int(v.get("offset", 0)))
        names.append(v["name"])
        pos += size
    return tuple(names), (np.stack(cols, axis=1) if cols else np.zeros((len(vbytes), 0), dtype=np.int64))


def encode_valuations(values: np.ndarray, spec: list[dict[str, Any]]) -> np.ndarray:
    """UMB valuation records ``(N, bytes)`` uint8 of ``values`` ``(N, V)`` (columns in ``spec``'s variable order):
    the inverse of the reader's decoding, for chains built here from states Storm never saw. Each record is the
    little-endian bit string of the variables' fields (two's complement for signed ones; padding and doubles zero),
    assembled in 64-bit words."""
    width = sum(_bit_size(v) for v in spec)
    n_bytes = (width + 7) // 8
    words = np.zeros((len(values), max(1, -(-width // 64))), dtype="<u8")
    pos, col = 0, 0
    for v in spec:
        size = _bit_size(v)
        if "padding" not in v and v["type"]["type"] != "double":
            raw = values[:, col].astype(np.int64) - int(v.get("offset", 0))
            field = raw.astype(np.uint64) & np.uint64((1 << size) - 1)
            word, shift = divmod(pos, 64)
            words[:, word] |= field << np.uint64(shift)
            if shift + size > 64:  # the field continues in the next word
                words[:, word + 1] |= field >> np.uint64(64 - shift)
            col += 1
        pos += size
    return np.ascontiguousarray(words.view(np.uint8)[:, :n_bytes])


# ---------------------------------------------------------------------------------------------
# UMB writing (chains built here, e.g. the policy-induced chain; MDPs built in numpy)


def write_umb(path: str | Path, model: ExplicitModel) -> None:
    """Write ``model`` (DTMC or MDP) as an uncompressed UMB archive for Storm.

    Labels keep their UMB keys and aliases, so properties over expressions
    (``F COLLISION=true``) resolve as on the original model; valuations are copied as raw records;
    state rewards are written under their names (choice rewards too, for MDPs).
    """
    n = model.num_states
    P = model.transitions
    is_mdp = model.model_type == "mdp"
    index: dict[str, Any] = {
        "format-version": 1,
        "format-revision": 0,
        "file-data": {"tool": "rlverify"},
        "transition-system": {
            "#branch-actions": 0,
            "#branches": int(P.nnz),
            "#choice-actions": len(model.action_names) if is_mdp else 0,
            "#choices": model.num_choices,
            "#initial-states": len(model.initial_states),
            "#observations": 0,
            "#players": 1 if is_mdp else 0,
            "#states": n,
            "branch-probability-type": {"size": 64, "type": "double"},
            "time": "discrete",
        },
        "annotations": {"aps": {}, "rewards": {}},
    }
    # big arrays are streamed into the archive in chunks (converted to UMB's types on the way), never
    # copied whole
    files: list[tuple[str, _Member]] = [
        ("choice-to-branches.bin", (P.indptr, np.uint64)),
        ("branch-to-target.bin", (P.indices, np.uint64)),
        ("branch-to-probability.bin", (P.data, np.float64)),
        ("state-is-initial.bin", _pack(np.isin(np.arange(n), model.initial_states))),
    ]
    if is_mdp:
        files += _choice_files(model)
    _add_labels(model, index, files)
    _add_rewards(model, index, files)
    _add_valuations(model, index, files)
    _write_tar(path, index, files)


#: an archive member's content: bytes, or an array streamed as a dtype
_Member = bytes | tuple[np.ndarray, Any]


def _choice_files(model: ExplicitModel) -> list[tuple[str, _Member]]:
    """An MDP's row groups and choice actions (names as a string table)."""
    blobs = [a.encode() for a in model.action_names]
    offsets = np.cumsum([0] + [len(b) for b in blobs]).astype(np.uint64)
    return [
        ("state-to-choices.bin", np.asarray(model.row_groups, dtype=np.uint64).tobytes()),
        ("actions/choices/values.bin", np.asarray(model.choice_actions, dtype=np.uint32).tobytes()),
        ("actions/choices/string-mapping.bin", offsets.tobytes()),
        ("actions/choices/strings.bin", b"".join(blobs)),
    ]


def _add_labels(model: ExplicitModel, index: dict[str, Any], files: list[tuple[str, _Member]]) -> None:
    for key, mask in model.labels.items():
        index["annotations"]["aps"][key] = {
            "alias": model.label_aliases.get(key, key),
            "applies-to": ["states"],
            "type": {"size": 1, "type": "bool"},
        }
        files.append((f"annotations/aps/{key}/states/values.bin", _pack(mask)))


def _add_rewards(model: ExplicitModel, index: dict[str, Any], files: list[tuple[str, _Member]]) -> None:
    """The reward models as ``r0``, ``r1``, ... (aliases: their names), state and choice rewards."""
    reward_names = list(dict.fromkeys(list(model.state_rewards) + list(model.choice_rewards)))
    for i, name in enumerate(reward_names):
        key = f"r{i}"
        kinds = []
        if name in model.state_rewards:
            kinds.append("states")
            values = np.asarray(model.state_rewards[name], np.float64)
            files.append((f"annotations/rewards/{key}/states/values.bin", values.tobytes()))
        if name in model.choice_rewards:
            kinds.append("choices")
            values = np.asarray(model.choice_rewards[name], np.float64)
            files.append((f"annotations/rewards/{key}/choices/values.bin", values.tobytes()))
        index["annotations"]["rewards"][key] = {"alias": name, "applies-to": kinds, "type": {"size": 64, "type": "double"}}


def _add_valuations(model: ExplicitModel, index: dict[str, Any], files: list[tuple[str, _Member]]) -> None:
    if model.valuation_spec is None:
        return
    records = model.valuation_bytes
    if records is None:  # a chain built here keeps only its valuations (in the spec's variable order)
        records = encode_valuations(model.valuations, model.valuation_spec["classes"][0]["variables"])
    index["valuations"] = {"states": model.valuation_spec}
    files.append(("valuations/states/valuations.bin", np.ascontiguousarray(records).tobytes()))


def _write_tar(path: str | Path, index: dict[str, Any], files: list[tuple[str, _Member]]) -> None:
    """The archive: ``index.json``, then ``files`` (arrays streamed in chunks)."""
    with tarfile.TarFile(path, "w", copybufsize=_CHUNK) as out:
        for name, data in [("index.json", json.dumps(index).encode()), *files]:
            info = tarfile.TarInfo(name)
            if isinstance(data, bytes):
                info.size = len(data)
                out.addfile(info, io.BytesIO(data))
            else:
                stream = _ArrayStream(*data)
                info.size = stream.size
                out.addfile(info, stream)


class _ArrayStream:
    """A file-like ``read`` over ``array`` converted to ``dtype`` chunk by chunk (for tarfile)."""

    def __init__(self, array: np.ndarray, dtype: Any) -> None:
        self.array, self.dtype = array, np.dtype(dtype)
        self.size = len(array) * self.dtype.itemsize
        self.pos = 0  # entries converted so far
        self.pending = memoryview(b"")
        self.offset = 0  # bytes of ``pending`` already read

    def read(self, n: int = -1, /) -> bytes:
        """Up to ``n`` bytes (all that are left if ``n`` is negative)."""
        pieces, need = [], n if n >= 0 else self.size
        while need > 0:
            if self.offset >= len(self.pending):
                if self.pos >= len(self.array):
                    break
                part = self.array[self.pos : self.pos + _CHUNK]
                self.pos += len(part)
                self.pending, self.offset = np.ascontiguousarray(part, dtype=self.dtype).data.cast("B"), 0
            piece = self.pending[self.offset : self.offset + need]
            self.offset += len(piece)
            need -= len(piece)
            pieces.append(piece)
        return b"".join(pieces)


def _pack(mask: np.ndarray) -> bytes:
    packed = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
    pad = (-len(packed)) % 8  # 64-bit words
    return packed.tobytes() + b"\0" * pad


def to_storm(model: ExplicitModel) -> StormModel:
    """A stormpy sparse DTMC/MDP for ``model`` (through a temporary UMB archive)."""
    import stormpy  # lazy: stormpy, start-up

    with tempfile.TemporaryDirectory(prefix="rlverify-") as tmp:
        path = Path(tmp) / "chain.umb"
        write_umb(path, model)
        return stormpy.build_model_from_umb(str(path))


def from_storm(storm_model: StormModel) -> ExplicitModel:
    """An :class:`ExplicitModel` for a stormpy sparse MDP/DTMC (through a temporary UMB archive)."""
    with tempfile.TemporaryDirectory(prefix="rlverify-") as tmp:
        path = Path(tmp) / "model.umb"
        export_umb(storm_model, path)
        return read_umb(path)


def export_umb(storm_model: StormModel, path: str | Path) -> None:
    """Write a stormpy sparse model to ``path`` as an uncompressed UMB archive (read it with :func:`read_umb`)."""
    import stormpy  # lazy: stormpy, start-up
    import stormpy.io  # lazy: stormpy, start-up

    opts = stormpy.io.UmbExportOptions()
    opts.compression = stormpy.io.CompressionMode.NO_COMPRESSION
    stormpy.io.export_to_umb(storm_model, str(path), options=opts)


# ---------------------------------------------------------------------------------------------
# memory budget (``--max-memory``): each phase's peak is estimated from counts known before it

#: bytes of resident memory a phase adds per count, measured on stochastic Avoid (n = 4..8; see
#: docs/scaling.md): Storm's UMB export copies its matrix (targets and probabilities, 16 bytes per
#: transition, plus valuations); reading the archive keeps 12 bytes per transition (int32 target,
#: float64 probability) plus the per-choice arrays; Storm reads a chain's archive into buffers and
#: then its matrix (2 x 16 bytes per transition).
PHASE_BYTES = {"export": 18.0, "read": 13.0, "induce": 4.0, "check": 36.0}
#: bytes per state of every phase (valuations, labels, per-state vectors)
STATE_BYTES = 200.0


def resident_bytes() -> int:
    """This process's current resident set size in bytes (Linux ``/proc``; 0 where unavailable)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def format_bytes(n: float) -> str:
    """``1.5 GB``-style size (powers of 1024)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


#: the default memory guard: this fraction of the machine's memory (or of the process's cgroup limit, if lower)
DEFAULT_MEMORY_FRACTION = 0.8


def machine_memory() -> int:
    """Bytes of memory this process may use: the machine's (``/proc/meminfo`` MemTotal, else ``os.sysconf``),
    or its cgroup's limit when lower; 0 when unknown."""
    total = _meminfo_total() or _sysconf_total()
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < (total or 1 << 62):
            total = int(text)
    return total


def _meminfo_total() -> int:
    """``/proc/meminfo``'s MemTotal in bytes (0: not found)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _sysconf_total() -> int:
    """The physical memory ``os.sysconf`` reports in bytes (0: not available)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def memory_limit(limit: int | None) -> tuple[int | None, str]:
    """``(bytes, how)``: ``limit`` (``--max-memory``), or by default :data:`DEFAULT_MEMORY_FRACTION` of
    :func:`machine_memory` (None when unknown); ``how`` names it for messages."""
    if limit is not None:
        return limit, f"--max-memory={format_bytes(limit)}"
    total = machine_memory()
    if not total:
        return None, "no memory limit"
    return int(DEFAULT_MEMORY_FRACTION * total), (
        f"the default memory guard ({DEFAULT_MEMORY_FRACTION:.0%} of this machine's {format_bytes(total)}; "
        "--max-memory SIZE sets another)"
    )


def memory_guard(
    limit: int | None,
    phase: str,
    *,
    states: int,
    transitions: int,
    what: str,
    estimates: dict[str, int] | None = None,
    extra: int | None = None,
    advice: str | None = None,
) -> None:
    """Refuse (``MemoryBudgetError``) before ``phase`` when current RSS + its estimated growth exceeds ``limit``
    (None: the default, a fraction of the machine's memory; see :func:`memory_limit`).

    ``transitions``: the count the phase scales with (the MDP's, or an upper bound of the chain's),
    ``what`` names it for the message. ``extra``: the phase's estimated growth in bytes when it is not
    ``PHASE_BYTES[phase]`` per transition; ``advice``: what shrinks it. The estimate (bytes) is recorded in
    ``estimates`` if given.
    """
    from rlverify.errors import MemoryBudgetError

    if extra is None:
        extra = int(PHASE_BYTES[phase] * transitions + STATE_BYTES * states)
        per = f", ~{PHASE_BYTES[phase]:g} bytes per transition"
    else:
        per = ""
    now = resident_bytes()
    estimate = now + extra
    if estimates is not None:
        estimates[phase] = estimate
    bound, how = memory_limit(limit)
    if bound is not None and estimate > bound:
        raise MemoryBudgetError(
            f"{how}: the {phase} phase needs an estimated {format_bytes(estimate)} "
            f"({format_bytes(now)} in use + {format_bytes(extra)} for {transitions:,} {what} and {states:,} states"
            f"{per}); "
            + (
                advice
                or "raise --max-memory, or verify a smaller model (constants), or use --mode deterministic (fewer transitions)"
            ),
            phase=phase,
            estimate=estimate,
            limit=bound,
        )


def out_of_memory(what: str, advice: str) -> Any:
    """The ``MemoryBudgetError`` to raise for a ``MemoryError`` during ``what`` (exit 2, saying what to change)."""
    from rlverify.errors import MemoryBudgetError

    bound, how = memory_limit(None)
    return MemoryBudgetError(
        f"out of memory during {what} ({format_bytes(resident_bytes())} in use; {how}): {advice}",
        phase=what,
        estimate=resident_bytes(),
        limit=bound or 0,
    )
