"""CatBoost: read a model's JSON export (``save_model(path, format="json")``) into a TreeEnsemble.

Routing rule: bit j of an oblivious tree's leaf index is split j, set when ``float32(x) >
border``; a non-symmetric tree (grow_policy Depthwise or Lossguide) goes right when
``float32(x) > border``. Both are the ``"float32 <="`` decision rule (left iff ``float32(x) <=
border``). NaN follows the feature's ``nan_value_treatment``: ``AsFalse`` (nan_mode Min) and
``AsIs`` (nan_mode Forbidden: NaN compares false) go left, ``AsTrue`` (nan_mode Max) goes right.

An oblivious tree of depth d becomes a complete binary tree whose level j splits on split j, so a
leaf's ``leaf_id`` (bit j = the side taken at level j) is CatBoost's own leaf index, as
``calc_leaf_indexes`` returns it. Non-symmetric trees number their leaves left to right (depth
first, left child first), which is again CatBoost's numbering. A MultiClass tree holds K values
per leaf; it becomes K trees of the same structure, one per class, in the same boosting round.

CatBoost's raw prediction is ``scale * (sum of leaves) + bias`` (``scale_and_bias``). The scale
is folded into every leaf value and into the learning rate of every tree (a leaf is then still
``-learning_rate * G / (H + lambda)``), the bias becomes the base margin. CatBoost sums the leaf
values in float64 in tree order and adds the bias last; treeinner starts from the bias, so the
two agree to float64 rounding (about 1e-16 of the summed magnitudes), not bit for bit.

``leaf_weights`` are sums of sample weights, not hessians. They are used as covers only for
RMSE, whose hessian is the sample weight; for every other loss the covers are NaN and node
values must come from data (``node_values(kind="data")``, ``predecomp(..., reference=...)``).
CatBoost scales ``l2_leaf_reg`` by the mean sample weight of the training set; ``reg_lambda``
is ``l2_leaf_reg`` and ``params["l2_scaled_by_mean_weight"]`` tells ``node_values`` to scale it
by the mean weight of the reference data. The leaf weights are the ensemble's ``count`` for
every loss: TreeSHAP weights splits by them, as CatBoost's ``ShapValues`` do.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import warnings
from typing import Any

import numpy as np

from ..ensemble import TreeEnsemble
from ..kernels.routing import MISSING_NAN, NUMERIC
from ..objectives import (
    LOGISTIC,
    P_HESS_SCALE,
    P_MAX_DELTA,
    P_MIN_HESS,
    P_TWEEDIE,
    POISSON,
    SOFTMAX,
    SQUARED,
    TWEEDIE,
)

__all__ = ["from_cbm", "from_json", "from_model", "kernel_objective"]

_CODES = {
    "RMSE": SQUARED,
    "Logloss": LOGISTIC,
    "CrossEntropy": LOGISTIC,
    "MultiClass": SOFTMAX,
    "Poisson": POISSON,
    "Tweedie": TWEEDIE,
}
#: nan_value_treatment -> whether NaN goes left
_NAN_LEFT = {"AsFalse": True, "AsIs": True, "AsTrue": False}
_CB_DEFAULTS = {"learning_rate": 0.03, "l2_leaf_reg": 3.0}
_MAX_DEPTH = 64
_PIP = "pip install catboost"


class _Corrupt(ValueError):
    pass


def _corrupt(msg: str) -> _Corrupt:
    return _Corrupt(f"Corrupt CatBoost model: {msg}")


# ---------------------------------------------------------------------- objectives
def kernel_objective(
    name: str, params: dict, n_outputs: int, prm: np.ndarray
) -> tuple[int, np.ndarray]:
    """Kernel code and parameters of a CatBoost loss function.

    Parameters
    ----------
    name : str
        CatBoost's loss name (``ens.objective``), e.g. ``"RMSE"`` or ``"Logloss"``.
    params : dict
        The loss parameters (``ens.objective_params``), e.g. ``variance_power`` for Tweedie.
    n_outputs : int
        Number of outputs (classes for MultiClass).
    prm : ndarray of float64
        The default parameter vector (see the ``P_*`` constants of ``treeinner.objectives``);
        a modified copy is returned.

    Returns
    -------
    tuple of (int, ndarray)

    Raises
    ------
    NotImplementedError
        For losses with no per-row gradient here.
    """
    if name not in _CODES:
        raise NotImplementedError(
            f"CatBoost loss_function {name!r} has no per-row gradient in treeinner (supported: "
            f"{', '.join(_CODES)}); such models are supported for prediction only."
        )
    code = _CODES[name]
    prm = np.array(prm, dtype=np.float64, copy=True)
    # CatBoost's derivatives are the plain ones: the softmax hessian diagonal is p (1 - p)
    # (its Newton step for MultiClass uses the full K x K hessian, see ``inexact``), the
    # Poisson hessian exp(F), and no loss floors its hessian.
    prm[P_HESS_SCALE] = 1.0
    prm[P_MIN_HESS] = 0.0
    prm[P_MAX_DELTA] = 0.0
    if code == TWEEDIE:
        prm[P_TWEEDIE] = float(params.get("variance_power", 1.5))
    if code == SOFTMAX and n_outputs < 2:
        raise ValueError("Corrupt CatBoost model: MultiClass with fewer than 2 outputs.")
    return code, prm


# ---------------------------------------------------------------------- parsing helpers
def _num(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _corrupt(f"{what} is not a number ({v!r}).")
    return float(v)


def _float32_border(v: Any) -> float:
    b = _num(v, "a split border")
    if not np.isfinite(b):
        raise _corrupt(f"a split border is not finite ({b}).")
    # CatBoost keeps borders in float32; rounding here is what CatBoost does loading the JSON.
    with np.errstate(over="ignore"):
        b32 = np.float32(b)
    if not np.isfinite(b32):
        raise _corrupt(f"a split border ({b}) is outside the float32 range.")
    return float(b32)


def _params(doc: dict) -> dict:
    info = doc.get("model_info", {})
    if not isinstance(info, dict):
        raise _corrupt("model_info is not an object.")
    p = info.get("params", {})
    if isinstance(p, str):  # some versions store the params as a JSON string
        try:
            p = json.loads(p)
        except json.JSONDecodeError as e:
            raise _corrupt(f"model_info.params is not valid JSON ({e}).") from e
    if not isinstance(p, dict):
        raise _corrupt("model_info.params is not an object.")
    return p


class _FeatureMap(dict):
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
                raise _corrupt(f"a one-hot split uses cat_feature_index {ci!r}, not described.")
            return (self.cat_cols[ci],)
        border = _num(s.get("border"), "a CTR border")
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
        raise _corrupt(f"a CTR split (border {border}) matches {len(found)} CTR descriptions.")

    def synthetic(self, s: dict) -> int:
        """A new 0/1 column for a categorical split of the current tree."""
        cols = self.credit_of(s)
        self.n_ctr += s.get("split_type") == "OnlineCtr"
        self.synth.append(cols)
        self.synth_tree.append(self.tree)
        return self.n_raw + len(self.synth) - 1


def _features(doc: dict) -> tuple[int, list[str], bool, _FeatureMap]:
    """(n_features, names, named, float_feature_index -> (column, nan goes left))."""
    fi = doc.get("features_info")
    if not isinstance(fi, dict):
        raise _corrupt("features_info is missing.")
    for kind in ("text_features", "embedding_features"):
        if fi.get(kind):
            raise NotImplementedError(
                f"CatBoost models with {kind.replace('_', ' ')} are not supported."
            )
    floats = fi.get("float_features") or []
    cats = fi.get("categorical_features") or []
    if not isinstance(floats, list) or not isinstance(cats, list):
        raise _corrupt("features_info lists are not arrays.")
    names: dict[int, str] = {}
    fmap = _FeatureMap()
    for f in floats + cats:
        if not isinstance(f, dict) or "flat_feature_index" not in f:
            raise _corrupt("a feature lacks flat_feature_index.")
        col = f["flat_feature_index"]
        if isinstance(col, bool) or not isinstance(col, int) or not 0 <= col < 2**24:
            raise _corrupt(f"flat_feature_index {col!r} is not a valid column.")
        if col in names:
            raise _corrupt(f"column {col} is described twice.")
        fid = f.get("feature_id", "")
        names[col] = str(fid) if fid is not None else ""
    for f in floats:
        idx = f.get("feature_index")
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0 or idx in fmap:
            raise _corrupt(f"float feature_index {idx!r} is missing or repeated.")
        treat = f.get("nan_value_treatment", "AsIs")
        if treat not in _NAN_LEFT:
            raise NotImplementedError(f"CatBoost nan_value_treatment {treat!r} is not supported.")
        fmap[idx] = (int(f["flat_feature_index"]), _NAN_LEFT[treat])
    n = max(names) + 1 if names else 0
    if n < 1:
        raise _corrupt("the model describes no features.")
    fmap.cat_cols = {}
    for f in cats:
        ci = f.get("feature_index")
        if isinstance(ci, bool) or not isinstance(ci, int) or ci < 0 or ci in fmap.cat_cols:
            raise _corrupt(f"categorical feature_index {ci!r} is missing or repeated.")
        fmap.cat_cols[ci] = int(f["flat_feature_index"])
    fmap.n_float_borders = sum(len(f.get("borders") or []) for f in floats)
    fmap.n_onehot_values = sum(len(f.get("values") or []) for f in cats)
    fmap.ctr_cols = []
    for c in fi.get("ctrs") or []:
        cols = []
        for e in c.get("elements") or []:
            if "cat_feature_index" in e and e["cat_feature_index"] in fmap.cat_cols:
                cols.append(fmap.cat_cols[e["cat_feature_index"]])
            elif "float_feature_index" in e and e["float_feature_index"] in fmap:
                cols.append(fmap[e["float_feature_index"]][0])
        if not cols:
            raise _corrupt("a CTR description names no known feature.")
        key = tuple(sorted(set(cols)))
        for b in c.get("borders") or []:
            fmap.ctr_cols.append((_num(b, "a CTR border"), c.get("target_border_idx", 0), key))
    fmap.n_raw = n
    fmap.synth, fmap.synth_tree, fmap.tree, fmap.n_ctr = [], [], 0, 0
    given = [names.get(i, "") for i in range(n)]
    named = all(given) and len(set(given)) == n
    return n, (given if named else [f"f{i}" for i in range(n)]), named, fmap


def _split(s: Any, fmap: _FeatureMap) -> tuple[int, float, bool]:
    """(column, float32 border, nan goes left) of one split."""
    if not isinstance(s, dict):
        raise _corrupt("a split is not an object.")
    kind = s.get("split_type", "FloatFeature")
    if kind in ("OneHotFeature", "OnlineCtr"):
        # evaluated by CatBoost itself: a 0/1 column, 1 where the row goes right
        return fmap.synthetic(s), 0.5, False
    if kind != "FloatFeature":
        raise NotImplementedError(f"CatBoost splits of type {kind!r} are not supported.")
    idx = s.get("float_feature_index")
    if idx not in fmap or isinstance(idx, bool):
        raise _corrupt(f"a split uses float_feature_index {idx!r}, which is not described.")
    col, nan_left = fmap[idx]
    return col, _float32_border(s.get("border")), nan_left


def _leaf_vector(v: Any, k: int) -> np.ndarray:
    vals = np.atleast_1d(np.asarray(v if isinstance(v, list) else [v], dtype=object))
    if vals.ndim != 1 or vals.shape[0] != k:
        raise _corrupt(f"a leaf holds {vals.size} values for {k} outputs.")
    return np.array([_num(x, "a leaf value") for x in vals], dtype=np.float64)


# ---------------------------------------------------------------------- trees
def _oblivious(tree: Any, k: int, fmap: dict) -> dict[str, np.ndarray]:
    """One oblivious tree as a complete binary tree in heap order."""
    if not isinstance(tree, dict):
        raise _corrupt("an oblivious tree is not an object.")
    splits = tree.get("splits") or []
    if not isinstance(splits, list):
        raise _corrupt("an oblivious tree's splits is not an array.")
    d = len(splits)
    if d > _MAX_DEPTH // 4:
        raise _corrupt(f"an oblivious tree has depth {d} (CatBoost allows at most 16).")
    n_leaves = 1 << d
    lv = tree.get("leaf_values")
    if not isinstance(lv, list) or len(lv) != n_leaves * k:
        raise _corrupt(
            f"an oblivious tree of depth {d} needs {n_leaves * k} leaf values, has "
            f"{len(lv) if isinstance(lv, list) else 'none'}."
        )
    values = np.array([_num(x, "a leaf value") for x in lv]).reshape(n_leaves, k)
    lw = tree.get("leaf_weights")
    if isinstance(lw, list) and len(lw) == n_leaves:
        weights = np.array([_num(x, "a leaf weight") for x in lw])
    else:
        weights = np.full(n_leaves, np.nan)
    parsed = [_split(s, fmap) for s in splits]
    n_inner = n_leaves - 1
    n = n_inner + n_leaves
    idx = np.arange(n)
    level = np.floor(np.log2(idx + 1)).astype(np.int64)
    inner = idx < n_inner
    feature = np.full(n, -1, dtype=np.int64)
    threshold = np.full(n, np.nan)
    nan_left = np.zeros(n, dtype=bool)
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
    lid = np.full(n, -1, dtype=np.int64)
    lid[n_inner:] = leaf_id
    val = np.zeros((n, k))
    val[n_inner:] = values[leaf_id]
    w = np.zeros(n)
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
        "leaf_id": lid,
    }


def _nonsymmetric(tree: Any, k: int, fmap: dict) -> dict[str, np.ndarray]:
    """One nested {split, left, right} / {value, weight} tree, in depth-first order.

    CatBoost numbers the leaves of a non-symmetric tree in the order its flat node array holds
    them: a depth-first walk that, at each split, numbers the split's leaf children (left, then
    right) before it descends into its inner children (left, then right).
    """
    left, right, feature, threshold, nan_left, val, w, lid = [], [], [], [], [], [], [], []
    n_leaves = 0

    def add(node: Any) -> int:
        nonlocal n_leaves
        if not isinstance(node, dict):
            raise _corrupt("a tree node is not an object.")
        i = len(left)
        left.append(-1)
        right.append(-1)
        if "split" in node:
            if "left" not in node or "right" not in node:
                raise _corrupt("a split node lacks a child.")
            col, border, nl = _split(node["split"], fmap)
            feature.append(col)
            threshold.append(border)
            nan_left.append(nl)
            val.append(np.zeros(k))
            w.append(np.nan)
            lid.append(-1)
        elif "value" in node:
            feature.append(-1)
            threshold.append(np.nan)
            nan_left.append(False)
            val.append(_leaf_vector(node["value"], k))
            wt = node.get("weight")
            w.append(_num(wt, "a leaf weight") if wt is not None else np.nan)
            lid.append(n_leaves)
            n_leaves += 1
        else:
            raise _corrupt("a tree node has neither a split nor a value.")
        return i

    def is_split(node: Any) -> bool:
        return isinstance(node, dict) and "split" in node

    stack: list[tuple[Any, int]] = [(tree, 0)]
    add(tree)
    first = [0]  # node index of each stacked split
    while stack:
        node, depth = stack.pop()
        i = first.pop()
        if not is_split(node):
            continue
        if depth >= _MAX_DEPTH:
            raise _corrupt(f"a tree is deeper than {_MAX_DEPTH} levels.")
        kids = (node["left"], node["right"])
        idx = [-1, -1]
        for side in (0, 1):  # leaf children first, numbered left then right
            if not is_split(kids[side]):
                idx[side] = add(kids[side])
        for side in (0, 1):
            if is_split(kids[side]):
                idx[side] = add(kids[side])
        left[i], right[i] = idx
        for side in (1, 0):  # left subtree walked first
            if is_split(kids[side]):
                stack.append((kids[side], depth + 1))
                first.append(idx[side])
    L, R = np.array(left, dtype=np.int64), np.array(right, dtype=np.int64)
    wa = np.array(w, dtype=np.float64)
    for i in range(len(L) - 1, -1, -1):  # children come after their parent
        if L[i] >= 0:
            wa[i] = wa[L[i]] + wa[R[i]]
    return {
        "left": L,
        "right": R,
        "feature": np.array(feature, dtype=np.int64),
        "threshold": np.array(threshold, dtype=np.float64),
        "nan_left": np.array(nan_left, dtype=bool),
        "value": np.array(val, dtype=np.float64).reshape(len(L), k),
        "weight": wa,
        "leaf_id": np.array(lid, dtype=np.int64),
    }


# ---------------------------------------------------------------------- main entry
def from_json(
    doc: dict,
    *,
    learning_rate: float | None = None,
    reg_lambda: float | None = None,
    model: Any = None,
) -> TreeEnsemble:
    """Build a TreeEnsemble from a decoded CatBoost JSON model.

    Categorical splits (one-hot and CTR) are evaluated by CatBoost itself: the ensemble then
    carries an ``input_map`` that asks ``calc_leaf_indexes`` which way every row goes at
    those splits (this needs the catboost package), and its attributions and importances are
    credited to the categorical features the splits use.

    Parameters
    ----------
    doc : dict
        ``json.load`` of a file written by ``model.save_model(path, format="json")``.
    learning_rate : float, optional
        Overrides the learning rate read from ``model_info.params``.
    reg_lambda : float, optional
        Overrides ``l2_leaf_reg`` read from ``model_info.params``.
    model : catboost.CatBoost, optional
        The model the document was exported from (used for categorical splits; loaded from
        the document when absent).

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    ValueError
        If the document is not a CatBoost model or is corrupt.
    ImportError
        If the model has categorical features and catboost is not installed.
    NotImplementedError
        If the model uses an option treeinner does not support (named in the message).
    """
    if not isinstance(doc, dict) or not ("oblivious_trees" in doc or "trees" in doc):
        raise ValueError("Not a CatBoost JSON model (no 'oblivious_trees' or 'trees').")
    try:
        return _from_json(doc, learning_rate, reg_lambda, model)
    except _Corrupt:
        raise
    except (KeyError, TypeError, IndexError, AttributeError, OverflowError) as e:
        raise ValueError(f"Corrupt CatBoost model: {type(e).__name__}: {e}") from e


def _loss(params: dict) -> tuple[str, dict]:
    lf = params.get("loss_function", {})
    if isinstance(lf, str):
        name, _, rest = lf.partition(":")
        opts = dict(kv.split("=", 1) for kv in rest.split(";") if "=" in kv)
        lf = {"type": name, "params": opts}
    if not isinstance(lf, dict):
        raise _corrupt("model_info.params.loss_function is not an object.")
    out: dict[str, Any] = {}
    for key, v in (lf.get("params") or {}).items():
        try:
            out[key] = float(v)
        except (TypeError, ValueError):
            out[key] = v
    return str(lf.get("type", "RMSE")), out


def _from_json(doc: dict, learning_rate, reg_lambda, model=None) -> TreeEnsemble:
    n_features, names, named, fmap = _features(doc)
    sb = doc.get("scale_and_bias", [1.0, [0.0]])
    if not isinstance(sb, list) or len(sb) != 2:
        raise _corrupt("scale_and_bias is not [scale, [bias, ...]].")
    scale = _num(sb[0], "the scale")
    bias_raw = sb[1] if isinstance(sb[1], list) else [sb[1]]
    bias = np.array([_num(b, "the bias") for b in bias_raw], dtype=np.float64)
    if not np.isfinite(scale) or scale <= 0:
        raise NotImplementedError(
            f"CatBoost models with scale {scale} (scale_and_bias) are not supported: only a "
            "positive finite scale can be folded into the learning rate."
        )
    k = bias.shape[0]
    if k < 1:
        raise _corrupt("scale_and_bias has no bias.")

    params = _params(doc)
    objective, obj_params = _loss(params)
    if objective in ("MultiRMSE", "MultiLogloss", "MultiCrossEntropy", "RMSEWithUncertainty"):
        raise NotImplementedError(
            f"CatBoost loss_function {objective!r} (multi-target) is not supported."
        )
    if k > 1 and objective not in ("MultiClass", "MultiClassOneVsAll"):
        raise NotImplementedError(
            f"CatBoost models with {k} outputs and loss_function {objective!r} are not supported."
        )
    if objective == "MultiClass":
        obj_params["num_class"] = k

    symmetric = "oblivious_trees" in doc
    trees_json = doc["oblivious_trees"] if symmetric else doc["trees"]
    if not isinstance(trees_json, list):
        raise _corrupt("the trees are not an array.")
    if len(trees_json) == 0:
        raise ValueError("The CatBoost model has no trees (was it trained for 0 iterations?).")
    parse = _oblivious if symmetric else _nonsymmetric
    parsed = []
    for i, t in enumerate(trees_json):
        fmap.tree = i
        parsed.append(parse(t, k, fmap))

    # ---- learning rate, l2 and exactness
    bo = params.get("boosting_options", {}) or {}
    tl = params.get("tree_learner_options", {}) or {}
    notes = []
    if learning_rate is None:
        if "learning_rate" in bo:
            learning_rate = _num(bo["learning_rate"], "learning_rate")
        else:
            learning_rate = _CB_DEFAULTS["learning_rate"]
            notes.append(
                "The CatBoost model does not record its learning_rate; assuming "
                f"{learning_rate:g}. Pass learning_rate= to set it."
            )
    if reg_lambda is None:
        if "l2_leaf_reg" in tl:
            reg_lambda = _num(tl["l2_leaf_reg"], "l2_leaf_reg")
        else:
            reg_lambda = _CB_DEFAULTS["l2_leaf_reg"]
            notes.append(
                "The CatBoost model does not record its l2_leaf_reg; assuming "
                f"{reg_lambda:g}. Pass reg_lambda= to set it."
            )
    for note in notes:
        warnings.warn(note, UserWarning, stacklevel=4)
    inexact = []
    method = tl.get("leaf_estimation_method", "Newton")
    iters = tl.get("leaf_estimation_iterations", 1)
    if objective == "MultiClass":
        inexact.append(
            "MultiClass leaves are a Newton step with the full K x K softmax hessian, node "
            "values from data use its diagonal"
        )
    if method not in ("Newton",) and objective != "RMSE":
        inexact.append(f"leaf_estimation_method={method!r} is not a Newton step")
    if isinstance(iters, (int, float)) and iters > 1:
        inexact.append(f"leaf_estimation_iterations={iters:g} > 1 refines the leaves")
    if (bo.get("model_shrink_rate") or 0) != 0:
        inexact.append(f"model_shrink_rate={bo['model_shrink_rate']:g} shrinks earlier trees")
    if bo.get("posterior_sampling") or bo.get("langevin"):
        inexact.append("posterior sampling / Langevin boosting adds noise to the leaves")
    if tl.get("monotone_constraints"):
        inexact.append("monotone_constraints adjust the leaves")
    dpo = params.get("data_processing_options", {}) or {}
    if dpo.get("class_weights") or dpo.get("auto_class_weights", "None") != "None":
        inexact.append("class weights are sample weights the reference data must carry")
    if objective not in _CODES:
        inexact.append(f"loss_function {objective!r} has no gradient here")
    if fmap.n_ctr and objective != "RMSE":
        inexact.append(
            "CTR splits: CatBoost grew the trees with ordered target statistics, so the "
            "training rows do not reach the same leaves under the final model's statistics"
        )
    if inexact:
        warnings.warn(
            "Node values from data (PreDecomp) will not reproduce this CatBoost model's leaves "
            "exactly: " + "; ".join(inexact) + ".",
            UserWarning,
            stacklevel=4,
        )
    const_hess = objective == "RMSE"

    # ---- one TreeEnsemble tree per (CatBoost tree, output)
    per = []
    groups, iters_ = [], []
    for it, p in enumerate(parsed):
        for c in range(k):
            per.append((p, c))
            groups.append(c)
            iters_.append(it)
    sizes = np.array([p["left"].shape[0] for p, _ in per], dtype=np.int64)
    offsets = np.zeros(len(per) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(sizes)

    def cat(fn):
        return np.concatenate([fn(p, c, off) for (p, c), off in zip(per, offsets)])

    left = cat(lambda p, c, o: np.where(p["left"] >= 0, p["left"] + o, -1))
    right = cat(lambda p, c, o: np.where(p["right"] >= 0, p["right"] + o, -1))
    is_leaf = left < 0
    value = cat(lambda p, c, o: p["value"][:, c]) * scale
    value = np.where(is_leaf, value, 0.0)
    weight = cat(lambda p, c, o: p["weight"])
    n_nodes = left.shape[0]
    version = ""
    info = doc.get("model_info", {})
    if isinstance(info.get("catboost_version_info"), str):
        for line in info["catboost_version_info"].splitlines():
            if "Branch:" in line and "v" in line:
                version = line.split("v")[-1].strip()
    feature = cat(lambda p, c, o: p["feature"])
    input_map = None
    if fmap.cat_cols:  # even if no split uses them, X carries their (string) values
        input_map = _CategoricalRouting(
            doc, model, fmap, names, k, offsets, left, right, feature,
            cat(lambda p, c, o: p["leaf_id"]), symmetric,
        )  # fmt: skip
        names = list(names) + [
            f"{input_map.column_names[fmap.n_raw + j]}#{j}" for j in range(len(fmap.synth))
        ]
    return TreeEnsemble(
        input_map=input_map,
        tree_offsets=offsets,
        left=left,
        right=right,
        feature=feature,
        threshold=cat(lambda p, c, o: p["threshold"]),
        split_type=np.full(n_nodes, NUMERIC, dtype=np.int8),
        default_left=cat(lambda p, c, o: p["nan_left"]).astype(np.uint8),
        missing_type=np.full(n_nodes, MISSING_NAN, dtype=np.int8),
        value=value,
        cover=weight if const_hess else np.full(n_nodes, np.nan),
        count=weight,
        gain=np.where(is_leaf, 0.0, np.nan),
        leaf_id=cat(lambda p, c, o: p["leaf_id"]),
        cat_offsets=np.zeros(n_nodes + 1, dtype=np.int64),
        cat_words=np.zeros(0, dtype=np.uint32),
        tree_group=np.array(groups, dtype=np.int64),
        tree_iteration=np.array(iters_, dtype=np.int64),
        learning_rate=np.full(len(per), float(learning_rate) * scale),
        tree_weight=np.ones(len(per)),
        base_margin=bias,
        feature_names=tuple(names),
        named=named,
        reg_lambda=float(reg_lambda),
        objective=objective,
        objective_params=obj_params,
        decision_rule="float32 <=",
        float32_sum=False,
        source="catboost",
        source_version=version,
        params={
            "scale": scale,
            "l2_leaf_reg": float(reg_lambda),
            "l2_scaled_by_mean_weight": True,
            "grow_policy": "SymmetricTree" if symmetric else tl.get("grow_policy", "Depthwise"),
            "leaf_weights": "sample weight sums",
        },
        inexact=tuple(inexact),
    )


# ---------------------------------------------------------------------- categorical splits
class _CategoricalRouting:
    """The ``input_map`` of a CatBoost model with categorical splits.

    ``transform(X)`` gives the kernels' input: the model's columns (numeric values; the
    categorical columns are not read) and one 0/1 column per categorical split, 1 where the
    row goes right there. CatBoost computes those through ``calc_leaf_indexes``: the leaf a row
    reaches fixes the side it took at every split on its path (splits off the path get 0 and
    are never read). Attributions of a split's column are credited to the features it uses,
    equally when a CTR combines several.

    ``routes_off_path`` tells whether the columns are also right for splits off a row's path,
    which TreeSHAP reads: true for oblivious trees (every split is on every path) and for
    models without categorical splits, false otherwise (CatBoost does not tell how a split the
    row never reaches would send it).
    """

    def __init__(self, doc, model, fmap, names, k, offsets, left, right, feature, leaf_id,
                 symmetric):  # fmt: skip
        self.routes_off_path = bool(symmetric or not fmap.synth)
        if fmap.synth:
            _require_catboost("a CatBoost model with categorical features")
        if model is None and fmap.synth:
            import catboost

            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "model.json")
                with open(path, "w", encoding="utf-8") as fh:
                    json.dump(doc, fh)
                model = catboost.CatBoost()
                try:
                    model.load_model(path, format="json")
                except Exception as e:  # CatBoostError
                    raise ValueError(f"CatBoost could not load the model: {e}") from e
        self.model = model
        self.n_raw = fmap.n_raw
        self.cat_features = sorted(fmap.cat_cols.values())
        self.float_cols = sorted({c for c, _ in fmap.values()})
        self.output_names = tuple(names)
        n_cols = fmap.n_raw + len(fmap.synth)
        self.credit = np.zeros((n_cols, fmap.n_raw))
        self.credit[np.arange(fmap.n_raw), np.arange(fmap.n_raw)] = 1.0
        col_names = list(names)
        for j, cols in enumerate(fmap.synth):
            self.credit[fmap.n_raw + j, list(cols)] = 1.0 / len(cols)
            col_names.append("+".join(names[c] for c in cols))
        self.column_names = tuple(col_names)
        # per CatBoost tree (its first output's copy): leaf number -> node, and the parents
        self.k = k
        self.n_cb_trees = (offsets.shape[0] - 1) // k
        parent = np.full(left.shape[0], -1, dtype=np.int64)
        inner = np.flatnonzero(left >= 0)
        parent[left[inner]] = inner
        parent[right[inner]] = inner
        self.parent, self.right, self.feature = parent, right, feature
        self.trees = sorted(set(fmap.synth_tree))
        self.leaf_node = {}
        for t in self.trees:
            lo, hi = offsets[t * k], offsets[t * k + 1]
            ids = leaf_id[lo:hi]
            table = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
            leaves = np.flatnonzero(ids >= 0)
            table[ids[leaves]] = lo + leaves
            self.leaf_node[t] = table

    def transform(self, X: Any) -> np.ndarray:
        import pandas as pd

        if isinstance(X, pd.DataFrame):
            if X.shape[1] != self.n_raw:
                raise ValueError(
                    f"X has {X.shape[1]} features, but the model expects {self.n_raw}."
                )
            if all(isinstance(c, str) for c in X.columns) and set(X.columns) == set(
                self.output_names
            ):
                X = X[list(self.output_names)]
            raw = {c: X.iloc[:, c] for c in self.float_cols}
        else:
            arr = np.asarray(X, dtype=object)
            if arr.ndim != 2 or arr.shape[1] != self.n_raw:
                raise ValueError(
                    f"X has shape {arr.shape}; the model expects {self.n_raw} features."
                )
            raw = {c: arr[:, c] for c in self.float_cols}
        n = X.shape[0]
        out = np.zeros((n, self.credit.shape[0]))
        out[:, : self.n_raw] = np.nan
        try:
            for c, v in raw.items():
                out[:, c] = np.asarray(v, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"A numeric feature of X holds a non-number: {e}") from e
        if n == 0 or not self.trees:
            return out
        import catboost

        try:
            pool = catboost.Pool(X, cat_features=self.cat_features)
            leaves = np.asarray(self.model.calc_leaf_indexes(pool), dtype=np.int64)
        except Exception as e:  # CatBoostError: bad categorical values and the like
            raise ValueError(f"CatBoost could not route X: {e}") from e
        rows = np.arange(n)
        for t in self.trees:
            table = self.leaf_node[t]
            node = table[leaves[:, t]]
            p = self.parent[node]
            while (on := p >= 0).any():  # up the path, one level per pass
                pr, nr, rr = p[on], node[on], rows[on]
                col = self.feature[pr]
                syn = col >= self.n_raw
                out[rr[syn], col[syn]] = (self.right[pr[syn]] == nr[syn]).astype(np.float64)
                node = np.where(on, p, node)
                p = self.parent[node]
        return out


# ---------------------------------------------------------------------- models and files
def _require_catboost(what: str) -> None:
    if importlib.util.find_spec("catboost") is None:
        raise ImportError(f"Reading {what} needs the catboost package: {_PIP}")


def from_model(
    model: Any, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """Build a TreeEnsemble from a fitted ``CatBoost``, ``CatBoostRegressor`` or
    ``CatBoostClassifier``.

    The model is exported with ``save_model(..., format="json")`` to a temporary file and read
    back with ``from_json`` (no pickle).

    Parameters
    ----------
    model : catboost.CatBoost or a subclass
    learning_rate, reg_lambda : float, optional
        Override the values read from the model's parameters.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    ValueError
        If the model is not fitted.
    TypeError
        If the object is not a CatBoost model.
    """
    if not hasattr(model, "save_model") or not hasattr(model, "is_fitted"):
        raise TypeError(f"{type(model).__name__} is not a CatBoost model.")
    if not model.is_fitted():
        raise ValueError(f"The {type(model).__name__} is not fitted; call fit() first.")
    # CatBoost's JSON export silently leaves text and embedding features out
    for kind in ("text", "embedding"):
        getter = getattr(model, f"get_{kind}_feature_indices", None)
        if getter is not None and len(getter()) > 0:
            raise NotImplementedError(f"CatBoost models with {kind} features are not supported.")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.json")
        try:
            model.save_model(path, format="json")
        except Exception as e:  # CatBoostError, e.g. a model JSON cannot describe
            raise ValueError(f"CatBoost could not export the model as JSON: {e}") from e
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    return from_json(doc, learning_rate=learning_rate, reg_lambda=reg_lambda, model=model)


_EXPORT = """
import sys
from catboost import CatBoost
m = CatBoost()
m.load_model(sys.argv[1], format="cbm")
for kind in ("text", "embedding"):
    if len(getattr(m, f"get_{kind}_feature_indices")()):
        sys.stderr.write(f"UNSUPPORTED: CatBoost models with {kind} features")
        sys.exit(3)
