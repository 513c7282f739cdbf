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

from typing import Any, NamedTuple

import numpy as np

from .._errors import ModelFormatError, UnsupportedModelError
from ._common import Corrupt, corrupt

#: nan_value_treatment -> whether NaN goes left
_NAN_LEFT = {"AsFalse": True, "AsIs": True, "AsTrue": False}
_MAX_DEPTH = 64
_INT32 = 2**31 - 1


def bad(msg: str) -> Corrupt:
    """A corrupt-model error of the CatBoost adapter."""
    return corrupt("CatBoost", msg)


def num(v: Any, what: str) -> float:
    """A JSON number (not a bool) as float, finite (CatBoost's JSON reader has no NaN or
    infinity); ``what`` names the field in the error."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise bad(f"{what} is not a number ({v!r}).")
    if not np.isfinite(v):
        raise bad(f"{what} is {v!r}; CatBoost writes finite numbers only.")
    return float(v)


def integer(v: Any, what: str, lo: int = 0, hi: int = _INT32) -> int:
    """A JSON integer (not a bool) in ``[lo, hi]``; ``what`` names the field in the error."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise bad(f"{what} is not an integer ({v!r}).")
    if not lo <= v <= hi:
        raise bad(f"{what} is {v}, outside [{lo}, {hi}].")
    return v


def array(v: Any, what: str) -> list:
    """A JSON array; ``what`` names the field in the error."""
    if not isinstance(v, list):
        raise bad(f"{what} is not an array ({type(v).__name__}).")
    return v


def float32(v: Any, what: str) -> float:
    """A border as CatBoost keeps it (float32): finite, in the float32 range."""
    b = num(v, what)
    # CatBoost keeps borders in float32; rounding here is what CatBoost does loading the JSON.
    with np.errstate(over="ignore"):
        b32 = np.float32(b)
    if not np.isfinite(b32):
        raise bad(f"{what} ({b}) is outside the float32 range.")
    return float(b32)


def _borders(v: Any, what: str) -> list[float]:
    """A feature's (or CTR's) borders: float32, strictly increasing (CatBoost binarizes a
    value by counting the borders below it, which is ``x > border`` only for sorted borders)."""
    out = [float32(b, f"{what}[{i}]") for i, b in enumerate(array(v or [], what))]
    for i in range(1, len(out)):
        if not out[i] > out[i - 1]:
            raise bad(f"{what} are not increasing ({what}[{i}] = {out[i]:.9g}).")
    return out


class Bin(NamedTuple):
    """One of CatBoost's binary features, which a split's ``split_index`` numbers: a float
    border, a one-hot value or a CTR border (CatBoost routes by it, not by the split's own
    fields, which must agree with it)."""

    split_type: str  # FloatFeature, OneHotFeature or OnlineCtr
    # float_feature_index, cat_feature_index or position in features_info.ctrs (the field
    # shadows tuple.index)
    index: int  # type: ignore[assignment]
    value: float  # the border, or the one-hot value
    what: str  # where it is described


# ---------------------------------------------------------------------- features
class FeatureMap(dict):
    """float_feature_index -> (column, nan goes left), plus what categorical splits need: the
    column of every categorical feature, CatBoost's binary features (``bins``, numbered by
    ``split_index``), the CTR descriptions, and the synthetic 0/1 columns allocated to
    categorical splits (their credited columns and CatBoost tree)."""

    cat_cols: dict[int, int]
    bins: list[Bin]
    ctrs: list[dict]  # checked CTR descriptions: key, target_border_idx, credit
    used_ctrs: set[int]
    n_raw: int
    synth: list[tuple[int, ...]]
    synth_tree: list[int]
    n_ctr: int
    tree: int

    def synthetic(self, s: dict, b: Bin) -> int:
        """A new 0/1 column for a categorical split (bin ``b``) of the current tree."""
        if b.split_type == "OneHotFeature":
            cols = (self.cat_cols[b.index],)
        else:
            cols = self.ctrs[b.index]["credit"]
            self.used_ctrs.add(b.index)
            self.n_ctr += 1
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
    floats = array(fi.get("float_features") or [], "features_info.float_features")
    cats = array(fi.get("categorical_features") or [], "features_info.categorical_features")
    names = _column_names(floats, "float_features") | _column_names(cats, "categorical_features")
    if len(names) != len(floats) + len(cats):
        raise bad("features_info describes a column twice (flat_feature_index).")
    fmap = _float_map(floats)
    n = max(names) + 1 if names else 0
    if n < 1:
        raise bad("the model describes no features.")
    _categorical_map(fmap, cats, array(fi.get("ctrs") or [], "features_info.ctrs"))
    fmap.n_raw = n
    fmap.synth, fmap.synth_tree, fmap.tree, fmap.n_ctr = [], [], 0, 0
    given = [names.get(i, "") for i in range(n)]
    named = all(given) and len(set(given)) == n
    return (given if named else [f"f{i}" for i in range(n)]), named, fmap


