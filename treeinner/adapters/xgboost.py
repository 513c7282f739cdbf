"""XGBoost: read a model's JSON (or UBJSON) dump into a TreeEnsemble.

Routing rule: left iff float32(x) < threshold; NaN takes ``default_left``; a categorical node's
categories go right. Leaf values are in ``split_conditions`` (already scaled by eta); inner
``base_weights`` are the unscaled -G/(H + lambda), which lets us recover eta and lambda from a
model file that lost its training parameters.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import math
from typing import Any

import numpy as np

from ..ensemble import TreeEnsemble
from ..kernels.routing import CAT_SET_RIGHT, MISSING_NAN, NUMERIC
from ._common import join_trees, warn_notes

__all__ = ["from_booster", "from_dict", "is_xgboost_model"]

#: objective -> how base_score (output space) becomes the base margin
_BASE_LINK = {
    "reg:squarederror": "identity",
    "reg:squaredlogerror": "identity",
    "reg:pseudohubererror": "identity",
    "reg:absoluteerror": "identity",
    "reg:quantileerror": "identity",
    "reg:linear": "identity",
    "reg:logistic": "logit",
    "binary:logistic": "logit",
    "binary:logitraw": "identity",
    "binary:hinge": "identity",
    "count:poisson": "log",
    "reg:gamma": "log",
    "reg:tweedie": "log",
    "multi:softprob": "identity",
    "multi:softmax": "identity",
    "rank:pairwise": "identity",
    "rank:ndcg": "identity",
    "rank:map": "identity",
}
#: objectives whose leaves are not -eta G / (H + lambda) (refit after the tree is grown)
_REFIT_OBJECTIVES = {"reg:absoluteerror", "reg:quantileerror"}
_XGB_DEFAULTS = {"eta": 0.3, "lambda": 1.0}


def is_xgboost_model(d: Any) -> bool:
    """Whether a decoded JSON document is an XGBoost model."""
    return isinstance(d, dict) and isinstance(d.get("learner"), dict) and "version" in d


# ---------------------------------------------------------------------- float32 C arithmetic
def _libm_f32(name: str):
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        fn = getattr(lib, name)
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float]
    return fn


_LOGF = _libm_f32("logf")


def _logf(x: np.float32) -> np.float32:
    """``logf`` as XGBoost's C++ calls it (the C library's, where it can be loaded)."""
    if _LOGF is not None:
        return np.float32(_LOGF(float(x)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.float32(math.log(float(x)) if x > 0 else (-np.inf if x == 0 else np.nan))


def _base_margin(base_score: list[float], link: str, n_outputs: int) -> np.ndarray:
    vals = np.asarray(base_score, dtype=np.float32)
    if vals.size == 1 and n_outputs > 1:
        vals = np.repeat(vals, n_outputs)
    if vals.size != n_outputs:
        raise ValueError(
            f"Corrupt XGBoost model: base_score has {vals.size} values for {n_outputs} outputs."
        )
    out = np.empty(n_outputs, dtype=np.float64)
    one = np.float32(1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i, p in enumerate(vals):
            if link == "logit":
                m = -_logf(np.float32(one / p - one))
            elif link == "log":
                m = _logf(p)
            else:
                m = p
            out[i] = float(m)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"XGBoost base_score {base_score} gives a non-finite base margin.")
    return out


def _parse_base_score(s: Any) -> list[float]:
    if isinstance(s, (int, float)):
        return [float(s)]
    s = str(s).strip()
    if s.startswith("["):
        s = s[1:-1]
    try:
        return [float(v) for v in s.split(",") if v.strip()]
    except ValueError as e:
        raise ValueError(f"Corrupt XGBoost model: base_score {s!r}.") from e


# ---------------------------------------------------------------------- categories
def _parse_categories(model: dict, n_features: int) -> dict[int, list]:
    cats = model.get("cats")
    if not isinstance(cats, dict):
        return {}
    out: dict[int, list] = {}
    for j, enc in enumerate(cats.get("enc", [])[:n_features]):
        if not isinstance(enc, dict):
            continue
        values = np.asarray(enc.get("values", []))
        if "offsets" in enc:
            offsets = np.asarray(enc["offsets"], dtype=np.int64)
            if offsets.size > 1:
                raw = bytes(values.astype(np.uint8).tolist())
                out[j] = [raw[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:])]
        elif values.size:
            out[j] = [v.item() if hasattr(v, "item") else v for v in values]
            out[j] = [int(v) if isinstance(v, float) and v.is_integer() else v for v in out[j]]
    return out


# ---------------------------------------------------------------------- trees
def _arr(tree: dict, key: str, dtype: Any, n: int | None = None) -> np.ndarray:
    if key not in tree:
        raise ValueError(f"Corrupt XGBoost model: a tree lacks {key!r}.")
    a = np.asarray(tree[key])
    try:
        a = a.astype(dtype)
    except (TypeError, ValueError) as e:
        raise ValueError(f"Corrupt XGBoost model: tree field {key!r} is not numeric.") from e
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        raise ValueError(f"Corrupt XGBoost model: tree field {key!r} has the wrong length.")
    return a


def _reachable(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Node ids reachable from the root, in id order (deleted nodes dropped)."""
    n = left.shape[0]
    seen = np.zeros(n, dtype=bool)
    stack = [0]
    while stack:
        i = stack.pop()
        if i < 0 or i >= n:
            raise ValueError(f"Corrupt XGBoost model: child index {i} outside the tree.")
        if seen[i]:
            raise ValueError("Corrupt XGBoost model: a tree has a cycle or a shared node.")
        seen[i] = True
        if left[i] != -1:
            stack.append(int(left[i]))
            stack.append(int(right[i]))
    return np.flatnonzero(seen)


