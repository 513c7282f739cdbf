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
from ._lgb_stats import check_counts, check_features, header_int, number

_MISSING_NAMES = {"None": 0, "Zero": 1, "NaN": 2}
_DUMP_INF = 1e300


def is_dump(doc: Any) -> bool:
    """Whether a decoded JSON document is a LightGBM dump (it has a ``tree_info`` list)."""
    return isinstance(doc, dict) and isinstance(doc.get("tree_info"), list)


def read(doc: Any) -> LgbModel:
    """Parse a decoded dump (checks its structure and every field's type and range;
    ``lightgbm`` checks what the values mean together)."""
    if not is_dump(doc):
        raise ModelFormatError("Not a LightGBM dump_model() document (no 'tree_info' list).")
    n_features = header_int(doc, "max_feature_idx") + 1
    trees = [_tree(info, i, n_features) for i, info in enumerate(doc["tree_info"])]
    header = {k: doc[k] for k in doc if k != "tree_info"}
    params = doc.get("parameters") if isinstance(doc.get("parameters"), dict) else {}
    params = {str(k): str(v) for k, v in params.items()}
    average = doc.get("average_output", False)
    if not isinstance(average, bool):
        raise bad(f"average_output is {average!r}, not a boolean.")
    return LgbModel(header, trees, params, doc.get("pandas_categorical"), average)


def _values(nodes: dict[int, dict], key: str, kind: type, where: str, default: Any = None):
    """Field ``key`` of every node (by index) as a ``kind`` number (``default`` where a node
    lacks it; None: required)."""
    out = []
    for k in range(len(nodes)):
        v = nodes[k].get(key, default)
        if v is None:
            raise bad(f"{where} {k} lacks {key} (truncated?).")
        if isinstance(v, str):
            raise bad(f"{where} {k}: {key} is the string {v!r}, not a JSON number (non-numeric).")
        out.append(number(v, kind, f"{where} {k}: {key}"))
    return np.array(out, dtype=np.float64 if kind is float else np.int64)


def _tree(info: Any, index: int, n_features: int) -> LgbTree:
    """One ``tree_info`` entry."""
    if not isinstance(info, dict) or not isinstance(info.get("tree_structure"), dict):
        raise bad(f"tree_info[{index}] has no tree_structure.")
    inner, leaves, links = _walk(info["tree_structure"], index)
    L = len(leaves)
    if sorted(leaves) != list(range(L)) or sorted(inner) != list(range(L - 1)):
        raise bad(f"tree {index}: leaf and split indices are not 0..n-1.")
    for key, want in (("tree_index", index), ("num_leaves", L)):
        if key in info and number(info[key], int, f"tree {index}: {key}") != want:
            raise bad(f"tree {index}: {key} is {info[key]!r}, but it is {want}.")
    where, at = f"tree {index} leaf", f"tree {index} split"
    leaf_value = _values(leaves, "leaf_value", float, where)
    if not np.all(np.isfinite(leaf_value)):
        raise bad(f"tree {index} has a non-finite leaf value.")
    leaf_weight = _values(leaves, "leaf_weight", float, where, np.nan)
    leaf_count = _values(leaves, "leaf_count", float, where, np.nan if L == 1 else None)
    shrinkage = number(info.get("shrinkage", 1.0), float, f"tree {index}: shrinkage")
    feature = _values(inner, "split_feature", int, at)
    check_features(feature, n_features, f"tree {index}", "split_feature")
    gain = _values(inner, "split_gain", float, at)
    if not np.all(np.isfinite(gain)):
        raise bad(f"tree {index} has a non-finite split_gain.")
    counts = _values(inner, "internal_count", int, at)  # LightGBM writes it for every split
    is_linear = any("leaf_coeff" in leaves[k] or "leaf_const" in leaves[k] for k in leaves)
    linear = _linear(leaves, index, n_features) if is_linear else None
    left, right = _children(links, L - 1)
    check_counts(index, left, right, leaf_count, leaf_weight, counts)
    rules = _split_rules(inner, index)
    if "num_cat" in info and number(info["num_cat"], int, f"tree {index}: num_cat") != int(
        np.sum(rules[1])
    ):
        raise bad(f"tree {index}: num_cat is {info['num_cat']!r}, not its categorical splits.")
    return LgbTree._make(
        (
            L,
            leaf_value,
            leaf_weight,
            leaf_count,
            shrinkage,
            feature,
            gain,
            rules[0],
            left,
            right,
            *rules[1:],
            is_linear,
            linear,
        )
    )


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
            if not isinstance(k, int) or isinstance(k, bool) or k in inner or k < 0:
                raise bad(f"tree {index} has a bad or repeated split_index {k!r}.")
            inner[k] = node
            code = k
            if "left_child" not in node or "right_child" not in node:
                raise bad(f"tree {index}: split {k} lacks a child (truncated?).")
            stack.append((node["right_child"], k, False))
            stack.append((node["left_child"], k, True))
        elif "leaf_value" in node:
            k = node.get("leaf_index", 0 if parent < 0 else None)
            if not isinstance(k, int) or isinstance(k, bool) or k in leaves or k < 0:
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