def _column_names(described: list, kind: str) -> dict[int, str]:
    """Column -> feature_id of a list of features, checked: objects numbered by position
    (``feature_index``), in increasing columns (``flat_feature_index``), as CatBoost requires."""
    names: dict[int, str] = {}
    last = -1
    for i, f in enumerate(described):
        what = f"features_info.{kind}[{i}]"
        if not isinstance(f, dict):
            raise bad(f"{what} is not an object.")
        col = integer(f.get("flat_feature_index"), f"{what}.flat_feature_index", 0, 2**24)
        if integer(f.get("feature_index"), f"{what}.feature_index") != i:
            raise bad(f"{what}.feature_index is {f['feature_index']}; CatBoost numbers the "
                      f"features of a list by position ({i}).")  # fmt: skip
        if col <= last:
            raise bad(f"{what}.flat_feature_index is {col}, not above the previous feature's.")
        last = col
        fid = f.get("feature_id", "")
        if fid is not None and not isinstance(fid, str):
            raise bad(f"{what}.feature_id is not a string ({fid!r}).")
        names[col] = fid or ""
    return names


def _float_map(floats: list) -> FeatureMap:
    """float_feature_index -> (column, whether NaN goes left); the float borders' bins."""
    fmap = FeatureMap()
    fmap.bins = []
    for idx, f in enumerate(floats):
        what = f"features_info.float_features[{idx}]"
        treat = f.get("nan_value_treatment", "AsIs")
        if not isinstance(treat, str) or treat not in _NAN_LEFT:
            raise UnsupportedModelError(f"CatBoost nan_value_treatment {treat!r} is not supported.")
        if not isinstance(f.get("has_nans", False), bool):
            raise bad(f"{what}.has_nans is not a boolean ({f['has_nans']!r}).")
        fmap[idx] = (int(f["flat_feature_index"]), _NAN_LEFT[treat])
        for j, b in enumerate(_borders(f.get("borders"), f"{what}.borders")):
            fmap.bins.append(Bin("FloatFeature", idx, b, f"{what}.borders[{j}]"))
    return fmap


def _categorical_map(fmap: FeatureMap, cats: list, ctrs: list) -> None:
    """Fill in the categorical columns, the one-hot and CTR bins and the CTRs' columns."""
    fmap.cat_cols = {ci: int(f["flat_feature_index"]) for ci, f in enumerate(cats)}
    for ci, f in enumerate(cats):
        what = f"features_info.categorical_features[{ci}].values"
        for j, v in enumerate(array(f.get("values") or [], what)):
            v = integer(v, f"{what}[{j}]", -(2**31), _INT32)
            fmap.bins.append(Bin("OneHotFeature", ci, v, f"{what}[{j}]"))
    fmap.ctrs, fmap.used_ctrs = [], set()
    for i, c in enumerate(ctrs):
        what = f"features_info.ctrs[{i}]"
        fmap.ctrs.append(_ctr(fmap, c, what))
        for j, b in enumerate(_borders(c.get("borders"), f"{what}.borders")):
            fmap.bins.append(Bin("OnlineCtr", i, b, f"{what}.borders[{j}]"))


