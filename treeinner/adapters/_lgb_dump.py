"""LightGBM's ``Booster.dump_model()`` JSON read into an ``LgbModel``: nested
``tree_structure`` objects become LightGBM's flat numbering, as the model text has it.

The dump does not record ``lambda_l2`` nor ``boost_from_average`` (nor, in older versions, any
parameter), and writes infinite thresholds as +-1e300.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._errors import ModelFormatError
from ._common import bitset
from ._lgb_records import LgbModel, LgbTree, LinearModel, bad

_MISSING_NAMES = {"None": 0, "Zero": 1, "NaN": 2}
_DUMP_INF = 1e300


def is_dump(doc: Any) -> bool:
    """Whether a decoded JSON document is a LightGBM dump (it has a ``tree_info`` list)."""
    return isinstance(doc, dict) and isinstance(doc.get("tree_info"), list)


def read(doc: Any) -> LgbModel:
    """Parse a decoded dump (checks its structure, not yet what the values mean)."""
    if not is_dump(doc):
        raise ModelFormatError("Not a LightGBM dump_model() document (no 'tree_info' list).")
    trees = [_tree(info, i) for i, info in enumerate(doc["tree_info"])]
    header = {k: doc[k] for k in doc if k != "tree_info"}
    params = doc.get("parameters") if isinstance(doc.get("parameters"), dict) else {}
    params = {str(k): str(v) for k, v in params.items()}
    average = bool(doc.get("average_output", False))
    return LgbModel(header, trees, params, doc.get("pandas_categorical"), average)


def _tree(info: Any, index: int) -> LgbTree:
    """One ``tree_info`` entry."""
    if not isinstance(info, dict) or not isinstance(info.get("tree_structure"), dict):
        raise bad(f"tree_info[{index}] has no tree_structure.")
    inner, leaves, links = _walk(info["tree_structure"], index)
    L = len(leaves)
    if sorted(leaves) != list(range(L)) or sorted(inner) != list(range(L - 1)):
        raise bad(f"tree {index}: leaf and split indices are not 0..n-1.")
    try:
        leaf_value = np.array([float(leaves[k]["leaf_value"]) for k in range(L)])
        leaf_weight = np.array([float(leaves[k].get("leaf_weight", np.nan)) for k in range(L)])
        leaf_count = np.array([float(leaves[k].get("leaf_count", np.nan)) for k in range(L)])
        shrinkage = float(info.get("shrinkage", 1.0))
        feature = np.array([int(inner[k]["split_feature"]) for k in range(L - 1)])
        gain = np.array([float(inner[k].get("split_gain", 0.0)) for k in range(L - 1)])
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"tree {index} has a missing or non-numeric field ({e}).") from None
    is_linear = any("leaf_coeff" in leaves[k] or "leaf_const" in leaves[k] for k in leaves)
    linear = _linear(leaves, index) if is_linear else None
    left, right = _children(links, L - 1)
    rules = _split_rules(inner, index)
    return LgbTree(L, leaf_value, leaf_weight, leaf_count, shrinkage, feature, gain, rules[0],
                   left, right, *rules[1:], is_linear, linear)  # fmt: skip


def _walk(root: dict, index: int) -> tuple[dict[int, dict], dict[int, dict], list]:
    """The splits and leaves of a nested tree by their indices, and every
    ``(parent split, is_left, child)`` link (child: a split's index or ``~leaf``)."""
    inner: dict[int, dict] = {}
    leaves: dict[int, dict] = {}
    stack: list[tuple[Any, int, bool]] = [(root, -1, True)]
    links: list[tuple[int, bool, int]] = []
    while stack:
        node, parent, is_left = stack.pop()
        if not isinstance(node, dict):
            raise bad(f"tree {index} has a node that is not an object.")
        if "split_index" in node:
            k = node["split_index"]
            if not isinstance(k, int) or k in inner or k < 0:
                raise bad(f"tree {index} has a bad or repeated split_index {k!r}.")
            inner[k] = node
            code = k
            if "left_child" not in node or "right_child" not in node:
                raise bad(f"tree {index}: split {k} lacks a child (truncated?).")
            stack.append((node["right_child"], k, False))
            stack.append((node["left_child"], k, True))
        elif "leaf_value" in node:
            k = node.get("leaf_index", 0 if parent < 0 else None)
            if not isinstance(k, int) or k in leaves or k < 0:
                raise bad(f"tree {index} has a bad or repeated leaf_index {k!r}.")
            leaves[k] = node
            code = ~k
        else:
            raise bad(f"tree {index} has a node with neither split_index nor leaf_value.")
        if parent >= 0:
            links.append((parent, is_left, code))
    return inner, leaves, links


def _children(links: list[tuple[int, bool, int]], n_in: int) -> tuple[np.ndarray, np.ndarray]:
    """``left_child`` and ``right_child`` of every split, from the links."""
    left = np.zeros(n_in, dtype=np.int64)
    right = np.zeros(n_in, dtype=np.int64)
    for parent, is_left, code in links:
        (left if is_left else right)[parent] = code
    return left, right


def _linear(leaves: dict[int, dict], index: int) -> LinearModel:
    """The linear models of a linear tree's leaves."""
    L = len(leaves)
    try:
        lin = LinearModel(
            const=np.array([float(leaves[k]["leaf_const"]) for k in range(L)]),
            features=[
                np.array(leaves[k].get("leaf_features", []), dtype=np.int64) for k in range(L)
            ],
            coeff=[np.array(leaves[k].get("leaf_coeff", []), dtype=np.float64) for k in range(L)],
        )
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"linear tree {index} has a bad linear leaf ({e}).") from None
    if any(f.shape != c.shape for f, c in zip(lin.features, lin.coeff)):
        raise bad(f"linear tree {index}: leaf_features and leaf_coeff differ in length.")
    return lin


