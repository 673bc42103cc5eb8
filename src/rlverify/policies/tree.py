"""A decision-tree policy (deterministic) and its JSON file.

The tree is what :func:`rlverify.exact.tree.fit_tree` distils from a network; as a file it is a policy that
:func:`~rlverify.policies.load_policy` loads like any other (``--policy tree.json``). The format::

    {"format": "rlverify-tree", "version": 1,
     "features": ["x", "y"], "actions": ["east", "north", "south", "west"],
     "nodes": [{"feature": "x", "threshold": 1.5, "left": 1, "right": 2},
               {"action": "east"},
               {"action": "north"}]}

Node 0 is the root. An inner node sends a state to ``left`` when its ``feature``'s value is ``<= threshold``, else
to ``right``; a child's index is larger than its parent's (so every walk ends). A leaf names the one action the
policy takes (probability 1). Other top-level keys (``fitted``: what the tree was fitted to) are kept as
:attr:`TreePolicy.metadata` and otherwise ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.errors import PolicyError
from rlverify.files import write_text
from rlverify.policies.base import BasePolicy
from rlverify.policies.formats import is_name_list, json_type, read_json

#: the ``format`` value of a tree file
TREE_FORMAT = "rlverify-tree"
#: the most problems a tree file's refusal lists
MAX_TREE_PROBLEMS = 20


class TreePolicy(BasePolicy):
    """A deterministic policy given by a binary decision tree over its features (see the module's format).

    Args:
        features, actions: the names (feature order is the order of the states' columns).
        feature: ``(M,)`` int64 the column each node tests (-1 for a leaf); threshold: ``(M,)`` float64
            (a state goes left when its value is ``<= threshold``); left, right: ``(M,)`` int64 children (-1 for a
            leaf); action: ``(M,)`` int64 a leaf's action column (-1 for an inner node).
        metadata: what the file says besides the tree (kept, not interpreted).

    Raises:
        PolicyError: arrays that are not such a tree (each problem named).
    """

    no_network = (
        "a decision-tree policy has no network to bound; verify it with the exact or statistical engine "
        "(rlverify verify / simulate)"
    )

    def __init__(
        self,
        features: Sequence[str],
        actions: Sequence[str],
        *,
        feature: np.ndarray,
        threshold: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        action: np.ndarray,
        metadata: Mapping[str, Any] | None = None,
        name: str = "tree policy",
    ) -> None:
        super().__init__(features, actions, name=name)
        self.feature = np.asarray(feature, dtype=np.int64)
        self.threshold = np.asarray(threshold, dtype=np.float64)
        self.left = np.asarray(left, dtype=np.int64)
        self.right = np.asarray(right, dtype=np.int64)
        self.action = np.asarray(action, dtype=np.int64)
        self.metadata = dict(metadata or {})
        problems = _check_arrays(self)
        if problems:
            raise PolicyError(f"{name}: not a decision tree", problems[:MAX_TREE_PROBLEMS])

    @property
    def greedy(self) -> bool:
        """True: every row is one-hot."""
        return True

    @property
    def depth(self) -> int:
        """The number of tests on the longest root-to-leaf walk."""
        depth = np.zeros(len(self.feature), dtype=np.int64)
        for i in range(len(self.feature)):  # children come after their parent
            if self.feature[i] >= 0:
                depth[self.left[i]] = depth[self.right[i]] = depth[i] + 1
        return int(depth.max(initial=0))

    def leaves(self, states: np.ndarray) -> np.ndarray:
        """``(N,)`` int64 the leaf each of ``states`` ``(N, d)`` reaches (all rows walk down together)."""
        x = np.asarray(states, dtype=np.float64)
        node = np.zeros(len(x), dtype=np.int64)
        rows = np.arange(len(x))
        for _ in range(len(self.feature)):
            inner = self.feature[node] >= 0
            if not inner.any():
                break
            at, r = node[inner], rows[inner]
            go_left = x[r, self.feature[at]] <= self.threshold[at]
            node[inner] = np.where(go_left, self.left[at], self.right[at])
        return node

    def _greedy_columns(self, states: np.ndarray) -> np.ndarray | None:
        return self.action[self.leaves(states)]

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        out = np.zeros((len(states), len(self.actions)))
        out[np.arange(len(states)), self.action[self.leaves(states)]] = 1.0
        return out

    def to_json(self) -> dict[str, Any]:
        """The tree as its file's JSON value (see the module's format)."""
        nodes: list[dict[str, Any]] = []
        for i in range(len(self.feature)):
            if self.feature[i] < 0:
                nodes.append({"action": self.actions[int(self.action[i])]})
            else:
                nodes.append(
                    {
                        "feature": self.features[int(self.feature[i])],
                        "threshold": float(self.threshold[i]),
                        "left": int(self.left[i]),
                        "right": int(self.right[i]),
                    }
                )
        return {
            "format": TREE_FORMAT,
            "version": 1,
            "features": list(self.features),
            "actions": list(self.actions),
            "nodes": nodes,
            **({"fitted": self.metadata} if self.metadata else {}),
        }

    def save(self, path: str | Path, *, force: bool = False) -> None:
        """Write the tree file (atomically; an existing file only with ``force``)."""
        write_text(Path(path), json.dumps(self.to_json(), indent=1) + "\n", force=force)

    @classmethod
    def from_json(cls, path: str | Path) -> TreePolicy:
        """Read a tree file, reporting every problem at once.

        Raises:
            InputFileError: not a readable JSON file. PolicyError: every problem of its contents, each named.
        """
        path = Path(path)
        return tree_from_data(read_json(path), str(path))


def is_tree_data(data: Any) -> bool:
    """Whether a policy file's JSON value declares the tree format (``"format": "rlverify-tree"``)."""
    return isinstance(data, dict) and data.get("format") == TREE_FORMAT


def tree_from_data(data: Any, name: str) -> TreePolicy:
    """The :class:`TreePolicy` of a tree file's JSON value ``data`` (``name``: the file, for messages).

    Raises:
        PolicyError: every problem of the value, each named.
    """
    if not is_tree_data(data):
        raise PolicyError(f'{name}: not a tree policy (expected a JSON object with "format": "{TREE_FORMAT}")')
    problems = _header_problems(data)
    if problems:
        raise PolicyError(f"{name}: invalid tree policy", problems)
    features, actions = list(data["features"]), list(data["actions"])
    feature, threshold, left, right, action = _read_nodes(data["nodes"], features, actions, problems)
    if problems:
        extra = len(problems) - MAX_TREE_PROBLEMS
        raise PolicyError(
            f"{name}: invalid tree policy", problems[:MAX_TREE_PROBLEMS] + ([f"... and {extra} more"] if extra > 0 else [])
        )
    metadata = data.get("fitted") if isinstance(data.get("fitted"), dict) else None
    return TreePolicy(
        features,
        actions,
        feature=feature,
        threshold=threshold,
        left=left,
        right=right,
        action=action,
        metadata=metadata,
        name=name,
    )


def _header_problems(data: dict[str, Any]) -> list[str]:
    """What is wrong with a tree file's fields besides its nodes' contents (missing fields first, alone)."""
    problems = [f"missing field '{k}'" for k in ("features", "actions", "nodes") if k not in data]
    if problems:
        return problems
    if data.get("version", 1) != 1:
        problems.append(f"version {data.get('version')!r} is not supported (version 1)")
    for key in ("features", "actions"):
        if not is_name_list(data[key]) or not data[key]:
            problems.append(f"'{key}' must be a non-empty list of names (strings), got {json_type(data[key])}")
    nodes = data["nodes"]
    if not isinstance(nodes, list) or not nodes:
        problems.append(f"'nodes' must be a non-empty list of nodes, got {json_type(nodes)}")
    return problems


def _read_nodes(
    nodes: list[Any], features: list[str], actions: list[str], problems: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A tree file's ``nodes`` as the arrays of :class:`TreePolicy` (feature, threshold, left, right, action);
    every problem appended to ``problems``."""
    m = len(nodes)
    feature, left, right, action = (np.full(m, -1, dtype=np.int64) for _ in range(4))
    arrays = _NodeArrays(feature, left, right, action, threshold=np.zeros(m))
    for i, node in enumerate(nodes):
        where = f"nodes[{i}]"
        if not isinstance(node, dict):
            problems.append(f"{where}: expected an object, got {json_type(node)}")
        elif "action" in node:
            problems += arrays.read_leaf(i, node, actions)
        else:
            problems += arrays.read_inner(i, node, features)
    return arrays.feature, arrays.threshold, arrays.left, arrays.right, arrays.action


@dataclass
class _NodeArrays:
    """The node arrays :func:`_read_nodes` fills (-1: not set; a leaf has only an action)."""

    feature: np.ndarray
    left: np.ndarray
    right: np.ndarray
    action: np.ndarray
    threshold: np.ndarray

    def read_leaf(self, i: int, node: dict[str, Any], actions: list[str]) -> list[str]:
        """Node ``i`` as a leaf; its problems."""
        where, problems = f"nodes[{i}]", []
        extra = sorted(set(node) - {"action"})
        if extra:
            problems.append(f"{where}: a leaf has only 'action', got also {extra}")
        if node["action"] not in actions:
            problems.append(f"{where}: unknown action {node['action']!r} (declared: {actions})")
        else:
            self.action[i] = actions.index(node["action"])
        return problems

    def read_inner(self, i: int, node: dict[str, Any], features: list[str]) -> list[str]:
        """Node ``i`` as an inner node (a test and two later children); its problems."""
        where = f"nodes[{i}]"
        missing = [k for k in ("feature", "threshold", "left", "right") if k not in node]
        if missing:
            return [f"{where}: an inner node needs {missing} (or a leaf: 'action')"]
        problems = []
        if node["feature"] not in features:
            problems.append(f"{where}: unknown feature {node['feature']!r} (declared: {features})")
        else:
            self.feature[i] = features.index(node["feature"])
        t = node["threshold"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(float(t)):
            problems.append(f"{where}: threshold must be a finite number, got {json_type(t)}")
        else:
            self.threshold[i] = float(t)
        return problems + self._read_children(i, node)

    def _read_children(self, i: int, node: dict[str, Any]) -> list[str]:
        """Inner node ``i``'s children (each a later node); their problems."""
        m, problems = len(self.feature), []
        for side, arr in (("left", self.left), ("right", self.right)):
            c = node[side]
            if isinstance(c, bool) or not isinstance(c, int) or not i < c < m:
                problems.append(f"nodes[{i}]: '{side}' must be the index of a later node ({i + 1}..{m - 1}), got {c!r}")
            else:
                arr[i] = c
        return problems


def _check_arrays(tree: TreePolicy) -> list[str]:
    """Every way the tree's arrays are not a tree (children after parents, each node reached once, leaves with an
    action in range, inner nodes with a feature in range)."""
    m = len(tree.feature)
    if m == 0:
        return ["no nodes"]
    if not all(len(a) == m for a in (tree.threshold, tree.left, tree.right, tree.action)):
        return ["the node arrays differ in length"]
    problems: list[str] = []
    parents = np.zeros(m, dtype=np.int64)
    for i in range(m):
        if tree.feature[i] >= 0:
            problems += _inner_problems(tree, i, parents)
        elif not 0 <= tree.action[i] < len(tree.actions):
            problems.append(f"node {i}: a leaf without an action in range")
    if not problems:
        unreached = np.flatnonzero(parents[1:] != 1) + 1
        if len(unreached):
            problems.append(
                f"nodes {unreached[:10].tolist()} are reached from {parents[unreached[0]]} parents (each node but the "
                "root has one)"
            )
    return problems


def _inner_problems(tree: TreePolicy, i: int, parents: np.ndarray) -> list[str]:
    """What is wrong with inner node ``i`` (feature column, children); each later child's parent counted."""
    m = len(tree.feature)
    problems = []
    if tree.feature[i] >= len(tree.features):
        problems.append(f"node {i}: feature column {int(tree.feature[i])} out of range")
    for c in (int(tree.left[i]), int(tree.right[i])):
        if not i < c < m:
            problems.append(f"node {i}: child {c} is not a later node")
        else:
            parents[c] += 1
    return problems