def _dart_leaf(leaf: np.ndarray, weight: float, base: float) -> np.ndarray:
    """A DART leaf as ``inplace_predict`` adds it: ((base + v) - base) * w, all in float32.

    (``predict(DMatrix)`` adds ``v * w`` instead; the two differ in the last bit. We follow
    ``inplace_predict``.)
    """
    b = np.float32(base)
    shifted = (b + leaf.astype(np.float32)).astype(np.float32) - b
    return (shifted.astype(np.float32) * np.float32(weight)).astype(np.float32)


def _parse_tree(tree: dict, weight: float | None, base: float) -> dict[str, np.ndarray]:
    tp = tree.get("tree_param", {})
    if str(tp.get("size_leaf_vector", "1")) not in ("0", "1"):
        raise NotImplementedError(
            "XGBoost models with vector leaves (multi_strategy='multi_output_tree') are not "
            "supported; train with multi_strategy='one_output_per_tree'."
        )
    left = _arr(tree, "left_children", np.int64)
    n = left.shape[0]
    if n == 0:
        raise ValueError("Corrupt XGBoost model: a tree has no nodes.")
    right = _arr(tree, "right_children", np.int64, n)
    keep = _reachable(left, right)
    remap = np.full(n, -1, dtype=np.int64)
    remap[keep] = np.arange(keep.size)
    is_leaf = left[keep] == -1
    if np.any((right[keep] == -1) != is_leaf):
        raise ValueError("Corrupt XGBoost model: a node has only one child.")
    cond = _arr(tree, "split_conditions", np.float32, n)[keep]
    stype = _arr(tree, "split_type", np.int8, n)[keep] if "split_type" in tree else None
    if stype is None:
        stype = np.zeros(keep.size, dtype=np.int8)
    stype = np.where(is_leaf, 0, stype)
    if np.any((stype != 0) & (stype != 1)):
        raise ValueError("Corrupt XGBoost model: unknown split_type.")
    leaf_val = cond if weight is None else _dart_leaf(cond, weight, base)
    out = {
        "left": np.where(is_leaf, -1, remap[left[keep].clip(0)]),
        "right": np.where(is_leaf, -1, remap[right[keep].clip(0)]),
        "feature": np.where(is_leaf, -1, _arr(tree, "split_indices", np.int64, n)[keep]),
        "threshold": np.where(is_leaf | (stype == 1), np.nan, cond.astype(np.float64)),
        "split_type": np.where(stype == 1, CAT_SET_RIGHT, NUMERIC).astype(np.int8),
        "default_left": _arr(tree, "default_left", np.int64, n)[keep] != 0,
        "missing_type": np.full(keep.size, MISSING_NAN, dtype=np.int8),
        "value": np.where(is_leaf, np.asarray(leaf_val, dtype=np.float64), 0.0),
        "cover": _arr(tree, "sum_hessian", np.float32, n).astype(np.float64)[keep],
        "count": np.full(keep.size, np.nan),
        "gain": np.where(
            is_leaf, 0.0, _arr(tree, "loss_changes", np.float32, n).astype(np.float64)[keep]
        ),
        "leaf_id": np.where(is_leaf, keep, -1),
        "base_weight": _arr(tree, "base_weights", np.float32, n).astype(np.float64)[keep],
        "leaf_raw": np.where(is_leaf, cond.astype(np.float64), 0.0),
    }
    # categorical sets -> bitsets
    words = [np.zeros(0, dtype=np.uint32) for _ in range(keep.size)]
    if np.any(stype == 1):
        cats = _arr(tree, "categories", np.int64)
        nodes = _arr(tree, "categories_nodes", np.int64)
        segs = _arr(tree, "categories_segments", np.int64, nodes.shape[0])
        sizes = _arr(tree, "categories_sizes", np.int64, nodes.shape[0])
        for node, seg, size in zip(nodes, segs, sizes):
            if not 0 <= node < n or seg < 0 or size < 0 or seg + size > cats.shape[0]:
                raise ValueError("Corrupt XGBoost model: categorical split out of range.")
            members = cats[seg : seg + size]
            if np.any(members < 0) or np.any(members >= 2**24):
                raise ValueError("Corrupt XGBoost model: invalid category in a split.")
            w = np.zeros(int(members.max()) // 32 + 1 if size else 0, dtype=np.uint32)
            np.bitwise_or.at(w, members // 32, (np.uint32(1) << (members % 32).astype(np.uint32)))
            if remap[node] >= 0:
                words[remap[node]] = w
    out["cat_words"] = words
    return out


# ---------------------------------------------------------------------- eta and lambda
def _snap(x: float, tol: float) -> float:
    """The shortest decimal within ``tol`` of ``x``, as float32 (how XGBoost stores it)."""
    if abs(x) <= tol:
        return 0.0
    for digits in range(1, 8):
        c = float(f"{x:.{digits}g}")
        if abs(c - x) <= tol:
            return float(np.float32(c))
    return x


def _recover(trees: list[dict]) -> tuple[float | None, np.ndarray | None, str]:
    """Recover lambda and per-tree eta from node statistics (alpha = max_delta_step = 0).

    Returns ``(lambda, eta_per_tree, message)``; ``None`` where it could not be recovered.
    """
    num, den, mag, wmag = [], [], [], []
    for t in trees:
        L, R = t["left"], t["right"]
        inner = np.flatnonzero(L >= 0)
        both = inner[(L[L[inner]] >= 0) & (L[R[inner]] >= 0)] if inner.size else inner
        if both.size == 0:
            continue
        w, H = t["base_weight"], t["cover"]
        lw, rw, lh, rh = w[L[both]], w[R[both]], H[L[both]], H[R[both]]
        num.append(lw * lh + rw * rh - w[both] * H[both])
        den.append(w[both] - lw - rw)
        mag.append(np.abs(lw * lh) + np.abs(rw * rh) + np.abs(w[both] * H[both]))
        wmag.append(np.abs(w[both]) + np.abs(lw) + np.abs(rw))
    if not num:
        return None, None, "no node has two inner children (all trees are stumps)"
    n_, d_, m_ = np.concatenate(num), np.concatenate(den), np.concatenate(mag)
    s_ = np.concatenate(wmag)
    ok = np.isfinite(n_) & np.isfinite(d_) & np.isfinite(m_) & np.isfinite(s_)
    n_, d_, m_, s_ = n_[ok], d_[ok], m_[ok], s_[ok]
    if n_.size == 0 or not np.any(d_ != 0):
        return None, None, "the node statistics are degenerate"
    lam = float(np.dot(d_, n_) / np.dot(d_, d_))
    # Each equation d lam = n holds up to the float32 rounding of the stored weights and
    # covers. Where d cancels (a node whose children's weights nearly cancel its own, as in a
    # symmetric split) that rounding decides lam, and one such equation fits "exactly".
    sig = 1.2e-7 * (m_ + abs(lam) * s_)
    lam_err = float(np.sqrt(np.sum((d_ * sig) ** 2)) / np.dot(d_, d_))
    if lam_err > 1e-3 * max(1.0, abs(lam)):
        return None, None, "the node statistics do not determine lambda (near-symmetric splits)"
    resid = n_ - lam * d_
    # float32 statistics leave residuals near 1e-7 of the cancelling terms; L1 or clipping
    # leaves far more.
    if np.sqrt(np.mean(resid**2)) > 1e-5 * np.sqrt(np.mean(m_**2)):
        return None, None, "lambda is not consistent across nodes (L1 or max_delta_step?)"
    se = float(np.sqrt(np.sum(resid**2) / max(1, resid.size - 1) / np.dot(d_, d_)))
    # float32 rounding of the stored statistics is not random noise, so the standard error
    # alone can be too tight; a lambda within 1e-6 of the covers it is added to is
    # indistinguishable at their precision anyway.
    h_scale = float(np.median(np.concatenate([t["cover"][t["left"] >= 0] for t in trees])))
    lam = _snap(lam, max(6 * se, 1e-7 * abs(lam), 1e-6 * h_scale))
    if lam < 0:
        return None, None, f"recovered lambda {lam:g} < 0"
    etas = np.full(len(trees), np.nan)
    errs = np.full(len(trees), np.inf)
    for i, t in enumerate(trees):
        L, R = t["left"], t["right"]
        inner = np.flatnonzero(L >= 0)
        if inner.size == 0:
            continue
        w, H, v = t["base_weight"], t["cover"], t["leaf_raw"]
        lleaf, rleaf = L[L[inner]] < 0, L[R[inner]] < 0
        # G of each child: leaf -> -v (H + lam) / eta ; inner -> -w (H + lam)
        a = w[inner] * (H[inner] + lam)  # = -G_p
        lv = v[L[inner]] * (H[L[inner]] + lam)
        rv = v[R[inner]] * (H[R[inner]] + lam)
        li = w[L[inner]] * (H[L[inner]] + lam)
        ri = w[R[inner]] * (H[R[inner]] + lam)
        # eta * (a - inner children) = leaf children
        A = a - np.where(lleaf, 0.0, li) - np.where(rleaf, 0.0, ri)
        B = np.where(lleaf, lv, 0.0) + np.where(rleaf, rv, 0.0)
        sel = (lleaf | rleaf) & np.isfinite(A) & np.isfinite(B)
        A, B = A[sel], B[sel]
        if A.size == 0 or np.dot(A, A) == 0:
            continue
        etas[i] = np.dot(A, B) / np.dot(A, A)
        r = B - etas[i] * A
        errs[i] = np.sqrt(np.sum(r**2) / max(1, r.size) / np.dot(A, A))
    good = np.isfinite(etas)
    if not np.any(good):
        return lam, None, "no tree has a split with a leaf child"
    if np.any(etas[good] <= 0):
        return None, None, "recovered a non-positive learning rate"
    rel = np.abs(etas[good] - np.median(etas[good])) / np.median(etas[good])
    if np.all(rel < 1e-4):
        # a tree with one usable split fits exactly: floor its error at float32 precision
        w8 = 1.0 / np.maximum(errs[good], 6e-8 * etas[good]) ** 2
        eta = float(np.sum(w8 * etas[good]) / np.sum(w8))
        eta_se = float(1.0 / np.sqrt(np.sum(w8)))
        eta = _snap(eta, max(6 * eta_se, 1e-7 * eta))
        return lam, np.full(len(trees), eta), ""
    # a learning-rate schedule: one eta per tree (stumpless trees take the previous one)
    snapped = np.array(
        [_snap(e, max(6 * s, 1e-6 * e)) if np.isfinite(e) else np.nan for e, s in zip(etas, errs)]
    )
    if np.any(snapped[good] <= 0):
        return lam, None, "recovered a non-positive learning rate"
    last = float(snapped[good][0])
    for i in range(snapped.size):
        if np.isfinite(snapped[i]):
            last = snapped[i]
        else:
            snapped[i] = last
    return lam, snapped, ""


def _config_params(config: dict | None) -> dict[str, float]:
    if not config:
        return {}
    gb = config.get("learner", {}).get("gradient_booster", {})
    tp = gb.get("tree_train_param") or gb.get("gbtree", {}).get("tree_train_param") or {}
    out = {}
    for k in ("eta", "lambda", "alpha", "max_delta_step", "subsample", "colsample_bytree"):
        if k in tp:
            try:
                out[k] = float(np.float32(tp[k]))  # XGBoost keeps its parameters in float32
            except (TypeError, ValueError):
                pass
    lp = config.get("learner", {}).get("learner_train_param", {})
    if "multi_strategy" in lp:
        out["multi_strategy"] = lp["multi_strategy"]
    return out


# ---------------------------------------------------------------------- main entry
def from_dict(
    doc: dict,
    *,
    config: dict | None = None,
    learning_rate: float | None = None,
    reg_lambda: float | None = None,
) -> TreeEnsemble:
    """Build a TreeEnsemble from a decoded XGBoost model document (``save_raw("json")``).

    Parameters
    ----------
    doc : dict
        The model as JSON/UBJSON decodes it.
    config : dict, optional
        ``json.loads(booster.save_config())``, when the booster is at hand.
    learning_rate, reg_lambda : float, optional
        Override the values read from the config or recovered from the trees.

    Returns
    -------
    TreeEnsemble
    """
    if not is_xgboost_model(doc):
        raise ValueError("Not an XGBoost model document (no 'learner').")
    try:
        return _from_dict(doc, config, learning_rate, reg_lambda)
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        raise ValueError(f"Corrupt XGBoost model: {type(e).__name__}: {e}") from e


def _from_dict(doc, config, learning_rate, reg_lambda) -> TreeEnsemble:
    learner = doc["learner"]
    version = ".".join(str(int(v)) for v in np.asarray(doc.get("version", [])).tolist())
    gb = learner["gradient_booster"]
    name = gb.get("name", "gbtree")
    if name == "gblinear":
        raise NotImplementedError("XGBoost booster='gblinear' has no trees to explain.")
    if name not in ("gbtree", "dart"):
        raise NotImplementedError(f"XGBoost booster={name!r} is not supported.")
    model = gb["gbtree"]["model"] if name == "dart" else gb["model"]
    trees_json = model["trees"]
    n_trees = len(trees_json)
    if n_trees == 0:
        raise ValueError("The XGBoost model has no trees (was it trained for 0 rounds?).")
    weights = np.ones(n_trees)
    if name == "dart":
        weights = np.asarray(gb.get("weight_drop", np.ones(n_trees)), dtype=np.float64)
        if weights.shape != (n_trees,):
            raise ValueError("Corrupt XGBoost model: weight_drop does not match the trees.")

    mp = learner["learner_model_param"]
    num_class = _int(mp, "num_class", 0)
    num_target = _int(mp, "num_target", 1)
    n_features = _int(mp, "num_feature", 0)
    n_outputs = max(num_class, num_target, 1)
    obj = learner.get("objective", {})
    objective = obj.get("name", "reg:squarederror")
    if objective not in _BASE_LINK:
        raise NotImplementedError(f"XGBoost objective {objective!r} is not supported.")
    cfg = _config_params(config)
    if cfg.get("multi_strategy", "one_output_per_tree") != "one_output_per_tree":
        raise NotImplementedError(
            f"XGBoost multi_strategy={cfg['multi_strategy']!r} (vector leaves) is not supported."
        )

    tree_info = np.asarray(model.get("tree_info", np.zeros(n_trees)), dtype=np.int64)
    if tree_info.shape != (n_trees,):
        raise ValueError("Corrupt XGBoost model: tree_info does not match the trees.")
    if np.any(tree_info < 0) or np.any(tree_info >= n_outputs):
        raise ValueError("Corrupt XGBoost model: tree_info names an output that does not exist.")
    indptr = model.get("iteration_indptr")
    if indptr is not None and len(indptr) >= 2:
        indptr = np.asarray(indptr, dtype=np.int64)
        if indptr[0] != 0 or indptr[-1] != n_trees or np.any(np.diff(indptr) < 0):
            raise ValueError("Corrupt XGBoost model: iteration_indptr does not match the trees.")
        tree_iter = np.searchsorted(indptr, np.arange(n_trees), side="right") - 1
    else:
        npt = int(model.get("gbtree_model_param", {}).get("num_parallel_tree", 1))
        tree_iter = np.arange(n_trees) // max(1, npt * n_outputs)

    obj_params = _objective_params(obj)
    if n_outputs > 1 and num_class > 1:
        obj_params["num_class"] = num_class
    base = _base_margin(
        _parse_base_score(mp.get("base_score", "0.5")), _BASE_LINK[objective], n_outputs
    )
    dart = name == "dart"
    parsed = [
        _parse_tree(t, float(w) if dart else None, float(base[g]))
        for t, w, g in zip(trees_json, weights, tree_info)
    ]
    max_feat = max((int(p["feature"].max()) for p in parsed), default=-1)
    if n_features <= max_feat:
        raise ValueError(
            f"Corrupt XGBoost model: a split uses feature {max_feat} but the model has "
            f"{n_features} features."
        )
    names = list(learner.get("feature_names", []) or [])
    named = len(names) > 0
    if named and len(names) != n_features:
        raise ValueError("Corrupt XGBoost model: feature_names does not match num_feature.")
    if not named:
        names = [f"f{i}" for i in range(n_features)]

    # ---- eta, lambda and exactness
    inexact = []
    params: dict[str, Any] = {k: v for k, v in cfg.items() if k != "multi_strategy"}
    if objective in _REFIT_OBJECTIVES:
        inexact.append(f"objective {objective} refits leaf values after the tree is grown")
    if name == "dart":
        inexact.append("DART rescales trees after they are grown (booster='dart')")
    if cfg.get("alpha", 0) > 0:
        inexact.append(f"reg_alpha={cfg['alpha']:g} > 0 soft-thresholds leaf values")
    if cfg.get("max_delta_step", 0) > 0:
        inexact.append(f"max_delta_step={cfg['max_delta_step']:g} > 0 clips leaf values")
    if cfg.get("subsample", 1) < 1:
        inexact.append(f"subsample={cfg['subsample']:g} < 1: node statistics are in-bag only")
    lam_r, eta_r, why = (None, None, "")
    if learning_rate is None or reg_lambda is None:
        lam_r, eta_r, why = _recover(parsed)
    if objective in _REFIT_OBJECTIVES:  # leaves are refit: they do not tell eta
        eta_r, why = None, f"objective {objective} refits the leaves"
    etas, lam, notes = _choose_eta_lambda(
        cfg, lam_r, eta_r, why, learning_rate, reg_lambda, n_trees
    )
    warn_notes(notes, inexact)
    joined, cat_field = join_trees(parsed)

    return TreeEnsemble(
        tree_offsets=joined["tree_offsets"],
        left=joined["left"],
        right=joined["right"],
        feature=cat_field("feature"),
        threshold=cat_field("threshold"),
        split_type=cat_field("split_type"),
        default_left=cat_field("default_left"),
        missing_type=cat_field("missing_type"),
        value=cat_field("value"),
        cover=cat_field("cover"),
        count=cat_field("count"),
        gain=cat_field("gain"),
        leaf_id=cat_field("leaf_id"),
        cat_offsets=joined["cat_offsets"],
        cat_words=joined["cat_words"],
        tree_group=tree_info,
        tree_iteration=tree_iter,
        learning_rate=etas,
        tree_weight=weights,
        base_margin=base,
        feature_names=tuple(names),
        named=named,
        reg_lambda=lam,
        objective=objective,
        objective_params=obj_params,
        decision_rule="float32 <",
        float32_sum=True,
        source="xgboost",
        source_version=version,
        categories=_parse_categories(model, n_features),
        params=params,
        inexact=tuple(inexact),
    )


def _int(d: dict, key: str, default: int) -> int:
    try:
        return int(d.get(key, default))
    except (TypeError, ValueError) as e:
        raise ValueError(f"Corrupt XGBoost model: {key}={d.get(key)!r} is not an integer.") from e


def _objective_params(obj: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for sub in obj.values():
        if isinstance(sub, dict):
            for k, v in sub.items():
                try:
                    out[k] = float(v)
                except (TypeError, ValueError):
                    out[k] = v
    return out


def _choose_eta_lambda(cfg, lam_r, eta_r, why, learning_rate, reg_lambda, n_trees):
    """Pick eta and lambda: explicit > recovered from the trees > config > XGBoost defaults.

    The trees win over the config, which for a Booster loaded from a file holds only defaults.
    Where the recovered value agrees with the config, the config's exact value is used.
    """
    notes = []

    def pick(explicit, recovered, key, arg):
        if explicit is not None:
            return np.full(n_trees, float(explicit))
        if recovered is not None:
            rec = np.broadcast_to(np.asarray(recovered, dtype=np.float64), (n_trees,))
            if key in cfg and np.allclose(rec, cfg[key], rtol=1e-4, atol=1e-7):
                return np.full(n_trees, cfg[key])
            return rec.copy()
        if key in cfg:
            if _looks_default(cfg):
                notes.append(
                    f"Could not recover {key} from the trees ({why}); using {key}="
                    f"{cfg[key]:g} from the booster's config, which holds only XGBoost's "
                    f"defaults for a model loaded from a file. Pass {arg}= if that is wrong."
                )
            return np.full(n_trees, cfg[key])
        notes.append(
            f"Could not recover {key} from the trees ({why}); assuming XGBoost's default "
            f"{key}={_XGB_DEFAULTS[key]:g}. Pass {arg}= to set it."
        )
        return np.full(n_trees, _XGB_DEFAULTS[key])

    lam = float(pick(reg_lambda, lam_r, "lambda", "reg_lambda")[0])
    etas = pick(learning_rate, eta_r, "eta", "learning_rate")
    return etas, lam, notes


def _looks_default(cfg: dict) -> bool:
    return math.isclose(cfg.get("eta", 0.3), 0.3, rel_tol=1e-6) and cfg.get("lambda", 1) == 1


def from_booster(
    booster: Any, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """Build a TreeEnsemble from an ``xgboost.Booster`` or scikit-learn wrapper.

    Parameters
    ----------
    booster : xgboost.Booster, XGBRegressor, XGBClassifier or XGBRanker
    learning_rate, reg_lambda : float, optional
        Override the values read from the booster.

    Returns
    -------
    TreeEnsemble
    """
    if hasattr(booster, "get_booster"):
        booster = booster.get_booster()
    try:
        raw = booster.save_raw(raw_format="json")
        config = json.loads(booster.save_config())
    except Exception as e:  # XGBoostError for an empty Booster()
        raise ValueError(
            "The XGBoost booster is not trained (it holds no model): "
            + str(e).split("\n")[0][-120:]
        ) from e
    doc = json.loads(bytes(raw).decode("utf-8"))
    return from_dict(doc, config=config, learning_rate=learning_rate, reg_lambda=reg_lambda)
