"""LightGBM: read a model's text file (``model_to_string()``) or ``dump_model()`` JSON.

Routing rule (float64): a numeric node sends ``x`` left iff ``x <= threshold``. Missing values
depend on the node's missing type: ``NaN`` sends NaN to the default side; ``Zero`` sends NaN and
``|x| <= 1e-35f`` there; ``None`` reads NaN as 0. A categorical node (``==``) sends the
categories of its set LEFT and NaN, negative, unseen or huge values right. LightGBM's predictor
reads every input with ``|x| <= 1e-35f`` as exactly 0; thresholds within that band are moved
so that the kernels' ``x <= bound`` rule reproduces it.

Values: leaf and internal values already include the shrinkage. The first tree of each output
also carries the ``boost_from_average`` intercept in every node (its ``shrinkage`` then reads 1
whatever the learning rate). The intercept is the score at which the root's gradient sum is zero
(the weighted mean label, mapped through the link), so it is recovered from the first tree's
leaves as the (H + lambda)-weighted mean of the leaf values, moved to ``base_margin`` and
subtracted from that tree. The text file rounds internal values, weights and split gains to
about six digits while leaf fields keep full precision, so all inner statistics (hessian covers,
counts, split gains) are rebuilt from the leaves.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from .. import objectives as O
from ..ensemble import TreeEnsemble
from ..kernels.routing import (
    CAT_SET_LEFT,
    MISSING_NAN,
    MISSING_NONE,
    MISSING_ZERO,
    NUMERIC,
)
from ._common import join_trees, warn_notes

__all__ = ["from_booster", "from_dump", "from_string", "kernel_objective"]

#: LightGBM's kZeroThreshold (a float constant): inputs with |x| <= it are read as 0.
K_ZERO = float(np.float32(1e-35))
#: LightGBM's missing type codes (decision_type bits 2-3) -> ours
_MISSING = {0: MISSING_NONE, 1: MISSING_ZERO, 2: MISSING_NAN}
_MISSING_NAMES = {"None": 0, "Zero": 1, "NaN": 2}
_DUMP_INF = 1e300

_ALIASES = {
    "regression": "regression",
    "regression_l2": "regression",
    "l2": "regression",
    "mean_squared_error": "regression",
    "mse": "regression",
    "l2_root": "regression",
    "root_mean_squared_error": "regression",
    "rmse": "regression",
    "binary": "binary",
    "multiclass": "multiclass",
    "softmax": "multiclass",
    "multiclassova": "multiclassova",
    "multiclass_ova": "multiclassova",
    "ova": "multiclassova",
    "ovr": "multiclassova",
    "poisson": "poisson",
    "gamma": "gamma",
    "tweedie": "tweedie",
    "cross_entropy": "cross_entropy",
    "xentropy": "cross_entropy",
    "regression_l1": "regression_l1",
    "l1": "regression_l1",
    "mean_absolute_error": "regression_l1",
    "mae": "regression_l1",
    "huber": "huber",
    "quantile": "quantile",
    "fair": "fair",
    "mape": "mape",
    "mean_absolute_percentage_error": "mape",
    "cross_entropy_lambda": "cross_entropy_lambda",
    "xentlambda": "cross_entropy_lambda",
    "lambdarank": "lambdarank",
    "rank_xendcg": "rank_xendcg",
    "xendcg": "rank_xendcg",
    "custom": "custom",
    "none": "custom",
    "null": "custom",
}
#: objectives whose boost_from_average intercept zeroes the root gradient sum
_ZERO_GRAD_INIT = {
    "regression",
    "binary",
    "multiclass",
    "multiclassova",
    "poisson",
    "gamma",
    "tweedie",
    "cross_entropy",
}
#: objectives with a boost_from_average intercept that is not a zero-gradient point
_OTHER_INIT = {"regression_l1", "huber", "quantile", "fair", "mape", "cross_entropy_lambda"}
#: objectives that refit or otherwise do not give leaves -lr G / (H + lambda)
_PREDICTION_ONLY = {
    "regression_l1": "leaves are refit to residual quantiles",
    "quantile": "leaves are refit to residual quantiles",
    "huber": "its gradients are clipped",
    "fair": "is not supported for attributions",
    "mape": "leaves are refit to weighted medians",
    "cross_entropy_lambda": "is not supported for attributions",
    "lambdarank": "ranking gradients depend on whole queries",
    "rank_xendcg": "ranking gradients depend on whole queries",
    "custom": "the gradient is unknown",
}


class _Corrupt(ValueError):
    pass


def _bad(msg: str) -> _Corrupt:
    return _Corrupt(f"Corrupt LightGBM model: {msg}")


# ---------------------------------------------------------------------- text parsing
def _numbers(s: str, key: str, n: int | None, kind: type, what: str) -> np.ndarray:
    """The space-separated values of a model-text field, checked for type and count."""
    s = s.strip()
    try:
        out = np.array([kind(v) for v in s.split(" ")] if s else [], dtype=kind)
    except ValueError as e:
        raise _bad(f"field {key!r} holds a value that is not {what} ({e}).") from None
    if n is not None and out.shape[0] != n:
        raise _bad(f"field {key!r} has {out.shape[0]} values, expected {n}.")
    return out


def _floats(s: str, key: str, n: int | None) -> np.ndarray:
    return _numbers(s, key, n, float, "a number").astype(np.float64)


def _ints(s: str, key: str, n: int | None) -> np.ndarray:
    return _numbers(s, key, n, int, "an integer").astype(np.int64)


def _key_values(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v
    return out


def _parse_text_tree(kv: dict[str, str], index: int) -> dict[str, Any]:
    try:
        L = int(kv["num_leaves"])
    except KeyError:
        raise _bad(f"tree {index} lacks num_leaves (truncated file?).") from None
    except ValueError:
        raise _bad(f"tree {index} has num_leaves={kv['num_leaves']!r}.") from None
    if L < 1:
        raise _bad(f"tree {index} has num_leaves={L}.")
    if "leaf_value" not in kv:
        raise _bad(f"tree {index} lacks leaf_value (truncated file?).")
    t: dict[str, Any] = {"num_leaves": L}
    t["leaf_value"] = _floats(kv["leaf_value"], "leaf_value", L)
    lw = kv.get("leaf_weight", "")
    t["leaf_weight"] = _floats(lw, "leaf_weight", L) if lw.strip() else np.full(L, np.nan)
    lc = kv.get("leaf_count", "")
    t["leaf_count"] = _floats(lc, "leaf_count", L) if lc.strip() else np.full(L, np.nan)
    t["shrinkage"] = float(kv.get("shrinkage", "1") or 1)
    t["is_linear"] = kv.get("is_linear", "0").strip() not in ("", "0")
    n_in = L - 1
    for key in ("split_feature", "threshold", "decision_type", "left_child", "right_child"):
        if n_in and key not in kv:
            raise _bad(f"tree {index} lacks {key!r} (truncated file?).")
    t["split_feature"] = _ints(kv.get("split_feature", ""), "split_feature", n_in)
    sg = kv.get("split_gain", "")
    t["split_gain"] = _floats(sg, "split_gain", n_in) if sg.strip() else np.zeros(n_in)
    thr = _floats(kv.get("threshold", ""), "threshold", n_in)
    dt = _ints(kv.get("decision_type", ""), "decision_type", n_in)
    if np.any((dt < 0) | (dt > 255)):
        raise _bad(f"tree {index} has an invalid decision_type.")
    t["left_child"] = _ints(kv.get("left_child", ""), "left_child", n_in)
    t["right_child"] = _ints(kv.get("right_child", ""), "right_child", n_in)
    t["categorical"] = (dt & 1) != 0
    t["default_left"] = (dt & 2) != 0
    t["missing"] = (dt >> 2) & 3
    if np.any(t["missing"] == 3):
        raise _bad(f"tree {index} has an unknown missing type in decision_type.")
    words: list[np.ndarray] = [np.zeros(0, dtype=np.uint32)] * n_in
    if np.any(t["categorical"]):
        num_cat = int(kv.get("num_cat", "0") or 0)
        bounds = _ints(kv.get("cat_boundaries", ""), "cat_boundaries", num_cat + 1)
        cat_thr = _ints(kv.get("cat_threshold", ""), "cat_threshold", None)
        if (
            bounds.size == 0
            or bounds[0] != 0
            or bounds[-1] != cat_thr.size
            or np.any(np.diff(bounds) < 0)
        ):
            raise _bad(f"tree {index}: cat_boundaries do not index cat_threshold.")
        if np.any((cat_thr < 0) | (cat_thr >= 2**32)):
            raise _bad(f"tree {index}: cat_threshold words are not uint32.")
        words = list(words)
        for i in np.flatnonzero(t["categorical"]):
            c = thr[i]
            if not (c == int(c) and 0 <= c < num_cat):
                raise _bad(f"tree {index}: categorical split {i} names bitset {c}.")
            c = int(c)
            words[i] = cat_thr[bounds[c] : bounds[c + 1]].astype(np.uint32)
        thr = np.where(t["categorical"], np.nan, thr)
    t["threshold"] = thr
    t["cat_words"] = words
    if t["is_linear"]:
        for key in ("leaf_const", "num_features", "leaf_features", "leaf_coeff"):
            if key not in kv:
                raise _bad(f"linear tree {index} lacks {key!r} (truncated file?).")
        n_feat = _ints(kv["num_features"], "num_features", L)
        if np.any(n_feat < 0):
            raise _bad(f"linear tree {index} has a negative num_features.")
        total = int(n_feat.sum())
        feats = _ints(" ".join(kv["leaf_features"].split()), "leaf_features", total)
        coefs = _floats(" ".join(kv["leaf_coeff"].split()), "leaf_coeff", total)
        ptr = np.concatenate([[0], np.cumsum(n_feat)])
        t["linear"] = {
            "const": _floats(kv["leaf_const"], "leaf_const", L),
            "features": [feats[ptr[k] : ptr[k + 1]] for k in range(L)],
            "coeff": [coefs[ptr[k] : ptr[k + 1]] for k in range(L)],
        }
    return t


def _split_text(text: str) -> tuple[dict[str, str], list[dict[str, str]], str]:
    """Header key-values, per-tree key-values and the text after the trees."""
    if not isinstance(text, str):
        raise TypeError(f"Expected the model text as str, got {type(text).__name__}.")
    if not text.startswith("tree"):
        raise ValueError("Not a LightGBM model text (it does not start with 'tree').")
    end = text.find("end of trees")
    if end < 0:
        raise _bad("no 'end of trees' line (truncated file?).")
    body, tail = text[:end], text[end + len("end of trees") :]
    blocks = re.split(r"^Tree=", body, flags=re.M)
    header: dict[str, Any] = _key_values(blocks[0].splitlines())
    header["average_output"] = any(ln.strip() == "average_output" for ln in blocks[0].splitlines())
    trees = []
    for i, blk in enumerate(blocks[1:]):
        lines = blk.splitlines()
        if not lines or lines[0].strip() != str(i):
            raise _bad(f"tree block {i} is labelled {lines[0] if lines else ''!r}.")
        trees.append(_key_values(lines[1:]))
    return header, trees, tail


def _parse_params(tail: str) -> dict[str, str]:
    out: dict[str, str] = {}
    start = tail.find("\nparameters:")
    if start < 0:
        if tail.strip():  # LightGBM writes the parameters after the feature importances
            raise _bad("no complete 'parameters:' section after the trees (truncated file?).")
        return out
    stop = tail.find("end of parameters", start)
    if stop < 0:
        raise _bad("the parameters section has no 'end of parameters' line (truncated file?).")
    for line in tail[start:stop].splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]") and ": " in line:
            k, v = line[1:-1].split(": ", 1)
            out[k.strip()] = v.strip()
        elif line.startswith("[") and line.endswith(":]"):
            out[line[1:-2].strip()] = ""
    return out


def _parse_pandas_categorical(tail: str) -> Any:
    m = re.search(r"^pandas_categorical:(.*)$", tail, flags=re.M)
    if not m:
        return None
    try:
        return json.loads(m.group(1))
    except json.JSONDecodeError as e:
        raise _bad(f"pandas_categorical is not valid JSON ({e}).") from None


# ---------------------------------------------------------------------- JSON parsing
def _parse_dump_tree(info: Any, index: int) -> dict[str, Any]:
    if not isinstance(info, dict) or not isinstance(info.get("tree_structure"), dict):
        raise _bad(f"tree_info[{index}] has no tree_structure.")
    root = info["tree_structure"]
    inner: dict[int, dict] = {}
    leaves: dict[int, dict] = {}
    # iterative walk: (node, parent split index, is_left)
    stack: list[tuple[dict, int, bool]] = [(root, -1, True)]
    links: list[tuple[int, bool, int]] = []  # (parent, is_left, child code)
    while stack:
        node, parent, is_left = stack.pop()
        if not isinstance(node, dict):
            raise _bad(f"tree {index} has a node that is not an object.")
        if "split_index" in node:
            k = node["split_index"]
            if not isinstance(k, int) or k in inner or k < 0:
                raise _bad(f"tree {index} has a bad or repeated split_index {k!r}.")
            inner[k] = node
            code = k
            if "left_child" not in node or "right_child" not in node:
                raise _bad(f"tree {index}: split {k} lacks a child (truncated?).")
            stack.append((node["right_child"], k, False))
            stack.append((node["left_child"], k, True))
        elif "leaf_value" in node:
            k = node.get("leaf_index", 0 if parent < 0 else None)
            if not isinstance(k, int) or k in leaves or k < 0:
                raise _bad(f"tree {index} has a bad or repeated leaf_index {k!r}.")
            leaves[k] = node
            code = ~k
        else:
            raise _bad(f"tree {index} has a node with neither split_index nor leaf_value.")
        if parent >= 0:
            links.append((parent, is_left, code))
    L = len(leaves)
    if sorted(leaves) != list(range(L)) or sorted(inner) != list(range(L - 1)):
        raise _bad(f"tree {index}: leaf and split indices are not 0..n-1.")
    n_in = L - 1
    t: dict[str, Any] = {"num_leaves": L}
    try:
        t["leaf_value"] = np.array([float(leaves[k]["leaf_value"]) for k in range(L)])
        t["leaf_weight"] = np.array([float(leaves[k].get("leaf_weight", np.nan)) for k in range(L)])
        t["leaf_count"] = np.array([float(leaves[k].get("leaf_count", np.nan)) for k in range(L)])
        t["shrinkage"] = float(info.get("shrinkage", 1.0))
        t["split_feature"] = np.array([int(inner[k]["split_feature"]) for k in range(n_in)])
        t["split_gain"] = np.array([float(inner[k].get("split_gain", 0.0)) for k in range(n_in)])
    except (KeyError, TypeError, ValueError) as e:
        raise _bad(f"tree {index} has a missing or non-numeric field ({e}).") from None
    t["is_linear"] = any("leaf_coeff" in leaves[k] or "leaf_const" in leaves[k] for k in leaves)
    if t["is_linear"]:
        try:
            t["linear"] = {
                "const": np.array([float(leaves[k]["leaf_const"]) for k in range(L)]),
                "features": [
                    np.array(leaves[k].get("leaf_features", []), dtype=np.int64) for k in range(L)
                ],
                "coeff": [
                    np.array(leaves[k].get("leaf_coeff", []), dtype=np.float64) for k in range(L)
                ],
            }
        except (KeyError, TypeError, ValueError) as e:
            raise _bad(f"linear tree {index} has a bad linear leaf ({e}).") from None
        if any(f.shape != c.shape for f, c in zip(t["linear"]["features"], t["linear"]["coeff"])):
            raise _bad(f"linear tree {index}: leaf_features and leaf_coeff differ in length.")
    left = np.zeros(n_in, dtype=np.int64)
    right = np.zeros(n_in, dtype=np.int64)
    for parent, is_left, code in links:
        (left if is_left else right)[parent] = code
    t["left_child"], t["right_child"] = left, right
    cat = np.zeros(n_in, dtype=bool)
    dl = np.zeros(n_in, dtype=bool)
    miss = np.zeros(n_in, dtype=np.int64)
    thr = np.full(n_in, np.nan)
    words: list[np.ndarray] = [np.zeros(0, dtype=np.uint32)] * n_in
    words = list(words)
    for k in range(n_in):
        nd = inner[k]
        dtype = nd.get("decision_type", "<=")
        if dtype not in ("<=", "=="):
            raise _bad(f"tree {index}: unknown decision_type {dtype!r}.")
        mt = nd.get("missing_type", "None")
        if mt not in _MISSING_NAMES:
            raise _bad(f"tree {index}: unknown missing_type {mt!r}.")
        miss[k] = _MISSING_NAMES[mt]
        dl[k] = bool(nd.get("default_left", False))
        if dtype == "==":
            cat[k] = True
            try:
                members = np.array(
                    [int(c) for c in str(nd["threshold"]).split("||") if c != ""], dtype=np.int64
                )
            except (KeyError, ValueError):
                raise _bad(f"tree {index}: categorical split {k} has a bad threshold.") from None
            if members.size and (members.min() < 0 or members.max() >= 2**31 - 1):
                raise _bad(f"tree {index}: categorical split {k} has an invalid category.")
            w = np.zeros(int(members.max()) // 32 + 1 if members.size else 0, dtype=np.uint32)
            np.bitwise_or.at(w, members // 32, np.uint32(1) << (members % 32).astype(np.uint32))
            words[k] = w
        else:
            try:
                thr[k] = float(nd["threshold"])
            except (KeyError, TypeError, ValueError):
                raise _bad(f"tree {index}: split {k} has a bad threshold.") from None
            if abs(thr[k]) == _DUMP_INF:  # dump_model writes +-inf thresholds as +-1e300
                thr[k] = math.copysign(math.inf, thr[k])
    t.update(categorical=cat, default_left=dl, missing=miss, threshold=thr, cat_words=words)
    return t


# ---------------------------------------------------------------------- building
def _tree_arrays(t: dict[str, Any], index: int, n_features: int) -> dict[str, Any]:
    """One tree in our layout: inner nodes 0..L-2 (LightGBM's split indices), then the leaves."""
    L = t["num_leaves"]
    n_in = L - 1
    n = n_in + L

    def child(c: np.ndarray) -> np.ndarray:
        c = np.asarray(c, dtype=np.int64)
        out = np.where(c >= 0, c, n_in + ~c)
        bad = (c >= n_in) | (c < -L) | (c == 0)
        if np.any(bad):
            raise _bad(f"tree {index} has a child index outside the tree.")
        return out

    left = np.full(n, -1, dtype=np.int64)
    right = np.full(n, -1, dtype=np.int64)
    feat = np.full(n, -1, dtype=np.int64)
    if n_in:
        left[:n_in] = child(t["left_child"])
        right[:n_in] = child(t["right_child"])
        f = t["split_feature"]
        if np.any((f < 0) | (f >= n_features)):
            raise _bad(f"tree {index} splits on a feature outside [0, {n_features}).")
        feat[:n_in] = f
    cat = np.zeros(n, dtype=bool)
    cat[:n_in] = t["categorical"]
    thr = np.full(n, np.nan)
    thr[:n_in] = t["threshold"]
    num = np.zeros(n, dtype=bool)
    num[:n_in] = ~t["categorical"]
    if np.any(num & np.isnan(thr)):
        raise _bad(f"tree {index} has a numeric split with a NaN threshold.")
    # LightGBM reads |x| <= kZeroThreshold as 0: 0 <= thr decides those inputs.
    band_neg = num & (thr >= -K_ZERO) & (thr < 0)
    band_pos = num & (thr >= 0) & (thr <= K_ZERO)
    thr = np.where(band_neg, np.nextafter(-K_ZERO, -np.inf), thr)
    thr = np.where(band_pos, K_ZERO, thr)
    dl = np.zeros(n, dtype=np.uint8)
    mt = np.full(n, MISSING_NAN, dtype=np.int8)
    if n_in:
        dl[:n_in] = t["default_left"]
        mt[:n_in] = [_MISSING[int(m)] for m in t["missing"]]
        # categorical nodes: NaN goes right whatever the missing type
        mt[:n_in] = np.where(t["categorical"], MISSING_NAN, mt[:n_in])
        dl[:n_in] = np.where(t["categorical"], 0, dl[:n_in])
    value = np.zeros(n)
    value[n_in:] = t["leaf_value"]
    if not np.all(np.isfinite(t["leaf_value"])):
        raise _bad(f"tree {index} has a non-finite leaf value.")
    leaf_id = np.full(n, -1, dtype=np.int64)
    leaf_id[n_in:] = np.arange(L)
    words = list(t["cat_words"]) + [np.zeros(0, dtype=np.uint32)] * L
    return {
        "left": left,
        "right": right,
        "feature": feat,
        "threshold": thr,
        "split_type": np.where(cat, CAT_SET_LEFT, NUMERIC).astype(np.int8),
        "default_left": dl,
        "missing_type": mt,
        "value": value,
        "leaf_weight": t["leaf_weight"],
        "leaf_count": t["leaf_count"],
        "stored_gain": np.concatenate([t["split_gain"], np.zeros(L)]),
        "leaf_id": leaf_id,
        "cat_words": words,
        "n_in": n_in,
    }


def _linear_leaves(trees: list[dict[str, Any]], n_features: int) -> dict[str, list] | None:
    """The linear leaf models of linear trees, as the ensemble's ``linear_leaves`` parameter:
    per leaf with a linear model, its tree, leaf number, ``delta`` = leaf_const - leaf_value
    (so that value + delta + sum coeff x is the leaf's output whatever intercept the adapter
    moves out of the value), and its features and coefficients (flat, with offsets)."""
    if not any(t["is_linear"] for t in trees):
        return None
    out: dict[str, list] = {"tree": [], "leaf": [], "delta": [], "ptr": [0], "features": [],
                            "coeff": []}  # fmt: skip
    for i, t in enumerate(trees):
        lin = t.get("linear")
        if not t["is_linear"] or lin is None:
            continue
        for k in range(t["num_leaves"]):
            f = np.asarray(lin["features"][k], dtype=np.int64)
            if np.any((f < 0) | (f >= n_features)):
                raise _bad(f"linear tree {i} uses a feature outside [0, {n_features}).")
            delta = float(lin["const"][k]) - float(t["leaf_value"][k])
            if not np.isfinite(delta) or not np.all(np.isfinite(lin["coeff"][k])):
                raise _bad(f"linear tree {i} has a non-finite linear leaf.")
            out["tree"].append(i)
            out["leaf"].append(k)
            out["delta"].append(delta)
            out["features"] += f.tolist()
            out["coeff"] += [float(c) for c in lin["coeff"][k]]
            out["ptr"].append(len(out["features"]))
    return out


def _postorder(left: np.ndarray, right: np.ndarray) -> list[int]:
    """Inner nodes children-first (the tree was checked to be proper by its indices)."""
    order: list[int] = []
    stack = [0]
    seen = np.zeros(left.shape[0], dtype=bool)
    while stack:
        i = stack.pop()
        if seen[i]:
            raise _bad("a tree has a cycle or a shared node.")
        seen[i] = True
        if left[i] >= 0:
            order.append(i)
            stack.append(int(left[i]))
            stack.append(int(right[i]))
    if not np.all(seen):
        raise _bad("a tree has nodes not reachable from its root.")
    return order[::-1]


def _sums(a: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Hessian covers and counts of every node, summed from the leaves."""
    n_in = a["n_in"]
    n = a["left"].shape[0]
    cover = np.zeros(n)
    count = np.zeros(n)
    cover[n_in:] = a["leaf_weight"]
    count[n_in:] = a["leaf_count"]
    if n_in == 0 and np.isnan(cover[0]):
        cover[0] = 0.0  # LightGBM writes no weight for a one-leaf tree; no split reads it
    L, R = a["left"], a["right"]
    for i in _postorder(L, R):
        cover[i] = cover[L[i]] + cover[R[i]]
        count[i] = count[L[i]] + count[R[i]]
    return cover, count


def _recomputed_gain(a: dict, cover: np.ndarray, lr: float, lam: float) -> np.ndarray:
    """S(L) + S(R) - S(P), S = G^2 / (H + lambda), with G rebuilt from the leaf values."""
    n_in = a["n_in"]
    L, R = a["left"], a["right"]
    G = np.zeros(cover.shape[0])
    G[n_in:] = -a["value"][n_in:] * (cover[n_in:] + lam) / lr
    gain = np.zeros(cover.shape[0])
    order = _postorder(L, R)
    for i in order:
        G[i] = G[L[i]] + G[R[i]]
    with np.errstate(divide="ignore", invalid="ignore"):
        S = np.where(cover + lam > 0, G * G / (cover + lam), 0.0)
    for i in order:
        gain[i] = S[L[i]] + S[R[i]] - S[i]
    return gain


def _weighted_mean_init(value: np.ndarray, cover: np.ndarray, lam: float) -> float:
    w = cover + lam
    if value.shape[0] == 1 or not np.all(np.isfinite(w)) or np.sum(w) <= 0:
        return float(np.mean(value)) if value.shape[0] == 1 else float("nan")
    return float(np.dot(w, value) / np.sum(w))


def _binary_init(
    value: np.ndarray, cover: np.ndarray, lam: float, lr: float, sigma: float, w_pos, w_neg
) -> float:
    """The intercept of a binary tree whose rows carry label weights (scale_pos_weight,
    is_unbalance): the root gradient sum at the intercept is then not zero but
    H (w_neg - w_pos) / (sigma (p w_pos + (1 - p) w_neg)), p = sigmoid(sigma init)."""
    H = float(np.sum(cover))
    c = cover + lam
    m = _weighted_mean_init(value, cover, lam)

    def f(init: float) -> float:
        p = 1.0 / (1.0 + math.exp(-sigma * init))
        wp, wn = w_pos(p), w_neg(p)
        g_root = H * (wn - wp) / (sigma * (p * wp + (1 - p) * wn))
        return float(np.dot(c, value - init)) + lr * g_root

    lo, hi = m - 1.0, m + 1.0
    for _ in range(200):
        if f(lo) > 0:
            break
        lo -= 2 * (hi - lo)
    for _ in range(200):
        if f(hi) < 0:
            break
        hi += 2 * (hi - lo)
    if not (f(lo) > 0 > f(hi)):
        return m
    for _ in range(200):  # bisection to the last bit
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _objective(text: str) -> tuple[str, dict[str, Any]]:
    parts = text.split()
    if not parts:
        raise _bad("the objective is empty.")
    name = _ALIASES.get(parts[0])
    if name is None:
        raise NotImplementedError(f"LightGBM objective {parts[0]!r} is not supported.")
    params: dict[str, Any] = {}
    for p in parts[1:]:
        if ":" in p:
            k, v = p.split(":", 1)
            try:
                params[k] = float(v)
            except ValueError:
                params[k] = v
        else:
            params[p] = True
    return name, params


def _pfloat(params: dict[str, str], key: str, default: float) -> float:
    v = params.get(key, "")
    try:
        return float(v) if v != "" else default
    except ValueError:
        raise _bad(f"parameter {key}={v!r} is not a number.") from None


def _build(
    header: dict[str, Any],
    trees: list[dict[str, Any]],
    params: dict[str, str],
    pandas_categorical: Any,
    average_output: bool,
    learning_rate: float | None,
    reg_lambda: float | None,
) -> TreeEnsemble:
    try:
        n_class = int(header.get("num_class", 1))
        per_iter = int(header.get("num_tree_per_iteration", n_class))
        max_feat = int(header["max_feature_idx"])
    except KeyError as e:
        raise _bad(f"the header lacks {e}.") from None
    except (TypeError, ValueError) as e:
        raise _bad(f"a header count is not an integer ({e}).") from None
    if per_iter < 1 or n_class < 1 or max_feat < 0:
        raise _bad("num_class, num_tree_per_iteration and max_feature_idx must be positive.")
    n_features = max_feat + 1
    n_trees = len(trees)
    if n_trees == 0:
        raise ValueError("The LightGBM model has no trees (was it trained for 0 rounds?).")
    if n_trees % per_iter:
        raise _bad(f"{n_trees} trees is not a multiple of num_tree_per_iteration={per_iter}.")
    objective, obj_params = _objective(str(header.get("objective", "regression")))
    if objective in ("multiclass", "multiclassova") and "num_class" not in obj_params:
        obj_params["num_class"] = n_class
    for key, default in (("poisson_max_delta_step", 0.7), ("tweedie_variance_power", 1.5)):
        if objective == key.split("_")[0]:
            obj_params[key] = _pfloat(params, key, default)
    linear = _linear_leaves(trees, n_features)
    boosting = params.get("boosting", "gbdt")
    names = header.get("feature_names")
    if isinstance(names, str):
        names = names.split(" ")
    names = list(names or [])
    if names and len(names) != n_features:
        raise _bad(f"{len(names)} feature names for max_feature_idx={max_feat}.")
    generated = [f"Column_{i}" for i in range(n_features)]
    named = bool(names) and names != generated
    if not names:
        names = generated

    lam_param = _pfloat(params, "lambda_l2", float("nan"))
    lr_param = _pfloat(params, "learning_rate", float("nan"))
    notes = []
    # ---- learning rate per tree (the intercept-carrying first trees read shrinkage 1)
    shrink = np.array([t["shrinkage"] for t in trees], dtype=np.float64)
    if not np.all(np.isfinite(shrink)):
        raise _bad("a tree's shrinkage is not finite.")
    if np.any(shrink <= 0):
        if boosting != "dart":
            raise _bad("a tree's shrinkage is not positive in a model that is not DART.")
        # DART rescales dropped trees (the intercept tree even by a negative factor); the
        # leaves are what counts for prediction, the learning rate only for attributions
        fill = lr_param if np.isfinite(lr_param) and lr_param > 0 else 1.0
        shrink = np.where(shrink <= 0, fill, shrink)
    rf = boosting == "rf" or average_output
    later = shrink[per_iter:]
    lr_first = lr_param
    if not np.isfinite(lr_first):
        lr_first = float(later[0]) if later.size else float("nan")
    first_bias = np.zeros(n_trees, dtype=bool)
    bfa = params.get("boost_from_average", "1") not in ("0", "false")
    if not rf and (objective in _ZERO_GRAD_INIT or objective in _OTHER_INIT) and bfa:
        for k in range(per_iter):
            if np.isfinite(lr_first) and lr_first != 1.0:
                first_bias[k] = shrink[k] == 1.0
            else:
                first_bias[k] = True
    lrs = shrink.copy()
    if np.isfinite(lr_first):
        lrs[:per_iter] = np.where(first_bias[:per_iter], lr_first, shrink[:per_iter])
    elif np.any(first_bias):
        notes.append(
            "The model does not record its learning rate and its only trees carry the "
            "intercept; assuming learning_rate=1. Pass learning_rate= to set it."
        )
    if rf:
        lrs[:] = 1.0
    if learning_rate is not None:
        lrs[:] = float(learning_rate)
    if reg_lambda is not None:
        lam = float(reg_lambda)
    elif np.isfinite(lam_param):
        lam = lam_param
    else:
        lam = 0.0
        if params == {}:
            notes.append(
                "The LightGBM dump does not record lambda_l2; assuming LightGBM's default "
                "lambda_l2=0. Pass reg_lambda= (or read the model text file) to set it."
            )

    # ---- inexactness
    inexact = []
    if objective in _PREDICTION_ONLY:
        inexact.append(f"objective {objective}: {_PREDICTION_ONLY[objective]}")
    for key, what in (
        ("lambda_l1", "soft-thresholds leaf values"),
        ("max_delta_step", "clips leaf values"),
        ("path_smooth", "mixes parent values into the leaves"),
    ):
        v = _pfloat(params, key, 0.0)
        if v > 0:
            inexact.append(f"{key}={v:g} > 0 {what}")
    bf = _pfloat(params, "bagging_fraction", 1.0)
    pbf = _pfloat(params, "pos_bagging_fraction", 1.0)
    nbf = _pfloat(params, "neg_bagging_fraction", 1.0)
    if _pfloat(params, "bagging_freq", 0.0) > 0 and min(bf, pbf, nbf) < 1:
        inexact.append("bagging (bagging_freq > 0, bagging_fraction < 1): statistics in-bag only")
    if params.get("data_sample_strategy") == "goss" or boosting == "goss":
        inexact.append("GOSS sampling reweights the gradients")
    if boosting == "dart":
        inexact.append("DART rescales trees after they are grown (boosting='dart')")
    if rf:
        inexact.append(
            "random forest mode (boosting='rf'): every tree is fit at the intercept, not at "
            "the staged margin"
        )
    if params.get("use_quantized_grad", "0") not in ("0", ""):
        inexact.append("use_quantized_grad quantizes the gradients")
    mono = params.get("monotone_constraints", "").replace(",", " ").split()
    if any(m not in ("0", "") for m in mono):
        inexact.append("monotone constraints clamp leaf values")
    if params.get("reg_sqrt", "0") not in ("0", "") or obj_params.get("sqrt"):
        inexact.append("reg_sqrt fits sqrt(label)")
    if linear is not None:
        inexact.append(
            "linear trees (linear_tree=True): predictions add each leaf's linear model, while "
            "attributions and staged gradients use the leaves' constant values"
        )

    parsed = [_tree_arrays(t, i, n_features) for i, t in enumerate(trees)]
    covers, counts = zip(*(_sums(a) for a in parsed))
    # categorical many-vs-many splits regularize with lambda_l2 + cat_l2
    cat_l2 = _pfloat(params, "cat_l2", 10.0)
    max_onehot = _pfloat(params, "max_cat_to_onehot", 4.0)
    feature_infos = header.get("feature_infos")
    n_cats = _category_counts(feature_infos, n_features)
    cat_feats = {int(a["feature"][i]) for a in parsed for i in np.flatnonzero(a["split_type"])}
    if cat_l2 > 0 and any(n_cats.get(f, max_onehot + 1) > max_onehot for f in cat_feats):
        inexact.append(
            f"categorical splits on features with more than max_cat_to_onehot categories use "
            f"lambda_l2 + cat_l2 (cat_l2={cat_l2:g})"
        )

    # ---- the intercept
    base = np.zeros(per_iter)
    sigma = float(obj_params.get("sigmoid", 1.0))
    spw = _pfloat(params, "scale_pos_weight", 1.0)
    unbal = params.get("is_unbalance", "0") not in ("0", "false", "")
    label_w = spw != 1.0 or unbal
    for k in range(per_iter):
        if not first_bias[k]:
            continue
        a = parsed[k]
        leaves = a["value"][a["n_in"] :]
        H = covers[k][a["n_in"] :]
        if objective in ("binary", "multiclassova") and label_w and a["n_in"]:

            def w_pos(p: float) -> float:
                return (spw * ((1 - p) / p if unbal and p < 0.5 else 1.0)) if p > 0 else spw

            def w_neg(p: float) -> float:
                return p / (1 - p) if unbal and p > 0.5 else 1.0

            init = _binary_init(leaves, H, lam, lrs[k], sigma, w_pos, w_neg)
            p0 = 1.0 / (1.0 + math.exp(-sigma * init))
            obj_params["pos_weight"] = w_pos(p0)
            obj_params["neg_weight"] = w_neg(p0)
        elif objective in _ZERO_GRAD_INIT or a["n_in"] == 0:
            init = _weighted_mean_init(leaves, H, lam)
        else:
            # the intercept is no zero-gradient point: leave it in the tree
            continue
        if not np.isfinite(init):
            continue
        base[k] = init
        a["value"][a["n_in"] :] = leaves - init
    if label_w and "pos_weight" not in obj_params:
        obj_params["pos_weight"] = spw
        if unbal:
            inexact.append("is_unbalance label weights could not be recovered")

    # ---- gains
    gains = []
    for i, a in enumerate(parsed):
        stored = a["stored_gain"]
        if not inexact and np.all(np.isfinite(covers[i])):
            gains.append(_recomputed_gain(a, covers[i], lrs[i], lam))
        else:
            gains.append(stored)

    warn_notes(notes, inexact)
    joined, cat_field = join_trees(parsed)

    kept = {
        k: params[k]
        for k in (
            "boosting",
            "learning_rate",
            "lambda_l2",
            "lambda_l1",
            "max_delta_step",
            "path_smooth",
            "bagging_fraction",
            "bagging_freq",
            "boost_from_average",
            "cat_l2",
            "max_cat_to_onehot",
            "scale_pos_weight",
            "is_unbalance",
        )
        if k in params
    }
    if linear is not None:
        kept["linear_leaves"] = linear
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
        cover=np.concatenate(covers),
        count=np.concatenate(counts),
        gain=np.concatenate(gains),
        leaf_id=cat_field("leaf_id"),
        cat_offsets=joined["cat_offsets"],
        cat_words=joined["cat_words"],
        tree_group=np.arange(n_trees) % per_iter,
        tree_iteration=np.arange(n_trees) // per_iter,
        learning_rate=lrs,
        tree_weight=np.ones(n_trees),
        base_margin=base,
        feature_names=tuple(names),
        named=named,
        reg_lambda=lam,
        objective=objective,
        objective_params=obj_params,
        decision_rule="float64 <=",
        float32_sum=False,
        source="lightgbm",
        source_version=str(header.get("version", "")),
        categories=_categories(pandas_categorical, feature_infos, n_features),
        params=kept,
        inexact=tuple(inexact),
    )


def _feature_infos(infos: Any, n_features: int) -> list[Any]:
    if isinstance(infos, str):
        return infos.split(" ")
    if isinstance(infos, dict):
        return list(infos.values())
    return []


def _category_counts(infos: Any, n_features: int) -> dict[int, int]:
    """Number of categories of each categorical feature (from feature_infos)."""
    out = {}
    for j, info in enumerate(_feature_infos(infos, n_features)[:n_features]):
        if isinstance(info, str) and info != "none" and not info.startswith("["):
            out[j] = len(info.split(":"))
        elif isinstance(info, dict) and info.get("values"):
            out[j] = len(info["values"])
    return out


def _categories(pandas_categorical: Any, infos: Any, n_features: int) -> dict[int, list]:
    """Training categories of pandas categorical columns, by feature index."""
    if not isinstance(pandas_categorical, list) or not pandas_categorical:
        return {}
    cat_feats = sorted(_category_counts(infos, n_features))
    if len(cat_feats) != len(pandas_categorical):
        return {}
    out = {}
    for j, cats in zip(cat_feats, pandas_categorical):
        if isinstance(cats, list):
            out[j] = [int(c) if isinstance(c, float) and c.is_integer() else c for c in cats]
    return out


# ---------------------------------------------------------------------- entry points
def from_string(
    text: str, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """Build a TreeEnsemble from a LightGBM model text (a saved model file or
    ``Booster.model_to_string()``).

    Parameters
    ----------
    text : str
        The model text.
    learning_rate, reg_lambda : float, optional
        Override the learning rate (per-tree ``shrinkage``) and ``lambda_l2`` read from the
        model.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    ValueError
        If the text is not a LightGBM model or is corrupt or truncated.
    NotImplementedError
        For options treeinner does not support (named in the message).
    """
    header, tree_kvs, tail = _split_text(text)
    sizes = header.get("tree_sizes")
    if sizes is not None and sizes.strip() and len(sizes.split()) != len(tree_kvs):
        raise _bad(
            f"the header lists {len(sizes.split())} trees but the file holds {len(tree_kvs)} "
            "(truncated file?)."
        )
    trees = [_parse_text_tree(kv, i) for i, kv in enumerate(tree_kvs)]
    params = _parse_params(tail)
    return _build(
        header,
        trees,
        params,
        _parse_pandas_categorical(tail),
        bool(header.get("average_output")),
        learning_rate,
        reg_lambda,
    )


def from_dump(
    doc: dict, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """Build a TreeEnsemble from LightGBM's ``Booster.dump_model()`` JSON document.

    The dump does not record ``lambda_l2`` (nor ``boost_from_average``): pass ``reg_lambda=``
    when it is not LightGBM's default 0, or read the model text file instead.

    Parameters
    ----------
    doc : dict
        The decoded JSON document.
    learning_rate, reg_lambda : float, optional
        Override the learning rate and ``lambda_l2``.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    ValueError
        If the document is not a LightGBM dump or is corrupt.
    NotImplementedError
        For options treeinner does not support (named in the message).
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("tree_info"), list):
        raise ValueError("Not a LightGBM dump_model() document (no 'tree_info' list).")
    trees = [_parse_dump_tree(info, i) for i, info in enumerate(doc["tree_info"])]
    header = {k: doc[k] for k in doc if k != "tree_info"}
    params = doc.get("parameters") if isinstance(doc.get("parameters"), dict) else {}
    params = {str(k): str(v) for k, v in params.items()}
    if not params and reg_lambda is None:
        params = {}
    return _build(
        header,
        trees,
        params,
        doc.get("pandas_categorical"),
        bool(doc.get("average_output", False)),
        learning_rate,
        reg_lambda,
    )


def from_booster(
    model: Any, *, learning_rate: float | None = None, reg_lambda: float | None = None
) -> TreeEnsemble:
    """Build a TreeEnsemble from a ``lightgbm.Booster`` or a fitted scikit-learn wrapper.

    Parameters
    ----------
    model : lightgbm.Booster, LGBMRegressor, LGBMClassifier or LGBMRanker
    learning_rate, reg_lambda : float, optional
        Override the values read from the model.

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    ValueError
        If a scikit-learn wrapper is not fitted.
    TypeError
        If the object is not a LightGBM model.
    """
    booster = model
    if not hasattr(model, "model_to_string"):
        if not hasattr(type(model), "booster_"):
            raise TypeError(f"{type(model).__name__} is not a LightGBM Booster or model.")
        try:
            booster = model.booster_
        except Exception as e:  # LGBMNotFittedError / NotFittedError
            raise ValueError(f"The {type(model).__name__} is not fitted: {e}") from e
    text = booster.model_to_string()
    return from_string(text, learning_rate=learning_rate, reg_lambda=reg_lambda)


def kernel_objective(
    name: str, params: dict, n_outputs: int, prm: np.ndarray
) -> tuple[int, np.ndarray]:
    """The kernel code and parameter vector of a LightGBM objective (LightGBM's conventions).

    Parameters
    ----------
    name : str
        The objective as stored in the ensemble (canonical LightGBM name).
    params : dict
        The ensemble's ``objective_params``.
    n_outputs : int
        Number of outputs.
    prm : ndarray of float64
        The parameter vector with defaults filled in; modified and returned.

    Returns
    -------
    (int, ndarray)

    Raises
    ------
    NotImplementedError
        For objectives supported for prediction only (named in the message).
    """
    prm = prm.copy()
    prm[O.P_MIN_HESS] = 0.0
    prm[O.P_SIGMOID] = float(params.get("sigmoid", 1.0))
    prm[O.P_POS_WEIGHT] = float(params.get("pos_weight", 1.0))
    if name in ("binary", "multiclassova") and float(params.get("neg_weight", 1.0)) != 1.0:
        raise NotImplementedError(
            "LightGBM is_unbalance with a majority of positive labels weights the negative "
            "labels; that objective is supported for prediction only."
        )
    if name == "regression":
        if params.get("sqrt"):
            raise NotImplementedError(
                "LightGBM regression with reg_sqrt=True is supported for prediction only."
            )
        return O.SQUARED, prm
    if name == "binary":
        return O.LOGISTIC, prm
    if name == "cross_entropy":
        prm[O.P_SIGMOID] = 1.0
        prm[O.P_POS_WEIGHT] = 1.0
        return O.LOGISTIC, prm
    if name == "multiclass":
        if n_outputs < 2:
            raise ValueError("A multiclass model needs at least two classes.")
        prm[O.P_HESS_SCALE] = n_outputs / (n_outputs - 1.0)
        return O.SOFTMAX, prm
    if name == "multiclassova":
        return O.OVA, prm
    if name == "poisson":
        prm[O.P_MAX_DELTA] = float(params.get("poisson_max_delta_step", 0.7))
        return O.POISSON, prm
    if name == "gamma":
        return O.GAMMA, prm
    if name == "tweedie":
        prm[O.P_TWEEDIE] = float(params.get("tweedie_variance_power", 1.5))
        return O.TWEEDIE, prm
    raise NotImplementedError(
        f"LightGBM objective {name!r} has no per-row gradient here; it is supported for "
        "prediction only."
    )