#: CatBoost's CTR types, and the hash map stride each needs (None: 1 + the number of classes)
CTR_STRIDES = {
    "Borders": None,
    "Buckets": None,
    "BinarizedTargetMeanValue": 3,
    "FloatTargetMeanValue": 3,
    "Counter": 2,
    "FeatureFreq": 2,
}


def _ctr(fmap: FeatureMap, c: Any, what: str) -> dict:
    """A CTR description, checked: its key in ``ctr_data`` (``ctr_key``), target border index,
    priors, shift and scale, and the columns its splits are credited to (``_ctr_credit``)."""
    if not isinstance(c, dict):
        raise bad(f"{what} is not an object.")
    credit = _ctr_credit(fmap, c, what)
    kind = c.get("ctr_type")
    if kind not in CTR_STRIDES:
        raise bad(f"{what}.ctr_type {kind!r} is not a CatBoost CTR type.")
    for field in ("prior_numerator", "prior_denomerator", "shift", "scale"):
        num(c.get(field), f"{what}.{field}")
    tbi = integer(c.get("target_border_idx"), f"{what}.target_border_idx")
    return {"key": ctr_key(kind, c["elements"], what), "tbi": tbi, "credit": credit,
            "what": what}  # fmt: skip


def ctr_key(kind: str, elements: list, what: str) -> tuple:
    """How CatBoost identifies a CTR (``TModelCtrBase``): its type and its projection's
    categorical features, float splits and one-hot values, each in order."""
    cat, flt, one = [], [], []
    for i, e in enumerate(elements):
        at = f"{what}.elements[{i}]"
        if not isinstance(e, dict):
            raise bad(f"{at} is not an object.")
        k = e.get("combination_element")
        if k == "cat_feature_value":
            cat.append(integer(e.get("cat_feature_index"), f"{at}.cat_feature_index"))
        elif k == "float_feature":
            flt.append((integer(e.get("float_feature_index"), f"{at}.float_feature_index"),
                        float32(e.get("border"), f"{at}.border")))  # fmt: skip
        elif k == "cat_feature_exact_value":
            one.append((integer(e.get("cat_feature_index"), f"{at}.cat_feature_index"),
                        integer(e.get("value"), f"{at}.value", -(2**31), _INT32)))  # fmt: skip
        else:
            raise bad(f"{at}.combination_element is {k!r}.")
    return (kind, tuple(cat), tuple(flt), tuple(one))


def _ctr_credit(fmap: FeatureMap, ctr: dict, what: str) -> tuple[int, ...]:
    """The columns a CTR's splits are credited to: the categorical features whose values
    the CTR counts (its projection's ``cat_feature_value`` elements), sorted.

    The projection may also hold float borders (``float_feature``) and one-hot values
    (``cat_feature_exact_value``) of splits above it in the tree; they select which rows a
    count is taken over but are not credited, as in CatBoost's ShapValues (which key a CTR's
    Shapley player on ``Projection.CatFeatures`` only). A projection without a categorical
    value element is refused: CatBoost never builds one (every CTR counts a categorical
    feature), and its ShapValues would drop such a split's contribution.
    """
    if not isinstance(ctr.get("elements"), list):
        raise bad(f"{what} has no elements.")
    cols = set()
    for i, e in enumerate(ctr["elements"]):
        if not isinstance(e, dict):
            raise bad(f"{what}.elements[{i}] is not an object.")
        kind = e.get("combination_element")
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
        elif isinstance(kind, str) and kind.endswith("_feature"):
            raise UnsupportedModelError(
                f"CatBoost CTR elements of kind {kind!r} are not supported."
            )
        else:
            raise bad(f"{what}.elements[{i}].combination_element is {kind!r}.")
    if not cols:
        raise bad("a CTR projection counts no categorical feature.")
    return tuple(sorted(cols))