m.save_model(sys.argv[2], format="json")
"""


def from_cbm(
    path: str | os.PathLike,
    *,
    learning_rate: float | None = None,
    reg_lambda: float | None = None,
    timeout: float = 300.0,
) -> TreeEnsemble:
    """Read a CatBoost binary model (``.cbm``) through catboost itself.

    CatBoost loads the file and exports it as JSON in a separate process: a corrupt ``.cbm``
    can crash CatBoost's loader, which then cannot take the calling process with it.

    Parameters
    ----------
    path : str or path-like
        The ``.cbm`` file.
    learning_rate, reg_lambda : float, optional
        Override the values read from the model's parameters.
    timeout : float
        Seconds to wait for CatBoost before giving up.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    ImportError
        If catboost is not installed.
    ValueError
        If CatBoost cannot read the file (corrupt or truncated).
    """
    path = os.fspath(path)
    _require_catboost(f"the CatBoost binary model {path!r}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "model.json")
        try:
            res = subprocess.run(
                [sys.executable, "-c", _EXPORT, path, out],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise ValueError(f"CatBoost did not read {path!r} within {timeout:g} s.") from e
        if res.returncode == 3 and "UNSUPPORTED: " in (res.stderr or ""):
            what = res.stderr.split("UNSUPPORTED: ", 1)[1].strip()
            raise NotImplementedError(f"{what} are not supported.")
        if res.returncode != 0 or not os.path.exists(out):
            lines = [ln for ln in (res.stderr or "").strip().splitlines() if ln.strip()]
            why = lines[-1][-200:] if lines else f"the loader died (exit code {res.returncode})"
            raise ValueError(f"{path!r} is not a readable CatBoost model (corrupt?): {why}")
        try:
            with open(out, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise ValueError(f"CatBoost exported {path!r} as invalid JSON: {e}") from e
    return from_json(doc, learning_rate=learning_rate, reg_lambda=reg_lambda)