def _linear(leaves: dict[int, dict], index: int, n_features: int) -> LinearModel:
    """The linear models of a linear tree's leaves."""
    where = f"linear tree {index} leaf"
    const = _values(leaves, "leaf_const", float, where)
    features, coeff = [], []
    for k in range(len(leaves)):
        f, c = leaves[k].get("leaf_features", []), leaves[k].get("leaf_coeff", [])
        if not (isinstance(f, list) and isinstance(c, list) and len(f) == len(c)):
            raise bad(f"{where} {k}: leaf_features and leaf_coeff are not lists of one length.")
        features.append(
            np.array([number(v, int, f"{where} {k}: leaf_features") for v in f], dtype=np.int64)
        )
        check_features(features[-1], n_features, f"{where} {k}", "leaf_features")
        coeff.append(np.array([number(v, float, f"{where} {k}: leaf_coeff") for v in c]))
    return LinearModel(const=const, features=features, coeff=coeff)


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
        if not isinstance(rule, str) or rule not in ("<=", "=="):
            raise bad(f"tree {index}: unknown decision_type {rule!r}.")
        mt = nd.get("missing_type", "None")
        if not isinstance(mt, str) or mt not in _MISSING_NAMES:
            raise bad(f"tree {index}: unknown missing_type {mt!r}.")
        miss[k] = _MISSING_NAMES[mt]
        if "default_left" not in nd:  # LightGBM writes it for every split
            raise bad(f"tree {index} split {k} lacks default_left.")
        default_left = nd["default_left"]
        if not isinstance(default_left, bool):
            raise bad(f"tree {index} split {k}: default_left is {default_left!r}, not a boolean.")
        dl[k] = default_left
        cat[k] = rule == "=="
        if cat[k]:
            words[k] = _category_set(nd, index, k)
        else:
            thr[k] = _threshold(nd, index, k)
    return thr, cat, dl, miss, words


def _category_set(node: dict, index: int, k: int) -> np.ndarray:
    """The bitset of a categorical split (its threshold lists the categories: ``1||4||7``)."""
    t = node.get("threshold")
    if not isinstance(t, str):
        raise bad(f"tree {index}: categorical split {k} has threshold {t!r}, not '1||4||7'.")
    where = f"tree {index}: categorical split {k}'s threshold"
    members = np.array([number(c, int, where) for c in t.split("||") if c != ""], dtype=np.int64)
    if members.size and (members.min() < 0 or members.max() >= 2**31 - 1):
        raise bad(f"tree {index}: categorical split {k} has an invalid category.")
    return bitset(members)


def _threshold(node: dict, index: int, k: int) -> float:
    """A numeric split's threshold (the dump's +-1e300 read as infinite)."""
    if not isinstance(node.get("threshold"), (int, float)):
        t = node.get("threshold")
        raise bad(f"tree {index} split {k}: threshold is {t!r}, not a number (non-numeric).")
    t = number(node["threshold"], float, f"tree {index} split {k}: threshold")
    return math.copysign(math.inf, t) if abs(t) == _DUMP_INF else t