def _bin_of(s: dict, fmap: FeatureMap, what: str) -> Bin:
    """The binary feature a split uses (``split_index``), checked against the split's own
    fields: CatBoost routes by ``split_index`` alone."""
    si = integer(s.get("split_index"), f"{what}.split_index", 0, len(fmap.bins) - 1)
    b = fmap.bins[si]
    kind = s.get("split_type", "FloatFeature")
    if not isinstance(kind, str):
        raise bad(f"{what}.split_type is not a string ({kind!r}).")
    if kind not in ("FloatFeature", "OneHotFeature", "OnlineCtr"):
        raise UnsupportedModelError(f"CatBoost splits of type {kind!r} are not supported.")
    if kind != b.split_type:
        raise bad(f"{what}.split_type is {kind!r}, but split_index {si} is {b.what}.")
    if kind == "FloatFeature":
        fields = {"float_feature_index": integer(s.get("float_feature_index"),
                                                 f"{what}.float_feature_index"),
                  "border": float32(s.get("border"), f"{what}.border")}  # fmt: skip
    elif kind == "OneHotFeature":
        fields = {"cat_feature_index": integer(s.get("cat_feature_index"),
                                               f"{what}.cat_feature_index"),
                  "value": integer(s.get("value"), f"{what}.value", -(2**31), _INT32)}  # fmt: skip
    else:
        fields = {"ctr_target_border_idx": integer(s.get("ctr_target_border_idx", 0),
                                                   f"{what}.ctr_target_border_idx"),
                  "border": float32(s.get("border"), f"{what}.border")}  # fmt: skip
    want = [b.index, b.value] if kind != "OnlineCtr" else [fmap.ctrs[b.index]["tbi"], b.value]
    for (field, got), expected in zip(fields.items(), want):
        if got != expected:
            raise bad(
                f"{what}.{field} is {got!r}, but its split_index {si} is {b.what} "
                f"({field} {expected!r}); CatBoost routes by split_index."
            )
    return b


def _split(s: Any, fmap: FeatureMap, what: str) -> tuple[int, float, bool]:
    """(column, float32 border, nan goes left) of one split (``what`` names it)."""
    if not isinstance(s, dict):
        raise bad(f"{what} is not an object.")
    b = _bin_of(s, fmap, what)
    if b.split_type != "FloatFeature":
        # evaluated by CatBoost itself: a 0/1 column, 1 where the row goes right
        return fmap.synthetic(s, b), 0.5, False
    col, nan_left = fmap[b.index]
    return col, b.value, nan_left


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
    if symmetric and "trees" in doc:
        raise bad("the model has both oblivious_trees and trees.")
    parse = _oblivious if symmetric else _nonsymmetric
    parsed = []
    for i, t in enumerate(trees_json):
        fmap.tree = i
        parsed.append(parse(t, k, fmap))
    _same_weights(parsed, symmetric)
    return parsed, symmetric


def _same_weights(parsed: list[dict[str, np.ndarray]], symmetric: bool) -> None:
    """Leaf weights in every tree or in none: CatBoost reads them as one array, so a tree
    without them shifts every later tree's weights."""
    has = [bool(np.isfinite(p["weight"][0])) for p in parsed]
    if any(has) and not all(has):
        t = has.index(not has[0])
        field = "leaf_weights" if symmetric else "a leaf weight"
        raise bad(f"tree {t} {'lacks' if has[0] else 'has'} {field}, tree 0 does not agree.")


def _weight(v: Any, what: str) -> float:
    """A leaf weight (a sum of sample weights): finite and >= 0."""
    w = num(v, what)
    if w < 0:
        raise bad(f"{what} is {w:g}; leaf weights are sums of sample weights, >= 0.")
    return w


