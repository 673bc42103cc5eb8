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
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
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
    #: raw UMB valuation records ``(S, bytes)`` uint8 and their index.json description (for export).
    valuation_bytes: np.ndarray | None = None
    valuation_spec: dict[str, Any] | None = None
    #: ``(C,)`` int32 index of each choice's command name in ``command_names`` (``""``: no command), when
    #: the model was built with Storm's choice origins (see :mod:`rlverify.models.commands`); else None
    choice_commands: np.ndarray | None = None
    command_names: tuple[str, ...] = ()

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

    def label_states(self, name: str) -> np.ndarray:
        """``(S,)`` bool mask of label ``name``."""
        return self.labels[name]

    def valuation_dict(self, state: int) -> dict[str, int]:
        """Variable name -> value of ``state`` (for messages)."""
        if not self.variables:
            return {"state": int(state)}
        return {v: int(x) for v, x in zip(self.variables, self.valuations[state])}

    def feature_matrix(self, features: tuple[str, ...] | list[str], states: np.ndarray | None = None) -> np.ndarray:
        """``(N, d)`` float64 valuations of ``states`` (all if None) in the order of ``features``."""
        cols = [self.variables.index(f) for f in features]
        vals = self.valuations if states is None else self.valuations[states]
        return vals[:, cols].astype(np.float64)


# ---------------------------------------------------------------------------------------------
# UMB reading


