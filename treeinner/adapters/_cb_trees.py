"""CatBoost: the features and trees phases of reading a model's JSON export.

``features(doc)`` maps CatBoost's feature indices to the model's columns (``FeatureMap``);
``parse_trees(doc, k, fmap)`` reads every tree, oblivious (a complete binary tree in heap order)
or non-symmetric (depth first), into per-node arrays with ``k`` values per leaf. A categorical
split (one-hot or CTR) gets a synthetic 0/1 column of its own, which ``_cb_categorical`` fills
by asking CatBoost where each row goes.

Credit of the synthetic columns (one convention for TreeSHAP's players and for every path
attribution and importance: PreDecomp, Saabas, TreeInner, ForestInner, unbiased gain): a
one-hot split is credited to its categorical feature; a CTR split to the categorical features
whose values its projection counts (``cat_feature_value`` elements), equally when there are
several. The float borders and one-hot values a projection may combine with them (tree CTRs,
``max_ctr_complexity`` > 1) are not credited, as in CatBoost's ShapValues, which key a CTR's
Shapley player on ``Projection.CatFeatures`` only. So CTR(c, x > b) is the feature ``c``,
CTR(c1, c2) the player {c1, c2} shared half and half, and TreeSHAP equals ShapValues.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import ModelFormatError, UnsupportedModelError
from ._common import Corrupt, corrupt

#: nan_value_treatment -> whether NaN goes left
_NAN_LEFT = {"AsFalse": True, "AsIs": True, "AsTrue": False}
_MAX_DEPTH = 64


def bad(msg: str) -> Corrupt:
    """A corrupt-model error of the CatBoost adapter."""
    return corrupt("CatBoost", msg)


def num(v: Any, what: str) -> float:
    """A JSON number (not a bool) as float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise bad(f"{what} is not a number ({v!r}).")
    return float(v)


def _float32_border(v: Any) -> float:
    """A split border as CatBoost keeps it (float32)."""
    b = num(v, "a split border")
    if not np.isfinite(b):
        raise bad(f"a split border is not finite ({b}).")
    # CatBoost keeps borders in float32; rounding here is what CatBoost does loading the JSON.
    with np.errstate(over="ignore"):
        b32 = np.float32(b)
    if not np.isfinite(b32):
        raise bad(f"a split border ({b}) is outside the float32 range.")
    return float(b32)


# ---------------------------------------------------------------------- features
class FeatureMap(dict):
    """float_feature_index -> (column, nan goes left), plus what categorical splits need: the
    column of every categorical feature, the credit of CTR splits, and the synthetic 0/1
    columns allocated to categorical splits (their credited columns and CatBoost tree)."""

    cat_cols: dict[int, int]
    ctr_cols: list[tuple[float, int, tuple[int, ...]]]  # (border, target_border_idx, columns)
    n_float_borders: int
    n_onehot_values: int
    n_raw: int
    synth: list[tuple[int, ...]]
    synth_tree: list[int]
    n_ctr: int
    tree: int

    def credit_of(self, s: dict) -> tuple[int, ...]:
        """The input columns a categorical split (OneHotFeature or OnlineCtr) depends on."""
        kind = s.get("split_type")
        if kind == "OneHotFeature":
            ci = s.get("cat_feature_index")
            if ci not in self.cat_cols or isinstance(ci, bool):
                raise bad(f"a one-hot split uses cat_feature_index {ci!r}, not described.")
            return (self.cat_cols[ci],)
        border = num(s.get("border"), "a CTR border")
        tbi = s.get("ctr_target_border_idx", 0)
        # split_index numbers float borders, then one-hot values, then CTR borders in order
        si = s.get("split_index")
        j = si - self.n_float_borders - self.n_onehot_values if isinstance(si, int) else -1
        if 0 <= j < len(self.ctr_cols):
            b, t, cols = self.ctr_cols[j]
            if t == tbi and abs(b - border) <= 1e-6 * max(1.0, abs(b)):
                return cols
        found = {cols for b, t, cols in self.ctr_cols if t == tbi and b == border}
        if len(found) == 1:
            return found.pop()
        raise bad(f"a CTR split (border {border}) matches {len(found)} CTR descriptions.")

    def synthetic(self, s: dict) -> int:
        """A new 0/1 column for a categorical split of the current tree."""
        cols = self.credit_of(s)
        self.n_ctr += s.get("split_type") == "OnlineCtr"
        self.synth.append(cols)
        self.synth_tree.append(self.tree)
        return self.n_raw + len(self.synth) - 1