def _oblivious_leaves(tree: dict, d: int, k: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Oblivious tree ``t``'s leaf values (n_leaves x k) and weights (NaN when absent)."""
    n_leaves = 1 << d
    lv = tree.get("leaf_values")
    if not isinstance(lv, list) or len(lv) != n_leaves * k:
        raise bad(
            f"tree {t}: leaf_values: a tree of depth {d} with {k} outputs (scale_and_bias) "
            f"needs {n_leaves * k} leaf values, has {len(lv) if isinstance(lv, list) else 'none'}."
        )
    values = np.array([num(x, f"tree {t}: leaf_values[{i}]") for i, x in enumerate(lv)])
    if "leaf_weights" not in tree:
        return values.reshape(n_leaves, k), np.full(n_leaves, np.nan)
    lw = array(tree["leaf_weights"], f"tree {t}: leaf_weights")
    if len(lw) != n_leaves:
        raise bad(f"tree {t}: leaf_weights has {len(lw)} values for {n_leaves} leaves.")
    w = [_weight(x, f"tree {t}: leaf_weights[{i}]") for i, x in enumerate(lw)]
    values = values.reshape(n_leaves, k)
    for i in range(n_leaves):
        _empty_leaf(w[i], values[i], f"tree {t}: leaf {i}")
    return values, np.array(w)


def _empty_leaf(weight: float, value: np.ndarray, what: str) -> None:
    """Refuse a leaf of weight 0 with a non-zero value: CatBoost gives a leaf no training row
    reached the value 0 (and its ShapValues weigh leaves by their weights)."""
    if weight == 0 and np.any(value != 0):
        raise bad(
            f"{what} has weight 0 but value {value[value != 0][0]:.17g}; a leaf no training "
            "row reached has value 0 in CatBoost."
        )


def _oblivious(tree: Any, k: int, fmap: FeatureMap) -> dict[str, np.ndarray]:
    """One oblivious tree as a complete binary tree in heap order."""
    t = fmap.tree
    if not isinstance(tree, dict):
        raise bad(f"tree {t} is not an object.")
    splits = array(tree.get("splits") or [], f"tree {t}: splits")
    d = len(splits)
    if d > _MAX_DEPTH // 4:
        raise bad(f"tree {t} has depth {d} (CatBoost allows at most 16).")
    values, weights = _oblivious_leaves(tree, d, k, t)
    parsed = [_split(s, fmap, f"tree {t}: splits[{j}]") for j, s in enumerate(splits)]
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
        c, i = self.cols, len(self.cols["left"])
        what = f"tree {self.fmap.tree} node {i}"
        if not isinstance(node, dict):
            raise bad(f"{what} is not an object.")
        if "split" in node and "value" in node:  # CatBoost would read a leaf, we a split
            raise bad(f"{what} has both a split and a value.")
        if "split" in node:
            if "left" not in node or "right" not in node:
                raise bad(f"{what}: a split node lacks a child.")
            col, border, nl = _split(node["split"], self.fmap, f"{what} split")
            row = (col, border, nl, np.zeros(self.k), np.nan, -1)
        elif "value" in node:
            wt = node.get("weight")
            wt = _weight(wt, f"{what} weight") if "weight" in node else np.nan
            value = _leaf_vector(node["value"], self.k, f"{what} value")
            _empty_leaf(wt, value, what)
            row = (-1, np.nan, False, value, wt, self.n_leaves)
            self.n_leaves += 1
        else:
            raise bad(f"{what} has neither a split nor a value.")
        for key, v in zip(_NODE_FIELDS, row):
            c[key].append(v)
        c["left"].append(-1)
        c["right"].append(-1)
        return i


def _leaf_vector(v: Any, k: int, what: str) -> np.ndarray:
    """A leaf's ``k`` values (a number when ``k`` is 1, else an array of ``k``)."""
    vals = v if isinstance(v, list) else [v]
    if len(vals) != k or (k > 1 and not isinstance(v, list)):
        raise bad(f"{what} holds {len(vals)} values for {k} outputs (scale_and_bias).")
    return np.array([num(x, what) for x in vals], dtype=np.float64)


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
            raise bad(f"tree {fmap.tree} is deeper than {_MAX_DEPTH} levels.")
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
    leaf_w = np.isnan(wa[L < 0])
    if leaf_w.any() and not leaf_w.all():
        raise bad(f"tree {fmap.tree}: some leaves have a weight and some do not.")
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