def _split_rules(inner: dict[int, dict], index: int) -> tuple:
    """``threshold``, ``categorical``, ``default_left``, ``missing`` and ``cat_words`` of the
    splits, from their ``decision_type``, ``missing_type`` and ``threshold``."""
    n_in = len(inner)
    cat = np.zeros(n_in, dtype=bool)
    dl = np.zeros(n_in, dtype=bool)
    miss = np.zeros(n_in, dtype=np.int64)
    thr = np.full(n_in, np.nan)
    words: dict[int, np.ndarray] = {}
    for k in range(n_in):
        nd = inner[k]
        rule = nd.get("decision_type", "<=")
        if rule not in ("<=", "=="):
            raise bad(f"tree {index}: unknown decision_type {rule!r}.")
        mt = nd.get("missing_type", "None")
        if mt not in _MISSING_NAMES:
            raise bad(f"tree {index}: unknown missing_type {mt!r}.")
        miss[k] = _MISSING_NAMES[mt]
        dl[k] = bool(nd.get("default_left", False))
        cat[k] = rule == "=="
        if cat[k]:
            words[k] = _category_set(nd, index, k)
        else:
            thr[k] = _threshold(nd, index, k)
    return thr, cat, dl, miss, words


def _category_set(node: dict, index: int, k: int) -> np.ndarray:
    """The bitset of a categorical split (its threshold lists the categories: ``1||4||7``)."""
    try:
        members = np.array(
            [int(c) for c in str(node["threshold"]).split("||") if c != ""], dtype=np.int64
        )
    except (KeyError, ValueError):
        raise bad(f"tree {index}: categorical split {k} has a bad threshold.") from None
    if members.size and (members.min() < 0 or members.max() >= 2**31 - 1):
        raise bad(f"tree {index}: categorical split {k} has an invalid category.")
    return bitset(members)


def _threshold(node: dict, index: int, k: int) -> float:
    """A numeric split's threshold (the dump's +-1e300 read as infinite)."""
    try:
        t = float(node["threshold"])
    except (KeyError, TypeError, ValueError):
        raise bad(f"tree {index}: split {k} has a bad threshold.") from None
    return math.copysign(math.inf, t) if abs(t) == _DUMP_INF else t