def features(doc: dict) -> tuple[list[str], bool, FeatureMap]:
    """The feature names (``f0, f1, ...`` unless the model names every column uniquely),
    whether the model names them, and the feature map."""
    fi = doc.get("features_info")
    if not isinstance(fi, dict):
        raise bad("features_info is missing.")
    for kind in ("text_features", "embedding_features"):
        if fi.get(kind):
            raise UnsupportedModelError(
                f"CatBoost models with {kind.replace('_', ' ')} are not supported."
            )
    floats = fi.get("float_features") or []
    cats = fi.get("categorical_features") or []
    if not isinstance(floats, list) or not isinstance(cats, list):
        raise bad("features_info lists are not arrays.")
    names = _column_names(floats + cats)
    fmap = _float_map(floats)
    n = max(names) + 1 if names else 0
    if n < 1:
        raise bad("the model describes no features.")
    _categorical_map(fmap, floats, cats, fi.get("ctrs") or [])
    fmap.n_raw = n
    fmap.synth, fmap.synth_tree, fmap.tree, fmap.n_ctr = [], [], 0, 0
    given = [names.get(i, "") for i in range(n)]
    named = all(given) and len(set(given)) == n
    return (given if named else [f"f{i}" for i in range(n)]), named, fmap


def _column_names(described: list) -> dict[int, str]:
    """Column -> feature_id of every described feature (checked: valid, not repeated)."""
    names: dict[int, str] = {}
    for f in described:
        if not isinstance(f, dict) or "flat_feature_index" not in f:
            raise bad("a feature lacks flat_feature_index.")
        col = f["flat_feature_index"]
        if isinstance(col, bool) or not isinstance(col, int) or not 0 <= col < 2**24:
            raise bad(f"flat_feature_index {col!r} is not a valid column.")
        if col in names:
            raise bad(f"column {col} is described twice.")
        fid = f.get("feature_id", "")
        names[col] = str(fid) if fid is not None else ""
    return names


def _float_map(floats: list) -> FeatureMap:
    """float_feature_index -> (column, whether NaN goes left)."""
    fmap = FeatureMap()
    for f in floats:
        idx = f.get("feature_index")
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0 or idx in fmap:
            raise bad(f"float feature_index {idx!r} is missing or repeated.")
        treat = f.get("nan_value_treatment", "AsIs")
        if treat not in _NAN_LEFT:
            raise UnsupportedModelError(f"CatBoost nan_value_treatment {treat!r} is not supported.")
        fmap[idx] = (int(f["flat_feature_index"]), _NAN_LEFT[treat])
    return fmap


def _categorical_map(fmap: FeatureMap, floats: list, cats: list, ctrs: list) -> None:
    """Fill in the categorical columns, the split numbering and the CTRs' columns."""
    fmap.cat_cols = {}
    for f in cats:
        ci = f.get("feature_index")
        if isinstance(ci, bool) or not isinstance(ci, int) or ci < 0 or ci in fmap.cat_cols:
            raise bad(f"categorical feature_index {ci!r} is missing or repeated.")
        fmap.cat_cols[ci] = int(f["flat_feature_index"])
    fmap.n_float_borders = sum(len(f.get("borders") or []) for f in floats)
    fmap.n_onehot_values = sum(len(f.get("values") or []) for f in cats)
    fmap.ctr_cols = []
    for c in ctrs:
        key = _ctr_credit(fmap, c)
        for b in c.get("borders") or []:
            fmap.ctr_cols.append((num(b, "a CTR border"), c.get("target_border_idx", 0), key))


def _ctr_credit(fmap: FeatureMap, ctr: Any) -> tuple[int, ...]:
    """The columns a CTR's splits are credited to: the categorical features whose values
    the CTR counts (its projection's ``cat_feature_value`` elements), sorted.

    The projection may also hold float borders (``float_feature``) and one-hot values
    (``cat_feature_exact_value``) of splits above it in the tree; they select which rows a
    count is taken over but are not credited, as in CatBoost's ShapValues (which key a CTR's
    Shapley player on ``Projection.CatFeatures`` only). A projection without a categorical
    value element is refused: CatBoost never builds one (every CTR counts a categorical
    feature), and its ShapValues would drop such a split's contribution.
    """
    if not isinstance(ctr, dict) or not isinstance(ctr.get("elements"), list):
        raise bad("a CTR description has no elements.")
    cols = set()
    for e in ctr["elements"]:
        if not isinstance(e, dict):
            raise bad("a CTR element is not an object.")
        kind = e.get("combination_element")
        if kind is None:  # absent: read it off the element's keys
            kind = "float_feature" if "float_feature_index" in e else "cat_feature_value"
        if kind in ("cat_feature_value", "cat_feature_exact_value"):
            ci = e.get("cat_feature_index")
            if not isinstance(ci, int) or isinstance(ci, bool) or ci not in fmap.cat_cols:
                raise bad(f"a CTR element uses cat_feature_index {ci!r}, not described.")
            if kind == "cat_feature_value":
                cols.add(fmap.cat_cols[ci])
        elif kind == "float_feature":
            fi = e.get("float_feature_index")
            if not isinstance(fi, int) or isinstance(fi, bool) or fi not in fmap:
                raise bad(f"a CTR element uses float_feature_index {fi!r}, not described.")
        else:
            raise UnsupportedModelError(
                f"CatBoost CTR elements of kind {kind!r} are not supported."
            )
    if not cols:
        raise bad("a CTR projection counts no categorical feature.")
    return tuple(sorted(cols))