def read_umb(path: str | Path) -> ExplicitModel:
    """Read an uncompressed UMB archive written by Storm into an :class:`ExplicitModel`."""
    with tarfile.open(path) as tf:
        files = {m.name: m for m in tf.getmembers() if m.isfile()}

        def arr(name: str, dtype: Any) -> np.ndarray:
            f = tf.extractfile(files[name])
            assert f is not None
            return np.frombuffer(f.read(), dtype=dtype)

        index = json.loads(arr("index.json", np.uint8).tobytes())
        ts = index["transition-system"]
        n_states, n_choices = int(ts["#states"]), int(ts["#choices"])
        if "state-to-choices.bin" in files:
            row_groups = arr("state-to-choices.bin", np.uint64).astype(np.int64)[: n_states + 1]
        else:
            row_groups = np.arange(n_states + 1, dtype=np.int64)
        c2b = arr("choice-to-branches.bin", np.uint64).astype(np.int64)[: n_choices + 1]
        targets = arr("branch-to-target.bin", np.uint64).astype(np.int64)
        probs = arr("branch-to-probability.bin", np.float64)
        transitions = sp.csr_matrix((probs, targets, c2b), shape=(n_choices, n_states))
        initial = np.flatnonzero(_bits(arr("state-is-initial.bin", np.uint8), n_states))

        action_names: tuple[str, ...] = ("",)
        choice_actions = np.zeros(n_choices, dtype=np.int32)
        if "actions/choices/values.bin" in files:
            choice_actions = arr("actions/choices/values.bin", np.uint32).astype(np.int32)[:n_choices]
            offsets = arr("actions/choices/string-mapping.bin", np.uint64).astype(np.int64)
            blob = arr("actions/choices/strings.bin", np.uint8).tobytes()
            action_names = tuple(blob[offsets[i]: offsets[i + 1]].decode() for i in range(len(offsets) - 1))

        labels: dict[str, np.ndarray] = {}
        aliases: dict[str, str] = {}
        for key, desc in index.get("annotations", {}).get("aps", {}).items():
            name = f"annotations/aps/{key}/states/values.bin"
            if name in files:
                labels[key] = _bits(arr(name, np.uint8), n_states)
                aliases[key] = desc.get("alias", key)
        state_rewards: dict[str, np.ndarray] = {}
        choice_rewards: dict[str, np.ndarray] = {}
        for key, desc in index.get("annotations", {}).get("rewards", {}).items():
            alias = desc.get("alias", key)
            for kind, target, n in (("states", state_rewards, n_states), ("choices", choice_rewards, n_choices)):
                name = f"annotations/rewards/{key}/{kind}/values.bin"
                if name in files:
                    target[alias] = arr(name, np.float64)[:n].copy()

        variables: tuple[str, ...] = ()
        valuations = np.zeros((n_states, 0), dtype=np.int64)
        vbytes, vspec = None, None
        if "valuations/states/valuations.bin" in files:
            vspec = index["valuations"]["states"]
            classes = vspec["classes"]
            if len(classes) != 1:
                raise ValueError("UMB valuations with several classes are not supported")
            raw = arr("valuations/states/valuations.bin", np.uint8)
            width = sum(_bit_size(v) for v in classes[0]["variables"]) // 8
            vbytes = raw[: n_states * width].reshape(n_states, width)
            variables, valuations = _decode_valuations(vbytes, classes[0]["variables"])

    model_type = "dtmc" if int(ts.get("#players", 1)) == 0 else "mdp"
    return ExplicitModel(
        model_type=model_type, row_groups=row_groups, transitions=transitions, choice_actions=choice_actions,
        action_names=action_names, variables=variables, valuations=valuations, initial_states=initial,
        labels=labels, label_aliases=aliases, state_rewards=state_rewards, choice_rewards=choice_rewards,
        valuation_bytes=vbytes, valuation_spec=vspec,
    )


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
        chunk = bits[:, pos: pos + size].astype(np.int64)
        raw = chunk @ (np.int64(1) << np.arange(size, dtype=np.int64))
        kind = v["type"]["type"]
        if kind == "int":  # two's complement
            raw = np.where(raw >= (1 << (size - 1)), raw - (1 << size), raw)
        elif kind not in ("uint", "bool"):
            raise ValueError(f"UMB valuation variable {v.get('name')} has unsupported type {kind}")
        cols.append(raw + int(v.get("offset", 0)))
        names.append(v["name"])
        pos += size
    return tuple(names), (np.stack(cols, axis=1) if cols else np.zeros((len(vbytes), 0), dtype=np.int64))


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
            "#branch-actions": 0, "#branches": int(P.nnz), "#choice-actions": len(model.action_names) if is_mdp else 0,
            "#choices": model.num_choices, "#initial-states": len(model.initial_states), "#observations": 0,
            "#players": 1 if is_mdp else 0, "#states": n,
            "branch-probability-type": {"size": 64, "type": "double"}, "time": "discrete",
        },
        "annotations": {"aps": {}, "rewards": {}},
    }
    files: list[tuple[str, bytes]] = [
        ("choice-to-branches.bin", P.indptr.astype(np.uint64).tobytes()),
        ("branch-to-target.bin", P.indices.astype(np.uint64).tobytes()),
        ("branch-to-probability.bin", P.data.astype(np.float64).tobytes()),
        ("state-is-initial.bin", _pack(np.isin(np.arange(n), model.initial_states))),
    ]
    if is_mdp:
        files.append(("state-to-choices.bin", np.asarray(model.row_groups, dtype=np.uint64).tobytes()))
        blobs = [a.encode() for a in model.action_names]
        offsets = np.cumsum([0] + [len(b) for b in blobs]).astype(np.uint64)
        files += [("actions/choices/values.bin", np.asarray(model.choice_actions, dtype=np.uint32).tobytes()),
                  ("actions/choices/string-mapping.bin", offsets.tobytes()),
                  ("actions/choices/strings.bin", b"".join(blobs))]
    for key, mask in model.labels.items():
        index["annotations"]["aps"][key] = {"alias": model.label_aliases.get(key, key), "applies-to": ["states"],
                                            "type": {"size": 1, "type": "bool"}}
        files.append((f"annotations/aps/{key}/states/values.bin", _pack(mask)))
    reward_names = list(dict.fromkeys(list(model.state_rewards) + list(model.choice_rewards)))
    for i, name in enumerate(reward_names):
        key = f"r{i}"
        kinds = []
        if name in model.state_rewards:
            kinds.append("states")
            files.append((f"annotations/rewards/{key}/states/values.bin", np.asarray(model.state_rewards[name], np.float64).tobytes()))
        if name in model.choice_rewards:
            kinds.append("choices")
            files.append((f"annotations/rewards/{key}/choices/values.bin", np.asarray(model.choice_rewards[name], np.float64).tobytes()))
        index["annotations"]["rewards"][key] = {"alias": name, "applies-to": kinds, "type": {"size": 64, "type": "double"}}
    if model.valuation_bytes is not None and model.valuation_spec is not None:
        index["valuations"] = {"states": model.valuation_spec}
        files.append(("valuations/states/valuations.bin", np.ascontiguousarray(model.valuation_bytes).tobytes()))
    with tarfile.open(path, "w") as out:
        for name, data in [("index.json", json.dumps(index).encode())] + files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))


def _pack(mask: np.ndarray) -> bytes:
    packed = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
    pad = (-len(packed)) % 8  # 64-bit words
    return packed.tobytes() + b"\0" * pad


def to_storm(model: ExplicitModel) -> Any:
    """A stormpy sparse DTMC/MDP for ``model`` (through a temporary UMB archive)."""
    import stormpy

    with tempfile.TemporaryDirectory(prefix="rlverify-") as tmp:
        path = Path(tmp) / "chain.umb"
        write_umb(path, model)
        return stormpy.build_model_from_umb(str(path))


def from_storm(storm_model: Any) -> ExplicitModel:
    """An :class:`ExplicitModel` for a stormpy sparse MDP/DTMC (through a temporary UMB archive)."""
    import stormpy
    import stormpy.io

    opts = stormpy.io.UmbExportOptions()
    opts.compression = stormpy.io.CompressionMode.NO_COMPRESSION
    with tempfile.TemporaryDirectory(prefix="rlverify-") as tmp:
        path = Path(tmp) / "model.umb"
        stormpy.io.export_to_umb(storm_model, str(path), options=opts)
        return read_umb(path)