def _split(s: Any, fmap: FeatureMap) -> tuple[int, float, bool]:
    """(column, float32 border, nan goes left) of one split."""
    if not isinstance(s, dict):
        raise bad("a split is not an object.")
    kind = s.get("split_type", "FloatFeature")
    if kind in ("OneHotFeature", "OnlineCtr"):
        # evaluated by CatBoost itself: a 0/1 column, 1 where the row goes right
        return fmap.synthetic(s), 0.5, False
    if kind != "FloatFeature":
        raise UnsupportedModelError(f"CatBoost splits of type {kind!r} are not supported.")
    idx = s.get("float_feature_index")
    if idx not in fmap or isinstance(idx, bool):
        raise bad(f"a split uses float_feature_index {idx!r}, which is not described.")
    col, nan_left = fmap[idx]
    return col, _float32_border(s.get("border")), nan_left


# ---------------------------------------------------------------------- trees
def parse_trees(doc: dict, k: int, fmap: FeatureMap) -> tuple[list[dict[str, np.ndarray]], bool]:
    """Every tree (``left``, ``right``, ``feature``, ``threshold``, ``nan_left``, ``value`` with
    ``k`` columns, ``weight`` and ``leaf_id`` per node), and whether they are oblivious."""
    symmetric = "oblivious_trees" in doc
    trees_json = doc["oblivious_trees"] if symmetric else doc["trees"]
    if not isinstance(trees_json, list):
        raise bad("the trees are not an array.")
    if len(trees_json) == 0:
        raise ModelFormatError(
            "The CatBoost model has no trees (was it trained for 0 iterations?)."
        )
    parse = _oblivious if symmetric else _nonsymmetric
    parsed = []
    for i, t in enumerate(trees_json):
        fmap.tree = i
        parsed.append(parse(t, k, fmap))
    return parsed, symmetric


def _oblivious_leaves(tree: dict, d: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """An oblivious tree's leaf values (n_leaves x k) and weights (NaN when absent)."""
    n_leaves = 1 << d
    lv = tree.get("leaf_values")
    if not isinstance(lv, list) or len(lv) != n_leaves * k:
        raise bad(
            f"an oblivious tree of depth {d} needs {n_leaves * k} leaf values, has "
            f"{len(lv) if isinstance(lv, list) else 'none'}."
        )
    values = np.array([num(x, "a leaf value") for x in lv]).reshape(n_leaves, k)
    lw = tree.get("leaf_weights")
    if isinstance(lw, list) and len(lw) == n_leaves:
        return values, np.array([num(x, "a leaf weight") for x in lw])
    return values, np.full(n_leaves, np.nan)


def _oblivious(tree: Any, k: int, fmap: FeatureMap) -> dict[str, np.ndarray]:
    """One oblivious tree as a complete binary tree in heap order."""
    if not isinstance(tree, dict):
        raise bad("an oblivious tree is not an object.")
    splits = tree.get("splits") or []
    if not isinstance(splits, list):
        raise bad("an oblivious tree's splits is not an array.")
    d = len(splits)
    if d > _MAX_DEPTH // 4:
        raise bad(f"an oblivious tree has depth {d} (CatBoost allows at most 16).")
    values, weights = _oblivious_leaves(tree, d, k)
    parsed = [_split(s, fmap) for s in splits]
    n_leaves = 1 << d
    n_inner = n_leaves - 1
    idx = np.arange(n_inner + n_leaves)
    level = np.floor(np.log2(idx + 1)).astype(np.int64)
    inner = idx < n_inner
    feature = np.full(idx.size, -1, dtype=np.int64)
    threshold = np.full(idx.size, np.nan)
    nan_left = np.zeros(idx.size, dtype=bool)
    for j, (col, border, nl) in enumerate(parsed):
        at = inner & (level == j)
        feature[at] = col
        threshold[at] = border
        nan_left[at] = nl
    # heap position of a leaf: bits b_0 (root) ... b_{d-1}, most significant first;
    # CatBoost's leaf index has bit j = b_j: the reversed bits.
    pos = np.arange(n_leaves)
    leaf_id = np.zeros(n_leaves, dtype=np.int64)
    for j in range(d):
        leaf_id |= ((pos >> (d - 1 - j)) & 1) << j
    val = np.zeros((idx.size, k))
    val[n_inner:] = values[leaf_id]
    w = np.zeros(idx.size)
    w[n_inner:] = weights[leaf_id]
    for i in range(n_inner - 1, -1, -1):
        w[i] = w[2 * i + 1] + w[2 * i + 2]
    return {
        "left": np.where(inner, 2 * idx + 1, -1),
        "right": np.where(inner, 2 * idx + 2, -1),
        "feature": feature,
        "threshold": threshold,
        "nan_left": nan_left,
        "value": val,
        "weight": w,
        "leaf_id": np.concatenate([np.full(n_inner, -1, dtype=np.int64), leaf_id]),
    }


_NODE_FIELDS = ("feature", "threshold", "nan_left", "value", "weight", "leaf_id")


class _Nodes:
    """The node arrays of a non-symmetric tree, filled one node at a time."""

    def __init__(self, k: int, fmap: FeatureMap) -> None:
        """No nodes yet; leaves hold ``k`` values; splits are read with ``fmap``."""
        self.k, self.fmap, self.n_leaves = k, fmap, 0
        self.cols: dict[str, list] = {key: [] for key in ("left", "right", *_NODE_FIELDS)}

    def add(self, node: Any) -> int:
        """Append a node (split or leaf, children unset) and return its index."""
        if not isinstance(node, dict):
            raise bad("a tree node is not an object.")
        c, i = self.cols, len(self.cols["left"])
        if "split" in node:
            if "left" not in node or "right" not in node:
                raise bad("a split node lacks a child.")
            col, border, nl = _split(node["split"], self.fmap)
            row = (col, border, nl, np.zeros(self.k), np.nan, -1)
        elif "value" in node:
            wt = node.get("weight")
            wt = num(wt, "a leaf weight") if wt is not None else np.nan
            row = (-1, np.nan, False, _leaf_vector(node["value"], self.k), wt, self.n_leaves)
            self.n_leaves += 1
        else:
            raise bad("a tree node has neither a split nor a value.")
        for key, v in zip(_NODE_FIELDS, row):
            c[key].append(v)
        c["left"].append(-1)
        c["right"].append(-1)
        return i


def _leaf_vector(v: Any, k: int) -> np.ndarray:
    """A leaf's ``k`` values."""
    vals = np.atleast_1d(np.asarray(v if isinstance(v, list) else [v], dtype=object))
    if vals.ndim != 1 or vals.shape[0] != k:
        raise bad(f"a leaf holds {vals.size} values for {k} outputs.")
    return np.array([num(x, "a leaf value") for x in vals], dtype=np.float64)


def _is_split(node: Any) -> bool:
    """Whether a nested node is a split."""
    return isinstance(node, dict) and "split" in node


def _nonsymmetric(tree: Any, k: int, fmap: FeatureMap) -> dict[str, np.ndarray]:
    """One nested {split, left, right} / {value, weight} tree, in depth-first order.

    CatBoost numbers the leaves of a non-symmetric tree in the order its flat node array holds
    them: a depth-first walk that, at each split, numbers the split's leaf children (left, then
    right) before it descends into its inner children (left, then right).
    """
    nodes = _Nodes(k, fmap)
    stack: list[tuple[Any, int, int]] = [(tree, 0, nodes.add(tree))]
    while stack:
        node, depth, i = stack.pop()
        if not _is_split(node):
            continue
        if depth >= _MAX_DEPTH:
            raise bad(f"a tree is deeper than {_MAX_DEPTH} levels.")
        kids = (node["left"], node["right"])
        idx = [-1, -1]
        for inner in (False, True):  # leaf children first, numbered left then right
            for side in (0, 1):
                if _is_split(kids[side]) == inner:
                    idx[side] = nodes.add(kids[side])
        nodes.cols["left"][i], nodes.cols["right"][i] = idx
        for side in (1, 0):  # left subtree walked first
            if _is_split(kids[side]):
                stack.append((kids[side], depth + 1, idx[side]))
    c = nodes.cols
    L, R = np.array(c["left"], dtype=np.int64), np.array(c["right"], dtype=np.int64)
    wa = np.array(c["weight"], dtype=np.float64)
    for i in range(len(L) - 1, -1, -1):  # children come after their parent
        if L[i] >= 0:
            wa[i] = wa[L[i]] + wa[R[i]]
    return {
        "left": L,
        "right": R,
        "feature": np.array(c["feature"], dtype=np.int64),
        "threshold": np.array(c["threshold"], dtype=np.float64),
        "nan_left": np.array(c["nan_left"], dtype=bool),
        "value": np.array(c["value"], dtype=np.float64).reshape(len(L), k),
        "weight": wa,
        "leaf_id": np.array(c["leaf_id"], dtype=np.int64),
    }
